"""PriorShiftAdapter: a scikit-learn estimator, in the wrapper and a Pipeline."""

import pickle

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.datasets import load_digits, load_wine
from sklearn.frozen import FrozenEstimator
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import FunctionTransformer, StandardScaler
from sklearn.utils.estimator_checks import parametrize_with_checks

from skcal import CalibratedClassifier, TemperatureScaling
from skcal.exceptions import MissingClassWarning
from skcal.shift import PriorEstimate, PriorShiftAdapter


def _task(loader=load_wine, seed=0):
    """Logits of a LogisticRegression: calibration rows, a target set drawn
    with shifted priors, the model and the target's raw features."""
    X, y = loader(return_X_y=True)
    X = StandardScaler().fit_transform(X)
    X_fit, X_rest, y_fit, y_rest = train_test_split(
        X, y, test_size=0.6, random_state=seed, stratify=y
    )
    model = LogisticRegression(C=0.05, max_iter=2000).fit(X_fit, y_fit)
    X_cal, X_pool, y_cal, y_pool = train_test_split(
        X_rest, y_rest, test_size=0.5, random_state=seed, stratify=y_rest
    )
    C = len(model.classes_)
    rng = np.random.default_rng(seed)
    labels = rng.choice(C, size=20 * C, p=rng.dirichlet(np.ones(C)))
    rows = [rng.choice(np.flatnonzero(y_pool == k)) for k in labels]
    return model, X_cal, y_cal, X_pool[rows], y_pool[rows]


def _logits(model, X):
    return model.decision_function(X)


TS = TemperatureScaling(device="cpu")
COLUMNS_ARE_CLASSES = (
    "X must have one column per class (the inner score calibrator's contract): "
    "the check's X has an unrelated number of columns."
)
EXPECTED_FAILED = {
    name: COLUMNS_ARE_CLASSES
    for name in (
        "check_classifiers_train",
        "check_classifiers_classes",
        "check_fit2d_1feature",
        "check_estimators_overwrite_params",
        "check_estimators_fit_returns_self",
        "check_readonly_memmap_input",
    )
}
EXPECTED_FAILED["check_non_transformer_estimators_n_iter"] = (
    "max_iter caps EM in adapt, not in fit: the count is prior_estimate_.n_iter."
)
EXPECTED_FAILED["check_fit2d_predict1d"] = (
    "For 1-D scores the inner score calibrator gives its own advice "
    "(tests/test_base.py)."
)


@parametrize_with_checks(
    [PriorShiftAdapter(TS)], expected_failed_checks=lambda e: EXPECTED_FAILED
)
def test_sklearn_compatible_estimator(estimator, check):
    check(estimator)


def test_clone_pickle_and_params():
    adapter = PriorShiftAdapter(TS, method="bbse", n_resamples=5, random_state=0)
    assert clone(adapter).get_params()["method"] == "bbse"
    model, X_cal, y_cal, X_t, _ = _task()
    adapter.fit(_logits(model, X_cal), y_cal).adapt(_logits(model, X_t))
    again = pickle.loads(pickle.dumps(adapter))
    np.testing.assert_array_equal(
        again.predict_proba(_logits(model, X_t)),
        adapter.predict_proba(_logits(model, X_t)),
    )
    assert "calibrator_" not in clone(adapter).__dict__


def test_default_calibrator_is_bcts():
    from skcal import BiasCorrectedTemperatureScaling

    model, X_cal, y_cal, X_t, _ = _task()
    adapter = PriorShiftAdapter().fit(_logits(model, X_cal), y_cal)
    assert isinstance(adapter.calibrator_, BiasCorrectedTemperatureScaling)
    assert adapter.calibrator is None


def test_adapted_probabilities_match_abstention():
    """The re-weighting of abstention's PriorShiftAdapterFunc with the
    multipliers priors_ / source_priors_ (Saerens et al.'s eq. 2.4)."""
    label_shift = pytest.importorskip("abstention.label_shift")
    model, X_cal, y_cal, X_t, _ = _task(load_digits)
    adapter = PriorShiftAdapter(TS).fit(_logits(model, X_cal), y_cal)
    before = adapter.predict_proba(_logits(model, X_t))
    inner = adapter.calibrator_.predict_proba(_logits(model, X_t))
    np.testing.assert_array_equal(before, inner)  # no change before adapt
    adapter.adapt(_logits(model, X_t))
    func = label_shift.PriorShiftAdapterFunc(adapter.priors_ / adapter.source_priors_)
    np.testing.assert_allclose(
        adapter.predict_proba(_logits(model, X_t)), func(inner), atol=1e-12
    )
    assert isinstance(adapter.prior_estimate_, PriorEstimate)
    np.testing.assert_allclose(adapter.priors_.sum(), 1.0, rtol=1e-12)


