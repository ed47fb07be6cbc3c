"""The VQ paper's binned cumulative calibration error."""

import numpy as np
import pytest

from skcal.metrics import ecce_binned_mean


def _loop_reference(y, P, n_bins, w):
    """Bins, residuals and running sums written out sample by sample."""
    n, C = P.shape
    per_class = []
    for k in range(C):
        sums = {}
        for i in range(n):
            b = min(int(P[i, k] * n_bins), n_bins - 1)
            tot, sp, sy = sums.get(b, (0.0, 0.0, 0.0))
            sums[b] = (tot + w[i], sp + w[i] * P[i, k], sy + w[i] * (y[i] == k))
        total = sum(v[0] for v in sums.values())
        running, cum = 0.0, []
        for b in sorted(sums):
            tot, sp, sy = sums[b]
            running += tot / total * (sp / tot - sy / tot)
            cum.append(abs(running))
        per_class.append(np.mean(cum))
    return float(np.mean(per_class))


def test_hand_case():
    y = [0, 1, 1, 0]
    P = [[0.9, 0.1], [0.2, 0.8], [0.4, 0.6], [0.3, 0.7]]
    # class 0: C = -0.125, -0.025, -0.05; class 1: C = 0.025, 0.1, 0.05
    expected = ((0.125 + 0.025 + 0.05) / 3 + (0.025 + 0.1 + 0.05) / 3) / 2
    assert ecce_binned_mean(y, P, n_bins=5) == pytest.approx(expected, abs=1e-15)


@pytest.mark.parametrize("weighted", [False, True])
def test_matches_loop_reference(weighted):
    rng = np.random.default_rng(0)
    P = rng.dirichlet(np.ones(4) * 0.7, size=300)
    y = rng.integers(0, 4, size=300)
    w = rng.uniform(0, 2, size=300) if weighted else np.ones(300)
    value = ecce_binned_mean(y, P, sample_weight=w if weighted else None)
    assert value == pytest.approx(_loop_reference(y, P, 15, w), rel=1e-12)


def test_perfect_calibration_is_small_and_frequency_weights():
    rng = np.random.default_rng(1)
    P = rng.dirichlet(np.ones(3), size=20000)
    y = (rng.uniform(size=(20000, 1)) > P.cumsum(1)).sum(1)
    assert ecce_binned_mean(y, P) < 0.005
    y_bad = np.zeros(20000, dtype=int)
    y_bad[:10] = [0, 1, 2, 0, 1, 2, 0, 1, 2, 1]
    uniform = ecce_binned_mean(y_bad, P)
    freq = ecce_binned_mean(y_bad, P, class_weight="frequency")
    assert uniform > 0.05 and freq != pytest.approx(uniform)


# ------------------------------------------------------- Tygert et al. ECCE
from scipy.integrate import quad  # noqa: E402
from scipy.special import erfc  # noqa: E402

from skcal.metrics import (  # noqa: E402
    brownian_max_abs_cdf,
    brownian_range_cdf,
    cumulative_calibration_error,
    cumulative_calibration_test,
)


def _tygert_reference(s, r):
    """Distinct scores: sort, cumulate, read every prefix (the paper's C_k)."""
    order = np.argsort(s)
    c = np.concatenate([[0.0], np.cumsum(r[order] - s[order]) / len(s)])
    return np.abs(c).max(), c.max() - c.min(), np.sqrt(np.sum(s * (1 - s))) / len(s)


def test_cumulative_hand_case():
    y = [0, 1, 1, 0]
    P = [[0.9, 0.1], [0.2, 0.8], [0.4, 0.6], [0.3, 0.7]]
    # confidences 0.6, 0.7, 0.8, 0.9 with correctness 1, 0, 1, 1:
    # C = 0.1, -0.075, -0.025, 0
    assert cumulative_calibration_error(y, P) == pytest.approx(0.1)
    assert cumulative_calibration_error(y, P, statistic="kuiper") == pytest.approx(
        0.175
    )


@pytest.mark.parametrize("statistic", ["ks", "kuiper"])
def test_cumulative_matches_reference_on_distinct_scores(statistic):
    rng = np.random.default_rng(3)
    s = rng.uniform(0.05, 0.95, size=500)
    r = (rng.uniform(size=500) < s**1.3).astype(float)
    ks, kuiper, sigma = _tygert_reference(s, r)
    expected = ks if statistic == "ks" else kuiper
    value = cumulative_calibration_error(
        r.astype(int), s, statistic=statistic, mode="classwise", class_weight=[0, 1]
    )
    assert value == pytest.approx(expected, rel=1e-12)
    normalized = cumulative_calibration_error(
        r.astype(int),
        s,
        statistic=statistic,
        mode="classwise",
        class_weight=[0, 1],
        normalize=True,
    )
    assert normalized == pytest.approx(expected / sigma, rel=1e-12)


