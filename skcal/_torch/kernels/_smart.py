"""SMART: a temperature per sample from the standardised logit gap.

``T = softplus(MLP(g_hat)) + t_min`` with ``g = z_(1) - z_(2)`` and
``g_hat = (g - mean) / (std + 1e-8)``; calibrated logits ``z / T``.

Training needs, for every row and every epoch, quantities of
``p = softmax(z / T)`` that depend on the whole row. They all derive from
the log-partition ``log S_i(beta) = log sum_j exp(-beta d_ij)`` of the gaps
to the top logit ``d_ij = z_i,max - z_ij >= 0`` (``beta = 1 / T``):

* top-label confidence ``exp(-log S)`` (``d = 0`` at the argmax);
* ``log p_y = -beta d_iy - log S``;
* ``sum_k p_k^2 = exp(log S(2 beta) - 2 log S(beta))``.

:class:`_LogPartition` evaluates ``log S`` and its derivative
``-sum_j e_ij d_ij / S_i`` in one streaming pass over row chunks, in the
dtype of ``d`` (float32) with float64 results, without building an autograd
graph over the ``n x C`` matrix.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from .._convert import to_numpy, to_tensor
from .._optim import minimize_adam, newton_root_1d
from .._random import make_generator
from ._soft_ece import soft_binned_ece

#: ``g_hat = (g - mean) / (std + GAP_EPS)`` (SMART's Algorithm 1).
GAP_EPS = 1e-8
#: Floor of the exponents ``-beta d`` in the streaming pass.
_MIN_EXPONENT = -80.0
#: Elements per chunk of the streaming pass on the CPU (fits in cache).
_CPU_CHUNK = 1 << 18
#: Elements per chunk on an accelerator.
_GPU_CHUNK = 1 << 26


def logit_gaps(z: torch.Tensor) -> torch.Tensor:
    """``z_(1) - z_(2)``, the margin between the two largest logits."""
    top2 = torch.topk(z, 2, dim=1).values
    return top2[:, 0] - top2[:, 1]


def smart_temperature(layers, g_hat: torch.Tensor, t_min: float) -> torch.Tensor:
    """Temperature of each row: ``softplus(MLP(g_hat)) + t_min``."""
    h = g_hat[:, None]
    for i, (W, b) in enumerate(layers):
        h = h @ W + b
        if i < len(layers) - 1:
            h = torch.relu(h)
    return torch.nn.functional.softplus(h.squeeze(1)) + t_min


def _as_layers(coefs, intercepts, device):
    return [
        (to_tensor(W, device, torch.float64), to_tensor(b, device, torch.float64))
        for W, b in zip(coefs, intercepts)
    ]


def _predict_temperature(state, z: torch.Tensor) -> torch.Tensor:
    """``T`` of each row of ``z``; ``state`` as in :func:`smart_predict_logits`."""
    coefs, intercepts, gap_mean, gap_std, gap_range, t_min = state
    gaps = logit_gaps(z)
    if gap_range is not None:
        gaps = gaps.clamp(gap_range[0], gap_range[1])
    g_hat = (gaps - gap_mean) / (gap_std + GAP_EPS)
    with torch.no_grad():
        layers = _as_layers(coefs, intercepts, z.device)
        return smart_temperature(layers, g_hat, t_min)


def smart_predict_temperature(state, logits, device) -> np.ndarray:
    """Temperature of each row of ``logits`` as float64 numpy."""
    return to_numpy(
        _predict_temperature(state, to_tensor(logits, device, torch.float64))
    )


def smart_predict_logits(state, logits, device) -> np.ndarray:
    """Calibrated logits ``z / T(g_hat)`` as float64 numpy.

    ``state = (coefs, intercepts, gap_mean, gap_std, gap_range, t_min)``;
    gaps are clipped to ``gap_range`` (``(low, high)``, or None) first.
    """
    z = to_tensor(logits, device, torch.float64)
    return to_numpy(z / _predict_temperature(state, z)[:, None])


def _row_moments(beta: torch.Tensor, d: torch.Tensor, order: int):
    """Per row ``log S``, and the mean (and variance) of ``d`` under ``e / S``.

    ``e_ij = exp(-beta_i d_ij)``, ``S_i = sum_j e_ij``. One streaming pass over
    row chunks in the dtype of ``d``; results in float64. ``order`` is 1
    (mean) or 2 (mean and variance).
    """
    n, c = d.shape
    per_chunk = _CPU_CHUNK if d.device.type == "cpu" else _GPU_CHUNK
    rows = max(1, per_chunk // max(c, 1))
    out = torch.empty(order + 1, n, dtype=d.dtype, device=d.device)
    neg_beta = (-beta.detach()).to(d.dtype)[:, None]
    buf = torch.empty(min(rows, n), c, dtype=d.dtype, device=d.device)
    for start in range(0, n, rows):
        stop = min(start + rows, n)
        dd, e = d[start:stop], buf[: stop - start]
        torch.mul(dd, neg_beta[start:stop], out=e)
        # exp(-80) ~ 2e-35 is negligible next to S >= 1 but still a normal
        # float32: underflowing to subnormals makes exp ~10x slower on CPUs
        e.clamp_min_(_MIN_EXPONENT)
        e.exp_()
        out[0, start:stop] = e.sum(dim=1)
        e.mul_(dd)
        out[1, start:stop] = e.sum(dim=1)
        if order == 2:
            out[2, start:stop] = e.mul_(dd).sum(dim=1)
    out = out.to(torch.float64)
    s = out[0]
    mean = out[1] / s
    if order == 1:
        return s.log(), mean
    return s.log(), mean, (out[2] / s - mean * mean).clamp_min(0.0)


class _LogPartition(torch.autograd.Function):
    """``log sum_j exp(-beta_i d_ij)`` per row; differentiable in ``beta`` only."""

    @staticmethod
    def forward(ctx, beta: torch.Tensor, d: torch.Tensor) -> torch.Tensor:
        log_s, mean_d = _row_moments(beta, d, 1)
        ctx.save_for_backward(mean_d)
        return log_s

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        (mean_d,) = ctx.saved_tensors
        return -grad * mean_d, None


def _nll_temperature(d, d_true, w) -> float:
    """NLL-optimal global temperature (Newton on ``beta``), for the start."""
    w_sum = float(w.sum())

    def derivatives(beta: float):
        b = torch.full((d.shape[0],), beta, dtype=torch.float64, device=d.device)
        _, mean, var = _row_moments(b, d, 2)
        return float(w @ (d_true - mean)) / w_sum, float(w @ var) / w_sum

    result = newton_root_1d(derivatives, 1.0, 1e-3, 1e3, xtol=1e-6, max_iter=50)
    return 1.0 / result.x


def _init_layers(hidden: tuple, t0: float, t_min: float, gen, device):
    """``nn.Linear``-style hidden layers; the output layer starts at ``T = t0``."""
    sizes = [1, *hidden, 1]
    layers = []
    for fan_in, fan_out in zip(sizes[:-1], sizes[1:]):
        bound = 1.0 / math.sqrt(fan_in)
        W = torch.rand(fan_in, fan_out, generator=gen, dtype=torch.float64) * 2 - 1
        b = torch.rand(fan_out, generator=gen, dtype=torch.float64) * 2 - 1
        layers.append([(W * bound).to(device), (b * bound).to(device)])
    # W_out = 0 and softplus(b_out) + t_min = t0 (t0 > t_min)
    layers[-1][0].zero_()
    x = t0 - t_min  # inverse softplus, stable for large x
    layers[-1][1].fill_(x + math.log(-math.expm1(-x)))
    return layers


def fit_smart(
    logits: np.ndarray,
    y_index: np.ndarray,
    sample_weight: np.ndarray,
    *,
    hidden: tuple,
    t_min: float,
    loss: str,
    n_bins: int,
    alpha: float,
    q: float,
    smoothing: float,
    lr: float,
    max_epochs: int,
    patience: int,
    tol: float,
    seed: int,
    device: torch.device,
    verbose: int = 0,
):
    """Fit the temperature network with full-batch Adam.

    Returns a dict with ``coefs``, ``intercepts`` (numpy), ``gap_mean``,
    ``gap_std``, ``best_epoch``, ``n_epochs`` and ``loss_curve``.
    """
    gen = make_generator(seed, "cpu")
    z = to_tensor(logits, device, torch.float64)
    y = to_tensor(y_index, device, torch.int64)
    w = to_tensor(sample_weight, device, torch.float64)
    w_sum = w.sum()

    top2 = torch.topk(z, 2, dim=1).values
    gaps = top2[:, 0] - top2[:, 1]
    gap_mean = (w @ gaps) / w_sum
    dof = w_sum - 1.0 if float(w_sum) > 1.0 else w_sum
    gap_std = torch.sqrt((w @ (gaps - gap_mean) ** 2) / dof)
    if float(gap_std) == 0.0:  # all gaps equal: no scale to standardise by
        gap_std = torch.ones_like(gap_std)
    positive = gaps[w > 0]
    g_hat = (gaps - gap_mean) / (gap_std + GAP_EPS)

    top = torch.argmax(z, dim=1)
    correct = (top == y).to(torch.float64)
    d = (top2[:, :1] - z).to(torch.float32)
    d_true = d.gather(1, y[:, None]).squeeze(1).to(torch.float64)
    del z

    # the start, kept clear of the floor so softplus has a usable gradient
    t0 = max(_nll_temperature(d, d_true, w), 2.0 * t_min)
    layers = _init_layers(tuple(hidden), t0, t_min, gen, device)
    params = [t.requires_grad_(True) for layer in layers for t in layer]

    def objective() -> torch.Tensor:
        beta = 1.0 / smart_temperature(layers, g_hat, t_min)
        log_s = _LogPartition.apply(beta, d)
        if loss == "soft_ece":
            return soft_binned_ece(
                torch.exp(-log_s),
                correct,
                w,
                n_bins=n_bins,
                sharpness=alpha,
                power=q,
                eps=1e-6,
                eps_mode="add",
                smoothing=smoothing,
            )
        if loss == "mse":
            per_row = (torch.exp(-log_s) - correct) ** 2
        elif loss == "nll":
            per_row = beta * d_true + log_s
        else:  # brier: sum_k p_k^2 - 2 p_y + 1
            sq = torch.exp(_LogPartition.apply(2.0 * beta, d) - 2.0 * log_s)
            per_row = sq - 2.0 * torch.exp(-beta * d_true - log_s) + 1.0
        return (w @ per_row) / w_sum

    best_epoch, n_epochs, curve = minimize_adam(
        objective,
        params,
        max_epochs=max_epochs,
        lr=lr,
        patience=patience,
        tol=tol,
        verbose=verbose,
    )
    return {
        "coefs": [to_numpy(W) for W, _ in layers],
        "intercepts": [to_numpy(b) for _, b in layers],
        "gap_mean": float(gap_mean),
        "gap_std": float(gap_std),
        "gap_range": (float(positive.min()), float(positive.max())),
        "best_epoch": best_epoch,
        "n_epochs": n_epochs,
        "loss_curve": curve,
        "temperature_init": t0,
    }
