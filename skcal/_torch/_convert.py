"""numpy <-> torch conversion, used only at the edges of an estimator."""

from __future__ import annotations

import numpy as np
import torch


def to_tensor(
    array, device: torch.device | str = "cpu", dtype: torch.dtype | None = None
) -> torch.Tensor:
    """Convert an array-like to a tensor on ``device``.

    numpy arrays on the CPU share memory with the tensor when no copy is
    needed; callers must therefore never modify the result in place.
    """
    if isinstance(array, torch.Tensor):
        return array.to(device=device, dtype=dtype)
    array = np.asarray(array)
    if not array.flags.writeable or not (
        array.flags.c_contiguous or array.flags.f_contiguous
    ):
        array = np.ascontiguousarray(array).copy()
    return torch.as_tensor(array, device=device, dtype=dtype)


def to_numpy(tensor: torch.Tensor) -> np.ndarray:
    """Return a numpy copy of ``tensor`` on the CPU, detached from autograd."""
    return tensor.detach().cpu().numpy().copy()
