"""Platt scaling against scikit-learn and an independent optimiser."""

import numpy as np
import pytest
from scipy.optimize import minimize
from scipy.special import expit, log_expit, softmax
from sklearn.calibration import CalibratedClassifierCV
from sklearn.frozen import FrozenEstimator

from skcal import PlattCalibrator
from skcal.utils._testing import FixedLogits, make_miscalibrated_logits


def test_binary_is_sklearns_sigmoid_calibration():
    X, y = make_miscalibrated_logits(2000, 2, temperature=2.5, random_state=0)
    Xt, _ = make_miscalibrated_logits(500, 2, temperature=2.5, random_state=1)
    ref = CalibratedClassifierCV(
        FrozenEstimator(FixedLogits().fit(X, y)), method="sigmoid"
    ).fit(X, y)
    ours = PlattCalibrator().fit(X, y)
    np.testing.assert_allclose(ours.predict_proba(Xt), ref.predict_proba(Xt), atol=1e-5)


def test_each_class_is_the_smoothed_target_optimum():
    X, y = make_miscalibrated_logits(1500, 4, temperature=2.0, random_state=2)
    w = np.random.default_rng(0).uniform(0.5, 2.0, size=len(y))
    ours = PlattCalibrator().fit(X, y, sample_weight=w)
    P = softmax(X, axis=1)
    for k in range(4):
        s = np.log(P[:, k]) - np.log1p(-P[:, k])
        pos = y == k
        n_pos, n_neg = w[pos].sum(), w[~pos].sum()
        t = np.where(pos, (n_pos + 1) / (n_pos + 2), 1 / (n_neg + 2))

        def loss(theta, s=s, t=t):
            f = theta[0] * s + theta[1]
            return -np.sum(w * (t * log_expit(f) + (1 - t) * log_expit(-f)))

        ref = minimize(loss, [1.0, 0.0], method="BFGS", options={"gtol": 1e-10}).x
        assert ours.coef_[k] == pytest.approx(ref[0], abs=1e-5)
        assert ours.intercept_[k] == pytest.approx(ref[1], abs=1e-5)
    q = expit(ours.coef_ * (np.log(P) - np.log1p(-P)) + ours.intercept_)
    np.testing.assert_allclose(
        ours.predict_proba(X), q / q.sum(axis=1, keepdims=True), rtol=1e-9
    )


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
    from skcal import BetaCalibrator

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
