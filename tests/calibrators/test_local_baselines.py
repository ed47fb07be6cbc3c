"""Local baselines fitted on embeddings: KCal, Local Nets and ProCal."""

import pickle
import warnings

import joblib
import numpy as np
import pytest
import torch
from scipy.spatial.distance import jensenshannon
from scipy.special import logsumexp
from sklearn.base import clone
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import log_loss
from sklearn.model_selection import KFold
from sklearn.neighbors import NearestNeighbors

from skcal import KCalCalibrator, LocalNetCalibrator, ProCalCalibrator
from skcal._torch.kernels import cv_log_loss, golden_section_min
from skcal._torch.kernels._kcal import _stratified_background
from skcal._torch.kernels._local_net import batch_terms, js_distance, kernel_estimate
from skcal.exceptions import MissingClassWarning
from skcal.metrics import LocalSpace, local_calibration_error
from skcal.utils._testing import (
    make_estimator,
    make_region_miscalibrated_embeddings,
    softmax_rows,
)
from skcal.utils.discovery import all_estimators

LOCAL = [cls for _, cls in all_estimators("local")]
# VQLocalCalibrator uses the head only with head='frozen' (tested on its own)
USES_HEAD = [cls for cls in LOCAL if cls._uses_head is True]


def _make(cls, X=None, coef=None, intercept=None, **params):
    """A quick instance; with the head when the method uses one."""
    if cls._uses_head is True and coef is not None:
        params = {"coef": coef, "intercept": intercept, **params}
    return make_estimator(cls, device=params.pop("device", "cpu"), **params)


@pytest.fixture(scope="module")
def data():
    X, y, coef, intercept, _ = make_region_miscalibrated_embeddings(
        800, 3, random_state=0
    )
    return X, y, coef, intercept


def test_discovery_lists_the_local_baselines():
    assert {cls.__name__ for cls in LOCAL} == {
        "KCalCalibrator",
        "LocalNetCalibrator",
        "ProCalCalibrator",
        "VQLocalCalibrator",
    }


# ------------------------------------------------------------- the claim
#: Settings for the region data: the local metric's bandwidth and the Local
#: Net's kernel are absolute scales, set for 16 standardised features
#: (the defaults, 10, are the paper's for 50 PCA components of 2048-d
#: features).
IMPROVES_PARAMS = {
    "KCalCalibrator": {"max_epochs": 20},
    "LocalNetCalibrator": {"bandwidth": 0.5},
    "ProCalCalibrator": {},
    "VQLocalCalibrator": {"n_slots": 4, "n_codewords": 16},
}


@pytest.mark.parametrize("cls", LOCAL)
def test_improves_local_calibration_over_the_head(cls):
    X, y, coef, intercept, _ = make_region_miscalibrated_embeddings(
        8000, 3, n_features=8, random_state=1
    )
    cal, test = slice(0, 4000), slice(4000, None)
    space = LocalSpace().fit(X[cal])
    est = (
        cls(random_state=0, device="cpu", **IMPROVES_PARAMS[cls.__name__])
        if "random_state" in cls().get_params()
        else cls(device="cpu")
    )
    if cls._uses_head is True:
        est.set_params(coef=coef, intercept=intercept)
    est.fit(X[cal], y[cal])

    def lce(proba):
        return local_calibration_error(
            y[test], proba, X[test], space=space, bandwidth=3.0
        )

    head = lce(softmax_rows(X[test] @ coef.T + intercept))
    calibrated = lce(est.predict_proba(X[test]))
    assert calibrated < 0.85 * head, (calibrated, head)


