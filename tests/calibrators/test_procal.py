"""ProCalCalibrator and its kernels (Xiong et al., NeurIPS 2023)."""

import numpy as np
import pytest
from _local_data import region_data
from scipy.special import logsumexp
from sklearn.base import clone
from sklearn.neighbors import NearestNeighbors

from skcal import ProCalCalibrator
from skcal.utils._testing import make_region_miscalibrated_embeddings, softmax_rows


@pytest.fixture(scope="module")
def data():
    return region_data()


def _statsmodels_kde(points):
    kernel_density = pytest.importorskip("statsmodels.nonparametric.kernel_density")
    return kernel_density.KDEMultivariate(points, var_type="cc", bw="normal_reference")


def test_procal_matches_an_independent_reference(data):
    X, y, coef, intercept = data
    X_test, _, _, _, _ = make_region_miscalibrated_embeddings(300, 3, random_state=9)
    est = ProCalCalibrator(coef=coef, intercept=intercept, device="cpu").fit(X, y)
    # proximity: sklearn's exact neighbours on L2-normalised embeddings
    E = X / np.linalg.norm(X, axis=1, keepdims=True)
    nn = NearestNeighbors(n_neighbors=11).fit(E)
    d_cal, _ = nn.kneighbors(E)  # the first neighbour is the point itself
    prox_cal = np.exp(-(d_cal[:, 1:] ** 2)).mean(axis=1)
    p = softmax_rows(X @ coef.T + intercept)
    correct = p.argmax(1) == y
    np.testing.assert_allclose(
        est.points_correct_, np.column_stack([p.max(1), prox_cal])[correct]
    )
    np.testing.assert_allclose(
        est.points_wrong_, np.column_stack([p.max(1), prox_cal])[~correct]
    )
    assert est.ratio_ == pytest.approx((~correct).sum() / correct.sum())
    # densities: statsmodels' KDEMultivariate with the normal reference rule
    f1_ref = _statsmodels_kde(est.points_correct_)
    f0_ref = _statsmodels_kde(est.points_wrong_)
    np.testing.assert_allclose(est.bandwidth_correct_, f1_ref.bw, rtol=1e-12)
    np.testing.assert_allclose(est.bandwidth_wrong_, f0_ref.bw, rtol=1e-12)
    E_test = X_test / np.linalg.norm(X_test, axis=1, keepdims=True)
    d_test, _ = nn.kneighbors(E_test, n_neighbors=10)
    prox_test = np.exp(-(d_test**2)).mean(axis=1)
    p_test = softmax_rows(X_test @ coef.T + intercept)
    points = np.column_stack([p_test.max(1), prox_test])
    f1, f0 = f1_ref.pdf(points), f0_ref.pdf(points)
    c_new = f1 / np.maximum(f1 + est.ratio_ * f0, 1e-10)
    top = p_test.argmax(1)
    rows = np.arange(len(top))
    # the predicted class gets c_new, the others share the rest in proportion
    expected = p_test * ((1 - c_new) / (1 - p_test[rows, top]))[:, None]
    expected[rows, top] = c_new
    np.testing.assert_allclose(est.predict_proba(X_test), expected, atol=1e-9)
    np.testing.assert_array_equal(est.predict(X_test), top)


def test_procal_rescaling_hand_case():
    # the example of ProCalCalibrator's docstring: [0.5, 0.3, 0.2] with
    # c_new = 0.3 -> [0.3, 0.42, 0.28]
    est = ProCalCalibrator(device="cpu")
    X = np.log(np.array([[0.5, 0.3, 0.2]]))
    est.coef_, est.intercept_ = np.eye(3), np.zeros(3)
    est.classes_, est.n_features_in_ = np.arange(3), 3
    est.embeddings_ = np.eye(3)
    est.n_neighbors_ = 1
    est._calibrated_confidence = lambda points: np.array([0.3])
    np.testing.assert_allclose(est._predict_proba(X), [[0.3, 0.42, 0.28]])
    np.testing.assert_array_equal(est.predict(X), [0])
    # the non-predicted mass underflows to 0: the rest is still shared in
    # the proportions of the logits, e^0 : e^-1
    X = np.array([[0.0, -1000.0, -1001.0]])
    share = np.array([1.0, np.exp(-1.0)]) / (1 + np.exp(-1.0))
    np.testing.assert_allclose(est._predict_proba(X), [[0.3, *(0.7 * share)]])


def _procal_with_confidence(n_classes, confidence):
    """A ProCal whose head is the identity and whose new confidence is fixed."""
    est = ProCalCalibrator(device="cpu")
    est.coef_, est.intercept_ = np.eye(n_classes), np.zeros(n_classes)
    est.classes_, est.n_features_in_ = np.arange(n_classes), n_classes
    est.embeddings_ = np.eye(n_classes)
    est.n_neighbors_ = 1
    est._calibrated_confidence = lambda points: np.full(len(points), confidence)
    return est