def test_bbse_adapter_matches_abstention():
    label_shift = pytest.importorskip("abstention.label_shift")
    model, X_cal, y_cal, X_t, _ = _task(load_digits)
    adapter = PriorShiftAdapter(
        TS, method="bbse", shift_test=None, reliability_check=False
    )
    adapter.fit(_logits(model, X_cal), y_cal)
    adapter.adapt(_logits(model, X_t))
    P_cal = adapter.calibrator_.predict_proba(_logits(model, X_cal))
    P_t = adapter.calibrator_.predict_proba(_logits(model, X_t))
    func = label_shift.BBSEImbalanceAdapter()(
        valid_labels=np.eye(10)[y_cal],
        tofit_initial_posterior_probs=P_t,
        valid_posterior_probs=P_cal,
    )
    expected = func.multipliers * np.bincount(y_cal, minlength=10) / len(y_cal)
    expected /= expected.sum()
    # abstention clips classes to 0; skcal raises them to half their mean
    # target probability (issue 49) and scales the others to fill the rest
    zero = expected == 0
    floor = P_t.mean(axis=0)[zero] / 2
    np.testing.assert_allclose(adapter.priors_[zero], floor, atol=1e-9)
    np.testing.assert_allclose(
        adapter.priors_[~zero], expected[~zero] * (1 - floor.sum()), atol=1e-9
    )
    np.testing.assert_allclose(adapter.priors_.sum(), 1.0, atol=1e-12)


@pytest.mark.parametrize("strength", [0, "auto", 7.5])
def test_estimation_settings_reach_the_estimate(strength):
    """prior_strength and shift_test act as in estimate_class_priors on the
    calibrator's probabilities of the target rows."""
    from skcal.shift import estimate_class_priors

    model, X_cal, y_cal, X_t, _ = _task(load_digits)
    adapter = PriorShiftAdapter(
        TS, prior_strength=strength, shift_test=None, reliability_check=False
    )
    adapter.fit(_logits(model, X_cal), y_cal).adapt(_logits(model, X_t))
    expected = estimate_class_priors(
        adapter.calibrator_.predict_proba(_logits(model, X_t)),
        source_priors=adapter.source_priors_,
        prior_strength=strength,
        shift_test=None,
    )
    np.testing.assert_allclose(adapter.priors_, expected.priors, rtol=1e-12)


def test_no_shift_keeps_the_calibrated_probabilities():
    """Target rows drawn like the calibration rows: the shift test finds no
    shift, and predict_proba returns the calibrator's probabilities."""
    model, X_cal, y_cal, _, _ = _task(load_digits)
    X_fit, X_t, y_fit, _ = train_test_split(
        X_cal, y_cal, test_size=0.5, random_state=0, stratify=y_cal
    )
    adapter = PriorShiftAdapter(TS).fit(_logits(model, X_fit), y_fit)
    adapter.adapt(_logits(model, X_t))
    assert not adapter.prior_estimate_.shift_detected
    np.testing.assert_array_equal(adapter.priors_, adapter.source_priors_)
    np.testing.assert_array_equal(
        adapter.predict_proba(_logits(model, X_t)),
        adapter.calibrator_.predict_proba(_logits(model, X_t)),
    )


@pytest.mark.parametrize("method", ["em", "bbse"])
def test_source_priors_are_labels_or_predictions(method):
    """class_frequencies_: the weighted label frequencies; source_priors_:
    the weighted mean calibrated probability for EM ("auto", the authors'
    code), the label frequencies for BBSE or with source_priors="labels"."""
    model, X_cal, y_cal, _, _ = _task()
    L = _logits(model, X_cal)
    w = np.random.default_rng(0).uniform(0.5, 2.0, size=len(y_cal))
    expected = np.array([w[y_cal == k].sum() for k in range(3)]) / w.sum()
    adapter = PriorShiftAdapter(TS, method=method).fit(L, y_cal, sample_weight=w)
    np.testing.assert_allclose(adapter.class_frequencies_, expected, rtol=1e-12)
    P = adapter.calibrator_.predict_proba(L)
    mean = np.sum(w[:, None] * P, axis=0) / w.sum()
    auto = mean if method == "em" else expected
    np.testing.assert_allclose(adapter.source_priors_, auto, rtol=1e-12)
    np.testing.assert_array_equal(adapter.priors_, adapter.source_priors_)
    labels = PriorShiftAdapter(TS, method=method, source_priors="labels")
    labels.fit(L, y_cal, sample_weight=w)
    np.testing.assert_allclose(labels.source_priors_, expected, rtol=1e-12)
    predicted = PriorShiftAdapter(TS, method=method, source_priors="predicted")
    predicted.fit(L, y_cal, sample_weight=w)
    np.testing.assert_allclose(predicted.source_priors_, mean, rtol=1e-12)
    assert np.abs(mean - expected).max() > 1e-4  # TS leaves the marginals biased


