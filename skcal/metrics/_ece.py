"""Binned calibration errors: top-label ECE, MCE and classwise ECE."""

from __future__ import annotations

from numbers import Integral

import numpy as np

from ..llm._topk import TopKScores
from ..llm._topk_ops import topk_top_label
from ..utils._constraints import METRIC_ARRAYS
from ..utils._sklearn import Interval, StrOptions, validate_params
from ..utils._validation import check_class_weight, check_proba_targets
from ._binning import (
    bin_means,
    binned_calibration_error,
    binned_errors,
    binned_statistics,
    classwise_tables,
)
from ._dask import dask_dispatch
from ._groups import groupable
from ._proper import _topk_targets

__all__ = [
    "classwise_calibration_error",
    "expected_calibration_error",
    "max_calibration_error",
]

#: Parameters shared by every binned probability metric of skcal.metrics.
BINNED_METRIC_PARAMS = {
    **METRIC_ARRAYS,
    "n_bins": [Interval(Integral, 1, None, closed="left")],
}

_COMMON = {
    **BINNED_METRIC_PARAMS,
    "strategy": [StrOptions({"uniform", "quantile"})],
    "closed": [StrOptions({"left", "right"})],
}


def top_label(proba: np.ndarray, y_index: np.ndarray):
    """Confidence (max probability) and correctness of the argmax prediction."""
    pred = np.argmax(proba, axis=1)
    conf = np.take_along_axis(proba, pred[:, None], axis=1)[:, 0]
    return conf, (pred == y_index).astype(np.float64)


@groupable()
@validate_params(
    {**_COMMON, "norm": [StrOptions({"l1", "l2", "max"})]},
    prefer_skip_nested_validation=True,
)
@dask_dispatch("expected_calibration_error")
def expected_calibration_error(
    y_true,
    y_proba,
    *,
    n_bins=15,
    strategy="uniform",
    norm="l1",
    closed="left",
    sample_weight=None,
    labels=None,
):
    """Top-label expected calibration error (ECE).

    Bins the confidence ``c_i = max_k p_ik`` and compares, per bin, the mean
    confidence with the accuracy of the argmax prediction:
    ``ECE = sum_b (n_b / n) |acc_b - conf_b|`` (Guo et al., 2017). Empty bins
    are skipped.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        True labels.
    y_proba : array-like of shape (n_samples, n_classes) or (n_samples,)
        Predicted probabilities; 1-D input is the probability of the second
        (positive) class of a binary problem. Or a
        :class:`~skcal.llm.TopKScores` with ``y_true`` its class indices:
        the confidence is a row's largest probability (its top listed one),
        and a label outside the top-k counts as a mistake.
    n_bins : int, default=15
        Number of bins.
    strategy : {"uniform", "quantile"}, default="uniform"
        Equal-width bins, or equal-mass bins (AdaECE).
    norm : {"l1", "l2", "max"}, default="l1"
        How bin gaps are combined: weighted mean (ECE), weighted root mean
        square, or maximum (MCE).
    closed : {"left", "right"}, default="left"
        Bin-edge convention: ``[l, u)`` with the last bin closed, or
        ``(l, u]`` with the first bin closed. Scores of 0 and 1 are always
        counted.
    sample_weight : array-like of shape (n_samples,), default=None
        Sample weights.
    labels : array-like of shape (n_classes,), default=None
        Label of each column of ``y_proba``. Without it, integer labels in
        ``range(n_classes)`` map to their own column; other labels must have
        exactly ``n_classes`` distinct values, in sorted column order.

    Returns
    -------
    float
        The calibration error, in [0, 1]; lower is better.

    Examples
    --------
    >>> from skcal.metrics import expected_calibration_error
    >>> y_true = [0, 1, 1, 0]
    >>> y_proba = [[0.9, 0.1], [0.2, 0.8], [0.4, 0.6], [0.3, 0.7]]
    >>> round(expected_calibration_error(y_true, y_proba, n_bins=5), 4)
    0.15
    """
    if isinstance(y_proba, TopKScores):
        y_index, w = _topk_targets(y_true, y_proba, sample_weight, labels)
        conf, correct = topk_top_label(y_proba, y_index)
    else:
        # one pass over y_proba: validation, argmax and max together, no copy
        _, y_index, w, pred, conf = check_proba_targets(
            y_true,
            y_proba,
            labels=labels,
            sample_weight=sample_weight,
            copy=False,
            top_label=True,
        )
        correct = pred == y_index
    stats = binned_statistics(
        conf,
        correct,
        None if sample_weight is None else w,
        n_bins=n_bins,
        strategy=strategy,
        closed=closed,
    )
    return binned_calibration_error(stats, norm)


