"""Exported blocks of top-versus-all calibration (:class:`~skcal.TopVersusAll`).

:class:`TopVersusAllMap` computes what ``TopVersusAll.predict_proba`` does on
dense scores: the top class (each row's first maximum) gets the calibrated
confidence of the inner calibrator, the others share the rest in the
proportions of the softmax of their shares (the logits, the tempered logits
or the scaling calibrator's own logits), the top class kept strictly first
by one unit in the last place (:class:`~skcal._torch._export.NextAfterUp`),
and the rows whose other shares underflow recomputed in log space, as
:func:`~skcal.utils._proba.replace_top_label_inplace` and
:func:`~skcal.utils._proba.replace_top_label` do. Everything is computed in
float64 whatever the input's dtype (the calibrator casts float32 scores to
float64), as in :mod:`skcal._torch._export_piecewise`.

The floors are given by the caller (``skcal/_torch`` imports nothing from
the rest of skcal): ``floor`` (``FLOOR_BEFORE_LOG``), ``sum_floor``
(``SUM_FLOOR``), ``tiny`` (``PROBA_EPS``, the smallest normal float64) and
``log_tiny`` (the log of the smallest positive float64).
"""

from __future__ import annotations

import numpy as np
import torch

from ._export import ExportModule, onnx_next_up
from ._export_piecewise import (
    Float64Block,
    Probabilities,
    _onnx_top_mask,
    _top_mask,
)

__all__ = ["ConfidenceMap", "TopVersusAllMap"]

_DOUBLE = 11  # onnx.TensorProto.DOUBLE
_FLOAT = 1  # onnx.TensorProto.FLOAT
_KINDS = ("none", "scaling", "one_map", "binary")


class ConfidenceMap(Float64Block):
    """The one map of the confidence of a calibrator of one map (isotonic
    regression, histogram binning), clipped to [0, 1]: ``mapping`` (its
    per-class block of the two columns ``[1 - p, p]``) read at column 1 of
    ``[c, c]``, of a ``(n, 1)`` input."""

    def __init__(self, mapping):
        super().__init__()
        self.mapping = mapping

    def forward(self, c: torch.Tensor) -> torch.Tensor:
        value = self.mapping(torch.cat([c, c], dim=-1))[:, 1:2]
        return torch.clamp(value, 0.0, 1.0)

    @torch.jit.ignore
    def onnx(self, g, c: str) -> str:
        value = self.mapping.onnx(g, g.op("Concat", c, c, axis=-1))
        value = _onnx_column(g, value, 1)
        return g.op("Clip", value, g.const(np.array(0.0)), g.const(np.array(1.0)))


class _Unused(ExportModule):
    """The placeholder of an absent inner block (never called)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x


# ----------------------------------------------------------------- torch
def _at_top(x: torch.Tensor, top: torch.Tensor) -> torch.Tensor:
    """Each row's entry at ``top``, as a column."""
    return torch.where(top, x, torch.zeros_like(x)).sum(dim=-1, keepdim=True)


def _others_max(x: torch.Tensor, top: torch.Tensor) -> torch.Tensor:
    """Each row's largest entry but the one at ``top``, as a column."""
    low = torch.full_like(x, -float("inf"))
    return torch.amax(torch.where(top, low, x), dim=-1, keepdim=True)


def _ahead(x: torch.Tensor, top: torch.Tensor) -> torch.Tensor:
    """Whether the entry at ``top`` is strictly above every other."""
    return _at_top(x, top) > _others_max(x, top)


def _next_up(x: torch.Tensor) -> torch.Tensor:
    return torch.nextafter(x, torch.full_like(x, float("inf")))


def _hold_strict(v: torch.Tensor, top: torch.Tensor, ahead: torch.Tensor):
    """``_hold_strict_top``: the top entry at least every other, the next
    float above the largest other where ``ahead`` and level or below."""
    other = _others_max(v, top)
    value = torch.maximum(_at_top(v, top), other)
    value = torch.where(ahead & (value <= other), _next_up(other), value)
    return torch.where(top, value, v)


def _top_logs(z: torch.Tensor, top: torch.Tensor, log_tiny: torch.Tensor):
    """``(log c, log(1 - c))`` of the softmax of ``z`` at ``top``, the
    second from the others' sum, floored at ``log_tiny`` before the
    division (``_top_log_probabilities``)."""
    e = torch.exp(z - torch.amax(z, dim=-1, keepdim=True))
    zero = torch.zeros_like(e)
    top_share = torch.where(top, e, zero).sum(dim=-1, keepdim=True)
    rest = torch.where(top, zero, e).sum(dim=-1, keepdim=True)
    log_total = torch.log(top_share + rest)
    log_rest = torch.maximum(torch.log(rest), log_tiny) - log_total
    return torch.log(top_share) - log_total, log_rest


