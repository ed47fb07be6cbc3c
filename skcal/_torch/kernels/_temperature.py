"""Negative log-likelihood of temperature scaling and its derivatives."""

from __future__ import annotations

import numpy as np
import torch

from .._convert import to_tensor

#: Rows per chunk are chosen so that a chunk holds about this many entries.
CHUNK_ENTRIES = 1 << 21


class TemperatureObjective:
    """Weighted mean NLL of ``softmax(beta * z)`` as a function of ``beta``.

    The NLL is convex in the inverse temperature ``beta``; :meth:`derivatives`
    returns its first and second derivative, the input of a 1-D Newton solve.
    Rows are shifted by their maximum once (softmax is shift invariant), so
    every exponent is ``<= 0`` and no per-iteration max is needed. Work is
    done in float64, in row chunks, so memory stays bounded for any ``n``.

    Parameters
    ----------
    logits : ndarray of shape (n_samples, n_classes)
    y_index : ndarray of shape (n_samples,)
        Column of the true class of each sample.
    sample_weight : ndarray of shape (n_samples,)
    device : torch.device
    """

    def __init__(
        self,
        logits: np.ndarray,
        y_index: np.ndarray,
        sample_weight: np.ndarray,
        device: torch.device,
    ) -> None:
        n, c = logits.shape
        step = max(1, CHUNK_ENTRIES // max(c, 1))
        weights = to_tensor(sample_weight / sample_weight.sum(), device, torch.float64)
        y = to_tensor(y_index, device, torch.int64)
        self.chunks = []
        for start in range(0, n, step):
            z = to_tensor(logits[start : start + step], device)
            z = z - z.max(dim=1, keepdim=True).values
            z_true = z.gather(1, y[start : start + step, None]).squeeze(1)
            self.chunks.append((z, z_true.double(), weights[start : start + step]))

    def derivatives(self, beta: float) -> tuple[float, float]:
        """First and second derivative of the NLL at ``beta``."""
        grad = hess = 0.0
        for z, z_true, w in self.chunks:
            z = z.double()
            e = torch.exp(beta * z)
            s = e.sum(dim=1)
            ez = e * z
            m1 = ez.sum(dim=1) / s
            m2 = (ez * z).sum(dim=1) / s
            grad += float(torch.dot(w, m1 - z_true))
            hess += float(torch.dot(w, (m2 - m1 * m1).clamp_min(0.0)))
        return grad, hess
