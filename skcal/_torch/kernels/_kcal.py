"""KCal (Lin, Trivedi, Sun, ICLR 2023): a kernel classifier on a learned projection.

The projection is "Skip-ELU": ``v = x W1 + b1``, ``g(x) = v + ELU(v) W2``.
The kernel is ``k(x, x') = exp(-mean_d (g(x) - g(x'))_d^2 / h)`` (the mean,
not the sum, over the projected dimensions), and the classifier over a
memory ``{(x_j, y_j, w_j)}`` is ``p(c | x) = sum_j k(x, x_j) w_j [y_j = c] /
sum_j k(x, x_j) w_j``.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from .._convert import to_numpy, to_tensor
from .._optim import train_adam
from .._random import make_generator

#: Kernel values above ``exp(-_MATCH)`` (``>= 1 - 1e-10``) are self-matches
#: and dropped, as in the reference code (leave-one-out on the memory).
_MATCH = 1e-10
#: Rows of one chunk of queries in the no-gradient passes.
_CHUNK = 2048


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
    return sums / sums.sum(dim=1, keepdim=True).clamp_min(1e-300)


def kernel_proba(
    queries: torch.Tensor,
    memory: torch.Tensor,
    targets: torch.Tensor,
    bandwidth,
    *,
    query_fold: torch.Tensor | None = None,
    memory_fold: torch.Tensor | None = None,
) -> torch.Tensor:
    """Kernel classifier probabilities of projected ``queries``.

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


def _log_loss(proba, y, w) -> torch.Tensor:
    p_true = proba.gather(1, y[:, None]).squeeze(1).clamp_min(1e-12)
    return -(w * torch.log(p_true)).sum() / w.sum().clamp_min(1e-300)


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
    batch_size: int,
    n_per_class: int,
    lr: float,
    max_epochs: int,
    patience: int,
    seed: int,
    device: torch.device,
    verbose: int = 0,
):
    """Train the projection and its bandwidth on episodes of ``X_train``.

    An epoch runs over ``X_train`` in random query batches; each batch is
    classified by the kernel classifier over a background of up to
    ``n_per_class`` random other training rows per class, whose columns are
    reweighted to the class weights of the training rows, and the weighted
    log loss of the queries is minimised by Adam. Early stopping monitors the
    log loss of ``X_val`` classified over all of ``X_train``.

    Returns
    -------
    params : list of ndarray
        ``[W1, b1, W2]``.
    bandwidth : float
    best_epoch, n_epochs : int
    """
    gen = make_generator(seed, "cpu")
    d_in = X_train.shape[1]
    W1 = torch.rand(d_in, n_components, generator=gen, dtype=torch.float64) * 2 - 1
    W1 /= math.sqrt(d_in)
    b1 = torch.rand(n_components, generator=gen, dtype=torch.float64) * 2 - 1
    b1 /= math.sqrt(d_in)
    W2 = torch.rand(n_components, n_components, generator=gen, dtype=torch.float64)
    W2 = (W2 * 2 - 1) / math.sqrt(n_components)
    params = [t.to(device) for t in (W1, b1, W2)]
    xt = to_tensor(X_train, device, torch.float64)
    yt = to_tensor(y_train, device, torch.int64)
    wt = to_tensor(w_train, device, torch.float64)
    xv = to_tensor(X_val, device, torch.float64)
    yv = to_tensor(y_val, device, torch.int64)
    wv = to_tensor(w_val, device, torch.float64)
    onehot_t = torch.nn.functional.one_hot(yt, n_classes).double() * wt[:, None]
    class_weight = onehot_t.sum(dim=0)
    with torch.no_grad():  # start at the median mean-squared distance
        g = project(params, xt[: min(len(xt), 512)])
        d2 = torch.cdist(g, g).square() / n_components
        h0 = float(d2[d2 > 0].median()) if bool((d2 > 0).any()) else 1.0
    log_h = torch.tensor(math.log(h0), dtype=torch.float64, device=device)
    params.append(log_h)
    for p in params:
        p.requires_grad_(True)

    def episode_loss(batch: torch.Tensor) -> torch.Tensor:
        exclude = torch.zeros(len(yt), dtype=torch.bool, device=device)
        exclude[batch] = True
        background = _stratified_background(yt, exclude, n_per_class, n_classes, gen)
        folds = None
        if background.numel() == 0:  # the batch is the whole training part:
            background = batch  # leave-one-out within the batch
            folds = torch.arange(len(batch), device=device)
        targets = onehot_t[background]
        sampled = targets.sum(dim=0)
        scale = torch.where(sampled > 0, class_weight / sampled.clamp_min(1e-300), 0.0)
        proba = kernel_proba(
            project(params[:3], xt[batch]),
            project(params[:3], xt[background]),
            targets * scale,
            torch.exp(params[3]),
            query_fold=folds,
            memory_fold=folds,
        )
        return _log_loss(proba, yt[batch], wt[batch])

    def val_loss() -> float:
        proba = kernel_proba(
            project(params[:3], xv),
            project(params[:3], xt),
            onehot_t,
            torch.exp(params[3]),
        )
        return float(_log_loss(proba, yv, wv))

    best_epoch, n_epochs, _ = train_adam(
        episode_loss,
        val_loss,
        params,
        n_samples=len(yt),
        batch_size=batch_size,
        max_epochs=max_epochs,
        lr=lr,
        patience=patience,
        generator=gen,
        device=device,
        verbose=verbose,
    )
    state = [to_numpy(p) for p in params[:3]]
    return state, float(torch.exp(params[3]).detach()), best_epoch, n_epochs


def cv_log_loss(
    G: torch.Tensor,
    targets: torch.Tensor,
    y: torch.Tensor,
    w: torch.Tensor,
    folds: torch.Tensor,
    bandwidth: float,
) -> float:
    """Cross-validated log loss of the kernel classifier over ``G`` itself."""
    with torch.no_grad():
        proba = kernel_proba(
            G, G, targets, bandwidth, query_fold=folds, memory_fold=folds
        )
        return float(_log_loss(proba, y, w))


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
