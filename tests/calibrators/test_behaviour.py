"""Behaviour every calibrator must show, whatever its method."""

import warnings

import numpy as np
import pytest
from scipy.special import log_softmax

from skcal.discovery import all_estimators
from skcal.exceptions import ConvergenceWarning, MissingClassWarning
from skcal.utils._testing import make_estimator, make_miscalibrated_logits

ESTIMATORS = [cls for _, cls in all_estimators("score")]
# budgets that keep 1,000-class fits short (the point is shape and memory)
QUICK = {
    "ClassTemperatureScaling": {"n_iter": 1},
    "ParameterizedTemperatureScaling": {"max_iter": 3, "random_state": 0},
    "DirichletCalibratorCV": {"max_iter": 20},
}


def nll(logits, y):
    return float(-np.mean(log_softmax(logits, axis=1)[np.arange(len(y)), y]))


@pytest.mark.parametrize("cls", ESTIMATORS)
def test_lowers_nll_on_miscalibrated_scores(cls, device):
    """Every calibrator lowers the NLL of over-confident scores (T = 2.5),
    unless its class states ``_corrects_temperature = False`` (a map that
    cannot rescale the logits: the identity, a shift of the logits); such a
    class must still not make the NLL worse."""
    X, y = make_miscalibrated_logits(4000, 6, temperature=2.5, random_state=0)
    Xt, yt = make_miscalibrated_logits(4000, 6, temperature=2.5, random_state=1)
    est = make_estimator(cls, device=device).fit(X, y)
    if getattr(cls, "_corrects_temperature", True):
        assert -est.score(Xt, yt) < nll(Xt, yt) - 0.05
    else:
        assert -est.score(Xt, yt) < nll(Xt, yt) + 0.01  # its fit noise only


@pytest.mark.parametrize("cls", ESTIMATORS)
def test_finite_rows_for_logits_of_magnitude_1e4(cls):
    X, y = make_miscalibrated_logits(
        500, 5, temperature=1.0, scale=3000.0, random_state=2
    )
    assert np.abs(X).max() > 1e4
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        proba = make_estimator(cls, device="cpu").fit(X, y).predict_proba(X * 1.1)
    assert np.isfinite(proba).all()
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)


@pytest.mark.parametrize("cls", ESTIMATORS)
def test_class_missing_from_calibration_gives_no_nan(cls):
    X, y = make_miscalibrated_logits(1500, 5, temperature=2.0, random_state=3)
    keep = y != 4
    with pytest.warns(MissingClassWarning):
        est = make_estimator(cls, device="cpu").fit(X[keep], y[keep])
    proba = est.predict_proba(X)
    assert proba.shape == (len(X), 5) and np.isfinite(proba).all()


@pytest.mark.parametrize("n_classes", [100, 1000])
@pytest.mark.parametrize("cls", ESTIMATORS)
def test_many_classes(cls, n_classes):
    X, y = make_miscalibrated_logits(1200, n_classes, temperature=2.0, random_state=4)
    params = dict(QUICK.get(cls.__name__, {}))
    if "max_iter" in cls().get_params() and n_classes == 1000:
        params.setdefault("max_iter", 30)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", (ConvergenceWarning, MissingClassWarning))
        est = make_estimator(cls, device="cpu", **params).fit(X, y)
    proba = est.predict_proba(X[:50])
    assert proba.shape == (50, n_classes)
    assert np.isfinite(proba).all()
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
