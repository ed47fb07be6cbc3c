"""Greedy per-class temperature search of class-based temperature scaling.

Frenkel & Goldberger (2021): starting from one global temperature, visit the
classes in turn and give class ``k`` the grid temperature that most lowers
the top-label ECE without lowering the accuracy; repeat ``n_iter`` passes.

The ECE is ``sum_b |S_b|`` with ``S_b`` the weighted sum of ``conf - correct``
over the rows in bin ``b``, so a candidate is judged by the bin sums alone.

* ``predicted=True`` (a row is scaled by the temperature of its predicted
  class, which never changes): the temperature of class ``k`` moves only the
  rows predicted as ``k``, and their confidence at a candidate ``t`` does not
  depend on any other temperature. One sweep over the rows tabulates, for
  every class and candidate, the bin sums of that class's rows
  (``O(n C |grid|)`` exponentials, in row blocks); the greedy passes then
  work on that ``C x |grid| x n_bins`` table alone, ``O(C |grid| n_bins)``
  per pass, independent of ``n``.
* ``predicted=False`` (column ``k`` divided by ``T_k``): every row changes
  with every temperature, so each candidate is evaluated on every row, in
  ``O(n)`` from row statistics that exclude the visited column (log-sum-exp
  and the two largest scaled logits, kept up to date as temperatures
  change): ``O(C |grid| n)`` per pass, a few passes over ``|grid| x n``
  numbers per class (one sigmoid each, bins found without a search).
"""

from __future__ import annotations

import numpy as np
import torch

from .._convert import to_numpy, to_tensor
from .._device import resolve_device
from .._progress import Progress

#: Numbers in one ``|grid| x rows (x C)`` block of the search.
_BLOCK = 1 << 20


def binned_ece(conf: torch.Tensor, correct: torch.Tensor, w: torch.Tensor, n_bins: int):
    """Top-label ECE of each row of ``conf`` / ``correct`` (shape (G, n)).

    Equal-width bins ``[l, u)``, the last one closed, weights ``w`` summing
    to one: ``sum_b |sum_{i in b} w_i (conf_i - correct_i)|``.
    """
    return _bin_sums(conf, correct, w, n_bins).abs().sum(dim=1)


def _bin_index(conf, n_bins):
    """Bin of each ``conf`` in ``[0, 1]``: equal-width bins ``[l, u)``, the last closed.

    The same as ``bucketize(conf, arange(1, n_bins) / n_bins, right=True)``
    (whose edges ``j / n_bins`` are recomputed here, bit for bit), without
    the binary search: ``floor(conf * n_bins)`` is off by at most one, and
    the comparison with the two edges around it corrects that.
    """
    idx = torch.floor(conf * n_bins).clamp_(0, n_bins - 1)
    idx += conf >= (idx + 1) / n_bins
    idx -= (conf < idx / n_bins).to(idx.dtype)
    return idx.clamp_(max=n_bins - 1).long()


def _bin_sums(conf, correct, w, n_bins):
    """``(G, n_bins)`` sums of ``w (conf - correct)`` per row of ``conf`` and bin."""
    idx = _bin_index(conf, n_bins)
    g = conf.shape[0]
    idx += n_bins * torch.arange(g, device=conf.device)[:, None]
    sums = torch.zeros(g * n_bins, dtype=conf.dtype, device=conf.device)
    sums.scatter_add_(0, idx.reshape(-1), (w * (conf - correct)).reshape(-1))
    return sums.view(g, n_bins)


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
    device: str | torch.device,
    verbose: int = 0,
) -> np.ndarray:
    """Per-class temperatures found by the greedy search.

    With ``predicted=False`` column ``k`` of the logits is divided by
    ``T_k`` (the argmax may change; a candidate that lowers the accuracy is
    rejected). With ``predicted=True`` every logit of a row is divided by
    the temperature of the row's predicted class, which keeps the argmax.
    Classes are visited in ``order`` (default: column order). A candidate
    is taken only if its ECE is strictly below the current one; among equal
    candidates the first of ``grid`` wins. ``verbose`` shows a progress bar
    over the ``n_iter x n_classes`` class visits (a line per visit at 2).
    ``device``: {"auto", "cpu", "cuda", "cuda:N"} or a ``torch.device``.
    """
    device = resolve_device(device)
    z = to_tensor(logits, device, torch.float64)
    y = to_tensor(y_index, device, torch.int64)
    w = to_tensor(sample_weight / sample_weight.sum(), device, torch.float64)
    cand = to_tensor(np.asarray(grid, dtype=np.float64), device)
    n_classes = z.shape[1]
    visit = range(n_classes) if order is None else [int(k) for k in order]
    search = _predicted_search if predicted else _column_search
    desc = "ClassTemperatureScaling: greedy search"
    with Progress(verbose, n_iter * len(visit), desc, "class") as bar:
        return search(z, y, w, cand, initial, visit, n_iter, n_bins, bar)


