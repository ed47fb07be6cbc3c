"""Generators of synthetic scores for tests, examples and benchmarks."""

from __future__ import annotations

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils import check_random_state


def sample_labels(proba: np.ndarray, random_state=None) -> np.ndarray:
    """Draw one label per row from the categorical distributions ``proba``.

    ``random_state`` is anything ``check_random_state`` accepts, or a numpy
    ``Generator``.
    """
    if not isinstance(random_state, np.random.Generator):
        random_state = check_random_state(random_state)
    rng = random_state
    cum = np.cumsum(proba, axis=1)
    u = rng.uniform(size=(proba.shape[0], 1)) * cum[:, -1:]
    return np.minimum((u > cum).sum(axis=1), proba.shape[1] - 1)


def make_miscalibrated_logits(
    n_samples: int = 1000,
    n_classes: int = 3,
    *,
    temperature: float = 2.0,
    scale: float = 2.0,
    random_state=None,
):
    """Logits ``z`` whose calibrated probabilities are ``softmax(z / temperature)``.

    True logits are Gaussian with standard deviation ``scale``; labels are
    drawn from their softmax, and the returned logits are the true ones
    multiplied by ``temperature`` (``> 1``: over-confident).

    Returns
    -------
    logits : ndarray of shape (n_samples, n_classes)
    y : ndarray of shape (n_samples,)
    """
    rng = check_random_state(random_state)
    true_logits = scale * rng.standard_normal((n_samples, n_classes))
    proba = np.exp(true_logits - true_logits.max(axis=1, keepdims=True))
    proba /= proba.sum(axis=1, keepdims=True)
    y = sample_labels(proba, rng)
    return temperature * true_logits, y


def make_gap_miscalibrated_logits(
    n_samples: int = 1000,
    n_classes: int = 10,
    *,
    small_gap_temperature: float = 2.0,
    large_gap_temperature: float = 0.6,
    gap_scale: float = 2.0,
    noise: float = 1.0,
    max_margin: float = 10.0,
    random_state=None,
):
    """Logits whose miscalibration depends on the logit gap (SMART's appendix B).

    True logits are Gaussian noise (standard deviation ``noise``) plus a
    margin ``U(0, max_margin)`` on one random class; labels are drawn from
    their softmax. Each row is then multiplied by
    ``k(g) = large + (small - large) * exp(-g / gap_scale)``, ``g`` the gap of
    the true logits: over-confident (``k > 1``) at small gaps and
    under-confident (``k < 1``) at large ones. ``k(g) g`` increases with
    ``g``, so the observed gap orders rows like the true one, and
    ``softmax(z / k)`` is the calibrated probability: the ideal temperature
    is a decreasing function of the observed gap.

    Returns
    -------
    logits : ndarray of shape (n_samples, n_classes)
    y : ndarray of shape (n_samples,)
    temperature : ndarray of shape (n_samples,)
        The ideal temperature ``k`` of each row.
    """
    rng = check_random_state(random_state)
    true_logits = noise * rng.standard_normal((n_samples, n_classes))
    signal = rng.randint(n_classes, size=n_samples)
    true_logits[np.arange(n_samples), signal] += rng.uniform(0, max_margin, n_samples)
    proba = np.exp(true_logits - true_logits.max(axis=1, keepdims=True))
    proba /= proba.sum(axis=1, keepdims=True)
    y = sample_labels(proba, rng)
    top2 = np.sort(true_logits, axis=1)[:, -2:]
    gap = top2[:, 1] - top2[:, 0]
    k = large_gap_temperature + (
        small_gap_temperature - large_gap_temperature
    ) * np.exp(-gap / gap_scale)
    return true_logits * k[:, None], y, k


