"""CalibratorSearchCV: cross-validated scores, the small-data guard, the glue."""

import math
import pickle
import re

import joblib
import numpy as np
import pytest
import sklearn
from scipy.stats import sem
from sklearn.base import clone
from sklearn.frozen import FrozenEstimator
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import get_scorer as sklearn_get_scorer
from sklearn.model_selection import (
    GridSearchCV,
    RepeatedStratifiedKFold,
    StratifiedKFold,
    cross_val_predict,
)
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import FunctionTransformer
from threadpoolctl import threadpool_limits

from skcal import (
    BetaCalibrator,
    CalibratedClassifier,
    DirichletCalibrator,
    DirichletCalibratorCV,
    IdentityCalibrator,
    IsotonicCalibrator,
    MatrixScaling,
    ParameterizedTemperatureScaling,
    SMARTCalibrator,
    SplineCalibrator,
    StructuredMatrixScaling,
    TemperatureScaling,
    TopVersusAll,
    VectorScaling,
)
from skcal.base import BaseCalibrator
from skcal.discovery import all_estimators
from skcal.exceptions import NotFittedError
from skcal.metrics import get_scorer
from skcal.model_selection import CalibratorSearchCV
from skcal.model_selection._search import _RowLosses
from skcal.utils._testing import (
    make_miscalibrated_logits,
    sample_labels,
    softmax_rows,
)


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    """One torch (OpenMP) thread: the fits are tiny, and thread hand-offs on a
    busy machine cost more than they save (see tests/test_properties.py)."""
    with threadpool_limits(1):
        yield


def _calibrated(n, n_classes, seed, scale=2.0):
    """Logits whose softmax is the true distribution of the labels."""
    rng = np.random.RandomState(seed)
    Z = scale * rng.standard_normal((n, n_classes))
    return Z, sample_labels(softmax_rows(Z), rng)


def _cheap():
    return [
        IdentityCalibrator(),
        TemperatureScaling(device="cpu"),
        VectorScaling(device="cpu"),
        IsotonicCalibrator(),
        BetaCalibrator(),
    ]


class _Broken(BaseCalibrator):
    """A calibrator whose fit raises on training folds of ``n_bad`` rows."""

    def __init__(self, *, input="logits", classes=None, n_bad=-1):
        self.input = input
        self.classes = classes
        self.n_bad = n_bad

    def n_free_parameters(self, n_classes, n_features=None):
        return 0  # the identity map, when it fits

    def _fit(self, logits, y_index, sample_weight):
        if self.n_bad < 0 or len(y_index) == self.n_bad:
            raise ValueError("boom")

    def _calibrated_logits(self, logits):
        return np.asarray(logits, dtype=np.float64)


def _times_three(X):
    return 3.0 * X


# ============================================== the cross-validated scores
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("scoring", ["neg_log_loss", "neg_expected_calibration_error"])
def test_split_scores_equal_gridsearchcv(scoring, weighted):
    """Each split score is GridSearchCV's on the same folds (an independent loop).

    GridSearchCV searches over the final step of a Pipeline, with the same
    StratifiedKFold (cv=3, shuffled with the same seed). The default scoring
    is compared with scikit-learn's own ``neg_log_loss`` scorer (its
    ``log_loss``); weights reach GridSearchCV's fits and scorer through
    metadata routing.
    """
    X, y = make_miscalibrated_logits(300, 3, temperature=2.0, random_state=0)
    w = np.random.default_rng(0).uniform(0.2, 2.0, 300) if weighted else None
    search = CalibratorSearchCV(_cheap(), scoring=scoring, cv=3, random_state=1)
    search.set_params(guard=None).fit(X, y, sample_weight=w)

    splitter = StratifiedKFold(3, shuffle=True, random_state=1)
    grid_scorer = (
        sklearn_get_scorer("neg_log_loss")
        if scoring == "neg_log_loss"
        else get_scorer(scoring)
    )
    with sklearn.config_context(enable_metadata_routing=True):
        grid_scorer.set_score_request(sample_weight=True)
        candidates = [c.set_fit_request(sample_weight=True) for c in _cheap()]
        grid = GridSearchCV(
            Pipeline([("cal", TemperatureScaling())]),
            {"cal": candidates},
            cv=splitter,
            scoring=grid_scorer,
        )
        grid.fit(X, y, sample_weight=w) if weighted else grid.fit(X, y)

    for k in range(3):
        key = f"split{k}_test_score"
        np.testing.assert_allclose(
            search.cv_results_[key], grid.cv_results_[key], rtol=1e-12
        )
    np.testing.assert_array_equal(
        search.cv_results_["rank_test_score"], grid.cv_results_["rank_test_score"]
    )
    assert search.n_splits_ == 3
    assert search.best_index_ == grid.best_index_  # no guard: the best score
    np.testing.assert_allclose(search.best_score_, grid.best_score_, rtol=1e-12)


def test_any_splitter_and_a_callable_scorer():
    """A splitter object and a plain callable, as GridSearchCV takes them."""
    X, y = make_miscalibrated_logits(200, 3, temperature=2.0, random_state=2)
    splitter = RepeatedStratifiedKFold(n_splits=2, n_repeats=2, random_state=0)

    def accuracy_of_top(estimator, X, y):
        return float(np.mean(estimator.predict(X) == y))

    search = CalibratorSearchCV(
        _cheap()[:3], scoring=accuracy_of_top, cv=splitter, guard=None
    ).fit(X, y)
    grid = GridSearchCV(
        Pipeline([("cal", TemperatureScaling())]),
        {"cal": _cheap()[:3]},
        cv=splitter,
        scoring=accuracy_of_top,
    ).fit(X, y)
    assert search.n_splits_ == 4
    for k in range(4):
        key = f"split{k}_test_score"
        np.testing.assert_allclose(search.cv_results_[key], grid.cv_results_[key])


# ================================================================ the guard
def _expected_selection(candidates, X, y, splitter, mean_scores):
    """The guard's rule b, from cross_val_predict's out-of-fold rows.

    Candidates 0 and 1 are identity and temperature scaling: the reference is
    identity, replaced by TS when TS lowers its per-row losses by more than
    one standard error; the best candidate is selected when it beats the
    reference the same way. Returns the selected index and the (mean,
    standard error) of every paired difference compared, in any order.
    """
    losses = []
    for cal in candidates:
        P = cross_val_predict(clone(cal), X, y, cv=splitter, method="predict_proba")
        losses.append(-np.log(P[np.arange(len(y)), y]))
    best = int(np.nanargmax(mean_scores))  # skipped candidates are NaN
    if best == 0:
        return 0, []
    compared = []

    def beats(base, other):
        diff = losses[base] - losses[other]
        compared.append((diff.mean(), sem(diff)))
        return diff.mean() > sem(diff)

    reference = 1 if best != 1 and beats(0, 1) else 0
    return (best if beats(reference, best) else reference), compared


