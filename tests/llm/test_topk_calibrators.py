"""EnsembleTemperatureScaling, TopVersusAll and SMARTCalibrator on TopKScores.

References are independent: the dense calibrator on the dense logits
(``k = n_classes``), or on a dense matrix of the rest model built here
(``k < n_classes``); nothing here densifies a TopKScores by ``to_dense``.
"""

import numpy as np
import pytest

from skcal import (
    EnsembleTemperatureScaling,
    IsotonicCalibrator,
    PlattCalibrator,
    SMARTCalibrator,
    TemperatureScaling,
    TopVersusAll,
)
from skcal.calibrators import HistogramBinningCalibrator, VectorScaling
from skcal.exceptions import ConvergenceWarning
from skcal.llm import TopKScores


def _problem(n=400, n_classes=12, seed=0, temperature=0.5, noise=0.3):
    """Over-confident logits whose labels are partly noise (so that the
    uniform member of a mixture gets a weight)."""
    rng = np.random.default_rng(seed)
    logits = 2.0 * rng.normal(size=(n, n_classes))
    p = np.exp(logits * temperature)
    p /= p.sum(axis=1, keepdims=True)
    y = np.array([rng.choice(n_classes, p=row) for row in p])
    flip = rng.random(n) < noise
    y[flip] = rng.integers(0, n_classes, flip.sum())
    return logits, y


def _log_softmax(z):
    z = z - z.max(axis=1, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=1, keepdims=True))


def _dense_rest_model(top):
    """The rest model's dense log-probabilities, built independently: each
    unlisted class gets ``log(1 - sum listed) - log(m)``."""
    n, n_classes = len(top), top.n_classes
    dense = np.empty((n, n_classes))
    for i in range(n):
        listed = [(j, v) for j, v in zip(top.indices[i], top.values[i]) if j >= 0]
        mass = sum(np.exp(v) for _, v in listed)
        dense[i, :] = np.log1p(-mass) - np.log(n_classes - len(listed))
        for j, v in listed:
            dense[i, j] = v
    return dense


def _densify(out):
    """A TopKScores output as dense probabilities (independent of to_dense)."""
    P = np.empty((len(out), out.n_classes))
    for i in range(len(out)):
        listed = out.indices[i] >= 0
        m = out.n_classes - listed.sum()
        P[i, :] = np.exp(out.rest_logmass[i]) / m if m else np.nan
        P[i, out.indices[i][listed]] = np.exp(out.values[i][listed])
    return P


@pytest.fixture(autouse=True)
def _no_dense(monkeypatch):
    """Nothing here may densify a TopKScores implicitly."""

    def refuse(self, max_bytes=0):
        raise AssertionError("to_dense called")

    monkeypatch.setattr(TopKScores, "to_dense", refuse)


MIXTURES = [("ensemble", "mse"), ("ensemble", "log_loss"), ("uniform", "mse")]


# ------------------------------------------------------------------- ETS
@pytest.mark.parametrize("k", [12, 4])
@pytest.mark.parametrize("mixture, loss", MIXTURES)
def test_ets_topk_equals_dense(k, mixture, loss):
    logits, y = _problem()
    top = TopKScores.from_logits(logits, k=k)
    dense = _log_softmax(logits) if k == 12 else _dense_rest_model(top)
    params = {"mixture": mixture, "loss": loss, "device": "cpu"}
    ref = EnsembleTemperatureScaling(**params).fit(dense, y)
    got = EnsembleTemperatureScaling(**params).fit(top, y)
    assert got.temperature_ == pytest.approx(ref.temperature_, rel=1e-9)
    np.testing.assert_allclose(got.weights_, ref.weights_, atol=1e-9)
    assert got.weights_[2] > 0.002  # the uniform member is in the mixture
    out = got.predict_proba(top)
    assert isinstance(out, TopKScores)
    np.testing.assert_array_equal(out.indices, top.indices)
    np.testing.assert_allclose(_densify(out), ref.predict_proba(dense), atol=1e-9)
    np.testing.assert_array_equal(got.predict(top), ref.predict(dense))


