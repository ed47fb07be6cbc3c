"""Ensemble temperature scaling and ``ts-mix`` against probmetrics and the
formulas of Zhang, Kailkhura, Han, "Mix-n-Match: Ensemble and
Compositional Methods for Uncertainty Calibration in Deep Learning" (ICML
2020): ``w_0 softmax(z / T) + w_1 softmax(z) + w_2 / C``, weights on the
simplex, temperature and weights fitted by MSE (the authors' code) or NLL.
"""

import functools
import re
import time

import numpy as np
import pytest
from scipy.optimize import minimize
from scipy.special import softmax
from sklearn.datasets import load_digits, load_wine
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split
from sklearn.naive_bayes import GaussianNB

from skcal import EnsembleTemperatureScaling, TemperatureScaling
from skcal.exceptions import MissingClassWarning
from skcal.utils._testing import make_miscalibrated_logits


def _nll(P, y):
    return float(-np.mean(np.log(P[np.arange(len(y)), y])))


@functools.cache
def _digits(noise, C, scaled=True, seed=0):
    """Probabilities of a logistic regression on digits; a fraction
    ``noise`` of the calibration and test labels redrawn uniformly (the
    model is then over-confident in a way a uniform member corrects)."""
    X, y = load_digits(return_X_y=True)
    if scaled:  # pixels in [0, 1]: a quick fit
        X = X / 16.0
    Xtr, Xr, ytr, yr = train_test_split(X, y, test_size=0.6, random_state=seed)
    rng = np.random.default_rng(seed)
    flip = rng.random(len(yr)) < noise
    yr = np.where(flip, rng.integers(0, 10, len(yr)), yr)
    Xc, Xt, yc, yt = train_test_split(Xr, yr, test_size=0.5, random_state=seed)
    clf = LogisticRegression(C=C, max_iter=2000).fit(Xtr, ytr)
    out = clf.predict_proba(Xc), yc, clf.predict_proba(Xt), yt
    for a in out:
        a.flags.writeable = False  # shared between tests
    return out


def _mixture(w, T, P):
    """The paper's map on probabilities ``P`` (``z = log P``)."""
    z = np.log(P)
    return w[0] * softmax(z / T, axis=1) + w[1] * softmax(z, axis=1) + w[2] / P.shape[1]


def _brier(P, y):
    return float(np.mean(np.sum((P - np.eye(P.shape[1])[y]) ** 2, axis=1)))


# ============================================================ probmetrics
# (noise, C, scaled): clean labels (the weights on an edge) and noisy ones
# (a uniform member; all three weights positive on the raw pixels)
DIGITS = [(0.0, 1.0, True), (0.1, 0.1, True), (0.3, 0.1, True), (0.2, 1.0, False)]


@pytest.mark.parametrize("loss", ["mse", "log_loss"])
@pytest.mark.parametrize("noise,C,scaled", DIGITS)
def test_ets_matches_probmetrics_on_digits(loss, noise, C, scaled):
    """probmetrics' ``ETSCalibrator`` (the authors' code) on real data.

    It bounds the temperature to [0.05, 5] and takes the log of float32
    probabilities: on these tasks the temperature lies inside the bounds
    and no probability is below float32's range, so both solve the same
    problem, and the float32 logs leave ~1e-6 in the probabilities.
    """
    pytest.importorskip("probmetrics")
    from probmetrics.calibrators import ETSCalibrator

    Pc, yc, Pt, yt = _digits(noise, C, scaled)
    est = EnsembleTemperatureScaling(input="proba", loss=loss, device="cpu")
    P = est.fit(Pc, yc).predict_proba(Pt)
    ref = ETSCalibrator(loss="mse" if loss == "mse" else "ce").fit(Pc, yc)
    R = np.asarray(ref.predict_proba(Pt), dtype=np.float64)
    assert 0.05 < ref.t_ < 5.0
    np.testing.assert_allclose(est.temperature_, ref.t_, rtol=1e-5)
    assert abs(_nll(P, yt) - _nll(R, yt)) < 1e-3
    # the paper's objective of the weights, each at its own temperature
    # (probmetrics' float32 logs move its temperature by ~1e-8)
    objective = _brier if loss == "mse" else _nll
    ours = objective(_mixture(est.weights_, est.temperature_, Pc), yc)
    theirs = objective(_mixture(ref.w_, ref.t_, Pc), yc)
    assert ours <= theirs + 1e-6
    np.testing.assert_allclose(est.weights_, ref.w_, atol=1e-4)
    assert np.abs(P - R).max() < 1e-5


