"""Calibrators: estimators that map classifier scores to calibrated probabilities."""

from ._scaling import MatrixScaling, TemperatureScaling, VectorScaling

__all__ = ["MatrixScaling", "TemperatureScaling", "VectorScaling"]
