"""Numerical kernels of the calibrators and metrics (torch, any device)."""

from ._affine import AffineFit, fit_affine_softmax
from ._cts import binned_ece, class_temperature_search
from ._kcal import (
    KCalBandwidth,
    KCalFit,
    fit_kcal,
    golden_section_min,
    kcal_cv_log_loss,
    kcal_proba,
    kcal_project,
    select_kcal_bandwidth,
)
from ._local import LocalErrorsResult, local_anchor_errors
from ._local_net import LocalNetFit, fit_local_net, local_net_predict
from ._procal import density_ratio_confidence, knn_proximity
from ._pts import PTSFit, fit_pts, pts_predict_logits
from ._rff import (
    RFFErrorsResult,
    RFFSumsResult,
    rff_anchor_errors,
    rff_frequencies,
    rff_group_sums,
)
from ._smart import (
    SmartFit,
    fit_smart,
    fit_smart_topk,
    logit_gaps,
    smart_gap_temperature,
    smart_predict_proba,
    smart_predict_temperature,
)
from ._soft_ece import (
    SoftBinSumsResult,
    soft_bin_sums_value,
    soft_binned_ece,
    soft_binned_ece_value,
    soft_error_from_sums_value,
)
from ._softmax import affine_rows, softmax_inplace
from ._temperature import TemperatureObjective, logit_scale
from ._vq import (
    CalibraFit,
    CompositionalMap,
    DivideFit,
    GlobalDirichletMap,
    QuantizedHead,
    fit_compositional_map,
    fit_divide,
    fit_global_dirichlet_map,
)
from ._vq import calibrated_proba as vq_calibrated_proba
from ._vq import head_log_proba as vq_head_log_proba

__all__ = [
    "AffineFit",
    "TemperatureObjective",
    "logit_scale",
    "binned_ece",
    "class_temperature_search",
    "fit_affine_softmax",
    "fit_pts",
    "PTSFit",
    "KCalBandwidth",
    "KCalFit",
    "LocalNetFit",
    "density_ratio_confidence",
    "kcal_cv_log_loss",
    "select_kcal_bandwidth",
    "CalibraFit",
    "CompositionalMap",
    "DivideFit",
    "GlobalDirichletMap",
    "QuantizedHead",
    "fit_compositional_map",
    "fit_divide",
    "fit_global_dirichlet_map",
    "fit_kcal",
    "fit_smart",
    "fit_smart_topk",
    "SmartFit",
    "golden_section_min",
    "kcal_proba",
    "kcal_project",
    "knn_proximity",
    "fit_local_net",
    "LocalErrorsResult",
    "local_anchor_errors",
    "local_net_predict",
    "logit_gaps",
    "pts_predict_logits",
    "smart_gap_temperature",
    "smart_predict_proba",
    "smart_predict_temperature",
    "RFFErrorsResult",
    "RFFSumsResult",
    "SoftBinSumsResult",
    "rff_anchor_errors",
    "rff_frequencies",
    "rff_group_sums",
    "soft_bin_sums_value",
    "soft_binned_ece",
    "soft_binned_ece_value",
    "soft_error_from_sums_value",
    "affine_rows",
    "softmax_inplace",
    "vq_calibrated_proba",
    "vq_head_log_proba",
]
