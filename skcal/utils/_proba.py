"""Helpers on probability vectors shared by the calibrators."""

from __future__ import annotations

import numpy as np

from ._constants import FLOOR_BEFORE_LOG, SUM_FLOOR

#: :func:`interp` sorts its queries from this many knots and queries on:
#: ``np.interp``'s binary search per query then costs more than one sort of
#: them (measured at 10,000 queries: 3-7 times faster with 1,000-8,000
#: knots, as spline calibration has; 5-15% faster for the isotonic maps of
#: the real benchmark tasks, 35-92 knots; on par at 16 knots).
_SORTED_MIN_KNOTS = 48
_SORTED_MIN_QUERIES = 4096


def interp(x: np.ndarray, xp: np.ndarray, fp: np.ndarray) -> np.ndarray:
    """``np.interp(x, xp, fp)``, faster for many knots, and finite.

    Bit for bit ``np.interp``'s values wherever they are finite; where its
    slope overflows (see :func:`_interp_steep`), the segment's own value.

    With increasing ``xp`` (ties allowed), ``np.interp`` finds for each query
    the one ``j`` with ``xp[j] <= x < xp[j + 1]`` and evaluates the same
    formula on it, whatever the order of the queries; but its binary search
    per query mispredicts its branches, while on sorted queries it starts
    from the previous one's segment and barely searches. From
    :data:`_SORTED_MIN_KNOTS` knots and :data:`_SORTED_MIN_QUERIES` queries
    (1-D), the queries are therefore sorted, interpolated, and scattered
    back.
    """
    if (
        x.ndim != 1
        or x.size < _SORTED_MIN_QUERIES
        or xp.size < _SORTED_MIN_KNOTS
        or not np.all(xp[1:] >= xp[:-1])  # unsorted: order-dependent
    ):
        out = np.interp(x, xp, fp)
    else:
        order = np.argsort(x)
        out = np.empty(x.shape)
        out[order] = np.interp(x[order], xp, fp)
    if not np.isfinite(out).all():
        _interp_steep(out, x, xp, fp)
    return out


def _interp_steep(out, x, xp, fp) -> None:
    """Redo the non-finite entries of ``np.interp``'s result, in place.

    Between two knots closer than ~1e-308 with different values (subnormal
    probabilities: logits 700 apart), ``np.interp``'s slope overflows and
    its result is infinite or NaN. There the value is taken as the fraction
    ``(x - x_j) / (x_{j+1} - x_j)`` of the segment, which stays in [0, 1].
    Entries with a NaN query stay NaN.
    """
    bad = np.flatnonzero(~np.isfinite(out) & ~np.isnan(x))
    if bad.size == 0 or xp.size < 2 or not np.isfinite(fp).all():
        return
    q = x.ravel()[bad]
    j = np.clip(np.searchsorted(xp, q, side="right") - 1, 0, xp.size - 2)
    with np.errstate(invalid="ignore", divide="ignore"):
        t = np.clip((q - xp[j]) / (xp[j + 1] - xp[j]), 0.0, 1.0)
    t = np.where(np.isfinite(t), t, 1.0)  # a zero-width segment: its right end
    out.reshape(-1)[bad] = fp[j] + t * (fp[j + 1] - fp[j])


def argmax_ties_by_scores(P: np.ndarray, scores) -> np.ndarray:
    """Column of each row's maximum of ``P``, ties broken by ``scores``.

    skcal's one tie rule (:meth:`skcal.base.BaseCalibrator.predict`): among
    the columns tied at the row's maximum of ``P`` (exactly equal floats),
    the one with the largest score, and among those tied there too, the
    first. ``scores`` is an array of the shape of ``P``, or a callable that
    gives the scores of the rows it is passed (only rows with a tie are
    looked at).
    """
    index = np.argmax(P, axis=1)
    top = P[np.arange(len(P)), index]
    tied = np.flatnonzero(np.count_nonzero(P == top[:, None], axis=1) > 1)
    if tied.size:
        given = scores(tied) if callable(scores) else np.asarray(scores)[tied]
        given = np.array(given, dtype=np.float64)
        given[P[tied] != top[tied, None]] = -np.inf
        index[tied] = np.argmax(given, axis=1)
    return index


