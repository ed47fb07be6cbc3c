"""Parameterized temperature scaling: an MLP maps sorted logits to a temperature."""

from __future__ import annotations

import math

import numpy as np
import torch

from .._convert import to_numpy, to_tensor
from .._optim import train_adam
from .._random import make_generator

#: Logits (shifted to a row maximum of 0 and divided by the global temperature
#: by the caller) are clipped to +-LOGIT_CLIP before the network and softmax.
LOGIT_CLIP = 100.0


def _features(z: torch.Tensor, k: int) -> torch.Tensor:
    return torch.topk(z, k, dim=1).values  # sorted, largest first


def pts_temperature(layers, z: torch.Tensor, k: int) -> torch.Tensor:
    """Temperature of each row: ``|MLP(top-k sorted logits)|`` in [1e-12, 1e12]."""
    h = _features(z, k)
    for i, (W, b) in enumerate(layers):
        h = h @ W + b
        if i < len(layers) - 1:
            h = torch.relu(h)
    return h.squeeze(1).abs().clamp(1e-12, 1e12)


def pts_predict_logits(
    coefs, intercepts, logits: np.ndarray, k: int, device
) -> np.ndarray:
    """Calibrated logits ``clip(z) / T(z)`` as a float64 numpy array."""
    z = to_tensor(logits, device, torch.float64).clamp(-LOGIT_CLIP, LOGIT_CLIP)
    layers = [
        (to_tensor(W, device, torch.float64), to_tensor(b, device, torch.float64))
        for W, b in zip(coefs, intercepts)
    ]
    with torch.no_grad():
        return to_numpy(z / pts_temperature(layers, z, k)[:, None])


def fit_pts(
    logits: np.ndarray,
    y_index: np.ndarray,
    sample_weight: np.ndarray,
    *,
    k: int,
    hidden: tuple,
    initial_temperature: float,
    train_idx: np.ndarray,
    val_idx: np.ndarray,
    lr: float,
    weight_decay: float,
    batch_size: int,
    max_epochs: int,
    patience: int,
    seed: int,
    device: torch.device,
    verbose: int = 0,
):
    """Train the temperature network on the Brier score (PTS's MSE loss).

    Hidden layers are initialised like ``torch.nn.Linear`` from a local
    generator; the output layer starts at weight 0 and bias
    ``initial_temperature``, so training starts from global temperature
    scaling. Returns ``(coefs, intercepts, best_epoch, n_epochs)`` with numpy
    arrays.
    """
    gen = make_generator(seed, "cpu")
    z = to_tensor(logits, device, torch.float64).clamp(-LOGIT_CLIP, LOGIT_CLIP)
    y = to_tensor(y_index, device, torch.int64)
    w = to_tensor(sample_weight, device, torch.float64)
    onehot = torch.nn.functional.one_hot(y, z.shape[1]).double()
    sizes = [k, *hidden, 1]
    layers = []
    for fan_in, fan_out in zip(sizes[:-1], sizes[1:]):
        bound = 1.0 / math.sqrt(fan_in)
        W = (
            torch.rand(fan_in, fan_out, generator=gen, dtype=torch.float64) * 2 - 1
        ) * bound
        b = (torch.rand(fan_out, generator=gen, dtype=torch.float64) * 2 - 1) * bound
        layers.append([W.to(device), b.to(device)])
    layers[-1][0].zero_()
    layers[-1][1].fill_(initial_temperature)
    params = [t.requires_grad_(True) for layer in layers for t in layer]
    train = to_tensor(train_idx, device, torch.int64)
    val = to_tensor(val_idx, device, torch.int64)

    def brier(rows: torch.Tensor) -> torch.Tensor:
        zr = z[rows]
        p = torch.softmax(zr / pts_temperature(layers, zr, k)[:, None], dim=1)
        per_row = ((p - onehot[rows]) ** 2).sum(dim=1)
        return torch.dot(w[rows], per_row) / w[rows].sum()

    best_epoch, n_epochs, _ = train_adam(
        lambda batch: brier(train[batch]),
        lambda: brier(val),
        params,
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
    coefs = [to_numpy(W) for W, _ in layers]
    intercepts = [to_numpy(b) for _, b in layers]
    return coefs, intercepts, best_epoch, n_epochs
