"""The exported block of Venn-Abers predictors (:class:`VennAbersMap`)."""

from __future__ import annotations

import numpy as np
import torch

from ._export_exact import ExactSoftmax, SnapToKnots
from ._export_piecewise import _DOUBLE, Float64Block, StepMap, _const, _int

__all__ = ["VennAbersMap"]

#: the lower end of the logs of the folds' p1 and 1 - p0 (finite: a padded
#: fold multiplies nothing by an infinite log)
_LOG_LOW = float(np.finfo(np.float64).min)


def _tables(tables, closed: str, column: int) -> StepMap:
    """The step maps of column ``column`` (1: ``p0``, 2: ``p1``) of
    ``(knots, p0, p1)`` tables: ``p0[#knots <= s]`` (``closed="left"``),
    ``p1[#knots < s]`` (``closed="right"``)."""
    edges = [np.concatenate([[-np.inf], t[0], [np.inf]]) for t in tables]
    return StepMap(edges, [t[column] for t in tables], closed=closed)


class VennAbersMap(Float64Block):
    """Scores to Venn-Abers probabilities, as ``VennAbersCalibrator.predict_proba``.

    The probability columns (the softmax of the logits, by
    :class:`~skcal._torch._export_exact.ExactSoftmax`, or the given
    probabilities clipped to [0, 1]) give each binary problem ``(i, j)`` its
    score (``p_j``, or ``p_j / (p_i + p_j)`` for a pair, 0.5 where both are
    0); each table (a problem's fold) reads its problem's score, put on a
    calibration score within rounding of it for logits
    (:class:`~skcal._torch._export_exact.SnapToKnots`), and gives ``p0 =
    p0[#knots <= s]`` and ``p1 = p1[#knots < s]``. The folds of a problem
    are pooled by geometric means of ``p1`` and ``1 - p0``; the pair is
    merged into ``p1 / (1 - p0 + p1)``, and the problems into the classes:
    ``[1 - p, p]`` for two classes, the one-vs-rest values divided by their
    row sum, or the pairwise coupling ``1 / (sum_j 1 / p_(k vs j) - (C -
    2))`` divided by its row sum. Float64 inside; the output has the
    input's dtype.

    Parameters
    ----------
    input : {"logits", "proba"}
    problems : ndarray of shape (n_problems, 2)
        The problems ``(i, j)`` (``i = -1``: against the rest).
    tables : list of list of (knots, p0, p1)
        Per problem, the tables of its folds.
    n_classes : int
    pairwise : bool
        One-vs-one coupling (more than two classes).
    """

    def __init__(self, input, problems, tables, n_classes: int, pairwise: bool):
        super().__init__()
        self.register_buffer("dtype_marker", torch.zeros((), dtype=torch.float64))
        self.proba = input == "proba"
        self.n_classes, self.n_problems = int(n_classes), len(problems)
        self.binary = self.n_classes == 2
        self.pairwise = bool(pairwise) and not self.binary
        problems = np.asarray(problems, dtype=np.int64)
        pairs = (("first", np.maximum(problems[:, 0], 0)), ("second", problems[:, 1]))
        for name, value in pairs:
            self.register_buffer(name, torch.from_numpy(value.copy()))
        flat = [t for folds in tables for t in folds]
        owner = np.repeat(np.arange(len(tables)), [len(f) for f in tables])
        self.register_buffer("owner", torch.from_numpy(owner.astype(np.int64)))
        # logits only: the probabilities as given are numpy's bit for bit
        self.snap = SnapToKnots([t[0] if not self.proba else () for t in flat])
        self.p0 = _tables(flat, "left", 1)
        self.p1 = _tables(flat, "right", 2)
        self.softmax = ExactSoftmax(self.n_classes)
        self.log_low = _LOG_LOW
        self._pooling(tables, len(flat))
        self._coupling(problems)

    def _pooling(self, tables, n_tables: int) -> None:
        """The fold columns of each problem, padded with ``n_tables`` (a
        column of zeros), and each problem's count of folds."""
        counts = np.array([len(f) for f in tables], dtype=np.int64)
        self.pooled = bool(counts.max(initial=1) > 1)
        index = np.full((len(tables), int(counts.max(initial=1))), n_tables)
        starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
        for m, (start, count) in enumerate(zip(starts, counts)):
            index[m, :count] = np.arange(start, start + count)
        self.register_buffer("folds", torch.from_numpy(index.astype(np.int64)))
        self._constant("n_folds", counts.astype(np.float64))

    def _coupling(self, problems) -> None:
        """For one-vs-one, the columns of ``[1 / p, 1 / (1 - p)]`` (problem
        ``m``'s at ``m`` and ``n_problems + m``) that each class adds."""
        n = self.n_classes
        index = np.zeros((n, max(n - 1, 1)), dtype=np.int64)
        if self.pairwise:
            for k in range(n):
                wins = np.flatnonzero(problems[:, 1] == k)
                losses = np.flatnonzero(problems[:, 0] == k) + len(problems)
                index[k] = np.concatenate([wins, losses])
        self.register_buffer("coupling", torch.from_numpy(index))
        self._constant("offset", n - 2.0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        dtype = x.dtype
        x = x.to(torch.float64)
        if self.proba:
            P = torch.clamp(x, 0.0, 1.0)
        else:
            P = self.softmax(x)
        s = P[:, self.second]
        if self.pairwise:
            total = P[:, self.first] + s
            some = total > 0.0
            ratio = s / torch.where(some, total, torch.ones_like(total))
            s = torch.where(some, ratio, torch.full_like(s, 0.5))
        s = s[:, self.owner]
        if not self.proba:
            s = self.snap(s)
        p0, p1 = self.p0(s), self.p1(s)
        if self.pooled:
            p0, p1 = self._pool(p0, p1)
        p = p1 / ((1.0 - p0) + p1)
        return self._classes(p).to(dtype)

    def _pool(self, p0: torch.Tensor, p1: torch.Tensor):
        return 1.0 - torch.exp(self._mean_log(1.0 - p0)), torch.exp(self._mean_log(p1))

    def _mean_log(self, p: torch.Tensor) -> torch.Tensor:
        """Per problem, the mean over its folds of ``log p`` (floored)."""
        logs = torch.clamp(torch.log(p), min=self.log_low)
        logs = torch.cat([logs, torch.zeros_like(logs[:, :1])], dim=1)
        return logs[:, self.folds].sum(dim=-1) / self.n_folds

    def _classes(self, p: torch.Tensor) -> torch.Tensor:
        if self.binary:
            return torch.cat([1.0 - p, p], dim=1)
        if self.pairwise:
            inverse = torch.cat([1.0 / p, 1.0 / (1.0 - p)], dim=1)
            p = 1.0 / (inverse[:, self.coupling].sum(dim=-1) - self.offset)
        return p / p.sum(dim=-1, keepdim=True)

    @torch.jit.ignore
    def onnx(self, g, x: str) -> str:
        if g.dtype != np.float64:
            x = g.op("Cast", x, to=_DOUBLE)
        if self.proba:
            P = g.op("Clip", x, _const(g, 0.0), _const(g, 1.0))
        else:
            P = self.softmax.onnx(g, x)
        s = g.op("Gather", P, _int(g, self.second.numpy()), axis=1)
        if self.pairwise:
            total = g.op(
                "Add", g.op("Gather", P, _int(g, self.first.numpy()), axis=1), s
            )
            some = g.op("Greater", total, _const(g, 0.0))
            ratio = g.op("Div", s, g.op("Where", some, total, _const(g, 1.0)))
            s = g.op("Where", some, ratio, _const(g, 0.5))
        s = g.op("Gather", s, _int(g, self.owner.numpy()), axis=1)
        if not self.proba:
            s = self.snap.onnx(g, s)
        p0, p1 = self.p0.onnx(g, s), self.p1.onnx(g, s)
        if self.pooled:
            p0, p1 = self._onnx_pool(g, p0, p1)
        one = _const(g, 1.0)
        p = g.op("Div", p1, g.op("Add", g.op("Sub", one, p0), p1))
        out = self._onnx_classes(g, p)
        if g.dtype != np.float64:
            out = g.op("Cast", out, to=1)  # FLOAT
        return out

    @torch.jit.ignore
    def _onnx_pool(self, g, p0: str, p1: str):
        one = _const(g, 1.0)
        zero = g.op("Mul", g.op("Gather", p0, _int(g, [0]), axis=1), _const(g, 0.0))
        means = []
        for logs in (g.op("Log", g.op("Sub", one, p0)), g.op("Log", p1)):
            logs = g.op("Max", logs, _const(g, _LOG_LOW))
            logs = g.op("Concat", logs, zero, axis=1)
            taken = g.op("Gather", logs, _int(g, self.folds.numpy()), axis=1)
            total = g.reduce("ReduceSum", taken, axis=-1, keepdims=0)
            means.append(g.op("Div", total, self._f64(g, "n_folds")))
        return g.op("Sub", one, g.op("Exp", means[0])), g.op("Exp", means[1])

    @torch.jit.ignore
    def _onnx_classes(self, g, p: str) -> str:
        if self.binary:
            return g.op("Concat", g.op("Sub", _const(g, 1.0), p), p, axis=1)
        if self.pairwise:
            one = _const(g, 1.0)
            inverse = g.op("Concat", g.op("Div", one, p),
                           g.op("Div", one, g.op("Sub", one, p)), axis=1)  # fmt: skip
            taken = g.op("Gather", inverse, _int(g, self.coupling.numpy()), axis=1)
            total = g.reduce("ReduceSum", taken, axis=-1, keepdims=0)
            p = g.op("Div", one, g.op("Sub", total, self._f64(g, "offset")))
        return g.op("Div", p, g.reduce("ReduceSum", p))
