"""Soft-binned ECEs against loop references written from the papers' formulas."""

import math

import numpy as np
import pytest
import torch
from sklearn.model_selection import cross_validate

from skcal import TemperatureScaling
from skcal._torch.kernels import soft_binned_ece
from skcal.metrics import (
    expected_calibration_error,
    get_scorer,
    get_scorer_names,
    soft_binned_calibration_error,
    soft_expected_calibration_error,
)
from skcal.utils._testing import make_miscalibrated_logits, sample_labels


def smart_reference(conf, correct, w, n_bins=15, alpha=200.0, q=1.0, delta=0.0):
    """SMART Eq. 8-10 with loops (eps 1e-6 in the normalisers, times the mean
    weight so that rescaling the weights changes nothing)."""
    centres = [(b + 0.5) / n_bins for b in range(n_bins)]
    n = sum(w)
    eps = 1e-6 * n / len(w)
    total = 0.0
    for b in range(n_bins):
        wb_sum = acc = cnf = 0.0
        for c, a, s in zip(conf, correct, w):
            num = math.exp(-alpha * (c - centres[b]) ** 2)
            den = sum(math.exp(-alpha * (c - cb) ** 2) for cb in centres)
            wb_sum += s * num / den
            acc += s * num / den * a
            cnf += s * num / den * c
        r = acc / (wb_sum + eps) - cnf / (wb_sum + eps)
        err = math.sqrt(r * r + delta * delta) - delta if delta else abs(r)
        total += wb_sum / n * err**q
    return total ** (1 / q)


def karandikar_reference(conf, correct, w, n_bins=15, temperature=0.01, p=2.0):
    """Karandikar et al. Eq. 11 (Uncertainty Baselines' normalisers), loops."""
    anchors = [(b + 0.5) / n_bins for b in range(n_bins)]
    n = sum(w)
    eps = 1e-5 * n / len(w)
    total = 0.0
    for b in range(n_bins):
        u_sum = acc = cnf = 0.0
        for c, a, s in zip(conf, correct, w):
            scores = [-((c - xi) ** 2) / temperature for xi in anchors]
            m = max(scores)
            u = math.exp(scores[b] - m) / sum(math.exp(x - m) for x in scores)
            u_sum += s * u
            acc += s * u * a
            cnf += s * u * c
        total += u_sum / n * abs(acc / max(u_sum, eps) - cnf / max(u_sum, eps)) ** p
    return total ** (1 / p)


def random_case(n, n_classes, seed):
    rng = np.random.default_rng(seed)
    logits = 2 * rng.standard_normal((n, n_classes))
    proba = np.exp(logits - logits.max(1, keepdims=True))
    proba /= proba.sum(1, keepdims=True)
    y = sample_labels(proba**0.7 / (proba**0.7).sum(1, keepdims=True), rng)
    conf = proba.max(1)
    correct = (proba.argmax(1) == y).astype(float)
    return proba, y, conf, correct, rng.uniform(0.2, 2.0, n)


@pytest.mark.parametrize(
    "kwargs", [{}, {"n_bins": 7, "alpha": 50.0}, {"q": 2.0}, {"smoothing": 1e-3}]
)
def test_soft_ece_matches_the_loop_reference(kwargs):
    proba, y, conf, correct, w = random_case(120, 4, 0)
    ref_args = {
        "n_bins": kwargs.get("n_bins", 15),
        "alpha": kwargs.get("alpha", 200.0),
        "q": kwargs.get("q", 1.0),
        "delta": kwargs.get("smoothing", 0.0),
    }
    assert soft_expected_calibration_error(y, proba, **kwargs) == pytest.approx(
        smart_reference(conf, correct, np.ones(120), **ref_args), abs=1e-12
    )
    assert soft_expected_calibration_error(
        y, proba, sample_weight=w, **kwargs
    ) == pytest.approx(smart_reference(conf, correct, w, **ref_args), abs=1e-12)


@pytest.mark.parametrize("kwargs", [{}, {"temperature": 0.002, "p": 1.0}])
def test_karandikar_soft_ece_matches_the_loop_reference(kwargs):
    proba, y, conf, correct, w = random_case(100, 3, 1)
    assert soft_binned_calibration_error(
        y, proba, sample_weight=w, **kwargs
    ) == pytest.approx(karandikar_reference(conf, correct, w, **kwargs), abs=1e-12)


def test_tiny_case_by_hand():
    # one sample with confidence 0.9, correct; alpha -> 0 spreads it evenly
    # over the bins: every bin has mean confidence 0.9 and accuracy 1, so the
    # error is |1 - 0.9| = 0.1 (up to the 1e-6 guards)
    got = soft_expected_calibration_error([0], [[0.9, 0.1]], alpha=1e-12)
    assert got == pytest.approx(0.1, abs=1e-5)
    # two samples at 0.8, one correct: accuracy 0.5, so 0.3
    got = soft_expected_calibration_error([0, 1], [[0.8, 0.2], [0.8, 0.2]], alpha=1e-12)
    assert got == pytest.approx(0.3, abs=1e-5)


