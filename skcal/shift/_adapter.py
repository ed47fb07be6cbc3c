"""PriorShiftAdapter: a calibrator whose probabilities follow a new class mix."""

from __future__ import annotations

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, clone
from sklearn.utils.validation import check_is_fitted

from ..base import negative_log_loss
from ..utils._sklearn import HasMethods, StrOptions, _fit_context
from ..utils._validation import (
    check_probabilities,
    check_sample_weight,
    effective_sample_size,
    resolve_classes,
)
from ._estimate import (
    RLLS_ALPHA,
    SHIFT_CONSTRAINTS,
    _Problem,
    check_source_priors,
    confusion_matrix,
    estimate_from_probabilities,
    resolve_strength,
    rlls_regularization,
)
from ._resample import SourceRows

__all__ = ["PriorShiftAdapter"]


def _default_calibrator():
    """BCTS, imported on use (the estimator of Alexandari et al.)."""
    from ..calibrators import BiasCorrectedTemperatureScaling

    return BiasCorrectedTemperatureScaling()


class PriorShiftAdapter(ClassifierMixin, BaseEstimator):
    """A calibrator re-weighted to the class priors of an unlabeled target set.

    :meth:`fit` fits a clone of ``calibrator`` on the labeled calibration
    (source) set and records its source priors ``source_priors_`` (for EM by
    default the mean calibrated probability of the calibration rows, as in
    the authors' code, so that no shift is found on rows like them; for
    ``method="bbse"`` or ``"rlls"`` the weighted class frequencies and the
    confusion matrix of the calibrated argmax). :meth:`adapt` then
    estimates the priors ``priors_`` of an unlabeled target set from the
    calibrated probabilities of its rows (:func:`estimate_class_priors`),
    and :meth:`predict_proba` returns the calibrated probabilities
    re-weighted by ``priors_ / source_priors_`` and renormalised (Saerens
    et al., 2002): the posteriors under the target's class mix when only
    the mix changed (label shift). Before :meth:`adapt`, ``priors_`` is
    ``source_priors_`` and the probabilities are the calibrator's.

    ``fit(X_cal, y_cal).adapt(X_target)`` follows scikit-learn's split of
    labeled fitting and unlabeled steps (``partial_fit``-like): ``fit``
    clears a previous adaptation, ``adapt`` can be called again for each new
    target set without refitting the calibrator. Alexandari et al. (2020)
    find EM on probabilities calibrated by bias-corrected temperature
    scaling (the default calibrator) hard to beat.

    Inside :class:`~skcal.CalibratedClassifier` the wrapper sets the inner
    calibrator's ``classes`` and ``input``; adapt the fitted adapter,
    ``wrapper.calibrator_``, with the classifier's scores of the target rows
    (with ``cv``, each of ``calibrated_classifiers_``).

    A class absent from the calibration set keeps its column (with the
    calibrator's ``MissingClassWarning``) but has source prior 0: its
    importance weight is undefined and :meth:`adapt` refuses, naming it.

    Parameters
    ----------
    calibrator : estimator, default=None
        A skcal score calibrator (any estimator with ``fit`` and
        ``predict_proba``); None: :class:`~skcal.BiasCorrectedTemperatureScaling`.
    method : {"em", "bbse", "rlls"}, default="em"
        The prior estimator, see :func:`estimate_class_priors`.
    tol : float, default=1e-8
        EM's tolerance on the change of the priors.
    max_iter : int, default=1000
        EM's iteration cap.
    rlls_alpha : float, default=None
        RLLS's regularisation multiplier; None: 0.01.
    prior_strength : float or "auto", default="auto"
        EM's pseudo-rows toward the source priors (``"auto"``: the number of
        classes; 0: the maximum likelihood of Saerens et al.), see
        :func:`estimate_class_priors`.
    shift_test : {"bic"} or None, default="bic"
        Keep the estimated priors only when the target rows show a shift
        (``prior_estimate_.shift_detected``): the BIC, and the 5% tail of
        the statistic on shift-free target sets simulated from the
        calibration rows (which accounts for their own sampling noise);
        None: always keep them.
    reliability_check : bool, default=True
        Keep the calibrated probabilities, with an
        :class:`~skcal.shift.UnreliableEstimateWarning`, when the estimator,
        run on shifted target sets drawn from the calibration rows where the
        priors are known, does worse than not adapting
        (``prior_estimate_.reliable``), see :func:`estimate_class_priors`.
    source_priors : {"auto", "labels", "predicted"}, default="auto"
        What ``source_priors_`` is: ``"labels"``, the weighted class
        frequencies of ``y`` (Saerens et al.); ``"predicted"``, the weighted
        mean of the calibrated probabilities of the calibration rows
        (Alexandari et al.'s code, ``abstention``'s default): equal for a
        calibrator with free per-class biases fitted by NLL (BCTS, vector
        scaling), but a calibrator that leaves the class marginals biased
        (temperature scaling) makes EM see that bias as a shift with
        ``"labels"``; ``"auto"``: ``"predicted"`` for EM, ``"labels"`` for
        BBSE and RLLS (their equations are in label frequencies).
    n_resamples : int, default=0
        Bootstrap resamples of the calibration and target rows for
        ``prior_estimate_``'s interval (the calibrator's per-class marginals
        refitted on each); 0: none.
    confidence_level : float, default=0.9
        Coverage of the interval.
    random_state : int, RandomState instance or None, default=None
        Seed of the resampling and of the simulated shift test and check.
    verbose : int, default=0
        Progress over the bootstrap resamples (see
        :func:`estimate_class_priors`).

    Attributes
    ----------
    calibrator_ : estimator
        The fitted clone of ``calibrator``.
    classes_ : ndarray of shape (n_classes,)
        Label of each column.
    source_priors_ : ndarray of shape (n_classes,)
        The source priors ``p`` of the importance weights ``priors_ / p``
        (see ``source_priors``).
    class_frequencies_ : ndarray of shape (n_classes,)
        Weighted class frequencies of the calibration labels.
    priors_ : ndarray of shape (n_classes,)
        The target priors (``source_priors_`` until :meth:`adapt`).
    prior_estimate_ : PriorEstimate or None
        The last estimate of :meth:`adapt` (None before it).
    confusion_matrix_ : ndarray of shape (n_classes, n_classes) or None
        Joint frequencies of (calibrated argmax, label) on the calibration
        set, rows predicted; None for ``method="em"``.
    n_features_in_ : int
        Number of columns of ``X``.

    References
    ----------
    M. Saerens, P. Latinne, C. Decaestecker. "Adjusting the Outputs of a
    Classifier to New a Priori Probabilities: A Simple Procedure". Neural
    Computation 14(1), 2002.

    A. Alexandari, A. Kundaje, A. Shrikumar. "Maximum Likelihood with
    Bias-Corrected Calibration is Hard-To-Beat at Label Shift Adaptation".
    ICML 2020.

    Examples
    --------
    >>> import numpy as np
    >>> from skcal import TemperatureScaling
    >>> from skcal.shift import PriorShiftAdapter
    >>> rng = np.random.default_rng(0)
    >>> means = np.eye(3) * 2.0
    >>> def draw(n, p):
    ...     y = rng.choice(3, size=n, p=p)
    ...     return means[y] + rng.normal(size=(n, 3)), y
    >>> X_cal, y_cal = draw(3000, [1 / 3, 1 / 3, 1 / 3])
    >>> X_target, _ = draw(3000, [0.6, 0.3, 0.1])
    >>> adapter = PriorShiftAdapter(TemperatureScaling(device="cpu"))
    >>> adapter = adapter.fit(2.0 * X_cal, y_cal).adapt(2.0 * X_target)
    >>> np.round(adapter.priors_, 1)
    array([0.6, 0.3, 0.1])
    >>> adapter.predict_proba(2.0 * X_target).shape
    (3000, 3)
    """

    _parameter_constraints: dict = {
        "calibrator": [HasMethods(["fit", "predict_proba"]), None],
        "source_priors": [StrOptions({"auto", "labels", "predicted"})],
        **SHIFT_CONSTRAINTS,
    }

    def __init__(
        self,
        calibrator=None,
        *,
        method="em",
        tol=1e-8,
        max_iter=1000,
        rlls_alpha=None,
        prior_strength="auto",
        shift_test="bic",
        reliability_check=True,
        source_priors="auto",
        n_resamples=0,
        confidence_level=0.9,
        random_state=None,
        verbose=0,
    ):
        self.calibrator = calibrator
        self.method = method
        self.tol = tol
        self.max_iter = max_iter
        self.rlls_alpha = rlls_alpha
        self.prior_strength = prior_strength
        self.shift_test = shift_test
        self.reliability_check = reliability_check
        self.source_priors = source_priors
        self.n_resamples = n_resamples
        self.confidence_level = confidence_level
        self.random_state = random_state
        self.verbose = verbose

    def _wrapper_params(self, **outputs) -> dict:
        """:class:`~skcal.CalibratedClassifier`'s protocol: the inner
        calibrator (a clone, or the default) configured by its own
        ``_wrapper_params`` with the wrapper's ``classes`` and ``input``."""
        inner = (
            _default_calibrator() if self.calibrator is None else clone(self.calibrator)
        )
        configure = getattr(inner, "_wrapper_params", None)
        if configure is not None:
            inner.set_params(**configure(**outputs))
        return {"calibrator": inner}

    @_fit_context(prefer_skip_nested_validation=False)
    def fit(self, X, y, sample_weight=None):
        """Fit the calibrator on the labeled calibration (source) set.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_classes)
            What ``calibrator`` takes (a classifier's scores).
        y : array-like of shape (n_samples,)
            Labels.
        sample_weight : array-like of shape (n_samples,), default=None
            Weights of the calibration rows (the calibrator's, the source
            priors' and the confusion matrix's).

        Returns
        -------
        self : PriorShiftAdapter
        """
        calibrator = (
            _default_calibrator() if self.calibrator is None else clone(self.calibrator)
        )
        kwargs = {} if sample_weight is None else {"sample_weight": sample_weight}
        self.calibrator_ = calibrator.fit(X, y, **kwargs)
        self.classes_ = np.asarray(self.calibrator_.classes_)
        for name in ("n_features_in_", "feature_names_in_"):
            if hasattr(self.calibrator_, name):
                setattr(self, name, getattr(self.calibrator_, name))
        n_classes = len(self.classes_)
        _, y_index = resolve_classes(np.asarray(y), n_classes, self.classes_)
        w = check_sample_weight(sample_weight, len(y_index), relative=True)
        counts = np.bincount(y_index, weights=w, minlength=n_classes)
        self.class_frequencies_ = counts / counts.sum()
        self.source_priors_ = self.class_frequencies_
        self.prior_estimate_ = None
        self.confusion_matrix_ = None
        self._n_source = effective_sample_size(w)
        predicted = self.source_priors == "predicted" or (
            self.source_priors == "auto" and self.method == "em"
        )
        P = self._calibrated(X)
        # the labeled source rows, for the shift test, the check and intervals
        self._source_rows = (P, np.asarray(y_index), w)
        if predicted:
            self.source_priors_ = (w @ P) / w.sum()
        if self.method != "em":
            pred = np.argmax(P, axis=1)
            self.confusion_matrix_ = confusion_matrix(pred, y_index, n_classes, w)
        self.priors_ = self.source_priors_.copy()
        return self

    def _calibrated(self, X) -> np.ndarray:
        return np.asarray(self.calibrator_.predict_proba(X), dtype=np.float64)

    def _problem(self) -> _Problem:
        n_classes = len(self.classes_)
        absent = self.classes_[self.class_frequencies_ == 0]
        if absent.size:
            raise ValueError(
                f"Class(es) {absent.tolist()[:10]} have no calibration sample: "
                "their source prior is 0, so their importance weight q(y) / p(y) "
                "is undefined and their target prior cannot be estimated. "
                "Calibrate on a set that covers every class."
            )
        source = check_source_priors(self.source_priors_, n_classes)
        if self.method != "em" and self.confusion_matrix_ is None:
            raise ValueError(
                f"method={self.method!r} needs the source confusion matrix, which "
                "fit computes only for 'bbse' and 'rlls': fit again after "
                "set_params(method=...)."
            )
        alpha = RLLS_ALPHA if self.rlls_alpha is None else self.rlls_alpha
        delta = rlls_regularization(n_classes, self._n_source, alpha)
        confusion = None if self.method == "em" else self.confusion_matrix_
        strength = resolve_strength(self.prior_strength, n_classes)
        return _Problem(
            source,
            self.method,
            confusion,
            self.tol,
            self.max_iter,
            delta,
            strength,
            self.shift_test,
        )

    @_fit_context(prefer_skip_nested_validation=True)
    def adapt(self, X):
        """Estimate the class priors of the unlabeled target rows ``X``.

        Sets ``priors_`` and ``prior_estimate_``; :meth:`predict_proba`
        then re-weights by ``priors_ / source_priors_``.

        Parameters
        ----------
        X : array-like of shape (n_target, n_classes)
            The target rows, as given to :meth:`fit` (scores). EM needs at
            least ``n_classes`` rows, BBSE and RLLS ``2 n_classes``.

        Returns
        -------
        self : PriorShiftAdapter
        """
        check_is_fitted(self)
        problem = self._problem()
        P = check_probabilities(self._calibrated(X), "calibrated target probabilities")
        estimate = estimate_from_probabilities(
            P,
            problem,
            self.n_resamples,
            self.confidence_level,
            self.random_state,
            self.verbose,
            SourceRows(*self._source_rows),
            self.reliability_check,
        )
        self.prior_estimate_ = estimate
        # no shift found: exactly the source priors (the calibrated probabilities)
        detected = estimate.shift_detected
        self.priors_ = estimate.priors if detected else self.source_priors_.copy()
        return self

    def predict_proba(self, X) -> np.ndarray:
        """Calibrated probabilities re-weighted to ``priors_``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_classes)

        Returns
        -------
        proba : ndarray of shape (n_samples, n_classes)
            ``P w / sum(P w)`` row by row, ``P`` the calibrator's
            probabilities and ``w = priors_ / source_priors_`` (a class of
            source prior 0 keeps weight 1); ``P`` itself before
            :meth:`adapt`.
        """
        check_is_fitted(self)
        P = self._calibrated(X)
        source = self.source_priors_
        if np.array_equal(self.priors_, source):
            return P  # not adapted: the calibrator's own probabilities
        P = P.copy()
        w = np.divide(self.priors_, source, out=np.ones_like(source), where=source > 0)
        P *= w
        sums = P.sum(axis=1, keepdims=True)
        np.maximum(sums, np.finfo(np.float64).tiny, out=sums)
        P /= sums
        return P

    def predict(self, X) -> np.ndarray:
        """The class of largest adapted probability."""
        proba = self.predict_proba(X)
        return self.classes_[np.argmax(proba, axis=1)]

    def predict_log_proba(self, X) -> np.ndarray:
        """The log of :meth:`predict_proba`."""
        with np.errstate(divide="ignore"):
            return np.log(self.predict_proba(X))

    def score(self, X, y, sample_weight=None) -> float:
        """Negative mean log loss of the adapted probabilities (higher is better)."""
        return negative_log_loss(
            self.predict_log_proba(X), y, self.classes_, sample_weight
        )

    def to_torch(self):
        """The inner calibrator's module followed by the prior re-weighting.

        The module maps scores to :meth:`predict_proba`: the fitted
        calibrator's exported module (``calibrator_.to_torch()``), then, once
        :meth:`adapt` has moved ``priors_`` away from ``source_priors_``, the
        rows times ``priors_ / source_priors_`` divided by their sums. The
        weights are those of the last :meth:`adapt`: export again after
        adapting to new rows. :func:`skcal.export.to_onnx` writes the same
        graph.

        Returns
        -------
        torch.nn.Module

        Raises
        ------
        NotExportableError
            If the inner calibrator cannot be exported.

        Examples
        --------
        >>> import numpy as np, torch
        >>> from skcal import TemperatureScaling
        >>> from skcal.shift import PriorShiftAdapter
        >>> from skcal.utils._testing import make_miscalibrated_logits
        >>> X, y = make_miscalibrated_logits(n_samples=400, random_state=0)
        >>> adapter = PriorShiftAdapter(TemperatureScaling()).fit(X, y)
        >>> module = adapter.adapt(X[y == 0]).to_torch()
        >>> out = module(torch.from_numpy(X)).numpy()
        >>> bool(np.abs(out - adapter.predict_proba(X)).max() < 1e-12)
        True
        """
        check_is_fitted(self)
        from .._torch._export import Chain
        from .._torch._export_deploy import PriorReweight
        from ..export import to_torch

        inner = to_torch(self.calibrator_)
        source = self.source_priors_
        if np.array_equal(self.priors_, source):
            return inner  # not adapted: the calibrator's own probabilities
        w = np.divide(self.priors_, source, out=np.ones_like(source), where=source > 0)
        return Chain(inner, PriorReweight(w))

    def n_free_parameters(self, n_classes: int, n_features=None) -> float:
        """The inner calibrator's count (the priors are fitted on the
        unlabeled target rows, not on the calibration labels)."""
        inner = _default_calibrator() if self.calibrator is None else self.calibrator
        return inner.n_free_parameters(n_classes, n_features)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        if self.calibrator is not None and hasattr(self.calibrator, "__sklearn_tags__"):
            tags.input_tags = self.calibrator.__sklearn_tags__().input_tags
        return tags
