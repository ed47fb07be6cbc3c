"""CalibratorSearchCV with groups: group-aware candidates in the search (issue 55)."""

import pickle

import numpy as np
import pytest
from sklearn.base import BaseEstimator, ClassifierMixin, clone
from sklearn.datasets import load_digits
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import log_loss
from sklearn.model_selection import StratifiedKFold
from threadpoolctl import threadpool_limits

from skcal import (
    GroupedTemperatureScaling,
    GroupedVectorScaling,
    IdentityCalibrator,
    TemperatureScaling,
)
from skcal.model_selection import CalibratorSearchCV
from skcal.utils._testing import sample_labels, softmax_rows


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    with threadpool_limits(1):
        yield


def _simple(seed=0):
    return [
        IdentityCalibrator(),
        TemperatureScaling(device="cpu"),
        GroupedTemperatureScaling(cv=3, random_state=seed),
    ]


@pytest.fixture(scope="module")
def digits_logits():
    """Logits of a real task: a logistic regression on 600 digits, scored
    on the 1,197 others (about 90% right); the feature bin of each row (4
    quantile bins of its total ink) as its group."""
    X, y = load_digits(return_X_y=True)
    model = LogisticRegression(C=1e-3, max_iter=2000).fit(X[:600], y[:600])
    Z, yc = model.decision_function(X[600:]), y[600:]
    ink = X[600:].sum(axis=1)
    groups = np.searchsorted(np.quantile(ink, [0.25, 0.5, 0.75]), ink)
    return Z, yc, groups


def _shifted(Z, groups, factors, seed):
    """Logits whose calibrated probabilities are ``softmax(Z * factor_g)``
    and the labels drawn from them: group ``g`` is mis-scaled by ``factor_g``."""
    rng = np.random.default_rng(seed)
    scaled = Z * np.asarray(factors)[groups][:, None]
    return sample_labels(softmax_rows(scaled), rng)


def test_grouped_candidate_is_selected_only_when_groups_differ(digits_logits):
    Z, _, groups = digits_logits
    # temperatures 0.25 to 4 by ink bin: one pooled temperature cannot fit
    y = _shifted(Z, groups, [0.25, 0.6, 1.5, 4.0], seed=1)
    search = CalibratorSearchCV(_simple(), cv=3, random_state=0)
    search.fit(Z, y, groups=groups)
    assert search.selected_ == "GroupedTemperatureScaling"
    assert "It beats TemperatureScaling" in search.selection_reason_
    # the same real logits with one common temperature and random groups:
    # nothing to learn by group, the simple candidate is kept
    y = _shifted(Z, groups, [0.5] * 4, seed=1)
    random_groups = np.random.default_rng(2).integers(0, 4, len(y))
    search.fit(Z, y, groups=random_groups)
    assert search.selected_ == "TemperatureScaling"


def test_fold_scores_equal_a_loop_over_the_same_folds():
    rng = np.random.default_rng(0)
    n = 900
    groups = rng.choice(np.array(["a", "b", "c"]), n)
    Z = rng.normal(size=(n, 3)) * 3
    T = np.select([groups == "a", groups == "b"], [0.5, 2.0], 1.0)
    y = sample_labels(softmax_rows(Z / T[:, None]), rng)
    w = rng.uniform(0.5, 2.0, n)
    folds = list(StratifiedKFold(3, shuffle=True, random_state=0).split(Z, y))

    def reference(train, test, weights):
        cal = GroupedTemperatureScaling(cv=3, random_state=3, classes=[0, 1, 2])
        fit_w = None if weights is None else weights[train]
        cal.fit(Z[train], y[train], groups=groups[train], sample_weight=fit_w)
        proba = cal.predict_proba(Z[test], groups=groups[test])
        test_w = None if weights is None else weights[test]
        return -log_loss(y[test], proba, labels=[0, 1, 2], sample_weight=test_w)

    def neg_log_loss(estimator, X, labels):  # a user's scorer: predict_proba(X)
        return -log_loss(labels, estimator.predict_proba(X), labels=[0, 1, 2])

    grouped = GroupedTemperatureScaling(cv=3, random_state=3)
    # the log loss with weights; a user's scorer, which calls predict_proba(X)
    for weights, scoring in [(w, "neg_log_loss"), (None, neg_log_loss)]:
        search = CalibratorSearchCV(
            [TemperatureScaling(device="cpu"), grouped], cv=folds, scoring=scoring
        ).fit(Z, y, sample_weight=weights, groups=groups)
        got = [search.cv_results_[f"split{k}_test_score"][1] for k in range(3)]
        expected = [reference(train, test, weights) for train, test in folds]
        np.testing.assert_allclose(got, expected, rtol=1e-10)


