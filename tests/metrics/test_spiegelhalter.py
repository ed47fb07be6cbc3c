"""Spiegelhalter's Z test against MAPIE 1.6 and the paper's formula."""

import dataclasses

import numpy as np
import pytest
from _real_data import LOADERS, real_scores
from scipy.stats import norm

from skcal.metrics import (
    SpiegelhalterTest,
    get_scorer,
    metric_state,
    spiegelhalter_test,
)
from skcal.metrics._spiegelhalter import spiegelhalter_abs_z


def _mapie():
    return pytest.importorskip("mapie.metrics.calibration")


@pytest.mark.parametrize("name", LOADERS)
def test_equals_mapie_on_real_data(name):
    mapie = _mapie()
    y, P = real_scores(name)
    if P.shape[1] == 2:  # MAPIE's binary test, on the positive class
        event, score = y, P[:, 1]
    else:  # MAPIE is binary only: the top-label event, given to it as such
        event, score = (P.argmax(1) == y).astype(int), P.max(1)
    result = spiegelhalter_test(y, P, alternative="greater")
    z = mapie.spiegelhalter_statistic(event, score)
    assert result.normalized == pytest.approx(z, rel=1e-12)
    pvalue = mapie.spiegelhalter_p_value(event, score)
    assert result.pvalue == pytest.approx(pvalue, rel=1e-9, abs=1e-15)


def test_hand_computed_case():
    """MAPIE's docstring example, by the paper's formula."""
    y = np.array([0, 1, 0, 1, 0])
    r = np.array([0.1, 0.9, 0.21, 0.9, 0.5])
    z = np.sum((y - r) * (1 - 2 * r)) / np.sqrt(np.sum((1 - 2 * r) ** 2 * r * (1 - r)))
    assert round(z, 3) == -0.757  # the value MAPIE documents
    result = spiegelhalter_test(y, r)
    assert result.normalized == pytest.approx(z, rel=1e-12)
    assert result.pvalue == pytest.approx(2 * norm.sf(abs(z)), rel=1e-12)
    less = spiegelhalter_test(y, r, alternative="less").pvalue
    assert less == pytest.approx(norm.cdf(z), rel=1e-12)
    assert spiegelhalter_abs_z(y, r) == pytest.approx(abs(z), rel=1e-12)


def test_binary_is_the_same_for_either_class():
    y, P = real_scores("breast_cancer")
    a = spiegelhalter_test(y, P)
    b = spiegelhalter_test(1 - y, P[:, ::-1])
    c = spiegelhalter_test(y, P[:, 1])
    assert a.normalized == pytest.approx(b.normalized, rel=1e-12)
    assert a.normalized == pytest.approx(c.normalized, rel=1e-12)


def test_weights_by_the_formula():
    y, P = real_scores("wine")
    w = np.random.default_rng(0).uniform(0.1, 3.0, len(y))
    r, c = P.max(1), (P.argmax(1) == y).astype(float)
    z = np.sum(w * (c - r) * (1 - 2 * r)) / np.sqrt(
        np.sum(w**2 * (1 - 2 * r) ** 2 * r * (1 - r))
    )
    got = spiegelhalter_test(y, P, sample_weight=w).normalized
    assert got == pytest.approx(z, rel=1e-12)
    ones = spiegelhalter_test(y, P, sample_weight=np.ones(len(y)))
    assert ones == spiegelhalter_test(y, P)


def test_zero_variance():
    P = np.array([[1.0, 0.0], [0.0, 1.0], [0.5, 0.5]])
    assert spiegelhalter_test([0, 1, 1], P) == SpiegelhalterTest(0.0, 1.0)
    with pytest.raises(ValueError, match="variance under calibration is 0"):
        spiegelhalter_test([1, 1, 1], P)


def test_state_merges_exactly():
    y, P = real_scores("digits")
    w = np.random.default_rng(1).uniform(0.1, 3.0, len(y))
    for weights in (None, w):
        for alternative in ("two-sided", "greater"):
            states = []
            for rows in np.array_split(np.arange(len(y)), 5):
                state = metric_state(spiegelhalter_test, alternative=alternative)
                sw = None if weights is None else w[rows]
                states.append(state.update(y[rows], P[rows], sw))
            merged = states[0]
            for state in states[1:]:
                merged.merge(state)
            batch = spiegelhalter_test(
                y, P, alternative=alternative, sample_weight=weights
            )
            got = merged.compute()
            for field in dataclasses.fields(batch):
                expected = getattr(batch, field.name)
                value = getattr(got, field.name)
                assert value == pytest.approx(expected, rel=1e-9, abs=1e-15)


def test_scorer_ranks_by_abs_z():
    from skcal import TemperatureScaling

    y, P = real_scores("digits")
    logits = np.log(P)
    est = TemperatureScaling(device="cpu").fit(logits, y)
    score = get_scorer("neg_spiegelhalter_abs_z")(est, logits, y)
    expected = -abs(spiegelhalter_test(y, est.predict_proba(logits)).normalized)
    assert score == pytest.approx(expected, rel=1e-12)


def test_clear_errors():
    y, P = real_scores("wine")
    with pytest.raises(ValueError, match="alternative"):
        spiegelhalter_test(y, P, alternative="both")
    with pytest.raises(ValueError, match="sum to 1"):
        spiegelhalter_test(y, P * 0.5)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_ties_and_float32_and_clipping_by_the_formula(dtype):
    """The top-label event of each row is numpy's first argmax (a label
    tied with an earlier maximum is a miss), in the input's precision, and
    values a rounding outside [0, 1] count as clipped; every alternative's
    p-value is scipy's normal law at Z."""
    mapie = _mapie()
    rng = np.random.default_rng(0)
    P = rng.dirichlet(np.ones(4), size=400)
    P[:50] = [0.4, 0.4, 0.1, 0.1]  # a tie for the top
    P[50:60] = [1.0 + 1e-9, -1e-9, 0.0, 0.0]  # a rounding outside [0, 1]
    P = P.astype(dtype)
    y = rng.integers(0, 4, len(P))
    y[:25], y[25:50] = 0, 1  # the first tied column is the prediction
    Q = np.clip(P.astype(np.float64), 0.0, 1.0)
    r, c = Q.max(1), (Q.argmax(1) == y).astype(float)
    assert c[:25].all() and not c[25:50].any()
    z = np.sum((c - r) * (1 - 2 * r)) / np.sqrt(np.sum((1 - 2 * r) ** 2 * r * (1 - r)))
    rel = 1e-12 if dtype == np.float64 else 1e-6
    for alternative, pvalue in [
        ("two-sided", 2 * norm.sf(abs(z))),
        ("greater", norm.sf(z)),
        ("less", norm.cdf(z)),
    ]:
        result = spiegelhalter_test(y, P, alternative=alternative)
        assert result.normalized == pytest.approx(z, rel=rel)
        assert result.pvalue == pytest.approx(pvalue, rel=1e-9 if rel < 1e-9 else 1e-4)
    assert spiegelhalter_test(y, P).normalized == pytest.approx(
        mapie.spiegelhalter_statistic(c.astype(int), r), rel=rel
    )
