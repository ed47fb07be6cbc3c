"""Exported blocks that reproduce numpy's rounding where a step reads it.

A step map (Venn-Abers' tables) or a steep segment (spline calibration's
map between close calibration scores) magnifies a difference of one unit
in the last place of its input. Two blocks keep the scores of the exports
on the side of a calibration score that numpy's puts them on:

* :class:`ExactSoftmax`: the softmax ``exp(z - max) / sum`` with the row
  sum added in numpy's own order (its pairwise summation of a contiguous
  row), so that only the exponentials can differ from numpy's (torch's,
  onnxruntime's and numpy's ``exp`` disagree in the last place on 5-15%
  of float64 entries);
* :class:`SnapToKnots`: a score within a few units in the last place of a
  calibration score (the same row's, seen through another ``exp``) is put
  on it.
"""

from __future__ import annotations

import numpy as np
import torch

from ._export_piecewise import Float64Block, StepMap, _const, _int

__all__ = ["ExactSoftmax", "SnapToKnots", "pairwise_plan"]


def pairwise_plan(n: int) -> tuple[list[int], list[int], int]:
    """numpy's pairwise summation of ``n`` contiguous entries, as additions
    of slots: slots ``0..n-1`` are the entries, addition ``i`` (of slots
    ``a[i]`` and ``b[i]``) writes slot ``n + i``; returns ``(a, b, out)``.

    numpy sums fewer than 8 entries left to right, up to 128 in eight
    interleaved partial sums combined as ``((r0 + r1) + (r2 + r3)) + ((r4 +
    r5) + (r6 + r7))`` followed by the remainder, and more by halves (the
    first a multiple of 8).
    """
    a: list[int] = []
    b: list[int] = []

    def add(x: int, y: int) -> int:
        a.append(x)
        b.append(y)
        return n + len(a) - 1

    def total(slots: list[int]) -> int:
        k = len(slots)
        if k < 8:
            out = slots[0]
            for s in slots[1:]:
                out = add(out, s)
            return out
        if k > 128:
            half = k // 2
            half -= half % 8
            return add(total(slots[:half]), total(slots[half:]))
        r = list(slots[:8])
        i = 8
        while i < k - k % 8:
            r = [add(r[j], slots[i + j]) for j in range(8)]
            i += 8
        left = add(add(r[0], r[1]), add(r[2], r[3]))
        out = add(left, add(add(r[4], r[5]), add(r[6], r[7])))
        for s in slots[i:]:
            out = add(out, s)
        return out

    out = total(list(range(n)))
    return a, b, out


class ExactSoftmax(Float64Block):
    """Row softmax of float64 logits as :func:`~skcal.utils._softmax.softmax_into`
    computes it: ``exp(z - max)`` divided by its row sum, the sum added in
    numpy's order (:func:`pairwise_plan`)."""

    def __init__(self, n_classes: int):
        super().__init__()
        self.n_classes = int(n_classes)
        self.sum_a, self.sum_b, self.sum_out = pairwise_plan(self.n_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        e = torch.exp(x - torch.amax(x, dim=-1, keepdim=True))
        slots = [e[:, k : k + 1] for k in range(self.n_classes)]
        for i in range(len(self.sum_a)):
            slots.append(slots[self.sum_a[i]] + slots[self.sum_b[i]])
        return e / slots[self.sum_out]

    @torch.jit.ignore
    def onnx(self, g, x: str) -> str:
        e = g.op("Exp", g.op("Sub", x, g.reduce("ReduceMax", x)))
        slots = [g.op("Gather", e, _int(g, [k]), axis=1) for k in range(self.n_classes)]
        for i in range(len(self.sum_a)):
            slots.append(g.op("Add", slots[self.sum_a[i]], slots[self.sum_b[i]]))
        return g.op("Div", e, slots[self.sum_out])


#: a score this close to a calibration score, relatively (8 units in the
#: last place), is put on it: the exports' softmax entries are within 5 of
#: numpy's (26 classes; 2 to 4 with fewer), and every unit more moves
#: more rows that are not a calibration row onto one
SNAP_ULPS = 8.0
#: above this score the snapping is off: there the floats are so dense in
#: the data that a distinct score may lie next to a calibration score, and
#: the softmax's top entry ``1 / (1 + small)`` is numpy's bit for bit
#: (the row sum absorbs the exponentials' last places)
SNAP_BELOW = 1.0 - 2.0**-20


class SnapToKnots(Float64Block):
    """Column ``k`` of the scores put on the nearest of its calibration
    scores ``knots[k]`` where one lies within :data:`SNAP_ULPS` units in
    the last place (relative) and the score is at most :data:`SNAP_BELOW`.

    The nearest calibration scores below and above are looked up by two
    :class:`StepMap` (the knots' values read at the count of knots ``<=``
    the score, and ``<`` it)."""

    def __init__(self, knots):
        super().__init__()
        knots = [np.asarray(k, dtype=np.float64) for k in knots]
        edges = [np.concatenate([[-np.inf], k, [np.inf]]) for k in knots]
        below = [np.concatenate([[-np.inf], k]) for k in knots]
        above = [np.concatenate([k, [np.inf]]) for k in knots]
        self.below = StepMap(edges, below, closed="left")
        self.above = StepMap(edges, above, closed="right")
        self._constant("relative", SNAP_ULPS * np.finfo(np.float64).eps)
        self._constant("limit", SNAP_BELOW)

    def forward(self, s: torch.Tensor) -> torch.Tensor:
        low, high = self.below(s), self.above(s)
        down, up = s - low, high - s
        tol = torch.where(s <= self.limit, s * self.relative, torch.zeros_like(s))
        to_low = (down <= tol) & (down <= up)
        to_high = (up <= tol) & (up < down)
        return torch.where(to_low, low, torch.where(to_high, high, s))

    @torch.jit.ignore
    def onnx(self, g, s: str) -> str:
        low, high = self.below.onnx(g, s), self.above.onnx(g, s)
        down, up = g.op("Sub", s, low), g.op("Sub", high, s)
        scaled = g.op("Mul", s, self._f64(g, "relative"))
        free = g.op("LessOrEqual", s, self._f64(g, "limit"))
        tol = g.op("Where", free, scaled, _const(g, 0.0))
        to_low = g.op("And", g.op("LessOrEqual", down, tol),
                      g.op("LessOrEqual", down, up))  # fmt: skip
        to_high = g.op("And", g.op("LessOrEqual", up, tol), g.op("Less", up, down))
        return g.op("Where", to_low, low, g.op("Where", to_high, high, s))
