"""Prompt-level corrections (skcal.llm): contextual, batch and per-group
temperature scaling, against hand computations and independent fits."""

import pickle

import numpy as np
import pytest
from scipy.optimize import minimize_scalar
from scipy.special import log_softmax, logsumexp
from sklearn.base import clone
from sklearn.utils.estimator_checks import (
    check_param_validation,
    parametrize_with_checks,
)

from skcal import TemperatureScaling
from skcal.llm import BatchCalibrator, ContextualCalibrator, GroupedTemperatureScaling


def _draw(logits, T, rng):
    """Labels drawn from softmax(logits / T) (T per row)."""
    P = np.exp(log_softmax(logits / T, axis=1))
    return (P.cumsum(axis=1) > rng.random((len(P), 1))).argmax(axis=1)


# ------------------------------------------------------------------ contextual
def test_contextual_divides_by_the_mean_content_free_probabilities():
    cf = np.array([[0.6, 0.3, 0.1], [0.8, 0.1, 0.1]])  # two content-free inputs
    cal = ContextualCalibrator(input="proba", classes=["A", "B", "C"]).fit(cf)
    np.testing.assert_allclose(cal.content_free_proba_, [0.7, 0.2, 0.1])
    P = np.array([[0.5, 0.3, 0.2], [0.9, 0.05, 0.05]])
    # by hand: 0.5 / 0.7, 0.3 / 0.2, 0.2 / 0.1 = 0.7143, 1.5, 2, sum 4.2143
    expected = np.array([[0.5 / 0.7, 0.3 / 0.2, 0.2 / 0.1], [0.9 / 0.7, 0.25, 0.5]])
    expected /= expected.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(cal.predict_proba(P), expected, rtol=1e-12)
    np.testing.assert_allclose(
        cal.predict_proba(P)[0], [0.169491525, 0.355932203, 0.474576271], rtol=1e-8
    )
    assert cal.predict(P).tolist() == ["C", "A"]
    # logits (an API's logprobs) give the same answer as their probabilities
    logits = ContextualCalibrator().fit(np.log(cf) + 3.0)
    np.testing.assert_allclose(logits.predict_proba(np.log(P) - 1.0), expected)


def test_contextual_logs_are_finite_and_the_log_of_the_probabilities():
    cal = ContextualCalibrator().fit(np.array([[5.0, 0.0, -800.0]]))
    X = np.array([[700.0, -700.0, 0.0], [0.0, 0.0, 0.0]])
    logq = cal.predict_log_proba(X)
    assert np.all(np.isfinite(logq))
    np.testing.assert_allclose(np.exp(logq), cal.predict_proba(X))


def test_contextual_ties_keep_the_input_ranking():
    # p / p_cf ties exactly: 0.4 / 0.4 == 0.2 / 0.2; the input ranks column 0 first
    cal = ContextualCalibrator(input="proba").fit(np.array([[0.4, 0.2, 0.4]]))
    P = np.array([[0.4, 0.2, 0.4]])
    assert cal.predict(P).tolist() == [0]


# ----------------------------------------------------------------------- batch
def test_batch_divides_by_the_mean_prediction():
    P = np.array([[0.8, 0.2], [0.6, 0.4], [0.7, 0.3]])
    cal = BatchCalibrator(input="proba").fit(P)
    np.testing.assert_allclose(cal.prior_, [0.7, 0.3])
    # by hand, row 0: 0.8 / 0.7 = 1.142857, 0.2 / 0.3 = 0.666667
    np.testing.assert_allclose(
        cal.predict_proba(P[:1]),
        [[1.142857143 / 1.80952381, 0.666666667 / 1.80952381]],
        rtol=1e-8,
    )
    # prior="batch": the mean of the rows given to predict_proba
    Q = np.array([[0.5, 0.5], [0.9, 0.1]])
    batch = BatchCalibrator(input="proba", prior="batch").fit(P)
    r = Q / Q.mean(axis=0)
    np.testing.assert_allclose(batch.predict_proba(Q), r / r.sum(axis=1, keepdims=True))


