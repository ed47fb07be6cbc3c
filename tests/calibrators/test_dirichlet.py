"""Dirichlet calibration (ODIR) and its cross-validated variant."""

import warnings

import numpy as np
import pytest
from scipy.optimize import minimize
from scipy.special import log_softmax

from skcal import (
    DirichletCalibrator,
    DirichletCalibratorCV,
    MatrixScaling,
    TemperatureScaling,
)
from skcal.exceptions import ConvergenceWarning, GridEdgeWarning
from skcal.utils._testing import make_miscalibrated_logits


def reference_dirichlet(X, y, reg_lambda=0.0, reg_mu=None, ref_row=False):
    """The dirichletcal objective written from its definition, solved by scipy.

    Parameters are the raw [W | b] of shape (C, C + 1); with ref_row the last
    row is subtracted before the loss and the penalties (as dirichletcal).
    """
    n, c = X.shape
    F = np.hstack([log_softmax(X, axis=1), np.ones((n, 1))])
    onehot = np.eye(c)[y]
    off = np.hstack([1.0 - np.eye(c), np.zeros((c, 1))])
    bias = np.hstack([np.zeros((c, c)), np.ones((c, 1))])

    def fun(theta):
        raw = theta.reshape(c, c + 1)
        Wb = raw - raw[-1] if ref_row else raw
        logp = log_softmax(F @ Wb.T, axis=1)
        loss = -np.mean(logp[np.arange(n), y])
        g = (np.exp(logp) - onehot).T @ F / n
        if reg_mu is None:
            loss += reg_lambda * np.sum(Wb**2)
            g += 2 * reg_lambda * Wb
        else:
            loss += reg_lambda * np.sum((Wb * off) ** 2) + reg_mu * np.sum(
                (Wb * bias) ** 2
            )
            g += 2 * reg_lambda * Wb * off + 2 * reg_mu * Wb * bias
        if ref_row:
            g = g.copy()
            g[-1] -= g.sum(axis=0)
        return loss, g.ravel()

    theta0 = np.hstack([np.eye(c), np.zeros((c, 1))]).ravel()
    res = minimize(
        fun,
        theta0,
        jac=True,
        method="L-BFGS-B",
        options={"maxiter": 20000, "gtol": 1e-11, "ftol": 1e-15},
    )
    raw = res.x.reshape(c, c + 1)
    Wb = raw - raw[-1] if ref_row else raw
    return Wb[:, :-1], Wb[:, -1]


def nll(logits, y):
    return float(-np.mean(log_softmax(logits, axis=1)[np.arange(len(y)), y]))


@pytest.mark.parametrize(
    "reg_lambda, reg_mu, ref_row",
    [
        (0.01, None, False),
        (0.01, 0.001, False),
        (0.01, 0.001, True),
        (0.05, None, True),
    ],
)
def test_dirichlet_matches_the_reference_objective(reg_lambda, reg_mu, ref_row, device):
    X, y = make_miscalibrated_logits(1500, 4, temperature=2.0, random_state=0)
    X = X[:, [1, 0, 2, 3]]
    X_test, y_test = make_miscalibrated_logits(3000, 4, temperature=2.0, random_state=1)
    X_test = X_test[:, [1, 0, 2, 3]]
    dc = DirichletCalibrator(
        reg_lambda=reg_lambda, reg_mu=reg_mu, ref_row=ref_row, tol=1e-7, device=device
    ).fit(X, y)
    W, b = reference_dirichlet(X, y, reg_lambda, reg_mu, ref_row)
    np.testing.assert_allclose(dc.coef_, W, atol=2e-5)
    np.testing.assert_allclose(dc.intercept_, b, atol=2e-5)
    ref_nll = nll(log_softmax(X_test, axis=1) @ W.T + b, y_test)
    assert -dc.score(X_test, y_test) == pytest.approx(ref_nll, abs=1e-6)


def test_unregularised_dirichlet_is_matrix_scaling_on_log_probabilities():
    X, y = make_miscalibrated_logits(1000, 3, temperature=2.0, random_state=2)
    dc = DirichletCalibrator(reg_lambda=0.0, tol=1e-7, device="cpu").fit(X, y)
    ms = MatrixScaling(reg_lambda=0.0, tol=1e-7, device="cpu").fit(
        log_softmax(X, axis=1), y
    )
    np.testing.assert_allclose(
        dc.predict_proba(X), ms.predict_proba(log_softmax(X, axis=1)), atol=1e-6
    )


