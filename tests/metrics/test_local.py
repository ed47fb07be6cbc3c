"""Local calibration metrics against a dense numpy reference and hand-made cases."""

import numpy as np
import pytest
from sklearn.utils.estimator_checks import parametrize_with_checks

from skcal._torch.kernels import _local as local_kernel
from skcal.metrics import (
    LocalSpace,
    effective_sample_size,
    ess_profile,
    local_calibration_error,
    local_calibration_errors,
    max_local_calibration_error,
)
from skcal.metrics import _local as local_metrics
from skcal.utils._testing import sample_labels


def dense_reference(y, proba, phi, w, bandwidth, n_bins, min_bin_size):
    """The local metrics of Barbera et al. ("Multiclass Local Calibration With
    the Jensen-Shannon Distance", AISTATS 2026, arXiv:2510.26566; formulas in
    :func:`skcal.metrics.local_calibration_error` and
    :func:`skcal.metrics.effective_sample_size`) written out with dense
    matrices and explicit loops."""
    n, n_classes = proba.shape
    lce = np.full((n, n_classes), np.nan)
    ess = np.full((n, n_classes), np.nan)
    for k in range(n_classes):
        bins = np.empty(n, dtype=int)
        for i in range(n):
            p = proba[i, k]
            bins[i] = n_bins - 1 if p >= 1.0 else int(np.floor(p * n_bins))
            # i / n_bins edges: fix floor rounding for scores exactly on an edge
            while bins[i] + 1 < n_bins and p >= (bins[i] + 1) / n_bins:
                bins[i] += 1
            while bins[i] > 0 and p < bins[i] / n_bins:
                bins[i] -= 1
        for b in range(n_bins):
            members = np.flatnonzero(bins == b)
            wm = w[members]
            support = wm.sum() ** 2 / np.sum(wm**2) if np.sum(wm**2) > 0 else 0.0
            if support <= min_bin_size:  # Kish's effective number of samples
                continue
            for i in members:
                num = den = s1 = s2 = 0.0
                for j in members:
                    dist2 = np.sum((phi[i] - phi[j]) ** 2)
                    kij = np.exp(-dist2 / (2 * bandwidth**2))
                    r = proba[j, k] - (y[j] == k)
                    num += w[j] * kij * r
                    den += w[j] * kij
                    if j != i:
                        s1 += w[j] * kij
                        s2 += (w[j] * kij) ** 2  # Kish, weighted
                lce[i, k] = num / den
                ess[i, k] = s1**2 / s2 if s1 > 1e-12 else 0.0
    per_class_mean, per_class_max = [], []
    for k in range(n_classes):
        keep = ~np.isnan(lce[:, k]) & (w > 0)
        per_class_mean.append(np.sum(w[keep] * np.abs(lce[keep, k])) / w[keep].sum())
        per_class_max.append(np.abs(lce[keep, k]).max())
    return np.mean(per_class_mean), np.mean(per_class_max), lce, ess


def random_problem(n=160, n_classes=3, d=4, seed=0):
    rng = np.random.default_rng(seed)
    phi = rng.normal(size=(n, d))
    logits = phi[:, :n_classes] * 2
    proba = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
    y = sample_labels(proba, rng)
    return y, proba, phi, rng.uniform(0.5, 2.0, n)


@pytest.fixture(params=["per_group", "one_pass"])
def kernel_pass(request, monkeypatch):
    """Force each of the two ways of evaluating the kernel sums."""
    one_pass = request.param == "one_pass"
    monkeypatch.setattr(
        local_kernel, "_one_kernel_pass_is_cheaper", lambda *a: one_pass
    )
    return request.param


