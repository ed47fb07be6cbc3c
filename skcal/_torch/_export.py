"""Torch modules of fitted calibrators, and their ONNX graphs.

Each block is an :class:`ExportModule`: ``forward`` computes in the dtype
of its input (any float dtype; the constants are float64 buffers, so
``.float()``, ``.double()`` and ``.to(device)`` work), and ``onnx(g, x)``
appends the same computation, op for op, to a
:class:`~skcal.export._graph.GraphBuilder` and returns its output's name.
A calibrator's ``to_torch`` chains the blocks of its prediction
(:class:`Chain`): the input handling of :class:`ScoresToLogits`, its map,
and :class:`Softmax`. The modules hold plain tensors and torch code only,
so a module scripted by :func:`torch.jit.script` and saved runs where skcal
is not installed.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

__all__ = [
    "Affine",
    "Chain",
    "ClassTemperature",
    "Dense",
    "EnsembleMix",
    "ExportModule",
    "GapTemperature",
    "GroupedChain",
    "GroupedScaling",
    "LocalNetLogits",
    "LogSoftmax",
    "NextAfterUp",
    "ScoresToLogits",
    "SmoothedLogProba",
    "Softmax",
    "Temperature",
    "TopTemperature",
    "VQLogits",
    "grouped_module",
    "module_dtype",
    "onnx_next_up",
    "run_module",
    "takes_group",
]


def module_dtype(exported) -> type:
    """The numpy float type of the constants of a torch module, scripted
    module or ``torch.export`` program (float64 if it has none)."""
    if hasattr(exported, "graph_signature"):  # an ExportedProgram
        tensors = list(exported.state_dict.values())
        tensors += list(getattr(exported, "constants", {}).values())
    else:
        tensors = list(exported.buffers()) + list(exported.parameters())
    floats = [t for t in tensors if t.is_floating_point()]
    if floats and floats[0].dtype == torch.float32:
        return np.float32
    return np.float64


def run_module(exported, X: np.ndarray, group=None) -> np.ndarray:
    """The output of a torch module (scripted or not) or ``torch.export``
    program for ``X`` (cast to :func:`module_dtype`), as float64 numpy; a
    two-input module (:class:`GroupedChain`) is also given ``group``, the
    int64 positions of the rows' groups (None: -1, the pooled map)."""
    run = exported.module() if hasattr(exported, "graph_signature") else exported
    x = torch.from_numpy(np.ascontiguousarray(X, dtype=module_dtype(exported)))
    tensors = list(run.buffers()) if isinstance(run, nn.Module) else []
    if tensors:  # the module's device
        x = x.to(tensors[0].device)
    inputs = [x]
    if group is None and takes_group(exported):
        group = np.full(len(X), -1)
    if group is not None:
        inputs.append(torch.from_numpy(np.asarray(group, dtype=np.int64)).to(x.device))
    with torch.no_grad():
        out = run(*inputs)
    return out.detach().cpu().double().numpy()


def takes_group(exported) -> bool:
    """Whether a torch module (scripted or not) or ``torch.export`` program
    reads a second input, each row's group (:class:`GroupedChain`)."""
    if hasattr(exported, "graph_signature"):
        return len(exported.graph_signature.user_inputs) == 2
    return bool(getattr(exported, "takes_group", False))


class ExportModule(nn.Module):
    """Base of the exported blocks: float64 buffers, an ``onnx`` method."""

    def _constant(self, name: str, value) -> None:
        """Register ``value`` as the float64 buffer ``name``."""
        array = np.array(value, dtype=np.float64)
        self.register_buffer(name, torch.from_numpy(array))

    @torch.jit.ignore
    def onnx(self, g, x: str) -> str:
        """Append this block's ONNX nodes to ``g`` after ``x``; return the
        name of its output."""
        raise NotImplementedError

    @torch.jit.ignore
    def _value(self, name: str) -> np.ndarray:
        """The buffer ``name`` as a float64 numpy array (for ``onnx``)."""
        return getattr(self, name).detach().cpu().double().numpy()


