"""SplineCalibrator against an independent numpy reference of Gupta et al.'s map."""

import numpy as np
import pytest
from scipy.optimize import minimize_scalar
from scipy.special import log_softmax, logsumexp, softmax

from skcal import SplineCalibrator
from skcal.exceptions import MissingClassWarning
from skcal.metrics import expected_calibration_error
from skcal.utils._testing import make_miscalibrated_logits


def _esl_natural_basis(x, knots, derivative=False):
    """Natural cubic spline basis of Hastie, Tibshirani & Friedman (ESL eq. 5.4-5).

    N_1 = 1, N_2 = x, N_{k+2} = d_k - d_{K-1} with
    d_k = ((x - xi_k)^3_+ - (x - xi_K)^3_+) / (xi_K - xi_k); a different basis of
    the same space as the implementation's cardinal one.
    """
    K = len(knots)
    power = 2 if derivative else 3
    factor = 3.0 if derivative else 1.0

    def d(k):
        return (
            factor
            * (
                np.maximum(x - knots[k], 0) ** power
                - np.maximum(x - knots[-1], 0) ** power
            )
            / (knots[-1] - knots[k])
        )

    cols = [np.zeros_like(x), np.ones_like(x)] if derivative else [np.ones_like(x), x]
    cols += [d(k) - d(K - 2) for k in range(K - 2)]
    return np.column_stack(cols)


def _reference_confidence_map(s, correct, n_knots=6):
    """The paper's recipe, unweighted, with scores assumed distinct."""
    order = np.argsort(s)
    s, correct = s[order], correct[order]
    n = len(s)
    t = np.linspace(0.0, 1.0, n)
    E = np.cumsum(correct - s) / n
    knots = np.linspace(0.0, 1.0, n_knots)
    coef = np.linalg.lstsq(_esl_natural_basis(t, knots), E, rcond=None)[0]
    slope = _esl_natural_basis(t, knots, derivative=True) @ coef
    return s, s + slope


def _reference_temperature(X, y):
    """Temperature scaling by scipy's bounded scalar search on log T."""

    def nll(log_t):
        return -log_softmax(X / np.exp(log_t), axis=1)[np.arange(len(y)), y].mean()

    return float(
        np.exp(
            minimize_scalar(
                nll, bounds=(-5, 5), method="bounded", options={"xatol": 1e-10}
            ).x
        )
    )


def _reference_predict_proba(X_cal, y_cal, X, n_knots=6, temperature=1.0):
    """The paper's top-label map; the others share ``1 - s~`` by
    ``softmax(z / temperature)``, and ``s~`` is at least the largest share."""
    P = softmax(X_cal, axis=1)
    top = P.argmax(1)
    rows = np.arange(len(top))
    xs, ys = _reference_confidence_map(P[rows, top], (top == y_cal) * 1.0, n_knots)
    Pt = softmax(X, axis=1)
    Q = softmax(X / temperature, axis=1)
    out = np.empty_like(Pt)
    for i, (p, q) in enumerate(zip(Pt, Q)):
        k = p.argmax()
        n = len(X_cal)  # Laplace's bounds for n samples
        new = min(max(np.interp(p[k], xs, ys), 1 / (n + 2)), (n + 1) / (n + 2))
        others = np.delete(np.arange(len(p)), k)
        share = q[others] / q[others].sum()
        new = max(new, share.max() / (1 + share.max()))
        out[i, others] = share * (1 - new)
        out[i, k] = new
    return out


@pytest.fixture
def data():
    X, y = make_miscalibrated_logits(1500, 4, temperature=2.0, random_state=0)
    Xt, yt = make_miscalibrated_logits(3000, 4, temperature=2.0, random_state=1)
    return X, y, Xt, yt


def test_matches_independent_reference(data):
    X, y, Xt, _ = data
    spline = SplineCalibrator(redistribution="proportional").fit(X, y)
    assert spline.temperature_ == 1.0
    np.testing.assert_allclose(
        spline.predict_proba(Xt), _reference_predict_proba(X, y, Xt), atol=1e-10
    )
    # the calibration points themselves, and 3 knots
    spline3 = SplineCalibrator(n_knots=3, redistribution="proportional").fit(X, y)
    np.testing.assert_allclose(
        spline3.predict_proba(X), _reference_predict_proba(X, y, X, 3), atol=1e-10
    )