def test_fixed_diagonal_is_temperature_scaling_on_log_probabilities():
    X, y = make_miscalibrated_logits(1000, 5, temperature=2.0, random_state=3)
    dc = DirichletCalibrator(matrix="fixed_diagonal", tol=1e-7, device="cpu").fit(X, y)
    ts = TemperatureScaling(device="cpu").fit(X, y)  # softmax is shift invariant
    np.testing.assert_allclose(np.diag(dc.coef_), 1 / ts.temperature_, rtol=1e-5)
    np.testing.assert_allclose(dc.coef_ - np.diag(np.diag(dc.coef_)), 0, atol=1e-12)
    np.testing.assert_array_equal(dc.intercept_, 0)


def test_diagonal_variant_has_no_off_diagonal_terms():
    X, y = make_miscalibrated_logits(1000, 4, temperature=2.0, random_state=4)
    dc = DirichletCalibrator(matrix="diagonal", device="cpu").fit(X, y)
    np.testing.assert_array_equal(dc.coef_ - np.diag(np.diag(dc.coef_)), 0)


def test_reg_norm_divides_by_the_number_of_entries():
    X, y = make_miscalibrated_logits(800, 4, temperature=2.0, random_state=5)
    c = 4
    plain = DirichletCalibrator(reg_lambda=0.01, reg_mu=0.002, device="cpu").fit(X, y)
    normed = DirichletCalibrator(
        reg_lambda=0.01 * c * (c - 1), reg_mu=0.002 * c, reg_norm=True, device="cpu"
    ).fit(X, y)
    np.testing.assert_allclose(plain.coef_, normed.coef_, atol=1e-10)
    l2 = DirichletCalibrator(reg_lambda=0.01, device="cpu").fit(X, y)
    l2n = DirichletCalibrator(
        reg_lambda=0.01 * c * (c + 1), reg_norm=True, device="cpu"
    )
    np.testing.assert_allclose(l2.coef_, l2n.fit(X, y).coef_, atol=1e-10)


def test_cv_selects_the_best_cross_validated_nll():
    X, y = make_miscalibrated_logits(600, 3, temperature=2.0, random_state=6)
    cv = DirichletCalibratorCV(
        reg_lambdas=[1e-1, 1e-4],
        reg_mus=[1e-1, 1e-4],
        include_auto=False,
        grid_extensions=0,
        cv=3,
        random_state=0,
        device="cpu",
    ).fit(X, y)
    res = cv.cv_results_
    best = int(np.nanargmin(res["mean_test_nll"]))
    assert (cv.reg_lambda_, cv.reg_mu_) == tuple(res["params"][best].values())
    # recompute one candidate's cross-validated NLL independently
    from sklearn.model_selection import StratifiedKFold

    folds = StratifiedKFold(3, shuffle=True, random_state=0).split(X, y)
    params = res["params"][1]
    scores = []
    for train, test in folds:
        est = DirichletCalibrator(**params, device="cpu", tol=1e-9).fit(
            X[train], y[train]
        )
        scores.append(-est.score(X[test], y[test]))
    assert res["mean_test_nll"][1] == pytest.approx(np.mean(scores), abs=1e-5)
    final = DirichletCalibrator(
        reg_lambda=cv.reg_lambda_, reg_mu=cv.reg_mu_, device="cpu"
    ).fit(X, y)
    np.testing.assert_allclose(cv.predict_proba(X), final.predict_proba(X), atol=1e-7)


def test_cv_path_stops_after_a_clearly_worse_reg_lambda():
    """The path over reg_lambdas stops after the first value whose best mean
    held-out NLL is more than 0.1% above the best of the larger ones; the
    points it scored are those of the whole grid, and so is the selection."""
    X, y = make_miscalibrated_logits(900, 6, temperature=2.0, random_state=3)
    kwargs = dict(
        reg_lambdas=[1.0, 1e-1, 1e-2, 1e-4, 1e-6],
        reg_mus=[1e-1, 1e-3],
        include_auto=False,
        grid_extensions=0,
        cv=3,
        random_state=0,
        device="cpu",
    )
    full = DirichletCalibratorCV(early_stopping=False, **kwargs).fit(X, y)
    short = DirichletCalibratorCV(**kwargs).fit(X, y)
    table = full.cv_results_["mean_test_nll"].reshape(5, 2)
    assert np.isfinite(table).all()
    # the first row whose best is clearly worse than every row before it
    stop = next(r for r in range(1, 5) if table[r].min() > table[:r].min() * (1 + 1e-3))
    assert stop < 4, "the case must exercise the stop"
    got = short.cv_results_["mean_test_nll"].reshape(5, 2)
    np.testing.assert_array_equal(got[: stop + 1], table[: stop + 1])
    assert np.isnan(got[stop + 1 :]).all()
    assert (short.reg_lambda_, short.reg_mu_) == (full.reg_lambda_, full.reg_mu_)
    np.testing.assert_array_equal(short.coef_, full.coef_)


