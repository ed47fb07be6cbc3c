"""The exported block of :class:`~skcal.shift.PriorShiftAdapter`: calibrated
probabilities re-weighted to new class priors, in torch and ONNX."""

from __future__ import annotations

import numpy as np
import torch

from ._export import ExportModule

__all__ = ["PriorReweight"]


class PriorReweight(ExportModule):
    """Rows of probabilities times ``weights``, divided by their sums.

    The sums are floored at the smallest normal number of the dtype, so that
    a row whose weighted probabilities are all 0 stays 0 instead of NaN.
    """

    def __init__(self, weights):
        super().__init__()
        self._constant("weights", weights)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x * self.weights.to(x.dtype)
        sums = x.sum(dim=-1, keepdim=True)
        return x / torch.clamp(sums, min=torch.finfo(x.dtype).tiny)

    @torch.jit.ignore
    def onnx(self, g, x: str) -> str:
        x = g.op("Mul", x, g.const(self._value("weights"), "prior_weights"))
        tiny = g.const(np.array(np.finfo(g.dtype).tiny))
        return g.op("Div", x, g.op("Max", g.reduce("ReduceSum", x), tiny))
