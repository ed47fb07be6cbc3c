"""The blocked, fused predict paths against independent references.

``predict_proba`` of isotonic and beta calibration and of structured matrix
scaling runs by blocks of rows (or on transposed columns) and reuses
intermediate results; the validation of ``input="proba"`` writes its copy in
the same pass as its checks. Each is compared here with the formulas written
out with scipy and scikit-learn, on enough rows for several blocks, with
extreme rows and with the special cases of each path.
"""

import math

import numpy as np
import pytest
from scipy.special import expit, log_softmax, softmax
from sklearn.base import clone
from sklearn.isotonic import IsotonicRegression

from skcal import (
    BBQCalibrator,
    BetaCalibrator,
    ENIRCalibrator,
    HistogramBinningCalibrator,
    IsotonicCalibrator,
    ScalingBinningCalibrator,
    SplineCalibrator,
    StructuredMatrixScaling,
    TopVersusAll,
)
from skcal.calibrators._one_vs_rest import PROBA_FLOOR
from skcal.calibrators._top_versus_all import top_rows_of_probabilities
from skcal.utils._proba import replace_top_label_inplace
from skcal.utils._testing import make_miscalibrated_logits
from skcal.utils._validation import (
    PROBA_EPS,
    check_probabilities,
    scores_to_logits,
    sum_tolerance,
)

EPS = np.finfo(np.float64).eps


def _floor_renormalize(Q, P):
    """Floored at 1e-12 and renormalised; rows that are all 0 keep ``P``."""
    out = np.maximum(Q, 1e-12)
    out /= out.sum(axis=1, keepdims=True)
    return np.where((Q.sum(axis=1) > 0)[:, None], out, P)