# ------------------------------------------------------- shared contract
@pytest.mark.parametrize("cls", LOCAL)
def test_proba_contract_and_score(cls, data, device):
    X, y, coef, intercept = data
    est = _make(cls, coef=coef, intercept=intercept, device=device).fit(X, y)
    proba = est.predict_proba(X)
    assert proba.shape == (len(X), 3)
    assert np.isfinite(proba).all() and (proba >= 0).all()
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, rtol=1e-12)
    with np.errstate(divide="ignore"):
        np.testing.assert_allclose(est.predict_log_proba(X), np.log(proba))
    expected = -log_loss(y, proba, labels=est.classes_)
    assert est.score(X, y) == pytest.approx(expected, rel=1e-10)
    w = np.arange(len(y)) % 3
    assert est.score(X, y, sample_weight=w) == pytest.approx(
        -log_loss(y, proba, labels=est.classes_, sample_weight=w), rel=1e-10
    )
    if cls is not ProCalCalibrator:
        np.testing.assert_array_equal(est.predict(X), proba.argmax(axis=1))


@pytest.mark.parametrize("cls", LOCAL)
def test_pickle_clone_determinism_and_numpy_state(cls, data, device, tmp_path):
    X, y, coef, intercept = data
    est = _make(cls, coef=coef, intercept=intercept, device=device).fit(X, y)
    expected = est.predict_proba(X)
    np.testing.assert_array_equal(
        pickle.loads(pickle.dumps(est)).predict_proba(X), expected
    )
    joblib.dump(est, tmp_path / "est.joblib")
    np.testing.assert_array_equal(
        joblib.load(tmp_path / "est.joblib").predict_proba(X), expected
    )
    fresh = clone(est)
    assert not hasattr(fresh, "classes_")
    np.testing.assert_allclose(fresh.fit(X, y).predict_proba(X), expected, rtol=1e-12)
    for key, value in vars(est).items():
        assert "torch" not in type(value).__module__, key
    on_cpu = pickle.loads(pickle.dumps(est)).set_params(device="cpu")
    np.testing.assert_allclose(on_cpu.predict_proba(X), expected, atol=1e-10)


@pytest.mark.parametrize("cls", LOCAL)
def test_input_not_modified_and_readonly_memmap(cls, data, tmp_path):
    X, y, coef, intercept = data
    X_copy, y_copy, coef_copy = X.copy(), y.copy(), coef.copy()
    est = _make(cls, coef=coef, intercept=intercept).fit(X, y)
    expected = est.predict_proba(X)
    np.testing.assert_array_equal(X, X_copy)
    np.testing.assert_array_equal(y, y_copy)
    np.testing.assert_array_equal(coef, coef_copy)
    joblib.dump((X, y), tmp_path / "data.pkl")
    X_mm, y_mm = joblib.load(tmp_path / "data.pkl", mmap_mode="r")
    est_mm = _make(cls, coef=coef, intercept=intercept).fit(X_mm, y_mm)
    np.testing.assert_allclose(est_mm.predict_proba(X_mm), expected, rtol=1e-10)


@pytest.mark.parametrize("cls", LOCAL)
def test_string_labels_and_missing_class(cls, data):
    X, y, coef, intercept = data
    names = np.array(["ant", "bee", "cat"])
    est = _make(cls, coef=coef, intercept=intercept).fit(X, names[y])
    np.testing.assert_array_equal(est.classes_, names)
    assert set(est.predict(X)) <= set(names)
    keep = y != 1
    with pytest.warns(MissingClassWarning, match="bee"):
        est = _make(cls, coef=coef, intercept=intercept, classes=names).fit(
            X[keep], names[y[keep]]
        )
    proba = est.predict_proba(X)
    assert proba.shape == (len(X), 3)
    assert np.isfinite(proba).all()
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)


# ------------------------------------------ a class absent from calibration
ABSENT_PARAMS = {
    "KCalCalibrator": {"max_epochs": 3, "n_folds": 5},
    "LocalNetCalibrator": {"max_epochs": 10, "learning_rate": 1e-2, "bandwidth": 0.5},
    "ProCalCalibrator": {},
}


def _nll(P, y):
    return -np.mean(np.log(np.maximum(P[np.arange(len(y)), y], 1e-300)))


