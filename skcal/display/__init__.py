"""Plots of calibration (matplotlib, optional: imported only when drawing)."""

from ._ess import ESSProfileDisplay

__all__ = ["ESSProfileDisplay"]
