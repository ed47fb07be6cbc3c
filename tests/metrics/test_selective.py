"""Selective-prediction metrics against hand-computed cases, the papers'
formulas written here independently, and torch-uncertainty 0.13."""

import importlib.util
import itertools
from pathlib import Path

import numpy as np
import pytest
from _real_data import real_scores
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score
from sklearn.model_selection import GridSearchCV

from skcal.metrics import (
    augrc,
    aurc,
    coverage_at_risk,
    eaurc,
    get_scorer,
    metric_state,
    risk_coverage_curve,
    selective_risk,
)

#: four rows: predictions 0, 0, 1, 1; errors on rows 1 and 2
Y4 = [0, 1, 0, 1]
P4 = [[0.9, 0.1], [0.8, 0.2], [0.3, 0.7], [0.4, 0.6]]

#: numpy 2 renamed trapz (the minimum-versions run has numpy 1.24)
_trapezoid = getattr(np, "trapezoid", None) or getattr(np, "trapz")  # noqa: B009


def _reference(errors, conf):
    """Geifman's AURC / Traub's AUGRC in torch-uncertainty's normalisation,
    over one order of the rows (a stable sort by decreasing confidence)."""
    errors = np.asarray(errors, float)[np.argsort(-np.asarray(conf), kind="stable")]
    n = len(errors)
    k = np.arange(1, n + 1)
    risk, cov = np.cumsum(errors) / k, k / n
    width = 1 - 1 / n
    a = _trapezoid(risk, cov) / width
    g = _trapezoid(risk * cov, cov) / width
    best = np.sort(errors)
    oracle = _trapezoid(np.cumsum(best) / k, cov) / width
    return {"aurc": a, "eaurc": a - oracle, "augrc": g, "risk": risk}


def test_hand_computed_four_rows():
    # risks 0, 1/2, 2/3, 1/2 at coverages 1/4 .. 1: trapezoid 17/12 * 1/4,
    # over 3/4; oracle risks 0, 0, 1/3, 1/2: 7/36; AUGRC L/W 0, 1/4, 1/2, 1/2
    assert aurc(Y4, P4) == pytest.approx(17 / 36, abs=1e-15)
    assert eaurc(Y4, P4) == pytest.approx(17 / 36 - 7 / 36, abs=1e-15)
    assert augrc(Y4, P4) == pytest.approx(1 / 3, abs=1e-15)
    assert selective_risk(Y4, P4, coverage=0.5) == 0.5
    assert selective_risk(Y4, P4, coverage=0.51) == pytest.approx(2 / 3)
    assert coverage_at_risk(Y4, P4, risk=0.5) == 1.0
    assert coverage_at_risk(Y4, P4, risk=0.49) == 0.25
    cov, risk, thr = risk_coverage_curve(Y4, P4)
    np.testing.assert_allclose(cov, [0.25, 0.5, 0.75, 1.0])
    np.testing.assert_allclose(risk, [0, 1 / 2, 2 / 3, 1 / 2])
    np.testing.assert_allclose(thr, [0.9, 0.8, 0.7, 0.6])


@pytest.mark.parametrize("name", ["digits", "wine", "breast_cancer"])
def test_real_data_equals_the_formula(name):
    y, proba = real_scores(name)
    errors = proba.argmax(1) != y
    ref = _reference(errors, proba.max(1))
    assert aurc(y, proba) == pytest.approx(ref["aurc"], abs=1e-12)
    assert eaurc(y, proba) == pytest.approx(ref["eaurc"], abs=1e-12)
    assert augrc(y, proba) == pytest.approx(ref["augrc"], abs=1e-12)
    for c in (0.3, 0.8, 1.0):
        expected = ref["risk"][int(np.ceil(c * len(y))) - 1]
        assert selective_risk(y, proba, coverage=c) == expected


