"""Temperature, bias-corrected temperature, vector and matrix scaling against
independent references."""

import warnings

import numpy as np
import pytest
from scipy.optimize import minimize, minimize_scalar
from scipy.special import log_softmax, softmax
from sklearn.calibration import CalibratedClassifierCV
from sklearn.exceptions import ConvergenceWarning
from sklearn.frozen import FrozenEstimator

from skcal import (
    BiasCorrectedTemperatureScaling,
    MatrixScaling,
    TemperatureScaling,
    VectorScaling,
)
from skcal.exceptions import InputWarning, MissingClassWarning
from skcal.metrics import negative_log_likelihood
from skcal.utils._testing import FixedLogits, make_miscalibrated_logits


def sklearn_temperature(X, y, sample_weight=None):
    clf = FrozenEstimator(FixedLogits().fit(X, y))
    cal = CalibratedClassifierCV(clf, method="temperature")
    cal.fit(X, y, sample_weight=sample_weight)
    return 1.0 / float(cal.calibrated_classifiers_[0].calibrators[0].beta_)


def nll(logits, y, w=None):
    return float(
        np.average(-log_softmax(logits, axis=1)[np.arange(len(y)), y], weights=w)
    )


@pytest.mark.parametrize(
    "n, c, temperature, dtype, weighted",
    [
        (2000, 2, 0.5, np.float64, False),
        (3000, 10, 3.0, np.float64, False),
        (3000, 10, 3.0, np.float32, False),
        (1500, 5, 1.7, np.float64, True),
        (500, 100, 2.5, np.float64, False),
    ],
)
def test_temperature_matches_sklearn(n, c, temperature, dtype, weighted, device):
    X, y = make_miscalibrated_logits(n, c, temperature=temperature, random_state=c)
    X = X.astype(dtype)
    w = np.random.default_rng(0).uniform(0.2, 2.0, n) if weighted else None
    ours = TemperatureScaling(device=device).fit(X, y, sample_weight=w).temperature_
    # sklearn evaluates the loss in the input dtype, which limits its own
    # precision for float32; give it the very same values in float64.
    reference = sklearn_temperature(X.astype(np.float64), y, w)
    assert ours == pytest.approx(reference, rel=1e-4)
    # and it is the optimum of the NLL, checked with a bounded scalar solver
    res = minimize_scalar(
        lambda t: nll(X.astype(np.float64) / t, y, w),
        bounds=(0.01, 100),
        method="bounded",
        options={"xatol": 1e-10},
    )
    assert ours == pytest.approx(res.x, rel=1e-4)


def test_temperature_recovers_the_generating_temperature():
    X, y = make_miscalibrated_logits(40000, 5, temperature=2.0, random_state=3)
    ts = TemperatureScaling(device="cpu").fit(X, y)
    assert ts.temperature_ == pytest.approx(2.0, rel=0.05)


def test_temperature_never_changes_the_prediction(device):
    X, y = make_miscalibrated_logits(1000, 7, temperature=0.3, random_state=1)
    ts = TemperatureScaling(device=device).fit(X, y)
    np.testing.assert_array_equal(ts.predict(X), X.argmax(1))


def test_temperature_at_bounds_is_positive_finite_and_warns():
    rng = np.random.default_rng(0)
    y = rng.integers(0, 3, 300)
    separable = 5.0 * np.eye(3)[y]
    with pytest.warns(ConvergenceWarning, match="separate the classes"):
        ts = TemperatureScaling(device="cpu").fit(separable, y)
    # no maximum-likelihood temperature (it is 0): the classifier's own T = 1
    # is kept, with or without weights
    assert ts.temperature_ == pytest.approx(1.0, rel=1e-12)
    assert np.isfinite(ts.predict_proba(separable)).all()
    w = np.where(np.arange(300) < 100, 3.0, 1.0)
    with pytest.warns(ConvergenceWarning, match="separate the classes"):
        ts = TemperatureScaling(device="cpu").fit(separable, y, sample_weight=w)
    assert ts.temperature_ == pytest.approx(1.0, rel=1e-12)
    anti = -separable
    with pytest.warns(ConvergenceWarning, match="anti-correlated"):
        ts = TemperatureScaling(device="cpu").fit(anti, y)
    assert 1e3 < ts.temperature_ < np.inf
    np.testing.assert_allclose(ts.predict_proba(anti), 1 / 3, atol=1e-5)


