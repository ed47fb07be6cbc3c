"""Temperature scaling and proper/top-label scores of TopKScores.

Everything follows the rest model of :class:`~skcal.llm.TopKScores`: a row
lists ``k_i`` classes with log-probabilities ``v_ij`` and spreads its
leftover mass equally over its ``m_i = n_classes - k_i`` unlisted classes,
each with log-probability ``u_i = rest_logmass_i - log(m_i)``. That is a
dense distribution whose logits are ``v_ij`` (listed) and ``u_i`` (every
unlisted class), so temperature scaling ``softmax(z / T)`` of it is again a
top-k: listed ``v / T - L``, leftover ``log(m) + u / T - L`` with
``L = logaddexp(logsumexp(v / T), log(m) + u / T)``. Only ``n x k`` arrays
are built, in row chunks.
"""

from __future__ import annotations

import numpy as np

from ..utils._validation import check_sample_weight
from ._topk import PAD, TopKScores, check_class_indices

#: Rows handled at once by the chunked loops (k floats each).
_CHUNK_ROWS = 1 << 16


def check_topk_targets(top: TopKScores, y, sample_weight, *, allow_zero=False):
    """``y`` as int64 class indices of ``top``'s rows, and float64 weights."""
    y = np.asarray(y)
    if y.ndim == 2 and y.shape[1] == 1:
        y = y[:, 0]
    y = check_class_indices(y, len(top), top.n_classes)
    w = check_sample_weight(sample_weight, len(top), allow_zero=allow_zero)
    return y.astype(np.int64, copy=False), w


def _parts(top: TopKScores):
    """``(v, u, log_m)``: listed log-probabilities (padding ``-inf``), each
    row's unlisted share ``u`` and ``log(m)`` (``-inf`` where none is
    unlisted or the leftover mass is 0)."""
    m = top.n_classes - top.n_listed
    with np.errstate(divide="ignore", invalid="ignore"):
        log_m = np.log(m.astype(np.float64))
        u = np.where(m > 0, top.leftover_logmass() - log_m, -np.inf)
    log_m = np.where(np.isfinite(u), log_m, -np.inf)
    return top.values, u, log_m


def topk_logit_scale(top: TopKScores) -> float:
    """:func:`~skcal._torch.kernels.logit_scale` of the rest model's dense
    logits: the median range of a row (the unlisted share counts)."""
    v, u, _ = _parts(top)
    high = np.maximum(v.max(axis=1), u)
    lowest_listed = np.where(np.isfinite(v), v, np.inf).min(axis=1)
    low = np.where(np.isfinite(u), np.minimum(lowest_listed, u), lowest_listed)
    ranges = high - low
    positive = ranges[np.isfinite(ranges) & (ranges > 0)]
    if positive.size == 0:
        return 1.0
    return float(max(np.median(positive), positive.max() * 1e-280))


class TopKTemperatureObjective:
    """Weighted mean NLL of temperature-scaled top-k scores, as a function of
    ``beta`` (``1 / T`` times ``scale``), like the dense
    :class:`~skcal._torch.kernels.TemperatureObjective`.

    Rows are shifted to a maximum of 0 and divided by ``scale`` once; a
    label outside a row's top-k has the logit of the unlisted share.
    """

    def __init__(self, top: TopKScores, y_index, sample_weight, scale: float):
        v, u, log_m = _parts(top)
        shift = np.maximum(v.max(axis=1), u)
        self.z = (v - shift[:, None]) / scale  # padding stays -inf
        self.zu = np.where(np.isfinite(u), (u - shift) / scale, 0.0)
        self.log_m = log_m
        label = top.label_logproba(y_index)
        zero = np.isneginf(label) & (sample_weight > 0)
        if zero.any():
            row = int(np.nonzero(zero)[0][0])
            raise ValueError(
                f"Row {row}'s label {y_index[row]} has probability 0: it is not "
                f"listed and the row leaves no mass to its unlisted classes, so "
                f"the likelihood is 0 at every temperature. Give the rows' "
                f"rest_logmass, or drop such rows."
            )
        # a zero-weight row of probability 0 does not count
        self.z_true = np.where(np.isneginf(label), 0.0, label - shift) / scale
        self.weights = sample_weight / sample_weight.sum()

    def derivatives(self, beta: float) -> tuple[float, float]:
        """First and second derivative of the NLL at ``beta``: the weighted
        means of ``E_p[z] - z_y`` and ``Var_p[z]`` over the dense classes."""
        grad = hess = 0.0
        for start in range(0, len(self.z_true), _CHUNK_ROWS):
            rows = slice(start, start + _CHUNK_ROWS)
            z, zu = self.z[rows], self.zu[rows]
            e = np.exp(beta * z)  # padding: 0
            zz = np.where(e > 0, z, 0.0)
            eu = np.exp(beta * zu + self.log_m[rows])  # m * exp(beta zu), or 0
            total = e.sum(axis=1) + eu
            m1 = (np.einsum("ij,ij->i", e, zz) + eu * zu) / total
            m2 = (np.einsum("ij,ij,ij->i", e, zz, zz) + eu * zu * zu) / total
            w = self.weights[rows]
            grad += float(w @ (m1 - self.z_true[rows]))
            hess += float(w @ np.maximum(m2 - m1 * m1, 0.0))
        return grad, hess


