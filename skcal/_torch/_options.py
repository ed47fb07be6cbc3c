"""The options shared by every Adam-trained kernel, in one frozen dataclass."""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch

from ._device import resolve_device


@dataclass(frozen=True)
class TrainingOptions:
    """How an Adam-trained kernel trains: step size, budget, seed, device.

    The calibrators build it from their parameters of the same names
    (``random_state`` gives ``seed``); the kernels (SMART, PTS, VQ, KCal,
    Local Nets) and the loops :func:`~skcal._torch.train_adam` and
    :func:`~skcal._torch.minimize_adam` read it.

    Attributes
    ----------
    learning_rate : float
        Adam's step size.
    max_iter : int
        Largest number of epochs (0: the initial parameters are kept).
    n_iter_no_change : int
        Epochs without improvement of the monitored loss before training
        stops; the parameters of the best epoch are restored.
    seed : int
        Seeds the kernel's generator (initialisation, batches, dropout).
    weight_decay : float, default=0.0
        Adam's (coupled) L2 weight decay.
    batch_size : int or None, default=None
        Rows per mini-batch; None trains on all rows at once (full batch).
    device : {"auto", "cpu", "cuda", "cuda:N"} or torch.device, default="auto"
        Where the kernel trains; resolved by the kernel
        (:meth:`resolved`, :func:`~skcal._torch.resolve_device`).
    verbose : int, default=0
        0: silent; 1: a progress bar per training phase; 2: and a line per
        epoch (see :class:`~skcal._torch._progress.Progress`).

    Examples
    --------
    >>> from skcal._torch import TrainingOptions
    >>> options = TrainingOptions(
    ...     learning_rate=1e-3, max_iter=100, n_iter_no_change=10, seed=0,
    ...     device="cpu",
    ... )
    >>> options.resolved().device
    device(type='cpu')
    >>> options.replace(max_iter=0).max_iter
    0
    """

    learning_rate: float
    max_iter: int
    n_iter_no_change: int
    seed: int
    weight_decay: float = 0.0
    batch_size: int | None = None
    device: str | torch.device = "auto"
    verbose: int = 0

    def resolved(self) -> TrainingOptions:
        """These options with ``device`` a ``torch.device`` (validated).

        Raises
        ------
        ValueError
            If the device is not recognised or not available.
        """
        return replace(self, device=resolve_device(self.device))

    def replace(self, **changes) -> TrainingOptions:
        """A copy with ``changes`` (``dataclasses.replace``)."""
        return replace(self, **changes)
