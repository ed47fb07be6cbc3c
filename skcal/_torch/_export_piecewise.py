"""Exported blocks of the one-vs-rest calibrators: per-class maps and the
renormalisation of their rows.

Every map here reads the probabilities of the classes (:class:`Probabilities`
turns the scores into them as the calibrators' validation does) and writes
its value per class; :class:`OneVsRest` then floors and divides the rows as
:func:`~skcal.calibrators._one_vs_rest.renormalize_inplace` does. The lookups
are written with ops that both torch and ONNX have: a segment or bin index is
the number of thresholds a value reaches, found by an unrolled binary search
(gather, compare, select) in the thresholds of all classes stored flat, and
the per-class tables are gathered from flat arrays at that index.

**Always float64 inside.** The calibrators cast float32 scores to float64
and compute there; a step map then puts a value on a bin edge on the side
the float64 comparison gives, and a steep isotonic segment (slope 1e4 and
more between close knots) magnifies any rounding of its input. So these
blocks compute in float64 whatever the input's dtype, and return the
input's dtype: their constants stay float64 buffers when the module is
converted (``.float()`` changes only the dtype of the output; ``.to(device)``
moves them), and a float32 ONNX graph casts its input to double, uses
double constants and casts its output back to float.
"""

from __future__ import annotations

import numpy as np
import torch

from ._export import ExportModule

__all__ = [
    "BetaMap",
    "OneVsRest",
    "PiecewiseLinear",
    "PlattMap",
    "Probabilities",
    "ScalingBinningMap",
    "StepMap",
    "TopLabelShares",
]

_DOUBLE = 11  # onnx.TensorProto.DOUBLE
_INT64 = 7  # onnx.TensorProto.INT64
_INT32 = 6  # onnx.TensorProto.INT32


def _const(g, value) -> str:
    """A float64 constant of the graph ``g``, whatever ``g.dtype`` (an
    initializer of a float64 graph, a ``Constant`` node otherwise)."""
    array = np.asarray(value, dtype=np.float64)
    if g.dtype == np.float64:
        return g.const(array)
    from onnx import numpy_helper

    return g.op("Constant", value=numpy_helper.from_array(array))


def _int(g, value) -> str:
    """An int64 constant of ``g``."""
    return g.const(np.asarray(value, dtype=np.int64))


def _int32(g, value) -> str:
    """An int32 constant of ``g`` (an int64 tensor or array of indices)."""
    from onnx import numpy_helper

    if isinstance(value, torch.Tensor):
        value = value.detach().cpu().numpy()
    array = np.asarray(value, dtype=np.int32)
    return g.op("Constant", value=numpy_helper.from_array(array))


def _flat(rows) -> tuple[np.ndarray, np.ndarray]:
    """The 1-D arrays ``rows`` concatenated in float64 without padding (one
    0 after them, so that the array is never empty), and the index where
    each row starts."""
    rows = [np.asarray(row, dtype=np.float64).ravel() for row in rows]
    sizes = np.array([row.size for row in rows], dtype=np.int64)
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
    return np.concatenate([*rows, [0.0]]), starts


class Float64Block(ExportModule):
    """A block whose float64 constants stay float64 under ``.float()``,
    ``.half()`` or ``.to(dtype)`` (they move with ``.to(device)``): it
    computes in float64 (see the module docstring)."""

    def _apply(self, fn, recurse=True):
        kept = {
            name: buffer
            for name, buffer in self._buffers.items()
            if buffer is not None and buffer.dtype == torch.float64
        }
        super()._apply(fn, recurse)
        for name, old in kept.items():
            new = self._buffers[name]
            if new is not None and new.dtype != torch.float64:
                self._buffers[name] = old.to(device=new.device)
        return self

    @torch.jit.ignore
    def _f64(self, g, name: str) -> str:
        """The float64 buffer ``name`` as a float64 constant of ``g``."""
        return _const(g, self._value(name))


