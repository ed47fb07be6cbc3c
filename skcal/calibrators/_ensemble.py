"""Ensemble temperature scaling (Zhang, Kailkhura, Han, 2020) and its mixture
with the uniform distribution (probmetrics' ``ts-mix``)."""

from __future__ import annotations

import math
from numbers import Integral, Real

import numpy as np

from .._torch import newton_root_1d
from .._torch._progress import Progress
from .._torch.kernels import logit_scale, softmax_inplace
from .._torch.kernels._softmax import softmax_into
from ..base import BaseCalibrator, export_input, fit_logits, shifted_rows
from ..exceptions import ConvergenceWarning
from ..llm._topk import PAD as PAD_INDEX
from ..llm._topk import TopKScores
from ..llm._topk_ops import (
    TopKTemperatureObjective,
    expanded,
    scale_topk,
    topk_logit_scale,
)
from ..utils._constants import DIVISOR_FLOOR
from ..utils._sklearn import DEVICE_CONSTRAINT, Interval, StrOptions
from ..utils._validation import (
    PROBA_EPS,
    effective_sample_size,
    log_probabilities_inplace,
)
from ..utils._warnings import warn
from ._scaling import fit_inverse_temperature, solve_inverse_temperature
from ._topk_input import TopKInputMixin

__all__ = ["EnsembleTemperatureScaling"]

#: Rows per chunk hold about this many entries (2 MiB of float64).
_CHUNK_ENTRIES = 1 << 18
#: Inverse temperatures times the logits' scale are searched in exp(+-16).
_LOG_BETA_BOUND = 16.0
#: ``w = e_2 + _PLANE @ u``: the plane of weights summing to one.
_PLANE = np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, -1.0]])
#: Evaluations of the Brier derivative before the Newton iterations: the
#: bracket's doublings or halvings within ``exp(+-16)``, and its start.
_BRACKET_EVALUATIONS = int(2 * _LOG_BETA_BOUND / math.log(2.0)) + 2
#: Relative rounding of the objective's value (float64 machine epsilon).
_EPS = float(np.finfo(np.float64).eps)


