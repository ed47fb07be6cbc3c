"""Structured matrix and vector scaling against the paper's formulas and
probmetrics.

Berta, Holzmüller, Jordan, Bach, "Structured matrix scaling for multi-class
calibration" (AISTATS 2026), as the ``StructuredMatrixScaling`` docstring
writes them out.
"""

import functools

import numpy as np
import pytest
from scipy.optimize import minimize, minimize_scalar
from scipy.special import log_softmax, softmax
from sklearn.datasets import load_breast_cancer, load_digits, load_wine
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split

from skcal import StructuredMatrixScaling, StructuredVectorScaling
from skcal.exceptions import MissingClassWarning
from skcal.utils._testing import make_miscalibrated_logits

FLOOR = np.log(np.finfo(np.float32).tiny)


def reference_sms(X, y, lam=(1.0, 1.0, 1.0), rho=1.0, tau=1.0):
    """The three steps of Berta et al. (2026), one by one, with scipy solvers."""
    n, c = X.shape
    z = np.maximum(log_softmax(X, axis=1), FLOOR)
    res = minimize_scalar(
        lambda u: -np.mean(log_softmax(np.exp(u) * z, axis=1)[np.arange(n), y]),
        bounds=(-16, 16),
        method="bounded",
        options={"xatol": 1e-12},
    )
    beta = np.exp(res.x)
    mix = 1 / (n + 1)
    x = np.log((1 - mix) * softmax(beta * z, axis=1) + mix / c)
    l_b = lam[0] * c**rho / n**tau
    l_d = lam[1] * c**rho / n**tau
    l_o = lam[2] * (c * (c - 1)) ** rho / n**tau
    onehot, eye = np.eye(c)[y], np.eye(c)

    def fun(theta):
        D, b = theta[: c * c].reshape(c, c), theta[c * c :]
        logp = log_softmax(x @ (eye + D).T + b, axis=1)
        r = (np.exp(logp) - onehot) / n
        pen_w = l_d * eye + l_o * (1 - eye)
        loss = -np.mean(logp[np.arange(n), y]) + np.sum(pen_w * D**2) + l_b * b @ b
        grad = np.concatenate(
            [(r.T @ x + 2 * pen_w * D).ravel(), r.sum(0) + 2 * l_b * b]
        )
        return loss, grad

    sol = minimize(
        fun,
        np.zeros(c * c + c),
        jac=True,
        method="L-BFGS-B",
        options={"maxiter": 20000, "gtol": 1e-11, "ftol": 1e-15},
    )
    D, b = sol.x[: c * c].reshape(c, c), sol.x[c * c :]
    return beta, eye + D, b, mix


@pytest.mark.parametrize("lam", [(1.0, 1.0, 1.0), (0.1, 2.0, 0.5)])
def test_sms_matches_the_papers_formulas(lam, device):
    X, y = make_miscalibrated_logits(1200, 4, temperature=2.0, random_state=0)
    X = X + np.array([0.5, -0.5, 0.0, 0.2])
    sms = StructuredMatrixScaling(
        reg_intercept=lam[0],
        reg_diagonal=lam[1],
        reg_off_diagonal=lam[2],
        tol=1e-7,
        device=device,
    ).fit(X, y)
    beta, W, b, mix = reference_sms(X, y, lam)
    assert sms.beta_ == pytest.approx(beta, rel=1e-6)
    assert sms.mix_ == mix
    np.testing.assert_allclose(sms.coef_, W, atol=2e-5)
    np.testing.assert_allclose(sms.intercept_, b, atol=2e-5)


