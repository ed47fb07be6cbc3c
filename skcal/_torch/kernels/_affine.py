"""Affine maps of logits followed by a softmax, fitted by penalised NLL.

``q = softmax(z W^T + b)`` with ``W = I + Delta`` (matrix scaling,
Dirichlet calibration on log-probabilities, structured matrix scaling) or
``q = softmax(z * (1 + delta) + b)`` (vector scaling). Ridge penalties pull
``Delta`` towards zero, i.e. the map towards the identity.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from .._convert import to_numpy, to_tensor
from .._optim import OptimResult, minimize_lbfgs


@dataclass
class AffineFit:
    """Fitted parameters (numpy, CPU) and the solver outcome."""

    coef: np.ndarray
    intercept: np.ndarray
    result: OptimResult


def fit_affine_softmax(
    logits: np.ndarray,
    y_index: np.ndarray,
    sample_weight: np.ndarray,
    *,
    matrix: bool,
    l2_diag: float = 0.0,
    l2_off: float = 0.0,
    l2_bias: float = 0.0,
    device: torch.device,
    tol: float,
    max_iter: int,
) -> AffineFit:
    """Minimise weighted mean NLL plus ridge penalties with L-BFGS.

    The objective is ``sum_i w_i CE(z_i W^T + b, y_i) / sum_i w_i
    + l2_diag ||diag(Delta)||^2 + l2_off ||offdiag(Delta)||^2
    + l2_bias ||b||^2``, starting from the identity map.

    Returns ``coef`` = ``W`` of shape (C, C) when ``matrix`` else the vector
    ``1 + delta`` of shape (C,), and ``intercept`` = ``b``.
    """
    n_classes = logits.shape[1]
    z = to_tensor(logits, device, torch.float64)
    y = to_tensor(y_index, device, torch.int64)
    w = to_tensor(sample_weight / sample_weight.sum(), device, torch.float64)
    shape = (n_classes, n_classes) if matrix else (n_classes,)
    delta = torch.zeros(shape, dtype=torch.float64, device=device, requires_grad=True)
    bias = torch.zeros(
        n_classes, dtype=torch.float64, device=device, requires_grad=True
    )
    off_mask = (
        1.0 - torch.eye(n_classes, dtype=torch.float64, device=device)
        if matrix
        else None
    )

    def loss_fn() -> torch.Tensor:
        out = (z + z @ delta.T if matrix else z * (1.0 + delta)) + bias
        loss = torch.dot(w, F.cross_entropy(out, y, reduction="none"))
        if matrix:
            sq = delta * delta
            if l2_diag:
                loss = loss + l2_diag * torch.diagonal(sq).sum()
            if l2_off:
                loss = loss + l2_off * (sq * off_mask).sum()
        elif l2_diag:
            loss = loss + l2_diag * (delta * delta).sum()
        if l2_bias:
            loss = loss + l2_bias * (bias * bias).sum()
        return loss

    result = minimize_lbfgs(loss_fn, [delta, bias], max_iter=max_iter, tol=tol)
    coef = to_numpy(delta)
    if matrix:
        coef += np.eye(n_classes)
    else:
        coef += 1.0
    return AffineFit(coef=coef, intercept=to_numpy(bias), result=result)
