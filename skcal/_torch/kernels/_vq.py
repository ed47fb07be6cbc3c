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
"""

from __future__ import annotations

import math

import numpy as np
import torch

from .._convert import to_numpy, to_tensor
from .._optim import train_adam
from .._random import make_generator

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


class _DirichletMap(torch.autograd.Function):
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
    core = _DirichletMap.apply(log_p, counts, A, B, keep)
    logits = core + torch.log_softmax(prior_logits, dim=0)
    return logits + log_p if identity_shift else logits


def _weighted_ce(logits, y, w) -> torch.Tensor:
    nll = -torch.log_softmax(logits, dim=1).gather(1, y[:, None]).squeeze(1)
    return (w * nll).sum() / w.sum().clamp_min(1e-300)


def _linear_init(fan_in, fan_out, gen, device):
    bound = 1.0 / math.sqrt(fan_in)
    W = (
        torch.rand(fan_out, fan_in, generator=gen, dtype=torch.float64) * 2 - 1
    ) * bound
    b = (torch.rand(fan_out, generator=gen, dtype=torch.float64) * 2 - 1) * bound
    return W.to(device), b.to(device)


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
    head_coef,
    head_intercept,
    n_init_batches: int,
    lr: float,
    weight_decay: float,
    batch_size: int,
    max_epochs: int,
    patience: int,
    seed: int,
    device: torch.device,
    verbose: int = 0,
) -> dict:
    """Stage 1: the codebook and the quantization-aware head.

    With ``head_coef`` given the head is frozen and only the codebook is
    updated. Returns numpy arrays ``codebook``, ``coef``, ``intercept`` and
    ``best_epoch``, ``n_epochs``.
    """
    gen = make_generator(seed, "cpu")
    Xt = to_tensor(X, device, torch.float64)
    S = slots(Xt, n_slots)
    d = S.shape[2]
    yt = to_tensor(y, device, torch.int64)
    wt = to_tensor(w, device, torch.float64)
    train = to_tensor(train_idx, device, torch.int64)
    val = to_tensor(val_idx, device, torch.int64)
    # codebook: random slot vectors of (up to) n_init_batches shuffled batches
    if codebook_mode == "normal":
        codebook = torch.randn(n_codewords, d, generator=gen, dtype=torch.float64)
        codebook = codebook.to(device)
    else:
        order = torch.randperm(len(train_idx), generator=gen)
        rows = train[order[: n_init_batches * batch_size].to(device)]
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
        codebook = pool[pick.to(device)].clone()
    ema = codebook_mode == "ema"
    if ema_init == "zeros":
        ema_count = torch.zeros(n_codewords, dtype=torch.float64, device=device)
        ema_sum = torch.zeros_like(codebook)
    else:
        ema_count = torch.ones(n_codewords, dtype=torch.float64, device=device)
        ema_sum = codebook.clone()
    frozen = head_coef is not None
    if frozen:
        W = to_tensor(head_coef, device, torch.float64)
        b = to_tensor(head_intercept, device, torch.float64)
    else:
        W, b = _linear_init(S.shape[1] * d, n_classes, gen, device)
        W.requires_grad_(True)
        b.requires_grad_(True)

    def head_logits(rows):
        index = assign(S[rows], codebook)
        return codebook[index].reshape(len(rows), -1) @ W.T + b, index

    def loss(batch):
        rows = train[batch]
        logits, index = head_logits(rows)
        if ema:
            with torch.no_grad():
                flat = index.reshape(-1)
                # weights relative to the batch mean: unit weights count one
                # per slot, and scaling every weight changes nothing
                w_rows = wt[rows] / wt[rows].mean().clamp_min(1e-300)
                slot_w = w_rows.repeat_interleave(n_slots)
                counts = torch.zeros_like(ema_count).index_add_(0, flat, slot_w)
                sums = torch.zeros_like(ema_sum).index_add_(
                    0, flat, S[rows].reshape(-1, d) * slot_w[:, None]
                )
                ema_count.mul_(decay).add_(counts, alpha=1 - decay)
                ema_sum.mul_(decay).add_(sums, alpha=1 - decay)
                codebook.copy_(ema_sum / (ema_count + EMA_EPS)[:, None])
        return _weighted_ce(logits, yt[rows], wt[rows])

    def val_loss():
        logits, _ = head_logits(val)
        return float(_weighted_ce(logits, yt[val], wt[val]))

    params = ([] if frozen else [W, b]) + [codebook, ema_count, ema_sum]
    best_epoch, n_epochs, _ = train_adam(
        loss,
        val_loss,
        params,
        n_samples=len(train_idx),
        batch_size=batch_size,
        max_epochs=max_epochs if (ema or not frozen) else 0,
        lr=lr,
        weight_decay=weight_decay,
        patience=patience,
        generator=gen,
        device=device,
        verbose=verbose,
    )
    return {
        "codebook": to_numpy(codebook),
        "coef": to_numpy(W),
        "intercept": to_numpy(b),
        "best_epoch": best_epoch,
        "n_epochs": n_epochs,
    }


def head_log_proba(X, codebook, coef, intercept, n_slots: int, device):
    """Codeword indices ``(n, w)`` and head log-probabilities ``(n, C)``."""
    Xt = to_tensor(X, device, torch.float64)
    cb = to_tensor(codebook, device, torch.float64)
    with torch.no_grad():
        index = assign(slots(Xt, n_slots), cb)
        q = cb[index].reshape(Xt.shape[0], -1)
        logits = q @ to_tensor(coef, device, torch.float64).T + to_tensor(
            intercept, device, torch.float64
        )
        return index, torch.log_softmax(logits, dim=1)


def init_compositional(n_codewords, n_classes, n_slots, gen, device):
    """``A = B = sqrt(softplus^-1(1) / w) + N(0, 1e-5^2)``, so that ``alpha = 1``."""
    base = math.sqrt(math.log(math.e - 1.0) / n_slots)

    def noisy():
        noise = torch.randn(n_codewords, n_classes, generator=gen, dtype=torch.float64)
        return (base + 1e-5 * noise).to(device)

    return noisy(), noisy()


def fit_calibra(
    index: torch.Tensor,
    log_p: torch.Tensor,
    y: np.ndarray,
    w: np.ndarray,
    *,
    train_idx: np.ndarray,
    val_idx: np.ndarray,
    n_codewords: int,
    mode: str,
    learn_variance: bool,
    reg: float,
    identity_shift: bool,
    lr: float,
    weight_decay: float,
    batch_size: int,
    max_epochs: int,
    patience: int,
    seed: int,
    device: torch.device,
    verbose: int = 0,
) -> dict:
    """Stage 2: the calibration map on frozen indices and head outputs.

    ``mode="compositional"`` fits ``A, B``, the prior logits and (with
    ``learn_variance``) the per-slot scales with the regulariser of the
    paper's C.9; ``mode="dirichlet"`` fits ``logits = log_p W + b`` from
    ``N(0, 0.01^2)``. Returns numpy parameters and the epochs.
    """
    gen = make_generator(seed, "cpu")
    n_classes, n_slots = log_p.shape[1], index.shape[1]
    yt = to_tensor(y, device, torch.int64)
    wt = to_tensor(w, device, torch.float64)
    train = to_tensor(train_idx, device, torch.int64)
    val = to_tensor(val_idx, device, torch.int64)
    params = {}
    if mode == "dirichlet":
        params["coef"] = (
            0.01 * torch.randn(n_classes, n_classes, generator=gen, dtype=torch.float64)
        ).to(device)
        params["intercept"] = (
            0.01 * torch.randn(n_classes, generator=gen, dtype=torch.float64)
        ).to(device)
    else:
        params["receivers"], params["senders"] = init_compositional(
            n_codewords, n_classes, n_slots, gen, device
        )
        A0, B0 = params["receivers"].clone(), params["senders"].clone()
        params["prior_logits"] = (
            0.01 * torch.randn(n_classes, generator=gen, dtype=torch.float64)
        ).to(device)
        if learn_variance:
            params["slot_scales"] = (
                1.0 + 0.01 * torch.randn(n_slots, generator=gen, dtype=torch.float64)
            ).to(device)
        fixed_counts = codeword_counts(index, n_codewords)
        # C.9: per-codeword strength |Y| / (n_c + eta), n_c over the fit rows
        usage = fixed_counts[train].sum(dim=0)
        strength = n_classes / (usage + 1.0)
        n_fit = float(len(train_idx))
    for p in params.values():
        p.requires_grad_(True)

    def logits_of(rows):
        if mode == "dirichlet":
            return log_p[rows] @ params["coef"] + params["intercept"]
        if learn_variance:
            counts = codeword_counts(index[rows], n_codewords, params["slot_scales"])
        else:
            counts = fixed_counts[rows]
        return compositional_logits(
            log_p[rows],
            counts,
            params["receivers"],
            params["senders"],
            params["prior_logits"],
            identity_shift=identity_shift,
        )

    def penalty():
        if mode == "dirichlet" or not learn_variance:
            return 0.0
        dA = ((params["receivers"] - A0) ** 2).sum(dim=1)
        dB = ((params["senders"] - B0) ** 2).sum(dim=1)
        ds = ((params["slot_scales"] - 1.0) ** 2).sum() / (n_fit + 1.0)
        return reg * ((strength * dA).sum() + (strength * dB).sum() + ds)

    def loss(batch):
        rows = train[batch]
        return _weighted_ce(logits_of(rows), yt[rows], wt[rows]) + penalty()

    def val_loss():
        return float(_weighted_ce(logits_of(val), yt[val], wt[val]))

    best_epoch, n_epochs, _ = train_adam(
        loss,
        val_loss,
        list(params.values()),
        n_samples=len(train_idx),
        batch_size=batch_size,
        max_epochs=max_epochs,
        lr=lr,
        weight_decay=weight_decay,
        patience=patience,
        generator=gen,
        device=device,
        verbose=verbose,
    )
    out = {k: to_numpy(v) for k, v in params.items()}
    out.update(best_epoch=best_epoch, n_epochs=n_epochs)
    return out


def calibrated_logits(state: dict, index, log_p, n_codewords: int, device, **kw):
    """Stage-2 logits from numpy ``state`` (see :func:`fit_calibra`)."""
    p = {
        k: to_tensor(v, device, torch.float64)
        for k, v in state.items()
        if isinstance(v, np.ndarray)
    }
    with torch.no_grad():
        if "coef" in p:
            return log_p @ p["coef"] + p["intercept"]
        counts = codeword_counts(index, n_codewords, p.get("slot_scales"))
        return compositional_logits(
            log_p, counts, p["receivers"], p["senders"], p["prior_logits"], **kw
        )
