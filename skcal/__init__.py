"""skcal: post-hoc calibration of multiclass classifiers, scikit-learn style.

The public names are imported on first use (PEP 562), so that ``import
skcal`` and ``skcal --help`` do not pay for torch and scikit-learn until a
calibrator, a metric or a subpackage is actually reached.
"""

from __future__ import annotations

import ast
import importlib
import os

__version__ = "0.1.0"


def _public_names(subpackage: str) -> list[str]:
    """The ``__all__`` of a subpackage, read from its source without
    importing it (which would import torch): one export list, the
    subpackage's own."""
    path = os.path.join(os.path.dirname(__file__), subpackage, "__init__.py")
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            getattr(target, "id", None) == "__all__" for target in node.targets
        ):
            return list(ast.literal_eval(node.value))
    raise ImportError(f"skcal.{subpackage} has no literal __all__")


#: public name -> the submodule that defines it
_EXPORTS = {
    "BaseCalibrator": ".base",
    "BaseLocalCalibrator": ".base",
    "CalibratedClassifier": ".wrappers",
    "CalibratorSearchCV": ".model_selection",
    "config_context": "._config",
    "get_config": "._config",
    "set_config": "._config",
    **{name: ".calibrators" for name in _public_names("calibrators")},
    **{name: ".shift" for name in _public_names("shift")},
}

#: subpackages reachable as attributes after ``import skcal``
_SUBMODULES = (
    "base",
    "calibrators",
    "discovery",
    "display",
    "exceptions",
    "llm",
    "metrics",
    "model_selection",
    "monitor",
    "shift",
    "spark",
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
