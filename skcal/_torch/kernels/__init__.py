"""Numerical kernels of the calibrators and metrics (torch, any device)."""

from ._affine import AffineFit, fit_affine_softmax
from ._softmax import softmax_inplace
from ._temperature import TemperatureObjective

__all__ = [
    "AffineFit",
    "TemperatureObjective",
    "fit_affine_softmax",
    "softmax_inplace",
]
