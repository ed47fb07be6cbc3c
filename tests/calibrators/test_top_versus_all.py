"""TopVersusAll against the paper's reduction, computed independently.

References: the paper's own code fits netcal's binary calibrators
(``HistogramBinning(15, equal_intervals=True)``, ``IsotonicRegression``) on
(top-label confidence, correct) and its scaling methods on the binary
cross-entropy of the top confidence. Here: netcal's histogram binning and
scikit-learn's IsotonicRegression on that binary problem, and the binary
objectives written out in numpy and minimised by scipy, all on real data
(logistic regression scores on scikit-learn's bundled datasets).
"""

import re

import numpy as np
import pytest
from scipy.optimize import minimize, minimize_scalar
from scipy.special import log_softmax, logsumexp, softmax
from sklearn.base import clone
from sklearn.datasets import load_digits, load_wine
from sklearn.isotonic import IsotonicRegression
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler

from skcal import (
    CenteredIsotonicCalibrator,
    HistogramBinningCalibrator,
    IsotonicCalibrator,
    KCalCalibrator,
    PlattCalibrator,
    TemperatureScaling,
    TopVersusAll,
    VectorScaling,
    VennAbersCalibrator,
)
from skcal.exceptions import ConvergenceWarning, InputWarning, MissingClassWarning


def _scores(loader, C=10.0, random_state=0):
    """Logits of a logistic regression: calibration and test halves."""
    X, y = loader(return_X_y=True)
    X = StandardScaler().fit_transform(X)
    X_fit, X_rest, y_fit, y_rest = train_test_split(
        X, y, test_size=0.6, random_state=random_state, stratify=y
    )
    model = LogisticRegression(C=C, max_iter=500).fit(X_fit, y_fit)
    Z = model.decision_function(X_rest)
    Zc, Zt, yc, yt = train_test_split(
        Z, y_rest, test_size=0.5, random_state=random_state, stratify=y_rest
    )
    return Zc, yc, Zt, yt


@pytest.fixture(scope="module")
def digits():
    return _scores(load_digits, C=0.01)


def _top(P):
    rows = np.arange(len(P))
    top = P.argmax(axis=1)
    return top, P[rows, top]


def _least_share(P, top):
    """The smallest confidence that keeps ``top`` first when the others keep
    their proportions: ``p_2 / (1 - p_top + p_2)`` (a tie, which the
    calibrator breaks by one unit in the last place)."""
    rest = P.copy()
    rest[np.arange(len(P)), top] = 0.0
    second = rest.max(axis=1)
    return second / (rest.sum(axis=1) + second)


def _proportional(P, top, confidence):
    """The paper's confidence on the top class, the rest in proportion."""
    rows = np.arange(len(P))
    rest = P.copy()
    rest[rows, top] = 0.0
    out = rest / rest.sum(axis=1, keepdims=True) * (1.0 - confidence)[:, None]
    out[rows, top] = confidence
    return out


def _assert_top_first(P, top):
    """``top`` has the largest probability of its row (strictly where the
    input ranks it strictly first, which these tests' inputs do)."""
    rows = np.arange(len(P))
    assert (P[rows, top] >= P.max(axis=1) * (1 - 1e-12)).all()
    assert (np.argmax(P, axis=1) == top).all()


TINY = np.finfo(np.float64).tiny


def _floored(P, floor=TINY):
    """Renormalised rows floored at ``floor``, the rows the floor raised
    renormalised again (the input contract of the user guide). At the
    smallest normal float64 (the default), what a binary map of the
    confidence and the others' proportions read; at :func:`_proba_floor`,
    what the logs of probabilities are taken of."""
    Q = P / P.sum(axis=1, keepdims=True)
    raised = (Q < floor).any(axis=1)
    Q = np.maximum(Q, floor)
    Q[raised] /= Q[raised].sum(axis=1, keepdims=True)
    return Q


def _proba_floor(Pc):
    """The floor of the logs of probabilities, by the rule the other
    calibrators follow: half the smallest positive calibration probability,
    at least the smallest normal float64."""
    return max(TINY, 0.5 * Pc[Pc > 0].min())


def _binary_reference(reference, digits):
    Zc, yc, Zt, _ = digits
    Pc, Pt = softmax(Zc, axis=1), softmax(Zt, axis=1)
    top_c, conf_c = _top(Pc)
    top_t, conf_t = _top(Pt)
    right = (top_c == yc).astype(int)
    raw = np.asarray(reference(conf_c, right, conf_t), dtype=np.float64).ravel()
    expected = np.maximum(raw, _least_share(Pt, top_t))
    return Pt, top_t, raw, _proportional(Pt, top_t, expected)


def test_isotonic_is_sklearn_isotonic_on_the_top_label(digits):
    def reference(conf, right, new):
        iso = IsotonicRegression(y_min=0.0, y_max=1.0, out_of_bounds="clip")
        return iso.fit(conf, right).predict(new)

    Pt, top, raw, expected = _binary_reference(reference, digits)
    tva = TopVersusAll(IsotonicCalibrator(), redistribution="proportional")
    P = tva.fit(*digits[:2]).predict_proba(digits[2])
    # 1e-12: the floor of the one-vs-rest calibrators' renormalisation
    np.testing.assert_allclose(P, expected, rtol=0, atol=1e-11)
    assert not tva.scaling_ and tva.temperature_ == 1.0


def test_histogram_binning_is_netcal_on_the_top_label(digits):
    netcal_binning = pytest.importorskip("netcal.binning")

    def reference(conf, right, new):
        hb = netcal_binning.HistogramBinning(15, equal_intervals=True)
        return hb.fit(conf, right).transform(new)

    Pt, top, raw, expected = _binary_reference(reference, digits)
    tva = TopVersusAll(
        HistogramBinningCalibrator(n_bins=15), redistribution="proportional"
    )
    P = tva.fit(*digits[:2]).predict_proba(digits[2])
    np.testing.assert_allclose(P, expected, rtol=0, atol=1e-11)
    _assert_top_first(P, digits[2].argmax(axis=1))


