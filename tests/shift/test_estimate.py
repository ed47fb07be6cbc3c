"""estimate_class_priors against the papers' formulas and ``abstention``."""

import numpy as np
import pytest
from scipy.optimize import brentq, minimize
from sklearn.datasets import load_breast_cancer, load_digits, load_wine
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler

from skcal.exceptions import ConvergenceWarning
from skcal.shift import PriorEstimate, estimate_class_priors

EPS = np.finfo(np.float64).eps
#: The papers' estimators: maximum-likelihood EM, no shift test.
PAPER = {"prior_strength": 0, "shift_test": None, "reliability_check": False}


def _real_task(loader, seed=0):
    """Probabilities of a LogisticRegression on a held-out source set and a
    pool of rows to draw target sets from, with their labels."""
    X, y = loader(return_X_y=True)
    X = StandardScaler().fit_transform(X)
    X_train, X_rest, y_train, y_rest = train_test_split(
        X, y, test_size=0.6, random_state=seed, stratify=y
    )
    model = LogisticRegression(C=0.05, max_iter=2000).fit(X_train, y_train)
    X_src, X_pool, y_src, y_pool = train_test_split(
        X_rest, y_rest, test_size=0.5, random_state=seed, stratify=y_rest
    )
    return model.predict_proba(X_src), y_src, model.predict_proba(X_pool), y_pool


def _shifted(P, y, priors, n, seed=0):
    """``n`` rows of the pool drawn so that their classes follow ``priors``."""
    rng = np.random.default_rng(seed)
    labels = rng.choice(len(priors), size=n, p=priors)
    rows = [rng.choice(np.flatnonzero(y == k)) for k in labels]
    return P[rows], y[rows]


def _frequencies(y, n_classes):
    return np.bincount(y, minlength=n_classes) / len(y)


# ------------------------------------------------------------------------ EM
def test_em_solves_the_two_class_fixed_point_equation():
    """For two classes the EM fixed point q1 solves the scalar likelihood
    equation sum_i (p_i / s1 - (1 - p_i) / s0) / (q1 p_i / s1 + (1 - q1)
    (1 - p_i) / s0) = 0 (concave log-likelihood: one root in (0, 1))."""
    P_src, y_src, P_pool, y_pool = _real_task(load_breast_cancer)
    source = _frequencies(y_src, 2)
    P, _ = _shifted(P_pool, y_pool, [0.8, 0.2], 300)
    est = estimate_class_priors(
        P, source_priors=source, tol=1e-14, max_iter=100000, **PAPER
    )
    p1, s0, s1 = P[:, 1], source[0], source[1]

    def score(q1):
        return np.mean(
            (p1 / s1 - (1 - p1) / s0) / (q1 * p1 / s1 + (1 - q1) * (1 - p1) / s0)
        )

    root = brentq(score, 1e-9, 1 - 1e-9, xtol=1e-15)
    np.testing.assert_allclose(est.priors[1], root, atol=1e-9)
    # the fixed point of the EM step itself, to 1e-10
    r1, r0 = est.priors[1] / s1, est.priors[0] / s0
    step = np.mean(p1 * r1 / (p1 * r1 + (1 - p1) * r0))
    assert abs(step - est.priors[1]) < 1e-10
    assert est.converged and est.method == "em" and est.n_samples == 300
    np.testing.assert_allclose(est.weights, est.priors / source, rtol=1e-12)
    assert est.low is None and est.high is None


