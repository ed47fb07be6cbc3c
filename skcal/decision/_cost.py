"""Decisions of least expected cost from probabilities, and their cost."""

from __future__ import annotations

from numbers import Real

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, clone
from sklearn.utils import get_tags
from sklearn.utils.validation import check_is_fitted, column_or_1d

from ..metrics import CalibrationScorer
from ..utils._sklearn import HasMethods, _fit_context
from ..utils._validation import (
    check_labels,
    check_proba_array,
    check_probabilities,
    check_sample_weight,
)
from ._labels import check_abstain_label, labels_with_abstention

__all__ = [
    "CostSensitiveClassifier",
    "bayes_decision_cost",
    "check_cost_matrix",
    "cost_sensitive_predict",
    "expected_cost",
    "make_cost_scorer",
]


def check_cost_matrix(cost_matrix, n_classes=None) -> np.ndarray:
    """A cost matrix as a float64 ``(n_classes, n_classes)`` array.

    ``cost_matrix[i, j]`` is the cost of predicting class ``j`` when the
    truth is class ``i``. Entries must be finite; negative entries are
    allowed (a reward, e.g. for a right prediction): the decisions depend
    only on differences of expected costs.

    Parameters
    ----------
    cost_matrix : array-like of shape (n_classes, n_classes)
    n_classes : int, default=None
        The number of classes it must have; None: any.

    Returns
    -------
    ndarray of shape (n_classes, n_classes)

    Examples
    --------
    >>> from skcal.decision import check_cost_matrix
    >>> check_cost_matrix([[0, 1], [5, 0]])
    array([[0., 1.],
           [5., 0.]])
    """
    try:
        cost = np.array(cost_matrix, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(
            "cost_matrix must be a square array of numbers (rows: true class, "
            f"columns: predicted class); got {cost_matrix!r} ({exc})."
        ) from None
    if cost.ndim != 2 or cost.shape[0] != cost.shape[1]:
        raise ValueError(
            "cost_matrix must be square, (n_classes, n_classes): rows the true "
            f"class, columns the predicted class; got shape {cost.shape}."
        )
    if n_classes is not None and cost.shape[0] != n_classes:
        raise ValueError(
            f"cost_matrix is {cost.shape[0]} x {cost.shape[0]} but there are "
            f"{n_classes} classes: give one row and one column per class, in "
            "the order of the classes (classes_ / labels)."
        )
    if not np.isfinite(cost).all():
        raise ValueError(
            "cost_matrix has non-finite entries (NaN or inf); a cost must be a "
            "finite number. Use a large finite cost for a forbidden decision."
        )
    return cost


def _proba_2d(y_proba) -> np.ndarray:
    """Probability rows; a 1-D array is the positive class of a binary task."""
    y_proba = check_proba_array(y_proba)
    if y_proba.ndim == 1:
        y_proba = np.column_stack([1.0 - y_proba, y_proba])
    return check_probabilities(y_proba, "y_proba")


def _check_abstain_cost(abstain_cost):
    if abstain_cost is not None and not (
        isinstance(abstain_cost, Real) and np.isfinite(abstain_cost)
    ):
        raise ValueError(
            "abstain_cost must be a finite number (the cost of abstaining) or "
            f"None (never abstain); got {abstain_cost!r}."
        )


def cost_sensitive_predict(
    y_proba, cost_matrix, *, classes=None, abstain_cost=None, abstain_label=-1
):
    """The decision of least expected cost under the probabilities.

    The expected cost of predicting ``j`` is ``sum_i p_i cost_matrix[i, j]``;
    the decision is the ``j`` that minimises it (the first on ties), or
    ``abstain_label`` where ``abstain_cost`` is lower than every class's
    expected cost. This is the Bayes decision: it has the least cost when
    the probabilities are calibrated.

    Parameters
    ----------
    y_proba : array-like of shape (n_samples, n_classes) or (n_samples,)
        Probabilities (1-D: of the second class of a binary task).
    cost_matrix : array-like of shape (n_classes, n_classes)
        ``cost_matrix[i, j]``: cost of predicting ``j`` when the truth is
        ``i`` (see :func:`check_cost_matrix`).
    classes : array-like of shape (n_classes,), default=None
        The label of each column; None: the column indices.
    abstain_cost : float, default=None
        The cost of abstaining; None: never abstain.
    abstain_label : int, float or str, default=-1
        The decision returned for an abstention.

    Returns
    -------
    ndarray of shape (n_samples,)

    Examples
    --------
    >>> import numpy as np
    >>> from skcal.decision import cost_sensitive_predict
    >>> proba = np.array([[0.8, 0.2], [0.6, 0.4], [0.3, 0.7]])
    >>> cost = [[0, 1], [5, 0]]  # missing a positive costs 5
    >>> cost_sensitive_predict(proba, cost).tolist()
    [1, 1, 1]
    >>> cost_sensitive_predict(proba, cost, abstain_cost=0.5).tolist()
    [-1, -1, 1]
    """
    proba = _proba_2d(y_proba)
    cost = check_cost_matrix(cost_matrix, proba.shape[1])
    _check_abstain_cost(abstain_cost)
    classes = np.arange(proba.shape[1]) if classes is None else np.asarray(classes)
    if classes.shape != (proba.shape[1],):
        raise ValueError(
            f"classes has {classes.size} labels but y_proba has "
            f"{proba.shape[1]} columns: give one label per column."
        )
    risks = proba @ cost
    decision = np.argmin(risks, axis=1)
    if abstain_cost is None:
        return classes[decision]
    check_abstain_label(abstain_label, classes)
    abstain = abstain_cost < risks[np.arange(len(decision)), decision]
    labels = labels_with_abstention(classes, abstain_label)
    return labels[np.where(abstain, len(classes), decision)]


def _indices(values, labels, name):
    """Position of each value in ``labels``, refusing unknown values."""
    order = np.argsort(labels, kind="stable")
    pos = np.clip(np.searchsorted(labels[order], values), 0, len(labels) - 1)
    unknown = labels[order][pos] != values
    if unknown.any():
        raise ValueError(
            f"{name} holds {np.unique(values[unknown])[:4].tolist()}, which are "
            f"not among labels {labels.tolist()[:8]} (the rows and columns of "
            "cost_matrix). Pass labels naming every class, in the order of "
            "cost_matrix."
        )
    return order[pos]


def expected_cost(
    y_true,
    y_pred,
    cost_matrix,
    *,
    labels=None,
    abstain_label=None,
    abstain_cost=None,
    sample_weight=None,
):
    """Mean cost of decisions under a cost matrix (lower is better).

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        True labels.
    y_pred : array-like of shape (n_samples,)
        Decisions: labels, or ``abstain_label``.
    cost_matrix : array-like of shape (n_classes, n_classes)
        ``cost_matrix[i, j]``: cost of deciding ``labels[j]`` when the truth
        is ``labels[i]``.
    labels : array-like of shape (n_classes,), default=None
        The class of each row and column of ``cost_matrix``; None: the sorted
        labels of ``y_true`` and ``y_pred`` (abstentions left out), which
        must then be ``n_classes``.
    abstain_label : int, float, str or None, default=None
        The decision that means "abstain"; None: no abstention.
    abstain_cost : float, default=None
        The cost of an abstention; required when ``y_pred`` abstains.
    sample_weight : array-like of shape (n_samples,), default=None
        Weights of the rows.

    Returns
    -------
    float

    Examples
    --------
    >>> from skcal.decision import expected_cost
    >>> cost = [[0, 1], [5, 0]]
    >>> float(expected_cost([0, 1, 1, 0], [0, 0, 1, 1], cost))
    1.5
    >>> float(expected_cost([0, 1], [-1, 1], cost, abstain_label=-1, abstain_cost=0.5))
    0.25
    """
    y_true = column_or_1d(check_labels(y_true))
    y_pred = column_or_1d(check_labels(y_pred))
    if y_true.shape != y_pred.shape:
        raise ValueError(
            f"y_true has {y_true.shape[0]} labels and y_pred {y_pred.shape[0]}; "
            "give one decision per row."
        )
    abstain = np.zeros(y_pred.shape, bool)
    if abstain_label is not None:
        abstain = y_pred == abstain_label
    if abstain.any():
        _check_abstain_cost(abstain_cost)
        if abstain_cost is None:
            raise ValueError(
                f"y_pred abstains ({int(abstain.sum())} rows are "
                f"{abstain_label!r}) but abstain_cost is None: give the cost of "
                "an abstention."
            )
    if labels is None:
        labels = np.unique(np.concatenate([y_true, y_pred[~abstain]]))
    labels = np.asarray(labels)
    cost = check_cost_matrix(cost_matrix, len(labels))
    truth = _indices(y_true, labels, "y_true")
    costs = np.full(y_true.shape, float(abstain_cost or 0.0))
    decided = _indices(y_pred[~abstain], labels, "y_pred")
    costs[~abstain] = cost[truth[~abstain], decided]
    weights = check_sample_weight(sample_weight, y_true.shape[0])
    return float(np.average(costs, weights=weights))


def bayes_decision_cost(
    y_true,
    y_proba,
    *,
    cost_matrix,
    labels=None,
    abstain_cost=None,
    sample_weight=None,
):
    """Mean cost of the least-expected-cost decisions of ``y_proba``.

    :func:`cost_sensitive_predict` followed by :func:`expected_cost`: how
    much the decisions made from these probabilities cost. Lower is
    better; calibrated probabilities minimise it in expectation.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
    y_proba : array-like of shape (n_samples, n_classes) or (n_samples,)
    cost_matrix : array-like of shape (n_classes, n_classes)
    labels : array-like of shape (n_classes,), default=None
        The class of each column; None: the sorted labels of ``y_true``.
    abstain_cost : float, default=None
    sample_weight : array-like of shape (n_samples,), default=None

    Returns
    -------
    float

    Examples
    --------
    >>> from skcal.decision import bayes_decision_cost
    >>> proba = [[0.9, 0.1], [0.7, 0.3], [0.2, 0.8]]
    >>> float(bayes_decision_cost([0, 1, 1], proba, cost_matrix=[[0, 1], [5, 0]]))
    0.0
    """
    proba = _proba_2d(y_proba)
    y_true = column_or_1d(check_labels(y_true))
    if labels is None:
        labels = np.unique(y_true)
    labels = np.asarray(labels)
    decisions = cost_sensitive_predict(
        proba,
        cost_matrix,
        classes=labels,
        abstain_cost=abstain_cost,
        abstain_label=_outside(labels),
    )
    return expected_cost(
        y_true,
        decisions,
        cost_matrix,
        labels=labels,
        abstain_label=None if abstain_cost is None else _outside(labels),
        abstain_cost=abstain_cost,
        sample_weight=sample_weight,
    )


def _outside(labels):
    """A label of the kind of ``labels`` that is none of them."""
    if np.asarray(labels).dtype.kind in "US" or np.asarray(labels).dtype == object:
        return "\x00abstain"
    return np.min(labels) - 1


def make_cost_scorer(cost_matrix, *, abstain_cost=None):
    """A scorer of the cost of an estimator's least-expected-cost decisions.

    It decides from ``estimator.predict_proba(X)`` with
    :func:`cost_sensitive_predict` (columns read as ``classes_``) and returns
    minus :func:`bayes_decision_cost`, so higher is better, as
    ``GridSearchCV`` expects. It has no registry name: it needs the cost
    matrix.

    Parameters
    ----------
    cost_matrix : array-like of shape (n_classes, n_classes)
    abstain_cost : float, default=None

    Returns
    -------
    CalibrationScorer

    Examples
    --------
    >>> import numpy as np
    >>> from skcal import TemperatureScaling
    >>> from skcal.decision import make_cost_scorer
    >>> rng = np.random.default_rng(0)
    >>> y = rng.integers(0, 2, 200)
    >>> X = np.column_stack([-y, y]) + rng.normal(size=(200, 2))
    >>> scorer = make_cost_scorer([[0, 1], [5, 0]])
    >>> scorer(TemperatureScaling(device="cpu").fit(X, y), X, y) <= 0
    True
    """
    cost = check_cost_matrix(cost_matrix)
    _check_abstain_cost(abstain_cost)
    return CalibrationScorer(
        bayes_decision_cost, sign=-1, cost_matrix=cost, abstain_cost=abstain_cost
    )


class CostSensitiveClassifier(ClassifierMixin, BaseEstimator):
    """A calibrator whose predictions minimise an expected cost.

    :meth:`fit` fits a clone of ``calibrator``; :meth:`predict` returns the
    decision of least expected cost under its calibrated probabilities
    (:func:`cost_sensitive_predict`), or ``abstain_label`` where
    ``abstain_cost`` is cheaper than every class. :meth:`predict_proba` is
    the calibrator's.

    Parameters
    ----------
    calibrator : estimator
        Any estimator with ``fit``, ``predict_proba`` and ``classes_``.
    cost_matrix : array-like of shape (n_classes, n_classes), default=None
        ``cost_matrix[i, j]``: cost of predicting ``classes_[j]`` when the
        truth is ``classes_[i]`` (see :func:`check_cost_matrix`); None: 0-1
        costs (1 for any error), whose decision is the argmax and, with
        ``abstain_cost``, Chow's rule (abstain when the largest probability
        is below ``1 - abstain_cost``).
    abstain_cost : float, default=None
        The cost of abstaining; None: never abstain.
    abstain_label : int, float or str, default=-1
        What :meth:`predict` returns for an abstention.

    Attributes
    ----------
    calibrator_ : estimator
        The fitted clone of ``calibrator``.
    classes_ : ndarray of shape (n_classes,)
        The calibrator's classes.
    cost_matrix_ : ndarray of shape (n_classes, n_classes)
        The validated cost matrix.
    n_features_in_ : int
        Number of columns of ``X``.

    Examples
    --------
    >>> import numpy as np
    >>> from skcal import TemperatureScaling
    >>> from skcal.decision import CostSensitiveClassifier
    >>> rng = np.random.default_rng(0)
    >>> y = rng.integers(0, 2, 500)
    >>> X = np.column_stack([-y, y]) + rng.normal(size=(500, 2))
    >>> clf = CostSensitiveClassifier(
    ...     TemperatureScaling(device="cpu"), [[0, 1], [10, 0]]
    ... ).fit(X, y)
    >>> bool((clf.predict(X) == 1).mean() > (y == 1).mean())
    True
    """

    _parameter_constraints: dict = {
        "calibrator": [HasMethods(["fit", "predict_proba"])],
        "cost_matrix": ["array-like", None],
        "abstain_cost": [Real, None],
        "abstain_label": [Real, str],
    }

    def __init__(
        self, calibrator, cost_matrix=None, *, abstain_cost=None, abstain_label=-1
    ):
        self.calibrator = calibrator
        self.cost_matrix = cost_matrix
        self.abstain_cost = abstain_cost
        self.abstain_label = abstain_label

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = get_tags(self.calibrator).input_tags.sparse
        return tags

    @_fit_context(prefer_skip_nested_validation=False)
    def fit(self, X, y, sample_weight=None):
        """Fit the calibrator.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            What ``calibrator`` takes.
        y : array-like of shape (n_samples,)
            Labels.
        sample_weight : array-like of shape (n_samples,), default=None
            Passed to the calibrator's ``fit``.

        Returns
        -------
        self : CostSensitiveClassifier
        """
        kwargs = {} if sample_weight is None else {"sample_weight": sample_weight}
        self.calibrator_ = clone(self.calibrator).fit(X, y, **kwargs)
        self.classes_ = np.asarray(self.calibrator_.classes_)
        n_classes = len(self.classes_)
        cost = self.cost_matrix
        if cost is None:
            cost = np.ones((n_classes, n_classes)) - np.eye(n_classes)
        self.cost_matrix_ = check_cost_matrix(cost, n_classes)
        _check_abstain_cost(self.abstain_cost)
        if self.abstain_cost is not None:
            check_abstain_label(self.abstain_label, self.classes_)
        for name in ("n_features_in_", "feature_names_in_"):
            if hasattr(self.calibrator_, name):
                setattr(self, name, getattr(self.calibrator_, name))
        return self

    def predict_proba(self, X):
        """The calibrated probabilities.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples, n_classes)
        """
        check_is_fitted(self, "cost_matrix_")
        return self.calibrator_.predict_proba(X)

    def predict(self, X):
        """The decision of least expected cost (or ``abstain_label``).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples,)
        """
        return cost_sensitive_predict(
            self.predict_proba(X),
            self.cost_matrix_,
            classes=self.classes_,
            abstain_cost=self.abstain_cost,
            abstain_label=self.abstain_label,
        )