@pytest.mark.parametrize("weighted", [False, True])
def test_matches_the_dense_reference(weighted, device, kernel_pass):
    y, proba, phi, w = random_problem()
    w = w if weighted else np.ones(len(y))
    kwargs = dict(bandwidth=1.5, n_bins=15, min_bin_size=5, space=None, device=device)
    sw = w if weighted else None
    ref_lce, ref_mlce, ref_anchor, ref_ess = dense_reference(
        y, proba, phi, w, 1.5, 15, 5
    )
    assert local_calibration_error(
        y, proba, phi, sample_weight=sw, **kwargs
    ) == pytest.approx(ref_lce, abs=1e-10)
    assert max_local_calibration_error(
        y, proba, phi, sample_weight=sw, **kwargs
    ) == pytest.approx(ref_mlce, abs=1e-10)
    both = local_calibration_errors(y, proba, phi, sample_weight=sw, **kwargs)
    assert both.lce == pytest.approx(ref_lce, abs=1e-10)
    assert both.mlce == pytest.approx(ref_mlce, abs=1e-10)
    np.testing.assert_allclose(both.anchor_errors, ref_anchor, rtol=1e-10, atol=1e-12)
    ess = effective_sample_size(y, proba, phi, sample_weight=sw, **kwargs)
    np.testing.assert_array_equal(np.isnan(ess), np.isnan(ref_ess))
    np.testing.assert_allclose(ess, ref_ess, rtol=1e-10, atol=1e-10)
    assert np.nanmin(ref_ess) >= 0 and np.isnan(ref_anchor).any()  # some bins dropped


def test_small_tiles_equal_large_tiles(monkeypatch, kernel_pass):
    y, proba, phi, _ = random_problem(n=300, seed=1)
    kwargs = dict(bandwidth=1.0, min_bin_size=5, space=None)
    whole = effective_sample_size(y, proba, phi, **kwargs)
    lce = local_calibration_error(y, proba, phi, **kwargs)
    monkeypatch.setattr(local_kernel, "_TILE", 7)  # many tiles, ragged edges
    np.testing.assert_allclose(
        effective_sample_size(y, proba, phi, **kwargs), whole, rtol=1e-13
    )
    assert local_calibration_error(y, proba, phi, **kwargs) == pytest.approx(
        lce, rel=1e-13
    )


def test_the_cheaper_kernel_pass_is_chosen():
    # one dominant bin per class: one pass evaluates each pair once, not C times
    concentrated = [(k, np.arange(1000)) for k in range(10)]
    assert local_kernel._one_kernel_pass_is_cheaper(concentrated, 50)
    # many classes, small disjoint bins: the per-group pass is cheaper
    spread = [(k, np.arange(100 * k, 100 * k + 100)) for k in range(100)]
    assert not local_kernel._one_kernel_pass_is_cheaper(spread, 50)


def test_tiny_case_by_hand():
    # three samples in one bin of each class (p = 0.5): two at the same point,
    # one far away. Residuals for class 0 are p - y = -0.5, 0.5, -0.5: the
    # pair averages to 0, the isolated sample keeps -0.5.
    features = np.array([[0.0], [0.0], [1e3]])
    proba = np.full((3, 2), 0.5)
    y = np.array([0, 1, 0])
    kwargs = dict(space=None, min_bin_size=2, bandwidth=1.0)
    assert local_calibration_error(y, proba, features, **kwargs) == pytest.approx(1 / 6)
    assert max_local_calibration_error(y, proba, features, **kwargs) == pytest.approx(
        0.5
    )
    ess = effective_sample_size(y, proba, features, **kwargs)
    np.testing.assert_allclose(ess, [[1, 1], [1, 1], [0, 0]])
    with pytest.raises(ValueError, match="min_bin_size"):
        local_calibration_error(y, proba, features, space=None, min_bin_size=3)


