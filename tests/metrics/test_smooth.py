"""Smooth ECE against relplot and against a direct kernel regression."""

import numpy as np
import pytest

from skcal.metrics import smooth_expected_calibration_error


def _data(n, n_classes, seed, calibrated):
    rng = np.random.default_rng(seed)
    P = rng.dirichlet(np.ones(n_classes) * 0.5, size=n)
    if calibrated:
        y = (rng.uniform(size=(n, 1)) > P.cumsum(axis=1)).sum(axis=1)
        y = np.minimum(y, n_classes - 1)
    else:
        y = rng.integers(0, n_classes, size=n)
    return y, P


CASES = [
    (500, 3, 0, False),
    (5000, 10, 1, False),
    (300, 2, 2, True),
    (20000, 4, 3, True),
]


@pytest.mark.parametrize("n, n_classes, seed, calibrated", CASES)
def test_agrees_with_relplot(n, n_classes, seed, calibrated):
    relplot = pytest.importorskip("relplot")
    y, P = _data(n, n_classes, seed, calibrated)
    conf = P.max(axis=1)
    correct = (P.argmax(axis=1) == y).astype(float)
    ours, sigma = smooth_expected_calibration_error(y, P, return_bandwidth=True)
    ref, ref_sigma = relplot.smECE(conf, correct, return_width=True)
    assert sigma == ref_sigma
    assert ours == pytest.approx(ref, abs=1e-6)
    assert smooth_expected_calibration_error(y, P, bandwidth=0.05) == pytest.approx(
        relplot.smECE_sigma(conf, correct, 0.05), abs=1e-6
    )


@pytest.mark.parametrize("n, n_classes, seed, calibrated", CASES[:3])
def test_fixed_width_matches_a_direct_kernel_regression(n, n_classes, seed, calibrated):
    # no grid: reflected Gaussian kernels evaluated exactly at the mesh points
    # (the grid sums are plain kernel sums, no cell width); the grid of 1,001
    # points only adds a small discretisation error
    y, P = _data(n, n_classes, seed, calibrated)
    f = P.max(axis=1)
    r = f - (P.argmax(axis=1) == y)
    sigma = 0.1
    t = np.linspace(0, 1, 200)

    def kernel_sum(values):
        total = 0.0
        for centre in (f, -f, 2 - f):  # the data and its mirror images
            d = t[:, None] - centre[None, :]
            k = np.exp(-(d**2) / (2 * sigma**2)) / (np.sqrt(2 * np.pi) * sigma)
            total = total + k @ values
        return total

    density = kernel_sum(np.ones_like(f)) + 1e-4
    expected = np.sum(np.abs(kernel_sum(r) / density) * density) / density.sum()
    ours = smooth_expected_calibration_error(y, P, bandwidth=sigma)
    assert ours == pytest.approx(expected, abs=1e-3)


def test_weights_are_repetitions_and_binary_input():
    y, P = _data(400, 3, 4, False)
    w = np.random.default_rng(5).integers(0, 4, size=400)
    weighted = smooth_expected_calibration_error(y, P, sample_weight=w)
    repeated = smooth_expected_calibration_error(np.repeat(y, w), np.repeat(P, w, 0))
    # equal but for relplot's density floor 1e-4, relative to the row count
    assert weighted == pytest.approx(repeated, rel=1e-6)
    for c in (1e-300, 1e300):  # only the ratios of the weights matter
        assert smooth_expected_calibration_error(
            y, P, sample_weight=w * c
        ) == pytest.approx(weighted, rel=1e-12)
    y2, P2 = _data(400, 2, 6, True)
    assert smooth_expected_calibration_error(y2, P2[:, 1]) == pytest.approx(
        smooth_expected_calibration_error(y2, P2)
    )


def test_the_width_is_the_fixed_point():
    y, P = _data(3000, 5, 7, False)
    value, sigma = smooth_expected_calibration_error(y, P, return_bandwidth=True)
    # 10 bisection steps: sigma is within 2^-10 above the crossing
    below = smooth_expected_calibration_error(y, P, bandwidth=sigma - 2**-10)
    assert sigma >= value and sigma - 2**-10 < below
