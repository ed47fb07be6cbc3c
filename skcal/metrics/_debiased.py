"""Debiased L2 calibration error (Kumar, Liang & Ma, 2019)."""

from __future__ import annotations

from numbers import Integral

import numpy as np

from ..utils._constraints import METRIC_ARRAYS
from ..utils._sklearn import Interval, StrOptions, validate_params
from ..utils._validation import check_proba_targets
from ._dask import dask_dispatch
from ._ece import top_label
from ._groups import groupable

__all__ = ["l2_calibration_error"]


#: Entries of one block of columns (rows x columns) processed at once.
_BLOCK_ENTRIES = 1 << 21


def reference_edges(scores: np.ndarray, n_bins: int, strategy: str) -> np.ndarray:
    """Upper bin edges of each column, as ``uncertainty-calibration`` draws them.

    ``scores`` is ``(n, m)``; the result is ``(n_edges, m)`` (a column of
    ``(n_bins,)`` for ``"uniform"``), non-decreasing down each column and
    ending at 1.0. Bin ``b`` of a column is ``(e[b-1], e[b]]`` (the first
    is ``[0, e[0]]``). ``"quantile"`` is its ``get_equal_bins``: the sorted
    scores are split by ``np.array_split`` into ``min(n_bins, n)`` runs and
    each inner edge is the midpoint between the last score of a run and the
    first of the next; ``"uniform"`` is ``get_equal_prob_bins``
    (``i / n_bins``); ``"discrete"`` is ``get_discrete_bins`` (midpoints
    between consecutive distinct scores, one column only). The reference
    merges duplicate edges; a repeated edge here only leaves an empty bin,
    the same partition of the scores.
    """
    if strategy == "uniform":
        return (np.arange(1, n_bins + 1) / n_bins)[:, None]
    s = np.sort(np.asarray(scores, dtype=np.float64), axis=0)
    if strategy == "discrete":
        u = np.unique(s[:, 0])
        inner = ((u[:-1] + u[1:]) / 2.0)[:, None]
    else:
        n = len(s)
        parts = min(n_bins, n)
        q, r = divmod(n, max(parts, 1))
        sizes = np.full(max(parts, 1), q)
        sizes[:r] += 1
        ends = np.cumsum(sizes)[:-1]
        inner = (s[ends - 1] + s[ends]) / 2.0
    return np.vstack([inner, np.ones((1, s.shape[1]))])


def bin_sums(scores, targets, w, edges, n_slots):
    """``(m, 5, n_slots)`` per-bin sums of each of the ``m`` columns.

    For each bin: rows of positive weight, weight, weighted score and
    target sums, squared-weight sum (the sufficient statistics). A score's
    bin is the number of its column's edges below it (``searchsorted``
    left, the reference's), scores above the last edge in the last bin.
    ``targets`` is ``(n, m)`` 0/1, or for classwise blocks the ``(n,)``
    column within the block of each row's event (outside: -1 or >= m).
    """
    n, m = scores.shape
    idx = np.zeros((n, m), dtype=np.int64)
    for edge in edges[:-1]:
        idx += scores > edge
    idx += n_slots * np.arange(m)  # one key per (column, bin)
    keys, size = idx.ravel(), m * n_slots
    if targets.ndim == 1:  # the event's column: one key per row at most
        hit = (targets >= 0) & (targets < m)
        rows = np.flatnonzero(hit)
        target_keys, target_w = idx[rows, targets[rows]], w[rows]
    else:
        target_keys, target_w = keys, (w[:, None] * targets).ravel()
    target_sum = np.bincount(target_keys, weights=target_w, minlength=size)
    if np.all(w == 1.0):  # no weights: counts are the sums of weights
        count = np.bincount(keys, minlength=size).astype(np.float64)
        sums = [count, count, np.bincount(keys, scores.ravel(), size), count]
    else:
        wide = np.repeat(w, m)
        sums = [
            np.bincount(keys, weights=(wide > 0).astype(np.float64), minlength=size),
            np.bincount(keys, weights=wide, minlength=size),
            np.bincount(keys, weights=wide * scores.ravel(), minlength=size),
            np.bincount(keys, weights=wide * wide, minlength=size),
        ]
    sums.insert(3, target_sum)
    return np.stack([r.reshape(m, n_slots) for r in sums], axis=1)


