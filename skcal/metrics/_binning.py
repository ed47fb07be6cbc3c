"""Shared binning of scores: one implementation for every binned metric and plot.

Bin-edge convention (``closed``):

* ``"left"`` (default): bins are ``[l, u)`` and the last bin is closed,
  ``[l, 1]``, so scores of exactly 0 and 1 both land in a bin;
* ``"right"``: bins are ``(l, u]`` and the first bin is closed, ``[0, u]``
  (the focal-calibration convention, without its silent drop of ``p = 0``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


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
        # i / n is correctly rounded, so an edge equals the literal users write
        # (0.6, not the 0.6000000000000001 of np.linspace).
        return np.arange(n_bins + 1) / n_bins
    if strategy != "quantile":
        raise ValueError(f"strategy must be 'uniform' or 'quantile', got {strategy!r}.")
    order = np.argsort(scores, kind="stable")
    sorted_scores = scores[order]
    n = sorted_scores.size
    if sample_weight is None:
        positions = np.arange(n, dtype=np.float64)
    else:
        w = sample_weight[order]
        positions = n * (np.cumsum(w) - w) / w.sum()
    return np.interp(np.linspace(0.0, n, n_bins + 1), positions, sorted_scores)


def assign_bins(
    scores: np.ndarray, edges: np.ndarray, closed: str = "left"
) -> np.ndarray:
    """Index in ``[0, len(edges) - 2]`` of the bin holding each score."""
    if closed == "left":
        idx = np.searchsorted(edges, scores, side="right") - 1
    elif closed == "right":
        idx = np.searchsorted(edges, scores, side="left") - 1
    else:
        raise ValueError(f"closed must be 'left' or 'right', got {closed!r}.")
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
    targets = np.asarray(targets, dtype=np.float64)
    w = np.ones_like(scores) if sample_weight is None else sample_weight
    edges = bin_edges(scores, n_bins, strategy, sample_weight)
    idx = assign_bins(scores, edges, closed)
    count = np.bincount(idx, minlength=n_bins)
    weight = np.bincount(idx, weights=w, minlength=n_bins)
    sum_score = np.bincount(idx, weights=w * scores, minlength=n_bins)
    sum_target = np.bincount(idx, weights=w * targets, minlength=n_bins)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean_score = np.where(weight > 0, sum_score / weight, np.nan)
        mean_target = np.where(weight > 0, sum_target / weight, np.nan)
    return BinStatistics(edges, count, weight, mean_score, mean_target)


def binned_calibration_error(stats: BinStatistics, norm: str = "l1") -> float:
    """Calibration error of binned statistics; empty bins are skipped.

    ``"l1"``: ``sum_b w_b |acc_b - conf_b|``; ``"l2"``: the square root of
    ``sum_b w_b (acc_b - conf_b)^2``; ``"max"``: ``max_b |acc_b - conf_b|``,
    with ``w_b`` the fraction of the total weight in bin ``b``.
    """
    keep = stats.nonempty
    gaps = np.abs(stats.mean_target[keep] - stats.mean_score[keep])
    frac = stats.weight[keep] / stats.weight[keep].sum()
    if norm == "l1":
        return float(np.dot(frac, gaps))
    if norm == "l2":
        return float(np.sqrt(np.dot(frac, gaps**2)))
    if norm == "max":
        return float(gaps.max())
    raise ValueError(f"norm must be 'l1', 'l2' or 'max', got {norm!r}.")
