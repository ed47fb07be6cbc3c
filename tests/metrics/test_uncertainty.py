"""Bootstrap intervals and paired comparisons against independent references.

References: scipy.stats.bootstrap fed the same resampled rows (and, with its
own resampling, within Monte-Carlo error), the metrics computed on the
explicitly resampled rows, exact expectations of NLL and Brier under labels
drawn from known probabilities (coverage), and hand-built paired cases.
"""

import dataclasses
import warnings

import numpy as np
import pytest
from scipy import stats
from sklearn.utils._param_validation import InvalidParameterError

from skcal.metrics import (
    ConfidenceInterval,
    PairedComparison,
    _uncertainty,
    brier_score,
    classwise_calibration_error,
    confidence_interval,
    cumulative_calibration_error,
    cumulative_calibration_test,
    ecce_binned_mean,
    expected_calibration_error,
    get_scorer,
    local_calibration_error,
    max_calibration_error,
    negative_log_likelihood,
    paired_comparison,
    smooth_expected_calibration_error,
    soft_binned_calibration_error,
    soft_expected_calibration_error,
)
from skcal.utils._testing import sample_labels


def problem(n=80, c=4, seed=0, sharpness=2.0):
    """Probabilities with a few tied rows, and labels drawn from a tempered copy."""
    rng = np.random.default_rng(seed)
    logits = sharpness * rng.standard_normal((n, c))
    logits[n // 2 : n // 2 + 5] = logits[0]  # ties (cumulative metrics group them)
    proba = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    truth = np.exp(0.7 * logits) / np.exp(0.7 * logits).sum(axis=1, keepdims=True)
    y = sample_labels(truth, rng)
    return y, proba


def inject(monkeypatch, indices):
    """Make the bootstrap use ``indices`` (shape (B, n)) in chunks of 7 rows."""

    def fake(rng, strata, n_resamples, chunk):
        assert n_resamples == len(indices)
        for start in range(0, n_resamples, 7):
            yield indices[start : start + 7]

    monkeypatch.setattr(_uncertainty, "_draw_indices", fake)


# ---------------------------------------------------------------------------
# scipy.stats.bootstrap on the same resampled rows


def scipy_on_rows(statistic_of_rows, n, n_resamples, method):
    """scipy's interval of ``statistic_of_rows(rows)``, and the rows it drew.

    scipy resamples ``np.arange(n)``, so each resample it hands the statistic
    is an array of row indices: recorded, they are the resamples to feed
    skcal.
    """
    drawn = []

    def statistic(idx, axis=-1):
        idx = np.asarray(idx)
        if idx.ndim == 1:
            return statistic_of_rows(idx)
        if idx.shape[-1] == n:  # bootstrap resamples (jackknife ones have n - 1)
            drawn.append(idx.copy())
        return np.array([statistic_of_rows(rows) for rows in idx])

    result = stats.bootstrap(
        (np.arange(n),),
        statistic,
        n_resamples=n_resamples,
        vectorized=True,
        confidence_level=0.9,
        method=method,
        rng=np.random.default_rng(1),
    )
    return result, np.concatenate(drawn)


@pytest.mark.parametrize("method", ["percentile", "bca"])
@pytest.mark.parametrize(
    "metric, params",
    [
        (negative_log_likelihood, {}),  # per-row losses, closed-form jackknife
        (expected_calibration_error, {"n_bins": 5}),  # binned counts route
        (classwise_calibration_error, {"n_bins": 5}),  # one weighted call each
        (expected_calibration_error, {"n_bins": 5, "strategy": "quantile"}),  # rows
    ],
)
def test_interval_equals_scipy_bootstrap_on_the_same_resamples(
    monkeypatch, metric, params, method
):
    y, proba = problem(n=60)
    n_resamples = 1500
    reference, indices = scipy_on_rows(
        lambda rows: metric(y[rows], proba[rows], **params), 60, n_resamples, method
    )
    inject(monkeypatch, indices)
    ci = confidence_interval(
        metric, y, proba, n_resamples=n_resamples, method=method, **params
    )
    np.testing.assert_allclose(
        ci.resamples, reference.bootstrap_distribution, rtol=1e-10, atol=1e-13
    )
    interval = reference.confidence_interval
    np.testing.assert_allclose(
        [ci.low, ci.high], [interval.low, interval.high], rtol=1e-10
    )
    assert ci.estimate == metric(y, proba, **params)
    assert ci.standard_error == pytest.approx(reference.standard_error, rel=1e-9)


@pytest.mark.parametrize("method", ["percentile", "bca"])
def test_interval_agrees_with_scipy_resampling_within_monte_carlo_error(method):
    # independent resampling on both sides: with B = 4000 the Monte-Carlo
    # standard deviation of a 5% / 95% bound is about 0.04 standard errors
    # (0.05 for BCa), so 0.25 standard errors is about five sigmas of the
    # difference of the two
    y, proba = problem(n=300, seed=3)
    ci = confidence_interval(
        "negative_log_likelihood",
        y,
        proba,
        n_resamples=4000,
        method=method,
        random_state=0,
    )
    loss = -np.log(proba[np.arange(len(y)), y])
    reference = stats.bootstrap(
        (loss,),
        np.mean,
        n_resamples=4000,
        confidence_level=0.9,
        method=method,
        rng=np.random.default_rng(5),
    )
    se = reference.standard_error
    assert ci.standard_error == pytest.approx(se, rel=0.1)
    assert abs(ci.low - reference.confidence_interval.low) < 0.25 * se
    assert abs(ci.high - reference.confidence_interval.high) < 0.25 * se


# ---------------------------------------------------------------------------
# counts as weights: the metric on the explicitly resampled rows


ROUTES = [
    (negative_log_likelihood, {}),
    (negative_log_likelihood, {"eps": 1e-3}),
    (brier_score, {}),
    (expected_calibration_error, {}),
    (expected_calibration_error, {"n_bins": 7, "norm": "l2", "closed": "right"}),
    (max_calibration_error, {"n_bins": 6}),
    (classwise_calibration_error, {"n_bins": 6}),
    (classwise_calibration_error, {"class_weight": [1, 2, 3, 4], "norm": "max"}),
    (ecce_binned_mean, {"n_bins": 6}),
    (ecce_binned_mean, {"class_weight": "frequency"}),
    (cumulative_calibration_error, {}),
    (cumulative_calibration_error, {"statistic": "kuiper", "mode": "classwise"}),
    (smooth_expected_calibration_error, {}),
    (soft_expected_calibration_error, {}),
    (soft_binned_calibration_error, {}),
    # evaluated on the resampled rows
    (expected_calibration_error, {"strategy": "quantile"}),
    (classwise_calibration_error, {"strategy": "quantile", "n_bins": 4}),
    (cumulative_calibration_error, {"normalize": True}),
]


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize(
    "metric, params", ROUTES, ids=[f"{m.__name__}-{p}" for m, p in ROUTES]
)
def test_resamples_equal_the_metric_on_the_resampled_rows(
    monkeypatch, metric, params, weighted
):
    y, proba = problem(n=80, seed=1)
    names = np.array(["ant", "bee", "cat", "dog"])
    labels = names[[2, 0, 3, 1]]  # string labels in a non-sorted column order
    y_named = labels[y]
    weight = np.random.default_rng(2).uniform(0.2, 3.0, 80) if weighted else None
    indices = np.random.default_rng(3).integers(0, 80, size=(20, 80))
    inject(monkeypatch, indices)
    ci = confidence_interval(
        metric,
        y_named,
        proba,
        sample_weight=weight,
        n_resamples=20,
        labels=labels,
        **params,
    )

    def on_rows(rows):
        w = None if weight is None else weight[rows]
        return metric(
            y_named[rows], proba[rows], sample_weight=w, labels=labels, **params
        )

    expected = [on_rows(rows) for rows in indices]
    np.testing.assert_allclose(ci.resamples, expected, rtol=1e-9, atol=1e-12)
    assert ci.estimate == on_rows(np.arange(80))


def test_local_metric_resamples_its_features_with_the_rows(monkeypatch):
    y, proba = problem(n=60, c=2, seed=4)
    features = np.random.default_rng(5).normal(size=(60, 3))
    params = dict(space=None, bandwidth=1.0, n_bins=3, min_bin_size=2)
    indices = np.random.default_rng(6).integers(0, 60, size=(5, 60))
    inject(monkeypatch, indices)
    ci = confidence_interval(
        local_calibration_error, y, proba, n_resamples=5, features=features, **params
    )
    expected = [
        local_calibration_error(y[r], proba[r], features[r], **params) for r in indices
    ]
    np.testing.assert_allclose(ci.resamples, expected, rtol=1e-9)


@pytest.mark.parametrize(
    "name", ["negative_log_likelihood", "expected_calibration_error"]
)
def test_fast_route_and_a_plain_callable_see_the_same_resamples(name):
    # a lambda is evaluated on the resampled rows; the name takes the fast
    # route: with the same seed both resample the same rows
    y, proba = problem(n=150, seed=6)
    func = _uncertainty.METRICS[name]
    fast = confidence_interval(name, y, proba, n_resamples=200, random_state=7)
    plain = confidence_interval(
        lambda t, p: func(t, p), y, proba, n_resamples=200, random_state=7
    )
    np.testing.assert_allclose(fast.resamples, plain.resamples, rtol=1e-10)
    assert (fast.low, fast.high) == pytest.approx((plain.low, plain.high), rel=1e-10)


def test_zero_weight_rows_are_not_resampled():
    y, proba = problem(n=50, seed=7)
    weight = np.ones(50)
    weight[:10] = 0.0
    seen = []

    def metric(t, p, sample_weight):
        seen.append(np.asarray(sample_weight).min())
        return negative_log_likelihood(t, p, sample_weight=sample_weight)

    confidence_interval(
        metric, y, proba, sample_weight=weight, n_resamples=30, random_state=0
    )
    assert seen[0] == 0.0  # the estimate uses every row as given
    assert min(seen[1:]) == 1.0


# ---------------------------------------------------------------------------
# coverage by simulation


def test_nominal_90_percent_intervals_cover_the_true_value():
    # Fixed predictions: every row is a permutation of the same vector p,
    # its label drawn from the same permutation of q (miscalibrated: q != p).
    # Each row's loss then has the same distribution, so the true NLL is
    # -sum_k q_k log p_k and the true Brier score sum_j p_j^2 + 1 -
    # 2 sum_k q_k p_k, exactly. n = 200 rows and 500 resamples (the Monte-
    # Carlo error of a bound is then small beside the sampling error) keep
    # the 4 x 400 intervals of the vectorised route to a few seconds.
    p = np.array([0.55, 0.25, 0.15, 0.05])
    q = np.array([0.70, 0.15, 0.10, 0.05])
    n, reps = 200, 400
    rng = np.random.default_rng(0)
    perms = np.argsort(rng.uniform(size=(n, 4)), axis=1)
    proba, truth = p[perms], q[perms]
    true_values = {
        "negative_log_likelihood": -np.sum(q * np.log(p)),
        "brier_score": np.sum(p**2) + 1 - 2 * np.sum(q * p),
    }
    covered = {(m, k): 0 for m in true_values for k in ("percentile", "bca")}
    for rep in range(reps):
        y = sample_labels(truth, rng)
        for (metric, method), _ in covered.items():
            ci = confidence_interval(
                metric, y, proba, n_resamples=500, method=method, random_state=rep
            )
            covered[metric, method] += ci.low <= true_values[metric] <= ci.high
    for key, count in covered.items():
        assert 0.85 <= count / reps <= 0.95, (key, count / reps)


# ---------------------------------------------------------------------------
# paired comparisons


def calibrated_problem(n=400, seed=0):
    rng = np.random.default_rng(seed)
    proba = rng.dirichlet(np.full(3, 0.7), size=n)
    return sample_labels(proba, rng), proba


@pytest.mark.parametrize("method", ["percentile", "bca"])
def test_identical_predictions_differ_by_zero_with_p_value_one(method):
    y, proba = calibrated_problem()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        result = paired_comparison(
            "expected_calibration_error", y, proba, proba.copy(), method=method
        )
    assert result.difference == 0.0
    assert result.low == result.high == 0.0
    assert result.p_value == 1.0
    assert np.all(result.resamples == 0.0)


def test_a_clearly_better_prediction_has_a_small_p_value():
    y, proba = calibrated_problem(seed=1)
    sharp = proba**3 / (proba**3).sum(axis=1, keepdims=True)  # overconfident
    result = paired_comparison(negative_log_likelihood, y, proba, sharp, random_state=0)
    assert result.estimate_a == negative_log_likelihood(y, proba)
    assert result.estimate_b == negative_log_likelihood(y, sharp)
    assert result.difference == result.estimate_a - result.estimate_b < 0
    assert result.low < result.high < 0
    assert result.p_value <= 2 / (1 + 1000) + 1e-12  # no resample crosses 0
    reverse = paired_comparison(
        negative_log_likelihood, y, sharp, proba, random_state=0
    )
    assert reverse.difference == -result.difference
    assert reverse.p_value == result.p_value


def test_p_value_is_twice_the_smaller_tail_share():
    y, proba = calibrated_problem(n=120, seed=2)
    other = 0.97 * proba + 0.01  # slightly less sharp: close to proba
    result = paired_comparison("brier_score", y, proba, other, random_state=3)
    d = result.resamples
    tail = min(np.sum(d <= 0), np.sum(d >= 0))
    assert 0 < tail < len(d)  # a case where both tails are populated
    assert result.p_value == pytest.approx(min(1, 2 * (1 + tail) / (1 + len(d))))


def test_pairing_makes_the_interval_of_the_difference_narrow():
    # rows differ widely in difficulty; b is a (the truth) at temperature 0.8,
    # overconfident, and the two losses move together from row to row: the
    # marginal intervals overlap, while the paired interval of the
    # difference is narrow and excludes 0
    rng = np.random.default_rng(4)
    logits = 3 * rng.standard_normal((300, 5))
    a = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    b = np.exp(logits / 0.8) / np.exp(logits / 0.8).sum(axis=1, keepdims=True)
    y = sample_labels(a, rng)
    kw = dict(n_resamples=1000, random_state=5)
    ci_a = confidence_interval("negative_log_likelihood", y, a, **kw)
    ci_b = confidence_interval("negative_log_likelihood", y, b, **kw)
    paired = paired_comparison("negative_log_likelihood", y, a, b, **kw)
    assert ci_a.low < ci_b.high and ci_b.low < ci_a.high  # marginal overlap
    unpaired_width = (ci_a.high - ci_b.low) - (ci_a.low - ci_b.high)
    assert paired.high - paired.low < 0.2 * unpaired_width
    assert paired.high < 0 and paired.p_value < 0.01
    # the same seed resamples the same rows in both functions
    np.testing.assert_allclose(paired.resamples, ci_a.resamples - ci_b.resamples)


def test_paired_comparison_with_bca_and_stratify():
    y, proba = calibrated_problem(seed=5)
    sharp = proba**2 / (proba**2).sum(axis=1, keepdims=True)
    result = paired_comparison(
        "classwise_calibration_error",
        y,
        proba,
        sharp,
        method="bca",
        stratify=True,
        n_resamples=300,
        random_state=0,
    )
    assert result.low <= result.difference <= result.high
    assert np.isfinite([result.low, result.high, result.p_value]).all()


# ---------------------------------------------------------------------------
# resampling: stratification, reproducibility, jackknife size


def test_stratify_keeps_the_class_counts():
    y, proba = calibrated_problem(n=90, seed=6)
    counts = []

    def metric(t, p):
        counts.append(np.bincount(t, minlength=3))
        return negative_log_likelihood(t, p)

    for stratify in (True, False):
        counts.clear()
        confidence_interval(
            metric, y, proba, n_resamples=40, stratify=stratify, random_state=0
        )
        same = [np.array_equal(c, np.bincount(y, minlength=3)) for c in counts]
        assert all(same) if stratify else not all(same[1:])


def test_same_random_state_gives_the_same_interval():
    y, proba = calibrated_problem(n=100)
    kw = dict(n_resamples=100, method="bca")
    first = confidence_interval(
        "classwise_calibration_error", y, proba, random_state=3, **kw
    )
    again = confidence_interval(
        "classwise_calibration_error",
        y,
        proba,
        random_state=np.random.RandomState(3),
        **kw,
    )
    other = confidence_interval(
        "classwise_calibration_error", y, proba, random_state=4, **kw
    )
    np.testing.assert_array_equal(first.resamples, again.resamples)
    assert (first.low, first.high) == (again.low, again.high)
    assert not np.array_equal(first.resamples, other.resamples)


def test_above_the_limit_the_jackknife_deletes_groups():
    # a plain callable is called once per resample and once per jackknife
    # value: 1 + B + 1000 calls (groups) above 1000 rows, not 1 + B + n; its
    # BCa bounds stay close to those of the exact (closed-form) jackknife of
    # the named metric, on the same resamples
    y, proba = calibrated_problem(n=1500, seed=7)
    calls = []

    def nll(t, p):
        calls.append(len(t))
        return negative_log_likelihood(t, p)

    kw = dict(n_resamples=300, method="bca", random_state=0)
    grouped = confidence_interval(nll, y, proba, **kw)
    exact = confidence_interval("negative_log_likelihood", y, proba, **kw)
    assert len(calls) == 1 + 300 + _uncertainty.JACKKNIFE_MAX_GROUPS
    assert sorted(set(calls[301:])) == [1498, 1499]  # 1500 rows in 1000 groups
    width = exact.high - exact.low
    assert abs(grouped.low - exact.low) < 0.02 * width
    assert abs(grouped.high - exact.high) < 0.02 * width


# ---------------------------------------------------------------------------
# degenerate cases


@pytest.mark.parametrize("method", ["percentile", "bca"])
def test_a_constant_metric_gives_a_point_interval(method):
    y = np.array([0, 1, 2] * 20)
    proba = np.full((60, 3), 1 / 3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ci = confidence_interval("brier_score", y, proba, method=method)
    # every resample is 2 / 3 up to rounding (the sums differ in order)
    assert ci.estimate == pytest.approx(2 / 3, rel=1e-14)
    assert ci.low == pytest.approx(2 / 3, rel=1e-14)
    assert ci.high == pytest.approx(2 / 3, rel=1e-14)


def test_bca_warns_when_the_estimate_is_outside_the_resamples():
    # the share of distinct rows is 1 on the data and below 1 on (almost)
    # every resample: the bias correction is infinite
    y, proba = calibrated_problem(n=50)

    def distinct(t, p):
        return len(np.unique(p[:, 0])) / len(p)

    with pytest.warns(UserWarning, match="outside the range"):
        ci = confidence_interval(distinct, y, proba, method="bca", n_resamples=200)
    assert np.isfinite([ci.low, ci.high]).all()
    assert ci.resamples.min() <= ci.low <= ci.high <= ci.resamples.max()


def test_bca_levels_stay_finite_when_the_acceleration_is_too_large():
    # unreachable with 1000 resamples (|a| <= ~1/6 and the bias correction
    # is capped at ndtri(1 - 1 / 2000)), so built directly: 10^6 resamples
    # all below the estimate (z0 = ndtri(1 - 5e-7) = 4.9) and a jackknife
    # with one outlier (a = (n - 2) / sqrt(n (n - 1)) / 6 = 0.1666): the
    # upper BCa map has 1 - a (z0 + 1.645) < 0
    boot = np.arange(1e6)
    jack = np.zeros(10_000)
    jack[0] = -1.0
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        levels = _uncertainty._bca_levels(2e6, boot, jack, 0.05)
    messages = " ".join(str(w.message) for w in caught)
    assert "outside the range" in messages and "acceleration" in messages
    assert levels[1] == 1.0
    assert 0.0 <= levels[0] <= 1.0


def test_non_finite_resamples_warn_and_are_left_out():
    y, proba = calibrated_problem(n=12, seed=3)

    def needs_all_classes(t, p):
        return np.nan if len(np.unique(t)) < 3 else negative_log_likelihood(t, p)

    with pytest.warns(UserWarning, match="not finite on"):
        ci = confidence_interval(
            needs_all_classes, y, proba, n_resamples=300, random_state=0
        )
    finite = ci.resamples[np.isfinite(ci.resamples)]
    assert 0 < finite.size < 300
    assert (ci.low, ci.high) == tuple(np.quantile(finite, [0.05, 0.95]))


def test_warnings_of_the_metric_are_shown_once_with_their_count():
    y, proba = calibrated_problem(n=30)

    def noisy(t, p):
        warnings.warn("careful", RuntimeWarning, stacklevel=1)
        return negative_log_likelihood(t, p)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        confidence_interval(noisy, y, proba, n_resamples=50)
    messages = [str(w.message) for w in caught]
    assert messages == ["careful", "careful (raised 50 times while resampling)"]


# ---------------------------------------------------------------------------
# the results, the inputs, the errors


def test_results_are_frozen_and_readable():
    y, proba = calibrated_problem(n=100)
    ci = confidence_interval("expected_calibration_error", y, proba, random_state=0)
    assert isinstance(ci, ConfidenceInterval)
    assert str(ci).startswith("expected_calibration_error = ")
    assert "90% CI [" in str(ci) and "(percentile, 1000 resamples)" in str(ci)
    assert repr(ci).startswith("ConfidenceInterval(metric='expected_calibration_error'")
    assert "resamples=" not in repr(ci).replace("n_resamples=", "")
    with pytest.raises(dataclasses.FrozenInstanceError):
        ci.low = 0.0
    with pytest.raises(ValueError, match="read-only"):
        ci.resamples[0] = 0.0
    paired = paired_comparison(
        "brier_score", y, proba, proba**0.9 / (proba**0.9).sum(1)[:, None]
    )
    assert isinstance(paired, PairedComparison)
    assert str(paired).startswith("brier_score: A - B = ") and ", p = " in str(paired)
    assert repr(paired).startswith("PairedComparison(metric='brier_score'")


@pytest.mark.filterwarnings("ignore:method='bca'")  # 20 resamples of a biased ECE
def test_nothing_the_user_passed_is_modified():
    y, proba = problem(n=70, seed=8)
    weight = np.linspace(0.5, 2.0, 70)
    features = np.random.default_rng(0).normal(size=(70, 2))
    originals = [a.copy() for a in (y, proba, weight, features)]
    for a in (y, proba, weight, features):
        a.setflags(write=False)  # any write in place raises
    for metric in (
        "negative_log_likelihood",
        "expected_calibration_error",
        "ecce_binned_mean",
    ):
        confidence_interval(
            metric, y, proba, sample_weight=weight, method="bca", n_resamples=20
        )
    paired_comparison(
        "expected_calibration_error",
        y,
        proba,
        proba,
        sample_weight=weight,
        stratify=True,
        n_resamples=20,
    )
    confidence_interval(
        local_calibration_error,
        y,
        proba,
        features=features,
        space=None,
        n_resamples=3,
        min_bin_size=2,
    )
    for a, original in zip((y, proba, weight, features), originals):
        np.testing.assert_array_equal(a, original)


def test_metric_names_are_the_metric_functions_of_skcal_metrics():
    import skcal.metrics

    for name, func in _uncertainty.METRICS.items():
        assert name in skcal.metrics.__all__
        assert getattr(skcal.metrics, name) is func


@pytest.mark.parametrize(
    "metric, error, match",
    [
        (
            "expected_calibration_eror",
            ValueError,
            "Did you mean 'expected_calibration_error'",
        ),
        ("bin_edges", ValueError, "not a metric function"),
        ("neg_brier_scor", ValueError, "Did you mean 'neg_brier_score'"),
        (cumulative_calibration_test, ValueError, "not a metric function"),
        (get_scorer("neg_expected_calibration_error"), TypeError, "scorer"),
        (42, InvalidParameterError, "'metric' parameter"),
        (lambda t, p: np.array([1.0, 2.0]), TypeError, "single number"),
        (lambda t, p: np.nan, ValueError, "needs a finite value"),
    ],
)
def test_bad_metrics_get_a_clear_error(metric, error, match):
    y, proba = calibrated_problem(n=20)
    with pytest.raises(error, match=match):
        confidence_interval(metric, y, proba)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"confidence_level": 0}, "confidence_level"),
        ({"confidence_level": 1.0}, "confidence_level"),
        ({"confidence_level": 1.5}, "confidence_level"),
        ({"n_resamples": 1}, "n_resamples"),
        ({"method": "basic"}, "method"),
    ],
)
def test_bad_parameters_get_a_clear_error(kwargs, match):
    y, proba = calibrated_problem(n=20)
    with pytest.raises(InvalidParameterError, match=match):
        confidence_interval("brier_score", y, proba, **kwargs)
    with pytest.raises(InvalidParameterError, match=match):
        paired_comparison("brier_score", y, proba, proba, **kwargs)


