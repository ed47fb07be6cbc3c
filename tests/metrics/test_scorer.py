"""Scorer registry and scorers inside real model selection."""

import warnings

import numpy as np
import pytest
from sklearn.metrics import get_scorer as sklearn_get_scorer
from sklearn.metrics import get_scorer_names as sklearn_names
from sklearn.model_selection import GridSearchCV, StratifiedKFold, cross_validate

from skcal import MatrixScaling, VectorScaling
from skcal.exceptions import MissingClassWarning
from skcal.metrics import (
    classwise_calibration_error,
    cumulative_calibration_error,
    ecce_binned_mean,
    expected_calibration_error,
    get_scorer,
    get_scorer_names,
    l2_calibration_error,
    max_calibration_error,
    maximum_mean_calibration_error,
    smooth_expected_calibration_error,
)
from skcal.metrics._spiegelhalter import spiegelhalter_abs_z
from skcal.utils._testing import make_miscalibrated_logits

SCORERS = {
    "neg_expected_calibration_error": expected_calibration_error,
    "neg_classwise_calibration_error": classwise_calibration_error,
    "neg_max_calibration_error": max_calibration_error,
    "neg_cumulative_calibration_error": cumulative_calibration_error,
    "neg_ecce_binned_mean": ecce_binned_mean,
    "neg_smooth_expected_calibration_error": smooth_expected_calibration_error,
    "neg_l2_calibration_error": l2_calibration_error,
    "neg_maximum_mean_calibration_error": maximum_mean_calibration_error,
    "neg_spiegelhalter_abs_z": spiegelhalter_abs_z,
}


def test_registry_and_fallback():
    names = get_scorer_names()
    assert set(SCORERS) <= set(names)
    assert set(sklearn_names()) <= set(names)
    assert names == sorted(names)
    assert repr(get_scorer("accuracy")) == repr(sklearn_get_scorer("accuracy"))
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
    grid = {"reg_off_diagonal": [0.0, 0.1, 10.0]}
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


# -------------------------------------------- metadata routing (issue 15, item 11)
import sklearn  # noqa: E402
from sklearn.exceptions import UnsetMetadataPassedError  # noqa: E402
from sklearn.metrics import make_scorer  # noqa: E402

from skcal.metrics import (  # noqa: E402
    LocalCalibrationScorer,
    local_calibration_error,
)

ROUTING_SCORERS = [
    "neg_expected_calibration_error",
    "neg_cumulative_calibration_error",
]


def _sklearn_scorer(name):
    """scikit-learn's own scorer (make_scorer) around the same metric."""
    return make_scorer(
        SCORERS[name], response_method="predict_proba", greater_is_better=False
    )


def _routing_problem():
    X, y = make_miscalibrated_logits(450, 3, temperature=2.0, random_state=7)
    w = np.random.default_rng(7).uniform(0.05, 3.0, len(y))
    return X, y, w


def _cross_validate(scoring, X, y, fit_request=False, **params):
    estimator = VectorScaling(device="cpu")
    if sklearn.get_config()["enable_metadata_routing"]:
        estimator.set_fit_request(sample_weight=fit_request)
    cv = StratifiedKFold(3, shuffle=True, random_state=0)
    res = cross_validate(estimator, X, y, scoring=scoring, cv=cv, params=params)
    return res, list(cv.split(X, y))


def _fold_scores(name, X, y, splits, score_w=None, fit_w=None):
    """The metric on each test fold, recomputed without any scorer."""
    scores = []
    for train, test in splits:
        fit_params = {} if fit_w is None else {"sample_weight": fit_w[train]}
        est = VectorScaling(device="cpu").fit(X[train], y[train], **fit_params)
        sw = None if score_w is None else score_w[test]
        proba = est.predict_proba(X[test])
        scores.append(-SCORERS[name](y[test], proba, sample_weight=sw))
    return np.array(scores)