def test_default_shares_the_rest_by_temperature_scaling(data):
    """The same top-label map; the others share by softmax(z / T), T of
    temperature scaling (scipy's search on the NLL as the reference)."""
    X, y, Xt, _ = data
    T = _reference_temperature(X, y)
    assert T > 1.5  # make_miscalibrated_logits(temperature=2): over-confident
    spline = SplineCalibrator().fit(X, y)
    assert spline.temperature_ == pytest.approx(T, rel=1e-6)
    np.testing.assert_allclose(
        spline.predict_proba(Xt),
        _reference_predict_proba(X, y, Xt, temperature=T),
        atol=1e-6,
    )
    proportional = SplineCalibrator(redistribution="proportional").fit(X, y)
    np.testing.assert_array_equal(proportional.scores_, spline.scores_)
    np.testing.assert_array_equal(
        proportional.calibrated_scores_, spline.calibrated_scores_
    )


def test_two_knots_is_a_constant_shift_by_the_least_squares_slope(data):
    # a natural spline on 2 knots is a straight line: E'(t) is its LSQ slope
    X, y, Xt, _ = data
    P = softmax(X, axis=1)
    s = np.sort(P.max(1))
    correct = (P.argmax(1) == y)[np.argsort(P.max(1))]
    E = np.cumsum(correct - s) / len(s)
    slope = np.polyfit(np.linspace(0, 1, len(s)), E, 1)[0]
    spline = SplineCalibrator(n_knots=2).fit(X, y)
    np.testing.assert_allclose(spline.calibrated_scores_, s + slope, atol=1e-12)
    Pt = softmax(Xt, axis=1)
    expected = np.clip(
        np.interp(Pt.max(1), spline.scores_, spline.calibrated_scores_), 0, 1
    )
    # floored at the largest other class's share of softmax(Xt / T)
    Q = softmax(Xt / spline.temperature_, axis=1)
    q_top = Q.max(1)
    share = np.sort(Q, axis=1)[:, -2] / (1.0 - q_top)
    expected = np.maximum(expected, share / (1.0 + share))
    top = spline.predict_proba(Xt)[np.arange(len(Xt)), Xt.argmax(1)]
    np.testing.assert_allclose(top, expected, atol=1e-12)


def test_improves_top_label_ece_and_keeps_the_original_label(data):
    X, y, Xt, yt = data
    spline = SplineCalibrator().fit(X, y)
    before = expected_calibration_error(yt, softmax(Xt, axis=1))
    after = expected_calibration_error(yt, spline.predict_proba(Xt))
    assert after < 0.5 * before, (before, after)
    proba = spline.predict_proba(Xt)
    np.testing.assert_allclose(proba.sum(1), 1.0, rtol=1e-12)
    rows = np.arange(len(Xt))
    top = proba[rows, Xt.argmax(1)]
    # the map would put the rescaled classes above the top class on some
    # rows: there the top class ties with the largest of them ...
    c = np.clip(
        np.interp(softmax(Xt, 1).max(1), spline.scores_, spline.calibrated_scores_),
        0,
        1,
    )
    held = c < top - 1e-9
    assert held.any()
    # ... there the top class is raised to the largest of them, and one
    # unit in the last place above it
    others = proba.copy()
    others[rows, Xt.argmax(1)] = -1
    np.testing.assert_allclose(top[held], others.max(1)[held], rtol=1e-12)
    # ... so it is strictly the largest: no other class ties with it
    assert np.all(top > others.max(1))
    np.testing.assert_array_equal(proba.argmax(1), Xt.argmax(1))
    np.testing.assert_array_equal(spline.predict(Xt), Xt.argmax(1))


