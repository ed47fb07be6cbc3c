"""Numerical kernels of the calibrators and metrics (torch, any device)."""

from ._affine import AffineFit, fit_affine_softmax
from ._cts import binned_ece, class_temperature_search
from ._kcal import cv_log_loss, fit_kcal, golden_section_min
from ._kcal import kernel_proba as kcal_proba
from ._kcal import project as kcal_project
from ._local import grouped_kernel_sums, local_errors
from ._local_net import fit_local_net, local_net_predict
from ._procal import gaussian_kde_2d, knn_sq_distances
from ._pts import fit_pts, pts_predict_logits
from ._smart import (
    fit_smart,
    logit_gaps,
    smart_predict_temperature,
)
from ._soft_ece import soft_binned_ece
from ._softmax import softmax_inplace
from ._temperature import TemperatureObjective, logit_scale
from ._vq import calibrated_logits as vq_calibrated_logits
from ._vq import fit_calibra, fit_divide
from ._vq import head_log_proba as vq_head_log_proba

__all__ = [
    "AffineFit",
    "TemperatureObjective",
    "logit_scale",
    "binned_ece",
    "class_temperature_search",
    "fit_affine_softmax",
    "fit_pts",
    "cv_log_loss",
    "fit_calibra",
    "fit_divide",
    "fit_kcal",
    "fit_smart",
    "golden_section_min",
    "kcal_proba",
    "kcal_project",
    "gaussian_kde_2d",
    "knn_sq_distances",
    "fit_local_net",
    "grouped_kernel_sums",
    "local_errors",
    "local_net_predict",
    "logit_gaps",
    "pts_predict_logits",
    "smart_predict_temperature",
    "soft_binned_ece",
    "softmax_inplace",
    "vq_calibrated_logits",
    "vq_head_log_proba",
]