class Chain(ExportModule):
    """The blocks applied one after the other."""

    def __init__(self, *blocks: ExportModule):
        super().__init__()
        self.blocks = nn.ModuleList(blocks)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = block(x)
        return x

    @torch.jit.ignore
    def onnx(self, g, x: str) -> str:
        for block in self.blocks:
            x = block.onnx(g, x)
        return x


class GroupedScaling(ExportModule):
    """``x * scale[g] + offset[g]`` with ``g`` each row's group: a row of the
    tables ``scale`` and ``offset`` (of shape ``(n_groups + 1, K)``, or
    ``(n_groups + 1, 1)`` for one scale a group), whose last row holds the
    pooled map, used for a ``g`` outside ``[0, n_groups)`` (-1: a group not
    seen in fit)."""

    def __init__(self, scale, offset=None):
        super().__init__()
        self._constant("scale", scale)
        self.n_groups = int(np.shape(scale)[0]) - 1
        self.has_offset = offset is not None
        self._constant("offset", 0.0 if offset is None else offset)

    def forward(self, x: torch.Tensor, group: torch.Tensor) -> torch.Tensor:
        group = group.to(torch.int64).to(x.device)
        inside = (group >= 0) & (group < self.n_groups)
        index = torch.where(inside, group, torch.full_like(group, self.n_groups))
        x = x * self.scale.to(x.dtype)[index]
        if self.has_offset:
            x = x + self.offset.to(x.dtype)[index]
        return x

    @torch.jit.ignore
    def onnx(self, g, x: str, group: str) -> str:
        n = g.const(np.array(self.n_groups, dtype=np.int64), "n_groups")
        below = g.op("Less", group, g.const(np.array(0, dtype=np.int64)))
        inside = g.op("And", g.op("Less", group, n), g.op("Not", below))
        index = g.op("Where", inside, group, n)
        scale = g.op("Gather", g.const(self._value("scale"), "scale"), index, axis=0)
        x = g.op("Mul", x, scale)
        if self.has_offset:
            table = g.const(self._value("offset"), "offset")
            x = g.op("Add", x, g.op("Gather", table, index, axis=0))
        return x


class GroupedChain(ExportModule):
    """A per-group calibrator's module of two inputs, ``forward(x, group)``:
    ``tail(scaling(head(x), group))``, with ``group`` the int64 positions of
    the rows' groups (see :class:`GroupedScaling`)."""

    def __init__(self, head: ExportModule, scaling: GroupedScaling, tail: ExportModule):
        super().__init__()
        self.head = head
        self.scaling = scaling
        self.tail = tail
        self.takes_group = True

    def forward(self, x: torch.Tensor, group: torch.Tensor) -> torch.Tensor:
        return self.tail(self.scaling(self.head(x), group))

    @torch.jit.ignore
    def onnx(self, g, x: str, group: str = "group") -> str:
        return self.tail.onnx(g, self.scaling.onnx(g, self.head.onnx(g, x), group))


class ScoresToLogits(ExportModule):
    """A calibrator's input handling: scores to the logits it maps.

    ``input="proba"``: rows clipped to [0, 1], divided by their sums, and
    ``log(max(p, proba_floor))``, computed as ``max(log(p), log(proba_floor))``
    (the same numbers, and in float32 too, where ``proba_floor`` may be below
    the range of the type but its log is not). ``input="logits"``: the row
    maximum subtracted with ``shift`` (shift-invariant calibrators), else
    unchanged.
    """

    def __init__(self, input: str, proba_floor: float, shift: bool):
        super().__init__()
        if input not in ("logits", "proba"):
            raise ValueError(f"input must be 'logits' or 'proba', got {input!r}.")
        self.input = input
        self.proba = input == "proba"
        self.shift = bool(shift)
        self.proba_floor = float(proba_floor)
        self._constant("log_floor", np.log(proba_floor))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.proba:
            x = torch.clamp(x, 0.0, 1.0)
            x = torch.log(x / x.sum(dim=-1, keepdim=True))
            return torch.maximum(x, self.log_floor.to(x.dtype))
        if self.shift:
            return x - torch.amax(x, dim=-1, keepdim=True)
        return x

    @torch.jit.ignore
    def onnx(self, g, x: str) -> str:
        if self.proba:
            x = g.op("Clip", x, g.const(np.array(0.0)), g.const(np.array(1.0)))
            x = g.op("Log", g.op("Div", x, g.reduce("ReduceSum", x)))
            return g.op("Max", x, g.const(self._value("log_floor"), "log_floor"))
        if self.shift:
            return g.op("Sub", x, g.reduce("ReduceMax", x))
        return x


