"""Numerical kernels of the calibrators and metrics (torch, any device)."""

from ._affine import AffineFit, fit_affine_softmax
from ._cts import binned_ece, class_temperature_search
from ._local import local_errors
from ._pts import fit_pts, pts_predict_logits
from ._smart import (
    fit_smart,
    logit_gaps,
    smart_predict_logits,
    smart_predict_temperature,
)
from ._soft_ece import soft_binned_ece
from ._softmax import softmax_inplace
from ._temperature import TemperatureObjective

__all__ = [
    "AffineFit",
    "TemperatureObjective",
    "binned_ece",
    "class_temperature_search",
    "fit_affine_softmax",
    "fit_pts",
    "fit_smart",
    "local_errors",
    "logit_gaps",
    "pts_predict_logits",
    "smart_predict_logits",
    "smart_predict_temperature",
    "soft_binned_ece",
    "softmax_inplace",
]
