"""TemperatureScaling and the NLL / Brier / top-label metrics on TopKScores.

References are independent: dense skcal on a dense matrix built here from
the rest model (not by ``TopKScores.to_dense``), scikit-learn's log loss,
and hand-computed numbers.
"""

import numpy as np
import pytest
from scipy.optimize import minimize_scalar
from sklearn.metrics import log_loss

from skcal import TemperatureScaling
from skcal.calibrators import HistogramBinningCalibrator, MatrixScaling, VectorScaling
from skcal.llm import TopKScores
from skcal.metrics import (
    brier_score,
    classwise_calibration_error,
    expected_calibration_error,
    max_calibration_error,
    metric_state,
    negative_log_likelihood,
)


def _problem(n=500, n_classes=30, seed=0):
    rng = np.random.default_rng(seed)
    logits = 3.0 * rng.normal(size=(n, n_classes))
    # labels from the softmax at temperature 2: the logits are over-confident
    p = np.exp(logits / 2 - (logits / 2).max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    y = np.array([rng.choice(n_classes, p=row) for row in p])
    return logits, y


def _dense_rest_model(indices, values, rest, n_classes):
    """The rest model's dense log-probabilities, built independently."""
    n = len(indices)
    dense = np.empty((n, n_classes))
    for i in range(n):
        listed = [(j, v) for j, v in zip(indices[i], values[i]) if j >= 0]
        share = rest[i] - np.log(n_classes - len(listed))
        dense[i, :] = share
        for j, v in listed:
            dense[i, j] = v
    return dense


@pytest.fixture(autouse=True)
def _no_dense(monkeypatch):
    """Nothing here may densify a TopKScores implicitly."""

    def refuse(self, max_bytes=0):
        raise AssertionError("to_dense called")

    monkeypatch.setattr(TopKScores, "to_dense", refuse)


# ------------------------------------------------------------ k = n_classes
def test_full_topk_equals_dense_temperature_scaling():
    logits, y = _problem()
    top = TopKScores.from_logits(logits, k=logits.shape[1])
    dense = TemperatureScaling(device="cpu").fit(logits, y)
    topk = TemperatureScaling().fit(top, y)
    assert topk.temperature_ == pytest.approx(dense.temperature_, rel=1e-9)
    assert 1.5 < topk.temperature_ < 2.5
    out = topk.predict_proba(top)
    assert isinstance(out, TopKScores)
    proba = np.zeros_like(logits)
    np.put_along_axis(proba, out.indices, np.exp(out.values), axis=1)
    np.testing.assert_allclose(proba, dense.predict_proba(logits), atol=1e-9)
    np.testing.assert_allclose(
        np.take_along_axis(dense.predict_log_proba(logits), out.indices, axis=1),
        topk.predict_log_proba(top).values,
        atol=1e-9,
    )
    np.testing.assert_array_equal(topk.predict(top), dense.predict(logits))
    assert topk.classes_.tolist() == list(range(30))
    assert topk.n_features_in_ == 30


@pytest.mark.parametrize("strategy", ["uniform", "quantile"])
def test_full_topk_metrics_equal_dense(strategy):
    logits, y = _problem(seed=1)
    top = TopKScores.from_logits(logits, k=logits.shape[1])
    p = np.exp(logits - logits.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    w = np.random.default_rng(2).uniform(0.5, 2.0, size=len(y))
    assert negative_log_likelihood(y, top, sample_weight=w) == pytest.approx(
        log_loss(y, p, sample_weight=w, labels=range(30)), abs=1e-9
    )
    assert brier_score(y, top, sample_weight=w) == pytest.approx(
        brier_score(y, p, sample_weight=w), abs=1e-9
    )
    for metric in (expected_calibration_error, max_calibration_error):
        assert metric(y, top, strategy=strategy) == pytest.approx(
            metric(y, p, strategy=strategy), abs=1e-9
        )


# ------------------------------------------------------------ hand-computed
def _hand_case():
    # 5 classes; rows list 2 classes, leaving 0.2 and 0.4 to the 3 others
    top = TopKScores(
        [[0, 1], [2, 4]], np.log([[0.5, 0.3], [0.4, 0.2]]), 5, np.log([0.2, 0.4])
    )
    return top, np.array([3, 2])  # row 0's label is unlisted


def test_hand_computed_metrics_with_a_label_in_the_rest():
    top, y = _hand_case()
    # row 0: label 3 has 0.2 / 3; row 1: label 2 is listed at 0.4
    expected_nll = (-np.log(0.2 / 3) - np.log(0.4)) / 2
    assert negative_log_likelihood(y, top) == pytest.approx(expected_nll, rel=1e-12)
    # row 0: 0.25 + 0.09 + 3 (0.2/3)^2 - 2 (0.2/3) + 1
    # row 1: 0.16 + 0.04 + 3 (0.4/3)^2 - 2 0.4 + 1
    b0 = 0.25 + 0.09 + 3 * (0.2 / 3) ** 2 - 2 * (0.2 / 3) + 1
    b1 = 0.16 + 0.04 + 3 * (0.4 / 3) ** 2 - 0.8 + 1
    assert brier_score(y, top) == pytest.approx((b0 + b1) / 2, rel=1e-12)
    # confidences 0.5 (wrong: the label is unlisted) and 0.4 (right), one bin
    # each of 10: |0 - 0.5| and |1 - 0.4|
    ece = expected_calibration_error(y, top, n_bins=10)
    assert ece == pytest.approx((0.5 + 0.6) / 2, rel=1e-12)


def test_hand_computed_temperature_and_predictions():
    top, y = _hand_case()
    rows = [[0.5, 0.3] + [0.2 / 3] * 3, [0.4, 0.2] + [0.4 / 3] * 3]
    label_col = [2, 0]  # in each row's list above: label 3 is unlisted, 2 first

    def nll(t):
        out = 0.0
        for row, c in zip(rows, label_col):
            q = np.array(row) ** (1 / t)
            out -= np.log(q[c] / q.sum())
        return out / 2

    ref = minimize_scalar(
        nll, bounds=(0.05, 50), method="bounded", options={"xatol": 1e-10}
    )
    ts = TemperatureScaling().fit(top, y)
    assert ts.temperature_ == pytest.approx(ref.x, rel=1e-6)
    out = ts.predict_proba(top)
    q = np.array(rows[0]) ** (1 / ts.temperature_)
    q /= q.sum()
    np.testing.assert_allclose(np.exp(out.values[0]), q[:2], rtol=1e-12)
    assert np.exp(out.rest_logmass[0]) == pytest.approx(q[2:].sum(), rel=1e-12)
    assert out.label_logproba(y)[0] == pytest.approx(np.log(q[2]), rel=1e-12)
    np.testing.assert_array_equal(ts.predict(top), [0, 2])


# --------------------------------------------------- k < n_classes vs dense
@pytest.mark.parametrize("k", [1, 5])
def test_partial_topk_equals_the_dense_rest_model(k):
    logits, y = _problem(n=400, n_classes=40, seed=3)
    top = TopKScores.from_logits(logits, k=k)
    assert (~(top.indices == y[:, None]).any(axis=1)).sum() > 50  # labels in rest
    dense = _dense_rest_model(top.indices, top.values, top.rest_logmass, 40)
    ts_dense = TemperatureScaling(device="cpu").fit(dense, y)
    ts = TemperatureScaling().fit(top, y)
    assert ts.temperature_ == pytest.approx(ts_dense.temperature_, rel=1e-9)
    out = ts.predict_proba(top)
    calibrated = _dense_rest_model(out.indices, out.values, out.rest_logmass, 40)
    np.testing.assert_allclose(
        np.exp(calibrated), ts_dense.predict_proba(dense), atol=1e-12, rtol=1e-9
    )
    p = np.exp(dense)
    assert negative_log_likelihood(y, top) == pytest.approx(
        log_loss(y, p, labels=range(40)), rel=1e-9
    )
    assert brier_score(y, top) == pytest.approx(brier_score(y, p), rel=1e-9)
    for strategy in ("uniform", "quantile"):
        assert expected_calibration_error(y, top, strategy=strategy) == pytest.approx(
            expected_calibration_error(y, p, strategy=strategy), abs=1e-9
        )


@pytest.mark.filterwarnings("ignore::skcal.exceptions.MissingClassWarning")
def test_padded_rows_with_implied_rest_equal_the_dense_rest_model():
    # an API's top_logprobs: row 1 lists 2 of 3 entries, no rest_logmass
    indices = np.array([[3, 0, 7], [5, 2, -1], [1, 9, 4]])
    values = np.log([[0.6, 0.2, 0.1], [0.5, 0.45, 1.0], [0.3, 0.3, 0.3]])
    top = TopKScores(indices, values, 10)
    y = np.array([3, 8, 6])
    rest = top.leftover_logmass()
    dense = _dense_rest_model(indices, np.where(indices >= 0, values, 0.0), rest, 10)
    p = np.exp(dense)
    np.testing.assert_allclose(p.sum(axis=1), 1.0)
    assert negative_log_likelihood(y, top) == pytest.approx(
        log_loss(y, p, labels=range(10)), rel=1e-9
    )
    assert brier_score(y, top) == pytest.approx(brier_score(y, p), rel=1e-9)
    assert expected_calibration_error(y, top) == pytest.approx(
        expected_calibration_error(y, p), abs=1e-12
    )
    ts = TemperatureScaling().fit(top, y)
    ts_dense = TemperatureScaling(device="cpu").fit(dense, y)
    assert ts.temperature_ == pytest.approx(ts_dense.temperature_, rel=1e-9)


def test_an_unlisted_share_above_the_listed_top_is_the_confidence():
    # 3 classes, 1 listed at 0.2: the 2 others have 0.4 each (dense argmax: 0)
    top = TopKScores([[2], [0]], np.log([[0.2], [0.2]]), 3)
    y = np.array([0, 2])
    p = np.array([[0.4, 0.4, 0.2], [0.2, 0.4, 0.4]])
    assert expected_calibration_error(y, top) == pytest.approx(
        expected_calibration_error(y, p), abs=1e-12
    )


# ------------------------------------------------------------------ errors
@pytest.mark.parametrize(
    "cls", [VectorScaling, MatrixScaling, HistogramBinningCalibrator]
)
def test_other_calibrators_refuse_topk_with_the_way_out(cls):
    logits, y = _problem(n=200, n_classes=5)
    top = TopKScores.from_logits(logits, k=2)
    with pytest.raises(
        TypeError, match=r"TemperatureScaling does.*TopVersusAll.*to_dense\(\)"
    ):
        cls().fit(top, y)
    fitted = cls().fit(logits, y)
    with pytest.raises(TypeError, match=cls.__name__):
        fitted.predict_proba(top)
    with pytest.raises(TypeError, match="TopKScores"):
        fitted.predict(top)


def test_temperature_scaling_topk_errors():
    top, y = _hand_case()
    with pytest.raises(ValueError, match="classes=None"):
        TemperatureScaling(classes=np.arange(5)).fit(top, y)
    with pytest.raises(ValueError, match="outside"):
        TemperatureScaling().fit(top, [3, 5])
    with pytest.raises(ValueError, match="integer class indices"):
        TemperatureScaling().fit(top, ["a", "b"])
    full = TopKScores([[0, 1], [1, 0]], np.log([[0.6, 0.4], [0.5, 0.5]]), 3)
    with pytest.raises(ValueError, match="label 2 has probability 0"):
        TemperatureScaling().fit(full, [0, 2])
    ts = TemperatureScaling().fit(top, y)
    other = TopKScores([[0]], [[-0.1]], 6)
    with pytest.raises(ValueError, match="n_classes=6"):
        ts.predict_proba(other)
    with pytest.raises(ValueError, match="labels must be None"):
        negative_log_likelihood(y, top, labels=np.arange(5))


def test_metrics_without_topk_support_say_so():
    top, y = _hand_case()
    with pytest.raises(TypeError, match="does not take TopKScores"):
        metric_state(classwise_calibration_error).update(y, top)


# ------------------------------------------------------------ metric states
@pytest.mark.parametrize(
    "metric, params",
    [
        (negative_log_likelihood, {}),
        (brier_score, {}),
        (expected_calibration_error, {"n_bins": 10}),
        (expected_calibration_error, {"strategy": "quantile"}),
        (max_calibration_error, {}),
    ],
)
def test_states_over_chunks_equal_one_pass(metric, params):
    logits, y = _problem(n=600, n_classes=50, seed=4)
    top = TopKScores.from_logits(logits, k=4)
    w = np.random.default_rng(5).uniform(0, 2, size=len(y))
    state = metric_state(metric, **params)
    bounds = [0, 7, 250, 251, 600]
    passes = 2 if params.get("strategy") == "quantile" else 1
    for p in range(passes):
        if p:
            state.next_pass()
        for a, b in zip(bounds[:-1], bounds[1:]):
            state.update(y[a:b], top[a:b], sample_weight=w[a:b])
    assert state.compute() == pytest.approx(
        metric(y, top, sample_weight=w, **params), rel=1e-12
    )