@pytest.mark.parametrize("k", [12, 4])
def test_ets_topk_map_of_all_three_members(k):
    """Weights on every member (set by hand): the leftover gets ``w_0 r_T +
    w_1 r + w_2 (V - k) / V``, the uniform member's exact rest mass."""
    logits, y = _problem(n=50)
    top = TopKScores.from_logits(logits, k=k)
    dense = _log_softmax(logits) if k == 12 else _dense_rest_model(top)
    ets = EnsembleTemperatureScaling(device="cpu").fit(dense, y)
    ets.temperature_, ets.weights_ = 1.7, np.array([0.5, 0.3, 0.2])
    out = ets.predict_proba(top)
    P = ets.predict_proba(dense)
    np.testing.assert_allclose(_densify(out), P, atol=1e-12)
    if k < 12:  # by hand: the three members' rest masses
        T = np.exp(dense / 1.7)
        T /= T.sum(axis=1, keepdims=True)
        listed = np.zeros_like(T, dtype=bool)
        np.put_along_axis(listed, top.indices, True, axis=1)
        rest = 0.5 * T[~listed].reshape(50, -1).sum(axis=1)
        rest += 0.3 * np.exp(dense)[~listed].reshape(50, -1).sum(axis=1)
        rest += 0.2 * (12 - k) / 12
        np.testing.assert_allclose(np.exp(out.rest_logmass), rest, rtol=1e-12)


# ------------------------------------------------------------------- TvA
INNERS = [None, IsotonicCalibrator(), HistogramBinningCalibrator(), PlattCalibrator()]


@pytest.mark.parametrize("k", [12, 4])
@pytest.mark.parametrize("redistribution", ["temperature", "proportional"])
@pytest.mark.parametrize("inner", INNERS, ids=lambda c: type(c).__name__)
def test_tva_topk_equals_dense(k, redistribution, inner):
    logits, y = _problem(n=300, noise=0.2)
    top = TopKScores.from_logits(logits, k=k)
    dense = _log_softmax(logits) if k == 12 else _dense_rest_model(top)
    ref = TopVersusAll(inner, redistribution=redistribution).fit(dense, y)
    got = TopVersusAll(inner, redistribution=redistribution).fit(top, y)
    if inner is None:
        T = got.calibrator_.temperature_
        assert T == pytest.approx(ref.calibrator_.temperature_, rel=1e-9)
    else:
        assert got.temperature_ == pytest.approx(ref.temperature_, rel=1e-9)
    out = got.predict_proba(top)
    np.testing.assert_array_equal(out.indices, top.indices)
    np.testing.assert_allclose(_densify(out), ref.predict_proba(dense), atol=1e-9)
    np.testing.assert_array_equal(got.predict(top), ref.predict(dense))


def test_tva_topk_leftover_by_hand():
    """Proportional redistribution: the leftover mass is rescaled like the
    other listed classes, ``r (1 - c~) / (1 - c)``; the top keeps its lead."""
    logits, y = _problem(n=300, noise=0.2)
    top = TopKScores.from_logits(logits, k=3)
    tva = TopVersusAll(PlattCalibrator(), redistribution="proportional").fit(top, y)
    out = tva.predict_proba(top)
    c = np.exp(top.values[:, 0])  # from_logits lists the top class first
    c_new = np.exp(out.values[:, 0])
    r = np.exp(top.rest_logmass)
    plain = c_new >= np.exp(top.values[:, 1]) * (1 - c_new) / (1 - c)
    assert plain.mean() > 0.5
    np.testing.assert_allclose(
        np.exp(out.rest_logmass[plain]), (r * (1 - c_new) / (1 - c))[plain], rtol=1e-9
    )
    others = np.exp(out.values[:, 1:]).max(axis=1)
    assert (c_new >= others).all()
    total = np.exp(out.values).sum(axis=1) + np.exp(out.rest_logmass)
    np.testing.assert_allclose(total, 1.0, atol=1e-12)


