"""VennAbersCalibrator against its definition and the reference packages.

References: scikit-learn's isotonic regression refitted with the test object
added (the definition of ``p0`` and ``p1``), the ``venn-abers`` package
(``VennAbers``, ``VennAbersCV``, ``predict_proba_prefitted_va``) and MAPIE's
copy of it, on LogisticRegression scores of scikit-learn's bundled data.
"""

import warnings

import numpy as np
import pytest
from scipy.special import softmax
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.datasets import load_breast_cancer, load_digits, load_wine
from sklearn.isotonic import IsotonicRegression
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler

from skcal import VennAbersCalibrator
from skcal.calibrators._venn_abers import _tables_batch, venn_abers_tables
from skcal.exceptions import MissingClassWarning

venn_abers = pytest.importorskip("venn_abers.venn_abers")
mapie_va = pytest.importorskip("mapie._venn_abers")

# the packages compute the same slopes of the same integer sums: equal to
# rounding of the final divisions and renormalisations
TOL = 1e-12


@pytest.fixture(autouse=True)
def _quiet_references():
    # the references divide by zero by design (np.seterr at import, nanmin)
    with np.errstate(divide="ignore", invalid="ignore"), warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=RuntimeWarning)
        yield


def _scores(loader, seed=0):
    """Calibration and test probabilities of a LogisticRegression."""
    X, y = loader(return_X_y=True)
    X = StandardScaler().fit_transform(X)
    X_fit, X_rest, y_fit, y_rest = train_test_split(
        X, y, test_size=0.6, random_state=seed, stratify=y
    )
    X_cal, X_test, y_cal, y_test = train_test_split(
        X_rest, y_rest, test_size=0.5, random_state=seed, stratify=y_rest
    )
    clf = LogisticRegression(C=0.05, max_iter=1000).fit(X_fit, y_fit)
    return clf.predict_proba(X_cal), y_cal, clf.predict_proba(X_test), y_test


class _Frozen(ClassifierMixin, BaseEstimator):
    """A classifier whose probabilities are its features (for VennAbersCV)."""

    def fit(self, X, y):
        self.classes_ = np.unique(y)
        return self

    def predict_proba(self, X):
        return X


def _isotonic_with_test_object(s, labels, w, t, q):
    """``(p0, p1)`` at ``q`` by definition: scikit-learn's isotonic
    regression refitted with ``(q, 0)``, then ``(q, 1)``, of weight ``t``."""
    out = []
    for label in (0.0, 1.0):
        iso = IsotonicRegression().fit(
            np.append(s, q), np.append(labels, label), sample_weight=np.append(w, t)
        )
        out.append(iso.predict([q])[0])
    return out


