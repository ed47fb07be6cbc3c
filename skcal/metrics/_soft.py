"""Soft-binned calibration errors (SMART's SoftECE, Karandikar et al.'s SB-ECE)."""

from __future__ import annotations

from numbers import Real

from ..utils._sklearn import Interval, validate_params
from ..utils._validation import check_proba_targets
from ._dask import dask_dispatch
from ._ece import BINNED_METRIC_PARAMS, top_label
from ._groups import groupable

__all__ = ["soft_binned_calibration_error", "soft_expected_calibration_error"]

_COMMON = BINNED_METRIC_PARAMS


def _soft_error(y_true, y_proba, sample_weight, labels, **kernel_args) -> float:
    proba, y_index, w = check_proba_targets(
        y_true, y_proba, labels=labels, sample_weight=sample_weight
    )
    conf, correct = top_label(proba, y_index)
    from .._torch.kernels import (
        soft_binned_ece_value,  # torch: imported by the metrics that need it only
    )

    return soft_binned_ece_value(conf, correct, w, **kernel_args)


@groupable()
@validate_params(
    {
        **_COMMON,
        "alpha": [Interval(Real, 0, None, closed="neither")],
        "q": [Interval(Real, 0, None, closed="neither")],
        "smoothing": [Interval(Real, 0, None, closed="left")],
    },
    prefer_skip_nested_validation=True,
)
@dask_dispatch("soft_expected_calibration_error")
def soft_expected_calibration_error(
    y_true,
    y_proba,
    *,
    n_bins=15,
    alpha=200.0,
    q=1.0,
    smoothing=0.0,
    sample_weight=None,
    labels=None,
):
    """SMART's SoftECE: ECE with Gaussian soft bins on the top-label confidence.

    Each confidence ``c_i = max_k p_ik`` belongs to bin ``b`` (centre
    ``c_b = (b - 1/2) / n_bins``) with weight
    ``w_ib = exp(-alpha (c_i - c_b)^2) / sum_b' exp(-alpha (c_i - c_b')^2)``.
    With ``a_i`` the correctness of the argmax prediction,

    ``SoftECE = (sum_b (W_b / N) |A_b - C_b|^q)^(1/q)``,

    ``W_b = sum_i w_ib``, ``A_b = sum_i w_ib a_i / (W_b + 1e-6)`` and
    ``C_b = sum_i w_ib c_i / (W_b + 1e-6)`` (Guo et al., SMART, Eq. 8-10;
    with sample weights the sums are weighted, ``N`` is the total weight and
    the guard is ``1e-6`` times the mean weight). It is the objective of
    :class:`skcal.SMARTCalibrator`, computed by the same kernel.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        True labels.
    y_proba : array-like of shape (n_samples, n_classes) or (n_samples,)
        Predicted probabilities; 1-D input is the probability of the second
        (positive) class of a binary problem.
    n_bins : int, default=15
        Number of soft bins.
    alpha : float, default=200.0
        Sharpness of the bins; 200 is a Gaussian of standard deviation 0.05.
        As ``alpha -> 0`` the error tends to ``|accuracy - mean confidence|``;
        large values approach the hard-binned ECE with bins centred on
        ``c_b``.
    q : float, default=1.0
        Exponent of the bin gaps.
    smoothing : float, default=0.0
        Charbonnier ``delta``: ``|r|`` becomes ``sqrt(r^2 + delta^2) - delta``
        (the ICML 2026 version of SMART uses 1e-3).
    sample_weight : array-like of shape (n_samples,), default=None
        Sample weights (frequencies). Only their ratios matter: multiplying
        them all by a positive constant, from 1e-320 to 1e308, changes
        nothing.
    labels : array-like of shape (n_classes,), default=None
        Label of each column of ``y_proba``, as in
        :func:`expected_calibration_error`.

    Returns
    -------
    float
        The soft-binned calibration error, in [0, 1]; lower is better.

    See Also
    --------
    soft_binned_calibration_error : Karandikar et al.'s soft-binned ECE.
    expected_calibration_error : Hard-binned ECE.

    Examples
    --------
    >>> from skcal.metrics import soft_expected_calibration_error
    >>> y_true = [0, 1, 1, 0]
    >>> y_proba = [[0.9, 0.1], [0.2, 0.8], [0.4, 0.6], [0.3, 0.7]]
    >>> round(soft_expected_calibration_error(y_true, y_proba), 4)
    0.1973
    """
    return _soft_error(
        y_true,
        y_proba,
        sample_weight,
        labels,
        n_bins=n_bins,
        sharpness=float(alpha),
        power=float(q),
        eps=1e-6,
        eps_mode="add",
        smoothing=float(smoothing),
    )


