"""skcal: post-hoc calibration of multiclass classifiers, scikit-learn style."""

__version__ = "0.1.0.dev0"

from .base import BaseCalibrator  # noqa: E402
from .calibrators import MatrixScaling, TemperatureScaling, VectorScaling  # noqa: E402

__all__ = [
    "BaseCalibrator",
    "MatrixScaling",
    "TemperatureScaling",
    "VectorScaling",
    "__version__",
]
