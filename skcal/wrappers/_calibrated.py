"""CalibratedClassifier: any classifier composed with any skcal calibrator."""

from __future__ import annotations

from inspect import signature
from numbers import Integral

import numpy as np
from sklearn import get_config
from sklearn.base import BaseEstimator, ClassifierMixin, MetaEstimatorMixin, clone
from sklearn.exceptions import NotFittedError
from sklearn.frozen import FrozenEstimator
from sklearn.model_selection import check_cv
from sklearn.neural_network import MLPClassifier
from sklearn.utils import (
    _safe_indexing,
    assert_all_finite,
    column_or_1d,
    get_tags,
    indexable,
)
from sklearn.utils.metadata_routing import (
    MetadataRouter,
    MethodMapping,
    process_routing,
)
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.parallel import Parallel, delayed
from sklearn.utils.validation import check_is_fitted

from ..base import BaseLocalCalibrator, negative_log_loss
from ..utils._constants import FLOOR_BEFORE_LOG
from ..utils._dask import lazy_on_dask
from ..utils._sklearn import HasMethods, StrOptions, _fit_context
from ..utils._softmax import softmax_inplace
from ..utils._validation import check_sample_weight
from ..utils._warnings import warn
from ._embeddings import extract_embeddings, final_step, supports_embeddings

__all__ = ["CalibratedClassifier"]


def _resolve_response(estimator, response_method: str, local: bool) -> str:
    """Which output of ``estimator`` feeds the calibrator."""
    if local:
        return "embeddings"
    if response_method == "auto":
        if hasattr(estimator, "decision_function"):
            return "decision_function"
        if isinstance(final_step(estimator), MLPClassifier):
            return "mlp_logits"
        return "predict_proba"
    if not hasattr(estimator, response_method):
        raise ValueError(
            f"response_method={response_method!r}, but {type(estimator).__name__} "
            f"has no {response_method} method; use response_method='auto'."
        )
    return response_method


def _scores(estimator, X, response: str, n_classes: int) -> np.ndarray:
    """The estimator's logits or probabilities, always ``(n_samples, n_classes)``."""
    if response == "mlp_logits":
        from .._torch.kernels import affine_rows  # an MLP's head: torch's product

        emb, coef, intercept = extract_embeddings(estimator, X)
        return affine_rows(emb, coef, intercept)
    S = np.asarray(getattr(estimator, response)(X), dtype=np.float64)
    if S.ndim == 1 or (S.ndim == 2 and S.shape[1] == 1 and n_classes == 2):
        S = S.reshape(-1)
        # a binary model's single score: the decision value d -> (-d/2, d/2),
        # whose softmax is (1 - sigmoid(d), sigmoid(d)); a probability p of
        # the second class -> (1 - p, p)
        S = (
            np.column_stack([-S / 2, S / 2])
            if response == "decision_function"
            else np.column_stack([1.0 - S, S])
        )
    if S.ndim != 2 or S.shape[1] != n_classes:
        raise ValueError(
            f"{type(estimator).__name__}.{response} returned shape {S.shape}; "
            f"expected (n_samples, {n_classes}), one column per class."
        )
    return S


class _CalibratedPair:
    """A fitted classifier and the calibrator fitted on its outputs."""

    def __init__(self, estimator, calibrator, response: str, n_classes: int):
        self.estimator = estimator
        self.calibrator = calibrator
        self.response = response
        self.n_classes = n_classes

    def _calibrator_input(self, X):
        return _outputs(self.estimator, X, self.response, self.n_classes)[0]

    def predict_proba(self, X) -> np.ndarray:
        Z = self._calibrator_input(X)
        if self.calibrator is not None:
            return np.asarray(self.calibrator.predict_proba(Z), dtype=np.float64)
        if self.response == "predict_proba":
            return Z
        return softmax_inplace(Z)

    def predict_index(self, X) -> np.ndarray:
        """Column index of the calibrator's prediction."""
        if self.calibrator is None:
            return np.argmax(self.predict_proba(X), axis=1)
        labels = self.calibrator.predict(self._calibrator_input(X))
        return np.searchsorted(self.calibrator.classes_, labels)


