"""Calibrators: estimators that map classifier scores to calibrated probabilities."""

from ._binning import HistogramBinningCalibrator, IsotonicCalibrator
from ._cts import ClassTemperatureScaling
from ._dirichlet import DirichletCalibrator, DirichletCalibratorCV
from ._identity import IdentityCalibrator
from ._kcal import KCalCalibrator
from ._local_net import LocalNetCalibrator
from ._platt import BetaCalibrator, PlattCalibrator
from ._procal import ProCalCalibrator
from ._pts import ParameterizedTemperatureScaling
from ._scaling import MatrixScaling, TemperatureScaling, VectorScaling
from ._smart import SMARTCalibrator
from ._sms import StructuredMatrixScaling
from ._spline import SplineCalibrator
from ._vq_local import VQLocalCalibrator

__all__ = [
    "BetaCalibrator",
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
]