def test_temperature_handles_huge_logits(device):
    X, y = make_miscalibrated_logits(500, 4, temperature=5000.0, random_state=2)
    ts = TemperatureScaling(device=device).fit(X, y)
    assert np.abs(X).max() > 1e4
    proba = ts.predict_proba(X)
    assert np.isfinite(proba).all()
    assert ts.temperature_ == pytest.approx(sklearn_temperature(X, y), rel=1e-4)


def _scipy_inverse_temperature(X, y):
    """NLL-optimal inverse temperature by scipy's bounded scalar search."""
    res = minimize_scalar(
        lambda t: nll(np.exp(t) * X, y),
        bounds=(-10.0, 10.0),
        method="bounded",
        options={"xatol": 1e-12},
    )
    return float(np.exp(res.x))


def _scipy_affine_fit(X, y, matrix, l2_diag=0.0, l2_off=0.0, l2_bias=0.0, ts=True):
    """Independent reference: the same objective in numpy, solved by scipy.

    With ``ts`` the map is ``beta * (I + delta)``, ``beta`` the inverse
    temperature of temperature scaling, and the ridge acts on ``delta``
    (shrinkage toward temperature scaling); otherwise ``beta = 1``.
    """
    beta = _scipy_inverse_temperature(X, y) if ts else 1.0
    X = beta * X
    n, c = X.shape
    onehot = np.eye(c)[y]
    shape = (c, c) if matrix else (c,)
    size = int(np.prod(shape))
    off = 1 - np.eye(c)

    def fun(theta):
        delta, b = theta[:size].reshape(shape), theta[size:]
        W = np.eye(c) + delta if matrix else 1 + delta
        logits = X @ W.T + b if matrix else X * W + b
        logp = log_softmax(logits, axis=1)
        loss = -np.mean(logp[np.arange(n), y])
        r = (np.exp(logp) - onehot) / n
        g_b = r.sum(0) + 2 * l2_bias * b
        if matrix:
            g_d = r.T @ X + 2 * delta * (l2_diag * np.eye(c) + l2_off * off)
            pen = l2_diag * np.sum(np.diag(delta) ** 2) + l2_off * np.sum(
                (delta * off) ** 2
            )
        else:
            g_d = (r * X).sum(0) + 2 * l2_diag * delta
            pen = l2_diag * np.sum(delta**2)
        return loss + pen + l2_bias * np.sum(b**2), np.concatenate([g_d.ravel(), g_b])

    res = minimize(
        fun,
        np.zeros(size + c),
        jac=True,
        method="L-BFGS-B",
        options={"maxiter": 10000, "gtol": 1e-12, "ftol": 1e-15},
    )
    delta, b = res.x[:size].reshape(shape), res.x[size:]
    W = np.eye(c) + delta if matrix else 1 + delta
    return beta * W, b, res.fun


@pytest.mark.parametrize("reg_lambda", [0.0, 0.01])
def test_vector_scaling_matches_scipy(reg_lambda, device):
    X, y = make_miscalibrated_logits(800, 4, temperature=2.0, random_state=4)
    X = X + np.array([0.5, 0.0, -0.3, 0.2])
    vs = VectorScaling(reg_lambda=reg_lambda, tol=1e-7, device=device).fit(X, y)
    W, b, _ = _scipy_affine_fit(X, y, False, reg_lambda, 0.0, reg_lambda)
    np.testing.assert_allclose(vs.coef_, W, atol=1e-5)
    np.testing.assert_allclose(vs.intercept_, b, atol=1e-5)


@pytest.mark.parametrize("reg_lambda, off_reg", [(0.0, 0.0), (0.01, 0.0), (0.0, 0.05)])
def test_matrix_scaling_matches_scipy(reg_lambda, off_reg, device):
    X, y = make_miscalibrated_logits(800, 4, temperature=2.0, random_state=5)
    X = X[:, [1, 0, 2, 3]]
    ms = MatrixScaling(
        reg_lambda=reg_lambda, reg_off_diagonal=off_reg, tol=1e-7, device=device
    ).fit(X, y)
    W, b, _ = _scipy_affine_fit(
        X, y, True, reg_lambda, reg_lambda + off_reg, reg_lambda
    )
    np.testing.assert_allclose(ms.coef_, W, atol=1e-5)
    np.testing.assert_allclose(ms.intercept_, b, atol=1e-5)


