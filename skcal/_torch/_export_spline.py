"""The exported block of spline calibration (:class:`SplineTopLabel`)."""

from __future__ import annotations

import numpy as np
import torch

from ._export import onnx_next_up
from ._export_exact import ExactSoftmax, SnapToKnots
from ._export_piecewise import (
    _DOUBLE,
    Float64Block,
    PiecewiseLinear,
    Probabilities,
    _const,
    _onnx_top_mask,
    _top_mask,
)
from ._export_tva import _ahead, _hold_strict

__all__ = ["SplineTopLabel"]


class SplineTopLabel(Float64Block):
    """Scores to spline-calibrated probabilities, as
    ``SplineCalibrator.predict_proba``.

    The top class (the first maximum of the logits, or of the validated
    probabilities ``P`` for ``input="proba"``) gets ``c = clip(interp(p_top,
    scores, calibrated), *bounds)``, ``p_top`` the softmax's top entry
    (:class:`~skcal._torch._export_exact.ExactSoftmax`, put on a
    calibration score within rounding of it), or ``P``'s. With ``z`` the
    logits (``log P``), divided by ``temperature``, and ``e_j = exp(z_j -
    z_2)`` of the others (``z_2`` their largest), ``c`` is raised to the
    share of a tie ``1 / (1 + sum e)``, the others get ``(1 - c) e_j / sum
    e`` (computed from the logits: exact where their probabilities
    underflow), and the top class ``max(c, largest other)``, the next float
    above the largest other where its logit is strictly the largest
    (``torch.nextafter``; :func:`~skcal._torch._export.onnx_next_up` in
    ONNX). ``c`` and ``1 - c`` are floored at ``floor``. Float64 inside;
    a float32 output holds the top class strictly first again in float32.
    """

    def __init__(self, input, n_classes, proba_floor, scores, calibrated,
                 bounds, temperature, floor):  # fmt: skip
        super().__init__()
        self.register_buffer("dtype_marker", torch.zeros((), dtype=torch.float64))
        self.proba = input == "proba"
        self.probabilities = Probabilities("proba", n_classes, proba_floor)
        self.softmax = ExactSoftmax(n_classes)
        self.snap = SnapToKnots([scores])
        self.map = PiecewiseLinear([scores], [calibrated])
        self.tempered = float(temperature) != 1.0
        self._constant("low", bounds[0])
        self._constant("high", bounds[1])
        self._constant("temperature", temperature)
        self._constant("floor", floor)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        dtype = x.dtype
        x = x.to(torch.float64)
        if self.proba:
            P = self.probabilities(x)
            z = torch.log(P)
            top = _top_mask(P)
        else:
            P = self.softmax(x)
            # float32 logits: predict_proba shifts them by their maximum
            z = x if dtype == torch.float64 else x - torch.amax(x, -1, keepdim=True)
            top = _top_mask(x)
        s = torch.where(top, P, torch.zeros_like(P)).sum(dim=-1, keepdim=True)
        if not self.proba:
            s = self.snap(s)
        c = torch.minimum(torch.maximum(self.map(s), self.low), self.high)
        if self.tempered:
            z = z / self.temperature
        out = self._shares(z, top, c)
        if dtype == torch.float64:
            return out
        return self._strict_top(out.to(dtype), top, z)

    def _shares(self, z: torch.Tensor, top: torch.Tensor, c: torch.Tensor):
        rest_z = torch.where(top, torch.full_like(z, -float("inf")), z)
        second = torch.amax(rest_z, dim=-1, keepdim=True)
        e = torch.exp(rest_z - second)
        total = e.sum(dim=-1, keepdim=True)
        c = torch.maximum(c, 1.0 / (1.0 + total))
        others = e / total * torch.maximum(1.0 - c, self.floor)
        return self._strict_top(torch.where(top, torch.maximum(c, self.floor), others),
                                top, z)  # fmt: skip

    def _strict_top(self, q: torch.Tensor, top: torch.Tensor, z: torch.Tensor):
        """The top entry of ``q`` at least the largest other, and the next
        float above it where ``z`` puts the top class strictly first."""
        return _hold_strict(q, top, _ahead(z, top))

    @torch.jit.ignore
    def onnx(self, g, x: str) -> str:
        x64 = x if g.dtype == np.float64 else g.op("Cast", x, to=_DOUBLE)
        if self.proba:
            P = self.probabilities.onnx(g, x64)
            z, top = g.op("Log", P), _onnx_top_mask(g, P)
        else:
            P = self.softmax.onnx(g, x64)
            z, top = x64, _onnx_top_mask(g, x64)
            if g.dtype != np.float64:  # float32 logits: shifted (see forward)
                z = g.op("Sub", x64, g.reduce("ReduceMax", x64))
        s = g.reduce("ReduceSum", g.op("Where", top, P, _const(g, 0.0)))
        if not self.proba:
            s = self.snap.onnx(g, s)
        c = g.op("Max", self.map.onnx(g, s), self._f64(g, "low"))
        c = g.op("Min", c, self._f64(g, "high"))
        if self.tempered:
            z = g.op("Div", z, self._f64(g, "temperature"))
        out = self._onnx_shares(g, z, top, c)
        if g.dtype == np.float64:
            return out
        out = g.op("Cast", out, to=1)  # FLOAT
        return self._onnx_strict_top(g, out, top, z, np.float32)

    @torch.jit.ignore
    def _onnx_shares(self, g, z: str, top: str, c: str) -> str:
        one, floor = _const(g, 1.0), self._f64(g, "floor")
        rest_z = g.op("Where", top, _const(g, -np.inf), z)
        second = g.reduce("ReduceMax", rest_z)
        e = g.op("Exp", g.op("Sub", rest_z, second))
        total = g.reduce("ReduceSum", e)
        c = g.op("Max", c, g.op("Div", one, g.op("Add", one, total)))
        rest = g.op("Max", g.op("Sub", one, c), floor)
        others = g.op("Mul", g.op("Div", e, total), rest)
        q = g.op("Where", top, g.op("Max", c, floor), others)
        return self._onnx_strict_top(g, q, top, z, np.float64)

    @torch.jit.ignore
    def _onnx_strict_top(self, g, q: str, top: str, z: str, dtype) -> str:
        from onnx import numpy_helper

        def const(value):
            array = np.asarray(value, dtype=dtype)
            return g.op("Constant", value=numpy_helper.from_array(array))

        low = const(-np.inf)
        other = g.reduce("ReduceMax", g.op("Where", top, low, q))
        value = g.op("Max", g.reduce("ReduceMax", g.op("Where", top, q, low)), other)
        z_low = _const(g, -np.inf)
        z_top = g.reduce("ReduceMax", g.op("Where", top, z, z_low))
        ahead = g.op(
            "Greater", z_top, g.reduce("ReduceMax", g.op("Where", top, z_low, z))
        )
        level = g.op("And", ahead, g.op("LessOrEqual", value, other))
        with g.precision(dtype):  # constants of the type of ``other``
            up = onnx_next_up(g, other)
        value = g.op("Where", level, up, value)
        return g.op("Where", top, value, q)