@pytest.fixture(scope="module")
def absent_data():
    X, y, coef, intercept, _ = make_region_miscalibrated_embeddings(
        2000, 5, n_features=8, random_state=3
    )
    return X[:1000], y[:1000], X[1000:], y[1000:], coef, intercept


@pytest.mark.parametrize(
    "cls, missing",
    [
        (ProCalCalibrator, 2),
        (ProCalCalibrator, 4),
        (KCalCalibrator, 2),
        (LocalNetCalibrator, 4),
    ],
)
def test_a_class_absent_from_calibration_leaves_the_others_intact(
    cls, missing, absent_data
):
    # a 5-row head (or classes=range(5)) and integer labels in range(5) that
    # lack one class: label j is column j, with a MissingClassWarning
    X, y, Xt, yt, coef, intercept = absent_data
    params = dict(ABSENT_PARAMS[cls.__name__], device="cpu")
    if cls is KCalCalibrator:
        params["classes"] = np.arange(5)  # KCal has no head to count classes
    else:
        params.update(coef=coef, intercept=intercept)
    if cls is not ProCalCalibrator:
        params["random_state"] = 0
    keep = y != missing
    with pytest.warns(MissingClassWarning, match=rf"\[{missing}\]"):
        est = cls(**params).fit(X[keep], y[keep])
    full = cls(**params).fit(X, y)
    np.testing.assert_array_equal(est.classes_, np.arange(5))
    P, P_full = est.predict_proba(Xt), full.predict_proba(Xt)
    P0 = softmax_rows(Xt @ coef.T + intercept)
    # (a) a probability vector on every row
    assert P.shape == (len(Xt), 5) and np.isfinite(P).all()
    np.testing.assert_allclose(P.sum(axis=1), 1.0, rtol=1e-12)
    others, absent = yt != missing, yt == missing
    # (b) the other classes' accuracy: within 0.02 of the head's or of the
    # same method fitted with every class (KCal is its own classifier)
    accuracy = np.mean(est.predict(Xt)[others] == yt[others])
    accuracy_full = np.mean(full.predict(Xt)[others] == yt[others])
    accuracy_head = np.mean(P0[others].argmax(1) == yt[others])
    assert accuracy >= min(accuracy_head, accuracy_full) - 0.02
    # (c) the others' log loss: not above the head's or the full fit's by
    # more than 0.1 nats (the methods train on data that differ)
    bound = max(_nll(P0[others], yt[others]), _nll(P_full[others], yt[others]))
    assert _nll(P[others], yt[others]) <= bound + 0.1
    if cls is KCalCalibrator:
        # documented: KCal predicts from its memory alone, the absent class
        # gets probability 0 (there is no head to fall back to)
        assert np.all(P[:, missing] == 0)
    else:
        # the absent class is calibrated like the others (ProCal: one
        # top-label map; Local Nets: the mean logit map): at most log 2 nats
        # above the head on its samples (Local Nets learned it away: +4)
        assert _nll(P[absent], yt[absent]) <= _nll(P0[absent], yt[absent]) + np.log(2)
    if cls is LocalNetCalibrator:
        # trained over the present classes; the absent class's logit map is
        # the mean of theirs (a_cls, b_cls are scalars for 5 classes)
        assert not est.present_classes_[missing] and est.present_classes_.sum() == 4
        present = est.present_classes_
        for name in ("Wc", "bc"):
            value = est.network_[name]
            np.testing.assert_allclose(
                value[..., missing], value[..., present].mean(axis=-1), rtol=1e-12
            )


def test_kcal_single_sample_classes_stay_in_the_memory(absent_data):
    X, y, *_ = absent_data
    rows = np.concatenate([np.flatnonzero(y != 3), np.flatnonzero(y == 3)[:1]])
    est = KCalCalibrator(max_epochs=2, random_state=0, device="cpu")
    est.fit(X[rows], y[rows])
    assert 3 in est.memory_labels_
    assert np.all(est.predict_proba(X)[:, 3] >= 0)
    assert np.any(est.predict_proba(X)[:, 3] > 0)


