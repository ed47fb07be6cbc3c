"""Random Fourier features for the local calibration error at scale.

The Gaussian kernel ``K(x, y) = exp(-|x - y|^2 / (2 h^2))`` is the
expectation of ``cos(w . (x - y))`` over ``w ~ N(0, I / h^2)`` (Rahimi &
Recht, 2007). With ``D`` frequencies ``w_1..w_D`` and the features
``z(x) = [cos(W x), sin(W x)] / sqrt(D)`` (``2 D`` numbers),
``z(x) . z(y) = mean_d cos(w_d . (x - y))`` is an unbiased estimate of
``K(x, y)``, exactly 1 for ``x = y``. The kernel sums of the local
calibration error over a (class, confidence bin) group then factor:

``sum_j K_ij w_j r_j ~ z_i . S``, ``S = sum_j w_j r_j z_j`` (and ``T``
likewise without ``r``), so each group needs two ``2 D`` vectors, summed
over rows in any order and merged across chunks: ``O(n D d)`` work and
``O(C B D)`` memory instead of ``O(n^2 d)``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from .._convert import to_numpy, to_tensor
from .._device import resolve_device

__all__ = [
    "RFFErrorsResult",
    "RFFSumsResult",
    "rff_anchor_errors",
    "rff_frequencies",
    "rff_group_sums",
]


@dataclass(frozen=True)
class RFFSumsResult:
    """Feature sums per (class, bin) group of :func:`rff_group_sums` (numpy).

    Attributes
    ----------
    S : ndarray of shape (n_classes, n_bins, 2 D)
        ``sum_j w_j r_jk z_j`` over the rows ``j`` of each group.
    T : ndarray of shape (n_classes, n_bins, 2 D)
        ``sum_j w_j z_j`` over the same rows.
    """

    S: np.ndarray
    T: np.ndarray


@dataclass(frozen=True)
class RFFErrorsResult:
    """Approximate local errors of :func:`rff_anchor_errors` (numpy).

    Attributes
    ----------
    lce : ndarray of shape (n, n_classes)
        ``LCE_k(i)`` of every anchor; NaN outside the kept bins and for
        rows of zero weight.
    noise : ndarray of shape (n, n_classes)
        The estimated noise of each ``LCE_k(i)``: ``sqrt(spread_sq / (2 D))``
        of its group divided by its (floored) kernel sum.
    """

    lce: np.ndarray
    noise: np.ndarray


#: Numbers held by one block's largest temporary (32 MB in float64).
_BLOCK_NUMBERS = 1 << 22


def rff_frequencies(n_features: int, n_components: int, bandwidth: float, seed: int):
    """``W`` of shape (n_features, n_components), entries ``N(0, 1 / h^2)``."""
    rng = np.random.default_rng(seed)
    return rng.standard_normal((n_features, n_components)) / bandwidth


def _features(phi: torch.Tensor, omega: torch.Tensor) -> torch.Tensor:
    """``[cos, sin](phi @ omega) / sqrt(D)`` in float32.

    The projection is float64 (the phases can be large); the features and
    the products with them are float32, whose rounding (1e-7) is far below
    the random-feature noise (about ``1 / sqrt(D)``), at half the time.
    """
    proj = (phi @ omega).float()
    scale = 1.0 / np.sqrt(omega.shape[1])
    return torch.cat([torch.cos(proj), torch.sin(proj)], dim=1).mul_(scale)


def _block_rows(width: int, n_groups: int) -> int:
    return max(1, _BLOCK_NUMBERS // max(width, n_groups, 1))


def _group_matrix(values, keys, n_groups):
    """(m, n_groups) with ``values[j, k]`` at column ``keys[j, k]``."""
    out = torch.zeros(keys.shape[0], n_groups, dtype=values.dtype, device=keys.device)
    return out.scatter_(1, keys, values)


def rff_group_sums(
    phi: np.ndarray,
    resid: np.ndarray,
    weight: np.ndarray,
    bins: np.ndarray,
    omega: np.ndarray,
    n_bins: int,
    *,
    device="cpu",
) -> RFFSumsResult:
    """Per (class, bin): ``S = sum_j w_j r_jk z_j`` and ``T = sum_j w_j z_j``.

    Each block of rows is two matrix products: the (rows x groups) matrix of
    ``w_j r_jk`` (and of ``w_j``) at the columns of the rows' groups, times
    the rows' features.

    Parameters
    ----------
    phi : ndarray of shape (n, d)
    resid : ndarray of shape (n, C)
        ``p_jk - y_jk``.
    weight : ndarray of shape (n,)
    bins : ndarray of shape (n, C) of int
        Confidence bin of each row in each class.
    omega : ndarray of shape (d, D)
    n_bins : int
    device : {"auto", "cpu", "cuda", "cuda:N"} or torch.device, default="cpu"

    Returns
    -------
    RFFSumsResult
    """
    device = resolve_device(device)
    n, n_classes = resid.shape
    width, n_groups = 2 * omega.shape[1], n_classes * n_bins
    om = to_tensor(omega, device, torch.float64)
    ST = torch.zeros(2 * n_groups, width, dtype=torch.float64, device=device)
    offset = torch.arange(n_classes, device=device) * n_bins
    step = _block_rows(width, 2 * n_groups)
    for start in range(0, n, step):
        rows = slice(start, start + step)
        z = _features(to_tensor(phi[rows], device, torch.float64), om)
        w = to_tensor(weight[rows], device, torch.float64)[:, None]
        keys = to_tensor(bins[rows], device, torch.int64) + offset  # (m, C)
        r = to_tensor(resid[rows], device, torch.float64)
        values = torch.cat([w * r, w.expand_as(r)], dim=1).float()
        cols = torch.cat([keys, keys + n_groups], dim=1)
        ST += (_group_matrix(values, cols, 2 * n_groups).T @ z).double()
    shape = (n_classes, n_bins, width)
    ST = to_numpy(ST)
    return RFFSumsResult(S=ST[:n_groups].reshape(shape), T=ST[n_groups:].reshape(shape))


def rff_anchor_errors(
    phi: np.ndarray,
    weight: np.ndarray,
    bins: np.ndarray,
    kept: np.ndarray,
    S: np.ndarray,
    T: np.ndarray,
    omega: np.ndarray,
    spread_sq: np.ndarray,
    *,
    device="cpu",
) -> RFFErrorsResult:
    """Approximate ``LCE_k(i)`` of every anchor (NaN outside the kept bins).

    ``z_i . S / z_i . T`` for the anchor's group, with the denominator
    floored at the anchor's own weight (every kernel value is non-negative
    and ``K_ii = 1``) and the ratio clipped to [-1, 1], the range of the
    exact value.

    Parameters
    ----------
    phi : ndarray of shape (n, d)
    weight : ndarray of shape (n,)
    bins : ndarray of shape (n, C) of int
    kept : ndarray of shape (C, n_bins) of bool
        Groups that pass the support filter.
    S, T : ndarray of shape (C, n_bins, 2 D)
    omega : ndarray of shape (d, D)
    spread_sq : ndarray of shape (C, n_bins)
        ``sum_j w_j^2 (r_j - mean r)^2`` over each group: the numerator's
        noise is about ``sqrt(spread_sq / (2 D))``.
    device : {"auto", "cpu", "cuda", "cuda:N"} or torch.device, default="cpu"

    Returns
    -------
    RFFErrorsResult
    """
    device = resolve_device(device)
    n, n_classes = bins.shape
    n_bins, width = S.shape[1], S.shape[2]
    om = to_tensor(omega, device, torch.float64)
    ST_t = to_tensor(
        np.concatenate([S.reshape(-1, width), T.reshape(-1, width)]),
        device,
        torch.float32,
    )
    n_groups = S.shape[0] * n_bins
    kept_t = to_tensor(kept.reshape(-1), device, torch.bool)
    spread = to_tensor(np.sqrt(spread_sq.reshape(-1) / width), device, torch.float64)
    offset = torch.arange(n_classes, device=device) * n_bins
    out, noise = np.empty((n, n_classes)), np.empty((n, n_classes))
    step = _block_rows(width, 2 * n_groups)
    for start in range(0, n, step):
        rows = slice(start, start + step)
        z = _features(to_tensor(phi[rows], device, torch.float64), om)
        w = to_tensor(weight[rows], device, torch.float64)[:, None]
        keys = to_tensor(bins[rows], device, torch.int64) + offset
        both = (z @ ST_t.T).double()  # (m, 2 groups): each row reads its own
        num = both.gather(1, keys)
        den = torch.maximum(both.gather(1, keys + n_groups), w)
        lce = (num / den).clamp_(-1.0, 1.0)
        keep = kept_t[keys] & (w > 0)
        out[rows] = to_numpy(torch.where(keep, lce, torch.nan))
        noise[rows] = to_numpy(spread[keys] / den)
    return RFFErrorsResult(lce=out, noise=noise)