@pytest.mark.parametrize(
    "score_request, fit_request",
    [
        ("unset", False),
        ("unset", True),
        (True, False),
        ("alias", False),
        (False, False),
        (False, True),
    ],
)
@pytest.mark.parametrize("name", ROUTING_SCORERS)
def test_routing_weights_exactly_as_sklearn_scorers_do(
    name, score_request, fit_request
):
    X, y, w = _routing_problem()
    with sklearn.config_context(enable_metadata_routing=True):
        ours, theirs = get_scorer(name), _sklearn_scorer(name)
        key = "sample_weight"
        if score_request == "alias":
            key = "scoring_weight"
            ours.set_score_request(sample_weight=key)
            theirs.set_score_request(sample_weight=key)
        elif score_request != "unset":
            ours.set_score_request(sample_weight=score_request)
            theirs.set_score_request(sample_weight=score_request)
        params = {key: w, "fit_request": fit_request}
        # scikit-learn's own scorer first: whether it refuses the weights (and
        # with which error) follows the scikit-learn version; ours must agree
        try:
            reference, splits = _cross_validate(theirs, X, y, **params)
        except Exception as error:  # compared with ours just below
            with pytest.raises(type(error)) as ours_error:
                _cross_validate(ours, X, y, **params)
            assert str(ours_error.value).replace(repr(ours), "SCORER") == str(
                error
            ).replace(repr(theirs), "SCORER")
            assert score_request == "unset" or not (score_request or fit_request)
            return
        # one scorer (scorer.__call__) and several (sklearn's multimetric path)
        alone, _ = _cross_validate(ours, X, y, **params)
        both, _ = _cross_validate({"ours": ours, "theirs": theirs}, X, y, **params)
    np.testing.assert_allclose(alone["test_score"], reference["test_score"], rtol=1e-10)
    np.testing.assert_allclose(both["test_ours"], reference["test_score"], rtol=1e-10)
    np.testing.assert_allclose(both["test_theirs"], reference["test_score"])
    if score_request == "unset":  # older scikit-learn (1.6) ignores them
        return
    weighted = score_request is not False
    fit_w = w if fit_request else None
    expected = _fold_scores(name, X, y, splits, w if weighted else None, fit_w)
    np.testing.assert_allclose(reference["test_score"], expected, rtol=1e-10)
    # the weights matter: the other choice gives other scores
    other = _fold_scores(name, X, y, splits, None if weighted else w, fit_w)
    assert not np.allclose(alone["test_score"], other, rtol=1e-6)


@pytest.mark.parametrize("name", ROUTING_SCORERS)
def test_without_routing_scorers_behave_as_before(name):
    X, y, w = _routing_problem()
    assert not sklearn.get_config()["enable_metadata_routing"]
    ours, theirs = get_scorer(name), _sklearn_scorer(name)
    for scorer in (ours, theirs):  # requests need routing
        with pytest.raises(RuntimeError, match="metadata routing is enabled"):
            scorer.set_score_request(sample_weight=True)
    # cross_validate's params go to fit only: the scores are unweighted
    scoring = {"ours": ours, "theirs": theirs}
    both, splits = _cross_validate(scoring, X, y, sample_weight=w)
    expected = _fold_scores(name, X, y, splits, fit_w=w)
    np.testing.assert_allclose(both["test_ours"], expected, rtol=1e-10)
    np.testing.assert_allclose(both["test_ours"], both["test_theirs"], rtol=1e-10)
    # called directly, the scorer takes sample_weight, and nothing else
    est = VectorScaling(device="cpu").fit(X, y)
    expected = -SCORERS[name](y, est.predict_proba(X), sample_weight=w)
    assert ours(est, X, y, sample_weight=w) == pytest.approx(expected, rel=1e-12)
    assert theirs(est, X, y, sample_weight=w) == pytest.approx(expected, rel=1e-12)
    for scorer in (ours, theirs):
        with pytest.raises(ValueError, match="enable_metadata_routing"):
            scorer(est, X, y, other_metadata=w)


def test_grid_search_routes_weights_to_the_scorer():
    X, y, w = _routing_problem()
    name = "neg_expected_calibration_error"
    grid = {"reg_off_diagonal": [0.0, 10.0]}
    results = {}
    with sklearn.config_context(enable_metadata_routing=True):
        for kind, scorer in (
            ("ours", get_scorer(name)),
            ("theirs", _sklearn_scorer(name)),
        ):
            scorer.set_score_request(sample_weight=True)
            estimator = MatrixScaling(device="cpu").set_fit_request(sample_weight=False)
            search = GridSearchCV(estimator, grid, scoring=scorer, cv=3)
            results[kind] = search.fit(X, y, sample_weight=w).cv_results_
    for k in range(3):
        np.testing.assert_allclose(
            results["ours"][f"split{k}_test_score"],
            results["theirs"][f"split{k}_test_score"],
            rtol=1e-10,
        )


def test_requests_do_not_leak_into_the_registry():
    name = "neg_expected_calibration_error"
    with sklearn.config_context(enable_metadata_routing=True):
        get_scorer(name).set_score_request(sample_weight=True)
        fresh = get_scorer(name).get_metadata_routing()
        assert fresh.score.requests.get("sample_weight") is None  # unset