def test_guard_is_the_one_standard_error_rule_on_calibrated_data():
    """Small, already calibrated sets: identity or TS is kept.

    On each set the selection is the one-standard-error rule recomputed here
    from scikit-learn's out-of-fold predictions and scipy's standard error;
    on some of them a richer candidate has the best mean score and is not
    selected (the guard at work).
    """
    overruled = 0
    for seed in range(6):
        X, y = _calibrated(150, 3, seed)
        candidates = _cheap()[:3] + [BetaCalibrator()]
        search = CalibratorSearchCV(candidates, cv=5, random_state=seed).fit(X, y)
        splitter = StratifiedKFold(5, shuffle=True, random_state=seed)
        mean = search.cv_results_["mean_test_score"]
        expected, compared = _expected_selection(candidates, X, y, splitter, mean)
        assert search.best_index_ == expected, (seed, search.selection_reason_)
        # the reason gives the numbers of every comparison to 4 digits
        numbers = re.findall(
            r"(lowers|raises) the per-row out-of-fold log loss of \w+ by (\S+) "
            r"\(one standard error: (\S+)\)",
            search.selection_reason_,
        )
        assert len(numbers) == len(compared), search.selection_reason_
        sign = {"lowers": 1.0, "raises": -1.0}  # the reason's sizes are positive
        np.testing.assert_allclose(
            sorted([sign[v] * float(a), float(b)] for v, a, b in numbers),
            sorted([a, b] for a, b in compared),
            rtol=6e-4,
        )
        assert search.selected_ == search.cv_results_["candidate"][expected]
        overruled += search.best_index_ != np.nanargmax(mean)
        if search.best_index_ != np.nanargmax(mean):
            assert search.selected_ in ("IdentityCalibrator", "TemperatureScaling")
            assert "one-standard-error rule" in search.selection_reason_
        np.testing.assert_allclose(
            search.best_score_, mean[search.best_index_], rtol=1e-15
        )
    assert overruled >= 1


def test_guard_averages_the_losses_of_rows_held_out_several_times():
    """Repeated K-fold: each row's out-of-fold loss is its mean over repeats."""
    X, y = make_miscalibrated_logits(150, 3, temperature=1.5, random_state=3)
    splitter = RepeatedStratifiedKFold(n_splits=3, n_repeats=2, random_state=0)
    candidates = _cheap()[:3]
    search = CalibratorSearchCV(candidates, cv=splitter).fit(X, y)
    best = int(np.argmax(search.cv_results_["mean_test_score"]))
    assert best != 0
    losses = np.zeros((3, len(y)))
    for train, test in splitter.split(X, y):
        for c, cal in enumerate(candidates):
            P = clone(cal).fit(X[train], y[train]).predict_proba(X[test])
            losses[c, test] += -np.log(P[np.arange(len(test)), y[test]]) / 2
    diff = losses[0] - losses[best]
    numbers = re.search(
        r"of IdentityCalibrator by (\S+) \(one standard error: (\S+)\)",
        search.selection_reason_,
    )
    np.testing.assert_allclose(
        [float(v) for v in numbers.groups()], [diff.mean(), sem(diff)], rtol=6e-4
    )


def test_guard_keeps_a_real_improvement_on_large_sets():
    """Temperature 3 on 3,000 rows: calibration wins; per-class offsets on
    2,000 rows: vector scaling beats temperature scaling clearly."""
    X, y = make_miscalibrated_logits(3000, 4, temperature=3.0, random_state=0)
    search = CalibratorSearchCV(_cheap()[:4], cv=3, random_state=0).fit(X, y)
    assert search.selected_ != "IdentityCalibrator"
    assert "beats IdentityCalibrator" in search.selection_reason_

    Z, y = _calibrated(2000, 4, 0, scale=1.5)
    offsets = 2.0 * Z + np.array([1.5, 0.0, 0.0, -1.5])
    search = CalibratorSearchCV(_cheap()[:3], cv=3, random_state=0).fit(offsets, y)
    assert search.selected_ == "VectorScaling"
    assert "beats TemperatureScaling" in search.selection_reason_


def test_guard_none_keeps_the_best_score():
    X, y = _calibrated(150, 3, 2)
    search = CalibratorSearchCV(_cheap()[:3], guard=None, random_state=2).fit(X, y)
    assert search.best_index_ == np.argmax(search.cv_results_["mean_test_score"])


@pytest.mark.parametrize("name, cls", all_estimators())
def test_every_calibrator_states_a_finite_parameter_count(name, cls):
    """Each calibrator's own ``n_free_parameters`` (not the base's default,
    which a new calibrator would otherwise inherit), finite, for small and
    large problems."""
    assert "n_free_parameters" in vars(cls), f"{name} does not state its count"
    for n_classes, n_features in [(2, 2), (10, 64), (1000, 512)]:
        count = cls().n_free_parameters(n_classes, n_features)
        assert np.isfinite(count) and count >= 0, (name, n_classes, count)


def test_parameter_counts_by_hand():
    """Three counts worked out from the methods' definitions."""
    # PTS: an MLP on the top min(10, 4) = 4 logits, hidden (5, 5), one output
    pts = ParameterizedTemperatureScaling()
    assert pts.n_free_parameters(4) == (4 + 1) * 5 + (5 + 1) * 5 + (5 + 1) * 1
    # beta: a, b, c per class ("abm"), or two of them ("am")
    assert BetaCalibrator().n_free_parameters(7) == 21
    assert BetaCalibrator(parameters="am").n_free_parameters(7) == 14
    # an unpenalised full Dirichlet map: C x C weights and C biases; ODIR
    # with 0 on the off-diagonal and a positive bias penalty: C^2
    assert DirichletCalibrator(reg_lambda=0.0).n_free_parameters(6) == 42
    odir = DirichletCalibrator(reg_lambda=0.0, reg_mu=1e-2)
    assert odir.n_free_parameters(6) == 36
    # the base's default for a calibrator that states nothing: a full map
    assert super(type(pts), pts).n_free_parameters(5) == 30