@pytest.mark.parametrize("cls", [TemperatureScaling, VectorScaling, MatrixScaling])
def test_every_method_lowers_test_nll(cls, device):
    X, y = make_miscalibrated_logits(6000, 5, temperature=2.5, random_state=6)
    est = cls(device=device).fit(X[:3000], y[:3000])
    before = nll(X[3000:], y[3000:])
    after = negative_log_likelihood(y[3000:], est.predict_proba(X[3000:]))
    assert after < before - 0.05


@pytest.mark.parametrize("cls", [VectorScaling, MatrixScaling])
def test_unconverged_fit_warns(cls):
    X, y = make_miscalibrated_logits(500, 3, temperature=2.0, random_state=7)
    with pytest.warns(ConvergenceWarning, match="max_iter=1 "):
        cls(max_iter=1, device="cpu").fit(X, y)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        cls(device="cpu").fit(X, y)


@pytest.mark.parametrize("cls", [TemperatureScaling, VectorScaling, MatrixScaling])
def test_large_logits_give_finite_rows(cls):
    X, y = make_miscalibrated_logits(
        400, 5, temperature=1.0, scale=3000.0, random_state=8
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        proba = cls(device="cpu").fit(X, y).predict_proba(X)
    assert np.isfinite(proba).all()
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)


def test_results_are_deterministic(device):
    X, y = make_miscalibrated_logits(700, 6, temperature=2.0, random_state=9)
    a = MatrixScaling(reg_lambda=1e-3, device=device).fit(X, y)
    b = MatrixScaling(reg_lambda=1e-3, device=device).fit(X, y)
    np.testing.assert_array_equal(a.coef_, b.coef_)


@pytest.mark.parametrize("cls, factor", [(VectorScaling, 4), (MatrixScaling, 16)])
def test_auto_regularisation_scales_classes_over_samples(cls, factor):
    X, y = make_miscalibrated_logits(500, 5, temperature=2.0, random_state=10)
    auto = cls(tol=1e-7, device="cpu").fit(X, y)
    lam = factor * 5 / 500
    assert auto.reg_lambda_ == pytest.approx(lam, rel=1e-12)
    explicit = cls(reg_lambda=lam, tol=1e-7, device="cpu").fit(X, y)
    np.testing.assert_array_equal(auto.coef_, explicit.coef_)
    # matrix scaling's off-diagonal entries get (C - 1) times the ridge
    off = (5 - 1) * lam if cls is MatrixScaling else 0.0
    if cls is MatrixScaling:
        assert auto.reg_off_diagonal_ == pytest.approx(3 * lam, rel=1e-12)
    W, b, _ = _scipy_affine_fit(X, y, cls is MatrixScaling, lam, off, lam)
    np.testing.assert_allclose(auto.coef_, W, atol=1e-5)
    np.testing.assert_allclose(auto.intercept_, b, atol=1e-5)