def test_ts_mix_matches_probmetrics_on_digits():
    """``mixture="uniform"`` is probmetrics' ``get_calibrator("ts-mix")``."""
    pytest.importorskip("probmetrics")
    from probmetrics.calibrators import get_calibrator

    Pc, yc, Pt, yt = _digits(0.0, 1.0)
    est = EnsembleTemperatureScaling(input="proba", mixture="uniform", device="cpu")
    P = est.fit(Pc, yc).predict_proba(Pt)
    ref = get_calibrator("ts-mix").fit(Pc, yc)
    R = np.asarray(ref.predict_proba(Pt), dtype=np.float64)
    np.testing.assert_allclose(1.0 / est.temperature_, ref.cal_.invtemp_, rtol=1e-6)
    assert np.abs(P - R).max() < 1e-6
    assert abs(_nll(P, yt) - _nll(R, yt)) < 1e-3


# =============================================================== formulas
def _reference_weights(loss, T, Pc, yc):
    """The weights of the paper's objective for temperature ``T``, by
    SLSQP from each vertex (the best of the three)."""
    members = [_mixture(e, T, Pc) for e in np.eye(3)]

    def objective(w):
        P = sum(wk * Pk for wk, Pk in zip(w, members))
        if loss == "mse":
            return _brier(P, yc)
        return -np.mean(np.log(np.maximum(P[np.arange(len(yc)), yc], 1e-300)))

    constraint = {"type": "eq", "fun": lambda w: np.sum(w) - 1.0}
    results = [
        minimize(
            objective,
            x0,
            method="SLSQP",
            bounds=[(0, 1)] * 3,
            constraints=constraint,
            options={"ftol": 1e-15, "maxiter": 500},
        )
        for x0 in np.eye(3)
    ]
    best = min(results, key=lambda r: r.fun)
    return best.x, objective


@pytest.mark.parametrize("loss", ["mse", "log_loss"])
def test_weights_minimise_the_papers_objective(loss):
    """On wine with a Gaussian naive Bayes (temperature ~4-5, probmetrics'
    bound would cut it), the fitted weights minimise the paper's objective
    for the fitted temperature: no better point than scipy's SLSQP finds."""
    X, y = load_wine(return_X_y=True)
    Xtr, Xc, ytr, yc = train_test_split(X, y, test_size=0.6, random_state=0)
    Pc = GaussianNB().fit(Xtr, ytr).predict_proba(Xc)
    Pc = np.clip(Pc, 1e-12, None)
    Pc /= Pc.sum(axis=1, keepdims=True)
    est = EnsembleTemperatureScaling(input="proba", loss=loss, device="cpu")
    est.fit(Pc, yc)
    w_ref, objective = _reference_weights(loss, est.temperature_, Pc, yc)
    assert objective(est.weights_) <= objective(w_ref) + 1e-10
    assert est.weights_.min() >= 0.0 and abs(est.weights_.sum() - 1.0) < 1e-12


def test_mse_temperature_is_a_minimum_of_the_brier_score():
    """``loss="mse"``: the temperature is a stationary point of the Brier
    score of temperature scaling, and a minimum (checked by differences)."""
    Pc, yc, _, _ = _digits(0.1, 0.1)
    est = EnsembleTemperatureScaling(input="proba", device="cpu").fit(Pc, yc)
    T = est.temperature_
    brier = [
        _brier(softmax(np.log(Pc) / t, axis=1), yc)
        for t in T * (1 + np.r_[-1, 0, 1] * 1e-4)
    ]
    assert brier[1] <= min(brier[0], brier[2])
    h = 1e-6 * T
    slope = (
        _brier(softmax(np.log(Pc) / (T + h), axis=1), yc)
        - _brier(softmax(np.log(Pc) / (T - h), axis=1), yc)
    ) / (2 * h)
    assert abs(slope) < 1e-7


def test_log_loss_temperature_is_temperature_scaling():
    Pc, yc, _, _ = _digits(0.3, 0.1)
    est = EnsembleTemperatureScaling(input="proba", loss="log_loss", device="cpu")
    ts = TemperatureScaling(input="proba", device="cpu")
    np.testing.assert_allclose(
        est.fit(Pc, yc).temperature_, ts.fit(Pc, yc).temperature_, rtol=1e-12
    )


@pytest.mark.parametrize("mixture", ["ensemble", "uniform"])
def test_predictions_are_the_papers_mixture(mixture):
    """``predict_proba`` is the mixture of the three members, by the formula."""
    Pc, yc, Pt, _ = _digits(0.2, 1.0, False)  # all three weights positive
    est = EnsembleTemperatureScaling(input="proba", mixture=mixture, device="cpu")
    P = est.fit(Pc, yc).predict_proba(Pt)
    np.testing.assert_allclose(
        P, _mixture(est.weights_, est.temperature_, Pt), rtol=1e-10, atol=1e-15
    )
    np.testing.assert_array_equal(P.argmax(axis=1), Pt.argmax(axis=1))