def test_too_many_parameters_are_skipped_with_the_documented_counts():
    """Counts of the Notes for C = 4 classes; more than e / 10 is skipped,
    ``e`` the events: the rows whose top score is wrong, or right if fewer."""
    X, y = make_miscalibrated_logits(150, 4, temperature=2.0, random_state=0)
    wrong = X.argmax(axis=1) != y
    events = min(wrong.sum(), (~wrong).sum())
    assert 20 < events < 120  # some candidates skipped, some not
    candidates = [
        IdentityCalibrator(),  # 0
        TemperatureScaling(device="cpu"),  # 1
        VectorScaling(device="cpu"),  # 1: default ridge
        VectorScaling(reg_lambda=0.0, device="cpu"),  # 2C = 8
        MatrixScaling(reg_lambda=0.0, device="cpu"),  # C^2 + C = 20
        StructuredMatrixScaling(device="cpu"),  # 1: penalised
        BetaCalibrator(),  # 3C = 12
        SplineCalibrator(),  # n_knots = 6, and the others' temperature
        SMARTCalibrator(device="cpu"),  # 49
        IsotonicCalibrator(),  # C = 4
        # ODIR leaves the diagonal free: C = 4
        DirichletCalibratorCV(reg_lambdas=[1e-2], reg_mus=[1e-2], cv=2, device="cpu"),
        # plain L2 with 0 in the grid: C^2 + C = 20
        DirichletCalibratorCV(reg_lambdas=[0.0, 1e-2], reg_mus=None, device="cpu"),
    ]
    search = CalibratorSearchCV(candidates, cv=3, random_state=0).fit(X, y)
    res = search.cv_results_
    counts = [0, 1, 1, 8, 20, 1, 12, 7, 49, 4, 4, 20]
    np.testing.assert_array_equal(res["n_parameters"], counts)
    skipped = {c for c, p in enumerate(counts) if 10 * p > events}
    assert skipped and len(skipped) < len(candidates) - 2
    for c, reason in enumerate(res["skipped_reason"]):
        if c in skipped:
            n = counts[c]
            assert reason.startswith(
                f"skipped: {n} free parameters need at least {10 * n} events ("
            ), reason
            assert reason.endswith(f"10 per parameter; got {events:.4g}"), reason
            assert np.isnan(res["mean_test_score"][c])
            assert np.isnan(res["split0_test_score"][c])
            assert res["rank_test_score"][c] == len(candidates) - len(skipped) + 1
        else:
            assert reason == "", reason
            assert np.isfinite(res["mean_test_score"][c])
    assert search.best_index_ not in skipped
    # no guard, no skipping
    few = [candidates[0], candidates[4]]
    res = CalibratorSearchCV(few, guard=None, cv=3).fit(X, y).cv_results_
    assert list(res["skipped_reason"]) == ["", ""]


def test_weights_count_as_kish_effective_events():
    """600 rows, but weights concentrated on 60: VectorScaling(reg_lambda=0) (2C =
    6 parameters) is skipped with the weights only; the events are counted
    as Kish's effective sample size of the wrong (or right) rows."""
    X, y = make_miscalibrated_logits(600, 3, temperature=2.0, random_state=0)
    w = np.full(600, 1e-3)
    w[::10] = 1.0
    wrong = X.argmax(axis=1) != y

    def kish(v):
        return v.sum() ** 2 / (v**2).sum()

    events = min(kish(w[wrong]), kish(w[~wrong]))
    assert events < 60 < min(wrong.sum(), (~wrong).sum())
    cal = VectorScaling(reg_lambda=0.0, device="cpu")
    search = CalibratorSearchCV([IdentityCalibrator(), cal], cv=3, random_state=0)
    reasons = search.fit(X, y, sample_weight=w).cv_results_["skipped_reason"]
    assert reasons[0] == "" and reasons[1].startswith("skipped: 6 free parameters")
    assert reasons[1].endswith(f"got {events:.4g}")
    assert search.fit(X, y).cv_results_["skipped_reason"][1] == ""


# ======================================================== failures, errors
def test_a_failing_candidate_is_recorded_not_raised():
    X, y = make_miscalibrated_logits(100, 3, temperature=2.0, random_state=0)
    candidates = [("broken", _Broken()), TemperatureScaling(device="cpu")]
    search = CalibratorSearchCV(candidates, cv=3, random_state=0).fit(X, y)
    res = search.cv_results_
    assert res["skipped_reason"][0] == "failed on fold 0 of 3: ValueError: boom"
    assert np.isnan(res["mean_test_score"][0]) and np.isnan(res["mean_fit_time"][0])
    assert list(res["rank_test_score"]) == [2, 1]
    assert search.selected_ == "TemperatureScaling"
    # failing on one fold only: the one whose training part has a unique size
    folds = list(StratifiedKFold(3, shuffle=True, random_state=0).split(X, y))
    sizes = [len(train) for train, _ in folds]
    k = next(k for k, n in enumerate(sizes) if sizes.count(n) == 1)
    candidates = [("broken", _Broken(n_bad=sizes[k])), TemperatureScaling(device="cpu")]
    search = CalibratorSearchCV(candidates, cv=3, random_state=0).fit(X, y)
    reason = search.cv_results_["skipped_reason"][0]
    assert reason == f"failed on fold {k} of 3: ValueError: boom"
    with pytest.raises(ValueError, match="no candidate could be scored") as info:
        CalibratorSearchCV([_Broken(), _Broken()], cv=3).fit(X, y)
    assert "_Broken-1: failed on fold 0 of 3: ValueError: boom" in str(info.value)


@pytest.mark.parametrize(
    "candidates, error, match",
    [
        ([], ValueError, "candidates is empty"),
        (["passthrough"], TypeError, r"candidates\[0\] must be a calibrator.*str"),
        ([("", IdentityCalibrator())], ValueError, "non-empty string name"),
        ([("a", IdentityCalibrator(), 1)], ValueError, r"\(name, calibrator\) pair"),
        (
            [("a", IdentityCalibrator()), ("a", IdentityCalibrator())],
            ValueError,
            r"names must be unique; \['a'\]",
        ),
    ],
)
def test_bad_candidates_are_refused(candidates, error, match):
    X, y = make_miscalibrated_logits(60, 3, random_state=0)
    with pytest.raises(error, match=match):
        CalibratorSearchCV(candidates).fit(X, y)


def test_bad_input_gives_a_clear_error_before_any_candidate_runs():
    X, y = make_miscalibrated_logits(60, 3, random_state=0)
    bad = X.copy()
    bad[3, 1] = np.nan
    with pytest.raises(ValueError, match="X contains NaN values in 1 row"):
        CalibratorSearchCV([_Broken()]).fit(bad, y)
    with pytest.raises(ValueError, match="must have shape \\(n_samples, n_classes\\)"):
        CalibratorSearchCV([_Broken()]).fit(X[:, 0], y)
    with pytest.raises(ValueError, match="not a valid scoring value"):
        CalibratorSearchCV(scoring="no_such_score").fit(X, y)
    with pytest.raises(ValueError, match="cv=30 stratified folds need at least 30"):
        CalibratorSearchCV([IdentityCalibrator()], cv=30).fit(X, y)
    with pytest.raises(NotFittedError):
        CalibratorSearchCV().predict_proba(X)