class LogSoftmax(ExportModule):
    """Row log-softmax (last axis): logits to log-probabilities."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.log_softmax(x, dim=-1)

    @torch.jit.ignore
    def onnx(self, g, x: str) -> str:
        return g.op("LogSoftmax", x, axis=-1)


class Softmax(ExportModule):
    """Row softmax (last axis), computed stably."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=-1)

    @torch.jit.ignore
    def onnx(self, g, x: str) -> str:
        return g.op("Softmax", x, axis=-1)


#: Per float type: (mantissa bits, the smallest positive subnormal, the
#: bound below which the next float is ``x`` plus that subnormal, the bound
#: below which ``x`` is scaled up first, and that scale, a power of two)
_NEXT_UP = {
    np.float64: (52, 2.0**-1074, 2.0**-1021, 2.0**-900, 2.0**200),
    np.float32: (23, 2.0**-149, 2.0**-125, 2.0**-90, 2.0**60),
}


def onnx_next_up(g, x: str) -> str:
    """``np.nextafter(x, inf)`` elementwise, exactly, in ONNX ops (which
    have no ``nextafter`` and no bit cast), in the float type of ``g``.

    With ``p`` the mantissa bits (52, or 23 in float32), ``x + |x| (2^-(p+1)
    + 2^-(2p+1))`` is the next float above ``x``: the product is more than
    half a unit in the last place of ``x`` and less than one and a half (for
    ``x`` a power of two, exactly half a unit times ``1 + 2^-p``, so the sum
    never rounds back to ``x`` by ties-to-even), and for ``x < 0`` it is
    between half a unit and one unit of ``|x|`` below it, so the sum rounds
    to the float next toward 0. Where the product would be subnormal (and
    rounded), ``x`` is first scaled by a power of two (exact both ways);
    below twice the smallest normal, the spacing of the floats is the
    smallest subnormal, added directly. ``inf`` stays ``inf``, ``-inf``
    goes to the lowest float and the largest float to ``inf``, as with
    ``nextafter``.
    """
    bits, tiny, sub_bound, small_bound, scale = _NEXT_UP[np.dtype(g.dtype).type]
    a = g.op("Abs", x)
    s = g.op(
        "Where",
        g.op("Less", a, g.const(np.array(small_bound))),
        g.const(np.array(scale)),
        g.const(np.array(1.0)),
    )
    xs = g.op("Mul", x, s)
    half = g.const(np.array(2.0 ** -(bits + 1) + 2.0 ** -(2 * bits + 1)), "half_ulp")
    up = g.op("Div", g.op("Add", xs, g.op("Mul", g.op("Abs", xs), half)), s)
    near_zero = g.op("Less", a, g.const(np.array(sub_bound)))
    up = g.op("Where", near_zero, g.op("Add", x, g.const(np.array(tiny))), up)
    lowest = np.finfo(g.dtype).min  # -inf goes to the lowest float, not NaN
    minus_inf = g.op("Equal", x, g.const(np.array(-np.inf)))
    return g.op("Where", minus_inf, g.const(np.array(lowest)), up)