@pytest.mark.parametrize("redistribution", ["proportional", "temperature"])
def test_histogram_binning_maps_the_confidence_alone_on_bin_edges(redistribution):
    """The binary histogram binning is the paper's one map of the
    confidence: each row gets the frequency of right predictions in the bin
    ``[i / 10, (i + 1) / 10)`` of its confidence (computed here by
    ``np.searchsorted``), rows on a bin edge included. Confidences ``k /
    20`` put rows on the edges 0.6 to 0.9; each row is ``[c, 1 - c]`` in
    two of five columns (``1 - c`` exact: every row sums to 1 exactly). A
    second map of ``1 - c`` in the same bins would count the rows of an edge
    in the bin below it, mixing two bins' values; and the binary softmax of
    the logs of ``[0.9, 0.1]`` is 0.8999999999999999, in the bin below, so
    the map must read the top entries of the probabilities themselves
    (also where the others take the temperature's shares, and in
    :meth:`predict_log_proba`). (netcal's ``HistogramBinning`` bins
    ``(l, u]``: off the edges, the same map.)"""
    rng = np.random.default_rng(0)
    n = 3000
    conf = rng.integers(11, 20, size=n) / 20.0
    cols = np.array([rng.permutation(5)[:2] for _ in range(n)])
    P = np.zeros((n, 5))
    P[np.arange(n), cols[:, 0]], P[np.arange(n), cols[:, 1]] = conf, 1.0 - conf
    assert (P.sum(axis=1) == 1.0).all()
    right = rng.random(n) < np.sqrt(conf)  # rates above the least share 0.5
    y = np.where(right, cols[:, 0], (cols[:, 0] + 1 + rng.integers(0, 4, n)) % 5)
    bins = np.minimum(np.searchsorted(np.arange(11) / 10, conf, side="right") - 1, 9)
    assert np.isin(conf, [0.6, 0.7, 0.8, 0.9]).sum() > 1000  # rows on edges
    freq = np.bincount(bins, weights=right, minlength=10) / np.maximum(
        np.bincount(bins, minlength=10), 1
    )
    tva = TopVersusAll(
        HistogramBinningCalibrator(n_bins=10),
        input="proba",
        redistribution=redistribution,
    )
    if redistribution == "temperature":  # the logs of the zeros are floored
        with pytest.warns(InputWarning, match=r"^\d+ of 3000 calibration rows"):
            got = tva.fit(P, y).predict_proba(P)
    else:
        got = tva.fit(P, y).predict_proba(P)
    top = cols[:, 0]
    # the others' shares: their own, or those of softmax(log(P) / T)
    shares = P
    if redistribution == "temperature":
        logs = np.log(_floored(P, _proba_floor(P)))  # zeros: half of 0.05
        shares = softmax(logs / tva.temperature_, axis=1)
    least = _least_share(shares, top)
    expected = _proportional(shares, top, np.maximum(freq[bins], least))
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-12)
    np.testing.assert_allclose(tva.calibrator_.bin_values_[1][bins], freq[bins])
    # the logs are those of the same probabilities, rows on edges included
    np.testing.assert_allclose(np.exp(tva.predict_log_proba(P)), got, rtol=1e-12)


def _bce_of_top(S, top, right, weight=None):
    """The paper's loss: binary cross-entropy of the top class's softmax."""
    log_p = log_softmax(S, axis=1)
    rows = np.arange(len(top))
    log_c = log_p[rows, top]
    others = log_p.copy()
    others[rows, top] = -np.inf
    log_rest = logsumexp(others, axis=1)  # log(1 - c), without rounding
    loss = -(right * log_c + (1 - right) * log_rest)
    return np.average(loss, weights=weight)


def _reference_temperature(Z, y, weight=None):
    top = Z.argmax(axis=1)
    right = (top == y).astype(float)
    result = minimize_scalar(
        lambda log_t: _bce_of_top(Z / np.exp(log_t), top, right, weight),
        bounds=(-5.0, 5.0),
        method="bounded",
        options={"xatol": 1e-10},
    )
    return float(np.exp(result.x))


@pytest.mark.parametrize("loader, C", [(load_digits, 0.01), (load_wine, 0.01)])
def test_temperature_minimises_the_binary_cross_entropy(loader, C):
    Zc, yc, Zt, yt = _scores(loader, C=C)
    T_ref = _reference_temperature(Zc, yc)
    tva = TopVersusAll().fit(Zc, yc)  # the default: temperature scaling
    assert isinstance(tva.calibrator_, TemperatureScaling)
    np.testing.assert_allclose(tva.calibrator_.temperature_, T_ref, rtol=1e-6)
    # the full vector is softmax(z / T): the scaling's own shares
    np.testing.assert_allclose(
        tva.predict_proba(Zt), softmax(Zt / T_ref, axis=1), rtol=1e-5, atol=1e-12
    )
    # the binary objective differs from the multiclass NLL's temperature
    T_nll = TemperatureScaling(device="cpu").fit(Zc, yc).temperature_
    assert abs(T_nll - T_ref) > 1e-3 * T_ref


def test_temperature_with_weights_is_the_weighted_objective(digits):
    Zc, yc, _, _ = digits
    w = np.random.default_rng(0).integers(0, 4, size=len(yc)).astype(float)
    T_ref = _reference_temperature(Zc, yc, w)
    tva = TopVersusAll().fit(Zc, yc, sample_weight=w)
    np.testing.assert_allclose(tva.calibrator_.temperature_, T_ref, rtol=1e-6)
    # integer weights are repetitions
    rep = TopVersusAll().fit(
        np.repeat(Zc, w.astype(int), 0), np.repeat(yc, w.astype(int))
    )
    np.testing.assert_allclose(
        rep.calibrator_.temperature_, tva.calibrator_.temperature_, rtol=1e-8
    )


