"""Top-versus-all calibration (Le Coz, Herbin and Adjed, NeurIPS 2024).

The multiclass problem becomes one binary problem: the top-label
confidence of each row against whether the top label is right. A binary
calibrator is fitted on that problem; a scaling calibrator (temperature or
vector scaling) is fitted on the binary cross-entropy of the confidence of
its own scaled softmax. The calibrated confidence replaces the top class's
probability; the other classes share the rest.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.optimize import minimize
from scipy.special import expit, logsumexp
from sklearn.base import clone

from .._torch._progress import Progress
from .._torch.kernels import logit_scale
from .._torch.kernels._softmax import (
    row_max,
    row_min,
    row_sum,
    softmax_inplace,
    softmax_into,
)
from ..base import BaseCalibrator, BaseLocalCalibrator
from ..exceptions import ConvergenceWarning
from ..utils._constants import FLOOR_BEFORE_LOG, SUM_FLOOR
from ..utils._proba import (
    _hold_top,
    replace_top_label,
    replace_top_label_inplace,
)
from ..utils._sklearn import HasMethods, StrOptions
from ..utils._validation import (
    PROBA_EPS,
    effective_sample_size,
    log_probabilities_inplace,
    top_and_rest,
    top_entries,
    top_rows_of_probabilities,
)
from ..utils._warnings import warn
from ._scaling import TemperatureScaling, VectorScaling, fit_inverse_temperature

__all__ = ["TopVersusAll"]

#: Entries per block of rows of the binary objective: its temporaries stay
#: small whatever the number of classes.
_BLOCK = 1 << 18
#: The inverse temperature times the logits' scale is searched in
#: ``[exp(-16), exp(16)]``, as by :class:`TemperatureScaling`.
_LOG_BETA_BOUND = 16.0
#: ``log`` of the smallest positive float64: the floor of ``log(1 - c)`` in
#: the binary problem (a row whose other shares all underflow).
_LOG_TINY = float(np.log(np.nextafter(0.0, 1.0)))


def _top_log_probabilities(z: np.ndarray, top: np.ndarray):
    """``(log c, log(1 - c))`` of the softmax of ``z`` at ``top``, stably.

    One exponential pass, shifted by the row maxima: ``1 - c`` is the sum of
    the other classes' shares (never ``1 - c``, which rounds to 0 for
    confident rows). ``log(1 - c)`` is floored at the log of the smallest
    positive float64 (where the other shares underflow: logit gaps beyond
    about 745), so that the binary problem stays finite.
    """
    rows = np.arange(len(top))
    e = np.subtract(z, row_max(z)[:, None], dtype=np.float64)
    np.exp(e, out=e)
    top_share = e[rows, top]  # a copy (fancy indexing)
    e[rows, top] = 0.0
    rest = row_sum(e)
    with np.errstate(divide="ignore"):  # a row of one class: log(0) = -inf
        log_total = np.log(top_share + rest)
        log_rest = np.maximum(np.log(rest), _LOG_TINY) - log_total
        return np.log(top_share) - log_total, log_rest


def _shifted(logits: np.ndarray) -> np.ndarray:
    """``logits`` minus their row maxima (the logits a scaling calibrator
    sees, whether ``X`` held logits or probabilities)."""
    return np.subtract(logits, row_max(logits)[:, None], dtype=np.float64)


def _top_first(values: np.ndarray, top: np.ndarray) -> np.ndarray:
    """``values`` with ``top`` raised to its row's maximum where rounding put
    another class a unit in the last place above it (a confidence equal to
    the largest other share, e.g. on rows of equal logits): a tie, never
    another class ahead."""
    below = values[np.arange(len(top)), top] < row_max(values)
    if below.any():
        _hold_top(values, top, np.flatnonzero(below))
    return values


def _binary_input(inner, scores: np.ndarray, *, predict: bool = False) -> np.ndarray:
    """The binary scores as ``inner``'s own validation would pass them to
    its private methods: shifted to a row maximum of 0 if it is
    shift-invariant (in predictions, not for a ``_softmax_first``
    calibrator, which is given float64 scores as they are)."""
    if not inner._shift_invariant or (predict and inner._softmax_first):
        return scores
    return scores - np.maximum(scores[:, 0], scores[:, 1])[:, None]


def _softmax2(scores: np.ndarray) -> np.ndarray:
    """The softmax of the binary problem's two columns of scores, floored at
    ``PROBA_EPS`` as validated probabilities are: what a calibrator that
    reads probabilities is given (by two ``expit`` of the scores'
    difference; a row-wise softmax costs more per row than its work on two
    columns)."""
    d = scores[:, 1] - scores[:, 0]
    out = np.empty((len(d), 2))
    expit(-d, out=out[:, 0])
    expit(d, out=out[:, 1])
    return np.maximum(out, PROBA_EPS, out=out)


def _replace_top(shares, top, confidence, complement=None) -> np.ndarray:
    """``confidence`` on the top class, the others sharing ``complement``
    (``1 - confidence`` if None) in the proportions of the softmax of
    ``shares`` (see :func:`replace_top_label_inplace`); the top class at
    least ties with every other."""
    P = softmax_into(shares, np.empty(shares.shape))
    return replace_top_label_inplace(
        P, shares, top, confidence, floor=FLOOR_BEFORE_LOG, keep_argmax=True,
        complement=complement,
    )  # fmt: skip


def binary_log_proba(logits: np.ndarray, top: np.ndarray) -> np.ndarray:
    """The top-versus-all binary problem's scores: ``[log(1 - c), log c]``.

    ``c`` is the softmax probability of column ``top`` of each row; the two
    columns are the log-probabilities of "wrong" (0) and "right" (1), valid
    logits for a binary calibrator. Computed by blocks of rows.
    """
    n = logits.shape[0]
    out = np.empty((n, 2))
    step = max(1, _BLOCK // max(logits.shape[1], 1))
    for start in range(0, n, step):
        block = slice(start, start + step)
        log_c, log_rest = _top_log_probabilities(logits[block], top[block])
        out[block, 0], out[block, 1] = log_rest, log_c
    return out


def _binary_scores(c: np.ndarray, rest: np.ndarray) -> np.ndarray:
    """``[log(rest / (c + rest)), log(c / (c + rest))]`` of each row's top
    entry ``c`` and sum of the others ``rest``, ``log(1 - c)`` floored as in
    :func:`_top_log_probabilities`."""
    scores = np.empty((len(c), 2))
    with np.errstate(divide="ignore"):  # see _top_log_probabilities
        log_total = np.log(c + rest)
        scores[:, 0] = np.maximum(np.log(rest), _LOG_TINY) - log_total
        scores[:, 1] = np.log(c) - log_total
    return scores


def _binary_proba(c: np.ndarray, rest: np.ndarray) -> np.ndarray:
    """``[rest, c] / (c + rest)`` floored at ``PROBA_EPS``: the softmax of
    :func:`_binary_scores` (to a few units in the last place) without its
    logarithms and exponentials."""
    out = np.empty((len(c), 2))
    total = c + rest
    np.divide(rest, total, out=out[:, 0])
    np.divide(c, total, out=out[:, 1])
    return np.maximum(out, PROBA_EPS, out=out)


class _BinaryProblem:
    """The binary problem of the top labels, as each binary calibrator reads
    it: the scores ``[log(1 - c), log c]`` or their softmax ``[1 - c, c]``.

    Given logits, ``scores`` (the probabilities are their softmax); given
    validated probabilities, each row's top entry ``c`` and the sum of its
    others ``rest``, from which both are direct (the probabilities without
    a logarithm). ``problem[rows]`` gives the scores of those rows (the
    logits that a calibrator of probabilities reads only for its fallback
    rows). Without ``rest`` (None), only :meth:`confidence` is defined:
    what a calibrator of one map reads."""

    def __init__(self, scores=None, c=None, rest=None):
        self._scores, self.c, self.rest = scores, c, rest

    @classmethod
    def of_probabilities(cls, P: np.ndarray, top: np.ndarray, rest=True):
        """From validated probabilities ``P`` (C-contiguous float64, floored
        at ``PROBA_EPS``; left as it was) and their argmax ``top``; without
        ``rest``, only the top entries (for :meth:`confidence`)."""
        if not rest:
            return cls(None, top_entries(P, top), None)
        return cls(None, *top_and_rest(P, top))

    def scores(self) -> np.ndarray:
        if self._scores is None:
            self._scores = _binary_scores(self.c, self.rest)
        return self._scores

    def __getitem__(self, rows) -> np.ndarray:
        if self._scores is None:
            return _binary_scores(self.c[rows], self.rest[rows])
        return self._scores[rows]

    def proba(self, inner, *, predict: bool = False) -> np.ndarray:
        """What ``inner``, a skcal calibrator of probabilities, is given."""
        if self.c is None:
            return _softmax2(_binary_input(inner, self.scores(), predict=predict))
        return _binary_proba(self.c, self.rest)

    def confidence(self, inner) -> np.ndarray:
        """The confidence that a calibrator of one map reads: given
        probabilities, the top entry ``c`` of the renormalised row (the same
        product in the fit's validation and in the predictions' copy);
        given logits, the column ``c`` of :meth:`proba`."""
        if self.c is not None:
            return self.c
        return self.proba(inner)[:, 1]


class _TopRows:
    """Each validated probability row's argmax, its entry and (with
    ``rest``) the sum of the others
    (:func:`~skcal.utils._validation.top_rows_of_probabilities`): all that
    the fit of a binary calibrator with proportional redistribution reads,
    without a copy of the rows."""

    def __init__(self, P, tol, rest=True):
        self.shape = P.shape
        self.top, self.c, self.rest = top_rows_of_probabilities(P, tol=tol, rest=rest)


def _binary_objective_block(z, top, right, weight, scale, bias):
    """Binary cross-entropy of the top confidence of ``softmax(z * scale + bias)``.

    Returns the weighted sum of the losses of the rows of ``z`` and two
    vectors over the columns, ``sum_i G_ik z_ik`` and ``sum_i G_ik``, where
    ``G = dloss / ds`` (``s`` the scaled logits) is ``p - [k = top]`` for a
    right row and ``p - q`` for a wrong one (``p`` the softmax of ``s``,
    ``q`` that of the other classes alone): bounded, with no ``1 / (1 - c)``.
    """
    rows = np.arange(len(top))
    s = z * scale + bias
    lse = logsumexp(s, axis=1, keepdims=True)
    p = np.exp(s - lse)
    log_c = s[rows, top] - lse[:, 0]
    s[rows, top] = -np.inf
    lse_others = logsumexp(s, axis=1, keepdims=True)
    q = np.exp(s - lse_others)  # 0 at the top class
    log_rest = lse_others[:, 0] - lse[:, 0]
    loss = -np.where(right, log_c, log_rest)
    p[rows, top] -= right
    p -= (1.0 - right)[:, None] * q
    p *= weight[:, None]
    return float(weight @ loss), (p * z).sum(axis=0), p.sum(axis=0)


def binary_objective(z, top, right, weight, scale, bias=0.0):
    """:func:`_binary_objective_block` over blocks of rows, as a weighted mean.

    ``weight`` must sum to 1. Returns ``(loss, sum G z, sum G)``.
    """
    n, n_classes = z.shape
    step = max(1, _BLOCK // n_classes)
    loss, gz, g = 0.0, np.zeros(n_classes), np.zeros(n_classes)
    for start in range(0, n, step):
        block = slice(start, start + step)
        part = _binary_objective_block(
            z[block], top[block], right[block], weight[block], scale, bias
        )
        loss += part[0]
        gz += part[1]
        g += part[2]
    return loss, gz, g


class _TopGaps:
    """The logits of the binary temperature objective, read once.

    For each row, ``gap`` is the second largest logit minus the largest
    (``<= 0``; the top class is the argmax) and ``d`` the logits minus the
    second largest, with 0 at the top class: the others' entries of ``d``
    are ``<= 0`` and one is 0, so that ``exp(beta * d)`` never overflows and
    its sum over the others, ``R``, is at least 1. Then, with
    ``L = beta * gap + log R`` (``log((1 - c) / c)`` of ``softmax(beta z)``),
    ``-log c = softplus(L)`` and ``-log(1 - c) = softplus(-L)``: one
    exponential pass per evaluation, no log-sum-exp of the whole row.
    """

    def __init__(self, z: np.ndarray, top: np.ndarray):
        n, n_classes = z.shape
        self.d = np.empty((n, n_classes))
        self.gap = np.empty(n)
        self.top = top
        self.step = max(1, _BLOCK // max(n_classes, 1))
        for block, flat in self._blocks():
            t = np.subtract(z[block], row_max(z[block])[:, None], dtype=np.float64)
            t.reshape(-1)[flat] = -np.inf
            gap = row_max(t)
            t -= gap[:, None]
            t.reshape(-1)[flat] = 0.0
            self.d[block], self.gap[block] = t, gap

    def _blocks(self):
        """``(rows, flat index of their top entries within the block)``."""
        n, n_classes = self.d.shape
        for start in range(0, n, self.step):
            block = slice(start, min(start + self.step, n))
            rows = np.arange(block.stop - block.start)
            yield block, self.top[block] + n_classes * rows

    def objective(self, beta: float, right: np.ndarray, weight: np.ndarray):
        """Weighted binary cross-entropy of the top confidence of
        ``softmax(beta z)``, and its derivative in ``beta``.

        For a right row the loss is ``softplus(L)``, for a wrong one
        ``softplus(-L)``; ``dL / dbeta = gap + sum_k q_k d_k`` (``q`` the
        softmax of the others alone), ``sigmoid(L) = 1 - c``.
        """
        loss, grad = 0.0, 0.0
        buffer = np.empty(min(self.step, len(self.gap)) * self.d.shape[1])
        for block, flat in self._blocks():
            d = self.d[block]
            e = np.multiply(d, beta, out=buffer[: d.size].reshape(d.shape))
            np.exp(e, out=e)
            e.reshape(-1)[flat] = 0.0
            total = row_sum(e)
            slope = self.gap[block] + np.einsum("ij,ij->i", e, d) / total
            L = beta * self.gap[block] + np.log(total)
            softplus = np.logaddexp(0.0, L)  # -log c
            wrong = 1.0 - right[block]
            w = weight[block]
            loss += float(w @ (softplus - wrong * L))
            grad += float(w @ ((np.exp(L - softplus) - wrong) * slope))
        return loss, grad


def fit_binary_temperature(z, top, right, weight, *, max_iter=100, progress=None):
    """Inverse temperature minimising the binary cross-entropy of the top
    confidence of ``softmax(beta * z)`` (the paper's TS with TvA).

    Solved by L-BFGS-B over ``log(beta s)`` (``s`` the logits' scale) in
    ``[-16, 16]``: the result does not depend on the logits' units. Each
    iteration advances ``progress`` (a :class:`Progress`) if given.
    Returns ``(beta, n_iter)``; warns when the optimum is at a bound.
    """
    scale = logit_scale(z)
    gaps = _TopGaps(z, top)
    state = {"n_iter": 0}

    def fun(theta):
        beta = math.exp(theta[0]) / scale
        loss, grad = gaps.objective(beta, right, weight)
        state["loss"], state["grad"] = loss, beta * grad
        return loss, np.array([beta * grad])

    def step(x):
        state["n_iter"] += 1
        if progress is not None:
            progress.step(
                f"TopVersusAll: iteration {state['n_iter']}: loss "
                f"{state['loss']:.6g}, largest gradient {abs(state['grad']):.3g}",
                loss=state["loss"],
            )

    start = min(max(math.log(scale), -_LOG_BETA_BOUND), _LOG_BETA_BOUND)
    result = minimize(
        fun,
        np.array([start]),
        jac=True,
        method="L-BFGS-B",
        bounds=[(-_LOG_BETA_BOUND, _LOG_BETA_BOUND)],
        callback=step,
        options={"maxiter": max_iter, "gtol": 1e-12, "ftol": 0.0},
    )
    theta = float(result.x[0])
    if abs(theta) >= _LOG_BETA_BOUND * (1 - 1e-9):
        warn(
            f"TopVersusAll: the binary cross-entropy of the top-label confidence "
            f"has no minimum for a temperature within exp(+-16) of the logits' "
            f"scale {scale:.4g}; the temperature was set to the bound "
            f"{scale / math.exp(theta):.4g}. The top-label confidences carry "
            "(almost) no information about which predictions are right.",
            ConvergenceWarning,
        )
    return math.exp(theta) / scale, int(result.nit)


def fit_binary_vector(z, top, right, weight, beta, reg, *, tol, max_iter, verbose):
    """Vector scaling ``s = z (1 + d) beta + b`` on the binary cross-entropy
    of the top confidence, plus ``reg (||d||^2 + ||b||^2)`` (a ridge toward
    the temperature scaling ``beta``), by L-BFGS-B from ``d = b = 0``.

    Returns ``(coef, intercept, result)``.
    """
    n_classes = z.shape[1]
    progress = Progress(verbose, total=max_iter, desc="TopVersusAll", unit="iter")
    state = {}

    def fun(x):
        d, b = x[:n_classes], x[n_classes:]
        loss, gz, g = binary_objective(z, top, right, weight, (1.0 + d) * beta, b)
        loss += reg * (d @ d + b @ b)
        state["loss"] = loss
        return loss, np.concatenate([gz * beta + 2 * reg * d, g + 2 * reg * b])

    def step(x):
        progress.step(f"loss {state['loss']:.6g}", loss=state["loss"])

    with progress:
        result = minimize(
            fun,
            np.zeros(2 * n_classes),
            jac=True,
            method="L-BFGS-B",
            callback=step,
            options={"maxiter": max_iter, "gtol": tol, "ftol": 0.0},
        )
    d, b = result.x[:n_classes], result.x[n_classes:]
    return (1.0 + d) * beta, b.copy(), result


class TopVersusAll(BaseCalibrator):
    """Top-versus-all calibration: one binary calibrator for the top label.

    The multiclass calibration problem is reduced to a single binary one
    (Le Coz et al., 2024): the confidence ``c`` of each calibration row (the
    softmax probability of its top class, the argmax of ``X``) against
    whether that top class is its label. ``calibrator`` is then fitted on
    that binary problem, with every row of every class, where a
    one-versus-all reduction would fit one map per class on few positives:

    * a binary calibrator (:class:`IsotonicCalibrator`,
      :class:`HistogramBinningCalibrator`, :class:`PlattCalibrator`,
      :class:`BetaCalibrator`, :class:`SplineCalibrator`, ..., or any
      scikit-learn classifier with ``predict_proba``) is fitted on the
      binary scores ``[log(1 - c), log c]`` (``input="logits"``, computed
      from the logits without rounding ``1 - c``) with labels "right"
      (1) / "wrong" (0), and maps ``c`` to its probability of "right";
      isotonic regression (centred or not) and histogram binning fit the
      paper's one map of ``c`` (isotonic regression scikit-learn's, ties
      merged as there; histogram binning's bins ``[l, u)``), which gives
      the calibrated confidence, and store its mirror image as their map
      of ``1 - c`` (the map a second fit of ``1 - c`` gives in exact
      arithmetic, but for scores on a bin edge);
    * a scaling calibrator (:class:`TemperatureScaling`,
      :class:`VectorScaling`) is fitted on the whole logits (shifted to a
      row maximum of 0, so that ``X`` and its log-probabilities are one
      input), as in the paper: its parameters minimise the binary
      cross-entropy of the top confidence of its own scaled softmax (for
      vector scaling plus its ridge toward the temperature,
      ``reg_lambda``), and the calibrated confidence is that softmax's
      probability of the top class.

    The calibrated confidence ``c~`` replaces the top class's probability
    and the other classes share ``1 - c~`` (the paper calibrates the
    confidence only): by default in the proportions of a temperature
    scaling (the scaling calibrator's own softmax, or for a binary
    calibrator ``softmax(z / T)`` with ``T`` fitted by temperature scaling
    on the same rows), or in their original proportions with
    ``redistribution="proportional"``; computed from the logits, exact
    where the probabilities underflow. The argmax of ``X`` keeps strictly
    the largest calibrated probability (but where ``X`` ties it with
    another class), so that :meth:`predict` and ``np.argmax`` of
    :meth:`predict_proba` both return it: where ``c~`` is below what the
    largest other class's share would then be, ``c~`` is raised to that
    share and then to the next float above it (one unit in the last place:
    a tie broken by the least change; see
    :func:`~skcal.utils._proba.replace_top_label`).

    Parameters
    ----------
    calibrator : estimator, default=None
        The binary or scaling calibrator, cloned before fitting. None is
        :class:`TemperatureScaling` (see Notes).
    input : {"logits", "proba"}, default="logits"
        What ``X`` holds; probabilities become ``log(max(p, 2.2e-308))``.
    classes : array-like of shape (n_classes,), default=None
        The label of each column of ``X``.
    redistribution : {"temperature", "proportional"}, default="temperature"
        How the other classes share ``1 - c~``: ``"temperature"`` in the
        proportions of temperature scaling (of the scaling calibrator's map
        when it is one); ``"proportional"`` in their original proportions.
    verbose : int, default=0
        0: silent; 1: a progress bar (stderr) over the iterations of the
        binary-objective fit of a scaling calibrator (at 50,000 rows of
        1,000 classes, seconds per iteration); 2: also a line per iteration.
        A scaling calibrator's own ``verbose`` also shows it.

    Attributes
    ----------
    calibrator_ : estimator or None
        The fitted clone of ``calibrator``: on the binary problem (2
        columns), or for a scaling calibrator on the ``n_classes`` columns,
        its parameters fitted on the binary objective (its ``classes_`` are
        those of this estimator). None when the calibration rows held no
        binary problem (see Notes).
    temperature_ : float or None
        Temperature of the other classes' shares for a binary calibrator
        (1.0 with ``redistribution="proportional"``); None for a scaling
        calibrator, whose own map gives the shares.
    scaling_ : bool
        Whether ``calibrator_`` was fitted as a scaling calibrator.
    classes_ : ndarray of shape (n_classes,)
        Label of each column.
    n_features_in_ : int
        Number of columns of ``X``.

    Notes
    -----
    The default calibrator is temperature scaling, fitted on the binary
    objective (the paper's TS with TvA): one parameter, so it needs no
    regularisation and cannot over-fit a small calibration set; it keeps
    the classes' ranking in every row and the ranking of the confidences
    across rows, and the paper reports it improves the top-label ECE of
    temperature scaling on every ImageNet, CIFAR and text model it tried.
    Histogram binning with TvA reached lower ECEs there, but its piecewise
    constant confidences tie many rows (lower AUROC of the confidence) and
    need larger calibration sets.

    Departures from the paper's code: the top class is the argmax of ``X``
    and stays the prediction (the paper's vector scaling recomputes it from
    the scaled logits, which can change the prediction); the scaling
    calibrators are fitted by full-batch L-BFGS-B to a tolerance (the paper
    uses 200 epochs of Adam), vector scaling in skcal's parametrisation and
    ridge (:class:`VectorScaling`), shrunk toward the binary-objective
    temperature. The ``device`` of a scaling calibrator is not used: the
    binary objective is computed with numpy, by blocks of rows. Calibration
    rows whose top classes are all right (or all wrong) hold no binary
    problem: the classifier's probabilities are then kept (``calibrator_``
    is None), with a ``ConvergenceWarning``, as temperature scaling keeps
    ``T = 1`` on separable scores.

    References
    ----------
    A. Le Coz, S. Herbin, F. Adjed. "Confidence Calibration of Classifiers
    with Many Classes". NeurIPS 2024.

    Examples
    --------
    >>> import numpy as np
    >>> from skcal import IsotonicCalibrator, TopVersusAll
    >>> from skcal.utils._testing import make_miscalibrated_logits
    >>> logits, y = make_miscalibrated_logits(2000, 10, random_state=0)
    >>> tva = TopVersusAll().fit(logits, y)
    >>> 1.0 < tva.calibrator_.temperature_ < 4.0
    True
    >>> iso = TopVersusAll(IsotonicCalibrator()).fit(logits, y)
    >>> proba = iso.predict_proba(logits)
    >>> proba.shape, bool(np.allclose(proba.sum(axis=1), 1.0))
    ((2000, 10), True)
    >>> top = logits.argmax(axis=1)  # keeps the largest probability
    >>> bool((proba[np.arange(2000), top] == proba.max(axis=1)).all())
    True
    """

    _needs_torch = True  # its fit runs torch kernels
    _shift_invariant = True
    _keeps_argmax = "proba"
    _maps_probabilities = True
    _fits_probabilities = True
    # the others share 1 - c in proportion to their probabilities as given
    # (a 0 stays 0); the binary calibrator floors what it reads itself
    _floors_probabilities = False

    _parameter_constraints: dict = {
        **BaseCalibrator._parameter_constraints,
        "calibrator": [HasMethods(["fit", "predict_proba"]), None],
        "redistribution": [StrOptions({"temperature", "proportional"})],
        "verbose": ["verbose"],
    }

    def __init__(
        self,
        calibrator=None,
        *,
        input="logits",
        classes=None,
        redistribution="temperature",
        verbose=0,
    ):
        self.calibrator = calibrator
        self.input = input
        self.classes = classes
        self.redistribution = redistribution
        self.verbose = verbose

    # ------------------------------------------------------------- helpers
    def _inner(self):
        """An unfitted clone of ``calibrator`` (the default if None)."""
        if self.calibrator is None:
            return TemperatureScaling()
        if isinstance(self.calibrator, BaseLocalCalibrator):
            raise TypeError(
                f"TopVersusAll calibrates scores, but calibrator is the local "
                f"calibrator {type(self.calibrator).__name__}, fitted on "
                "embeddings. Pass a score calibrator such as "
                "IsotonicCalibrator() or TemperatureScaling()."
            )
        return clone(self.calibrator)

    @staticmethod
    def _mirrored(inner) -> bool:
        """Whether ``inner`` fits the binary problem by one map of the
        confidence, mirrored for its complement (isotonic regression,
        histogram binning): the calibrated confidence is that map's value."""
        return isinstance(inner, BaseCalibrator) and hasattr(inner, "_fit_mirrored")

    @staticmethod
    def _is_scaling(inner) -> bool:
        return isinstance(inner, (TemperatureScaling, VectorScaling))

    def n_free_parameters(self, n_classes, n_features=None):
        """The inner calibrator's count: on ``n_classes`` columns for a
        scaling calibrator, else on the 2 columns of the binary problem
        (plus the temperature of the others' shares by default)."""
        inner = self._inner()
        if self._is_scaling(inner):
            return inner.n_free_parameters(n_classes)
        count = inner.n_free_parameters(2) if hasattr(inner, "n_free_parameters") else 2
        return count + (self.redistribution == "temperature")

    # ----------------------------------------------------------------- fit
    def _fit(self, logits, y_index, sample_weight):
        self._fit_top(
            np.argmax(logits, axis=1),
            y_index,
            sample_weight,
            binary=lambda top: _BinaryProblem(binary_log_proba(logits, top)),
            logits=lambda: logits,
        )

    def _check_fit_probabilities(self, X, tol):
        """A binary calibrator with proportional redistribution reads only
        each row's top entry and the sum of the others (or the top entry
        alone, for one map mirrored): those, without a copy of ``X``;
        otherwise the copy."""
        inner = self.calibrator
        if (
            self.redistribution != "proportional"
            or inner is None
            or self._is_scaling(inner)
        ):
            return super()._check_fit_probabilities(X, tol)
        return _TopRows(X, tol, rest=not self._mirrored(inner))

    def _fit_probabilities(self, P, y_index, sample_weight):
        """:meth:`_fit` of validated probabilities ``P`` (our copy, or the
        :class:`_TopRows` of :meth:`_check_fit_probabilities`): the binary
        scores from ``P`` itself (as in the predictions), its logs taken in
        place only for a scaling calibrator or the others' temperature."""
        if isinstance(P, _TopRows):
            binary = _BinaryProblem(None, P.c, P.rest)
            self._fit_top(
                P.top, y_index, sample_weight, binary=lambda top: binary, logits=None
            )
            return
        self._fit_top(
            np.argmax(P, axis=1),
            y_index,
            sample_weight,
            binary=lambda top: _BinaryProblem.of_probabilities(
                P, top, rest=not self._mirrored(self.calibrator)
            ),
            logits=lambda: log_probabilities_inplace(P),
        )

    def _fit_top(self, top, y_index, sample_weight, *, binary, logits):
        """Fit on the top classes ``top``; ``binary(top)`` gives the binary
        problem (a :class:`_BinaryProblem`), ``logits()`` the logits (called
        once, after ``binary``)."""
        right = (top == y_index).astype(np.float64)
        positive = sample_weight > 0
        n_right = int(right[positive].sum())
        inner = self._inner()
        if n_right in (0, int(positive.sum())):
            warn(
                f"TopVersusAll fits a binary calibrator of whether the top class "
                f"(the argmax of X) is the label, but the top class of every "
                f"calibration row with positive weight is "
                f"{'right' if n_right else 'wrong'}: there is no binary problem "
                "to fit, and the classifier's own probabilities were kept "
                "(calibrator_ is None). A calibration set with both right and "
                "wrong predictions lets the confidence be calibrated.",
                ConvergenceWarning,
            )
            self.calibrator_, self.scaling_, self.temperature_ = None, False, 1.0
            return
        self.scaling_ = self._is_scaling(inner)
        if self.scaling_:
            inner.set_params(
                **inner._wrapper_params(classes=self.classes_, input="logits")
            )
            self._fit_scaling(inner, logits(), top, right, sample_weight)
            self.temperature_ = None
        else:
            self._fit_binary(inner, binary(top), right, sample_weight)
            self.temperature_ = 1.0
            if self.redistribution == "temperature":
                z = np.asarray(logits(), dtype=np.float64)
                beta = fit_inverse_temperature(z, y_index, sample_weight, "cpu").x
                self.temperature_ = float(1.0 / beta)
        self.calibrator_ = inner

    def _fit_binary(self, inner, binary, right, sample_weight):
        """Fit ``inner`` on the :class:`_BinaryProblem` ``binary``.

        A skcal calibrator is fitted by its private ``_fit`` on the binary
        scores as its own validation would give them (finite by
        construction, shifted if it is shift-invariant), or on their
        probabilities if it reads only those (isotonic regression and
        histogram binning on the confidence alone: the paper's one map, see
        their ``_fit_mirrored``), its parameters validated; any other
        estimator by its public ``fit`` on the scores.
        """
        labels = right.astype(np.int64)
        if isinstance(inner, BaseCalibrator):
            inner.set_params(
                **inner._wrapper_params(classes=np.arange(2), input="logits")
            )
            inner._validate_params()
            inner.classes_, inner.n_features_in_ = np.arange(2), 2
            if self._mirrored(inner):
                inner._fit_mirrored(binary.confidence(inner), right, sample_weight)
            elif inner._fits_probabilities:  # it reads their softmax only
                inner._fit_probabilities(binary.proba(inner), labels, sample_weight)
            else:
                inner._fit(_binary_input(inner, binary.scores()), labels, sample_weight)
        else:
            inner.fit(binary.scores(), labels, sample_weight=sample_weight)
        self._right_column_ = int(np.flatnonzero(np.asarray(inner.classes_) == 1)[0])

    def _fit_scaling(self, inner, logits, top, right, sample_weight):
        """Fit ``inner``'s parameters on the binary objective, set its state."""
        weight = sample_weight / sample_weight.sum()
        params = inner.get_params()
        verbose = max(int(self.verbose or 0), int(params.get("verbose") or 0))
        max_iter = max(params["max_iter"], 100)
        progress = Progress(
            verbose,
            total=max_iter,
            desc="TopVersusAll: binary temperature",
            unit="iter",
        )
        with progress:
            beta, n_iter = fit_binary_temperature(
                logits, top, right, weight, max_iter=max_iter, progress=progress
            )
            progress.end()
        if isinstance(inner, VectorScaling):
            logits = _shifted(logits)
            n_samples = effective_sample_size(sample_weight)
            reg = (
                inner._AUTO_RIDGE * logits.shape[1] / n_samples
                if params["reg_lambda"] == "auto"
                else float(params["reg_lambda"])
            )
            coef, intercept, result = fit_binary_vector(
                logits,
                top,
                right,
                weight,
                beta,
                reg,
                tol=params["tol"],
                max_iter=params["max_iter"],
                verbose=verbose,
            )
            if not result.success:
                warn(
                    f"TopVersusAll: vector scaling did not converge in "
                    f"max_iter={params['max_iter']} iterations ({result.message}). "
                    "Increase the calibrator's max_iter or its reg_lambda.",
                    ConvergenceWarning,
                )
            inner.coef_, inner.intercept_ = coef, intercept
            inner.temperature_init_, inner.reg_lambda_ = 1.0 / beta, reg
            n_iter = int(result.nit)
        else:
            inner.temperature_ = 1.0 / beta
        inner.n_iter_ = n_iter
        inner.classes_ = self.classes_
        inner.n_features_in_ = logits.shape[1]

    # ------------------------------------------------------------- predict
    def _confidence_and_shares(self, logits, top, owned=False, confidence=None):
        """The calibrated confidence ``c`` of the argmax ``top`` of
        ``logits``, its complement where known more accurately than ``1 -
        c`` (the others' total of a softmax, which ``1 - c`` rounds to 0
        for near-certain rows; None for a binary calibrator) and the logits
        whose softmax over the other classes gives their shares
        (``logits`` themselves, divided in place if ``owned``). A binary
        calibrator's ``confidence``, if given, is not computed again."""
        logits = np.asarray(logits, dtype=np.float64)
        if self.calibrator_ is None:  # no binary problem: the identity
            log_c, log_rest = _top_log_probabilities(logits, top)
            return np.exp(log_c), np.exp(log_rest), logits
        if self.scaling_:
            scaled = self.calibrator_._calibrated_logits(_shifted(logits))
            log_c, log_rest = _top_log_probabilities(scaled, top)
            shares = scaled if self.redistribution == "temperature" else logits
            return np.exp(log_c), np.exp(log_rest), shares
        if confidence is None:
            confidence = self._binary_confidence(
                _BinaryProblem(binary_log_proba(logits, top))
            )
        if self.temperature_ != 1.0:
            if owned:
                logits /= self.temperature_
            else:
                logits = logits / self.temperature_
        return confidence, None, logits

    def _binary_confidence(self, binary):
        """The binary calibrator's probability of "right" for the
        :class:`_BinaryProblem` ``binary`` (by a skcal calibrator's private
        path: it is valid by construction)."""
        inner = self.calibrator_
        if self._mirrored(inner):  # the paper's one map of the confidence
            return np.clip(inner._map_column(1, binary.confidence(inner)), 0.0, 1.0)
        if isinstance(inner, BaseCalibrator):
            if inner._maps_probabilities:  # it reads their softmax only
                proba = inner._calibrated_proba_of_probabilities(
                    binary.proba(inner, predict=True), binary
                )
            else:
                proba = inner._calibrated_proba(
                    _binary_input(inner, binary.scores(), predict=True)
                )
        else:
            proba = inner.predict_proba(binary.scores())
        return np.clip(np.asarray(proba)[:, self._right_column_], 0.0, 1.0)

    def _calibrated_proba_of_probabilities(self, P, logits):
        """:meth:`predict_proba` of validated probabilities ``P`` (our copy).

        Where the other classes keep their proportions (a binary calibrator
        with ``redistribution="proportional"``, or no binary problem), ``P``
        is mapped directly: the binary scores from its top entries and the
        sums of the others, the others rescaled in place. Otherwise the
        logits ``log(P)`` are taken in place and mapped as logits.
        """
        if self._temperature_only():  # softmax(log(P) / T), in P itself
            return self._temperature_proba(log_probabilities_inplace(P), logits)
        if self.scaling_:
            return self._proba(log_probabilities_inplace(P), owned=True)
        top = np.argmax(P, axis=1)
        if self.temperature_ != 1.0:  # the confidence of P, the shares of logs
            confidence = None
            if self._mirrored(self.calibrator_):  # its fit read P's top entries
                binary = _BinaryProblem.of_probabilities(P, top, rest=False)
                confidence = self._binary_confidence(binary)
            logits = log_probabilities_inplace(P)
            return self._proba(logits, owned=True, top=top, confidence=confidence)
        complement = None
        if self.calibrator_ is None:
            c, rest = top_and_rest(P, top)
            confidence, complement = c / (c + rest), rest / (c + rest)
        else:
            binary = _BinaryProblem.of_probabilities(
                P, top, rest=not self._mirrored(self.calibrator_)
            )
            confidence = self._binary_confidence(binary)
        return replace_top_label_inplace(
            P, logits, top, confidence, floor=FLOOR_BEFORE_LOG, keep_argmax=True,
            complement=complement,
        )  # fmt: skip

    def _temperature_only(self) -> bool:
        """Whether the model is temperature scaling with its own shares."""
        return (
            self.scaling_
            and self.redistribution == "temperature"
            and type(self.calibrator_) is TemperatureScaling
        )

    def _temperature_proba(self, logits, rows_of=None):
        """``softmax(z / T)``, the calibrated probabilities of temperature
        scaling with its own shares, in one softmax.

        With ``rows_of`` (``rows_of[rows]`` gives the logits of those rows,
        as :class:`~skcal.base._LogRows` does), ``logits`` is our own array,
        divided and turned into the probabilities in place, and the rows of
        the general path are read from ``rows_of``.

        The softmax is exact to a few units in the last place wherever
        every share is a normal number, near certainty too (the others'
        shares are their own exponentials over the row sum, never
        ``1 - c``). Rows with a share below ``1e-290`` (logit gaps beyond
        about 667 T) take the general path, whose ``c`` is ``exp(log c)``
        and whose others share their total floored at 1e-300, so that
        :meth:`predict_proba` stays the exponential of
        :meth:`predict_log_proba` (finite logs). Only those rows need their
        top class (the argmax of ``z``): in the softmax, the top class's
        share is ``exp(0) / sum``, which no other share (of an ``exp`` of a
        negative number, at most 1) exceeds. Without ``rows_of``,
        ``logits`` is not modified.
        """
        temperature = self.calibrator_.temperature_
        if rows_of is None:
            P = softmax_inplace(np.divide(logits, temperature, dtype=np.float64))
            rows_of = logits
        else:
            P = softmax_inplace(np.divide(logits, temperature, out=logits))
        if P.min() < SUM_FLOOR:
            rows = np.flatnonzero(row_min(P) < SUM_FLOOR)
            given = rows_of[rows]
            top = np.argmax(given, axis=1)
            z = np.divide(given, temperature, dtype=np.float64)
            log_c, log_rest = _top_log_probabilities(z, top)
            P[rows] = _replace_top(z, top, np.exp(log_c), np.exp(log_rest))
        return P

    def _proba(self, logits, owned, top=None, confidence=None):
        if logits.shape[0] == 0:
            return np.empty(logits.shape)
        if self._temperature_only():
            return self._temperature_proba(logits)
        if top is None:
            top = np.argmax(logits, axis=1)
        confidence, complement, shares = self._confidence_and_shares(
            logits, top, owned, confidence
        )
        return _replace_top(shares, top, confidence, complement)

    def _calibrated_proba(self, logits):
        return self._proba(logits, owned=False)

    def _calibrated_proba_inplace(self, logits):
        return self._proba(logits, owned=True)

    def _calibrated_logits(self, logits):
        if logits.shape[0] == 0:
            return np.empty(logits.shape)
        top = np.argmax(logits, axis=1)
        confidence, complement, shares = self._confidence_and_shares(logits, top)
        out = replace_top_label(
            shares, top, confidence, log=True, keep_argmax=True, complement=complement
        )
        return _top_first(out, top)
