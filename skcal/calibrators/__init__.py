"""Calibrators: estimators that map classifier scores to calibrated probabilities."""

from ._bayesian_binning import BBQCalibrator, ENIRCalibrator
from ._binning import (
    CenteredIsotonicCalibrator,
    HistogramBinningCalibrator,
    IsotonicCalibrator,
    ScalingBinningCalibrator,
)
from ._cts import ClassTemperatureScaling
from ._dirichlet import DirichletCalibrator, DirichletCalibratorCV
from ._ensemble import EnsembleTemperatureScaling
from ._identity import IdentityCalibrator
from ._kcal import KCalCalibrator
from ._local_net import LocalNetCalibrator
from ._platt import BetaCalibrator, PlattCalibrator
from ._procal import ProCalCalibrator
from ._pts import ParameterizedTemperatureScaling
from ._scaling import (
    BiasCorrectedTemperatureScaling,
    MatrixScaling,
    TemperatureScaling,
    VectorScaling,
)
from ._smart import SMARTCalibrator
from ._sms import StructuredMatrixScaling, StructuredVectorScaling
from ._spline import SplineCalibrator
from ._top_versus_all import TopVersusAll
from ._venn_abers import VennAbersCalibrator
from ._vq_local import VQLocalCalibrator

__all__ = [
    "BBQCalibrator",
    "BetaCalibrator",
    "BiasCorrectedTemperatureScaling",
    "CenteredIsotonicCalibrator",
    "ClassTemperatureScaling",
    "DirichletCalibrator",
    "DirichletCalibratorCV",
    "ENIRCalibrator",
    "EnsembleTemperatureScaling",
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
    "ScalingBinningCalibrator",
    "SplineCalibrator",
    "StructuredMatrixScaling",
    "StructuredVectorScaling",
    "TemperatureScaling",
    "TopVersusAll",
    "VectorScaling",
    "VennAbersCalibrator",
    "VQLocalCalibrator",
]
