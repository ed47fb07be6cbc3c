"""Cumulative calibration errors."""

from __future__ import annotations

import numpy as np

from ..utils._sklearn import StrOptions, validate_params
from ..utils._validation import check_proba_targets
from ._binning import binned_statistics
from ._ece import BINNED_METRIC_PARAMS
from ._local import _class_weights

__all__ = ["ecce_binned_mean"]


@validate_params(
    {
        **BINNED_METRIC_PARAMS,
        "class_weight": ["array-like", StrOptions({"frequency"}), None],
    },
    prefer_skip_nested_validation=True,
)
def ecce_binned_mean(
    y_true, y_proba, *, n_bins=15, class_weight=None, sample_weight=None, labels=None
):
    """The VQ paper's "ECCE": mean absolute cumulative residual over bins.

    For each class ``k``, with the non-empty equal-width bins ``b_1 < ... <
    b_m`` of ``p_k`` (``[l, u)``, last bin closed) and ``w_b`` the fraction of
    the weight in bin ``b``,

    ``C_t = sum_{s <= t} w_{b_s} (mean p_{b_s} - freq_{b_s})``,
    ``ECCE_k = (1 / m) sum_t |C_t|``,

    and the result is ``sum_k w_k ECCE_k`` (uniform class weights by
    default). This binned statistic is what Barbera et al. report as ECCE; it
    is not the cumulative (Kolmogorov-Smirnov / Kuiper) metric of Tygert et
    al.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        True labels.
    y_proba : array-like of shape (n_samples, n_classes) or (n_samples,)
        Predicted probabilities (1-D: positive class of a binary problem).
    n_bins : int, default=15
        Number of equal-width bins per class.
    class_weight : array-like of shape (n_classes,) or "frequency", default=None
        Weight of each class (normalised to sum to 1); uniform by default,
        ``"frequency"`` for the empirical class frequencies.
    sample_weight : array-like of shape (n_samples,), default=None
        Sample weights.
    labels : array-like of shape (n_classes,), default=None
        Label of each column of ``y_proba``.

    Returns
    -------
    float

    Examples
    --------
    >>> from skcal.metrics import ecce_binned_mean
    >>> y_true = [0, 1, 1, 0]
    >>> y_proba = [[0.9, 0.1], [0.2, 0.8], [0.4, 0.6], [0.3, 0.7]]
    >>> round(ecce_binned_mean(y_true, y_proba, n_bins=5), 4)
    0.0625
    """
    proba, y_index, w = check_proba_targets(
        y_true, y_proba, labels=labels, sample_weight=sample_weight
    )
    cw = _class_weights(class_weight, proba, y_index, w)
    errors = np.empty(proba.shape[1])
    for k in range(proba.shape[1]):
        stats = binned_statistics(proba[:, k], y_index == k, w, n_bins=n_bins)
        keep = stats.nonempty
        frac = stats.weight[keep] / stats.weight[keep].sum()
        cumulative = np.cumsum(
            frac * (stats.mean_score[keep] - stats.mean_target[keep])
        )
        errors[k] = np.mean(np.abs(cumulative))
    return float(np.dot(cw, errors))