def test_probabilities_in_same_map(data):
    """Probabilities are read as the logits log(max(p, f)), f the floor of
    the fit (half the smallest positive calibration probability, which
    leaves every calibration entry as it is): the map of the logits."""
    X, y, Xt, _ = data
    P = softmax(X, 1)
    b = SplineCalibrator(input="proba").fit(P, y)
    floor = 0.5 * P.min()
    assert b.proba_floor_ == pytest.approx(floor, rel=1e-12)
    a = SplineCalibrator().fit(X, y)
    expected = a.predict_proba(np.log(np.maximum(softmax(Xt, 1), floor)))
    np.testing.assert_allclose(b.predict_proba(softmax(Xt, 1)), expected, atol=1e-9)


def test_confidence_stays_within_laplace_bounds():
    """Drawn 54-class logits: the spline's slope mapped confidences of 0.84
    to 1, and a wrong prediction among them gave its true class 0 (test NLL
    2.84 against 1.98 for temperature scaling): the map stops at (n + 1) /
    (n + 2), and no true class is given less than the others' share of
    1 / (n + 2)."""
    rng = np.random.default_rng(0)

    def draw(n):
        y = rng.integers(1, 54, n)
        return (rng.normal(size=(n, 54)) + 2.17 * np.eye(54)[y]) * 1.6, y

    X, y = draw(2000)
    Xt, yt = draw(4000)
    with pytest.warns(MissingClassWarning):  # class 0 is absent
        spline = SplineCalibrator().fit(X, y)
    assert spline.confidence_bounds_ == (1 / 2002, 2001 / 2002)
    s = softmax(Xt, axis=1).max(1)
    raw = np.interp(s, spline.scores_, spline.calibrated_scores_)
    assert raw.max() > 1.0  # the case: the unclipped map leaves [0, 1]
    proba = spline.predict_proba(Xt)
    top = proba[np.arange(len(Xt)), Xt.argmax(1)]
    assert top.max() == 2001 / 2002
    nll = -np.log(proba[np.arange(len(yt)), yt]).mean()
    ts = _reference_temperature(X, y)
    nll_ts = -log_softmax(Xt / ts, axis=1)[np.arange(len(yt)), yt].mean()
    assert nll < nll_ts + 0.05, (nll, nll_ts)


def test_tied_scores_do_not_depend_on_row_order():
    # 40 distinct probability vectors, each repeated: every confidence is tied
    rng = np.random.default_rng(0)
    prototypes = rng.dirichlet([0.5, 0.5, 0.5], size=40)
    P = prototypes[rng.integers(0, 40, size=800)]
    y = np.array([rng.choice(3, p=p) for p in P])
    perm = rng.permutation(len(y))
    a = SplineCalibrator(input="proba").fit(P, y)
    b = SplineCalibrator(input="proba").fit(P[perm], y[perm])
    assert len(a.scores_) <= 40
    np.testing.assert_array_equal(a.scores_, b.scores_)
    np.testing.assert_allclose(a.calibrated_scores_, b.calibrated_scores_, atol=1e-14)
    np.testing.assert_allclose(a.predict_proba(P), b.predict_proba(P), atol=1e-14)
    assert np.all(np.diff(a.scores_) > 0)


def test_zero_weights_are_removal_and_weight_scale_does_not_matter(data):
    X, y, Xt, _ = data
    w = np.ones(len(y))
    w[::3] = 0.0
    a = SplineCalibrator().fit(X, y, sample_weight=w).predict_proba(Xt)
    b = SplineCalibrator().fit(X[w > 0], y[w > 0]).predict_proba(Xt)
    np.testing.assert_allclose(a, b, atol=1e-12)
    w = np.random.default_rng(0).uniform(0.5, 2, len(y))
    c = SplineCalibrator().fit(X, y, sample_weight=w).predict_proba(Xt)
    d = SplineCalibrator().fit(X, y, sample_weight=7.5 * w).predict_proba(Xt)
    np.testing.assert_allclose(c, d, atol=1e-12)
    assert not np.allclose(c, b, atol=1e-6)


