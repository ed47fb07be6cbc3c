"""Platt scaling against scikit-learn and an independent optimiser."""

import numpy as np
import pytest
from scipy.optimize import minimize
from scipy.special import expit, log_expit, logsumexp, softmax
from sklearn.calibration import CalibratedClassifierCV
from sklearn.frozen import FrozenEstimator
from sklearn.isotonic import IsotonicRegression

from skcal import (
    BetaCalibrator,
    HistogramBinningCalibrator,
    IsotonicCalibrator,
    PlattCalibrator,
    SplineCalibrator,
)
from skcal.exceptions import MissingClassWarning
from skcal.utils._testing import FixedLogits, make_miscalibrated_logits


def test_binary_is_sklearns_sigmoid_calibration():
    X, y = make_miscalibrated_logits(2000, 2, temperature=2.5, random_state=0)
    Xt, _ = make_miscalibrated_logits(500, 2, temperature=2.5, random_state=1)
    ref = CalibratedClassifierCV(
        FrozenEstimator(FixedLogits().fit(X, y)), method="sigmoid"
    ).fit(X, y)
    ours = PlattCalibrator().fit(X, y)
    np.testing.assert_allclose(ours.predict_proba(Xt), ref.predict_proba(Xt), atol=1e-5)


def _smoothed_target_optimum(s, pos, w):
    """Platt's (a, b) by BFGS, targets from the documented effective counts."""
    # Kish's n_eff split by the positives' weight share
    n_eff = w.sum() ** 2 / np.sum(w**2)
    n_pos = n_eff * w[pos].sum() / w.sum()
    n_neg = n_eff * w[~pos].sum() / w.sum()
    t = np.where(pos, (n_pos + 1) / (n_pos + 2), 1 / (n_neg + 2))

    def loss(theta):
        f = theta[0] * s + theta[1]
        return -np.sum(w * (t * log_expit(f) + (1 - t) * log_expit(-f)))

    return minimize(loss, [1.0, 0.0], method="BFGS", options={"gtol": 1e-10}).x


def test_each_class_is_the_smoothed_target_optimum():
    X, y = make_miscalibrated_logits(1500, 4, temperature=2.0, random_state=2)
    w = np.random.default_rng(0).uniform(0.5, 2.0, size=len(y))
    ours = PlattCalibrator().fit(X, y, sample_weight=w)
    P = softmax(X, axis=1)
    for k in range(4):
        s = np.log(P[:, k]) - np.log1p(-P[:, k])
        ref = _smoothed_target_optimum(s, y == k, w)
        assert ours.coef_[k] == pytest.approx(ref[0], abs=1e-5)
        assert ours.intercept_[k] == pytest.approx(ref[1], abs=1e-5)
    q = expit(ours.coef_ * (np.log(P) - np.log1p(-P)) + ours.intercept_)
    np.testing.assert_allclose(
        ours.predict_proba(X), q / q.sum(axis=1, keepdims=True), rtol=1e-9
    )


def test_rare_classes_reach_the_optimum():
    # 40 classes: N+ << N-. Newton started on the wrong side (b = +log(N-/N+))
    # in a saturated region, halved its step to nothing and stopped there,
    # claiming convergence: q ~ 1e-15 for every class, accuracy ~ 1 / C
    X, y = make_miscalibrated_logits(
        2000, 40, temperature=2.0, scale=3.0, random_state=0
    )
    ours = PlattCalibrator().fit(X, y)
    P = softmax(X, axis=1)
    for k in range(0, 40, 5):
        s = np.log(P[:, k]) - np.log1p(-P[:, k])
        ref = _smoothed_target_optimum(s, y == k, np.ones(len(y)))
        assert ours.coef_[k] == pytest.approx(ref[0], abs=1e-5)
        assert ours.intercept_[k] == pytest.approx(ref[1], abs=1e-5)
    Xt, yt = make_miscalibrated_logits(
        2000, 40, temperature=2.0, scale=3.0, random_state=1
    )
    accuracy = np.mean(ours.predict(Xt) == yt)
    assert accuracy > np.mean(Xt.argmax(1) == yt) - 0.03


