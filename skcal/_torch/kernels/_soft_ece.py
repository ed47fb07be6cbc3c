"""Soft-binned calibration error: one differentiable kernel for two metrics.

Each confidence ``c_i`` belongs to every bin ``b`` (centre ``(b - 1/2)/B``)
with weight ``u_ib = softmax_b(-k (c_i - centre_b)^2)``. Per bin, the
weighted mean confidence and accuracy are compared:

``err = (sum_b m_b |acc_b - conf_b|^p)^(1/p)``, ``m_b = sum_i s_i u_ib / sum_i s_i``

* SMART's SoftECE (Guo et al., Eq. 8-10): ``k = alpha``, ``p = q``,
  normalisers ``sum_i s_i u_ib + eps`` with ``eps = 1e-6``;
* Karandikar et al.'s soft-binned ECE: ``k = 1 / temperature``, ``p = 2``,
  normalisers ``max(sum_i s_i u_ib, 1e-5)``.

The metrics in :mod:`skcal.metrics` (through :func:`soft_binned_ece_value`,
numpy in and a float out) and the SMART calibrator's objective call this same
function.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from .._convert import to_tensor


def soft_binned_ece(
    conf: torch.Tensor,
    correct: torch.Tensor,
    weight: torch.Tensor,
    *,
    n_bins: int,
    sharpness: float,
    power: float,
    eps: float,
    eps_mode: str = "add",
    smoothing: float = 0.0,
) -> torch.Tensor:
    """Soft-binned calibration error of top-label confidences, differentiable.

    Parameters
    ----------
    conf, correct, weight : Tensor of shape (n_samples,)
        Confidence, correctness (0/1) and non-negative sample weight.
    n_bins : int
        Number of bins ``B``; centres ``(b - 1/2) / B``.
    sharpness : float
        ``k`` in ``exp(-k (c - centre)^2)``: ``alpha`` of SMART, the inverse
        temperature of Karandikar et al.
    power : float
        ``p`` of the bin-gap norm.
    eps : float
        Guard of the per-bin normalisers, for unit weights (it is scaled by
        the mean weight).
    eps_mode : {"add", "floor"}
        ``sum + eps`` (SMART) or ``max(sum, eps)`` (Karandikar et al.).
    smoothing : float
        Charbonnier ``delta``: ``|r|`` becomes ``sqrt(r^2 + delta^2) - delta``.

    Returns
    -------
    Tensor
        0-dim tensor in the dtype of ``conf``.
    """
    weight = weight.to(conf.dtype)
    mass, conf_sum, acc_sum = soft_bin_sums(
        conf, correct, weight, n_bins=n_bins, sharpness=sharpness
    )
    return soft_error_from_sums(
        mass,
        conf_sum,
        acc_sum,
        weight.sum(),
        weight.shape[0],
        power=power,
        eps=eps,
        eps_mode=eps_mode,
        smoothing=smoothing,
    )


def soft_bin_sums(conf, correct, weight, *, n_bins: int, sharpness: float):
    """Per soft bin: the weighted mass, confidence sum and accuracy sum.

    Sums over rows, so those of row chunks add up to those of all rows (the
    mergeable state of :func:`skcal.metrics.metric_state`).
    """
    centres = (
        torch.arange(n_bins, dtype=conf.dtype, device=conf.device) + 0.5
    ) / n_bins
    u = torch.softmax(-sharpness * (conf[:, None] - centres) ** 2, dim=1)
    return weight @ u, (weight * conf) @ u, (weight * correct.to(conf.dtype)) @ u


def soft_error_from_sums(
    mass,
    conf_sum,
    acc_sum,
    w_sum,
    n_samples,
    *,
    power: float,
    eps: float,
    eps_mode: str = "add",
    smoothing: float = 0.0,
):
    """The soft-binned error from :func:`soft_bin_sums` and the weight total."""
    # the guard is eps for unit weights and scales with the weights, so
    # multiplying every weight by a constant changes nothing
    eps = eps * w_sum / n_samples  # a tensor: no device sync per epoch
    denom = mass + eps if eps_mode == "add" else torch.maximum(mass, eps)
    gap = acc_sum / denom - conf_sum / denom
    if smoothing > 0:
        err = torch.sqrt(gap * gap + smoothing * smoothing) - smoothing
    else:
        err = gap.abs()
    bin_weight = mass / w_sum
    total = bin_weight @ err.pow(power)
    return total if power == 1 else total.pow(1.0 / power)


def soft_binned_ece_value(
    conf: np.ndarray, correct: np.ndarray, weight: np.ndarray, **kwargs
) -> float:
    """:func:`soft_binned_ece` of numpy arrays, in float64 on the CPU.

    Parameters
    ----------
    conf, correct, weight : ndarray of shape (n_samples,)
        Confidence, correctness (0/1) and non-negative sample weight.
    **kwargs
        The keyword arguments of :func:`soft_binned_ece`.

    Returns
    -------
    float
    """
    value = soft_binned_ece(
        to_tensor(conf, "cpu", torch.float64),
        to_tensor(correct, "cpu", torch.float64),
        to_tensor(weight, "cpu", torch.float64),
        **kwargs,
    )
    return float(value)


@dataclass(frozen=True)
class SoftBinSumsResult:
    """Soft-bin sums of :func:`soft_bin_sums_value` (float64 numpy, ``n_bins`` each).

    Attributes
    ----------
    mass : ndarray of shape (n_bins,)
        ``sum_i w_i u_ib``, the weighted membership of each soft bin.
    conf_sum : ndarray of shape (n_bins,)
        ``sum_i w_i c_i u_ib``, the confidences weighted likewise.
    acc_sum : ndarray of shape (n_bins,)
        ``sum_i w_i [correct_i] u_ib``, the correct predictions likewise.
    """

    mass: np.ndarray
    conf_sum: np.ndarray
    acc_sum: np.ndarray


def soft_bin_sums_value(
    conf, correct, weight, *, n_bins: int, sharpness: float
) -> SoftBinSumsResult:
    """:func:`soft_bin_sums` of numpy arrays: three float64 arrays of ``n_bins``."""
    sums = soft_bin_sums(
        to_tensor(conf, "cpu", torch.float64),
        to_tensor(correct, "cpu", torch.float64),
        to_tensor(weight, "cpu", torch.float64),
        n_bins=n_bins,
        sharpness=sharpness,
    )
    return SoftBinSumsResult(*(s.numpy().copy() for s in sums))


def soft_error_from_sums_value(mass, conf_sum, acc_sum, w_sum, n_samples, **kwargs):
    """:func:`soft_error_from_sums` of numpy sums, as a float."""
    t = [
        to_tensor(np.asarray(a, dtype=np.float64), "cpu", torch.float64)
        for a in (mass, conf_sum, acc_sum, w_sum)
    ]
    return float(soft_error_from_sums(*t, n_samples, **kwargs))