def replace_top_label_inplace(
    proba: np.ndarray,
    logits: np.ndarray,
    top: np.ndarray,
    confidence: np.ndarray,
    *,
    floor: float = 0.0,
    keep_argmax: bool = False,
    complement=None,
    ahead=None,
) -> np.ndarray:
    """:func:`replace_top_label` of ``logits``, computed over their softmax.

    With ``floor``, ``c`` and ``1 - c`` are floored there (``floor=1e-300``
    gives the softmax of ``replace_top_label(..., log=True)``);
    ``complement`` as for :func:`replace_top_label`;
    ``keep_argmax`` as for :func:`replace_top_label` (the same floor of
    ``c``, the same strict top class); ``ahead`` (boolean, one per row)
    says where the top class must stay strictly first, when that is not
    where it leads the softmax of ``logits`` (the caller's scores rank the
    classes, ``logits`` only give the others' shares).

    ``proba`` (C-contiguous float64, overwritten and returned) holds the
    softmax of ``logits``. The other classes' share of a row is
    ``p_j / sum_{i != top} p_i``, exact (to a few units in the last place)
    as long as every ``p_j`` is a normal number; rows with a subnormal or
    zero probability, or whose others sum to less than 1e-290 (logit gaps
    of ~700 or more), are recomputed from the logits by
    :func:`replace_top_label`. One pass for the sum and one for the
    rescaling, no temporary array.
    """
    from ._softmax import (
        row_max,
        row_min,
        row_sum,
        scale_rows_inplace,
    )

    n, n_classes = proba.shape
    if n == 0:
        return proba
    c = np.asarray(confidence, dtype=np.float64)
    tiny = np.finfo(np.float64).tiny
    underflow = None if proba.min() >= tiny else row_min(proba) < tiny
    flat_top = np.asarray(top) + n_classes * np.arange(n)
    if keep_argmax:
        p_top = proba.reshape(-1)[flat_top]  # a copy (fancy indexing)
    proba.reshape(-1)[flat_top] = 0.0
    others = row_sum(proba)
    small = others < SUM_FLOOR
    if underflow is not None:
        small |= underflow
    raised = None
    if keep_argmax:  # c >= the largest other's share: 1 / (1 + others / largest)
        largest = row_max(proba)
        least = largest / np.maximum(others + largest, SUM_FLOOR)
        raised = c < least
        c = np.maximum(c, least)
    rest = np.maximum(_complement(c, complement, raised), floor)
    factor = rest / np.where(small, 1.0, others)
    scale_rows_inplace(proba, factor)
    value = np.maximum(c, floor)
    if keep_argmax:
        # the largest other is now exactly largest * factor (one rounded
        # product, as in the scaling): the top class strictly above it
        _strict_top(
            value, largest * factor, p_top > largest if ahead is None else ahead
        )
    proba.reshape(-1)[flat_top] = value
    if small.any():
        rows = np.flatnonzero(small)
        z = np.array(logits[rows], dtype=np.float64)
        args = (z, top[rows], c[rows])
        kwargs = {"keep_argmax": keep_argmax, "complement": rest[rows]}
        if floor > 0:  # the log path floors, and is the reference
            block = np.exp(replace_top_label(*args, log=True, **kwargs))
        else:
            block = replace_top_label(*args, **kwargs)
        if keep_argmax:  # exp may round the top a unit below another
            _hold_strict_top(block, top[rows], z)
        proba[rows] = block
    return proba


def _complement(c: np.ndarray, complement, raised) -> np.ndarray:
    """The others' total: ``complement`` where given (``1 - c`` known more
    accurately than the subtraction, which is 0 for a ``c`` within
    rounding of 1), else ``1 - c``; ``1 - c`` where ``raised`` (``c`` was
    raised to the largest other's share, and ``complement`` is stale)."""
    if complement is None:
        return 1.0 - c
    complement = np.asarray(complement, dtype=np.float64)
    if raised is None or not raised.any():
        return complement
    return np.where(raised, 1.0 - c, complement)


def _strict_top(value: np.ndarray, other: np.ndarray, ahead: np.ndarray) -> None:
    """The top class's ``value`` at least ``other`` (the largest other
    class's), strictly above it where the input puts the top class strictly
    ahead (``ahead``), in place: where rounding left the two level or the
    other a unit in the last place above, the top class gets the next
    float above the other's."""
    np.maximum(value, other, out=value)
    level = ahead & (value <= other)
    if level.any():
        value[level] = np.nextafter(other[level], np.inf)


def _hold_strict_top(values: np.ndarray, top: np.ndarray, logits) -> None:
    """:func:`_strict_top` on each row of ``values`` (probabilities or their
    logs), in place: the top class's entry at least every other's, strictly
    above where ``logits`` put it strictly ahead of every other."""
    rows = np.arange(len(top))
    z = np.array(logits, dtype=np.float64)
    ahead = z[rows, top]
    z[rows, top] = -np.inf
    ahead = ahead > z.max(axis=1)
    v = np.array(values, dtype=np.float64)
    v[rows, top] = -np.inf
    value = values[rows, top].copy()
    _strict_top(value, v.max(axis=1), ahead)
    values[rows, top] = value