class NextAfterUp(ExportModule):
    """The next float above each entry, ``np.nextafter(x, inf)``, exactly, in
    the dtype of ``x`` (float32 or float64): ``torch.nextafter`` in torch,
    :func:`onnx_next_up` in ONNX. For breaking a tie by one unit in the last
    place, as the numpy predictions do."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nextafter(x, torch.full_like(x, float("inf")))

    @torch.jit.ignore
    def onnx(self, g, x: str) -> str:
        return onnx_next_up(g, x)


class Temperature(ExportModule):
    """``x / temperature`` (a scalar or one per column), plus ``bias`` if
    given."""

    def __init__(self, temperature, bias=None):
        super().__init__()
        self._constant("temperature", temperature)
        self.has_bias = bias is not None
        self._constant("bias", 0.0 if bias is None else bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x / self.temperature.to(x.dtype)
        if self.has_bias:
            x = x + self.bias.to(x.dtype)
        return x

    @torch.jit.ignore
    def onnx(self, g, x: str) -> str:
        x = g.op("Div", x, g.const(self._value("temperature"), "temperature"))
        if self.has_bias:
            x = g.op("Add", x, g.const(self._value("bias"), "bias"))
        return x


class Affine(ExportModule):
    """``x @ coef.T + intercept``, or ``x * coef + intercept`` for a 1-D
    ``coef`` (a diagonal map)."""

    def __init__(self, coef, intercept):
        super().__init__()
        coef = np.asarray(coef, dtype=np.float64)
        self.diagonal = coef.ndim == 1
        self._constant("coef", coef if self.diagonal else coef.T)
        self._constant("intercept", intercept)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        coef = self.coef.to(x.dtype)
        if self.diagonal:
            x = x * coef
        else:
            x = torch.matmul(x, coef)
        return x + self.intercept.to(x.dtype)

    @torch.jit.ignore
    def onnx(self, g, x: str) -> str:
        op = "Mul" if self.diagonal else "MatMul"
        x = g.op(op, x, g.const(self._value("coef"), "coef"))
        return g.op("Add", x, g.const(self._value("intercept"), "intercept"))


class Dense(ExportModule):
    """One layer of a network, ``x @ weight + bias``, then ReLU if ``relu``
    (``weight`` of shape ``(n_in, n_out)``, as the kernels store it)."""

    def __init__(self, weight, bias, relu: bool):
        super().__init__()
        self._constant("weight", weight)
        self._constant("bias", bias)
        self.relu = bool(relu)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.matmul(x, self.weight.to(x.dtype)) + self.bias.to(x.dtype)
        if self.relu:
            x = torch.relu(x)
        return x

    @torch.jit.ignore
    def onnx(self, g, x: str) -> str:
        x = g.op("MatMul", x, g.const(self._value("weight"), "weight"))
        x = g.op("Add", x, g.const(self._value("bias"), "bias"))
        return g.op("Relu", x) if self.relu else x


def grouped_module(input: str, proba_floor: float, scale, offset=None) -> GroupedChain:
    """The module of a per-group calibrator that maps ``log softmax`` of its
    logits: input handling, log-softmax, :class:`GroupedScaling`, softmax."""
    head = Chain(ScoresToLogits(input, proba_floor, shift=True), LogSoftmax())
    return GroupedChain(head, GroupedScaling(scale, offset), Softmax())


def _network(coefs, intercepts) -> Chain:
    """The ReLU network of the layers ``(coefs[i], intercepts[i])``."""
    last = len(coefs) - 1
    return Chain(
        *(Dense(W, b, i < last) for i, (W, b) in enumerate(zip(coefs, intercepts)))
    )


class ClassTemperature(ExportModule):
    """``x / temperatures[argmax(x)]``: the temperature of each row's top
    column (the first among tied maxima)."""

    def __init__(self, temperatures):
        super().__init__()
        self._constant("temperatures", temperatures)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        top = torch.argmax(x, dim=-1, keepdim=True)
        return x / self.temperatures.to(x.dtype)[top]

    @torch.jit.ignore
    def onnx(self, g, x: str) -> str:
        top = g.op("ArgMax", x, axis=-1, keepdims=1)
        t = g.op("Gather", g.const(self._value("temperatures"), "temperatures"), top)
        return g.op("Div", x, t)


class EnsembleMix(ExportModule):
    """Ensemble temperature scaling's mixture of the logits ``x``:
    ``w0 softmax(x / T) + w1 softmax(x) + w2 / C``, rows renormalised
    (probabilities out, no softmax after)."""

    def __init__(self, temperature: float, weights, n_classes: int):
        super().__init__()
        self._constant("temperature", temperature)
        w = np.asarray(weights, dtype=np.float64)
        self._constant("weights", w[:2])
        self._constant("uniform", w[2] / n_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        w = self.weights.to(x.dtype)
        p = torch.softmax(x / self.temperature.to(x.dtype), dim=-1) * w[0]
        p = p + torch.softmax(x, dim=-1) * w[1] + self.uniform.to(x.dtype)
        return p / p.sum(dim=-1, keepdim=True)

    @torch.jit.ignore
    def onnx(self, g, x: str) -> str:
        w0, w1 = self._value("weights")
        tempered = g.op("Div", x, g.const(self._value("temperature"), "temperature"))
        p = g.op("Mul", g.op("Softmax", tempered, axis=-1), g.const(w0, "w0"))
        raw = g.op("Mul", g.op("Softmax", x, axis=-1), g.const(w1, "w1"))
        p = g.op("Add", g.op("Add", p, raw), g.const(self._value("uniform")))
        return g.op("Div", p, g.reduce("ReduceSum", p))


class SmoothedLogProba(ExportModule):
    """Structured scaling's features of the logits ``x``:
    ``log((1 - mix) softmax(beta t) + mix / C)`` with ``t = x - max(x)``,
    first raised to ``floor + log sum exp(t)`` where ``floor`` is finite
    (the floor of the log-probabilities)."""

    def __init__(self, beta: float, mix: float, n_classes: int, floor: float):
        super().__init__()
        self._constant("beta", beta)
        self._constant("keep", 1.0 - mix)
        self._constant("uniform", mix / n_classes)
        self.has_floor = bool(np.isfinite(floor))
        self._constant("floor", floor if self.has_floor else 0.0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        t = x - torch.amax(x, dim=-1, keepdim=True)
        if self.has_floor:
            total = torch.log(torch.exp(t).sum(dim=-1, keepdim=True))
            t = torch.maximum(t, self.floor.to(x.dtype) + total)
        p = torch.softmax(t * self.beta.to(x.dtype), dim=-1) * self.keep.to(x.dtype)
        return torch.log(p + self.uniform.to(x.dtype))

    @torch.jit.ignore
    def onnx(self, g, x: str) -> str:
        t = g.op("Sub", x, g.reduce("ReduceMax", x))
        if self.has_floor:
            total = g.op("Log", g.reduce("ReduceSum", g.op("Exp", t)))
            floor = g.const(self._value("floor"), "floor")
            t = g.op("Max", t, g.op("Add", floor, total))
        t = g.op("Mul", t, g.const(self._value("beta"), "beta"))
        p = g.op("Mul", g.op("Softmax", t, axis=-1), g.const(self._value("keep")))
        return g.op("Log", g.op("Add", p, g.const(self._value("uniform"))))


class TopTemperature(ExportModule):
    """Parameterized temperature scaling: ``z / |net(top_k(z))|`` with
    ``z = clip(x / temperature, -clip, clip)``, the network's temperature
    clamped to [1e-12, 1e12]."""

    def __init__(self, temperature, coefs, intercepts, k: int, clip: float):
        super().__init__()
        self._constant("temperature", temperature)
        self._constant("clip", clip)
        self.k = int(k)
        self.net = _network(coefs, intercepts)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        clip = self.clip.to(x.dtype)
        z = torch.minimum(torch.maximum(x / self.temperature.to(x.dtype), -clip), clip)
        top = torch.topk(z, self.k, dim=-1).values
        t = torch.clamp(torch.abs(self.net(top)), 1e-12, 1e12)
        return z / t

    @torch.jit.ignore
    def onnx(self, g, x: str) -> str:
        clip = self._value("clip")
        z = g.op("Div", x, g.const(self._value("temperature"), "temperature"))
        z = g.op("Clip", z, g.const(-clip), g.const(clip))
        k = g.const(np.array([self.k], dtype=np.int64), "k")
        top = g.op_multi("TopK", [z, k], 2, axis=-1, largest=1, sorted=1)[0]
        t = g.op("Abs", self.net.onnx(g, top))
        t = g.op("Clip", t, g.const(np.array(1e-12)), g.const(np.array(1e12)))
        return g.op("Div", z, t)


class GapTemperature(ExportModule):
    """SMART: ``x / (softplus(net(g_hat)) + t_min)``, ``g_hat`` the gap
    between the two largest entries of the row (clipped to ``gap_range``
    if given), standardised as ``(g - mean) / scale``."""

    def __init__(self, coefs, intercepts, mean, scale, t_min, gap_range=None):
        super().__init__()
        self._constant("mean", mean)
        self._constant("scale", scale)
        self._constant("t_min", t_min)
        self.clipped = gap_range is not None
        self._constant("gap_range", (0.0, 0.0) if gap_range is None else gap_range)
        self.net = _network(coefs, intercepts)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        top = torch.topk(x, 2, dim=-1).values
        gap = top[:, 0:1] - top[:, 1:2]
        if self.clipped:
            bounds = self.gap_range.to(x.dtype)
            gap = torch.minimum(torch.maximum(gap, bounds[0]), bounds[1])
        g_hat = (gap - self.mean.to(x.dtype)) / self.scale.to(x.dtype)
        h = self.net(g_hat)
        # softplus, written as the graph computes it
        t = torch.relu(h) + torch.log(1.0 + torch.exp(-torch.abs(h)))
        return x / (t + self.t_min.to(x.dtype))

    @torch.jit.ignore
    def onnx(self, g, x: str) -> str:
        k = g.const(np.array([2], dtype=np.int64), "k")
        top = g.op_multi("TopK", [x, k], 2, axis=-1, largest=1, sorted=1)[0]
        gap = g.op("MatMul", top, g.const(np.array([[1.0], [-1.0]]), "difference"))
        if self.clipped:
            low, high = self._value("gap_range")
            gap = g.op("Clip", gap, g.const(low), g.const(high))
        g_hat = g.op("Sub", gap, g.const(self._value("mean"), "gap_mean"))
        g_hat = g.op("Div", g_hat, g.const(self._value("scale"), "gap_scale"))
        h = self.net.onnx(g, g_hat)
        soft = g.op("Exp", g.op("Neg", g.op("Abs", h)))
        soft = g.op("Log", g.op("Add", g.const(np.array(1.0)), soft))
        t = g.op("Add", g.op("Relu", h), soft)
        return g.op("Div", x, g.op("Add", t, g.const(self._value("t_min"))))


class LocalNetLogits(ExportModule):
    """Local Nets' logits of embeddings ``x``: ``u Wc + bc + a_cls z +
    b_cls``, with ``u`` the hidden layers of the standardised embeddings
    ``(x - mean) / scale`` and ``z = x @ coef.T + intercept`` the frozen
    head's logits."""

    def __init__(self, mean, scale, coef, intercept, hidden, output):
        super().__init__()
        self._constant("mean", mean)
        self._constant("scale", scale)
        self.head = Affine(coef, intercept)
        self.hidden = Chain(*(Dense(W, b, True) for W, b in hidden))
        Wc, bc, a_cls, b_cls = output
        self.output = Dense(Wc, bc, False)
        self._constant("a_cls", a_cls)
        self._constant("b_cls", b_cls)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = (x - self.mean.to(x.dtype)) / self.scale.to(x.dtype)
        logits = self.output(self.hidden(h))
        z = self.head(x)
        return logits + self.a_cls.to(x.dtype) * z + self.b_cls.to(x.dtype)

    @torch.jit.ignore
    def onnx(self, g, x: str) -> str:
        h = g.op("Sub", x, g.const(self._value("mean"), "mean"))
        h = g.op("Div", h, g.const(self._value("scale"), "scale"))
        logits = self.output.onnx(g, self.hidden.onnx(g, h))
        z = g.op("Mul", self.head.onnx(g, x), g.const(self._value("a_cls"), "a_cls"))
        return g.op("Add", g.op("Add", logits, z), g.const(self._value("b_cls")))