def test_cv_splits_out_of_range_are_refused_before_any_candidate_runs():
    """An iterable ``cv`` is checked against the rows of X. Was: a bare
    IndexError, or every candidate failing with one."""
    X, y = make_miscalibrated_logits(60, 3, random_state=0)
    first, second = np.arange(30), np.arange(30, 60)
    bad = [
        (
            (second, np.append(first, 60)),
            "test part of split 1 of cv holds the index 60, out of range for "
            "the 60 rows of X \\(valid: -60 to 59\\)",
        ),
        (
            (np.append(second, -61), first),
            "training part of split 1 of cv holds the index -61",
        ),
        (
            (second + 0.5, first),
            "training part of split 1 of cv must be a 1-D array of integer row "
            "positions .* got dtype float64",
        ),
    ]
    for split, match in bad:
        with pytest.raises(ValueError, match=match):
            CalibratorSearchCV([_Broken()], cv=[(first, second), split]).fit(X, y)
    # in-range negative positions and boolean masks of the rows are valid
    mask = np.arange(60) < 30
    masks = CalibratorSearchCV(_cheap()[:2], cv=[(mask, ~mask), (~mask, mask)])
    positions = CalibratorSearchCV(
        _cheap()[:2], cv=[(first - 60, second), (second, first)]
    )
    np.testing.assert_array_equal(
        masks.fit(X, y).cv_results_["mean_test_score"],
        positions.fit(X, y).cv_results_["mean_test_score"],
    )


def test_small_classes_warn_and_every_candidate_keeps_every_column():
    """A class with 1 row and cv=3: the fold that tests it trains without it
    (the candidate's warning says so), yet every fitted candidate has a column
    for it (the search's classes_)."""
    X, y = make_miscalibrated_logits(90, 3, temperature=2.0, random_state=0)
    labels = np.array(["c", "a", "b"])[y]  # column 0 is "c"
    rows_c = np.flatnonzero(labels == "c")
    labels[rows_c[1:]] = "a"
    with pytest.warns(UserWarning) as caught:
        search = CalibratorSearchCV(
            _cheap()[:2], cv=3, random_state=0, classes=["c", "a", "b"]
        ).fit(X, labels)
    messages = [str(w.message) for w in caught]
    assert any("1 class(es) have fewer than 3 samples" in m for m in messages)
    missing = "candidate 'TemperatureScaling' (1 of 3 folds): 1 class(es) have no"
    assert any(m.startswith(missing) for m in messages), messages
    np.testing.assert_array_equal(search.classes_, ["c", "a", "b"])
    np.testing.assert_array_equal(search.best_calibrator_.classes_, ["c", "a", "b"])
    assert np.isfinite(search.cv_results_["mean_test_score"]).all()


# ================================================== parallelism, seeds, glue
def test_n_jobs_does_not_change_the_results():
    X, y = make_miscalibrated_logits(200, 3, temperature=2.0, random_state=0)
    params = dict(candidates=_cheap(), cv=3, random_state=0)
    one = CalibratorSearchCV(**params, n_jobs=1).fit(X, y)
    two = CalibratorSearchCV(**params, n_jobs=2).fit(X, y)
    for key, value in one.cv_results_.items():
        if "time" not in key:
            np.testing.assert_array_equal(two.cv_results_[key], value, err_msg=key)
    assert one.selection_reason_ == two.selection_reason_
    np.testing.assert_array_equal(two.predict_proba(X), one.predict_proba(X))


def test_threading_backend_gives_the_same_results():
    X, y = make_miscalibrated_logits(200, 3, temperature=2.0, random_state=0)
    params = dict(candidates=_cheap()[:3], cv=3, random_state=0)
    one = CalibratorSearchCV(**params).fit(X, y)
    with joblib.parallel_backend("threading", n_jobs=2):
        two = CalibratorSearchCV(**params, n_jobs=2).fit(X, y)
    np.testing.assert_array_equal(
        two.cv_results_["mean_test_score"], one.cv_results_["mean_test_score"]
    )
    assert two.selected_ == one.selected_


def test_random_state_seeds_the_folds_and_the_candidates():
    """Same seed, same results, also for candidates whose own random_state is
    None (DirichletCalibratorCV's folds); another seed, other folds."""
    X, y = make_miscalibrated_logits(120, 3, temperature=2.0, random_state=0)
    dir_cv = DirichletCalibratorCV(reg_lambdas=[1e-1, 1e-3], reg_mus=[1e-2], cv=2)
    params = dict(candidates=[dir_cv.set_params(device="cpu")], cv=2, guard=None)
    a = CalibratorSearchCV(**params, random_state=0).fit(X, y)
    b = CalibratorSearchCV(**params, random_state=0).fit(X, y)
    c = CalibratorSearchCV(**params, random_state=1).fit(X, y)
    assert isinstance(a.best_calibrator_.random_state, int)
    assert dir_cv.random_state is None  # the user's candidate is untouched
    np.testing.assert_array_equal(
        a.cv_results_["split0_test_score"], b.cv_results_["split0_test_score"]
    )
    np.testing.assert_array_equal(a.predict_proba(X), b.predict_proba(X))
    assert a.cv_results_["split0_test_score"] != c.cv_results_["split0_test_score"]


def test_clone_and_pickle_give_the_same_predictions():
    X, y = make_miscalibrated_logits(150, 3, temperature=2.0, random_state=0)
    search = CalibratorSearchCV(_cheap(), cv=3, random_state=0).fit(X, y)
    P = search.predict_proba(X)
    restored = pickle.loads(pickle.dumps(search))
    np.testing.assert_array_equal(restored.predict_proba(X), P)
    np.testing.assert_array_equal(restored.predict(X), search.predict(X))
    again = clone(search).fit(X, y)
    np.testing.assert_array_equal(again.predict_proba(X), P)
    assert not hasattr(clone(search), "best_calibrator_")


def test_predictions_are_the_refitted_winners():
    X, y = make_miscalibrated_logits(150, 3, temperature=2.0, random_state=0)
    w = np.random.default_rng(1).uniform(0.5, 1.5, 150)
    search = CalibratorSearchCV(_cheap(), cv=3, random_state=0)
    search.fit(X, y, sample_weight=w)
    winner = clone(_cheap()[search.best_index_]).fit(X, y, sample_weight=w)
    np.testing.assert_array_equal(search.predict_proba(X), winner.predict_proba(X))
    np.testing.assert_array_equal(search.predict(X), winner.predict(X))
    np.testing.assert_allclose(
        search.decision_function(X), winner.decision_function(X), rtol=1e-15
    )
    np.testing.assert_allclose(
        search.score(X, y), winner.score(X, y), rtol=1e-15, atol=0
    )
    assert search.n_features_in_ == 3


