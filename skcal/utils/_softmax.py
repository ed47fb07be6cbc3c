"""Row-wise softmax and elementwise maps of numpy arrays, in numpy alone.

The calibrators whose fit and prediction need no torch (the binning family,
isotonic regression, Platt and beta calibration, Venn-Abers, the identity)
and the validation of every calibrator's input use these, so that torch is
never imported for them: a process that only bins, or each worker of a
``GridSearchCV(n_jobs=2)`` over such calibrators, does not pay for torch's
import (seconds under load; see the user guide's "Threads" section).

The functions have the names, signatures and operations of those of
``skcal/_torch/kernels/_softmax.py`` (the torch calibrators' kernels): the
same shift by the row maximum, exponential, sum and division, in float64,
so that the two agree to a few units in the last place (tested to 1e-12 in
``tests/utils/test_softmax.py``). The rows of the softmax go by blocks of
about a MiB that stay in cache from one elementwise pass to the next.
"""

from __future__ import annotations

import numpy as np
from scipy.special import expit

#: Entries per block of the blocked softmax: 1 MiB of float64.
_BLOCK_ENTRIES = 1 << 17


def _row_blocks(n_rows: int, n_columns: int) -> list[slice]:
    """Row slices of about ``_BLOCK_ENTRIES`` entries."""
    step = max(1, _BLOCK_ENTRIES // max(n_columns, 1))
    return [slice(start, start + step) for start in range(0, n_rows, step)]


def softmax_inplace(a: np.ndarray, *, log: bool = False) -> np.ndarray:
    """Replace each row of the float64 array ``a`` by its (log-)softmax.

    ``a`` must be a writeable float64 array that the caller owns; it is
    returned. Each row is shifted by its maximum first, so that no
    exponential overflows.
    """
    if a.size == 0:
        return a
    blocks = _row_blocks(*a.shape)
    buffer = np.empty((min(a.shape[0], blocks[0].stop), a.shape[1])) if log else None
    for rows in blocks:
        block = a[rows]
        block -= block.max(axis=1, keepdims=True)
        if log:
            e = np.exp(block, out=buffer[: block.shape[0]])
            block -= np.log(e.sum(axis=1, keepdims=True))
        else:
            np.exp(block, out=block)
            block /= block.sum(axis=1, keepdims=True)
    return a


def softmax_into(a: np.ndarray, out: np.ndarray) -> np.ndarray:
    """Row-wise softmax of ``a`` written into ``out``; ``a`` is not modified.

    ``out`` must be a writeable float64 array of ``a``'s shape that does not
    overlap ``a``. The same operations as :func:`softmax_inplace` on a
    float64 copy of ``a``.
    """
    if out.size == 0:
        return out
    np.subtract(a, a.max(axis=1, keepdims=True), out=out)
    return softmax_inplace_shifted(out)


def softmax_inplace_shifted(a: np.ndarray) -> np.ndarray:
    """The softmax of rows already shifted by their maxima, in place."""
    np.exp(a, out=a)
    a /= a.sum(axis=1, keepdims=True)
    return a


def row_max(a: np.ndarray) -> np.ndarray:
    """Largest entry of each row of the 2-D float array ``a`` (NaN propagates)."""
    return a.max(axis=1)


def row_min(a: np.ndarray) -> np.ndarray:
    """Smallest entry of each row of the 2-D float array ``a`` (NaN propagates)."""
    return a.min(axis=1)


def row_sum(a: np.ndarray) -> np.ndarray:
    """Sum of each row of the 2-D float array ``a``, as a new array."""
    return a.sum(axis=1)


def minus_rows(a: np.ndarray, v: np.ndarray) -> np.ndarray:
    """``a - v[:, None]`` as a new C-contiguous array."""
    return a - v[:, None]


def exp_into(a: np.ndarray, out: np.ndarray, shift: np.ndarray | None = None):
    """``out = exp(a - shift[:, None])`` (``exp(a)`` without ``shift``)."""
    if shift is None:
        return np.exp(a, out=out)
    np.subtract(a, shift[:, None], out=out)
    return np.exp(out, out=out)


def one_minus_into(a: np.ndarray, out: np.ndarray) -> np.ndarray:
    """``out = 1 - a``; returns ``out``."""
    return np.subtract(1.0, a, out=out)


def clip_inplace(a: np.ndarray, low: float, high: float) -> np.ndarray:
    """``a = min(max(a, low), high)`` in place; returns ``a``."""
    return np.clip(a, low, high, out=a)


def log_inplace(a: np.ndarray) -> np.ndarray:
    """``a = log(a)`` for a writeable float64 array ``a``; returns ``a``."""
    return np.log(a, out=a)


def sigmoid_inplace(a: np.ndarray) -> np.ndarray:
    """``a = 1 / (1 + exp(-a))`` for a writeable float64 array; returns ``a``."""
    return expit(a, out=a)


def rows_minus(v: np.ndarray, a: np.ndarray) -> np.ndarray:
    """``a = v[:, None] - a`` in place (``v`` one value per row); returns ``a``."""
    return np.subtract(v[:, None], a, out=a)


def minus_into(a: np.ndarray, b: np.ndarray, out: np.ndarray) -> np.ndarray:
    """``out = a - b`` (same shapes; ``out`` may be ``b``); returns ``out``."""
    return np.subtract(a, b, out=out)


def affine_columns(
    a: np.ndarray, scale: np.ndarray, shift: np.ndarray, out: np.ndarray
) -> np.ndarray:
    """``out = a * scale + shift``, ``scale`` one value per column and
    ``shift`` one per column or an array of ``a``'s shape (``out`` may be
    ``a`` or ``shift``); returns ``out``."""
    if np.may_share_memory(out, shift) and not np.may_share_memory(out, a):
        product = a * scale  # out holds shift: the product goes aside first
        return np.add(product, shift, out=out)
    np.multiply(a, scale, out=out)
    return np.add(out, shift, out=out)


def scale_rows_inplace(a: np.ndarray, v: np.ndarray) -> np.ndarray:
    """``a *= v[:, None]`` (``v`` one factor per row); returns ``a``."""
    a *= v[:, None]
    return a


def normalize_rows_inplace(a: np.ndarray, floor: float) -> np.ndarray:
    """``a = max(a, floor)`` divided by its row sums, in place; returns ``a``."""
    np.maximum(a, floor, out=a)
    a /= a.sum(axis=1, keepdims=True)
    return a
