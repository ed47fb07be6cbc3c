"""Debiased L2 calibration error against uncertainty-calibration 0.1.4."""

import numpy as np
import pytest
from _real_data import LOADERS, real_scores

from skcal.metrics import get_scorer, l2_calibration_error, metric_state


@pytest.mark.parametrize("name", LOADERS)
@pytest.mark.parametrize("mode", ["classwise", "top_label"])
@pytest.mark.parametrize("debias", [True, False])
@pytest.mark.parametrize("strategy", ["quantile", "uniform"])
@pytest.mark.parametrize("n_bins", [15, 4])
def test_equals_the_reference_on_real_data(name, mode, debias, strategy, n_bins):
    cal = pytest.importorskip("calibration")
    y, P = real_scores(name)
    scheme = {"quantile": cal.get_equal_bins, "uniform": cal.get_equal_prob_bins}
    expected = cal.lower_bound_scaling_ce(
        P,
        y,
        p=2,
        debias=debias,
        num_bins=n_bins,
        binning_scheme=scheme[strategy],
        mode={"classwise": "marginal", "top_label": "top-label"}[mode],
    )
    got = l2_calibration_error(
        y, P, n_bins=n_bins, strategy=strategy, mode=mode, debias=debias
    )
    assert got == pytest.approx(expected, rel=1e-12, abs=1e-15)


@pytest.mark.parametrize("name", LOADERS)
def test_defaults_are_get_calibration_error(name):
    cal = pytest.importorskip("calibration")
    y, P = real_scores(name)
    expected = cal.get_calibration_error(P, y)  # continuous: equal-mass, 15
    assert l2_calibration_error(y, P) == pytest.approx(expected, rel=1e-12)
    top = cal.get_top_calibration_error(P, y)
    got = l2_calibration_error(y, P, mode="top_label")
    assert got == pytest.approx(top, rel=1e-12)


def test_discrete_bins_are_the_reference_on_binned_scores():
    """The reference sniffs few distinct scores and bins each value alone;
    here that is strategy="discrete", asked for explicitly."""
    cal = pytest.importorskip("calibration")
    y, P = real_scores("breast_cancer")
    p = np.round(P[:, 1] * 8) / 8  # a histogram-binned model: 9 values
    P = np.column_stack([1 - p, p])
    assert cal.is_discrete(P)
    expected = cal.get_calibration_error(P, y)
    got = l2_calibration_error(y, P, strategy="discrete")
    assert got == pytest.approx(expected, rel=1e-12)


def test_hand_computed_equal_mass_case():
    """Six scores, two equal-mass bins {0.1, 0.2, 0.6} and {0.7, 0.8, 0.9}
    split at 0.65; both columns of a binary problem have the same gaps."""
    y = [0, 1, 1, 0, 1, 0]
    p = [0.1, 0.8, 0.6, 0.7, 0.9, 0.2]
    gap_low = (0.1 + 0.2 + 0.6) / 3 - 1 / 3
    gap_high = (0.7 + 0.8 + 0.9) / 3 - 2 / 3
    plug_in = 0.5 * gap_low**2 + 0.5 * gap_high**2
    got = l2_calibration_error(y, p, n_bins=2, debias=False)
    assert got == pytest.approx(np.sqrt(plug_in), rel=1e-12)
    # each bin's bias acc (1 - acc) / (n - 1) = (2/9) / 2 exceeds its gap
    debiased = plug_in - (2 / 9) / 2
    assert debiased < 0
    assert l2_calibration_error(y, p, n_bins=2) == 0.0


def test_hand_computed_weighted_case():
    """One bin: weighted means, and the bias with Kish's effective size."""
    conf = np.array([0.99, 0.98, 0.97, 0.99])
    correct = np.array([1, 0, 0, 1])
    w = np.array([1.0, 2.0, 0.5, 1.0])
    P = np.column_stack([conf, 1 - conf])  # class 0 predicted everywhere
    y = 1 - correct
    W = w.sum()
    acc, mean_conf = w @ correct / W, w @ conf / W
    n_eff = W**2 / (w @ w)
    squared = (mean_conf - acc) ** 2 - acc * (1 - acc) / (n_eff - 1)
    got = l2_calibration_error(
        y, P, n_bins=1, strategy="uniform", mode="top_label", sample_weight=w
    )
    assert got == pytest.approx(np.sqrt(squared), rel=1e-12)


def test_weights_one_and_zero():
    y, P = real_scores("wine")
    base = l2_calibration_error(y, P)
    w = np.ones(len(y))
    assert l2_calibration_error(y, P, sample_weight=w) == pytest.approx(base, rel=1e-12)
    # a row of weight 0 is a row that is not there (edges included)
    extra_y = np.r_[y, y[:5]]
    extra_P = np.r_[P, P[::-1][:5]]
    w = np.r_[np.ones(len(y)), np.zeros(5)]
    got = l2_calibration_error(extra_y, extra_P, sample_weight=w)
    assert got == pytest.approx(base, rel=1e-12)


def test_a_class_absent_from_y_keeps_its_column():
    cal = pytest.importorskip("calibration")
    y, P = real_scores("wine")
    keep = y != 2
    expected = cal.get_calibration_error(P[keep], y[keep])  # 3 one-hot columns
    got = l2_calibration_error(y[keep], P[keep], labels=[0, 1, 2])
    assert got == pytest.approx(expected, rel=1e-12)


def test_quantile_state_equals_the_function():
    """Two passes; the kept scores give the reference's midpoint edges."""
    y, P = real_scores("digits")
    rng = np.random.default_rng(0)
    w = rng.uniform(0.2, 2.0, len(y))
    for weights in (None, w):
        for mode in ("classwise", "top_label"):
            state = metric_state(l2_calibration_error, mode=mode)
            chunks = np.array_split(np.arange(len(y)), 4)
            for rows in chunks:
                state.update(y[rows], P[rows], None if weights is None else w[rows])
            state.next_pass()
            for rows in chunks[::-1]:
                state.update(y[rows], P[rows], None if weights is None else w[rows])
            batch = l2_calibration_error(y, P, mode=mode, sample_weight=weights)
            assert state.compute() == pytest.approx(batch, rel=1e-12)


def test_scorer_and_clear_errors():
    y, P = real_scores("wine")
    assert get_scorer("neg_l2_calibration_error")._score_func is l2_calibration_error
    with pytest.raises(ValueError, match="strategy"):
        l2_calibration_error(y, P, strategy="kmeans")
    with pytest.raises(ValueError, match="strategy"):
        metric_state(l2_calibration_error, strategy="discrete")
    with pytest.raises(ValueError, match="sum to 1"):
        l2_calibration_error(y, P * 0.5)


def test_many_classes_and_inputs_untouched():
    rng = np.random.default_rng(0)
    P = rng.dirichlet(np.full(1000, 0.05), 2000)
    y = rng.integers(0, 1000, 2000)
    before = P.copy()
    value = l2_calibration_error(y, P)
    assert np.isfinite(value) and value >= 0
    np.testing.assert_array_equal(P, before)
