"""Parameterized temperature scaling: an MLP maps sorted logits to a temperature."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from .._convert import to_numpy, to_tensor
from .._device import resolve_device
from .._optim import train_adam
from .._options import TrainingOptions
from .._random import make_generator
from ._common import init_mlp, relu_mlp

#: Logits (shifted to a row maximum of 0 and divided by the global temperature
#: by the caller) are clipped to +-LOGIT_CLIP before the network and softmax.
LOGIT_CLIP = 100.0


#: Above this many classes the CPU features select the top k with
#: ``np.partition`` before sorting them; below it one sort of the rows is
#: faster.
_PARTITION_MIN_CLASSES = 128


def _features(z: torch.Tensor, k: int) -> torch.Tensor:
    """The ``k`` largest logits of each row, sorted, largest first.

    On the CPU the values are numpy's (its vectorised sort of short rows is
    3-20 times faster than ``torch.sort`` and ``torch.topk``): the same
    values, since a sort only moves them. ``z`` holds constants (no
    gradient flows through the features).
    """
    n_classes = z.shape[1]
    if z.device.type == "cpu":
        a = z.detach().numpy()
        if k < n_classes and n_classes > _PARTITION_MIN_CLASSES:
            a = np.partition(a, n_classes - k, axis=1)[:, n_classes - k :]
        top = np.negative(a)  # sorted ascending in place, then negated back
        top.sort(axis=1)
        return torch.from_numpy(np.negative(top, out=top)[:, :k])
    if k == n_classes:  # every logit: a sort is about twice topk's speed
        return torch.sort(z, dim=1, descending=True).values
    return torch.topk(z, k, dim=1).values


def pts_temperature(layers, z: torch.Tensor, k: int) -> torch.Tensor:
    """Temperature of each row: ``|MLP(top-k sorted logits)|`` in [1e-12, 1e12]."""
    h = relu_mlp(layers, _features(z, k))
    return h.squeeze(1).abs().clamp(1e-12, 1e12)


def pts_predict_logits(
    coefs,
    intercepts,
    logits: np.ndarray,
    temperature_init: float,
    k: int,
    device,
    out: np.ndarray | None = None,
) -> np.ndarray:
    """Calibrated logits ``z / T(z)``, ``z = clip(logits / temperature_init)``.

    A float64 numpy array. On the CPU it is ``out`` (which may be
    ``logits``) or a new numpy array, and every step writes into it in
    place (a new torch tensor of that size costs several times a numpy
    one: its pages are faulted in one by one); on other devices, a new one.
    ``device``: {"auto", "cpu", "cuda", "cuda:N"} or a ``torch.device``.
    """
    device = resolve_device(device)
    layers = [
        (to_tensor(W, device, torch.float64), to_tensor(b, device, torch.float64))
        for W, b in zip(coefs, intercepts)
    ]
    if device.type == "cpu":
        out = np.divide(np.asarray(logits, dtype=np.float64), temperature_init, out=out)
        z = torch.from_numpy(out)
    else:
        z = to_tensor(logits, device, torch.float64) / temperature_init
    z.clamp_(-LOGIT_CLIP, LOGIT_CLIP)
    with torch.no_grad():
        z.div_(pts_temperature(layers, z, k)[:, None])
    return out if device.type == "cpu" else to_numpy(z)


@dataclass(frozen=True)
class PTSFit:
    """The trained temperature network (numpy, CPU) and its training run.

    Attributes
    ----------
    coefs : list of ndarray
        Weight matrices, input layer first; layer ``i`` maps ``h`` to
        ``h @ coefs[i] + intercepts[i]`` (shape ``(fan_in, fan_out)``).
    intercepts : list of ndarray
        Bias vectors, input layer first.
    best_epoch : int
        Epoch whose weights were kept (0: the initial, global temperature).
    n_epochs : int
        Epochs run.
    """

    coefs: list
    intercepts: list
    best_epoch: int
    n_epochs: int


def _init_layers(sizes: list, initial_temperature: float, gen, device) -> list:
    """``nn.Linear``-style layers, the output one at ``T = initial_temperature``."""
    # output weight 0 and bias T0: training starts from global temperature scaling
    return init_mlp(sizes, gen, device, output_bias=initial_temperature)


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
    options: TrainingOptions,
) -> PTSFit:
    """Train the temperature network on the Brier score (PTS's MSE loss).

    Mini-batch Adam (``options``) on the rows ``train_idx``, early stopping
    on the loss of the rows ``val_idx``. Hidden layers are initialised like
    ``torch.nn.Linear`` from a local generator seeded by ``options.seed``;
    the output layer starts at weight 0 and bias ``initial_temperature``, so
    training starts from global temperature scaling.

    Returns
    -------
    PTSFit
    """
    options = options.resolved()
    device = options.device
    gen = make_generator(options.seed, "cpu")
    z = to_tensor(logits, device, torch.float64).clamp(-LOGIT_CLIP, LOGIT_CLIP)
    y = to_tensor(y_index, device, torch.int64)
    w = to_tensor(sample_weight, device, torch.float64)
    onehot = torch.nn.functional.one_hot(y, z.shape[1]).double()
    layers = _init_layers([k, *hidden, 1], initial_temperature, gen, device)
    params = [t.requires_grad_(True) for layer in layers for t in layer]
    train = to_tensor(train_idx, device, torch.int64)
    val = to_tensor(val_idx, device, torch.int64)

    def brier(rows: torch.Tensor) -> torch.Tensor:
        zr = z[rows]
        p = torch.softmax(zr / pts_temperature(layers, zr, k)[:, None], dim=1)
        per_row = ((p - onehot[rows]) ** 2).sum(dim=1)
        return torch.dot(w[rows], per_row) / w[rows].sum()

    run = train_adam(
        lambda batch: brier(train[batch]),
        lambda: brier(val),
        params,
        n_samples=len(train_idx),
        options=options,
        generator=gen,
        desc="PTS: temperature network",
    )
    return PTSFit(
        coefs=[to_numpy(W) for W, _ in layers],
        intercepts=[to_numpy(b) for _, b in layers],
        best_epoch=run.best_epoch,
        n_epochs=run.n_epochs,
    )