def test_predictions_forward_groups_to_the_refitted_winner():
    rng = np.random.default_rng(1)
    n = 900
    groups = rng.integers(0, 3, n)
    Z = rng.normal(size=(n, 4)) * 3
    y = sample_labels(softmax_rows(Z / np.array([0.4, 1.0, 2.5])[groups][:, None]), rng)
    search = CalibratorSearchCV(_simple(seed=5), cv=3, random_state=0)
    search.fit(Z, y, groups=groups)
    assert search.selected_ == "GroupedTemperatureScaling"
    assert search.cv_results_["n_parameters"].tolist() == [0, 1, 3]
    by_hand = GroupedTemperatureScaling(cv=3, random_state=5, classes=[0, 1, 2, 3])
    by_hand.fit(Z, y, groups=groups)
    new = rng.normal(size=(50, 4)) * 3
    g_new = np.r_[rng.integers(0, 3, 45), [7] * 5]  # group 7: unseen, pooled
    expected = by_hand.predict_proba(new, groups=g_new)
    np.testing.assert_allclose(search.predict_proba(new, groups=g_new), expected)
    np.testing.assert_allclose(
        search.predict_log_proba(new, groups=g_new), np.log(expected), atol=1e-12
    )
    np.testing.assert_allclose(
        softmax_rows(search.decision_function(new, groups=g_new)), expected
    )
    np.testing.assert_array_equal(
        search.predict(new, groups=g_new), np.argmax(expected, axis=1)
    )
    # the unseen group has the pooled temperature, as rows without groups
    np.testing.assert_allclose(
        search.predict_proba(new[45:], groups=g_new[45:]),
        search.predict_proba(new[45:]),
    )
    np.testing.assert_array_equal(search.groups_, [0, 1, 2])


def test_default_candidates_gain_grouped_temperature_scaling_with_groups():
    rng = np.random.default_rng(0)
    Z = rng.normal(size=(300, 3)) * 2
    y = sample_labels(softmax_rows(Z), rng)
    groups = rng.integers(0, 2, 300)
    search = CalibratorSearchCV(
        cv=2, random_state=0, max_time=0, guard=None
    )  # the first, identity and temperature scaling run; the rest are held back
    names = search.fit(Z, y, groups=groups).cv_results_["candidate"].tolist()
    assert names == [
        "IdentityCalibrator",
        "TemperatureScaling",
        "VectorScaling",
        "StructuredMatrixScaling",
        "StructuredVectorScaling",
        "GroupedTemperatureScaling",
        "DirichletCalibratorCV",
    ]
    assert "GroupedTemperatureScaling" not in search.fit(Z, y).cv_results_["candidate"]


def test_the_guard_counts_groups():
    """Grouped temperature scaling counts one parameter per group, grouped
    vector scaling ``2 C`` per group, both against 10 events each."""
    rng = np.random.default_rng(0)
    n, c, n_groups = 600, 3, 6
    Z = rng.normal(size=(n, c)) * 2
    y = sample_labels(softmax_rows(Z), rng)
    groups = rng.integers(0, n_groups, n)
    errors = np.count_nonzero(Z.argmax(1) != y)
    events = min(errors, n - errors)
    assert n_groups * 10 <= events < 2 * c * n_groups * 10  # 60 <= e < 360
    search = CalibratorSearchCV(
        [TemperatureScaling(device="cpu"), GroupedTemperatureScaling(),
         GroupedVectorScaling()], cv=2, random_state=0,
    ).fit(Z, y, groups=groups)  # fmt: skip
    assert search.cv_results_["n_parameters"].tolist() == [1, 6, 36]
    reasons = search.cv_results_["skipped_reason"]
    assert reasons[1] == ""
    assert reasons[2].startswith("skipped: 36 free parameters need at least 360")


class _RecordsGroups(ClassifierMixin, BaseEstimator):
    """A user's group-aware candidate: uniform probabilities; records the
    groups each call receives."""

    def fit(self, X, y, groups=None):
        self.classes_ = np.unique(y)
        self.fit_groups_ = groups
        self.seen_ = []
        return self

    def predict_proba(self, X, groups=None):
        self.seen_.append(groups)
        return np.full((len(X), len(self.classes_)), 1 / len(self.classes_))


def test_a_user_candidate_with_groups_in_fit_gets_the_fold_groups():
    rng = np.random.default_rng(0)
    Z = rng.normal(size=(120, 3))
    y = np.arange(120) % 3
    groups = np.arange(120) * 10  # one label per row: the row is traceable
    folds = [(np.arange(60), np.arange(60, 120)), (np.arange(60, 120), np.arange(60))]
    search = CalibratorSearchCV(
        [IdentityCalibrator(), _RecordsGroups()], cv=folds, guard=None
    ).fit(Z, y, groups=groups)
    best = search.best_calibrator_
    assert search.selected_ == "_RecordsGroups"  # log 3 < identity's loss here
    np.testing.assert_array_equal(best.fit_groups_, groups)
    search.predict_proba(Z[:5], groups=groups[:5])
    np.testing.assert_array_equal(best.seen_[-1], groups[:5])