def test_vector_scaling_minimises_the_regularised_binary_objective():
    Zc, yc, Zt, _ = _scores(load_wine, C=0.01)
    reg = 0.01
    Z = Zc - Zc.max(axis=1, keepdims=True)  # the logits the scaling sees
    top = Z.argmax(axis=1)
    right = (top == yc).astype(float)
    beta = 1.0 / _reference_temperature(Zc, yc)
    n_classes = Z.shape[1]

    def objective(x):
        d, b = x[:n_classes], x[n_classes:]
        S = Z * ((1.0 + d) * beta) + b
        return _bce_of_top(S, top, right) + reg * (d @ d + b @ b)

    ref = minimize(objective, np.zeros(2 * n_classes), method="BFGS", tol=1e-10)
    tva = TopVersusAll(VectorScaling(reg_lambda=reg, tol=1e-9, max_iter=2000))
    tva.fit(Zc, yc)
    vs = tva.calibrator_
    assert tva.scaling_
    np.testing.assert_allclose(vs.temperature_init_, 1.0 / beta, rtol=1e-6)
    np.testing.assert_allclose(
        vs.coef_, (1.0 + ref.x[:n_classes]) * beta, rtol=0, atol=1e-4 * beta
    )
    np.testing.assert_allclose(vs.intercept_, ref.x[n_classes:], rtol=0, atol=1e-4)
    # prediction: the top class keeps the first place
    P = tva.predict_proba(Zt)
    _assert_top_first(P, Zt.argmax(axis=1))
    np.testing.assert_allclose(P.sum(axis=1), 1.0, rtol=0, atol=1e-12)


@pytest.mark.parametrize(
    "inner",
    [
        None,
        IsotonicCalibrator(),
        HistogramBinningCalibrator(),
        PlattCalibrator(),
        VennAbersCalibrator(),  # its predict_proba failed (no private path)
        VectorScaling(),
        LogisticRegression(),  # any scikit-learn classifier
    ],
    ids=lambda est: type(est).__name__,
)
def test_rows_sum_to_one_and_argmax_is_kept_on_real_data(digits, inner):
    Zc, yc, Zt, yt = digits
    before = None if inner is None else clone(inner).get_params()
    tva = TopVersusAll(inner).fit(Zc, yc)
    if inner is not None:  # the calibrator passed is cloned, not fitted
        assert inner.get_params() == before and not hasattr(inner, "classes_")
    P = tva.predict_proba(Zt)
    np.testing.assert_allclose(P.sum(axis=1), 1.0, rtol=0, atol=1e-12)
    _assert_top_first(P, Zt.argmax(axis=1))
    np.testing.assert_array_equal(tva.predict(Zt), Zt.argmax(axis=1))
    np.testing.assert_allclose(np.exp(tva.predict_log_proba(Zt)), P, atol=1e-12)
    # probabilities are read as their logs floored at half the smallest
    # calibration probability (no calibration entry is below it: the same
    # fit); the test rows with entries below it as the logits of the floored
    # rows
    Pc, Pt = softmax(Zc, axis=1), softmax(Zt, axis=1)
    floor = _proba_floor(Pc)
    proba = TopVersusAll(inner, input="proba").fit(Pc, yc)
    expected = tva.predict_proba(np.log(_floored(Pt, floor)))
    rows = np.ones(len(Pt), dtype=bool)
    if isinstance(inner, PlattCalibrator):  # it floors [1 - c, c] itself
        rest_c, rest_t = 1 - Pc.max(axis=1), 1 - Pt.max(axis=1)
        rows = rest_t >= 0.5 * rest_c.min()
        assert rows.mean() > 0.9
    np.testing.assert_allclose(
        proba.predict_proba(Pt)[rows], expected[rows], rtol=1e-6, atol=1e-9
    )


def test_temperature_redistribution_uses_temperature_scaling_shares(digits):
    Zc, yc, Zt, _ = digits
    tva = TopVersusAll(IsotonicCalibrator()).fit(Zc, yc)
    T = TemperatureScaling(device="cpu").fit(Zc, yc).temperature_
    np.testing.assert_allclose(tva.temperature_, T, rtol=1e-8)
    P = tva.predict_proba(Zt)
    top = Zt.argmax(axis=1)
    conf = P[np.arange(len(P)), top]
    expected = _proportional(softmax(Zt / T, axis=1), top, conf)
    np.testing.assert_allclose(P, expected, rtol=0, atol=1e-12)


def test_binary_problem_is_one_calibrator_on_two_columns(digits):
    Zc, yc, _, _ = digits
    tva = TopVersusAll(PlattCalibrator()).fit(Zc, yc)
    assert tva.calibrator_.n_features_in_ == 2
    np.testing.assert_array_equal(tva.calibrator_.classes_, [0, 1])
    assert tva.n_free_parameters(10) == PlattCalibrator().n_free_parameters(2) + 1
    assert TopVersusAll().n_free_parameters(1000) == 1
    vs = VectorScaling(reg_lambda=0.0)
    assert TopVersusAll(vs).n_free_parameters(10) == vs.n_free_parameters(10)


@pytest.mark.parametrize("inner", [None, IsotonicCalibrator(), VectorScaling()])
def test_no_binary_problem_keeps_the_probabilities(inner):
    Z = np.array([[2.0, 0.0, 0.0], [0.0, 2.0, 0.0], [0.0, 0.0, 2.0]] * 4)
    Z += np.random.default_rng(0).normal(scale=0.1, size=Z.shape)
    y = np.tile([0, 1, 2], 4)
    for labels, word in [(y, "right"), ((y + 1) % 3, "wrong")]:
        with pytest.warns(ConvergenceWarning, match=f"top class .* is {word}"):
            tva = TopVersusAll(inner).fit(Z, labels)
        assert tva.calibrator_ is None
        np.testing.assert_allclose(
            tva.predict_proba(Z), softmax(Z, axis=1), rtol=1e-12, atol=0
        )


def test_a_local_calibrator_is_refused():
    Zc, yc, _, _ = _scores(load_wine, C=0.01)
    with pytest.raises(TypeError, match="local calibrator"):
        TopVersusAll(KCalCalibrator()).fit(Zc, yc)


def test_absent_class_keeps_its_column(digits):
    Zc, yc, Zt, _ = digits
    keep = yc != 3
    with pytest.warns(MissingClassWarning):
        tva = TopVersusAll(classes=np.arange(10)).fit(Zc[keep], yc[keep])
    P = tva.predict_proba(Zt)
    assert P.shape == Zt.shape and (P[:, 3] > 0).all()