def test_inside_calibrated_classifier_and_pipeline():
    """The wrapper sets input and classes on the search, which passes them on."""
    rng = np.random.RandomState(0)
    F = rng.standard_normal((700, 5))
    labels = np.array(["x", "y", "z"])[
        np.argmax(F[:, :3] + rng.gumbel(size=(700, 3)), 1)
    ]
    clf = LogisticRegression(C=100.0).fit(F[:300], labels[:300])
    search = CalibratorSearchCV(_cheap()[:3], cv=3, random_state=0)
    for response, kind in [("decision_function", "logits"), ("predict_proba", "proba")]:
        wrapped = CalibratedClassifier(
            FrozenEstimator(clf), calibrator=search, response_method=response
        ).fit(F[300:], labels[300:])
        fitted = wrapped.calibrator_  # the search, fitted (issue 37)
        assert fitted is wrapped.calibrated_classifiers_[0].calibrator
        assert fitted.selected_ == fitted.cv_results_["candidate"][fitted.best_index_]
        assert fitted.input == kind and fitted.best_calibrator_.input == kind
        np.testing.assert_array_equal(fitted.classes_, ["x", "y", "z"])
        direct = clone(search).set_params(input=kind, classes=clf.classes_)
        direct.fit(getattr(clf, response)(F[300:]), labels[300:])
        np.testing.assert_array_equal(
            wrapped.predict_proba(F[:50]),
            direct.predict_proba(getattr(clf, response)(F[:50])),
        )
    X, y = make_miscalibrated_logits(150, 3, temperature=2.0, random_state=0)
    pipe = Pipeline(
        [("times3", FunctionTransformer(_times_three)), ("search", clone(search))]
    ).fit(X, y)
    direct = clone(search).fit(3.0 * X, y)
    np.testing.assert_array_equal(pipe.predict_proba(X), direct.predict_proba(3 * X))


def test_integer_weights_are_repetitions_when_the_folds_keep_copies_together():
    """Folds drawn on the distinct rows, each row's copies in its fold.

    Identity and temperature scaling (whose fits treat integer weights as
    repetitions) then get the same split scores and the same selection;
    zero-weight rows count in neither. (With an int cv the two data sets
    are split differently: a repeated row can be in a training and a test
    fold at once, a weighted row cannot.)
    """
    X, y = make_miscalibrated_logits(200, 3, temperature=3.0, random_state=0)
    w = np.random.default_rng(0).integers(0, 4, 200)
    folds = list(StratifiedKFold(4, shuffle=True, random_state=0).split(X, y))
    owner = np.repeat(np.arange(200), w)  # the distinct row of each copy
    rep_folds = [
        (np.flatnonzero(np.isin(owner, tr)), np.flatnonzero(np.isin(owner, te)))
        for tr, te in folds
    ]
    candidates = [IdentityCalibrator(), TemperatureScaling(device="cpu")]
    weighted = CalibratorSearchCV(candidates, cv=folds).fit(X, y, sample_weight=w)
    repeated = CalibratorSearchCV(candidates, cv=rep_folds).fit(X[owner], y[owner])
    for k in range(4):
        key = f"split{k}_test_score"
        np.testing.assert_allclose(
            weighted.cv_results_[key], repeated.cv_results_[key], rtol=1e-9
        )
    assert weighted.selected_ == repeated.selected_ == "TemperatureScaling"
    np.testing.assert_allclose(
        weighted.predict_proba(X), repeated.predict_proba(X), rtol=1e-9
    )


def test_weights_are_relative():
    X, y = make_miscalibrated_logits(150, 3, temperature=2.0, random_state=0)
    w = np.random.default_rng(0).uniform(0.1, 2.0, 150)
    a = CalibratorSearchCV(_cheap(), cv=3, random_state=0).fit(X, y, sample_weight=w)
    b = CalibratorSearchCV(_cheap(), cv=3, random_state=0)
    b.fit(X, y, sample_weight=1e6 * w)
    np.testing.assert_allclose(
        a.cv_results_["mean_test_score"], b.cv_results_["mean_test_score"], rtol=1e-7
    )
    assert a.selected_ == b.selected_


def test_duplicate_class_names_get_numbered():
    X, y = make_miscalibrated_logits(90, 3, random_state=0)
    candidates = [
        TemperatureScaling(device="cpu"),
        ("TemperatureScaling-1", IdentityCalibrator()),
        TemperatureScaling(tol=1e-8, device="cpu"),
        VectorScaling(device="cpu"),
    ]
    search = CalibratorSearchCV(candidates, cv=3, random_state=0).fit(X, y)
    assert list(search.cv_results_["candidate"]) == [
        "TemperatureScaling-2",
        "TemperatureScaling-1",
        "TemperatureScaling-3",
        "VectorScaling",
    ]


def test_verbose_prints_one_line_per_candidate(capsys):
    """What runs, the skipped candidates, then one line per candidate in the
    order its folds finish (in order without n_jobs), then the selection."""
    X, y = make_miscalibrated_logits(100, 3, temperature=2.0, random_state=0)
    candidates = [_Broken(), MatrixScaling(reg_lambda=0.0), *_cheap()[:2]]
    CalibratorSearchCV(candidates, cv=3, random_state=0).fit(X, y)
    assert capsys.readouterr() == ("", "")
    CalibratorSearchCV(candidates, cv=3, random_state=0, verbose=1).fit(X, y)
    out, err = capsys.readouterr()
    lines = err.splitlines()
    assert out == "" and len(lines) == 6
    assert lines[0].startswith("[CalibratorSearchCV] scoring 3 of 4 candidates x 3")
    assert lines[1].startswith("[CalibratorSearchCV] MatrixScaling ")
    assert "skipped: 12 free parameters" in lines[1]
    assert lines[2].startswith("[CalibratorSearchCV] _Broken ")
    assert "failed on fold 0 of 3: ValueError: boom [1/3, " in lines[2]
    assert re.search(r"IdentityCalibrator +score -\d\.\d+ \+- \d.* \[2/3, ", lines[3])
    assert re.search(r"TemperatureScaling +score -\d\.\d+ \+- \d.* \[3/3, ", lines[4])
    assert lines[5].startswith("[CalibratorSearchCV] selected ")


def test_fold_warnings_are_raised_once_per_candidate():
    """MatrixScaling stopped after 2 iterations warns on every fold: one warning."""
    X, y = make_miscalibrated_logits(120, 3, temperature=2.0, random_state=0)
    cal = MatrixScaling(reg_lambda=0.0, max_iter=2, device="cpu")
    with pytest.warns(Warning) as caught:
        CalibratorSearchCV([("ms", cal)], cv=3, random_state=0, guard=None).fit(X, y)
    messages = [str(w.message) for w in caught]
    from_folds = [m for m in messages if m.startswith("candidate 'ms' (3 of 3 folds)")]
    assert len(from_folds) == 1, messages
    assert all(w.filename == __file__ for w in caught)