@pytest.mark.parametrize("cls", LOCAL)
def test_bad_input_errors(cls, data):
    X, y, coef, intercept = data
    X_bad = X.copy()
    X_bad[3, 2] = np.nan
    with pytest.raises(ValueError, match=r"NaN values in 1 row\(s\) \(first: row 3"):
        _make(cls, coef=coef, intercept=intercept).fit(X_bad, y)
    est = _make(cls, coef=coef, intercept=intercept).fit(X, y)
    with pytest.raises(ValueError, match="inf values"):
        est.predict_proba(np.where(X_bad == X_bad, X, np.inf))
    with pytest.raises(ValueError, match="expecting 16 features"):
        est.predict_proba(X[:, :5])
    with pytest.raises(ValueError, match="only one class"):
        _make(cls, coef=coef, intercept=intercept).fit(X, np.zeros_like(y))
    with pytest.raises(ValueError, match="inconsistent numbers of samples"):
        _make(cls, coef=coef, intercept=intercept).fit(X, y[:-1])


@pytest.mark.parametrize("cls", USES_HEAD)
def test_head_parameter_errors(cls, data):
    X, y, coef, intercept = data
    with pytest.raises(ValueError, match=r"coef must be .* got shape \(3, 15\)"):
        cls(coef=coef[:, :15], device="cpu").fit(X, y)
    with pytest.raises(ValueError, match=r"intercept must have shape"):
        cls(coef=coef, intercept=intercept[:2], device="cpu").fit(X, y)
    with pytest.raises(ValueError, match="intercept was given without coef"):
        cls(intercept=intercept, device="cpu").fit(X, y)
    with pytest.raises(ValueError, match="not in classes"):
        cls(coef=coef, classes=[0, 1, 5], device="cpu").fit(X, y)
    est = make_estimator(cls, coef=coef, intercept=intercept, device="cpu").fit(X, y)
    np.testing.assert_array_equal(est.head_logits(X), X @ coef.T + intercept)
    assert est.coef_ is not coef  # a copy, never the user's array


@pytest.mark.parametrize("cls", USES_HEAD)
@pytest.mark.parametrize("n_classes", [2, 3])
def test_without_coef_a_logistic_head_is_fitted(cls, n_classes):
    X, y, _, _, _ = make_region_miscalibrated_embeddings(600, n_classes, random_state=3)
    est = make_estimator(cls, device="cpu").fit(X, y)
    reference = LogisticRegression(max_iter=1000).fit(X, y)
    np.testing.assert_allclose(
        softmax_rows(est.head_logits(X)), reference.predict_proba(X), atol=1e-10
    )


# ------------------------------------------------------------------ ProCal
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
    # the spec's example: [0.5, 0.3, 0.2] with c_new = 0.3 -> [0.3, 0.42, 0.28]
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


# -------------------------------------------------------------------- KCal
def _skip_elu(est, X):
    W1, b1, W2 = est.projection_
    v = ((X - est.mean_) / est.scale_) @ W1 + b1
    return v + np.where(v > 0, v, np.expm1(np.minimum(v, 0))) @ W2


def test_kcal_predictions_are_the_kernel_classifier(data):
    X, y, _, _ = data
    est = KCalCalibrator(max_epochs=3, random_state=0, device="cpu").fit(X, y)
    X_new, _, _, _, _ = make_region_miscalibrated_embeddings(50, 3, random_state=5)
    queries = np.vstack([X_new, X[:5]])
    G = _skip_elu(est, queries)
    d2 = ((G[:, None, :] - est.memory_[None, :, :]) ** 2).mean(axis=2)
    K = np.exp(-d2 / est.bandwidth_)
    K[K >= 1 - 1e-10] = 0.0  # a memory sample never predicts itself
    onehot = np.eye(3)[est.memory_labels_] * est.memory_weights_[:, None]
    expected = K @ onehot / (K @ onehot).sum(axis=1, keepdims=True)
    np.testing.assert_allclose(est.predict_proba(queries), expected, rtol=1e-9)


