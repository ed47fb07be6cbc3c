"""Base class of every skcal calibrator: the input contract lives here."""

from __future__ import annotations

import warnings

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils.validation import (
    check_consistent_length,
    check_is_fitted,
    column_or_1d,
    validate_data,
)

from ._torch.kernels import softmax_inplace
from .exceptions import MissingClassWarning
from .utils._sklearn import StrOptions
from .utils._validation import (
    check_embeddings,
    check_finite,
    check_sample_weight,
    check_scores_shape,
    resolve_classes,
    scores_to_logits,
    sum_tolerance,
)

__all__ = ["BaseCalibrator", "BaseLocalCalibrator"]


def _is_one_dimensional(X) -> bool:
    """Whether ``X`` is a 1-D array or a flat list (without converting it)."""
    ndim = getattr(X, "ndim", None)
    if ndim is not None:
        return ndim == 1
    return (
        isinstance(X, (list, tuple)) and len(X) > 0 and all(np.isscalar(v) for v in X)
    )


def _owned(out, logits: np.ndarray) -> np.ndarray:
    """``out`` as a fresh, writeable, C-contiguous float64 array.

    Copied only if it is not already one: a view of ``logits`` (which may be
    the caller's own ``X``) or a read-only array.
    """
    out = np.asarray(out, dtype=np.float64, order="C")
    if np.may_share_memory(out, logits) or not out.flags.writeable:
        out = out.copy()
    return out


def check_fit_targets(
    estimator, y, n_rows, n_columns, classes, sample_weight, *, stacklevel=4
):
    """Validate the labels and weights given to ``fit``; map labels to columns.

    Shared by score and local calibrators. Requires labels of at least two
    classes with positive weight and warns (``MissingClassWarning``) about
    classes of ``classes_`` that have none.

    Returns
    -------
    classes_ : ndarray of shape (n_columns,)
    y_index : ndarray of shape (n_rows,), column of each label
    sample_weight : ndarray of shape (n_rows,)
    """
    name = type(estimator).__name__
    if y is None:
        raise ValueError(f"{name} requires y to be passed, but the target y is None.")
    y = np.asarray(y)
    if y.ndim == 2 and y.shape[1] == 1:
        y = column_or_1d(y, warn=True)
    if y.ndim != 1:
        raise ValueError(
            f"y must be 1-D labels of shape (n_samples,), got shape {y.shape}."
        )
    if len(y) != n_rows:
        raise ValueError(
            f"X and y have inconsistent numbers of samples: X has {n_rows} rows, "
            f"y has {len(y)}."
        )
    classes_, y_index = resolve_classes(y, n_columns, classes)
    sample_weight = check_sample_weight(sample_weight, n_rows, relative=True)
    counts = np.bincount(y_index, weights=sample_weight, minlength=len(classes_))
    n_present = int(np.count_nonzero(counts))
    if n_present < 2:
        raise ValueError(
            f"{name} needs calibration samples (with positive weight) from at "
            f"least 2 classes, but y holds only one class "
            f"({np.unique(y).tolist()[:3]}). Calibrating needs both correct and "
            "incorrect predictions: use a larger calibration set."
        )
    if n_present < len(classes_):
        missing = classes_[counts == 0]
        warnings.warn(
            f"{missing.size} class(es) have no calibration sample: "
            f"{missing.tolist()[:10]}. Their columns are kept, but nothing is "
            "learned about them; use a calibration set that covers every class "
            "if possible.",
            MissingClassWarning,
            stacklevel=stacklevel,
        )
    return classes_, y_index, sample_weight


