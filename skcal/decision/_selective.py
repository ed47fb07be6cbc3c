"""SelectiveClassifier: abstain unless the calibrated confidence is high
enough for a stated selective risk, with a finite-sample guarantee."""

from __future__ import annotations

from numbers import Integral, Real

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, clone
from sklearn.frozen import FrozenEstimator
from sklearn.utils import _safe_indexing, check_random_state
from sklearn.utils.validation import check_is_fitted

from ..utils._sklearn import HasMethods, Interval, StrOptions, _fit_context
from ..utils._split import stratified_split
from ..utils._validation import check_sample_weight
from ..utils._warnings import warn
from ._bounds import ltt_threshold, sgr_threshold
from ._labels import check_abstain_label, check_rows, labels_with_abstention

__all__ = ["NoValidThresholdWarning", "SelectiveClassifier"]

_METHODS = {"sgr": sgr_threshold, "ltt": ltt_threshold}


class NoValidThresholdWarning(UserWarning):
    """No confidence threshold meets the selective risk target.

    Raised by :class:`SelectiveClassifier` when no threshold (for
    ``per_class=True``: none of some predicted class) has a risk bound below
    ``target_risk`` at the stated confidence. The classifier then abstains on
    every row (of those classes). The message gives the best bound reached:
    a target above it, a larger ``delta`` or more threshold rows can succeed.
    """