@pytest.mark.parametrize("gap", [700.0, 720.0, 740.0, 745.0, 750.0, 1e3, 1e6])
def test_procal_huge_logit_gaps_keep_the_other_classes_proportions(gap):
    # the others' mass is subnormal near a gap of 720 (the rescale overflowed
    # to NaN rows) and 0 beyond ~745 (it was shared equally)
    est = _procal_with_confidence(4, 0.8)
    Z = np.array(
        [
            [0.0, -gap, -gap - 1.0, -gap - 3.0],
            [-gap - 3.0, -gap - 0.5, 0.0, -gap],
            [5.0, 5.0 - gap, 5.0 - gap, 5.0 - 2 * gap],
        ]
    )
    expected = np.empty_like(Z)
    for i, z in enumerate(Z):  # in log space, with scipy
        k = z.argmax()
        others = np.delete(np.arange(4), k)
        expected[i, others] = np.log(0.2) + z[others] - logsumexp(z[others])
        expected[i, k] = np.log(0.8)
    proba = est._predict_proba(Z)
    assert np.isfinite(proba).all()
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, rtol=1e-12)
    np.testing.assert_allclose(proba, np.exp(expected), rtol=1e-9, atol=1e-300)
    np.testing.assert_array_equal(est.predict(Z), Z.argmax(axis=1))


def test_procal_huge_logits_of_a_fitted_model_stay_finite(data):
    # embeddings are L2-normalised for the proximity, so scaling X only
    # scales the head's logits: gaps of thousands, the same neighbours
    X, y, coef, intercept = data
    est = ProCalCalibrator(coef=coef, intercept=intercept, device="cpu").fit(X, y)
    X_big = X * 400.0
    Z = X_big @ coef.T + intercept
    top2 = np.sort(Z, axis=1)[:, -2:]
    gap = top2[:, 1] - top2[:, 0]
    # rows whose other classes are subnormal (this overflowed), and 0
    assert np.any((gap > 710) & (gap < 740)) and np.any(gap > 750)
    proba = est.predict_proba(X_big)
    assert np.isfinite(proba).all()
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, rtol=1e-12)
    # the others keep their logits' order below the calibrated class
    others = np.argsort(Z, axis=1)[:, :-1]
    ranked = np.take_along_axis(proba, others, axis=1)
    assert np.all(np.diff(ranked, axis=1) >= 0)
    np.testing.assert_array_equal(est.predict(X_big), Z.argmax(axis=1))


def test_procal_needs_wrong_predictions():
    X, y, coef, intercept, _ = make_region_miscalibrated_embeddings(
        300, 3, random_state=0
    )
    y_head = (X @ coef.T + intercept).argmax(axis=1)
    with pytest.raises(ValueError, match="at least 2 wrongly classified"):
        ProCalCalibrator(coef=coef, intercept=intercept, device="cpu").fit(X, y_head)


@pytest.mark.parametrize("scale", [1e-300, 1e200, 1e300])
def test_procal_weights_at_the_ends_of_the_float_range(data, scale):
    # the bandwidth's n_eff = (sum w)^2 / sum w^2 overflowed at 1e200: NaN rows
    X, y, coef, intercept = data
    w = np.random.default_rng(0).uniform(0.5, 2.0, size=len(y))
    a = ProCalCalibrator(coef=coef, intercept=intercept, device="cpu").fit(X, y, w)
    b = clone(a).fit(X, y, sample_weight=w * scale)
    np.testing.assert_allclose(b.bandwidth_correct_, a.bandwidth_correct_, rtol=1e-12)
    np.testing.assert_allclose(b.bandwidth_wrong_, a.bandwidth_wrong_, rtol=1e-12)
    np.testing.assert_allclose(b.predict_proba(X), a.predict_proba(X), atol=1e-12)


@pytest.mark.parametrize("value", [1e-320, 1e200, 1.7e308])
def test_procal_equal_weights_of_any_size_are_no_weights(data, value):
    X, y, coef, intercept = data
    a = ProCalCalibrator(coef=coef, intercept=intercept, device="cpu").fit(X, y)
    b = clone(a).fit(X, y, sample_weight=np.full(len(y), value))
    # Scott's rule with n the number of samples, as statsmodels for no weights
    points = a.points_correct_
    n = len(points)
    expected = 1.06 * points.std(axis=0) * n ** (-1.0 / 6)
    np.testing.assert_allclose(b.bandwidth_correct_, expected, rtol=1e-12)
    np.testing.assert_allclose(b.predict_proba(X), a.predict_proba(X), atol=1e-12)


def test_procal_zero_weight_is_removal(data):
    X, y, coef, intercept = data
    w = np.where(np.arange(len(y)) % 3 == 0, 0.0, 1.0)
    keep = w > 0
    weighted = ProCalCalibrator(coef=coef, intercept=intercept, device="cpu")
    removed = clone(weighted)
    weighted.fit(X, y, sample_weight=w)
    removed.fit(X[keep], y[keep])
    np.testing.assert_allclose(
        weighted.predict_proba(X), removed.predict_proba(X), rtol=1e-12
    )
