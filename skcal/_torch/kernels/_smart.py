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

:func:`_row_moments` evaluates ``log S`` and its derivative
``-sum_j e_ij d_ij / S_i`` in one streaming pass over row chunks, in the
dtype of ``d`` (float32) with float64 results, without building an autograd
graph over the ``n x C`` matrix. With many classes on the CPU that pass is
most of an epoch's cost, and :class:`_InterpolatedLogPartition` replaces it
by interpolation between exactly summed nodes of each row's ``log S(beta)``:
a row's ``beta`` wanders over a short range during training, so each row is
summed at about 15 nodes instead of at every epoch.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np
import torch

from .._convert import to_numpy, to_tensor
from .._device import resolve_device
from .._optim import minimize_adam
from .._options import TrainingOptions
from .._random import make_generator
from ._common import init_mlp, relu_mlp
from ._soft_ece import soft_binned_ece
from ._softmax import tempered_softmax_into, top_two

#: ``g_hat = (g - mean) / (std + GAP_EPS)`` (SMART's Algorithm 1).
GAP_EPS = 1e-8
#: Floor of the exponents ``-beta d`` in the streaming pass.
_MIN_EXPONENT = -80.0
#: Elements per chunk of the streaming pass on the CPU (fits in cache).
_CPU_CHUNK = 1 << 18
#: Elements per chunk on an accelerator.
_GPU_CHUNK = 1 << 26
#: Interpolate ``log S`` between cached nodes (CPU only) from this many
#: classes on; below it, and on accelerators, every epoch sums exactly.
_INTERP_MIN_CLASSES = 256
#: Node spacing in ``log(beta)``, most nodes kept either side of the start
#: (fewer when the node table would outgrow the float32 gaps), and the largest
#: accepted error estimate of an interpolated ``log S``.
_NODE_STEP, _NODE_SPAN, _INTERP_TOL = 0.05, 48, 1e-7


def logit_gaps(z: torch.Tensor) -> torch.Tensor:
    """``z_(1) - z_(2)``, the margin between the two largest logits."""
    first, second = top_two(z)
    return first - second


def smart_temperature(layers, g_hat: torch.Tensor, t_min: float) -> torch.Tensor:
    """Temperature of each row: ``softplus(MLP(g_hat)) + t_min``."""
    h = relu_mlp(layers, g_hat[:, None])
    return torch.nn.functional.softplus(h.squeeze(1)) + t_min


def standardize_gaps(gaps: torch.Tensor, gap_mean: float, gap_std: float):
    """``g_hat = (g - mean) / (std + GAP_EPS)``, the network's input."""
    return (gaps - gap_mean) / (gap_std + GAP_EPS)