@pytest.mark.filterwarnings("ignore:The number of unique classes")
@pytest.mark.parametrize("inner", [None, IsotonicCalibrator()])
def test_a_thousand_classes(inner):
    rng = np.random.default_rng(0)
    Z = 3.0 * rng.standard_normal((400, 1000))
    y = np.where(rng.random(400) < 0.5, Z.argmax(axis=1), rng.integers(0, 1000, 400))
    with pytest.warns(MissingClassWarning):
        tva = TopVersusAll(inner, classes=np.arange(1000)).fit(Z, y)
    P = tva.predict_proba(Z)
    _assert_top_first(P, Z.argmax(axis=1))


# ---------------------------------------------------------------------------
# the fast paths (issue 36): the same results as the references, progress


def _synthetic(n, n_classes, scale=3.0, seed=0, dtype=np.float64):
    """Logits whose top class is right about half the time."""
    rng = np.random.default_rng(seed)
    Z = scale * rng.standard_normal((n, n_classes))
    y = np.where(rng.random(n) < 0.5, Z.argmax(axis=1), rng.integers(0, n_classes, n))
    return Z.astype(dtype), y


@pytest.mark.parametrize("n_classes", [2, 10, 100])
def test_temperature_matches_the_paper_loss_on_many_classes(n_classes):
    Zc, yc = _synthetic(3000, n_classes)
    Zt, _ = _synthetic(500, n_classes, seed=1)
    T_ref = _reference_temperature(Zc, yc)
    tva = TopVersusAll().fit(Zc, yc)
    np.testing.assert_allclose(tva.calibrator_.temperature_, T_ref, rtol=1e-6)
    expected = softmax(Zt / T_ref, axis=1)
    np.testing.assert_allclose(tva.predict_proba(Zt), expected, rtol=1e-5)
    # probabilities give the same map (their logs are the logits up to a
    # constant per row)
    Pc, Pt = softmax(Zc, axis=1), softmax(Zt, axis=1)
    proba = TopVersusAll(input="proba").fit(Pc, yc)
    np.testing.assert_allclose(proba.calibrator_.temperature_, T_ref, rtol=1e-6)
    np.testing.assert_allclose(proba.predict_proba(Pt), expected, rtol=1e-5)


def test_float32_logits_give_the_float64_fit():
    Zc, yc = _synthetic(2000, 20, dtype=np.float32)
    Zt, _ = _synthetic(300, 20, seed=1, dtype=np.float32)
    Zc64, Zt64 = Zc.astype(np.float64), Zt.astype(np.float64)
    T_ref = _reference_temperature(Zc64, yc)
    tva = TopVersusAll().fit(Zc, yc)
    np.testing.assert_allclose(tva.calibrator_.temperature_, T_ref, rtol=1e-6)
    P = tva.predict_proba(Zt)
    assert P.dtype == np.float64
    np.testing.assert_allclose(P, softmax(Zt64 / T_ref, axis=1), rtol=1e-5)
    Zc_before = Zc.copy()
    iso = TopVersusAll(IsotonicCalibrator(), redistribution="proportional")
    P32 = iso.fit(Zc, yc).predict_proba(Zt)
    P64 = clone(iso).fit(Zc64, yc).predict_proba(Zt64)
    # float32 logits are shifted to a row maximum of 0 in float32
    np.testing.assert_allclose(P32, P64, rtol=1e-5, atol=1e-9)
    np.testing.assert_array_equal(Zc, Zc_before)  # the input is not modified


def test_probabilities_map_like_sklearn_isotonic_with_weights(digits):
    """``input="proba"`` maps the probabilities without their logs, and the
    binary calibrator is fitted with the weights: scikit-learn's weighted
    isotonic regression on the top-label problem."""
    Zc, yc, Zt, _ = digits
    w = np.random.default_rng(0).integers(0, 4, size=len(yc)).astype(float)

    def reference(conf, right, new):
        iso = IsotonicRegression(y_min=0.0, y_max=1.0, out_of_bounds="clip")
        return iso.fit(conf, right, sample_weight=w).predict(new)

    _, _, _, expected = _binary_reference(reference, digits)
    Pc, Pt = softmax(Zc, axis=1), softmax(Zt, axis=1)
    Pt_before = Pt.copy()
    tva = TopVersusAll(
        IsotonicCalibrator(), input="proba", redistribution="proportional"
    )
    P = tva.fit(Pc, yc, sample_weight=w).predict_proba(Pt)
    np.testing.assert_allclose(P, expected, rtol=0, atol=1e-11)
    np.testing.assert_array_equal(Pt, Pt_before)


def test_logit_gaps_beyond_the_float64_range_of_exp():
    """Rows whose other classes' shares underflow (gaps of 800): ``1 - c``
    is the smallest positive float, the binary problem stays finite (it
    used to be refused as holding infinite scores)."""
    Zc, yc = _synthetic(400, 5)
    Zc[:20] = 0.0
    Zc[np.arange(20), yc[:20]] = 800.0  # confident and right
    tva = TopVersusAll(IsotonicCalibrator(), redistribution="proportional")
    tva.fit(Zc, yc)
    P = tva.predict_proba(Zc)
    assert np.isfinite(P).all()
    np.testing.assert_allclose(P.sum(axis=1), 1.0, rtol=0, atol=1e-12)

    def reference(conf, right, new):
        iso = IsotonicRegression(y_min=0.0, y_max=1.0, out_of_bounds="clip")
        return iso.fit(conf, right).predict(new)

    Pc = softmax(Zc, axis=1)
    top, conf = _top(Pc)
    c_ref = reference(conf, (top == yc).astype(int), conf)
    with np.errstate(invalid="ignore"):  # rows whose others are all 0
        least = np.nan_to_num(_least_share(Pc, top))
    c_ref = np.maximum(c_ref, least)
    np.testing.assert_allclose(P[np.arange(400), top], c_ref, rtol=0, atol=1e-11)


def _tied_certain_rows(n_classes=5):
    """Logits whose 60 most confident rows all have confidence 1.0 in
    float64 (logit gaps of 40 to 100), 20 of them wrong."""
    Z, y = _synthetic(600, n_classes)
    gaps = np.concatenate([np.linspace(40, 45, 20), np.linspace(60, 100, 40)])
    top = np.arange(60) % n_classes
    Z[:60] = 0.0
    Z[np.arange(60), top] = gaps
    y[:20] = (top[:20] + 1) % n_classes  # wrong
    y[20:60] = top[20:]  # right
    return Z, y