def scale_topk(top: TopKScores, beta) -> TopKScores:
    """The top-k of ``softmax(beta * z)`` of the rest model's logits ``z``:
    same indices, listed ``beta v - L``, leftover ``log(m) + beta u - L``.
    ``beta``: a float, or one per row (shape ``(n_samples,)``)."""
    values = np.empty_like(top.values)
    rest = np.empty(len(top))
    v_all, u_all, log_m_all = _parts(top)
    b_all = np.broadcast_to(np.asarray(beta, dtype=np.float64), (len(top),))
    for start in range(0, len(top), _CHUNK_ROWS):
        rows = slice(start, start + _CHUNK_ROWS)
        b = b_all[rows]
        zl = b[:, None] * v_all[rows]
        zr = log_m_all[rows] + b * u_all[rows]  # log of the rest's mass
        high = np.maximum(zl.max(axis=1, initial=-np.inf), zr)
        lse = high + np.log(np.exp(zl - high[:, None]).sum(axis=1) + np.exp(zr - high))
        values[rows] = zl - lse[:, None]
        rest[rows] = zr - lse
    return TopKScores(top.indices, values, top.n_classes, rest, tokens=top.tokens)


def _first_unlisted(indices: np.ndarray) -> np.ndarray:
    """The smallest class index missing from each row of ``indices``."""
    ordered = np.sort(np.where(indices == PAD, np.iinfo(np.int64).max, indices), axis=1)
    gap = ordered != np.arange(indices.shape[1])
    first = np.argmax(gap, axis=1)
    return np.where(gap.any(axis=1), first, indices.shape[1])


def topk_top_label(top: TopKScores, y_index: np.ndarray):
    """Confidence and correctness of the argmax of the rest model.

    The confidence is the largest probability of a row: its top listed one,
    or the unlisted share where that is larger (never for a true top-k);
    the prediction is then the smallest unlisted index, as a dense argmax.
    A label outside the top-k is counted as a mistake of the listed top.
    """
    v, u, _ = _parts(top)
    j = np.argmax(v, axis=1)
    best = v[np.arange(len(top)), j]
    pred = top.indices[np.arange(len(top)), j]
    rest_wins = u > best
    correct = pred == y_index
    if rest_wins.any():
        rows = np.nonzero(rest_wins)[0]
        correct[rows] = _first_unlisted(top.indices[rows]) == y_index[rows]
    return np.exp(np.maximum(best, u)), correct.astype(np.float64)


def topk_brier(top: TopKScores, y_index: np.ndarray) -> np.ndarray:
    """Each row's ``sum_c (p_c - [y = c])^2``: listed ``p^2`` plus
    ``rest^2 / m`` for the ``m`` unlisted classes."""
    v, u, log_m = _parts(top)
    square = np.exp(2.0 * v).sum(axis=1) + np.exp(2.0 * u + log_m)
    return square - 2.0 * np.exp(top.label_logproba(y_index)) + 1.0


def topk_nll(top: TopKScores, y_index: np.ndarray, eps: float) -> np.ndarray:
    """Each row's ``-log(max(p_y, eps))``, ``p_y`` listed or the unlisted share."""
    return -np.maximum(top.label_logproba(y_index), np.log(eps))


def expanded(top: TopKScores):
    """The rest model as weighted columns: ``(z, mult)`` of shape
    ``(n, k + 1)``, the listed log-probabilities then the unlisted share
    ``u``, each with its number of classes (1 listed, 0 padding, ``m`` for
    ``u``; 0 where ``u`` is ``-inf``); entries of weight 0 hold 0.

    A sum over the dense classes of ``f(z_c)`` is ``sum(mult * f(z))``; the
    dense probability of each class of column ``j`` is
    ``exp(z_j) / sum(mult * exp(z))``.
    """
    v, u, log_m = _parts(top)
    z = np.concatenate([v, u[:, None]], axis=1)
    mult = np.concatenate(
        [np.isfinite(v).astype(np.float64), np.exp(log_m)[:, None]], axis=1
    )
    z[mult == 0] = 0.0
    return z, mult


def topk_gaps(top: TopKScores) -> np.ndarray:
    """Each row's ``z_(1) - z_(2)`` of the rest model's dense logits: the
    two largest of its listed values and its unlisted share ``u``, ``u``
    counted once per unlisted class (so twice when two or more are
    unlisted)."""
    v, u, _ = _parts(top)
    m = top.n_classes - top.n_listed
    u1 = np.where(m >= 1, u, -np.inf)
    u2 = np.where(m >= 2, u, -np.inf)
    both = np.concatenate([v, u1[:, None], u2[:, None]], axis=1)
    two = -np.partition(-both, 1, axis=1)[:, :2]
    return two[:, 0] - two[:, 1]


def top_listed(top: TopKScores):
    """``(j, index)``: the column of each row's largest listed value and its
    class index (the rest model's argmax, unless the unlisted share is
    larger: refused with a ValueError naming the row)."""
    v, u, _ = _parts(top)
    j = np.argmax(v, axis=1)
    rows = np.arange(len(top))
    above = u > v[rows, j]
    if above.any():
        row = int(np.nonzero(above)[0][0])
        raise ValueError(
            f"Row {row}'s unlisted classes each have a larger probability than "
            f"its top listed class, so its top label is not listed; a top-k "
            f"must list each row's most probable class."
        )
    return j, top.indices[rows, j]
