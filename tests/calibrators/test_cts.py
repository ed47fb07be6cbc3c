"""Class-based temperature scaling (CTS): the greedy search against a slow
reference, its ECE kernel against the metric, and the method end to end.

The fast search (``skcal._torch.kernels._cts``) tabulates bin sums instead of
recomputing the ECE of every candidate; these tests run the greedy search of
Frenkel & Goldberger, "Network calibration by class-based temperature
scaling" (EUSIPCO 2021), with the start, grid and visiting order that the
``ClassTemperatureScaling`` docstring documents, one full softmax and ECE per
candidate, and require the same temperatures.
"""

import numpy as np
import pytest
import torch
from scipy.special import softmax

from skcal import ClassTemperatureScaling, TemperatureScaling
from skcal._torch.kernels import binned_ece, class_temperature_search
from skcal.metrics import expected_calibration_error
from skcal.utils._testing import make_miscalibrated_logits

GRID = np.round(np.arange(0.5, 5.0 + 1e-9, 0.1), 10)


def _slow_search(logits, y, w, *, initial, grid, n_iter, n_bins, predicted, order):
    """Frenkel & Goldberger's greedy search, every candidate from scratch."""
    w = w / w.sum()
    temps = np.full(logits.shape[1], float(initial))
    argmax = logits.argmax(axis=1)
    edges = np.arange(1, n_bins) / n_bins

    def ece_and_accuracy(t):
        scale = t[argmax][:, None] if predicted else t[None, :]
        proba = softmax(logits / scale, axis=1)
        conf, correct = proba.max(axis=1), proba.argmax(axis=1) == y
        bins = np.searchsorted(edges, conf, side="right")  # [l, u), last closed
        sums = np.bincount(bins, weights=w * (conf - correct), minlength=n_bins)
        return np.abs(sums).sum(), w @ correct

    ece, acc = ece_and_accuracy(temps)
    for _ in range(n_iter):
        for k in order:
            trials = []
            for t in grid:
                trial = temps.copy()
                trial[k] = t
                trials.append(ece_and_accuracy(trial))
            scores = [e if a >= acc - 1e-12 else np.inf for e, a in trials]
            best = int(np.argmin(scores))  # the first of equal candidates
            if scores[best] < ece:
                temps[k] = grid[best]
                ece, acc = trials[best]
    return temps


def _case(seed):
    rng = np.random.default_rng(seed)
    n, C = int(rng.integers(40, 300)), int(rng.integers(2, 8))
    logits, y = make_miscalibrated_logits(
        n, C, temperature=float(rng.uniform(0.3, 3.0)), random_state=seed
    )
    weights = rng.uniform(0.1, 2.0, n) if seed % 2 else np.ones(n)
    params = dict(
        initial=float(rng.uniform(0.5, 3.0)),
        grid=GRID if seed % 3 else np.array([0.5, 1.0, 2.0, 3.0]),
        n_iter=int(rng.integers(1, 4)),
        n_bins=int(rng.integers(3, 16)),
        order=rng.permutation(C),
    )
    return logits, y, weights, params


@pytest.mark.parametrize("predicted", [True, False])
@pytest.mark.parametrize("seed", range(12))
def test_search_matches_the_slow_reference(seed, predicted):
    logits, y, weights, params = _case(seed)
    expected = _slow_search(logits, y, weights, predicted=predicted, **params)
    got = class_temperature_search(
        logits, y, weights, predicted=predicted, device=torch.device("cpu"), **params
    )
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("predicted", [True, False])
def test_blocks_of_rows_change_nothing(monkeypatch, predicted):
    # blocks of 2 rows (G = 46 candidates) in both searches
    monkeypatch.setattr("skcal._torch.kernels._cts._BLOCK", 100)
    for seed in (3, 4):
        logits, y, weights, params = _case(seed)
        expected = _slow_search(logits, y, weights, predicted=predicted, **params)
        got = class_temperature_search(
            logits,
            y,
            weights,
            predicted=predicted,
            device=torch.device("cpu"),
            **params,
        )
        np.testing.assert_array_equal(got, expected)