def test_sms_with_a_float32_first_phase_matches_the_papers_formulas(monkeypatch):
    # from 20 classes the solver starts in float32 and finishes in float64
    # from that point (and its correction pairs): the float64 stopping rule
    # decides, so the solution is the reference's, as a float64-only run's
    import skcal._torch.kernels._affine as affine

    X, y = make_miscalibrated_logits(800, 20, temperature=2.0, random_state=3)
    assert affine._FLOAT32_MIN_CLASSES <= 20
    sms = StructuredMatrixScaling(tol=1e-7).fit(X, y)
    beta, W, b, mix = reference_sms(X, y)
    np.testing.assert_allclose(sms.coef_, W, atol=2e-5)
    np.testing.assert_allclose(sms.intercept_, b, atol=2e-5)
    monkeypatch.setattr(affine, "_FLOAT32_MIN_CLASSES", 10**9)
    only64 = StructuredMatrixScaling(tol=1e-7).fit(X, y)
    np.testing.assert_allclose(sms.coef_, only64.coef_, atol=2e-5)


@pytest.mark.parametrize("row_factors", [True, False])
@pytest.mark.parametrize("lam", [(1.0, 1.0, 1.0), (0.2, 0.05, 0.1)])
def test_sms_preconditioned_solve_matches_the_papers_formulas(
    monkeypatch, row_factors, lam
):
    # the map is solved in coordinates whitened by one Cholesky factor per
    # row (or, above _ROW_FACTORS_MAX_CLASSES classes, one shared factor):
    # the minimiser is scipy's on the paper's objective in either case
    import skcal._torch.kernels._affine as affine

    if not row_factors:
        monkeypatch.setattr(affine, "_ROW_FACTORS_MAX_CLASSES", 0)
    X, y = make_miscalibrated_logits(700, 22, temperature=2.0, random_state=5)
    X = X + np.linspace(-1.0, 1.0, 22)  # unequal class frequencies
    sms = StructuredMatrixScaling(
        reg_intercept=lam[0], reg_diagonal=lam[1], reg_off_diagonal=lam[2], tol=1e-7
    ).fit(X, y)
    beta, W, b, mix = reference_sms(X, y, lam)
    np.testing.assert_allclose(sms.coef_, W, atol=2e-5)
    np.testing.assert_allclose(sms.intercept_, b, atol=2e-5)


def test_sms_at_many_classes_matches_probmetrics_nll():
    # issue 51: at 50-100 classes skcal's solve (preconditioned) reaches
    # probmetrics' test NLL, to 1e-3 relative
    pytest.importorskip("probmetrics", reason="probmetrics is not installed")
    from probmetrics.calibrators import get_calibrator

    c = 50
    X, y = make_miscalibrated_logits(4000, c, temperature=2.0, random_state=7)
    rng = np.random.default_rng(7)
    X = X @ (np.eye(c) + 0.3 * rng.random((c, c)) / c).T + rng.normal(0, 0.5, c)
    P, Pt = softmax(X[:2000], axis=1), softmax(X[2000:], axis=1)
    y, yt = y[:2000], y[2000:]
    ref = get_calibrator("sms")
    ref.fit(P, y)
    ref_nll = nll(ref.predict_proba(Pt), yt)
    ours = StructuredMatrixScaling(input="proba", device="cpu").fit(P, y)
    assert nll(ours.predict_proba(Pt), yt) == pytest.approx(ref_nll, rel=1e-3)


def test_sms_from_probabilities_equals_from_logits():
    X, y = make_miscalibrated_logits(600, 3, temperature=2.0, random_state=1)
    a = StructuredMatrixScaling(tol=1e-7, device="cpu").fit(X, y)
    b = StructuredMatrixScaling(input="proba", tol=1e-7, device="cpu")
    b.fit(softmax(X, axis=1), y)
    np.testing.assert_allclose(
        a.predict_proba(X), b.predict_proba(softmax(X, axis=1)), atol=1e-6
    )


def test_probmetrics_reference_if_installed():
    pytest.importorskip("probmetrics", reason="probmetrics is not installed")
    from probmetrics.calibrators import get_calibrator

    X, y = make_miscalibrated_logits(3000, 6, temperature=2.0, random_state=2)
    X = X + np.linspace(-1, 1, 6)
    Xt, yt = make_miscalibrated_logits(5000, 6, temperature=2.0, random_state=3)
    Xt = Xt + np.linspace(-1, 1, 6)
    P, Pt = softmax(X, axis=1), softmax(Xt, axis=1)
    ref = get_calibrator("sms")
    ref.fit(P, y)
    p_ref = ref.predict_proba(Pt)
    ref_nll = -np.mean(np.log(p_ref[np.arange(len(yt)), yt]))
    ours = StructuredMatrixScaling(input="proba", device="cpu").fit(P, y)
    assert -ours.score(Pt, yt) == pytest.approx(ref_nll, abs=1e-3)


