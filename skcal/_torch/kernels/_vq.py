"""Divide et Calibra: vector-quantized local calibration (Barbera et al. 2026).

Stage 1 ("divide"): each embedding is cut into ``w`` contiguous slots of
``d`` dimensions; every slot is replaced by its nearest codeword of one
shared codebook (``K`` codewords, EMA updates), and a linear head is trained
on the quantized vector. Stage 2 ("calibra"): with ``n_k(s)`` the number of
slots of a sample that use codeword ``k`` (times a per-slot scale when
``sigma^2`` is learned), receiver and sender codebooks ``A, B`` (``K x C``)
give

``M = sum_k n_k a_k b_k^T``, ``alpha = softplus(M) + 1e-8``,
``logit_j = sum_k (alpha_kj - 1 + [k = j]) log p_k + log pi_j - log B(alpha_.j)``

with ``log B(a) = sum_k lgamma(a_k) - lgamma(sum_k a_k)``; the calibrated
probabilities are ``softmax(logit)``.

The kernels take and return numpy arrays: :func:`fit_divide` gives a
:class:`DivideFit`, :func:`head_log_proba` the cells and head outputs
(:class:`QuantizedHead`), :func:`fit_compositional_map` (VQ) or
:func:`fit_global_dirichlet_map` (VQ-DC) a :class:`CalibraFit` whose map
:func:`calibrated_proba` applies.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from .._constants import DIVISOR_FLOOR
from .._convert import to_numpy, to_tensor
from .._device import resolve_device
from .._optim import AdamResult, train_adam
from .._options import TrainingOptions
from .._random import make_generator
from ._common import uniform_linear, weighted_cross_entropy

#: Floor of the Dirichlet parameters (softplus -> 0 makes lgamma steep).
ALPHA_FLOOR = 1e-8
#: EMA epsilon of the codebook update.
EMA_EPS = 1e-8
#: Numbers in one block of the ``n x C x C`` calibration map (CPU); the
#: nearest-codeword search uses blocks of the same size.
_BLOCK = 1 << 22
#: Blocks are this many times larger on an accelerator (fewer kernel launches).
_ACCELERATOR_FACTOR = 16


def _block_size(device) -> int:
    return _BLOCK * (1 if torch.device(device).type == "cpu" else _ACCELERATOR_FACTOR)


def slots(X: torch.Tensor, n_slots: int) -> torch.Tensor:
    """View ``(n, w * d)`` embeddings as ``(n, w, d)`` contiguous slots."""
    return X.reshape(X.shape[0], n_slots, -1)


def assign(S: torch.Tensor, codebook: torch.Tensor) -> torch.Tensor:
    """Index of the nearest codeword (squared L2) of every slot, ``(n, w)``."""
    n, w, d = S.shape
    flat = S.reshape(-1, d)
    sq = (codebook * codebook).sum(dim=1)
    out = torch.empty(flat.shape[0], dtype=torch.int64, device=S.device)
    step = max(1, _BLOCK // max(codebook.shape[0], 1))
    for start in range(0, flat.shape[0], step):
        z = flat[start : start + step]
        # |z|^2 is the same for every codeword: argmin of |c|^2 - 2 z.c
        out[start : start + step] = torch.argmin(sq - 2.0 * (z @ codebook.T), dim=1)
    return out.reshape(n, w)


def codeword_counts(index: torch.Tensor, n_codewords: int, slot_scale=None):
    """``(n, K)`` counts of each codeword among a sample's slots.

    With ``slot_scale`` (``w`` values), slot ``i`` counts ``slot_scale[i]``.
    """
    n, w = index.shape
    values = (
        torch.ones(n, w, dtype=torch.float64, device=index.device)
        if slot_scale is None
        else slot_scale.expand(n, w)
    )
    counts = torch.zeros(n, n_codewords, dtype=values.dtype, device=index.device)
    return counts.scatter_add(1, index, values)


def _map_blocks(n: int, n_classes: int, n_codewords: int, block: int):
    """Rows and columns per block of the ``n x C x C`` map.

    A block is ``rows x C x cols`` numbers, and ``rows x C x K`` for the
    receiver side; both stay under ``block`` (a single row whose ``C x K``
    numbers alone exceed it is one block).
    """
    width = max(n_classes, n_codewords)
    if n_classes * width <= block:
        return max(1, min(block // (n_classes * width), n)), n_classes
    return 1, max(1, min(block // n_classes, n_classes))


class _Workspace:
    """Buffers of one block, reused by every block of a call.

    The map is a loop of equal-sized steps: fresh allocations per block
    fragment the C heap (resident memory grows with the number of blocks),
    so every large intermediate lives in one of these buffers instead.
    """

    def __init__(self, rows, n_classes, cols, n_codewords, like, n_buffers):
        size = rows * n_classes * cols
        self.flat = [like.new_empty(size) for _ in range(n_buffers)]
        self.receivers = like.new_empty(rows * n_classes * n_codewords)

    def get(self, i, *shape):
        return self.flat[i][: math.prod(shape)].view(*shape)


def _alpha_into(M, out, tmp):
    """``out = softplus(M) + 1e-8``, using ``tmp``; ``M`` is kept.

    The exact softplus ``max(M, 0) + log1p(exp(-|M|))`` (torch's
    ``softplus`` returns ``M`` itself above 20, 2e-9 off).
    """
    torch.clamp(M, min=0.0, out=out)
    torch.sub(M, out, alpha=2.0, out=tmp)  # -|M|
    tmp.exp_().log1p_()
    out.add_(tmp).add_(ALPHA_FLOOR)
    return out


def _block_M(counts, A, B_cols, ws, rows, n_classes, cols):
    n_codewords = A.shape[0]
    # receivers[r, c, k] = counts[r, k] * A[k, c]; M = receivers @ B[:, cols]
    receivers = ws.receivers[: rows * n_classes * n_codewords].view(
        rows, n_classes, n_codewords
    )
    torch.mul(counts[:, None, :], A.T[None, :, :], out=receivers)
    return torch.matmul(receivers, B_cols, out=ws.get(0, rows, n_classes, cols))


def _blocks(n, C, K, device):
    rows, cols = _map_blocks(n, C, K, _block_size(device))
    for i0 in range(0, n, rows):
        for j0 in range(0, C, cols):
            yield slice(i0, min(i0 + rows, n)), slice(j0, min(j0 + cols, C))


class _DirichletCore(torch.autograd.Function):
    """``core_j = sum_c (alpha_cj - 1) log p_c - log B(alpha_.j)`` per sample.

    ``alpha = softplus(A^T diag(counts) B) + 1e-8`` is each sample's ``C x C``
    matrix. Forward and backward run over blocks of rows and columns with
    fixed buffers: nothing of size ``n x C x C`` is ever stored, and the
    backward pass recomputes ``M`` and ``alpha`` block by block (a call that
    fits in one block keeps them instead).
    """

    @staticmethod
    def forward(ctx, log_p, counts, A, B, keep):
        n, C = log_p.shape
        rows, cols = _map_blocks(n, C, A.shape[0], _block_size(log_p.device))
        # a call that fits in one block keeps M and alpha for the backward pass
        keep = keep and rows == n and cols == C
        ws = _Workspace(rows, C, cols, A.shape[0], log_p, 3 if keep else 2)
        out = log_p.new_empty(n, C)
        for r, j in _blocks(n, C, A.shape[0], log_p.device):
            nr, nc = r.stop - r.start, j.stop - j.start
            M = _block_M(counts[r], A, B[:, j], ws, nr, C, nc)
            work = ws.get(2, nr, C, nc) if keep else M  # M is overwritten if not
            alpha = _alpha_into(M, ws.get(1, nr, C, nc), work)
            col_sum = alpha.sum(dim=1)
            omega = torch.sub(alpha, 1.0, out=work)
            linear = torch.matmul(log_p[r, None, :], omega).squeeze(1)
            lg = torch.lgamma(alpha, out=work)
            out[r, j] = linear - lg.sum(dim=1) + torch.lgamma(col_sum)
        ctx.block = (M, alpha, work) if keep else None
        ctx.save_for_backward(log_p, counts, A, B)
        return out

    @staticmethod
    def backward(ctx, grad):
        log_p, counts, A, B = ctx.saved_tensors
        n, C = log_p.shape
        K = A.shape[0]
        need_lp, need_counts, need_A, need_B = ctx.needs_input_grad[:4]
        rows, cols = _map_blocks(n, C, K, _block_size(log_p.device))
        # a call that kept its block needs no buffers but the receivers'
        ws = _Workspace(rows, C, cols, K, log_p, 0 if ctx.block else 3)
        g_lp = torch.zeros_like(log_p) if need_lp else None
        g_counts = torch.zeros_like(counts) if need_counts else None
        g_AT = A.new_zeros(C, K) if need_A else None
        g_B = torch.zeros_like(B) if need_B else None
        for r, j in _blocks(n, C, K, log_p.device):
            nr, nc = r.stop - r.start, j.stop - j.start
            g = grad[r, j]  # (nr, nc)
            if ctx.block is not None:  # one block, kept by the forward pass
                (M, alpha, work), ctx.block = ctx.block, None  # used up here
            else:
                M = _block_M(counts[r], A, B[:, j], ws, nr, C, nc)
                work = ws.get(2, nr, C, nc)
                alpha = _alpha_into(M, ws.get(1, nr, C, nc), work)
            if need_lp:  # d core_j / d log p_c = alpha_cj - 1
                omega = torch.sub(alpha, 1.0, out=work)
                g_lp[r] += torch.matmul(omega, g[:, :, None]).squeeze(2)
            psi_sum = torch.digamma(alpha.sum(dim=1))  # (nr, nc)
            # d core_j / d M_cj = (log p_c - psi(alpha_cj) + psi(S_j)) sigmoid(M_cj)
            G = alpha.digamma_().neg_()
            G.add_(log_p[r, :, None]).add_(psi_sum[:, None, :])
            G.mul_(M.sigmoid_()).mul_(g[:, None, :])
            # M = receivers @ B[:, j], receivers[r, c, k] = counts[r, k] A[k, c]
            if need_A or need_counts:
                GB = torch.matmul(
                    G, B[:, j].T, out=ws.receivers[: nr * C * K].view(nr, C, K)
                )
                if need_A:
                    g_AT += torch.einsum("rck,rk->ck", GB, counts[r])
                if need_counts:
                    g_counts[r] += torch.einsum("rck,kc->rk", GB, A)
            if need_B:
                g_B[:, j] += torch.einsum("rk,kc,rcj->kj", counts[r], A, G)
        return g_lp, g_counts, None if g_AT is None else g_AT.T, g_B, None


def compositional_logits(
    log_p: torch.Tensor,
    counts: torch.Tensor,
    A: torch.Tensor,
    B: torch.Tensor,
    prior_logits: torch.Tensor,
    *,
    identity_shift: bool = True,
) -> torch.Tensor:
    """Calibrated logits of the compositional Dirichlet map.

    ``alpha = softplus(M) + 1e-8`` is applied to every entry of each
    sample's ``C x C`` matrix ``M = A^T diag(counts) B``, and the log-Beta
    term sums ``lgamma`` over all of them: the softplus does not factor, so
    however ``M`` is written (it has rank at most ``min(w, K)``) the map
    costs ``O(C^2 K)`` multiply-adds and ``O(C^2)`` softplus / lgamma
    evaluations per sample (digamma too when training). Memory is bounded:
    forward and backward passes run over blocks of rows and columns of
    about ``_BLOCK`` numbers with reused buffers, so a call holds its
    ``O(n (C + K))`` inputs and outputs and a few blocks, never ``n x C x C``.
    """
    keep = torch.is_grad_enabled() and any(
        t.requires_grad for t in (log_p, counts, A, B)
    )
    core = _DirichletCore.apply(log_p, counts, A, B, keep)
    logits = core + torch.log_softmax(prior_logits, dim=0)
    return logits + log_p if identity_shift else logits


# ----------------------------------------------------------------- results
@dataclass(frozen=True)
class DivideFit:
    """Stage 1 of :func:`fit_divide`: the codebook and the head (numpy, CPU).

    Attributes
    ----------
    codebook : ndarray of shape (n_codewords, d)
        The codewords, ``d = n_features / n_slots``.
    coef : ndarray of shape (n_classes, n_features)
        Head on the quantized embeddings (the given one when frozen).
    intercept : ndarray of shape (n_classes,)
        Its bias.
    best_epoch : int
        Epoch whose state was kept (0: the initial one).
    n_epochs : int
        Epochs run.
    val_loss : float
        Weighted cross-entropy of the validation rows at ``best_epoch`` (the
        loss early stopping minimised).
    """

    codebook: np.ndarray
    coef: np.ndarray
    intercept: np.ndarray
    best_epoch: int
    n_epochs: int
    val_loss: float


@dataclass(frozen=True)
class QuantizedHead:
    """Cells and head outputs of :func:`head_log_proba` (numpy, CPU).

    Attributes
    ----------
    index : ndarray of shape (n_samples, n_slots)
        Codeword index (int64) of every slot: the sample's cell.
    log_proba : ndarray of shape (n_samples, n_classes)
        Log-probabilities of the head on the quantized embeddings.
    """

    index: np.ndarray
    log_proba: np.ndarray


@dataclass(frozen=True)
class CompositionalMap:
    """The cell-wise Dirichlet map of the module docstring (numpy, CPU).

    Attributes
    ----------
    receivers, senders : ndarray of shape (n_codewords, n_classes)
        ``A`` and ``B``.
    prior_logits : ndarray of shape (n_classes,)
        ``log pi`` up to a constant.
    slot_scales : ndarray of shape (n_slots,) or None
        ``sigma^2`` per slot; None counts every slot once.
    identity_shift : bool
        Add ``log p`` to the linear term (the identity at ``alpha = 1``).
    """

    receivers: np.ndarray
    senders: np.ndarray
    prior_logits: np.ndarray
    slot_scales: np.ndarray | None
    identity_shift: bool

    def logits(self, index: torch.Tensor, log_p: torch.Tensor) -> torch.Tensor:
        """Calibrated logits of cells ``index`` with head outputs ``log_p``."""
        dev = log_p.device
        scales = self.slot_scales
        counts = codeword_counts(
            index,
            self.receivers.shape[0],
            None if scales is None else to_tensor(scales, dev, torch.float64),
        )
        return compositional_logits(
            log_p,
            counts,
            to_tensor(self.receivers, dev, torch.float64),
            to_tensor(self.senders, dev, torch.float64),
            to_tensor(self.prior_logits, dev, torch.float64),
            identity_shift=self.identity_shift,
        )


@dataclass(frozen=True)
class GlobalDirichletMap:
    """Dirichlet calibration of the head, ``logits = log_p W + b`` (numpy, CPU).

    Attributes
    ----------
    coef : ndarray of shape (n_classes, n_classes)
        ``W``.
    intercept : ndarray of shape (n_classes,)
        ``b``.
    """

    coef: np.ndarray
    intercept: np.ndarray

    def logits(self, index: torch.Tensor, log_p: torch.Tensor) -> torch.Tensor:
        """Calibrated logits of head outputs ``log_p`` (``index`` is unused)."""
        dev = log_p.device
        return log_p @ to_tensor(self.coef, dev, torch.float64) + to_tensor(
            self.intercept, dev, torch.float64
        )


@dataclass(frozen=True)
class CalibraFit:
    """Stage 2: a fitted calibration map and its training (numpy, CPU).

    Attributes
    ----------
    map : CompositionalMap or GlobalDirichletMap
        The map, ready for :func:`calibrated_proba`.
    best_epoch : int
        Epoch whose parameters were kept (0: the initial ones).
    n_epochs : int
        Epochs run.
    """

    map: CompositionalMap | GlobalDirichletMap
    best_epoch: int
    n_epochs: int


# ------------------------------------------------------------ shared pieces
@dataclass(frozen=True)
class _Rows:
    """Labels, weights and the split of one stage, as tensors on its device."""

    y: torch.Tensor
    w: torch.Tensor
    train: torch.Tensor  # row indices
    val: torch.Tensor

    @classmethod
    def of(cls, y, w, train_idx, val_idx, device) -> _Rows:
        return cls(
            to_tensor(y, device, torch.int64),
            to_tensor(w, device, torch.float64),
            to_tensor(train_idx, device, torch.int64),
            to_tensor(val_idx, device, torch.int64),
        )

    def loss(self, logits: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
        """Weighted cross-entropy of ``logits``, the outputs of ``rows``."""
        return weighted_cross_entropy(logits, self.y[rows], self.w[rows])


def _train(loss, val_loss, params, rows: _Rows, gen, options, desc) -> AdamResult:
    """:func:`train_adam` over the training rows."""
    return train_adam(
        loss,
        val_loss,
        params,
        n_samples=len(rows.train),
        options=options,
        generator=gen,
        desc=desc,
    )


# ------------------------------------------------------------------ stage 1
def _initial_codebook(S, train, mode, n_codewords, n_rows, gen) -> torch.Tensor:
    """``N(0, I)`` codewords, or distinct slot vectors of ``n_rows`` train rows."""
    d = S.shape[2]
    if mode == "normal":
        codebook = torch.randn(n_codewords, d, generator=gen, dtype=torch.float64)
        return codebook.to(S.device)
    order = torch.randperm(len(train), generator=gen)
    rows = train[order[:n_rows].to(S.device)]
    # distinct vectors only: a repeated value (e.g. the zeros of ReLU
    # features) would give codewords that can never win a slot
    # (with fewer distinct vectors than codewords, the rest are repeats:
    # dead codewords, which the estimator reports)
    pool = torch.unique(S[rows].reshape(-1, d), dim=0)
    pick = torch.randperm(pool.shape[0], generator=gen)[:n_codewords]
    if pool.shape[0] < n_codewords:
        extra = torch.randint(
            pool.shape[0], (n_codewords - pool.shape[0],), generator=gen
        )
        pick = torch.cat([pick, extra])
    return pool[pick.to(S.device)].clone()


def _initial_head(given, n_features, n_classes, train_head, gen, device):
    """``(W, b)``: a copy of ``given`` (coef, intercept) or, when its coef is
    None, ``torch.nn.Linear``'s initialisation drawn from ``gen``; they
    require gradients when ``train_head``."""
    if given[0] is not None:
        W = to_tensor(given[0], device, torch.float64).clone()
        b = to_tensor(given[1], device, torch.float64).clone()
    else:
        W, b = uniform_linear(n_features, n_classes, gen, device, out_first=True)
    if train_head:
        W.requires_grad_(True)
        b.requires_grad_(True)
    return W, b


class _EMACodebook:
    """A codebook and its EMA statistics ``N_k`` (count) and ``m_k`` (sum).

    ``init="zeros"`` starts from ``N_k = m_k = 0``, otherwise from
    ``N_k = 1, m_k = c_k``. The three tensors are updated in place, so that
    :func:`train_adam` saves and restores them with the head.
    """

    def __init__(self, codebook: torch.Tensor, init: str, decay: float):
        self.codebook = codebook
        self.decay = decay
        n_codewords = codebook.shape[0]
        if init == "zeros":
            self.count = codebook.new_zeros(n_codewords)
            self.sum = torch.zeros_like(codebook)
        else:
            self.count = codebook.new_ones(n_codewords)
            self.sum = codebook.clone()

    @property
    def state(self) -> list[torch.Tensor]:
        return [self.codebook, self.count, self.sum]

    @torch.no_grad()
    def update(self, S: torch.Tensor, index: torch.Tensor, w: torch.Tensor):
        """Move every codeword toward the weighted mean of its slots ``S``."""
        n_slots, d = S.shape[1], S.shape[2]
        flat = index.reshape(-1)
        # weights relative to the batch mean: unit weights count one per
        # slot, and scaling every weight changes nothing
        slot_w = (w / w.mean().clamp_min(DIVISOR_FLOOR)).repeat_interleave(n_slots)
        counts = torch.zeros_like(self.count).index_add_(0, flat, slot_w)
        sums = torch.zeros_like(self.sum).index_add_(
            0, flat, S.reshape(-1, d) * slot_w[:, None]
        )
        self.count.mul_(self.decay).add_(counts, alpha=1 - self.decay)
        self.sum.mul_(self.decay).add_(sums, alpha=1 - self.decay)
        self.codebook.copy_(self.sum / (self.count + EMA_EPS)[:, None])


def fit_divide(
    X: np.ndarray,
    y: np.ndarray,
    w: np.ndarray,
    *,
    train_idx: np.ndarray,
    val_idx: np.ndarray,
    n_classes: int,
    n_slots: int,
    n_codewords: int,
    codebook_mode: str,
    ema_init: str,
    decay: float,
    head_coef: np.ndarray | None,
    head_intercept: np.ndarray | None,
    n_init_batches: int,
    train_head: bool,
    options: TrainingOptions,
) -> DivideFit:
    """Stage 1: the codebook and the quantization-aware head.

    The codebook starts from random slot vectors of ``n_init_batches``
    shuffled batches of the training rows (``codebook_mode`` ``"ema"`` or
    ``"data"``) or from ``N(0, I)`` (``"normal"``); only ``"ema"`` moves it.
    The head starts like ``torch.nn.Linear``, or from ``head_coef`` /
    ``head_intercept``, which stay frozen unless ``train_head``; with a
    frozen head and a fixed codebook nothing is trained.

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features)
        Embeddings, ``n_features = n_slots * d``.
    y, w : ndarray of shape (n_samples,)
        Column index of each label, and sample weights.
    train_idx, val_idx : ndarray of int
        Rows trained on, and rows of the early-stopping loss.
    n_classes, n_slots, n_codewords : int
        ``C``, ``w`` and ``K``.
    codebook_mode : {"ema", "data", "normal"}
    ema_init : {"robust", "zeros"}
        See :class:`_EMACodebook`.
    decay : float
        EMA decay.
    head_coef, head_intercept : ndarray or None
        The initial head, or None for ``torch.nn.Linear``'s initialisation.
    train_head : bool
        Train the head (a new one is always trained).
    n_init_batches : int
        Batches (of ``options.batch_size`` rows) whose slots the initial
        codewords are drawn from.
    options : TrainingOptions
        Of :func:`~skcal._torch.train_adam`; ``options.seed`` seeds the
        codebook, the head and the batches (in this order).

    Returns
    -------
    DivideFit
    """
    options = options.resolved()
    device = options.device
    gen = make_generator(options.seed, "cpu")
    S = slots(to_tensor(X, device, torch.float64), n_slots)
    rows = _Rows.of(y, w, train_idx, val_idx, device)
    n_init_rows = n_init_batches * options.batch_size
    initial = _initial_codebook(
        S, rows.train, codebook_mode, n_codewords, n_init_rows, gen
    )
    book = _EMACodebook(initial, ema_init, decay)
    ema = codebook_mode == "ema"
    frozen = not train_head
    W, b = _initial_head(
        (head_coef, head_intercept), X.shape[1], n_classes, train_head, gen, device
    )

    def head_logits(r):
        index = assign(S[r], book.codebook)
        return book.codebook[index].reshape(len(r), -1) @ W.T + b, index

    def loss(batch):
        r = rows.train[batch]
        logits, index = head_logits(r)
        if ema:
            book.update(S[r], index, rows.w[r])
        return rows.loss(logits, r)

    def val_loss():
        return float(rows.loss(head_logits(rows.val)[0], rows.val))

    run = _train(
        loss,
        val_loss,
        ([] if frozen else [W, b]) + book.state,
        rows,
        gen,
        options if (ema or not frozen) else options.replace(max_iter=0),
        "VQ stage 1: codebook and head",
    )
    arrays = (to_numpy(t) for t in (book.codebook, W, b))
    return DivideFit(*arrays, run.best_epoch, run.n_epochs, run.best_loss)


def head_log_proba(
    X: np.ndarray,
    codebook: np.ndarray,
    coef: np.ndarray,
    intercept: np.ndarray,
    n_slots: int,
    device,
) -> QuantizedHead:
    """Cells of ``X`` and the head's log-probabilities on its quantization.

    ``device``: {"auto", "cpu", "cuda", "cuda:N"} or a ``torch.device``.
    """
    device = resolve_device(device)
    Xt = to_tensor(X, device, torch.float64)
    cb = to_tensor(codebook, device, torch.float64)
    with torch.no_grad():
        index = assign(slots(Xt, n_slots), cb)
        q = cb[index].reshape(Xt.shape[0], -1)
        logits = q @ to_tensor(coef, device, torch.float64).T + to_tensor(
            intercept, device, torch.float64
        )
        return QuantizedHead(
            to_numpy(index), to_numpy(torch.log_softmax(logits, dim=1))
        )


# ------------------------------------------------------------------ stage 2
def init_compositional(n_codewords, n_classes, n_slots, gen, device):
    """``A = B = sqrt(softplus^-1(1) / w) + N(0, 1e-5^2)``, so that ``alpha = 1``."""
    base = math.sqrt(math.log(math.e - 1.0) / n_slots)

    def noisy():
        noise = torch.randn(n_codewords, n_classes, generator=gen, dtype=torch.float64)
        return (base + 1e-5 * noise).to(device)

    return noisy(), noisy()


def _small_normal(shape, gen, device, scale=0.01, mean=0.0) -> torch.Tensor:
    """``mean + N(0, scale^2)`` draws from ``gen`` (on the CPU), on ``device``."""
    draw = scale * torch.randn(*shape, generator=gen, dtype=torch.float64)
    return (draw if mean == 0.0 else mean + draw).to(device)


def _initial_map(n_codewords, n_classes, n_slots, learn_variance, gen, device):
    """Initial ``A``, ``B``, prior logits and (``learn_variance``) slot scales.

    ``A, B`` from :func:`init_compositional`, the prior logits from
    ``N(0, 0.01^2)``, the scales from ``1 + N(0, 0.01^2)``, drawn in this order.
    """
    params = {}
    params["receivers"], params["senders"] = init_compositional(
        n_codewords, n_classes, n_slots, gen, device
    )
    params["prior_logits"] = _small_normal((n_classes,), gen, device)
    if learn_variance:
        params["slot_scales"] = _small_normal((n_slots,), gen, device, mean=1.0)
    return params


def _variance_penalty(params, counts, rows: _Rows, reg: float):
    """The regulariser of the paper's C.9, around the initial ``A``, ``B``.

    ``reg (sum_k s_k (|a_k - a_k^0|^2 + |b_k - b_k^0|^2)
    + |sigma^2 - 1|^2 / (n + 1))`` with the per-codeword strength
    ``s_k = C / (n_k + 1)``, ``n_k`` the codeword's uses by the ``n``
    training rows.
    """
    A0, B0 = params["receivers"].clone(), params["senders"].clone()
    n_classes = params["receivers"].shape[1]
    strength = n_classes / (counts[rows.train].sum(dim=0) + 1.0)
    n_fit = float(len(rows.train))

    def penalty():
        dA = ((params["receivers"] - A0) ** 2).sum(dim=1)
        dB = ((params["senders"] - B0) ** 2).sum(dim=1)
        ds = ((params["slot_scales"] - 1.0) ** 2).sum() / (n_fit + 1.0)
        return reg * ((strength * dA).sum() + (strength * dB).sum() + ds)

    return penalty


def fit_compositional_map(
    index: np.ndarray,
    log_p: np.ndarray,
    y: np.ndarray,
    w: np.ndarray,
    *,
    train_idx: np.ndarray,
    val_idx: np.ndarray,
    n_codewords: int,
    learn_variance: bool,
    reg: float,
    identity_shift: bool,
    options: TrainingOptions,
) -> CalibraFit:
    """Stage 2 (VQ): the compositional map on fixed cells and head outputs.

    ``A, B`` start at :func:`init_compositional` (the identity map), the
    prior logits at ``N(0, 0.01^2)`` and, with ``learn_variance``, the
    per-slot scales at ``1 + N(0, 0.01^2)``, trained with the regulariser
    of the paper's C.9 (:func:`_variance_penalty`).

    Parameters
    ----------
    index : ndarray of shape (n_samples, n_slots)
        Cells, from :func:`head_log_proba`.
    log_p : ndarray of shape (n_samples, n_classes)
        The head's log-probabilities.
    y, w : ndarray of shape (n_samples,)
        Column index of each label, and sample weights.
    train_idx, val_idx : ndarray of int
        Rows trained on, and rows of the early-stopping loss.
    n_codewords : int
    learn_variance : bool
    reg : float
        ``lambda`` of the regulariser.
    identity_shift : bool
        See :class:`CompositionalMap`.
    options : TrainingOptions
        Of :func:`~skcal._torch.train_adam`; ``options.seed`` seeds the
        initialisation and the batches.

    Returns
    -------
    CalibraFit
        With a :class:`CompositionalMap`.
    """
    options = options.resolved()
    device = options.device
    gen = make_generator(options.seed, "cpu")
    idx = to_tensor(index, device, torch.int64)
    lp = to_tensor(log_p, device, torch.float64)
    n_classes, n_slots = lp.shape[1], idx.shape[1]
    rows = _Rows.of(y, w, train_idx, val_idx, device)
    params = _initial_map(n_codewords, n_classes, n_slots, learn_variance, gen, device)
    fixed_counts = codeword_counts(idx, n_codewords)
    penalty = (
        _variance_penalty(params, fixed_counts, rows, reg)
        if learn_variance
        else (lambda: 0.0)
    )
    for p in params.values():
        p.requires_grad_(True)

    def logits_of(r):
        if learn_variance:
            counts = codeword_counts(idx[r], n_codewords, params["slot_scales"])
        else:
            counts = fixed_counts[r]
        return compositional_logits(
            lp[r],
            counts,
            params["receivers"],
            params["senders"],
            params["prior_logits"],
            identity_shift=identity_shift,
        )

    best_epoch, n_epochs = _fit_map(
        logits_of,
        penalty,
        list(params.values()),
        rows,
        gen,
        options,
        "VQ stage 2: compositional map",
    )
    fitted = {k: to_numpy(v) for k, v in params.items()}
    fitted.setdefault("slot_scales", None)
    return CalibraFit(
        CompositionalMap(**fitted, identity_shift=identity_shift), best_epoch, n_epochs
    )


def fit_global_dirichlet_map(
    log_p: np.ndarray,
    y: np.ndarray,
    w: np.ndarray,
    *,
    train_idx: np.ndarray,
    val_idx: np.ndarray,
    options: TrainingOptions,
) -> CalibraFit:
    """Stage 2 (VQ-DC): ``logits = log_p W + b``, ``W, b`` from ``N(0, 0.01^2)``.

    Parameters are those of :func:`fit_compositional_map`.

    Returns
    -------
    CalibraFit
        With a :class:`GlobalDirichletMap`.
    """
    options = options.resolved()
    device = options.device
    gen = make_generator(options.seed, "cpu")
    lp = to_tensor(log_p, device, torch.float64)
    n_classes = lp.shape[1]
    rows = _Rows.of(y, w, train_idx, val_idx, device)
    coef = _small_normal((n_classes, n_classes), gen, device).requires_grad_(True)
    intercept = _small_normal((n_classes,), gen, device).requires_grad_(True)
    best_epoch, n_epochs = _fit_map(
        lambda r: lp[r] @ coef + intercept,
        lambda: 0.0,
        [coef, intercept],
        rows,
        gen,
        options,
        "VQ stage 2: Dirichlet map",
    )
    fitted = GlobalDirichletMap(to_numpy(coef), to_numpy(intercept))
    return CalibraFit(fitted, best_epoch, n_epochs)


def _fit_map(
    logits_of, penalty, params, rows: _Rows, gen, options, desc
) -> tuple[int, int]:
    """Train a stage-2 map: weighted cross-entropy of ``logits_of(rows)`` + penalty."""

    def loss(batch):
        r = rows.train[batch]
        return rows.loss(logits_of(r), r) + penalty()

    def val_loss():
        return float(rows.loss(logits_of(rows.val), rows.val))

    run = _train(loss, val_loss, params, rows, gen, options, desc)
    return run.best_epoch, run.n_epochs


def calibrated_proba(
    index: np.ndarray,
    log_p: np.ndarray,
    calibration_map: CompositionalMap | GlobalDirichletMap | None,
    device,
) -> np.ndarray:
    """Calibrated probabilities of cells ``index`` with head outputs ``log_p``.

    ``softmax(calibration_map.logits(index, log_p))``, or ``softmax(log_p)``
    (the head alone) when ``calibration_map`` is None. ``device``: {"auto",
    "cpu", "cuda", "cuda:N"} or a ``torch.device``.
    """
    device = resolve_device(device)
    lp = to_tensor(log_p, device, torch.float64)
    with torch.no_grad():
        if calibration_map is None:
            logits = lp
        else:
            idx = to_tensor(index, device, torch.int64)
            logits = calibration_map.logits(idx, lp)
        return to_numpy(torch.softmax(logits, dim=1))