@pytest.mark.parametrize("scale", [1e-300, 1e-3, 1e3, 1e300])
def test_weights_are_relative(scale):
    X, y = make_miscalibrated_logits(800, 4, temperature=2.0, random_state=6)
    w = np.random.default_rng(1).uniform(0.5, 2.0, size=len(y))
    a = PlattCalibrator().fit(X, y, sample_weight=w)
    b = PlattCalibrator().fit(X, y, sample_weight=w * scale)
    np.testing.assert_allclose(b.coef_, a.coef_, rtol=1e-9)
    np.testing.assert_allclose(b.intercept_, a.intercept_, rtol=1e-9)
    # equal weights, whatever their value, are no weights: the counts
    c = PlattCalibrator().fit(X, y)
    d = PlattCalibrator().fit(X, y, sample_weight=np.full(len(y), scale))
    np.testing.assert_allclose(d.coef_, c.coef_, rtol=1e-12)
    np.testing.assert_allclose(d.intercept_, c.intercept_, rtol=1e-12)


def test_extreme_logits_stay_finite():
    X, y = make_miscalibrated_logits(500, 3, scale=400.0, random_state=3)
    proba = PlattCalibrator().fit(X, y).predict_proba(X * 2)
    assert np.isfinite(proba).all()
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)


# ----------------------------------------------------------------- beta
@pytest.mark.parametrize("parameters", ["abm", "am", "ab"])
@pytest.mark.parametrize("n_classes", [2, 3])
def test_beta_matches_betacal(parameters, n_classes):
    betacal = pytest.importorskip("betacal")

    X, y = make_miscalibrated_logits(2000, n_classes, temperature=2.0, random_state=4)
    Xt, _ = make_miscalibrated_logits(400, n_classes, temperature=2.0, random_state=5)
    P, Pt = softmax(X, axis=1), softmax(Xt, axis=1)
    ours = BetaCalibrator(parameters=parameters).fit(X, y)
    Q = np.column_stack(
        [
            betacal.BetaCalibration(parameters=parameters)
            .fit(P[:, k], y == k)
            .predict(Pt[:, k])
            for k in range(n_classes)
        ]
    )
    expected = Q / Q.sum(axis=1, keepdims=True)
    # betacal's lbfgs stops at scikit-learn's tolerance (1e-4)
    np.testing.assert_allclose(ours.predict_proba(Xt), expected, atol=2e-4)


def test_class_log_odds_match_logsumexp_over_the_other_classes():
    from scipy.special import logsumexp

    from skcal.calibrators._platt import _class_log_odds

    rng = np.random.default_rng(0)
    z = rng.normal(size=(300, 7)) * rng.choice([0.1, 10.0, 100.0], size=(300, 1))
    z[0] = [50, 0, 0, 0, 0, 0, 0]
    z[1] = [1000, -1000, 0, 0, 0, 0, 0]  # others underflow next to the max
    z[2] = 0.0  # all tied
    z[3] = [3, 3, 1, 1, 1, 1, 1]  # tied maximum
    ref = np.column_stack(
        [z[:, k] - logsumexp(np.delete(z, k, axis=1), axis=1) for k in range(7)]
    )
    got = _class_log_odds(z)
    assert np.all(np.isfinite(got))
    np.testing.assert_allclose(got, ref, rtol=1e-13, atol=1e-12)


# ------------------------------------------- a class absent from calibration
ABSENT_METHODS = [
    PlattCalibrator,
    BetaCalibrator,
    IsotonicCalibrator,
    HistogramBinningCalibrator,
    SplineCalibrator,
]


def _nll(P, y):
    return -np.mean(np.log(P[np.arange(len(y)), y]))