@pytest.mark.parametrize("factor", [1e-8, 1e-17, 1e-50, 10.0, 100.0])
def test_logits_of_any_scale_give_the_same_map(factor):
    """The features are a softmax of temperature-scaled log p, blind to a
    constant per row: SMS on logits times any factor is SMS on the logits.
    Was, at 1e-17 and below: fitted on log p, which rounds the logits'
    differences away (uniform predictions, NLL 1.387 against temperature
    scaling's 0.790) while predict kept them; and times 10 or 100: log p
    floored at float32's -87.3, which merges every margin beyond it (real
    letter logits times 10: NLL 0.181 against 0.161 for temperature
    scaling)."""
    X, y = make_miscalibrated_logits(600, 4, temperature=2.0, random_state=0)
    X[:40] *= 30.0  # margins beyond 87.3 once scaled by 10 or 100
    Xt, _ = make_miscalibrated_logits(300, 4, temperature=2.0, random_state=1)
    Xt[:20] *= 30.0
    reference = StructuredMatrixScaling(device="cpu").fit(X, y)
    small = StructuredMatrixScaling(device="cpu").fit(X * factor, y)
    assert small.beta_ * factor == pytest.approx(reference.beta_, rel=1e-6)
    np.testing.assert_allclose(
        small.predict_proba(Xt * factor), reference.predict_proba(Xt), atol=1e-6
    )


# ============================================= structured vector scaling (SVS)
@functools.cache
def real_scores(name):
    """Logits of a quick, overconfident LogisticRegression on a bundled set
    (standardised features, C=10): calibration and test halves of the rows
    it was not trained on."""
    loader = {"digits": load_digits, "wine": load_wine, "cancer": load_breast_cancer}
    X, y = loader[name](return_X_y=True)
    X = (X - X.mean(0)) / (X.std(0) + 1e-9)
    X_fit, X_rest, y_fit, y_rest = train_test_split(
        X, y, train_size=0.3, random_state=0, stratify=y
    )
    X_cal, X_test, y_cal, y_test = train_test_split(
        X_rest, y_rest, train_size=0.5, random_state=0, stratify=y_rest
    )
    clf = LogisticRegression(C=10.0, max_iter=5000).fit(X_fit, y_fit)

    def logits(A):
        d = clf.decision_function(A)
        return np.c_[np.zeros(len(A)), d] if d.ndim == 1 else d

    return logits(X_cal), y_cal, logits(X_test), y_test


def reference_svs(X, y, lam=(1.0, 1.0), w=None, held=()):
    """Berta et al.'s SVS step by step (scipy): temperature scaling of
    ``log p``, the uniform mixture, then ``softmax(v x + b)`` by L-BFGS-B on
    the weighted mean NLL plus ``lambda_b ||b||^2 + lambda_d ||v - 1||^2``,
    ``lambda = lam C / n`` with ``n`` Kish's ``(sum w)^2 / sum w^2``. The
    classes of ``held`` keep ``v = 1``, ``b = 0``."""
    n_rows, c = X.shape
    w = np.ones(n_rows) if w is None else np.asarray(w, dtype=float)
    w_mean = w / w.sum()
    n = w.sum() ** 2 / (w @ w)
    rows = np.arange(n_rows)
    z = log_softmax(X, axis=1)
    res = minimize_scalar(
        lambda u: -w_mean @ log_softmax(np.exp(u) * z, axis=1)[rows, y],
        bounds=(-16, 16),
        method="bounded",
        options={"xatol": 1e-12},
    )
    beta, mix = np.exp(res.x), 1 / (n + 1)
    x = np.log((1 - mix) * softmax(beta * z, axis=1) + mix / c)
    l_b, l_d = lam[0] * c / n, lam[1] * c / n
    free = np.ones(c)
    free[list(held)] = 0.0

    def fun(theta):
        d, b = theta[:c] * free, theta[c:] * free
        logp = log_softmax(x * (1 + d) + b, axis=1)
        r = w_mean[:, None] * (np.exp(logp) - np.eye(c)[y])
        loss = -w_mean @ logp[rows, y] + l_d * d @ d + l_b * b @ b
        grad = np.concatenate([(r * x).sum(0) + 2 * l_d * d, r.sum(0) + 2 * l_b * b])
        return loss, grad * np.tile(free, 2)

    sol = minimize(
        fun,
        np.zeros(2 * c),
        jac=True,
        method="L-BFGS-B",
        options={"maxiter": 20000, "gtol": 1e-11, "ftol": 1e-15},
    )
    return beta, mix, 1 + sol.x[:c] * free, sol.x[c:] * free