class _Lookup(Float64Block):
    """Shared code of the per-class tables: how many thresholds of its class
    each entry reaches, found by a binary search in one flat array.

    The thresholds of class ``k`` (nondecreasing) are ``knots[start_k :
    end_k]`` of the flat float64 buffer ``knots``, without padding: the
    constants grow with the total number of thresholds, and the search
    holds a few arrays of the input's shape (no ``(n, classes, width)``
    comparison). The search descends by powers of two, ``2**(steps - 1)``
    down to 1 with ``2**steps > max(end_k - start_k)``: the position
    ``pos`` (from ``start_k``) moves by ``step`` where ``knots[pos + step -
    1] <= x``, the index clamped to the class's last threshold, as if the
    class went on repeating it (a nondecreasing array whose count of
    entries ``<= x`` is the class's own count, or more where all of them
    are reached); the result is ``pos`` clamped to ``end_k``. It is the
    count of thresholds ``<= x`` plus ``start_k``: the same comparisons as
    a linear count, so a value on a threshold is counted as reaching it.
    """

    def _thresholds(self, rows, knots=None, starts=None) -> None:
        """Store the thresholds ``rows`` (one nondecreasing array per class)
        as the buffer ``knots``; or, given ``starts``, read them in the flat
        buffer ``knots`` (stored by the caller) from ``starts``."""
        sizes = np.array([np.size(row) for row in rows], dtype=np.int64)
        if knots is None:
            knots, starts = _flat(rows)
            self._constant("knots", knots)
        self.steps = int(sizes.max(initial=0)).bit_length()
        ends = np.asarray(starts, dtype=np.int64) + sizes
        for name, value in (
            ("starts", starts),
            ("ends", ends),
            ("lasts", np.maximum(ends - 1, starts)),
        ):
            value = np.array(value, dtype=np.int64)
            self.register_buffer(name, torch.from_numpy(value))

    def _count(self, xt: torch.Tensor) -> torch.Tensor:
        """The flat counts of the transposed input ``xt`` (a contiguous row
        per class: a class's knots are read in a run, from the cache)."""
        # ``below = pos - 1``: the index read at a step is ``below + step``
        # (clamped), the new position where that knot is reached
        below = self.starts.unsqueeze(1).expand(xt.shape) - 1
        lasts = self.lasts.unsqueeze(1)
        for i in range(self.steps):
            ahead = below + (1 << (self.steps - 1 - i))
            index = torch.minimum(ahead, lasts)
            below = torch.where(torch.take(self.knots, index) <= xt, ahead, below)
        return torch.minimum(below + 1, self.ends.unsqueeze(1))

    @torch.jit.ignore
    def _onnx_count(self, g, xt: str, knots: str) -> str:
        """:meth:`_count` in ONNX of the transposed input ``xt`` (a row
        per class: a class's knots are read one after the other, from the
        cache), flattened: ``knots`` the name of the buffer as a ``(1,
        total)`` constant of ``g``; returns the counts of ``xt`` as int32 of
        shape ``(1, xt.size)`` (for :meth:`_onnx_take`).

        Written for onnxruntime's CPU kernels (1.32): indices in int32 (half
        the memory traffic of int64), the knots read by GatherElements of
        one row (eight times faster than Gather, which copies entry by
        entry), and a step taken as ``below + reached * step`` (a Where on
        int32 costs several times its Cast, Mul and Add)."""
        shape, flat = g.op("Shape", xt), _int(g, [1, -1])

        def spread(value):  # a per-class int32 constant, at every entry
            column = _int32(g, value[:, None])
            return g.op("Reshape", g.op("Expand", column, shape), flat)

        x, lasts, below = (
            g.op("Reshape", xt, flat),
            spread(self.lasts),
            spread(self.starts - 1),
        )
        for i in range(self.steps):
            step = _int32(g, 1 << (self.steps - 1 - i))
            index = g.op("Min", g.op("Add", below, step), lasts)
            knot = g.op("GatherElements", knots, index, axis=1)
            reached = g.op("Cast", g.op("LessOrEqual", knot, x), to=_INT32)
            below = g.op("Add", below, g.op("Mul", reached, step))
        return g.op("Min", g.op("Add", below, _int32(g, 1)), spread(self.ends))

    @torch.jit.ignore
    def _onnx_row(self, g, name: str) -> str:
        """The flat float64 buffer ``name`` as a ``(1, size)`` constant."""
        return _const(g, self._value(name)[None])

    @torch.jit.ignore
    def _onnx_column(self, g, name: str) -> str:
        """The per-class float64 buffer ``name`` as a ``(classes, 1)``
        constant (for the transposed input)."""
        return _const(g, self._value(name)[:, None])

    @torch.jit.ignore
    def _onnx_take(self, g, table: str, index: str, x: str) -> str:
        """The entries ``index`` (from :meth:`_onnx_count`) of the ``(1,
        size)`` constant ``table``, in the shape of ``x``."""
        taken = g.op("GatherElements", table, index, axis=1)
        return g.op("Reshape", taken, g.op("Shape", x))


