"""Device resolution: turn the ``device`` parameter into a ``torch.device``."""

from __future__ import annotations

import re

import torch

_DEVICE_PATTERN = re.compile(r"^(auto|cpu|cuda(:\d+)?)$")


def resolve_device(device: str | torch.device | None) -> torch.device:
    """Return the ``torch.device`` named by an estimator's ``device`` parameter.

    Parameters
    ----------
    device : {"auto", "cpu", "cuda", "cuda:N"} or torch.device or None
        ``"auto"`` (or None) picks the current CUDA device when one is
        available and the CPU otherwise.

    Returns
    -------
    torch.device

    Raises
    ------
    ValueError
        If the string is not a recognised device or the device is not
        available on this machine.
    """
    if isinstance(device, torch.device):
        device = str(device)
    if device is None:
        device = "auto"
    if not isinstance(device, str) or not _DEVICE_PATTERN.match(device):
        raise ValueError(
            f"device must be 'auto', 'cpu', 'cuda' or 'cuda:N', got {device!r}."
        )
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device == "cpu":
        return torch.device("cpu")
    if not torch.cuda.is_available():
        raise ValueError(
            f"device={device!r} was requested but CUDA is not available on this "
            "machine (torch.cuda.is_available() is False). Use device='cpu', or "
            "device='auto' to use a GPU only when one is present."
        )
    index = int(device.split(":")[1]) if ":" in device else None
    count = torch.cuda.device_count()
    if index is not None and index >= count:
        valid = ", ".join(f"cuda:{i}" for i in range(count))
        raise ValueError(
            f"device={device!r} was requested but only {count} CUDA device(s) "
            f"are visible (valid: {valid})."
        )
    return torch.device(device)


def check_device(device: str | torch.device | None) -> str:
    """Validate an estimator's ``device`` parameter; the type of its device.

    Estimators call it where ``fit`` starts to use the device, so that an
    unrecognised or unavailable device is the clear error of
    :func:`resolve_device` before any work, and pass the parameter itself
    to the kernels, which resolve it at their edge.

    Parameters
    ----------
    device : {"auto", "cpu", "cuda", "cuda:N"} or torch.device or None

    Returns
    -------
    {"cpu", "cuda"}
        The type of the device it names (``"auto"`` resolved).

    Raises
    ------
    ValueError
        As :func:`resolve_device`.

    Examples
    --------
    >>> from skcal._torch import check_device
    >>> check_device("cpu")
    'cpu'
    """
    return resolve_device(device).type
