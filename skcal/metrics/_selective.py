"""Selective prediction: risk-coverage curves and their areas.

A selective classifier predicts the argmax class of ``y_proba`` and abstains
on the rows of lowest confidence. Sorting the rows by decreasing confidence,
the first ``k`` rows are accepted at coverage ``c_k = W_k / W`` (their share
of the total weight ``W``; ``k / n`` without weights) and the selective risk
is their mean 0-1 loss, ``r_k = L_k / W_k`` with ``L_k`` the weight of the
errors among them. The metrics follow torch-uncertainty 0.13
(``torch_uncertainty.metrics.classification``): the areas are trapezoids
over the points ``(c_k, .)``, ``k = 1..n``, divided by ``1 - c_1`` (the
width they span), and equal its values to rounding on rows without ties.
On a single row (of positive weight) an area is that row's value, where
torch-uncertainty gives NaN.

Ties in the confidence: torch-uncertainty orders tied rows as
``torch.argsort`` happens to, so its values depend on the row order. Here
each row of a group of tied confidences carries the group's mean loss,
which gives the mean of torch-uncertainty's values over every order of the
tied rows (the expected errors among the first ``j`` rows of a tied group
are ``j`` times its mean loss, and every metric is linear in those counts at
fixed ``k``): the metrics do not depend on the row order, and equal
torch-uncertainty's where no confidences tie. (With unequal weights inside
a tied group the rows are ordered by increasing weight.)
"""

from __future__ import annotations

from numbers import Real

import numpy as np
from sklearn.utils.validation import column_or_1d

from ..utils._constraints import METRIC_ARRAYS
from ..utils._docstrings import fill_doc
from ..utils._sklearn import Interval, validate_params
from ..utils._validation import check_finite, check_proba_targets
from ._dask import dask_dispatch

__all__ = [
    "augrc",
    "aurc",
    "coverage_at_risk",
    "eaurc",
    "risk_coverage_curve",
    "selective_risk",
]

_ARRAYS = {
    **METRIC_ARRAYS,
    "confidence": ["array-like", None],
}

#: The descriptions of the arrays of the selective metrics (and displays).
SELECTIVE_TARGETS_DOC = """\
    y_true : array-like of shape (n_samples,)
        True labels.
    y_proba : array-like of shape (n_samples, n_classes) or (n_samples,)
        Predicted probabilities (1-D: positive class of a binary problem).
"""
SELECTIVE_ROWS_DOC = """\
    confidence : array-like of shape (n_samples,), default=None
        Score that ranks the rows, higher is more confident; the top
        probability by default.
    sample_weight : array-like of shape (n_samples,), default=None
        Sample weights.
    labels : array-like of shape (n_classes,), default=None
        Label of each column of ``y_proba``.
"""
_fill_doc = fill_doc(targets=SELECTIVE_TARGETS_DOC, rows=SELECTIVE_ROWS_DOC)


def selective_losses(
    y_true, y_proba, *, confidence=None, sample_weight=None, labels=None
):
    """Validated 0-1 losses, confidences and weights of a selective metric.

    The loss of a row is 1 where the argmax of ``y_proba`` is not its label;
    the confidence is the top probability, or ``confidence`` when given (a
    finite score per row, higher is more confident).
    """
    _, y_index, w, pred, top = check_proba_targets(
        y_true, y_proba, labels=labels, sample_weight=sample_weight, top_label=True
    )
    loss = (pred != y_index).astype(np.float64)
    if confidence is None:
        conf = top.astype(np.float64)
    else:
        conf = column_or_1d(np.asarray(confidence, dtype=np.float64))
        if conf.shape[0] != loss.shape[0]:
            raise ValueError(
                f"confidence has {conf.shape[0]} values but y_proba has "
                f"{loss.shape[0]} rows: pass one score per row (higher is more "
                "confident), or None for the top probability."
            )
        check_finite(conf.reshape(-1, 1), "confidence")
    return loss, conf, w