def make_region_miscalibrated_embeddings(
    n_samples: int = 2000,
    n_classes: int = 3,
    *,
    n_regions: int = 4,
    n_features: int = 16,
    temperatures=None,
    separation: float = 6.0,
    logit_scale: float = 3.0,
    random_state=None,
):
    """Embeddings whose linear head is miscalibrated differently by region.

    The first half of the features places each sample in one of
    ``n_regions`` Gaussian clusters (centres ``separation`` apart on
    average); the second half is standard normal and carries the class
    signal. The head ``(coef, intercept)`` reads only the class half, so
    its logits ``z`` do not know the region, while labels are drawn from
    ``softmax(z / T_r)`` with the region's temperature ``T_r``: the head is
    over-confident in regions with ``T_r > 1`` and under-confident where
    ``T_r < 1``. No global map of the scores can fix both; a local
    calibrator can.

    Parameters
    ----------
    temperatures : array-like of shape (n_regions,), default=None
        ``T_r`` of each region; by default alternating 3 and 0.5.

    Returns
    -------
    X : ndarray of shape (n_samples, n_features)
    y : ndarray of shape (n_samples,)
    coef : ndarray of shape (n_classes, n_features)
    intercept : ndarray of shape (n_classes,)
    region : ndarray of shape (n_samples,)
    """
    rng = check_random_state(random_state)
    if temperatures is None:
        temperatures = np.where(np.arange(n_regions) % 2 == 0, 3.0, 0.5)
    temperatures = np.asarray(temperatures, dtype=np.float64)
    d_region = n_features // 2
    d_class = n_features - d_region
    centres = rng.standard_normal((n_regions, d_region))
    centres *= separation / np.sqrt(2 * d_region)
    region = rng.randint(n_regions, size=n_samples)
    X = np.empty((n_samples, n_features))
    X[:, :d_region] = centres[region] + 0.5 * rng.standard_normal((n_samples, d_region))
    X[:, d_region:] = rng.standard_normal((n_samples, d_class))
    coef = np.zeros((n_classes, n_features))
    coef[:, d_region:] = rng.standard_normal((n_classes, d_class))
    coef *= logit_scale / np.sqrt(d_class)
    intercept = 0.1 * rng.standard_normal(n_classes)
    z = X @ coef.T + intercept
    y = sample_labels(softmax_rows(z / temperatures[region, None]), rng)
    return X, y, coef, intercept, region


def softmax_rows(z: np.ndarray) -> np.ndarray:
    """Row-wise softmax in float64 (a plain reference, no torch)."""
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


class FixedLogits(ClassifierMixin, BaseEstimator):
    """A prefit 'classifier' whose decision function returns ``X`` itself.

    Lets scikit-learn's ``CalibratedClassifierCV`` calibrate precomputed
    logits through ``FrozenEstimator`` (a reference in tests and benchmarks).
    For two classes it returns ``d = (z1 - z0) / 2``: scikit-learn reads a
    binary decision ``d`` as the logits ``(-d, d)``, which have the same
    softmax as ``(z0, z1)``.
    """

    def fit(self, X, y):
        self.classes_ = np.unique(y)
        return self

    def decision_function(self, X):
        X = np.asarray(X)
        if X.shape[1] == 2:
            return (X[:, 1] - X[:, 0]) / 2
        return X

    def predict(self, X):
        return self.classes_[np.argmax(X, axis=1)]


#: Constructor parameters that keep slow estimators quick in generic tests
#: (fewer candidates and folds for the cross-validated ones) and
#: deterministic (a fixed ``random_state`` where training is stochastic).
FAST_PARAMS = {
    "ParameterizedTemperatureScaling": {"random_state": 0},
    "SMARTCalibrator": {"random_state": 0},
    "KCalCalibrator": {"random_state": 0, "max_iter": 5},
    "LocalNetCalibrator": {"random_state": 0, "max_iter": 5},
    # one slot: any number of features is divisible
    "VQLocalCalibrator": {
        "random_state": 0,
        "n_slots": 1,
        "n_codewords": 8,
        "learning_rate": 1e-2,
        "max_iter": 20,
    },
    "DirichletCalibratorCV": {
        "reg_lambdas": [1e-2, 1e-4],
        "reg_mus": [1e-2],
        "cv": 2,
        "random_state": 0,
    },
}


def make_estimator(cls, **params):
    """An instance of ``cls`` with :data:`FAST_PARAMS` and ``params``.

    ``device`` is dropped for calibrators that do not use torch.
    """
    params = {**FAST_PARAMS.get(cls.__name__, {}), **params}
    if "device" not in cls().get_params():
        params.pop("device", None)
    return cls(**params)