def test_an_error_on_a_resample_says_where_it_came_from():
    # log_loss needs every class in y_true unless labels are given
    from sklearn.metrics import log_loss

    y, proba = calibrated_problem(n=8, seed=1)
    with pytest.raises(ValueError, match="different number of classes") as info:
        confidence_interval(log_loss, y, proba, n_resamples=200, random_state=0)
    if hasattr(info.value, "__notes__"):
        assert "bootstrap resample" in info.value.__notes__[0]
    ci = confidence_interval(
        log_loss, y, proba, n_resamples=200, random_state=0, labels=[0, 1, 2]
    )
    assert ci.estimate == log_loss(y, proba)


def test_bad_inputs_get_the_metric_error_once():
    y, proba = calibrated_problem(n=20)
    with pytest.raises(ValueError, match="same shape; got \\(20, 3\\) and \\(20, 2\\)"):
        paired_comparison("brier_score", y, proba, proba[:, :2])
    with pytest.raises(ValueError, match="rows sum to 1"):
        confidence_interval("expected_calibration_error", y, 0.5 * proba)
    with pytest.raises(
        TypeError, match="does not take the parameter\\(s\\) \\['n_bin'\\]"
    ):
        confidence_interval("expected_calibration_error", y, proba, n_bin=10)
    with pytest.raises(TypeError, match="takes no sample_weight"):
        confidence_interval(lambda t, p: 0.0, y, proba, sample_weight=np.ones(20))
    with pytest.raises(ValueError, match="at least 2 rows of positive weight"):
        confidence_interval("brier_score", y, proba, sample_weight=np.eye(20)[0])
    calls = []

    def strict(t, p):
        calls.append(1)
        raise ValueError("my own message")

    with pytest.raises(ValueError, match="my own message"):
        confidence_interval(strict, y, proba)
    assert len(calls) == 1
