"""Greedy per-class temperature search of class-based temperature scaling.

Frenkel & Goldberger (2021): starting from one global temperature, visit the
classes in turn and give class ``k`` the grid temperature that most lowers
the top-label ECE without lowering the accuracy; repeat ``n_iter`` passes.
Each candidate is evaluated in O(n) from row statistics that exclude the
visited column (log-sum-exp and the two largest scaled logits), kept up to
date as temperatures change, so a pass costs O(C n |grid|) rather than
O(C^2 n |grid|).
"""

from __future__ import annotations

import numpy as np
import torch

from .._convert import to_numpy, to_tensor


def binned_ece(conf: torch.Tensor, correct: torch.Tensor, w: torch.Tensor, n_bins: int):
    """Top-label ECE of each row of ``conf`` / ``correct`` (shape (G, n)).

    Equal-width bins ``[l, u)``, the last one closed, weights ``w`` summing
    to one: ``sum_b |sum_{i in b} w_i (conf_i - correct_i)|``.
    """
    edges = torch.arange(1, n_bins, dtype=conf.dtype, device=conf.device) / n_bins
    idx = torch.bucketize(conf, edges, right=True)
    g = conf.shape[0]
    flat = idx + n_bins * torch.arange(g, device=conf.device)[:, None]
    sums = torch.zeros(g * n_bins, dtype=conf.dtype, device=conf.device)
    sums.scatter_add_(0, flat.reshape(-1), (w * (conf - correct)).reshape(-1))
    return sums.view(g, n_bins).abs().sum(dim=1)


def _lse_without(s, lse, k):
    """log-sum-exp of each row of ``s`` without column ``k``."""
    frac = torch.exp(s[:, k] - lse)
    out = lse + torch.log1p(-frac.clamp(max=1.0))
    exact = frac > 1 - 1e-6  # column k holds (almost) all the mass: recompute
    if exact.any():
        rows = s[exact].clone()
        rows[:, k] = -torch.inf
        out[exact] = torch.logsumexp(rows, dim=1)
    return out


def class_temperature_search(
    logits: np.ndarray,
    y_index: np.ndarray,
    sample_weight: np.ndarray,
    *,
    initial: float,
    grid: np.ndarray,
    n_iter: int,
    n_bins: int,
    predicted: bool,
    order: np.ndarray | None = None,
    device: torch.device,
) -> np.ndarray:
    """Per-class temperatures found by the greedy search.

    With ``predicted=False`` column ``k`` of the logits is divided by
    ``T_k`` (the argmax may change; a candidate that lowers the accuracy is
    rejected). With ``predicted=True`` every logit of a row is divided by
    the temperature of the row's predicted class, which keeps the argmax.
    Classes are visited in ``order`` (default: column order).
    """
    z = to_tensor(logits, device, torch.float64)
    y = to_tensor(y_index, device, torch.int64)
    w = to_tensor(sample_weight / sample_weight.sum(), device, torch.float64)
    cand = to_tensor(np.asarray(grid, dtype=np.float64), device)
    n, n_classes = z.shape
    temps = torch.full((n_classes,), float(initial), dtype=torch.float64, device=device)
    visit = range(n_classes) if order is None else [int(k) for k in order]
    if predicted:
        pred = z.argmax(dim=1)
        correct = (pred == y).double()
        zc = z - z.gather(1, pred[:, None])  # <= 0, zero at the predicted class
        groups = [torch.nonzero(pred == k).squeeze(1) for k in range(n_classes)]

        def conf_of(rows, t):  # t: (G,) -> (G, len(rows))
            return 1.0 / torch.exp(zc[rows][None] / t[:, None, None]).sum(dim=2)

        conf = 1.0 / torch.exp(zc / initial).sum(dim=1)
        current = binned_ece(conf[None], correct[None], w[None], n_bins)[0]
        for _ in range(n_iter):
            for k in visit:
                rows = groups[k]
                if rows.numel() == 0:
                    continue
                new = conf_of(rows, cand)  # (G, |rows|)
                trial = conf[None].repeat(len(cand), 1)
                trial[:, rows] = new
                ece = binned_ece(trial, correct[None], w[None], n_bins)
                best = int(torch.argmin(ece))
                if ece[best] < current:
                    temps[k], current = cand[best], ece[best]
                    conf[rows] = new[best]
        return to_numpy(temps)

    s = z / temps
    lse = torch.logsumexp(s, dim=1)
    top_v, top_i = s.topk(2, dim=1)

    conf = torch.exp(top_v[:, 0] - lse)[None]
    correct = (top_i[:, 0] == y).double()[None]
    current_ece = binned_ece(conf, correct, w[None], n_bins)[0]
    current_acc = torch.dot(w, correct[0])
    for _ in range(n_iter):
        for k in visit:
            other_v = torch.where(top_i[:, 0] == k, top_v[:, 1], top_v[:, 0])
            other_i = torch.where(top_i[:, 0] == k, top_i[:, 1], top_i[:, 0])
            lse_minus = _lse_without(s, lse, k)
            new_s = z[:, k][None] / cand[:, None]  # (G, n)
            new_lse = torch.logaddexp(lse_minus[None], new_s)
            wins = new_s > other_v[None]
            conf_g = torch.exp(torch.where(wins, new_s, other_v[None]) - new_lse)
            pred_g = torch.where(wins, k, other_i[None])
            correct_g = (pred_g == y[None]).double()
            ece = binned_ece(conf_g, correct_g, w[None], n_bins)
            acc = correct_g @ w
            ece = torch.where(acc >= current_acc - 1e-12, ece, torch.inf)
            best = int(torch.argmin(ece))
            if not ece[best] < current_ece:
                continue
            temps[k] = cand[best]
            s[:, k] = new_s[best]
            lse = new_lse[best]
            current_ece, current_acc = ece[best], acc[best]
            stale = (top_i == k).any(dim=1) | (s[:, k] > top_v[:, 1])
            if stale.any():
                top_v[stale], top_i[stale] = s[stale].topk(2, dim=1)
    return to_numpy(temps)