def test_ties_do_not_depend_on_the_order_and_weights_are_repetitions():
    rng = np.random.default_rng(4)
    P = rng.dirichlet(np.ones(3), size=300).round(1)  # many ties
    P /= P.sum(1, keepdims=True)
    y = rng.integers(0, 3, size=300)
    perm = rng.permutation(300)
    for statistic in ("ks", "kuiper"):
        for mode in ("top_label", "classwise"):
            a = cumulative_calibration_error(y, P, statistic=statistic, mode=mode)
            b = cumulative_calibration_error(
                y[perm], P[perm], statistic=statistic, mode=mode
            )
            assert a == pytest.approx(b, rel=1e-12)
    w = rng.integers(0, 4, size=300)
    weighted = cumulative_calibration_test(y, P, sample_weight=w)
    repeated = cumulative_calibration_test(np.repeat(y, w), np.repeat(P, w, axis=0))
    assert weighted.statistic == pytest.approx(repeated.statistic, rel=1e-12)


def test_brownian_max_abs_cdf_against_the_other_series_and_its_mean():
    # the reflection series: P(max |W| < x) = sum_k (-1)^k erfc-terms
    x = np.array([0.3, 0.8, 1.25, 2.0, 3.5])

    def reflection(v):
        k = np.arange(-60, 61)
        # P(|W| stays in (-v, v)) = sum_k (-1)^k [Phi((2k+1)v) - Phi((2k-1)v)]
        phi = lambda t: 0.5 * erfc(-t / np.sqrt(2))  # noqa: E731
        return np.sum((-1.0) ** k * (phi((2 * k + 1) * v) - phi((2 * k - 1) * v)))

    np.testing.assert_allclose(
        brownian_max_abs_cdf(x), [reflection(v) for v in x], atol=1e-12
    )
    mean, _ = quad(lambda v: 1 - brownian_max_abs_cdf(np.array([v]))[0], 0, 12)
    assert mean == pytest.approx(np.sqrt(np.pi / 2), rel=1e-8)


def test_brownian_cdfs_at_the_edges_of_their_domain():
    # 1 where the reflection series' tail 4 P(N > x) is below 1e-300 (and for
    # +inf), 0 at and below 0, NaN for NaN; both sides of the cut agree
    x = np.array([-1.0, 0.0, 9.0, 39.9, 40.0, 1e300, np.inf, np.nan])
    for cdf, cut in ((brownian_max_abs_cdf, 40.0), (brownian_range_cdf, 80.0)):
        got = cdf(x * cut / 40.0)
        np.testing.assert_array_equal(got[:2], [0.0, 0.0])
        np.testing.assert_allclose(got[2:7], 1.0, atol=1e-12)
        assert np.isnan(got[7])
        assert cdf(np.array([cut])) == 1.0


@pytest.mark.parametrize("statistic", ["ks", "kuiper"])
def test_sure_predictions_give_an_infinite_normalised_value_not_a_crash(statistic):
    # every score 0 or 1 (sigma_n = 0): a wrong sure prediction cannot happen
    # under perfect calibration (p-value 0, normalised value inf); all right:
    # value 0, p-value 1. Near-sure scores end in the same place, in bounded
    # time and memory.
    from skcal.metrics import calibration_report, cumulative_calibration_error

    rng = np.random.default_rng(0)
    y = rng.integers(0, 3, 200)
    pred = np.where(rng.random(200) < 0.9, y, (y + 1) % 3)
    sure = np.eye(3)[pred]
    result = cumulative_calibration_test(y, sure, statistic=statistic)
    assert result.sigma == 0.0 and result.statistic > 0
    assert result.normalized == np.inf and result.pvalue == 0.0
    assert cumulative_calibration_error(y, sure, normalize=True) == np.inf
    per_class = cumulative_calibration_test(
        y, sure, statistic=statistic, mode="classwise"
    )
    np.testing.assert_array_equal(per_class.pvalue, 0.0)
    right = cumulative_calibration_test(y, np.eye(3)[y], statistic=statistic)
    assert right.normalized == 0.0 and right.pvalue == 1.0
    near = np.where(sure == 1, 1 - 2e-12, 1e-12)
    assert cumulative_calibration_test(y, near, statistic=statistic).pvalue == 0.0
    report = calibration_report(y, sure, n_resamples=20, random_state=0)
    assert report is not None


