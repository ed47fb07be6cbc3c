"""Non-parametric one-vs-rest calibrators: isotonic regression, centred
isotonic regression, histogram binning and scaling-binning."""

from __future__ import annotations

from numbers import Integral

import numpy as np
from scipy.optimize import isotonic_regression
from scipy.special import expit

from .._torch._progress import Progress
from ..base import BaseCalibrator
from ..exceptions import ConvergenceWarning
from ..metrics._binning import assign_bins, bin_edges
from ..utils._proba import interp
from ..utils._sklearn import Interval, StrOptions
from ..utils._warnings import warn
from ._one_vs_rest import (
    ConfidenceMapMixin,
    OneVsRestCalibrator,
    map_transposed,
    probabilities_of,
    renormalize_inplace,
)
from ._platt import fit_beta

__all__ = [
    "CenteredIsotonicCalibrator",
    "HistogramBinningCalibrator",
    "IsotonicCalibrator",
    "ScalingBinningCalibrator",
]

#: ``x + 2^52`` holds ``round(x)`` in its low mantissa bits for 0 <= x < 2^51:
#: its bit pattern minus this one's is that integer (a float-to-int cast
#: without numpy's slow conversion loop).
_ROUND_MAGIC = np.float64(2.0**52)
_ROUND_MAGIC_BITS = _ROUND_MAGIC.view(np.int64)
#: Entries per block of rows of the vectorised step map: its temporaries
#: stay in cache and are allocated once per call.
_BLOCK = 1 << 15
#: Scaling-binning clips the probabilities to ``[eps, 1 - eps]`` before
#: their log-odds, as uncertainty-calibration's ``get_platt_scaler`` does.
_SB_EPS = 1e-12