class _Curve:
    """The row-level risk-coverage curve of losses ``loss``, confidences
    ``conf`` and weights ``w`` (rows of zero weight dropped).

    Attributes: ``conf`` (sorted, decreasing), ``cum_w`` (``W_k``),
    ``cum_loss`` (``L_k``, ties spread), ``total`` (``W``), ``ends`` (the
    last row of each group of tied confidences).
    """

    def __init__(self, loss, conf, w):
        keep = w > 0
        if not keep.any():
            raise ValueError(
                "Sample weights must contain at least one non-zero number."
            )
        loss, conf, w = loss[keep], conf[keep], w[keep]
        order = np.lexsort((w, -conf))
        loss, conf, w = loss[order], conf[order], w[order]
        starts = np.flatnonzero(np.r_[True, conf[1:] != conf[:-1]])
        group_loss = np.add.reduceat(w * loss, starts) / np.add.reduceat(w, starts)
        sizes = np.diff(np.r_[starts, len(conf)])
        self.conf = conf
        self.cum_w = np.cumsum(w)
        self.cum_loss = np.cumsum(w * np.repeat(group_loss, sizes))
        self.total = self.cum_w[-1]
        self.ends = np.r_[starts[1:] - 1, len(conf) - 1]

    @property
    def coverage(self) -> np.ndarray:
        return self.cum_w / self.total

    @property
    def risk(self) -> np.ndarray:
        return self.cum_loss / self.cum_w

    def area(self, values: np.ndarray) -> float:
        """Trapezoid of ``values`` over the coverages, over ``1 - c_1``: the
        mean height of the curve (one row of positive weight: its value)."""
        cov = self.coverage
        if len(cov) < 2:
            return float(values[0])
        area = np.sum(np.diff(cov) * (values[1:] + values[:-1])) / 2.0
        return float(area / (1.0 - cov[0]))


def aurc_of_rows(loss, conf, w) -> float:
    """:func:`aurc` of validated losses, confidences and weights."""
    curve = _Curve(loss, conf, w)
    return curve.area(curve.risk)


def eaurc_of_rows(loss, conf, w) -> float:
    """:func:`eaurc` of validated rows: the oracle ranks correct rows first."""
    return max(aurc_of_rows(loss, conf, w) - aurc_of_rows(loss, -loss, w), 0.0)


def augrc_of_rows(loss, conf, w) -> float:
    """:func:`augrc` of validated losses, confidences and weights."""
    curve = _Curve(loss, conf, w)
    return curve.area(curve.cum_loss / curve.total)


def _curve(y_true, y_proba, confidence, sample_weight, labels) -> _Curve:
    """The curve of the rows, validated by :func:`selective_losses`."""
    return _Curve(
        *selective_losses(
            y_true,
            y_proba,
            confidence=confidence,
            sample_weight=sample_weight,
            labels=labels,
        )
    )


#: the areas of validated rows, by metric name (the mergeable states')
AREAS = {"aurc": aurc_of_rows, "eaurc": eaurc_of_rows, "augrc": augrc_of_rows}


@validate_params(_ARRAYS, prefer_skip_nested_validation=True)
@_fill_doc
def risk_coverage_curve(
    y_true, y_proba, *, confidence=None, sample_weight=None, labels=None
):
    """Risk-coverage curve of a selective classifier.

    Accepting the rows whose confidence is at least ``thresholds[i]`` covers
    ``coverages[i]`` of the (weighted) rows, with selective risk
    ``risks[i]``: the mean 0-1 loss of the argmax prediction on them. One
    point per distinct confidence, from the highest down (coverage
    increasing to 1).

    Parameters
    ----------
    {targets}
    confidence : array-like of shape (n_samples,), default=None
        Score that ranks the rows, higher is more confident; the top
        probability ``y_proba.max(axis=1)`` by default.
    sample_weight : array-like of shape (n_samples,), default=None
        Sample weights; rows of weight 0 are left out.
    labels : array-like of shape (n_classes,), default=None
        Label of each column of ``y_proba``.

    Returns
    -------
    coverages : ndarray
        Share of the weight accepted, increasing to 1.
    risks : ndarray
        Selective risk (error rate among the accepted rows).
    thresholds : ndarray
        Confidence thresholds, decreasing.

    Examples
    --------
    >>> from skcal.metrics import risk_coverage_curve
    >>> y = [0, 1, 0, 1]
    >>> proba = [[0.9, 0.1], [0.8, 0.2], [0.3, 0.7], [0.4, 0.6]]
    >>> cov, risk, thr = risk_coverage_curve(y, proba)
    >>> cov.tolist(), risk.tolist()
    ([0.25, 0.5, 0.75, 1.0], [0.0, 0.5, 0.6666666666666666, 0.5])
    """
    curve = _Curve(*selective_losses(**locals()))  # the arguments, by name
    ends = curve.ends
    return curve.coverage[ends], curve.risk[ends], curve.conf[ends]