def test_kcal_cross_validated_bandwidth(data):
    X, y, _, _ = data
    est = KCalCalibrator(max_epochs=3, n_folds=5, random_state=0, device="cpu")
    est.fit(X, y)
    G, labels = est.memory_, est.memory_labels_
    # the folds come from the third seed drawn from random_state
    fold_seed = np.random.RandomState(0).randint(np.iinfo(np.int32).max, size=3)[2]
    folds = np.empty(len(G), dtype=int)
    kfold = KFold(5, shuffle=True, random_state=int(fold_seed))
    for k, (_, test) in enumerate(kfold.split(G)):
        folds[test] = k
    d2 = ((G[:, None, :] - G[None, :, :]) ** 2).mean(axis=2)
    onehot = np.eye(3)[labels]

    def numpy_cv(h):
        K = np.exp(-d2 / h) * (folds[:, None] != folds[None, :])
        p = K @ onehot / (K @ onehot).sum(axis=1, keepdims=True)
        return -np.mean(np.log(np.maximum(p[np.arange(len(G)), labels], 1e-12)))

    def torch_cv(h):
        t = torch.as_tensor
        return cv_log_loss(t(G), t(onehot), t(labels), t(np.ones(len(G))), t(folds), h)

    for h in [0.3 * est.bandwidth_, est.bandwidth_, 3 * est.bandwidth_]:
        assert torch_cv(h) == pytest.approx(numpy_cv(h), rel=1e-10)
    assert est.cv_log_loss_ == pytest.approx(numpy_cv(est.bandwidth_), rel=1e-10)
    # golden section over [h0 / 10, 10 h0]: the chosen h is the minimum
    grid = est.bandwidth_init_ * np.geomspace(0.1, 10, 41)
    assert est.cv_log_loss_ <= min(numpy_cv(h) for h in grid) + 1e-9
    for factor in (0.98, 1.02):
        assert est.cv_log_loss_ <= numpy_cv(factor * est.bandwidth_) + 1e-12


def test_golden_section_min():
    calls = []

    def f(x):
        calls.append(x)
        return (x - 0.7) ** 2

    x = golden_section_min(f, -3.0, 5.0, xtol=1e-6)
    assert x == pytest.approx(0.7, abs=1e-6)
    assert all(-3.0 <= c <= 5.0 for c in calls)
    assert golden_section_min(lambda x: x, 1.0, 2.0, xtol=1e-6) == pytest.approx(1.0)


def test_kcal_background_is_stratified_and_disjoint():
    labels = torch.as_tensor(np.repeat([0, 1, 2], [50, 5, 30]))
    exclude = torch.zeros(85, dtype=torch.bool)
    exclude[:10] = True
    gen = torch.Generator().manual_seed(0)
    idx = _stratified_background(labels, exclude, 20, 3, gen).numpy()
    assert len(np.unique(idx)) == len(idx)
    assert not np.isin(idx, np.arange(10)).any()
    np.testing.assert_array_equal(np.bincount(labels.numpy()[idx]), [20, 5, 20])


# --------------------------------------------------------------- Local Net
def test_local_net_starts_at_the_head(data):
    X, y, coef, intercept = data
    est = LocalNetCalibrator(
        coef=coef, intercept=intercept, max_epochs=0, random_state=0, device="cpu"
    ).fit(X, y)
    assert est.best_epoch_ == 0
    head = softmax_rows(X @ coef.T + intercept)
    np.testing.assert_allclose(est.predict_proba(X), head, atol=0.02)
    np.testing.assert_allclose(est.embed(X), est.space_.transform(X), atol=0.05)