@pytest.mark.parametrize("missing", [0, 5])
@pytest.mark.parametrize("cls", ABSENT_METHODS)
def test_a_class_absent_from_calibration_leaves_the_others_intact(cls, missing):
    # one-vs-rest fits of a class without positives went to 0 (isotonic,
    # binning, beta) or to 1 / (N- + 2) (Platt) everywhere; the rule is the
    # mean of the other classes' maps (top-label maps are shared by all)
    X, y = make_miscalibrated_logits(3000, 8, temperature=2.0, random_state=7)
    Xt, yt = make_miscalibrated_logits(6000, 8, temperature=2.0, random_state=8)
    keep = y != missing
    with pytest.warns(MissingClassWarning, match=rf"\[{missing}\]"):
        est = cls().fit(X[keep], y[keep])
    full = cls().fit(X, y)
    P, P_full, P0 = est.predict_proba(Xt), full.predict_proba(Xt), softmax(Xt, 1)
    # (a) a probability vector on every row, the absent class included
    assert np.isfinite(P).all() and np.all(P > 0)
    np.testing.assert_allclose(P.sum(axis=1), 1.0, rtol=1e-12)
    others, absent = yt != missing, yt == missing
    # (b) the other classes' accuracy does not move from the uncalibrated
    # model's by more than a calibrator moves it with every class present
    accuracy = np.mean(est.predict(Xt)[others] == yt[others])
    accuracy_full = np.mean(full.predict(Xt)[others] == yt[others])
    accuracy_uncal = np.mean(Xt[others].argmax(1) == yt[others])
    assert accuracy >= min(accuracy_uncal, accuracy_full) - 0.01
    # (c) log loss. The others' calibration is that of the full fit (within
    # 0.05 nats; the full fit also sees the absent class as negatives). The
    # absent class is calibrated as the average class: on its samples, within
    # 0.15 nats of the full fit, which saw them, and never more than log 2
    # (a factor 2 in probability) above the uncalibrated model (it was ~25
    # nats above: p = 1e-12, or ~6 for Platt's 1 / (N- + 2))
    assert _nll(P[others], yt[others]) <= _nll(P_full[others], yt[others]) + 0.05
    assert _nll(P[absent], yt[absent]) <= _nll(P_full[absent], yt[absent]) + 0.15
    assert _nll(P[absent], yt[absent]) <= _nll(P0[absent], yt[absent]) + np.log(2)


def _one_vs_rest_values(est, X):
    """Each class's one-vs-rest value from the fitted attributes, with scipy."""
    P = softmax(X, axis=1)
    if isinstance(est, PlattCalibrator):
        S = np.column_stack(
            [
                X[:, k] - logsumexp(np.delete(X, k, axis=1), axis=1)
                for k in range(X.shape[1])
            ]
        )
        return expit(est.coef_ * S + est.intercept_)
    eps = np.finfo(np.float64).eps
    S = np.clip(P, eps, 1 - eps)
    a, b = est.coef_[:, 0], est.coef_[:, 1]
    return expit(a * np.log(S) - b * np.log1p(-S) + est.intercept_)


def _renormalised(Q):
    Q = np.maximum(Q, 1e-12)
    return Q / Q.sum(axis=1, keepdims=True)


@pytest.mark.parametrize("cls", [PlattCalibrator, BetaCalibrator])
def test_the_absent_class_gets_the_mean_of_the_other_maps(cls):
    X, y = make_miscalibrated_logits(1000, 4, temperature=2.0, random_state=9)
    w = np.ones(len(y))
    w[y == 2] = 0.0  # zero weight is absence too
    with pytest.warns(MissingClassWarning, match=r"\[2\]"):
        est = cls().fit(X, y, sample_weight=w)
    with pytest.warns(MissingClassWarning):
        ref = cls().fit(X[w > 0], y[w > 0])
    others = [0, 1, 3]
    # the other classes' maps are those fitted without the absent rows ...
    np.testing.assert_allclose(est.coef_[others], ref.coef_[others], rtol=1e-9)
    np.testing.assert_allclose(est.intercept_[others], ref.intercept_[others])
    # ... and the absent class gets their mean
    np.testing.assert_allclose(est.coef_[2], est.coef_[others].mean(axis=0))
    np.testing.assert_allclose(est.intercept_[2], est.intercept_[others].mean())
    Xt, _ = make_miscalibrated_logits(300, 4, temperature=2.0, random_state=10)
    expected = _renormalised(_one_vs_rest_values(est, Xt))
    np.testing.assert_allclose(est.predict_proba(Xt), expected, rtol=1e-9)