def test_the_default_candidates_fit():
    """The default set on 600 rows x 4 classes (2 folds, to keep it quick)."""
    X, y = make_miscalibrated_logits(600, 4, temperature=2.0, random_state=0)
    search = CalibratorSearchCV(cv=2, random_state=0).fit(X, y)
    res = search.cv_results_
    assert list(res["candidate"]) == [
        "IdentityCalibrator",
        "TemperatureScaling",
        "VectorScaling",
        "StructuredMatrixScaling",
        "StructuredVectorScaling",
        "DirichletCalibratorCV",
    ]
    # 600 rows: enough events for every candidate; Dirichlet-CV only runs
    # from 5,000 rows and 20 classes
    wrong = X.argmax(axis=1) != y
    events = min(wrong.sum(), (~wrong).sum())
    assert 60 < events
    skipped = [bool(reason) for reason in res["skipped_reason"]]
    assert skipped == [False] * 5 + [True]
    assert res["skipped_reason"][5] == (
        "skipped: a default candidate run only where it has won on the benchmark, "
        "from 5000 rows and 20 classes (600 rows x 4 classes here); pass your own "
        "candidates, e.g. [DirichletCalibratorCV(), ...], to include it"
    )
    assert np.isfinite(res["mean_test_score"][~np.array(skipped)]).all()
    assert search.selected_ != "IdentityCalibrator"  # temperature 2 is corrected
    P = search.predict_proba(X)
    np.testing.assert_allclose(P.sum(axis=1), 1.0, rtol=1e-12)


def test_guard_never_falls_back_to_a_simple_candidate_worse_than_identity():
    """One enormous out-of-fold loss of temperature scaling (a fold fitted on
    error-free rows) makes its mean far worse than identity's but its
    standard error huge: the reference stays identity, and a candidate that
    beats identity clearly is selected, not temperature scaling."""
    rng = np.random.default_rng(0)
    n = 100
    identity = rng.uniform(0.1, 0.3, n)
    richer = identity - 0.02 + rng.normal(0, 0.005, n)
    ts = richer - 0.01  # better than the richer candidate on every row but one
    ts[7] = 700.0  # one catastrophic row
    # the former rule (first simple candidate within one standard error of
    # the best) kept temperature scaling here
    d = ts - richer
    assert d.mean() <= sem(d)
    losses = np.array([identity, ts, richer])
    search = CalibratorSearchCV(guard="one_se")
    search.cv_results_ = {"mean_test_score": -losses.mean(axis=1)}
    names = ["IdentityCalibrator", "TemperatureScaling", "IsotonicCalibrator"]
    templates = [IdentityCalibrator(), TemperatureScaling(), IsotonicCalibrator()]
    index, reason = search._select(names, templates, _RowLosses(losses, np.ones(n)))
    assert index == 2, reason
    assert "IdentityCalibrator stays the simple reference" in reason
    diff = identity - richer  # the comparison that decides, recomputed
    assert f"by {diff.mean():.4g} (one standard error: {sem(diff):.4g})" in reason
    # with the richer candidate within noise of identity, identity is kept
    noise = rng.normal(0, 0.01, n)
    losses[2] = identity - 0.0005 + (noise - noise.mean())
    search.cv_results_ = {"mean_test_score": -losses.mean(axis=1)}
    index, reason = search._select(names, templates, _RowLosses(losses, np.ones(n)))
    assert index == 0, reason
    assert reason.startswith("IdentityCalibrator kept by the one-standard-error")


