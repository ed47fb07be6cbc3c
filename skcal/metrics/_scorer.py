"""Scorers for model selection, and a registry that falls back to sklearn's."""

from __future__ import annotations

import copy

from sklearn.metrics import get_scorer as _sklearn_get_scorer
from sklearn.metrics import get_scorer_names as _sklearn_get_scorer_names

# The base class of scikit-learn's scorers (what make_scorer builds on): its
# __call__, set_score_request and metadata requests are what make skcal's
# scorers route metadata exactly as scikit-learn's do.
from ..utils._sklearn import _BaseScorer
from ._cumulative import cumulative_calibration_error, ecce_binned_mean
from ._debiased import l2_calibration_error
from ._ece import (
    classwise_calibration_error,
    expected_calibration_error,
    max_calibration_error,
)
from ._local import local_calibration_error, max_local_calibration_error
from ._mmce import maximum_mean_calibration_error
from ._names import did_you_mean, find_metric, names_listing
from ._proper import brier_score, negative_log_likelihood
from ._selective import augrc, aurc, eaurc
from ._smooth import smooth_expected_calibration_error
from ._soft import soft_binned_calibration_error, soft_expected_calibration_error
from ._spiegelhalter import spiegelhalter_abs_z

__all__ = [
    "CalibrationScorer",
    "LocalCalibrationScorer",
    "get_scorer",
    "get_scorer_names",
]


class CalibrationScorer(_BaseScorer):
    """Scorer that evaluates a probability metric on ``predict_proba``.

    Usable wherever scikit-learn takes ``scoring=`` (``GridSearchCV``,
    ``cross_validate``, ...). Column ``j`` of ``predict_proba`` is passed as
    the label ``estimator.classes_[j]``, so test folds that miss a class are
    scored correctly. Errors are negated (``greater_is_better=False``) so that
    higher is better, as scikit-learn expects.

    The scorer is a scikit-learn scorer (it subclasses the class that
    :func:`sklearn.metrics.make_scorer` returns instances of), so it takes
    part in metadata routing as scikit-learn's own scorers do: with
    ``sklearn.set_config(enable_metadata_routing=True)``, metadata such as
    ``sample_weight`` passed to ``cross_validate(..., params=...)`` or
    ``GridSearchCV.fit`` reach the metric only once requested with
    ``scorer.set_score_request(sample_weight=True)``, and passing them
    unrequested is an error. Without routing, ``sample_weight`` is the only
    metadata a scorer takes.

    Parameters
    ----------
    metric : callable
        ``metric(y_true, y_proba, *, sample_weight=None, labels=None, **kwargs)``.
    sign : {1, -1}, default=-1
        Multiplier of the metric; -1 for errors.
    **kwargs
        Fixed keyword arguments of the metric (e.g. ``n_bins=10``).

    Attributes
    ----------
    metric : callable
        The metric.
    sign : int
        Its multiplier.
    kwargs : dict
        Its fixed keyword arguments.

    Examples
    --------
    >>> import numpy as np
    >>> from skcal import TemperatureScaling
    >>> from skcal.metrics import get_scorer
    >>> rng = np.random.default_rng(0)
    >>> X, y = rng.normal(size=(200, 3)), rng.integers(0, 3, 200)
    >>> scorer = get_scorer("neg_expected_calibration_error")
    >>> scorer(TemperatureScaling(device="cpu").fit(X, y), X, y) <= 0
    True
    """

    #: Whether the metric also takes the scored ``X`` as its features.
    _x_is_features = False

    def __init__(self, metric, *, sign: int = -1, **kwargs) -> None:
        super().__init__(metric, sign, kwargs, response_method="predict_proba")

    @property
    def metric(self):
        return self._score_func

    @property
    def sign(self) -> int:
        return self._sign

    @property
    def kwargs(self) -> dict:
        return self._kwargs

    def _score(self, method_caller, estimator, X, y_true, **kwargs) -> float:
        """The signed metric of ``estimator.predict_proba(X)``.

        ``kwargs`` are the routed metadata (or ``sample_weight`` without
        routing). ``predict_proba`` is called directly rather than through
        scikit-learn's ``method_caller``, which keeps only the positive
        column of a binary problem and needs a classifier.
        """
        self._warn_overlap(
            message=(
                "There is an overlap between set kwargs of this scorer instance and"
                " passed metadata. Please pass them either as kwargs of the scorer"
                " or metadata, but not both."
            ),
            kwargs=kwargs,
        )
        proba = estimator.predict_proba(X)
        defaults = {"labels": getattr(estimator, "classes_", None)}
        if self._x_is_features:
            defaults["features"] = X
        return self._sign * self._score_func(
            y_true, proba, **{**defaults, **self._kwargs, **kwargs}
        )

    def __repr__(self) -> str:
        args = "".join(f", {k}={v!r}" for k, v in self._kwargs.items())
        metric = getattr(self.metric, "__name__", None) or repr(self.metric)
        return f"{type(self).__name__}({metric}, sign={self.sign}{args})"