def _fit_fold(estimator, X, y, train, test, fit_params, response, n_classes):
    """Fit ``estimator`` on ``train``; return it with its outputs on ``test``."""
    n = len(y)
    params = {
        key: _safe_indexing(value, train)
        if hasattr(value, "__len__")
        and not isinstance(value, str | dict)
        and len(value) == n
        else value
        for key, value in fit_params.items()
    }
    estimator.fit(_safe_indexing(X, train), _safe_indexing(y, train), **params)
    return estimator, _outputs(estimator, _safe_indexing(X, test), response, n_classes)


def _check_labels(y) -> np.ndarray:
    """``y`` as 1-D classification labels (finite, if numbers)."""
    y = column_or_1d(y, warn=True)
    if y.dtype.kind == "f":
        assert_all_finite(y, input_name="y")
    check_classification_targets(y)
    return y


def _check_local_calibrator(template, estimator, frozen: bool, ensemble: bool):
    """Refuse a local calibrator where its embeddings cannot be had or mixed."""
    if not frozen and not ensemble:
        raise ValueError(
            f"{type(template).__name__} is a local calibrator fitted on "
            f"embeddings, and ensemble=False would fit it on the out-of-fold "
            f"embeddings of models fitted on different folds, which live in "
            f"different spaces. Use ensemble=True (or 'auto'), or calibrate "
            f"a fitted model through FrozenEstimator."
        )
    if not supports_embeddings(estimator):
        raise TypeError(
            f"{type(template).__name__} is fitted on embeddings, but skcal "
            f"cannot read them from {type(final_step(estimator)).__name__}: "
            f"it reads an MLPClassifier, a linear classifier or a Pipeline "
            f"ending in one. Use a score calibrator, or compute the "
            f"embeddings yourself (see skcal.wrappers.extract_embeddings)."
        )


def _at(values, index):
    """``values[index]``, or None for None."""
    return None if values is None else values[index]


def _outputs(estimator, X, response, n_classes):
    if response == "embeddings":
        return extract_embeddings(estimator, X)
    return (_scores(estimator, X, response, n_classes),)


def _warn_if_fitted(estimator, cv) -> None:
    """Warn that a fitted classifier, not frozen, is about to be refitted."""
    try:
        check_is_fitted(estimator)
    except (NotFittedError, TypeError):  # TypeError: not an estimator
        return
    name = type(estimator).__name__
    folds = "5" if cv is None else (str(cv) if isinstance(cv, Integral) else "the")
    warn(
        f"CalibratedClassifier: the {name} given is already fitted, but not "
        f"wrapped in FrozenEstimator, so it is refitted on {folds} folds of the "
        "calibration rows (cross-fitting) and the copies are calibrated. To "
        "calibrate the fitted model as it is, pass "
        f"FrozenEstimator({name.lower()}) (from sklearn.frozen import "
        "FrozenEstimator); to silence this, pass an unfitted clone "
        "(sklearn.base.clone)."
    )