class StepMap(_Lookup):
    """Per-class step maps: ``values[k][bin]`` of column ``k``.

    ``edges[k]`` are the bin edges of class ``k`` (``values[k]`` has one
    fewer entry); only the interior edges matter, as the calibrators clip
    the bin to the first and last. ``closed="left"``: bins ``[l, u)`` (the
    bin is the number of interior edges ``<= p``, as
    :func:`~skcal.metrics._binning.assign_bins` with ``"left"``);
    ``closed="right"``: bins ``(l, u]`` (the number of interior edges
    ``< p``, as ``np.searchsorted(edges[1:-1], p, "left")``: ``p > t`` is
    ``p >= nextafter(t, inf)``). The edges and values of all classes are
    stored flat (see :class:`_Lookup`).
    """

    def __init__(self, edges, values, closed: str = "left"):
        super().__init__()
        interior = [np.asarray(e, dtype=np.float64)[1:-1] for e in edges]
        values = [np.asarray(v, dtype=np.float64) for v in values]
        for e, v in zip(interior, values):
            if v.size != e.size + 1:
                raise ValueError(
                    f"a step map needs one value per bin: {e.size + 2} edges "
                    f"and {v.size} values."
                )
        if closed == "right":
            interior = [np.nextafter(e, np.inf) for e in interior]
        self._thresholds(interior)
        table, table_starts = _flat(values)
        self._constant("table", table)
        # a class's values start ``shift`` after its thresholds
        shift = table_starts - self.starts.numpy()
        self.register_buffer("shift", torch.from_numpy(shift))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xt = x.t().contiguous()
        return torch.take(self.table, self._count(xt) + self.shift.unsqueeze(1)).t()

    @torch.jit.ignore
    def onnx(self, g, x: str) -> str:
        xt = g.op("Transpose", x, perm=[1, 0])
        count = self._onnx_count(g, xt, self._onnx_row(g, "knots"))
        shift = g.op("Expand", _int32(g, self.shift[:, None]), g.op("Shape", xt))
        index = g.op("Add", count, g.op("Reshape", shift, _int(g, [1, -1])))
        out = self._onnx_take(g, self._onnx_row(g, "table"), index, xt)
        return g.op("Transpose", out, perm=[1, 0])


