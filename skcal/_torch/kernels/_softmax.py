"""Row-wise softmax of a numpy array, in place, with torch's CPU kernels."""

from __future__ import annotations

import numpy as np
import torch


def softmax_inplace(a: np.ndarray, *, log: bool = False) -> np.ndarray:
    """Replace each row of the float64 array ``a`` by its (log-)softmax.

    ``a`` must be a writeable, C-contiguous float64 array that the caller
    owns; it is shared with torch (no copy) and returned. Torch's kernels are
    multi-threaded and avoid the temporaries of ``scipy.special.softmax``.
    """
    t = torch.from_numpy(a)
    if t.numel() == 0:
        return a
    t.sub_(t.amax(dim=1, keepdim=True))
    if log:
        t.sub_(torch.logsumexp(t, dim=1, keepdim=True))
    else:
        t.exp_()
        t.div_(t.sum(dim=1, keepdim=True))
    return a