def _test_logits(n, n_classes, seed):
    """Rows of every scale, from flat to one class far above the others."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, n_classes)) * rng.choice(
        [0.05, 1.0, 4.0, 30.0], size=(n, 1)
    )
    X[:5] = 0.0  # uniform rows
    X[5:10, 0] += 200.0  # the others' probabilities far below the floors
    return X


# ------------------------------------------------------------- isotonic
@pytest.mark.parametrize("n_classes, n", [(3, 400), (40, 2000), (150, 60)])
def test_isotonic_predict_is_sklearn_per_class(n_classes, n):
    # the transposed path, with more classes than rows in the last case
    X, y = make_miscalibrated_logits(4000, n_classes, temperature=2.0, random_state=1)
    assert np.unique(y).size == n_classes  # no class left to the mean map
    Xt = _test_logits(n, n_classes, seed=2)
    iso = IsotonicCalibrator(classes=np.arange(n_classes)).fit(X, y)
    P, Pt = softmax(X, axis=1), softmax(Xt, axis=1)
    Q = np.column_stack(
        [
            IsotonicRegression(y_min=0, y_max=1, out_of_bounds="clip")
            .fit(P[:, k], y == k)
            .predict(Pt[:, k])
            for k in range(n_classes)
        ]
    )
    expected = _floor_renormalize(Q, Pt)
    Xt_before = Xt.copy()
    got = iso.predict_proba(Xt)
    np.testing.assert_array_equal(Xt, Xt_before)  # the input is not modified
    assert not np.may_share_memory(got, Xt)
    np.testing.assert_allclose(got, expected, rtol=1e-9, atol=1e-12)


def test_isotonic_rows_whose_values_are_all_zero_keep_the_softmax():
    X, y = make_miscalibrated_logits(800, 4, temperature=2.0, random_state=3)
    iso = IsotonicCalibrator().fit(X, y)
    Xt = _test_logits(300, 4, seed=4)
    Pt = softmax(Xt, axis=1)
    kept = iso.values_[1].copy()
    for v in iso.values_:
        v[:] = 0.0
    iso.values_[1][:] = kept
    q1 = np.interp(Pt[:, 1], iso.thresholds_[1], kept)
    assert (q1 == 0).any() and (q1 > 0).any()  # both kinds of rows
    Q = np.column_stack([np.zeros(300), q1, np.zeros(300), np.zeros(300)])
    np.testing.assert_allclose(
        iso.predict_proba(Xt), _floor_renormalize(Q, Pt), rtol=1e-12, atol=1e-300
    )
    # values above 0 but below the floor: uniform rows, not the softmax
    iso.values_[1][:] = kept * 1e-14
    expected = _floor_renormalize(Q * 1e-14, Pt)
    assert np.any(expected == 0.25) and np.any(expected != 0.25)
    np.testing.assert_allclose(iso.predict_proba(Xt), expected, rtol=1e-12, atol=1e-300)


# ----------------------------------------------------------------- beta
def _beta_reference(est, X):
    """Kull et al.'s map of each class's clipped softmax, renormalised."""
    P = softmax(X, axis=1)
    s = np.clip(P, EPS, 1 - EPS)
    a, b = est.coef_[:, 0], est.coef_[:, 1]
    Q = expit(a * np.log(s) - b * np.log(1 - s) + est.intercept_)
    return _floor_renormalize(Q, P)


@pytest.mark.parametrize("parameters", ["abm", "am", "ab"])
def test_beta_predict_is_the_formula(parameters):
    # 3000 x 100 entries: two blocks of rows; no probability within 1e-2 of
    # 1, where ln(1 - s) would amplify the softmax's rounding
    X, y = make_miscalibrated_logits(3000, 100, temperature=2.0, random_state=5)
    est = BetaCalibrator(parameters=parameters).fit(X, y)
    Xt = np.random.default_rng(6).normal(size=(3000, 100)) * 1.5
    assert softmax(Xt, axis=1).max() < 0.99
    np.testing.assert_allclose(
        est.predict_proba(Xt), _beta_reference(est, Xt), rtol=1e-11, atol=1e-300
    )


def test_beta_predict_clips_like_the_formula():
    # probabilities below eps and within eps of 1: ln s and ln(1 - s) are
    # those of the clipped values (the log-softmax is clipped, not s)
    X, y = make_miscalibrated_logits(1000, 3, temperature=2.0, random_state=7)
    est = BetaCalibrator().fit(X, y)
    Xt = np.array([[0.0, -40.0, -800.0], [50.0, 0.0, 1.0], [0.0, 0.0, 0.0]])
    expected = _beta_reference(est, Xt)
    np.testing.assert_allclose(est.predict_proba(Xt), expected, rtol=1e-12)


# ----------------------------------------------------------------- SMS
def _sms_reference(sms, X):
    """The three steps of structured matrix scaling, with scipy (``log p``
    floored at float32's smallest normal for probabilities, as probmetrics)."""
    n_classes = X.shape[1]
    z = log_softmax(X, axis=1)
    if sms.input == "proba":  # and the input's floor, its proba_floor_
        floor = max(np.finfo(np.float32).tiny, sms.proba_floor_)
        z = np.maximum(z, np.log(floor))
    p = (1 - sms.mix_) * softmax(sms.beta_ * z, axis=1) + sms.mix_ / n_classes
    return np.log(p) @ sms.coef_.T + sms.intercept_


@pytest.mark.parametrize("input", ["logits", "proba"])
@pytest.mark.parametrize("beta", [None, 0.05])
def test_sms_predict_is_the_formula(beta, input):
    # 3000 x 100: two blocks of rows, the first one made only of rows whose
    # log-softmax reaches the floor of probabilities, the second one of both
    # kinds. With the fitted beta the floored entries' share is far below
    # the uniform mixture's; beta = 0.05 makes the floor visible in the
    # probabilities (and its absence, for logits)
    n_classes = 100
    X, y = make_miscalibrated_logits(2000, n_classes, temperature=2.0, random_state=8)
    prepare = (lambda a: a) if input == "logits" else (lambda a: softmax(a, axis=1))
    sms = StructuredMatrixScaling(input=input, device="cpu", max_iter=50)
    sms.fit(prepare(X), y)
    if beta is not None:
        sms.beta_ = beta
    Xt = _test_logits(3000, n_classes, seed=9)
    Xt[:2700, 0] += 150.0  # gaps beyond the floor's 87.3
    Xt[2800:2810] *= 40.0
    if input == "proba":  # the calibration data's floor, not the features'
        sms.proba_floor_ = PROBA_EPS
    floor = np.log(np.finfo(np.float32).tiny)
    low = (log_softmax(Xt, axis=1) < floor).any(axis=1)
    assert low[:2700].all() and low[2700:].any() and not low[2700:].all()
    logits = _sms_reference(sms, Xt)
    np.testing.assert_allclose(
        sms.predict_proba(prepare(Xt)),
        softmax(logits, axis=1),
        rtol=1e-11,
        atol=1e-300,
    )
    # decision_function: the same logits, up to a constant per row
    got = sms.decision_function(prepare(Xt))
    np.testing.assert_allclose(
        got - got.mean(axis=1, keepdims=True),
        logits - logits.mean(axis=1, keepdims=True),
        rtol=0,
        atol=1e-10,
    )


def test_sms_predict_from_probabilities_is_the_formula():
    X, y = make_miscalibrated_logits(1500, 5, temperature=2.0, random_state=10)
    P = softmax(X, axis=1)
    sms = StructuredMatrixScaling(device="cpu", input="proba").fit(P, y)
    Pt = softmax(_test_logits(500, 5, seed=11), axis=1)
    logits = _sms_reference(sms, np.log(np.maximum(Pt, sms.proba_floor_)))
    np.testing.assert_allclose(
        sms.predict_proba(Pt), softmax(logits, axis=1), rtol=1e-11, atol=1e-300
    )


# ------------------------------------------- validation of probabilities
def _probabilities(n, n_classes, seed, dtype=np.float64):
    rng = np.random.default_rng(seed)
    P = softmax(rng.normal(size=(n, n_classes)) * 3, axis=1).astype(dtype)
    P[::7] /= P[::7].sum(axis=1, keepdims=True) * (1 + 5e-5)  # sums off by 5e-5
    P[3] = 0.0
    P[3, 1] = 1.0
    return P


def _edge_probabilities(seed, dtype):
    """40,000 x 10: several validation blocks of rows; one block holds a
    value a little below 0 and one a little above 1 (within tolerance, both
    clipped), next to a one-hot row (zeros, floored); with their clipped
    float64 copy."""
    P = _probabilities(40_000, 10, seed=seed, dtype=dtype)
    P[25_000, :2] = [-5e-6, 5e-6 + P[25_000, :2].sum()]
    P[35_000, :] = 0.0
    P[35_000, 0] = 1 + 5e-6
    return P, np.clip(P.astype(np.float64), 0.0, 1.0)


def _floored(P, floor):
    """``max(P, floor)``, rows where an entry was raised renormalised (the
    documented floor of ``proba_floor_``)."""
    out = np.maximum(P, floor)
    raised = (P < floor).any(axis=1) & (floor > PROBA_EPS)
    out[raised] /= out[raised].sum(axis=1, keepdims=True)
    return out


def _renormalised_off_one(P):
    """Rows divided by their float64 sums, but those within ``n_classes``
    units in the last place of 1, as given (the documented rule)."""
    P = np.asarray(P, dtype=np.float64)
    sums = P.sum(axis=1, keepdims=True)
    near = np.abs(sums - 1.0) <= P.shape[1] * np.finfo(np.float64).eps
    return np.where(near, P, P / sums)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_the_validated_copy_is_the_renormalised_probabilities(dtype):
    P, clipped = _edge_probabilities(12, dtype)
    before = P.copy()
    tol = sum_tolerance(dtype)
    renormalised = clipped / clipped.sum(axis=1, keepdims=True)
    got = check_probabilities(P, tol=tol)
    assert got.dtype == np.float64 and not np.may_share_memory(got, P)
    np.testing.assert_allclose(got, renormalised, rtol=1e-15, atol=0)
    kept = check_probabilities(P, tol=tol, renormalize=False)
    np.testing.assert_array_equal(kept, clipped)
    logs = scores_to_logits(P, "proba", tol=tol)
    expected = np.log(np.maximum(renormalised, PROBA_EPS))
    np.testing.assert_allclose(logs, expected, rtol=1e-15, atol=1e-15)
    np.testing.assert_array_equal(P, before)  # the input is not modified


def test_invalid_probabilities_are_still_refused():
    P = _probabilities(30_000, 10, seed=13)
    bad = P.copy()
    bad[20_000, 0] += 0.01
    with pytest.raises(ValueError, match="row 20000 sums to"):
        scores_to_logits(bad, "proba")
    bad = P.copy()
    bad[29_000, 1] = -0.2
    with pytest.raises(ValueError, match="range over"):
        scores_to_logits(bad, "proba")
    bad = P.copy()
    bad[15_000, 2] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        scores_to_logits(bad, "proba")
    with pytest.raises(ValueError, match="log=True needs copy=True"):
        check_probabilities(P, renormalize=False, copy=False, log=True)
    with pytest.raises(ValueError, match="floor=True needs copy=True"):
        check_probabilities(P, top_label=True, floor=True)


def _exact_others(P, top):
    """The others' share of each row, from correctly rounded sums (fsum)."""
    return np.array(
        [
            math.fsum(np.delete(row, t)) / math.fsum(row)
            for row, t in zip(P.astype(np.float64), top)
        ]
    )


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("layout", ["C", "F"])
def test_top_rows_are_those_of_the_floored_copy(dtype, layout):
    """Of each row of the renormalised, floored copy (never made): the argmax
    of the row as given, its entry (the copy's, exactly) and the others'
    sum, as accurate as a sum (no ``1 - c``), over blocks that are clipped,
    floored or plain, in both layouts; the input is not modified."""
    P, _ = _edge_probabilities(21, dtype)
    # near-certain rows in the last block (the others are clipped or floored)
    P[-600:] = softmax(np.random.default_rng(3).normal(size=(600, 10)) * 12, 1)
    clipped = np.clip(P.astype(np.float64), 0.0, 1.0)
    P = np.asarray(P, order=layout)
    before = P.copy()
    tol = sum_tolerance(dtype)
    Q = check_probabilities(P, tol=tol, floor=True)
    top, c, rest = top_rows_of_probabilities(P, tol=tol)
    np.testing.assert_array_equal(top, np.argmax(P, axis=1))  # of P as given
    np.testing.assert_array_equal(c, Q[np.arange(len(Q)), top])
    others = Q.copy()
    others[np.arange(len(Q)), top] = 0.0
    assert np.min(others.sum(axis=1)) < 1e-12  # near-certain rows are there
    np.testing.assert_allclose(rest, others.sum(axis=1), rtol=30 * EPS, atol=0)
    plain = np.flatnonzero(np.min(clipped, axis=1) > 0)
    np.testing.assert_allclose(
        rest[plain], _exact_others(clipped[plain], top[plain]), rtol=30 * EPS, atol=0
    )
    # without the others' sums (blocks where the floor could act are read
    # once, not copied): the same argmax and entry, bit for bit
    top_alone, c_alone, none = top_rows_of_probabilities(P, tol=tol, rest=False)
    assert none is None
    np.testing.assert_array_equal(top_alone, top)
    np.testing.assert_array_equal(c_alone, Q[np.arange(len(Q)), top])
    np.testing.assert_array_equal(P, before)


def test_top_rows_of_many_classes_sum_the_others_exactly_enough():
    P = softmax(np.random.default_rng(4).normal(size=(300, 1000)) * 9, axis=1)
    top, c, rest = top_rows_of_probabilities(P)
    np.testing.assert_allclose(rest, _exact_others(P, top), rtol=1000 * EPS, atol=0)
    np.testing.assert_allclose(c + rest, 1.0, rtol=0, atol=1000 * EPS)


def test_top_rows_of_invalid_probabilities_are_refused_as_by_the_copy():
    P = _probabilities(30_000, 10, seed=22)
    for row, col, value in [(20_000, 0, 0.5), (29_000, 1, -0.2), (15_000, 2, np.nan)]:
        bad = P.copy()
        bad[row, col] = value
        with pytest.raises(ValueError) as copied:
            check_probabilities(bad, floor=True)
        for rest in (True, False):
            with pytest.raises(ValueError) as read:
                top_rows_of_probabilities(bad, rest=rest)
            assert str(read.value) == str(copied.value)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_the_floored_copy_is_the_softmax_of_the_logs(dtype):
    P = _probabilities(30_000, 10, seed=16, dtype=dtype)
    tol = sum_tolerance(dtype)
    clipped = np.clip(P.astype(np.float64), 0.0, 1.0)
    expected = np.maximum(clipped / clipped.sum(axis=1, keepdims=True), PROBA_EPS)
    got = check_probabilities(P, tol=tol, floor=True)
    np.testing.assert_allclose(got, expected, rtol=1e-15, atol=0)
    assert got[3, 0] == PROBA_EPS  # an exact zero, floored
    logs = check_probabilities(P, tol=tol, log=True)
    np.testing.assert_allclose(got, softmax(logs, axis=1), rtol=1e-13, atol=0)


@pytest.mark.parametrize(
    "cls",
    [IsotonicCalibrator, BetaCalibrator, HistogramBinningCalibrator, SplineCalibrator],
)
def test_probabilities_give_the_map_of_their_logs(cls):
    # input="proba" is the same fitted map of log(max(p, tiny)) of the
    # renormalised rows, whatever the validation's blocks
    X, y = make_miscalibrated_logits(2000, 10, temperature=2.0, random_state=14)
    est = cls(input="proba").fit(softmax(X, axis=1), y)
    P = _probabilities(30_000, 10, seed=15)
    got = est.predict_proba(P)
    floor = getattr(est, "proba_floor_", PROBA_EPS)  # only for maps with logs
    Z = np.log(_floored(_renormalised_off_one(P), floor))
    est.set_params(input="logits")
    # isotonic interpolation turns the round trip's unit in the last place
    # of p into up to 1e-12 of a row's sum
    np.testing.assert_allclose(got, est.predict_proba(Z), rtol=1e-12, atol=1e-11)


def test_probabilities_mapped_directly_keep_the_fallback_rows():
    # input="proba" maps the probabilities directly (no round trip through
    # their logs) and still falls back to the original probabilities where
    # every one-vs-rest value is 0: a hand-set map that is 0 below p = 0.5
    # for every class sends uniform rows there
    X, y = make_miscalibrated_logits(500, 4, temperature=2.0, random_state=18)
    est = IsotonicCalibrator(input="proba").fit(softmax(X, axis=1), y)
    for k in range(4):
        est.thresholds_[k] = np.array([0.0, 0.5, 1.0])
        est.values_[k] = np.array([0.0, 0.0, 1.0])
    uniform = np.full((3, 4), 0.25)
    confident = np.array([[0.1, 0.7, 0.1, 0.1], [0.0, 0.0, 0.2, 0.8]])
    got = est.predict_proba(np.vstack([uniform, confident]))
    np.testing.assert_array_equal(got[:3], uniform)  # the fallback
    # the others: 0 below 0.5, then 2 p - 1, floored, renormalised
    values = np.maximum(2 * confident - 1, PROBA_FLOOR)
    expected = values / values.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(got[3:], expected, rtol=1e-14, atol=0)
    Z = np.log(np.maximum(np.vstack([uniform, confident]), PROBA_EPS))
    est.set_params(input="logits")
    np.testing.assert_allclose(got, est.predict_proba(Z), rtol=1e-12, atol=1e-15)


# ------------------------------------------- the top label's new confidence
@pytest.mark.parametrize("n_classes", [2, 10, 300])
def test_replacing_the_top_label_keeps_it_first_exactly(n_classes):
    """``replace_top_label_inplace(..., keep_argmax=True)``: the confidence,
    raised to the largest other share where below, on the top class; the
    others in proportion (the formula written out here); the top entry is
    the row's maximum exactly (never a unit in the last place below), also
    on rows whose others underflow (logit gaps beyond 745)."""
    rng = np.random.default_rng(n_classes)
    n = 4000
    Z = rng.normal(size=(n, n_classes)) * rng.uniform(0.1, 5, size=(n, 1))
    Z[:50, 0] += 800.0  # the others underflow: the logits' path
    P = softmax(Z, axis=1)
    top = np.argmax(Z, axis=1)
    rows = np.arange(n)
    others = np.where(np.arange(n_classes) == top[:, None], 0.0, P)
    with np.errstate(invalid="ignore"):  # 0 / 0 where the others underflow
        least = others.max(axis=1) / (others.sum(axis=1) + others.max(axis=1))
    least = np.nan_to_num(least)
    c = rng.uniform(0, 1, size=n)
    c[::4] = least[::4]  # exactly the largest other's share
    c[1::4] = least[1::4] * (1 - rng.uniform(0, 1e-15, size=len(c[1::4])))
    got = replace_top_label_inplace(P.copy(), Z, top, c, floor=1e-300, keep_argmax=True)
    assert (got[rows, top] == got.max(axis=1)).all()
    q = np.maximum(c, least)
    o, k = others[50:], rows[: n - 50]  # rows whose others are normal numbers
    expected = o * ((1 - q[50:]) / o.sum(axis=1))[:, None]
    expected[k, top[50:]] = q[50:]
    np.testing.assert_allclose(got[50:], expected, rtol=1e-12, atol=1e-300)
    np.testing.assert_allclose(got.sum(axis=1), 1.0, rtol=1e-12)


def _rounded_probabilities(n=600, n_classes=5, seed=0):
    """Probabilities rounded to 0.01 (exact zeros, tied entries), renormalised,
    and labels drawn from the unrounded ones."""
    rng = np.random.default_rng(seed)
    Z = rng.normal(size=(n, n_classes)) * 3
    P = softmax(Z, axis=1)
    y = np.array([rng.choice(n_classes, p=p) for p in P])
    P = np.round(P, 2)
    P[:, -1] = np.maximum(1.0 - P[:, :-1].sum(axis=1), 0.0)
    return P / P.sum(axis=1, keepdims=True), y


@pytest.mark.parametrize(
    "estimator",
    [
        HistogramBinningCalibrator(),
        BBQCalibrator(),
        ENIRCalibrator(),
        ScalingBinningCalibrator(),
        ScalingBinningCalibrator(mode="top_label"),
        SplineCalibrator(),
        TopVersusAll(IsotonicCalibrator()),
        TopVersusAll(BBQCalibrator()),
        TopVersusAll(ENIRCalibrator()),
        TopVersusAll(SplineCalibrator()),
    ],
    ids=lambda e: repr(e).replace(" ", ""),
)
def test_probabilities_predict_and_logits_agree_with_predict_proba(estimator):
    """Issue 49 (fuzzing): with input="proba", predict and decision_function
    were computed from the logs of X (softmax, then the step map), which can
    put an entry in another bin than predict_proba's map of X itself:
    predict chose a non-argmax class, and spline's predict_log_proba was not
    the log of predict_proba. Now predict is a maximiser of predict_proba,
    and the logits are its logs."""
    P, y = _rounded_probabilities()
    est = clone(estimator).set_params(input="proba").fit(P, y)
    proba = est.predict_proba(P)
    index = np.searchsorted(est.classes_, est.predict(P))
    rows = np.arange(len(P))
    np.testing.assert_array_equal(proba[rows, index], proba.max(axis=1))
    tiny = np.nextafter(0.0, 1.0)
    np.testing.assert_allclose(
        est.predict_log_proba(P), np.log(np.maximum(proba, tiny)), rtol=1e-12
    )
    np.testing.assert_allclose(
        softmax(est.decision_function(P), axis=1), proba, rtol=1e-12, atol=1e-300
    )
