"""MMCE against netcal 1.4 and the paper's pairwise formula."""

import tracemalloc

import numpy as np
import pytest
from _real_data import LOADERS, real_scores

from skcal.metrics import get_scorer, maximum_mean_calibration_error, metric_state


def pairwise(y, P, bandwidth=0.4, w=None, unbiased=False):
    """The paper's estimate, with the full n x n kernel (small n only)."""
    r = P.max(1)
    c = (P.argmax(1) == y).astype(float)
    w = np.ones(len(y)) if w is None else w
    a = w * (c - r)
    K = np.exp(-np.abs(r[:, None] - r[None, :]) / bandwidth)
    total, norm = a @ K @ a, w.sum() ** 2
    if unbiased:
        total, norm = total - a @ a, norm - w @ w
    return np.sqrt(max(total / norm, 0.0))


@pytest.mark.parametrize("name", LOADERS)
def test_equals_netcal_on_real_data(name):
    netcal = pytest.importorskip("netcal.metrics")
    y, P = real_scores(name)
    expected = netcal.MMCE().measure(P, y)
    got = maximum_mean_calibration_error(y, P)
    assert got == pytest.approx(expected, rel=1e-12)


def test_hand_computed_case():
    # confidences 0.9, 0.8, 0.6; the third prediction (class 0) is wrong
    a = np.array([0.1, 0.2, -0.6])
    k = np.exp(-np.array([[0.0, 0.1, 0.3], [0.1, 0.0, 0.2], [0.3, 0.2, 0.0]]) / 0.4)
    expected = np.sqrt(a @ k @ a / 9)
    got = maximum_mean_calibration_error(
        [0, 1, 1], [[0.9, 0.1], [0.2, 0.8], [0.6, 0.4]]
    )
    assert got == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("bandwidth", [1e-4, 0.05, 0.4, 10.0])
@pytest.mark.parametrize("unbiased", [False, True])
def test_equals_the_pairwise_formula(bandwidth, unbiased):
    """Any bandwidth (tiny ones use many blocks), weights, the U-statistic."""
    y, P = real_scores("digits")
    w = np.random.default_rng(0).uniform(0.0, 2.0, len(y))
    for weights in (None, w):
        expected = pairwise(y, P, bandwidth, weights, unbiased)
        got = maximum_mean_calibration_error(
            y, P, bandwidth=bandwidth, unbiased=unbiased, sample_weight=weights
        )
        assert got == pytest.approx(expected, rel=1e-9, abs=1e-13)


def test_ties_and_binary_input():
    y, P = real_scores("breast_cancer")
    p = np.round(P[:, 1], 2)  # many tied confidences
    P2 = np.column_stack([1 - p, p])
    got = maximum_mean_calibration_error(y, P2)
    assert got == pytest.approx(pairwise(y, P2), rel=1e-12)
    assert maximum_mean_calibration_error(y, p) == pytest.approx(got, rel=1e-12)


def test_memory_is_linear_at_50000_rows():
    rng = np.random.default_rng(0)
    n = 50_000
    logits = rng.normal(size=(n, 5)) * 2
    P = np.exp(logits - logits.max(1, keepdims=True))
    P /= P.sum(1, keepdims=True)
    y = rng.integers(0, 5, n)
    tracemalloc.start()
    value = maximum_mean_calibration_error(y, P)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert np.isfinite(value)
    assert peak < 64 * n * 8  # a few vectors of n floats, never n x n


def test_not_mergeable_scorer_and_errors():
    with pytest.raises(ValueError, match="every pair of rows"):
        metric_state(maximum_mean_calibration_error)
    y, P = real_scores("wine")
    scorer = get_scorer("neg_maximum_mean_calibration_error")
    assert scorer._score_func is maximum_mean_calibration_error
    with pytest.raises(ValueError, match="two rows of positive weight"):
        maximum_mean_calibration_error(y[:1], P[:1], unbiased=True, labels=[0, 1, 2])
    with pytest.raises(ValueError, match="bandwidth"):
        maximum_mean_calibration_error(y, P, bandwidth=0.0)
