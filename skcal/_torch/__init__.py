"""Torch back end: the only sub-package of skcal that imports torch.

Everything here is private. Public estimators convert numpy arrays to tensors
at the edges with :func:`to_tensor`, run the kernels, and store numpy results.
"""

from ._convert import to_numpy, to_tensor
from ._device import check_device, resolve_device
from ._optim import (
    AdamResult,
    OptimResult,
    minimize_adam,
    minimize_lbfgs,
    newton_root_1d,
    train_adam,
)
from ._options import TrainingOptions
from ._random import make_generator

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