@pytest.mark.parametrize("loader", [load_wine, load_digits])
def test_em_matches_abstention(loader):
    """abstention's EMImbalanceAdapter (Alexandari et al.'s package), started
    from the source label frequencies, stops when no prior moves by more than
    its tolerance: the criterion of skcal's tol."""
    label_shift = pytest.importorskip("abstention.label_shift")
    P_src, y_src, P_pool, y_pool = _real_task(loader)
    C = P_src.shape[1]
    priors = np.random.default_rng(1).dirichlet(np.ones(C))
    P, _ = _shifted(P_pool, y_pool, priors, 50 * C)
    source = _frequencies(y_src, C)
    adapter = label_shift.EMImbalanceAdapter(
        estimate_priors_from_valid_labels=True, tolerance=1e-10, max_iterations=5000
    )
    func = adapter(
        tofit_initial_posterior_probs=P,
        valid_posterior_probs=P_src,
        valid_labels=np.eye(C)[y_src],
    )
    expected = func.multipliers * source
    est = estimate_class_priors(
        P, source_priors=source, tol=1e-10, max_iter=5000, **PAPER
    )
    np.testing.assert_allclose(est.priors, expected, atol=1e-6)
    # and the adapted probabilities
    adapted = P * est.weights
    adapted /= adapted.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(adapted, func(P), atol=1e-6)


def test_em_warns_when_it_does_not_converge():
    P_src, y_src, P_pool, y_pool = _real_task(load_wine)
    P, _ = _shifted(P_pool, y_pool, [0.7, 0.2, 0.1], 100)
    with pytest.warns(ConvergenceWarning, match=r"did not converge in 2 iterations"):
        est = estimate_class_priors(
            P, source_priors=_frequencies(y_src, 3), tol=1e-15, max_iter=2
        )
    assert not est.converged and est.n_iter == 2
    np.testing.assert_allclose(est.priors.sum(), 1.0, rtol=1e-12)


@pytest.mark.parametrize("loader", [load_wine, load_digits, load_breast_cancer])
def test_shift_test_keeps_the_source_priors_without_shift(loader):
    """Target rows drawn like the source: the shift test keeps the source
    priors, so the adapted probabilities are the calibrated ones."""
    P_src, y_src, P_pool, y_pool = _real_task(loader)
    source = _frequencies(y_src, P_src.shape[1])
    kept = estimate_class_priors(P_pool, source_priors=source)
    assert not kept.shift_detected and kept.statistic < kept.threshold
    np.testing.assert_array_equal(kept.priors, source)
    np.testing.assert_array_equal(kept.weights, np.ones_like(source))


def test_no_shift_gives_the_source_priors_and_does_not_hurt():
    """Target drawn like the source, no shift test: EM's estimate stays near
    the source priors and the adapted NLL is not much above the unadapted
    one."""
    P_src, y_src, P_pool, y_pool = _real_task(load_digits)
    C = P_src.shape[1]
    source = _frequencies(y_src, C)
    est = estimate_class_priors(P_pool, source_priors=source, shift_test=None)
    assert np.max(np.abs(est.priors - source)) < 0.05
    adapted = P_pool * est.weights
    adapted /= adapted.sum(axis=1, keepdims=True)
    rows = np.arange(len(y_pool))
    nll_before = -np.mean(np.log(P_pool[rows, y_pool]))
    nll_after = -np.mean(np.log(adapted[rows, y_pool]))
    assert nll_after < nll_before + 0.02


@pytest.mark.parametrize("strength", [2.0, 50.0])
def test_map_em_solves_the_two_class_map_equation(strength):
    """With ``prior_strength = a`` pseudo-rows, the fixed point solves
    q1 = (sum_i r_i1(q1) + a s1) / (n + a), r_i1 the row's posterior of class
    1 re-weighted by q / s (the M-step of EM under a Dirichlet(a s + 1)
    prior): one root in (0, 1), found by brentq."""
    P_src, y_src, P_pool, y_pool = _real_task(load_breast_cancer)
    source = _frequencies(y_src, 2)
    P, _ = _shifted(P_pool, y_pool, [0.9, 0.1], 200, seed=4)
    est = estimate_class_priors(
        P,
        source_priors=source,
        prior_strength=strength,
        shift_test=None,
        tol=1e-14,
        max_iter=100000,
    )
    p1, s0, s1, n = P[:, 1], source[0], source[1], len(P)

    def gap(q1):
        r1 = p1 * q1 / s1 / (p1 * q1 / s1 + (1 - p1) * (1 - q1) / s0)
        return (r1.sum() + strength * s1) / (n + strength) - q1

    root = brentq(gap, 1e-9, 1 - 1e-9, xtol=1e-15)
    np.testing.assert_allclose(est.priors[1], root, atol=1e-9)
    ml = estimate_class_priors(P, source_priors=source, tol=1e-14, **PAPER)
    # the pseudo-rows pull the estimate toward the source prior
    assert abs(est.priors[1] - s1) < abs(ml.priors[1] - s1)


