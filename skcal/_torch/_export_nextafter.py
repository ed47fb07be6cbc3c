"""``np.nextafter(x, inf)`` as torch and ONNX ops (ONNX has no nextafter).

For a finite ``x >= 0`` of a float type with ``p`` bits of mantissa (52
for float64, 23 for float32) and smallest normal exponent ``e_min``
(-1022, -126), the next float up is ``x + 2**(max(e, e_min) - p)`` with
``e = floor(log2 x)``: the spacing of the floats in ``x``'s binade, that of
the subnormals below it (``x = 0`` gives the smallest subnormal). ``log2``
is computed as ``log(x) / log(2)``, which can round across an integer next
to a power of two; ``e`` is then corrected by comparing ``2**e`` with
``x`` (``2**e`` is exact for every integer ``e`` of the range). The sum
is exact: ``x`` is a multiple of the spacing, and the top of a binade
rounds up to the next power of two (to ``inf`` above the largest float).
Negative ``x`` are not needed by the exported blocks and not handled.
"""

from __future__ import annotations

import numpy as np
import torch

__all__ = ["next_up", "onnx_next_up"]


def _bits(dtype) -> tuple[int, int]:
    """``(mantissa bits, smallest normal exponent)`` of a float type."""
    info = np.finfo(dtype)
    return int(info.nmant), int(info.minexp)


def next_up(x: torch.Tensor) -> torch.Tensor:
    """``nextafter(x, inf)`` of the finite non-negative entries of ``x``,
    in ``x``'s dtype (float32 or float64), written with the ops of
    :func:`onnx_next_up`."""
    if x.dtype == torch.float64:
        mantissa, e_min = 52, -1022
    else:
        mantissa, e_min = 23, -126
    two = torch.full_like(x, 2.0)
    e = torch.floor(torch.log(x) / torch.log(two))
    power = torch.pow(two, e)
    e = torch.where(power > x, e - 1.0, e)
    e = torch.where(torch.pow(two, e) * 2.0 <= x, e + 1.0, e)
    spacing = torch.pow(two, torch.clamp(e, min=float(e_min)) - float(mantissa))
    return x + spacing


def onnx_next_up(g, x: str, dtype) -> str:
    """:func:`next_up` in ONNX ops: ``x`` a tensor of the float type
    ``dtype`` of the graph ``g``'s part where it is computed (constants are
    added in ``dtype`` through ``Constant`` nodes)."""
    from onnx import numpy_helper

    mantissa, e_min = _bits(dtype)

    def const(value):
        array = np.asarray(value, dtype=dtype)
        return g.op("Constant", value=numpy_helper.from_array(array))

    two = const(2.0)
    e = g.op("Floor", g.op("Div", g.op("Log", x), const(np.log(2.0))))
    e = g.op("Where", g.op("Greater", g.op("Pow", two, e), x),
             g.op("Sub", e, const(1.0)), e)  # fmt: skip
    double = g.op("Mul", g.op("Pow", two, e), two)
    e = g.op("Where", g.op("LessOrEqual", double, x), g.op("Add", e, const(1.0)), e)
    exponent = g.op("Sub", g.op("Max", e, const(e_min)), const(mantissa))
    return g.op("Add", x, g.op("Pow", two, exponent))
