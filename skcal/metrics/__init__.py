"""Calibration metrics (plain functions) and scorers for model selection."""

from ._binning import BinStatistics, bin_edges, binned_statistics
from ._ece import (
    classwise_calibration_error,
    expected_calibration_error,
    max_calibration_error,
)
from ._proper import brier_score, negative_log_likelihood
from ._scorer import CalibrationScorer, get_scorer, get_scorer_names
from ._soft import soft_binned_calibration_error, soft_expected_calibration_error

__all__ = [
    "BinStatistics",
    "CalibrationScorer",
    "bin_edges",
    "binned_statistics",
    "brier_score",
    "classwise_calibration_error",
    "expected_calibration_error",
    "get_scorer",
    "get_scorer_names",
    "max_calibration_error",
    "negative_log_likelihood",
    "soft_binned_calibration_error",
    "soft_expected_calibration_error",
]