def test_default_em_keeps_each_class_above_its_pseudo_rows():
    """``prior_strength="auto"`` is C pseudo-rows: every prior is at least
    C p_k / (n + C), where maximum likelihood may give 0."""
    P_src, y_src, P_pool, y_pool = _real_task(load_digits)
    source = _frequencies(y_src, 10)
    priors = np.r_[np.full(9, 0.1), 0.0]  # class 9 absent from the target
    P, _ = _shifted(P_pool, y_pool, priors / priors.sum(), 60, seed=1)
    est = estimate_class_priors(P, source_priors=source, shift_test=None)
    assert np.all(est.priors >= 10 * source / (60 + 10) - 1e-12)
    ml = estimate_class_priors(P, source_priors=source, **PAPER)
    assert ml.priors[9] < est.priors[9]


def _log_likelihood_by_hand(P, q, p):
    return sum(
        np.log(sum(P[i, k] * q[k] / p[k] for k in range(len(p)))) for i in range(len(P))
    )


@pytest.mark.parametrize("target", [[0.34, 0.33, 0.33], [0.05, 0.15, 0.8]])
def test_bic_shift_test_by_hand(target):
    """statistic = 2 (log L(estimate) - log L(p)), threshold (C - 1) log n:
    the estimate is kept iff the statistic exceeds the threshold, else the
    source priors are returned (computed here row by row)."""
    P_src, y_src, P_pool, y_pool = _real_task(load_wine)
    source = _frequencies(y_src, 3)
    P, _ = _shifted(P_pool, y_pool, target, 150, seed=2)
    est = estimate_class_priors(P, source_priors=source)
    raw = estimate_class_priors(P, source_priors=source, shift_test=None)
    np.testing.assert_array_equal(est.estimated, raw.priors)
    statistic = 2 * (
        _log_likelihood_by_hand(P, raw.priors, source)
        - _log_likelihood_by_hand(P, source, source)
    )
    np.testing.assert_allclose(est.statistic, statistic, rtol=1e-10)
    assert est.threshold == pytest.approx(2 * np.log(150), rel=1e-14)
    assert est.shift_detected == (statistic > 2 * np.log(150))
    expected = raw.priors if est.shift_detected else source
    np.testing.assert_array_equal(est.priors, expected)
    np.testing.assert_allclose(est.weights, est.priors / source, rtol=1e-12)
    # the strong shift is detected; the near-source target is not
    assert est.shift_detected == (target[2] == 0.8)
    assert raw.shift_detected and raw.threshold is None


def test_em_recovers_a_strong_shift_on_real_data():
    P_src, y_src, P_pool, y_pool = _real_task(load_wine)
    true = np.array([0.1, 0.2, 0.7])
    P, y = _shifted(P_pool, y_pool, true, 2000)
    source = _frequencies(y_src, 3)
    est = estimate_class_priors(P, source_priors=source)
    empirical = _frequencies(y, 3)
    # the uncalibrated regression leaves a bias; most of the shift is found
    error = np.max(np.abs(est.priors - empirical))
    assert error < np.max(np.abs(source - empirical)) / 3


# ---------------------------------------------------------------------- BBSE
def _one_hot_rows(pred, n_classes, confidence=0.8):
    """Probability rows whose argmax is ``pred``."""
    P = np.full((len(pred), n_classes), (1 - confidence) / (n_classes - 1))
    P[np.arange(len(pred)), pred] = confidence
    return P