class PiecewiseLinear(_Lookup):
    """Per-class ``np.interp(p, xp[k], fp[k])`` of column ``k``.

    np.interp's semantics: ``fp[0]`` below ``xp[0]``, ``fp[-1]`` from
    ``xp[-1]`` on, and in between the segment ``j`` with ``xp[j] <= p <
    xp[j + 1]`` (with repeated ``xp``, the last of the tied knots: the value
    to the right of a jump), evaluated as ``slope_j (p - xp[j]) + fp[j]``
    with numpy's slope ``(fp[j + 1] - fp[j]) / (xp[j + 1] - xp[j])``; where
    that is not finite (knots closer than ~1e-308), the fraction of the
    segment, as :func:`~skcal.utils._proba.interp` does. A single knot is
    a constant map. The knots of all classes are stored flat (the buffers
    ``knots`` and ``values``), the segment found by a binary search among
    each class's interior knots (see :class:`_Lookup`).
    """

    def __init__(self, xp, fp):
        super().__init__()
        xp = [np.asarray(x, dtype=np.float64).ravel() for x in xp]
        fp = [np.asarray(f, dtype=np.float64).ravel() for f in fp]
        xp = [x if x.size > 1 else np.repeat(x, 2) for x in xp]
        fp = [f if f.size > 1 else np.repeat(f, 2) for f in fp]
        knots, starts = _flat(xp)
        self._constant("knots", knots)
        self._constant("values", _flat(fp)[0])
        # the segment: 1 + the number of interior knots reached, from start
        self._thresholds([x[1:-1] for x in xp], knots, starts + 1)
        for name, value in (
            ("first_x", [x[0] for x in xp]),
            ("first_f", [f[0] for f in fp]),
            ("last_x", [x[-1] for x in xp]),
            ("last_f", [f[-1] for f in fp]),
        ):
            self._constant(name, value)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.t().contiguous()  # a row per class (see _count)
        j = self._count(x)  # the flat index of the segment's right knot
        x0, x1 = torch.take(self.knots, j - 1), torch.take(self.knots, j)
        f0, f1 = torch.take(self.values, j - 1), torch.take(self.values, j)
        dx = x - x0
        width = x1 - x0
        value = ((f1 - f0) / width) * dx + f0
        # knots too close for the slope: the fraction of the segment
        t = torch.clamp(dx / width, 0.0, 1.0)
        t = torch.where(torch.isfinite(t), t, torch.ones_like(t))
        value = torch.where(torch.isfinite(value), value, f0 + t * (f1 - f0))
        last_x, last_f = self.last_x.unsqueeze(1), self.last_f.unsqueeze(1)
        value = torch.where(x >= last_x, last_f, value)
        first_x, first_f = self.first_x.unsqueeze(1), self.first_f.unsqueeze(1)
        return torch.where(x >= first_x, value, first_f).t()

    @torch.jit.ignore
    def onnx(self, g, x: str) -> str:
        x = g.op("Transpose", x, perm=[1, 0])  # a row per class
        knots, values = self._onnx_row(g, "knots"), self._onnx_row(g, "values")
        j = self._onnx_count(g, x, knots)
        i = g.op("Sub", j, _int32(g, 1))
        x0, x1 = (self._onnx_take(g, knots, at, x) for at in (i, j))
        f0, f1 = (self._onnx_take(g, values, at, x) for at in (i, j))
        dx, width, rise = g.op("Sub", x, x0), g.op("Sub", x1, x0), g.op("Sub", f1, f0)
        value = g.op("Add", g.op("Mul", g.op("Div", rise, width), dx), f0)
        t = g.op("Clip", g.op("Div", dx, width), _const(g, 0.0), _const(g, 1.0))
        t = g.op("Where", _onnx_isfinite(g, t), t, _const(g, 1.0))
        steep = g.op("Add", f0, g.op("Mul", t, rise))
        value = g.op("Where", _onnx_isfinite(g, value), value, steep)
        last = g.op("GreaterOrEqual", x, self._onnx_column(g, "last_x"))
        value = g.op("Where", last, self._onnx_column(g, "last_f"), value)
        first = g.op("GreaterOrEqual", x, self._onnx_column(g, "first_x"))
        value = g.op("Where", first, value, self._onnx_column(g, "first_f"))
        return g.op("Transpose", value, perm=[1, 0])


def _onnx_sigmoid(g, x: str) -> str:
    """``1 / (1 + exp(-x))`` to a few units in the last place, relative:
    ``e / (1 + e)`` of ``e = exp(-|x|)`` for negative ``x`` (onnxruntime's
    Sigmoid loses the relative precision of its small values there, which
    a bin edge near 0 of scaling-binning reads)."""
    e = g.op("Exp", g.op("Neg", g.op("Abs", x)))
    one = _const(g, 1.0)
    denominator = g.op("Add", one, e)
    positive = g.op("GreaterOrEqual", x, _const(g, 0.0))
    return g.op(
        "Where", positive, g.op("Div", one, denominator), g.op("Div", e, denominator)
    )


def _onnx_isfinite(g, x: str) -> str:
    """Whether each entry is finite: not NaN and not infinite."""
    return g.op("Not", g.op("Or", g.op("IsNaN", x), g.op("IsInf", x)))