def test_brownian_range_cdf_mean_and_monte_carlo():
    mean, _ = quad(lambda v: 1 - brownian_range_cdf(np.array([v]))[0], 0, 15)
    assert mean == pytest.approx(2 * np.sqrt(2 / np.pi), rel=1e-8)
    rng = np.random.default_rng(5)
    paths = np.cumsum(rng.normal(size=(4000, 2000)) / np.sqrt(2000), axis=1)
    ranges = np.maximum(paths.max(1), 0) - np.minimum(paths.min(1), 0)
    for q in (1.0, 1.6, 2.5):
        # discretised paths slightly under-shoot the range: a loose tolerance
        assert np.mean(ranges <= q) == pytest.approx(
            brownian_range_cdf(np.array([q]))[0], abs=0.03
        )


def test_pvalues_are_uniform_under_perfect_calibration():
    rng = np.random.default_rng(6)
    pvalues = {"ks": [], "kuiper": []}
    for _ in range(200):
        p = rng.uniform(size=2000)
        y = (rng.uniform(size=2000) < p).astype(int)
        for statistic in pvalues:
            pvalues[statistic].append(
                cumulative_calibration_test(y, p, statistic=statistic).pvalue
            )
    for statistic, values in pvalues.items():
        values = np.array(values)
        # Kolmogorov-Smirnov distance of the p-values from U(0, 1)
        grid = np.sort(values)
        ks = np.max(np.abs(grid - np.arange(1, 201) / 200))
        assert ks < 0.12, statistic
    result = cumulative_calibration_test(y, p**1.5, mode="classwise")
    assert result.pvalue.shape == (2,) and (result.pvalue < 1e-6).all()


# ------------------------------------------- class weights (issue 15, item 6)
CLASS_WEIGHT_METRICS = {
    "ecce_binned_mean": ecce_binned_mean,
    "cumulative_classwise": lambda *a, **k: cumulative_calibration_error(
        *a, mode="classwise", **k
    ),
    # unused by the top-label mode, but still checked
    "cumulative_top_label": cumulative_calibration_error,
}


def _per_class(func, y, P, w):
    """The metric of each class alone (a one-hot class_weight)."""
    return [func(y, P, sample_weight=w, class_weight=np.eye(4)[k]) for k in range(4)]


def _class_weight_problem(c=4, n=400, seed=9):
    rng = np.random.default_rng(seed)
    P = rng.dirichlet(np.ones(c), size=n)
    y = (rng.uniform(size=(n, 1)) > P.cumsum(1)).sum(1)
    return y, P, rng.uniform(0.5, 2.0, n)


@pytest.mark.parametrize(
    "class_weight, message",
    [
        ([np.nan, 1, 1, 1], "class_weight must hold 4 finite, non-negative numbers"),
        ([np.inf, 1, 1, 1], "class_weight must hold 4 finite, non-negative numbers"),
        ([1, -1, 1, 1], "class_weight must hold 4 finite, non-negative numbers"),
        ([1, 1, 1], "class_weight must hold 4 finite, non-negative numbers"),
        ([1, 1, 1, 1, 1], "class_weight must hold 4 finite, non-negative numbers"),
        ([0, 0, 0, 0], "class_weight sums to 0"),
    ],
    ids=["nan", "inf", "negative", "too short", "too long", "all zero"],
)
@pytest.mark.parametrize("metric", list(CLASS_WEIGHT_METRICS))
def test_bad_class_weight_is_rejected(metric, class_weight, message):
    y, P, w = _class_weight_problem()
    with pytest.raises(ValueError, match=message):
        CLASS_WEIGHT_METRICS[metric](y, P, sample_weight=w, class_weight=class_weight)


@pytest.mark.parametrize("scale", [2.0**-1070, 1e-300, 1e300, 2.0**1021])
@pytest.mark.parametrize("metric", ["ecce_binned_mean", "cumulative_classwise"])
def test_class_weight_scale_changes_nothing(metric, scale):
    # 10 * 2**1021 overflows a plain sum; 2**-1070 is subnormal
    func = CLASS_WEIGHT_METRICS[metric]
    y, P, w = _class_weight_problem()
    per_class = _per_class(func, y, P, w)
    cw = np.array([1.0, 2.0, 3.0, 4.0])
    got = func(y, P, sample_weight=w, class_weight=cw * scale)
    assert got == pytest.approx(np.dot(cw, per_class) / cw.sum(), rel=1e-12)


@pytest.mark.parametrize("weight_scale", [1e-300, 1.0, 1e300])
@pytest.mark.parametrize("metric", ["ecce_binned_mean", "cumulative_classwise"])
def test_frequency_class_weight(metric, weight_scale):
    func = CLASS_WEIGHT_METRICS[metric]
    y, P, w = _class_weight_problem()
    per_class = _per_class(func, y, P, w)
    # the weighted class frequencies, by a plain loop
    freq = np.array([sum(wi for yi, wi in zip(y, w) if yi == k) for k in range(4)])
    got = func(y, P, sample_weight=w * weight_scale, class_weight="frequency")
    assert got == pytest.approx(np.dot(freq, per_class) / freq.sum(), rel=1e-12)