def test_bbse_by_hand_2x2():
    """C = [[.4, .1], [.1, .4]], mu = [.3, .7]: w = C^-1 mu = [1/3, 5/3],
    priors = w * [.5, .5] renormalised = [1/6, 5/6]."""
    y_src = np.array([0] * 5 + [1] * 5)
    pred_src = np.array([0, 0, 0, 0, 1, 0, 1, 1, 1, 1])
    pred_tgt = np.array([0] * 3 + [1] * 7)
    est = estimate_class_priors(
        _one_hot_rows(pred_tgt, 2),
        source_priors=[0.5, 0.5],
        method="bbse",
        y_proba_source=_one_hot_rows(pred_src, 2),
        y_source=y_src,
        **PAPER,
    )
    np.testing.assert_allclose(est.priors, [1 / 6, 5 / 6], rtol=1e-12)
    np.testing.assert_allclose(est.weights, [1 / 3, 5 / 3], rtol=1e-12)
    assert est.method == "bbse" and est.converged and est.n_iter == 0


def _hand_3x3():
    """C = [[2, 1, 0], [1, 2, 0], [0, 0, 3]] / 9, mu = [.1, .5, .4]:
    w = [-0.9, 2.7, 1.2], clipped to [0, 2.7, 1.2]; priors [0, 9, 4] / 13."""
    y_src = np.array([0, 0, 0, 1, 1, 1, 2, 2, 2])
    pred_src = np.array([0, 0, 1, 0, 1, 1, 2, 2, 2])
    pred_tgt = np.array([0] + [1] * 5 + [2] * 4)
    return _one_hot_rows(pred_tgt, 3), _one_hot_rows(pred_src, 3), y_src


def _floored_3x3(P):
    """The clipped priors [0, 9, 4] / 13 with class 0 raised to half its mean
    target probability ``m0`` (issue 49), the others scaled to fill the
    rest: ``(9, 4) / 13 x (1 - m0 / 2)``."""
    m0 = P[:, 0].mean()
    return [m0 / 2, 9 / 13 * (1 - m0 / 2), 4 / 13 * (1 - m0 / 2)]


def test_bbse_by_hand_3x3_clips_negative_weights():
    P, P_src, y_src = _hand_3x3()
    est = estimate_class_priors(
        P,
        source_priors=np.full(3, 1 / 3),
        method="bbse",
        y_proba_source=P_src,
        y_source=y_src,
        **PAPER,
    )
    np.testing.assert_allclose(est.priors, _floored_3x3(P), atol=10 * EPS)


def test_bbse_string_labels_follow_labels():
    P, P_src, y_src = _hand_3x3()
    names = np.array(["c", "b", "a"])  # column order
    est = estimate_class_priors(
        P,
        source_priors=np.full(3, 1 / 3),
        method="bbse",
        y_proba_source=P_src,
        y_source=names[y_src],
        labels=names,
        **PAPER,
    )
    np.testing.assert_allclose(est.priors, _floored_3x3(P), atol=10 * EPS)


@pytest.mark.parametrize("loader", [load_wine, load_digits])
def test_bbse_matches_abstention(loader):
    label_shift = pytest.importorskip("abstention.label_shift")
    P_src, y_src, P_pool, y_pool = _real_task(loader)
    C = P_src.shape[1]
    priors = np.random.default_rng(2).dirichlet(np.full(C, 2.0))
    P, _ = _shifted(P_pool, y_pool, priors, 50 * C)
    source = _frequencies(y_src, C)
    func = label_shift.BBSEImbalanceAdapter()(
        valid_labels=np.eye(C)[y_src],
        tofit_initial_posterior_probs=P,
        valid_posterior_probs=P_src,
    )
    expected = func.multipliers * source
    expected /= expected.sum()
    est = estimate_class_priors(
        P,
        source_priors=source,
        method="bbse",
        y_proba_source=P_src,
        y_source=y_src,
        **PAPER,
    )
    np.testing.assert_allclose(est.priors, expected, atol=1e-9)


def test_bbse_singular_confusion_names_the_never_predicted_classes():
    P, P_src, y_src = _hand_3x3()
    P_src = _one_hot_rows(np.array([0, 0, 1, 0, 1, 1, 1, 1, 1]), 3)
    with pytest.raises(ValueError, match=r"column\(s\) \[2\] are never the argmax.*"):
        estimate_class_priors(
            P,
            source_priors=np.full(3, 1 / 3),
            method="bbse",
            y_proba_source=P_src,
            y_source=y_src,
        )


