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


def _layout(sizes) -> tuple[list[tuple[int, int, int, int]], np.ndarray]:
    """Groups of the classes of ``sizes`` thresholds: ``(first, end,
    offset, width)`` per group (rows ``first`` to ``end`` of the classes in
    the returned order, stored from ``offset`` of the flat tables as ``(end
    - first, width)``), and that order.

    A class of ``s`` thresholds has ``s + 1`` counts, and belongs to the
    group of the largest power of two ``m <= s + 1`` (the binary search of
    :meth:`_Lookup._onnx_count` takes the same steps for all its rows); a
    group's rows are as wide as its largest class's ``s + 1``, less than
    twice its smallest."""
    sizes = np.asarray(sizes, dtype=np.int64)
    powers = np.array([int(s + 1).bit_length() for s in sizes], dtype=np.int64)
    order = np.argsort(powers, kind="stable")
    groups, first, offset = [], 0, 0
    for power in np.unique(powers):
        end = first + int(np.count_nonzero(powers == power))
        width = int(sizes[order[first:end]].max()) + 1
        groups.append((first, end, offset, width))
        offset += (end - first) * width
        first = end
    return groups, order


class Float64Block(ExportModule):
    """A block whose float64 constants stay float64 under ``.float()``,
    ``.half()`` or ``.to(dtype)`` (they move with ``.to(device)``): it
    computes in float64 (see the module docstring). A buffer named
    ``dtype_marker`` follows the conversions: it tells a caller the dtype
    the module was converted to."""

    def _apply(self, fn, recurse=True):
        # torch has no public hook to keep a buffer's dtype under .float() or
        # .to(dtype): _apply is what they all call (torch pinned at 2.13)
        kept = {
            name: buffer
            for name, buffer in self._buffers.items()
            if buffer is not None
            and buffer.dtype == torch.float64
            and name != "dtype_marker"
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
    each entry reaches, and the entry of a per-class table at that count.

    The classes are grouped by their number of thresholds (:func:`_layout`):
    the rows of a group are ``[first, t_1, ..., t_s, inf...]``, the class's
    thresholds after a first entry ``first <= t_1`` (``-inf``, or a value a
    subclass reads at count 0) and padded with ``inf`` to the group's
    width, stored flat in the buffer ``knots`` with those of the other
    groups; the per-class tables (``s + 1`` entries, one per count) alike.
    The input is transposed (a row per class) and its rows put in the
    groups' order (``order``); each group is searched in its own rows and
    the results put back in the classes' order (``inverse``): the constants
    stay within twice the total number of thresholds, the work of a class
    follows its own number of thresholds, and no ``(n, classes, width)``
    comparison is ever made.

    In torch a group's count is ``torch.searchsorted(..., right=True)`` row
    by row, less the first entry; in ONNX an unrolled binary search
    (:meth:`_onnx_count`). Both count the thresholds ``<= x`` (a value on a
    threshold reaches it), at most ``s`` (an ``inf`` input reaches no
    padding).
    """

    def _thresholds(self, rows, first=None) -> None:
        """Store the thresholds ``rows`` (one nondecreasing array per
        class) in the groups' layout, after ``first`` (one value per class,
        ``-inf`` if None)."""
        sizes = np.array([np.size(row) for row in rows], dtype=np.int64)
        self.groups, order = _layout(sizes)
        for name, value in (
            ("order", order),
            ("inverse", np.argsort(order)),
            ("sizes", sizes[order]),
        ):
            self.register_buffer(name, torch.from_numpy(np.array(value, np.int64)))
        self.in_order = bool(np.all(order == np.arange(order.size)))
        first = np.full(len(rows), -np.inf) if first is None else first
        rows = [np.concatenate([[f], np.ravel(r)]) for f, r in zip(first, rows)]
        self._constant("knots", self._padded(rows, np.inf))

    def _padded(self, rows, fill: float = 0.0, last: bool = False) -> np.ndarray:
        """The per-class arrays ``rows`` (each at most its group's width) in
        the groups' layout, padded with ``fill`` (or each row's last entry),
        flat, as float64."""
        order = self.order.numpy()
        blocks = []
        for first, end, _, width in self.groups:
            block = np.full((end - first, width), fill, dtype=np.float64)
            for i, k in enumerate(order[first:end]):
                row = np.asarray(rows[k], dtype=np.float64).ravel()
                block[i, : row.size] = row
                if last and row.size:
                    block[i, row.size :] = row[-1]
            blocks.append(block.ravel())
        return np.concatenate(blocks)

    def _block(
        self, table: torch.Tensor, first: int, end: int, offset: int, width: int
    ) -> torch.Tensor:
        """The rows of a group in the flat padded ``table``."""
        return table[offset : offset + (end - first) * width].view(end - first, width)

    def _take(
        self,
        table: torch.Tensor,
        count: torch.Tensor,
        first: int,
        end: int,
        offset: int,
        width: int,
    ) -> torch.Tensor:
        """The entries ``count`` of the rows of a group of ``table``."""
        return torch.gather(self._block(table, first, end, offset, width), 1, count)

    def _count(
        self, x: torch.Tensor, first: int, end: int, offset: int, width: int
    ) -> torch.Tensor:
        """The counts of the rows ``x`` of a group (see the class): one
        less than ``searchsorted``'s, as each row starts with ``first``.
        The subclasses keep their inputs within the thresholds' range, or
        pad their tables with the values of the largest count."""
        knots = self._block(self.knots, first, end, offset, width)
        return torch.searchsorted(knots, x, right=True).sub_(1)

    def _map(
        self, x: torch.Tensor, first: int, end: int, offset: int, width: int
    ) -> torch.Tensor:
        """The values of the rows ``x`` of a group (a subclass's map)."""
        raise NotImplementedError

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # a row per class: a class's knots are read in a run, from the cache
        xt = x.to(torch.float64).t().contiguous()
        if self.in_order:  # the groups are runs of classes
            parts: list[torch.Tensor] = []
            for first, end, offset, width in self.groups:
                parts.append(self._map(xt[first:end], first, end, offset, width))
            out = parts[0] if len(parts) == 1 else torch.cat(parts)
            return out.t()
        out = torch.empty(xt.shape, dtype=torch.float64, device=xt.device)
        for first, end, offset, width in self.groups:
            rows = self.order[first:end]
            # indexing: several times faster than index_select / index_copy_
            out[rows] = self._map(xt[rows], first, end, offset, width)
        return out.t()

    @torch.jit.ignore
    def _onnx_map(self, g, x: str, group) -> str:
        """:meth:`_map` in ONNX."""
        raise NotImplementedError

    @torch.jit.ignore
    def onnx(self, g, x: str) -> str:
        xt = g.op("Transpose", x, perm=[1, 0])
        parts = []
        for first, end, offset, width in self.groups:
            if self.in_order:
                part = xt
                if len(self.groups) > 1:
                    starts, ends = _int(g, [first]), _int(g, [end])
                    part = g.op("Slice", xt, starts, ends, _int(g, [0]))
            else:
                part = g.op("Gather", xt, _int(g, self.order[first:end]))
            parts.append(self._onnx_map(g, part, (first, end, offset, width)))
        out = g.op("Concat", *parts, axis=0) if len(parts) > 1 else parts[0]
        if not self.in_order:
            out = g.op("Gather", out, _int(g, self.inverse))
        return g.op("Transpose", out, perm=[1, 0])

    @torch.jit.ignore
    def _onnx_block(self, g, name: str, group) -> str:
        """The rows of a group of the flat buffer ``name``, a constant."""
        first, end, offset, width = group
        value = self._value(name)[offset : offset + (end - first) * width]
        return _const(g, value.reshape(end - first, width))

    @torch.jit.ignore
    def _onnx_count(self, g, x: str, group) -> str:
        """:meth:`_count` in ONNX, int32, of the rows ``x`` of a group.

        With ``m`` the group's power of two (:func:`_layout`), a class of
        ``s`` thresholds has its count in ``[0, m - 1]`` or in ``[s + 1 - m,
        s]``: the first step moves to ``s + 1 - m`` where the threshold of
        that rank (a per-class column) is ``<= x``; the next ``log2(m)``
        steps move ``pos`` by ``step`` (``m / 2`` down to 1) where the
        threshold ``pos + step`` is ``<= x``: never past ``s``, so no
        padding is read. A step is ``pos + reached * step``, the thresholds
        read by GatherElements along the rows (onnxruntime's CPU kernels: a
        Where on int32 costs several times the Cast, Mul and Add; int32
        indices halve the memory traffic)."""
        first, end, offset, width = group
        sizes = self.sizes[first:end].numpy()
        m = 1 << (int(sizes[0] + 1).bit_length() - 1)
        rows = self._value("knots")[offset : offset + (end - first) * width]
        rows = rows.reshape(end - first, width)
        knots = _const(g, rows)
        jump = sizes + 1 - m  # 0 where s + 1 = m
        if jump.any():
            column = np.where(jump > 0, rows[np.arange(jump.size), jump], np.inf)
            reached = g.op("LessOrEqual", _const(g, column[:, None]), x)
            pos = g.op(
                "Mul", g.op("Cast", reached, to=_INT32), _int32(g, jump[:, None])
            )
        else:
            pos = g.op("Mul", g.op("Cast", x, to=_INT32), _int32(g, 0))  # zeros
        step = m >> 1
        while step:
            index = g.op("Add", pos, _int32(g, step))
            knot = g.op("GatherElements", knots, index, axis=1)
            reached = g.op("Cast", g.op("LessOrEqual", knot, x), to=_INT32)
            pos = g.op("Add", pos, g.op("Mul", reached, _int32(g, step)))
            step >>= 1
        return pos

    @torch.jit.ignore
    def _onnx_take(self, g, name: str, group, count: str) -> str:
        """The entries ``count`` of the rows of a group of the table ``name``."""
        return g.op("GatherElements", self._onnx_block(g, name, group), count, axis=1)


class StepMap(_Lookup):
    """Per-class step maps: ``values[k][bin]`` of column ``k``.

    ``edges[k]`` are the bin edges of class ``k`` (``values[k]`` has one
    fewer entry); only the interior edges matter, as the calibrators clip
    the bin to the first and last. ``closed="left"``: bins ``[l, u)`` (the
    bin is the number of interior edges ``<= p``, as
    :func:`~skcal.metrics._binning.assign_bins` with ``"left"``);
    ``closed="right"``: bins ``(l, u]`` (the number of interior edges
    ``< p``, as ``np.searchsorted(edges[1:-1], p, "left")``: ``p > t`` is
    ``p >= nextafter(t, inf)``). The edges and values of the classes are
    stored grouped by size (see :class:`_Lookup`).
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
        # padded with each class's last value: the count of an inf input
        self._constant("table", self._padded(values, last=True))

    def _map(
        self, x: torch.Tensor, first: int, end: int, offset: int, width: int
    ) -> torch.Tensor:
        count = self._count(x, first, end, offset, width)
        return self._take(self.table, count, first, end, offset, width)

    @torch.jit.ignore
    def _onnx_map(self, g, x: str, group) -> str:
        return self._onnx_take(g, "table", group, self._onnx_count(g, x, group))


def _segments(x: np.ndarray, f: np.ndarray) -> dict[str, np.ndarray]:
    """np.interp's segments of the knots ``x`` and values ``f`` (at least
    two), by the count ``c`` of knots ``<= p``: ``f0`` and
    numpy's ``slope`` of segment ``c - 1`` for ``0 < c < n``, and for
    ``c = 0`` and ``c = n`` the first and last values with slope 0; with
    each segment's ``width`` and ``rise`` (for the steep ones)."""
    width, rise = np.diff(x), np.diff(f)
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        slope = np.where(width > 0, rise / np.where(width > 0, width, 1.0), 0.0)
    return {
        "f0": np.concatenate([[f[0]], f[:-1], [f[-1]]]),
        "slope": np.concatenate([[0.0], slope, [0.0]]),
        "width": np.concatenate([[1.0], width, [1.0]]),
        "rise": np.concatenate([[0.0], rise, [0.0]]),
    }