def _predicted_search(z, y, w, cand, initial, visit, n_iter, n_bins, bar):
    n, n_classes = z.shape
    n_cand = len(cand)
    pred = z.argmax(dim=1)
    correct = (pred == y).double()
    # table[k, g, b]: bin sums of the rows predicted as k, all scaled by the
    # candidate g (g = n_cand: the initial temperature)
    temps = torch.cat([cand, cand.new_tensor([float(initial)])])
    table = z.new_zeros(n_classes * (n_cand + 1) * n_bins)
    offset = torch.arange(n_cand + 1, device=z.device)[:, None] * n_bins
    step = max(1, _BLOCK // ((n_cand + 1) * n_classes))
    for i0 in range(0, n, step):
        rows = slice(i0, min(i0 + step, n))
        zc = z[rows] - z[rows].gather(1, pred[rows, None])  # <= 0, 0 at the argmax
        conf = 1.0 / torch.exp(zc[None] / temps[:, None, None]).sum(dim=2)
        idx = _bin_index(conf, n_bins)
        idx += offset + (pred[rows] * ((n_cand + 1) * n_bins))[None]
        values = w[rows] * (conf - correct[rows])
        table.scatter_add_(0, idx.reshape(-1), values.reshape(-1))
    table = to_numpy(table).reshape(n_classes, n_cand + 1, n_bins)
    present = to_numpy(torch.bincount(pred, minlength=n_classes)) > 0
    grid = to_numpy(cand)
    out = np.full(n_classes, float(initial))
    current = table[:, n_cand].copy()  # bin sums of each class's rows now
    for sweep in range(n_iter):
        for k in visit:
            bar.step(f"pass {sweep + 1}, class {k}: T = {out[k]:.3g}")
            if not present[k]:
                continue
            rest = current.sum(axis=0) - current[k]
            ece = np.abs(rest + table[k, :n_cand]).sum(axis=1)
            best = int(np.argmin(ece))
            # the current state, summed the same way: an equal candidate ties
            if ece[best] < np.abs(rest + current[k]).sum():
                out[k] = grid[best]
                current[k] = table[k, best]
    return out


def _column_search(z, y, w, cand, initial, visit, n_iter, n_bins, bar):
    n, n_classes = z.shape
    n_cand = len(cand)
    temps = torch.full((n_classes,), float(initial), dtype=z.dtype, device=z.device)
    s = z / temps
    lse = torch.logsumexp(s, dim=1)
    top_v, top_i = s.topk(2, dim=1)
    conf = torch.exp(top_v[:, 0] - lse)[None]
    correct = (top_i[:, 0] == y).double()[None]
    current_ece = binned_ece(conf, correct, w[None], n_bins)[0]
    current_acc = torch.dot(w, correct[0])
    step = max(1, _BLOCK // n_cand)
    for sweep in range(n_iter):
        for k in visit:
            bar.step(f"pass {sweep + 1}, class {k}: ECE {float(current_ece):.4g}")
            first = top_i[:, 0] == k
            other_v = torch.where(first, top_v[:, 1], top_v[:, 0])
            other_i = torch.where(first, top_i[:, 1], top_i[:, 0])
            lse_minus = _lse_without(s, lse, k)
            # with d = s_k - lse_minus, the top-label confidence of a row is
            # sigmoid(d) if class k wins it, else c0 sigmoid(-d)
            c0 = torch.exp(other_v - lse_minus)
            # correctness of a row if class k wins it, and if it does not
            y_is_k = (y == k).double()
            y_is_other = (other_i == y).double()
            sums = z.new_zeros(n_cand, n_bins)
            acc = z.new_zeros(n_cand)
            for i0 in range(0, n, step):  # blocks of rows: bounded memory
                r = slice(i0, min(i0 + step, n))
                new_s = z[None, r, k] / cand[:, None]  # (G, rows)
                wins = new_s > other_v[None, r]
                # sigmoid(-d) = 1 - sigmoid(d), exact enough: a loser has d <= 0
                sig = torch.sigmoid_(new_s.sub_(lse_minus[None, r]))
                conf = torch.where(wins, sig, c0[r] * (1.0 - sig))
                correct = torch.where(wins, y_is_k[None, r], y_is_other[None, r])
                sums += _bin_sums(conf, correct, w[None, r], n_bins)
                acc += correct @ w[r]
            ece = sums.abs().sum(dim=1)
            ece = torch.where(acc >= current_acc - 1e-12, ece, torch.inf)
            best = int(torch.argmin(ece))
            if not ece[best] < current_ece:
                continue
            temps[k] = cand[best]
            s[:, k] = z[:, k] / cand[best]  # the values of the winning candidate
            lse = torch.logaddexp(lse_minus, s[:, k])
            current_ece, current_acc = ece[best], acc[best]
            stale = (top_i == k).any(dim=1) | (s[:, k] > top_v[:, 1])
            if stale.any():
                top_v[stale], top_i[stale] = s[stale].topk(2, dim=1)
    return to_numpy(temps)