def test_cv_grid_grows_past_an_edge_to_the_choice_of_a_wider_grid():
    """The best reg_lambda of (1e-3, 1e-4) is its larger end: the grid grows
    to 1e-2 (better) and 1e-1 (worse) and selects what the explicit grid
    (1e-1, ..., 1e-4) selects, with the same held-out scores; no warning."""
    X, y = make_miscalibrated_logits(300, 3, temperature=2.0, random_state=0)
    kwargs = dict(reg_mus=None, include_auto=False, cv=3, random_state=0, device="cpu")
    with warnings.catch_warnings():
        warnings.simplefilter("error", GridEdgeWarning)
        grown = DirichletCalibratorCV(
            reg_lambdas=(1e-3, 1e-4), grid_extensions=4, **kwargs
        ).fit(X, y)
    wide = DirichletCalibratorCV(
        reg_lambdas=(1e-1, 1e-2, 1e-3, 1e-4), grid_extensions=0, **kwargs
    ).fit(X, y)
    assert grown.reg_lambda_ == wide.reg_lambda_ == 1e-2
    np.testing.assert_array_equal(grown.reg_lambdas_, [1e-1, 1e-2, 1e-3, 1e-4])
    ours, ref = grown.cv_results_["mean_test_nll"], wide.cv_results_["mean_test_nll"]
    np.testing.assert_allclose(ours[:3], ref[:3], atol=5e-5)
    np.testing.assert_allclose(grown.coef_, wide.coef_, atol=1e-10)


def test_cv_grid_growth_is_bounded_and_then_warns():
    """One extension allowed: (1e-3, 1e-4) grows to 1e-2, still the best
    end (1e-1 is not scored), and the warning says the grid was grown."""
    X, y = make_miscalibrated_logits(300, 3, temperature=2.0, random_state=0)
    cal = DirichletCalibratorCV(
        reg_lambdas=(1e-3, 1e-4), reg_mus=None, include_auto=False,
        grid_extensions=1, cv=3, random_state=0, device="cpu",
    )  # fmt: skip
    with pytest.warns(GridEdgeWarning, match="grown 1 times by grid_extensions"):
        cal.fit(X, y)
    assert cal.reg_lambda_ == 1e-2
    np.testing.assert_array_equal(cal.reg_lambdas_, [1e-2, 1e-3, 1e-4])


def test_cv_scores_the_default_ridge_toward_temperature_scaling():
    """``include_auto``: DirichletCalibrator()'s default is a candidate with
    the held-out NLL of an independent cross-validation of it, and is
    selected where it beats the ODIR grid (10 classes, 400 rows)."""
    from sklearn.model_selection import StratifiedKFold

    X, y = make_miscalibrated_logits(400, 10, temperature=2.0, random_state=0)
    cal = DirichletCalibratorCV(cv=3, random_state=0, device="cpu").fit(X, y)
    res = cal.cv_results_
    assert res["params"][0] == {"reg_lambda": "auto", "reg_mu": None}
    scores = []
    for train, test in StratifiedKFold(3, shuffle=True, random_state=0).split(X, y):
        est = DirichletCalibrator(device="cpu", tol=1e-9).fit(X[train], y[train])
        scores.append(-est.score(X[test], y[test]))
    assert res["mean_test_nll"][0] == pytest.approx(np.mean(scores), abs=1e-5)
    assert res["mean_test_nll"][0] < np.nanmin(res["mean_test_nll"][1:]) - 1e-3
    assert (cal.reg_lambda_, cal.reg_mu_) == ("auto", None)
    plain = DirichletCalibrator(device="cpu").fit(X, y)
    np.testing.assert_allclose(cal.predict_proba(X), plain.predict_proba(X), atol=1e-12)