class Probabilities(Float64Block):
    """The probabilities a one-vs-rest calibrator maps, from its scores
    (float64).

    ``input="logits"``: the softmax ``exp(z - max) / sum``, as
    :func:`~skcal.utils._softmax.softmax_into`. ``input="proba"``: as
    :func:`~skcal.utils._validation.check_probabilities` (``floor=True``)
    copies them: clipped to [0, 1], multiplied by the reciprocal of the row
    sum except for rows within ``n_classes`` units in the last place of 1
    (used as given), floored at ``floor``, and where a floor above
    float64's smallest normal number raised an entry, divided by the row's
    new sum.
    """

    def __init__(self, input: str, n_classes: int, floor: float):
        super().__init__()
        if input not in ("logits", "proba"):
            raise ValueError(f"input must be 'logits' or 'proba', got {input!r}.")
        self.proba = input == "proba"
        self.renormalize_raised = bool(floor > np.finfo(np.float64).tiny)
        self._constant("floor", floor)
        self._constant("ulps", n_classes * np.finfo(np.float64).eps)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.proba:
            e = torch.exp(x - torch.amax(x, dim=-1, keepdim=True))
            return e / e.sum(dim=-1, keepdim=True)
        x = torch.clamp(x, 0.0, 1.0)
        s = x.sum(dim=-1, keepdim=True)
        near = torch.abs(s - 1.0) <= self.ulps
        x = x * torch.where(near, torch.ones_like(s), 1.0 / s)
        floored = torch.maximum(x, self.floor)
        if not self.renormalize_raised:
            return floored
        raised = torch.amin(x, dim=-1, keepdim=True) < self.floor
        again = floored / floored.sum(dim=-1, keepdim=True)
        return torch.where(raised, again, floored)

    @torch.jit.ignore
    def onnx(self, g, x: str) -> str:
        if not self.proba:
            e = g.op("Exp", g.op("Sub", x, g.reduce("ReduceMax", x)))
            return g.op("Div", e, g.reduce("ReduceSum", e))
        one = _const(g, 1.0)
        x = g.op("Clip", x, _const(g, 0.0), one)
        s = g.reduce("ReduceSum", x)
        near = g.op(
            "LessOrEqual", g.op("Abs", g.op("Sub", s, one)), self._f64(g, "ulps")
        )
        x = g.op("Mul", x, g.op("Where", near, one, g.op("Div", one, s)))
        floor = self._f64(g, "floor")
        floored = g.op("Max", x, floor)
        if not self.renormalize_raised:
            return floored
        raised = g.op("Less", g.reduce("ReduceMin", x), floor)
        again = g.op("Div", floored, g.reduce("ReduceSum", floored))
        return g.op("Where", raised, again, floored)


class OneVsRest(Float64Block):
    """Scores to the renormalised one-vs-rest values of a calibrator.

    The input is cast to float64; its probabilities ``P``
    (:class:`Probabilities`) are mapped per class by ``mapping`` (which
    reads ``P``, or with ``reads_scores`` the scores themselves), floored at
    ``floor`` and divided by their row sums; a row with no positive value
    keeps ``P`` (the softmax of its logits), as
    :func:`~skcal.calibrators._one_vs_rest.renormalize_inplace` and
    ``map_transposed`` do. The result has the input's dtype.
    """

    def __init__(self, probabilities, mapping, floor: float, reads_scores=False):
        super().__init__()
        # the one float buffer that follows .float(): the dtype a caller
        # (skcal.export.check_export) reads as the module's
        self.register_buffer("dtype_marker", torch.zeros(()))
        self.probabilities = probabilities
        self.mapping = mapping
        self.reads_scores = bool(reads_scores)
        self._constant("floor", floor)

    def _apply(self, fn, recurse=True):
        marker = self._buffers["dtype_marker"]
        super()._apply(fn, recurse)
        self._buffers["dtype_marker"] = fn(marker)  # not kept in float64
        return self

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        dtype = x.dtype
        x = x.to(torch.float64)
        P = self.probabilities(x)
        Q = self.mapping(x if self.reads_scores else P)
        floored = torch.maximum(Q, self.floor)
        out = floored / floored.sum(dim=-1, keepdim=True)
        empty = torch.amax(Q, dim=-1, keepdim=True) <= 0.0
        return torch.where(empty, P, out).to(dtype)

    @torch.jit.ignore
    def onnx(self, g, x: str) -> str:
        if g.dtype != np.float64:
            x = g.op("Cast", x, to=_DOUBLE)
        P = self.probabilities.onnx(g, x)
        Q = self.mapping.onnx(g, x if self.reads_scores else P)
        floored = g.op("Max", Q, self._f64(g, "floor"))
        out = g.op("Div", floored, g.reduce("ReduceSum", floored))
        empty = g.op("LessOrEqual", g.reduce("ReduceMax", Q), _const(g, 0.0))
        out = g.op("Where", empty, P, out)
        if g.dtype != np.float64:
            out = g.op("Cast", out, to=1)  # FLOAT
        return out


