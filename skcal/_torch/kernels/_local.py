"""Local calibration error (Barbera et al.): a Gaussian kernel within confidence bins.

For one group of points (one class-k confidence bin) with features ``phi``,
residuals ``r_j = p_jk - y_jk`` and weights ``w_j``, the anchor error is

``LCE(i) = sum_j w_j K_ij r_j / sum_j w_j K_ij``,
``K_ij = exp(-|phi_i - phi_j|^2 / (2 bandwidth^2))`` (``K_ii = 1``),

and the effective sample size of the neighbourhood, self excluded, is
Kish's ``(sum_{j != i} w_j K_ij)^2 / sum_{j != i} w_j K_ij^2``.

The exponents of a tile come from one matrix product of augmented vectors,
``[phi_i / b^2, -|phi_i|^2 / (2 b^2), 1] . [phi_j, 1, -|phi_j|^2 / (2 b^2)]``;
the tile is exponentiated in place and reduced by a second product into
float64 sums. Memory is one tile; an ``n x n`` matrix is never built.

:func:`local_anchor_errors` is the entry point: it takes numpy arrays and the
groups chosen by :mod:`skcal.metrics._local`, and returns numpy arrays.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from .._constants import DIVISOR_FLOOR
from .._convert import to_numpy, to_tensor
from .._device import resolve_device

#: Exponents are floored here: exp(-700) ~ 1e-304 is negligible next to
#: K_ii = 1 but stays a normal float64 (subnormals make exp slow).
_MIN_EXPONENT = -700.0
#: Side of the square tiles of the kernel matrix (CPU: a 1024 x 1024
#: float64 tile is 8 MB, so it stays in cache between its passes).
_TILE = 1024
_GPU_TILE = 8192
#: Rough cost of one exp, in multiply-adds, for choosing the kernel pass.
_EXP_COST = 20
#: Memory allowed for the group columns of the one-pass kernel (bytes).
_ONE_PASS_BYTES = 512 * 2**20


@dataclass(frozen=True)
class LocalErrorsResult:
    """Anchor errors (and effective sample sizes) of every group.

    Attributes
    ----------
    lce : ndarray of shape (n_samples, n_classes)
        Signed anchor error ``LCE_k(i)`` of sample ``i`` in its class-``k``
        group; NaN where the sample is in no group of class ``k``.
    ess : ndarray of shape (n_samples, n_classes) or None
        Kish's effective number of neighbours of each anchor, NaN likewise;
        None unless asked for.
    """

    lce: np.ndarray
    ess: np.ndarray | None


def local_anchor_errors(
    phi: np.ndarray,
    resid: np.ndarray,
    weight: np.ndarray,
    groups: list,
    bandwidth: float,
    *,
    device,
    with_ess: bool = False,
) -> LocalErrorsResult:
    """Anchor errors of every (class, confidence bin) group, from numpy arrays.

    Each group is reduced on its own (:func:`_group_errors`), or, when
    cheaper and the ESS is not asked for, all groups share one kernel pass
    over the union of their members (:func:`_grouped_kernel_sums`); both give
    the same sums.

    Parameters
    ----------
    phi : ndarray of shape (n_samples, n_features)
        Features (float64).
    resid : ndarray of shape (n_samples, n_classes)
        ``p_jk - y_jk``.
    weight : ndarray of shape (n_samples,)
        Non-negative sample weights.
    groups : list of (int, ndarray of int)
        ``(k, members)`` of every group: the class and the sorted sample
        indices of one kept confidence bin of that class.
    bandwidth : float
        Standard deviation of the Gaussian kernel.
    device : str or torch.device
        Device of the kernel computation, as accepted by
        :func:`skcal._torch.resolve_device`.
    with_ess : bool, default=False
        Also compute the effective sample sizes.

    Returns
    -------
    LocalErrorsResult
    """
    dev = resolve_device(device)
    n, n_classes = resid.shape
    phi_t = to_tensor(phi, dev, torch.float64)
    lce = np.full((n, n_classes), np.nan)
    ess = np.full((n, n_classes), np.nan) if with_ess else None
    if not with_ess and _one_kernel_pass_is_cheaper(groups, phi.shape[1]):
        _all_groups_at_once(lce, groups, phi_t, resid, weight, bandwidth, dev)
        return LocalErrorsResult(lce=lce, ess=ess)
    w_t = to_tensor(weight, dev, torch.float64)
    resid_t = to_tensor(resid, dev, torch.float64)
    for k, idx in groups:
        idx_t = to_tensor(idx, dev, torch.int64)
        lce_b, ess_b = _group_errors(
            phi_t[idx_t], resid_t[idx_t, k], w_t[idx_t], bandwidth, with_ess=with_ess
        )
        lce[idx, k] = to_numpy(lce_b)
        if with_ess:
            ess[idx, k] = to_numpy(ess_b)
    return LocalErrorsResult(lce=lce, ess=ess)


def _one_kernel_pass_is_cheaper(groups, n_features: int) -> bool:
    """Whether one kernel pass over all the points beats one pass per group.

    A pass per group evaluates the kernel for every pair of each group: a
    pair that shares the bins of several classes is evaluated once per
    class. One pass evaluates every pair once and reduces it against two
    columns per group. Both give the same sums.
    """
    if not groups:
        return False
    members = np.unique(np.concatenate([idx for _, idx in groups]))
    m, g = len(members), len(groups)
    if 2 * (2 * g) * m * 8 > _ONE_PASS_BYTES:
        return False
    pair = 2 * (n_features + 2) + _EXP_COST
    per_group = sum(len(idx) ** 2 for _, idx in groups) * (pair + 4)
    one_pass = m * m * (pair + 4 * g)
    return one_pass < per_group


def _all_groups_at_once(lce, groups, phi_t, resid, w, bandwidth, dev):
    """Fill ``lce`` for every group from one pass of the kernel."""
    members = np.unique(np.concatenate([idx for _, idx in groups]))
    rhs = np.zeros((2 * len(groups), len(members)))
    positions = []
    for g, (k, idx) in enumerate(groups):
        pos = np.searchsorted(members, idx)
        rhs[2 * g, pos] = w[idx] * resid[idx, k]
        rhs[2 * g + 1, pos] = w[idx]
        positions.append(pos)
    members_t = to_tensor(members, dev, torch.int64)
    sums = to_numpy(
        _grouped_kernel_sums(
            phi_t[members_t], to_tensor(rhs, dev, torch.float64), bandwidth
        )
    )
    for g, ((k, idx), pos) in enumerate(zip(groups, positions)):
        lce[idx, k] = sums[pos, 2 * g] / sums[pos, 2 * g + 1]


def _group_errors(
    phi: torch.Tensor,
    resid: torch.Tensor,
    weight: torch.Tensor,
    bandwidth: float,
    *,
    with_ess: bool = False,
):
    """Anchor errors (and ESS) of one group of points.

    The kernel matrix is symmetric, so only tiles on and above the diagonal
    are computed; each off-diagonal tile adds to the sums of its rows and,
    transposed, of its columns.

    Parameters
    ----------
    phi : Tensor of shape (m, d)
        Features of the group (float64).
    resid : Tensor of shape (m,)
        ``p_jk - y_jk``.
    weight : Tensor of shape (m,)
        Non-negative sample weights.
    bandwidth : float
        Standard deviation of the Gaussian kernel.
    with_ess : bool
        Also return the effective sample sizes.

    Returns
    -------
    lce : Tensor of shape (m,)
    ess : Tensor of shape (m,) or None
        Kish's effective number of neighbours, ``(sum_j w_j K_ij)^2 / sum_j
        (w_j K_ij)^2`` over ``j != i``; 0 where the neighbourhood weight is at
        most 1e-12.
    """
    m = phi.shape[0]
    # (2, m), contiguous: both k @ rhs[:, cols].T and rhs[:, rows] @ k read k
    # row-major (k.T @ rhs is several times slower)
    rhs = torch.stack([weight * resid, weight])
    sums = torch.zeros(m, 2, dtype=phi.dtype, device=phi.device)
    if with_ess:  # neighbour sums of K and K^2, self excluded (no cancellation)
        nb = torch.zeros(m, dtype=phi.dtype, device=phi.device)
        nb2 = torch.zeros(m, dtype=phi.dtype, device=phi.device)
        weight_sq = weight * weight
    for rows, cols, k, diagonal in _kernel_tiles(phi, bandwidth):
        part = k @ rhs[:, cols].T
        sums[rows] += part
        if not diagonal:
            part_t = (rhs[:, rows] @ k).T
            sums[cols] += part_t
        if not with_ess:
            continue
        if diagonal:
            k.fill_diagonal_(0.0)
            nb[rows] += k @ weight[cols]
        else:
            nb[rows] += part[:, 1]
            nb[cols] += part_t[:, 1]
        k.mul_(k)  # Kish: sums of (w_j K_ij)^2, unchanged when w is scaled
        nb2[rows] += k @ weight_sq[cols]
        if not diagonal:
            nb2[cols] += weight_sq[rows] @ k
    lce = sums[:, 0] / sums[:, 1]
    if not with_ess:
        return lce, None
    ess = torch.where(
        nb > 1e-12, nb * nb / nb2.clamp_min(DIVISOR_FLOOR), torch.zeros_like(nb)
    )
    return lce, ess


def _augmented(phi: torch.Tensor, bandwidth: float):
    """Left / right factors whose product is the tile of kernel exponents.

    Centring does not change distances, but the expansion loses precision
    when the points sit far from the origin.
    """
    c = 1.0 / (2.0 * bandwidth * bandwidth)
    phi = phi - phi.mean(dim=0)
    sq = (phi * phi).sum(dim=1, keepdim=True)
    ones = torch.ones_like(sq)
    left = torch.cat([phi * (2.0 * c), -c * sq, ones], dim=1)
    right = torch.cat([phi, ones, -c * sq], dim=1)
    return left, right


def _kernel_tiles(phi: torch.Tensor, bandwidth: float):
    """Tiles ``(rows, cols, K, diagonal)`` of the kernel matrix on and above
    its diagonal, ``K_ii = 1`` exactly; each ``K`` is a fresh tensor."""
    m = phi.shape[0]
    left, right = _augmented(phi, bandwidth)
    tile = _TILE if phi.device.type == "cpu" else _GPU_TILE
    starts = range(0, m, tile)
    for a in starts:
        rows = slice(a, min(a + tile, m))
        for b in starts[a // tile :]:
            cols = slice(b, min(b + tile, m))
            k = left[rows] @ right[cols].T  # exponents of the tile
            k.clamp_(_MIN_EXPONENT, 0.0)
            if a == b:
                k.fill_diagonal_(0.0)
            k.exp_()
            yield rows, cols, k, a == b


def _grouped_kernel_sums(
    phi: torch.Tensor, rhs: torch.Tensor, bandwidth: float
) -> torch.Tensor:
    """``sum_j K_ij rhs[j]`` for every row ``i``, all columns of ``rhs`` at once.

    The kernel matrix of all the points is computed once, tile by tile
    (symmetric: tiles on and above the diagonal only), and reduced against
    every column of ``rhs`` by one matrix product per tile. With ``rhs``
    holding, for every (class, bin) group, the weighted residuals and the
    weights of its members (zero outside), the sums of all the groups come
    from one kernel evaluation per pair of points, instead of one per pair
    and per class whose bins they share.

    Parameters
    ----------
    phi : Tensor of shape (m, d)
        Features (float64).
    rhs : Tensor of shape (r, m)
        Columns to reduce, stored row-major by column (float64).
    bandwidth : float
        Standard deviation of the Gaussian kernel.

    Returns
    -------
    sums : Tensor of shape (m, r)
    """
    sums = torch.zeros(rhs.shape[0], phi.shape[0], dtype=phi.dtype, device=phi.device)
    for rows, cols, k, diagonal in _kernel_tiles(phi, bandwidth):
        sums[:, rows] += rhs[:, cols] @ k.T
        if not diagonal:
            sums[:, cols] += rhs[:, rows] @ k
    return sums.T