def test_the_accuracy_constraint_rejects_a_better_ece():
    # column mode: in some of these cases the candidate of lowest ECE changes
    # predictions and lowers the accuracy (a search without the rule ends
    # elsewhere); the search refuses it, as the reference does
    differs = 0
    for seed in range(12):
        logits, y, weights, params = _case(seed)
        expected = _slow_search(logits, y, weights, predicted=False, **params)
        got = class_temperature_search(
            logits, y, weights, predicted=False, device=torch.device("cpu"), **params
        )
        np.testing.assert_array_equal(got, expected)
        acc0 = np.average(logits.argmax(axis=1) == y, weights=weights)
        acc = np.average((logits / got).argmax(axis=1) == y, weights=weights)
        assert acc >= acc0 - 1e-12
        differs += not np.array_equal(
            expected, _slow_unconstrained(logits, y, weights, **params)
        )
    assert differs > 0


def _slow_unconstrained(logits, y, w, *, initial, grid, n_iter, n_bins, order):
    """Column-mode search that ignores the accuracy (to show the rule acts)."""
    w = w / w.sum()
    temps = np.full(logits.shape[1], float(initial))
    edges = np.arange(1, n_bins) / n_bins

    def ece(t):
        proba = softmax(logits / t, axis=1)
        conf, correct = proba.max(axis=1), proba.argmax(axis=1) == y
        bins = np.searchsorted(edges, conf, side="right")
        sums = np.bincount(bins, weights=w * (conf - correct), minlength=n_bins)
        return np.abs(sums).sum()

    current = ece(temps)
    for _ in range(n_iter):
        for k in order:
            scores = []
            for t in grid:
                trial = temps.copy()
                trial[k] = t
                scores.append(ece(trial))
            best = int(np.argmin(scores))
            if scores[best] < current:
                temps[k], current = grid[best], scores[best]
    return temps


@pytest.mark.parametrize("predicted", [True, False])
def test_tiny_case_by_hand(predicted):
    # Two classes, logits (ln 3, 0) or (0, ln 3): the top-label confidence at
    # temperature T is c(T) = 1 / (1 + 3^(-1/T)), c(1) = 3/4,
    # c(2) = sqrt(3) / (1 + sqrt(3)) = 0.634. Rows: A (ln 3, 0) label 0,
    # B (ln 3, 0) label 1, C (0, ln 3) label 1; weights 1/3, 2 bins, every
    # confidence in the upper bin, so ECE = |2 c(T0) - 1 + c(T1) - 1| / 3.
    # Start T = (1, 1): ECE = |0.5 - 0.25| / 3 = 0.0833.
    # Class 0: T0 = 2 gives |0.268 - 0.25| / 3 = 0.0060 < 0.0833: taken.
    # Class 1: T1 = 1 keeps 0.0060 (not lower), T1 = 2 gives
    # |0.268 - 0.366| / 3 = 0.0327: T1 stays 1. Accuracy never changes.
    l3 = np.log(3.0)
    logits = np.array([[l3, 0.0], [l3, 0.0], [0.0, l3]])
    y = np.array([0, 1, 1])
    got = class_temperature_search(
        logits,
        y,
        np.ones(3),
        initial=1.0,
        grid=np.array([1.0, 2.0]),
        n_iter=2,
        n_bins=2,
        predicted=predicted,
        device=torch.device("cpu"),
    )
    np.testing.assert_array_equal(got, [2.0, 1.0])


@pytest.mark.parametrize("mode", ["predicted", "column"])
def test_estimator_runs_the_reference_search(mode):
    logits, y = make_miscalibrated_logits(400, 5, temperature=2.0, random_state=7)
    classes = np.array([40, 10, 30, 20, 0])  # visited in label order
    labels = classes[y]
    cts = ClassTemperatureScaling(mode=mode, classes=classes, device="cpu")
    cts.fit(logits, labels)
    expected = _slow_search(
        logits,
        y,
        np.ones(len(y)),
        initial=cts.temperature_init_,
        grid=GRID,
        n_iter=5,
        n_bins=15,
        predicted=mode == "predicted",
        order=np.argsort(classes),
    )
    np.testing.assert_array_equal(cts.temperatures_, expected)