# ---------------------------------------------------------------------- RLLS
def _rlls_reference(C, mu, delta):
    """RLLS by SLSQP on its epigraph form: min s + delta t subject to
    s >= ||C theta - b||, t >= ||theta||, theta >= -1 (an independent
    formulation of Azizzadenesheli et al.'s eq. 4)."""
    k = len(mu)
    b = mu - C.sum(axis=1)

    def split(v):
        return v[:k], v[k], v[k + 1]

    cons = [
        {
            "type": "ineq",
            "fun": lambda v: split(v)[1] ** 2 - np.sum((C @ split(v)[0] - b) ** 2),
        },
        {"type": "ineq", "fun": lambda v: split(v)[2] ** 2 - np.sum(split(v)[0] ** 2)},
    ]
    start = np.concatenate([np.zeros(k), [np.linalg.norm(b) + 1e-3, 1e-3]])
    bounds = [(-1, None)] * k + [(0, None), (0, None)]
    result = minimize(
        lambda v: v[k] + delta * v[k + 1],
        start,
        method="SLSQP",
        bounds=bounds,
        constraints=cons,
        options={"ftol": 1e-15, "maxiter": 2000},
    )
    return 1 + result.x[:k]


def test_rlls_without_regularisation_is_bbse():
    """With Delta_C = 0 and C w = mu solvable by w >= 0, RLLS's minimum (0)
    is at BBSE's w: priors [1/6, 5/6] of the 2x2 case."""
    y_src = np.array([0] * 5 + [1] * 5)
    pred_src = np.array([0, 0, 0, 0, 1, 0, 1, 1, 1, 1])
    pred_tgt = np.array([0] * 3 + [1] * 7)
    est = estimate_class_priors(
        _one_hot_rows(pred_tgt, 2),
        source_priors=[0.5, 0.5],
        method="rlls",
        rlls_alpha=0.0,
        y_proba_source=_one_hot_rows(pred_src, 2),
        y_source=y_src,
        **PAPER,
    )
    np.testing.assert_allclose(est.priors, [1 / 6, 5 / 6], atol=1e-6)


def test_rlls_large_regularisation_keeps_the_source_priors():
    P, P_src, y_src = _hand_3x3()
    source = np.array([0.2, 0.3, 0.5])
    est = estimate_class_priors(
        P,
        source_priors=source,
        method="rlls",
        rlls_alpha=1e3,
        y_proba_source=P_src,
        y_source=y_src,
    )
    np.testing.assert_allclose(est.priors, source, atol=1e-6)


@pytest.mark.parametrize("alpha", [None, 0.1])
def test_rlls_matches_an_independent_solver_on_real_data(alpha):
    P_src, y_src, P_pool, y_pool = _real_task(load_wine)
    P, _ = _shifted(P_pool, y_pool, [0.6, 0.3, 0.1], 200)
    source = _frequencies(y_src, 3)
    est = estimate_class_priors(
        P,
        source_priors=source,
        method="rlls",
        rlls_alpha=alpha,
        y_proba_source=P_src,
        y_source=y_src,
        shift_test=None,
        reliability_check=False,
    )
    # the joint confusion matrix, mu and Delta_C of the paper, by hand
    C = np.zeros((3, 3))
    np.add.at(C, (P_src.argmax(axis=1), y_src), 1 / len(y_src))
    mu = np.bincount(P.argmax(axis=1), minlength=3) / len(P)
    n, k = len(y_src), 3
    bound = 3 * (
        2 * np.log(2 * k / 0.05) / (3 * n) + np.sqrt(2 * np.log(2 * k / 0.05) / n)
    )
    w = _rlls_reference(C, mu, (0.01 if alpha is None else alpha) * bound)
    expected = np.maximum(w, 0) * source
    np.testing.assert_allclose(est.priors, expected / expected.sum(), atol=1e-5)


