"""Shared binning of scores: one implementation for every binned metric and plot.

Bin-edge convention (``closed``):

* ``"left"`` (default): bins are ``[l, u)`` and the last bin is closed,
  ``[l, 1]``, so scores of exactly 0 and 1 both land in a bin;
* ``"right"``: bins are ``(l, u]`` and the first bin is closed, ``[0, u]``
  (the focal-calibration convention, without its silent drop of ``p = 0``).

Equal-width bins (edges ``i / n_bins``) are found by integer arithmetic,
``floor(score * n_bins)`` corrected by one comparison with each neighbouring
edge, which gives exactly the bins of a binary search of the edges at a
fraction of its cost. Classwise tables of a whole probability matrix are
built in row blocks: only the entries above the first edge (at most
``n_bins`` per row, since rows sum to one) are binned one by one; the first
bin of every class is summed densely.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: Bytes of float64 scratch per row block of the classwise tables.
_BLOCK_BYTES = 1 << 21


@dataclass
class BinStatistics:
    """Per-bin summaries of (score, target) pairs.

    Attributes
    ----------
    edges : ndarray of shape (n_bins + 1,)
        Bin edges.
    count : ndarray of shape (n_bins,)
        Number of samples in each bin.
    weight : ndarray of shape (n_bins,)
        Sum of sample weights in each bin.
    mean_score : ndarray of shape (n_bins,)
        Weighted mean score per bin (NaN for empty bins).
    mean_target : ndarray of shape (n_bins,)
        Weighted mean target per bin (NaN for empty bins).
    """

    edges: np.ndarray
    count: np.ndarray
    weight: np.ndarray
    mean_score: np.ndarray
    mean_target: np.ndarray

    @property
    def nonempty(self) -> np.ndarray:
        """Mask of bins with positive total weight."""
        return self.weight > 0


def uniform_edges(n_bins: int) -> np.ndarray:
    """Edges ``i / n_bins`` of equal-width bins on [0, 1].

    ``i / n`` is correctly rounded, so an edge equals the literal users write
    (0.6, not the 0.6000000000000001 of ``np.linspace``).
    """
    return np.arange(n_bins + 1) / n_bins


def bin_edges(
    scores: np.ndarray,
    n_bins: int,
    strategy: str = "uniform",
    sample_weight: np.ndarray | None = None,
) -> np.ndarray:
    """Edges of ``n_bins`` bins on [0, 1].

    ``"uniform"`` gives equal-width bins. ``"quantile"`` gives equal-mass
    bins: with unit weights the edges are
    ``np.interp(linspace(0, n, n_bins + 1), arange(n), sort(scores))``
    (AdaECE, Nguyen & O'Connor 2015; Mukhoti et al. 2020); with weights each
    sorted score sits at its cumulative weight before it, scaled to ``n``.
    """
    if strategy == "uniform":
        return uniform_edges(n_bins)
    if strategy != "quantile":
        raise ValueError(f"strategy must be 'uniform' or 'quantile', got {strategy!r}.")
    scores = np.asarray(scores)
    n = scores.size
    if sample_weight is None:
        # the sorted values are those of a stable argsort; only they matter
        sorted_scores = np.sort(scores, axis=None)
        positions = np.arange(n, dtype=np.float64)
    else:
        order = np.argsort(scores, kind="stable")
        sorted_scores = scores[order]
        w = np.asarray(sample_weight)[order]
        positions = n * (np.cumsum(w) - w) / w.sum()
    return np.interp(np.linspace(0.0, n, n_bins + 1), positions, sorted_scores)


def _is_uniform(edges: np.ndarray) -> bool:
    """Whether ``edges`` are exactly ``uniform_edges(len(edges) - 1)``."""
    n_bins = len(edges) - 1
    return (
        n_bins >= 1
        and edges.ndim == 1
        and edges.dtype == np.float64
        and edges[0] == 0.0
        and edges[-1] == 1.0
        and np.array_equal(edges, uniform_edges(n_bins))
    )


def _uniform_bins(scores: np.ndarray, n_bins: int, closed: str) -> np.ndarray:
    """:func:`assign_bins` for the edges ``i / n_bins``, without a search.

    ``floor(score * n_bins)`` is off by at most one from the searched bin (a
    product and an edge are each within half an ulp of the exact values);
    one comparison with each neighbouring edge corrects it. NaN lands in the
    last bin and out-of-range scores in the end bins, as with the search.
    Blocks of 32768 scores keep the temporaries in cache.
    """
    edges = uniform_edges(n_bins)
    lower, upper = edges[:-1], edges[1:]
    below, above = (np.less, np.greater_equal)
    if closed != "left":  # largest i with edges[i] < score
        below, above = (np.less_equal, np.greater)
    scores = np.asarray(scores)
    out = np.empty(scores.shape, dtype=np.intp)
    flat_scores, flat_out = scores.reshape(-1), out.reshape(-1)
    step = 1 << 15
    guess = np.empty(min(step, flat_scores.size))
    flip = np.empty(guess.size, dtype=bool)
    with np.errstate(invalid="ignore", over="ignore"):
        for start in range(0, flat_scores.size, step):
            s = flat_scores[start : start + step]
            idx, g, f = flat_out[start : start + step], guess[: len(s)], flip[: len(s)]
            np.multiply(s, n_bins, out=g, dtype=np.float64)
            np.fmin(g, n_bins - 1, out=g)  # NaN -> last bin
            np.fmax(g, 0, out=g)
            np.copyto(idx, g, casting="unsafe")  # floor: g >= 0
            np.take(lower, idx, out=g, mode="clip")
            idx -= below(s, g, out=f)
            np.take(upper, idx, out=g, mode="clip")
            idx += above(s, g, out=f)
    np.clip(out, 0, n_bins - 1, out=out)
    return out


def assign_bins(
    scores: np.ndarray, edges: np.ndarray, closed: str = "left"
) -> np.ndarray:
    """Index in ``[0, len(edges) - 2]`` of the bin holding each score."""
    if closed not in ("left", "right"):
        raise ValueError(f"closed must be 'left' or 'right', got {closed!r}.")
    edges = np.asarray(edges)
    if _is_uniform(edges):
        return _uniform_bins(scores, len(edges) - 1, closed)
    side = "right" if closed == "left" else "left"
    idx = np.searchsorted(edges, scores, side=side) - 1
    return np.clip(idx, 0, len(edges) - 2)


def binned_statistics(
    scores: np.ndarray,
    targets: np.ndarray,
    sample_weight: np.ndarray | None = None,
    *,
    n_bins: int = 15,
    strategy: str = "uniform",
    closed: str = "left",
) -> BinStatistics:
    """Bin ``scores`` and average scores and targets per bin.

    The single binning behind every binned metric and reliability plot.

    Parameters
    ----------
    scores : array-like of shape (n_samples,)
        Scores in [0, 1] (confidences, or one class's probabilities).
    targets : array-like of shape (n_samples,)
        Outcomes in [0, 1] (correctness, or ``y == k``).
    sample_weight : array-like of shape (n_samples,), default=None
        Sample weights.
    n_bins : int, default=15
        Number of bins.
    strategy : {"uniform", "quantile"}, default="uniform"
        Equal-width or equal-mass bins, see :func:`bin_edges`.
    closed : {"left", "right"}, default="left"
        Bin-edge convention, see the module docstring.

    Returns
    -------
    BinStatistics

    Examples
    --------
    >>> from skcal.metrics import binned_statistics
    >>> stats = binned_statistics([0.1, 0.15, 0.9], [0, 1, 1], n_bins=2)
    >>> stats.count, stats.mean_score, stats.mean_target
    (array([2, 1]), array([0.125, 0.9  ]), array([0.5, 1. ]))
    """
    scores = np.asarray(scores, dtype=np.float64)
    targets = np.asarray(targets)
    if targets.dtype != np.bool_:
        targets = np.asarray(targets, dtype=np.float64)
    if sample_weight is not None:
        sample_weight = np.asarray(sample_weight, dtype=np.float64)
    edges = bin_edges(scores, n_bins, strategy, sample_weight)
    idx = assign_bins(scores, edges, closed)
    count = np.bincount(idx, minlength=n_bins)
    if sample_weight is None:  # unit weights: the same sums, no products
        weight = count.astype(np.float64)
        sum_score = np.bincount(idx, weights=scores, minlength=n_bins)
        sum_target = np.bincount(idx, weights=targets, minlength=n_bins)
    else:
        w = sample_weight
        weight = np.bincount(idx, weights=w, minlength=n_bins)
        sum_score = np.bincount(idx, weights=w * scores, minlength=n_bins)
        sum_target = np.bincount(idx, weights=w * targets, minlength=n_bins)
    mean_score = bin_means(weight, sum_score)
    mean_target = bin_means(weight, sum_target)
    return BinStatistics(edges, count, weight, mean_score, mean_target)


def bin_means(weight: np.ndarray, total: np.ndarray) -> np.ndarray:
    """``total / weight`` per bin, NaN for empty bins."""
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(weight > 0, total / weight, np.nan)


def binned_errors(
    weight: np.ndarray,
    mean_score: np.ndarray,
    mean_target: np.ndarray,
    norm: str = "l1",
) -> np.ndarray:
    """Calibration error of each row of per-bin means; empty bins are skipped.

    Parameters
    ----------
    weight, mean_score, mean_target : ndarray of shape (n_rows, n_bins)
        Total weight, mean score and mean target per bin (NaN means in
        empty bins).
    norm : {"l1", "l2", "max"}, default="l1"
        See :func:`binned_calibration_error`.

    Returns
    -------
    ndarray of shape (n_rows,)
    """
    if norm not in ("l1", "l2", "max"):
        raise ValueError(f"norm must be 'l1', 'l2' or 'max', got {norm!r}.")
    keep = weight > 0
    kept = np.where(keep, weight, 0.0)
    gaps = np.where(keep, np.abs(mean_target - mean_score), 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):  # NaN: no weight at all
        frac = kept / kept.sum(axis=1, keepdims=True)
    if norm == "l1":
        return np.einsum("ij,ij->i", frac, gaps)
    if norm == "l2":
        return np.sqrt(np.einsum("ij,ij->i", frac, gaps**2))
    return np.where(keep, gaps, -np.inf).max(axis=1)


def binned_calibration_error(stats: BinStatistics, norm: str = "l1") -> float:
    """Calibration error of binned statistics; empty bins are skipped.

    ``"l1"``: ``sum_b w_b |acc_b - conf_b|``; ``"l2"``: the square root of
    ``sum_b w_b (acc_b - conf_b)^2``; ``"max"``: ``max_b |acc_b - conf_b|``,
    with ``w_b`` the fraction of the total weight in bin ``b``.
    """
    return float(
        binned_errors(
            stats.weight[None], stats.mean_score[None], stats.mean_target[None], norm
        )[0]
    )


def classwise_tables(
    proba: np.ndarray,
    y_index: np.ndarray,
    sample_weight: np.ndarray | None = None,
    *,
    n_bins: int = 15,
    closed: str = "left",
):
    """Per-class, per-bin sums of every column of ``proba`` on equal-width bins.

    The tables of :func:`binned_statistics` applied to each column ``k``
    with targets ``y_index == k``, for all columns at once, in row blocks of
    bounded memory. Entries above the first edge (at most ``n_bins`` per
    row when rows sum to one) are binned individually and summed with one
    ``np.bincount`` over (class, bin) keys; the first bin of each class is
    the rest of its column, summed densely in float64.

    Parameters
    ----------
    proba : ndarray of shape (n_samples, n_classes)
        Validated probabilities (float32 or float64, in [0, 1]).
    y_index : ndarray of shape (n_samples,)
        Column of each sample's label.
    sample_weight : ndarray of shape (n_samples,), default=None
        Sample weights; None means unit weights.
    n_bins : int, default=15
        Number of bins.
    closed : {"left", "right"}, default="left"
        Bin-edge convention.

    Returns
    -------
    count : ndarray of shape (n_classes, n_bins) of int64
    weight, sum_score, sum_target : ndarray of shape (n_classes, n_bins)
        Total weight, weighted score sum and weighted target sum per bin.
    """
    n, n_classes = proba.shape
    size = n_classes * n_bins
    edges = uniform_edges(n_bins)
    # an entry is outside the first bin iff it is above the first edge
    first = edges[1] if n_bins > 1 else np.inf
    count = np.zeros(size, dtype=np.int64)
    sum_score = np.zeros(size)
    weight = None if sample_weight is None else np.zeros(size)
    first_score = np.zeros(n_classes)
    first_weight = None if sample_weight is None else np.zeros(n_classes)
    step = max(1, _BLOCK_BYTES // (8 * max(n_classes, 1)))
    buf = np.empty((min(step, n), n_classes))
    for start in range(0, n, step):
        block = buf[: min(step, n - start)]
        block[...] = proba[start : start + step]  # float64, in cache
        above = block >= first if closed == "left" else block > first
        flat = np.flatnonzero(above)
        scores = block.ravel()[flat]
        cols = flat % n_classes
        keys = cols * n_bins + _uniform_bins(scores, n_bins, closed)
        count += np.bincount(keys, minlength=size)
        block.ravel()[flat] = 0.0  # what is left is the first bin
        if sample_weight is None:
            sum_score += np.bincount(keys, weights=scores, minlength=size)
            first_score += block.sum(axis=0)
        else:
            w_block = sample_weight[start : start + len(block)]
            w_rows = w_block[flat // n_classes]
            weight += np.bincount(keys, weights=w_rows, minlength=size)
            sum_score += np.bincount(keys, weights=w_rows * scores, minlength=size)
            # einsum, not BLAS: no threads started for a block in cache
            first_score += np.einsum("i,ij->j", w_block, block)
            np.logical_not(above, out=above)
            block[...] = above
            first_weight += np.einsum("i,ij->j", w_block, block)
    count = count.reshape(n_classes, n_bins)
    sum_score = sum_score.reshape(n_classes, n_bins)
    count[:, 0] = n - count[:, 1:].sum(axis=1)
    sum_score[:, 0] = first_score
    if sample_weight is None:
        weight = count.astype(np.float64)
    else:
        weight = weight.reshape(n_classes, n_bins)
        weight[:, 0] = first_weight
    # targets: only the true class of each row has y == k
    true_scores = np.asarray(
        np.take_along_axis(proba, y_index[:, None], axis=1)[:, 0], dtype=np.float64
    )
    keys = y_index * n_bins + _uniform_bins(true_scores, n_bins, closed)
    sum_target = np.bincount(keys, weights=sample_weight, minlength=size)
    sum_target = sum_target.astype(np.float64).reshape(n_classes, n_bins)
    return count, weight, sum_score, sum_target