def _softmax(s: torch.Tensor) -> torch.Tensor:
    e = torch.exp(s - torch.amax(s, dim=-1, keepdim=True))
    return e / e.sum(dim=-1, keepdim=True)


# ------------------------------------------------------------------ onnx
def _onnx_column(g, x: str, k: int) -> str:
    """Column ``k`` of the 2-D ``x``, as a column."""
    at = (np.array([k]), np.array([k + 1]), np.array([1]))
    return g.op("Slice", x, *(g.const(a) for a in at))


def _onnx_at_top(g, x: str, top: str) -> str:
    return g.reduce("ReduceSum", g.op("Where", top, x, g.const(np.array(0.0))))


def _onnx_others_max(g, x: str, top: str) -> str:
    low = g.op("Where", top, g.const(np.array(-np.inf)), x)
    return g.reduce("ReduceMax", low)


def _onnx_ahead(g, x: str, top: str) -> str:
    return g.op("Greater", _onnx_at_top(g, x, top), _onnx_others_max(g, x, top))


def _onnx_hold_strict(g, v: str, top: str, ahead: str) -> str:
    other = _onnx_others_max(g, v, top)
    value = g.op("Max", _onnx_at_top(g, v, top), other)
    level = g.op("And", ahead, g.op("LessOrEqual", value, other))
    value = g.op("Where", level, onnx_next_up(g, other), value)
    return g.op("Where", top, value, v)


def _onnx_top_logs(g, z: str, top: str, log_tiny: str):
    e = g.op("Exp", g.op("Sub", z, g.reduce("ReduceMax", z)))
    zero = g.const(np.array(0.0))
    top_share = g.reduce("ReduceSum", g.op("Where", top, e, zero))
    rest = g.reduce("ReduceSum", g.op("Where", top, zero, e))
    log_total = g.op("Log", g.op("Add", top_share, rest))
    log_rest = g.op("Sub", g.op("Max", g.op("Log", rest), log_tiny), log_total)
    return g.op("Sub", g.op("Log", top_share), log_total), log_rest


def _onnx_softmax(g, s: str) -> str:
    e = g.op("Exp", g.op("Sub", s, g.reduce("ReduceMax", s)))
    return g.op("Div", e, g.reduce("ReduceSum", e))


def _onnx_sigmoid(g, d: str) -> str:
    """``1 / (1 + exp(-d))``, as scipy's ``expit``."""
    one = g.const(np.array(1.0))
    return g.op("Div", one, g.op("Add", one, g.op("Exp", g.op("Neg", d))))


