"""Base class of every skcal calibrator: the input contract lives here."""

from __future__ import annotations

import warnings

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils.validation import check_is_fitted, validate_data

from ._torch.kernels import softmax_inplace
from .exceptions import MissingClassWarning
from .utils._sklearn import StrOptions
from .utils._validation import (
    check_sample_weight,
    resolve_classes,
    scores_to_logits,
)

__all__ = ["BaseCalibrator"]


class BaseCalibrator(ClassifierMixin, BaseEstimator):
    """Base class for score calibrators.

    A score calibrator learns a map from a classifier's scores ``X`` of shape
    ``(n_samples, n_classes)`` to calibrated probabilities. Subclasses
    implement ``_fit(logits, y_index, sample_weight)`` and
    ``_calibrated_logits(logits)``; this class does everything else.

    **Input contract.** ``input`` says whether ``X`` holds logits (any real
    scores whose softmax is the model's prediction; log-probabilities are
    valid logits) or probabilities. It is never guessed: a warning is raised
    when ``input="logits"`` but ``X`` looks like probabilities, and
    probabilities are validated (values in [0, 1], rows summing to 1 within
    1e-4) and turned into logits with ``log(max(p, 1e-12))``.

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

    # ------------------------------------------------------------------ hooks
    def _fit(self, logits: np.ndarray, y_index: np.ndarray, sample_weight):
        raise NotImplementedError

    def _calibrated_logits(self, logits: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    # ------------------------------------------------------------ validation
    def _validate_scores(self, X, *, reset: bool) -> np.ndarray:
        X = validate_data(
            self,
            X,
            reset=reset,
            dtype=[np.float64, np.float32],
            ensure_all_finite=False,
        )
        return scores_to_logits(X, self.input)

    def _validate_fit_data(self, X, y, sample_weight):
        logits = self._validate_scores(X, reset=True)
        if y is None:
            raise ValueError(
                f"{type(self).__name__} requires y to be passed, but the target y "
                "is None."
            )
        y = np.asarray(y)
        if y.ndim == 2 and y.shape[1] == 1:
            y = y.ravel()
        if y.ndim != 1:
            raise ValueError(
                f"y must be 1-D labels of shape (n_samples,), got shape {y.shape}."
            )
        if len(y) != logits.shape[0]:
            raise ValueError(
                f"X and y have inconsistent numbers of samples: X has "
                f"{logits.shape[0]} rows, y has {len(y)}."
            )
        self.classes_, y_index = resolve_classes(y, logits.shape[1], self.classes)
        sample_weight = check_sample_weight(sample_weight, logits.shape[0])
        counts = np.bincount(
            y_index, weights=sample_weight, minlength=len(self.classes_)
        )
        n_present = int(np.count_nonzero(counts))
        if n_present < 2:
            raise ValueError(
                f"{type(self).__name__} needs calibration samples (with positive "
                f"weight) from at least 2 classes, but y holds only one class "
                f"({np.unique(y).tolist()[:3]}). Calibrating needs both correct "
                "and incorrect predictions: use a larger calibration set."
            )
        if n_present < len(self.classes_):
            missing = self.classes_[counts == 0]
            warnings.warn(
                f"{missing.size} class(es) have no calibration sample: "
                f"{missing.tolist()[:10]}. Their columns are kept, but nothing is "
                "learned about them; use a calibration set that covers every class "
                "if possible.",
                MissingClassWarning,
                stacklevel=3,
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

        Their softmax is :meth:`predict_proba`.
        """
        check_is_fitted(self)
        logits = self._validate_scores(X, reset=False)
        out = np.asarray(self._calibrated_logits(logits), dtype=np.float64, order="C")
        # a fresh array that the caller owns, never a view of the input
        if np.may_share_memory(out, logits) or not out.flags.writeable:
            out = out.copy()
        return out

    def predict_proba(self, X) -> np.ndarray:
        """Calibrated probabilities of shape (n_samples, n_classes).

        Column ``j`` is the probability of ``classes_[j]``; rows sum to 1.
        """
        return softmax_inplace(self.decision_function(X))

    def predict_log_proba(self, X) -> np.ndarray:
        """Logarithm of :meth:`predict_proba`, computed stably."""
        return softmax_inplace(self.decision_function(X), log=True)

    def predict(self, X) -> np.ndarray:
        """Most probable class of each sample, as labels from ``classes_``."""
        index = np.argmax(self.decision_function(X), axis=1)
        return self.classes_[index]

    def score(self, X, y, sample_weight=None) -> float:
        """Negative mean log loss of the calibrated probabilities on ``(X, y)``.

        Unlike ``ClassifierMixin.score`` this is not accuracy: higher is
        better, 0 is perfect.
        """
        check_is_fitted(self)
        log_proba = self.predict_log_proba(X)
        _, y_index = resolve_classes(y, len(self.classes_), self.classes_)
        sample_weight = check_sample_weight(sample_weight, log_proba.shape[0])
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