#: Lanczos' coefficients (g = 7, n = 9) of ``log Gamma``, for ONNX, which
#: has no ``lgamma`` (relative error about 1e-15 in float64)
_LANCZOS = np.array([
    0.99999999999980993, 676.5203681218851, -1259.1392167224028,
    771.32342877765313, -176.61502916214059, 12.507343278686905,
    -0.13857109526572012, 9.9843695780195716e-6, 1.5056327351493116e-7,
])  # fmt: skip


def _onnx_lgamma(g, x: str) -> str:
    """``lgamma(x)`` for ``x > 0`` in ONNX ops: ``lgamma(x + 1) - log(x)``,
    ``lgamma(x + 1) = log(2 pi) / 2 + (x + 1/2) log(t) - t + log(A(x))``
    with ``t = x + 7.5`` and ``A(x) = c0 + sum_i c_i / (x + i)``."""
    shifted = g.op("Add", g.op("Unsqueeze", x, g.const(np.array([-1]))),
                   g.const(np.arange(1.0, 9.0)))  # fmt: skip
    series = g.reduce("ReduceSum", g.op("Div", g.const(_LANCZOS[1:]), shifted),
                      axis=-1, keepdims=0)  # fmt: skip
    log_a = g.op("Log", g.op("Add", series, g.const(_LANCZOS[0])))
    t = g.op("Add", x, g.const(np.array(7.5)))
    power = g.op("Mul", g.op("Add", x, g.const(np.array(0.5))), g.op("Log", t))
    value = g.op("Add", g.op("Sub", power, t), log_a)
    value = g.op("Add", value, g.const(np.array(0.5 * np.log(2 * np.pi))))
    return g.op("Sub", value, g.op("Log", x))