class TopVersusAllMap(Float64Block):
    """Scores to ``TopVersusAll.predict_proba`` (dense input).

    Parameters
    ----------
    kind : {"none", "scaling", "one_map", "binary"}
        No binary problem (the classifier's probabilities), a scaling
        calibrator (``inner`` its logits of logits shifted to a row maximum
        of 0), a calibrator of one map (``inner`` a :class:`ConfidenceMap`
        of the confidence) or a binary calibrator (``inner`` its module of
        the binary problem's two columns, read at ``right_column``).
    proba : bool
        Whether the input holds probabilities (else logits).
    n_classes : int
    inner : torch module or None
    temperature : float
        The temperature of the others' shares of a binary calibrator.
    scaled_shares : bool
        The others share in the proportions of the scaling calibrator's
        logits (else of the input's).
    softmax_ahead : bool
        The top class is kept strictly first where it is strictly first in
        the softmax of the shares (temperature scaling with its own
        shares), else where it is in the logits.
    proba_floor : float
        The floor of the probabilities before their logs (``proba_floor_``).
    binary_proba : bool
        A binary calibrator reads the binary problem's probabilities
        ``[1 - c, c]`` (else its scores ``[log(1 - c), log c]``).
    right_column : int
    floor, sum_floor, tiny, log_tiny : float
        See the module docstring.
    """

    def __init__(
        self, kind, proba, n_classes, inner=None, *, temperature=1.0,
        scaled_shares=False, softmax_ahead=False, proba_floor, binary_proba=False,
        right_column=1, floor, sum_floor, tiny, log_tiny,
    ):  # fmt: skip
        super().__init__()
        if kind not in _KINDS:
            raise ValueError(f"kind must be one of {_KINDS}, got {kind!r}.")
        # the one float buffer that follows .float() (see OneVsRest)
        self.register_buffer("dtype_marker", torch.zeros((), dtype=torch.float64))
        self.kind, self.proba = kind, bool(proba)
        self.inner = _Unused() if inner is None else inner
        self.probabilities = Probabilities("proba", n_classes, tiny)
        self.floored = Probabilities("proba", n_classes, max(proba_floor, tiny))
        self.tempered = float(temperature) != 1.0
        self.scaled_shares, self.softmax_ahead = (
            bool(scaled_shares),
            bool(softmax_ahead),
        )
        self.binary_proba, self.right = bool(binary_proba), int(right_column)
        # the probabilities themselves are mapped (their softmax, not their logs)
        self.direct = self.proba and (
            kind == "none" or (kind in ("one_map", "binary") and not self.tempered)
        )
        for name, value in (
            ("temperature", temperature), ("floor", floor), ("sum_floor", sum_floor),
            ("tiny", tiny), ("log_tiny", log_tiny),
            ("lowest", np.finfo(np.float64).min),
        ):  # fmt: skip
            self._constant(name, value)

    def _apply(self, fn, recurse=True):
        # every float64 buffer below stays float64 (the inner blocks too,
        # which need not be Float64Blocks); see Float64Block._apply
        marker = self._buffers["dtype_marker"]
        kept = {
            name: buffer
            for name, buffer in self.named_buffers()
            if buffer.dtype == torch.float64 and name != "dtype_marker"
        }
        super()._apply(fn, recurse)
        self._buffers["dtype_marker"] = fn(marker)
        for name, old in kept.items():
            path, _, leaf = name.rpartition(".")
            module = self.get_submodule(path) if path else self
            new = module._buffers[leaf]
            if new is not None and new.dtype != torch.float64:
                module._buffers[leaf] = old.to(device=new.device)
        return self

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        dtype = x.dtype
        x = x.to(torch.float64)
        P = self.probabilities(x) if self.proba else x
        L = torch.log(self.floored(x)) if self.proba else x
        top = _top_mask(P if self.proba and self.kind != "scaling" else L)
        complement: torch.Tensor | None = None
        S = L
        if self.kind == "scaling":
            S = self.inner(L - torch.amax(L, dim=-1, keepdim=True))
            log_c, log_rest = _top_logs(S, top, self.log_tiny)
            c, complement = torch.exp(log_c), torch.exp(log_rest)
        elif self.proba:
            c0 = _at_top(P, top)
            rest0 = torch.where(top, torch.zeros_like(P), P).sum(dim=-1, keepdim=True)
            total = c0 + rest0
            if self.kind == "none":
                c, complement = c0 / total, rest0 / total
            else:
                c = self._confidence_of_probabilities(c0, rest0, total)
        else:
            log_c, log_rest = _top_logs(L, top, self.log_tiny)
            if self.kind == "none":
                c, complement = torch.exp(log_c), torch.exp(log_rest)
            else:
                c = self._confidence_of_logits(log_c, log_rest)
        if self.direct:
            return self._replace(P, torch.log(P), top, c, complement, None).to(dtype)
        shares = S if self.scaled_shares else L
        if self.tempered:
            shares = shares / self.temperature
        ahead: torch.Tensor | None = None
        if not self.softmax_ahead:
            ahead = _ahead(L, top)
        out = self._replace(_softmax(shares), shares, top, c, complement, ahead)
        return out.to(dtype)

    def _binary(self, scores: torch.Tensor) -> torch.Tensor:
        value = self.inner(scores)[:, self.right : self.right + 1]
        return torch.clamp(value, 0.0, 1.0)

    def _confidence_of_logits(self, log_c: torch.Tensor, log_rest: torch.Tensor):
        """The calibrated confidence of the binary problem of logits."""
        if self.kind == "one_map":  # expit of the scores' difference
            d = log_c - log_rest
            p = 1.0 / (1.0 + torch.exp(-d))
            return self.inner(torch.maximum(p, self.tiny))
        return self._binary(torch.cat([log_rest, log_c], dim=-1))

    def _confidence_of_probabilities(self, c, rest, total):
        """The calibrated confidence of the binary problem of probabilities
        (the top entry ``c`` and the others' sum ``rest``)."""
        if self.kind == "one_map":
            return self.inner(c)
        if self.binary_proba:
            q = torch.cat([rest / total, c / total], dim=-1)
            return self._binary(torch.maximum(q, self.tiny))
        log_total = torch.log(total)
        wrong = torch.maximum(torch.log(rest), self.log_tiny) - log_total
        return self._binary(torch.cat([wrong, torch.log(c) - log_total], dim=-1))

    def _replace(self, P, s, top, c, complement: torch.Tensor | None,
                 ahead: torch.Tensor | None):  # fmt: skip
        """``replace_top_label_inplace(P, s, top, c, floor=floor,
        keep_argmax=True, complement=complement, ahead=ahead)``."""
        zero, one = torch.zeros_like(P), torch.ones_like(c)
        underflow = torch.amin(P, dim=-1, keepdim=True) < self.tiny
        p_top = _at_top(P, top)
        Po = torch.where(top, zero, P)
        others = Po.sum(dim=-1, keepdim=True)
        small = (others < self.sum_floor) | underflow
        largest = torch.amax(Po, dim=-1, keepdim=True)
        least = largest / torch.maximum(others + largest, self.sum_floor)
        raised = c < least
        c = torch.maximum(c, least)
        rest = 1.0 - c
        if complement is not None:
            rest = torch.where(raised, rest, complement)
        rest = torch.maximum(rest, self.floor)
        factor = rest / torch.where(small, one, others)
        other = largest * factor
        if ahead is None:
            ahead = p_top > largest
        value = torch.maximum(torch.maximum(c, self.floor), other)
        value = torch.where(ahead & (value <= other), _next_up(other), value)
        main = torch.where(top, value, Po * factor)
        return torch.where(small, self._replace_logs(s, top, c, rest), main)

    def _replace_logs(self, s, top, c, rest):
        """``exp(replace_top_label(s, top, c, log=True, keep_argmax=True,
        complement=rest))`` with the top class held strictly first."""
        z = torch.where(top, torch.full_like(s, -float("inf")), s)
        z = z - torch.amax(z, dim=-1, keepdim=True)
        total = torch.exp(z).sum(dim=-1, keepdim=True)
        least = 1.0 / (1.0 + total)
        raised = c < least
        c = torch.maximum(c, least)
        rest = torch.where(raised, 1.0 - c, rest)
        out = (z - torch.log(total)) + torch.log(torch.maximum(rest, self.floor))
        out = torch.where(top, torch.log(torch.maximum(c, self.floor)), out)
        out = torch.maximum(out, self.lowest)
        ahead = _ahead(s, top)
        out = _hold_strict(out, top, ahead)
        return _hold_strict(torch.exp(out), top, ahead)

    @torch.jit.ignore
    def onnx(self, g, x: str) -> str:
        cast = g.dtype != np.float64
        if cast:
            x = g.op("Cast", x, to=_DOUBLE)
        with g.precision(np.float64):
            out = self._onnx(g, x)
        return g.op("Cast", out, to=_FLOAT) if cast else out

    @torch.jit.ignore
    def _number(self, g, name: str) -> str:
        return g.const(self._value(name), name)

    @torch.jit.ignore
    def _onnx(self, g, x: str) -> str:
        P = self.probabilities.onnx(g, x) if self.proba else x
        L = g.op("Log", self.floored.onnx(g, x)) if self.proba else x
        top = _onnx_top_mask(g, P if self.proba and self.kind != "scaling" else L)
        complement, S = None, L
        if self.kind == "scaling":
            S = self.inner.onnx(g, g.op("Sub", L, g.reduce("ReduceMax", L)))
            log_c, log_rest = _onnx_top_logs(g, S, top, self._number(g, "log_tiny"))
            c, complement = g.op("Exp", log_c), g.op("Exp", log_rest)
        elif self.proba:
            c0 = _onnx_at_top(g, P, top)
            rest_p = g.op("Where", top, g.const(np.array(0.0)), P)
            rest0 = g.reduce("ReduceSum", rest_p)
            total = g.op("Add", c0, rest0)
            if self.kind == "none":
                c, complement = g.op("Div", c0, total), g.op("Div", rest0, total)
            else:
                c = self._onnx_confidence_of_probabilities(g, c0, rest0, total)
        else:
            log_c, log_rest = _onnx_top_logs(g, L, top, self._number(g, "log_tiny"))
            if self.kind == "none":
                c, complement = g.op("Exp", log_c), g.op("Exp", log_rest)
            else:
                c = self._onnx_confidence_of_logits(g, log_c, log_rest)
        if self.direct:
            return self._onnx_replace(g, P, g.op("Log", P), top, c, complement, None)
        shares = S if self.scaled_shares else L
        if self.tempered:
            shares = g.op("Div", shares, self._number(g, "temperature"))
        ahead = None if self.softmax_ahead else _onnx_ahead(g, L, top)
        P = _onnx_softmax(g, shares)
        return self._onnx_replace(g, P, shares, top, c, complement, ahead)

    @torch.jit.ignore
    def _onnx_binary(self, g, scores: str) -> str:
        value = _onnx_column(g, self.inner.onnx(g, scores), self.right)
        return g.op("Clip", value, g.const(np.array(0.0)), g.const(np.array(1.0)))

    @torch.jit.ignore
    def _onnx_confidence_of_logits(self, g, log_c: str, log_rest: str) -> str:
        if self.kind == "one_map":
            p = _onnx_sigmoid(g, g.op("Sub", log_c, log_rest))
            return self.inner.onnx(g, g.op("Max", p, self._number(g, "tiny")))
        return self._onnx_binary(g, g.op("Concat", log_rest, log_c, axis=-1))

    @torch.jit.ignore
    def _onnx_confidence_of_probabilities(self, g, c, rest, total) -> str:
        if self.kind == "one_map":
            return self.inner.onnx(g, c)
        if self.binary_proba:
            q = g.op("Concat", g.op("Div", rest, total), g.op("Div", c, total), axis=-1)
            return self._onnx_binary(g, g.op("Max", q, self._number(g, "tiny")))
        log_total = g.op("Log", total)
        wrong = g.op("Max", g.op("Log", rest), self._number(g, "log_tiny"))
        wrong = g.op("Sub", wrong, log_total)
        right = g.op("Sub", g.op("Log", c), log_total)
        return self._onnx_binary(g, g.op("Concat", wrong, right, axis=-1))

    @torch.jit.ignore
    def _onnx_replace(self, g, P, s, top, c, complement, ahead) -> str:
        zero, floor = g.const(np.array(0.0)), self._number(g, "floor")
        sum_floor = self._number(g, "sum_floor")
        underflow = g.op("Less", g.reduce("ReduceMin", P), self._number(g, "tiny"))
        p_top = _onnx_at_top(g, P, top)
        Po = g.op("Where", top, zero, P)
        others = g.reduce("ReduceSum", Po)
        small = g.op("Or", g.op("Less", others, sum_floor), underflow)
        largest = g.reduce("ReduceMax", Po)
        least = g.op(
            "Div", largest, g.op("Max", g.op("Add", others, largest), sum_floor)
        )
        raised = g.op("Less", c, least)
        c = g.op("Max", c, least)
        rest = g.op("Sub", g.const(np.array(1.0)), c)
        if complement is not None:
            rest = g.op("Where", raised, rest, complement)
        rest = g.op("Max", rest, floor)
        divisor = g.op("Where", small, g.const(np.array(1.0)), others)
        factor = g.op("Div", rest, divisor)
        other = g.op("Mul", largest, factor)
        if ahead is None:
            ahead = g.op("Greater", p_top, largest)
        value = g.op("Max", g.op("Max", c, floor), other)
        level = g.op("And", ahead, g.op("LessOrEqual", value, other))
        value = g.op("Where", level, onnx_next_up(g, other), value)
        main = g.op("Where", top, value, g.op("Mul", Po, factor))
        logs = self._onnx_replace_logs(g, s, top, c, rest)
        return g.op("Where", small, logs, main)

    @torch.jit.ignore
    def _onnx_replace_logs(self, g, s, top, c, rest) -> str:
        one, floor = g.const(np.array(1.0)), self._number(g, "floor")
        z = g.op("Where", top, g.const(np.array(-np.inf)), s)
        z = g.op("Sub", z, g.reduce("ReduceMax", z))
        total = g.reduce("ReduceSum", g.op("Exp", z))
        least = g.op("Div", one, g.op("Add", one, total))
        raised = g.op("Less", c, least)
        c = g.op("Max", c, least)
        rest = g.op("Where", raised, g.op("Sub", one, c), rest)
        out = g.op("Sub", z, g.op("Log", total))
        out = g.op("Add", out, g.op("Log", g.op("Max", rest, floor)))
        out = g.op("Where", top, g.op("Log", g.op("Max", c, floor)), out)
        out = g.op("Max", out, self._number(g, "lowest"))
        ahead = _onnx_ahead(g, s, top)
        out = _onnx_hold_strict(g, out, top, ahead)
        return _onnx_hold_strict(g, g.op("Exp", out), top, ahead)