@pytest.mark.parametrize("input", ["logits", "proba"])
def test_isotonic_maps_the_confidence_alone_as_the_paper(input):
    """The binary isotonic fit is the paper's one map of the confidence
    (scikit-learn's isotonic regression of ``c``), its complement mirrored:
    rows whose confidences tie at 1.0 share the pooled rate of their block,
    and the fitted maps are scikit-learn's and its mirror image."""
    Zc, yc = _tied_certain_rows()
    Pc = softmax(Zc, axis=1)
    top, conf = _top(Pc)
    assert (conf[:60] == 1.0).all()
    iso = IsotonicRegression(y_min=0.0, y_max=1.0, out_of_bounds="clip")
    raw = iso.fit(conf, (top == yc).astype(int)).predict(conf)
    expected = _proportional(Pc, top, np.maximum(raw, _least_share(Pc, top)))
    assert 0.5 < raw[0] < 0.8  # the block's rate: 40 right of 60 and more
    X = Zc if input == "logits" else Pc
    tva = TopVersusAll(IsotonicCalibrator(), input=input, redistribution="proportional")
    P = tva.fit(X, yc).predict_proba(X)
    np.testing.assert_allclose(P, expected, rtol=0, atol=1e-11)
    inner = tva.calibrator_
    np.testing.assert_allclose(inner.thresholds_[1], iso.X_thresholds_, rtol=1e-14)
    np.testing.assert_allclose(inner.values_[1], iso.y_thresholds_, rtol=0, atol=1e-15)
    np.testing.assert_allclose(
        inner.thresholds_[0], 1.0 - iso.X_thresholds_[::-1], rtol=0, atol=1e-15
    )
    np.testing.assert_allclose(
        inner.values_[0], 1.0 - iso.y_thresholds_[::-1], rtol=0, atol=1e-15
    )


def test_isotonic_map_of_the_complement_is_its_second_fit(digits):
    """The stored map of ``1 - c`` (the mirror image of the map of ``c``) is
    scikit-learn's isotonic regression of the wrong predictions on ``1 -
    c``, a second fit that gives the same map in exact arithmetic: equal to
    rounding on real scores (no confidences within 1e-15 of each other)."""
    Zc, yc, _, _ = digits
    Pc = softmax(Zc, axis=1)
    top, conf = _top(Pc)
    assert np.diff(np.sort(conf)).min() > 1e-12  # no merged ties
    wrong = (top != yc).astype(int)
    iso = IsotonicRegression(y_min=0.0, y_max=1.0, out_of_bounds="clip")
    iso.fit(1.0 - conf, wrong)
    tva = TopVersusAll(IsotonicCalibrator(), redistribution="proportional")
    inner = tva.fit(Zc, yc).calibrator_
    np.testing.assert_allclose(inner.thresholds_[0], iso.X_thresholds_, atol=1e-14)
    np.testing.assert_allclose(inner.values_[0], iso.y_thresholds_, atol=1e-14)


def test_isotonic_merges_tied_confidences_as_scikit_learn():
    """scikit-learn merges the confidences within 1e-15 of their group's
    first, from the lowest up: ``c``, ``c + 5u`` and ``c + 10u`` (``u`` the
    spacing of floats at 0.7) are the groups ``{c, c + 5u}`` and ``{c +
    10u}``. A separate fit of ``1 - c`` would merge from the other end
    (``{c + 10u, c + 5u}``, ``{c}``) and the renormalised pair would give
    the middle row 0.6 (by hand: 0.75 / (0.75 + 0.5)); the paper's one map
    gives it scikit-learn's 0.75. Rows of five classes whose every partial
    sum is a multiple of ``2^-53`` (each sums to 1 exactly, in any order)."""
    u = np.spacing(0.7)
    c = np.array([0.52, 0.55, 0.6, 0.7, 0.7 + 5 * u, 0.7 + 10 * u, 0.78, 0.8])
    right = np.array([0, 0, 0, 0, 1, 1, 1, 1])
    P = np.empty((8, 5))
    P[:, 0], P[:, 1], P[:, 2:] = c, 0.8125 - c, 0.0625
    assert (P.sum(axis=1) == 1.0).all() and (P >= 0).all()
    y = np.array([4, 1, 2, 3, 0, 0, 0, 0])  # wrong, then right (top 0)
    iso = IsotonicRegression(y_min=0.0, y_max=1.0, out_of_bounds="clip")
    raw = iso.fit(c, right).predict(c)
    np.testing.assert_allclose(raw[3:6], [0.5, 0.75, 1.0], rtol=0, atol=1e-12)
    tva = TopVersusAll(
        IsotonicCalibrator(), input="proba", redistribution="proportional"
    )
    got = tva.fit(P, y).predict_proba(P)[:, 0]
    expected = np.maximum(raw, _least_share(P, np.zeros(8, dtype=int)))
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-11)


def test_centred_isotonic_maps_the_confidence_as_cir_model(digits):
    """Centred isotonic regression in the reduction is ``cir_model``'s (the
    implementation behind probmetrics' ``cir``) fitted on the top-label
    confidence: one map, clipped to its calibration range."""
    cir_model = pytest.importorskip("cir_model")

    def reference(conf, right, new):
        ref = cir_model.CenteredIsotonicRegression().fit(conf, right.astype(float))
        return ref.transform(np.clip(new, conf.min(), conf.max()))

    _, _, _, expected = _binary_reference(reference, digits)
    tva = TopVersusAll(CenteredIsotonicCalibrator(), redistribution="proportional")
    P = tva.fit(*digits[:2]).predict_proba(digits[2])
    np.testing.assert_allclose(P, expected, rtol=0, atol=1e-11)