@pytest.mark.parametrize("seed", range(12))
def test_tables_are_the_isotonic_regressions_with_the_test_object(seed):
    """Ties (scores on a grid), weights and zero weights included."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 30))
    s = rng.integers(0, 6, n) / 6 if seed % 2 else rng.random(n)
    labels = (rng.random(n) < 0.2 + 0.6 * s).astype(float)
    w = rng.integers(0, 4, n).astype(float) if seed % 3 == 0 else np.ones(n)
    w[0] = max(w[0], 1.0)
    t = float(w[w > 0].min())
    knots, p0, p1 = venn_abers_tables(s, labels, w, t)
    queries = np.concatenate(
        [knots, (knots[:-1] + knots[1:]) / 2, [knots[0] - 1, knots[-1] + 1]]
    )
    keep = w > 0
    for q in queries:
        r0, r1 = _isotonic_with_test_object(s[keep], labels[keep], w[keep], t, q)
        assert p0[np.searchsorted(knots, q, "right")] == pytest.approx(r0, abs=1e-12)
        assert p1[np.searchsorted(knots, q, "left")] == pytest.approx(r1, abs=1e-12)


def test_batched_tables_are_the_isotonic_regressions_with_the_test_object():
    """The vectorised path (many problems at once, of different lengths)."""
    rng = np.random.default_rng(7)
    problems = []
    for seed in range(40):  # above _MIN_BATCH: the vectorised path
        n = int(rng.integers(1, 25))
        s = rng.integers(0, 5, n) / 5 if seed % 2 else rng.random(n)
        labels = (rng.random(n) < 0.2 + 0.6 * s).astype(float)
        w = rng.integers(0, 3, n).astype(float) if seed % 3 == 0 else np.ones(n)
        problems.append((s, labels, w))
    t = 0.5
    for (s, labels, w), (knots, p0, p1) in zip(problems, _tables_batch(problems, t)):
        keep = w > 0
        for q in np.concatenate([knots, knots + 0.01, [knots[0] - 1]]):
            r0, r1 = _isotonic_with_test_object(s[keep], labels[keep], w[keep], t, q)
            assert p0[np.searchsorted(knots, q, "right")] == pytest.approx(
                r0, abs=1e-12
            )
            assert p1[np.searchsorted(knots, q, "left")] == pytest.approx(r1, abs=1e-12)


def test_binary_matches_venn_abers_on_breast_cancer():
    P_cal, y_cal, P_test, _ = _scores(load_breast_cancer)
    va = VennAbersCalibrator(input="proba").fit(P_cal, y_cal)
    p0, p1 = va.predict_interval(P_test, kind="binary")
    ref = venn_abers.VennAbers().fit(P_cal, y_cal)
    ref_proba, ref_p0p1 = ref.predict_proba(P_test)
    np.testing.assert_allclose(p0[:, 0], ref_p0p1[:, 0], rtol=0, atol=TOL)
    np.testing.assert_allclose(p1[:, 0], ref_p0p1[:, 1], rtol=0, atol=TOL)
    np.testing.assert_allclose(va.predict_proba(P_test), ref_proba, rtol=0, atol=TOL)
    # the same fit from logits (their softmax)
    logits = np.log(P_cal)
    proba = VennAbersCalibrator().fit(logits, y_cal).predict_proba(np.log(P_test))
    np.testing.assert_allclose(proba, ref_proba, rtol=0, atol=1e-9)


def test_mapie_differs_only_above_the_largest_calibration_score():
    """MAPIE 1.6 drops ``p1[-1] = 1``: above every calibration score its p1
    is the last corner's slope, where the definition gives 1."""
    P_cal, y_cal, P_test, _ = _scores(load_breast_cancer)
    va = VennAbersCalibrator(input="proba").fit(P_cal, y_cal)
    inside = P_test[:, 1] <= P_cal[:, 1].max()
    p0, p1 = va.predict_interval(P_test, kind="binary")
    ref = mapie_va.VennAbers()
    ref.fit(P_cal, y_cal)
    _, ref_p0p1 = ref.predict_proba(P_test)
    np.testing.assert_allclose(p0[:, 0], ref_p0p1[:, 0], rtol=0, atol=TOL)
    np.testing.assert_allclose(p1[inside, 0], ref_p0p1[inside, 1], rtol=0, atol=TOL)
    # by hand: scores 0.1, 0.2, 0.3 of labels 0, 1, 0 and a test score 0.9
    # of label 1: the test object is the last point and keeps its own label
    s, labels = np.array([0.1, 0.2, 0.3]), np.array([0, 1, 0])
    P = np.column_stack([1 - s, s])
    test = np.array([[0.1, 0.9]])
    va = VennAbersCalibrator(input="proba").fit(P, labels)
    _, p1 = va.predict_interval(test, kind="binary")
    _, r1 = _isotonic_with_test_object(s, labels, np.ones(3), 1.0, 0.9)
    assert p1[0, 0] == r1 == 1.0
    ref = mapie_va.VennAbers()
    ref.fit(P, labels)
    assert ref.predict_proba(test)[1][0, 1] < 1.0


@pytest.mark.parametrize("loader", [load_wine, load_digits])
@pytest.mark.parametrize(
    "strategy, va_type", [("ovo", "one_vs_one"), ("ovr", "one_vs_all")]
)
def test_multiclass_matches_the_references(loader, strategy, va_type):
    P_cal, y_cal, P_test, y_test = _scores(loader)
    va = VennAbersCalibrator(input="proba", strategy=strategy).fit(P_cal, y_cal)
    proba = va.predict_proba(P_test)
    ref, ref_p0p1 = venn_abers.predict_proba_prefitted_va(
        P_cal, y_cal, P_test, va_tpe=va_type
    )
    mapie, _ = mapie_va.predict_proba_prefitted_va(P_cal, y_cal, P_test, va_tpe=va_type)
    np.testing.assert_allclose(proba, ref, rtol=0, atol=TOL)
    np.testing.assert_allclose(proba, mapie, rtol=0, atol=TOL)
    p0, p1 = va.predict_interval(P_test, kind="binary")
    np.testing.assert_allclose(p0, np.column_stack(ref_p0p1)[:, 0::2], atol=TOL)
    np.testing.assert_allclose(p1, np.column_stack(ref_p0p1)[:, 1::2], atol=TOL)


