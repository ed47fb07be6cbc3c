"""Calibrators: estimators that map classifier scores to calibrated probabilities.

Each class is imported on first use (PEP 562), so that reaching a calibrator
that needs no torch (the binning family, isotonic regression, Platt and beta
calibration, Venn-Abers, the identity) does not import the torch ones, and
with them torch (the user guide's "Threads" section).
"""

from __future__ import annotations

import importlib

#: class name -> the module of this package that defines it
_MODULES = {
    "BBQCalibrator": "._bayesian_binning",
    "ENIRCalibrator": "._bayesian_binning",
    "CenteredIsotonicCalibrator": "._binning",
    "HistogramBinningCalibrator": "._binning",
    "IsotonicCalibrator": "._binning",
    "ScalingBinningCalibrator": "._binning",
    "ClassTemperatureScaling": "._cts",
    "DirichletCalibrator": "._dirichlet",
    "DirichletCalibratorCV": "._dirichlet",
    "EnsembleTemperatureScaling": "._ensemble",
    "GroupedTemperatureScaling": "..llm._corrections",
    "GroupedVectorScaling": "._grouped",
    "IdentityCalibrator": "._identity",
    "KCalCalibrator": "._kcal",
    "LocalNetCalibrator": "._local_net",
    "BetaCalibrator": "._platt",
    "PlattCalibrator": "._platt",
    "ProCalCalibrator": "._procal",
    "ParameterizedTemperatureScaling": "._pts",
    "BiasCorrectedTemperatureScaling": "._scaling",
    "MatrixScaling": "._scaling",
    "TemperatureScaling": "._scaling",
    "VectorScaling": "._scaling",
    "SMARTCalibrator": "._smart",
    "StructuredMatrixScaling": "._sms",
    "StructuredVectorScaling": "._sms",
    "SplineCalibrator": "._spline",
    "TopVersusAll": "._top_versus_all",
    "VennAbersCalibrator": "._venn_abers",
    "VQLocalCalibrator": "._vq_local",
}

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
    "GroupedTemperatureScaling",
    "GroupedVectorScaling",
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


def __getattr__(name: str):
    if name not in _MODULES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(_MODULES[name], __name__), name)
    globals()[name] = value  # later lookups skip __getattr__
    return value


def __dir__():
    return sorted(set(globals()) | set(_MODULES))
