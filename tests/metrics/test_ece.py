"""Binned calibration errors against hand-computed cases and a loop reference."""

import numpy as np
import pytest
from sklearn.metrics import brier_score_loss, log_loss

from skcal.metrics import (
    bin_edges,
    brier_score,
    classwise_calibration_error,
    expected_calibration_error,
    max_calibration_error,
    negative_log_likelihood,
)
from skcal.utils._testing import sample_labels


def reference_ece(conf, correct, w, n_bins, strategy, norm, closed):
    """Plain-loop reference, written from the definitions, not from the code."""
    conf, correct, w = map(np.asarray, (conf, correct, w))
    if strategy == "uniform":
        edges = [b / n_bins for b in range(n_bins + 1)]
    else:
        order = np.argsort(conf, kind="stable")
        pos = len(conf) * (np.cumsum(w[order]) - w[order]) / w.sum()
        edges = list(np.interp(np.linspace(0, len(conf), n_bins + 1), pos, conf[order]))
    gaps, weights = [], []
    for b in range(n_bins):
        lo, hi = edges[b], edges[b + 1]
        members = []
        for i, c in enumerate(conf):
            if closed == "left":
                inside = (
                    lo <= c < hi or (b == n_bins - 1 and c >= hi) or (b == 0 and c < lo)
                )
            else:
                inside = (
                    lo < c <= hi or (b == 0 and c <= lo) or (b == n_bins - 1 and c > hi)
                )
            if inside:
                members.append(i)
        wb = sum(w[i] for i in members)
        if wb == 0:
            continue
        acc = sum(w[i] * correct[i] for i in members) / wb
        avg = sum(w[i] * conf[i] for i in members) / wb
        gaps.append(abs(acc - avg))
        weights.append(wb)
    gaps, weights = np.array(gaps), np.array(weights) / np.sum(weights)
    if norm == "l1":
        return float(np.sum(weights * gaps))
    if norm == "l2":
        return float(np.sqrt(np.sum(weights * gaps**2)))
    return float(gaps.max())


def random_problem(n=300, c=4, seed=0, round_to=None):
    rng = np.random.default_rng(seed)
    logits = 2 * rng.standard_normal((n, c))
    proba = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
    if round_to:  # put many scores exactly on bin edges
        proba = np.round(proba * round_to) / round_to
        proba[:, -1] = 1 - proba[:, :-1].sum(1)
        proba = np.clip(proba, 0, 1)
        proba /= proba.sum(1, keepdims=True)
    y = sample_labels(proba, rng)
    w = rng.uniform(0, 2, n)
    return y, proba, w


def test_hand_computed_top_label():
    y = [0, 1, 1, 0]
    p = [[0.9, 0.1], [0.2, 0.8], [0.4, 0.6], [0.3, 0.7]]
    # 5 bins: {0.6, 0.7} -> [0.6, 0.8): conf .65, acc .5; {0.8, 0.9} -> [0.8, 1]:
    # conf .85, acc 1. ECE = .5 * .15 + .5 * .15
    assert expected_calibration_error(y, p, n_bins=5) == pytest.approx(0.15)
    # with (l, u] bins: 0.6 alone in (.4, .6] (gap .4); 0.7 and 0.8 in (.6, .8]
    # (conf .75, acc .5); 0.9 alone (gap .1)
    assert expected_calibration_error(y, p, n_bins=5, closed="right") == pytest.approx(
        0.25 * 0.4 + 0.5 * 0.25 + 0.25 * 0.1
    )
    assert max_calibration_error(y, p, n_bins=10) == pytest.approx(0.7)
    l2 = expected_calibration_error(y, p, n_bins=5, norm="l2")
    assert l2 == pytest.approx(0.15)


def test_scores_of_zero_and_one_land_in_a_bin():
    y = [0, 1, 1]
    p = [[1.0, 0.0], [0.0, 1.0], [1.0, 0.0]]
    # conf is 1 for every sample, accuracy 2/3
    for closed in ("left", "right"):
        assert expected_calibration_error(y, p, closed=closed) == pytest.approx(1 / 3)
        # classwise: every column has values 0 and 1 exactly; each must count
        cw = classwise_calibration_error(y, p, closed=closed)
        # class 0: p=1 for samples 0, 2 (freq 1/2), p=0 for sample 1 (freq 0)
        # -> (2/3) * 0.5 + (1/3) * 0; class 1 symmetric
        assert cw == pytest.approx(1 / 3)