def _three_classes_with_errors(n_wrong, n=80, seed=0):
    """Confident 3-class logits whose top class is wrong on ``n_wrong`` rows."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 3, n)
    X = 4.0 * np.eye(3)[y] + rng.normal(scale=0.5, size=(n, 3))
    wrong = rng.permutation(n) < n_wrong
    X[wrong] = np.roll(X[wrong], 1, axis=1)
    return X, y


@pytest.mark.parametrize("n_wrong", [4, 5, 9])
def test_temperature_scaling_needs_five_events_other_parameters_ten(n_wrong):
    # 80 rows: temperature scaling's one shared parameter needs 5 events,
    # the penalised vector scaling (also counted 1) needs 10
    X, y = _three_classes_with_errors(n_wrong)
    events = min((X.argmax(1) != y).sum(), (X.argmax(1) == y).sum())
    assert events == n_wrong
    candidates = [
        IdentityCalibrator(),
        TemperatureScaling(device="cpu"),
        VectorScaling(device="cpu"),
    ]
    search = CalibratorSearchCV(candidates, cv=3, random_state=0).fit(X, y)
    res = search.cv_results_
    assert list(res["n_parameters"]) == [0, 1, 1]
    assert res["skipped_reason"][0] == ""
    if n_wrong < 5:
        assert res["skipped_reason"][1] == (
            "skipped: 1 free parameter needs at least 5 events (calibration rows "
            "the classifier gets wrong, or right if those are fewer: what a "
            "calibration map learns from), its one parameter is shared by every "
            f"class; got {n_wrong}"
        )
        assert np.isnan(res["mean_test_score"][1])
        assert search.selected_ == "IdentityCalibrator"
    else:
        assert res["skipped_reason"][1] == ""
        assert np.isfinite(res["mean_test_score"][1])
    assert res["skipped_reason"][2] == (
        "skipped: 1 free parameter needs at least 10 events (calibration rows "
        "the classifier gets wrong, or right if those are fewer: what a "
        f"calibration map learns from), 10 per parameter; got {n_wrong}"
    )


def _fast_defaults(monkeypatch):
    """The default candidates, with short fits, on the CPU (patched in)."""
    from skcal.model_selection import _search as module

    fast = [
        c.set_params(max_iter=5) if "max_iter" in c.get_params() else c
        for c in module._default_candidates()
    ]
    for c in fast:
        if "device" in c.get_params():
            c.set_params(device="cpu")
    monkeypatch.setattr(module, "_default_candidates", lambda: fast)
    return fast


def test_default_dirichlet_cv_runs_only_from_its_rows_and_classes(monkeypatch):
    from skcal.model_selection import _search as module

    X, y = make_miscalibrated_logits(600, 21, temperature=2.0, random_state=0)
    fast = _fast_defaults(monkeypatch)
    dirichlet = [type(c).__name__ for c in fast].index("DirichletCalibratorCV")
    monkeypatch.setattr(module, "DIRICHLET_CV_MAX_WORK", math.inf)
    reasons = {}
    for rows, classes in [(600, 21), (601, 21), (600, 22)]:
        monkeypatch.setattr(module, "DIRICHLET_CV_MIN_ROWS", rows)
        monkeypatch.setattr(module, "DIRICHLET_CV_MIN_CLASSES", classes)
        search = CalibratorSearchCV(cv=2, random_state=0).fit(X, y)
        reasons[rows, classes] = search.cv_results_["skipped_reason"][dirichlet]
    assert reasons[600, 21] == ""  # 600 rows x 21 classes: at the thresholds
    for rows, classes in [(601, 21), (600, 22)]:
        assert reasons[rows, classes].startswith(
            "skipped: a default candidate run only where it has won on the "
            f"benchmark, from {rows} rows and {classes} classes (600 rows x 21 "
            "classes here)"
        )
    # a user's own list is not the default set: it runs
    own = CalibratorSearchCV([IdentityCalibrator(), fast[dirichlet]], cv=2)
    assert own.fit(X, y).cv_results_["skipped_reason"][1] == ""


def test_default_dirichlet_cv_is_skipped_above_its_cpu_budget(monkeypatch):
    from skcal.model_selection import _search as module

    X, y = make_miscalibrated_logits(600, 21, temperature=2.0, random_state=0)
    fast = _fast_defaults(monkeypatch)
    monkeypatch.setattr(module, "DIRICHLET_CV_MIN_ROWS", 0)
    monkeypatch.setattr(module, "DIRICHLET_CV_MIN_CLASSES", 0)
    names = [type(c).__name__ for c in fast]
    dirichlet = names.index("DirichletCalibratorCV")
    # its work over 2 folds: 3 x 3 candidates x 3 inner folds x 600 rows x
    # 21^2 x 5 / 1000 iterations, by hand
    work = 2 * 9 * 3 * 600 * 21**2 * 5 / 1000
    monkeypatch.setattr(module, "DIRICHLET_CV_MAX_WORK", work * 0.99)
    res = CalibratorSearchCV(cv=2, random_state=0).fit(X, y).cv_results_
    assert res["skipped_reason"][dirichlet].startswith(
        "skipped: a default candidate whose inner grid would take minutes"
    )
    assert "600 rows x 21 classes x 2 folds" in res["skipped_reason"][dirichlet]
    assert np.isnan(res["mean_test_score"][dirichlet])
    # a user's own list keeps it; within the budget the default one runs
    own = CalibratorSearchCV(
        [IdentityCalibrator(), fast[dirichlet]], cv=2, random_state=0
    ).fit(X, y)
    assert own.cv_results_["skipped_reason"][1] == ""
    monkeypatch.setattr(module, "DIRICHLET_CV_MAX_WORK", work * 1.01)
    res = CalibratorSearchCV(cv=2, random_state=0).fit(X, y).cv_results_
    assert res["skipped_reason"][dirichlet] == ""
    assert np.isfinite(res["mean_test_score"][dirichlet])


def test_penalised_maps_count_one_parameter_per_five_classes():
    # 12 classes and 15-19 events: temperature scaling (1 parameter) is
    # kept; the penalised vector scaling and SMS count ceil(12 / 5) = 3
    # parameters (30 events) and are skipped; unpenalised vector scaling
    # counts 2C = 24
    rng = np.random.default_rng(3)
    n, n_classes = 120, 12
    y = rng.integers(0, n_classes, n)
    X = 5.0 * np.eye(n_classes)[y] + rng.normal(scale=0.5, size=(n, n_classes))
    wrong = rng.permutation(n) < 17
    X[wrong] = np.roll(X[wrong], 1, axis=1)
    events = min((X.argmax(1) != y).sum(), (X.argmax(1) == y).sum())
    assert 10 <= events < 30
    candidates = [
        IdentityCalibrator(),
        TemperatureScaling(device="cpu"),
        VectorScaling(device="cpu"),
        StructuredMatrixScaling(device="cpu"),
        VectorScaling(reg_lambda=0.0, device="cpu"),
    ]
    search = CalibratorSearchCV(candidates, cv=3, random_state=0).fit(X, y)
    res = search.cv_results_
    assert list(res["n_parameters"]) == [0, 1, 3, 3, 24]
    assert list(res["skipped_reason"][:2]) == ["", ""]
    for c in (2, 3, 4):
        assert res["skipped_reason"][c].startswith("skipped:")


def test_the_guard_judges_by_the_users_scoring():
    """scoring="ece": the winner by ECE is compared with the simple candidates
    by the paired differences of the fold ECEs (recomputed here with
    scikit-learn's folds and the metric function), not by log loss, which
    kept temperature scaling (TopVersusAll's isotonic map has a far worse
    log loss on these 600 rows: 1.89 against 0.74)."""
    from skcal.metrics import expected_calibration_error

    X, y = make_miscalibrated_logits(600, 4, temperature=2.0, random_state=4)
    candidates = [
        IdentityCalibrator(),
        TemperatureScaling(),
        TopVersusAll(IsotonicCalibrator()),
    ]
    search = CalibratorSearchCV(candidates, scoring="ece", cv=5, random_state=0)
    search.fit(X, y)
    ece = np.zeros((3, 5))
    folds = StratifiedKFold(5, shuffle=True, random_state=0).split(X, y)
    for k, (train, test) in enumerate(folds):
        for c, cal in enumerate(candidates):
            P = clone(cal).fit(X[train], y[train]).predict_proba(X[test])
            ece[c, k] = expected_calibration_error(y[test], P)
    # the one-standard-error rule on the fold ECEs: temperature scaling
    # replaces identity as the reference where it beats it, and
    # TopVersusAll is selected where it beats the reference
    d_ts = ece[0] - ece[1]
    reference = 1 if d_ts.mean() > sem(d_ts) else 0
    d = ece[reference] - ece[2]
    assert d.mean() > sem(d)
    assert search.selected_ == "TopVersusAll", search.selection_reason_
    names = ["IdentityCalibrator", "TemperatureScaling"]
    expected = (
        f"TopVersusAll lowers the held-out expected_calibration_error of "
        f"{names[reference]} by {d.mean():.4g} on average over the 5 folds "
        f"(one standard error: {sem(d):.4g})"
    )
    assert expected in search.selection_reason_, search.selection_reason_
    assert "log loss" not in search.selection_reason_


# ====================================== sample weights: validated once per fit
def _count_weight_checks(monkeypatch):
    """Count every validation of non-None sample weights in skcal: the
    lengths of the weights given to ``check_sample_weight``, wherever it is
    imported."""
    import sys

    from skcal.utils import _validation

    real, lengths = _validation.check_sample_weight, []

    def counting(sample_weight, *args, **kwargs):
        if sample_weight is not None:
            lengths.append(len(sample_weight))
        return real(sample_weight, *args, **kwargs)

    for name, module in list(sys.modules.items()):
        if (
            name.startswith("skcal")
            and getattr(module, "check_sample_weight", None) is real
        ):
            monkeypatch.setattr(module, "check_sample_weight", counting)
    return lengths


def test_sample_weights_are_validated_once_per_public_fit(monkeypatch):
    """Each public ``fit`` validates the weights it is given once: the
    wrapper's, the search's, and each candidate's fit (two folds and the
    refit per candidate); the search used to validate them twice."""
    X, y = make_miscalibrated_logits(300, 3, temperature=2.0, random_state=0)
    w = np.random.default_rng(0).uniform(0.5, 2.0, len(y)).tolist()  # a list
    lengths = _count_weight_checks(monkeypatch)
    IdentityCalibrator().fit(X, y, sample_weight=w)
    assert lengths == [300]  # a calibrator alone: once
    lengths.clear()
    candidates = [IdentityCalibrator(), TemperatureScaling(device="cpu")]
    search = CalibratorSearchCV(candidates, cv=2, random_state=0, guard=None)
    search.fit(X, y, sample_weight=w)
    folds = sorted(len(train) for train, _ in search._folds(X, y))
    # the search once, then 2 candidates x 2 folds, then the refit
    assert sorted(lengths) == sorted([300, *folds, *folds, 300])
    # inside the wrapper (a frozen classifier: it gets no weights): one more
    rng = np.random.default_rng(1)
    features = rng.normal(size=(300, 4))
    labels = (features[:, 0] > 0).astype(int) + (features[:, 1] > 1)
    clf = LogisticRegression().fit(features, labels)
    lengths.clear()
    CalibratedClassifier(FrozenEstimator(clf), calibrator=clone(search)).fit(
        features, labels, sample_weight=w
    )
    assert len(lengths) == 1 + 1 + 2 * 2 + 1, lengths
    assert lengths.count(300) == 3  # wrapper, search, refit


def test_weights_validated_once_still_refuse_bad_weights():
    X, y = make_miscalibrated_logits(100, 3, temperature=2.0, random_state=0)
    search = CalibratorSearchCV([IdentityCalibrator()], cv=2)
    with pytest.raises(ValueError, match="(?i)negative"):
        search.fit(X, y, sample_weight=-np.ones(len(y)))
    with pytest.raises(ValueError, match="non-zero"):
        search.fit(X, y, sample_weight=np.zeros(len(y)))
    with pytest.raises(ValueError, match=r"\(99,\)|99"):
        search.fit(X, y, sample_weight=np.ones(99))
    # the weights' scale changes nothing; the user's array is not modified
    w = np.linspace(1.0, 3.0, len(y))
    kept = w.copy()
    a = CalibratorSearchCV([IdentityCalibrator()], cv=2, random_state=0)
    b = clone(a)
    a.fit(X, y, sample_weight=w)
    b.fit(X, y, sample_weight=1e6 * w)
    np.testing.assert_array_equal(w, kept)
    np.testing.assert_allclose(
        a.cv_results_["mean_test_score"], b.cv_results_["mean_test_score"]
    )


# ============================================================ max_time
class _Sleepy(IdentityCalibrator):
    """The identity map, whose fit takes ``delay`` seconds."""

    def __init__(self, *, input="logits", classes=None, delay=0.05):
        super().__init__(input=input, classes=classes)
        self.delay = delay

    def fit(self, X, y, sample_weight=None):
        import time

        time.sleep(self.delay)
        return super().fit(X, y, sample_weight=sample_weight)


@pytest.mark.parametrize("max_time", [-1.0, "1s", [1.0]])
def test_max_time_is_validated(max_time):
    X, y = make_miscalibrated_logits(100, 3, temperature=2.0, random_state=0)
    search = CalibratorSearchCV([IdentityCalibrator()], max_time=max_time)
    with pytest.raises(ValueError, match="max_time"):
        search.fit(X, y)


def test_max_time_skips_the_candidates_after_the_budget():
    X, y = make_miscalibrated_logits(400, 3, temperature=2.0, random_state=0)
    candidates = [
        ("sleepy", _Sleepy(delay=0.05)),
        ("late", _Sleepy(delay=0.0)),
        TemperatureScaling(device="cpu"),
        IdentityCalibrator(),
        ("later", VectorScaling(device="cpu")),
    ]
    # 2 folds of 0.05 s: the budget of 0.01 s is spent after the first
    search = CalibratorSearchCV(candidates, cv=2, max_time=0.01, random_state=0)
    res = search.fit(X, y).cv_results_
    reasons = list(res["skipped_reason"])
    for c in (1, 4):
        assert reasons[c].startswith(
            "skipped: the time budget max_time=0.01 s was spent before its turn ("
        ), reasons[c]
        assert np.isnan(res["mean_test_score"][c])
    # the first candidate, temperature scaling and identity always run
    assert reasons[0] == reasons[2] == reasons[3] == ""
    assert search.selected_ == "TemperatureScaling"  # temperature 2
    # max_time=0 keeps only those; a large budget or None runs everything
    zero = clone(search).set_params(max_time=0).fit(X, y).cv_results_
    assert [bool(r) for r in zero["skipped_reason"]] == [
        False,
        True,
        False,
        False,
        True,
    ]
    scores = {}
    for max_time in (None, 1e6):
        fitted = clone(search).set_params(max_time=max_time).fit(X, y)
        assert not any(fitted.cv_results_["skipped_reason"])
        scores[max_time] = fitted.cv_results_["mean_test_score"]
    np.testing.assert_array_equal(scores[None], scores[1e6])
    np.testing.assert_array_equal(
        zero["mean_test_score"][[0, 2, 3]], scores[None][[0, 2, 3]]
    )


def test_the_default_set_is_the_docs_table():
    """The table of doc/choosing.rst ("How the default set was chosen")
    lists the default candidates in order, with the rule of Dirichlet-CV."""
    from pathlib import Path

    from skcal.model_selection import _search as module

    text = (Path(__file__).parents[2] / "doc" / "choosing.rst").read_text()
    table = text.split(".. list-table:: The default candidates")[1]
    rows = []
    for line in table.split("\n")[3:]:  # after the options and a blank line
        if line.startswith("   * - "):
            rows.append([line[len("   * - ") :]])
        elif line.startswith("     - "):
            rows[-1].append(line[len("     - ") :])
        else:
            break
    assert rows[0][:2] == ["candidate", "default"]
    named = {}
    for cells in rows[1:]:
        name = re.fullmatch(r":class:`~skcal\.(\w+)`", cells[0])
        named[name.group(1)] = cells[1]
    defaults = [type(c).__name__ for c in module._default_candidates()]
    assert [name for name, cell in named.items() if cell != "no"] == defaults
    assert named["DirichletCalibratorCV"] == (
        f"from {module.DIRICHLET_CV_MIN_ROWS:,} rows and "
        f"{module.DIRICHLET_CV_MIN_CLASSES} classes"
    )
    assert {"SMARTCalibrator", "IsotonicCalibrator"} <= set(named)  # and why not