class SelectiveClassifier(ClassifierMixin, BaseEstimator):
    """Abstain when unsure, with a finite-sample selective risk guarantee.

    :meth:`fit` splits the rows in two (stratified, ``random_state``): a
    clone of ``calibrator`` is fitted on ``1 - threshold_fraction`` of them,
    and a confidence threshold is chosen on the other ``threshold_fraction``
    (the *threshold rows*, which the calibrator never saw). The confidence
    of a row is its largest calibrated probability; :meth:`predict` returns
    the calibrated argmax when the confidence reaches the threshold and
    ``abstain_label`` otherwise. The threshold is the lowest one whose
    *selective risk* (the error rate among the predicted, not abstained,
    rows) is at most ``target_risk`` with probability at least
    ``1 - delta`` over the draw of the threshold rows, for new rows from the
    same distribution.

    Two methods from the literature give the guarantee:

    - ``"sgr"``, *selection with guaranteed risk* (Geifman & El-Yaniv,
      2017): a binary search over the threshold rows' confidences in
      ``k = ceil(log2 m)`` steps, each bounding the risk of the selected rows
      by the binomial tail (Clopper-Pearson) bound at level ``delta / k``
      (Bonferroni over the steps). Its thresholds are data values, so it
      resolves small targets finely; the union bound costs little
      (``log2 m`` tests).
    - ``"ltt"``, *learn then test* (Angelopoulos et al., 2021): the null
      "risk above target" is tested at each threshold of a grid fixed in
      advance, from the most confident down, with the binomial p-value of
      the errors among the selected rows; fixed-sequence testing rejects
      while ``p <= delta`` and stops at the first non-rejection, which
      controls the family-wise error at ``delta`` with no union bound.
      Thresholds selecting too few rows for any rejection are passed over.

    The two make the same promise. ``"sgr"`` is the default: on five real
    tasks over 1,000 splits (``benchmarks/bench_selective_guarantee.py``) its realised
    test risk exceeded the target in at most 4.3% of the splits (delta =
    10%), at a coverage within 0.07 of the oracle's except for 1% targets.
    ``"ltt"`` covers more but spends its whole budget (its realised rate
    reached 12-16% there, test noise included), and it stops at its first
    testable threshold when an error falls among those few rows.

    With ``per_class=True`` each predicted class ``k`` gets its own
    threshold, chosen on the threshold rows predicted ``k`` at level
    ``delta / n_classes``: by the union bound every class's selective risk
    is then at most ``target_risk`` with probability ``1 - delta``, and so is
    the overall selective risk (a mixture of them).

    Parameters
    ----------
    calibrator : estimator
        Any estimator with ``fit`` and ``predict_proba`` (a skcal calibrator,
        a :class:`~skcal.CalibratedClassifier`, a classifier). A
        :class:`sklearn.frozen.FrozenEstimator` of a fitted one with
        ``threshold_fraction=1.0`` uses every row for the threshold.
    target_risk : float, default=0.05
        The largest acceptable selective risk, in (0, 1).
    delta : float, default=0.1
        The probability, over the threshold rows, that the guarantee fails.
    method : {"sgr", "ltt"}, default="sgr"
        How the threshold is chosen (see above).
    per_class : bool, default=False
        One threshold per predicted class.
    abstain_label : int, float or str, default=-1
        What :meth:`predict` returns for an abstention: not a class, of the
        classes' kind (a string for string classes).
    threshold_fraction : float, default=0.5
        Share of the rows that choose the threshold, in (0, 1]; 1.0 only with
        a ``FrozenEstimator`` (a calibrator fitted on other rows).
    random_state : int, RandomState instance or None, default=None
        Seed of the split.

    Attributes
    ----------
    calibrator_ : estimator
        The fitted clone of ``calibrator``.
    classes_ : ndarray of shape (n_classes,)
        The calibrator's classes.
    thresholds_ : ndarray of shape (n_classes,)
        Confidence threshold of each predicted class (all equal unless
        ``per_class``); ``inf`` abstains on the class.
    threshold_ : float
        The threshold (``per_class=False`` only).
    coverage_ : float
        Share of the threshold rows that are predicted (not abstained).
    risk_upper_bound_ : float
        The upper bound on the selective risk of the chosen threshold(s)
        (the largest over the classes with ``per_class``); when none meets
        the target, the best bound reached.
    n_threshold_rows_ : int
        Number of threshold rows.
    n_features_in_ : int
        Number of columns of ``X``.

    References
    ----------
    Y. Geifman, R. El-Yaniv. "Selective Classification for Deep Neural
    Networks". NeurIPS 2017.

    A. N. Angelopoulos, S. Bates, E. J. Candes, M. I. Jordan, L. Lei.
    "Learn then Test: Calibrating Predictive Algorithms to Achieve Risk
    Control". arXiv:2110.01052, 2021.

    Examples
    --------
    >>> import numpy as np
    >>> from skcal import TemperatureScaling
    >>> from skcal.decision import SelectiveClassifier
    >>> rng = np.random.default_rng(0)
    >>> y = rng.integers(0, 3, 4000)
    >>> X = 3.0 * np.eye(3)[y] + rng.normal(size=(4000, 3))
    >>> clf = SelectiveClassifier(
    ...     TemperatureScaling(device="cpu"), target_risk=0.05, random_state=0
    ... ).fit(X, y)
    >>> bool(clf.risk_upper_bound_ <= 0.05), 0.5 < clf.coverage_ < 1.0
    (True, True)
    >>> sorted(set(clf.predict(X).tolist()))  # -1: abstain
    [-1, 0, 1, 2]
    """

    _parameter_constraints: dict = {
        "calibrator": [HasMethods(["fit", "predict_proba"])],
        "target_risk": [Interval(Real, 0, 1, closed="neither")],
        "delta": [Interval(Real, 0, 1, closed="neither")],
        "method": [StrOptions(set(_METHODS))],
        "per_class": ["boolean"],
        "abstain_label": [Integral, Real, str],
        "threshold_fraction": [Interval(Real, 0, 1, closed="right")],
        "random_state": ["random_state"],
    }

    def __init__(
        self,
        calibrator,
        *,
        target_risk=0.05,
        delta=0.1,
        method="sgr",
        per_class=False,
        abstain_label=-1,
        threshold_fraction=0.5,
        random_state=None,
    ):
        self.calibrator = calibrator
        self.target_risk = target_risk
        self.delta = delta
        self.method = method
        self.per_class = per_class
        self.abstain_label = abstain_label
        self.threshold_fraction = threshold_fraction
        self.random_state = random_state

    def _split(self, y, weights):
        """(threshold rows, fitting rows)."""
        n = y.shape[0]
        if self.threshold_fraction == 1.0:
            if not isinstance(self.calibrator, FrozenEstimator):
                raise ValueError(
                    "threshold_fraction=1.0 chooses the threshold on the rows "
                    "the calibrator is fitted on, which voids the guarantee; "
                    f"got calibrator={type(self.calibrator).__name__}. Pass a "
                    "FrozenEstimator of a calibrator fitted on other rows, or "
                    "a threshold_fraction below 1."
                )
            return np.arange(n), np.arange(n)
        _, y_index = np.unique(y, return_inverse=True)
        seed = check_random_state(self.random_state).randint(2**31 - 1)
        return stratified_split(
            y_index, self.threshold_fraction, n, seed, type(self).__name__, weights
        )

    @_fit_context(prefer_skip_nested_validation=False)
    def fit(self, X, y, sample_weight=None):
        """Fit the calibrator and choose the threshold on held-out rows.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            What ``calibrator`` takes.
        y : array-like of shape (n_samples,)
            Labels.
        sample_weight : array-like of shape (n_samples,), default=None
            Weights of the calibrator's rows. The threshold rows count once
            each whatever their weight (the binomial bound counts rows);
            rows of weight 0 are left out.

        Returns
        -------
        self : SelectiveClassifier
        """
        X, y = check_rows(X, y, type(self).__name__)
        if self.threshold_fraction < 1.0 and y.shape[0] < 4:
            raise ValueError(
                f"SelectiveClassifier splits the rows in two parts of at least "
                f"2 samples each, so it needs at least 4; got {y.shape[0]} "
                "sample(s)."
            )
        weights = None
        if sample_weight is not None:
            weights = check_sample_weight(sample_weight, y.shape[0])
        held, fitted = self._split(y, weights)
        kwargs = {} if weights is None else {"sample_weight": weights[fitted]}
        self.calibrator_ = clone(self.calibrator).fit(
            _safe_indexing(X, fitted), y[fitted], **kwargs
        )
        self.classes_ = np.asarray(self.calibrator_.classes_)
        check_abstain_label(self.abstain_label, self.classes_)
        for name in ("n_features_in_", "feature_names_in_"):
            if hasattr(self.calibrator_, name):
                setattr(self, name, getattr(self.calibrator_, name))
        if weights is not None:
            held = held[weights[held] > 0]
        proba = self.calibrator_.predict_proba(_safe_indexing(X, held))
        self._choose_thresholds(proba, y[held])
        return self

    def _choose_thresholds(self, proba, y):
        """Set ``thresholds_``, ``coverage_``, ``risk_upper_bound_``."""
        predicted = np.argmax(proba, axis=1)
        confidence = proba[np.arange(proba.shape[0]), predicted]
        wrong = self.classes_[predicted] != y
        choose = _METHODS[self.method]
        n_classes = len(self.classes_)
        if self.per_class:
            groups = [predicted == k for k in range(n_classes)]
            level = self.delta / n_classes
        else:
            groups, level = [np.ones(y.shape[0], bool)], self.delta
        results = [
            choose(confidence[g], wrong[g], self.target_risk, level) for g in groups
        ]
        thresholds = np.array([r.threshold for r in results])
        self.thresholds_ = (
            thresholds if self.per_class else np.full(n_classes, thresholds[0])
        )
        if not self.per_class:
            self.threshold_ = float(thresholds[0])
        self.n_threshold_rows_ = int(y.shape[0])
        selected = confidence >= self.thresholds_[predicted]
        self.coverage_ = float(selected.mean()) if y.shape[0] else 0.0
        self.risk_upper_bound_ = max(r.bound for r in results)
        failed = [k for k, r in enumerate(results) if not r.found]
        if failed:
            self._warn_no_threshold(failed, results)

    def _warn_no_threshold(self, failed, results):
        best = min(results[k].bound for k in failed)
        where = (
            f" for predicted class(es) {self.classes_[failed].tolist()}"
            if self.per_class
            else ""
        )
        warn(
            f"No confidence threshold{where} keeps the selective risk at most "
            f"target_risk={self.target_risk} with probability "
            f"{1 - self.delta:.3g} on the {self.n_threshold_rows_} threshold "
            f"rows: the best bound reached is {best:.4g}. The classifier "
            f"abstains on every such row (coverage {self.coverage_:.3g}). Raise "
            "target_risk above that bound, raise delta, or give more threshold "
            "rows.",
            NoValidThresholdWarning,
        )

    def predict_proba(self, X):
        """The calibrated probabilities (abstention does not change them).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples, n_classes)
        """
        check_is_fitted(self, "thresholds_")
        return self.calibrator_.predict_proba(X)

    def confidence(self, X):
        """The confidence the threshold applies to: the largest probability.

        (Not ``decision_function``: scikit-learn reads that as per-class
        scores, e.g. for ROC AUC, which a confidence is not.)

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples,)
        """
        return np.max(self.predict_proba(X), axis=1)

    def predict(self, X):
        """The calibrated argmax where confident enough, else ``abstain_label``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples,)
        """
        proba = self.predict_proba(X)
        predicted = np.argmax(proba, axis=1)
        confidence = proba[np.arange(proba.shape[0]), predicted]
        selected = confidence >= self.thresholds_[predicted]
        labels = labels_with_abstention(self.classes_, self.abstain_label)
        return labels[np.where(selected, predicted, len(self.classes_))]
