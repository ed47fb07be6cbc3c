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
    p0, p1 = va.predict_interval(P_test)
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
    p0, p1 = va.predict_interval(P_test)
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
    _, p1 = va.predict_interval(test)
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
    p0, p1 = va.predict_interval(P_test)
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
    p0, p1 = va.predict_interval(P_test)
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
    p0, p1 = va.predict_interval(P_test)
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
    p0, p1 = va.predict_interval(P_test)
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