def test_order_invariance_and_weights_as_repetitions():
    y, proba, phi, _ = random_problem(n=200, seed=2)
    kwargs = dict(bandwidth=1.2, min_bin_size=8, space=None)
    perm = np.random.default_rng(0).permutation(200)
    assert local_calibration_error(
        y[perm], proba[perm], phi[perm], **kwargs
    ) == pytest.approx(local_calibration_error(y, proba, phi, **kwargs), rel=1e-12)
    counts = np.random.default_rng(1).integers(0, 3, 200)
    # integer weights act as repetitions in the kernel means; the support of
    # a bin is Kish's effective number (scale-free), which repetitions
    # change, so compare with every non-empty bin kept
    kwargs["min_bin_size"] = 0
    for metric in (local_calibration_error, max_local_calibration_error):
        weighted = metric(y, proba, phi, sample_weight=counts, **kwargs)
        repeated = metric(
            np.repeat(y, counts),
            np.repeat(proba, counts, axis=0),
            np.repeat(phi, counts, axis=0),
            **kwargs,
        )
        assert weighted == pytest.approx(repeated, rel=1e-10)
    # and scaling every weight changes nothing, whatever the bins kept
    kwargs["min_bin_size"] = 8
    for metric in (local_calibration_error, max_local_calibration_error):
        base = metric(y, proba, phi, sample_weight=counts, **kwargs)
        for c in (1e-300, 1e300):
            scaled = metric(y, proba, phi, sample_weight=counts * c, **kwargs)
            assert scaled == pytest.approx(base, rel=1e-12)


def make_calibrated(n, seed, distort=False):
    rng = np.random.default_rng(seed)
    phi = rng.normal(size=(n, 2))
    logits = np.column_stack([2 * phi[:, 0], 2 * phi[:, 1], np.zeros(n)])
    proba = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
    y = sample_labels(proba, rng)
    if distort:  # over-confident on the right half of the plane only
        sharp = proba**3 / (proba**3).sum(1, keepdims=True)
        proba = np.where(phi[:, :1] > 0, sharp, proba)
    return y, proba, phi


def test_calibrated_data_is_near_zero_and_improves_with_n():
    kwargs = dict(bandwidth=0.3, space=None)
    small = np.mean(
        [local_calibration_error(*make_calibrated(600, s), **kwargs) for s in range(3)]
    )
    large = np.mean(
        [local_calibration_error(*make_calibrated(6000, s), **kwargs) for s in range(3)]
    )
    distorted = local_calibration_error(*make_calibrated(6000, 0, True), **kwargs)
    assert large < small
    assert large < 0.04
    assert distorted > 2 * large


def test_spaces():
    y, proba, phi, _ = random_problem(n=200, d=60, seed=3)
    pca = local_calibration_error(y, proba, phi, min_bin_size=5)
    fitted = LocalSpace().fit(phi)
    assert local_calibration_error(
        y, proba, phi, min_bin_size=5, space=fitted
    ) == pytest.approx(pca, rel=1e-10)
    assert local_calibration_error(
        y, proba, fitted.transform(phi), min_bin_size=5, space=None
    ) == pytest.approx(pca, rel=1e-10)
    other = LocalSpace(n_components=5).fit(phi[::-1] * 3 + 1)
    assert local_calibration_error(
        y, proba, phi, min_bin_size=5, space=other
    ) != pytest.approx(pca, rel=1e-6)


def test_local_space_is_standardise_then_pca():
    rng = np.random.default_rng(4)
    X = rng.normal(size=(300, 8)) * np.arange(1, 9)
    Z = LocalSpace(n_components=8).fit(X).transform(X)
    standard = (X - X.mean(0)) / X.std(0)
    # a full-rank PCA is a rotation: pairwise distances are those of the
    # standardised features
    d_pca = np.linalg.norm(Z[:, None] - Z[None], axis=2)
    d_std = np.linalg.norm(standard[:, None] - standard[None], axis=2)
    np.testing.assert_allclose(d_pca, d_std, atol=1e-9)
    assert LocalSpace().fit(X).n_components_ == 8
    # components are ordered by variance
    assert np.all(np.diff(Z.var(0)) <= 1e-12)