def test_temperature_floors_the_others_of_extreme_rows():
    """Rows of ``softmax(z / T)`` whose other classes sum below 1e-300 get
    exactly 1e-300 among them, in their proportions (the log loss stays
    finite), as every calibrator of the top label does."""
    Zc, yc = _synthetic(2000, 4)
    tva = TopVersusAll().fit(Zc, yc)
    T = tva.calibrator_.temperature_
    Zt = np.array([[0.0, -1.0, -2.0, -3.0], [0.0, -1.0, -2.0, -3.0]]) * 1000 * T
    Zt[1] /= 2000.0  # an ordinary row
    P = tva.predict_proba(Zt)
    log_q = log_softmax(Zt / T, axis=1)
    others = logsumexp(log_q[:, 1:], axis=1)
    assert others[0] < np.log(1e-300) and others[1] > np.log(1e-300)
    expected = np.exp(log_q)
    expected[0, 1:] = np.exp(log_q[0, 1:] - others[0]) * 1e-300
    expected[0, 0] = 1.0
    np.testing.assert_allclose(P, expected, rtol=1e-12, atol=0)


@pytest.mark.parametrize("fit_scale", [4.0, 0.3])
def test_temperature_on_probabilities_is_the_softmax_of_their_scaled_logs(fit_scale):
    """With ``input="proba"`` the default model maps the probabilities in
    the validation's copy: ``softmax(log(p) / T)`` (scipy, written out
    here), the others of near-certain rows floored as above, and the
    input left as it was. Over-confident training scores give ``T > 1``
    (no share of ``log(p) / T`` can fall below 1e-290), under-confident
    ones ``T < 1``, where rows of the general path do. The calibration
    rows hold near-certain rows too, so that the floor of the logs (half
    the smallest calibration probability) is below the test rows' shares."""
    Zc, yc = _synthetic(2000, 6, scale=fit_scale)
    Zc[:20] = _synthetic(20, 6, seed=7, scale=4.0)[0] * 60.0
    yc[:20] = Zc[:20].argmax(axis=1)  # right: they leave T as it was
    tva = TopVersusAll(input="proba").fit(softmax(Zc, axis=1), yc)
    T = tva.calibrator_.temperature_
    assert (T > 1.0) == (fit_scale > 1.0)
    Zt, _ = _synthetic(3000, 6, seed=5, scale=4.0)
    Zt[:20] *= 60.0  # near-certain rows: the others sum below 1e-5 or 1e-300
    Pt = softmax(Zt, axis=1)
    before = Pt.copy()
    P = tva.predict_proba(Pt)
    np.testing.assert_array_equal(Pt, before)
    log_q = log_softmax(
        np.log(_floored(Pt, _proba_floor(softmax(Zc, axis=1)))) / T, axis=1
    )
    masked = log_q.copy()
    masked[np.arange(len(masked)), log_q.argmax(axis=1)] = -np.inf
    others = logsumexp(masked, axis=1)
    expected = np.exp(log_q)
    floored = others < np.log(1e-300)
    assert (others < np.log(1e-5)).sum() >= 10  # near certainty
    assert floored.any() == (T < 1.0)  # rows of the general path
    np.testing.assert_allclose(P[~floored], expected[~floored], rtol=1e-11, atol=1e-300)
    # the others of the floored rows hold 1e-300 in their proportions
    shares = np.exp(masked[floored] - others[floored, None]) * 1e-300
    shares[masked[floored] == -np.inf] = 1.0
    np.testing.assert_allclose(P[floored], shares, rtol=1e-12, atol=0)
    assert np.isfinite(tva.predict_log_proba(Pt)).all()


@pytest.mark.parametrize("redistribution", ["temperature", "proportional"])
def test_near_certain_rows_keep_the_mass_of_their_other_classes(redistribution):
    """Where ``1 - c`` rounds to 0 but the other classes still hold, say,
    1e-26 of ``softmax(z / T)``, that mass is theirs (in both
    ``predict_proba`` and ``predict_log_proba``), not the 1e-300 floor: the
    log loss of a confident wrong prediction is -log(1e-26), not 690."""
    Zc, yc = _synthetic(2000, 6, scale=4.0)
    tva = TopVersusAll(redistribution=redistribution).fit(Zc, yc)
    T = tva.calibrator_.temperature_
    gaps = np.array([20.0, 60.0, 130.0, 460.0, 800.0]) * T  # others ~1e-8 .. 1e-347
    Zt = np.zeros((len(gaps), 6))
    Zt[:, 1:] = -gaps[:, None] * np.linspace(1.0, 2.0, 5)
    log_q = log_softmax(Zt / T, axis=1)
    if redistribution == "proportional":  # the same total, shared as softmax(z)
        rest = logsumexp(log_q[:, 1:], axis=1, keepdims=True)
        log_q[:, 1:] = log_softmax(Zt[:, 1:], axis=1) + rest
    floored = logsumexp(log_q[:, 1:], axis=1) < np.log(1e-300)
    assert floored.tolist() == [False, False, False, False, True]
    got_log = tva.predict_log_proba(Zt)
    np.testing.assert_allclose(got_log[~floored], log_q[~floored], rtol=1e-12)
    got = tva.predict_proba(Zt)
    np.testing.assert_allclose(got[~floored], np.exp(log_q[~floored]), rtol=1e-12)
    others = logsumexp(got_log[floored][:, 1:], axis=1)
    np.testing.assert_allclose(others, np.log(1e-300), rtol=1e-12)


def test_verbose_shows_the_binary_temperature_fit(capsys):
    Zc, yc = _synthetic(500, 10)
    T0 = TopVersusAll().fit(Zc, yc).calibrator_.temperature_
    assert capsys.readouterr().err == ""
    tva = TopVersusAll(verbose=1).fit(Zc, yc)
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "TopVersusAll: binary temperature:" in captured.err
    assert re.search(r"\d+/\d+ \[\d\d:\d\d<\d\d:\d\d", captured.err)
    assert "iteration" not in captured.err
    assert tva.calibrator_.temperature_ == T0  # progress changes nothing
    TopVersusAll(verbose=2).fit(Zc, yc)
    err = capsys.readouterr().err
    assert re.search(r"iteration 1: loss \d\S*, largest gradient \d", err)
    # a scaling calibrator's own verbose shows it too
    TopVersusAll(VectorScaling(verbose=1, max_iter=5)).fit(Zc, yc)
    err = capsys.readouterr().err
    assert "TopVersusAll: binary temperature:" in err