class LocalCalibrationScorer(CalibrationScorer):
    """Scorer for a local metric, with ``X`` as the feature space.

    For estimators whose ``X`` is the feature space of the local metric
    (local calibrators fitted on embeddings): the metric receives
    ``features=X`` and ``space=space``. With the default ``space="pca"``
    each test fold is projected on its own PCA; pass a :class:`LocalSpace`
    fitted on reference features to score every fold and every candidate in
    one fixed space. Metadata routing as in :class:`CalibrationScorer`.

    Parameters
    ----------
    metric : callable
        ``metric(y_true, y_proba, features, *, space, sample_weight, labels,
        **kwargs)``, e.g. :func:`local_calibration_error`.
    space : "pca", LocalSpace or None, default="pca"
        The space passed to the metric.
    sign : {1, -1}, default=-1
        Multiplier of the metric; -1 for errors.
    **kwargs
        Fixed keyword arguments of the metric (e.g. ``bandwidth=5.0``).

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.linear_model import LogisticRegression
    >>> from skcal.metrics import LocalCalibrationScorer, local_calibration_error
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(300, 4))
    >>> y = (X[:, 0] + rng.normal(size=300) > 0).astype(int)
    >>> scorer = LocalCalibrationScorer(local_calibration_error, space=None)
    >>> scorer(LogisticRegression().fit(X, y), X, y) <= 0
    True
    """

    _x_is_features = True

    def __init__(self, metric, *, space="pca", sign: int = -1, **kwargs) -> None:
        super().__init__(metric, sign=sign, space=space, **kwargs)


_SCORERS = {
    # scikit-learn's names, skcal's functions: the same value as
    # negative_log_likelihood (clipped at its eps, 1e-12) and brier_score
    # and as confidence_interval of "nll" / "brier", with the columns read as
    # the estimator's classes_, so that a test fold that lacks a class is
    # scored (scikit-learn's scorers of these names refuse it)
    "neg_log_loss": CalibrationScorer(negative_log_likelihood),
    "neg_brier_score": CalibrationScorer(brier_score),
    "neg_expected_calibration_error": CalibrationScorer(expected_calibration_error),
    "neg_classwise_calibration_error": CalibrationScorer(classwise_calibration_error),
    "neg_max_calibration_error": CalibrationScorer(max_calibration_error),
    "neg_soft_expected_calibration_error": CalibrationScorer(
        soft_expected_calibration_error
    ),
    "neg_soft_binned_calibration_error": CalibrationScorer(
        soft_binned_calibration_error
    ),
    "neg_cumulative_calibration_error": CalibrationScorer(cumulative_calibration_error),
    "neg_ecce_binned_mean": CalibrationScorer(ecce_binned_mean),
    "neg_smooth_expected_calibration_error": CalibrationScorer(
        smooth_expected_calibration_error
    ),
    "neg_l2_calibration_error": CalibrationScorer(l2_calibration_error),
    "neg_maximum_mean_calibration_error": CalibrationScorer(
        maximum_mean_calibration_error
    ),
    "neg_spiegelhalter_abs_z": CalibrationScorer(spiegelhalter_abs_z),
    "neg_local_calibration_error": LocalCalibrationScorer(local_calibration_error),
    "neg_max_local_calibration_error": LocalCalibrationScorer(
        max_local_calibration_error
    ),
    # selective prediction: the confidence is the top probability
    "neg_aurc": CalibrationScorer(aurc),
    "neg_eaurc": CalibrationScorer(eaurc),
    "neg_augrc": CalibrationScorer(augrc),
}