def test_local_net_affine_terms_are_vectors_beyond_ten_classes():
    X, y, coef, intercept, _ = make_region_miscalibrated_embeddings(
        600, 12, n_features=20, random_state=0
    )
    est = LocalNetCalibrator(
        coef=coef, intercept=intercept, max_epochs=1, random_state=0, device="cpu"
    ).fit(X, y)
    assert est.network_["a_cls"].shape == (12,)
    assert est.network_["a_sim"].shape == (est.space_.n_components_,)
    small = LocalNetCalibrator(
        coef=coef[:3], intercept=intercept[:3], max_epochs=1, device="cpu"
    ).fit(X[y < 3], y[y < 3])
    assert small.network_["a_cls"].shape == (1,)


def test_js_distance_matches_scipy():
    rng = np.random.default_rng(0)
    p = rng.dirichlet(np.ones(4), size=20)
    q = rng.dirichlet(np.ones(4), size=20)
    ours = js_distance(torch.as_tensor(p), torch.as_tensor(q)).numpy()
    pc, qc = np.clip(p, 1e-4, 1 - 1e-4), np.clip(q, 1e-4, 1 - 1e-4)
    ref = np.array(
        [
            [
                max(
                    jensenshannon([pc[i, k], 1 - pc[i, k]], [qc[i, k], 1 - qc[i, k]])
                    ** 2,
                    1e-4,
                )
                ** 0.5
                for k in range(4)
            ]
            for i in range(20)
        ]
    ).mean(axis=1)
    np.testing.assert_allclose(ours, ref, rtol=1e-9)


def test_kernel_estimate_is_leave_one_out():
    rng = np.random.default_rng(1)
    e = rng.normal(size=(30, 5))
    y = rng.integers(0, 3, size=30)
    w = rng.uniform(0.5, 2.0, size=30)
    w[4] = 0.0  # a zero-weight row is nobody's neighbour
    onehot = np.eye(3)[y]
    ours, has_nb = kernel_estimate(
        torch.as_tensor(e), torch.as_tensor(onehot), torch.as_tensor(w), 2.0
    )
    K = np.exp(-((e[:, None] - e[None]) ** 2).sum(-1) / 8.0) * w[None, :]
    np.fill_diagonal(K, 0.0)
    expected = K @ onehot / K.sum(1, keepdims=True)
    np.testing.assert_allclose(ours.numpy(), expected, rtol=1e-10)
    assert has_nb.all()
    # a one-row batch, or rows whose only other rows weigh 0, have no
    # neighbour: no estimate (in particular not their own label)
    p1, nb1 = kernel_estimate(
        torch.as_tensor(e[:1]), torch.as_tensor(onehot[:1]), torch.ones(1), 2.0
    )
    assert not nb1.any() and (p1 == 0).all()
    p2, nb2 = kernel_estimate(
        torch.as_tensor(e[:3]),
        torch.as_tensor(onehot[:3]),
        torch.as_tensor([1.0, 0.0, 0.0]),
        2.0,
    )
    np.testing.assert_array_equal(nb2.numpy(), [False, True, True])
    np.testing.assert_allclose(p2[1:].numpy(), onehot[[0, 0]])


