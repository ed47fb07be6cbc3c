"""Calibration metrics (plain functions) and scorers for model selection."""

from ._binning import BinStatistics, bin_edges, binned_statistics
from ._cumulative import (
    CumulativeCalibration,
    brownian_max_abs_cdf,
    brownian_range_cdf,
    cumulative_calibration_error,
    cumulative_calibration_test,
    ecce_binned_mean,
)
from ._debiased import l2_calibration_error
from ._ece import (
    classwise_calibration_error,
    expected_calibration_error,
    max_calibration_error,
)
from ._groups import (
    MAX_GROUPS,
    GroupDifferenceTest,
    GroupedMetricState,
    GroupedResult,
)
from ._local import (
    ESSProfile,
    LocalCalibrationErrors,
    LocalSpace,
    effective_sample_size,
    ess_profile,
    local_bandwidth,
    local_calibration_error,
    local_calibration_errors,
    max_local_calibration_error,
)
from ._mmce import maximum_mean_calibration_error
from ._proper import brier_score, negative_log_likelihood
from ._report import CalibrationReport, calibration_report
from ._scorer import (
    CalibrationScorer,
    LocalCalibrationScorer,
    get_scorer,
    get_scorer_names,
)
from ._selective import (
    augrc,
    aurc,
    coverage_at_risk,
    eaurc,
    risk_coverage_curve,
    selective_risk,
)
from ._smooth import smooth_expected_calibration_error
from ._soft import soft_binned_calibration_error, soft_expected_calibration_error
from ._spiegelhalter import SpiegelhalterTest, spiegelhalter_test
from ._state import MetricState, mergeable_metrics, metric_state
from ._uncertainty import (
    ConfidenceInterval,
    PairedComparison,
    confidence_interval,
    paired_comparison,
)

__all__ = [
    "BinStatistics",
    "CalibrationReport",
    "ConfidenceInterval",
    "ESSProfile",
    "LocalCalibrationErrors",
    "LocalCalibrationScorer",
    "LocalSpace",
    "PairedComparison",
    "SpiegelhalterTest",
    "CalibrationScorer",
    "bin_edges",
    "binned_statistics",
    "brier_score",
    "calibration_report",
    "classwise_calibration_error",
    "confidence_interval",
    "CumulativeCalibration",
    "brownian_max_abs_cdf",
    "brownian_range_cdf",
    "cumulative_calibration_error",
    "cumulative_calibration_test",
    "ecce_binned_mean",
    "effective_sample_size",
    "ess_profile",
    "local_bandwidth",
    "expected_calibration_error",
    "get_scorer",
    "get_scorer_names",
    "l2_calibration_error",
    "local_calibration_error",
    "local_calibration_errors",
    "max_calibration_error",
    "max_local_calibration_error",
    "maximum_mean_calibration_error",
    "mergeable_metrics",
    "metric_state",
    "MetricState",
    "negative_log_likelihood",
    "paired_comparison",
    "smooth_expected_calibration_error",
    "soft_binned_calibration_error",
    "soft_expected_calibration_error",
    "spiegelhalter_test",
    # selective prediction
    "augrc",
    "aurc",
    "coverage_at_risk",
    "eaurc",
    "risk_coverage_curve",
    "selective_risk",
    "GroupDifferenceTest",
    "GroupedMetricState",
    "GroupedResult",
    "MAX_GROUPS",
]
