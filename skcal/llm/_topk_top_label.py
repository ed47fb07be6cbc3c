"""The top-versus-all problem of TopKScores (top label against the rest).

A row's top label is its largest listed class (the rest model's argmax:
:func:`~skcal.llm._topk_ops.top_listed`), whose probability ``c`` is listed
exactly; the others are the other listed classes and the unlisted share
``u`` on each of the ``m`` unlisted classes. A calibrated confidence ``c~``
replaces ``c`` and the others share ``1 - c~`` in the proportions of a
"shares" distribution (the original or a temperature-scaled rest model),
the leftover mass included: it is rescaled with the listed others by the
same factor, as the dense map rescales each unlisted class.
"""

from __future__ import annotations

import numpy as np
from scipy.special import logsumexp

from ..utils._constants import FLOOR_BEFORE_LOG
from ._topk import TopKScores
from ._topk_ops import expanded

#: ``log`` of the smallest positive float64, the floor of ``log(1 - c)``.
_LOG_TINY = float(np.log(np.nextafter(0.0, 1.0)))


def _others(z, mult, j):
    """``(log total, log largest)`` of each row's classes but column ``j``
    (per-class log-probabilities ``z`` of the expanded columns)."""
    rows = np.arange(len(z))
    others = np.where(mult > 0, z + np.log(np.maximum(mult, 1.0)), -np.inf)
    others[rows, j] = -np.inf
    each = np.where(mult > 0, z, -np.inf)
    each[rows, j] = -np.inf
    with np.errstate(divide="ignore"):
        return logsumexp(others, axis=1), each.max(axis=1)


def _strict_top(log_value, log_other, ahead):
    """The top class's log-probability at least the largest other's, the
    next float above it where the input put the top strictly ahead (the
    dense map's tie-break, in log space)."""
    log_value = np.maximum(log_value, log_other)
    level = ahead & (log_value <= log_other)
    log_value[level] = np.nextafter(log_other[level], np.inf)
    return log_value


def topk_binary_scores(top: TopKScores, j: np.ndarray) -> np.ndarray:
    """The binary problem ``[log(1 - c), log c]`` of the listed column ``j``
    of each row, ``log(1 - c)`` the others' total (listed and leftover),
    floored at the smallest positive float64 as the dense problem is."""
    z, mult = expanded(top)
    log_c = z[np.arange(len(top)), j]
    log_rest, _ = _others(z, mult, j)
    with np.errstate(divide="ignore"):
        log_total = np.logaddexp(log_c, log_rest)
        scores = np.empty((len(top), 2))
        scores[:, 0] = np.maximum(log_rest, _LOG_TINY) - log_total
        scores[:, 1] = log_c - log_total
    return scores


def replace_top_topk(shares: TopKScores, j, confidence, complement=None):
    """``confidence`` on listed column ``j``, the others sharing
    ``complement`` (``1 - c`` if None) in the proportions of ``shares``.

    As the dense ``replace_top_label_inplace(..., keep_argmax=True,
    floor=1e-300)``: ``c`` is raised to the largest other class's new share
    where below it (then ``1 - c`` is their total), both floored at
    ``1e-300``; each other listed class and the leftover mass are scaled by
    the same factor, in log space. Returns a ``TopKScores``.
    """
    z, mult = expanded(shares)
    rows = np.arange(len(shares))
    c = np.asarray(confidence, dtype=np.float64)
    log_others, log_largest = _others(z, mult, j)
    with np.errstate(divide="ignore", invalid="ignore"):
        least = np.exp(log_largest - np.logaddexp(log_others, log_largest))
    least = np.where(np.isfinite(least), least, 0.0)
    raised = c < least
    c = np.maximum(c, least)
    rest = 1.0 - c if complement is None else np.where(raised, 1.0 - c, complement)
    rest = np.maximum(rest, FLOOR_BEFORE_LOG)
    value = np.maximum(c, FLOOR_BEFORE_LOG)
    finite = np.isfinite(log_others)  # else no other class has any mass
    log_factor = np.where(finite, np.log(rest) - np.where(finite, log_others, 0.0), 0.0)
    new = z + log_factor[:, None]
    k = shares.k
    values = np.where(shares.indices == -1, -np.inf, new[:, :k])
    values[rows, j] = _strict_top(np.log(value), log_largest + log_factor,
                                  z[rows, j] > log_largest)  # fmt: skip
    with np.errstate(divide="ignore"):
        rest_log = np.where(mult[:, k] > 0, new[:, k] + np.log(mult[:, k]), -np.inf)
    values = np.minimum(values, 0.0)
    return TopKScores(
        shares.indices, values, shares.n_classes, np.minimum(rest_log, 0.0),
        tokens=shares.tokens,
    )  # fmt: skip