class VQLogits(ExportModule):
    """Divide et Calibra's logits of embeddings ``x``.

    Each of the ``n_slots`` slots of ``x`` is replaced by its nearest
    codeword (squared distance, the first on ties), the head ``coef``,
    ``intercept`` gives the log-probabilities ``log_p`` of the quantized
    vector, and the calibration map ``kind`` maps them: ``"none"``
    (``log_p``), ``"dirichlet"`` (``log_p @ W + b``, ``map_params = (W,
    b)``) or ``"compositional"`` (``map_params = (A, B, log_prior,
    slot_scales, identity_shift)``: ``alpha = softplus(A^T diag(n) B) +
    1e-8`` of the codeword counts ``n`` and the Dirichlet log-likelihood
    terms of the module :mod:`skcal._torch.kernels._vq`). The graph
    evaluates ``lgamma`` by Lanczos' approximation (ONNX has none).
    """

    def __init__(self, codebook, coef, intercept, n_slots: int, kind: str, params):
        super().__init__()
        codebook = np.asarray(codebook, dtype=np.float64)
        self._constant("codebook", codebook)
        self._constant("squares", (codebook * codebook).sum(axis=1))
        self.n_slots, self.width = int(n_slots), codebook.shape[1]
        self.n_codewords = codebook.shape[0]
        self.head = Affine(coef, intercept)
        self.kind = kind
        self.dirichlet = (
            Affine(*params) if kind == "dirichlet" else Affine([0.0], [0.0])
        )
        A, B, log_prior, scales, shift = (
            params if kind == "compositional" else ([[0.0]], [[0.0]], [0.0], [1.0], 0)
        )
        self._constant("receivers_t", np.asarray(A, dtype=np.float64).T)
        self._constant("senders", B)
        self._constant("log_prior", log_prior)
        self._constant("slot_scales", np.reshape(scales, (-1, 1)))
        self.identity_shift = bool(shift)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n = x.shape[0]
        codebook = self.codebook.to(x.dtype)
        S = x.reshape(n, self.n_slots, self.width)
        dist = self.squares.to(x.dtype) - 2.0 * torch.matmul(S, codebook.T)
        index = torch.argmin(dist, dim=-1)
        log_p = torch.log_softmax(self.head(codebook[index].reshape(n, -1)), dim=-1)
        if self.kind == "none":
            return log_p
        if self.kind == "dirichlet":
            return self.dirichlet(log_p)
        return self._compositional(index, log_p).to(x.dtype)

    def _compositional(self, index: torch.Tensor, log_p: torch.Tensor):
        """The compositional map, in float64 whatever the input's dtype: its
        log-Beta terms are differences of ``lgamma`` values in the hundreds,
        of which float32 would keep about 1e-4 (1e-5 in the probabilities)."""
        log_p = log_p.double()
        codes = torch.arange(self.n_codewords, device=index.device)
        onehot = (index.unsqueeze(-1) == codes).double()
        counts = (onehot * self.slot_scales.double()).sum(dim=1)
        receivers = counts.unsqueeze(1) * self.receivers_t.double()
        M = torch.matmul(receivers, self.senders.double())
        alpha = torch.relu(M) + torch.log1p(torch.exp(-torch.abs(M))) + 1e-8
        linear = torch.matmul(log_p.unsqueeze(1), alpha - 1.0).squeeze(1)
        core = linear - torch.lgamma(alpha).sum(dim=1)
        logits = core + torch.lgamma(alpha.sum(dim=1)) + self.log_prior.double()
        if self.identity_shift:
            logits = logits + log_p
        return logits

    @torch.jit.ignore
    def onnx(self, g, x: str) -> str:
        shape = np.array([0, self.n_slots, self.width])
        S = g.op("Reshape", x, g.const(shape, "slots"))
        codebook = self._value("codebook")
        product = g.op("MatMul", S, g.const(codebook.T, "codebook_t"))
        product = g.op("Mul", product, g.const(np.array(2.0)))
        dist = g.op("Sub", g.const(self._value("squares"), "squares"), product)
        index = g.op("ArgMin", dist, axis=-1, keepdims=0)
        q = g.op("Gather", g.const(codebook, "codebook"), index, axis=0)
        q = g.op("Reshape", q, g.const(np.array([0, -1])))
        log_p = g.op("LogSoftmax", self.head.onnx(g, q), axis=-1)
        if self.kind == "none":
            return log_p
        if self.kind == "dirichlet":
            return self.dirichlet.onnx(g, log_p)
        from onnx import TensorProto

        if g.dtype == np.float64:
            return self._compositional_onnx(g, index, log_p)
        with g.precision(np.float64):  # as forward: see _compositional
            log_p = g.op("Cast", log_p, to=TensorProto.DOUBLE)
            logits = self._compositional_onnx(g, index, log_p)
        return g.op("Cast", logits, to=TensorProto.FLOAT)

    @torch.jit.ignore
    def _compositional_onnx(self, g, index: str, log_p: str) -> str:
        from onnx import TensorProto

        codes = g.const(np.arange(self.n_codewords), "codes")
        onehot = g.op("Equal", g.op("Unsqueeze", index, g.const(np.array([-1]))), codes)
        to = TensorProto.DOUBLE if g.dtype == np.float64 else TensorProto.FLOAT
        onehot = g.op("Cast", onehot, to=to)
        counts = g.op("Mul", onehot, g.const(self._value("slot_scales"), "scales"))
        counts = g.reduce("ReduceSum", counts, axis=1, keepdims=0)
        counts = g.op("Unsqueeze", counts, g.const(np.array([1])))
        receivers = g.op("Mul", counts, g.const(self._value("receivers_t"), "A_t"))
        M = g.op("MatMul", receivers, g.const(self._value("senders"), "B"))
        soft = g.op("Exp", g.op("Neg", g.op("Abs", M)))
        soft = g.op("Log", g.op("Add", g.const(np.array(1.0)), soft))
        alpha = g.op("Add", g.op("Add", g.op("Relu", M), soft), g.const(np.array(1e-8)))
        omega = g.op("Sub", alpha, g.const(np.array(1.0)))
        lp = g.op("Unsqueeze", log_p, g.const(np.array([1])))
        linear = g.op("Squeeze", g.op("MatMul", lp, omega), g.const(np.array([1])))
        terms = g.reduce("ReduceSum", _onnx_lgamma(g, alpha), axis=1, keepdims=0)
        total = _onnx_lgamma(g, g.reduce("ReduceSum", alpha, axis=1, keepdims=0))
        logits = g.op("Add", g.op("Sub", linear, terms), total)
        logits = g.op("Add", logits, g.const(self._value("log_prior"), "log_prior"))
        return g.op("Add", logits, log_p) if self.identity_shift else logits