def test_em_on_the_calibration_rows_finds_no_shift():
    """With the predicted source priors, EM's first step on the calibration
    rows returns them: no shift, even without the shift test (the reason of
    the authors' code)."""
    model, X_cal, y_cal, _, _ = _task(load_digits)
    L = _logits(model, X_cal)
    adapter = PriorShiftAdapter(TS, shift_test=None).fit(L, y_cal).adapt(L)
    np.testing.assert_allclose(adapter.priors_, adapter.source_priors_, atol=1e-12)


def test_fit_clears_the_adaptation():
    model, X_cal, y_cal, X_t, _ = _task()
    adapter = PriorShiftAdapter(TS).fit(_logits(model, X_cal), y_cal)
    adapter.adapt(_logits(model, X_t)).fit(_logits(model, X_cal), y_cal)
    assert adapter.prior_estimate_ is None
    np.testing.assert_array_equal(adapter.priors_, adapter.source_priors_)


def test_inside_calibrated_classifier():
    """As the wrapper's calibrator: the wrapper sets the inner calibrator's
    classes and input; adapting the fitted adapter re-weights the wrapper's
    probabilities."""
    model, X_cal, y_cal, X_t, _ = _task()
    names = np.array(["a", "b", "c"])
    # the same model, on string labels: a classifier that makes mistakes
    model.classes_ = names
    model = FrozenEstimator(model)
    wrapper = CalibratedClassifier(model, calibrator=PriorShiftAdapter(TS))
    wrapper.fit(X_cal, names[y_cal])
    adapter = wrapper.calibrator_
    kind = "proba" if wrapper.response_ == "predict_proba" else "logits"
    assert adapter.calibrator_.input == kind
    np.testing.assert_array_equal(adapter.classes_, names)
    np.testing.assert_array_equal(adapter.calibrator_.classes, names)
    before = wrapper.predict_proba(X_t)
    adapter.adapt(getattr(model, wrapper.response_)(X_t))
    after = wrapper.predict_proba(X_t)
    expected = before * adapter.priors_ / adapter.source_priors_
    np.testing.assert_allclose(
        after, expected / expected.sum(1, keepdims=True), atol=1e-12
    )
    assert set(wrapper.predict(X_t)) <= set(names)


def test_inside_a_pipeline():
    model, X_cal, y_cal, X_t, _ = _task()
    pipe = make_pipeline(
        FunctionTransformer(model.decision_function), PriorShiftAdapter(TS)
    )
    pipe.fit(X_cal, y_cal)
    pipe[-1].adapt(pipe[:-1].transform(X_t))
    direct = PriorShiftAdapter(TS).fit(_logits(model, X_cal), y_cal)
    direct.adapt(_logits(model, X_t))
    np.testing.assert_allclose(
        pipe.predict_proba(X_t), direct.predict_proba(_logits(model, X_t))
    )


def test_absent_class_is_refused_at_adapt():
    model, X_cal, y_cal, X_t, _ = _task()
    keep = y_cal != 1
    adapter = PriorShiftAdapter(TS)
    with pytest.warns(MissingClassWarning):
        adapter.fit(_logits(model, X_cal)[keep], y_cal[keep])
    assert adapter.class_frequencies_[1] == 0
    with pytest.raises(
        ValueError, match=r"Class\(es\) \[1\] have no calibration sample"
    ):
        adapter.adapt(_logits(model, X_t))


def test_target_with_a_different_class_count_is_refused():
    model, X_cal, y_cal, X_t, _ = _task()
    adapter = PriorShiftAdapter(TS).fit(_logits(model, X_cal), y_cal)
    with pytest.raises(ValueError, match="3 features"):
        adapter.adapt(_logits(model, X_t)[:, :2])


def test_method_changed_after_fit_asks_for_a_refit():
    model, X_cal, y_cal, X_t, _ = _task()
    adapter = PriorShiftAdapter(TS).fit(_logits(model, X_cal), y_cal)
    with pytest.raises(ValueError, match="fit again"):
        adapter.set_params(method="rlls").adapt(_logits(model, X_t))


def test_the_interval_comes_with_n_resamples():
    model, X_cal, y_cal, X_t, _ = _task()
    adapter = PriorShiftAdapter(TS, n_resamples=20, random_state=0)
    adapter.fit(_logits(model, X_cal), y_cal).adapt(_logits(model, X_t))
    est = adapter.prior_estimate_
    assert est.low.shape == est.high.shape == (3,)
    assert np.all(est.low <= est.high)


def test_inputs_are_not_modified():
    model, X_cal, y_cal, X_t, _ = _task()
    Z, Zt = _logits(model, X_cal), _logits(model, X_t)
    copies = Z.copy(), Zt.copy()
    adapter = PriorShiftAdapter(TS, method="rlls").fit(Z, y_cal).adapt(Zt)
    adapter.predict_proba(Zt)
    np.testing.assert_array_equal(copies[0], Z)
    np.testing.assert_array_equal(copies[1], Zt)
