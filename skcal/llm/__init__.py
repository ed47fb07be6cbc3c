"""Language-model outputs: prompt-level corrections of option scores."""

from ._corrections import (
    BatchCalibrator,
    ContextualCalibrator,
    GroupedTemperatureScaling,
)

__all__ = ["BatchCalibrator", "ContextualCalibrator", "GroupedTemperatureScaling"]