def test_rlls_refuses_a_singular_confusion_matrix():
    """Class 2 is never predicted on the source: RLLS refuses as BBSE does
    (its regulariser would give a solution, but the clipped weights of such
    problems set present classes' priors to 0: on three real tasks of the
    benchmarks the NLL rose to 3-160 nats)."""
    P, _, y_src = _hand_3x3()
    with pytest.raises(ValueError, match=r"column\(s\) \[2\] are never the argmax"):
        estimate_class_priors(
            P,
            source_priors=np.full(3, 1 / 3),
            method="rlls",
            y_proba_source=_one_hot_rows(np.array([0, 0, 1, 0, 1, 1, 1, 1, 1]), 3),
            y_source=y_src,
        )


# ----------------------------------------------------------------- bootstrap
def test_bootstrap_interval_follows_the_percentile_convention():
    """The rows are resampled with RandomState(seed).randint(0, n, (B, n)),
    as skcal.metrics.confidence_interval does, and the bounds are the
    (1 - level) / 2 and (1 + level) / 2 quantiles of the resampled priors."""
    P_src, y_src, P_pool, y_pool = _real_task(load_wine)
    P, _ = _shifted(P_pool, y_pool, [0.5, 0.3, 0.2], 120)
    source = _frequencies(y_src, 3)
    est = estimate_class_priors(
        P, source_priors=source, n_resamples=40, confidence_level=0.8, random_state=3
    )
    idx = np.random.RandomState(3).randint(0, len(P), size=(40, len(P)))
    boot = np.array(
        [
            estimate_class_priors(P[i], source_priors=source, shift_test=None).priors
            for i in idx
        ]
    )
    np.testing.assert_allclose(est.low, np.quantile(boot, 0.1, axis=0), atol=1e-12)
    np.testing.assert_allclose(est.high, np.quantile(boot, 0.9, axis=0), atol=1e-12)
    assert est.resamples.shape == (40, 3)
    again = estimate_class_priors(
        P, source_priors=source, n_resamples=40, confidence_level=0.8, random_state=3
    )
    np.testing.assert_array_equal(again.low, est.low)
    assert "low=" in repr(est) and isinstance(est, PriorEstimate)


# -------------------------------------------------------------------- errors
def test_class_count_mismatch_is_a_clear_error():
    P = np.full((10, 3), 1 / 3)
    with pytest.raises(ValueError, match=r"3 columns.*expected \(3,\)"):
        estimate_class_priors(P, source_priors=[0.5, 0.5])


def test_too_small_target_says_the_minimum():
    P = np.full((2, 3), 1 / 3)
    with pytest.raises(ValueError, match=r"at least C = 3 rows"):
        estimate_class_priors(P, source_priors=np.full(3, 1 / 3))
    P, P_src, y_src = _hand_3x3()
    with pytest.raises(ValueError, match=r"at least 2 C = 6 rows"):
        estimate_class_priors(
            P[:5],
            source_priors=np.full(3, 1 / 3),
            method="bbse",
            y_proba_source=P_src,
            y_source=y_src,
        )


def test_zero_source_prior_is_a_clear_error():
    with pytest.raises(ValueError, match=r"Column\(s\) \[1\] have source prior 0"):
        estimate_class_priors(np.full((10, 3), 1 / 3), source_priors=[0.5, 0, 0.5])


def test_bbse_without_source_rows_is_a_clear_error():
    with pytest.raises(ValueError, match="needs the labeled source rows"):
        estimate_class_priors(
            np.full((10, 3), 1 / 3), source_priors=np.full(3, 1 / 3), method="bbse"
        )


def test_inputs_are_not_modified():
    P, P_src, y_src = _hand_3x3()
    copies = P.copy(), P_src.copy(), y_src.copy()
    estimate_class_priors(
        P,
        source_priors=np.full(3, 1 / 3),
        method="rlls",
        y_proba_source=P_src,
        y_source=y_src,
    )
    for before, after in zip(copies, (P, P_src, y_src)):
        np.testing.assert_array_equal(before, after)