def _top_mask(x: torch.Tensor) -> torch.Tensor:
    """Whether each entry is its row's first maximum (np.argmax's)."""
    top = torch.argmax(x, dim=-1, keepdim=True)
    return torch.arange(x.shape[-1], device=x.device) == top


def _onnx_top_mask(g, x: str) -> str:
    """:func:`_top_mask` in ONNX: ArgMax (first index) against a range."""
    top = g.op("ArgMax", x, axis=-1, keepdims=1, select_last_index=0)
    n = g.op("Gather", g.op("Shape", x), _int(g, -1))
    return g.op("Equal", g.op("Range", _int(g, 0), n, _int(g, 1)), top)


class PlattMap(Float64Block):
    """Per-class ``sigmoid(a_k s_k + b_k)`` of the log-odds ``s_k``.

    From probabilities (``from_logits=False``): ``log(p / (1 - p))`` with
    ``1 - p`` the sum of the other entries for each row's largest, as
    ``PlattCalibrator._map_probabilities``; from logits:
    ``log p_k - log(1 - p_k)`` from the shifted exponentials, the largest's
    as ``-log R`` (``R`` the sum of the others' ``exp(z_j - max)``), or
    where ``R`` is below ``sum_floor``, from the others' own maximum
    (``_class_log_odds``, whose ``SUM_FLOOR`` the calibrator passes).
    """

    def __init__(self, coef, intercept, from_logits: bool, sum_floor: float):
        super().__init__()
        self.from_logits = bool(from_logits)
        self._constant("coef", coef)
        self._constant("intercept", intercept)
        self._constant("sum_floor", sum_floor)

    def _log_odds_of_probabilities(self, p: torch.Tensor) -> torch.Tensor:
        top = _top_mask(p)
        others = torch.where(top, torch.zeros_like(p), p).sum(dim=-1, keepdim=True)
        return torch.log(p / torch.where(top, others.expand_as(p), 1.0 - p))

    def _log_odds_of_logits(self, z: torch.Tensor) -> torch.Tensor:
        top = _top_mask(z)
        m = torch.amax(z, dim=-1, keepdim=True)
        e = torch.where(top, torch.zeros_like(z), torch.exp(z - m))
        R = e.sum(dim=-1, keepdim=True)
        s = (z - m) - torch.log((R + 1.0) - e)
        # where R underflows: the others summed from their own maximum
        rest_z = torch.where(top, torch.full_like(z, -float("inf")), z)
        second = torch.amax(rest_z, dim=-1, keepdim=True)
        rest = torch.exp(rest_z - second).sum(dim=-1, keepdim=True)
        rest = second + torch.log(rest)
        small = R < self.sum_floor
        safe = torch.where(small, torch.ones_like(R), R)
        s_top = torch.where(small, m - rest, -torch.log(safe))
        return torch.where(top, s_top.expand_as(z), s)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.from_logits:
            s = self._log_odds_of_logits(x)
        else:
            s = self._log_odds_of_probabilities(x)
        return torch.sigmoid(s * self.coef + self.intercept)

    @torch.jit.ignore
    def onnx(self, g, x: str) -> str:
        s = self._onnx_logits(g, x) if self.from_logits else self._onnx_proba(g, x)
        s = g.op("Add", g.op("Mul", s, self._f64(g, "coef")), self._f64(g, "intercept"))
        return _onnx_sigmoid(g, s)

    @torch.jit.ignore
    def _onnx_proba(self, g, p: str) -> str:
        top = _onnx_top_mask(g, p)
        others = g.reduce("ReduceSum", g.op("Where", top, _const(g, 0.0), p))
        s = g.op("Where", top, others, g.op("Sub", _const(g, 1.0), p))
        return g.op("Log", g.op("Div", p, s))

    @torch.jit.ignore
    def _onnx_logits(self, g, z: str) -> str:
        top = _onnx_top_mask(g, z)
        one = _const(g, 1.0)
        m = g.reduce("ReduceMax", z)
        e = g.op("Where", top, _const(g, 0.0), g.op("Exp", g.op("Sub", z, m)))
        R = g.reduce("ReduceSum", e)
        log_others = g.op("Log", g.op("Sub", g.op("Add", R, one), e))
        s = g.op("Sub", g.op("Sub", z, m), log_others)
        rest_z = g.op("Where", top, _const(g, -np.inf), z)
        second = g.reduce("ReduceMax", rest_z)
        rest = g.reduce("ReduceSum", g.op("Exp", g.op("Sub", rest_z, second)))
        rest = g.op("Add", second, g.op("Log", rest))
        small = g.op("Less", R, self._f64(g, "sum_floor"))
        safe = g.op("Where", small, one, R)
        s_top = g.op(
            "Where", small, g.op("Sub", m, rest), g.op("Neg", g.op("Log", safe))
        )
        return g.op("Where", top, s_top, s)


