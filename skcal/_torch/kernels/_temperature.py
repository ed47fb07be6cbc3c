"""Negative log-likelihood of temperature scaling and its derivatives."""

from __future__ import annotations

import numpy as np
import torch

from .._convert import to_tensor
from .._device import resolve_device

#: Rows per chunk are chosen so that a chunk holds about this many entries:
#: 2 MiB of float64, which stays in cache from one pass over the chunk to the
#: next (25% faster fits than 16 MiB chunks at 20,000 x 100 and 200,000 x 10).
CHUNK_ENTRIES = 1 << 18


def logit_scale(logits: np.ndarray) -> float:
    """A scale of the logits: the median range ``max - min`` of a row.

    Rows of equal entries do not count (1 when every row is constant). It is
    raised to at least ``1e-280`` times the largest range, so that dividing
    any row by it stays finite. Scaling the logits by ``a > 0`` scales it by
    ``a``: solvers that work on ``logits / scale`` see the same problem
    whatever the logits' units.
    """
    ranges = np.ptp(logits, axis=1).astype(np.float64)
    positive = ranges[ranges > 0]
    if positive.size == 0:
        return 1.0
    return float(max(np.median(positive), positive.max() * 1e-280))


class TemperatureObjective:
    """Weighted mean NLL of ``softmax(beta * z / scale)`` as a function of ``beta``.

    The NLL is convex in the inverse temperature ``beta``; :meth:`derivatives`
    returns its first and second derivative, the input of a 1-D Newton solve.
    Rows are shifted by their maximum and divided by ``scale`` once (softmax
    is shift invariant), so every exponent is ``<= 0``, no per-iteration max
    is needed, and the solve does not depend on the logits' units. Work is
    done in float64, in row chunks (the shifted logits are kept, in float64,
    plus one chunk-sized buffer).

    Parameters
    ----------
    logits : ndarray of shape (n_samples, n_classes)
    y_index : ndarray of shape (n_samples,)
        Column of the true class of each sample.
    sample_weight : ndarray of shape (n_samples,)
    device : {"auto", "cpu", "cuda", "cuda:N"} or torch.device
        Resolved here (an unavailable device is a ``ValueError``).
    scale : float, default=1.0
        The logits are divided by it (see :func:`logit_scale`).
    """

    def __init__(
        self,
        logits: np.ndarray,
        y_index: np.ndarray,
        sample_weight: np.ndarray,
        device: str | torch.device,
        scale: float = 1.0,
    ) -> None:
        device = resolve_device(device)
        n, c = logits.shape
        step = max(1, CHUNK_ENTRIES // max(c, 1))
        weights = to_tensor(sample_weight / sample_weight.sum(), device, torch.float64)
        y = to_tensor(y_index, device, torch.int64)
        self.chunks = []
        for start in range(0, n, step):
            z = to_tensor(logits[start : start + step], device).double()
            z = (z - z.max(dim=1, keepdim=True).values) / scale
            z_true = z.gather(1, y[start : start + step, None]).squeeze(1)
            self.chunks.append((z, z_true, weights[start : start + step]))
        rows = min(step, n)
        self._buffer = torch.empty(rows, c, dtype=torch.float64, device=device)
        self._ones = torch.ones(c, 1, dtype=torch.float64, device=device)

    def derivatives(self, beta: float) -> tuple[float, float]:
        """First and second derivative of the NLL at ``beta``.

        With ``e = exp(beta z)`` per row: the gradient is the weighted mean of
        ``E_e[z] - z_y`` and the second derivative that of ``Var_e[z]``. The
        row sums are matrix products over one reused buffer (no temporaries
        of the size of the logits), 2-3 times faster than elementwise sums.
        """
        grad = hess = 0.0
        for z, z_true, w in self.chunks:
            e = self._buffer[: len(z)]
            torch.mul(z, beta, out=e).exp_()
            s = (e @ self._ones).squeeze(1)
            m1 = torch.bmm(e.unsqueeze(1), z.unsqueeze(2)).view(-1) / s
            e.mul_(z)  # e * z
            m2 = torch.bmm(e.unsqueeze(1), z.unsqueeze(2)).view(-1) / s
            grad += float(torch.dot(w, m1 - z_true))
            hess += float(torch.dot(w, (m2 - m1 * m1).clamp_min(0.0)))
        return grad, hess