def test_cross_matches_venn_abers_cv_binary():
    P_cal, y_cal, P_test, _ = _scores(load_breast_cancer)
    ref = venn_abers.VennAbersCV(
        _Frozen(), inductive=False, n_splits=4, random_state=3, shuffle=True
    )
    ref.fit(P_cal, y_cal)
    ref_proba, ref_p0p1 = ref.predict_proba(P_test, p0_p1_output=True)
    va = VennAbersCalibrator(input="proba", method="cross", n_splits=4, random_state=3)
    va.fit(P_cal, y_cal)
    np.testing.assert_allclose(va.predict_proba(P_test), ref_proba, rtol=0, atol=TOL)
    # the pooled interval: geometric means of the folds' p1 and 1 - p0
    p0, p1 = va.predict_interval(P_test, kind="binary")
    gm = lambda a: np.exp(np.log(a).mean(axis=1))  # noqa: E731
    np.testing.assert_allclose(p1[:, 0], gm(ref_p0p1[:, 4:]), atol=TOL)
    np.testing.assert_allclose(1 - p0[:, 0], gm(1 - ref_p0p1[:, :4]), atol=TOL)


def test_cross_one_vs_one_is_the_coupling_of_pairwise_venn_abers_cv():
    """Manokhin's CVAP: VennAbersCV per pair on ``p_j / (p_i + p_j)``, then
    ``1 / (sum 1 / p - (C - 2))`` renormalised."""
    P_cal, y_cal, P_test, _ = _scores(load_wine)
    n_classes = P_cal.shape[1]
    inverse = np.full(P_test.shape, -(n_classes - 2.0))
    for i in range(n_classes):
        for j in range(i + 1, n_classes):
            rows = (y_cal == i) | (y_cal == j)
            pair = P_cal[rows][:, [i, j]]
            ref = venn_abers.VennAbersCV(
                _Frozen(), inductive=False, n_splits=3, random_state=0, shuffle=True
            )
            ref.fit(pair / pair.sum(axis=1, keepdims=True), y_cal[rows] == j)
            test = P_test[:, [i, j]]
            p = ref.predict_proba(test / test.sum(axis=1, keepdims=True))[:, 1]
            inverse[:, i] += 1 / (1 - p)
            inverse[:, j] += 1 / p
    expected = 1 / inverse
    expected /= expected.sum(axis=1, keepdims=True)
    va = VennAbersCalibrator(
        input="proba", strategy="ovo", method="cross", n_splits=3, random_state=0
    ).fit(P_cal, y_cal)
    np.testing.assert_allclose(va.predict_proba(P_test), expected, atol=TOL)


def test_interval_brackets_the_merged_probability():
    P_cal, y_cal, P_test, _ = _scores(load_breast_cancer)
    va = VennAbersCalibrator(input="proba").fit(P_cal, y_cal)
    p0, p1 = va.predict_interval(P_test, kind="binary")
    merged = p1 / (1 - p0 + p1)
    assert np.all(p0 <= merged) and np.all(merged <= p1)
    np.testing.assert_allclose(va.predict_proba(P_test)[:, 1], merged[:, 0])


