"""Local Nets (Barbera et al., AISTATS 2026): logits corrected by a kernel target.

Shared hidden layers ``u = Dropout(ReLU(u W_l + b_l))`` (``u = h`` at the
start; one layer ``W1, b1`` in the paper) feed two heads:

* a similarity embedding ``e = u Ws + bs + a_sim * pi + b_sim`` (``pi`` the
  PCA projection of the standardised embeddings), and
* logits ``l = u Wc + bc + a_cls * z + b_cls`` (``z`` the frozen head's).

Inside a mini-batch, the leave-one-out kernel estimate
``p_ker(i) = sum_{j != i} wbar_ij y_j`` with ``wbar_ij`` proportional to
``w_j exp(-|e_i - e_j|^2 / (2 gamma^2))`` is the target: the loss is the
mean one-vs-rest Jensen-Shannon distance between ``softmax(l)`` and
``p_ker``, plus the log loss of ``p_ker`` itself (which trains ``e``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from .._constants import DIVISOR_FLOOR, FLOOR_BEFORE_LOG
from .._convert import to_numpy, to_tensor
from .._device import resolve_device
from .._optim import train_adam
from .._options import TrainingOptions
from .._random import make_generator

__all__ = ["LocalNetFit", "fit_local_net", "local_net_predict"]

#: Names of the head parameters, in order, after the hidden layers' ``W1, b1,
#: ..., Wk, bk``.
PARAMS = ("Ws", "bs", "a_sim", "b_sim", "Wc", "bc", "a_cls", "b_cls")
#: Probabilities in the JS distance are clipped to [_JS_EPS, 1 - _JS_EPS].
_JS_EPS = 1e-4


def forward(params: dict, h, z, pi, *, dropout: float = 0.0, generator=None):
    """Logits and similarity embedding; dropout only when ``generator`` is set."""
    u = h
    for layer in range(1, n_hidden_layers(params) + 1):
        u = torch.relu(u @ params[f"W{layer}"] + params[f"b{layer}"])
        if generator is not None and dropout > 0:
            keep = torch.rand(u.shape, generator=generator, device=u.device)
            u = u * (keep >= dropout) / (1.0 - dropout)
    e = u @ params["Ws"] + params["bs"] + params["a_sim"] * pi + params["b_sim"]
    logits = u @ params["Wc"] + params["bc"] + params["a_cls"] * z + params["b_cls"]
    return logits, e


def n_hidden_layers(params: dict) -> int:
    """Number of hidden layers (``W1``, ``W2``, ... in ``params``)."""
    return sum(1 for name in params if name[0] == "W" and name[1:].isdigit())


def kernel_estimate(e, onehot, w, bandwidth: float):
    """Leave-one-out kernel label estimate of each row of a batch.

    Returns ``(p_ker, has_neighbour)``: rows without another positive-weight
    row in the batch get ``p_ker = 0`` and ``has_neighbour = False``.
    """
    d2 = torch.cdist(e, e).square()
    eye = torch.eye(e.shape[0], dtype=torch.bool, device=e.device)
    valid = ~eye & (w > 0)[None, :]
    has_neighbour = valid.any(dim=1)
    logits = -d2 / (2.0 * bandwidth * bandwidth) + torch.log(
        w.clamp_min(FLOOR_BEFORE_LOG)
    )
    logits = logits.masked_fill(~valid, -math.inf)
    logits = logits.masked_fill(~has_neighbour[:, None], 0.0)  # no NaN rows
    weights = torch.softmax(logits, dim=1) * has_neighbour[:, None]
    return weights @ onehot, has_neighbour


def js_distance(p, q) -> torch.Tensor:
    """Per-row mean over classes of the binary (one-vs-rest) JS distance."""
    p = p.clamp(_JS_EPS, 1 - _JS_EPS)
    q = q.clamp(_JS_EPS, 1 - _JS_EPS)
    m = (p + q) / 2

    def kl(a):
        return a * torch.log(a / m) + (1 - a) * torch.log((1 - a) / (1 - m))

    return torch.sqrt((0.5 * kl(p) + 0.5 * kl(q)).clamp_min(_JS_EPS)).mean(dim=1)


def batch_terms(
    params,
    h,
    z,
    pi,
    y,
    onehot,
    w,
    bandwidth,
    *,
    dropout=0.0,
    generator=None,
    present=None,
):
    """Weighted sums of the JS term and of the kernel log loss over one batch.

    Returns ``(sum_i w_i JS_i, sum_i w_i CE_i, sum_i w_i)`` over the rows that
    have a neighbour; ``CE_i = -log max(p_ker_i[y_i], 1e-6)``. With
    ``present`` (a boolean mask of the classes) the network's softmax and the
    JS distance run over those classes only: the others have no sample, so
    their kernel estimate is 0 by construction, not evidence.
    """
    logits, e = forward(params, h, z, pi, dropout=dropout, generator=generator)
    p_ker, has_neighbour = kernel_estimate(e, onehot, w, bandwidth)
    w = w * has_neighbour
    p_true = p_ker.gather(1, y[:, None]).squeeze(1).clamp_min(1e-6)
    if present is not None:
        logits, p_ker = logits[:, present], p_ker[:, present]
    js = js_distance(torch.softmax(logits, dim=1), p_ker)
    return (w * js).sum(), -(w * torch.log(p_true)).sum(), w.sum()


@dataclass(frozen=True)
class LocalNetFit:
    """Trained Local Net of :func:`fit_local_net` (numpy, CPU).

    Attributes
    ----------
    network : dict of ndarray
        The hidden layers' ``W1, b1, ...`` and the parameters named in
        :data:`PARAMS`.
    best_epoch : int
        Epoch whose parameters were kept (0: the initial network).
    n_epochs : int
        Epochs run.
    """

    network: dict
    best_epoch: int
    n_epochs: int


@dataclass(frozen=True)
class _Data:
    """Tensors of one :func:`fit_local_net` run."""

    h: torch.Tensor
    z: torch.Tensor
    pi: torch.Tensor
    y: torch.Tensor
    onehot: torch.Tensor
    w: torch.Tensor
    train: torch.Tensor  # row indices
    val: torch.Tensor
    present: torch.Tensor | None  # classes the losses run over; None: all

    @classmethod
    def build(cls, h, z, pi, y_index, sample_weight, train, val, present, device):
        yt = to_tensor(y_index, device, torch.int64)
        if present is not None and np.all(present):
            present = None
        if present is not None:
            present = to_tensor(np.asarray(present, dtype=bool), device, torch.bool)
        return cls(
            h=to_tensor(h, device, torch.float64),
            z=to_tensor(z, device, torch.float64),
            pi=to_tensor(pi, device, torch.float64),
            y=yt,
            onehot=torch.nn.functional.one_hot(yt, z.shape[1]).double(),
            w=to_tensor(sample_weight, device, torch.float64),
            train=to_tensor(train, device, torch.int64),
            val=to_tensor(val, device, torch.int64),
            present=present,
        )


def _initial_params(
    d_in: int,
    hidden: tuple,
    d_sim: int,
    n_classes: int,
    vector_affine: bool,
    generator: torch.Generator,
    device,
) -> dict:
    """Parameters at which the logits are about ``z`` and the embedding ``pi``.

    Weight matrices ``N(0, 0.01^2)``, biases 0, the affine scales ``a`` 1 and
    the shifts ``b`` ``N(0, 0.01^2)``, drawn layer by layer, then in the
    order of :data:`PARAMS`.
    """

    def normal(*shape):
        return 0.01 * torch.randn(
            *shape, generator=generator, device=device, dtype=torch.float64
        )

    def zeros(size):
        return torch.zeros(size, dtype=torch.float64, device=device)

    def ones(size):
        return torch.ones(size, dtype=torch.float64, device=device)

    n_sim, n_cls = (d_sim, n_classes) if vector_affine else (1, 1)
    params, width = {}, d_in
    for layer, size in enumerate(hidden, start=1):
        params[f"W{layer}"], params[f"b{layer}"] = normal(width, size), zeros(size)
        width = size
    params |= {
        "Ws": normal(width, d_sim),
        "bs": zeros(d_sim),
        "a_sim": ones(n_sim),
        "b_sim": normal(n_sim),
        "Wc": normal(width, n_classes),
        "bc": zeros(n_classes),
        "a_cls": ones(n_cls),
        "b_cls": normal(n_cls),
    }
    for p in params.values():
        p.requires_grad_(True)
    return params


def _losses(
    params: dict,
    data: _Data,
    *,
    bandwidth: float,
    dropout: float,
    lambda_js: float,
    alpha_ce: float,
    batch_size: int,
    generator: torch.Generator,
):
    """The training loss of a batch and the validation loss (early stopping).

    The validation loss is the JS term (the log-loss term when ``lambda_js``
    is 0) over the validation rows, computed batch by batch like the
    training loss, without dropout.
    """

    def terms(rows, gen):
        return batch_terms(
            params,
            data.h[rows],
            data.z[rows],
            data.pi[rows],
            data.y[rows],
            data.onehot[rows],
            data.w[rows],
            bandwidth,
            dropout=dropout,
            generator=gen,
            present=data.present,
        )

    def loss(batch):
        js, ce, total = terms(data.train[batch], generator)
        return (lambda_js * js + alpha_ce * ce) / total.clamp_min(DIVISOR_FLOOR)

    def val_loss() -> float:
        js_sum = ce_sum = total = 0.0
        for start in range(0, len(data.val), batch_size):
            js, ce, w = terms(data.val[start : start + batch_size], None)
            js_sum, ce_sum, total = js_sum + js, ce_sum + ce, total + w
        value = js_sum if lambda_js > 0 else ce_sum
        return float(value / max(float(total), DIVISOR_FLOOR))

    return loss, val_loss


def fit_local_net(
    h: np.ndarray,
    z: np.ndarray,
    pi: np.ndarray,
    y_index: np.ndarray,
    sample_weight: np.ndarray,
    *,
    train_idx: np.ndarray,
    val_idx: np.ndarray,
    hidden: tuple,
    dropout: float,
    bandwidth: float,
    lambda_js: float,
    alpha_ce: float,
    vector_affine: bool,
    options: TrainingOptions,
    present: np.ndarray | None = None,
) -> LocalNetFit:
    """Train a Local Net by mini-batch Adam with early stopping.

    The network starts at its head (:func:`_initial_params`). Early stopping
    monitors the JS term on the validation rows (the log-loss term when
    ``lambda_js`` is 0), computed batch by batch like the training loss.
    ``present`` (boolean, one per class) restricts the losses to those
    classes (see :func:`batch_terms`) and the other classes then get the
    mean logit map of the present ones (:func:`fill_absent_classes`); None
    is every class.

    Parameters
    ----------
    h, z, pi : ndarray of shape (n_samples, ...)
        Standardised embeddings, the head's logits and the PCA projection.
    y_index, sample_weight : ndarray of shape (n_samples,)
        Column index of each label, and sample weights.
    train_idx, val_idx : ndarray of int
        Rows that train, and rows that monitor early stopping.
    hidden, dropout, bandwidth, lambda_js, alpha_ce, vector_affine
        The network and its loss (see :class:`~skcal.LocalNetCalibrator`).
    options : TrainingOptions
        Adam and early stopping; ``options.seed`` seeds the initialisation,
        the batches and the dropout (a generator on ``options.device``).
    present : ndarray of bool of shape (n_classes,), default=None

    Returns
    -------
    LocalNetFit
    """
    options = options.resolved()
    device = options.device
    gen = make_generator(options.seed, device)
    params = _initial_params(
        h.shape[1], hidden, pi.shape[1], z.shape[1], vector_affine, gen, device
    )
    data = _Data.build(
        h, z, pi, y_index, sample_weight, train_idx, val_idx, present, device
    )
    loss, val_loss = _losses(
        params,
        data,
        bandwidth=bandwidth,
        dropout=dropout,
        lambda_js=lambda_js,
        alpha_ce=alpha_ce,
        batch_size=options.batch_size,
        generator=gen,
    )
    run = train_adam(
        loss,
        val_loss,
        list(params.values()),
        n_samples=len(train_idx),
        options=options,
        generator=gen,
        desc="Local Nets: correction network",
    )
    network = {k: to_numpy(v) for k, v in params.items()}
    if data.present is not None:
        fill_absent_classes(network, to_numpy(data.present).astype(bool))
    return LocalNetFit(
        network=network, best_epoch=run.best_epoch, n_epochs=run.n_epochs
    )


def fill_absent_classes(state: dict, present: np.ndarray) -> None:
    """Give the classes outside ``present`` the mean logit map of the others.

    The per-class parameters of the logits (the columns of ``Wc``, ``bc``,
    and ``a_cls``, ``b_cls`` when they are vectors) of a class without
    training samples received no gradient; they become the mean of the
    present classes' columns, so that the class gets the correction common
    to all classes and no class-specific one. In place.
    """
    absent = ~present
    for name in ("Wc", "bc", "a_cls", "b_cls"):
        value = state[name]
        if value.shape[-1] != present.size:  # a scalar shared by all classes
            continue
        value[..., absent] = value[..., present].mean(axis=-1, keepdims=True)


def local_net_predict(params: dict, h, z, pi, device, *, embedding: bool = False):
    """``softmax(l)`` (or the embedding ``e``) as float64 numpy.

    ``device``: {"auto", "cpu", "cuda", "cuda:N"} or a ``torch.device``.
    """
    device = resolve_device(device)
    p = {k: to_tensor(v, device, torch.float64) for k, v in params.items()}
    with torch.no_grad():
        logits, e = forward(
            p,
            to_tensor(h, device, torch.float64),
            to_tensor(z, device, torch.float64),
            to_tensor(pi, device, torch.float64),
        )
        return to_numpy(e if embedding else torch.softmax(logits, dim=1))
