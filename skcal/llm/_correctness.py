"""P(the answer is correct) from one scalar confidence score."""

from __future__ import annotations

import numpy as np
from scipy.special import expit, log_expit, logit
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.exceptions import ConvergenceWarning
from sklearn.isotonic import IsotonicRegression
from sklearn.utils.validation import check_is_fitted, validate_data

from ..utils._sklearn import StrOptions, _fit_context
from ..utils._validation import check_sample_weight
from ..utils._warnings import warn

__all__ = ["CorrectnessCalibrator"]

#: Newton iterations of the logistic fit (it converges in under 30 unless the
#: classes are separated, where the slope grows without bound).
_MAX_ITER = 100


def _logistic_fit(f, y, w):
    """``(a, b, converged)`` minimising the weighted cross-entropy of
    ``sigmoid(a f + b)`` against targets ``y`` in [0, 1] (convex; Newton
    with backtracking on standardised ``f``)."""
    mu, sd = float(np.average(f, weights=w)), float(np.sqrt(np.cov(f, aweights=w)))
    sd = sd if np.isfinite(sd) and sd > 0 else 1.0
    Z = np.column_stack([(f - mu) / sd, np.ones_like(f)])
    total = w.sum()

    def loss(theta):
        t = Z @ theta
        return float(-(w @ (y * log_expit(t) + (1 - y) * log_expit(-t)))) / total

    p0 = float(np.clip(w @ y / total, 1e-12, 1 - 1e-12))
    theta, converged = np.array([0.0, float(logit(p0))]), False
    for _ in range(_MAX_ITER):
        p = expit(Z @ theta)
        grad = Z.T @ (w * (p - y)) / total
        if np.max(np.abs(grad)) <= 1e-10:
            converged = True
            break
        hess = (Z * (w * p * (1 - p))[:, None]).T @ Z / total
        step = np.linalg.lstsq(hess + 1e-14 * np.eye(2), grad, rcond=None)[0]
        current, t = loss(theta), 1.0
        while loss(theta - t * step) > current and t > 1e-10:
            t /= 2
        theta = theta - t * step
    a = theta[0] / sd
    return a, theta[1] - a * mu, converged


def _separated(f, y, w) -> bool:
    """Whether 0/1 targets are split by a threshold of the scores."""
    used = w > 0
    f, y = f[used], y[used]
    if not np.all((y == 0) | (y == 1)) or y.min() == y.max():
        return False
    return bool(f[y == 0].max() < f[y == 1].min() or f[y == 1].max() < f[y == 0].min())