def test_cv_fold_fits_reach_the_minimum_of_the_plain_solver():
    """The fold fits' preconditioned coordinates change the path of L-BFGS,
    not its minimum: both solved tightly give the same probabilities."""
    X, y = make_miscalibrated_logits(800, 5, temperature=2.0, random_state=4)
    y_index = np.unique(y, return_inverse=True)[1]
    w = np.ones(len(y))
    proba = []
    for precondition in (False, True):
        est = DirichletCalibrator(
            reg_lambda=1e-2, reg_mu=1e-2, device="cpu", tol=1e-8, max_iter=5000
        )
        est._fit(X, y_index, w, precondition=precondition)
        proba.append(est._calibrated_proba(X))
    np.testing.assert_allclose(proba[1], proba[0], atol=1e-6)


def test_cv_in_a_grid_search_recipe_agrees_on_the_objective():
    """The documented alternative: GridSearchCV over DirichletCalibrator."""
    from sklearn.model_selection import GridSearchCV, StratifiedKFold

    X, y = make_miscalibrated_logits(600, 3, temperature=2.0, random_state=7)
    grid = {"reg_lambda": [1e-1, 1e-4], "reg_mu": [1e-1, 1e-4]}
    cv = StratifiedKFold(3, shuffle=True, random_state=0)
    search = GridSearchCV(DirichletCalibrator(device="cpu"), grid, cv=cv).fit(X, y)
    ours = DirichletCalibratorCV(
        reg_lambdas=grid["reg_lambda"],
        reg_mus=grid["reg_mu"],
        include_auto=False,
        grid_extensions=0,
        cv=3,
        random_state=0,
        device="cpu",
    ).fit(X, y)
    # GridSearchCV uses score() = negative log loss: the same selection
    assert search.best_params_ == {
        "reg_lambda": ours.reg_lambda_,
        "reg_mu": ours.reg_mu_,
    }


@pytest.mark.filterwarnings("ignore::skcal.exceptions.GridEdgeWarning")
def test_cv_float32_fold_fits_score_as_grid_search_over_plain_fits():
    """From 20 classes the fold fits run in float32 alone (preconditioned):
    their held-out NLLs are those of GridSearchCV over plain float64
    DirichletCalibrator fits on the same folds, to 1e-4, and the choice is
    the same."""
    from sklearn.model_selection import GridSearchCV, StratifiedKFold

    X, y = make_miscalibrated_logits(1000, 20, temperature=2.0, random_state=11)
    grid = {"reg_lambda": [1e-1, 1e-3], "reg_mu": [1e-1, 1e-3]}
    cv = StratifiedKFold(3, shuffle=True, random_state=0)
    search = GridSearchCV(DirichletCalibrator(device="cpu"), grid, cv=cv).fit(X, y)
    ours = DirichletCalibratorCV(
        reg_lambdas=grid["reg_lambda"],
        reg_mus=grid["reg_mu"],
        include_auto=False,
        grid_extensions=0,
        early_stopping=False,
        cv=3,
        random_state=0,
        device="cpu",
    ).fit(X, y)
    assert search.best_params_ == {
        "reg_lambda": ours.reg_lambda_,
        "reg_mu": ours.reg_mu_,
    }
    theirs = {
        (p["reg_lambda"], p["reg_mu"]): -s
        for p, s in zip(
            search.cv_results_["params"], search.cv_results_["mean_test_score"]
        )
    }
    for p, s in zip(ours.cv_results_["params"], ours.cv_results_["mean_test_nll"]):
        assert s == pytest.approx(theirs[p["reg_lambda"], p["reg_mu"]], rel=1e-4)


def test_dirichletcal_reference_if_installed():
    fulldirichlet = pytest.importorskip(
        "dirichletcal.calib.fulldirichlet",
        reason="dirichletcal is not installable on this Python",
    )
    from scipy.special import softmax

    X, y = make_miscalibrated_logits(3000, 5, temperature=2.0, random_state=8)
    Xt, yt = make_miscalibrated_logits(3000, 5, temperature=2.0, random_state=9)
    ref = fulldirichlet.FullDirichletCalibrator(reg_lambda=1e-3, reg_mu=1e-3).fit(
        softmax(X, axis=1), y
    )
    ours = DirichletCalibrator(
        input="proba", reg_lambda=1e-3, reg_mu=1e-3, ref_row=True, device="cpu"
    ).fit(softmax(X, axis=1), y)
    p_ref = np.asarray(ref.predict_proba(softmax(Xt, axis=1)), dtype=np.float64)
    ref_nll = -np.mean(np.log(p_ref[np.arange(len(yt)), yt]))
    assert -ours.score(softmax(Xt, axis=1), yt) == pytest.approx(ref_nll, abs=1e-3)
    # the same map, not only the same loss: dirichletcal 0.5.3 (jax, float32)
    # agreed to 1e-4 in every probability
    np.testing.assert_allclose(
        ours.predict_proba(softmax(Xt, axis=1)), p_ref, rtol=0, atol=1e-3
    )


