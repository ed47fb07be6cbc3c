"""Plots of calibration (matplotlib, optional: imported only when drawing)."""

from ._ess import ESSProfileDisplay
from ._reliability import ReliabilityDisplay
from ._risk_coverage import RiskCoverageDisplay

__all__ = ["ESSProfileDisplay", "ReliabilityDisplay", "RiskCoverageDisplay"]
