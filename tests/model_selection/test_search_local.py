"""CalibratorSearchCV with local calibrators: X is embeddings, the head is given."""

import pickle

import joblib
import numpy as np
import pytest
from scipy.stats import sem
from sklearn.base import clone
from sklearn.frozen import FrozenEstimator
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import log_loss
from sklearn.model_selection import StratifiedKFold
from threadpoolctl import threadpool_limits

from skcal import (
    CalibratedClassifier,
    IdentityCalibrator,
    KCalCalibrator,
    LocalNetCalibrator,
    ProCalCalibrator,
    TemperatureScaling,
    VectorScaling,
)
from skcal.model_selection import CalibratorSearchCV
from skcal.utils._testing import make_region_miscalibrated_embeddings


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    """One torch (OpenMP) thread: the fits are tiny."""
    with threadpool_limits(1):
        yield


@pytest.fixture(scope="module")
def data():
    """300 embeddings of 16 dimensions, 3 classes, a head miscalibrated by region."""
    X, y, coef, intercept, _ = make_region_miscalibrated_embeddings(
        300, 3, random_state=0
    )
    return X, y, coef, intercept


def _net(**params):
    """A Local Net small enough for a test (a fraction of a second per fit)."""
    return LocalNetCalibrator(
        bandwidth=2.0, hidden_layer_sizes=(8,), max_iter=3, device="cpu", **params
    )


def _kcal(**params):
    return KCalCalibrator(n_components=4, max_iter=2, cv=3, device="cpu", **params)


# ============================================== the cross-validated scores
@pytest.mark.parametrize("weighted", [False, True])
def test_cross_fitted_scores_equal_an_independent_loop(data, weighted):
    """Each candidate's split scores are those of fitting it yourself on the
    same folds: TS on the head's logits, the local ones on the embeddings with
    the head; the guard compares them on those logits' per-row losses."""
    X, y, coef, intercept = data
    w = np.random.default_rng(1).uniform(0.5, 2.0, len(y)) if weighted else None
    classes = np.arange(3)
    candidates = [
        TemperatureScaling(device="cpu"),
        _net(random_state=7),
        ProCalCalibrator(device="cpu"),
        _kcal(random_state=3),  # a local method without a head
    ]
    search = CalibratorSearchCV(
        candidates, cv=3, random_state=0, coef=coef, intercept=intercept
    ).fit(X, y, sample_weight=w)

    logits = X @ coef.T + intercept
    folds = StratifiedKFold(3, shuffle=True, random_state=0).split(X, y)
    references = [
        (TemperatureScaling(device="cpu", classes=classes), logits),
        (_net(random_state=7, coef=coef, intercept=intercept, classes=classes), X),
        (ProCalCalibrator(device="cpu", coef=coef, intercept=intercept), X),
        (_kcal(random_state=3, classes=classes), X),
    ]
    expected = np.empty((4, 3))
    row_loss = np.empty((4, len(y)))
    for k, (train, test) in enumerate(folds):
        fit_w = None if w is None else w[train]
        for c, (estimator, Z) in enumerate(references):
            P = clone(estimator).fit(Z[train], y[train], sample_weight=fit_w)
            P = P.predict_proba(Z[test])
            expected[c, k] = -log_loss(
                y[test], P, labels=classes, sample_weight=None if w is None else w[test]
            )
            row_loss[c, test] = -np.log(P[np.arange(len(test)), y[test]])
    res = search.cv_results_
    scores = np.column_stack([res[f"split{k}_test_score"] for k in range(3)])
    np.testing.assert_allclose(scores[0], expected[0], rtol=1e-7)
    np.testing.assert_allclose(scores[1:], expected[1:], rtol=1e-4)
    np.testing.assert_allclose(res["mean_test_score"], expected.mean(axis=1), rtol=1e-4)
    assert np.isnan(res["n_parameters"][1:]).all()  # local: not counted
    assert res["n_parameters"][0] == 1
    assert list(res["skipped_reason"]) == [""] * 4
    assert search.reads_embeddings_ and search.n_features_in_ == X.shape[1]
    if not weighted:
        # the one-standard-error comparison with TS, on its logits' losses
        best = int(np.argmax(expected.mean(axis=1)))
        assert best != 0, "the data should make a local candidate score best"
        diff = row_loss[0] - row_loss[best]
        comparison = f"by {diff.mean():.4g} (one standard error: {sem(diff):.4g})"
        assert comparison in search.selection_reason_, search.selection_reason_


