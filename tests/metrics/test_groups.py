"""Metrics by group: every grouped value is the plain function on the group's rows."""

import importlib.util

import numpy as np
import pytest

import skcal.metrics as M
from skcal.metrics import GroupedResult
from skcal.utils import _groups

RNG = np.random.default_rng(7)
N, K = 240, 3
P = RNG.dirichlet(np.ones(K), N)
Y = np.array([RNG.choice(K, p=row) for row in P])
G = RNG.choice(np.array(["lab", "clinic", "home"]), N)
W = RNG.uniform(0.5, 2.0, N)
F = RNG.normal(size=(N, 4))

CASES = [
    (M.expected_calibration_error, {}),
    (M.expected_calibration_error, {"strategy": "quantile", "norm": "l2"}),
    (M.max_calibration_error, {}),
    (M.classwise_calibration_error, {"n_bins": 5}),
    (M.negative_log_likelihood, {}),
    (M.brier_score, {}),
    (M.l2_calibration_error, {}),
    (M.ecce_binned_mean, {}),
    (M.cumulative_calibration_error, {}),
    (M.maximum_mean_calibration_error, {}),
    (M.smooth_expected_calibration_error, {}),
    (M.soft_expected_calibration_error, {}),
    (M.soft_binned_calibration_error, {}),
]


def _rows_of(g):
    return np.flatnonzero(G == g)


@pytest.mark.parametrize("weights", [None, W])
@pytest.mark.parametrize("metric, params", CASES)
def test_grouped_metric_equals_the_metric_on_each_groups_rows(metric, params, weights):
    result = metric(Y, P, sample_weight=weights, groups=G, **params)
    assert isinstance(result, GroupedResult)
    assert sorted(result.by_group) == ["clinic", "home", "lab"]
    for g in ("lab", "clinic", "home"):
        rows = _rows_of(g)
        w = None if weights is None else weights[rows]
        expected = metric(Y[rows], P[rows], sample_weight=w, **params)
        assert abs(result[g] - expected) <= 1e-12
        assert result.counts[list(result.groups).index(g)] == len(rows)
    assert result.overall == metric(Y, P, sample_weight=weights, **params)
    assert isinstance(metric(Y, P, sample_weight=weights, **params), float)


def test_worst_is_the_group_of_largest_error():
    result = M.expected_calibration_error(Y, P, groups=G)
    by_hand = {g: M.expected_calibration_error(Y[G == g], P[G == g]) for g in set(G)}
    assert result.worst == max(by_hand, key=by_hand.get)


def test_tests_and_local_metrics_by_group():
    test = M.spiegelhalter_test(Y, P, groups=G)
    for g in ("lab", "home"):
        plain = M.spiegelhalter_test(Y[G == g], P[G == g])
        assert abs(test[g].normalized - plain.normalized) <= 1e-12
    cumulative = M.cumulative_calibration_test(Y, P, groups=G)
    plain = M.cumulative_calibration_test(Y[G == "clinic"], P[G == "clinic"])
    assert abs(cumulative["clinic"].pvalue - plain.pvalue) <= 1e-12
    local = M.local_calibration_error(
        Y, P, F, groups=G, bandwidth=0.5, min_bin_size=5, device="cpu"
    )
    rows = _rows_of("home")
    expected = M.local_calibration_error(
        Y[rows], P[rows], F[rows], bandwidth=0.5, min_bin_size=5, device="cpu"
    )
    assert abs(local["home"] - expected) <= 1e-12


def test_intervals_comparisons_and_reports_by_group():
    kw = {"n_resamples": 30, "random_state": 3}
    ci = M.confidence_interval("ece", Y, P, groups=G, n_bins=10, **kw)
    rows = _rows_of("clinic")
    plain = M.confidence_interval("ece", Y[rows], P[rows], n_bins=10, **kw)
    assert (ci["clinic"].low, ci["clinic"].high) == (plain.low, plain.high)
    other = RNG.dirichlet(np.ones(K), N)
    pc = M.paired_comparison("nll", Y, P, other, groups=G, **kw)
    plain = M.paired_comparison("nll", Y[rows], P[rows], other[rows], **kw)
    assert abs(pc["clinic"].difference - plain.difference) <= 1e-12
    report = M.calibration_report(Y, P, groups=G, slow_resamples=5, **kw)
    plain = M.calibration_report(Y[rows], P[rows], slow_resamples=5, **kw)
    assert abs(report["clinic"]["NLL"].high - plain["NLL"].high) <= 1e-12
    if importlib.util.find_spec("pandas") is not None:  # an optional extra
        frame = report.to_frame()
        assert list(frame.index) == ["clinic", "home", "lab"]
        assert frame.loc["clinic", "n_samples"] == len(rows)