@pytest.mark.parametrize("strategy", ["uniform", "quantile"])
@pytest.mark.parametrize("norm", ["l1", "l2", "max"])
@pytest.mark.parametrize("closed", ["left", "right"])
@pytest.mark.parametrize("round_to", [None, 10])
def test_top_label_matches_reference(strategy, norm, closed, round_to):
    y, p, w = random_problem(seed=1, round_to=round_to)
    conf, correct = p.max(1), (p.argmax(1) == y)
    for weights in (None, w):
        ref_w = np.ones(len(y)) if weights is None else weights
        expected = reference_ece(conf, correct, ref_w, 15, strategy, norm, closed)
        got = expected_calibration_error(
            y, p, strategy=strategy, norm=norm, closed=closed, sample_weight=weights
        )
        assert got == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize("strategy", ["uniform", "quantile"])
@pytest.mark.parametrize("norm", ["l1", "max"])
def test_classwise_matches_reference(strategy, norm):
    y, p, w = random_problem(seed=2, c=5, round_to=20)
    per_class = [
        reference_ece(p[:, k], y == k, w, 10, strategy, norm, "left") for k in range(5)
    ]
    got = classwise_calibration_error(
        y, p, n_bins=10, strategy=strategy, norm=norm, sample_weight=w
    )
    assert got == pytest.approx(np.mean(per_class), abs=1e-12)
    cw = np.array([1.0, 0, 0, 0, 3.0])
    got = classwise_calibration_error(
        y, p, n_bins=10, strategy=strategy, norm=norm, sample_weight=w, class_weight=cw
    )
    assert got == pytest.approx((per_class[0] + 3 * per_class[4]) / 4, abs=1e-12)


def test_quantile_edges_follow_the_adaece_formula():
    conf = np.random.default_rng(3).uniform(size=101)
    expected = np.interp(np.linspace(0, 101, 16), np.arange(101), np.sort(conf))
    np.testing.assert_allclose(bin_edges(conf, 15, "quantile"), expected)
    np.testing.assert_allclose(bin_edges(conf, 15, "quantile", np.ones(101)), expected)


def test_sample_weight_equals_repetition():
    y, p, _ = random_problem(seed=4)
    counts = np.random.default_rng(4).integers(0, 3, len(y))
    for fn in (expected_calibration_error, classwise_calibration_error):
        weighted = fn(y, p, sample_weight=counts)
        repeated = fn(np.repeat(y, counts), np.repeat(p, counts, axis=0))
        assert weighted == pytest.approx(repeated, abs=1e-12)


def test_binary_one_dimensional_input_and_string_labels():
    y, p, w = random_problem(c=2, seed=5)
    names = np.array(["neg", "pos"])
    for fn in (
        expected_calibration_error,
        classwise_calibration_error,
        max_calibration_error,
        negative_log_likelihood,
        brier_score,
    ):
        two_d = fn(y, p)
        assert fn(y, p[:, 1]) == pytest.approx(two_d, abs=1e-12)
        assert fn(names[y], p[:, 1]) == pytest.approx(two_d, abs=1e-12)
        assert fn(names[y], p, labels=names) == pytest.approx(two_d, abs=1e-12)
        assert fn(names[y], p[:, ::-1], labels=names[::-1]) == pytest.approx(
            two_d, abs=1e-12
        )


def test_class_absent_from_y_true_is_fine():
    y, p, _ = random_problem(c=4, seed=6)
    keep = y != 3
    value = classwise_calibration_error(y[keep], p[keep])
    assert np.isfinite(value)
    # column 3 is still scored: its probabilities vs an all-zero target
    col3 = reference_ece(
        p[keep, 3],
        np.zeros(keep.sum()),
        np.ones(keep.sum()),
        15,
        "uniform",
        "l1",
        "left",
    )
    others = [
        reference_ece(
            p[keep, k], y[keep] == k, np.ones(keep.sum()), 15, "uniform", "l1", "left"
        )
        for k in range(3)
    ]
    assert value == pytest.approx((sum(others) + col3) / 4, abs=1e-12)