def _row_temperatures(
    z: torch.Tensor,
    *,
    coefs,
    intercepts,
    gap_mean: float,
    gap_std: float,
    t_min: float,
    gap_range,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Row maxima of ``z`` and the temperature of each row (see below)."""
    first, second = top_two(z)
    fit = dict(coefs=coefs, intercepts=intercepts, gap_mean=gap_mean)
    fit.update(gap_std=gap_std, t_min=t_min, gap_range=gap_range)
    return first, _gap_temperatures(first - second, **fit)


def _gap_temperatures(
    gaps: torch.Tensor, *, coefs, intercepts, gap_mean, gap_std, t_min, gap_range
) -> torch.Tensor:
    """The temperature of each row from its logit gap (float64 tensor)."""
    if gap_range is not None:
        gaps = gaps.clamp(gap_range[0], gap_range[1])
    g_hat = standardize_gaps(gaps, gap_mean, gap_std)
    layers = [
        (
            to_tensor(W, gaps.device, torch.float64),
            to_tensor(b, gaps.device, torch.float64),
        )
        for W, b in zip(coefs, intercepts)
    ]
    with torch.no_grad():
        return smart_temperature(layers, g_hat, t_min)


def smart_gap_temperature(gaps: np.ndarray, *, device, **fit) -> np.ndarray:
    """Temperature of each row from its logit gap ``z_(1) - z_(2)`` (numpy
    float64), for scores whose gaps are computed elsewhere (a top-k's rest
    model); ``fit`` as in :func:`smart_predict_temperature`."""
    g = to_tensor(gaps, resolve_device(device), torch.float64)
    return to_numpy(_gap_temperatures(g, **fit))


def smart_predict_temperature(logits: np.ndarray, *, device, **fit) -> np.ndarray:
    """Temperature of each row of ``logits`` as float64 numpy.

    ``fit`` holds ``coefs``, ``intercepts``, ``gap_mean`` and ``gap_std``
    of a :class:`SmartFit`, ``t_min``, and ``gap_range`` (``(low, high)``:
    gaps are clipped to it before they are standardised; None: not clipped).
    ``device``: {"auto", "cpu", "cuda", "cuda:N"} or a ``torch.device``.
    """
    z = to_tensor(logits, resolve_device(device), torch.float64)
    return to_numpy(_row_temperatures(z, **fit)[1])


def smart_predict_proba(logits: np.ndarray, *, device, **fit) -> np.ndarray:
    """``softmax(logits / T)`` of each row as a new float64 numpy array.

    ``fit`` as in :func:`smart_predict_temperature`. On the CPU the row
    maxima found for the gaps shift the logits in the blocked softmax of
    :func:`tempered_softmax_into`: no shifted or divided copy of the matrix.
    """
    z = to_tensor(logits, resolve_device(device), torch.float64)
    first, temperature = _row_temperatures(z, **fit)
    if z.device.type == "cpu":
        out = np.empty(z.shape)
        return tempered_softmax_into(logits, first.numpy(), temperature.numpy(), out)
    shifted = (z - first[:, None]) / temperature[:, None]
    return to_numpy(torch.softmax(shifted, dim=1))


def _row_moments(beta: torch.Tensor, d: torch.Tensor, order: int, rows=None, mult=None):
    """Per row ``log S`` and the first ``order`` cumulants of ``d`` under ``e / S``.

    ``e_ij = exp(-beta_i d_ij)``, ``S_i = sum_j e_ij``. One streaming pass over
    row chunks in the dtype of ``d``; results in float64. ``order`` is 1
    (mean), 2 (and variance) or 3 (and third cumulant). ``rows`` (int64
    tensor) evaluates only those rows of ``d``, ``beta[k]`` for row
    ``rows[k]``, gathering one chunk at a time. ``mult`` (like ``d``, or
    None: all 1) counts column ``j`` of a row ``mult_ij`` times, ``e_ij =
    mult_ij exp(-beta_i d_ij)``: a top-k's rest model, whose last column
    stands for its unlisted classes.
    """
    n = d.shape[0] if rows is None else rows.shape[0]
    c = d.shape[1]
    per_chunk = _CPU_CHUNK if d.device.type == "cpu" else _GPU_CHUNK
    step = max(1, per_chunk // max(c, 1))
    out = torch.empty(order + 1, n, dtype=d.dtype, device=d.device)
    neg_beta = (-beta.detach()).to(d.dtype)[:, None]
    buf = torch.empty(min(step, n), c, dtype=d.dtype, device=d.device)
    for start in range(0, n, step):
        stop = min(start + step, n)
        dd = d[start:stop] if rows is None else d[rows[start:stop]]
        e = buf[: stop - start]
        torch.mul(dd, neg_beta[start:stop], out=e)
        # exp(-80) ~ 2e-35 is negligible next to S >= 1 but still a normal
        # float32: underflowing to subnormals makes exp ~10x slower on CPUs
        e.clamp_min_(_MIN_EXPONENT)
        e.exp_()
        if mult is not None:
            e.mul_(mult[start:stop] if rows is None else mult[rows[start:stop]])
        out[0, start:stop] = e.sum(dim=1)
        for k in range(1, order + 1):
            out[k, start:stop] = e.mul_(dd).sum(dim=1)
    out = out.to(torch.float64)
    s = out[0]
    moments = [m / s for m in out[1:]]
    cumulants = [moments[0]]
    if order >= 2:
        mean, raw2 = moments[0], moments[1]
        cumulants.append((raw2 - mean * mean).clamp_min(0.0))
    if order == 3:
        cumulants.append(moments[2] - 3.0 * mean * raw2 + 2.0 * mean**3)
    return (s.log(), *cumulants)


def _exact_log_partition(beta: torch.Tensor, d: torch.Tensor, mult=None):
    """``log S`` of each row and its derivative in ``beta`` (``-mean``)."""
    log_s, mean = _row_moments(beta, d, 1, mult=mult)
    return log_s, -mean


def _hermite_matrices():
    """Coefficient map and error functionals of Hermite interpolation on [0, 1].

    ``data`` holds ``p(0)`` and the first three derivatives at 0, then the
    same at 1. ``data @ coef`` gives the coefficients (``x^0 .. x^7``) of the
    septic with those values and derivatives. ``data @ err`` gives ``D0`` and
    ``D1``: the third derivatives at 0 and at 1 minus those of the quintic
    that matches only the value and first two derivatives. The two
    interpolants differ by ``x^3 (1 - x)^3 (a + b x)`` with ``a = D0 / 6``
    and ``a + b = -D1 / 6``, so by at most ``max(|D0|, |D1|) / 384`` on
    [0, 1].
    """

    def conditions(m: int) -> np.ndarray:
        # rows: derivative j < m at 0, then at 1; columns: x^i
        a = np.zeros((2 * m, 2 * m))
        for j in range(m):
            a[j, j] = math.factorial(j)
            for i in range(j, 2 * m):
                a[m + j, i] = math.factorial(i) / math.factorial(i - j)
        return a

    coef = np.linalg.inv(conditions(4)).T
    quintic = np.linalg.inv(conditions(3)).T  # data5 @ quintic: x^0 .. x^5
    err = np.zeros((8, 2))
    err[3, 0] = err[7, 1] = 1.0
    subset = [0, 1, 2, 4, 5, 6]
    # third derivative of the quintic at 0 (6 c3) and at 1 (6 c3 + 24 c4 + 60 c5)
    err[subset, 0] -= 6.0 * quintic[:, 3]
    err[subset, 1] -= quintic[:, 3:] @ np.array([6.0, 24.0, 60.0])
    return coef, err


_HERMITE_COEF, _HERMITE_ERR = _hermite_matrices()


class _InterpolatedLogPartition:
    """``log S_i(beta)`` by Hermite interpolation between exact nodes.

    ``log S_i`` is a smooth function of one variable per row, and during
    training each row's ``beta`` moves back and forth over a short range.
    Nodes ``beta_k = exp(k * step)`` are evaluated exactly (the value and
    three derivatives, ``-kappa_1``, ``kappa_2`` and ``-kappa_3`` of the gaps)
    for a row only when its ``beta`` first enters a cell next to them, and
    kept; between nodes the septic Hermite interpolant is used. Its error is
    estimated by its largest difference to the quintic over the cell (which
    estimates the quintic's error; the septic's is far below it). A row
    whose estimate exceeds
    ``tol``, or whose ``beta`` is beyond ``span`` nodes either side of
    ``beta0``, is summed exactly.
    """

    def __init__(self, d, beta0, *, step, span, tol, mult=None):
        self.d, self.step, self.tol, self.mult = d, step, tol, mult
        self.base = math.floor(math.log(beta0) / step) - span
        self.n_nodes, n = 2 * span + 2, d.shape[0]
        # node-major, so memory is touched only for nodes that are used;
        # entry (k, i) of both lives at flat index k * n + i
        self.values = torch.empty(
            self.n_nodes * n, 4, dtype=torch.float64, device=d.device
        )
        self.known = torch.zeros(self.n_nodes * n, dtype=torch.bool, device=d.device)
        self.rows = torch.arange(n, device=d.device)
        # (10, 8): septic coefficients x^0 .. x^7, then the two error terms
        self.maps = torch.as_tensor(
            np.hstack([_HERMITE_COEF, _HERMITE_ERR]).T.copy(), device=d.device
        )
        # row evaluations summed exactly: at nodes, and instead of interpolating
        self.n_filled = self.n_fallback = 0

    def _node_beta(self, node: torch.Tensor) -> torch.Tensor:
        return torch.exp((node + self.base).to(torch.float64) * self.step)

    def _fill(self, flat: torch.Tensor) -> None:
        n = self.rows.shape[0]
        node, rows = flat // n, flat % n
        log_s, k1, k2, k3 = _row_moments(
            self._node_beta(node), self.d, 3, rows, self.mult
        )
        self.values[flat] = torch.stack([log_s, -k1, k2, -k3], dim=1)
        self.known[flat] = True
        self.n_filled += rows.shape[0]

    def __call__(self, beta: torch.Tensor):
        beta = beta.detach().to(torch.float64)
        n = self.rows.shape[0]
        cell = torch.floor(beta.log() / self.step).to(torch.int64) - self.base
        inside = (cell >= 0) & (cell < self.n_nodes - 1)
        lo = cell.clamp_(0, self.n_nodes - 2)
        flat = lo * n + self.rows
        flat = torch.cat([flat, flat + n])  # the cell's two nodes
        need = ~self.known.index_select(0, flat) & inside.repeat(2)
        if bool(need.any()):
            self._fill(flat[need])
        b_lo = self._node_beta(lo)
        h = b_lo * math.expm1(self.step)
        x = (beta - b_lo) / h
        # (8, n): value and three derivatives at each node, in units of h
        data = self.values.index_select(0, flat).view(2, n, 4)
        data[:, :, 1] *= h
        data[:, :, 2] *= h * h
        data[:, :, 3] *= h * h * h
        out = self.maps @ data.permute(0, 2, 1).reshape(8, n)
        value, slope = out[7].clone(), 7.0 * out[7]
        for i in range(6, -1, -1):
            value.mul_(x).add_(out[i])
            if i > 0:
                slope.mul_(x).add_(out[i], alpha=i)
        slope /= h
        estimate = torch.maximum(out[8].abs(), out[9].abs()) / 384.0
        exact = ~(inside & (estimate <= self.tol))  # NaN estimates included
        if bool(exact.any()):
            rows = self.rows[exact]
            log_s, mean = _row_moments(beta[exact], self.d, 1, rows, self.mult)
            value[exact], slope[exact] = log_s, -mean
            self.n_fallback += rows.shape[0]
        return value, slope


class _LogPartition(torch.autograd.Function):
    """``log S`` per row from ``evaluate(beta) -> (log S, d log S / d beta)``.

    Differentiable in ``beta`` only.
    """

    @staticmethod
    def forward(ctx, beta: torch.Tensor, evaluate) -> torch.Tensor:
        log_s, slope = evaluate(beta)
        ctx.save_for_backward(slope.to(beta.dtype))
        return log_s.to(beta.dtype)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        (slope,) = ctx.saved_tensors
        return grad * slope, None


def _init_layers(hidden: tuple, t0: float, t_min: float, gen, device) -> list:
    """``nn.Linear``-style hidden layers; the output layer starts at ``T = t0``."""
    sizes = [1, *hidden, 1]
    # W_out = 0 and softplus(b_out) + t_min = t0 (t0 > t_min)
    x = t0 - t_min  # inverse softplus, stable for large x
    return init_mlp(sizes, gen, device, output_bias=x + math.log(-math.expm1(-x)))


@dataclass(frozen=True)
class SmartFit:
    """The trained temperature network (numpy, CPU) and its training run.

    Attributes
    ----------
    coefs : list of ndarray
        Weight matrices, input layer first; layer ``i`` maps ``h`` to
        ``h @ coefs[i] + intercepts[i]`` (shape ``(fan_in, fan_out)``).
    intercepts : list of ndarray
        Bias vectors, input layer first.
    gap_mean : float
        Weighted mean of the logit gaps of the training rows.
    gap_std : float
        Their weighted ``ddof=0`` standard deviation; 1 when they are all
        equal.
    gap_range : tuple of float
        Smallest and largest gap of the rows with positive weight.
    temperature_init : float
        Temperature the network starts at: ``t0``, at least ``2 t_min``.
    best_epoch : int
        Adam steps taken before the kept parameters (0: the initial ones).
    n_epochs : int
        Adam steps taken.
    loss_curve : list of float
        Training loss at each epoch.
    validation_curve : list of float or None
        Objective on the held-out rows at each epoch; None without them.
    """

    coefs: list
    intercepts: list
    gap_mean: float
    gap_std: float
    gap_range: tuple
    temperature_init: float
    best_epoch: int
    n_epochs: int
    loss_curve: list
    validation_curve: list | None = None


def _gap_moments(gaps: torch.Tensor, w: torch.Tensor) -> tuple[float, float]:
    """Weighted mean and ``ddof=0`` standard deviation (1 if zero) of ``gaps``.

    ``ddof=0``: unchanged when every weight is scaled, and equal for integer
    weights and repeated rows (the reference's unbiased std differs by
    ``sqrt(n / (n - 1))``, a rescaling of the input that the first layer
    absorbs).
    """
    w_sum = w.sum()
    gap_mean = (w @ gaps) / w_sum
    gap_std = torch.sqrt((w @ (gaps - gap_mean) ** 2) / w_sum)
    if float(gap_std) == 0.0:  # all gaps equal: no scale to standardise by
        return float(gap_mean), 1.0
    return float(gap_mean), float(gap_std)


def _make_log_partition(
    d: torch.Tensor, t0: float, interpolate: bool | None, mult=None
):
    """``beta -> (log S, d log S / d beta)`` of the rows of ``d`` (columns
    counted ``mult`` times, see :func:`_row_moments`).

    Interpolated (:class:`_InterpolatedLogPartition`, around ``beta = 1 /
    t0``) when ``interpolate`` is True, or when it is None on the CPU with at
    least ``_INTERP_MIN_CLASSES`` columns; summed exactly otherwise.
    """
    if interpolate is None:
        interpolate = d.device.type == "cpu" and d.shape[1] >= _INTERP_MIN_CLASSES
    if not interpolate:
        return functools.partial(_exact_log_partition, d=d, mult=mult)
    return _InterpolatedLogPartition(
        d,
        1.0 / t0,
        mult=mult,
        step=_NODE_STEP,
        # (2 span + 2) nodes of 4 float64 per row: at most the 4 C bytes of a
        # row of gaps
        span=max(1, min(_NODE_SPAN, (d.shape[1] // 8 - 2) // 2)),
        tol=_INTERP_TOL,
    )


def _make_objective(
    layers,
    log_partition,
    *,
    g_hat: torch.Tensor,
    d_true: torch.Tensor,
    correct: torch.Tensor,
    w: torch.Tensor,
    t_min: float,
    loss: str,
    soft_ece: dict,
):
    """The training loss of the current ``layers``, a closure for Adam.

    It runs in float32 (the parameters and Adam stay in float64): twice as
    fast as float64 on n-sized arrays, and the confidences come from float32
    row sums anyway. ``soft_ece`` holds ``n_bins``, ``sharpness``, ``power``
    and ``smoothing`` of :func:`soft_binned_ece`.
    """
    f32 = torch.float32
    g_hat, w, correct = g_hat.to(f32), w.to(f32), correct.to(f32)
    w_sum = w.sum()

    def objective() -> torch.Tensor:
        layers32 = [(W.to(f32), b.to(f32)) for W, b in layers]
        beta = 1.0 / smart_temperature(layers32, g_hat, t_min)
        log_s = _LogPartition.apply(beta, log_partition)
        if loss == "soft_ece":
            return soft_binned_ece(
                torch.exp(-log_s), correct, w, eps=1e-6, eps_mode="add", **soft_ece
            )
        if loss == "mse":
            per_row = (torch.exp(-log_s) - correct) ** 2
        elif loss == "nll":
            per_row = beta * d_true + log_s
        else:  # brier: sum_k p_k^2 - 2 p_y + 1
            sq = torch.exp(_LogPartition.apply(2.0 * beta, log_partition) - 2.0 * log_s)
            per_row = sq - 2.0 * torch.exp(-beta * d_true - log_s) + 1.0
        return (w @ per_row) / w_sum

    return objective


@dataclass(frozen=True)
class _Rows:
    """The per-row tensors that a SMART epoch reads, for one part of the rows."""

    d: torch.Tensor  # gaps to the top logit, float32 (n, C)
    d_true: torch.Tensor  # the label's gap
    gaps: torch.Tensor  # z_(1) - z_(2), float64
    correct: torch.Tensor  # whether the top class is the label
    w: torch.Tensor
    mult: torch.Tensor | None = None  # times each column counts (None: 1)

    def subset(self, mask: torch.Tensor) -> _Rows:
        mult = None if self.mult is None else self.mult[mask]
        return _Rows(
            self.d[mask], self.d_true[mask], self.gaps[mask], self.correct[mask],
            self.w[mask], mult,
        )  # fmt: skip

    def split(self, val_idx, device):
        """``(train, held)`` by the held-out row indices ``val_idx`` (held:
        None without them)."""
        if val_idx is None:
            return self, None
        is_val = torch.zeros(self.d.shape[0], dtype=torch.bool, device=device)
        is_val[to_tensor(val_idx, device, torch.int64)] = True
        return self.subset(~is_val), self.subset(is_val)


def _training_rows(logits, y_index, sample_weight, val_idx, device):
    """``(train, held)``: the rows' tensors, split by ``val_idx`` (held: None
    without it)."""
    z = to_tensor(logits, device, torch.float64)
    y = to_tensor(y_index, device, torch.int64)
    first, second = top_two(z)
    # gaps to the top logit, float32: the per-epoch work reads only these
    d = (first[:, None] - z).to(torch.float32)
    rows = _Rows(
        d=d,
        d_true=d.gather(1, y[:, None]).squeeze(1),
        gaps=first - second,
        correct=torch.argmax(z, dim=1) == y,
        w=to_tensor(sample_weight, device, torch.float64),
    )
    del z, first, second
    return rows.split(val_idx, device)


def _topk_training_rows(columns, mult, label, gaps, correct, sample_weight, device):
    """The :class:`_Rows` of a top-k's rest model: ``columns`` (n, k + 1)
    its listed log-probabilities then the unlisted share, each counted
    ``mult`` times (0: padding, or no unlisted mass), ``label`` each row's
    label log-probability, ``gaps`` its ``z_(1) - z_(2)`` and ``correct``
    whether its argmax is the label."""
    z = to_tensor(columns, device, torch.float64)
    m = to_tensor(mult, device, torch.float64)
    counted = m > 0
    first = torch.where(counted, z, -torch.inf).max(dim=1).values
    # columns counted 0 times get a gap of 0: exp(0) * 0 adds nothing
    d = torch.where(counted, first[:, None] - z, 0.0)
    return _Rows(
        d=d.to(torch.float32),
        d_true=(first - to_tensor(label, device, torch.float64)).to(torch.float32),
        gaps=to_tensor(gaps, device, torch.float64),
        correct=to_tensor(correct, device, torch.bool),
        w=to_tensor(sample_weight, device, torch.float64),
        mult=m.to(torch.float32),
    )


def _held_out_monitor(objective, held_objective, train_curve: list):
    """The loss Adam sees when rows are held out.

    Its value is the held-out objective, which early stopping watches and
    whose best parameters are kept; its gradient is the training loss's,
    whose values are appended to ``train_curve``.
    """

    def monitored() -> torch.Tensor:
        train = objective()
        train_curve.append(float(train.detach()))
        with torch.no_grad():
            value = held_objective()
        return train + (value - train.detach())

    return monitored


def fit_smart(
    logits: np.ndarray,
    y_index: np.ndarray,
    sample_weight: np.ndarray,
    *,
    options: TrainingOptions,
    val_idx: np.ndarray | None = None,
    interpolate: bool | None = None,
    **fit,
) -> SmartFit:
    """Fit the temperature network with full-batch Adam.

    The network starts at the constant temperature ``t0`` (the calibrator
    passes temperature scaling's, fitted on the training rows; at least
    ``2 t_min``, so that softplus has a usable gradient); ``options.seed``
    draws its hidden layers. ``options.max_iter=0`` keeps that constant
    network; ``tol`` is the smallest improvement that resets the patience
    (:func:`~skcal._torch.minimize_adam`).
    ``val_idx`` (row indices, or None) holds rows out of training: the gap
    statistics and range and the network come from the other rows, and early
    stopping watches the objective on the held-out rows (the parameters with
    its lowest value are kept). Without it, early stopping watches the
    training loss. ``interpolate`` (None: on the CPU with at least
    ``_INTERP_MIN_CLASSES`` classes) evaluates ``log S``
    through :class:`_InterpolatedLogPartition`. ``fit`` holds ``hidden``,
    ``t_min``, ``loss``, ``n_bins``, ``alpha``, ``q``, ``smoothing``, ``t0``
    and ``tol``.

    Returns
    -------
    SmartFit
    """
    options = options.resolved()
    train, held = _training_rows(
        logits, y_index, sample_weight, val_idx, options.device
    )
    return _fit_rows(train, held, options=options, interpolate=interpolate, **fit)


def fit_smart_topk(
    columns: np.ndarray,
    mult: np.ndarray,
    label: np.ndarray,
    gaps: np.ndarray,
    correct: np.ndarray,
    sample_weight: np.ndarray,
    *,
    options: TrainingOptions,
    val_idx: np.ndarray | None = None,
    interpolate: bool | None = None,
    **fit,
) -> SmartFit:
    """:func:`fit_smart` on a top-k's rest model, never ``n x n_classes``.

    ``columns`` (n, k + 1): each row's listed log-probabilities, then the
    share ``u`` of each unlisted class; ``mult`` how many classes each
    column stands for (1 listed, 0 padding, the number of unlisted classes
    for ``u``, 0 where it is ``-inf``). Every sum over the classes in the
    loss is a ``mult``-weighted sum over the columns: ``softmax(z / T)``
    over ``k + 1`` columns, the last counted ``V - k`` times. ``label``:
    each row's label log-probability (its listed value or ``u``);
    ``gaps``: the rest model's ``z_(1) - z_(2)``; ``correct``: whether the
    rest model's argmax is the label. ``fit`` holds the other keywords of
    :func:`fit_smart`.
    """
    options = options.resolved()
    rows = _topk_training_rows(
        columns, mult, label, gaps, correct, sample_weight, options.device
    )
    train, held = rows.split(val_idx, options.device)
    return _fit_rows(train, held, options=options, interpolate=interpolate, **fit)


def _fit_rows(
    train: _Rows,
    held: _Rows | None,
    *,
    hidden: tuple,
    t_min: float,
    loss: str,
    n_bins: int,
    alpha: float,
    q: float,
    smoothing: float,
    t0: float,
    tol: float,
    options: TrainingOptions,
    interpolate: bool | None,
) -> SmartFit:
    """The training of :func:`fit_smart` on prepared rows."""
    gen = make_generator(options.seed, "cpu")
    gap_mean, gap_std = _gap_moments(train.gaps, train.w)
    positive = train.gaps[train.w > 0]

    # the start, kept clear of the floor so softplus has a usable gradient
    t0 = max(float(t0), 2.0 * t_min)
    layers = _init_layers(tuple(hidden), t0, t_min, gen, options.device)
    params = [t.requires_grad_(True) for layer in layers for t in layer]
    soft_ece = dict(n_bins=n_bins, sharpness=alpha, power=q, smoothing=smoothing)

    def objective_of(rows: _Rows):
        return _make_objective(
            layers,
            _make_log_partition(rows.d, t0, interpolate, rows.mult),
            g_hat=standardize_gaps(rows.gaps, gap_mean, gap_std),
            d_true=rows.d_true,
            correct=rows.correct,
            w=rows.w,
            t_min=t_min,
            loss=loss,
            soft_ece=soft_ece,
        )

    train_curve: list[float] = []
    monitored = objective_of(train)
    if held is not None:
        monitored = _held_out_monitor(monitored, objective_of(held), train_curve)
    run = minimize_adam(
        monitored, params, options=options, tol=tol, desc="SMART: temperature network"
    )
    return SmartFit(
        coefs=[to_numpy(W) for W, _ in layers],
        intercepts=[to_numpy(b) for _, b in layers],
        gap_mean=gap_mean,
        gap_std=gap_std,
        gap_range=(float(positive.min()), float(positive.max())),
        temperature_init=t0,
        best_epoch=run.best_epoch,
        n_epochs=run.n_epochs,
        loss_curve=run.loss_curve if held is None else train_curve,
        validation_curve=None if held is None else run.loss_curve,
    )