def test_small_data_guard_does_not_count_local_candidates(data):
    """50 rows: VectorScaling without ridge (6 parameters) is skipped, the
    local candidates are not, and TS is kept by the one-standard-error rule."""
    X, y, coef, intercept = data
    search = CalibratorSearchCV(
        [
            IdentityCalibrator(),
            TemperatureScaling(device="cpu"),
            VectorScaling(reg_lambda=0.0, device="cpu"),
            ProCalCalibrator(device="cpu"),
        ],
        cv=3,
        random_state=0,
        coef=coef,
        intercept=intercept,
    ).fit(X[:50], y[:50])
    reasons = search.cv_results_["skipped_reason"]
    assert reasons[2].startswith("skipped: 6 free parameters need at least 60")
    assert reasons[3] == ""
    assert search.selected_ in ("IdentityCalibrator", "TemperatureScaling")


# ======================================================== the selected model
@pytest.mark.parametrize("winner", ["local", "score"])
def test_the_winner_is_refitted_on_all_rows(data, winner):
    """Predictions delegate to the winner refitted on all rows: a local one
    on the embeddings, a score one on the head's logits."""
    X, y, coef, intercept = data
    w = np.random.default_rng(2).uniform(0.5, 1.5, len(y))
    if winner == "local":  # no guard: ProCal scores best on these rows
        procal = ("procal", ProCalCalibrator(device="cpu"))
        candidates, guard = [TemperatureScaling(device="cpu"), procal], None
    else:
        candidates, guard = [TemperatureScaling(device="cpu"), _net()], "one_se"
    search = CalibratorSearchCV(
        candidates,
        cv=3,
        guard=guard,
        random_state=0,
        coef=coef,
        intercept=intercept,
    ).fit(X, y, sample_weight=w)
    expected_name = "procal" if winner == "local" else "TemperatureScaling"
    assert search.selected_ == expected_name, search.cv_results_
    classes = np.arange(3)
    if winner == "local":
        reference = ProCalCalibrator(coef=coef, intercept=intercept, device="cpu")
        Z = X
    else:
        reference = TemperatureScaling(device="cpu", classes=classes)
        Z = X @ coef.T + intercept
    reference.fit(Z, y, sample_weight=w)
    new = make_region_miscalibrated_embeddings(50, 3, random_state=5)[0]
    Z_new = new if winner == "local" else new @ coef.T + intercept
    np.testing.assert_allclose(
        search.predict_proba(new), reference.predict_proba(Z_new), rtol=1e-12
    )
    np.testing.assert_array_equal(search.predict(new), reference.predict(Z_new))
    np.testing.assert_allclose(
        search.predict_log_proba(new), reference.predict_log_proba(Z_new), rtol=1e-12
    )
    np.testing.assert_allclose(
        search.score(new, y[:50]), reference.score(Z_new, y[:50]), rtol=1e-12
    )
    with pytest.raises(ValueError, match="16 features"):
        search.predict_proba(new[:, :8])


def test_a_local_calibrator_without_a_head_needs_none(data):
    """KCal uses no head: with local candidates only, no coef is needed, and
    a candidate's own head is kept."""
    X, y, coef, intercept = data
    own = _net(coef=coef, intercept=intercept, random_state=0)
    search = CalibratorSearchCV(
        [_kcal(random_state=0), own], cv=2, guard=None, random_state=0
    ).fit(X, y)
    assert not hasattr(search, "coef_")
    assert search.selected_ == "LocalNetCalibrator", search.cv_results_
    fitted = clone(own).set_params(classes=np.arange(3)).fit(X, y)
    np.testing.assert_allclose(
        search.predict_proba(X), fitted.predict_proba(X), rtol=1e-12
    )
    np.testing.assert_array_equal(own.coef, coef)  # the user's candidate untouched


# ================================================================= errors
def test_bad_heads_and_mixes_raise_clear_errors(data):
    X, y, coef, intercept = data
    ts, procal = TemperatureScaling(device="cpu"), ProCalCalibrator(device="cpu")
    cases = [
        (
            dict(candidates=[ts, _kcal()]),
            r"\['TemperatureScaling'\] are score calibrators.*scores cannot be "
            r"derived from embeddings without the classifier's linear head",
        ),
        (
            dict(candidates=[procal]),
            "'ProCalCalibrator'.*needs its linear head.*Pass the head to "
            "CalibratorSearchCV as coef=",
        ),
        (
            dict(candidates=[ts, procal], coef=coef[:, :8], intercept=intercept),
            r"coef must be the head's weight matrix of shape \(n_classes, "
            r"n_features\) = \(>=2, 16\).*got shape \(3, 8\)",
        ),
        (
            dict(candidates=[ts, procal], coef=coef, intercept=intercept[:2]),
            r"intercept must have shape \(n_classes,\) = \(3,\)",
        ),
        (dict(candidates=[ts, procal], intercept=intercept), "intercept was given"),
        (
            dict(candidates=[ts], coef=coef, intercept=intercept),
            "every candidate here is a score calibrator",
        ),
        (
            dict(candidates=[ts, procal], coef=coef, input="proba"),
            "input='proba', but X holds embeddings",
        ),
        (
            dict(candidates=[ts, procal], coef=coef, classes=["a", "b"]),
            "classes must list one label per column: expected 3 labels, got 2",
        ),
    ]
    for params, match in cases:
        with pytest.raises(ValueError, match=match):
            CalibratorSearchCV(cv=2, **params).fit(X, y)
    bad = X.copy()
    bad[4, 2] = np.inf
    with pytest.raises(ValueError, match="X contains inf values in 1 row"):
        CalibratorSearchCV([ts, procal], coef=coef).fit(bad, y)