@validate_params(_ARRAYS, prefer_skip_nested_validation=True)
@_fill_doc
@dask_dispatch("aurc")
def aurc(y_true, y_proba, *, confidence=None, sample_weight=None, labels=None):
    """Area under the risk-coverage curve (AURC), lower is better.

    Geifman et al. (2019), in torch-uncertainty's normalisation:
    ``sum_k (c_{k+1} - c_k) (r_k + r_{k+1}) / 2 / (1 - c_1)`` over the rows
    sorted by decreasing confidence, with coverage ``c_k = W_k / W`` and
    selective risk ``r_k = L_k / W_k`` (``k / n`` and the error rate of the
    ``k`` most confident rows without weights). Tied confidences count as
    the mean over the orders of the tied rows: each carries its group's
    mean loss, so the value does not depend on the row order.
    Equals ``torch_uncertainty.metrics.classification.AURC`` without ties.

    Parameters
    ----------
    {targets}
    {rows}

    Returns
    -------
    float
        The AURC, in [0, 1].

    See Also
    --------
    eaurc : The AURC above that of the best ordering.
    augrc : The area under the generalized risk-coverage curve.

    Examples
    --------
    >>> from skcal.metrics import aurc
    >>> y = [0, 1, 0, 1]
    >>> proba = [[0.9, 0.1], [0.8, 0.2], [0.3, 0.7], [0.4, 0.6]]
    >>> round(aurc(y, proba), 4)
    0.4722
    """
    return aurc_of_rows(*selective_losses(**locals()))  # the arguments, by name


@validate_params(_ARRAYS, prefer_skip_nested_validation=True)
@_fill_doc
@dask_dispatch("eaurc")
def eaurc(y_true, y_proba, *, confidence=None, sample_weight=None, labels=None):
    """Excess AURC: the AURC minus that of the oracle ordering.

    Geifman et al. (2019): ``E-AURC = AURC - AURC*``, where ``AURC*`` is
    :func:`aurc` (the same finite-sample formula) of the rows ordered with
    every correct prediction before every error. It is 0 for a confidence
    that ranks all errors last, whatever the error rate, and compares the
    ranking of models of different accuracy. Geifman et al. give the limit
    ``AURC* ~ r + (1 - r) log(1 - r)`` for many rows at error rate ``r``;
    the exact finite-sample oracle is used here, so that the excess of a
    perfect ranking is exactly 0. torch-uncertainty has no E-AURC; this is
    its AURC minus its AURC of scores ``1 - loss``.

    Parameters
    ----------
    {targets}
    {rows}

    Returns
    -------
    float
        The E-AURC, at least 0; lower is better.

    Examples
    --------
    >>> from skcal.metrics import eaurc
    >>> y = [0, 1, 0, 1]
    >>> proba = [[0.9, 0.1], [0.8, 0.2], [0.3, 0.7], [0.4, 0.6]]
    >>> round(eaurc(y, proba), 4)
    0.2778
    """
    return eaurc_of_rows(*selective_losses(**locals()))  # the arguments, by name


