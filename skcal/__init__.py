"""skcal: post-hoc calibration of multiclass classifiers, scikit-learn style.

The public names are imported on first use (PEP 562), so that ``import
skcal`` and ``skcal --help`` do not pay for torch and scikit-learn until a
calibrator, a metric or a subpackage is actually reached.
"""

from __future__ import annotations

import importlib

__version__ = "0.1.0.dev0"

#: public name -> the submodule that defines it
_EXPORTS = {
    "BaseCalibrator": ".base",
    "BaseLocalCalibrator": ".base",
    "CalibratedClassifier": ".wrappers",
    "CalibratorSearchCV": ".model_selection",
    **{
        name: ".calibrators"
        for name in (
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
        )
    },
}

#: subpackages reachable as attributes after ``import skcal``
_SUBMODULES = (
    "base",
    "calibrators",
    "display",
    "exceptions",
    "metrics",
    "model_selection",
    "utils",
    "wrappers",
)

__all__ = [*sorted(_EXPORTS), "__version__"]


def __getattr__(name: str):
    if name in _EXPORTS:
        value = getattr(importlib.import_module(_EXPORTS[name], __name__), name)
    elif name in _SUBMODULES:
        value = importlib.import_module(f".{name}", __name__)
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value  # later lookups skip __getattr__
    return value


def __dir__():
    return sorted(set(globals()) | set(_EXPORTS) | set(_SUBMODULES))