# ================================================================== glue
def test_clone_pickle_and_n_jobs(data):
    X, y, coef, intercept = data
    params = dict(
        candidates=[
            TemperatureScaling(device="cpu"),
            _net(),
            ProCalCalibrator(device="cpu"),
        ],
        cv=2,
        guard=None,
        random_state=0,
        coef=coef,
        intercept=intercept,
    )
    search = CalibratorSearchCV(**params).fit(X, y)
    P = search.predict_proba(X)
    restored = pickle.loads(pickle.dumps(search))
    np.testing.assert_array_equal(restored.predict_proba(X), P)
    copy = clone(search)
    assert not hasattr(copy, "best_calibrator_")
    np.testing.assert_array_equal(copy.coef, coef)
    np.testing.assert_array_equal(copy.fit(X, y).predict_proba(X), P)
    # threads: loky's worker processes take ~20 s to import torch here, and
    # test_search.py already runs the process backend
    with joblib.parallel_backend("threading", n_jobs=2):
        two = CalibratorSearchCV(**params, n_jobs=2).fit(X, y)
    np.testing.assert_array_equal(
        two.cv_results_["mean_test_score"], search.cv_results_["mean_test_score"]
    )
    np.testing.assert_array_equal(two.predict_proba(X), P)
    # the user's candidates are untouched: no head, no seed was set on them
    assert params["candidates"][1].coef is None
    assert params["candidates"][1].random_state is None


def test_refit_on_scores_forgets_the_head(data):
    X, y, coef, intercept = data
    search = CalibratorSearchCV(
        [TemperatureScaling(device="cpu"), ProCalCalibrator(device="cpu")],
        cv=2,
        coef=coef,
    ).fit(X, y)
    assert hasattr(search, "coef_")
    logits = X @ coef.T + intercept
    search.set_params(candidates=[TemperatureScaling(device="cpu")], coef=None)
    search.fit(logits, y)
    assert not search.reads_embeddings_ and not hasattr(search, "coef_")
    assert search.n_features_in_ == 3


def test_the_wrapper_protocol_of_a_search_on_embeddings():
    """What tells a wrapper to give the search embeddings and a head."""
    ts, net = TemperatureScaling(), LocalNetCalibrator()
    assert not CalibratorSearchCV([ts])._reads_embeddings()
    assert not CalibratorSearchCV()._reads_embeddings()
    assert CalibratorSearchCV([ts, ("net", net)])._reads_embeddings()
    assert CalibratorSearchCV([ts, net])._uses_head
    assert not CalibratorSearchCV([KCalCalibrator()])._uses_head
    search = CalibratorSearchCV([ts, net])
    W, b = np.ones((3, 4)), np.zeros(3)
    params = search._wrapper_params(classes=np.arange(3), coef=W, intercept=b)
    assert set(params) == {"classes", "coef", "intercept"}
    assert params["coef"] is W and params["intercept"] is b
    params = search._wrapper_params(classes=np.arange(3), input="proba")
    assert params == {"classes": params["classes"], "input": "proba"}


def test_inside_calibrated_classifier(data):
    """The wrapper hands the search the classifier's embeddings and head."""
    X, y, _, _ = data
    clf = LogisticRegression().fit(X[:150], y[:150])
    search = CalibratorSearchCV(
        [TemperatureScaling(device="cpu"), ProCalCalibrator(device="cpu")],
        cv=2,
        random_state=0,
    )
    wrapped = CalibratedClassifier(FrozenEstimator(clf), calibrator=search)
    wrapped.fit(X[150:], y[150:])
    assert wrapped.response_ == "embeddings"
    fitted = wrapped.calibrated_classifiers_[0].calibrator
    np.testing.assert_array_equal(fitted.coef_, clf.coef_)
    direct = clone(search).set_params(
        coef=clf.coef_, intercept=clf.intercept_, classes=clf.classes_
    )
    direct.fit(X[150:], y[150:])
    np.testing.assert_allclose(
        wrapped.predict_proba(X[:50]), direct.predict_proba(X[:50]), rtol=1e-12
    )
