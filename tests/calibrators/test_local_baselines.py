"""The contract every local calibrator meets (all of ``all_estimators("local")``).

Parametrised over KCal, Local Nets, ProCal and the VQ local calibrator; the
tests of one method are in ``test_kcal.py``, ``test_local_net.py``,
``test_procal.py`` and ``test_vq_local.py``.
"""

import pickle

import joblib
import numpy as np
import pytest
from _local_data import absent_region_data, region_data
from sklearn.base import clone
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import log_loss

from skcal import KCalCalibrator, LocalNetCalibrator, ProCalCalibrator
from skcal.discovery import all_estimators
from skcal.exceptions import MissingClassWarning
from skcal.metrics import LocalSpace, local_calibration_error
from skcal.utils._testing import (
    make_estimator,
    make_region_miscalibrated_embeddings,
    softmax_rows,
)

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
    return region_data()


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
    "KCalCalibrator": {"max_iter": 20},
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
    "KCalCalibrator": {"max_iter": 3, "cv": 5},
    "LocalNetCalibrator": {"max_iter": 10, "learning_rate": 1e-2, "bandwidth": 0.5},
    "ProCalCalibrator": {},
}


def _nll(P, y):
    return -np.mean(np.log(np.maximum(P[np.arange(len(y)), y], 1e-300)))


@pytest.fixture(scope="module")
def absent_data():
    return absent_region_data()


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
    # the same product up to float64 rounding (torch's BLAS, not numpy's)
    np.testing.assert_allclose(
        est.head_logits(X), X @ coef.T + intercept, rtol=1e-12, atol=1e-13
    )
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


# ---------------------------------------------------------------- weights
@pytest.mark.parametrize("cls", LOCAL)
def test_zero_weights_train_and_stay_finite(cls, data):
    X, y, coef, intercept = data
    w = np.where(np.arange(len(y)) % 2 == 0, 1.0, 0.0)
    est = _make(cls, coef=coef, intercept=intercept).fit(X, y, sample_weight=w)
    proba = est.predict_proba(X)
    assert np.isfinite(proba).all()
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    if hasattr(est, "best_iter_"):
        # the loss stayed finite: training happened (VQ: in its first stage)
        assert np.atleast_1d(est.best_iter_)[0] > 0


@pytest.mark.parametrize("cls", LOCAL)
def test_scaling_all_weights_changes_nothing(cls, data):
    X, y, coef, intercept = data
    w = np.random.default_rng(0).uniform(0.5, 2.0, size=len(y))
    p1 = _make(cls, coef=coef, intercept=intercept).fit(X, y, w).predict_proba(X)
    p2 = _make(cls, coef=coef, intercept=intercept).fit(X, y, 100 * w).predict_proba(X)
    # Adam carries the rounding of the rescaled sums (~1e-16) over its steps
    # to ~1e-5 in the probabilities; ProCal has no training loop
    np.testing.assert_allclose(p2, p1, atol=1e-12 if cls is ProCalCalibrator else 1e-4)