def test_degenerate_inputs_stay_finite():
    # every row the same: one calibration score, a constant map
    X = np.zeros((50, 3))
    y = np.arange(50) % 3
    spline = SplineCalibrator().fit(X, y)
    assert spline.scores_.shape == (1,)
    proba = spline.predict_proba(np.array([[0.0, 0.0, 0.0], [5.0, 0.0, 0.0]]))
    assert np.isfinite(proba).all()
    np.testing.assert_allclose(proba[:, 0], proba[0, 0])
    # one-hot probabilities: the others have no mass and share 1 - s~ equally
    P = np.eye(3)[np.arange(60) % 3]
    y = (np.arange(60) + (np.arange(60) % 4 == 0)) % 3
    spline = SplineCalibrator(input="proba").fit(P, y)
    out = spline.predict_proba(np.eye(3))
    np.testing.assert_allclose(out.sum(1), 1.0)
    np.testing.assert_allclose(out[0, 1], out[0, 2])
    assert 0.0 < out[0, 0] < 1.0


def test_too_few_samples_is_a_clear_error():
    X, y = make_miscalibrated_logits(5, 3, random_state=0)
    with pytest.raises(ValueError, match=r"n_knots=6.*at least.*got 5.*lower n_knots"):
        SplineCalibrator().fit(X, y)
    SplineCalibrator(n_knots=5).fit(X, y)
    w = np.array([1.0, 1.0, 0.0, 1.0, 1.0])
    with pytest.raises(ValueError, match="got 4"):
        SplineCalibrator(n_knots=5).fit(X, y, sample_weight=w)


def _top_label_reference_log(Z, confidence):
    """``log q``: top gets ``c`` (at least the largest share), the others
    ``1 - c`` by their logits' softmax."""
    out = np.empty_like(Z)
    for i, z in enumerate(Z):
        k = z.argmax()
        others = np.delete(np.arange(len(z)), k)
        log_share = z[others] - logsumexp(z[others])
        share = np.exp(log_share.max())
        c = max(confidence[i], share / (1 + share))
        out[i, others] = np.log1p(-c) + log_share
        out[i, k] = np.log(c)
    return out


@pytest.mark.parametrize("gap", [700.0, 720.0, 740.0, 745.0, 750.0, 1e3, 1e6])
def test_huge_logit_gaps_keep_the_other_classes_proportions(data, gap):
    # the other classes' mass underflows (subnormal near 720, 0 beyond ~745):
    # the rescale must neither overflow (it gave NaN rows) nor share it equally
    X, y, _, _ = data
    spline = SplineCalibrator(redistribution="proportional").fit(X, y)
    Z = np.array(
        [
            [0.0, -gap, -gap - 1.0, -gap - 3.0],
            [-gap - 3.0, -gap - 0.5, 0.0, -gap],
            [5.0, 5.0 - gap, 5.0 - gap, 5.0 - 2 * gap],
        ]
    )
    s = softmax(Z, axis=1).max(axis=1)
    c = np.clip(np.interp(s, spline.scores_, spline.calibrated_scores_), 0.0, 1.0)
    assert np.all((0.5 < c) & (c < 1.0))  # the case that overflowed
    expected = _top_label_reference_log(Z, c)
    log_proba = spline.predict_log_proba(Z)
    assert np.isfinite(log_proba).all()
    # differences of logits of size ~gap are exact to a few ulps of gap
    np.testing.assert_allclose(
        log_proba, expected, rtol=1e-12, atol=8 * np.spacing(gap)
    )
    proba = spline.predict_proba(Z)
    assert np.isfinite(proba).all()
    np.testing.assert_allclose(proba, np.exp(expected), rtol=1e-9, atol=1e-300)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, rtol=1e-12)
    np.testing.assert_array_equal(spline.predict(Z), Z.argmax(axis=1))