def _chunks(n_rows: int, n_classes: int):
    step = max(1, _CHUNK_ENTRIES // max(n_classes, 1))
    return [slice(start, start + step) for start in range(0, n_rows, step)]


def _row_dot(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``(a * b).sum(axis=1)`` without the temporary, in this thread (2-4x
    faster at 10 to 100 columns)."""
    return np.einsum("ij,ij->i", a, b)


class _BrierTemperature:
    """Weighted mean Brier score of ``softmax(beta * z)`` and its derivatives.

    ``z`` are the logits shifted to a row maximum of 0 and divided by
    ``scale`` (see :func:`~skcal._torch.kernels.logit_scale`). Per row,
    with ``p = softmax(beta z)``, ``m1 = E_p[z]``, ``V = Var_p[z]`` and
    ``q = p^2``, the derivative of ``sum_k (p_k - y_k)^2`` is
    ``2 (sum q z - m1 sum q - p_y (z_y - m1))``. Products are taken as
    ``(p z) z``, never ``z^2``, so that logits up to 1e300 do not overflow.
    """

    def __init__(self, logits, y_index, sample_weight, scale, progress=None):
        z = np.asarray(logits, dtype=np.float64)
        self.z = (z - z.max(axis=1, keepdims=True)) / scale
        self.y = y_index
        self.w = sample_weight / sample_weight.sum()
        self.rows = np.arange(len(y_index))
        self.chunks = _chunks(*z.shape)
        self.scale, self.progress, self.n_evaluations = scale, progress, 0

    def derivatives(self, beta: float) -> tuple[float, float]:
        grad = hess = 0.0
        for rows in self.chunks:
            z = self.z[rows]
            p = softmax_inplace(beta * z)
            pz = p * z
            m1 = _row_dot(p, z)
            var = np.maximum(_row_dot(pz, z) - m1 * m1, 0.0)
            sq, sqz, sqzz = _row_dot(p, p), _row_dot(p, pz), _row_dot(pz, pz)
            index = self.rows[: len(z)], self.y[rows]
            py, dy = p[index], z[index] - m1
            pdy = py * dy
            g = sqz - m1 * sq - pdy
            h = 2.0 * (sqzz - m1 * sqz) - var * sq - 2.0 * m1 * (sqz - m1 * sq)
            h += py * var - pdy * dy
            w = self.w[rows]
            grad += 2.0 * float(w @ g)
            hess += 2.0 * float(w @ h)
        if self.progress is not None:
            self.n_evaluations += 1
            self.progress.step(
                f"Brier temperature: evaluation {self.n_evaluations}: beta "
                f"{beta / self.scale:.6g}, derivative {grad:.3g}"
            )
        return grad, hess


def _bracket_root(fun, start):
    """``(a, b)`` with ``fun(a) < 0 < fun(b)`` and ``b = 2 a``, searched by
    doubling or halving from ``start`` within ``exp(+-16)``; None if none.

    The derivative of a non-convex function may change sign again far
    away (the Brier score's flattens out as ``beta -> infinity``), so the
    bracket of the nearest sign change is found first.
    """
    bound = math.exp(_LOG_BETA_BOUND)
    x = min(max(start, 1.0 / bound), bound)
    g = fun(x)[0]
    if not math.isfinite(g):
        return None
    factor = 2.0 if g < 0.0 else 0.5
    while 1.0 / bound <= x * factor <= bound:
        nxt = x * factor
        g_next = fun(nxt)[0]
        if not math.isfinite(g_next):
            return None
        if (g_next > 0.0) if factor > 1.0 else (g_next < 0.0):
            return (x, nxt) if factor > 1.0 else (nxt, x)
        x = nxt
    return None


def _brier_inverse_temperature(
    logits, y_index, sample_weight, beta_nll, options, progress=None
):
    """The inverse temperature of least Brier score, from the NLL one.

    The Brier score of temperature scaling need not be convex in ``beta``:
    the minimum found is the nearest to the NLL-optimal ``beta`` (doubling
    or halving it until the derivative changes sign from negative to
    positive), refined by a safeguarded Newton iteration in that bracket.
    When there is none within ``exp(+-16)`` of the logits' scale (separable
    scores, where the NLL fit already warned, or uninformative ones), the
    NLL ``beta`` is kept.

    ``progress`` (a :class:`~skcal._torch._progress.Progress`) is stepped
    at each evaluation of the derivative.

    Returns
    -------
    beta : float
    n_iter : int
        Newton iterations in the bracket.
    """
    scale = logit_scale(logits)
    objective = _BrierTemperature(logits, y_index, sample_weight, scale, progress)
    return _brier_root(objective, scale, beta_nll, options)


def _brier_root(objective, scale, beta_nll, options):
    """:func:`_brier_inverse_temperature` of an objective whose
    ``derivatives`` take ``beta * scale``."""
    tol, max_iter = options
    bracket = _bracket_root(objective.derivatives, beta_nll * scale)
    if bracket is None:
        return beta_nll, 0
    lower, upper = bracket
    result = newton_root_1d(
        objective.derivatives, lower, lower, upper, xtol=tol, max_iter=max_iter
    )
    if result.at_bound is not None or not math.isfinite(result.x):
        return beta_nll, result.n_iter
    if not result.converged:
        warn(
            f"EnsembleTemperatureScaling: the Brier-optimal temperature did not "
            f"converge in max_iter={max_iter} Newton iterations; increase max_iter.",
            ConvergenceWarning,
        )
    return result.x / scale, result.n_iter


class _TopKBrierTemperature(_BrierTemperature):
    """:class:`_BrierTemperature` of the rest model of a
    :class:`~skcal.llm.TopKScores`: its sums over the classes are weighted
    sums over the expanded columns (the listed classes, then the unlisted
    share with the number of unlisted classes as its weight)."""

    def __init__(self, top, y_index, sample_weight, scale):
        z, self.mult = expanded(top)
        shift = np.where(self.mult > 0, z, -np.inf).max(axis=1)
        self.z = np.where(self.mult > 0, z - shift[:, None], 0.0) / scale
        hit = top.indices == y_index[:, None]
        self.y = np.where(hit.any(axis=1), np.argmax(hit, axis=1), top.k)
        self.w = sample_weight / sample_weight.sum()
        self.rows = np.arange(len(y_index))
        self.chunks = _chunks(*self.z.shape)
        self.scale, self.progress, self.n_evaluations = scale, None, 0

    def derivatives(self, beta: float) -> tuple[float, float]:
        grad = hess = 0.0
        for rows in self.chunks:
            z, mult = self.z[rows], self.mult[rows]
            e = np.where(mult > 0, np.exp(beta * z), 0.0)
            q = e / _row_dot(mult, e)[:, None]  # each class's probability
            mq, qz = mult * q, q * z
            m1 = _row_dot(mq, z)
            var = np.maximum(_row_dot(mq * z, z) - m1 * m1, 0.0)
            sq, sqz, sqzz = _row_dot(mq, q), _row_dot(mq, qz), _row_dot(mult * qz, qz)
            index = self.rows[: len(z)], self.y[rows]
            py, dy = q[index], z[index] - m1
            pdy = py * dy
            g = sqz - m1 * sq - pdy
            h = 2.0 * (sqzz - m1 * sqz) - var * sq - 2.0 * m1 * (sqz - m1 * sq)
            h += py * var - pdy * dy
            w = self.w[rows]
            grad += 2.0 * float(w @ g)
            hess += 2.0 * float(w @ h)
        return grad, hess


class _MixtureObjective:
    """A convex objective of the weights ``w`` of the three members.

    ``loss="mse"``: ``w^T G w`` with ``G`` the weighted mean Gram matrix of
    the residuals ``P_j - onehot(y)`` of the members (the mean Brier score
    of the mixture, since the weights sum to one). ``loss="log_loss"``:
    ``-sum_i s_i log(A_i . w)`` with ``A_i`` the members' probabilities of
    the true class of row ``i`` (floored at the smallest normal float64).
    """

    def __init__(self, loss, gram=None, true_proba=None, weights=None):
        self.loss, self.G, self.A, self.s = loss, gram, true_proba, weights

    def value(self, w) -> float:
        if self.loss == "mse":
            return float(w @ self.G @ w)
        r = self.A @ w
        if not (r > 0).all():
            return math.inf
        return -float(self.s @ np.log(r))

    def grad(self, w) -> np.ndarray:
        if self.loss == "mse":
            return 2.0 * self.G @ w
        return -(self.s @ (self.A / (self.A @ w)[:, None]))

    def hess(self, w) -> np.ndarray:
        if self.loss == "mse":
            return 2.0 * self.G
        B = self.A / (self.A @ w)[:, None]
        return (B * self.s[:, None]).T @ B


def _interior_minimum(objective, max_iter=100):
    """Newton's method on the plane ``sum w = 1`` from the simplex's centre.

    Returns the stationary point if it converged inside the simplex (then
    the global minimum, by convexity), else None. The iteration stops once
    the Newton decrement (twice the predicted decrease) is below the
    rounding of the objective's value: the last step is then taken in full
    (the gradient still resolves it where the value no longer does), which
    puts the weights at their rounding level.
    """
    u = np.full(2, 1.0 / 3.0)
    weights = np.array([u[0], u[1], 1.0 - u.sum()])
    for _ in range(max_iter):
        g = _PLANE.T @ objective.grad(weights)
        H = _PLANE.T @ objective.hess(weights) @ _PLANE
        eig = np.linalg.eigvalsh(H)
        if not np.isfinite(eig).all() or eig[0] <= 1e-12 * max(eig[1], DIVISOR_FLOOR):
            return None  # flat in a direction: the minimum is on an edge
        step = -np.linalg.solve(H, g)
        decrement, f0 = -float(g @ step), objective.value(weights)
        if decrement <= _EPS * abs(f0):  # converged: a last full step
            trial = u + step
            candidate = np.array([trial[0], trial[1], 1.0 - trial.sum()])
            if math.isfinite(objective.value(candidate)):
                weights = candidate
            break
        t = 1.0
        while t > 1e-12:
            trial = u + t * step
            candidate = np.array([trial[0], trial[1], 1.0 - trial.sum()])
            if objective.value(candidate) <= f0 - 1e-4 * t * decrement:
                break
            t /= 2.0
        else:
            break  # no decrease left: at the minimum up to rounding
        u, weights = trial, candidate
    else:
        return None
    return weights if weights.min() >= 0.0 else None


def _edge_minimum(objective, j, k, max_iter=200):
    """Minimum over the segment from vertex ``e_j`` to ``e_k``, as ``w``.

    The derivative along the segment is non-decreasing (convexity): its
    root is bracketed and found by Newton steps, bisecting when a step
    leaves the bracket.
    """
    d = np.zeros(3)
    d[j], d[k] = -1.0, 1.0

    def point(t):
        w = np.zeros(3)
        w[j], w[k] = 1.0 - t, t
        return w

    if objective.grad(point(0.0)) @ d >= 0.0:
        return point(0.0)
    if objective.grad(point(1.0)) @ d <= 0.0:
        return point(1.0)
    a, b, t = 0.0, 1.0, 0.5
    for _ in range(max_iter):
        w = point(t)
        g = float(objective.grad(w) @ d)
        if g == 0.0:
            break
        a, b = (t, b) if g < 0.0 else (a, t)
        h = float(d @ objective.hess(w) @ d)
        newton = t - g / h if h > 0.0 else math.nan
        nxt = newton if a < newton < b else 0.5 * (a + b)
        if abs(nxt - t) <= 1e-15 or b - a <= 1e-15:
            t = nxt
            break
        t = nxt
    return point(t)


def _simplex_minimum(objective) -> np.ndarray:
    """Minimum of a convex function of three weights on the simplex.

    The interior stationary point if there is one, else the best of the
    minima over the three edges (exact for convex functions).
    """
    weights = _interior_minimum(objective)
    if weights is not None:
        return weights
    edges = [_edge_minimum(objective, j, k) for j, k in ((0, 1), (0, 2), (1, 2))]
    values = [objective.value(w) for w in edges]
    return edges[int(np.argmin(values))]


class EnsembleTemperatureScaling(TopKInputMixin, BaseCalibrator):
    """Ensemble temperature scaling (ETS): temperature scaling mixed with the
    uncalibrated prediction and the uniform distribution.

    With ``mixture="ensemble"`` (the method of Zhang et al., 2020), the
    calibrated probabilities are

    ``w_0 softmax(z / T) + w_1 softmax(z) + w_2 / C``,

    a weighted mean of temperature scaling, the classifier's own
    probabilities and the uniform distribution over the ``C`` classes, with
    weights ``w`` on the simplex (non-negative, summing to one). As in the
    authors' code (``util_calibration.py``, ``ets_calibrate``), the
    temperature is fitted first and the weights then, both by minimising
    the weighted mean squared error (Brier score) with the default
    ``loss="mse"``, or both by minimising the negative log-likelihood with
    ``loss="log_loss"`` (the temperature then is that of
    :class:`TemperatureScaling`). Both weight problems are convex on the
    simplex and solved to machine precision (the Brier score of the mixture
    is a quadratic form in ``w``, solved exactly); the Brier-optimal
    temperature is found by a safeguarded Newton iteration from the
    NLL-optimal one. Unlike the authors' code, the temperature is not
    bounded to ``[0.05, 5]`` (see :class:`TemperatureScaling` for its range
    and its warnings).

    With ``mixture="uniform"`` (``ts-mix`` of the authors' ``probmetrics``
    library, the first step of :class:`StructuredMatrixScaling`), the
    temperature is fitted by NLL and the weights are fixed:
    ``(1 - 1/(n+1), 0, 1/(n+1))`` with ``n`` the number of calibration
    samples (Kish's effective sample size with weights), which bounds every
    probability below by ``1 / ((n+1) C)``.

    Every member ranks the classes as the logits do and the weights are
    non-negative, so the predicted class never changes; the model reads the
    logits only through their softmax, so adding a constant to a row
    changes nothing. The two modes are one class because ``ts-mix`` is the
    same map with its weights fixed instead of fitted.

    **Top-k input.** ``X`` may be a :class:`~skcal.llm.TopKScores` with
    ``y`` its class indices (``classes`` must be ``None``). The members are
    those of its rest model (the leftover mass ``r`` spread equally over the
    ``m = V - k`` unlisted classes of the ``V``): a listed class gets
    ``w_0 p_T + w_1 p + w_2 / V`` and the leftover ``w_0 r_T + w_1 r +
    w_2 m / V`` (the uniform member's exact mass on the unlisted classes),
    renormalised; the temperatures and weights are fitted by the same
    solves on the ``n x (k + 1)`` columns of the rest model, never
    ``n x V``. ``predict_proba`` returns a ``TopKScores`` (same indices).

    Parameters
    ----------
    input : {"logits", "proba"}, default="logits"
        What ``X`` holds. Probabilities are validated and turned into
        log-probabilities ``log(max(p, proba_floor_))`` (half the smallest
        positive calibration probability, at least 2.2e-308).
    classes : array-like of shape (n_classes,), default=None
        The label of each column of ``X``.
    mixture : {"ensemble", "uniform"}, default="ensemble"
        ``"ensemble"``: weights fitted on the simplex (ETS). ``"uniform"``:
        temperature scaling mixed with the uniform distribution at weight
        ``1/(n+1)`` (``ts-mix``).
    loss : {"mse", "log_loss"}, default="mse"
        The objective of the temperature and of the weights of
        ``mixture="ensemble"``: mean squared error (the authors' code) or
        negative log-likelihood. Ignored by ``mixture="uniform"``, whose
        temperature minimises the NLL.
    device : {"auto", "cpu", "cuda"} or "cuda:N", default="auto"
        Where the NLL temperature fit runs.
    tol : float, default=1e-12
        Relative tolerance on the inverse temperature.
    max_iter : int, default=100
        Maximum number of Newton iterations of each temperature solve.
    verbose : int, default=0
        0: silent; 1: a progress bar per phase of the fit on stderr (the
        NLL temperature, the Brier temperature's evaluations, the weights'
        chunks of rows; 50,000 x 1,000 scores take tens of seconds); 2: also
        a line per step.

    Attributes
    ----------
    temperature_ : float
        Temperature ``T`` of the first member.
    weights_ : ndarray of shape (3,)
        Weights of ``softmax(z / T)``, ``softmax(z)`` and the uniform
        distribution; non-negative, summing to one.
    n_iter_ : int
        Newton iterations of the temperature solves (NLL, then Brier).
    classes_ : ndarray of shape (n_classes,)
        Label of each column.
    n_features_in_ : int
        Number of columns of ``X``.

    See Also
    --------
    TemperatureScaling : the first member alone.
    StructuredMatrixScaling : a matrix scaling of ``ts-mix``'s log-probabilities.

    References
    ----------
    J. Zhang, B. Kailkhura, T. Y.-J. Han. "Mix-n-Match: Ensemble and
    Compositional Methods for Uncertainty Calibration in Deep Learning".
    ICML 2020.

    Examples
    --------
    >>> from skcal import EnsembleTemperatureScaling
    >>> from skcal.utils._testing import make_miscalibrated_logits
    >>> logits, y = make_miscalibrated_logits(1000, 5, temperature=2.0, random_state=0)
    >>> ets = EnsembleTemperatureScaling(device="cpu").fit(logits, y)
    >>> ets.weights_.shape, bool(abs(ets.weights_.sum() - 1) < 1e-12)
    ((3,), True)
    >>> bool((ets.predict(logits) == logits.argmax(axis=1)).all())
    True
    >>> mix = EnsembleTemperatureScaling(mixture="uniform", device="cpu").fit(logits, y)
    >>> round(float(mix.weights_[2] * 1001), 6)
    1.0
    """

    _needs_torch = True  # its fit runs torch kernels
    _shift_invariant = True
    _keeps_argmax = "proba"
    # input="proba": mapped as probabilities, fitted on their logs
    _reads = "log-probabilities"

    _parameter_constraints: dict = {
        **BaseCalibrator._parameter_constraints,
        "mixture": [StrOptions({"ensemble", "uniform"})],
        "loss": [StrOptions({"mse", "log_loss"})],
        "device": DEVICE_CONSTRAINT,
        "tol": [Interval(Real, 0, None, closed="neither")],
        "max_iter": [Interval(Integral, 1, None, closed="left")],
        "verbose": ["verbose"],
    }

    def __init__(
        self,
        *,
        input="logits",
        classes=None,
        mixture="ensemble",
        loss="mse",
        device="auto",
        tol=1e-12,
        max_iter=100,
        verbose=0,
    ):
        self.input = input
        self.classes = classes
        self.mixture = mixture
        self.loss = loss
        self.device = device
        self.tol = tol
        self.max_iter = max_iter
        self.verbose = verbose

    def n_free_parameters(self, n_classes, n_features=None):
        """3 (a temperature and two free weights) for ``mixture="ensemble"``,
        1 (the temperature) for ``mixture="uniform"``."""
        return 3 if self.mixture == "ensemble" else 1

    def _phase(self, total, phase, unit):
        """The progress bar of one phase of the fit."""
        return Progress(self.verbose, total, f"{type(self).__name__}: {phase}", unit)

    def _fit(self, logits, y_index, sample_weight):
        logits = fit_logits(self, logits)  # input="proba": their logs
        with self._phase(1, "NLL temperature", "solve") as progress:
            result = fit_inverse_temperature(
                logits, y_index, sample_weight, self.device, self.tol, self.max_iter
            )
            progress.step(
                f"NLL temperature: T = {1.0 / result.x:.6g} after "
                f"{result.n_iter} Newton iterations"
            )
        beta, self.n_iter_ = result.x, result.n_iter
        if self.mixture == "uniform":
            mix = 1.0 / (effective_sample_size(sample_weight) + 1.0)
            self.temperature_ = float(1.0 / beta)
            self.weights_ = np.array([1.0 - mix, 0.0, mix])
            return
        if self.loss == "mse":
            total = self.max_iter + _BRACKET_EVALUATIONS
            with self._phase(total, "Brier temperature", "evaluation") as progress:
                beta, n_iter = _brier_inverse_temperature(
                    logits, y_index, sample_weight, beta, (self.tol, self.max_iter),
                    progress,
                )  # fmt: skip
                progress.end()
            self.n_iter_ += n_iter
        self.temperature_ = float(1.0 / beta)
        n_chunks = len(_chunks(*logits.shape))
        with self._phase(n_chunks, "weights", "chunk") as progress:
            objective = self._mixture_objective(
                logits, y_index, sample_weight, progress
            )
            weights = np.clip(_simplex_minimum(objective), 0.0, 1.0)
        self.weights_ = weights / weights.sum()

    def _mixture_objective(self, logits, y_index, sample_weight, progress=None):
        """The objective of the weights on the calibration set (chunked;
        ``progress`` is stepped at each chunk of rows)."""
        n, n_classes = logits.shape
        s = sample_weight / sample_weight.sum()
        true_proba = np.empty((n, 3))
        true_proba[:, 2] = 1.0 / n_classes
        cross = np.zeros((n, 3))  # sum_k p0^2, p0 p1, p1^2 per row
        for rows in _chunks(n, n_classes):
            p0, p1 = self._members(logits[rows])
            index = np.arange(p0.shape[0]), y_index[rows]
            true_proba[rows, 0], true_proba[rows, 1] = p0[index], p1[index]
            if self.loss == "mse":
                cross[rows, 0] = _row_dot(p0, p0)
                cross[rows, 1] = _row_dot(p0, p1)
                cross[rows, 2] = _row_dot(p1, p1)
            if progress is not None:
                progress.step(f"weights: rows {rows.start} to {rows.start + len(p0)}")
        if self.loss == "log_loss":
            true_proba = np.maximum(true_proba, PROBA_EPS)
            return _MixtureObjective("log_loss", true_proba=true_proba, weights=s)
        p0y, p1y = true_proba[:, 0], true_proba[:, 1]
        # <P_j - Y, P_k - Y> per row; the uniform member gives 1 - p_y and 1 - 1/C
        g00 = s @ (cross[:, 0] - 2.0 * p0y + 1.0)
        g01 = s @ (cross[:, 1] - p0y - p1y + 1.0)
        g11 = s @ (cross[:, 2] - 2.0 * p1y + 1.0)
        g02, g12, g22 = 1.0 - s @ p0y, 1.0 - s @ p1y, 1.0 - 1.0 / n_classes
        gram = np.array([[g00, g01, g02], [g01, g11, g12], [g02, g12, g22]])
        return _MixtureObjective("mse", gram=gram)

    # -------------------------------------------------------- top-k input
    def _fit_topk(self, top, y_index, sample_weight):
        """:meth:`_fit` on the rest model of a ``TopKScores``: the same
        solves, on its ``n x (k + 1)`` expanded columns."""
        scale = topk_logit_scale(top)
        nll = TopKTemperatureObjective(top, y_index, sample_weight, scale)
        result = solve_inverse_temperature(
            nll.derivatives, scale, self.tol, self.max_iter
        )
        beta, self.n_iter_ = result.x, result.n_iter
        if self.mixture == "uniform":
            mix = 1.0 / (effective_sample_size(sample_weight) + 1.0)
            self.temperature_ = float(1.0 / beta)
            self.weights_ = np.array([1.0 - mix, 0.0, mix])
            return
        if self.loss == "mse":
            brier = _TopKBrierTemperature(top, y_index, sample_weight, scale)
            options = (self.tol, self.max_iter)
            beta, n_iter = _brier_root(brier, scale, beta, options)
            self.n_iter_ += n_iter
        self.temperature_ = float(1.0 / beta)
        objective = self._topk_mixture_objective(top, y_index, sample_weight)
        weights = np.clip(_simplex_minimum(objective), 0.0, 1.0)
        self.weights_ = weights / weights.sum()

    def _topk_mixture_objective(self, top, y_index, sample_weight):
        """:meth:`_mixture_objective` of the rest model: the members'
        per-class probabilities of the expanded columns, weighted by their
        number of classes."""
        s = sample_weight / sample_weight.sum()
        tempered = scale_topk(top, 1.0 / self.temperature_)
        true_proba = np.empty((len(top), 3))
        true_proba[:, 0] = np.exp(tempered.label_logproba(y_index))
        true_proba[:, 1] = np.exp(top.label_logproba(y_index))
        true_proba[:, 2] = 1.0 / top.n_classes
        if self.loss == "log_loss":
            true_proba = np.maximum(true_proba, PROBA_EPS)
            return _MixtureObjective("log_loss", true_proba=true_proba, weights=s)
        z0, mult = expanded(tempered)
        z1, _ = expanded(top)
        p0, p1 = np.exp(z0) * (mult > 0), np.exp(z1) * (mult > 0)
        c00, c01 = _row_dot(mult * p0, p0), _row_dot(mult * p0, p1)
        c11 = _row_dot(mult * p1, p1)
        p0y, p1y = true_proba[:, 0], true_proba[:, 1]
        g00 = s @ (c00 - 2.0 * p0y + 1.0)
        g01 = s @ (c01 - p0y - p1y + 1.0)
        g11 = s @ (c11 - 2.0 * p1y + 1.0)
        g02, g12, g22 = 1.0 - s @ p0y, 1.0 - s @ p1y, 1.0 - 1.0 / top.n_classes
        gram = np.array([[g00, g01, g02], [g01, g11, g12], [g02, g12, g22]])
        return _MixtureObjective("mse", gram=gram)

    def _map_topk(self, top):
        """The mixture of the rest model, as a ``TopKScores``: listed
        ``w_0 p_T + w_1 p + w_2 / V``, leftover ``w_0 r_T + w_1 r +
        w_2 m / V`` (``m`` unlisted classes of ``V``), renormalised."""
        w0, w1, w2 = (float(w) for w in self.weights_)
        tempered = scale_topk(top, 1.0 / self.temperature_)
        if (w0, w1, w2) == (1.0, 0.0, 0.0):
            return tempered
        n_classes, listed = top.n_classes, top.indices != PAD_INDEX
        m = n_classes - listed.sum(axis=1)
        p = w0 * np.exp(tempered.values) + w1 * np.exp(top.values)
        p += np.where(listed, w2 / n_classes, 0.0)
        rest = w0 * np.exp(tempered.rest_logmass) + w2 * m / n_classes
        rest += w1 * np.exp(top.leftover_logmass())
        total = p.sum(axis=1) + rest
        with np.errstate(divide="ignore"):
            values = np.log(p / total[:, None])
            rest_log = np.log(rest / total)
        return TopKScores(top.indices, values, n_classes, rest_log, tokens=top.tokens)

    def _members(self, logits, raw=True):
        """``softmax(z / T)`` and ``softmax(z)`` (None unless ``raw``) of a
        block of rows."""
        z = np.asarray(logits, dtype=np.float64)
        p1 = softmax_inplace(z.copy()) if raw else None
        return softmax_inplace(z / self.temperature_), p1

    def _calibrated_proba(self, logits, P=None):
        if P is not None:
            return self._map_probabilities(P, logits)
        z = shifted_rows(logits)  # its own copy: z / T reads shifted logits
        return self._mix_into(z, z)

    def _map_probabilities(self, P, logits):
        """The mixture of validated probabilities ``P`` (overwritten).

        Without the raw member (``w_1 = 0``), the map of their logs, taken
        in place. Otherwise the raw member is ``P`` itself (the softmax of
        their logs, to a few units in the last place) and the tempered one
        ``softmax(log(P) / T)``, the logs taken chunk by chunk into a buffer.
        """
        w0, w1, w2 = (float(w) for w in self.weights_)
        if w1 == 0.0:
            return self._mix_into(log_probabilities_inplace(P), P)
        n, n_classes = P.shape
        buffer = None
        for rows in _chunks(n, n_classes):
            p1 = P[rows]
            if buffer is None:
                buffer = np.empty(p1.shape)
            p0 = buffer[: len(p1)]
            np.copyto(p0, p1)
            log_probabilities_inplace(p0)  # as the logits validation takes them
            p0 /= self.temperature_
            softmax_inplace(p0)
            p1 *= w1
            p0 *= w0
            p1 += p0
            p1 += w2 / n_classes
            p1 /= p1.sum(axis=1, keepdims=True)
        return P

    def _mix_into(self, logits, out):
        """The calibrated probabilities of ``logits``, written into ``out``
        (C-contiguous float64; may be ``logits`` itself), by chunks of rows.

        Each chunk is mapped in place, while it is in cache: ``z / T``, its
        softmax, then the mixture (skipped for the weights ``(1, 0, 0)``,
        where it is the identity) and its renormalisation.
        """
        n, n_classes = logits.shape
        w0, w1, w2 = (float(w) for w in self.weights_)
        mixed = (w0, w1, w2) != (1.0, 0.0, 0.0)
        buffer = None
        for rows in _chunks(n, n_classes):
            z, p0 = logits[rows], out[rows]
            if w1 > 0.0:  # softmax(z) first: p0 may overwrite z
                if buffer is None:
                    buffer = np.empty(p0.shape)
                p1 = softmax_into(z, buffer[: len(p0)])
            np.divide(z, self.temperature_, out=p0)
            softmax_inplace(p0)
            if not mixed:
                continue
            p0 *= w0
            if w1 > 0.0:
                p1 *= w1
                p0 += p1
            p0 += w2 / n_classes
            p0 /= p0.sum(axis=1, keepdims=True)
        return out

    def to_torch(self):
        """The fitted map as a torch module: scores to calibrated probabilities.

        The input handling and the mixture of ``softmax(z / temperature_)``,
        ``softmax(z)`` and the uniform distribution with ``weights_``. See
        :func:`skcal.export.to_torch`.

        Returns
        -------
        torch.nn.Module

        Examples
        --------
        >>> from skcal import EnsembleTemperatureScaling
        >>> from skcal.export import check_export
        >>> from skcal.utils._testing import make_miscalibrated_logits
        >>> X, y = make_miscalibrated_logits(n_samples=200, random_state=0)
        >>> cal = EnsembleTemperatureScaling().fit(X, y)
        >>> bool(check_export(cal, X, cal.to_torch()) < 1e-12)
        True
        """
        from .._torch._export import Chain, EnsembleMix

        mix = EnsembleMix(self.temperature_, self.weights_, self.n_features_in_)
        return Chain(export_input(self), mix)

    def _calibrated_logits(self, logits):
        return np.log(np.maximum(self._calibrated_proba(logits), PROBA_EPS))
