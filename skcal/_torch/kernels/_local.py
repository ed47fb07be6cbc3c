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
"""

from __future__ import annotations

import torch

#: Exponents are floored here: exp(-700) ~ 1e-304 is negligible next to
#: K_ii = 1 but stays a normal float64 (subnormals make exp slow).
_MIN_EXPONENT = -700.0
#: Side of the square tiles of the kernel matrix (CPU: a 1024 x 1024
#: float64 tile is 8 MB, so it stays in cache between its passes).
_TILE = 1024
_GPU_TILE = 8192


def local_errors(
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
    ess = torch.where(nb > 1e-12, nb * nb / nb2.clamp_min(1e-300), torch.zeros_like(nb))
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


def grouped_kernel_sums(
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
