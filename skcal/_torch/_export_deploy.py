"""Deployment in torch: the exported block of
:class:`~skcal.shift.PriorShiftAdapter` (calibrated probabilities re-weighted
to new class priors, in torch and ONNX), and the TorchScript files that
``skcal export`` writes and checks."""

from __future__ import annotations

import warnings

import numpy as np
import torch

from ._export import ExportModule, run_module

__all__ = ["PriorReweight", "run_script", "save_script"]


def save_script(module, path: str, dtype) -> None:
    """Script ``module`` in ``dtype`` (float32 or float64) and save it."""
    module = module.to(torch.float64 if dtype == np.float64 else torch.float32)
    with warnings.catch_warnings():  # TorchScript's deprecation notice
        warnings.simplefilter("ignore", DeprecationWarning)
        torch.jit.script(module).save(path)


def run_script(path: str, X: np.ndarray) -> np.ndarray:
    """The output of the TorchScript file ``path`` for ``X``, as float64."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        module = torch.jit.load(path, map_location="cpu")
    return run_module(module, X)


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