def test_exact_zero_probabilities_share_by_the_floored_logits(data):
    # input="proba" reads p as log(max(p, f)), f half the smallest positive
    # calibration probability: exact zeros are f
    X, y, _, _ = data
    spline = SplineCalibrator(input="proba", redistribution="proportional").fit(
        softmax(X, axis=1), y
    )
    P = np.array([[0.9, 0.1, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0], [0.0, 0.0, 0.0, 1.0]])
    assert spline.proba_floor_ == pytest.approx(
        0.5 * softmax(X, axis=1).min(), rel=1e-12
    )
    Q = np.maximum(P, spline.proba_floor_)  # rows raised are renormalised
    Q /= Q.sum(axis=1, keepdims=True)
    c = np.clip(np.interp(Q.max(1), spline.scores_, spline.calibrated_scores_), 0, 1)
    assert np.all((0.0 < c) & (c < 1.0))
    floored = np.log(Q)
    expected = np.exp(_top_label_reference_log(floored, c))
    proba = spline.predict_proba(P)
    np.testing.assert_allclose(proba, expected, rtol=1e-9, atol=1e-300)
    np.testing.assert_allclose(proba[1, [0, 2, 3]], (1 - c[1]) / 3, rtol=1e-12)


def test_predict_proba_rescales_the_others_exactly(data):
    # predict_proba rescales the softmax of the other classes by (1 - c) /
    # their sum; rows where that sum is below 1e-290 take the proportions
    # from the logits. Against the reference in log space, on random rows
    # and on gaps on both sides of the threshold (~667), ties included
    X, y, _, _ = data
    spline = SplineCalibrator(redistribution="proportional").fit(X, y)
    rng = np.random.default_rng(3)
    Z = rng.normal(size=(300, 4)) * rng.choice([0.1, 2.0, 30.0], size=(300, 1))
    for i, gap in enumerate([600.0, 650.0, 660.0, 670.0, 690.0, 705.0]):
        Z[i] = [0.0, -gap, -gap - 2.0, -gap - 60.0]
    Z[10] = 0.0  # all tied
    Z[11] = [1.0, 1.0, 0.0, -1.0]  # tied top
    s = softmax(Z, axis=1).max(axis=1)
    c = np.clip(np.interp(s, spline.scores_, spline.calibrated_scores_), 0.0, 1.0)
    expected = np.exp(_top_label_reference_log(Z, c))
    proba = spline.predict_proba(Z)
    np.testing.assert_allclose(proba, expected, rtol=1e-12, atol=1e-300)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, rtol=1e-12)


def test_many_test_rows_match_the_reference():
    # from 4,096 rows the map sorts its queries (skcal.utils._proba.interp)
    X, y = make_miscalibrated_logits(1500, 4, temperature=2.0, random_state=0)
    Xt, _ = make_miscalibrated_logits(6000, 4, temperature=2.0, random_state=2)
    spline = SplineCalibrator(redistribution="proportional").fit(X, y)
    np.testing.assert_allclose(
        spline.predict_proba(Xt), _reference_predict_proba(X, y, Xt), atol=1e-10
    )


@pytest.mark.parametrize("knots", ["increasing", "ties", "unsorted"])
def test_interp_is_numpy_interp_bit_for_bit(monkeypatch, knots):
    from skcal.utils import _proba

    rng = np.random.default_rng(0)
    for n_knots, n in [(2, 7), (5, 50), (300, 5000)]:
        xp = np.sort(rng.random(n_knots)) * 1.2 - 0.1
        if knots == "ties":  # queries at a tie take the segment on its right
            xp[n_knots // 2] = xp[n_knots // 2 - 1]
        elif knots == "unsorted":  # np.interp's result depends on the order
            rng.shuffle(xp[1:-1])
        fp = rng.normal(size=n_knots)
        x = np.concatenate([rng.random(n), xp, [-1.0, 2.0, np.nan, xp[-1]]])
        rng.shuffle(x)
        expected = np.interp(x, xp, fp)
        for min_knots, queries in [(48, 4096), (1, 1)]:  # defaults, always sorted
            monkeypatch.setattr(_proba, "_SORTED_MIN_KNOTS", min_knots)
            monkeypatch.setattr(_proba, "_SORTED_MIN_QUERIES", queries)
            got = _proba.interp(x, xp, fp)
            np.testing.assert_array_equal(got, expected)
            assert got.tobytes() == expected.tobytes()
            # any shape, as np.interp
            grid = x[: 2 * (x.size // 2)].reshape(2, -1)
            np.testing.assert_array_equal(
                _proba.interp(grid, xp, fp), np.interp(grid, xp, fp)
            )