def test_isotonic_absent_class_is_the_mean_of_sklearn_maps():
    X, y = make_miscalibrated_logits(1500, 4, temperature=2.0, random_state=11)
    Xt, _ = make_miscalibrated_logits(500, 4, temperature=2.0, random_state=12)
    keep = y != 1
    with pytest.warns(MissingClassWarning, match=r"\[1\]"):
        iso = IsotonicCalibrator().fit(X[keep], y[keep])
    P, Pt = softmax(X[keep], axis=1), softmax(Xt, axis=1)
    maps = {
        k: IsotonicRegression(y_min=0, y_max=1, out_of_bounds="clip").fit(
            P[:, k], y[keep] == k
        )
        for k in (0, 2, 3)
    }
    Q = np.empty_like(Pt)
    for k in (0, 2, 3):
        Q[:, k] = maps[k].predict(Pt[:, k])
    Q[:, 1] = np.mean([maps[k].predict(Pt[:, 1]) for k in (0, 2, 3)], axis=0)
    np.testing.assert_allclose(iso.predict_proba(Xt), _renormalised(Q), atol=1e-12)


def test_histogram_binning_absent_class_is_the_mean_step_map():
    X, y = make_miscalibrated_logits(1500, 4, temperature=2.0, random_state=13)
    Xt, _ = make_miscalibrated_logits(500, 4, temperature=2.0, random_state=14)
    keep = y != 3
    with pytest.warns(MissingClassWarning, match=r"\[3\]"):
        hb = HistogramBinningCalibrator(n_bins=8, strategy="quantile")
        hb.fit(X[keep], y[keep])
    Pt = softmax(Xt, axis=1)

    def step(k, p):  # the present class's own bins, [l, u), clipped
        edges, values = hb.bin_edges_[k], hb.bin_values_[k]
        assert len(edges) == 9
        index = np.clip(np.digitize(p, edges[1:-1]), 0, 7)
        return values[index]

    Q = np.column_stack([step(k, Pt[:, k]) for k in range(3)] + [Pt[:, 3]])
    Q[:, 3] = np.mean([step(k, Pt[:, 3]) for k in range(3)], axis=0)
    np.testing.assert_allclose(hb.predict_proba(Xt), _renormalised(Q), atol=1e-12)


