"""Language-model outputs: prompt-level corrections of option scores, and
P(correct) from a scalar confidence."""

from ._corrections import (
    BatchCalibrator,
    ContextualCalibrator,
    GroupedTemperatureScaling,
)
from ._correctness import CorrectnessCalibrator

__all__ = [
    "CorrectnessCalibrator",
    "BatchCalibrator",
    "ContextualCalibrator",
    "GroupedTemperatureScaling",
]