def test_regularisation_keeps_nearly_separable_fits_sane():
    """Unregularised matrix scaling blows up on nearly separable scores."""
    X, y = make_miscalibrated_logits(
        300, 4, temperature=1.0, scale=8.0, random_state=11
    )
    X_test, y_test = make_miscalibrated_logits(
        3000, 4, temperature=1.0, scale=8.0, random_state=12
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        raw = MatrixScaling(reg_lambda=0.0, device="cpu").fit(X, y)
    auto = MatrixScaling(device="cpu").fit(X, y)
    nll_raw = nll(raw.decision_function(X_test), y_test)
    nll_auto = nll(auto.decision_function(X_test), y_test)
    assert nll_auto < nll_raw
    assert np.abs(auto.coef_).max() < np.abs(raw.coef_).max()


AFFINE = [VectorScaling, MatrixScaling]


@pytest.mark.parametrize("cls", [TemperatureScaling, *AFFINE])
@pytest.mark.parametrize("factor", [1e-30, 1e30, 1e100, 1e200])
def test_fit_does_not_depend_on_the_logits_units(cls, factor):
    """Logits times a: same probabilities (was: NaN coef_ at 1e100, a negative
    coef_ at 1e30 that dropped the training accuracy from 0.645 to 0.055)."""
    X, y = make_miscalibrated_logits(600, 5, temperature=2.0, random_state=13)
    ref = cls(device="cpu").fit(X, y)
    est = cls(device="cpu").fit(X * factor, y)
    np.testing.assert_allclose(
        est.predict_proba(X * factor), ref.predict_proba(X), atol=1e-6
    )
    coef = getattr(est, "coef_", None)
    if coef is not None:
        np.testing.assert_allclose(coef * factor, ref.coef_, rtol=1e-5, atol=1e-8)
    assert (est.predict(X * factor) == ref.predict(X)).all()


@pytest.mark.parametrize("cls", AFFINE)
@pytest.mark.parametrize("reg_lambda", [0.0, 1e-3, "auto", 1.0, 100.0])
def test_training_nll_never_above_temperature_scaling(cls, reg_lambda):
    """The ridge shrinks toward TS, so no ridge can make the fit worse than TS
    on its own data, even on badly scaled, offset logits."""
    X, y = make_miscalibrated_logits(400, 6, temperature=3.0, random_state=14)
    X = 40.0 * X + np.linspace(-200, 200, 6)  # large and offset per class
    ts = TemperatureScaling(device="cpu").fit(X, y)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        est = cls(reg_lambda=reg_lambda, device="cpu").fit(X, y)
    assert est.temperature_init_ == pytest.approx(ts.temperature_, rel=1e-12)
    assert nll(est.decision_function(X), y) <= nll(X / ts.temperature_, y) + 1e-12
    if reg_lambda == 100.0:  # a strong ridge stays near temperature scaling
        np.testing.assert_allclose(est.predict_proba(X), ts.predict_proba(X), atol=0.02)


@pytest.mark.parametrize("cls", AFFINE)
def test_fixed_ridge_weights_equal_repetitions(cls):
    """With a fixed reg_lambda nothing depends on n: integer weights = repeats."""
    X, y = make_miscalibrated_logits(300, 4, temperature=2.0, random_state=15)
    w = np.random.default_rng(3).integers(0, 4, size=len(y))
    a = cls(reg_lambda=0.01, tol=1e-9, device="cpu").fit(X, y, sample_weight=w)
    b = cls(reg_lambda=0.01, tol=1e-9, device="cpu").fit(
        np.repeat(X, w, 0), np.repeat(y, w)
    )
    np.testing.assert_allclose(a.predict_proba(X), b.predict_proba(X), atol=1e-7)
    # and the default ridge counts Kish's effective n: scale-free weights
    c = cls(tol=1e-9, device="cpu").fit(X, y, sample_weight=w * 1e-200)
    d = cls(tol=1e-9, device="cpu").fit(X, y, sample_weight=w)
    factor = 4 if cls is VectorScaling else 16  # n_classes / n, times 4 or 16
    n_eff = w.sum() ** 2 / np.dot(w, w)
    assert c.reg_lambda_ == pytest.approx(factor * 4 / n_eff, rel=1e-12)
    np.testing.assert_allclose(c.predict_proba(X), d.predict_proba(X), atol=1e-9)


@pytest.mark.parametrize(
    "cls, params",
    [
        (TemperatureScaling, {}),
        (VectorScaling, {"reg_lambda": 0.0}),
        (MatrixScaling, {}),
    ],
)
def test_confident_probabilities_keep_their_information(cls, params):
    """Probabilities far below 1e-12 are not floored there (issue 16).

    On logits scaled by 10 the softmax puts most classes below 1e-12; a floor
    at 1e-12 (log -27.6) erased them and temperature scaling on the
    probabilities lost 0.18 nats of test NLL. Fitted on the probabilities, a
    calibrator must equal the same calibrator fitted on log-probabilities
    computed by scipy, which are valid logits.
    """
    X, y = make_miscalibrated_logits(2000, 6, temperature=2.0, random_state=8)
    logp = log_softmax(10.0 * X, axis=1)
    P = np.exp(logp)
    assert np.mean(P < 1e-12) > 0.3 and P.min() > np.finfo(np.float64).tiny
    on_proba = cls(input="proba", device="cpu", **params).fit(P, y)
    on_logp = cls(input="logits", device="cpu", **params).fit(logp, y)
    np.testing.assert_allclose(
        on_proba.predict_proba(P), on_logp.predict_proba(logp), rtol=0, atol=1e-6
    )


def test_unregularised_matrix_scaling_is_well_conditioned():
    """Without a ridge the full map is solved in whitened coordinates: on
    strongly correlated logits it reaches scipy's minimiser in a few dozen
    L-BFGS iterations (in the logits' own coordinates it needed hundreds)."""
    rng = np.random.default_rng(3)
    X, y = make_miscalibrated_logits(3000, 12, temperature=2.0, random_state=6)
    X = X + 5.0 * rng.normal(size=(len(X), 1)) + np.linspace(-30, 30, 12)
    ms = MatrixScaling(reg_lambda=0.0, tol=1e-7, device="cpu").fit(X, y)
    W, b, fun = _scipy_affine_fit(X, y, True, 0.0, 0.0, 0.0)
    assert nll(ms.decision_function(X), y) == pytest.approx(fun, abs=1e-9)
    np.testing.assert_allclose(
        ms.predict_proba(X), softmax(X @ W.T + b, axis=1), atol=1e-5
    )
    assert ms.n_iter_ < 100


def test_unregularised_matrix_scaling_with_a_constant_column():
    """A constant logit column makes the features' second moments singular;
    the whitened solve still gives a finite fit at least as good as TS."""
    X, y = make_miscalibrated_logits(600, 5, temperature=2.0, random_state=7)
    X[:, 2] = 1.5
    ts = TemperatureScaling(device="cpu").fit(X, y)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        ms = MatrixScaling(reg_lambda=0.0, device="cpu").fit(X, y)
    assert np.all(np.isfinite(ms.coef_)) and np.all(np.isfinite(ms.intercept_))
    assert nll(ms.decision_function(X), y) <= nll(X / ts.temperature_, y) + 1e-12


# ====================================================== bias-corrected (BCTS)
def _real_logits(loader, seed=0):
    """Held-out decision scores of a regularised logistic regression on a
    bundled dataset (over-confident: the fitted temperatures are 0.2-0.5)."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import train_test_split
    from sklearn.preprocessing import StandardScaler

    X, y = loader(return_X_y=True)
    X = StandardScaler().fit_transform(X)
    Xa, Xb, ya, yb = train_test_split(X, y, test_size=0.5, random_state=seed)
    lr = LogisticRegression(C=0.1, max_iter=500).fit(Xa, ya)
    return lr.decision_function(Xb), yb


def _bcts_nll(params, Z, y, w=None, tied=None):
    """The written-out objective: weighted mean of -log softmax(z / T + b)_y,
    params = [log T, b]; ``tied``: classes whose bias is the mean of the
    others (their params entries are ignored)."""
    b = params[1:].copy()
    if tied is not None:
        b[tied] = np.mean(b[~tied])
    return nll(Z / np.exp(params[0]) + b, y, w)


def _scipy_bcts(Z, y, w=None, tied=None):
    c = Z.shape[1]
    res = minimize(
        _bcts_nll,
        np.zeros(c + 1),
        args=(Z, y, w, tied),
        method="BFGS",
        options={"gtol": 1e-10, "maxiter": 10_000},
    )
    b = res.x[1:].copy()
    if tied is not None:
        b[tied] = np.mean(b[~tied])
        b -= b[~tied].mean()
    return np.exp(res.x[0]), b - b.mean(), res.fun


@pytest.mark.parametrize("dataset", ["digits", "wine"])
def test_bcts_matches_abstention(dataset):
    """Same NLL (1e-4) and probabilities as the paper's own package."""
    pytest.importorskip("abstention")
    from abstention.calibration import TempScaling
    from sklearn.datasets import load_digits, load_wine

    Z, y = _real_logits({"digits": load_digits, "wine": load_wine}[dataset])
    ours = BiasCorrectedTemperatureScaling(device="cpu").fit(Z, y)
    c = Z.shape[1]
    # its L-BFGS-B tries T = 0 (its bound) in a line search, then backs off
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        reference = TempScaling(bias_positions="all")(Z, np.eye(c)[y])(Z)
    P = ours.predict_proba(Z)
    rows = np.arange(len(y))
    nll_ours = -np.mean(np.log(P[rows, y]))
    nll_ref = -np.mean(np.log(reference[rows, y]))
    assert nll_ours == pytest.approx(nll_ref, abs=1e-4)
    assert nll_ours <= nll_ref + 1e-7  # abstention stops at scipy's tol=1e-7
    # abstention's L-BFGS-B stops early (tol=1e-7): probabilities agree to 1e-2
    np.testing.assert_allclose(P, reference, atol=1e-2)
    # the biases move the argmax: BCTS is not temperature scaling
    ts = TemperatureScaling(device="cpu").fit(Z, y)
    assert nll_ours < nll(Z / ts.temperature_, y) - 1e-3


@pytest.mark.parametrize("weighted", [False, True])
def test_bcts_matches_scipy(weighted, device):
    """The minimum of the written-out weighted NLL, by scipy's BFGS."""
    from sklearn.datasets import load_digits

    Z, y = _real_logits(load_digits, seed=1)
    w = np.random.default_rng(0).uniform(0.2, 2.0, len(y)) if weighted else None
    ours = BiasCorrectedTemperatureScaling(device=device, tol=1e-8).fit(
        Z, y, sample_weight=w
    )
    T, b, fun = _scipy_bcts(Z, y, w)
    fitted = nll(Z / ours.temperature_ + ours.intercept_, y, w)
    assert fitted == pytest.approx(fun, abs=1e-6)
    assert ours.temperature_ == pytest.approx(T, rel=1e-4)
    np.testing.assert_allclose(ours.intercept_, b, atol=1e-4)
    assert ours.intercept_.sum() == pytest.approx(0.0, abs=1e-10)  # identifiable


def test_bcts_integer_weights_equal_repeated_rows():
    from sklearn.datasets import load_digits

    Z, y = _real_logits(load_digits, seed=2)
    reps = np.random.default_rng(1).integers(1, 4, len(y))
    params = dict(device="cpu", tol=1e-8)
    weighted = BiasCorrectedTemperatureScaling(**params).fit(Z, y, sample_weight=reps)
    repeated = BiasCorrectedTemperatureScaling(**params).fit(
        np.repeat(Z, reps, axis=0), np.repeat(y, reps)
    )
    assert weighted.temperature_ == pytest.approx(repeated.temperature_, rel=1e-6)
    np.testing.assert_allclose(weighted.intercept_, repeated.intercept_, atol=1e-6)


def test_bcts_absent_class_gets_the_mean_bias():
    """An absent class keeps its column; its bias is the mean of the others
    (0): the optimum of the written-out objective with that bias tied."""
    from sklearn.datasets import load_digits

    Z, y = _real_logits(load_digits)
    keep = y != 3
    with pytest.warns(MissingClassWarning, match=r"\[3\]"):
        ours = BiasCorrectedTemperatureScaling(
            device="cpu", tol=1e-8, classes=np.arange(10)
        ).fit(Z[keep], y[keep])
    tied = np.arange(10) == 3
    T, b, fun = _scipy_bcts(Z[keep], y[keep], tied=tied)
    assert ours.intercept_[3] == 0.0
    assert ours.intercept_.sum() == pytest.approx(0.0, abs=1e-10)
    assert ours.temperature_ == pytest.approx(T, rel=1e-4)
    np.testing.assert_allclose(ours.intercept_, b, atol=1e-4)
    P = ours.predict_proba(Z)
    assert P.shape == (len(y), 10) and (P[:, 3] > 0).all()


def test_bcts_does_not_depend_on_the_logits_units():
    from sklearn.datasets import load_digits

    Z, y = _real_logits(load_digits, seed=3)
    a = BiasCorrectedTemperatureScaling(device="cpu", tol=1e-8).fit(Z, y)
    b = BiasCorrectedTemperatureScaling(device="cpu", tol=1e-8).fit(1e3 * Z + 7, y)
    assert b.temperature_ == pytest.approx(1e3 * a.temperature_, rel=1e-5)
    np.testing.assert_allclose(a.intercept_, b.intercept_, atol=1e-5)
    np.testing.assert_allclose(
        a.predict_proba(Z), b.predict_proba(1e3 * Z + 7), atol=1e-6
    )


def test_bcts_separable_scores_keep_temperature_scaling_and_warn():
    rng = np.random.default_rng(0)
    y = rng.integers(0, 3, 300)
    separable = 5.0 * np.eye(3)[y] + rng.normal(0, 0.1, (300, 3))
    with pytest.warns(ConvergenceWarning, match="separate the classes"):
        bcts = BiasCorrectedTemperatureScaling(device="cpu").fit(separable, y)
    # like temperature scaling, the classifier's own T = 1 and no bias
    assert bcts.temperature_ == pytest.approx(1.0, rel=1e-12)
    np.testing.assert_array_equal(bcts.intercept_, 0.0)
    np.testing.assert_allclose(bcts.predict_proba(separable), softmax(separable, 1))


def test_bcts_free_parameters_and_flags():
    bcts = BiasCorrectedTemperatureScaling()
    assert bcts.n_free_parameters(10) == 10  # 1 temperature + (10 - 1) biases
    assert bcts._shift_invariant and bcts._keeps_argmax is None


def test_bcts_command_line_alias():
    from skcal.cli import method_aliases

    assert "bcts" in method_aliases()["BiasCorrectedTemperatureScaling"]


def _scipy_temperature(Z, y):
    """The temperature minimising the mean NLL of ``softmax(Z / T)``."""

    def nll(log_t):
        return -log_softmax(Z / np.exp(log_t), axis=1)[np.arange(len(y)), y].mean()

    return float(
        np.exp(
            minimize_scalar(
                nll, bounds=(-5, 5), method="bounded", options={"xatol": 1e-10}
            ).x
        )
    )


def test_one_zero_true_class_probability_cannot_drive_the_temperature():
    # probabilities rounded to 3 decimals and renormalised (the documented
    # fix for rounded files), one row whose true class got 0: floored at
    # log(2.2e-308) = -708 that row alone drove T from 0.39 to 0.82; floored at
    # half the smallest positive probability (5e-4 here) the fit is scipy's
    # on those values, and within 2% of the fit without the row
    X, y = make_miscalibrated_logits(3000, 5, temperature=1.5, random_state=3)
    P = np.round(softmax(X / 4, axis=1), 3)
    P = P / P.sum(axis=1, keepdims=True)
    i = int(np.flatnonzero(P[np.arange(len(y)), y] > 0.5)[0])
    P[i, y[i]] = 0.0
    P[i] /= P[i].sum()
    assert (P[np.arange(len(y)), y] == 0).sum() == 1
    with pytest.warns(InputWarning, match="1 of 3000 calibration rows"):
        ts = TemperatureScaling(input="proba", device="cpu").fit(P, y)
    floor = 0.5 * P[P > 0].min()
    assert ts.proba_floor_ == floor
    Q = np.maximum(P, floor)
    raised = (P < floor).any(axis=1)
    Q[raised] /= Q[raised].sum(axis=1, keepdims=True)
    assert ts.temperature_ == pytest.approx(_scipy_temperature(np.log(Q), y), rel=1e-6)
    keep = np.arange(len(y)) != i
    without = _scipy_temperature(np.log(Q[keep]), y[keep])
    assert abs(ts.temperature_ / without - 1) < 0.02


def test_fit_top_label_minimises_the_binary_cross_entropy_of_the_top_class():
    """The top-label protocol of temperature scaling (what TopVersusAll
    calls): the temperature minimises the paper's loss, the binary
    cross-entropy of the top class's softmax probability (scipy, written
    out here); bad input is refused with what was expected."""
    Z, y = make_miscalibrated_logits(1500, 7, random_state=2)
    top = Z.argmax(axis=1)
    right = (top == y).astype(float)
    rows = np.arange(len(y))

    def loss(log_t):
        log_p = log_softmax(Z / np.exp(log_t), axis=1)
        others = log_p.copy()
        others[rows, top] = -np.inf
        log_rest = np.log(np.exp(others).sum(axis=1))
        return -np.mean(right * log_p[rows, top] + (1 - right) * log_rest)

    best = minimize_scalar(
        loss, bounds=(-5, 5), method="bounded", options={"xatol": 1e-10}
    )
    ts = TemperatureScaling().fit_top_label(Z, top, right)
    np.testing.assert_allclose(ts.temperature_, np.exp(best.x), rtol=1e-6)
    assert ts.classes_.tolist() == list(range(7)) and ts.n_features_in_ == 7
    with pytest.raises(ValueError, match="top as 1500 integer column indices"):
        TemperatureScaling().fit_top_label(Z, top.astype(float), right)
    with pytest.raises(ValueError, match=r"correct as 1500 values in \{0, 1\}"):
        TemperatureScaling().fit_top_label(Z, top, right * 2)