def _hold_top(values: np.ndarray, top: np.ndarray, rows: np.ndarray) -> None:
    """Raise ``values[row, top]`` to the row's maximum in ``rows``, in place.

    Where the top class was given exactly the largest other's share, the
    two are equal up to rounding: a tie, never another class ahead.
    """
    block = values[rows]
    block[np.arange(len(rows)), top[rows]] = block.max(axis=1)
    values[rows] = block


def replace_top_label(
    logits: np.ndarray,
    top: np.ndarray,
    confidence: np.ndarray,
    *,
    log: bool = False,
    keep_argmax: bool = False,
    complement=None,
) -> np.ndarray:
    """Give class ``top`` probability ``confidence``; the others share the rest.

    The other classes share ``1 - confidence`` in proportion to their
    original probabilities, i.e. by the softmax of their own logits::

        q_top = c,    q_j = (1 - c) exp(z_j) / sum_{i != top} exp(z_i).

    The proportions are computed from the logits, shifted by the largest
    of the other logits, so they stay exact when the other classes'
    probabilities underflow (a logit gap of ~745 or more makes them 0 in
    float64) and no intermediate can overflow: every factor is at most 1.
    The result may rank another class above ``top`` (callers that keep the
    original label for ``predict`` must say so), unless ``keep_argmax``
    (see there) floors ``c`` so that ``top`` stays strictly first.
    ``logits`` is not modified.

    Parameters
    ----------
    logits : ndarray of shape (n_samples, n_classes)
        Finite logits (or log-probabilities) of the original prediction.
    top : ndarray of shape (n_samples,)
        The column whose probability is replaced, per row.
    confidence : ndarray of shape (n_samples,)
        Its new probability, in [0, 1].
    log : bool, default=False
        Return ``log q`` instead of ``q``, computed in log space, so that it
        keeps the proportions of the other classes even where ``q``
        underflows. ``c`` and ``1 - c`` are then floored at 1e-300 (the
        floor of the one-vs-rest calibrators: a calibrated 0 or 1 gives a
        finite log loss) and the result is finite.
    keep_argmax : bool, default=False
        Keep ``top`` the most probable class, strictly ahead of every other
        wherever its logit is strictly the largest (``top`` must be an
        argmax of ``logits``). A confidence below the share that the
        largest other class would then get would rank that class first, so
        ``c`` is floored at the level of a tie, ``c >= 1 / (1 + sum_{j !=
        top} exp(z_j - z_2))`` (``z_2`` the largest other logit), and
        where the top class is then level with another (on that floor, or
        by rounding) while its logit is strictly the largest, its value is
        the next float above the other's: strictly first by one unit in the
        last place, the least change to the calibrated confidence that
        breaks the tie (a floor with a wider margin, say half the logit
        margin, would override the calibrated confidence of confident rows).
        Where the logits tie, so do the results.
    complement : ndarray of shape (n_samples,), default=None
        The others' total ``1 - confidence``, where the caller knows it more
        accurately than the subtraction: a confidence within rounding of 1
        (``1 - c`` is then 0) whose others still hold, say, 1e-26 (computed
        as the sum of their shares). None: ``1 - confidence``.

    Returns
    -------
    ndarray of shape (n_samples, n_classes)
        ``q`` (rows sum to 1), or ``log q``.
    """
    z = np.array(logits, dtype=np.float64)
    n, n_classes = z.shape
    rows = np.arange(n)
    c = np.asarray(confidence, dtype=np.float64)
    z[rows, top] = -np.inf
    second = z.max(axis=1, keepdims=True)  # the largest of the others
    z -= second  # <= 0, with 0 at the largest other class: the sum is >= 1
    total = np.exp(z).sum(axis=1, keepdims=True)
    raised = None
    if keep_argmax:  # the floor of c: a tie (see the docstring)
        least = 1.0 / (1.0 + total[:, 0])
        raised = c < least
        c = np.maximum(c, least)
    rest = _complement(c, complement, raised)
    if not log:
        out = np.exp(z) / total * rest[:, None]
        out[rows, top] = c
    else:
        z -= np.log(total)
        out = z + np.log(np.maximum(rest, FLOOR_BEFORE_LOG))[:, None]
        out[rows, top] = np.log(np.maximum(c, FLOOR_BEFORE_LOG))
        # logits spanning more than the float64 range give z = -inf
        np.maximum(out, np.finfo(np.float64).min, out=out)
    if keep_argmax:
        _hold_strict_top(out, top, logits)
    return out
