"""Pieces shared by the trained kernels: layer initialisation and weighted losses."""

from __future__ import annotations

import math

import torch

from .._constants import DIVISOR_FLOOR

__all__ = [
    "init_mlp",
    "relu_mlp",
    "uniform_linear",
    "weighted_cross_entropy",
    "weighted_mean",
]


def uniform_linear(
    fan_in: int,
    fan_out: int,
    generator: torch.Generator,
    device,
    *,
    bias: bool = True,
    out_first: bool = False,
):
    """float64 weights drawn like ``torch.nn.Linear``'s default initialisation.

    Every entry is uniform on ``[-1/sqrt(fan_in), 1/sqrt(fan_in)]``; the
    weight is drawn first, then the bias, from ``generator`` (on the CPU, so
    that a seed gives the same layer on every device), and both are moved to
    ``device``.

    Parameters
    ----------
    fan_in, fan_out : int
        Input and output sizes of the layer.
    generator : torch.Generator
    device : torch.device or str
    bias : bool, default=True
        Draw a bias of ``fan_out`` entries after the weight.
    out_first : bool, default=False
        Weight of shape ``(fan_out, fan_in)`` (``nn.Linear``'s layout, for
        ``x @ W.T``) instead of ``(fan_in, fan_out)`` (for ``x @ W``).

    Returns
    -------
    W : torch.Tensor
        The weight; with ``bias=True``, the tuple ``(W, b)``.
    """
    bound = 1.0 / math.sqrt(fan_in)
    shape = (fan_out, fan_in) if out_first else (fan_in, fan_out)
    W = (torch.rand(shape, generator=generator, dtype=torch.float64) * 2 - 1) * bound
    if not bias:
        return W.to(device)
    b = (torch.rand(fan_out, generator=generator, dtype=torch.float64) * 2 - 1) * bound
    return W.to(device), b.to(device)


def weighted_mean(values: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """``sum(w * values) / sum(w)``, zero when every weight is zero."""
    return (w * values).sum() / w.sum().clamp_min(DIVISOR_FLOOR)


def weighted_cross_entropy(
    logits: torch.Tensor, y: torch.Tensor, w: torch.Tensor
) -> torch.Tensor:
    """Weighted mean of ``-log softmax(logits)[i, y_i]``."""
    nll = -torch.log_softmax(logits, dim=1).gather(1, y[:, None]).squeeze(1)
    return weighted_mean(nll, w)


def init_mlp(sizes, generator, device, *, output_bias: float) -> list:
    """``[W, b]`` layers of sizes ``sizes`` (``uniform_linear``, in order),
    the output layer at weight 0 and bias ``output_bias``: the network starts
    as the constant ``output_bias``."""
    layers = [
        list(uniform_linear(fan_in, fan_out, generator, device))
        for fan_in, fan_out in zip(sizes[:-1], sizes[1:])
    ]
    layers[-1][0].zero_()
    layers[-1][1].fill_(output_bias)
    return layers


def relu_mlp(layers, h: torch.Tensor) -> torch.Tensor:
    """Forward pass ``h @ W + b`` through ``layers``, ReLU between layers.

    One ``addmm`` per layer and an in-place ReLU: no temporary per step
    (on the CPU, ``h @ W + b`` allocates twice and costs 4-5 times more).
    """
    for i, (W, b) in enumerate(layers):
        h = torch.addmm(b, h, W)
        if i < len(layers) - 1:
            h.relu_()
    return h