@pytest.mark.parametrize("absent", [None, 1])
def test_local_net_batch_loss_matches_numpy(absent):
    # with an absent class, softmax and JS run over the present classes
    rng = np.random.default_rng(2)
    n, d, m, hidden, C = 40, 6, 4, 5, 4
    params = {
        "W1": rng.normal(size=(d, hidden)),
        "b1": rng.normal(size=hidden),
        "Ws": rng.normal(size=(hidden, m)),
        "bs": rng.normal(size=m),
        "a_sim": rng.normal(size=1),
        "b_sim": rng.normal(size=1),
        "Wc": rng.normal(size=(hidden, C)),
        "bc": rng.normal(size=C),
        "a_cls": rng.normal(size=C),
        "b_cls": rng.normal(size=C),
    }
    h, z, pi = rng.normal(size=(n, d)), rng.normal(size=(n, C)), rng.normal(size=(n, m))
    present = np.arange(C) != absent
    y = rng.choice(np.flatnonzero(present), size=n)
    w = rng.uniform(0.2, 1.5, size=n)
    t = torch.as_tensor
    js, ce, total = batch_terms(
        {k: t(v) for k, v in params.items()},
        t(h),
        t(z),
        t(pi),
        t(y),
        t(np.eye(C)[y]),
        t(w),
        1.5,
        present=None if absent is None else t(present),
    )
    u = np.maximum(h @ params["W1"] + params["b1"], 0)
    e = u @ params["Ws"] + params["bs"] + params["a_sim"] * pi + params["b_sim"]
    logits = u @ params["Wc"] + params["bc"] + params["a_cls"] * z + params["b_cls"]
    p_net = softmax_rows(logits[:, present])
    K = np.exp(-((e[:, None] - e[None]) ** 2).sum(-1) / (2 * 1.5**2)) * w[None, :]
    np.fill_diagonal(K, 0.0)
    p_ker = K @ np.eye(C)[y] / K.sum(1, keepdims=True)
    a = np.clip(p_net, 1e-4, 1 - 1e-4)
    b = np.clip(p_ker[:, present], 1e-4, 1 - 1e-4)
    js_ref = np.array(
        [
            np.mean(
                [
                    max(
                        jensenshannon([a[i, k], 1 - a[i, k]], [b[i, k], 1 - b[i, k]])
                        ** 2,
                        1e-4,
                    )
                    ** 0.5
                    for k in range(a.shape[1])
                ]
            )
            for i in range(n)
        ]
    )
    ce_ref = -np.log(np.maximum(p_ker[np.arange(n), y], 1e-6))
    assert float(js) == pytest.approx(w @ js_ref, rel=1e-9)
    assert float(ce) == pytest.approx(w @ ce_ref, rel=1e-9)
    assert float(total) == pytest.approx(w.sum())


# ---------------------------------------------------------------- weights
@pytest.mark.parametrize("cls", LOCAL)
def test_zero_weights_train_and_stay_finite(cls, data):
    X, y, coef, intercept = data
    w = np.where(np.arange(len(y)) % 2 == 0, 1.0, 0.0)
    est = _make(cls, coef=coef, intercept=intercept).fit(X, y, sample_weight=w)
    proba = est.predict_proba(X)
    assert np.isfinite(proba).all()
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    if hasattr(est, "best_epoch_"):
        assert est.best_epoch_ > 0  # the loss stayed finite: training happened


@pytest.mark.parametrize("cls", LOCAL)
def test_scaling_all_weights_changes_nothing(cls, data):
    X, y, coef, intercept = data
    w = np.random.default_rng(0).uniform(0.5, 2.0, size=len(y))
    p1 = _make(cls, coef=coef, intercept=intercept).fit(X, y, w).predict_proba(X)
    p2 = _make(cls, coef=coef, intercept=intercept).fit(X, y, 100 * w).predict_proba(X)
    # Adam carries the rounding of the rescaled sums (~1e-16) over its steps
    # to ~1e-5 in the probabilities; ProCal has no training loop
    np.testing.assert_allclose(p2, p1, atol=1e-12 if cls is ProCalCalibrator else 1e-4)


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


def test_kcal_warns_when_its_memory_has_few_samples_per_class():
    """At 1,000 classes and 5,000 rows KCal's accuracy fell to 0.02, silently."""
    rng = np.random.default_rng(0)
    y = np.repeat(np.arange(40), 6)  # 6 per class, half of them in the memory
    X = rng.normal(size=(len(y), 5)) + 3 * np.eye(40, 5)[y]
    with pytest.warns(UserWarning, match="per class on average"):
        KCalCalibrator(max_epochs=1, random_state=0, device="cpu").fit(X, y)
    many = np.repeat(np.arange(3), 60)
    X = rng.normal(size=(len(many), 5)) + 3 * np.eye(3, 5)[many]
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        KCalCalibrator(max_epochs=1, random_state=0, device="cpu").fit(X, many)