#: beta calibration clips its probabilities to [eps, 1 - eps] (float64's eps)
_EPS = float(np.finfo(np.float64).eps)


class BetaMap(Float64Block):
    """Per-class ``sigmoid(a_k ln s - b_k ln(1 - s) + c_k)`` of ``s``
    clipped to ``[eps, 1 - eps]`` (float64's eps).

    From probabilities, ``ln`` of the clipped ``s`` and ``1 - s``, as
    ``BetaCalibrator._map_probabilities``; from logits,
    ``ln s`` as the log-softmax ``(z - m) - ln sum exp(z - m)`` clipped to
    ``[ln eps, ln(1 - eps)]`` and ``1 - s`` from the softmax, as its
    ``_calibrated_proba``.
    """

    def __init__(self, coef, intercept, from_logits: bool):
        super().__init__()
        coef = np.asarray(coef, dtype=np.float64)
        self.from_logits = bool(from_logits)
        self._constant("a", coef[:, 0])
        self._constant("minus_b", -coef[:, 1])
        self._constant("c", intercept)
        self._constant("eps", _EPS)
        self._constant("high", 1.0 - _EPS)
        self._constant("log_eps", np.log(_EPS))
        self._constant("log_high", np.log(1.0 - _EPS))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.from_logits:
            f = x - torch.amax(x, dim=-1, keepdim=True)
            e = torch.exp(f)
            total = e.sum(dim=-1, keepdim=True)
            s = e / total
            log_s = torch.clamp(f - torch.log(total), self.log_eps, self.log_high)
        else:
            s = x
            log_s = torch.log(torch.clamp(x, self.eps, self.high))
        log_rest = torch.log(torch.clamp(1.0 - s, self.eps, self.high))
        return torch.sigmoid(log_rest * self.minus_b + (log_s * self.a + self.c))

    @torch.jit.ignore
    def onnx(self, g, x: str) -> str:
        eps, high = self._f64(g, "eps"), self._f64(g, "high")
        if self.from_logits:
            f = g.op("Sub", x, g.reduce("ReduceMax", x))
            e = g.op("Exp", f)
            total = g.reduce("ReduceSum", e)
            s = g.op("Div", e, total)
            log_s = g.op("Sub", f, g.op("Log", total))
            log_s = g.op(
                "Clip", log_s, self._f64(g, "log_eps"), self._f64(g, "log_high")
            )
        else:
            s = x
            log_s = g.op("Log", g.op("Clip", x, eps, high))
        rest = g.op("Clip", g.op("Sub", _const(g, 1.0), s), eps, high)
        f = g.op("Add", g.op("Mul", log_s, self._f64(g, "a")), self._f64(g, "c"))
        f = g.op("Add", g.op("Mul", g.op("Log", rest), self._f64(g, "minus_b")), f)
        return _onnx_sigmoid(g, f)


