"""Torch back end: the only sub-package of skcal that imports torch.

Everything here is private. Public estimators convert numpy arrays to tensors
at the edges with :func:`to_tensor`, run the kernels, and store numpy results.

The names below are imported on first use (PEP 562), so that importing one
of the torch-free modules of this package (:mod:`skcal._torch._progress`,
:mod:`skcal._torch._threads`) does not import torch: the calibrators that
need no torch use them (``tests/test_layout.py``).
"""

from __future__ import annotations

import importlib

#: public name -> the module of this package that defines it
_EXPORTS = {
    "to_numpy": "._convert",
    "to_tensor": "._convert",
    "check_device": "._device",
    "resolve_device": "._device",
    "AdamResult": "._optim",
    "OptimResult": "._optim",
    "minimize_adam": "._optim",
    "minimize_lbfgs": "._optim",
    "newton_root_1d": "._optim",
    "train_adam": "._optim",
    "TrainingOptions": "._options",
    "make_generator": "._random",
}

__all__ = [
    "AdamResult",
    "OptimResult",
    "TrainingOptions",
    "check_device",
    "make_generator",
    "minimize_adam",
    "minimize_lbfgs",
    "newton_root_1d",
    "resolve_device",
    "to_numpy",
    "to_tensor",
    "train_adam",
]


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(_EXPORTS[name], __name__), name)
    globals()[name] = value  # later lookups skip __getattr__
    return value


def __dir__():
    return sorted(set(globals()) | set(_EXPORTS))