def nll(P, y):
    return -np.mean(np.log(P[np.arange(len(y)), y]))


@pytest.mark.parametrize("lam", [(1.0, 1.0), (0.1, 3.0)])
def test_svs_matches_the_papers_formulas_on_digits(lam, device):
    X, y, Xt, _ = real_scores("digits")
    svs = StructuredVectorScaling(
        reg_intercept=lam[0], reg_diagonal=lam[1], tol=1e-8, device=device
    ).fit(X, y)
    beta, mix, v, b = reference_svs(X, y, lam)
    assert svs.beta_ == pytest.approx(beta, rel=1e-6)
    assert svs.mix_ == pytest.approx(mix, rel=1e-12)
    np.testing.assert_allclose(svs.coef_, v, atol=2e-5)
    np.testing.assert_allclose(svs.intercept_, b, atol=2e-5)
    # predict: softmax(v * log p~ + b) of the test scores
    zt = log_softmax(Xt, axis=1)
    xt = np.log((1 - mix) * softmax(beta * zt, axis=1) + mix / X.shape[1])
    expected = softmax(xt * v + b, axis=1)
    np.testing.assert_allclose(svs.predict_proba(Xt), expected, atol=1e-5)


def test_svs_is_stationary_for_the_papers_objective_by_hand():
    # the gradient of mean CE + (C/n)(||b||^2 + ||v - 1||^2) at the fitted
    # parameters, written out with numpy: zero at a minimum
    X, y, _, _ = real_scores("wine")
    n, c = X.shape
    svs = StructuredVectorScaling(tol=1e-9, device="cpu").fit(X, y)
    x = np.log(
        (1 - 1 / (n + 1)) * softmax(svs.beta_ * log_softmax(X, axis=1), axis=1)
        + 1 / ((n + 1) * c)
    )
    r = (softmax(svs.coef_ * x + svs.intercept_, axis=1) - np.eye(c)[y]) / n
    grad_v = (r * x).sum(0) + 2 * (c / n) * (svs.coef_ - 1)
    grad_b = r.sum(0) + 2 * (c / n) * svs.intercept_
    assert np.abs(grad_v).max() < 1e-8 and np.abs(grad_b).max() < 1e-8
    # and the pre-scaling's inverse temperature zeroes the TS derivative
    z = log_softmax(X, axis=1)
    q = softmax(svs.beta_ * z, axis=1)
    assert abs(np.mean((q * z).sum(1) - z[np.arange(n), y])) < 1e-7


@pytest.mark.parametrize("name", ["digits", "wine", "cancer"])
def test_svs_agrees_with_probmetrics_on_real_data(name):
    pytest.importorskip("probmetrics", reason="probmetrics is not installed")
    from probmetrics.calibrators import get_calibrator

    X, y, Xt, yt = real_scores(name)
    P, Pt = softmax(X, axis=1), softmax(Xt, axis=1)
    ref = get_calibrator("svs")
    ref.fit(P, y)
    p_ref = np.asarray(ref.predict_proba(Pt), dtype=np.float64)
    ours = StructuredVectorScaling(input="proba", device="cpu").fit(P, y)
    p_ours = ours.predict_proba(Pt)
    # probmetrics solves in float32: its parameters agree to ~1e-4
    assert nll(p_ours, yt) == pytest.approx(nll(p_ref, yt), abs=1e-3)
    np.testing.assert_allclose(p_ours, p_ref, atol=2e-4)
    np.testing.assert_allclose(ours.coef_, ref.v_, atol=5e-4)