@pytest.mark.parametrize("mode", ["column", "predicted"])
@pytest.mark.parametrize("factor", [1e-3, 100.0])
def test_default_grid_follows_logits_far_from_the_usual_scale(mode, factor):
    """Was: the paper's grid 0.5..5.0 clamps the start; on real letter logits
    times 100 CTS gave a test NLL of 1.24 (temperature scaling: 0.16), and
    1e-2 times, 2.6."""
    from skcal import TemperatureScaling
    from skcal.metrics import negative_log_likelihood

    X, y = make_miscalibrated_logits(2000, 5, temperature=2.0, random_state=0)
    Xt, yt = make_miscalibrated_logits(2000, 5, temperature=2.0, random_state=1)
    ts = TemperatureScaling(device="cpu").fit(X * factor, y)
    cts = ClassTemperatureScaling(mode=mode, device="cpu").fit(X * factor, y)
    assert cts.temperature_init_ == pytest.approx(ts.temperature_, rel=1e-9)
    paper = np.round(np.arange(0.5, 5.0 + 1e-9, 0.1), 10)
    edge = 5.0 if factor > 1 else 0.5
    np.testing.assert_allclose(cts.grid_, paper * ts.temperature_ / edge, rtol=1e-12)
    ts_nll = negative_log_likelihood(yt, ts.predict_proba(Xt * factor))
    cts_nll = negative_log_likelihood(yt, cts.predict_proba(Xt * factor))
    assert cts_nll < 1.1 * ts_nll
    # logits of the usual scale keep the paper's grid; a given grid is literal
    usual = ClassTemperatureScaling(mode=mode, device="cpu").fit(X, y)
    np.testing.assert_array_equal(usual.grid_, paper)
    given = ClassTemperatureScaling(mode=mode, grid=[1.0, 2.0], device="cpu")
    np.testing.assert_array_equal(given.fit(X * factor, y).grid_, [1.0, 2.0])


# ------------------------------------------------ the method, end to end
SCALES = np.array([1.0, 2.0, 0.5, 1.0, 1.5])


def column_scaled(n, seed):
    X, y = make_miscalibrated_logits(n, 5, temperature=2.0, random_state=seed)
    return X * SCALES, y


def test_binned_ece_kernel_matches_the_metric():
    rng = np.random.default_rng(0)
    conf = rng.uniform(size=(3, 500))
    conf[:, :20] = np.round(conf[:, :20] * 15) / 15  # on bin edges
    correct = (rng.uniform(size=(3, 500)) < conf).astype(float)
    w = rng.uniform(size=500)
    got = binned_ece(
        torch.tensor(conf), torch.tensor(correct), torch.tensor(w / w.sum()), 15
    )
    for g in range(3):
        # a two-column "probability" whose top-label confidence is conf
        proba = np.column_stack([conf[g], 1 - conf[g]])
        proba = np.where(conf[g][:, None] >= 0.5, proba, proba[:, ::-1])
        y = np.where(correct[g] == 1, proba.argmax(1), 1 - proba.argmax(1))
        keep = conf[g] >= 0.5
        expected = expected_calibration_error(
            y[keep], proba[keep], sample_weight=w[keep]
        )
        sub = binned_ece(
            torch.tensor(conf[g][keep])[None],
            torch.tensor(correct[g][keep])[None],
            torch.tensor(w[keep] / w[keep].sum())[None],
            15,
        )
        assert float(sub[0]) == pytest.approx(expected, abs=1e-12)
    assert got.shape == (3,)


def test_cts_recovers_per_class_temperatures(device):
    X, y = column_scaled(8000, 0)
    cts = ClassTemperatureScaling(device=device).fit(X, y)
    # columns were multiplied by SCALES on top of an over-confidence of 2
    np.testing.assert_allclose(cts.temperatures_, 2 * SCALES, rtol=0.2)


def test_cts_column_mode_improves_ece_without_losing_accuracy(device):
    X, y = column_scaled(3000, 1)
    cts = ClassTemperatureScaling(device=device).fit(X, y)
    start = TemperatureScaling(device=device).fit(X, y)
    start_proba = np.exp(X / cts.temperature_init_)
    start_proba /= start_proba.sum(1, keepdims=True)
    proba = cts.predict_proba(X)
    assert (proba.argmax(1) == y).mean() >= (X.argmax(1) == y).mean()
    assert expected_calibration_error(y, proba) <= expected_calibration_error(
        y, start_proba
    )
    assert cts.temperature_init_ == pytest.approx(start.temperature_, rel=1e-9)


def test_cts_predicted_mode_keeps_predictions():
    X, y = column_scaled(3000, 2)
    cts = ClassTemperatureScaling(mode="predicted", device="cpu").fit(X, y)
    rng = np.random.default_rng(0)
    Z = rng.normal(size=(2000, 5)) * 5
    Z[:100, 1] = Z[:100, 0]  # ties
    np.testing.assert_array_equal(cts.predict(Z), Z.argmax(1))
    assert cts.temperatures_.min() >= 0.5 and cts.temperatures_.max() <= 5.0


def test_cts_bad_grid():
    X, y = column_scaled(200, 3)
    with pytest.raises(ValueError, match="positive finite"):
        ClassTemperatureScaling(grid=[1.0, -1.0], device="cpu").fit(X, y)
