"""Logistic calibrators, one-vs-rest: Platt scaling and beta calibration."""

from __future__ import annotations

import numpy as np
from scipy.special import expit, log_expit

from ..base import BaseCalibrator, shifted_rows
from ..utils._constants import SUM_FLOOR
from ..utils._sklearn import StrOptions
from ..utils._softmax import (
    affine_columns,
    clip_inplace,
    exp_into,
    log_inplace,
    minus_into,
    one_minus_into,
    row_max,
    row_sum,
    rows_minus,
    sigmoid_inplace,
)
from ..utils._validation import effective_sample_size
from ._one_vs_rest import OneVsRestCalibrator, renormalize_inplace

__all__ = ["BetaCalibrator", "PlattCalibrator"]

#: Beta calibration clips the probabilities to ``[eps, 1 - eps]`` (as the
#: ``betacal`` package does), i.e. their logs to ``[ln eps, ln(1 - eps)]``.
_EPS = float(np.finfo(np.float64).eps)
_LOG_EPS = float(np.log(_EPS))
_LOG_ONE_MINUS_EPS = float(np.log(1.0 - _EPS))
#: Entries per block of rows of the predict paths: the scratch arrays stay
#: small (2 MiB) and are allocated once per call, not once per operation.
_ROWS_BLOCK = 1 << 18