class CorrectnessCalibrator(RegressorMixin, BaseEstimator):
    """The probability that an answer is correct, from a scalar confidence.

    Language models and their judges give one number per answer: a
    verbalised confidence ("I am 90% sure"), a judge's score, a sequence
    log-probability. ``fit`` learns a monotone map from that number to the
    frequency of correct answers; ``predict`` gives P(correct). Targets may
    be 0/1 (wrong / right) or fractional (a partial-credit grade, the share
    of judges that accept the answer): the loss is the cross-entropy (or the
    squared error for isotonic regression), linear in the target, so a
    target of 0.3 counts like a correct row of weight 0.3 and a wrong one of
    weight 0.7.

    Parameters
    ----------
    method : {"platt", "isotonic"}, default="platt"
        ``"platt"``: ``sigmoid(a f + b)`` fitted by maximum likelihood
        (Platt, 1999, without his target smoothing); ``"isotonic"``: the
        non-decreasing step function of least squares (pool adjacent
        violators, scikit-learn's ``IsotonicRegression`` clipped to [0, 1]
        and to the range of the scores seen).
    input : {"score", "proba"}, default="score"
        ``"score"``: any real number, larger meaning more confident, used
        as ``f``; ``"proba"``: a confidence in [0, 1], used through its
        logit (probabilities 0 and 1 clipped at 1e-12 from the ends).

    Attributes
    ----------
    coef_, intercept_ : float
        ``a`` and ``b`` of ``method="platt"`` (None for isotonic).
    isotonic_ : IsotonicRegression or None
        The fitted map of ``method="isotonic"``.
    n_features_in_ : int
        1.

    Examples
    --------
    >>> import numpy as np
    >>> from skcal.llm import CorrectnessCalibrator
    >>> verbal = np.array([0.9, 0.9, 0.9, 0.9, 0.6, 0.6, 0.6, 0.6])
    >>> correct = np.array([1, 1, 1, 0, 1, 0, 0, 0])
    >>> cal = CorrectnessCalibrator(method="isotonic", input="proba")
    >>> cal.fit(verbal, correct).predict([0.6, 0.9])
    array([0.25, 0.75])
    """

    _parameter_constraints: dict = {
        "method": [StrOptions({"platt", "isotonic"})],
        "input": [StrOptions({"score", "proba"})],
    }

    def __init__(self, method="platt", input="score"):
        self.method = method
        self.input = input

    def _features(self, X, *, reset: bool, y=None):
        """The scores as a 1-D float64 array ``f`` (and the targets)."""
        if np.ndim(X) == 1:  # one score per answer, as a 1-D array
            X = np.reshape(np.asarray(X), (-1, 1))
        if y is None:
            X = validate_data(self, X, reset=reset, dtype=np.float64)
        else:
            X, y = validate_data(self, X, y, dtype=np.float64, y_numeric=True)
        if X.shape[1] != 1:
            raise ValueError(
                f"X must hold one confidence score per answer (shape (n,) or "
                f"(n, 1)), got {X.shape[1]} columns. Calibrate each score "
                "separately, or combine them first."
            )
        f = X[:, 0]
        if self.input == "proba":
            if np.any((f < 0) | (f > 1)):
                raise ValueError(
                    "input='proba' needs confidences in [0, 1]; got values from "
                    f"{f.min():.4g} to {f.max():.4g}. Pass input='score' for "
                    "scores on another scale."
                )
            f = logit(np.clip(f, 1e-12, 1 - 1e-12))
        return f if y is None else (f, y)

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y, sample_weight=None):
        """Fit the map from scores to P(correct).

        Parameters
        ----------
        X : array-like of shape (n_samples,) or (n_samples, 1)
            Confidence scores.
        y : array-like of shape (n_samples,)
            1 (or True) for a correct answer, 0 for a wrong one, or a
            fraction in [0, 1].
        sample_weight : array-like of shape (n_samples,), default=None

        Returns
        -------
        self : CorrectnessCalibrator
        """
        if y is None:
            raise ValueError(
                "CorrectnessCalibrator requires y to be passed, but the target y is "
                "None: pass 1 for each correct answer and 0 for each wrong one."
            )
        f, y = self._features(X, reset=True, y=y)
        if np.any((y < 0) | (y > 1)):
            raise ValueError(
                "y must say whether each answer is correct: 0 or 1 (or a fraction "
                f"in [0, 1] for partial credit); got values from {y.min():.4g} to "
                f"{y.max():.4g}."
            )
        w = check_sample_weight(sample_weight, len(f), relative=True)
        self.coef_ = self.intercept_ = self.isotonic_ = None
        if self.method == "isotonic":
            iso = IsotonicRegression(y_min=0.0, y_max=1.0, out_of_bounds="clip")
            self.isotonic_ = iso.fit(f, y, sample_weight=w)
            return self
        a, b, converged = _logistic_fit(f, y, w)
        if not converged or _separated(f, y, w):
            warn(
                "The scores separate correct from wrong answers perfectly (or the "
                f"logistic fit did not converge in {_MAX_ITER} Newton steps): the "
                "maximum-likelihood slope is infinite and the one returned stops "
                "at the solver's tolerance. Use method='isotonic', or more rows.",
                ConvergenceWarning,
            )
        self.coef_, self.intercept_ = float(a), float(b)
        return self

    def predict(self, X) -> np.ndarray:
        """P(correct) of each score.

        Parameters
        ----------
        X : array-like of shape (n_samples,) or (n_samples, 1)

        Returns
        -------
        ndarray of shape (n_samples,)
        """
        check_is_fitted(self, "n_features_in_")
        f = self._features(X, reset=False)
        if self.isotonic_ is not None:
            return self.isotonic_.predict(f)
        return expit(self.coef_ * f + self.intercept_)