def test_local_scorer_routes_weights():
    X, y = make_miscalibrated_logits(600, 3, random_state=8)
    w = np.random.default_rng(8).uniform(0.05, 3.0, len(y))
    scorer = LocalCalibrationScorer(local_calibration_error, space=None, bandwidth=2.0)
    cv = StratifiedKFold(2, shuffle=True, random_state=0)
    with sklearn.config_context(enable_metadata_routing=True):
        estimator = VectorScaling(device="cpu").set_fit_request(sample_weight=False)
        with pytest.raises((UnsetMetadataPassedError, TypeError), match="sample_w"):
            cross_validate(
                estimator, X, y, scoring=scorer, cv=cv, params={"sample_weight": w}
            )
        scorer.set_score_request(sample_weight=True)
        res = cross_validate(
            estimator, X, y, scoring=scorer, cv=cv, params={"sample_weight": w}
        )
    for k, (train, test) in enumerate(cv.split(X, y)):
        est = VectorScaling(device="cpu").fit(X[train], y[train])
        proba = est.predict_proba(X[test])
        kwargs = dict(space=None, bandwidth=2.0)
        weighted = local_calibration_error(
            y[test], proba, X[test], sample_weight=w[test], **kwargs
        )
        assert res["test_score"][k] == pytest.approx(-weighted, rel=1e-10)
        unweighted = local_calibration_error(y[test], proba, X[test], **kwargs)
        assert weighted != pytest.approx(unweighted, rel=1e-6)


# ------------------------------------------------ nll and brier (issue 49, item 8)
def _proba_with_a_zero_and_a_rare_class():
    """30 rows of 3 classes; class 2 only in rows 0-4 (the first of three
    unshuffled folds), row 12's true class at probability 0."""
    rng = np.random.default_rng(0)
    y = np.r_[np.full(5, 2), rng.integers(0, 2, 25)]
    P = rng.dirichlet([2.0, 2.0, 1.0], size=30)
    P[12] = [0.0, 0.0, 1.0]
    P[12, 1 - y[12]] = 1.0
    P[12, 2] = 0.0
    return P, y


def _hand_nll_and_brier(P, y):
    nll = np.mean(-np.log(np.maximum(P[np.arange(len(y)), y], 1e-12)))
    brier = np.mean(((P - np.eye(3)[y]) ** 2).sum(axis=1))
    return nll, brier


@pytest.mark.parametrize("search", [False, True])
def test_nll_and_brier_scorers_are_the_functions_on_a_fold_missing_a_class(search):
    # one definition: get_scorer("nll") / ("brier"), the functions and
    # confidence_interval give the hand-computed value (a 0 clipped at
    # 1e-12: 27.63), inside cross_validate and GridSearchCV, on test folds
    # that lack class 2 (scikit-learn's scorers of these names refuse them)
    from sklearn.model_selection import KFold

    from skcal import IdentityCalibrator
    from skcal.metrics import brier_score, confidence_interval, negative_log_likelihood

    P, y = _proba_with_a_zero_and_a_rare_class()
    cv = KFold(3)
    scoring = {"nll": get_scorer("nll"), "brier": get_scorer("brier")}
    est = IdentityCalibrator(input="proba", classes=[0, 1, 2])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MissingClassWarning)
        if search:
            grid = GridSearchCV(
                est, {"input": ["proba"]}, scoring=scoring, refit=False, cv=cv
            )
            res = grid.fit(P, y).cv_results_
            res = {
                f"test_{m}": [res[f"split{k}_test_{m}"][0] for k in range(3)]
                for m in scoring
            }
        else:
            res = cross_validate(est, P, y, scoring=scoring, cv=cv, error_score="raise")
    for k, (_, test) in enumerate(cv.split(P)):
        nll, brier = _hand_nll_and_brier(P[test], y[test])
        assert res["test_nll"][k] == pytest.approx(-nll, rel=1e-12)
        assert res["test_brier"][k] == pytest.approx(-brier, rel=1e-12)
    nll, brier = _hand_nll_and_brier(P, y)
    assert nll > 27.63 / 30  # row 12's 0 counts -log(1e-12)
    assert negative_log_likelihood(y, P) == pytest.approx(nll, rel=1e-12)
    assert brier_score(y, P) == pytest.approx(brier, rel=1e-12)
    for name, value in (("nll", nll), ("brier", brier)):
        scorer = get_scorer(name)
        assert -scorer(est.fit(P, y), P, y) == pytest.approx(value, rel=1e-12)
        ci = confidence_interval(name, y, P, n_resamples=20, random_state=0)
        assert ci.estimate == pytest.approx(value, rel=1e-12)