@groupable()
@validate_params(_COMMON, prefer_skip_nested_validation=True)
@dask_dispatch("max_calibration_error")
def max_calibration_error(
    y_true,
    y_proba,
    *,
    n_bins=15,
    strategy="uniform",
    closed="left",
    sample_weight=None,
    labels=None,
):
    """Top-label maximum calibration error (MCE).

    ``max_b |acc_b - conf_b|`` over non-empty confidence bins (Naeini et
    al., 2015); :func:`expected_calibration_error` with ``norm="max"``.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        True labels.
    y_proba : array-like of shape (n_samples, n_classes) or (n_samples,)
        Predicted probabilities (1-D: positive class of a binary problem).
    n_bins : int, default=15
        Number of bins.
    strategy : {"uniform", "quantile"}, default="uniform"
        Equal-width or equal-mass bins.
    closed : {"left", "right"}, default="left"
        Bin-edge convention, see :func:`expected_calibration_error`.
    sample_weight : array-like of shape (n_samples,), default=None
        Sample weights.
    labels : array-like of shape (n_classes,), default=None
        Label of each column of ``y_proba``.

    Returns
    -------
    float
        The largest bin gap, in [0, 1].

    Examples
    --------
    >>> from skcal.metrics import max_calibration_error
    >>> y_true = [0, 1, 1, 0]
    >>> y_proba = [[0.9, 0.1], [0.2, 0.8], [0.4, 0.6], [0.3, 0.7]]
    >>> round(max_calibration_error(y_true, y_proba, n_bins=10), 4)
    0.7
    """
    return expected_calibration_error(**locals(), norm="max")  # the arguments, by name


@groupable()
@validate_params(
    {
        **_COMMON,
        "norm": [StrOptions({"l1", "l2", "max"})],
        "class_weight": ["array-like", None],
    },
    prefer_skip_nested_validation=True,
)
@dask_dispatch("classwise_calibration_error")
def classwise_calibration_error(
    y_true,
    y_proba,
    *,
    n_bins=15,
    strategy="uniform",
    norm="l1",
    closed="left",
    class_weight=None,
    sample_weight=None,
    labels=None,
):
    """Classwise expected calibration error (Kull et al., 2019).

    For each class ``k``, bins ``p_ik`` and compares the mean predicted
    probability with the frequency of ``y = k`` per bin; the per-class
    errors are averaged: ``cwECE = sum_k w_k sum_b (n_bk / n)
    |freq_bk - conf_bk|`` with ``w_k = 1 / n_classes`` by default. Every
    column counts, including classes absent from ``y_true``.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        True labels.
    y_proba : array-like of shape (n_samples, n_classes) or (n_samples,)
        Predicted probabilities (1-D: positive class of a binary problem).
    n_bins : int, default=15
        Number of bins per class.
    strategy : {"uniform", "quantile"}, default="uniform"
        Equal-width or equal-mass bins (quantiles of each column).
    norm : {"l1", "l2", "max"}, default="l1"
        How bin gaps are combined within a class, as in
        :func:`expected_calibration_error`; ``"max"`` gives the class-weighted
        mean of per-class maxima.
    closed : {"left", "right"}, default="left"
        Bin-edge convention, see :func:`expected_calibration_error`.
    class_weight : array-like of shape (n_classes,), default=None
        Finite, non-negative weight of each class, normalised to sum to 1;
        uniform by default.
    sample_weight : array-like of shape (n_samples,), default=None
        Sample weights.
    labels : array-like of shape (n_classes,), default=None
        Label of each column of ``y_proba``.

    Returns
    -------
    float
        The classwise calibration error, in [0, 1].

    Examples
    --------
    >>> from skcal.metrics import classwise_calibration_error
    >>> y_true = [0, 1, 1, 0]
    >>> y_proba = [[0.9, 0.1], [0.2, 0.8], [0.4, 0.6], [0.3, 0.7]]
    >>> round(classwise_calibration_error(y_true, y_proba, n_bins=5), 4)
    0.2
    """
    proba, y_index, w = check_proba_targets(
        y_true, y_proba, labels=labels, sample_weight=sample_weight, copy=False
    )
    n_classes = proba.shape[1]
    cw = check_class_weight(class_weight, n_classes)
    w = None if sample_weight is None else w
    if strategy == "uniform":
        # every class at once: one bincount over (class, bin) keys
        _, weight, sum_score, sum_target = classwise_tables(
            proba, y_index, w, n_bins=n_bins, closed=closed
        )
        mean_score = bin_means(weight, sum_score)
        mean_target = bin_means(weight, sum_target)
    else:  # equal-mass bins: each column has its own edges (a sort each)
        weight = np.empty((n_classes, n_bins))
        mean_score, mean_target = np.empty_like(weight), np.empty_like(weight)
        for k in range(n_classes):
            stats = binned_statistics(
                proba[:, k],
                y_index == k,
                w,
                n_bins=n_bins,
                strategy=strategy,
                closed=closed,
            )
            weight[k], mean_score[k], mean_target[k] = (
                stats.weight,
                stats.mean_score,
                stats.mean_target,
            )
    errors = binned_errors(weight, mean_score, mean_target, norm)
    return float(np.dot(cw, errors))