def test_batch_of_one_row_is_refused():
    cal = BatchCalibrator(input="proba", prior="batch").fit(np.array([[0.8, 0.2]] * 2))
    with pytest.raises(ValueError, match="batch of 1 row would come out uniform"):
        cal.predict_proba(np.array([[0.8, 0.2]]))


def test_batch_removes_an_injected_prompt_bias():
    # Options scored by a calibrated model, then a prompt adds +1.5 to option
    # 0's logit: the accuracy drops; batch calibration on unlabeled rows
    # brings it back near the unbiased one.
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(4000, 4)) * 2
    y = _draw(logits, 1.0, rng)
    biased = logits + np.array([1.5, 0.0, 0.0, 0.0])
    acc = [np.mean(Z.argmax(axis=1) == y) for Z in (logits, biased)]
    cal = BatchCalibrator().fit(biased[:2000])
    corrected = np.mean(cal.predict(biased[2000:]) == y[2000:])
    assert acc[1] < acc[0] - 0.03
    assert corrected > acc[1] + 0.03


def test_fit_needs_a_row_and_matching_columns():
    with pytest.raises(ValueError, match="minimum of 1 is required"):
        BatchCalibrator().fit(np.empty((0, 3)))
    cal = BatchCalibrator().fit(np.zeros((2, 3)))
    with pytest.raises(ValueError, match="expecting 3 features"):
        cal.predict_proba(np.zeros((2, 4)))
    with pytest.raises(ValueError, match="one label per column"):
        BatchCalibrator(classes=["a", "b"]).fit(np.zeros((2, 3)))


# ------------------------------------------------------------------- per group
def _groups_problem(seed, n_groups=6, n_per=150, n_classes=4):
    rng = np.random.default_rng(seed)
    groups = np.repeat(np.arange(n_groups), n_per)
    logits = rng.normal(size=(len(groups), n_classes)) * 3
    T = np.exp(rng.normal(0.0, 0.4, n_groups))[groups][:, None]
    return logits, _draw(logits, T, rng), groups


def test_no_shrinkage_is_temperature_scaling_per_group():
    logits, y, groups = _groups_problem(0)
    cal = GroupedTemperatureScaling(shrinkage=0).fit(logits, y, groups=groups)
    alone = [
        TemperatureScaling().fit(logits[groups == g], y[groups == g]).temperature_
        for g in np.unique(groups)
    ]
    np.testing.assert_allclose(cal.group_temperatures_, alone, rtol=1e-6)
    pooled = TemperatureScaling().fit(logits, y).temperature_
    np.testing.assert_allclose(cal.temperature_, pooled, rtol=1e-6)


def test_infinite_shrinkage_is_pooled_temperature_scaling():
    logits, y, groups = _groups_problem(1)
    cal = GroupedTemperatureScaling(shrinkage=np.inf).fit(logits, y, groups=groups)
    pooled = TemperatureScaling().fit(logits, y)
    np.testing.assert_allclose(cal.group_temperatures_, pooled.temperature_, rtol=1e-6)
    np.testing.assert_allclose(
        cal.predict_proba(logits, groups=groups),
        pooled.predict_proba(logits),
        atol=1e-7,
    )


def test_shrinkage_minimises_the_stated_objective():
    logits, y, groups = _groups_problem(2)
    strength = 30.0
    cal = GroupedTemperatureScaling(shrinkage=strength).fit(logits, y, groups=groups)
    rows = np.arange(len(y))

    def nll(Z, yy, s):
        b = np.exp(-s)
        return np.sum(logsumexp(b * Z, axis=1) - b * Z[np.arange(len(yy)), yy])

    s0 = np.log(cal.temperature_)
    h = 1e-4  # the pooled NLL's curvature per row at s0, by central differences
    c = nll(logits, y, s0 + h) - 2 * nll(logits, y, s0) + nll(logits, y, s0 - h)
    c /= h * h * len(rows)
    for g, T in zip(cal.groups_, cal.group_temperatures_):
        Z, yy = logits[groups == g], y[groups == g]
        ref = minimize_scalar(
            lambda s, Z=Z, yy=yy: nll(Z, yy, s) + strength * c / 2 * (s - s0) ** 2,
            bounds=(-5, 5),
            method="bounded",
            options={"xatol": 1e-10},
        ).x
        np.testing.assert_allclose(np.log(T), ref, atol=1e-5)
        # shrunk: between the group's own fit and the pooled one
        own = TemperatureScaling().fit(Z, yy).temperature_
        assert (
            min(own, cal.temperature_) - 1e-9 <= T <= max(own, cal.temperature_) + 1e-9
        )


