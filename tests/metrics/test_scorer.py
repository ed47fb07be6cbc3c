"""Scorer registry and scorers inside real model selection."""

import numpy as np
import pytest
from sklearn.metrics import get_scorer as sklearn_get_scorer
from sklearn.metrics import get_scorer_names as sklearn_names
from sklearn.model_selection import GridSearchCV, StratifiedKFold, cross_validate

from skcal import MatrixScaling, VectorScaling
from skcal.metrics import (
    classwise_calibration_error,
    cumulative_calibration_error,
    ecce_binned_mean,
    expected_calibration_error,
    get_scorer,
    get_scorer_names,
    max_calibration_error,
    smooth_expected_calibration_error,
)
from skcal.utils._testing import make_miscalibrated_logits

SCORERS = {
    "neg_expected_calibration_error": expected_calibration_error,
    "neg_classwise_calibration_error": classwise_calibration_error,
    "neg_max_calibration_error": max_calibration_error,
    "neg_cumulative_calibration_error": cumulative_calibration_error,
    "neg_ecce_binned_mean": ecce_binned_mean,
    "neg_smooth_expected_calibration_error": smooth_expected_calibration_error,
}


def test_registry_and_fallback():
    names = get_scorer_names()
    assert set(SCORERS) <= set(names)
    assert set(sklearn_names()) <= set(names)
    assert names == sorted(names)
    assert repr(get_scorer("neg_log_loss")) == repr(sklearn_get_scorer("neg_log_loss"))
    with pytest.raises(ValueError, match="not a valid scoring value"):
        get_scorer("neg_no_such_metric")
    # a fresh copy each time: mutating one cannot leak into the registry
    a = get_scorer("neg_expected_calibration_error")
    a.kwargs["n_bins"] = 3
    assert get_scorer("neg_expected_calibration_error").kwargs == {}


@pytest.mark.parametrize("name", SCORERS)
def test_scorer_is_the_negated_metric(name):
    X, y = make_miscalibrated_logits(400, 3, random_state=0)
    est = VectorScaling(device="cpu").fit(X, y)
    w = np.linspace(0.5, 1.5, len(y))
    expected = -SCORERS[name](y, est.predict_proba(X), sample_weight=w)
    assert get_scorer(name)(est, X, y, sample_weight=w) == pytest.approx(expected)


@pytest.mark.parametrize("name", SCORERS)
def test_grid_search_over_a_calibrator_hyperparameter(name):
    X, y = make_miscalibrated_logits(600, 4, temperature=2.0, random_state=1)
    labels = np.array(["w", "x", "y", "z"])[y]
    grid = {"off_diagonal_reg": [0.0, 0.1, 10.0]}
    cv = StratifiedKFold(3, shuffle=True, random_state=0)
    search = GridSearchCV(
        MatrixScaling(device="cpu"), grid, scoring=get_scorer(name), cv=cv
    )
    search.fit(X, labels)
    # recompute every cell of cv_results_ independently
    metric = SCORERS[name]
    for i, params in enumerate(search.cv_results_["params"]):
        for k, (train, test) in enumerate(cv.split(X, labels)):
            est = MatrixScaling(device="cpu", **params).fit(X[train], labels[train])
            expected = -metric(
                labels[test], est.predict_proba(X[test]), labels=est.classes_
            )
            got = search.cv_results_[f"split{k}_test_score"][i]
            assert got == pytest.approx(expected, abs=1e-9)
    assert search.best_score_ == np.max(search.cv_results_["mean_test_score"])
    assert search.best_score_ <= 0


def test_fold_missing_a_class_is_scored_with_estimator_classes():
    X, y = make_miscalibrated_logits(300, 3, random_state=2)
    names = np.array(["a", "b", "c"])
    est = VectorScaling(device="cpu").fit(X, names[y])
    test = y != 1  # no "b" in this fold
    score = get_scorer("neg_classwise_calibration_error")(est, X[test], names[y][test])
    expected = -classwise_calibration_error(
        names[y][test], est.predict_proba(X[test]), labels=names
    )
    assert score == pytest.approx(expected)


def test_cross_validate_with_several_scorers():
    X, y = make_miscalibrated_logits(500, 3, random_state=3)
    scoring = {name: get_scorer(name) for name in SCORERS} | {"nll": "neg_log_loss"}
    res = cross_validate(VectorScaling(device="cpu"), X, y, scoring=scoring, cv=3)
    for name in scoring:
        assert np.all(np.isfinite(res[f"test_{name}"]))
        assert np.all(res[f"test_{name}"] <= 0)
