"""KCal (Lin, Trivedi, Sun, ICLR 2023): a kernel classifier on a learned projection.

The projection is "Skip-ELU": ``v = x W1 + b1``, ``g(x) = v + ELU(v) W2``.
The kernel is ``k(x, x') = exp(-mean_d (g(x) - g(x'))_d^2 / h)`` (the mean,
not the sum, over the projected dimensions), and the classifier over a
memory ``{(x_j, y_j, w_j)}`` is ``p(c | x) = sum_j k(x, x_j) w_j [y_j = c] /
sum_j k(x, x_j) w_j``.

The public functions take and return numpy arrays: :func:`fit_kcal` trains
the projection, :func:`kcal_project` applies it, :func:`select_kcal_bandwidth`
chooses ``h`` by cross-validation on the memory and :func:`kcal_proba`
classifies new rows over it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from .._constants import DIVISOR_FLOOR
from .._convert import to_numpy, to_tensor
from .._device import resolve_device
from .._optim import train_adam
from .._options import TrainingOptions
from .._progress import Progress
from .._random import make_generator
from ._common import uniform_linear, weighted_mean

__all__ = [
    "KCalBandwidth",
    "KCalFit",
    "fit_kcal",
    "golden_section_min",
    "kcal_cv_log_loss",
    "kcal_proba",
    "kcal_project",
    "select_kcal_bandwidth",
]

#: Kernel values above ``exp(-_MATCH)`` (``>= 1 - 1e-10``) are self-matches
#: and dropped, as in the reference code (leave-one-out on the memory).
_MATCH = 1e-10
#: Rows of one chunk of queries in the no-gradient passes.
_CHUNK = 2048
#: Rows of the training part whose projections give the initial bandwidth.
_INIT_ROWS = 512


@dataclass(frozen=True)
class KCalFit:
    """Trained projection and bandwidth of :func:`fit_kcal` (numpy, CPU).

    Attributes
    ----------
    projection : tuple of ndarray
        ``(W1, b1, W2)``, of shapes ``(n_features, n_components)``,
        ``(n_components,)`` and ``(n_components, n_components)``.
    bandwidth : float
        Bandwidth ``h`` trained with the projection.
    best_epoch : int
        Epoch whose parameters were kept (0: the initial ones).
    n_epochs : int
        Epochs run.
    """

    projection: tuple
    bandwidth: float
    best_epoch: int
    n_epochs: int


@dataclass(frozen=True)
class KCalBandwidth:
    """Bandwidth of the kernel classifier and its cross-validated log loss.

    Attributes
    ----------
    bandwidth : float
        ``h``, chosen by :func:`select_kcal_bandwidth` or given.
    cv_log_loss : float
        Weighted log loss of the memory classified over itself by folds, at
        ``bandwidth``.
    """

    bandwidth: float
    cv_log_loss: float


# ------------------------------------------------------------ tensor pieces
def project(params, x: torch.Tensor) -> torch.Tensor:
    """Skip-ELU projection ``v + ELU(v) W2`` with ``v = x W1 + b1``."""
    W1, b1, W2 = params
    v = x @ W1 + b1
    return v + torch.nn.functional.elu(v) @ W2


def _class_sums(
    q: torch.Tensor,
    memory: torch.Tensor,
    sq_memory: torch.Tensor,
    targets: torch.Tensor,
    bandwidth,
    mask: torch.Tensor | None,
) -> torch.Tensor:
    """Kernel-weighted class sums of one chunk of queries, normalised to 1."""
    d2 = (q * q).sum(dim=1, keepdim=True) + sq_memory - 2.0 * (q @ memory.T)
    logk = -d2.clamp_min(0.0) / (q.shape[1] * bandwidth)
    matches = logk > -_MATCH
    mask = matches if mask is None else mask | matches
    # a query whose every neighbour would be dropped keeps them all
    mask = mask & ~mask.all(dim=1, keepdim=True)
    logk = logk.masked_fill(mask, -math.inf)
    # shift by the row maximum: where every kernel value underflows, the
    # nearest neighbours decide (the reference falls back to uniform 1e-10s)
    logk = logk - logk.amax(dim=1, keepdim=True)
    sums = torch.exp(logk) @ targets
    return sums / sums.sum(dim=1, keepdim=True).clamp_min(DIVISOR_FLOOR)


def kernel_proba(
    queries: torch.Tensor,
    memory: torch.Tensor,
    targets: torch.Tensor,
    bandwidth,
    *,
    query_fold: torch.Tensor | None = None,
    memory_fold: torch.Tensor | None = None,
) -> torch.Tensor:
    """Kernel classifier probabilities of projected ``queries`` (tensors).

    Parameters
    ----------
    queries : Tensor of shape (m, d)
        Projected queries.
    memory : Tensor of shape (n, d)
        Projected memory.
    targets : Tensor of shape (n, n_classes)
        One-hot labels of the memory times their weights.
    bandwidth : float or Tensor
        ``h``.
    query_fold, memory_fold : Tensor of shape (m,) and (n,), optional
        Fold ids: a query ignores the memory points of its own fold
        (cross-validation in one pass).

    Returns
    -------
    Tensor of shape (m, n_classes)
    """
    centre = memory.mean(dim=0).detach()  # better conditioned expansion
    memory = memory - centre
    queries = queries - centre
    sq_memory = (memory * memory).sum(dim=1)
    if queries.requires_grad or memory.requires_grad:
        step = queries.shape[0]
    else:
        step = _CHUNK
    out = []
    for start in range(0, queries.shape[0], step):
        mask = None
        if query_fold is not None:
            mask = query_fold[start : start + step, None] == memory_fold[None, :]
        out.append(
            _class_sums(
                queries[start : start + step],
                memory,
                sq_memory,
                targets,
                bandwidth,
                mask,
            )
        )
    return torch.cat(out) if len(out) > 1 else out[0]


def _log_loss(proba: torch.Tensor, y: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """Weighted mean of ``-log p(y_i)``, probabilities floored at 1e-12."""
    p_true = proba.gather(1, y[:, None]).squeeze(1).clamp_min(1e-12)
    return weighted_mean(-torch.log(p_true), w)


def _stratified_background(
    labels: torch.Tensor,
    exclude: torch.Tensor,
    n_per_class: int,
    n_classes: int,
    generator: torch.Generator,
) -> torch.Tensor:
    """Up to ``n_per_class`` random rows of each class, none in ``exclude``."""
    n = labels.shape[0]
    keys = torch.rand(n, generator=generator, dtype=torch.float64)
    keys = keys.to(labels.device)
    keys[exclude] = 2.0
    order = torch.argsort(keys)
    order = order[torch.argsort(labels[order], stable=True)]
    sorted_labels = labels[order]
    starts = torch.searchsorted(
        sorted_labels, torch.arange(n_classes, device=labels.device)
    )
    rank = torch.arange(n, device=labels.device) - starts[sorted_labels]
    keep = (rank < n_per_class) & (keys[order] < 2.0)
    return order[keep]


def _memory_targets(labels, weights, n_classes: int, device) -> torch.Tensor:
    """One-hot labels of a memory times their weights, on ``device``."""
    labels = np.asarray(labels)
    onehot = np.zeros((labels.size, n_classes))
    onehot[np.arange(labels.size), labels] = weights
    return to_tensor(onehot, device, torch.float64)


# ------------------------------------------------------------ training
@dataclass(frozen=True)
class _Episodes:
    """Tensors of one :func:`fit_kcal` run (training and validation parts)."""

    x_train: torch.Tensor
    y_train: torch.Tensor
    w_train: torch.Tensor
    x_val: torch.Tensor
    y_val: torch.Tensor
    w_val: torch.Tensor
    targets: torch.Tensor  # weighted one-hot labels of the training part
    class_weight: torch.Tensor  # their column sums

    @classmethod
    def build(cls, X_train, y_train, w_train, X_val, y_val, w_val, n_classes, device):
        yt = to_tensor(y_train, device, torch.int64)
        wt = to_tensor(w_train, device, torch.float64)
        targets = torch.nn.functional.one_hot(yt, n_classes).double() * wt[:, None]
        return cls(
            x_train=to_tensor(X_train, device, torch.float64),
            y_train=yt,
            w_train=wt,
            x_val=to_tensor(X_val, device, torch.float64),
            y_val=to_tensor(y_val, device, torch.int64),
            w_val=to_tensor(w_val, device, torch.float64),
            targets=targets,
            class_weight=targets.sum(dim=0),
        )


def _initial_params(x: torch.Tensor, n_components: int, gen, device) -> list:
    """``[W1, b1, W2, log h]``: ``nn.Linear``-style layers, ``h`` from the data.

    ``h`` starts at the median mean-squared distance between the projections
    of the first rows of ``x`` (1 when they all coincide).
    """
    W1, b1 = uniform_linear(x.shape[1], n_components, gen, device)
    W2 = uniform_linear(n_components, n_components, gen, device, bias=False)
    params = [W1, b1, W2]
    with torch.no_grad():
        g = project(params, x[: min(len(x), _INIT_ROWS)])
        d2 = torch.cdist(g, g).square() / n_components
        h0 = float(d2[d2 > 0].median()) if bool((d2 > 0).any()) else 1.0
    params.append(torch.tensor(math.log(h0), dtype=torch.float64, device=device))
    for p in params:
        p.requires_grad_(True)
    return params


def _episode_loss(
    params: list, data: _Episodes, n_per_class: int, n_classes: int, gen
) -> Callable[[torch.Tensor], torch.Tensor]:
    """Loss of one training step: queries ``batch`` over a random background.

    The background holds up to ``n_per_class`` other training rows per class;
    its columns are reweighted to the class weights of the whole training
    part.
    """
    yt, device = data.y_train, data.y_train.device

    def loss(batch: torch.Tensor) -> torch.Tensor:
        exclude = torch.zeros(len(yt), dtype=torch.bool, device=device)
        exclude[batch] = True
        background = _stratified_background(yt, exclude, n_per_class, n_classes, gen)
        folds = None
        if background.numel() == 0:  # the batch is the whole training part:
            background = batch  # leave-one-out within the batch
            folds = torch.arange(len(batch), device=device)
        targets = data.targets[background]
        sampled = targets.sum(dim=0)
        scale = torch.where(
            sampled > 0, data.class_weight / sampled.clamp_min(DIVISOR_FLOOR), 0.0
        )
        proba = kernel_proba(
            project(params[:3], data.x_train[batch]),
            project(params[:3], data.x_train[background]),
            targets * scale,
            torch.exp(params[3]),
            query_fold=folds,
            memory_fold=folds,
        )
        return _log_loss(proba, yt[batch], data.w_train[batch])

    return loss


def _validation_loss(params: list, data: _Episodes) -> Callable[[], float]:
    """Log loss of the validation part classified over the training part."""

    def loss() -> float:
        proba = kernel_proba(
            project(params[:3], data.x_val),
            project(params[:3], data.x_train),
            data.targets,
            torch.exp(params[3]),
        )
        return float(_log_loss(proba, data.y_val, data.w_val))

    return loss


def fit_kcal(
    X_train: np.ndarray,
    y_train: np.ndarray,
    w_train: np.ndarray,
    X_val: np.ndarray,
    y_val: np.ndarray,
    w_val: np.ndarray,
    *,
    n_classes: int,
    n_components: int,
    n_per_class: int,
    options: TrainingOptions,
) -> KCalFit:
    """Train the projection and its bandwidth on episodes of ``X_train``.

    An epoch runs over ``X_train`` in random query batches; each batch is
    classified by the kernel classifier over a background of up to
    ``n_per_class`` random other training rows per class, whose columns are
    reweighted to the class weights of the training rows, and the weighted
    log loss of the queries is minimised by Adam. Early stopping monitors the
    log loss of ``X_val`` classified over all of ``X_train``.

    Parameters
    ----------
    X_train, y_train, w_train : ndarray
        Standardised embeddings, column indices of the labels and positive
        sample weights of the training part.
    X_val, y_val, w_val : ndarray
        The same for the validation part.
    n_classes, n_components, n_per_class : int
        Classes, projected dimensions and background rows per class.
    options : TrainingOptions
        Adam (``batch_size``: queries per step) and early stopping;
        ``options.seed`` seeds the initialisation, the batches and the
        backgrounds (a CPU generator: the same draws on every device).

    Returns
    -------
    KCalFit
    """
    options = options.resolved()
    device = options.device
    gen = make_generator(options.seed, "cpu")
    data = _Episodes.build(
        X_train, y_train, w_train, X_val, y_val, w_val, n_classes, device
    )
    params = _initial_params(data.x_train, n_components, gen, device)
    run = train_adam(
        _episode_loss(params, data, n_per_class, n_classes, gen),
        _validation_loss(params, data),
        params,
        n_samples=len(data.y_train),
        options=options,
        generator=gen,
        desc="KCal: projection",
    )
    return KCalFit(
        projection=tuple(to_numpy(p) for p in params[:3]),
        bandwidth=float(torch.exp(params[3]).detach()),
        best_epoch=run.best_epoch,
        n_epochs=run.n_epochs,
    )


# ------------------------------------------------------------ prediction
def kcal_project(projection, X: np.ndarray, device) -> np.ndarray:
    """Skip-ELU projection of standardised rows ``X`` (float64 numpy).

    Parameters
    ----------
    projection : sequence of ndarray
        ``(W1, b1, W2)`` (:attr:`KCalFit.projection`).
    X : ndarray of shape (n_samples, n_features)
    device : {"auto", "cpu", "cuda", "cuda:N"} or torch.device

    Returns
    -------
    ndarray of shape (n_samples, n_components)
    """
    device = resolve_device(device)
    params = [to_tensor(p, device, torch.float64) for p in projection]
    with torch.no_grad():
        return to_numpy(project(params, to_tensor(X, device, torch.float64)))


def kcal_proba(
    projection,
    X: np.ndarray,
    memory: np.ndarray,
    labels: np.ndarray,
    weights: np.ndarray,
    bandwidth: float,
    *,
    n_classes: int,
    device,
) -> np.ndarray:
    """Kernel classifier probabilities of standardised rows ``X``.

    Parameters
    ----------
    projection : sequence of ndarray
        ``(W1, b1, W2)``.
    X : ndarray of shape (n_samples, n_features)
        Standardised embeddings of the queries.
    memory : ndarray of shape (n_memory, n_components)
        Projected memory.
    labels, weights : ndarray of shape (n_memory,)
        Column index and positive weight of each memory row.
    bandwidth : float
    n_classes : int
    device : {"auto", "cpu", "cuda", "cuda:N"} or torch.device

    Returns
    -------
    ndarray of shape (n_samples, n_classes)
        A query that coincides with a memory row does not see it
        (leave-one-out, see :func:`_class_sums`).
    """
    device = resolve_device(device)
    params = [to_tensor(p, device, torch.float64) for p in projection]
    targets = _memory_targets(labels, weights, n_classes, device)
    with torch.no_grad():
        proba = kernel_proba(
            project(params, to_tensor(X, device, torch.float64)),
            to_tensor(memory, device, torch.float64),
            targets,
            bandwidth,
        )
    return to_numpy(proba)


# ------------------------------------------------------------ bandwidth
def _cv_objective(memory, labels, weights, folds, n_classes: int, device):
    """The function ``h -> cross-validated log loss`` of a memory (tensors kept)."""
    device = resolve_device(device)
    G = to_tensor(memory, device, torch.float64)
    targets = _memory_targets(labels, weights, n_classes, device)
    y = to_tensor(labels, device, torch.int64)
    w = to_tensor(weights, device, torch.float64)
    folds = to_tensor(folds, device, torch.int64)

    def objective(bandwidth: float) -> float:
        with torch.no_grad():
            proba = kernel_proba(
                G, G, targets, bandwidth, query_fold=folds, memory_fold=folds
            )
            return float(_log_loss(proba, y, w))

    return objective


def kcal_cv_log_loss(
    memory: np.ndarray,
    labels: np.ndarray,
    weights: np.ndarray,
    folds: np.ndarray,
    bandwidth: float,
    *,
    n_classes: int,
    device="cpu",
) -> float:
    """Cross-validated log loss of the kernel classifier over ``memory`` itself.

    Each row is classified over the rows of the other folds; the result is
    the ``weights``-weighted mean of ``-log max(p(y_i), 1e-12)``.

    Parameters
    ----------
    memory : ndarray of shape (n_memory, n_components)
        Projected memory.
    labels, weights, folds : ndarray of shape (n_memory,)
        Column index, weight and fold id of each row.
    bandwidth : float
    n_classes : int
    device : {"auto", "cpu", "cuda", "cuda:N"} or torch.device, default="cpu"

    Returns
    -------
    float
    """
    objective = _cv_objective(memory, labels, weights, folds, n_classes, device)
    return objective(bandwidth)


def select_kcal_bandwidth(
    memory: np.ndarray,
    labels: np.ndarray,
    weights: np.ndarray,
    folds: np.ndarray,
    *,
    n_classes: int,
    init: float,
    fixed: float | None = None,
    device,
    verbose: int = 0,
) -> KCalBandwidth:
    """Bandwidth that minimises :func:`kcal_cv_log_loss` on the memory.

    Golden-section search over ``log h`` in ``[log(init / 10), log(10 init)]``
    (tolerance 1e-4, relative in ``h``), as in the KCal paper; with
    ``fixed``, no search: ``h = fixed`` and only its loss is computed.
    ``verbose`` shows the search as a :class:`~skcal._torch._progress.Progress`
    bar "KCal: bandwidth", one step per evaluated bandwidth (2: and a line
    per evaluation).

    Returns
    -------
    KCalBandwidth
    """
    objective = _cv_objective(memory, labels, weights, folds, n_classes, device)
    if fixed is not None:
        bandwidth = float(fixed)
        return KCalBandwidth(bandwidth=bandwidth, cv_log_loss=objective(bandwidth))
    desc = "KCal: bandwidth"
    lower = np.log(init) - np.log(10.0)
    upper = np.log(init) + np.log(10.0)
    # the search's evaluations, and the loss at the bandwidth found
    total = _golden_section_evaluations(upper - lower, xtol=1e-4) + 1
    with Progress(verbose, total, desc, "bandwidth") as progress:

        def loss(log_h: float) -> float:
            h = float(np.exp(log_h))
            value = objective(h)
            progress.step(
                f"{desc}: h {h:.6g}: cross-validated log loss {value:.6g}",
                h=h,
                cv_log_loss=value,
            )
            return value

        log_h = golden_section_min(loss, lower, upper, xtol=1e-4)
        cv_log_loss = loss(log_h)
        progress.end()
    return KCalBandwidth(bandwidth=float(np.exp(log_h)), cv_log_loss=cv_log_loss)


def _golden_section_evaluations(width: float, xtol: float) -> int:
    """How many times :func:`golden_section_min` calls ``fun`` on an
    interval of ``width`` (two, then one per narrowing to ``xtol``)."""
    ratio = (math.sqrt(5.0) - 1.0) / 2.0
    n = 2
    while width > xtol:
        width *= ratio
        n += 1
    return n


def golden_section_min(fun, lower: float, upper: float, *, xtol: float) -> float:
    """Minimiser of a unimodal ``fun`` on ``[lower, upper]`` (golden section)."""
    ratio = (math.sqrt(5.0) - 1.0) / 2.0
    a, b = lower, upper
    c, d = b - ratio * (b - a), a + ratio * (b - a)
    fc, fd = fun(c), fun(d)
    while b - a > xtol:
        if fc <= fd:
            b, d, fd = d, c, fc
            c = b - ratio * (b - a)
            fc = fun(c)
        else:
            a, c, fc = c, d, fd
            d = a + ratio * (b - a)
            fd = fun(d)
    return c if fc <= fd else d