@groupable()
@validate_params(
    {
        **_COMMON,
        "temperature": [Interval(Real, 0, None, closed="neither")],
        "p": [Interval(Real, 0, None, closed="neither")],
    },
    prefer_skip_nested_validation=True,
)
@dask_dispatch("soft_binned_calibration_error")
def soft_binned_calibration_error(
    y_true,
    y_proba,
    *,
    n_bins=15,
    temperature=0.01,
    p=2.0,
    sample_weight=None,
    labels=None,
):
    """Soft-binned ECE of Karandikar et al. (2021), on the top-label confidence.

    Bin ``b`` has anchor ``xi_b = (b - 1/2) / n_bins``; confidence ``c_i``
    belongs to it with weight ``u_ib = softmax_b(-(c_i - xi_b)^2 /
    temperature)``. Per bin, ``C_b = sum_i u_ib c_i / max(U_b, 1e-5)`` and
    ``A_b`` likewise with the correctness ``a_i``, ``U_b = sum_i u_ib``, and

    ``SB-ECE = (sum_b (U_b / N) |A_b - C_b|^p)^(1/p)``

    (with sample weights the sums are weighted, ``N`` is the total weight
    and the floor is ``1e-5`` times the mean weight).

    Uncertainty Baselines' implementation (``get_soft_binning_ece_tensor``)
    uses ``p = 2``; its ``decay`` option sets ``temperature = 1 / (n_bins^2
    |log decay|)``. Computed by the same kernel as
    :func:`soft_expected_calibration_error`.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        True labels.
    y_proba : array-like of shape (n_samples, n_classes) or (n_samples,)
        Predicted probabilities; 1-D input is the probability of the second
        (positive) class of a binary problem.
    n_bins : int, default=15
        Number of soft bins.
    temperature : float, default=0.01
        Softness of the bin membership; small values approach hard binning.
    p : float, default=2.0
        Norm of the bin gaps.
    sample_weight : array-like of shape (n_samples,), default=None
        Sample weights (frequencies). Only their ratios matter: multiplying
        them all by a positive constant, from 1e-320 to 1e308, changes
        nothing.
    labels : array-like of shape (n_classes,), default=None
        Label of each column of ``y_proba``.

    Returns
    -------
    float
        The soft-binned calibration error, in [0, 1]; lower is better.

    References
    ----------
    A. Karandikar, N. Cain, D. Tran, B. Lakshminarayanan, J. Shlens, M. C.
    Mozer, B. Roelofs. "Soft Calibration Objectives for Neural Networks".
    NeurIPS 2021.

    Examples
    --------
    >>> from skcal.metrics import soft_binned_calibration_error
    >>> y_true = [0, 1, 1, 0]
    >>> y_proba = [[0.9, 0.1], [0.2, 0.8], [0.4, 0.6], [0.3, 0.7]]
    >>> round(soft_binned_calibration_error(y_true, y_proba), 4)
    0.1711
    """
    return _soft_error(
        y_true,
        y_proba,
        sample_weight,
        labels,
        n_bins=n_bins,
        sharpness=1.0 / float(temperature),
        power=float(p),
        eps=1e-5,
        eps_mode="floor",
        smoothing=0.0,
    )
