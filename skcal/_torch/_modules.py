"""Embeddings and linear head of a torch ``nn.Module`` (for the wrappers).

torch is imported by the functions that take a module, not with this
module: :func:`is_module` answers False without importing it when torch is
not loaded (no object can then be a torch module), so that wrapping a
scikit-learn classifier with a calibrator that needs no torch imports none.
"""

from __future__ import annotations

import sys

import numpy as np


def is_module(obj) -> bool:
    """Whether ``obj`` is a torch ``nn.Module``."""
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(obj, torch.nn.Module)


def has_linear(module) -> bool:
    """Whether the module contains an ``nn.Linear``."""
    import torch

    return any(isinstance(m, torch.nn.Linear) for m in module.modules())


def module_embeddings(module, X, batch_size: int, device):
    """Inputs of the module's last ``nn.Linear``, and that layer's weights.

    The layer's input is captured by a forward hook, in eval mode without
    gradients, in batches of ``batch_size`` rows on ``device``; the module's
    mode and device are restored afterwards. It is an error when the
    module's output is not the output of that layer.

    Returns float64 numpy ``(embeddings, weight, bias)``; ``bias`` is zeros
    when the layer has none.
    """
    import torch

    from ._convert import to_numpy
    from ._device import resolve_device

    linears = [m for m in module.modules() if isinstance(m, torch.nn.Linear)]
    if not linears:
        raise ValueError(
            "extract_embeddings needs the torch module's output layer to be an "
            "nn.Linear, but the module contains no nn.Linear."
        )
    head = linears[-1]
    dev = resolve_device(device)
    param = next(module.parameters())
    home, was_training = param.device, module.training
    captured: list = []
    hook = head.register_forward_hook(
        lambda _m, inputs, output: captured.append((inputs[0], output))
    )
    embeddings = []
    X_t = X if isinstance(X, torch.Tensor) else torch.as_tensor(np.asarray(X))
    if X_t.is_floating_point():
        X_t = X_t.to(param.dtype)
    try:
        module.to(dev).eval()
        with torch.no_grad():
            for start in range(0, len(X_t), batch_size):
                captured.clear()
                out = module(X_t[start : start + batch_size].to(dev))
                if len(captured) != 1:
                    raise ValueError(
                        f"the last nn.Linear of the module ran {len(captured)} "
                        f"times in one forward pass; extract_embeddings needs it "
                        f"to be the output layer, applied once."
                    )
                inp, head_out = captured[0]
                if not isinstance(out, torch.Tensor) or out.shape != head_out.shape:
                    raise ValueError(
                        "the module's output is not the output of its last "
                        "nn.Linear (shapes differ); extract_embeddings needs the "
                        "last layer to be the nn.Linear head."
                    )
                if not torch.allclose(out, head_out, rtol=1e-5, atol=1e-6):
                    raise ValueError(
                        "the module's output differs from the output of its last "
                        "nn.Linear (an activation or another operation follows "
                        "it); return the logits from the nn.Linear head."
                    )
                embeddings.append(to_numpy(inp.reshape(len(inp), -1).double()))
    finally:
        hook.remove()
        module.to(home).train(was_training)
    weight = to_numpy(head.weight.double())
    bias = (
        to_numpy(head.bias.double())
        if head.bias is not None
        else np.zeros(weight.shape[0])
    )
    E = np.concatenate(embeddings) if embeddings else np.empty((0, weight.shape[1]))
    return E, weight, bias