def test_absent_class_gets_the_venn_abers_of_no_positive():
    """No calibration row of class 2: p0 = 0 and, by hand, p1(s) = 1 / (1 +
    #{calibration scores >= s}) (the test object pools with every row above
    it), renormalised with the other classes."""
    P_cal, y_cal, P_test, _ = _scores(load_wine)
    keep = y_cal != 2
    with pytest.warns(MissingClassWarning):
        va = VennAbersCalibrator(input="proba").fit(P_cal[keep], y_cal[keep])
    p0, p1 = va.predict_interval(P_test, kind="binary")
    s = P_cal[keep, 2]
    above = (s[None, :] >= P_test[:, [2]]).sum(axis=1)
    np.testing.assert_array_equal(p0[:, 2], 0.0)
    np.testing.assert_allclose(p1[:, 2], 1 / (1 + above), rtol=1e-15)
    proba = va.predict_proba(P_test)
    assert proba.shape == P_test.shape and np.all(proba[:, 2] > 0)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)


@pytest.mark.parametrize("strategy", ["ovr", "ovo"])
def test_integer_weights_are_repetitions(strategy):
    P_cal, y_cal, P_test, _ = _scores(load_wine)
    w = np.random.default_rng(0).integers(0, 4, len(y_cal))
    w[0] = 1  # the test object counts as the lightest row: weight 1
    weighted = VennAbersCalibrator(input="proba", strategy=strategy)
    weighted.fit(P_cal, y_cal, sample_weight=w)
    repeated = VennAbersCalibrator(input="proba", strategy=strategy)
    repeated.fit(np.repeat(P_cal, w, axis=0), np.repeat(y_cal, w))
    np.testing.assert_allclose(
        weighted.predict_proba(P_test), repeated.predict_proba(P_test), atol=1e-12
    )
    scaled = VennAbersCalibrator(input="proba", strategy=strategy)
    scaled.fit(P_cal, y_cal, sample_weight=w * 0.37)
    np.testing.assert_allclose(
        scaled.predict_proba(P_test), weighted.predict_proba(P_test), atol=1e-12
    )


def test_cross_folds_follow_random_state():
    P_cal, y_cal, P_test, _ = _scores(load_wine)
    fits = [
        VennAbersCalibrator(input="proba", method="cross", random_state=seed)
        .fit(P_cal, y_cal)
        .predict_proba(P_test)
        for seed in (0, 0, 1)
    ]
    np.testing.assert_array_equal(fits[0], fits[1])
    assert not np.array_equal(fits[0], fits[2])


def test_one_vs_one_refuses_too_many_classes_up_front():
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(202, 101))
    y = np.arange(202) % 101
    with pytest.raises(ValueError, match="5050 pairs.*strategy='ovr'"):
        VennAbersCalibrator(strategy="ovo").fit(logits, y)
    proba = VennAbersCalibrator().fit(logits, y).predict_proba(logits[:3])
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)


def test_calibration_improves_log_loss_on_digits():
    """A sanity check of the merged probabilities on held-out rows."""
    P_cal, y_cal, P_test, y_test = _scores(load_digits)
    va = VennAbersCalibrator(input="proba").fit(P_cal, y_cal)
    nll = lambda P: -np.log(P[np.arange(len(y_test)), y_test]).mean()  # noqa: E731
    assert nll(va.predict_proba(P_test)) < nll(P_test)
    assert softmax(np.log(va.predict_proba(P_test)), axis=1).shape == P_test.shape


def test_cross_with_tiny_problems_falls_back_to_one_fold():
    """A pair of 3 + 3 rows cannot be split in 5 stratified folds: its
    predictor is the inductive one (the other pairs are split)."""
    P_cal, y_cal, P_test, _ = _scores(load_wine)
    rows = np.concatenate(
        [np.flatnonzero(y_cal == 0)[:3], np.flatnonzero(y_cal == 1)[:3]]
    )
    rows = np.concatenate([rows, np.flatnonzero(y_cal == 2)])
    P, y = P_cal[rows], y_cal[rows]
    cross = VennAbersCalibrator(
        input="proba", strategy="ovo", method="cross", random_state=0
    ).fit(P, y)
    inductive = VennAbersCalibrator(input="proba", strategy="ovo").fit(P, y)
    assert [len(k) for k in cross.knots_] == [1, 5, 5]
    np.testing.assert_array_equal(cross.p1_[0][0], inductive.p1_[0][0])
    np.testing.assert_allclose(cross.predict_proba(P_test).sum(axis=1), 1.0)