def test_class_weight():
    y, proba, phi, _ = random_problem(n=300, seed=5)
    kwargs = dict(bandwidth=1.0, min_bin_size=5, space=None)
    lce = local_calibration_error(y, proba, phi, **kwargs)
    same = local_calibration_error(y, proba, phi, class_weight=[2, 2, 2], **kwargs)
    assert same == pytest.approx(lce, rel=1e-12)
    only0 = local_calibration_error(y, proba, phi, class_weight=[1, 0, 0], **kwargs)
    freq = np.bincount(y, minlength=3) / len(y)
    by_freq = local_calibration_error(y, proba, phi, class_weight="frequency", **kwargs)
    per_class = [
        local_calibration_error(y, proba, phi, class_weight=np.eye(3)[k], **kwargs)
        for k in range(3)
    ]
    assert only0 == per_class[0]
    assert lce == pytest.approx(np.mean(per_class), rel=1e-12)
    assert by_freq == pytest.approx(np.dot(freq, per_class), rel=1e-12)
    with pytest.raises(ValueError, match="class_weight must hold 3"):
        local_calibration_error(y, proba, phi, class_weight=[1, -1, 0], **kwargs)


def test_ess_profile_aggregates_per_class_quantile_bins():
    y, proba, phi, _ = random_problem(n=400, seed=6)
    kwargs = dict(bandwidth=0.8, min_bin_size=10, space=None)
    ess = effective_sample_size(y, proba, phi, **kwargs)
    profile = ess_profile(y, proba, phi, n_quantiles=4, **kwargs)
    assert profile.count.sum() == np.sum(ess > 0)
    # reference: quantile bins per class, pooled by counts, of the anchor
    # errors (checked against the dense reference above)
    lce = local_calibration_errors(y, proba, phi, **kwargs).anchor_errors
    tot_c, tot_l = np.zeros(4), np.zeros(4)
    for k in range(3):
        keep = ess[:, k] > 0
        e, a = ess[keep, k], np.abs(lce[keep, k])
        # with distinct values, the q-th quantile edge (linear interpolation)
        # sits at rank q (m - 1) / 4, so the sample of rank r is in bin
        # min(floor(4 r / (m - 1)), 3)
        rank = np.argsort(np.argsort(e, kind="stable"), kind="stable")
        q = np.minimum(np.floor(4 * rank / (len(e) - 1)).astype(int), 3)
        tot_c += np.bincount(q, minlength=4)
        tot_l += np.bincount(q, weights=a, minlength=4)
    np.testing.assert_array_equal(profile.count, tot_c)
    np.testing.assert_allclose(profile.lce, tot_l / tot_c, rtol=1e-12)
    assert np.all(np.diff(profile.ess) > 0)


def test_bad_input():
    y, proba, phi, _ = random_problem(n=50)
    with pytest.raises(ValueError, match="one row per sample"):
        local_calibration_error(y, proba, phi[:-1])
    bad = phi.copy()
    bad[0, 0] = np.nan
    with pytest.raises(ValueError, match="features"):
        local_calibration_error(y, proba, bad)
    with pytest.raises(ValueError, match="bandwidth"):
        local_calibration_error(y, proba, phi, bandwidth=0)


@parametrize_with_checks([LocalSpace(n_components=2)])
def test_local_space_sklearn_compatible(estimator, check):
    check(estimator)


def test_scorer_in_grid_search_with_a_fixed_space():
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import GridSearchCV, StratifiedKFold

    from skcal.metrics import LocalCalibrationScorer, get_scorer, get_scorer_names

    rng = np.random.default_rng(7)
    X = rng.normal(size=(900, 6))
    y = (X[:, 0] + 0.5 * X[:, 1] ** 2 + rng.normal(size=900) > 0.5).astype(int)
    assert "neg_local_calibration_error" in get_scorer_names()
    space = LocalSpace(n_components=4).fit(X)
    cv = StratifiedKFold(3, shuffle=True, random_state=0)
    grid = {"C": [0.01, 1.0]}
    for scorer, fold_space in [
        (get_scorer("neg_local_calibration_error"), "pca"),
        (LocalCalibrationScorer(local_calibration_error, space=space), space),
        (get_scorer("neg_max_local_calibration_error"), "pca"),
    ]:
        search = GridSearchCV(LogisticRegression(), grid, cv=cv, scoring=scorer)
        search.fit(X, y)
        metric = scorer.metric
        for c_index, C in enumerate(grid["C"]):
            expected = []
            for train, test in cv.split(X, y):
                model = LogisticRegression(C=C).fit(X[train], y[train])
                expected.append(
                    -metric(
                        y[test], model.predict_proba(X[test]), X[test], space=fold_space
                    )
                )
            assert search.cv_results_["mean_test_score"][c_index] == pytest.approx(
                np.mean(expected), rel=1e-10
            )