def _class_log_odds(logits: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """``log p_k - log(1 - p_k)`` of every class, computed from the logits.

    ``log(1 - p_k) = logsumexp_{j != k} z_j - logsumexp_j z_j``. With ``M``
    the row maximum, ``e_j = exp(z_j - M)`` and ``R = sum_{j != argmax}
    e_j``, the sum over ``j != k`` is ``1 + R - e_k`` for every class but
    the argmax: it still holds the maximum's term 1, so the subtraction
    loses no precision. The argmax's log-odds are ``-log R``; where ``R``
    underflows (a logit gap of ~670 or more) the others are summed
    directly, shifted by their own maximum (the second largest logit).
    O(n C) time, in the C-contiguous float64 ``out`` (overwritten and
    returned; a new array if None); ``logits`` is not modified.
    """
    z = np.asarray(logits, dtype=np.float64)
    n, n_classes = z.shape
    e = np.empty((n, n_classes)) if out is None else out
    if n == 0:
        return e
    top = np.argmax(z, axis=1)
    flat_top = top + n_classes * np.arange(n)
    m = np.take(z, flat_top)  # the row maxima, 0 for logits shifted by them
    shifted = not m.any()
    exp_into(z, e, None if shifted else m)
    e.reshape(-1)[flat_top] = 0.0
    others = row_sum(e)
    log_inplace(rows_minus(others + 1.0, e))  # log sum_{j != k} exp(z_j - M)
    minus_into(z, e, e)
    if not shifted:
        e -= m[:, None]
    small = others < SUM_FLOOR
    s_top = -np.log(np.where(small, 1.0, others))
    if small.any():
        rows = np.flatnonzero(small)
        z_others = z[rows]
        z_others[np.arange(rows.size), top[rows]] = -np.inf
        second = z_others.max(axis=1)
        with np.errstate(under="ignore"):
            rest = second + np.log(np.exp(z_others - second[:, None]).sum(axis=1))
        s_top[rows] = m[rows] - rest
    e.reshape(-1)[flat_top] = s_top
    return e


def smoothed_counts(positive, w):
    """Platt's ``(N+, N-)`` as effective counts, scale-free in the weights.

    ``N+ = n_eff * sum(w[positive]) / sum(w)`` and ``N- = n_eff - N+``, with
    ``n_eff`` Kish's effective sample size: the counts for unit (or equal)
    weights, unchanged when every weight is multiplied by a constant.
    """
    n_eff = effective_sample_size(w)
    fraction = w[positive].sum() / w.sum()
    return n_eff * fraction, n_eff * (1.0 - fraction)


def fit_platt(s, positive, w):
    """Platt's sigmoid ``1 / (1 + exp(-(a s + b)))`` by Newton's method.

    Targets are Platt's smoothed labels, ``(N+ + 1) / (N+ + 2)`` for
    positives and ``1 / (N- + 2)`` for negatives (``N`` the effective counts
    of :func:`smoothed_counts`), and the weighted log loss is minimised from
    ``a = 0``, ``b = log((N+ + 1) / (N- + 1))`` (Platt's start: ``q`` is
    Laplace's estimate of the positive rate) by :func:`_fit_logistic`.
    Returns ``(a, b, converged)``.
    """
    n_pos, n_neg = smoothed_counts(positive, w)
    t = np.where(positive, (n_pos + 1) / (n_pos + 2), 1 / (n_neg + 2))
    start = np.array([0.0, np.log((n_pos + 1) / (n_neg + 1))])
    coef, b, ok = _fit_logistic(s[:, None], t, w, fit_intercept=True, start=start)
    return coef[0], b, ok


class PlattCalibrator(OneVsRestCalibrator):
    """Platt scaling of each class, one-vs-rest, on the class's log-odds.

    For class ``k`` with ``s_k = log p_k - log(1 - p_k)`` (the log-odds of
    the uncalibrated probability, computed from the logits), a sigmoid
    ``q_k = 1 / (1 + exp(-(a_k s_k + b_k)))`` is fitted to ``y == k`` with
    Platt's smoothed targets by Newton's method; the rows are renormalised
    to sum to 1 (floored at 1e-12, as the other one-vs-rest calibrators).
    With two classes this is the classic Platt scaling of the decision value
    ``z_1 - z_0``, and the rows need no renormalisation.

    Platt's targets are ``(N+ + 1) / (N+ + 2)`` for the positives and ``1 /
    (N- + 2)`` for the negatives. With sample weights ``N+`` and ``N-`` are
    effective counts, ``N+ = n_eff * W+ / W`` and ``N- = n_eff * W- / W``
    (``W+``, ``W-``, ``W`` the weight of the positives, of the negatives and
    in all, ``n_eff = W^2 / sum w^2`` Kish's effective sample size): the
    counts for unit weights, and unchanged when every weight is multiplied
    by a constant.

    A class with no calibration sample (of positive weight) gets the mean
    of the other classes' maps, ``a_k = mean_j a_j`` and ``b_k = mean_j
    b_j``: nothing was learned about it, so it is calibrated as the average
    class (the hierarchical, empirical-Bayes answer), which keeps its
    probability on the scale of the model's own and of the other
    calibrated classes. A fit to its all-negative targets would give it
    ``1 / (N- + 2)`` everywhere; keeping its raw probability would keep the
    model's miscalibration for it alone.

    **Many classes.** Each class's map is learned from that class's own
    positives, one-vs-rest: with many classes and few calibration rows per
    class the renormalised rows can score a higher log loss than the
    uncalibrated scores (drawn 15-class logits, 40 rows per class, 98%
    accuracy: test NLL 0.132 against 0.112 uncalibrated and 0.072 for
    temperature scaling). Prefer temperature scaling or a structured map
    there, or let :class:`~skcal.CalibratorSearchCV` choose.

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

    _reads = "log-probabilities"  # the log-odds of the floored probabilities

    def __init__(self, *, input="logits", classes=None):
        self.input = input
        self.classes = classes

    def n_free_parameters(self, n_classes, n_features=None):
        """``2C``: a slope and an intercept per class."""
        return 2 * n_classes

    def _class_scores(self, logits):
        return _class_log_odds(logits)

    def _start_maps(self, n_classes):
        self.coef_, self.intercept_ = np.empty(n_classes), np.empty(n_classes)

    def _fit_class(self, k, scores, positive, sample_weight):
        self.coef_[k], self.intercept_[k], ok = fit_platt(
            scores, positive, sample_weight
        )
        return ok

    def _fill_absent(self, present):
        self.coef_[~present] = self.coef_[present].mean()
        self.intercept_[~present] = self.intercept_[present].mean()

    def _torch_map(self):
        from .._torch._export_piecewise import PlattMap

        logits = self.input == "logits"
        mapping = PlattMap(self.coef_, self.intercept_, logits, SUM_FLOOR)
        return mapping, logits

    def _calibrated_proba(self, logits, P=None):
        if P is not None:
            return self._map_probabilities(P, logits)
        z = shifted_rows(logits)  # the log-odds are computed from shifted logits
        Q = _class_log_odds(z, out=np.empty(z.shape))
        affine_columns(Q, self.coef_, self.intercept_, out=Q)
        return renormalize_inplace(sigmoid_inplace(Q), z)

    def _map_probabilities(self, P, logits):
        """:meth:`_calibrated_proba` of the probabilities ``P`` themselves.

        The log-odds are ``log(p / (1 - p))``, with ``1 - p`` taken as such
        for every entry but each row's largest (the others are at most 1/2,
        where ``1 - p`` is exact), and as the sum of the row's other
        entries for the largest (no cancellation near 1): one logarithm
        per entry instead of the logits path's exponential and logarithm
        after the validation's logarithm. By blocks of rows, in ``P``
        (overwritten and returned) and one scratch block.
        """
        if P.size == 0:
            return P
        n_rows, n_classes = P.shape
        block = max(1, _ROWS_BLOCK // n_classes)
        scratch = np.empty((min(block, n_rows), n_classes))
        for start in range(0, n_rows, block):
            f = P[start : start + block]
            s, flat = scratch[: len(f)], f.reshape(-1)
            flat_top = np.argmax(f, axis=1) + n_classes * np.arange(len(f))
            top = flat[flat_top]
            flat[flat_top] = 0.0
            others = row_sum(f)
            flat[flat_top] = top
            one_minus_into(f, s)
            s.reshape(-1)[flat_top] = others
            log_inplace(np.divide(f, s, out=f))
            affine_columns(f, self.coef_, self.intercept_, out=f)
            sigmoid_inplace(f)
        return renormalize_inplace(P, logits)


def _backtrack(loss, theta, step, current):
    """``(theta - scale * step, loss)`` for the largest ``scale = 2^-j`` that
    does not increase the loss (``j < 40``), or None."""
    scale = 1.0
    for _ in range(40):
        candidate = theta - scale * step
        new = loss(candidate)
        if new <= current:
            return candidate, new
        scale /= 2
    return None


def _fit_logistic(F, targets, w, *, fit_intercept, start=None, max_iter=100, tol=1e-10):
    """Weighted, unregularised logistic regression by damped Newton steps.

    ``targets`` are labels in [0, 1] (booleans, or Platt's smoothed ones);
    the fit starts at ``start`` (zeros by default, intercept last). Each
    Newton step is halved until the loss does not increase; where that
    fails (far from the optimum, in a region where the sigmoid saturates
    and the Hessian vanishes) Boehning's step ``B^-1 g`` with the bound
    ``B = X^T W X / 4 >= H`` is taken, which never increases the loss. The
    fit has converged when the full Newton step is below ``tol`` (relative
    to ``theta``) or Newton's predicted decrease ``g^T H^-1 g`` is below
    the rounding of the loss, or when no step decreases the loss and that
    predicted decrease is below 1e-9 of it. The features are divided by
    their largest absolute value first (Newton's iterates do not depend on
    it, and nothing overflows). Returns ``(coef, intercept, converged)``;
    the Hessian gets a 1e-12 relative ridge so that a flat direction does
    not stop the solve.
    """
    # Newton is invariant to scaling the features: solve on features scaled
    # to at most 1 in absolute value, so that no product of two overflows
    # (class log-odds reach 1e300 for logits of that size)
    F = np.asarray(F, dtype=np.float64)
    scale = np.max(np.abs(F), axis=0, initial=0.0)
    scale = np.where((scale > 0) & np.isfinite(scale), scale, 1.0)
    F = F / scale
    if fit_intercept:
        X, scale = np.column_stack([F, np.ones(len(F))]), np.append(scale, 1.0)
    else:
        X = F
    t = np.asarray(targets, dtype=np.float64)
    theta = np.zeros(X.shape[1]) if start is None else np.array(start, dtype=float)
    theta = theta * scale

    def loss(theta):
        f = X @ theta
        return -np.sum(w * (t * log_expit(f) + (1 - t) * log_expit(-f)))

    def ridged(H):
        H[np.diag_indices_from(H)] += 1e-12 * (1 + np.abs(np.diag(H)))
        return H

    bound = ridged((X * (w / 4)[:, None]).T @ X)
    current, converged = loss(theta), False
    for _ in range(max_iter):
        p = expit(X @ theta)
        g = X.T @ (w * (p - t))
        H = ridged((X * (w * p * (1 - p))[:, None]).T @ X)
        step = np.linalg.solve(H, g)
        small = np.max(np.abs(step)) <= tol * (1 + np.max(np.abs(theta)))
        # Newton's predicted decrease below the rounding of the loss
        flat = g @ step <= 4 * np.finfo(np.float64).eps * (1 + abs(current))
        if small or flat:
            theta, converged = theta - step, True
            break
        moved = _backtrack(loss, theta, step, current)
        if moved is None:
            moved = _backtrack(loss, theta, np.linalg.solve(bound, g), current)
        if moved is None:
            # no decrease in either direction: the loss is flat to rounding;
            # converged if Newton's predicted decrease is as small
            converged = bool(g @ step <= 1e-9 * (1.0 + abs(current)))
            break
        theta, current = moved
    theta = theta / scale
    if fit_intercept:
        return theta[:-1], theta[-1], converged
    return theta, 0.0, converged


def fit_beta(s, positive, w, parameters):
    """``(a, b, c, converged)`` of ``logit q = a ln s - b ln(1 - s) + c``."""
    eps = np.finfo(np.float64).eps
    s = np.clip(s, eps, 1 - eps)
    ln_s, ln_1s = np.log(s), np.log1p(-s)
    if parameters == "am":
        coef, c, ok = _fit_logistic(
            (ln_s - ln_1s)[:, None], positive, w, fit_intercept=True
        )
        return coef[0], coef[0], c, ok
    if parameters == "ab":
        F = np.column_stack([np.log(2) + ln_s, np.log(2) + ln_1s])
        coef, _, ok = _fit_logistic(F, positive, w, fit_intercept=False)
        a, b = coef[0], -coef[1]
        return a, b, (a - b) * np.log(2), ok
    coef, c, ok = _fit_logistic(
        np.column_stack([ln_s, -ln_1s]), positive, w, fit_intercept=True
    )
    if coef[0] < 0:  # refit without ln s
        coef, c, ok = _fit_logistic(-ln_1s[:, None], positive, w, fit_intercept=True)
        return 0.0, coef[0], c, ok
    if coef[1] < 0:  # refit without ln(1 - s)
        coef, c, ok = _fit_logistic(ln_s[:, None], positive, w, fit_intercept=True)
        return coef[0], 0.0, c, ok
    return coef[0], coef[1], c, ok


class BetaCalibrator(OneVsRestCalibrator):
    """Beta calibration of each class, one-vs-rest (Kull et al. 2017).

    For class ``k`` with ``s = p_k`` (clipped to ``[eps, 1 - eps]``), the
    calibrated probability is ``q = 1 / (1 + exp(-(a ln s - b ln(1 - s) +
    c)))``, an unregularised logistic regression on ``[ln s, -ln(1 - s)]``.
    ``parameters="abm"`` fits all three; when ``a < 0`` (or ``b < 0``) it is
    refitted with ``a = 0`` (``b = 0``), as in the ``betacal`` package.
    ``"am"`` fixes ``a = b`` (logistic calibration of ``logit s``); ``"ab"``
    fixes the midpoint at 1/2 (``c = (a - b) ln
    2``, no intercept). Rows are renormalised (floored at 1e-12) over the
    classes; with two classes use it on either column. A class with no
    calibration sample (of positive weight) gets the mean of the other
    classes' ``(a, b, c)``, i.e. it is calibrated as the average class (an
    unregularised fit to its all-negative labels would send its
    probability to 0).

    **Many classes.** Each class's map is learned from that class's own
    positives, one-vs-rest: with many classes and few calibration rows per
    class the renormalised rows can score a higher log loss than the
    uncalibrated scores (drawn 15-class logits, 40 rows per class, 98%
    accuracy: test NLL 0.240 against 0.112 uncalibrated and 0.072 for
    temperature scaling). Prefer temperature scaling or a structured map
    there, or let :class:`~skcal.CalibratorSearchCV` choose.

    Parameters
    ----------
    input : {"logits", "proba"}, default="logits"
        What ``X`` holds; logits are turned into probabilities by softmax.
    classes : array-like of shape (n_classes,), default=None
        The label of each column of ``X``.
    parameters : {"abm", "am", "ab"}, default="abm"
        Which of the beta family's parameters are fitted.

    Attributes
    ----------
    coef_ : ndarray of shape (n_classes, 2)
        ``(a_k, b_k)``.
    intercept_ : ndarray of shape (n_classes,)
        ``c_k``.
    classes_ : ndarray of shape (n_classes,)
        Label of each column.
    n_features_in_ : int
        Number of columns of ``X``.

    References
    ----------
    M. Kull, T. M. Silva Filho, P. Flach. "Beta calibration: a well-founded
    and easily implemented improvement on logistic calibration for binary
    classifiers". AISTATS 2017.

    Examples
    --------
    >>> import numpy as np
    >>> from skcal import BetaCalibrator
    >>> from skcal.utils._testing import make_miscalibrated_logits
    >>> logits, y = make_miscalibrated_logits(1000, 3, temperature=2.0, random_state=0)
    >>> beta = BetaCalibrator().fit(logits, y)
    >>> beta.coef_.shape
    (3, 2)
    """

    _unconverged_hint = " (separable scores?)"

    _parameter_constraints: dict = {
        **BaseCalibrator._parameter_constraints,
        "parameters": [StrOptions({"abm", "am", "ab"})],
    }

    def __init__(self, *, input="logits", classes=None, parameters="abm"):
        self.input = input
        self.classes = classes
        self.parameters = parameters

    def n_free_parameters(self, n_classes, n_features=None):
        """``3C`` for "abm", ``2C`` for "am" and "ab"."""
        return (3 if self.parameters == "abm" else 2) * n_classes

    def _start_maps(self, n_classes):
        self.coef_ = np.empty((n_classes, 2))
        self.intercept_ = np.empty(n_classes)

    def _fit_class(self, k, scores, positive, sample_weight):
        a, b, c, ok = fit_beta(scores, positive, sample_weight, self.parameters)
        self.coef_[k], self.intercept_[k] = (a, b), c
        return ok

    def _fill_absent(self, present):
        self.coef_[~present] = self.coef_[present].mean(axis=0)
        self.intercept_[~present] = self.intercept_[present].mean()

    def _torch_map(self):
        from .._torch._export_piecewise import BetaMap

        logits = self.input == "logits"
        return BetaMap(self.coef_, self.intercept_, from_logits=logits), logits

    def _calibrated_proba(self, logits, P=None):
        """The beta map of each class's softmax probability, renormalised.

        One exponential per entry gives both ``s`` (the softmax, computed as
        :func:`softmax_into` does, bit for bit) and ``ln s = (z - m) -
        ln sum exp(z - m)``, the log-softmax, so that only ``ln(1 - s)``
        needs a logarithm per entry. Clipping ``ln s`` to ``[ln eps, ln(1 -
        eps)]`` is clipping ``s`` to ``[eps, 1 - eps]`` before its log, and
        ``1 - s`` clipped to the same range is ``1 - clip(s)`` exactly. By
        blocks of rows, in the returned array and one scratch block.
        """
        if P is not None:
            return self._map_probabilities(P, logits)
        z = np.asarray(logits, dtype=np.float64)
        out = np.empty(z.shape)
        if z.size == 0:
            return out
        a, minus_b = self.coef_[:, 0], -self.coef_[:, 1]
        block = max(1, _ROWS_BLOCK // z.shape[1])
        scratch = np.empty((min(block, z.shape[0]), z.shape[1]))
        for start in range(0, z.shape[0], block):
            zb = z[start : start + block]
            f, s = out[start : start + len(zb)], scratch[: len(zb)]
            np.subtract(zb, row_max(zb)[:, None], out=f)  # z - m
            exp_into(f, s)
            total = row_sum(s)
            np.divide(s, total[:, None], out=s)  # the softmax
            f -= np.log(total)[:, None]  # ln s
            clip_inplace(f, _LOG_EPS, _LOG_ONE_MINUS_EPS)
            log_inplace(clip_inplace(one_minus_into(s, s), _EPS, 1.0 - _EPS))
            self._beta_map(f, s, a, minus_b)
        return renormalize_inplace(out, logits)

    def _map_probabilities(self, P, logits):
        """:meth:`_calibrated_proba` of the probabilities ``P`` themselves.

        ``ln s`` and ``ln(1 - s)`` of the clipped probabilities, by blocks
        of rows in ``P`` (overwritten and returned) and one scratch block:
        two logarithms per entry instead of the logits path's exponential
        and logarithm after the validation's logarithm.
        """
        if P.size == 0:
            return P
        a, minus_b = self.coef_[:, 0], -self.coef_[:, 1]
        block = max(1, _ROWS_BLOCK // P.shape[1])
        scratch = np.empty((min(block, P.shape[0]), P.shape[1]))
        for start in range(0, P.shape[0], block):
            f = P[start : start + block]
            s = scratch[: len(f)]
            log_inplace(clip_inplace(one_minus_into(f, s), _EPS, 1.0 - _EPS))
            log_inplace(clip_inplace(f, _EPS, 1.0 - _EPS))
            self._beta_map(f, s, a, minus_b)
        return renormalize_inplace(P, logits)

    def _beta_map(self, f, s, a, minus_b):
        """``sigmoid(a ln s - b ln(1 - s) + c)`` into ``f`` (holding ``ln s``;
        ``s`` holds ``ln(1 - s)``)."""
        affine_columns(f, a, self.intercept_, out=f)  # a ln s + c
        affine_columns(s, minus_b, f, out=f)  # - b ln(1 - s)
        sigmoid_inplace(f)