@pytest.mark.parametrize(
    "read_only, n_classes, dtype",
    [(False, 6, np.float64), (True, 6, np.float64), (False, 600, np.float32)],
)
def test_fit_on_probabilities_with_zeros_is_sklearn_isotonic(
    read_only, n_classes, dtype
):
    """``input="proba"`` fits the binary problem from the probabilities
    themselves (no logs, no copy: 600 classes take several blocks of rows):
    scikit-learn's isotonic regression of the top-label confidence, one-hot
    rows and exact zeros included; the input is not modified (and may be
    read-only)."""
    C = n_classes
    Zc, yc = _synthetic(1500, C)
    Zt, _ = _synthetic(400, C, seed=1)
    Pc, Pt = softmax(Zc, axis=1), softmax(Zt, axis=1)
    Pc[:40] = np.eye(C)[yc[:40]]  # one-hot and right
    Pc[40:60] = np.eye(C)[(yc[40:60] + 1) % C]  # one-hot and wrong
    Pc[60:80, 1:3] = 0.0
    Pc[60:80] /= Pc[60:80].sum(axis=1, keepdims=True)
    Pt[:10] = np.eye(C)[np.arange(10) % C]
    Pc, Pt = Pc.astype(dtype), Pt.astype(dtype)
    before = Pc.copy()
    if read_only:
        Pc.setflags(write=False)
    tva = TopVersusAll(
        IsotonicCalibrator(), input="proba", redistribution="proportional"
    )
    P = tva.fit(Pc, yc).predict_proba(Pt)
    np.testing.assert_array_equal(Pc, before)
    Fc, Ft = _floored(Pc.astype(np.float64)), _floored(Pt.astype(np.float64))
    top_c, conf_c = _top(Fc)
    top_t, conf_t = _top(Ft)
    iso = IsotonicRegression(y_min=0.0, y_max=1.0, out_of_bounds="clip")
    raw = iso.fit(conf_c, (top_c == yc).astype(int)).predict(conf_t)
    expected = _proportional(Ft, top_t, np.maximum(raw, _least_share(Ft, top_t)))
    np.testing.assert_allclose(P, expected, rtol=0, atol=1e-11)
    _assert_top_first(P, top_t)


def test_binary_probabilities_of_validated_rows_are_the_softmax_of_the_scores():
    """From a row's top entry ``c`` and the sum of its others ``rest``, a
    calibrator of probabilities is given ``[rest, c] / (c + rest)`` without
    logs: the exact ratios to 2 units in the last place (by fractions), and
    scipy's softmax of ``[log rest, log c]`` to its own accuracy (its ``exp``
    of a large negative log errs by ``|log| u``), near-certain rows (whose
    ``1 - c`` rounds to 0) included, floored at the smallest normal."""
    from fractions import Fraction

    from skcal.calibrators._top_versus_all import _binary_proba

    rest = np.concatenate([np.geomspace(1e-300, 0.9, 300), [1e-320, 0.0]])
    c = np.concatenate([np.linspace(0.05, 1.0, 300), [1.0, 1.0]])
    got = _binary_proba(c, rest)
    exact = [
        [float(Fraction(v) / (Fraction(top) + Fraction(r))) for v in (r, top)]
        for r, top in zip(rest, c)
    ]
    tiny = np.finfo(np.float64).tiny
    np.testing.assert_allclose(got, np.maximum(exact, tiny), rtol=4.5e-16, atol=0)
    with np.errstate(divide="ignore"):
        scipy = softmax(np.column_stack([np.log(rest), np.log(c)]), axis=1)
    np.testing.assert_allclose(got, np.maximum(scipy, tiny), rtol=1e-12, atol=0)
    assert got[-2, 0] == got[-1, 0] == tiny and got[-1, 1] == 1.0


def test_fit_on_invalid_probabilities_is_refused_as_by_the_other_path():
    """The binary fit's validation without a copy refuses what the copy's
    refuses, with the same message."""
    P = softmax(_synthetic(3000, 300)[0], axis=1)
    y = np.arange(3000) % 300
    P[2500, 3] = np.nan
    with pytest.raises(ValueError) as copied:
        TopVersusAll(IsotonicCalibrator(), input="proba").fit(P, y)
    with pytest.raises(ValueError) as visited:
        TopVersusAll(
            IsotonicCalibrator(), input="proba", redistribution="proportional"
        ).fit(P, y)
    assert "NaN" in str(visited.value) and str(visited.value) == str(copied.value)


def test_fit_on_probabilities_has_the_multiclass_temperature_of_their_logs():
    """With the default redistribution, the temperature of the others'
    shares fitted on probabilities minimises the multiclass log loss of
    ``softmax(log(p) / T)`` (scipy, written out here), ``p`` floored at
    half the smallest positive calibration probability as by the other
    calibrators (issue 49)."""
    Zc, yc = _synthetic(2000, 8, scale=4.0)
    Pc = softmax(Zc, axis=1)
    Pc[:30] = np.eye(8)[yc[:30]]  # exact zeros: floored before the log
    tva = TopVersusAll(HistogramBinningCalibrator(), input="proba").fit(Pc, yc)
    floor = _proba_floor(Pc)
    assert floor > 1e-100 and tva.proba_floor_ == floor
    L = np.log(_floored(Pc, floor))
    rows = np.arange(len(yc))

    def nll(log_t):
        return -log_softmax(L / np.exp(log_t), axis=1)[rows, yc].mean()

    best = minimize_scalar(nll, bounds=(-5, 5), method="bounded")
    best = minimize_scalar(
        nll,
        bounds=(best.x - 1e-3, best.x + 1e-3),
        method="bounded",
        options={"xatol": 1e-12},
    )
    np.testing.assert_allclose(tva.temperature_, np.exp(best.x), rtol=1e-6)


def _tree_votes(n_trees=10, random_state=0):
    """Votes of a small forest (probabilities on a grid of 1 / n_trees:
    many tied confidences and ties between classes) on 6 classes:
    calibration and test rows."""
    from sklearn.datasets import make_classification
    from sklearn.ensemble import RandomForestClassifier

    X, y = make_classification(
        5000, 20, n_informative=8, n_classes=6, random_state=random_state
    )
    forest = RandomForestClassifier(
        n_trees, max_depth=3, bootstrap=False, max_features=2, random_state=0
    )
    forest.fit(X[:1000], y[:1000])
    # each tree votes for one class: counts / n_trees, exact on the grid
    votes = sum(np.eye(6)[t.predict(X[1000:]).astype(int)] for t in forest)
    P = votes / n_trees
    return P[:2000], y[1000:3000], P[2000:], y[3000:]