def test_far_from_origin_features_and_zero_weights():
    y, proba, phi, _ = random_problem(n=200, seed=8)
    kwargs = dict(bandwidth=1.0, min_bin_size=5, space=None)
    base = local_calibration_errors(y, proba, phi, **kwargs)
    shifted = local_calibration_errors(y, proba, phi + 1e6, **kwargs)
    np.testing.assert_allclose(shifted.anchor_errors, base.anchor_errors, atol=1e-9)
    # zero-weight anchors take no part in the ESS profile
    w = np.ones(200)
    w[:30] = 0.0
    ess = effective_sample_size(y, proba, phi, sample_weight=w, **kwargs)
    profile = ess_profile(y, proba, phi, sample_weight=w, n_quantiles=3, **kwargs)
    assert profile.count.sum() == np.sum(ess[30:] > 0)


CLASS_WEIGHT_METRICS = {
    "local_calibration_error": local_calibration_error,
    "max_local_calibration_error": max_local_calibration_error,
    "local_calibration_errors": local_calibration_errors,
}


@pytest.mark.parametrize(
    "class_weight, message",
    [
        ([np.nan, 1, 1], "class_weight must hold 3 finite, non-negative numbers"),
        ([np.inf, 1, 1], "class_weight must hold 3 finite, non-negative numbers"),
        ([1, -1, 1], "class_weight must hold 3 finite, non-negative numbers"),
        ([1, 1], "class_weight must hold 3 finite, non-negative numbers"),
        ([1, 1, 1, 1], "class_weight must hold 3 finite, non-negative numbers"),
        ([0, 0, 0], "class_weight sums to 0"),
    ],
    ids=["nan", "inf", "negative", "too short", "too long", "all zero"],
)
@pytest.mark.parametrize("metric", list(CLASS_WEIGHT_METRICS))
def test_bad_class_weight_is_rejected_before_the_kernel(
    metric, class_weight, message, monkeypatch
):
    y, proba, phi, w = random_problem(n=200, seed=6)

    def no_kernel(*args, **kwargs):
        raise AssertionError("the kernel ran before class_weight was checked")

    monkeypatch.setattr(local_metrics, "_features_in_space", no_kernel)
    with pytest.raises(ValueError, match=message):
        CLASS_WEIGHT_METRICS[metric](
            y, proba, phi, space=None, sample_weight=w, class_weight=class_weight
        )


@pytest.mark.parametrize("scale", [2.0**-1070, 1e300, 2.0**1021])
def test_class_weight_scale_changes_nothing(scale):
    # 6 * 2**1021 overflows a plain sum; 2**-1070 is subnormal
    y, proba, phi, w = random_problem(n=300, seed=5)
    kwargs = dict(bandwidth=1.0, min_bin_size=5, space=None, sample_weight=w)
    cw = np.array([1.0, 2.0, 3.0])
    for reduce in (local_calibration_error, max_local_calibration_error):
        per_class = [
            reduce(y, proba, phi, class_weight=np.eye(3)[k], **kwargs) for k in range(3)
        ]
        got = reduce(y, proba, phi, class_weight=cw * scale, **kwargs)
        assert got == pytest.approx(np.dot(cw, per_class) / cw.sum(), rel=1e-12)
    both = local_calibration_errors(y, proba, phi, class_weight=cw * scale, **kwargs)
    assert both.lce == pytest.approx(
        local_calibration_error(y, proba, phi, class_weight=cw, **kwargs), rel=1e-12
    )
    assert both.mlce == pytest.approx(
        max_local_calibration_error(y, proba, phi, class_weight=cw, **kwargs),
        rel=1e-12,
    )