def test_ties_are_the_mean_over_the_orders_of_tied_rows():
    # two tied groups with mixed errors: every order of the tied rows
    conf = np.array([0.9, 0.7, 0.7, 0.7, 0.5, 0.5, 0.4])
    errors = np.array([0, 1, 0, 0, 1, 0, 1])
    y = np.zeros(7, int)
    proba = np.where(errors[:, None] == 1, [0.2, 0.8], [0.8, 0.2])
    values = {key: [] for key in ("aurc", "eaurc", "augrc")}
    for first in itertools.permutations([1, 2, 3]):
        for second in itertools.permutations([4, 5]):
            order = [0, *first, *second, 6]
            ref = _reference(errors[order], np.arange(7, 0, -1))
            for key in values:
                values[key].append(ref[key])
    kw = {"confidence": conf}
    assert aurc(y, proba, **kw) == pytest.approx(np.mean(values["aurc"]), abs=1e-14)
    assert eaurc(y, proba, **kw) == pytest.approx(np.mean(values["eaurc"]), abs=1e-14)
    assert augrc(y, proba, **kw) == pytest.approx(np.mean(values["augrc"]), abs=1e-14)
    # and the row order does not matter
    perm = np.random.default_rng(0).permutation(7)
    assert aurc(y[perm], proba[perm], confidence=conf[perm]) == pytest.approx(
        aurc(y, proba, **kw), abs=1e-15
    )


def test_the_oracle_and_the_large_sample_limit():
    rng = np.random.default_rng(0)
    n, rate = 20000, 0.2
    errors = rng.random(n) < rate
    y = np.zeros(n, int)
    proba = np.where(errors[:, None], [0.3, 0.7], [0.7, 0.3])
    oracle = 1.0 - errors
    assert eaurc(y, proba, confidence=oracle) == 0.0
    # Geifman et al. (2019): the oracle AURC tends to r + (1 - r) log(1 - r)
    r = errors.mean()
    assert aurc(y, proba, confidence=oracle) == pytest.approx(
        r + (1 - r) * np.log(1 - r), rel=1e-3
    )
    # a random confidence: AURC near the error rate, AUGRC near r / 2
    noise = rng.random(n)
    assert aurc(y, proba, confidence=noise) == pytest.approx(r, abs=0.02)
    assert augrc(y, proba, confidence=noise) == pytest.approx(r / 2, abs=0.01)


def test_augrc_and_the_auroc_of_traub_et_al():
    """Traub et al. (2024), eq. 6: AUGRC = (1 - AUROC) acc (1 - acc) +
    (1 - acc)^2 / 2, with the AUROC of the confidence for correctness."""
    y, proba = real_scores("digits")
    y, proba = y[:400], 0.6 * proba[:400] + 0.4 / 10  # more errors
    correct = proba.argmax(1) == y
    acc = correct.mean()
    auroc = roc_auc_score(correct, proba.max(1))
    expected = (1 - auroc) * acc * (1 - acc) + (1 - acc) ** 2 / 2
    assert augrc(y, proba) == pytest.approx(expected, rel=0.02)


def test_sample_weight():
    y, proba = real_scores("wine")
    w = np.random.default_rng(0).uniform(0.5, 2.0, len(y))
    order = np.argsort(-proba.max(1), kind="stable")
    loss = (proba.argmax(1) != y).astype(float)[order]
    cw, cl = np.cumsum(w[order]), np.cumsum(w[order] * loss)
    cov, risk = cw / cw[-1], cl / cw
    width = 1 - cov[0]
    assert aurc(y, proba, sample_weight=w) == pytest.approx(
        _trapezoid(risk, cov) / width, abs=1e-12
    )
    assert augrc(y, proba, sample_weight=w) == pytest.approx(
        _trapezoid(cl / cw[-1], cov) / width, abs=1e-12
    )
    # a scale changes nothing; a weight of 0 drops the row
    assert aurc(y, proba, sample_weight=3 * w) == pytest.approx(
        aurc(y, proba, sample_weight=w), abs=1e-14
    )
    w0 = w.copy()
    w0[:5] = 0
    assert eaurc(y, proba, sample_weight=w0) == pytest.approx(
        eaurc(y[5:], proba[5:], sample_weight=w[5:]), abs=1e-14
    )


