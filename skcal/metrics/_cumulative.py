"""Cumulative calibration errors."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..utils._sklearn import StrOptions, validate_params
from ..utils._validation import check_proba_targets
from ._binning import binned_statistics
from ._dask import dask_dispatch
from ._ece import BINNED_METRIC_PARAMS, top_label
from ._groups import groupable
from ._local import _class_weights

__all__ = [
    "CumulativeCalibration",
    "brownian_max_abs_cdf",
    "brownian_range_cdf",
    "cumulative_calibration_error",
    "cumulative_calibration_test",
    "ecce_binned_mean",
]


@groupable()
@validate_params(
    {
        **BINNED_METRIC_PARAMS,
        "class_weight": ["array-like", StrOptions({"frequency"}), None],
    },
    prefer_skip_nested_validation=True,
)
@dask_dispatch("ecce_binned_mean")
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
        errors[k] = binned_mean_ecce(stats.weight, stats.mean_score, stats.mean_target)
    return float(np.dot(cw, errors))


def binned_mean_ecce(weight, mean_score, mean_target) -> float:
    """``ECCE_k`` of one class from its per-bin weights and means (NaN in
    empty bins): the mean absolute cumulative residual over non-empty bins."""
    keep = weight > 0
    frac = weight[keep] / weight[keep].sum()
    return float(
        np.mean(np.abs(np.cumsum(frac * (mean_score[keep] - mean_target[keep]))))
    )


#: ``P(max |W| > x) <= 4 P(N(0, 1) > x)`` is below 1e-300 from here: the
#: CDF is 1 in float64 (the series, whose length grows with ``x``, is not
#: summed; a normalised statistic of ~1e307 would need ~1e307 terms).
_MAX_ABS_CDF_ONE = 40.0
#: ``P(max W - min W > x) <= P(max |W| > x / 2)``: 1 in float64 from here.
_RANGE_CDF_ONE = 2 * _MAX_ABS_CDF_ONE


def _cdf_domain(x, one_from):
    """``x`` as float64, the CDF's output array and the entries left to sum.

    The output is 0 for ``x <= 0``, 1 from ``one_from`` on (``+inf``
    included) and NaN for NaN; ``pos`` marks the entries in between.
    """
    x = np.asarray(x, dtype=np.float64)
    out = np.where(np.isnan(x), np.nan, np.where(x >= one_from, 1.0, 0.0))
    pos = (x > 0) & (x < one_from)
    return x, out, pos


def brownian_max_abs_cdf(x):
    """CDF of ``max_{t <= 1} |W(t)|`` for a standard Brownian motion ``W``.

    ``P = (4 / pi) sum_{k >= 0} (-1)^k / (2k + 1) exp(-(2k + 1)^2 pi^2 / (8 x^2))``
    (Feller), summed until the terms are below machine precision; the
    asymptotic null distribution of the normalised ECCE-MAD. Its mean is
    ``sqrt(pi / 2)``.
    """
    x, out, pos = _cdf_domain(x, _MAX_ABS_CDF_ONE)
    xp = x[pos]
    n_terms = int(np.ceil(0.5 + xp.max(initial=0.0) * np.sqrt(2) / np.pi * 6.1)) + 1
    k = np.arange(n_terms)[:, None] + 0.5
    terms = (-1.0) ** (k - 0.5) / k * np.exp(-(k**2) * np.pi**2 / (2 * xp**2))
    out[pos] = np.clip(2 / np.pi * terms.sum(axis=0), 0.0, 1.0)
    return out


def brownian_range_cdf(x):
    """CDF of ``max W - min W`` over ``[0, 1]`` for a standard Brownian motion.

    ``P = sum_{k >= 0} (8 / x^2 + 2 / (h_k^2 pi^2)) exp(-2 h_k^2 pi^2 / x^2)``,
    ``h_k = k + 1/2`` (Feller 1951); the asymptotic null distribution of the
    normalised ECCE-R (Kuiper). Its mean is ``2 sqrt(2 / pi)``.
    """
    x, out, pos = _cdf_domain(x, _RANGE_CDF_ONE)
    xp = x[pos]
    n_terms = int(np.ceil(0.5 + xp.max(initial=0.0) / (np.pi * np.sqrt(2)) * 6.1)) + 1
    h = np.arange(n_terms)[:, None] + 0.5
    terms = (8 / xp**2 + 2 / (h**2 * np.pi**2)) * np.exp(-2 * h**2 * np.pi**2 / xp**2)
    out[pos] = np.clip(terms.sum(axis=0), 0.0, 1.0)
    return out


def _normalized(values, sigmas):
    """``values / sigmas``; where ``sigma = 0`` (every score 0 or 1), inf for
    a positive value (a sure prediction that is wrong) and 0 for 0."""
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.asarray(values, dtype=np.float64) / sigmas
    zero = sigmas == 0
    out[zero] = np.where(np.asarray(values)[zero] > 0, np.inf, 0.0)
    return out


class CumulativeCalibration(NamedTuple):
    """Result of :func:`cumulative_calibration_test`.

    Attributes
    ----------
    statistic : float or ndarray of shape (n_classes,)
        ECCE-MAD or ECCE-R (per class for ``mode="classwise"``).
    sigma : float or ndarray
        ``sigma_n``, the standard deviation of the final cumulative sum under
        perfect calibration.
    normalized : float or ndarray
        ``statistic / sigma``.
    pvalue : float or ndarray
        Asymptotic p-value of perfect calibration (large n, scores dense).
    """

    statistic: float | np.ndarray
    sigma: float | np.ndarray
    normalized: float | np.ndarray
    pvalue: float | np.ndarray


def _cumulative(scores, targets, w, statistic):
    """(statistic, sigma) of one binary problem; ties evaluated at group ends."""
    order = np.argsort(scores, kind="stable")
    s, r, w = scores[order], targets[order], w[order]
    total = w.sum()
    running = np.cumsum(w * (r - s)) / total
    # within a group of equal scores the order is arbitrary: keep the
    # cumulative sums only at the end of each group
    ends = np.append(s[1:] != s[:-1], True)
    c = np.concatenate([[0.0], running[ends]])
    value = np.abs(c).max() if statistic == "ks" else c.max() - c.min()
    sigma = np.sqrt(np.sum(w**2 * s * (1 - s))) / total
    return float(value), float(sigma)


def _cumulative_all(
    y_true, y_proba, statistic, mode, sample_weight, labels, class_weight=None
):
    """Statistic and sigma of each score column, and the class weights.

    ``class_weight`` is checked in every mode (it is used by ``"classwise"``
    only), before the statistics are computed.
    """
    proba, y_index, w = check_proba_targets(
        y_true, y_proba, labels=labels, sample_weight=sample_weight
    )
    cw = _class_weights(class_weight, proba, y_index, w)
    if mode == "top_label":
        pairs = [top_label(proba, y_index)]
    else:
        pairs = [(proba[:, k], y_index == k) for k in range(proba.shape[1])]
    stats = np.array([_cumulative(s, t.astype(float), w, statistic) for s, t in pairs])
    return stats[:, 0], stats[:, 1], cw


_CUMULATIVE_PARAMS = {
    **BINNED_METRIC_PARAMS,
    "statistic": [StrOptions({"ks", "kuiper"})],
    "mode": [StrOptions({"top_label", "classwise"})],
}
del _CUMULATIVE_PARAMS["n_bins"]


@groupable()
@validate_params(
    {
        **_CUMULATIVE_PARAMS,
        "normalize": ["boolean"],
        "class_weight": ["array-like", StrOptions({"frequency"}), None],
    },
    prefer_skip_nested_validation=True,
)
@dask_dispatch("cumulative_calibration_error")
def cumulative_calibration_error(
    y_true,
    y_proba,
    *,
    statistic="ks",
    mode="top_label",
    normalize=False,
    class_weight=None,
    sample_weight=None,
    labels=None,
):
    """Cumulative calibration error (ECCE) of Arrieta-Ibarra, Tygert et al.

    Sort the scores ``S`` (top-label confidences, or one class's
    probabilities for ``mode="classwise"``) with their outcomes ``R``
    (correctness, or ``y == k``) and take the cumulative differences
    ``C_k = sum_{j <= k} w_j (R_j - S_j) / sum_j w_j`` (``C_0 = 0``). Then
    ECCE-MAD (``statistic="ks"``, Kolmogorov-Smirnov) is ``max_k |C_k|`` and
    ECCE-R (``"kuiper"``) is ``max_k C_k - min_k C_k``. No bins and no
    bandwidth. Equal scores are ordered arbitrarily by any sort, so ``C`` is
    read only at the end of each group of ties: the result does not depend
    on the order of the samples.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        True labels.
    y_proba : array-like of shape (n_samples, n_classes) or (n_samples,)
        Predicted probabilities (1-D: positive class of a binary problem).
    statistic : {"ks", "kuiper"}, default="ks"
        ECCE-MAD or ECCE-R.
    mode : {"top_label", "classwise"}, default="top_label"
        Confidence vs correctness, or the class-weighted mean over classes of
        each column against ``y == k``.
    normalize : bool, default=False
        Divide by ``sigma_n = sqrt(sum_j w_j^2 S_j (1 - S_j)) / sum_j w_j``:
        under perfect calibration the normalised ECCE-MAD tends to ``max |W|``
        of a standard Brownian motion on [0, 1] (mean 1.25) and ECCE-R to its
        range (mean 1.60); see :func:`cumulative_calibration_test` for the
        p-values. Where ``sigma_n = 0`` (every score is 0 or 1) the
        normalised value is ``inf`` if the statistic is positive (a sure
        prediction was wrong) and 0 if it is 0.
    class_weight : array-like of shape (n_classes,) or "frequency", default=None
        Class weights of ``mode="classwise"`` (uniform by default); checked,
        and unused, in the top-label mode.
    sample_weight : array-like of shape (n_samples,), default=None
        Sample weights.
    labels : array-like of shape (n_classes,), default=None
        Label of each column of ``y_proba``.

    Returns
    -------
    float

    References
    ----------
    I. Arrieta-Ibarra, P. Gujral, J. Tannen, M. Tygert, C. Xu. "Metrics of
    calibration for probabilistic predictions". JMLR 23, 2022.

    Examples
    --------
    >>> from skcal.metrics import cumulative_calibration_error
    >>> y_true = [0, 1, 1, 0]
    >>> y_proba = [[0.9, 0.1], [0.2, 0.8], [0.4, 0.6], [0.3, 0.7]]
    >>> round(cumulative_calibration_error(y_true, y_proba), 4)
    0.1
    >>> round(cumulative_calibration_error(y_true, y_proba, statistic="kuiper"), 4)
    0.175
    """
    values, sigmas, cw = _cumulative_all(
        y_true, y_proba, statistic, mode, sample_weight, labels, class_weight
    )
    if normalize:
        values = _normalized(values, sigmas)
    if mode == "top_label":
        return float(values[0])
    used = cw > 0  # a class of weight 0 adds nothing, even an infinite value
    return float(np.dot(cw[used], values[used]))


def _worst_normalized(result) -> float:
    """The largest standardised statistic of a test (its worst class)."""
    return float(np.max(result.normalized))


@groupable(value=_worst_normalized)
@validate_params(_CUMULATIVE_PARAMS, prefer_skip_nested_validation=True)
@dask_dispatch("cumulative_calibration_test")
def cumulative_calibration_test(
    y_true,
    y_proba,
    *,
    statistic="ks",
    mode="top_label",
    sample_weight=None,
    labels=None,
):
    """Asymptotic test of perfect calibration from the cumulative differences.

    Computes ECCE-MAD or ECCE-R (see :func:`cumulative_calibration_error`),
    its normalisation by ``sigma_n`` and the p-value from the limiting law of
    a standard Brownian motion on [0, 1]: ``max |W|`` for ``"ks"``
    (:func:`brownian_max_abs_cdf`), the range ``max W - min W`` for
    ``"kuiper"`` (:func:`brownian_range_cdf`). The p-values assume many
    samples with scores spread over their range; with weights, ``sigma_n``
    treats them as frequencies.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        True labels.
    y_proba : array-like of shape (n_samples, n_classes) or (n_samples,)
        Predicted probabilities.
    statistic : {"ks", "kuiper"}, default="ks"
        ECCE-MAD or ECCE-R.
    mode : {"top_label", "classwise"}, default="top_label"
        One test on confidence vs correctness, or one per class (arrays).
    sample_weight : array-like of shape (n_samples,), default=None
        Sample weights.
    labels : array-like of shape (n_classes,), default=None
        Label of each column of ``y_proba``.

    Returns
    -------
    CumulativeCalibration

    Examples
    --------
    >>> import numpy as np
    >>> from skcal.metrics import cumulative_calibration_test
    >>> rng = np.random.default_rng(0)
    >>> p = rng.uniform(size=5000)
    >>> y = (rng.uniform(size=5000) < p).astype(int)  # calibrated
    >>> bool(cumulative_calibration_test(y, p).pvalue > 0.01)
    True
    >>> bool(cumulative_calibration_test(y, p**2).pvalue < 1e-6)  # miscalibrated
    True
    """
    values, sigmas, _ = _cumulative_all(
        y_true, y_proba, statistic, mode, sample_weight, labels
    )
    normalized = _normalized(values, sigmas)
    cdf = brownian_max_abs_cdf if statistic == "ks" else brownian_range_cdf
    pvalue = np.clip(1.0 - cdf(normalized), 0.0, 1.0)
    if mode == "top_label":
        return CumulativeCalibration(
            float(values[0]), float(sigmas[0]), float(normalized[0]), float(pvalue[0])
        )
    return CumulativeCalibration(values, sigmas, normalized, pvalue)
