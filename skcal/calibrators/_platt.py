"""Platt scaling, one-vs-rest on each class's log-odds."""

from __future__ import annotations

import warnings

import numpy as np
from scipy.special import expit, log_expit

from .._torch.kernels import softmax_inplace
from ..base import BaseCalibrator
from ..exceptions import ConvergenceWarning
from ._binning import _renormalize

__all__ = ["PlattCalibrator"]


def _class_log_odds(logits: np.ndarray) -> np.ndarray:
    """``log p_k - log(1 - p_k)`` of every class, computed from the logits."""
    z = np.asarray(logits, dtype=np.float64)
    out = np.empty_like(z)
    for k in range(z.shape[1]):
        rest = np.delete(z, k, axis=1)
        m = rest.max(axis=1)
        log_rest = m + np.log(np.exp(rest - m[:, None]).sum(axis=1))
        out[:, k] = z[:, k] - log_rest
    return out


def fit_platt(s, positive, w, *, max_iter=100, tol=1e-10):
    """Platt's sigmoid ``1 / (1 + exp(-(a s + b)))`` by Newton's method.

    Targets are Platt's smoothed labels, ``(N+ + 1) / (N+ + 2)`` for
    positives and ``1 / (N- + 2)`` for negatives (``N`` weighted), and the
    weighted log loss is minimised from ``a = 0``, ``b = log((N- + 1) / (N+ +
    1))`` with backtracking. Returns ``(a, b, converged)``.
    """
    n_pos, n_neg = w[positive].sum(), w[~positive].sum()
    t = np.where(positive, (n_pos + 1) / (n_pos + 2), 1 / (n_neg + 2))
    a, b = 0.0, float(np.log((n_neg + 1) / (n_pos + 1)))

    def loss(a, b):
        f = a * s + b
        return -np.sum(w * (t * log_expit(f) + (1 - t) * log_expit(-f)))

    current = loss(a, b)
    for _ in range(max_iter):
        p = expit(a * s + b)
        r = w * (p - t)
        g = np.array([r @ s, r.sum()])
        h = w * p * (1 - p)
        H = np.array([[h @ (s * s), h @ s], [h @ s, h.sum()]])
        H[np.diag_indices(2)] += 1e-12 * (1 + np.abs(np.diag(H)))
        step = np.linalg.solve(H, g)
        scale = 1.0
        while scale > 1e-10:
            a_new, b_new = a - scale * step[0], b - scale * step[1]
            new = loss(a_new, b_new)
            if new <= current:
                break
            scale /= 2
        else:
            return a, b, True  # no descent left: at the minimum to rounding
        a, b, current = a_new, b_new, new
        if np.max(np.abs(scale * step)) <= tol * (1 + max(abs(a), abs(b))):
            return a, b, True
    return a, b, False


class PlattCalibrator(BaseCalibrator):
    """Platt scaling of each class, one-vs-rest, on the class's log-odds.

    For class ``k`` with ``s_k = log p_k - log(1 - p_k)`` (the log-odds of
    the uncalibrated probability, computed from the logits), a sigmoid
    ``q_k = 1 / (1 + exp(-(a_k s_k + b_k)))`` is fitted to ``y == k`` with
    Platt's smoothed targets by Newton's method; the rows are renormalised
    to sum to 1 (floored at 1e-12, as the other one-vs-rest calibrators).
    With two classes this is the classic Platt scaling of the decision value
    ``z_1 - z_0``, and the rows need no renormalisation.

    Parameters
    ----------
    input : {"logits", "proba"}, default="logits"
        What ``X`` holds.
    classes : array-like of shape (n_classes,), default=None
        The label of each column of ``X``.

    Attributes
    ----------
    coef_ : ndarray of shape (n_classes,)
        ``a_k``.
    intercept_ : ndarray of shape (n_classes,)
        ``b_k``.
    classes_ : ndarray of shape (n_classes,)
        Label of each column.
    n_features_in_ : int
        Number of columns of ``X``.

    References
    ----------
    J. Platt. "Probabilistic outputs for support vector machines and
    comparisons to regularized likelihood methods". 1999.

    Examples
    --------
    >>> import numpy as np
    >>> from skcal import PlattCalibrator
    >>> from skcal.utils._testing import make_miscalibrated_logits
    >>> logits, y = make_miscalibrated_logits(1000, 2, temperature=2.0, random_state=0)
    >>> platt = PlattCalibrator().fit(logits, y)
    >>> bool(0.3 < platt.coef_[1] < 0.7)  # undoes the temperature of 2
    True
    """

    def __init__(self, *, input="logits", classes=None):
        self.input = input
        self.classes = classes

    def _fit(self, logits, y_index, sample_weight):
        S = _class_log_odds(logits)
        n_classes = S.shape[1]
        self.coef_, self.intercept_ = np.empty(n_classes), np.empty(n_classes)
        failed = []
        for k in range(n_classes):
            a, b, ok = fit_platt(S[:, k], y_index == k, sample_weight)
            self.coef_[k], self.intercept_[k] = a, b
            if not ok:
                failed.append(k)
        if failed:
            warnings.warn(
                f"PlattCalibrator: Newton's method did not converge for classes "
                f"{failed[:10]} in 100 iterations.",
                ConvergenceWarning,
                stacklevel=3,
            )

    def _calibrated_logits(self, logits):
        P = softmax_inplace(np.array(logits, dtype=np.float64))
        Q = expit(self.coef_ * _class_log_odds(logits) + self.intercept_)
        return np.log(np.maximum(_renormalize(Q, P), 1e-300))