# ----------------------------------------- intervals of the reported values
def _corners(wins, losses=None):
    """Every choice of one end per problem: arrays of shape (2^m, n, m)."""
    n, m = wins.shape
    choice = (np.arange(2**m)[:, None] >> np.arange(m)) & 1
    return np.where(choice[:, None, :] == 1, losses[None], wins[None])


def _reported(va, values):
    """What predict_proba makes of problem values (rows, problems), by the
    class docstring's formulas: p1 of the binary problem, the one-vs-rest
    values divided by their sum, or the pairwise coupling."""
    C = len(va.classes_)
    if C == 2:
        return np.column_stack([1 - values[:, 0], values[:, 0]])
    if va.strategy == "ovr":
        Q = values.copy()
    else:
        inverse = np.full((len(values), C), -(C - 2.0))
        for m, (i, j) in enumerate(va.problems_):
            inverse[:, j] += 1 / values[:, m]
            inverse[:, i] += 1 / (1 - values[:, m])
        Q = 1 / inverse
    return Q / Q.sum(axis=1, keepdims=True)


@pytest.mark.parametrize(
    "loader, strategy, method",
    [
        (load_breast_cancer, "ovr", "inductive"),
        (load_breast_cancer, "ovr", "cross"),
        (load_wine, "ovr", "inductive"),
        (load_wine, "ovr", "cross"),
        (load_wine, "ovo", "inductive"),
        (load_wine, "ovo", "cross"),
    ],
)
def test_interval_is_the_range_of_the_reported_probability(loader, strategy, method):
    """The interval of each reported probability contains it and, for two
    classes and one-vs-rest, is the range of the reported value over every
    corner of the problems' [p0, p1] (the extremes of a ratio monotone in
    each value); for one-vs-one it contains that range. The raw one-vs-rest
    pairs miss most reported probabilities on these data."""
    P_cal, y_cal, P_test, _ = _scores(loader)
    va = VennAbersCalibrator(
        input="proba", strategy=strategy, method=method, random_state=0
    ).fit(P_cal, y_cal)
    proba = va.predict_proba(P_test)
    lower, upper = va.predict_interval(P_test)
    assert lower.shape == upper.shape == proba.shape
    assert np.isfinite(lower).all() and np.isfinite(upper).all()
    assert np.all(lower <= proba) and np.all(proba <= upper)
    p0, p1 = va.predict_interval(P_test, kind="binary")
    corners = np.array([_reported(va, c) for c in _corners(p0, p1)])
    low, high = corners.min(axis=0), corners.max(axis=0)
    if strategy == "ovr" or len(va.classes_) == 2:
        np.testing.assert_allclose(lower, low, rtol=1e-12, atol=1e-15)
        np.testing.assert_allclose(upper, high, rtol=1e-12, atol=1e-15)
    else:
        assert np.all(lower <= low * (1 + 1e-12)) and np.all(
            high * (1 - 1e-12) <= upper
        )
    if len(va.classes_) > 2 and strategy == "ovr":  # the reason for the change
        outside = (proba < p0) | (proba > p1)
        assert outside.mean() > 0.1


def test_binary_interval_is_the_venn_abers_pair_of_the_reference():
    P_cal, y_cal, P_test, _ = _scores(load_breast_cancer)
    va = VennAbersCalibrator(input="proba").fit(P_cal, y_cal)
    lower, upper = va.predict_interval(P_test)
    _, ref_p0p1 = venn_abers.VennAbers().fit(P_cal, y_cal).predict_proba(P_test)
    np.testing.assert_allclose(lower[:, 1], ref_p0p1[:, 0], rtol=0, atol=TOL)
    np.testing.assert_allclose(upper[:, 1], ref_p0p1[:, 1], rtol=0, atol=TOL)
    np.testing.assert_allclose(lower[:, 0], 1 - ref_p0p1[:, 1], rtol=0, atol=TOL)
    np.testing.assert_allclose(upper[:, 0], 1 - ref_p0p1[:, 0], rtol=0, atol=TOL)
    merged = ref_p0p1[:, 1] / (1 - ref_p0p1[:, 0] + ref_p0p1[:, 1])
    np.testing.assert_allclose(va.predict_proba(P_test)[:, 1], merged, atol=TOL)


