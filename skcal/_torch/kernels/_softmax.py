"""Row-wise softmax and elementwise maps of numpy arrays, with torch's CPU kernels.

Torch's vectorised ``exp``, ``log`` and ``sigmoid`` are several times faster
than numpy's on float64 (numpy's are scalar without AVX-512), and its row
reductions of short rows avoid numpy's per-row overhead. Every function here
works on numpy arrays shared with torch (no copy). An array that is not
writeable is handled by numpy instead, since torch cannot share it.

Matrix products next to torch's kernels are torch's too, never numpy's: with
the default thread counts numpy's BLAS and torch run separate thread pools,
and each hand-over from one to the other waits for the other pool's threads
to stop spinning (at 10,000 x 100 on 2 cores, numpy's product of each block
made matrix scaling's prediction 16 times slower than torch's, 120 ms
against 7.7 ms; with one thread each, numpy's product is 7-17% faster).
"""

from __future__ import annotations

import math

import numpy as np
import torch


def _shared(a: np.ndarray):
    """``a`` as a tensor sharing its memory, or None if torch cannot share it
    (read-only memory, another dtype, or a negative stride, as in ``X[::-1]``)."""
    if (
        not a.flags.writeable
        or a.dtype not in (np.float64, np.float32)
        or any(stride < 0 for stride in a.strides)
    ):
        return None
    return torch.from_numpy(a)


def _read(a: np.ndarray) -> torch.Tensor:
    """A float64 tensor of ``a``'s values, sharing its memory when it can."""
    t = _shared(a) if a.dtype == np.float64 else None
    return torch.from_numpy(np.array(a, dtype=np.float64)) if t is None else t


#: Entries per block of the blocked kernels: 1 MiB of float64, which
#: stays in cache from one elementwise pass of the block to the next.
_BLOCK_ENTRIES = 1 << 17


