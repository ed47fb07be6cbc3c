"""Spiegelhalter's Z test of calibration (Spiegelhalter, 1986)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import ndtr

from ..utils._constraints import METRIC_ARRAYS
from ..utils._sklearn import StrOptions, validate_params
from ..utils._validation import check_proba_targets
from ._dask import dask_dispatch
from ._ece import top_label
from ._groups import groupable

__all__ = ["SpiegelhalterTest", "spiegelhalter_test"]


@dataclass(frozen=True)
class SpiegelhalterTest:
    """Result of :func:`spiegelhalter_test`.

    Attributes
    ----------
    normalized : float
        Spiegelhalter's Z: positive when the predictions are overconfident
        (outcomes farther from the prediction than calibration allows),
        negative when underconfident.
    pvalue : float
        Its p-value under perfect calibration (standard normal law).
    """

    normalized: float
    pvalue: float


def spiegelhalter_sums(proba, y_index, w, top=None):
    """``(sum w (c - r)(1 - 2r), sum w^2 (1 - 2r)^2 r (1 - r))`` over rows,
    with ``r`` the top-label confidence and ``c`` its correctness.

    ``top``: each row's argmax and maximum if already known (as
    ``check_probabilities(..., top_label=True)`` returns them).
    """
    if top is None:
        conf, correct = top_label(proba, y_index)
    else:
        pred, conf = top
        correct = (pred == y_index).astype(np.float64)
    conf = np.asarray(conf, dtype=np.float64)
    slope = 1.0 - 2.0 * conf
    numerator = float(np.dot(w, (correct - conf) * slope))
    variance = float(np.dot(w * w, slope**2 * conf * (1.0 - conf)))
    return numerator, variance


def spiegelhalter_from_sums(numerator, variance, alternative) -> SpiegelhalterTest:
    """Z and its p-value from :func:`spiegelhalter_sums`."""
    if variance <= 0.0:
        if numerator == 0.0:  # every confidence 1/2, or 1 and right
            return SpiegelhalterTest(0.0, 1.0)
        raise ValueError(
            "Spiegelhalter's Z is undefined: every confidence is 0.5 or 1, so "
            "its variance under calibration is 0, yet a prediction made with "
            "confidence 1 is wrong (certain miscalibration). Expected at least "
            "one confidence strictly between 0.5 and 1; check that y_proba "
            "are the model's probabilities, not hard predictions."
        )
    z = numerator / np.sqrt(variance)
    # scipy.stats.norm's sf(x) and cdf(x) are ndtr(-x) and ndtr(x), without
    # the distribution's argument checks (most of a call's time)
    if alternative == "two-sided":
        pvalue = 2.0 * ndtr(-abs(z))
    elif alternative == "greater":
        pvalue = ndtr(-z)
    else:
        pvalue = ndtr(z)
    return SpiegelhalterTest(float(z), float(min(pvalue, 1.0)))


@groupable(value=lambda r: abs(r.normalized))
@validate_params(
    METRIC_ARRAYS
    | {  # a union, not {**...}: Sphinx's source parser fails on the latter
        "alternative": [StrOptions({"two-sided", "greater", "less"})],
    },
    prefer_skip_nested_validation=True,
)
@dask_dispatch("spiegelhalter_test")
def spiegelhalter_test(
    y_true, y_proba, *, alternative="two-sided", sample_weight=None, labels=None
):
    """Spiegelhalter's Z test of perfect calibration.

    The Brier score's deviation from its expectation under calibration,
    standardised: with ``r_i`` the predicted probability of the event and
    ``c_i`` its outcome, ``Z = sum_i w_i (c_i - r_i)(1 - 2 r_i) / sqrt(sum_i
    w_i^2 (1 - 2 r_i)^2 r_i (1 - r_i))``, standard normal under perfect
    calibration (Spiegelhalter, 1986). A positive Z means overconfident
    predictions, a negative one underconfident.

    For a multiclass problem the event is the top-label one: ``r_i = max_k
    p_ik`` and ``c_i`` whether the argmax is right. For a binary problem
    this equals the test on the positive class's probability (each row's
    term is unchanged when the class is flipped), which is what the
    reference, MAPIE 1.6 (``mapie.metrics.calibration.spiegelhalter_statistic``
    and ``spiegelhalter_p_value``, binary only), computes; its p-value is
    the one-sided ``alternative="greater"`` (``1 - Phi(Z)``), while the
    default here is the two-sided test of the paper.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        True labels.
    y_proba : array-like of shape (n_samples, n_classes) or (n_samples,)
        Predicted probabilities; 1-D input is the probability of the second
        (positive) class of a binary problem.
    alternative : {"two-sided", "greater", "less"}, default="two-sided"
        Alternative hypothesis: miscalibration either way (``2 Phi(-|Z|)``),
        overconfidence (``1 - Phi(Z)``, MAPIE's p-value) or
        underconfidence (``Phi(Z)``).
    sample_weight : array-like of shape (n_samples,), default=None
        Sample weights, read as fixed weights of independent rows (``w^2``
        in the variance).
    labels : array-like of shape (n_classes,), default=None
        Label of each column of ``y_proba``.

    Returns
    -------
    SpiegelhalterTest
        ``normalized`` (Z) and ``pvalue``.

    Raises
    ------
    ValueError
        When every confidence is 0.5 or 1 (zero variance) and a sure
        prediction is wrong; with every sure prediction right, Z is 0.

    References
    ----------
    D. J. Spiegelhalter, "Probabilistic prediction in patient management
    and clinical trials", Statistics in Medicine 5(5):421-433, 1986.

    Examples
    --------
    >>> from skcal.metrics import spiegelhalter_test
    >>> y_true = [0, 1, 0, 1, 0]
    >>> y_proba = [0.1, 0.9, 0.21, 0.9, 0.5]
    >>> result = spiegelhalter_test(y_true, y_proba, alternative="greater")
    >>> round(result.normalized, 3), round(result.pvalue, 3)
    (-0.757, 0.775)
    """
    # the argmax and maximum of each row come from the validation's pass
    proba, y_index, w, pred, conf = check_proba_targets(
        y_true,
        y_proba,
        labels=labels,
        sample_weight=sample_weight,
        copy=False,
        top_label=True,
    )
    w = np.asarray(w, dtype=np.float64)
    w = w / w.max()  # relative weights: any common scale gives the same value
    numerator, variance = spiegelhalter_sums(proba, y_index, w, top=(pred, conf))
    return spiegelhalter_from_sums(numerator, variance, alternative)


def spiegelhalter_abs_z(y_true, y_proba, *, sample_weight=None, labels=None):
    """``|Z|`` of :func:`spiegelhalter_test`: the scorer's metric.

    Ranks models as the two-sided p-value does (lower ``|Z|``, higher
    p-value); registered as ``"neg_spiegelhalter_abs_z"``.
    """
    result = spiegelhalter_test(
        y_true, y_proba, sample_weight=sample_weight, labels=labels
    )
    return abs(result.normalized)
