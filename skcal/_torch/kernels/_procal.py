"""ProCal's kernels: k-nearest-neighbour distances and a 2-D Gaussian KDE.

Both work on row chunks of the queries, so memory stays at one
``chunk x n_memory`` block whatever the number of queries. The calibrator
calls :func:`knn_proximity` and :func:`density_ratio_confidence`, which take
and return numpy arrays.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from .._convert import to_numpy, to_tensor
from .._device import resolve_device
from .._progress import Progress

__all__ = ["density_ratio_confidence", "knn_proximity"]

#: Elements of one ``chunk x n_memory`` block (32 MB in float64).
_BLOCK = 1 << 22


def _chunk_rows(n_columns: int) -> int:
    return max(1, _BLOCK // max(n_columns, 1))


def knn_sq_distances(
    queries: torch.Tensor,
    memory: torch.Tensor,
    k: int,
    *,
    exclude_self: bool,
    verbose: int = 0,
) -> torch.Tensor:
    """Squared Euclidean distances to the ``k`` nearest memory points.

    Parameters
    ----------
    queries : Tensor of shape (m, d)
    memory : Tensor of shape (n, d)
    k : int
        Number of neighbours, ``k <= n`` (``k <= n - 1`` with
        ``exclude_self``).
    exclude_self : bool
        ``queries`` is ``memory``: row ``i`` does not count point ``i``
        (its other copies, if any, still count, at distance 0).
    verbose : int, default=0
        A progress bar over the blocks of queries (see
        :class:`~skcal._torch._progress.Progress`).

    Returns
    -------
    Tensor of shape (m, k)
        Ascending squared distances.
    """
    centre = memory.mean(dim=0)  # better conditioned expansion
    memory = memory - centre
    queries = queries - centre
    sq_mem = (memory * memory).sum(dim=1)
    out = torch.empty(queries.shape[0], k, dtype=queries.dtype, device=queries.device)
    step = _chunk_rows(memory.shape[0])
    starts = range(0, queries.shape[0], step)
    with Progress(verbose, len(starts), "ProCal: nearest neighbours", "block") as bar:
        for start in starts:
            q = queries[start : start + step]
            d2 = (q * q).sum(dim=1, keepdim=True) + sq_mem - 2.0 * (q @ memory.T)
            d2.clamp_(min=0.0)
            if exclude_self:
                rows = torch.arange(q.shape[0], device=q.device)
                d2[rows, rows + start] = math.inf
            out[start : start + step] = torch.topk(d2, k, dim=1, largest=False).values
            bar.step(f"rows {start + q.shape[0]} of {queries.shape[0]}")
    return out


def gaussian_kde_2d(
    points: torch.Tensor,
    weights: torch.Tensor,
    bandwidth: torch.Tensor,
    queries: torch.Tensor,
) -> torch.Tensor:
    """Weighted product-Gaussian kernel density of 2-D ``points`` at ``queries``.

    ``f(x) = sum_j w_j N(x_1; p_j1, h_1^2) N(x_2; p_j2, h_2^2) / sum_j w_j``.

    Parameters
    ----------
    points : Tensor of shape (n, 2)
    weights : Tensor of shape (n,)
        Non-negative, positive sum.
    bandwidth : Tensor of shape (2,)
        Positive kernel standard deviations.
    queries : Tensor of shape (m, 2)

    Returns
    -------
    Tensor of shape (m,)
    """
    scaled_points = points / bandwidth
    scaled_queries = queries / bandwidth
    norm = weights.sum() * (2.0 * math.pi) * bandwidth.prod()
    out = torch.empty(queries.shape[0], dtype=queries.dtype, device=queries.device)
    step = _chunk_rows(points.shape[0])
    for start in range(0, queries.shape[0], step):
        q = scaled_queries[start : start + step]
        d2 = torch.cdist(q, scaled_points).square_()
        out[start : start + step] = torch.exp(d2.mul_(-0.5)) @ weights
    return out / norm


def knn_proximity(
    memory: np.ndarray, queries: np.ndarray | None, k: int, *, device, verbose=0
) -> np.ndarray:
    """ProCal's proximity ``mean_k exp(-D_k)`` of each query.

    Parameters
    ----------
    memory : ndarray of shape (n, d)
        Neighbour memory (L2-normalised embeddings).
    queries : ndarray of shape (m, d) or None
        None: the proximity of the memory rows themselves, a row not
        counting itself (see :func:`knn_sq_distances`).
    k : int
        Number of neighbours.
    device : {"auto", "cpu", "cuda", "cuda:N"} or torch.device
    verbose : int, default=0
        A progress bar over the blocks of queries.

    Returns
    -------
    ndarray of shape (m,) (or (n,))
    """
    device = resolve_device(device)
    memory_t = to_tensor(memory, device, torch.float64)
    exclude_self = queries is None
    queries_t = memory_t if exclude_self else to_tensor(queries, device, torch.float64)
    d2 = knn_sq_distances(
        queries_t, memory_t, k, exclude_self=exclude_self, verbose=verbose
    )
    return to_numpy(torch.exp(-d2).mean(dim=1))


def density_ratio_confidence(
    queries: np.ndarray,
    *,
    points_correct: np.ndarray,
    weights_correct: np.ndarray,
    bandwidth_correct: np.ndarray,
    points_wrong: np.ndarray,
    weights_wrong: np.ndarray,
    bandwidth_wrong: np.ndarray,
    ratio: float,
    device,
) -> np.ndarray:
    """Bayes' rule over two densities: ``f1 / max(f1 + ratio f0, 1e-10)``.

    ``f1`` and ``f0`` are the :func:`gaussian_kde_2d` densities of the
    correctly and wrongly classified points at ``queries``.

    Parameters
    ----------
    queries : ndarray of shape (m, 2)
        ``(confidence, proximity)`` of each query.
    points_correct, points_wrong : ndarray of shape (n, 2)
    weights_correct, weights_wrong : ndarray of shape (n,)
    bandwidth_correct, bandwidth_wrong : ndarray of shape (2,)
    ratio : float
        ``rho``, the weight of the wrong over the correct predictions.
    device : {"auto", "cpu", "cuda", "cuda:N"} or torch.device

    Returns
    -------
    ndarray of shape (m,)
    """
    device = resolve_device(device)
    q = to_tensor(queries, device, torch.float64)

    def density(points, weights, bandwidth):
        return gaussian_kde_2d(
            to_tensor(points, device, torch.float64),
            to_tensor(weights, device, torch.float64),
            to_tensor(bandwidth, device, torch.float64),
            q,
        )

    f1 = density(points_correct, weights_correct, bandwidth_correct)
    f0 = density(points_wrong, weights_wrong, bandwidth_wrong)
    return to_numpy(f1 / torch.clamp(f1 + ratio * f0, min=1e-10))