def test_a_group_missing_a_class_keeps_the_column_order():
    labels = np.array(["a", "b", "c"])
    y = labels[Y]
    groups = np.where(Y == 2, "g1", RNG.choice(["g1", "g2"], N))  # g2: no "c"
    result = M.negative_log_likelihood(y, P, groups=groups)
    rows = groups == "g2"
    expected = M.negative_log_likelihood(y[rows], P[rows], labels=labels)
    assert abs(result["g2"] - expected) <= 1e-12


def _spread(values, counts):
    mean = np.sum(counts * values) / counts.sum()
    return np.sum(counts * (values - mean) ** 2) / counts.sum()


def test_difference_test_detects_a_miscalibrated_group():
    # the "home" rows are made overconfident: their probabilities sharpened
    sharp = P**4 / (P**4).sum(axis=1, keepdims=True)
    proba = np.where((G == "home")[:, None], sharp, P)
    result = M.expected_calibration_error(Y, proba, groups=G, n_bins=10)
    test = result.difference_test(n_permutations=199, random_state=0)
    assert test.pvalue == 1 / 200
    assert result.worst == "home"
    values = np.array([result[g] for g in result.groups])
    assert abs(test.statistic - _spread(values, result.counts)) <= 1e-15


def test_difference_test_under_the_null_is_uniform_ish():
    # groups drawn independently of the rows: p-values roughly uniform
    pvalues = []
    for seed in range(12):
        groups = np.random.default_rng(seed).integers(0, 3, N)
        result = M.brier_score(Y, P, groups=groups)
        pvalues.append(result.difference_test(49, random_state=seed).pvalue)
    assert 0.2 < np.mean(pvalues) < 0.8
    assert min(pvalues) >= 1 / 50


def test_bad_groups_say_what_to_do(monkeypatch):
    with pytest.raises(ValueError, match=r"expected shape \(240,\)"):
        M.brier_score(Y, P, groups=G[:-1])
    monkeypatch.setattr(_groups, "MAX_GROUPS", 2)
    with pytest.raises(ValueError, match="more than the 2"):
        M.brier_score(Y, P, groups=G)


def test_groups_take_pandas_inputs_and_are_documented():
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame(P, index=np.arange(N) * 3)
    result = M.brier_score(pd.Series(Y, index=frame.index), frame, groups=G)
    assert abs(result["lab"] - M.brier_score(Y[G == "lab"], P[G == "lab"])) <= 1e-12
    assert "groups : array-like" in M.expected_calibration_error.__doc__
    assert "groups : array-like" in M.confidence_interval.__doc__


def test_reliability_display_draws_one_curve_per_group():
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    from skcal.display import ReliabilityDisplay

    displays = ReliabilityDisplay.from_predictions(Y, P, groups=G, n_bins=5)
    assert list(displays) == ["clinic", "home", "lab"]
    ax = displays["lab"].ax_
    assert all(d.ax_ is ax for d in displays.values())
    rows = _rows_of("home")
    alone = ReliabilityDisplay.from_predictions(Y[rows], P[rows], n_bins=5)
    np.testing.assert_array_equal(displays["home"].count, alone.count)
    np.testing.assert_allclose(
        displays["home"].fraction_positive, alone.fraction_positive, atol=1e-12
    )
    assert displays["home"].ece_ == pytest.approx(alone.ece_, abs=1e-12)
    matplotlib.pyplot.close("all")


@pytest.mark.parametrize(
    "metric, params",
    [
        ("ece", {"n_bins": 10}),
        ("ece", {"n_bins": 5, "strategy": "quantile"}),
        ("classwise_calibration_error", {}),
        ("nll", {}),
    ],
)
def test_grouped_state_equals_the_metric_per_group(metric, params):
    from skcal.metrics import metric_state

    chunks = np.array_split(np.arange(N), 5)
    states = []
    for rows in chunks:
        s = metric_state(metric, grouped=True, **params)
        states.append(s.update(Y[rows], P[rows], W[rows], groups=G[rows]))
    state = states[0]
    for other in states[1:]:
        state.merge(other)
    if state.overall.n_passes == 2:
        state.next_pass()
        for rows in chunks:
            state.update(Y[rows], P[rows], W[rows], groups=G[rows])
    result = state.compute()
    plain = getattr(M, state.metric)
    for g in ("clinic", "home", "lab"):
        rows = _rows_of(g)
        assert (
            abs(result[g] - plain(Y[rows], P[rows], sample_weight=W[rows], **params))
            <= 1e-12
        )
    assert abs(result.overall - plain(Y, P, sample_weight=W, **params)) <= 1e-12
    with pytest.raises(ValueError, match="needs the rows"):
        result.difference_test()


def test_grouped_state_refuses_groups_beyond_its_maximum():
    from skcal.metrics import metric_state

    state = metric_state("nll", grouped=True, max_groups=2)
    with pytest.raises(ValueError, match="already holds 2 groups"):
        state.update(Y, P, groups=G)