def test_tva_topk_refusals():
    logits, y = _problem(n=100)
    top = TopKScores.from_logits(logits, k=3)
    with pytest.raises(TypeError, match="VectorScaling.*to_dense"):
        TopVersusAll(VectorScaling()).fit(top, y)
    with pytest.raises(ValueError, match="input='logits'"):
        TopVersusAll(input="proba").fit(top, y)
    with pytest.raises(ValueError, match="classes=None"):
        TopVersusAll(classes=np.arange(12)).fit(top, y)
    # a "top-k" whose unlisted share beats its top listed class
    odd = TopKScores([[0]], np.log([[0.1]]), 3)
    with pytest.raises(ValueError, match="top listed class"):
        TopVersusAll().fit(odd, [0])


def test_temperature_fit_top_label_topk_checks_top():
    logits, y = _problem(n=100)
    top = TopKScores.from_logits(logits, k=3)
    right = (top.indices[:, 0] == y).astype(float)
    with pytest.raises(ValueError, match="top listed class index"):
        TemperatureScaling().fit_top_label(top, top.indices[:, 1], right)


def test_tva_topk_without_a_binary_problem_keeps_the_scores():
    logits, _ = _problem(n=100)
    top = TopKScores.from_logits(logits, k=3)
    y = top.indices[:, 0]  # every top label right
    with pytest.warns(ConvergenceWarning, match="no binary problem"):
        tva = TopVersusAll(IsotonicCalibrator()).fit(top, y)
    out = tva.predict_proba(top)
    np.testing.assert_allclose(out.values, top.values, atol=1e-15)
    np.testing.assert_allclose(out.rest_logmass, top.rest_logmass, atol=1e-15)


# ----------------------------------------------------------------- SMART
def _smart_reference_losses(P, y, loss):
    """The dense objective of probabilities ``P``, written here (NLL and
    multiclass Brier score, unweighted means)."""
    rows = np.arange(len(y))
    if loss == "nll":
        return -np.mean(np.log(P[rows, y]))
    onehot = np.zeros_like(P)
    onehot[rows, y] = 1.0
    return np.mean(((P - onehot) ** 2).sum(axis=1))


def _dense_gaps(dense):
    two = -np.sort(-dense, axis=1)[:, :2]
    return two[:, 0] - two[:, 1]


@pytest.mark.parametrize("k", [12, 4])
@pytest.mark.parametrize("loss", ["soft_ece", "nll", "brier"])
def test_smart_topk_equals_dense(k, loss):
    """The top-k path trains on the (k + 1)-column rest model in float32
    with another summation order than the dense path, so the two fits agree
    to float32 rounding (loss curves, predictions to 1e-4); the fitted
    network, evaluated densely on the rest model's matrix built here, gives
    the top-k predictions to 1e-9."""
    logits, y = _problem(n=200)
    top = TopKScores.from_logits(logits, k=k)
    dense = _log_softmax(logits) if k == 12 else _dense_rest_model(top)
    params = dict(loss=loss, max_iter=40, random_state=0, device="cpu")
    ref = SMARTCalibrator(**params).fit(dense, y)
    got = SMARTCalibrator(**params).fit(top, y)
    if k == 4:
        assert not (top.indices == y[:, None]).any(axis=1).all()  # unlisted labels
    assert got.gap_mean_ == pytest.approx(ref.gap_mean_, rel=1e-12)
    assert got.temperature_init_ == pytest.approx(ref.temperature_init_, rel=1e-9)
    assert got.n_iter_ == ref.n_iter_ == 40
    np.testing.assert_allclose(got.loss_curve_, ref.loss_curve_, rtol=1e-4, atol=1e-6)
    out = got.predict_proba(top)
    assert isinstance(out, TopKScores)
    np.testing.assert_array_equal(out.indices, top.indices)
    P = _densify(out)
    np.testing.assert_allclose(P, ref.predict_proba(dense), atol=1e-4)
    # the same fitted network on the dense rest model, by hand
    T = got.predict_temperature(top)
    g = np.clip(_dense_gaps(dense), *got.gap_range_)
    h = (g[:, None] - got.gap_mean_) / (got.gap_std_ + 1e-8)
    for i, (W, b) in enumerate(zip(got.coefs_, got.intercepts_)):
        h = h @ W + b
        h = np.maximum(h, 0.0) if i < len(got.coefs_) - 1 else h
    np.testing.assert_allclose(T, np.logaddexp(0.0, h[:, 0]) + got.t_min, rtol=1e-12)
    by_hand = np.exp(dense / T[:, None])
    by_hand /= by_hand.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(P, by_hand, atol=1e-9)
    np.testing.assert_array_equal(got.predict(top), np.argmax(by_hand, axis=1))
    if loss != "soft_ece":  # the kept parameters' training loss (float32)
        kept = got.loss_curve_[got.best_iter_]
        assert kept == pytest.approx(
            _smart_reference_losses(by_hand, y, loss), rel=1e-5
        )