def test_auto_picks_the_lowest_cross_fitted_nll_and_unseen_groups_get_pooled():
    logits, y, groups = _groups_problem(3)
    cal = GroupedTemperatureScaling(random_state=0).fit(logits, y, groups=groups)
    assert cal.cv_nll_.shape == (9,)
    assert cal.shrinkage_ in (0, 1, 3, 10, 30, 100, 300, 1000, 3000)
    grid = np.array([0, 1, 3, 10, 30, 100, 300, 1000, 3000])
    assert cal.cv_nll_[grid == cal.shrinkage_][0] == cal.cv_nll_.min()
    X = logits[:3]
    pooled = np.exp(log_softmax(X / cal.temperature_, axis=1))
    np.testing.assert_allclose(cal.predict_proba(X, groups=[99, 99, 99]), pooled)
    np.testing.assert_allclose(cal.predict_proba(X), pooled)
    own = np.exp(log_softmax(X / cal.group_temperatures_[0], axis=1))
    np.testing.assert_allclose(cal.predict_proba(X, groups=[0, 0, 0]), own)


def test_groups_of_the_wrong_length_are_refused():
    logits, y, groups = _groups_problem(4)
    with pytest.raises(ValueError, match="one group per row"):
        GroupedTemperatureScaling().fit(logits, y, groups=groups[:-1])


# ------------------------------------------------------------------ contracts
ESTIMATORS = [
    ContextualCalibrator(),
    BatchCalibrator(),
    GroupedTemperatureScaling(random_state=0),
]


@pytest.mark.parametrize("estimator", ESTIMATORS, ids=lambda e: type(e).__name__)
def test_param_validation(estimator):
    check_param_validation(type(estimator).__name__, estimator)


@pytest.mark.parametrize("estimator", ESTIMATORS, ids=lambda e: type(e).__name__)
def test_clone_pickle_and_input_untouched(estimator):
    logits, y, groups = _groups_problem(5, n_groups=2, n_per=40)
    X = logits.copy()
    fitted = clone(estimator).fit(X, y)
    np.testing.assert_array_equal(X, logits)
    again = pickle.loads(pickle.dumps(fitted))
    np.testing.assert_array_equal(again.predict_proba(X), fitted.predict_proba(X))
    P = fitted.predict_proba(X)
    np.testing.assert_allclose(P.sum(axis=1), 1.0)
    np.testing.assert_array_equal(fitted.predict(X), fitted.classes_[P.argmax(axis=1)])


COLUMNS_ARE_CLASSES = (
    "X must have one column per class: the check's X has fewer columns than y "
    "has classes, which a score calibrator rejects with a ValueError by design."
)
ONE_LABEL = (
    "Temperatures keep the argmax of the scores (one column per class): with one "
    "label present the check wants every prediction to be that label, which the "
    "scores' argmax is not."
)


def _expected_failed(estimator):
    if not isinstance(estimator, GroupedTemperatureScaling):
        return {}
    return {
        "check_estimators_overwrite_params": COLUMNS_ARE_CLASSES,
        "check_estimators_fit_returns_self": COLUMNS_ARE_CLASSES,
        "check_readonly_memmap_input": COLUMNS_ARE_CLASSES,
        "check_classifiers_classes": COLUMNS_ARE_CLASSES,
        "check_classifiers_train": COLUMNS_ARE_CLASSES,
        "check_classifiers_one_label": ONE_LABEL,
        # scikit-learn 1.6's version of this check zeroes the weights of one
        # class: the problem is one label again
        "check_classifiers_one_label_sample_weights": ONE_LABEL,
    }


@parametrize_with_checks(
    [ContextualCalibrator(), BatchCalibrator(), GroupedTemperatureScaling(cv=2)],
    expected_failed_checks=_expected_failed,
)
def test_sklearn_compatible(estimator, check):
    check(estimator)