def test_a_splitter_receives_the_groups():
    seen = []

    class Halves:
        def split(self, X, y, groups=None):
            seen.append(groups)
            half = len(X) // 2
            yield np.arange(half), np.arange(half, len(X))
            yield np.arange(half, len(X)), np.arange(half)

        def get_n_splits(self, X=None, y=None, groups=None):
            return 2

    rng = np.random.default_rng(0)
    Z = rng.normal(size=(100, 3)) * 3
    y = sample_labels(softmax_rows(Z), rng)
    groups = np.arange(100) % 4
    CalibratorSearchCV(_simple(), cv=Halves()).fit(Z, y, groups=groups)
    np.testing.assert_array_equal(seen[0], groups)


def test_groups_of_a_winner_that_does_not_take_them():
    rng = np.random.default_rng(0)
    Z = rng.normal(size=(300, 3)) * 2
    y = sample_labels(softmax_rows(Z / 2), rng)
    groups = rng.integers(0, 3, 300)
    simple = [IdentityCalibrator(), TemperatureScaling(device="cpu")]
    with pytest.warns(UserWarning, match="no candidate takes them"):
        search = CalibratorSearchCV(simple, cv=3, random_state=0).fit(
            Z, y, groups=groups
        )
    # checked, then unused: the map is the same for every group
    np.testing.assert_array_equal(
        search.predict_proba(Z, groups=groups), search.predict_proba(Z)
    )
    with pytest.raises(ValueError, match=r"expected shape \(300,\), got \(299,\)"):
        search.predict_proba(Z, groups=groups[1:])
    fitted_without = CalibratorSearchCV(simple, cv=3, random_state=0).fit(Z, y)
    assert fitted_without.groups_ is None
    with pytest.raises(ValueError, match="fitted without groups"):
        fitted_without.predict_proba(Z, groups=groups)


def test_bad_groups_in_fit_are_refused_clearly():
    rng = np.random.default_rng(0)
    Z = rng.normal(size=(90, 3))
    y = np.arange(90) % 3
    search = CalibratorSearchCV(_simple(), cv=3)
    with pytest.raises(ValueError, match=r"shape \(90,\); got shape \(89,\)"):
        search.fit(Z, y, groups=np.zeros(89))
    with pytest.raises(ValueError, match=r"shape \(90,\); got shape \(90, 1\)"):
        search.fit(Z, y, groups=np.zeros((90, 1)))
    with pytest.raises(TypeError, match="one sortable type"):
        search.fit(Z, y, groups=np.array([1, "a", 2.5] * 30, dtype=object))
    with pytest.raises(ValueError, match="row identifier"):
        search.fit(np.tile(Z, (120, 1)), np.tile(y, 120), groups=np.arange(10_800))


def test_clone_pickle_and_export_of_the_grouped_winner():
    rng = np.random.default_rng(3)
    n = 600
    groups = rng.integers(0, 2, n)
    Z = rng.normal(size=(n, 3)) * 3
    y = sample_labels(softmax_rows(Z / np.array([0.4, 2.5])[groups][:, None]), rng)
    search = CalibratorSearchCV(_simple(), cv=3, random_state=0)
    assert clone(search).get_params()["cv"] == 3
    search.fit(Z, y, groups=groups)
    assert search.selected_ == "GroupedTemperatureScaling"
    loaded = pickle.loads(pickle.dumps(search))
    np.testing.assert_array_equal(
        loaded.predict_proba(Z, groups=groups), search.predict_proba(Z, groups=groups)
    )
    torch = pytest.importorskip("torch")
    # the winner's module of two inputs: scores and each row's group position
    # (-1, an unseen group: the pooled temperature, as predict_proba(groups=None))
    module = search.to_torch()
    positions = search.group_positions(groups)
    out = module(torch.from_numpy(Z), torch.from_numpy(positions)).numpy()
    np.testing.assert_allclose(out, search.predict_proba(Z, groups=groups), atol=1e-10)
    unseen = torch.full((n,), -1, dtype=torch.int64)
    out = module(torch.from_numpy(Z), unseen).numpy()
    np.testing.assert_allclose(out, search.predict_proba(Z), atol=1e-10)


def test_dask_predictions_split_the_groups_by_row_blocks():
    da = pytest.importorskip("dask.array")
    rng = np.random.default_rng(4)
    n = 600
    groups = rng.integers(0, 2, n)
    Z = rng.normal(size=(n, 3)) * 3
    y = sample_labels(softmax_rows(Z / np.array([0.4, 2.5])[groups][:, None]), rng)
    search = CalibratorSearchCV(_simple(), cv=3, random_state=0)
    # a Dask X and groups in fit are computed (the fit needs every row)
    search.fit(da.from_array(Z, chunks=200), y, groups=da.from_array(groups, 150))
    assert search.selected_ == "GroupedTemperatureScaling"
    dz = da.from_array(Z, chunks=(130, 3))
    for g in (groups, da.from_array(groups, chunks=100)):
        out = search.predict_proba(dz, groups=g)
        assert isinstance(out, da.Array)
        np.testing.assert_array_equal(
            out.compute(), search.predict_proba(Z, groups=groups)
        )
        labels = search.predict(dz, groups=g)
        np.testing.assert_array_equal(
            labels.compute(), search.predict(Z, groups=groups)
        )
    with pytest.raises(ValueError, match="expected shape"):
        search.predict_proba(dz, groups=groups[:-1])