def _row_blocks(t: torch.Tensor):
    """Row slices of ``t`` of about ``_BLOCK_ENTRIES`` entries (all rows on GPU)."""
    n = t.shape[0]
    step = n if t.device.type != "cpu" else max(1, _BLOCK_ENTRIES // max(t.shape[1], 1))
    return [slice(start, start + step) for start in range(0, n, step)]


def softmax_inplace(a: np.ndarray, *, log: bool = False) -> np.ndarray:
    """Replace each row of the float64 array ``a`` by its (log-)softmax.

    ``a`` must be a writeable, C-contiguous float64 array that the caller
    owns; it is shared with torch (no copy) and returned. The rows are
    processed in blocks that stay in cache from one elementwise pass to the
    next; the log-softmax takes the exponentials of a block into one reused
    buffer (``torch.logsumexp`` is several times slower on the CPU).
    """
    t = torch.from_numpy(a)
    if t.numel() == 0:
        return a
    blocks = _row_blocks(t)
    buffer = torch.empty((blocks[0].stop - blocks[0].start, t.shape[1]), dtype=t.dtype)
    for rows in blocks:
        block = t[rows]
        block.sub_(block.amax(dim=1, keepdim=True))
        if log:
            e = torch.exp(block, out=buffer[: block.shape[0]])
            block.sub_(e.sum(dim=1, keepdim=True).log_())
        else:
            block.exp_()
            block.div_(block.sum(dim=1, keepdim=True))
    return a


def softmax_into(a: np.ndarray, out: np.ndarray) -> np.ndarray:
    """Row-wise softmax of ``a`` written into ``out``; ``a`` is not modified.

    ``out`` must be a writeable, C-contiguous float64 array of ``a``'s shape
    that does not overlap ``a``. The result is exactly that of
    :func:`softmax_inplace` on a float64 copy of ``a`` (the same operations),
    without the copy.
    """
    if out.size == 0:
        return out
    t, o = _read(a), torch.from_numpy(out)
    torch.sub(t, t.amax(dim=1, keepdim=True), out=o)
    o.exp_()
    o.div_(o.sum(dim=1, keepdim=True))
    return out


def top_two(z: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Largest and second largest entry of each row of the 2-D tensor ``z``.

    The values of ``torch.topk(z, 2, dim=1)`` (a tied maximum is also the
    second largest), for finite ``z`` with at least two columns: each block
    of rows gets its maxima, then the maxima of the entries below them,
    while it is in cache, which costs a fraction of ``topk``'s selection.
    """
    first, second = z.new_empty(z.shape[0]), z.new_empty(z.shape[0])
    for rows in _row_blocks(z):
        block = z[rows]
        top = block.amax(dim=1, keepdim=True)
        is_top = block == top
        rest = block.masked_fill(is_top, -math.inf).amax(dim=1)
        first[rows] = top[:, 0]
        second[rows] = torch.where(is_top.sum(dim=1) > 1, top[:, 0], rest)
    return first, second


def tempered_softmax_into(
    a: np.ndarray, row_max: np.ndarray, temperature: np.ndarray, out: np.ndarray
) -> np.ndarray:
    """Row-wise softmax of ``a / temperature[:, None]`` written into ``out``.

    ``row_max`` holds the row maxima of ``a`` and ``temperature`` positive
    values, so that ``(a - row_max) / temperature`` is the shifted argument;
    the subtraction, division, exponential and normalisation of each block
    of rows run while it is in cache. ``out`` as in :func:`softmax_into`.
    """
    if out.size == 0:
        return out
    t, o = _read(a), torch.from_numpy(out)
    m = torch.from_numpy(row_max)[:, None]
    temp = torch.from_numpy(temperature)[:, None]
    for rows in _row_blocks(t):
        block = o[rows]
        torch.sub(t[rows], m[rows], out=block)
        block.div_(temp[rows]).exp_()
        block.div_(block.sum(dim=1, keepdim=True))
    return out


def row_max(a: np.ndarray) -> np.ndarray:
    """Largest entry of each row of the 2-D float array ``a`` (NaN propagates)."""
    t = _shared(a)
    if t is None or a.shape[0] == 0 or a.shape[1] == 0:
        return a.max(axis=1)
    return t.amax(dim=1).numpy()


def row_min(a: np.ndarray) -> np.ndarray:
    """Smallest entry of each row of the 2-D float array ``a`` (NaN propagates)."""
    t = _shared(a)
    if t is None or a.shape[0] == 0 or a.shape[1] == 0:
        return a.min(axis=1)
    return t.amin(dim=1).numpy()


def minus_rows(a: np.ndarray, v: np.ndarray) -> np.ndarray:
    """``a - v[:, None]`` as a new C-contiguous array of ``a``'s dtype."""
    t = _shared(a)
    if t is None or v.dtype != a.dtype:
        return a - v[:, None]
    out = np.empty(a.shape, dtype=a.dtype)
    torch.sub(t, torch.from_numpy(v)[:, None], out=torch.from_numpy(out))
    return out


def row_sum(a: np.ndarray) -> np.ndarray:
    """Sum of each row of the 2-D float array ``a``, as a new array."""
    t = _shared(a)
    if t is None:
        return a.sum(axis=1)
    return t.sum(dim=1).numpy()


def exp_into(a: np.ndarray, out: np.ndarray, shift: np.ndarray | None = None):
    """``out = exp(a - shift[:, None])`` (``exp(a)`` without ``shift``)."""
    t, o = _read(a), torch.from_numpy(out)
    if shift is None:
        torch.exp(t, out=o)
    else:
        torch.sub(t, torch.from_numpy(shift)[:, None], out=o).exp_()
    return out


def one_minus_into(a: np.ndarray, out: np.ndarray) -> np.ndarray:
    """``out = 1 - a``; returns ``out``."""
    o = torch.from_numpy(out)
    torch.neg(_read(a), out=o).add_(1.0)  # -a + 1 is 1 - a, exactly
    return out


def clip_inplace(a: np.ndarray, low: float, high: float) -> np.ndarray:
    """``a = min(max(a, low), high)`` in place; returns ``a``."""
    torch.from_numpy(a).clamp_(low, high)
    return a


def log_inplace(a: np.ndarray) -> np.ndarray:
    """``a = log(a)`` for a writeable float64 array ``a``; returns ``a``."""
    torch.from_numpy(a).log_()
    return a


def sigmoid_inplace(a: np.ndarray) -> np.ndarray:
    """``a = 1 / (1 + exp(-a))`` for a writeable float64 array; returns ``a``."""
    torch.from_numpy(a).sigmoid_()
    return a


def rows_minus(v: np.ndarray, a: np.ndarray) -> np.ndarray:
    """``a = v[:, None] - a`` in place (``v`` one value per row); returns ``a``."""
    t = torch.from_numpy(a)
    torch.sub(torch.from_numpy(v)[:, None], t, out=t)
    return a


def minus_into(a: np.ndarray, b: np.ndarray, out: np.ndarray) -> np.ndarray:
    """``out = a - b`` (same shapes; ``out`` may be ``b``); returns ``out``."""
    torch.sub(_read(a), torch.from_numpy(b), out=torch.from_numpy(out))
    return out


def affine_columns(
    a: np.ndarray, scale: np.ndarray, shift: np.ndarray, out: np.ndarray
) -> np.ndarray:
    """``out = a * scale + shift``, ``scale`` one value per column and
    ``shift`` one per column or an array of ``a``'s shape (``out`` may be
    ``a`` or ``shift``); returns ``out``."""
    torch.addcmul(_read(shift), _read(a), _read(scale), out=torch.from_numpy(out))
    return out


def scale_rows_inplace(a: np.ndarray, v: np.ndarray) -> np.ndarray:
    """``a *= v[:, None]`` (``v`` one factor per row); returns ``a``."""
    torch.from_numpy(a).mul_(torch.from_numpy(v)[:, None])
    return a


def normalize_rows_inplace(a: np.ndarray, floor: float) -> np.ndarray:
    """``a = max(a, floor)`` divided by its row sums, in place; returns ``a``."""
    t = torch.from_numpy(a)
    t.clamp_min_(floor)
    t.div_(t.sum(dim=1, keepdim=True))
    return a


def affine_rows(
    a: np.ndarray,
    coef: np.ndarray,
    intercept: np.ndarray,
    *,
    log: bool = False,
    log_softmax: bool = False,
    softmax: bool = False,
    out: np.ndarray | None = None,
) -> np.ndarray:
    """``f(a) @ coef.T + intercept``, or its row softmax, in a float64 array.

    ``f`` is the identity; with ``log`` numpy's logarithm of each entry
    (taken block by block into a scratch block); or with ``log_softmax``
    the row log-softmax, computed as ``a @ coef.T - L coef.sum(axis=1)``
    with ``L`` the row log-sum-exp of ``a`` (no log-softmax copy of ``a``).
    A 1-D ``coef``
    scales the columns (``a * coef + intercept``; no ``log_softmax`` then).
    The rows go by blocks: the product of a block (torch's ``addmm``, see
    the module docstring) gets its log-sum-exp term and softmax while it is
    in cache. The result is written into ``out`` (a new array if None), which
    may be ``a`` itself (a writeable C-contiguous float64 array of the
    result's shape); ``a`` is otherwise not modified (a read-only ``a`` is
    copied). With neither flag it is the plain product, e.g. a linear head's
    logits.
    """
    if log and log_softmax:
        raise ValueError("affine_rows takes log or log_softmax, not both.")
    a = np.asarray(a, dtype=np.float64)
    if out is None:
        out = np.empty((a.shape[0], len(intercept)))
    if out.size == 0:
        return out
    if coef.ndim == 1:
        out = affine_columns(np.log(a, out=out) if log else a, coef, intercept, out)
        return softmax_inplace(out) if softmax else out
    weights = _read(coef).T
    bias = torch.from_numpy(np.asarray(intercept, dtype=np.float64))
    if log_softmax:
        row_sums = torch.from_numpy(np.ascontiguousarray(coef.sum(axis=1)))
    in_place = np.may_share_memory(a, out)
    t, o = _read(a), torch.from_numpy(out)
    blocks = _row_blocks(o if o.shape[1] >= t.shape[1] else t)
    size = blocks[0].stop - blocks[0].start
    scratch = log or log_softmax
    scratch = torch.empty((size, t.shape[1]), dtype=t.dtype) if scratch else None
    # in place, the product of a block goes to a second scratch block, unless
    # the logs of the block were taken first (its memory is then free)
    in_place = in_place and not log
    product = torch.empty((size, o.shape[1]), dtype=o.dtype) if in_place else None
    for rows in blocks:
        block = t[rows]
        if log:
            block = scratch[: block.shape[0]]
            np.log(t[rows].numpy(), out=block.numpy())
        ob = product[: block.shape[0]] if in_place else o[rows]
        torch.addmm(bias, block, weights, out=ob)
        if log_softmax:
            top = block.amax(dim=1, keepdim=True)
            e = torch.sub(block, top, out=scratch[: block.shape[0]]).exp_()
            ob.addr_(e.sum(dim=1).log_().add_(top[:, 0]), row_sums, alpha=-1)
        if softmax:
            ob.sub_(ob.amax(dim=1, keepdim=True)).exp_()
            ob.div_(ob.sum(dim=1, keepdim=True))
        if in_place:
            o[rows] = ob
    return out
