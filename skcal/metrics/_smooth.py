"""Smooth ECE (Blasiok & Nakkiran 2023), as estimated by the ``relplot`` package."""

from __future__ import annotations

from numbers import Real

import numpy as np
from scipy.signal import fftconvolve

from ..utils._sklearn import Interval, StrOptions, validate_params
from ..utils._validation import check_proba_targets
from ._dask import dask_dispatch
from ._ece import BINNED_METRIC_PARAMS, top_label
from ._groups import groupable

__all__ = ["smooth_expected_calibration_error"]

#: Smallest evaluation mesh, and the density floor of the kernel regression.
_MESH = 200
_DENSITY_EPS = 1e-4


def _grid_size(sigma: float) -> int:
    return max(2000, round(20 / sigma)) // 2 + 1


def _reflected_smooth(scores, values, sigma, mesh):
    """Reflected-Gaussian kernel sums of ``values`` at ``scores``, on ``mesh``.

    ``values`` are spread linearly onto a regular grid of [0, 1] (each score
    shares its value between its two grid neighbours), the grid is mirrored
    about 0 and 1 and convolved with the Gaussian of standard deviation
    ``sigma``, and the result is interpolated linearly at the mesh points.
    """
    m = _grid_size(sigma)
    pos = scores * (m - 1)
    low = np.clip(pos.astype(int), 0, m - 2)
    frac = pos - low
    grid = np.bincount(low, weights=(1 - frac) * values, minlength=m)
    grid += np.bincount(low + 1, weights=frac * values, minlength=m)
    t = np.linspace(0, 1, m)
    kernel = np.exp(-((t - 0.5) ** 2) / (2 * sigma**2)) / (np.sqrt(2 * np.pi) * sigma)
    mirrored = np.concatenate([grid[::-1][:-1], grid, grid[::-1][1:]])
    smoothed = fftconvolve(mirrored, kernel, mode="valid")[m // 2 : m // 2 + m]
    idx = np.clip((mesh * (m - 1)).astype(int), 0, m - 2)
    r = mesh * (m - 1) - idx
    return smoothed[idx] * (1 - r) + smoothed[idx + 1] * r


def _smooth_ece(scores, residuals, weights, sigma):
    mesh = np.linspace(0, 1, max(round(10 / sigma), _MESH))
    density = _reflected_smooth(scores, weights, sigma, mesh) + _DENSITY_EPS
    regression = _reflected_smooth(scores, weights * residuals, sigma, mesh) / density
    return float(np.sum(np.abs(regression) * density) / np.sum(density))


@groupable()
@validate_params(
    {
        **{k: v for k, v in BINNED_METRIC_PARAMS.items() if k != "n_bins"},
        "bandwidth": [StrOptions({"auto"}), Interval(Real, 0, 1, closed="right")],
        "eps": [Interval(Real, 0, 1, closed="neither")],
        "return_bandwidth": ["boolean"],
    },
    prefer_skip_nested_validation=True,
)
@dask_dispatch("smooth_expected_calibration_error")
def smooth_expected_calibration_error(
    y_true,
    y_proba,
    *,
    bandwidth="auto",
    eps=1e-3,
    return_bandwidth=False,
    sample_weight=None,
    labels=None,
):
    """Smooth ECE of the top-label confidence (Blasiok & Nakkiran, 2023).

    The residuals ``r_i = c_i - [y_hat_i = y_i]`` of the confidences ``c_i``
    are smoothed by a Gaussian kernel of width ``sigma`` reflected at 0 and
    1 (Nadaraya-Watson regression ``r_hat(t)`` with density ``delta(t)``,
    plus 1e-4) on a mesh of ``max(200, round(10 / sigma))`` points, and
    ``smECE_sigma = sum_t |r_hat(t)| delta(t) / sum_t delta(t)``. With
    ``bandwidth="auto"`` the width is the fixed point ``sigma =
    smECE_sigma``, found as in the ``relplot`` package: 10 bisection steps on
    (0, 1] for the smallest width with ``sigma >= smECE_sigma`` (widths
    below ``eps`` count as too narrow; 1 if even ``sigma = 1`` is below).
    The kernel sums use relplot's discretisation (scores spread linearly
    onto a grid of ``max(2000, round(20 / sigma)) // 2 + 1`` points, then a
    convolution), so the values agree with ``relplot.smECE``.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        True labels.
    y_proba : array-like of shape (n_samples, n_classes) or (n_samples,)
        Predicted probabilities (1-D: positive class of a binary problem).
    bandwidth : "auto" or float in (0, 1], default="auto"
        Kernel width ``sigma``; ``"auto"`` finds the fixed point (relplot's
        ``smECE``), a number gives ``smECE_sigma`` (relplot's ``smECE_sigma``
        uses 0.05).
    eps : float, default=1e-3
        Smallest width of the automatic search.
    return_bandwidth : bool, default=False
        Also return the width used.
    sample_weight : array-like of shape (n_samples,), default=None
        Sample weights; only their ratios matter. They are rescaled to a mean
        of 1, so that integer weights act like repeated rows but for the
        density floor ``1e-4`` of relplot, which is then relative to the
        number of rows given.
    labels : array-like of shape (n_classes,), default=None
        Label of each column of ``y_proba``.

    Returns
    -------
    float, or (float, float) with ``return_bandwidth``

    References
    ----------
    J. Blasiok, P. Nakkiran. "Smooth ECE: Principled Reliability Diagrams via
    Kernel Smoothing". ICLR 2024.

    Examples
    --------
    >>> import numpy as np
    >>> from skcal.metrics import smooth_expected_calibration_error
    >>> rng = np.random.default_rng(0)
    >>> p = rng.uniform(0.5, 1.0, size=2000)
    >>> y = (rng.uniform(size=2000) < p).astype(int)
    >>> proba = np.column_stack([1 - p, p])
    >>> bool(smooth_expected_calibration_error(y, proba) < 0.03)
    True
    >>> sharp = proba**3 / (proba**3).sum(axis=1, keepdims=True)
    >>> bool(smooth_expected_calibration_error(y, sharp) > 0.05)
    True
    """
    proba, y_index, w = check_proba_targets(
        y_true, y_proba, labels=labels, sample_weight=sample_weight
    )
    conf, correct = top_label(proba, y_index)
    conf = np.clip(conf, 0.0, 1.0)
    residuals = conf - correct
    # weights of mean 1: relplot's unit weights when unweighted, and the
    # density floor _DENSITY_EPS is unchanged when every weight is scaled
    w = w * (len(w) / w.sum())

    def value(sigma):
        return _smooth_ece(conf, residuals, w, sigma)

    if bandwidth == "auto":

        def too_narrow(sigma):
            return sigma < eps or sigma < value(sigma)

        sigma = 1.0
        if not too_narrow(sigma):
            upper, lower = 1.0, 0.0
            for _ in range(10):
                mid = (upper + lower) / 2
                if too_narrow(mid):
                    lower = mid
                else:
                    upper = mid
            sigma = upper
    else:
        sigma = float(bandwidth)
    result = value(sigma)
    return (result, sigma) if return_bandwidth else result