def squared_errors(sums: np.ndarray, debias: bool) -> np.ndarray:
    """``sum_b (W_b / W) [(conf_b - acc_b)^2 - bias_b]`` per column.

    ``sums`` is :func:`bin_sums`'s ``(m, 5, n_bins)``. ``bias_b = acc_b (1 -
    acc_b) / (n_b - 1)`` with ``n_b`` Kish's effective size ``W_b^2 / sum
    w^2`` of the bin (its row count without weights); a bin with fewer than
    two rows of positive weight contributes 0, as in the reference. Without
    ``debias``, the plug-in estimate.
    """
    count, weight, sum_score, sum_target, sum_w2 = np.moveaxis(sums, 1, 0)
    seen = weight > 0
    safe = np.where(seen, weight, 1.0)
    mean_score, mean_target = sum_score / safe, sum_target / safe
    error = (mean_score - mean_target) ** 2
    if debias:
        several = count >= 2
        n_eff = np.where(several, weight**2 / np.where(several, sum_w2, 1.0), 2.0)
        bias = mean_target * (1.0 - mean_target) / (n_eff - 1.0)
        error = np.where(several, error - bias, 0.0)
    share = weight / weight.sum(axis=-1, keepdims=True)
    return np.sum(np.where(seen, share * error, 0.0), axis=-1)


def combine(squared, mode: str) -> float:
    """The L2 error from per-column squared errors (one for top-label).

    Each debiased square is clipped at 0 before classes are averaged, as
    the reference does (it squares each class's clipped root).
    """
    squared = np.maximum(np.asarray(squared, dtype=np.float64), 0.0)
    return float(np.sqrt(squared.mean() if mode == "classwise" else squared[0]))