def test_perfect_calibration_gives_small_and_decreasing_ece():
    values = []
    for n in (1000, 10000, 100000):
        rng = np.random.default_rng(n)
        logits = 2 * rng.standard_normal((n, 5))
        p = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
        y = sample_labels(p, rng)
        values.append(expected_calibration_error(y, p))
    assert values[0] > values[1] > values[2]
    assert values[2] < 0.01


def test_nll_and_brier_match_sklearn():
    y, p, w = random_problem(c=5, seed=7)
    assert negative_log_likelihood(y, p, sample_weight=w) == pytest.approx(
        log_loss(y, p, sample_weight=w, labels=range(5)), rel=1e-10
    )
    assert brier_score(y, p, sample_weight=w) == pytest.approx(
        brier_score_loss(y, p, sample_weight=w, labels=range(5), scale_by_half=False),
        rel=1e-10,
    )


@pytest.mark.parametrize(
    "y, p, match",
    [
        ([0, 1], [[0.5, 0.6], [0.5, 0.5]], "sum to 1"),
        ([0, 1], [[np.nan, 1.0], [0.5, 0.5]], "NaN"),
        ([0, 1, 1], [[0.5, 0.5], [0.5, 0.5]], "inconsistent numbers of samples"),
        (["a", "b", "c"], [[0.5, 0.5]] * 3, "Pass labels="),
        ([0, 1], [[1.2, -0.2], [0.5, 0.5]], r"probabilities in \[0, 1\]"),
    ],
)
def test_bad_input_raises(y, p, match):
    for fn in (
        expected_calibration_error,
        classwise_calibration_error,
        negative_log_likelihood,
        brier_score,
    ):
        with pytest.raises(ValueError, match=match):
            fn(y, p)


def test_invalid_parameters_raise():
    with pytest.raises(ValueError, match="n_bins"):
        expected_calibration_error([0, 1], [[0.5, 0.5]] * 2, n_bins=0)
    with pytest.raises(ValueError, match="strategy"):
        expected_calibration_error([0, 1], [[0.5, 0.5]] * 2, strategy="kmeans")


# ------------------------------------------- class weights (issue 15, item 6)
def _bad_class_weights(c):
    """Invalid class weights for ``c`` classes -> the start of the error."""
    ones = [1.0] * (c - 1)
    must_hold = f"class_weight must hold {c} finite, non-negative numbers"
    return {
        "nan": ([np.nan, *ones], must_hold),
        "inf": ([np.inf, *ones], must_hold),
        "-inf": ([-np.inf, *ones], must_hold),
        "negative": ([-1.0, *ones], must_hold),
        "too short": (ones, must_hold),
        "too long": ([1.0, *ones, 1.0], must_hold),
        "all zero": ([0.0] * c, "class_weight sums to 0"),
    }


@pytest.mark.parametrize("case", list(_bad_class_weights(4)))
def test_classwise_rejects_bad_class_weight(case):
    y, p, w = random_problem(seed=7, c=4)
    class_weight, message = _bad_class_weights(4)[case]
    with pytest.raises(ValueError, match=message):
        classwise_calibration_error(y, p, sample_weight=w, class_weight=class_weight)


@pytest.mark.parametrize("scale", [2.0**-1070, 1e-300, 1.0, 1e300, 2.0**1021])
def test_classwise_class_weight_scale_changes_nothing(scale):
    # 10 * 2**1021 overflows a plain sum; 2**-1070 is subnormal
    y, p, w = random_problem(seed=8, c=4)
    per_class = [
        classwise_calibration_error(y, p, sample_weight=w, class_weight=np.eye(4)[k])
        for k in range(4)
    ]
    cw = np.array([1.0, 2.0, 3.0, 4.0])
    got = classwise_calibration_error(y, p, sample_weight=w, class_weight=cw * scale)
    assert got == pytest.approx(np.dot(cw, per_class) / cw.sum(), rel=1e-12)