def test_predict_interval_refuses_an_unknown_kind():
    P_cal, y_cal, P_test, _ = _scores(load_wine)
    va = VennAbersCalibrator(input="proba").fit(P_cal, y_cal)
    with pytest.raises(ValueError, match="kind must be 'proba'.*'binary'.*'pairs'"):
        va.predict_interval(P_test, kind="pairs")


# ------------------------------------------------- probabilities with ties
def _votes(n, n_classes, n_trees, seed, least=0):
    """Probabilities as the votes of ``n_trees`` trees, each class getting
    ``least`` votes at least: few distinct values, many exact ties (and
    zeros with ``least=0``), rows summing to 1 to rounding."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, n_classes, n)
    strength = rng.uniform(0.2, 0.9, n)
    p = (1 - strength[:, None]) / n_classes + strength[:, None] * np.eye(n_classes)[y]
    free = n_trees - least * n_classes
    votes = least + np.array([rng.multinomial(free, row) for row in p])
    return votes / n_trees, y


@pytest.mark.parametrize(
    "strategy, n_classes, n_trees, least",
    [
        ("ovr", 2, 10, 0),
        ("ovr", 4, 10, 0),
        ("ovr", 5, 3, 0),
        ("ovr", 3, 1, 0),
        ("ovo", 4, 10, 1),
        ("ovo", 3, 7, 1),
    ],
)
def test_tied_probabilities_match_the_references(strategy, n_classes, n_trees, least):
    """Votes of 10, 7, 3 or 1 trees (one-hot rows): the problems read the
    given probabilities, ties kept, as the venn-abers package and MAPIE do
    (the softmax of their logs split ties and moved probabilities by up to
    0.2). One-vs-one with a vote for every class: the references divide
    ``0 / 0`` where both classes of a pair have probability 0 (0.5 here)."""
    va_type = {"ovr": "one_vs_all", "ovo": "one_vs_one"}[strategy]
    P_cal, y_cal = _votes(300, n_classes, n_trees, 0, least)
    P_test, _ = _votes(200, n_classes, n_trees, 1, least)
    va = VennAbersCalibrator(input="proba", strategy=strategy).fit(P_cal, y_cal)
    proba = va.predict_proba(P_test)
    if n_classes == 2:
        ref, _ = venn_abers.VennAbers().fit(P_cal, y_cal).predict_proba(P_test)
    else:
        ref, _ = venn_abers.predict_proba_prefitted_va(
            P_cal, y_cal, P_test, va_tpe=va_type
        )
        mapie, _ = mapie_va.predict_proba_prefitted_va(
            P_cal, y_cal, P_test, va_tpe=va_type
        )
        np.testing.assert_allclose(proba, mapie, rtol=0, atol=TOL)
    np.testing.assert_allclose(proba, ref, rtol=0, atol=TOL)
    np.testing.assert_allclose(np.exp(va.predict_log_proba(P_test)), proba, rtol=1e-12)


def test_tied_probabilities_by_definition():
    """A hand case: scores 0.1, 0.2 and 0.7 of three classes, in rows whose
    softmax of logs rounds 0.7 differently; p0 and p1 of every test row are
    the isotonic regressions with the test object added on the given scores
    (scikit-learn's, ties pooled)."""
    rows = np.array(
        [[0.1, 0.2, 0.7], [0.2, 0.1, 0.7], [0.0, 0.3, 0.7], [0.7, 0.2, 0.1]]
    )
    P_cal = np.tile(rows, (5, 1))
    y_cal = np.array([2, 1, 2, 0, 2, 2, 0, 1, 2, 0] * 2)
    va = VennAbersCalibrator(input="proba").fit(P_cal, y_cal)
    p0, p1 = va.predict_interval(rows, kind="binary")
    w = np.ones(len(y_cal))
    for k in range(3):
        for r, row in enumerate(rows):
            labels = (y_cal == k).astype(float)
            r0, r1 = _isotonic_with_test_object(P_cal[:, k], labels, w, 1.0, row[k])
            assert p0[r, k] == pytest.approx(r0, abs=1e-15)
            assert p1[r, k] == pytest.approx(r1, abs=1e-15)
    merged = p1 / (1 - p0 + p1)
    np.testing.assert_allclose(
        va.predict_proba(rows), merged / merged.sum(axis=1, keepdims=True), atol=1e-15
    )