def column_blocks(proba, y_index, mode):
    """``(scores, targets)`` blocks of columns, bounded in size.

    Top-label: the confidence and 0/1 correctness as one column. Classwise:
    ``(n, m)`` slices of ``proba`` and each row's event column within the
    block (see :func:`bin_sums`).
    """
    if mode == "top_label":
        conf, correct = top_label(proba, y_index)
        yield np.asarray(conf, np.float64)[:, None], correct[:, None]
        return
    n, n_classes = proba.shape
    step = max(1, _BLOCK_ENTRIES // max(n, 1))
    for start in range(0, n_classes, step):
        scores = np.asarray(proba[:, start : start + step], np.float64)
        yield scores, np.asarray(y_index, np.int64) - start


def _squared(proba, y_index, w, n_bins, strategy, mode, debias):
    positive = w > 0
    out = []
    for scores, targets in column_blocks(proba, y_index, mode):
        if strategy == "discrete":  # edges differ in number: one column each
            for k in range(scores.shape[1]):
                col = scores[:, k : k + 1]
                edges = reference_edges(col[positive], n_bins, strategy)
                sums = bin_sums(col, targets - k, w, edges, len(edges))
                out.append(squared_errors(sums, debias))
            continue
        edges = reference_edges(scores[positive], n_bins, strategy)
        sums = bin_sums(scores, targets, w, edges, len(edges))
        out.append(squared_errors(sums, debias))
    return np.concatenate(out)


@groupable()
@validate_params(
    {
        **METRIC_ARRAYS,
        "n_bins": [Interval(Integral, 1, None, closed="left")],
        "strategy": [StrOptions({"quantile", "uniform", "discrete"})],
        "mode": [StrOptions({"classwise", "top_label"})],
        "debias": ["boolean"],
    },
    prefer_skip_nested_validation=True,
)
@dask_dispatch("l2_calibration_error")
def l2_calibration_error(
    y_true,
    y_proba,
    *,
    n_bins=15,
    strategy="quantile",
    mode="classwise",
    debias=True,
    sample_weight=None,
    labels=None,
):
    """Debiased L2 calibration error (Kumar, Liang & Ma, NeurIPS 2019).

    Bins the scores and, per bin ``b`` of weight share ``W_b / W``, takes
    the squared gap between the mean score and the frequency of the event,
    minus its bias ``acc_b (1 - acc_b) / (n_b - 1)`` (the variance of the
    bin's label mean): ``CE^2 = sum_b (W_b / W) [(conf_b - acc_b)^2 -
    bias_b]``. The estimate is clipped at 0 and its square root returned. For
    ``p = 2`` this estimator needs far fewer samples than the plug-in one
    ("Verified uncertainty calibration", Sec. 5). ``mode="classwise"`` is
    the paper's marginal calibration error: the squared error of each class
    ``k`` (scores ``p_ik``, event ``y = k``, each column with its own bins)
    is clipped at 0 and averaged over all columns, including classes absent
    from ``y_true``, before the root. ``mode="top_label"`` bins the
    confidence ``max_k p_ik`` against the correctness of the argmax.

    The bins are those of the reference implementation, the
    ``uncertainty-calibration`` package (``calibration.get_calibration_error``
    and ``lower_bound_scaling_ce``, ``p=2``): with the default
    ``strategy="quantile"`` (its ``get_equal_bins``), the sorted scores are
    split into ``min(n_bins, n)`` runs of sizes given by ``np.array_split``
    and each edge is the midpoint between neighbouring runs; bins are
    ``(l, u]`` (the first includes 0) and duplicate edges merge. The value
    equals the reference's to floating-point rounding. The reference picks
    ``"discrete"`` bins itself when the scores take few values (it sniffs
    them); here the strategy is always the one passed. On 1-D binary input
    the reference scores the positive class alone, while here both columns
    count in ``"classwise"`` (pass ``mode="top_label"`` or compare on two
    columns). The bins are ``(l, u]``, unlike the ``[l, u)`` default of
    :func:`expected_calibration_error`.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        True labels.
    y_proba : array-like of shape (n_samples, n_classes) or (n_samples,)
        Predicted probabilities; 1-D input is the probability of the second
        (positive) class of a binary problem.
    n_bins : int, default=15
        Number of bins (per class for ``"classwise"``); ignored by
        ``"discrete"``.
    strategy : {"quantile", "uniform", "discrete"}, default="quantile"
        Equal-mass bins (``get_equal_bins``), equal-width bins ``i / n_bins``
        (``get_equal_prob_bins``), or one bin per distinct score
        (``get_discrete_bins``, for the outputs of binning calibrators).
    mode : {"classwise", "top_label"}, default="classwise"
        Marginal (classwise) calibration error, the reference's default, or
        the top-label one.
    debias : bool, default=True
        Subtract each bin's bias (the paper's estimator); False gives the
        plug-in binned L2 error.
    sample_weight : array-like of shape (n_samples,), default=None
        Sample weights, read as fixed weights of independent rows: bin
        shares and means are weighted and ``n_b`` is Kish's effective size
        ``W_b^2 / sum w^2``, which keeps the debiased square unbiased for a
        bin of a common event frequency. Equal-mass edges are drawn on the
        rows of positive weight. Unit weights give the unweighted value.
    labels : array-like of shape (n_classes,), default=None
        Label of each column of ``y_proba``. Without it, integer labels in
        ``range(n_classes)`` map to their own column; other labels must have
        exactly ``n_classes`` distinct values, in sorted column order.

    Returns
    -------
    float
        The (debiased) L2 calibration error, in [0, 1]; lower is better.

    References
    ----------
    A. Kumar, P. Liang and T. Ma, "Verified Uncertainty Calibration",
    NeurIPS 2019.

    Examples
    --------
    >>> from skcal.metrics import l2_calibration_error
    >>> y_true = [0, 1, 1, 0, 1, 0]
    >>> y_proba = [0.1, 0.8, 0.6, 0.7, 0.9, 0.2]
    >>> round(l2_calibration_error(y_true, y_proba, n_bins=2, debias=False), 4)
    0.0972
    >>> l2_calibration_error(y_true, y_proba, n_bins=2)
    0.0
    """
    proba, y_index, w = check_proba_targets(
        y_true, y_proba, labels=labels, sample_weight=sample_weight, copy=False
    )
    w = np.asarray(w, dtype=np.float64)
    w = w / w.max()  # relative weights: any common scale gives the same value
    squared = _squared(proba, y_index, w, n_bins, strategy, mode, debias)
    return combine(squared, mode)