def test_lightly_regularised_fit_on_500_samples_raises_no_warning():
    X, y = make_miscalibrated_logits(500, 3, temperature=2.0, random_state=10)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        DirichletCalibrator(reg_lambda=1e-3, reg_mu=1e-3, device="cpu").fit(X, y)


def test_unregularised_fit_with_few_samples_per_parameter_warns():
    X, y = make_miscalibrated_logits(300, 6, temperature=2.0, random_state=11)
    with pytest.warns(UserWarning, match="42 parameters on 300 samples"):
        DirichletCalibrator(reg_lambda=0.0, device="cpu").fit(X, y)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        DirichletCalibrator(reg_lambda=1e-2, reg_mu=1e-2, device="cpu").fit(X, y)
        DirichletCalibrator(reg_lambda=0, matrix="diagonal", device="cpu").fit(X, y)
        DirichletCalibrator(device="cpu").fit(X, y)  # the regularised default


@pytest.mark.parametrize("factor", [1e100, 1e200])
@pytest.mark.parametrize("cls", [DirichletCalibrator, DirichletCalibratorCV])
def test_huge_logits_give_finite_sane_fits(cls, factor):
    """Was: NaN coef_ with a ConvergenceWarning and NaN predictions."""
    X, y = make_miscalibrated_logits(300, 3, temperature=2.0, random_state=20)
    X_huge = X * factor
    params = dict(reg_lambdas=[1e-2], reg_mus=[1e-2], cv=3, random_state=0)
    params = params if cls is DirichletCalibratorCV else {"reg_lambda": 0.0}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        est = cls(**params, device="cpu").fit(X_huge, y)
    assert np.isfinite(est.coef_).all() and np.isfinite(est.intercept_).all()
    proba = est.predict_proba(X_huge)
    assert np.isfinite(proba).all()
    # logits this large are one-hot probabilities: the map stays finite and
    # keeps the accuracy of the scores
    assert np.mean(est.predict(X_huge) == y) >= np.mean(X.argmax(1) == y) - 0.02


@pytest.mark.parametrize("factor", [1e-16, 1e-50, 1e-160])
@pytest.mark.parametrize("cls", [DirichletCalibrator, DirichletCalibratorCV])
def test_logits_below_the_resolution_of_log_p_are_refused(cls, factor):
    """Was: test NLL 9-21 (no calibration: 1.39) at 1e-16 and 1e-17 with a
    fixed reg_lambda or none; an OverflowError at 1e-160."""
    X, y = make_miscalibrated_logits(300, 4, temperature=2.0, random_state=0)
    params = dict(cv=3) if cls is DirichletCalibratorCV else dict(reg_lambda=1e-3)
    with pytest.raises(ValueError, match="log-probabilities.*Multiply the logits"):
        cls(**params, device="cpu").fit(X * factor, y)
    # rows of equal logits have exact log-probabilities: accepted
    X_flat = np.zeros_like(X)
    X_flat[:10] = X[:10]  # some informative rows, the others all equal
    cls(**params, device="cpu").fit(X_flat, y)