class PiecewiseLinear(_Lookup):
    """Per-class ``np.interp(p, xp[k], fp[k])`` of column ``k``.

    np.interp's semantics: ``fp[0]`` below ``xp[0]``, ``fp[-1]`` from
    ``xp[-1]`` on, and in between the segment ``j`` with ``xp[j] <= p <
    xp[j + 1]`` (with repeated ``xp``, the last of the tied knots: the value
    to the right of a jump), evaluated as ``slope_j (p - xp[j]) + fp[j]``
    with numpy's slope ``(fp[j + 1] - fp[j]) / (xp[j + 1] - xp[j])``; where
    that is not finite (knots closer than ~1e-308), the fraction of the
    segment, as :func:`~skcal.utils._proba.interp` does. A single knot is
    a constant map.

    The segment is the count ``c`` of knots ``<= p`` (see :class:`_Lookup`),
    its ``xp[j]``, ``fp[j]`` and slope (computed here, as numpy does) read
    from per-class tables of ``n + 1`` entries, the two ends' a slope of 0
    on ``p`` clamped to ``[xp[0], xp[-1]]``. The fraction of a steep
    segment is computed only where a class has one (``steep``).
    """

    def __init__(self, xp, fp):
        super().__init__()
        xp = [np.asarray(x, dtype=np.float64).ravel() for x in xp]
        fp = [np.asarray(f, dtype=np.float64).ravel() for f in fp]
        xp = [x if x.size > 1 else np.repeat(x, 2) for x in xp]
        fp = [f if f.size > 1 else np.repeat(f, 2) for f in fp]
        # the knots after xp[0]: the row is the x0 of every count
        self._thresholds(xp, first=[x[0] for x in xp])
        segments = [_segments(x, f) for x, f in zip(xp, fp)]
        for name in ("f0", "slope"):  # padded for a NaN input's count
            self._constant(name, self._padded([s[name] for s in segments], last=True))
        self.steep = not all(np.isfinite(s["slope"]).all() for s in segments)
        for name, fill in (("width", 1.0), ("rise", 0.0)):
            rows = [s[name] for s in segments]
            self._constant(name, self._padded(rows, fill) if self.steep else [])
        order = self.order.numpy()
        self._constant("low", [xp[k][0] for k in order])
        self._constant("high", [xp[k][-1] for k in order])

    def _map(
        self, x: torch.Tensor, first: int, end: int, offset: int, width: int
    ) -> torch.Tensor:
        low = self.low[first:end].unsqueeze(1)
        x = torch.clamp(x, low, self.high[first:end].unsqueeze(1))
        count = self._count(x, first, end, offset, width)
        x0 = self._take(self.knots, count, first, end, offset, width)
        f0 = self._take(self.f0, count, first, end, offset, width)
        slope = self._take(self.slope, count, first, end, offset, width)
        # in place on the arrays made here: fewer fresh arrays to fault in
        dx = x.sub_(x0)
        value = slope.mul_(dx).add_(f0)
        if self.steep:
            span = self._take(self.width, count, first, end, offset, width)
            rise = self._take(self.rise, count, first, end, offset, width)
            t = torch.clamp(dx / span, 0.0, 1.0)
            t = torch.where(torch.isfinite(t), t, torch.ones_like(t))
            value = torch.where(torch.isfinite(value), value, f0 + t * rise)
        return value

    @torch.jit.ignore
    def _onnx_map(self, g, x: str, group) -> str:
        count = self._onnx_count(g, x, group)
        x0, f0, slope = (
            self._onnx_take(g, name, group, count) for name in ("knots", "f0", "slope")
        )
        first, end = group[:2]
        low, high = (
            _const(g, self._value(name)[first:end, None]) for name in ("low", "high")
        )
        dx = g.op("Sub", g.op("Min", g.op("Max", x, low), high), x0)
        value = g.op("Add", g.op("Mul", slope, dx), f0)
        if self.steep:
            width, rise = (
                self._onnx_take(g, name, group, count) for name in ("width", "rise")
            )
            t = g.op("Clip", g.op("Div", dx, width), _const(g, 0.0), _const(g, 1.0))
            t = g.op("Where", _onnx_isfinite(g, t), t, _const(g, 1.0))
            steep = g.op("Add", f0, g.op("Mul", t, rise))
            value = g.op("Where", _onnx_isfinite(g, value), value, steep)
        return value


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
