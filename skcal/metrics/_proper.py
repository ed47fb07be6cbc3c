"""Proper scoring rules: negative log-likelihood and Brier score."""

from __future__ import annotations

from numbers import Real

import numpy as np

from ..llm._topk import TopKScores
from ..llm._topk_ops import check_topk_targets, topk_brier, topk_nll
from ..utils._constraints import METRIC_ARRAYS
from ..utils._sklearn import Interval, validate_params
from ..utils._validation import check_proba_targets
from ._dask import dask_dispatch
from ._groups import groupable

__all__ = ["brier_score", "negative_log_likelihood"]


@groupable()
@validate_params(
    {
        **METRIC_ARRAYS,
        "eps": [Interval(Real, 0, 1, closed="neither")],
    },
    prefer_skip_nested_validation=True,
)
@dask_dispatch("negative_log_likelihood")
def negative_log_likelihood(
    y_true, y_proba, *, eps=1e-12, sample_weight=None, labels=None
):
    """Mean negative log-likelihood (log loss) of the true class.

    ``-sum_i w_i log(max(p_{i, y_i}, eps)) / sum_i w_i``. Unlike
    :func:`sklearn.metrics.log_loss`, column ``j`` of ``y_proba`` is the
    class ``labels[j]`` (integer labels map to their own column), so classes
    absent from ``y_true`` are allowed.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        True labels.
    y_proba : array-like of shape (n_samples, n_classes) or (n_samples,)
        Predicted probabilities (1-D: positive class of a binary problem),
        or a :class:`~skcal.llm.TopKScores` with ``y_true`` its class
        indices: a label outside a row's top-k has the rest model's share
        of the leftover mass (``labels`` must be None).
    eps : float, default=1e-12
        Probabilities are clipped below at ``eps`` before the log.
    sample_weight : array-like of shape (n_samples,), default=None
        Sample weights.
    labels : array-like of shape (n_classes,), default=None
        Label of each column of ``y_proba``.

    Returns
    -------
    float
        The mean negative log-likelihood; lower is better.

    Examples
    --------
    >>> from skcal.metrics import negative_log_likelihood
    >>> round(negative_log_likelihood([0, 1], [[0.5, 0.5], [0.2, 0.8]]), 4)
    0.4581
    """
    if isinstance(y_proba, TopKScores):
        y_index, w = _topk_targets(y_true, y_proba, sample_weight, labels)
        return float(np.average(topk_nll(y_proba, y_index, eps), weights=w))
    proba, y_index, w = check_proba_targets(
        y_true, y_proba, labels=labels, sample_weight=sample_weight
    )
    p_true = proba[np.arange(len(y_index)), y_index]
    return float(np.average(-np.log(np.maximum(p_true, eps)), weights=w))


@groupable()
@validate_params(METRIC_ARRAYS, prefer_skip_nested_validation=True)
@dask_dispatch("brier_score")
def brier_score(y_true, y_proba, *, sample_weight=None, labels=None):
    """Multiclass Brier score: mean squared distance to the one-hot label.

    ``sum_i w_i sum_k (p_ik - [y_i = k])^2 / sum_i w_i``, in [0, 2]. For
    binary problems this is twice the usual binary Brier score.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        True labels.
    y_proba : array-like of shape (n_samples, n_classes) or (n_samples,)
        Predicted probabilities (1-D: positive class of a binary problem),
        or a :class:`~skcal.llm.TopKScores` with ``y_true`` its class
        indices: the ``m`` unlisted classes of a row each have ``rest / m``
        (the rest model), which adds ``rest**2 / m`` to the sum of squares.
    sample_weight : array-like of shape (n_samples,), default=None
        Sample weights.
    labels : array-like of shape (n_classes,), default=None
        Label of each column of ``y_proba``.

    Returns
    -------
    float
        The Brier score; lower is better.

    Examples
    --------
    >>> from skcal.metrics import brier_score
    >>> round(brier_score([0, 1], [[0.5, 0.5], [0.2, 0.8]]), 4)
    0.29
    """
    if isinstance(y_proba, TopKScores):
        y_index, w = _topk_targets(y_true, y_proba, sample_weight, labels)
        return float(np.average(topk_brier(y_proba, y_index), weights=w))
    proba, y_index, w = check_proba_targets(
        y_true, y_proba, labels=labels, sample_weight=sample_weight
    )
    onehot = np.zeros_like(proba)
    onehot[np.arange(len(y_index)), y_index] = 1.0
    return float(np.average(((proba - onehot) ** 2).sum(axis=1), weights=w))


def _topk_targets(y_true, top, sample_weight, labels):
    """Class indices and weights of a metric of :class:`TopKScores`."""
    if labels is not None:
        raise ValueError(
            "labels must be None with TopKScores scores: y_true holds the class "
            "indices the top-k lists."
        )
    return check_topk_targets(top, y_true, sample_weight)