def test_svs_absent_class_keeps_its_column():
    X, y, Xt, _ = real_scores("digits")
    keep = y != 3
    with pytest.warns(MissingClassWarning):
        svs = StructuredVectorScaling(
            classes=np.arange(10), tol=1e-8, device="cpu"
        ).fit(X[keep], y[keep])
    assert svs.coef_[3] == 1.0 and svs.intercept_[3] == 0.0
    _, _, v, b = reference_svs(X[keep], y[keep], held=[3])
    np.testing.assert_allclose(svs.coef_, v, atol=2e-5)
    np.testing.assert_allclose(svs.intercept_, b, atol=2e-5)
    P = svs.predict_proba(Xt)
    assert P.shape == (len(Xt), 10) and np.isfinite(P).all()
    np.testing.assert_allclose(P.sum(axis=1), 1.0, rtol=1e-12)


def test_svs_sample_weight_is_the_weighted_objective():
    X, y, _, _ = real_scores("wine")
    w = np.random.default_rng(0).integers(0, 4, len(y)).astype(float)
    w_in = w.copy()
    svs = StructuredVectorScaling(tol=1e-8, device="cpu").fit(X, y, sample_weight=w)
    np.testing.assert_array_equal(w, w_in)  # not modified in place
    beta, mix, v, b = reference_svs(X, y, w=w)
    assert svs.beta_ == pytest.approx(beta, rel=1e-6)
    assert svs.mix_ == pytest.approx(mix, rel=1e-12)
    np.testing.assert_allclose(svs.coef_, v, atol=2e-5)
    np.testing.assert_allclose(svs.intercept_, b, atol=2e-5)
    # rows of weight 0 are as if absent (n counts the others)
    _, _, v0, b0 = reference_svs(X[w > 0], y[w > 0], w=w[w > 0])
    np.testing.assert_allclose(svs.coef_, v0, atol=2e-5)
    np.testing.assert_allclose(svs.intercept_, b0, atol=2e-5)


def test_svs_from_probabilities_equals_from_logits():
    X, y, Xt, _ = real_scores("digits")
    a = StructuredVectorScaling(tol=1e-8, device="cpu").fit(X, y)
    b = StructuredVectorScaling(input="proba", tol=1e-8, device="cpu")
    b.fit(softmax(X, axis=1), y)
    np.testing.assert_allclose(
        a.predict_proba(Xt), b.predict_proba(softmax(Xt, axis=1)), atol=1e-6
    )


def test_svs_fits_a_thousand_classes_in_linear_memory():
    # 2 C parameters and O(n C) work: 1,000 classes is an ordinary input;
    # the fitted point zeroes the gradient of the paper's objective
    X, y = make_miscalibrated_logits(3000, 1000, temperature=2.0, random_state=0)
    n, c = X.shape
    with pytest.warns(MissingClassWarning):  # ~5% of 1,000 classes unseen
        svs = StructuredVectorScaling(tol=1e-7, device="cpu").fit(X, y)
    assert svs.coef_.shape == (c,) and svs.intercept_.shape == (c,)
    x = np.log(
        (1 - 1 / (n + 1)) * softmax(svs.beta_ * log_softmax(X, axis=1), axis=1)
        + 1 / ((n + 1) * c)
    )
    r = (softmax(svs.coef_ * x + svs.intercept_, axis=1) - np.eye(c)[y]) / n
    present = np.bincount(y, minlength=c) > 0
    grad_v = (r * x).sum(0) + 2 * (c / n) * (svs.coef_ - 1)
    grad_b = r.sum(0) + 2 * (c / n) * svs.intercept_
    assert np.abs(grad_v[present]).max() < 1e-6
    assert np.abs(grad_b[present]).max() < 1e-6