def test_smart_topk_rest_above_listed():
    """Rows listing classes that are not their top (so the unlisted share
    ``u`` can be the second or the largest log-probability), weighted rows
    and a held-out split: against the dense fit of the rest model."""
    rng = np.random.default_rng(3)
    n, V, k = 240, 6, 3
    logits = 2.0 * rng.normal(size=(n, V))
    p = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    y = np.array([rng.choice(V, p=row) for row in p])
    indices = np.array([rng.permutation(V)[:k] for _ in range(n)])
    values = np.log(np.take_along_axis(p, indices, axis=1))
    top = TopKScores(indices, values, V, np.log1p(-np.exp(values).sum(axis=1)))
    dense = _dense_rest_model(top)
    u = dense[np.arange(n), [np.setdiff1d(np.arange(V), r)[0] for r in indices]]
    assert (u > np.sort(values, axis=1)[:, -2]).mean() > 0.2
    assert (u > values.max(axis=1)).any()
    w = rng.uniform(0.5, 2.0, n)
    params = dict(max_iter=30, validation_fraction=0.25, random_state=1, device="cpu")
    ref = SMARTCalibrator(**params).fit(dense, y, sample_weight=w)
    got = SMARTCalibrator(**params).fit(top, y, sample_weight=w)
    assert got.gap_range_ == pytest.approx(ref.gap_range_, rel=1e-12)
    np.testing.assert_allclose(
        got.validation_loss_curve_, ref.validation_loss_curve_, rtol=1e-4, atol=1e-6
    )
    np.testing.assert_allclose(
        got.predict_temperature(top), ref.predict_temperature(dense), rtol=1e-4
    )
    np.testing.assert_allclose(
        _densify(got.predict_proba(top)), ref.predict_proba(dense), atol=1e-4
    )


def test_smart_topk_refusals():
    logits, y = _problem(n=50)
    with pytest.raises(ValueError, match="k >= 2.*TemperatureScaling"):
        SMARTCalibrator(device="cpu").fit(TopKScores.from_logits(logits, k=1), y)
    top = TopKScores.from_logits(logits, k=3)
    with pytest.raises(ValueError, match="classes=None"):
        SMARTCalibrator(classes=np.arange(12)).fit(top, y)
    smart = SMARTCalibrator(max_iter=2, device="cpu").fit(top, y)
    with pytest.raises(ValueError, match="n_classes=13"):
        smart.predict_proba(TopKScores.from_logits(np.zeros((2, 13)), k=3))
    values = np.log([[0.5, 0.1], [0.5, 0.3]])
    values[0, 1] = -np.inf
    padded = TopKScores([[0, -1], [1, 2]], values, 12)
    with pytest.raises(ValueError, match="row 0 .* lists 1 class"):
        smart.predict_proba(padded)


@pytest.mark.filterwarnings("ignore::UserWarning")  # classes without a sample
def test_smart_topk_many_columns_interpolated():
    """From 256 columns on the CPU both paths interpolate ``log S`` between
    exactly summed nodes, the top-k path with the unlisted share's
    multiplicity."""
    logits, y = _problem(n=120, n_classes=400)
    top = TopKScores.from_logits(logits, k=300)
    dense = _dense_rest_model(top)
    params = dict(loss="nll", max_iter=30, random_state=0, device="cpu")
    ref = SMARTCalibrator(**params).fit(dense, y)
    got = SMARTCalibrator(**params).fit(top, y)
    np.testing.assert_allclose(got.loss_curve_, ref.loss_curve_, rtol=1e-4, atol=1e-5)
    P = _densify(got.predict_proba(top))
    np.testing.assert_allclose(P, ref.predict_proba(dense), atol=1e-4)
