"""The top-k input of calibrators: ``fit`` / ``predict_*`` of a
:class:`~skcal.llm.TopKScores`, dispatched to the calibrator's own top-k fit
and map, never a dense ``n x vocabulary`` array."""

from __future__ import annotations

import numpy as np
from sklearn.utils.validation import check_is_fitted

from ..llm._topk import TopKScores
from ..llm._topk_ops import check_topk_targets

__all__ = ["TopKInputMixin"]


class TopKInputMixin:
    """``fit``, ``predict_proba``, ``predict_log_proba``,
    ``decision_function`` and ``predict`` that take a
    :class:`~skcal.llm.TopKScores` as well as dense scores.

    A class using it (before its calibrator base) defines
    ``_fit_topk(top, y_index, sample_weight)`` and ``_map_topk(top)`` (the
    calibrated ``TopKScores``, same indices); dense input goes to the base.
    """

    def fit(self, X, y, sample_weight=None):
        """Fit the calibrator on scores ``X`` and labels ``y``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_classes) or TopKScores
            Scores of the classifier being calibrated, read according to
            ``input``; or a :class:`~skcal.llm.TopKScores` (see "Top-k
            input" in the class docstring).
        y : array-like of shape (n_samples,)
            True labels; with a ``TopKScores``, class indices in
            ``[0, n_classes)``.
        sample_weight : array-like of shape (n_samples,), default=None
            Non-negative sample weights.

        Returns
        -------
        self
            The fitted calibrator.
        """
        if not isinstance(X, TopKScores):
            return super().fit(X, y, sample_weight)
        self._validate_params()
        if self.classes is not None:
            raise ValueError(
                f"{type(self).__name__}(classes=...) with TopKScores input: the "
                "top-k's class indices are the classes, and y holds them; leave "
                "classes=None."
            )
        y_index, weight = check_topk_targets(X, y, sample_weight)
        self.classes_ = np.arange(X.n_classes)
        self.n_features_in_ = X.n_classes
        self._fit_topk(X, y_index, weight)
        return self

    def _checked_topk(self, X):
        check_is_fitted(self)
        if X.n_classes != self.n_features_in_:
            raise ValueError(
                f"X has n_classes={X.n_classes}, but {type(self).__name__} was "
                f"fitted on {self.n_features_in_} classes."
            )
        return self._map_topk(X)

    def predict_proba(self, X):
        """Calibrated probabilities of shape (n_samples, n_classes).

        With a :class:`~skcal.llm.TopKScores`, a ``TopKScores`` of the
        calibrated log-probabilities (same indices).
        """
        if isinstance(X, TopKScores):
            return self._checked_topk(X)
        return super().predict_proba(X)

    def predict_log_proba(self, X):
        """Logarithm of :meth:`predict_proba`.

        With a :class:`~skcal.llm.TopKScores`, the same ``TopKScores`` as
        :meth:`predict_proba` (it holds log-probabilities).
        """
        if isinstance(X, TopKScores):
            return self._checked_topk(X)
        return super().predict_log_proba(X)

    def decision_function(self, X):
        """Calibrated logits of shape (n_samples, n_classes).

        With a :class:`~skcal.llm.TopKScores`, the ``TopKScores`` of
        :meth:`predict_log_proba`.
        """
        if isinstance(X, TopKScores):
            return self._checked_topk(X)
        return super().decision_function(X)

    def predict(self, X):
        """Most probable class of each sample.

        With a :class:`~skcal.llm.TopKScores`, each row's top listed class
        index after calibration.
        """
        if not isinstance(X, TopKScores):
            return super().predict(X)
        top = self._checked_topk(X)
        best = np.argmax(top.values, axis=1)
        return self.classes_[top.indices[np.arange(len(top)), best]]