def test_a_confidence_score_ranks_the_rows():
    y, proba = real_scores("breast_cancer")
    conf = proba.max(1)
    assert aurc(y, proba, confidence=np.log(conf)) == aurc(y, proba)
    with pytest.raises(ValueError, match="confidence has 3 values"):
        aurc(y, proba, confidence=[0.1, 0.2, 0.3])
    with pytest.raises(ValueError, match="NaN"):
        aurc(y, proba, confidence=np.full(len(y), np.nan))
    with pytest.raises(ValueError, match="coverage"):
        selective_risk(y, proba, coverage=0.0)
    with pytest.raises(ValueError, match="risk"):
        coverage_at_risk(y, proba, risk=1.5)


def test_no_coverage_reaches_the_risk():
    assert coverage_at_risk([1, 1], [[0.9, 0.1], [0.8, 0.2]], risk=0.1) == 0.0
    # one row: its value (torch-uncertainty gives NaN)
    assert aurc([1], [[0.9, 0.1]]) == 1.0


def test_scorers_in_a_grid_search():
    from sklearn.datasets import load_breast_cancer

    X, y = load_breast_cancer(return_X_y=True)
    X = (X - X.mean(0)) / X.std(0)
    model = LogisticRegression(max_iter=300).fit(X[::2], y[::2])
    for name, func in [("AURC", aurc), ("neg_eaurc", eaurc), ("augrc", augrc)]:
        scorer = get_scorer(name)
        proba = model.predict_proba(X[1::2])
        assert scorer(model, X[1::2], y[1::2]) == -func(y[1::2], proba)
    search = GridSearchCV(
        LogisticRegression(max_iter=300),
        {"C": [0.01, 1.0]},
        scoring=get_scorer("neg_aurc"),
        cv=3,
    ).fit(X, y)
    assert search.best_score_ <= 0


@pytest.mark.parametrize("func", [aurc, eaurc, augrc])
def test_states_over_chunks_equal_the_function(func):
    y, proba = real_scores("digits")
    proba = np.round(proba, 2)  # ties across chunks
    proba /= proba.sum(1, keepdims=True)
    w = np.random.default_rng(1).uniform(0, 2, len(y))
    states = []
    for rows in np.array_split(np.arange(len(y)), 5):
        states.append(metric_state(func.__name__).update(y[rows], proba[rows], w[rows]))
    state = states[0]
    for other in states[1:]:
        state.merge(other)
    assert state.compute() == pytest.approx(func(y, proba, sample_weight=w), abs=1e-13)


def _torch_uncertainty():
    """torch-uncertainty's risk_coverage module, loaded by path (its package
    imports lightning); None when it is not installed."""
    spec = importlib.util.find_spec("torch_uncertainty")
    if spec is None or importlib.util.find_spec("torchmetrics") is None:
        return None
    path = Path(spec.submodule_search_locations[0])
    path = path / "metrics" / "classification" / "risk_coverage.py"
    module_spec = importlib.util.spec_from_file_location("_tu_risk_coverage", path)
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("name", ["digits", "wine", "breast_cancer"])
def test_torch_uncertainty(name):
    tu = _torch_uncertainty()
    if tu is None:
        pytest.skip("torch-uncertainty is not installed")
    import torch

    dtype = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)  # its coverage grid's dtype
    try:
        y, proba = real_scores(name)
        p, t = torch.from_numpy(proba), torch.from_numpy(y)
        for metric, ours in [
            (tu.AURC(), aurc(y, proba)),
            (tu.AUGRC(), augrc(y, proba)),
            (tu.RiskAtxCov(cov_threshold=0.8), selective_risk(y, proba, coverage=0.8)),
            (tu.CovAtxRisk(risk_threshold=0.01), coverage_at_risk(y, proba, risk=0.01)),
        ]:
            metric.update(p, t)
            assert float(metric.compute()) == pytest.approx(ours, abs=1e-10)
    finally:
        torch.set_default_dtype(dtype)