@pytest.mark.parametrize("inner", [IsotonicCalibrator(), HistogramBinningCalibrator()])
@pytest.mark.parametrize("input", ["proba", "logits"])
def test_top_class_is_strictly_first_on_tree_votes(inner, input):
    """Issue 49: on the votes of a forest, the calibrated confidence was
    raised to the runner-up's share on a quarter of the rows, a tie that
    ``np.argmax`` of predict_proba broke toward the first column, not the
    argmax of X that predict returned. The top class is now strictly first
    (the argmax of X, the first column among tied votes), and predict is
    the argmax of predict_proba."""
    Pc, yc, Pt, _ = _tree_votes()
    if input == "logits":
        Pc, Pt = np.log(_floored(Pc)), np.log(_floored(Pt))
    top = np.argmax(Pt, axis=1)  # the first column among tied votes
    rows = np.arange(len(Pt))
    tied_votes = (Pt == Pt[rows, top][:, None]).sum(axis=1) > 1
    assert tied_votes.sum() > 100  # the case: many ties in X itself
    tva = TopVersusAll(inner, input=input, redistribution="proportional")
    tva.fit(Pc, yc)
    P = tva.predict_proba(Pt)
    shares = softmax(np.log(_floored(Pt)) / tva.temperature_, axis=1)
    raised = P[rows, top] <= _least_share(shares, top) * (1 + 1e-12)
    assert raised.sum() > 100  # rows whose confidence was raised
    np.testing.assert_array_equal(np.argmax(P, axis=1), top)
    np.testing.assert_array_equal(tva.predict(Pt), top)
    # strictly first wherever X ranks it strictly first
    others = P.copy()
    others[rows, top] = -1.0
    assert (P[rows, top] > others.max(axis=1))[~tied_votes].all()


@pytest.mark.parametrize("inner", [IsotonicCalibrator(), CenteredIsotonicCalibrator()])
@pytest.mark.parametrize("redistribution", ["temperature", "proportional"])
def test_logs_are_finite_on_probabilities_with_exact_zeros(inner, redistribution):
    """Issue 49: rows with exact zeros whose confidence is mapped to 1 gave
    the zero classes a share that underflowed to 0, and -inf in
    predict_log_proba and decision_function (against the guarantees page).
    The logs are finite and are those of predict_proba (a 0 has the log of
    the smallest positive float)."""
    rng = np.random.default_rng(0)
    n, n_classes = 400, 4
    top = rng.integers(0, n_classes, n)
    conf = rng.choice([0.4, 0.6, 0.99], n)
    P = np.zeros((n, n_classes))
    P[np.arange(n), top] = conf
    P[np.arange(n), (top + 1) % n_classes] += 1 - conf
    right = (conf == 0.99) | (rng.random(n) < conf)
    y = np.where(right, top, (top + 1) % n_classes)
    tva = TopVersusAll(inner, input="proba", redistribution=redistribution)
    tva.fit(P, y)
    proba = tva.predict_proba(P)
    log_proba, logits = tva.predict_log_proba(P), tva.decision_function(P)
    assert np.isfinite(log_proba).all() and np.isfinite(logits).all()
    expected = np.log(np.maximum(proba, np.nextafter(0.0, 1.0)))
    np.testing.assert_array_equal(log_proba, expected)
    np.testing.assert_allclose(softmax(logits, axis=1), proba, rtol=1e-12, atol=1e-300)


def test_probabilities_are_floored_before_their_logs_as_by_the_others():
    """Issue 49: with ``input="proba"`` the logs the fit reads were floored
    at 2.2e-308, so that on probabilities rounded to 3 decimals one row
    one-hot on a wrong class (a log of -708 for its true class) moved the
    binary temperature from 4.2 to 7.1. The logs are now floored as by
    every other calibrator: at half the smallest positive calibration
    probability (about 0.0005 here, by hand), the rows the floor raised
    renormalised, with the InputWarning counting the rows whose true class
    has probability 0. The temperature is the minimiser of the paper's loss
    on those logs (scipy) and barely moves with the bad row."""
    from skcal.utils._testing import make_miscalibrated_logits

    Z, y = make_miscalibrated_logits(2000, 10, random_state=0)
    P = np.round(softmax(Z, axis=1), 3)
    P /= P.sum(axis=1, keepdims=True)
    bad = np.eye(10)[[(y[0] + 1) % 10]]  # one-hot on a wrong class
    Pb, yb = np.vstack([P, bad]), np.append(y, y[0])
    zeros = int((Pb[np.arange(len(yb)), yb] == 0).sum())
    assert zeros > 1
    with pytest.warns(InputWarning, match=rf"^{zeros} of 2001 calibration rows"):
        tva = TopVersusAll(TemperatureScaling(), input="proba").fit(Pb, yb)
    with pytest.warns(InputWarning):
        T0 = TopVersusAll(TemperatureScaling(), input="proba").fit(P, y)
    T, T0 = tva.calibrator_.temperature_, T0.calibrator_.temperature_
    floor = _proba_floor(Pb)  # 0.001 of a renormalised row, halved
    assert abs(floor - 0.0005) < 1e-6 and tva.proba_floor_ == floor
    with pytest.warns(InputWarning):  # the peer reading the same probabilities
        peer = TemperatureScaling(input="proba").fit(Pb, yb)
    assert peer.proba_floor_ == tva.proba_floor_
    expected = _reference_temperature(np.log(_floored(Pb, floor)), yb)
    np.testing.assert_allclose(T, expected, rtol=1e-6)
    np.testing.assert_allclose(T, T0, rtol=0.01)  # the bad row barely counts
    # the predictions read the logs floored the same way
    expected = softmax(np.log(_floored(Pb, floor)) / T, axis=1)
    np.testing.assert_allclose(tva.predict_proba(Pb), expected, rtol=1e-10)