@pytest.mark.parametrize(
    "reg", [dict(reg_lambda=1e-3), dict(reg_lambda=1e-3, reg_mu=1e-3)]
)
def test_penalty_of_a_huge_inverse_temperature_stays_finite(monkeypatch, reg):
    # the published penalties are lam * beta^2: beta = 1e200 must not
    # overflow (a Python float raises OverflowError); the penalty is capped
    import skcal.calibrators._dirichlet as module

    huge = type("Fit", (), {"x": 1e200})()
    monkeypatch.setattr(module, "fit_inverse_temperature", lambda *a: huge)
    X, y = make_miscalibrated_logits(300, 4, temperature=2.0, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        est = DirichletCalibrator(**reg, device="cpu").fit(X, y)
    assert np.isfinite(est.predict_proba(X)).all()


def test_temperature_start_is_fitted_on_the_log_probabilities(monkeypatch):
    # the features are log p: their temperature is fitted on them (on the
    # logits it would blow the rounding of log p up when that is all there is)
    import skcal.calibrators._dirichlet as module

    seen = []
    original = module.fit_inverse_temperature

    def spy(z, *args):
        seen.append(np.array(z))
        return original(z, *args)

    monkeypatch.setattr(module, "fit_inverse_temperature", spy)
    X, y = make_miscalibrated_logits(300, 4, temperature=2.0, random_state=0)
    DirichletCalibrator(device="cpu").fit(X, y)
    np.testing.assert_allclose(seen[0], log_softmax(X, axis=1), rtol=0, atol=1e-12)


def test_cv_with_too_few_samples_names_cv_and_the_calibrator():
    X, y = make_miscalibrated_logits(8, 2, temperature=2.0, random_state=21)
    y = np.array([0, 1] * 4)
    with pytest.raises(ValueError, match=r"DirichletCalibratorCV\(cv=5\) needs"):
        DirichletCalibratorCV(cv=5, device="cpu").fit(X, y)
    X, y = make_miscalibrated_logits(60, 3, temperature=2.0, random_state=22)
    y[y == 2] = 0
    y[:3] = 2  # a class with 3 samples and cv=5
    with pytest.warns(UserWarning, match=r"DirichletCalibratorCV\(cv=5\): 1 class"):
        DirichletCalibratorCV(
            cv=5, reg_lambdas=[1e-2], reg_mus=[1e-2], device="cpu"
        ).fit(X, y)


@pytest.mark.parametrize("n_rows", [300, 24])
def test_default_shrinks_toward_temperature_scaling_with_the_sms_ridge(n_rows):
    """reg_lambda='auto': W = beta (I + D) on log p, ridge 4 C / n times
    clip(g, 1, 4) on diag(D) and b and times clip(g, 1, 4 (C - 1)) on
    offdiag(D), g = 8 (C^2 / events)^2, solved independently by scipy; 300
    rows have many events per parameter (g < 1), 24 rows few (capped)."""
    from scipy.optimize import minimize_scalar

    X, y = make_miscalibrated_logits(n_rows, 4, temperature=2.0, random_state=23)
    X = X + np.array([0.3, -0.2, 0.0, 0.1])
    n, c = X.shape
    L = log_softmax(X, axis=1)

    def nll_of(logits):
        return -np.mean(log_softmax(logits, axis=1)[np.arange(n), y])

    t = minimize_scalar(
        lambda t: nll_of(np.exp(t) * L),
        bounds=(-10, 10),
        method="bounded",
        options={"xatol": 1e-12},
    ).x
    beta = np.exp(t)
    right = np.count_nonzero(X.argmax(axis=1) == y)
    g = 8 * (c * c / max(1, min(right, n - right))) ** 2
    assert (g < 1) if n_rows == 300 else (g > 4 * (c - 1))
    lam_d = 4 * c / n * np.clip(g, 1, 4)
    lam_o = 4 * c / n * np.clip(g, 1, 4 * (c - 1))
    eye, off = np.eye(c), 1 - np.eye(c)

    def fun(theta):
        D, b = theta[: c * c].reshape(c, c), theta[c * c :]
        return (
            nll_of(beta * L @ (eye + D).T + b)
            + lam_d * (np.sum(np.diag(D) ** 2) + np.sum(b**2))
            + lam_o * np.sum((D * off) ** 2)
        )

    res = minimize(fun, np.zeros(c * c + c), method="BFGS", options={"gtol": 1e-10})
    D, b = res.x[: c * c].reshape(c, c), res.x[c * c :]
    dc = DirichletCalibrator(tol=1e-9, device="cpu").fit(X, y)
    np.testing.assert_allclose(dc.coef_, beta * (eye + D), atol=1e-5)
    np.testing.assert_allclose(dc.intercept_, b, atol=1e-5)
    ts = TemperatureScaling(device="cpu").fit(X, y)
    assert nll_of(dc.decision_function(X)) <= nll_of(X / ts.temperature_) + 1e-12
    with pytest.raises(ValueError, match="reg_mu selects ODIR"):
        DirichletCalibrator(reg_mu=1e-3, device="cpu").fit(X, y)


def test_cv_refuses_hours_of_work_on_the_cpu():
    """At 1,000 classes 125 fold fits take hours: refused up front."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(2000, 1000))
    y = rng.integers(0, 1000, 2000)
    with pytest.raises(ValueError, match="takes hours.*DirichletCalibrator"):
        DirichletCalibratorCV(device="cpu", classes=np.arange(1000)).fit(X, y)
