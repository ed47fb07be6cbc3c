"""skcal: post-hoc calibration of multiclass classifiers, scikit-learn style."""

__version__ = "0.1.0.dev0"

from .base import BaseCalibrator, BaseLocalCalibrator  # noqa: E402
from .calibrators import (  # noqa: E402
    BetaCalibrator,
    ClassTemperatureScaling,
    DirichletCalibrator,
    DirichletCalibratorCV,
    HistogramBinningCalibrator,
    IdentityCalibrator,
    IsotonicCalibrator,
    KCalCalibrator,
    LocalNetCalibrator,
    MatrixScaling,
    ParameterizedTemperatureScaling,
    PlattCalibrator,
    ProCalCalibrator,
    SMARTCalibrator,
    SplineCalibrator,
    StructuredMatrixScaling,
    TemperatureScaling,
    VectorScaling,
    VQLocalCalibrator,
)
from .model_selection import CalibratorSearchCV  # noqa: E402
from .wrappers import CalibratedClassifier  # noqa: E402

__all__ = [
    "BetaCalibrator",
    "BaseCalibrator",
    "BaseLocalCalibrator",
    "CalibratedClassifier",
    "CalibratorSearchCV",
    "ClassTemperatureScaling",
    "DirichletCalibrator",
    "DirichletCalibratorCV",
    "HistogramBinningCalibrator",
    "IdentityCalibrator",
    "IsotonicCalibrator",
    "KCalCalibrator",
    "LocalNetCalibrator",
    "MatrixScaling",
    "ParameterizedTemperatureScaling",
    "PlattCalibrator",
    "ProCalCalibrator",
    "SMARTCalibrator",
    "SplineCalibrator",
    "StructuredMatrixScaling",
    "TemperatureScaling",
    "VectorScaling",
    "VQLocalCalibrator",
    "__version__",
]
