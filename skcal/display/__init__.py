"""Plots of calibration (matplotlib, optional: imported only when drawing)."""

from ._ess import ESSProfileDisplay
from ._reliability import ReliabilityDisplay

__all__ = ["ESSProfileDisplay", "ReliabilityDisplay"]