@validate_params(_ARRAYS, prefer_skip_nested_validation=True)
@_fill_doc
@dask_dispatch("augrc")
def augrc(y_true, y_proba, *, confidence=None, sample_weight=None, labels=None):
    """Area under the generalized risk-coverage curve (AUGRC), lower is better.

    Traub et al. (2024): the generalized risk at coverage ``c_k`` is the
    weight of the accepted errors over all the weight, ``L_k / W`` (the
    probability that a row is accepted and wrong), and the AUGRC is its
    trapezoid area over the coverage, in torch-uncertainty's normalisation
    ``sum_k (c_{k+1} - c_k) (L_k + L_{k+1}) / (2 W) / (1 - c_1)``. Unlike the
    AURC it does not weigh the few most confident rows heavily. Tied
    confidences count as the mean over their orders. Equals
    ``torch_uncertainty.metrics.classification.AUGRC`` without ties.

    Parameters
    ----------
    {targets}
    {rows}

    Returns
    -------
    float
        The AUGRC, in [0, 1]: about half the error rate for a random
        ranking, and about 0.5 when every row is wrong.

    Examples
    --------
    >>> from skcal.metrics import augrc
    >>> y = [0, 1, 0, 1]
    >>> proba = [[0.9, 0.1], [0.8, 0.2], [0.3, 0.7], [0.4, 0.6]]
    >>> round(augrc(y, proba), 4)
    0.3333
    """
    return augrc_of_rows(*selective_losses(**locals()))  # the arguments, by name


@validate_params(
    {**_ARRAYS, "coverage": [Interval(Real, 0, 1, closed="right")]},
    prefer_skip_nested_validation=True,
)
@_fill_doc
@dask_dispatch("selective_risk")
def selective_risk(
    y_true, y_proba, *, coverage, confidence=None, sample_weight=None, labels=None
):
    """Selective risk at a coverage: the error rate of the most confident rows.

    The rows are accepted by decreasing confidence until their weight
    reaches ``coverage`` of the total (``ceil(coverage * n)`` rows without
    weights), and the risk is their error rate, as
    ``torch_uncertainty.metrics.classification.RiskAtxCov``. Within a group
    of tied confidences, the expected risk when the tied rows are accepted
    in random order.

    Parameters
    ----------
    {targets}
    coverage : float in (0, 1]
        Share of the rows to accept.
    {rows}

    Returns
    -------
    float
        The selective risk; lower is better.

    Examples
    --------
    >>> from skcal.metrics import selective_risk
    >>> y = [0, 1, 0, 1]
    >>> proba = [[0.9, 0.1], [0.8, 0.2], [0.3, 0.7], [0.4, 0.6]]
    >>> selective_risk(y, proba, coverage=0.5)
    0.5
    """
    curve = _curve(y_true, y_proba, confidence, sample_weight, labels)
    k = np.searchsorted(curve.cum_w, coverage * curve.total, side="left")
    return float(curve.risk[min(k, len(curve.cum_w) - 1)])


@validate_params(
    {**_ARRAYS, "risk": [Interval(Real, 0, 1, closed="both")]},
    prefer_skip_nested_validation=True,
)
@_fill_doc
@dask_dispatch("coverage_at_risk")
def coverage_at_risk(
    y_true, y_proba, *, risk, confidence=None, sample_weight=None, labels=None
):
    """Largest coverage whose selective risk is at most ``risk``.

    The largest ``c_k`` with ``r_k <= risk`` over the rows sorted by
    decreasing confidence (the risk need not fall monotonically), as
    ``torch_uncertainty.metrics.classification.CovAtxRisk``; tied
    confidences as in :func:`selective_risk`. Where no coverage reaches the
    risk, 0.0: only rejecting every row does (torch-uncertainty gives NaN).

    Parameters
    ----------
    {targets}
    risk : float in [0, 1]
        The largest acceptable error rate among the accepted rows.
    {rows}

    Returns
    -------
    float
        The coverage in [0, 1]; higher is better.

    Examples
    --------
    >>> from skcal.metrics import coverage_at_risk
    >>> y = [0, 1, 0, 1]
    >>> proba = [[0.9, 0.1], [0.8, 0.2], [0.3, 0.7], [0.4, 0.6]]
    >>> coverage_at_risk(y, proba, risk=0.5)
    1.0
    """
    curve = _curve(y_true, y_proba, confidence, sample_weight, labels)
    ok = np.flatnonzero(curve.risk <= risk)
    return float(curve.coverage[ok[-1]]) if ok.size else 0.0