class BaseCalibrator(ClassifierMixin, BaseEstimator):
    """Base class for score calibrators.

    A score calibrator learns a map from a classifier's scores ``X`` of shape
    ``(n_samples, n_classes)`` to calibrated probabilities. Subclasses
    implement ``_fit(logits, y_index, sample_weight)`` and
    ``_calibrated_logits(logits)``; this class does everything else.
    Calibrators that compute probabilities directly also implement
    ``_calibrated_proba(logits)`` (their ``_calibrated_logits`` is its log),
    which :meth:`predict_proba` then uses without a softmax.

    **Input contract.** ``input`` says whether ``X`` holds logits (any real
    scores whose softmax is the model's prediction; log-probabilities are
    valid logits) or probabilities. It is never guessed: a warning is raised
    when ``input="logits"`` but ``X`` looks like probabilities, and
    probabilities are validated (values in [0, 1], rows summing to 1 within
    1e-4, or four units in the last place for float16) and turned into
    logits with ``log(max(p, 2.2e-308))``. Logits beyond 1e300 in absolute value
    are refused.

    **Classes.** Column ``j`` of ``X`` is class ``classes_[j]``. Pass
    ``classes`` to give the full label set in column order; without it,
    integer labels all in ``range(n_columns)`` map to their own column, and
    any other labels (strings too) must have exactly ``n_columns`` distinct
    values, mapped in sorted order. A class with no sample in ``y`` keeps its
    column, with a :class:`~skcal.exceptions.MissingClassWarning`.

    **Score.** :meth:`score` returns the *negative mean log loss* (higher is
    better), not accuracy: a calibrator is judged on its probabilities.
    """

    _parameter_constraints: dict = {
        "input": [StrOptions({"logits", "proba"})],
        "classes": ["array-like", None],
    }
    #: Whether the model sees each row of logits only through the differences
    #: of its entries, so that adding a constant to a row changes nothing.
    #: Such calibrators work on ``X - X.max(axis=1)``: the invariance then
    #: also holds numerically, whatever the size of the constant.
    _shift_invariant = False
    #: Whether the predicted class is the argmax of ``X``: ``"proba"`` (the
    #: argmax of ``X`` also has the largest calibrated probability, ties
    #: allowed), ``"predict"`` (only :meth:`predict` returns it; the
    #: probabilities may rank another class first) or None (it can change).
    _keeps_argmax = None
    #: Whether ``_calibrated_proba`` reads the logits only through their
    #: softmax (which subtracts the row maxima itself): :meth:`predict_proba`
    #: then passes float64 scores unshifted, which gives the same
    #: probabilities bit for bit without the shifted copy.
    _softmax_first = False

    # ------------------------------------------------------------------ hooks
    def _fit(self, logits: np.ndarray, y_index: np.ndarray, sample_weight):
        raise NotImplementedError

    def _calibrated_logits(self, logits: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def _calibrated_proba(self, logits: np.ndarray) -> np.ndarray:
        """Calibrated probabilities of the validated ``logits``.

        The softmax of :meth:`_calibrated_logits`. A subclass whose model
        gives probabilities directly overrides this (one pass less, and no
        round trip through the log); it must not modify ``logits`` and may
        return any float64 array, which the caller copies if needed.
        """
        return softmax_inplace(_owned(self._calibrated_logits(logits), logits))

    # ------------------------------------------------------------ validation
    def _validate_scores(self, X, *, reset: bool, shift=None) -> np.ndarray:
        if _is_one_dimensional(X):  # skcal's advice before sklearn's reshape
            check_scores_shape(np.asarray(X))
        tol = sum_tolerance(getattr(X, "dtype", None))
        X = validate_data(
            self,
            X,
            reset=reset,
            dtype=[np.float64, np.float32],
            ensure_all_finite=False,
        )
        if shift is None:
            shift = self._shift_invariant
        elif shift == "unless_float64":  # see _softmax_first
            shift = self._shift_invariant and X.dtype != np.float64
        return scores_to_logits(X, self.input, tol=tol, shift=shift)

    def _validate_fit_data(self, X, y, sample_weight):
        logits = self._validate_scores(X, reset=True)
        self.classes_, y_index, sample_weight = check_fit_targets(
            self, y, logits.shape[0], logits.shape[1], self.classes, sample_weight
        )
        return logits, y_index, sample_weight

    # ---------------------------------------------------------------- public
    def fit(self, X, y, sample_weight=None):
        """Fit the calibrator on scores ``X`` and labels ``y``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_classes)
            Scores of the classifier being calibrated, read as logits or as
            probabilities according to ``input``.
        y : array-like of shape (n_samples,)
            True labels.
        sample_weight : array-like of shape (n_samples,), default=None
            Non-negative sample weights; the objective is a weighted mean.

        Returns
        -------
        self : object
            The fitted calibrator.
        """
        self._validate_params()
        logits, y_index, sample_weight = self._validate_fit_data(X, y, sample_weight)
        self._fit(logits, y_index, sample_weight)
        return self

    def decision_function(self, X) -> np.ndarray:
        """Calibrated logits of shape (n_samples, n_classes).

        Their softmax is :meth:`predict_proba`. Logits are defined up to a
        constant per row; calibrators whose model ignores such a constant
        (``_shift_invariant``) return them computed from ``X - X.max(axis=1)``.
        """
        check_is_fitted(self)
        logits = self._validate_scores(X, reset=False)
        return _owned(self._calibrated_logits(logits), logits)

    def predict_proba(self, X) -> np.ndarray:
        """Calibrated probabilities of shape (n_samples, n_classes).

        Column ``j`` is the probability of ``classes_[j]``; rows sum to 1.
        """
        check_is_fitted(self)
        shift = "unless_float64" if self._softmax_first else None
        logits = self._validate_scores(X, reset=False, shift=shift)
        return _owned(self._calibrated_proba(logits), logits)

    def predict_log_proba(self, X) -> np.ndarray:
        """Logarithm of :meth:`predict_proba`, computed stably."""
        return softmax_inplace(self.decision_function(X), log=True)

    def predict(self, X) -> np.ndarray:
        """Most probable class of each sample, as labels from ``classes_``.

        For calibrators that keep the predicted class (``_keeps_argmax``) it
        is the argmax of ``X`` itself, exactly, whatever the rounding of the
        calibrated probabilities.
        """
        if self._keeps_argmax is None:
            index = np.argmax(self.decision_function(X), axis=1)
        else:
            check_is_fitted(self)
            self._validate_scores(X, reset=False)
            index = np.argmax(np.asarray(X), axis=1)
        return self.classes_[index]

    def score(self, X, y, sample_weight=None) -> float:
        """Negative mean log loss of the calibrated probabilities on ``(X, y)``.

        Unlike ``ClassifierMixin.score`` this is not accuracy: higher is
        better, 0 is perfect.
        """
        check_is_fitted(self)
        log_proba = self.predict_log_proba(X)
        _, y_index = resolve_classes(y, len(self.classes_), self.classes_)
        sample_weight = check_sample_weight(
            sample_weight, log_proba.shape[0], relative=True
        )
        nll = -log_proba[np.arange(len(y_index)), y_index]
        return -float(np.average(nll, weights=sample_weight))

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = False
        # A calibrator cannot beat the ranking of the scores it is given; on
        # the arbitrary features of sklearn's generic checks its accuracy is
        # whatever argmax of those features gives.
        tags.classifier_tags.poor_score = True
        return tags


class BaseLocalCalibrator(ClassifierMixin, BaseEstimator):
    """Base class for local calibrators, fitted on embeddings.

    A local calibrator learns region-dependent corrections over the frozen
    representation of a classifier: ``X`` of shape ``(n_samples,
    n_features)`` holds the embeddings (penultimate-layer features) of the
    backbone, never its scores. Subclasses implement
    ``_fit(X, y_index, sample_weight)`` and ``_predict_proba(X)``.

    **The frozen head.** Methods that start from the classifier's own
    predictions (``_uses_head = True``) take its linear head as the
    constructor parameters ``coef`` of shape ``(n_classes, n_features)`` and
    ``intercept`` of shape ``(n_classes,)``, scikit-learn's naming, so that
    the logits are ``X @ coef.T + intercept`` and :meth:`predict_proba`
    needs nothing but ``X``. Row ``j`` of ``coef`` is class ``classes_[j]``
    (same rules as the columns of a score calibrator). Without ``coef`` a
    multinomial :class:`~sklearn.linear_model.LogisticRegression` head is
    fitted on ``(X, y)`` first; that is a self-contained classifier, not
    the post-hoc calibration of an existing model, so pass the backbone's
    head when there is one.

    **Score.** :meth:`score` returns the negative mean log loss (higher is
    better), probabilities clipped to machine epsilon as in
    :func:`sklearn.metrics.log_loss`.
    """

    _parameter_constraints: dict = {"classes": ["array-like", None]}
    #: whether the method uses the frozen linear head (``coef``, ``intercept``)
    _uses_head = False

    # ------------------------------------------------------------------ hooks
    def _fit(self, X: np.ndarray, y_index: np.ndarray, sample_weight: np.ndarray):
        raise NotImplementedError

    def _predict_proba(self, X: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    # ------------------------------------------------------------ validation
    def _validate_embeddings(self, X, *, reset: bool) -> np.ndarray:
        X = validate_data(
            self,
            X,
            reset=reset,
            dtype=[np.float64, np.float32],
            ensure_all_finite=False,
        )
        check_embeddings(X)
        return X

    def _head_columns(self, n_features: int):
        """Validated ``(coef, intercept)`` as float64, or None without coef."""
        if getattr(self, "coef", None) is None:
            if getattr(self, "intercept", None) is not None:
                raise ValueError(
                    "intercept was given without coef; pass the head's coef of "
                    "shape (n_classes, n_features) too."
                )
            return None
        coef = np.array(self.coef, dtype=np.float64)
        if coef.ndim != 2 or coef.shape[0] < 2 or coef.shape[1] != n_features:
            raise ValueError(
                f"coef must be the head's weight matrix of shape (n_classes, "
                f"n_features) = (>=2, {n_features}) for X with {n_features} "
                f"features; got shape {coef.shape}. For a binary head with one "
                "row w, pass np.vstack([-w, w]) / 2."
            )
        check_finite(coef, "coef")
        if self.intercept is None:
            intercept = np.zeros(coef.shape[0])
        else:
            intercept = np.array(self.intercept, dtype=np.float64).reshape(-1)
            if intercept.shape != (coef.shape[0],):
                raise ValueError(
                    f"intercept must have shape (n_classes,) = ({coef.shape[0]},) "
                    f"to match coef; got shape {np.shape(self.intercept)}."
                )
            check_finite(intercept[None, :], "intercept")
        return coef, intercept

    def _fit_head(self, X, y_index, sample_weight):
        from sklearn.linear_model import LogisticRegression

        n_classes = len(self.classes_)
        present = np.flatnonzero(np.bincount(y_index, minlength=n_classes))
        lr = LogisticRegression(max_iter=1000).fit(
            X, y_index, sample_weight=sample_weight
        )
        coef = np.zeros((n_classes, X.shape[1]))
        intercept = np.full(n_classes, -50.0)  # classes without samples
        if len(lr.classes_) == 2:
            coef[present] = np.vstack([-lr.coef_[0], lr.coef_[0]]) / 2
            intercept[present] = np.array([-1.0, 1.0]) * lr.intercept_[0] / 2
        else:
            coef[present] = lr.coef_
            intercept[present] = lr.intercept_
        return coef, intercept

    def head_logits(self, X) -> np.ndarray:
        """Logits of the frozen head, ``X @ coef_.T + intercept_``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Embeddings.

        Returns
        -------
        ndarray of shape (n_samples, n_classes)
        """
        check_is_fitted(self)
        if not self._uses_head:
            raise AttributeError(f"{type(self).__name__} does not use a head.")
        X = self._validate_embeddings(X, reset=False)
        return self._logits(X)

    def _logits(self, X: np.ndarray) -> np.ndarray:
        return np.asarray(X, dtype=np.float64) @ self.coef_.T + self.intercept_

    # ---------------------------------------------------------------- public
    def fit(self, X, y, sample_weight=None):
        """Fit the calibrator on embeddings ``X`` and labels ``y``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Embeddings of the calibration samples.
        y : array-like of shape (n_samples,)
            True labels.
        sample_weight : array-like of shape (n_samples,), default=None
            Non-negative sample weights.

        Returns
        -------
        self : object
            The fitted calibrator.
        """
        self._validate_params()
        X = self._validate_embeddings(X, reset=True)
        head = self._head_columns(X.shape[1]) if self._uses_head else None
        if head is not None:
            n_columns = head[0].shape[0]
        elif self.classes is not None:
            n_columns = len(np.atleast_1d(self.classes))
        else:
            n_columns = len(np.unique(np.asarray(y))) if y is not None else 0
        self.classes_, y_index, sample_weight = check_fit_targets(
            self, y, X.shape[0], n_columns, self.classes, sample_weight, stacklevel=3
        )
        if self._uses_head:
            if head is None:
                head = self._fit_head(X, y_index, sample_weight)
            self.coef_, self.intercept_ = head
        self._fit(X, y_index, sample_weight)
        return self

    def predict_proba(self, X) -> np.ndarray:
        """Calibrated probabilities of shape (n_samples, n_classes).

        Column ``j`` is the probability of ``classes_[j]``; rows sum to 1.
        """
        check_is_fitted(self)
        X = self._validate_embeddings(X, reset=False)
        return np.asarray(self._predict_proba(X), dtype=np.float64)

    def predict_log_proba(self, X) -> np.ndarray:
        """Logarithm of :meth:`predict_proba` (``-inf`` where it is 0)."""
        with np.errstate(divide="ignore"):
            return np.log(self.predict_proba(X))

    def predict(self, X) -> np.ndarray:
        """Most probable class of each sample, as labels from ``classes_``."""
        proba = self.predict_proba(X)
        return self.classes_[np.argmax(proba, axis=1)]

    def score(self, X, y, sample_weight=None) -> float:
        """Negative mean log loss of the calibrated probabilities on ``(X, y)``.

        Unlike ``ClassifierMixin.score`` this is not accuracy: higher is
        better, 0 is perfect.
        """
        check_is_fitted(self)
        check_consistent_length(X, y, sample_weight)
        proba = self.predict_proba(X)
        _, y_index = resolve_classes(y, len(self.classes_), self.classes_)
        sample_weight = check_sample_weight(
            sample_weight, proba.shape[0], relative=True
        )
        eps = np.finfo(np.float64).eps
        p_true = np.clip(proba[np.arange(len(y_index)), y_index], eps, 1.0)
        return float(np.average(np.log(p_true), weights=sample_weight))

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = False
        return tags