def test_ts_mix_weight_is_one_over_n_plus_one():
    """Hand-computed: 7 rows, weight 1/8 on the uniform distribution."""
    z = np.array(
        [
            [2.0, 0, -1],
            [0, 1.5, 0],
            [0, 0, 1],
            [1, 2, 0],
            [3, 0, 0],
            [0, 1, 2],
            [1, 0, 0],
        ]
    )
    y = np.array([0, 1, 2, 0, 0, 2, 1])
    est = EnsembleTemperatureScaling(mixture="uniform", device="cpu").fit(z, y)
    np.testing.assert_allclose(est.weights_, [7 / 8, 0, 1 / 8], rtol=1e-15)
    T = est.temperature_
    expected = 7 / 8 * softmax(z / T, axis=1) + 1 / 24
    np.testing.assert_allclose(est.predict_proba(z), expected, rtol=1e-12)
    # the NLL-optimal temperature: the derivative of the NLL in 1/T is 0
    P = softmax(z / T, axis=1)
    grad = np.mean((P * z).sum(axis=1) - z[np.arange(7), y])
    assert abs(grad) < 1e-10


# ============================================================ contract
@pytest.mark.parametrize("loss", ["mse", "log_loss"])
def test_integer_weights_equal_repeated_rows(loss):
    Pc, yc, Pt, _ = _digits(0.2, 1.0, False)
    Pc, yc = Pc[:300], yc[:300]
    w = np.random.default_rng(0).integers(0, 4, len(yc))
    est = EnsembleTemperatureScaling(input="proba", loss=loss, device="cpu")
    a = est.fit(Pc, yc, sample_weight=w).predict_proba(Pt)
    b = est.fit(np.repeat(Pc, w, axis=0), np.repeat(yc, w)).predict_proba(Pt)
    np.testing.assert_allclose(a, b, rtol=0, atol=1e-9)


def test_absent_class_keeps_its_column():
    Pc, yc, Pt, _ = _digits(0.0, 1.0)
    keep = yc != 3
    est = EnsembleTemperatureScaling(input="proba", device="cpu")
    with pytest.warns(MissingClassWarning):
        est.fit(
            Pc[keep],
            yc[keep],
        )
    P = est.predict_proba(Pt)
    assert P.shape == (len(Pt), 10) and (P[:, 3] > 0).all()


def test_input_is_not_modified():
    Pc, yc, _, _ = _digits(0.1, 0.1)
    Pc = Pc.copy()  # writeable
    before = Pc.copy()
    EnsembleTemperatureScaling(input="proba", device="cpu").fit(Pc, yc).predict_proba(
        Pc
    )
    np.testing.assert_array_equal(Pc, before)


def test_bad_parameters_are_clear_errors():
    Pc, yc, _, _ = _digits(0.0, 1.0)
    with pytest.raises(ValueError, match="mixture"):
        EnsembleTemperatureScaling(mixture="blend").fit(Pc, yc)
    with pytest.raises(ValueError, match="loss"):
        EnsembleTemperatureScaling(loss="nll").fit(Pc, yc)


def test_thousand_classes_fit_in_bounded_time():
    """1,000 classes, 3,000 rows: a few passes over the scores."""
    rng = np.random.default_rng(0)
    n, c = 3000, 1000
    y = rng.integers(0, c, n)
    logits = 3.0 * (rng.normal(size=(n, c)) + 3.0 * np.eye(c)[y])
    start = time.perf_counter()
    with pytest.warns(MissingClassWarning):
        est = EnsembleTemperatureScaling(device="cpu").fit(logits, y)
    P = est.predict_proba(logits[:100])
    assert time.perf_counter() - start < 30
    assert P.shape == (100, c) and np.isfinite(P).all()
    np.testing.assert_array_equal(P.argmax(axis=1), logits[:100].argmax(axis=1))


def _logit_mixture(w, T, z):
    """The paper's map on logits ``z`` (float64)."""
    z = np.asarray(z, dtype=np.float64)
    return w[0] * softmax(z / T, axis=1) + w[1] * softmax(z, axis=1) + w[2] / z.shape[1]


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("mixture", ["ensemble", "uniform"])
def test_logits_predictions_are_the_papers_mixture(mixture, dtype):
    """Every prediction path (the validated copy overwritten in place, a new
    array for float32 logits, ``decision_function``) is the formula, on more
    rows than one chunk; the caller's logits are left as they were."""
    Pc, yc, Pt, _ = _digits(0.2, 1.0, False)  # all three weights positive
    zc, zt = np.log(Pc).astype(dtype), np.log(np.tile(Pt, (60, 1))).astype(dtype)
    est = EnsembleTemperatureScaling(mixture=mixture, device="cpu").fit(zc, yc)
    before = zt.copy()
    expected = _logit_mixture(est.weights_, est.temperature_, zt)
    rtol = 1e-10 if dtype == np.float64 else 1e-5  # float32's shift by the max
    np.testing.assert_allclose(est.predict_proba(zt), expected, rtol=rtol, atol=1e-15)
    np.testing.assert_allclose(
        softmax(est.decision_function(zt), axis=1), expected, rtol=rtol, atol=1e-15
    )
    np.testing.assert_array_equal(zt, before)