# ------------------------------------- vectorised predict against per class
def _extreme_logits(n, n_classes, seed):
    """Logits with gaps from 0 to 1e4, ties, and rows whose others underflow."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, n_classes)) * rng.choice([0.1, 3.0, 50.0], size=(n, 1))
    X[0] = 0.0  # all tied
    X[1, :2] = [4.0, 4.0]  # tied maximum
    X[2] = -1e4
    X[2, 0] = 0.0  # the others underflow (gap 1e4)
    X[3] = [-720.0 - 5 * j for j in range(n_classes)]  # sum of the others < 1e-290
    X[3, 0] = 0.0
    X[4] = -660.0  # just above the exact-sum threshold
    X[4, 1] = 0.0
    return X


@pytest.mark.parametrize("cls", [PlattCalibrator, BetaCalibrator])
def test_vectorised_predict_is_the_per_class_map(cls):
    # every class's one-vs-rest value computed column by column with scipy
    # (logsumexp over the other classes for Platt, the beta map of the
    # clipped softmax for beta), floored and renormalised; a class absent
    # from calibration and extreme scores included
    X, y = make_miscalibrated_logits(1500, 6, temperature=2.0, random_state=20)
    keep = y != 4
    with pytest.warns(MissingClassWarning):
        est = cls(classes=np.arange(6)).fit(X[keep], y[keep])
    Xt = _extreme_logits(400, 6, seed=21)
    # beta reads ln(1 - p) of the softmax: where p is within 1e-7 of 1, a
    # rounding of p (scipy's softmax here, torch's in skcal) moves it by
    # 1e-9 relative; Platt's log-odds come from the logits, exact
    rtol = 1e-12 if cls is PlattCalibrator else 1e-8
    expected = _renormalised(_one_vs_rest_values(est, Xt))
    np.testing.assert_allclose(est.predict_proba(Xt), expected, rtol=rtol, atol=1e-15)
    # and through probabilities: the same map of log(max(p, floor)), floor
    # half the smallest positive calibration probability (the documented
    # floor; rows it raises renormalised), rows a few units off 1 as given
    P = softmax(Xt, axis=1)
    P_cal = softmax(X, axis=1)
    est_p = cls(input="proba", classes=np.arange(6)).fit(P_cal, y)
    floor = np.finfo(float).tiny  # beta clips s itself (at eps), as betacal
    if cls is PlattCalibrator:
        floor = max(0.5 * P_cal[P_cal > 0].min(), floor)
        assert est_p.proba_floor_ == floor
    sums = P.sum(axis=1, keepdims=True)
    near = np.abs(sums - 1.0) <= 6 * np.finfo(float).eps
    Q = np.where(near, P, P / sums)
    raised = (Q < floor).any(axis=1)
    Q = np.maximum(Q, floor)
    Q[raised] /= Q[raised].sum(axis=1, keepdims=True)
    Z = np.log(Q)
    expected = _renormalised(_one_vs_rest_values(est_p, Z))
    np.testing.assert_allclose(est_p.predict_proba(P), expected, rtol=rtol, atol=1e-15)


@pytest.mark.parametrize("cls", [PlattCalibrator, BetaCalibrator])
def test_rows_whose_values_all_underflow_keep_the_softmax(cls):
    # q_k = expit(f_k) is exactly 0 for f_k < -745: a row with every value 0
    # keeps its original probabilities instead of a 0/0 (or the uniform
    # row of the 1e-12 floor)
    X, y = make_miscalibrated_logits(500, 3, temperature=2.0, random_state=22)
    est = cls().fit(X, y)
    est.intercept_ = np.array([-2000.0, 0.0, 0.0])
    est.intercept_[1:] = -2000.0
    Xt, _ = make_miscalibrated_logits(50, 3, temperature=2.0, random_state=23)
    np.testing.assert_allclose(
        est.predict_proba(Xt), softmax(Xt, axis=1), rtol=1e-12, atol=1e-300
    )
    # rows with one value left keep the floored renormalisation
    est.intercept_[2] = 0.0
    expected = _renormalised(_one_vs_rest_values(est, Xt))
    np.testing.assert_allclose(est.predict_proba(Xt), expected, rtol=1e-12)
    # the same through probabilities (the path that maps them directly)
    est_p = cls(input="proba").fit(softmax(X, axis=1), y)
    est_p.intercept_ = np.full(3, -2000.0)
    P = softmax(Xt, axis=1)
    np.testing.assert_allclose(est_p.predict_proba(P), P, rtol=1e-12, atol=1e-300)


def test_class_log_odds_around_the_underflow_of_the_others():
    from skcal.calibrators._platt import _class_log_odds

    z = _extreme_logits(60, 5, seed=24)
    z[5:10] += 1e6  # an unshifted row maximum
    ref = np.column_stack(
        [z[:, k] - logsumexp(np.delete(z, k, axis=1), axis=1) for k in range(5)]
    )
    out = np.full(z.shape, np.nan)
    got = _class_log_odds(z, out=out)
    assert got is out
    np.testing.assert_allclose(got, ref, rtol=1e-12, atol=1e-9)
    # shifted rows (maximum 0, what the calibrator passes) to 1e-12
    zs = z - z.max(axis=1, keepdims=True)
    ref_s = np.column_stack(
        [zs[:, k] - logsumexp(np.delete(zs, k, axis=1), axis=1) for k in range(5)]
    )
    np.testing.assert_allclose(_class_log_odds(zs), ref_s, rtol=1e-12, atol=1e-12)