def test_limits_global_and_hard_binning():
    proba, y, conf, correct, _ = random_case(400, 5, 2)
    # alpha -> 0: |accuracy - mean confidence| (the paper's E^global)
    assert soft_expected_calibration_error(y, proba, alpha=1e-9) == pytest.approx(
        abs(correct.mean() - conf.mean()), abs=1e-5
    )
    # alpha -> inf: every sample in its nearest centre's bin, i.e. the
    # equal-width bin it falls in: the hard ECE (no confidence on an edge)
    hard = expected_calibration_error(y, proba, n_bins=15)
    assert soft_expected_calibration_error(y, proba, alpha=1e7) == pytest.approx(
        hard, abs=1e-6
    )
    hard_l2 = expected_calibration_error(y, proba, n_bins=15, norm="l2")
    assert soft_binned_calibration_error(y, proba, temperature=1e-7) == pytest.approx(
        hard_l2, abs=1e-6
    )


def test_weights_are_frequencies_and_order_does_not_matter():
    proba, y, *_ = random_case(60, 3, 3)
    counts = np.random.default_rng(0).integers(0, 4, 60)
    weighted = soft_expected_calibration_error(y, proba, sample_weight=counts)
    repeated = soft_expected_calibration_error(
        np.repeat(y, counts), np.repeat(proba, counts, axis=0)
    )
    # equal up to the 1e-6 guard, which scales with the mean weight
    assert weighted == pytest.approx(repeated, rel=1e-6)
    scaled = soft_expected_calibration_error(y, proba, sample_weight=counts * 1e-9)
    assert scaled == pytest.approx(weighted, rel=1e-12)
    perm = np.random.default_rng(1).permutation(60)
    assert soft_binned_calibration_error(y[perm], proba[perm]) == pytest.approx(
        soft_binned_calibration_error(y, proba), rel=1e-12
    )


@pytest.mark.parametrize(
    "metric", [soft_expected_calibration_error, soft_binned_calibration_error]
)
@pytest.mark.parametrize("scale", [1e-300, 1e-100, 1e100, 1e200, 1e300])
def test_weights_at_the_ends_of_the_float_range(metric, scale):
    # weights are relative: their sums and the eps guard cannot overflow or
    # underflow (1e200 overflowed the squared sums, 1e-320 gave NaN)
    proba, y, conf, correct, w = random_case(80, 4, 5)
    reference = (
        smart_reference
        if metric is soft_expected_calibration_error
        else (karandikar_reference)
    )
    expected = reference(conf, correct, list(w))
    assert metric(y, proba, sample_weight=w) == pytest.approx(expected, rel=1e-9)
    assert metric(y, proba, sample_weight=w * scale) == pytest.approx(
        expected, rel=1e-9
    )


@pytest.mark.parametrize(
    "metric", [soft_expected_calibration_error, soft_binned_calibration_error]
)
@pytest.mark.parametrize("value", [1e-320, 5e-324, 1e-300, 1e300, 1.7e308])
def test_equal_weights_of_any_size_are_no_weights(metric, value):
    # subnormal equal weights too: they are all equal, so relative weights are 1
    proba, y, *_ = random_case(80, 4, 6)
    unweighted = metric(y, proba)
    weighted = metric(y, proba, sample_weight=np.full(len(y), value))
    assert np.isfinite(weighted)
    assert weighted == pytest.approx(unweighted, rel=1e-12)


def test_binary_1d_input_and_labels():
    rng = np.random.default_rng(4)
    p1 = rng.uniform(size=80)
    y = (rng.uniform(size=80) < p1).astype(int)
    two = np.column_stack([1 - p1, p1])
    assert soft_expected_calibration_error(y, p1) == soft_expected_calibration_error(
        y, two
    )
    names = np.array(["no", "yes"])[y]
    assert soft_binned_calibration_error(
        names, two, labels=["no", "yes"]
    ) == soft_binned_calibration_error(y, two)


def test_kernel_gradient_matches_finite_differences():
    rng = np.random.default_rng(5)
    conf = torch.tensor(rng.uniform(0.3, 1.0, 30), requires_grad=True)
    correct = torch.tensor((rng.uniform(size=30) < 0.7).astype(float))
    w = torch.tensor(rng.uniform(0.5, 1.5, 30))
    for power, smoothing in [(1.0, 1e-3), (2.0, 0.0)]:
        assert torch.autograd.gradcheck(
            lambda c, power=power, smoothing=smoothing: soft_binned_ece(
                c,
                correct,
                w,
                n_bins=15,
                sharpness=200.0,
                power=power,
                eps=1e-6,
                smoothing=smoothing,
            ),
            (conf,),
        )


def test_perfectly_calibrated_labels_score_near_zero():
    rng = np.random.default_rng(6)
    logits = 2 * rng.standard_normal((40000, 5))
    proba = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
    y = sample_labels(proba, rng)
    assert soft_expected_calibration_error(y, proba) < 0.01
    assert (
        soft_expected_calibration_error(y, proba**3 / (proba**3).sum(1)[:, None]) > 0.1
    )


@pytest.mark.parametrize(
    "name, metric",
    [
        ("neg_soft_expected_calibration_error", soft_expected_calibration_error),
        ("neg_soft_binned_calibration_error", soft_binned_calibration_error),
    ],
)
def test_scorers_in_cross_validate(name, metric):
    assert name in get_scorer_names()
    X, y = make_miscalibrated_logits(600, 3, temperature=2.0, random_state=0)
    result = cross_validate(
        TemperatureScaling(device="cpu"),
        X,
        y,
        cv=3,
        scoring=get_scorer(name),
        return_estimator=True,
        return_indices=True,
    )
    for est, test, score in zip(
        result["estimator"], result["indices"]["test"], result["test_score"]
    ):
        assert score == pytest.approx(-metric(y[test], est.predict_proba(X[test])))
    assert get_scorer(name)(result["estimator"][0], X, y) <= 0