#: scaling-binning clips probabilities to [1e-12, 1 - 1e-12] before log-odds
_SB_EPS = 1e-12


class ScalingBinningMap(Float64Block):
    """Per-class scaling-binning maps: ``values[k][bin(q)]`` of
    ``q = expit(a_k s + b_k)``, ``s = log(p) - log1p(-p)`` of ``p`` clipped
    to ``[1e-12, 1 - 1e-12]``, bins ``(l, u]`` (``_scaling_binning_map``).

    ``q`` is computed by the same formula in float64; a ``q`` within a few
    units in the last place of a bin edge may fall on the other side of it
    than numpy's (its ``log``, ``log1p`` and ``expit`` round differently
    from torch's and onnxruntime's).
    """

    def __init__(self, coef, intercept, edges, values):
        super().__init__()
        self._constant("coef", coef)
        self._constant("intercept", intercept)
        self._constant("low", _SB_EPS)
        self._constant("high", 1.0 - _SB_EPS)
        self.steps = StepMap(edges, values, closed="right")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        p = torch.clamp(x, self.low, self.high)
        s = torch.log(p) - torch.log1p(-p)
        return self.steps(torch.sigmoid(s * self.coef + self.intercept))

    @torch.jit.ignore
    def onnx(self, g, x: str) -> str:
        p = g.op("Clip", x, self._f64(g, "low"), self._f64(g, "high"))
        # log1p(-p) as log(1 - p): ONNX has no log1p; 1 - p is exact for
        # p >= 1/2, and for p < 1/2 the difference is below 1e-16 |s|
        s = g.op("Sub", g.op("Log", p), g.op("Log", g.op("Sub", _const(g, 1.0), p)))
        s = g.op("Add", g.op("Mul", s, self._f64(g, "coef")), self._f64(g, "intercept"))
        return self.steps.onnx(g, _onnx_sigmoid(g, s))


class TopLabelShares(Float64Block):
    """The top-label map of scaling-binning (``mode="top_label"``).

    Each row's first maximum ``c`` is mapped by ``mapping`` (one map, read
    on a column of its own); the other entries share ``1 - mapping(c)`` in
    proportion to their probabilities, or evenly where they are all 0, as
    ``ScalingBinningCalibrator._calibrated_proba`` does
    (the renormalisation follows in :class:`OneVsRest`).
    """

    def __init__(self, mapping):
        super().__init__()
        self.mapping = mapping

    def forward(self, p: torch.Tensor) -> torch.Tensor:
        top = _top_mask(p)
        zero = torch.zeros_like(p)
        calibrated = self.mapping(torch.where(top, p, zero).sum(dim=-1, keepdim=True))
        rest_p = torch.where(top, zero, p)
        rest = rest_p.sum(dim=-1, keepdim=True)
        has_rest = rest > 0.0
        safe = torch.where(has_rest, rest, torch.ones_like(rest))
        shares = (rest_p / safe) * (1.0 - calibrated)
        even = (1.0 - calibrated) / max(p.shape[-1] - 1, 1)
        shares = torch.where(has_rest, shares, even.expand_as(p))
        return torch.where(top, calibrated.expand_as(p), shares)

    @torch.jit.ignore
    def onnx(self, g, p: str) -> str:
        top = _onnx_top_mask(g, p)
        zero, one = _const(g, 0.0), _const(g, 1.0)
        calibrated = self.mapping.onnx(
            g, g.reduce("ReduceSum", g.op("Where", top, p, zero))
        )
        rest_p = g.op("Where", top, zero, p)
        rest = g.reduce("ReduceSum", rest_p)
        has_rest = g.op("Greater", rest, zero)
        left = g.op("Sub", one, calibrated)
        shares = g.op("Div", rest_p, g.op("Where", has_rest, rest, one))
        shares = g.op("Mul", shares, left)
        n = g.op("Gather", g.op("Shape", p), _int(g, -1))
        n = g.op("Max", g.op("Sub", n, _int(g, 1)), _int(g, 1))
        even = g.op("Div", left, g.op("Cast", n, to=_DOUBLE))
        shares = g.op("Where", has_rest, shares, even)
        return g.op("Where", top, calibrated, shares)