def _step_map_inplace(P: np.ndarray, edges: np.ndarray, values: np.ndarray) -> None:
    """``P[i, k] = values[k][assign_bins(P[i, k], edges, "left")]``, in place.

    ``edges`` are shared by every column, ``values`` has shape ``(n_columns,
    n_bins)``. The bin of ``p`` is the number of interior edges ``<= p``. On
    a grid of ``G`` cells (a power of 2), ``c = round(p G)`` is exact and
    cell ``c`` holds the ``p`` of ``[(c - 1/2) / G, (c + 1/2) / G]``; a cell
    with at most one interior edge ``t`` in ``((c - 1/2) / G, (c + 1/2) /
    G]`` gives the bin ``lo_c + (p >= t)``, with ``lo_c`` the bin of its
    left end: two table look-ups and a comparison per entry instead of a
    binary search. Edges too close together for the grid (two in one cell)
    fall back to ``np.searchsorted``, and so does a block of rows with a
    value outside [0, 1] (checked on the block, in cache: no extra pass
    over ``P``).
    """
    n_rows, n_columns = P.shape
    n_bins = values.shape[1]
    flat_values = values.ravel()
    offsets = n_bins * np.arange(n_columns)
    interior = edges[1:-1]
    n_cells = 1 << (int(interior.size).bit_length() + 1)
    left = (np.arange(n_cells + 2) - 0.5) / n_cells
    lo = np.searchsorted(interior, left, side="right")
    inside = np.searchsorted(interior, left + 1.0 / n_cells, side="right") - lo

    def searched(p):
        bins = np.searchsorted(interior, p, side="right")
        bins += offsets
        np.take(flat_values, bins, out=p, mode="clip")

    if interior.size == 0 or inside.max() > 1:
        searched(P)
        return
    cut = np.where(inside == 1, interior[np.minimum(lo, interior.size - 1)], np.inf)
    block = max(1, _BLOCK // n_columns)
    cells = np.empty((min(block, n_rows), n_columns))
    index = cells.view(np.int64)
    cuts = np.empty(cells.shape)
    above = np.empty(cells.shape, dtype=bool)
    for start in range(0, n_rows, block):
        p = P[start : start + block]
        if p.min() < 0 or p.max() > 1:
            searched(p)
            continue
        c, i, t, a = (x[: len(p)] for x in (cells, index, cuts, above))
        np.multiply(p, n_cells, out=c)  # exact: G is a power of 2
        c += _ROUND_MAGIC
        i -= _ROUND_MAGIC_BITS
        np.greater_equal(p, np.take(cut, i, out=t, mode="clip"), out=a)
        np.take(lo, i, out=i, mode="clip")
        i += offsets
        i += a
        np.take(flat_values, i, out=p, mode="clip")


def _mean_step_map(maps):
    """The mean of step maps ``(edges, values)`` (bins ``[l, u)``, clipped).

    Each map is constant on the intervals between consecutive points of
    the union of all edges, so the mean is exactly a step map on that
    union, valued at each interval's left end.
    """
    edges = np.unique(np.concatenate([e for e, _ in maps]))
    if edges.size == 1:  # every bin of every map is the same point
        edges = np.repeat(edges, 2)
    left = edges[:-1]
    values = np.mean([v[assign_bins(left, e, "left")] for e, v in maps], axis=0)
    return edges, values


#: Sorted scores closer than this to the first of their group are ties, as in
#: scikit-learn's ``IsotonicRegression`` (``np.finfo(float64).resolution``):
#: softmax probabilities below ~1e-15 pool into one point.
_TIE_EPS = float(np.finfo(np.float64).resolution)


def _tie_starts(x):
    """Starts of the groups of sorted ``x`` that are ties: a group begins at
    the first score at least ``_TIE_EPS`` above its group's first score
    (scikit-learn's ``_make_unique``). Only runs of gaps below the tolerance
    need the sequential rule; elsewhere every score starts a group."""
    gaps = np.diff(x)
    new = np.append(True, gaps >= _TIE_EPS)
    close = np.flatnonzero(~new)  # the scores within eps of their predecessor
    if close.size:
        run_starts = close[np.append(True, np.diff(close) > 1)] - 1
        for first in run_starts:  # a few runs, among tiny or equal scores
            end = first + 1
            while end < x.size and not new[end]:
                end += 1
            anchor = x[first]
            for j in range(first + 1, end):
                if x[j] - anchor >= _TIE_EPS:
                    new[j], anchor = True, x[j]
    return np.flatnonzero(new)


def _grouped(x, target, weight, order=None):
    """``(x_unique, total_weight, total_target)`` of the tie groups of ``x``.

    Samples of zero weight are dropped and tied ``x`` (within ``_TIE_EPS``
    of their group's first, as scikit-learn) are merged at the group's first
    ``x``, with their summed weights and weighted targets. ``order``, if
    given, sorts ``x`` (non-decreasing; see :func:`_opposite_orders`).
    """
    if order is None:
        order = np.argsort(x)
    if weight is not None and not weight.all():
        order = order[weight[order] > 0]
    x = x[order]
    starts = _tie_starts(x)
    if weight is None:
        total = np.diff(np.append(starts, x.size)).astype(np.float64)
        hits = np.add.reduceat(target[order], starts)
    else:
        weight = weight[order]
        total = np.add.reduceat(weight, starts)
        hits = np.add.reduceat(target[order] * weight, starts)
    return x[starts], total, hits


def _pava(x, target, weight, order=None):
    """``(x_unique, total_weight, fitted)``: the isotonic fit on the distinct ``x``.

    The tie groups of :func:`_grouped`, each at its weighted mean target,
    and scipy's pool-adjacent-violators on them (values clipped to [0, 1]).
    """
    xu, total, hits = _grouped(x, target, weight, order)
    values = np.clip(isotonic_regression(hits / total, weights=total).x, 0.0, 1.0)
    return xu, total, values


#: Neighbouring blocks of an isotonic fit whose values (recomputed from
#: their sums) differ by at most this relative amount are one constant
#: stretch: the running weighted means of the pool-adjacent-violators
#: algorithm round differently along different paths (rows of weight 2, or
#: the same rows repeated), which can leave one stretch as two blocks a
#: unit in the last place apart.
_LEVEL_RTOL = 1e-12


def _constant_stretches(total, hits, fitted):
    """Starts and values of the constant stretches of an isotonic fit.

    ``fitted`` is the fit on the tie groups of weights ``total`` and
    weighted targets ``hits``: its blocks (where the fitted value changes)
    are merged with their neighbour where their values, each recomputed as
    the block's sum of targets over its sum of weights (exact for integer
    weights), agree to :data:`_LEVEL_RTOL`.
    """
    starts = np.flatnonzero(np.append(True, fitted[1:] != fitted[:-1]))
    values = np.add.reduceat(hits, starts) / np.add.reduceat(total, starts)
    gap = np.diff(values)
    new = gap > _LEVEL_RTOL * np.maximum(np.abs(values[1:]), np.abs(values[:-1]))
    if not new.all():
        starts = starts[np.append(True, new)]
        values = np.add.reduceat(hits, starts) / np.add.reduceat(total, starts)
    return starts, np.clip(values, 0.0, 1.0)


def _opposite_orders(scores: np.ndarray) -> list:
    """An order that sorts each column of ``scores``, or None for a column
    to be sorted on its own: with two columns that rank the rows in
    opposite orders (a binary problem's ``1 - p`` and ``p``), one sort of
    the second serves both, reversed for the first (which is checked to
    fall along it). The order among tied scores, which no sort fixes,
    changes only the rounding of weighted sums over ties."""
    if scores.shape[1] != 2:
        return [None] * scores.shape[1]
    order = np.argsort(scores[:, 1])
    if np.all(np.diff(scores[order, 0]) <= 0):
        return [order[::-1], order]
    return [None, order]


def _isotonic_knots(x, target, weight, order=None):
    """Knots and values of the increasing isotonic fit of ``target`` on ``x``.

    The fit of scikit-learn's ``IsotonicRegression(y_min=0, y_max=1)``
    (its ``X_thresholds_`` and ``y_thresholds_``), from :func:`_pava`, with
    only the knots where the fitted value changes on either side kept (the
    same piecewise-linear function). One sort and a few vector passes: 4
    times faster than the estimator's per-call checks and copies.
    """
    knots, _, values = _pava(x, target, weight, order)
    if values.size > 2:
        keep = np.ones(values.size, dtype=bool)
        keep[1:-1] = (values[:-2] != values[1:-1]) | (values[1:-1] != values[2:])
        knots, values = knots[keep], values[keep]
    return knots, values


def _centered_isotonic_knots(x, target, weight, order=None):
    """Knots and values of the centred isotonic fit (Oron & Flournoy 2017).

    The isotonic fit of :func:`_pava` is constant on blocks of consecutive
    distinct ``x`` (:func:`_constant_stretches`: blocks whose values agree
    to rounding are one); each block is collapsed into one knot at its weighted
    mean ``x`` (the weights of its samples), holding the block's value, and
    the fit interpolates linearly between these knots. As in the paper (and
    ``cir_model``), blocks of value 0 or 1 are not collapsed (their two
    ends are kept), and the first and last blocks keep their outer end, so
    that the map spans the calibration range (constant outside it).
    """
    xu, total, hits = _grouped(x, target, weight, order)
    fitted = isotonic_regression(hits / total, weights=total).x
    starts, v = _constant_stretches(total, hits, fitted)
    ends = np.append(starts[1:], xu.size) - 1
    first, last = xu[starts], xu[ends]
    mean = np.add.reduceat(xu * total, starts) / np.add.reduceat(total, starts)
    mean = np.clip(mean, first, last)  # rounding may leave a lone x's block
    extreme = (v == 0.0) | (v == 1.0)
    n_blocks = starts.size
    block = np.arange(n_blocks)
    points = np.full((n_blocks, 3), np.nan)
    points[:, 0] = np.where(extreme | (block == 0), first, np.nan)
    points[:, 1] = np.where(extreme, np.nan, mean)
    points[:, 2] = np.where(extreme | (block == n_blocks - 1), last, np.nan)
    knots = points.ravel()
    keep = ~np.isnan(knots)
    knots, knot_values = knots[keep], np.repeat(v, 3)[keep]
    distinct = np.append(True, knots[1:] != knots[:-1])
    return knots[distinct], knot_values[distinct]


def _clipped_log_odds(p):
    """``log(p / (1 - p))`` of ``p`` clipped to ``[1e-12, 1 - 1e-12]``.

    The scores of the scaling step of uncertainty-calibration's
    scaling-binning calibrators (``get_platt_scaler``).
    """
    p = np.clip(p, _SB_EPS, 1.0 - _SB_EPS)
    return np.log(p) - np.log1p(-p)


def _equal_mass_edges(q, w, n_bins):
    """Upper edges of ``n_bins`` equal-mass bins of ``q``, the last one 1.

    uncertainty-calibration's ``get_equal_bins``: the sorted values are
    split as ``np.array_split`` splits them into ``min(n_bins, n)`` parts,
    an edge sits halfway between the last value of a part and the first of
    the next, 1 is appended and duplicates are dropped. With weights (all
    positive) a sorted value covers its cumulative weight, counted in units
    of the smallest weight: the same edges for unit weights, and for
    integer weights (smallest 1) those of the repeated rows.
    """
    order = np.argsort(q, kind="stable")
    v = q[order]
    c = np.cumsum(w[order] / w.min())
    total = c[-1]
    m = int(min(n_bins, np.floor(total + 1e-9)))
    size = np.floor(total / m)
    j = np.arange(1, m, dtype=np.float64)
    s = j * size + np.minimum(j, total - m * size)
    top = v.size - 1
    before = v[np.minimum(np.searchsorted(c, s, side="left"), top)]
    after = v[np.minimum(np.searchsorted(c, s, side="right"), top)]
    return np.unique(np.append((before + after) / 2.0, 1.0))


def _fit_scaling_binning(p, positive, w, n_bins):
    """``(a, b, edges, values, converged)`` of one scaling-binning map.

    Kumar, Liang & Ma (2019), as uncertainty-calibration fits it: Platt's
    sigmoid ``q = expit(a s + b)`` of the clipped log-odds ``s`` of ``p``
    (unregularised weighted logistic regression on ``positive``), then
    equal-mass bins of ``q`` (:func:`_equal_mass_edges`, bins ``(l, u]``),
    each valued at the weighted mean of its ``q`` (an empty bin at the
    middle of its edges). ``edges`` start at 0.
    """
    if not w.all():
        keep = w > 0
        p, positive, w = p[keep], positive[keep], w[keep]
    # beta calibration's "am" form is this sigmoid of the log-odds
    a, _, b, ok = fit_beta(np.clip(p, _SB_EPS, 1.0 - _SB_EPS), positive, w, "am")
    a = float(a)
    q = expit(a * _clipped_log_odds(p) + b)
    upper = _equal_mass_edges(q, w, n_bins)
    idx = np.searchsorted(upper, q, side="left")
    total = np.bincount(idx, weights=w, minlength=upper.size)
    mass = np.bincount(idx, weights=w * q, minlength=upper.size)
    edges = np.append(0.0, upper)
    centre = (edges[:-1] + edges[1:]) / 2
    values = np.divide(mass, total, out=centre, where=total > 0)
    return a, float(b), edges, values, ok


#: Scaling-binning's scores ``x = a s + b`` beyond these are mapped exactly
#: (``expit`` rounds towards 0 or 1 there, see :func:`_safe_zones`).
_X_EXACT = (-700.0, 30.0)


def _exact_bins(p, a, b, upper):
    """Bins ``searchsorted(upper, expit(a s(p) + b), "left")``, computed as
    the reference computes them (``p`` clipped already)."""
    q = expit(a * _clipped_log_odds(p) + b)
    return np.searchsorted(upper, q, side="left")


def _safe_zones(a, b, upper):
    """Cuts on ``p`` between which the bin of ``expit(a s(p) + b)`` is known.

    Each edge ``u`` of ``upper`` is the score ``t = logit(u)``; a ``p``
    whose score ``x`` is farther from every ``t`` than the rounding of
    ``s(p)``, ``x`` and ``expit`` (bounded with a factor of 10 to spare) has
    the bin of ``x`` among the ``t``, without ``expit``. The unsafe zones,
    around each ``t`` and beyond ``_X_EXACT``, are mapped to intervals
    ``(lo, hi]`` of ``p`` (widened by the rounding of the map back), merged
    where they overlap. Returns ``cuts`` (``lo_0, hi_0, lo_1, ...``) and the
    bin of each safe interval between them (``k = searchsorted(cuts, p)``:
    even ``k`` is safe, of bin ``bins[k // 2]``), or None unless ``a > 0``.
    """
    if not (a > 0 and np.isfinite(a) and np.isfinite(b)):
        return None
    with np.errstate(divide="ignore"):
        t = np.log(upper) - np.log1p(-upper)
    inner = t[(t > _X_EXACT[0]) & (t < _X_EXACT[1])]
    margin = 1e-11 * (1.0 + np.abs(inner)) + 1e-13 * (1.0 + np.exp(inner))
    lo = np.concatenate([[-np.inf], inner - margin, [_X_EXACT[1]]])
    hi = np.concatenate([[_X_EXACT[0]], inner + margin, [np.inf]])
    # the bin of the safe x between zone i - 1 and zone i (any x there)
    middle = np.concatenate([[-np.inf], hi[:-1] / 2.0 + lo[1:] / 2.0, [np.inf]])
    bins = np.searchsorted(t, middle, side="left")
    p_lo, p_hi = _zone_probabilities(lo, hi, a, b)
    reach = np.maximum.accumulate(p_hi)
    starts = np.flatnonzero(np.append(True, p_lo[1:] > reach[:-1]))
    ends = np.append(starts[1:], p_lo.size) - 1
    cuts = np.column_stack([p_lo[starts], reach[ends]]).ravel()
    bins = bins[np.append(starts, p_lo.size)]
    _isolate_clip_ends(cuts, bins, a, b, upper)
    return cuts, bins


def _isolate_clip_ends(cuts, bins, a, b, upper):
    """Make the clipped ends ``1e-12`` and ``1 - 1e-12`` safe, in place.

    Many probabilities are clipped to them (every ``p`` below ``1e-12``),
    and an edge halfway between two of their equal scores is their score:
    an unsafe zone ``(lo, hi]`` holding an end is cut to leave the end
    alone in the safe zone next to it, valued at its exact bin (no valid
    ``p`` lies beyond the end in that zone).
    """
    low, high = _SB_EPS, 1.0 - _SB_EPS
    lo, hi = cuts[0::2], cuts[1::2]
    for g in np.flatnonzero((lo < low) & (low <= hi)):
        cuts[2 * g] = low
        bins[g] = _exact_bins(np.array([low]), a, b, upper)[0]
    for g in np.flatnonzero((lo < high) & (high <= hi)):
        cuts[2 * g + 1] = np.nextafter(high, 0.0)
        bins[g + 1] = _exact_bins(np.array([high]), a, b, upper)[0]


def _zone_probabilities(lo, hi, a, b):
    """The scores ``(lo, hi]`` as probabilities, widened by the rounding of
    ``s = log(p) - log1p(-p)`` (3e-14 for clipped ``p``), of ``a s + b``
    and of ``expit`` (absolute 1e-15), ten times over."""

    def to_p(x, sign):
        with np.errstate(over="ignore", invalid="ignore"):
            s = (x - b) / a
            err = 3e-13 + 2.2e-15 * (np.abs(s) + (np.abs(x) + abs(b)) / a)
            p = expit(np.where(np.isfinite(x), s + sign * err, x))
        return np.clip(p + sign * 1e-14, 0.0, 1.0)

    return to_p(lo, -1.0), to_p(hi, 1.0)


#: The lookup table of :func:`_count_below` has ``2^(52 - _GRID_SHIFT)``
#: cells per octave of ``p`` in ``[_SB_EPS, 1]`` (1,320 cells).
_GRID_SHIFT = 47
_GRID_BASE = int(np.float64(_SB_EPS).view(np.int64)) >> _GRID_SHIFT
_GRID_CELLS = (int(np.float64(1.0).view(np.int64)) >> _GRID_SHIFT) - _GRID_BASE + 1
#: Above this many cuts in one cell, :func:`_count_below` searches instead.
_GRID_MAX_INSIDE = 4
#: Below this many ``p``, building the table costs more than it saves.
_GRID_MIN_SIZE = 2048
#: The smallest ``p`` of each cell, and the end of the last one.
_GRID_STARTS = (
    (np.arange(_GRID_CELLS + 1, dtype=np.int64) + _GRID_BASE) << _GRID_SHIFT
).view(np.float64)


def _count_below(cuts, p):
    """``np.searchsorted(cuts, p, side="left")`` for ``p`` in ``[1e-12, 1]``.

    A binary search among a few cuts mispredicts a branch at most levels
    (random ``p``). Positive floats are ordered as their bit patterns, so
    the top bits of ``p`` index a cell of a table on a log-like grid:
    the number of cuts below the cell, then a comparison with each of the
    (at most ``_GRID_MAX_INSIDE``) cuts inside it. ``cuts`` are sorted.
    """
    if p.size < _GRID_MIN_SIZE:
        return np.searchsorted(cuts, p, side="left")
    below = np.searchsorted(cuts, _GRID_STARTS, side="left")
    counts = np.diff(below)
    inside = int(counts.max())
    if inside > _GRID_MAX_INSIDE:
        return np.searchsorted(cuts, p, side="left")
    cell = p.view(np.int64) >> _GRID_SHIFT
    cell -= _GRID_BASE
    k = below.take(cell)
    padded = np.append(cuts, np.full(inside, np.inf))
    for j in range(inside):
        # the j-th cut of the cell, if it has one (else above every p)
        nth = np.where(counts > j, padded.take(below[:-1] + j), np.inf)
        k += nth.take(cell) < p
    return k


def _scaling_binning_map(p, a, b, edges, values, zones=False):
    """The scaling-binning map ``values[bin(expit(a s(p) + b))]``.

    The bin of most ``p`` is looked up among cuts on ``p``
    (:func:`_safe_zones`; ``zones``: their result for these ``a, b,
    edges``, computed here if False), without the logarithms and
    ``expit``; those close to a cut are mapped as the reference maps them.
    The result is that of the reference's formula, entry by entry.
    """
    p = np.clip(p, _SB_EPS, 1.0 - _SB_EPS)
    upper = edges[1:]
    last = values.size - 1
    if zones is False:
        zones = _safe_zones(a, b, upper)
    if zones is None:
        return values[np.minimum(_exact_bins(p, a, b, upper), last)]
    cuts, bins = zones
    k = _count_below(cuts, p)
    out = values[np.minimum(bins, last)].take(k >> 1)
    unsafe = np.flatnonzero(k & 1)
    if unsafe.size:
        out[unsafe] = values[np.minimum(_exact_bins(p[unsafe], a, b, upper), last)]
    return out


def _mean_right_step_map(maps):
    """The mean of step maps ``(edges, values)`` on bins ``(l, u]``.

    Exactly a step map on the union of the edges, valued at each
    interval's right end (the counterpart of :func:`_mean_step_map`).
    """
    edges = np.unique(np.concatenate([e for e, _ in maps]))
    right = edges[1:]
    values = np.mean(
        [v[np.minimum(np.searchsorted(e[1:], right), v.size - 1)] for e, v in maps],
        axis=0,
    )
    return edges, values


class IsotonicCalibrator(ConfidenceMapMixin, OneVsRestCalibrator):
    """One-vs-rest isotonic regression of each class's probability.

    For each class ``k``, a non-decreasing step map of ``p_k`` is fitted to
    the indicators ``y == k`` (the fit of scikit-learn's
    :class:`~sklearn.isotonic.IsotonicRegression`, values in [0, 1], clipped
    outside the calibration range, computed by scipy's
    :func:`~scipy.optimize.isotonic_regression`); the calibrated rows are
    renormalised to sum to 1, after flooring them at 1e-12 (a class never
    positive in a range of scores would otherwise get probability 0 and an
    infinite log loss). A row whose calibrated values are all 0 keeps its original
    probabilities instead of a 0/0. A class with no calibration sample (of
    positive weight) gets the mean of the other classes' maps (a
    piecewise-linear map on the union of their knots): nothing was learned
    about it, so it is calibrated as the average class, where a fit to its
    all-negative labels would give it probability 0 (1e-12) everywhere.

    **Many classes.** Each class's map is learned from that class's own
    positives, one-vs-rest: with many classes and few calibration rows per
    class the renormalised rows can score a higher log loss than the
    uncalibrated scores (drawn 38-class logits, 53 rows per class: test NLL
    0.65 against 0.33 uncalibrated and 0.19 for temperature scaling).
    Prefer temperature scaling or a structured map there, or let
    :class:`~skcal.CalibratorSearchCV` choose (its guard keeps such maps out
    when they do not win by more than the noise).

    Parameters
    ----------
    input : {"logits", "proba"}, default="logits"
        What ``X`` holds; logits are turned into probabilities by softmax.
    classes : array-like of shape (n_classes,), default=None
        The label of each column of ``X``.

    Attributes
    ----------
    thresholds_ : list of ndarray
        Per class, the ``p_k`` knots of the fitted step function.
    values_ : list of ndarray
        Per class, the calibrated values at the knots (linear interpolation
        between them, constant outside).
    classes_ : ndarray of shape (n_classes,)
        Label of each column.
    n_features_in_ : int
        Number of columns of ``X``.

    Notes
    -----
    ``decision_function`` returns the log of the calibrated probabilities,
    so that its softmax is :meth:`predict_proba`.
    Isotonic maps can tie or reorder classes: :meth:`predict` is the argmax
    of the calibrated probabilities.

    Examples
    --------
    >>> import numpy as np
    >>> from skcal import IsotonicCalibrator
    >>> from skcal.utils._testing import make_miscalibrated_logits
    >>> logits, y = make_miscalibrated_logits(1000, 3, temperature=2.0, random_state=0)
    >>> iso = IsotonicCalibrator().fit(logits, y)
    >>> proba = iso.predict_proba(logits)
    >>> bool(np.allclose(proba.sum(axis=1), 1.0))
    True
    """

    def __init__(self, *, input="logits", classes=None):
        self.input = input
        self.classes = classes

    def n_free_parameters(self, n_classes, n_features=None):
        """``C``: at least one step per class (non-parametric: the steps
        grow with the data)."""
        return n_classes

    def _start_maps(self, n_classes):
        self.thresholds_, self.values_ = [None] * n_classes, [None] * n_classes

    def _fit_scores(self, scores, y_index, sample_weight):
        self._orders = _opposite_orders(scores)  # for this fit only
        try:
            super()._fit_scores(scores, y_index, sample_weight)
        finally:
            del self._orders

    #: the knots and values of one map, of (x, target, weight, order)
    _knots = staticmethod(_isotonic_knots)

    def _fit_class(self, k, scores, positive, sample_weight):
        self.thresholds_[k], self.values_[k] = self._knots(
            scores, positive.astype(np.float64), sample_weight, self._orders[k]
        )
        return True

    def _fit_mirrored(self, p, positive, sample_weight):
        """Fit the binary problem of the columns ``[1 - p, p]`` from ``p``
        alone: the map ``f`` of class 1, and for class 0 its mirror image
        ``q -> 1 - f(1 - q)``, which is the fit of ``1 - p`` in exact
        arithmetic (reversing both axes commutes with the isotonic fit,
        centred or not). The top-label reduction's one map of the confidence
        (Le Coz et al. 2024), with no need of the others' sums."""
        knots, values = self._knots(p, positive.astype(np.float64), sample_weight)
        self.thresholds_ = [1.0 - knots[::-1], knots]
        self.values_ = [1.0 - values[::-1], values]

    def _fill_absent(self, present):
        # a piecewise-linear map on the union of the present classes' knots
        knots = np.unique(
            np.concatenate([self.thresholds_[k] for k in np.flatnonzero(present)])
        )
        values = np.mean(
            [self._map_column(k, knots) for k in np.flatnonzero(present)], axis=0
        )
        for k in np.flatnonzero(~present):
            self.thresholds_[k], self.values_[k] = knots, values

    def _calibrated_proba(self, logits, P=None):
        P = probabilities_of(logits, P)
        return map_transposed(P, logits, self._map_column)

    def _torch_map(self):
        from .._torch._export_piecewise import PiecewiseLinear

        return PiecewiseLinear(self.thresholds_, self.values_), False

    def _map_column(self, k, p):
        x, v = self.thresholds_[k], self.values_[k]
        if x.size == 1:
            return np.full_like(p, v[0])
        return interp(p, x, v)


class HistogramBinningCalibrator(ConfidenceMapMixin, OneVsRestCalibrator):
    """One-vs-rest histogram binning of each class's probability.

    For each class ``k``, ``p_k`` is binned (equal-width or equal-mass bins,
    the metrics' binning: ``[l, u)``, last bin closed) and every sample of a
    bin gets the bin's frequency of ``y == k`` (Zadrozny & Elkan 2001); rows
    are renormalised to sum to 1 after flooring the values at 1e-12. A bin
    without calibration samples keeps the mean of its edges; a row whose
    calibrated values are all 0 keeps its original probabilities. A class
    with no calibration sample (of positive weight) gets the mean of the
    other classes' maps (a step map on the union of their bin edges):
    nothing was learned about it, so it is calibrated as the average class,
    where a fit to its all-negative labels would give it probability 0
    (1e-12) everywhere.

    **Many classes.** Each class's map is learned from that class's own
    positives, one-vs-rest: with many classes and few calibration rows per
    class the renormalised rows can score a higher log loss than the
    uncalibrated scores (drawn 38-class logits, 53 rows per class: test NLL
    1.15 against 0.33 uncalibrated and 0.19 for temperature scaling).
    Prefer temperature scaling or a structured map there, or let
    :class:`~skcal.CalibratorSearchCV` choose (its guard keeps such maps out
    when they do not win by more than the noise).

    Parameters
    ----------
    input : {"logits", "proba"}, default="logits"
        What ``X`` holds; logits are turned into probabilities by softmax.
    classes : array-like of shape (n_classes,), default=None
        The label of each column of ``X``.
    n_bins : int, default=15
        Bins per class.
    strategy : {"uniform", "quantile"}, default="uniform"
        Equal-width bins, or equal-mass bins of each class's calibration
        probabilities.

    Attributes
    ----------
    bin_edges_ : list of ndarray
        Per class, the bin edges (``n_bins + 1`` of them; for a class
        without calibration samples, the union of the others' edges).
    bin_values_ : list of ndarray
        Per class, the calibrated probability of each bin (one fewer than
        its edges).
    classes_ : ndarray of shape (n_classes,)
        Label of each column.
    n_features_in_ : int
        Number of columns of ``X``.

    Examples
    --------
    >>> import numpy as np
    >>> from skcal import HistogramBinningCalibrator
    >>> from skcal.utils._testing import make_miscalibrated_logits
    >>> logits, y = make_miscalibrated_logits(1000, 3, temperature=2.0, random_state=0)
    >>> hb = HistogramBinningCalibrator(n_bins=10).fit(logits, y)
    >>> len(hb.bin_values_[0])
    10
    """

    _parameter_constraints: dict = {
        **BaseCalibrator._parameter_constraints,
        "n_bins": [Interval(Integral, 1, None, closed="left")],
        "strategy": [StrOptions({"uniform", "quantile"})],
    }

    def __init__(self, *, input="logits", classes=None, n_bins=15, strategy="uniform"):
        self.input = input
        self.classes = classes
        self.n_bins = n_bins
        self.strategy = strategy

    def n_free_parameters(self, n_classes, n_features=None):
        """``C n_bins``: one frequency per bin and class."""
        return n_classes * int(self.n_bins)

    def _start_maps(self, n_classes):
        self.bin_edges_, self.bin_values_ = [None] * n_classes, [None] * n_classes

    def _fit_class(self, k, scores, positive, sample_weight):
        edges = bin_edges(scores, self.n_bins, self.strategy, sample_weight)
        idx = assign_bins(scores, edges, "left")
        total = np.bincount(idx, weights=sample_weight, minlength=self.n_bins)
        hits = np.bincount(idx, weights=sample_weight * positive, minlength=self.n_bins)
        centre = (edges[:-1] + edges[1:]) / 2
        values = np.divide(hits, total, out=centre.copy(), where=total > 0)
        self.bin_edges_[k], self.bin_values_[k] = edges, values
        return True

    def _fit_mirrored(self, p, positive, sample_weight):
        """Fit the binary problem of the columns ``[1 - p, p]`` from ``p``
        alone: the binning of class 1, and for class 0 its mirror image (bins
        ``[1 - u, 1 - l)`` of value ``1 - v``: the fit of ``1 - p``, except
        that a row whose ``1 - p`` lies on a bin edge counts in the bin below
        the edge, not above). The top-label reduction's one map of the
        confidence (Le Coz et al. 2024), with no need of the others' sums."""
        self._start_maps(2)
        self._fit_class(1, p, positive, sample_weight)
        edges, values = self.bin_edges_[1], self.bin_values_[1]
        if self.strategy == "quantile":
            edges = 1.0 - edges[::-1]  # the edges i / n_bins are their mirror
        self.bin_edges_[0], self.bin_values_[0] = edges, 1.0 - values[::-1]

    def _fill_absent(self, present):
        # a step map on the union of the present classes' edges
        edges, values = _mean_step_map(
            [(self.bin_edges_[k], self.bin_values_[k]) for k in np.flatnonzero(present)]
        )
        for k in np.flatnonzero(~present):
            self.bin_edges_[k], self.bin_values_[k] = edges, values

    def _map_columns(self, P):
        edges = self.bin_edges_
        shared = all(e.shape == edges[0].shape for e in edges) and bool(
            np.all(np.asarray(edges) == edges[0])
        )
        if not shared:  # quantile bins: each class has its own edges
            return super()._map_columns(P)
        _step_map_inplace(P, edges[0], np.asarray(self.bin_values_))

    def _torch_map(self):
        from .._torch._export_piecewise import StepMap

        return StepMap(self.bin_edges_, self.bin_values_, closed="left"), False

    def _map_column(self, k, p):
        return self.bin_values_[k][assign_bins(p, self.bin_edges_[k], "left")]


class CenteredIsotonicCalibrator(IsotonicCalibrator):
    """One-vs-rest centred isotonic regression of each class's probability.

    Centred isotonic regression (CIR; Oron & Flournoy 2017) is isotonic
    regression made strictly increasing where the data allow it: the
    isotonic fit of ``y == k`` on ``p_k`` is constant on blocks of
    consecutive scores, and CIR collapses each block into one knot at the
    block's weighted mean score, valued at the block's frequency, and
    interpolates linearly between the knots. Blocks of value 0 or 1 keep
    both ends (as in the paper and in ``cir_model``, which probmetrics'
    ``cir`` wraps), and the first and last blocks keep their outer end: the
    map spans the calibration range and is constant outside it. Rows are
    then renormalised to sum to 1 after flooring the values at 1e-12, and a
    class with no calibration sample (of positive weight) gets the mean of
    the other classes' maps, as in :class:`IsotonicCalibrator`.

    Where isotonic regression returns a step function (flat stretches that
    tie scores of different rank), CIR is strictly increasing between the
    knots of blocks with values other than 0 and 1, so it keeps the order
    of the scores there.

    A constant stretch is found from the sums of its rows: neighbouring
    blocks of the pool-adjacent-violators fit whose values agree to
    rounding (1e-12, relative) are one stretch, so that rows of integer
    weight give the knots of the repeated rows (the running weighted means
    can leave one stretch as two blocks a unit in the last place apart).

    **Many classes.** As for :class:`IsotonicCalibrator`, each class's map
    is learned from its own positives: with many classes and few rows per
    class, prefer temperature scaling or a structured map.

    Parameters
    ----------
    input : {"logits", "proba"}, default="logits"
        What ``X`` holds; logits are turned into probabilities by softmax.
    classes : array-like of shape (n_classes,), default=None
        The label of each column of ``X``.
    verbose : int, default=0
        0: silent; 1: a progress bar over the classes' fits (stderr; 1,000
        classes of 50,000 rows take tens of seconds); 2: also a line per
        class.

    Attributes
    ----------
    thresholds_ : list of ndarray
        Per class, the ``p_k`` knots of the centred fit (increasing).
    values_ : list of ndarray
        Per class, the calibrated values at the knots (linear interpolation
        between them, constant outside).
    classes_ : ndarray of shape (n_classes,)
        Label of each column.
    n_features_in_ : int
        Number of columns of ``X``.

    Notes
    -----
    Matches probmetrics' ``cir`` (``cir_model.CenteredIsotonicRegression``
    one-vs-rest) up to its floor before renormalising (1e-30 there) and one
    corner: a class whose isotonic fit is a single block of a value other
    than 0 or 1 is constant here, where ``cir_model`` returns NaN above the
    block's mean score.

    References
    ----------
    A. P. Oron and N. Flournoy. "Centered isotonic regression: point and
    interval estimation for dose-response studies". Statistics in
    Biopharmaceutical Research 9(3), 258-267, 2017.

    Examples
    --------
    >>> import numpy as np
    >>> from skcal import CenteredIsotonicCalibrator
    >>> from skcal.utils._testing import make_miscalibrated_logits
    >>> logits, y = make_miscalibrated_logits(1000, 3, temperature=2.0, random_state=0)
    >>> cir = CenteredIsotonicCalibrator().fit(logits, y)
    >>> bool(np.all(np.diff(cir.values_[0]) >= 0))  # increasing map
    True
    >>> cir.predict_proba(logits).shape
    (1000, 3)
    """

    _parameter_constraints: dict = {
        **BaseCalibrator._parameter_constraints,
        "verbose": ["verbose"],
    }

    def __init__(self, *, input="logits", classes=None, verbose=0):
        self.input = input
        self.classes = classes
        self.verbose = verbose

    def n_free_parameters(self, n_classes, n_features=None):
        """``C``: at least one knot per class (non-parametric: the knots
        grow with the data)."""
        return n_classes

    def _fit_scores(self, scores, y_index, sample_weight):
        n_classes = scores.shape[1]
        self._progress = Progress(self.verbose, n_classes, type(self).__name__, "class")
        try:
            with self._progress:
                super()._fit_scores(scores, y_index, sample_weight)
                self._progress.end()  # classes without a sample are not fitted
        finally:
            del self._progress

    _knots = staticmethod(_centered_isotonic_knots)

    def _fit_class(self, k, scores, positive, sample_weight):
        super()._fit_class(k, scores, positive, sample_weight)
        self._progress.step(f"class {k}: {len(self.values_[k])} knots")
        return True


class ScalingBinningCalibrator(OneVsRestCalibrator):
    """Scaling-binning calibration (Kumar, Liang & Ma 2019), marginal or top-label.

    The scaling-binning calibrator first fits Platt's sigmoid ``q = 1 / (1 +
    exp(-(a s + b)))`` of the log-odds ``s = log(p / (1 - p))`` of a
    probability (clipped to ``[1e-12, 1 - 1e-12]``) by unregularised
    logistic regression, then puts the calibration values of ``q`` into
    ``n_bins`` equal-mass bins and outputs, for a new ``q``, the mean ``q``
    of the calibration rows of its bin: a discrete map whose calibration
    error can be measured, with the sample efficiency of the scaling step.

    * ``mode="marginal"``: one map per class, of ``p_k`` against ``y == k``
      (uncertainty-calibration's ``PlattBinnerMarginalCalibrator``); the
      rows are renormalised to sum to 1 after flooring the values at 1e-12.
      A class with no calibration sample (of positive weight) gets the mean
      slope and intercept of the other classes and the mean of their step
      maps (on the union of their edges). On many classes the top bin of
      each map (the top tenth of all rows) holds more negatives than
      positives, so unrelated classes get similar values and the top class
      of a row can move: on 26 classes (UCI letter, 4,000 rows) accuracy
      fell from 0.948 to 0.652. The fit then warns
      (:class:`~skcal.exceptions.AccuracyDropWarning`, measured on held-out
      folds of the calibration rows); ``mode="top_label"`` keeps the top
      class.
    * ``mode="top_label"``: one map of the top-label confidence ``max_k
      p_k`` against whether the argmax is right
      (``PlattBinnerTopCalibrator``). The argmax gets the calibrated
      confidence ``c``; the other classes share ``1 - c`` in proportion to
      their probabilities (evenly where those are all 0). :meth:`predict`
      is the argmax of these probabilities, which may differ from the
      argmax of ``X`` where ``c`` is low.

    The paper fits the sigmoid, the bins and the bin means on three
    disjoint parts of the calibration set (for its guarantees);
    uncertainty-calibration 0.1.4, whose maps this reproduces, fits all
    three on the whole set, and so does this class (no randomness).

    Parameters
    ----------
    input : {"logits", "proba"}, default="logits"
        What ``X`` holds; logits are turned into probabilities by softmax.
    classes : array-like of shape (n_classes,), default=None
        The label of each column of ``X``.
    n_bins : int, default=10
        Equal-mass bins per map (fewer if there are fewer calibration rows;
        bins with equal edges merge). The reference's examples use 10.
    mode : {"marginal", "top_label"}, default="marginal"
        One map per class, or one map of the top-label confidence.
    verbose : int, default=0
        0: silent; 1: a progress bar over the maps (stderr; 1,000 classes of
        50,000 rows take minutes); 2: also a line per map.

    Attributes
    ----------
    coef_ : ndarray of shape (n_maps,)
        The sigmoid's slope ``a`` of each map (``n_maps`` is the number of
        classes, or 1 for ``mode="top_label"``).
    intercept_ : ndarray of shape (n_maps,)
        The sigmoid's intercept ``b`` of each map.
    bin_edges_ : list of ndarray
        Per map, the bin edges on ``q``, from 0 to 1; bins are ``(l, u]``
        (the first holds 0).
    bin_values_ : list of ndarray
        Per map, the calibrated value of each bin.
    classes_ : ndarray of shape (n_classes,)
        Label of each column.
    n_features_in_ : int
        Number of columns of ``X``.

    Notes
    -----
    Data on which a class's probability separates its labels have no
    finite sigmoid: Newton's method then stops after 100 iterations with a
    steep one (and a ``ConvergenceWarning``), the reference with its own
    (``C=1e10``); the bins still hold the means of the calibration ``q``.

    References
    ----------
    A. Kumar, P. Liang and T. Ma. "Verified uncertainty calibration".
    Advances in Neural Information Processing Systems 32 (NeurIPS), 2019.

    Examples
    --------
    >>> import numpy as np
    >>> from skcal import ScalingBinningCalibrator
    >>> from skcal.utils._testing import make_miscalibrated_logits
    >>> logits, y = make_miscalibrated_logits(1000, 3, temperature=2.0, random_state=0)
    >>> sb = ScalingBinningCalibrator(n_bins=10).fit(logits, y)
    >>> [len(v) for v in sb.bin_values_]
    [10, 10, 10]
    >>> top = ScalingBinningCalibrator(mode="top_label").fit(logits, y)
    >>> top.bin_values_[0].shape  # one map, of the top-label confidence
    (10,)
    >>> proba = top.predict_proba(logits)
    >>> conf = proba[np.arange(len(proba)), logits.argmax(axis=1)]
    >>> len(np.unique(conf.round(8))) <= 10  # a discrete confidence
    True
    """

    _parameter_constraints: dict = {
        **BaseCalibrator._parameter_constraints,
        "n_bins": [Interval(Integral, 1, None, closed="left")],
        "mode": [StrOptions({"marginal", "top_label"})],
        "verbose": ["verbose"],
    }
    _unconverged_hint = (
        " (the class's probability may separate its labels: the sigmoid is "
        "steep; its bins still hold the calibration means)"
    )

    def __init__(
        self, *, input="logits", classes=None, n_bins=10, mode="marginal", verbose=0
    ):
        self.input = input
        self.classes = classes
        self.n_bins = n_bins
        self.mode = mode
        self.verbose = verbose

    def n_free_parameters(self, n_classes, n_features=None):
        """``2C`` (marginal) or 2 (top-label): the sigmoids' slopes and
        intercepts, the only parameters fitted to the labels (the bins and
        their values are functions of the calibration scores)."""
        return 2 if self.mode == "top_label" else 2 * n_classes

    def _start_maps(self, n_maps):
        self.coef_, self.intercept_ = np.empty(n_maps), np.empty(n_maps)
        self.bin_edges_, self.bin_values_ = [None] * n_maps, [None] * n_maps

    def _fit_class(self, k, scores, positive, sample_weight):
        a, b, edges, values, ok = _fit_scaling_binning(
            scores, positive, sample_weight, self.n_bins
        )
        self.coef_[k], self.intercept_[k] = a, b
        self.bin_edges_[k], self.bin_values_[k] = edges, values
        self._progress.step(f"map {k}: slope {a:.4g}, {len(values)} bins")
        return ok

    def _fill_absent(self, present):
        edges, values = _mean_right_step_map(
            [(self.bin_edges_[k], self.bin_values_[k]) for k in np.flatnonzero(present)]
        )
        a, b = self.coef_[present].mean(), self.intercept_[present].mean()
        for k in np.flatnonzero(~present):
            self.coef_[k], self.intercept_[k] = a, b
            self.bin_edges_[k], self.bin_values_[k] = edges, values

    def _fit_scores(self, P, y_index, sample_weight):
        n_maps = P.shape[1] if self.mode == "marginal" else 1
        self._progress = Progress(self.verbose, n_maps, type(self).__name__, "map")
        try:
            with self._progress:
                self._fit_maps(P, y_index, sample_weight)
        finally:
            del self._progress
        self._store_zones()

    def _fit_maps(self, P, y_index, sample_weight):
        if self.mode == "marginal":
            return super()._fit_scores(P, y_index, sample_weight)
        top = np.argmax(P, axis=1)
        confidence = P[np.arange(len(P)), top]
        self._start_maps(1)
        if not self._fit_class(0, confidence, top == y_index, sample_weight):
            warn(
                f"{type(self).__name__}: Newton's method did not converge for "
                f"the top-label map in 100 iterations{self._unconverged_hint}.",
                ConvergenceWarning,
            )

    def _torch_map(self):
        from .._torch._export_piecewise import ScalingBinningMap, TopLabelShares

        mapping = ScalingBinningMap(
            self.coef_, self.intercept_, self.bin_edges_, self.bin_values_
        )
        return (mapping if self.mode == "marginal" else TopLabelShares(mapping)), False

    def _map_column(self, k, p):
        a, b = self.coef_[k], self.intercept_[k]
        edges, values = self.bin_edges_[k], self.bin_values_[k]
        return _scaling_binning_map(p, a, b, edges, values, self._zones_of(k))

    def _store_zones(self):
        """The cuts of :func:`_safe_zones` of each map, with what they were
        computed from (prediction needs them for every call)."""
        self._zones = [
            (a, b, edges.copy(), _safe_zones(a, b, edges[1:]))
            for a, b, edges in zip(self.coef_, self.intercept_, self.bin_edges_)
        ]

    def _zones_of(self, k):
        """The stored cuts of map ``k``, or False if its map has changed
        since (or they were never stored)."""
        stored = getattr(self, "_zones", None)
        if stored is None or k >= len(stored):
            return False
        a, b, edges, zones = stored[k]
        same = a == self.coef_[k] and b == self.intercept_[k]
        # by value: fitted edges edited in place (or reloaded) are seen
        return zones if same and np.array_equal(edges, self.bin_edges_[k]) else False

    def _calibrated_proba(self, logits, P=None):
        P = probabilities_of(logits, P)
        if self.mode == "marginal":
            return map_transposed(P, logits, self._map_column)
        rows = np.arange(len(P))
        top = np.argmax(P, axis=1)
        confidence = P[rows, top]
        calibrated = self._map_column(0, confidence)
        P[rows, top] = 0.0
        rest = P.sum(axis=1)
        has_rest = rest > 0
        # the shares first (each at most 1: no overflow for a tiny rest)
        np.divide(P, rest[:, None], out=P, where=has_rest[:, None])
        P *= (1.0 - calibrated)[:, None]
        if not has_rest.all():  # the argmax held all the mass: share evenly
            even = (1.0 - calibrated[~has_rest]) / max(P.shape[1] - 1, 1)
            P[~has_rest] = even[:, None]
        P[rows, top] = calibrated
        return renormalize_inplace(P, logits)