class CalibratedClassifier(MetaEstimatorMixin, ClassifierMixin, BaseEstimator):
    """A classifier calibrated by any skcal calibrator.

    Modelled on scikit-learn's :class:`~sklearn.calibration.CalibratedClassifierCV`,
    with skcal's calibrators in place of its sigmoid, isotonic and
    temperature maps:

    * **Prefit model.** Wrap a fitted classifier in
      :class:`sklearn.frozen.FrozenEstimator`; ``fit(X, y)`` then only
      calibrates it on ``(X, y)``, which must be data the model was not
      trained on.
    * **Cross-fitting.** Otherwise ``cv`` splits ``(X, y)``. With
      ``ensemble=True`` (the default for an unfrozen model), each fold fits a
      clone of the classifier on its training part and a clone of the
      calibrator on its held-out part, and :meth:`predict_proba` averages
      the pairs. With ``ensemble=False``, the calibrator is fitted once on
      the out-of-fold outputs and the classifier is refitted on all the
      data.

    The calibrator sees, for a score calibrator, the classifier's
    ``decision_function`` (as logits; a binary 1-D decision ``d`` becomes
    the two columns ``(-d/2, d/2)``) or its ``predict_proba`` (with
    ``input="proba"``), chosen by ``response_method``; its ``input`` and
    ``classes`` parameters are set by the wrapper. A local calibrator
    (:class:`~skcal.base.BaseLocalCalibrator`) sees the classifier's
    embeddings and gets its linear head as ``coef`` / ``intercept``, both
    read by :func:`~skcal.wrappers.extract_embeddings` (an ``MLPClassifier``,
    a linear model or a ``Pipeline`` ending in one). The calibrator says
    which of its parameters these are through the wrapper protocol of
    :class:`~skcal.base.BaseCalibrator` and
    :class:`~skcal.base.BaseLocalCalibrator`; a calibrator that is not a
    skcal one is fitted with the parameters it was given.

    Parameters
    ----------
    estimator : classifier
        The classifier to calibrate: unfitted (cross-fitted with ``cv``) or
        fitted inside a :class:`~sklearn.frozen.FrozenEstimator`.
    calibrator : skcal calibrator, "passthrough" or None, default=None
        Cloned for every fit. None is :class:`~skcal.TemperatureScaling`;
        ``"passthrough"`` applies no calibration (the classifier's own
        probabilities, or the softmax of its decision function), so that a
        search over ``calibrator`` can include "no calibration".
    cv : int, cross-validation generator or iterable, default=None
        Splits for cross-fitting; None is 5-fold stratified. Ignored for a
        :class:`~sklearn.frozen.FrozenEstimator` unless ``ensemble=True``.
    ensemble : bool or "auto", default="auto"
        "auto" is False for a :class:`~sklearn.frozen.FrozenEstimator` and
        True otherwise. A local calibrator needs ``ensemble=True`` when the
        classifier is refitted: the embeddings of models fitted on different
        folds do not live in one space.
    response_method : {"auto", "decision_function", "predict_proba"}, default="auto"
        The classifier output to calibrate. "auto" takes
        ``decision_function`` when the classifier has one, then the exact
        logits of an ``MLPClassifier`` (or a ``Pipeline`` ending in one),
        then ``predict_proba``. Ignored by local calibrators.
    n_jobs : int, default=None
        Folds fitted in parallel (joblib).

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
        The class labels.
    calibrated_classifiers_ : list
        The fitted pairs, each with attributes ``estimator`` and
        ``calibrator`` (None for "passthrough"): one per fold when
        ensembling, else one.
    calibrator_ : estimator or None
        The fitted calibrator when there is one pair (a
        :class:`~sklearn.frozen.FrozenEstimator`, or ``ensemble=False``):
        ``calibrated_classifiers_[0].calibrator``; for a
        :class:`~skcal.model_selection.CalibratorSearchCV`,
        ``calibrator_.selected_`` and ``calibrator_.cv_results_`` say what it
        chose and why. None with one pair per fold (each fold's calibrator is
        in ``calibrated_classifiers_``).
    response_ : str
        The output that was calibrated: "decision_function",
        "predict_proba", "mlp_logits" or "embeddings".
    n_features_in_ : int
        Number of features of ``X`` (when the classifier records it).
    feature_names_in_ : ndarray of shape (n_features,)
        Names of the features (when the classifier records them).

    Notes
    -----
    :meth:`predict` is the calibrator's prediction (for the top-label
    calibrators, the classifier's original label); with several fold pairs,
    the argmax of the averaged probabilities. :meth:`score` is the negative
    log loss, like every skcal calibrator, so that ``GridSearchCV`` without a
    ``scoring`` compares probabilities, not accuracies.

    ``sample_weight`` is used by the calibrator and passed to the
    classifier's ``fit`` when it accepts one; other ``fit_params`` go to the
    classifier's ``fit`` (indexed per fold when they have one value per
    sample). With metadata routing enabled they follow the requests set on
    the classifier and the splitter.

    Examples
    --------
    >>> from sklearn.datasets import load_digits
    >>> from sklearn.frozen import FrozenEstimator
    >>> from sklearn.linear_model import LogisticRegression
    >>> from skcal import CalibratedClassifier, VectorScaling
    >>> X, y = load_digits(return_X_y=True)
    >>> clf = LogisticRegression(max_iter=200).fit(X[:900], y[:900])
    >>> calibrated = CalibratedClassifier(
    ...     FrozenEstimator(clf), calibrator=VectorScaling(device="cpu")
    ... ).fit(X[900:1400], y[900:1400])
    >>> calibrated.predict_proba(X[1400:]).shape
    (397, 10)
    >>> calibrated.response_
    'decision_function'
    """

    _parameter_constraints: dict = {
        "estimator": [HasMethods(["fit"])],
        "calibrator": [
            HasMethods(["fit", "predict_proba"]),
            StrOptions({"passthrough"}),
            None,
        ],
        "cv": ["cv_object"],
        "ensemble": ["boolean", StrOptions({"auto"})],
        "response_method": [StrOptions({"auto", "decision_function", "predict_proba"})],
        "n_jobs": [Integral, None],
    }

    def __init__(
        self,
        estimator,
        *,
        calibrator=None,
        cv=None,
        ensemble="auto",
        response_method="auto",
        n_jobs=None,
    ):
        self.estimator = estimator
        self.calibrator = calibrator
        self.cv = cv
        self.ensemble = ensemble
        self.response_method = response_method
        self.n_jobs = n_jobs

    # ------------------------------------------------------------- helpers
    def _get_calibrator(self):
        if self.calibrator is None:
            from ..calibrators import TemperatureScaling

            return TemperatureScaling()
        if isinstance(self.calibrator, str):
            return None
        return self.calibrator

    def _routed_params(self, estimator, sample_weight, fit_params):
        if get_config().get("enable_metadata_routing", False):
            routed = process_routing(
                self, "fit", sample_weight=sample_weight, **fit_params
            )
            return dict(routed.estimator.fit), dict(routed.splitter.split)
        params = dict(fit_params)
        frozen = isinstance(estimator, FrozenEstimator)
        if (
            sample_weight is not None
            and not frozen
            and "sample_weight" in signature(estimator.fit).parameters
        ):
            params["sample_weight"] = sample_weight
        return params, {}

    def _new_calibrator(self, template, **outputs):
        """A clone of ``template`` configured by the wrapper protocol.

        ``outputs`` is ``input=`` for a score calibrator, ``coef=`` and
        ``intercept=`` for a local one: the clone's ``_wrapper_params`` (see
        :class:`~skcal.base.BaseCalibrator`) says which of its parameters
        they and ``classes_`` set. A calibrator without that method (not a
        skcal one) is fitted as it is.
        """
        if template is None:
            return None
        calibrator = clone(template)
        configure = getattr(calibrator, "_wrapper_params", None)
        if configure is None:
            return calibrator
        return calibrator.set_params(**configure(classes=self.classes_, **outputs))

    def _fit_calibrator(self, template, outputs, y, sample_weight):
        """Clone the template, fit it on one set of outputs; return it."""
        if self.response_ == "embeddings":
            Z, coef, intercept = outputs
            calibrator = self._new_calibrator(template, coef=coef, intercept=intercept)
        else:
            (Z,) = outputs
            kind = "proba" if self.response_ == "predict_proba" else "logits"
            calibrator = self._new_calibrator(template, input=kind)
        if calibrator is not None:
            calibrator.fit(Z, y, sample_weight=sample_weight)
        return calibrator

    def _check_classes(self, estimator):
        classes = getattr(estimator, "classes_", None)
        if classes is None or not np.array_equal(np.asarray(classes), self.classes_):
            raise ValueError(
                f"the fitted {type(estimator).__name__} has classes_ {classes}, "
                f"but the calibration labels are {self.classes_.tolist()}. Every "
                f"training fold must contain every class: use fewer folds, or "
                f"calibrate a FrozenEstimator on labels it knows."
            )

    # ------------------------------------------------------------------ fit
    @_fit_context(
        # the classifier is the user's, unvalidated: its own fit validates it
        prefer_skip_nested_validation=False
    )
    def fit(self, X, y, sample_weight=None, **fit_params):
        """Fit the classifier (unless frozen) and the calibrator.

        Parameters
        ----------
        X : array-like or any input the classifier accepts
            Training data, passed to the classifier untouched (pandas frames,
            text, ... are fine).
        y : array-like of shape (n_samples,)
            Labels.
        sample_weight : array-like of shape (n_samples,), default=None
            Weights for the calibrator, also passed to the classifier's
            ``fit`` when it accepts them (or when requested, with metadata
            routing).
        **fit_params : dict
            Passed to the classifier's ``fit`` (e.g. an evaluation set).

        Returns
        -------
        self : object
            The fitted wrapper.
        """
        X, y = indexable(X, y)
        y = _check_labels(y)
        template = self._get_calibrator()
        frozen = isinstance(self.estimator, FrozenEstimator)
        ensemble = (not frozen) if self.ensemble == "auto" else bool(self.ensemble)
        if not frozen:
            _warn_if_fitted(self.estimator, self.cv)
        # a local calibrator, or a meta-calibrator (CalibratorSearchCV) with
        # local candidates: it gets the embeddings and the head
        local = isinstance(template, BaseLocalCalibrator) or bool(
            getattr(template, "_reads_embeddings", lambda: False)()
        )
        if local:
            _check_local_calibrator(template, self.estimator, frozen, ensemble)
        if sample_weight is not None:
            sample_weight = check_sample_weight(sample_weight, len(y))
        fit_params, split_params = self._routed_params(
            self.estimator, sample_weight, fit_params
        )
        self.response_ = _resolve_response(self.estimator, self.response_method, local)
        self.classes_ = self._fit_classes(y, frozen)
        if frozen and not ensemble:
            pairs = [self._calibrate_frozen(template, X, y, sample_weight)]
        else:
            pairs = self._cross_fit(
                template,
                X,
                y,
                sample_weight,
                fit_params,
                split_params,
                frozen,
                ensemble,
            )
        self.calibrated_classifiers_ = [
            _CalibratedPair(est, cal, self.response_, len(self.classes_))
            for est, cal in pairs
        ]
        self.calibrator_ = pairs[0][1] if len(pairs) == 1 else None
        first = pairs[0][0]
        for attr in ("n_features_in_", "feature_names_in_"):
            if hasattr(first, attr):
                setattr(self, attr, getattr(first, attr))
        return self

    def _fit_classes(self, y, frozen: bool) -> np.ndarray:
        """``classes_``: the frozen classifier's, which must cover ``y``."""
        if not frozen:
            return np.unique(y)
        classes = np.asarray(self.estimator.classes_)
        unknown = np.setdiff1d(np.unique(y), classes)
        if unknown.size:
            raise ValueError(
                f"y has labels {unknown.tolist()} that the frozen classifier "
                f"does not know (its classes_ are {classes.tolist()}); it cannot "
                "predict them."
            )
        return classes

    def _calibrate_frozen(self, template, X, y, sample_weight):
        """One pair: the frozen classifier, the calibrator on its outputs."""
        outputs = _outputs(self.estimator, X, self.response_, len(self.classes_))
        return self.estimator, self._fit_calibrator(template, outputs, y, sample_weight)

    def _cross_fit(
        self, template, X, y, sample_weight, fit_params, split_params, frozen, ensemble
    ):
        """The pairs of cross-fitting: a clone of the classifier per ``cv`` fold.

        With ``ensemble``, each fold's clone with a calibrator fitted on its
        test part; else :meth:`_refit_on_all_data`.
        """
        cv = check_cv(self.cv, y, classifier=True)
        n_folds = cv.get_n_splits(X, y, **split_params)
        counts = np.unique(y, return_counts=True)[1]
        if not frozen and n_folds and counts.min() < n_folds:
            raise ValueError(
                f"{n_folds}-fold cross-fitting needs at least {n_folds} "
                f"samples of every class, but one class has "
                f"{int(counts.min())}. Use fewer folds (cv=...) or more data."
            )
        folds = list(cv.split(X, y, **split_params))
        fitted = Parallel(n_jobs=self.n_jobs)(
            delayed(_fit_fold)(
                clone(self.estimator),
                X,
                y,
                train,
                test,
                fit_params,
                self.response_,
                len(self.classes_),
            )
            for train, test in folds
        )
        for est, _ in fitted:
            self._check_classes(est)
        if not ensemble:
            return [
                self._refit_on_all_data(
                    template, X, y, sample_weight, fit_params, folds, fitted
                )
            ]
        return [
            (
                est,
                self._fit_calibrator(template, out, y[test], _at(sample_weight, test)),
            )
            for (est, out), (_, test) in zip(fitted, folds)
        ]

    def _refit_on_all_data(
        self, template, X, y, sample_weight, fit_params, folds, fitted
    ):
        """One pair: the classifier refitted, the calibrator on out-of-fold outputs.

        The ``ensemble=False`` path; the test folds must partition the samples.
        """
        test_all = np.concatenate([test for _, test in folds])
        scores = np.concatenate([out[0] for _, out in fitted])
        order = np.argsort(test_all, kind="stable")
        if len(test_all) != len(y) or np.any(test_all[order] != np.arange(len(y))):
            raise ValueError(
                "ensemble=False needs a cv whose test folds partition the "
                "samples (each sample in exactly one test fold)."
            )
        est = clone(self.estimator).fit(X, y, **fit_params)
        self._check_classes(est)
        calibrator = self._fit_calibrator(template, (scores[order],), y, sample_weight)
        return est, calibrator

    # -------------------------------------------------------------- predict
    @lazy_on_dask("proba")
    def predict_proba(self, X) -> np.ndarray:
        """Calibrated probabilities, averaged over the fold pairs.

        Parameters
        ----------
        X : array-like or any input the classifier accepts
            Samples.

        Returns
        -------
        proba : ndarray of shape (n_samples, n_classes)
            Column ``j`` is the probability of ``classes_[j]``.
        """
        check_is_fitted(self)
        pairs = self.calibrated_classifiers_
        proba = pairs[0].predict_proba(X)
        for pair in pairs[1:]:
            proba = proba + pair.predict_proba(X)
        return proba / len(pairs)

    @lazy_on_dask("labels")
    def predict(self, X) -> np.ndarray:
        """Predicted labels.

        The calibrator's prediction with one pair; the argmax of the
        averaged probabilities with several.
        """
        check_is_fitted(self)
        pairs = self.calibrated_classifiers_
        if len(pairs) == 1:
            return self.classes_[pairs[0].predict_index(X)]
        return self.classes_[np.argmax(self.predict_proba(X), axis=1)]

    @lazy_on_dask("proba")
    def predict_log_proba(self, X) -> np.ndarray:
        """Logarithm of :meth:`predict_proba` (floored at 1e-300)."""
        return np.log(np.maximum(self.predict_proba(X), FLOOR_BEFORE_LOG))

    def score(self, X, y, sample_weight=None) -> float:
        """Negative mean log loss of the calibrated probabilities (higher is better).

        Computed as by every skcal calibrator (see
        :class:`~skcal.base.BaseCalibrator`).
        """
        with np.errstate(divide="ignore"):
            log_proba = np.log(self.predict_proba(X))
        return negative_log_loss(log_proba, y, self.classes_, sample_weight)

    # ------------------------------------------------------- sklearn glue
    def get_metadata_routing(self):
        """Metadata routing: ``fit`` params to the classifier and the splitter.

        Returns
        -------
        routing : MetadataRouter
        """
        return (
            MetadataRouter(owner=self)
            .add_self_request(self)
            .add(
                estimator=self.estimator,
                method_mapping=MethodMapping().add(caller="fit", callee="fit"),
            )
            .add(
                splitter=check_cv(self.cv, classifier=True),
                method_mapping=MethodMapping().add(caller="fit", callee="split"),
            )
        )

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        inner = get_tags(self.estimator)
        tags.input_tags = inner.input_tags
        tags.classifier_tags.poor_score = inner.classifier_tags.poor_score
        return tags
