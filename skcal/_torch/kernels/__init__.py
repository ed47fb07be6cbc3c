"""Numerical kernels of the calibrators and metrics (torch, any device)."""

from ._affine import AffineFit, fit_affine_softmax
from ._cts import binned_ece, class_temperature_search
from ._pts import fit_pts, pts_predict_logits
from ._softmax import softmax_inplace
from ._temperature import TemperatureObjective

__all__ = [
    "AffineFit",
    "TemperatureObjective",
    "binned_ece",
    "class_temperature_search",
    "fit_affine_softmax",
    "fit_pts",
    "pts_predict_logits",
    "softmax_inplace",
]