def get_scorer(scoring):
    """Return a scorer by name: skcal's calibration scorers, else sklearn's.

    ``"neg_log_loss"`` and ``"neg_brier_score"`` (and the metric names
    ``"nll"``, ``"log_loss"``, ``"brier"``, ...) are skcal's scorers of
    :func:`negative_log_likelihood` and :func:`brier_score`: the values of
    those functions (probabilities clipped at ``1e-12`` before the log),
    with the columns of ``predict_proba`` read as the estimator's
    ``classes_``, so a cross-validation fold that lacks a class is scored.
    scikit-learn's own scorers of these names clip at ``2.2e-16`` and refuse
    such a fold; :func:`sklearn.metrics.get_scorer` still gives them.

    Parameters
    ----------
    scoring : str or callable
        A name from :func:`get_scorer_names`; or a metric's name, label or
        alias in any case (``"ece"``, ``"ECE"``, ``"nll"``,
        ``"expected_calibration_error"``), which names the metric's scorer;
        or a callable returned as is.

    Returns
    -------
    callable
        ``scorer(estimator, X, y, *, sample_weight=None) -> float``, higher
        is better.

    Examples
    --------
    >>> from skcal.metrics import get_scorer
    >>> get_scorer("neg_classwise_calibration_error")
    CalibrationScorer(classwise_calibration_error, sign=-1)
    >>> get_scorer("neg_log_loss")
    CalibrationScorer(negative_log_likelihood, sign=-1)
    >>> get_scorer("accuracy")
    make_scorer(accuracy_score, response_method='predict')
    >>> get_scorer("ECE")
    CalibrationScorer(expected_calibration_error, sign=-1)
    """
    if isinstance(scoring, str):
        scoring = scorer_name(scoring)
        if scoring in _SCORERS:
            return copy.deepcopy(_SCORERS[scoring])
    return _sklearn_get_scorer(scoring)


def scorer_name(name: str) -> str:
    """The canonical scorer name of ``name``: itself when skcal or
    scikit-learn has a scorer of that name, else the scorer of the metric it
    names in the shared table (:mod:`._names`: ``"ece"``, ``"NLL"``, ...),
    else a ValueError listing the names.

    Examples
    --------
    >>> from skcal.metrics._scorer import scorer_name
    >>> scorer_name("ECE"), scorer_name("nll"), scorer_name("accuracy")
    ('neg_expected_calibration_error', 'neg_log_loss', 'accuracy')
    """
    if name in _SCORERS or name in _sklearn_get_scorer_names():
        return name
    entry = find_metric(name)
    if entry is not None and entry.scorer is not None:
        return entry.scorer
    if entry is not None:
        raise ValueError(
            f"{entry.function} has no scorer: it returns a test, not a score. "
            "The Spiegelhalter scorer is 'neg_spiegelhalter_abs_z' (alias "
            "'spiegelhalter')."
        )
    raise ValueError(
        f"{name!r} is not a valid scoring value.{did_you_mean(name, _SCORERS)} "
        "Pass one of "
        f"skcal's scorers ({', '.join(sorted(_SCORERS))}), a scikit-learn scorer "
        "(sklearn.metrics.get_scorer_names()), or a metric name or alias in any "
        f"case, which names its scorer: {names_listing()}."
    )


def get_scorer_names() -> list[str]:
    """Names accepted by :func:`get_scorer`: skcal's and scikit-learn's, sorted.

    Examples
    --------
    >>> from skcal.metrics import get_scorer_names
    >>> "neg_expected_calibration_error" in get_scorer_names()
    True
    """
    return sorted(set(_SCORERS) | set(_sklearn_get_scorer_names()))
