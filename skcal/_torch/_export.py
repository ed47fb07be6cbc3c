"""Torch modules of fitted calibrators, and their ONNX graphs.

Each block is an :class:`ExportModule`: ``forward`` computes in the dtype
of its input (any float dtype; the constants are float64 buffers, so
``.float()``, ``.double()`` and ``.to(device)`` work), and ``onnx(g, x)``
appends the same computation, op for op, to a
:class:`~skcal.export._graph.GraphBuilder` and returns its output's name.
A calibrator's ``to_torch`` chains the blocks of its prediction
(:class:`Chain`): the input handling of :class:`ScoresToLogits`, its map,
and :class:`Softmax`. The modules hold plain tensors and torch code only,
so a module scripted by :func:`torch.jit.script` and saved runs where skcal
is not installed.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

__all__ = [
    "Affine",
    "Chain",
    "ExportModule",
    "LogSoftmax",
    "ScoresToLogits",
    "Softmax",
    "Temperature",
]

#: the smallest normal float32: the floor of probabilities before their logs
#: in float32 (a float64 floor below it would round to 0, whose log is -inf)
_FLOAT32_TINY = float(np.finfo(np.float32).tiny)


class ExportModule(nn.Module):
    """Base of the exported blocks: float64 buffers, an ``onnx`` method."""

    def _constant(self, name: str, value) -> None:
        """Register ``value`` as the float64 buffer ``name``."""
        array = np.array(value, dtype=np.float64)
        self.register_buffer(name, torch.from_numpy(array))

    @torch.jit.ignore
    def onnx(self, g, x: str) -> str:
        """Append this block's ONNX nodes to ``g`` after ``x``; return the
        name of its output."""
        raise NotImplementedError

    @torch.jit.ignore
    def _value(self, name: str) -> np.ndarray:
        """The buffer ``name`` as a float64 numpy array (for ``onnx``)."""
        return getattr(self, name).detach().cpu().double().numpy()


class Chain(ExportModule):
    """The blocks applied one after the other."""

    def __init__(self, *blocks: ExportModule):
        super().__init__()
        self.blocks = nn.ModuleList(blocks)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = block(x)
        return x

    @torch.jit.ignore
    def onnx(self, g, x: str) -> str:
        for block in self.blocks:
            x = block.onnx(g, x)
        return x


class ScoresToLogits(ExportModule):
    """A calibrator's input handling: scores to the logits it maps.

    ``input="proba"``: rows clipped to [0, 1], divided by their sums,
    floored at ``proba_floor`` (at least float32's smallest normal number in
    float32) and logged. ``input="logits"``: the row maximum subtracted
    with ``shift`` (shift-invariant calibrators), else unchanged.
    """

    def __init__(self, input: str, proba_floor: float, shift: bool):
        super().__init__()
        if input not in ("logits", "proba"):
            raise ValueError(f"input must be 'logits' or 'proba', got {input!r}.")
        self.input = input
        self.proba = input == "proba"
        self.shift = bool(shift)
        self._constant("floor64", proba_floor)
        self._constant("floor32", max(proba_floor, _FLOAT32_TINY))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.proba:
            x = torch.clamp(x, 0.0, 1.0)
            x = x / x.sum(dim=-1, keepdim=True)
            floor = self.floor64 if x.dtype == torch.float64 else self.floor32
            return torch.log(torch.maximum(x, floor.to(x.dtype)))
        if self.shift:
            return x - torch.amax(x, dim=-1, keepdim=True)
        return x

    @torch.jit.ignore
    def onnx(self, g, x: str) -> str:
        if self.proba:
            x = g.op("Clip", x, g.const(np.array(0.0)), g.const(np.array(1.0)))
            x = g.op("Div", x, g.reduce("ReduceSum", x))
            floor = self._value("floor64" if g.dtype == np.float64 else "floor32")
            return g.op("Log", g.op("Max", x, g.const(floor, "proba_floor")))
        if self.shift:
            return g.op("Sub", x, g.reduce("ReduceMax", x))
        return x


class LogSoftmax(ExportModule):
    """Row log-softmax (last axis): logits to log-probabilities."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.log_softmax(x, dim=-1)

    @torch.jit.ignore
    def onnx(self, g, x: str) -> str:
        return g.op("LogSoftmax", x, axis=-1)


class Softmax(ExportModule):
    """Row softmax (last axis), computed stably."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=-1)

    @torch.jit.ignore
    def onnx(self, g, x: str) -> str:
        return g.op("Softmax", x, axis=-1)


class Temperature(ExportModule):
    """``x / temperature`` (a scalar or one per column), plus ``bias`` if
    given."""

    def __init__(self, temperature, bias=None):
        super().__init__()
        self._constant("temperature", temperature)
        self.has_bias = bias is not None
        self._constant("bias", 0.0 if bias is None else bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x / self.temperature.to(x.dtype)
        if self.has_bias:
            x = x + self.bias.to(x.dtype)
        return x

    @torch.jit.ignore
    def onnx(self, g, x: str) -> str:
        x = g.op("Div", x, g.const(self._value("temperature"), "temperature"))
        if self.has_bias:
            x = g.op("Add", x, g.const(self._value("bias"), "bias"))
        return x


class Affine(ExportModule):
    """``x @ coef.T + intercept``, or ``x * coef + intercept`` for a 1-D
    ``coef`` (a diagonal map)."""

    def __init__(self, coef, intercept):
        super().__init__()
        coef = np.asarray(coef, dtype=np.float64)
        self.diagonal = coef.ndim == 1
        self._constant("coef", coef if self.diagonal else coef.T)
        self._constant("intercept", intercept)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        coef = self.coef.to(x.dtype)
        if self.diagonal:
            x = x * coef
        else:
            x = torch.matmul(x, coef)
        return x + self.intercept.to(x.dtype)

    @torch.jit.ignore
    def onnx(self, g, x: str) -> str:
        op = "Mul" if self.diagonal else "MatMul"
        x = g.op(op, x, g.const(self._value("coef"), "coef"))
        return g.op("Add", x, g.const(self._value("intercept"), "intercept"))