def test_weights_on_a_vertex_give_temperature_scaling():
    """Labels drawn from a tempered softmax: the weights ``(1, 0, 0)`` (no
    mixture); the prediction is then temperature scaling's softmax."""
    X, y = make_miscalibrated_logits(2000, 5, temperature=2.0, random_state=0)
    est = EnsembleTemperatureScaling(device="cpu").fit(X, y)
    np.testing.assert_array_equal(est.weights_, [1.0, 0.0, 0.0])
    expected = softmax(X / est.temperature_, axis=1)
    np.testing.assert_allclose(est.predict_proba(X), expected, rtol=1e-12)
    ts = TemperatureScaling(device="cpu").fit(X, y)
    P = est.set_params(loss="log_loss").fit(X, y).predict_proba(X)
    if tuple(est.weights_) == (1.0, 0.0, 0.0):
        np.testing.assert_allclose(P, ts.predict_proba(X), rtol=1e-9)


@pytest.mark.parametrize("verbose", [0, 1, 2])
def test_verbose_shows_each_phase(verbose, capsys):
    """A bar per phase on stderr (the Brier temperature only for
    ``loss="mse"``), a line per step at 2, nothing at 0, the same fit."""
    Pc, yc, _, _ = _digits(0.2, 1.0, False)
    quiet = EnsembleTemperatureScaling(input="proba", device="cpu").fit(Pc, yc)
    capsys.readouterr()
    est = EnsembleTemperatureScaling(input="proba", device="cpu", verbose=verbose)
    est.fit(Pc, yc)
    captured = capsys.readouterr()
    assert captured.out == ""
    assert est.temperature_ == quiet.temperature_
    np.testing.assert_array_equal(est.weights_, quiet.weights_)
    phases = ["NLL temperature", "Brier temperature", "weights"]
    if verbose == 0:
        assert captured.err == ""
        return
    for phase in phases:
        assert f"EnsembleTemperatureScaling: {phase}:" in captured.err
    lines = re.findall(r"Brier temperature: evaluation (\d+): beta \d", captured.err)
    assert bool(lines) == (verbose == 2)
    nll_line = r"NLL temperature: T = \d\S* after \d+ Newton iterations"
    assert bool(re.search(nll_line, captured.err)) == (verbose == 2)
    log_loss = EnsembleTemperatureScaling(
        input="proba", device="cpu", loss="log_loss", verbose=verbose
    ).fit(Pc, yc)
    captured = capsys.readouterr()
    assert "Brier temperature" not in captured.err
    assert "EnsembleTemperatureScaling: weights:" in captured.err
    assert log_loss.n_iter_ > 0


# (n, C, temperature, seed) of make_miscalibrated_logits where the NLL
# optimum of the weights is inside the simplex, near an edge (the uniform
# member's weight 0.005-0.05): Newton's decrement stalled at ~1e-20, above
# its old stopping threshold 1e-26, and the fit fell back to the best edge
# (training NLL 0.01 above the optimum at the first case)
INTERIOR_NEAR_EDGE = [
    (59, 5, 2.523036747458567, 35),
    (375, 11, 1.5562202558415579, 197),
    (182, 11, 8.606989699709702, 119),
]


@pytest.mark.parametrize("n,n_classes,temperature,seed", INTERIOR_NEAR_EDGE)
def test_log_loss_weights_reach_the_optimum_near_an_edge(
    n, n_classes, temperature, seed
):
    """``loss="log_loss"``: the weights minimise the paper's NLL to rounding,
    against scipy's SLSQP (from each vertex) and probmetrics'
    ``ETSCalibrator(loss="ce")``, where the optimum lies just inside an edge."""
    logits, y = make_miscalibrated_logits(
        n, n_classes, temperature=temperature, random_state=seed
    )
    Pc = softmax(logits, axis=1)
    est = EnsembleTemperatureScaling(loss="log_loss", device="cpu").fit(logits, y)
    w_ref, objective = _reference_weights("log_loss", est.temperature_, Pc, y)
    assert w_ref.min() > 1e-3  # the optimum is inside the simplex
    assert objective(est.weights_) <= objective(w_ref) + 1e-9
    np.testing.assert_allclose(est.weights_, w_ref, atol=1e-5)
    pytest.importorskip("probmetrics")
    from probmetrics.calibrators import ETSCalibrator

    ref = ETSCalibrator(loss="ce").fit(Pc, y)  # its own temperature (float32 logs)
    assert objective(est.weights_) <= _nll(_mixture(ref.w_, ref.t_, Pc), y) + 1e-9
