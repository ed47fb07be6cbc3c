"""The top-versus-all objective of scaling calibrators (Le Coz, Herbin and
Adjed, NeurIPS 2024): the binary cross-entropy of the top-label confidence
of a scaled softmax, and its minimisers.

What the top-label protocol of :class:`TemperatureScaling` and
:class:`VectorScaling` (their public ``fit_top_label``) fits, and so what
:class:`TopVersusAll` with a scaling calibrator fits.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.optimize import minimize
from scipy.special import logsumexp

from .._torch._progress import Progress
from .._torch.kernels import logit_scale
from .._torch.kernels._softmax import row_max, row_sum
from ..exceptions import ConvergenceWarning
from ..llm._topk import TopKScores
from ..llm._topk_ops import expanded, topk_logit_scale
from ..utils._validation import check_finite, check_sample_weight
from ..utils._warnings import warn

__all__ = [
    "binary_objective",
    "check_top_label_problem",
    "fit_binary_temperature",
    "fit_binary_vector",
    "top_label_classes",
    "top_label_temperature",
]

#: Entries per block of rows of the binary objective: its temporaries stay
#: small whatever the number of classes.
BLOCK = 1 << 18
#: The inverse temperature times the logits' scale is searched in
#: ``[exp(-16), exp(16)]``, as by :class:`TemperatureScaling`.
_LOG_BETA_BOUND = 16.0


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
    step = max(1, BLOCK // n_classes)
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

    #: per-class weights of the columns (a TopKScores' expanded columns:
    #: the unlisted share counts ``m`` times), or None (one class each)
    mult = None

    @classmethod
    def of_topk(cls, top_k, j: np.ndarray):
        """The objective of a :class:`~skcal.llm.TopKScores`' rest model,
        its top label the listed column ``j``: the same sums, over its
        expanded columns weighted by their numbers of classes."""
        z, mult = expanded(top_k)
        z = np.where(mult > 0, z, -np.inf)
        gaps = cls(z, j)
        gaps.d[mult == 0] = 0.0
        gaps.mult = mult
        return gaps

    def __init__(self, z: np.ndarray, top: np.ndarray):
        n, n_classes = z.shape
        self.d = np.empty((n, n_classes))
        self.gap = np.empty(n)
        self.top = top
        self.step = max(1, BLOCK // max(n_classes, 1))
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
            if self.mult is not None:
                e *= self.mult[block]
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
    if isinstance(z, TopKScores):  # ``top``: each row's listed column
        scale, gaps = topk_logit_scale(z), _TopGaps.of_topk(z, top)
    else:
        scale, gaps = logit_scale(z), _TopGaps(z, top)
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


def check_top_label_problem(logits, top, correct, sample_weight):
    """The declared input of a ``fit_top_label``, validated.

    ``logits`` (n_samples, n_classes): finite float64 logits, of at least
    two classes; ``top``: each row's top class (an integer column index);
    ``correct``: 1 where the top class is the label, 0 where it is not;
    ``sample_weight``: non-negative weights, ones if None. Returns them as
    float64 / intp arrays (the caller's arrays themselves where they are
    already of that type: never modified).
    """
    z = np.asarray(logits, dtype=np.float64)
    if z.ndim != 2 or z.shape[1] < 2 or z.shape[0] == 0:
        raise ValueError(
            "fit_top_label expects logits of shape (n_samples, n_classes) with "
            f"n_samples >= 1 and n_classes >= 2, but got shape {z.shape}. Pass "
            "the classifier's logits (or log-probabilities), one column per class."
        )
    check_finite(z, "logits")
    n, n_classes = z.shape
    top = np.asarray(top)
    if top.shape != (n,) or top.dtype.kind not in "iu":
        raise ValueError(
            f"fit_top_label expects top as {n} integer column indices, one per "
            f"row of logits, but got shape {top.shape} of dtype {top.dtype}. Pass "
            "np.argmax(logits, axis=1)."
        )
    if n and (top.min() < 0 or top.max() >= n_classes):
        raise ValueError(
            f"fit_top_label expects top in [0, {n_classes}), the columns of "
            f"logits, but got values in [{top.min()}, {top.max()}]."
        )
    right = np.asarray(correct, dtype=np.float64)
    if right.shape != (n,) or not np.isin(right, (0.0, 1.0)).all():
        raise ValueError(
            f"fit_top_label expects correct as {n} values in {{0, 1}} (1 where the "
            "top class is the label), one per row of logits; got "
            f"shape {right.shape}. Pass (top == y_index).astype(float)."
        )
    return (
        z,
        top.astype(np.intp, copy=False),
        right,
        check_sample_weight(sample_weight, n),
    )


def top_label_temperature(z, top, right, weight, *, max_iter, verbose):
    """:func:`fit_binary_temperature` with its progress bar (``verbose``):
    ``(beta, n_iter)``, ``weight`` summing to 1."""
    progress = Progress(
        verbose, total=max_iter, desc="TopVersusAll: binary temperature", unit="iter"
    )
    with progress:
        beta, n_iter = fit_binary_temperature(
            z, top, right, weight, max_iter=max_iter, progress=progress
        )
        progress.end()
    return beta, n_iter


def top_label_classes(classes, n_classes: int) -> np.ndarray:
    """The ``classes_`` of a scaling calibrator fitted by ``fit_top_label``:
    its ``classes`` parameter, or the column indices."""
    return np.arange(n_classes) if classes is None else np.asarray(classes)
