"""The tail rest model of TemperatureScaling on TopKScores (rest_model="tail").

References: the leftover mass (which the tail must hold), a power-law tail
built here, a censored NLL written here and differentiated numerically, and
temperature scaling of the full logits.
"""

import warnings

import numpy as np
import pytest

from skcal import TemperatureScaling
from skcal.llm import TopKScores
from skcal.llm._topk_tail import (
    TopKTailTemperatureObjective,
    scale_topk_tail,
    tail_columns,
)


def _zipf_logits(n, n_classes, seed, exponent=1.1):
    """Logits ``-exponent log(rank)`` plus noise, ranks shuffled per row."""
    rng = np.random.default_rng(seed)
    rank = np.arange(1, n_classes + 1)
    logits = np.empty((n, n_classes))
    for i in range(n):
        row = -exponent * np.log(rank) + rng.normal(0, 0.3, n_classes)
        logits[i, rng.permutation(n_classes)] = row + rng.normal() * (rank <= 5)
    return logits, rng


def test_tail_holds_the_leftover_mass_and_decays():
    logits, _ = _zipf_logits(20, 3000, seed=0)
    top = TopKScores.from_logits(logits, k=10)
    z, mult = tail_columns(top)
    tail_z, tail_mult = z[:, 10:], mult[:, 10:]
    mass = (tail_mult * np.exp(tail_z)).sum(axis=1)
    np.testing.assert_allclose(mass, np.exp(top.rest_logmass), rtol=1e-10)
    np.testing.assert_allclose(tail_mult.sum(axis=1), 3000 - 10, rtol=1e-10)
    assert (np.diff(tail_z, axis=1) <= 0).all()  # falling with the rank
    assert (tail_z[:, 0] <= top.values[:, -1] + 0.05).all()  # below the k-th


def test_tail_recovers_a_power_law_exponent():
    """A row whose unlisted classes follow ``p_r = p_k (r / k)^-1.5``."""
    n_classes, k = 20000, 20
    rank = np.arange(1, n_classes + 1)
    logp = np.where(rank <= k, -0.2 * rank, -0.2 * k - 1.5 * np.log(rank / k))
    top = TopKScores.from_logits(logp[None, :], k=k)
    z, mult = tail_columns(top)
    tail = z[0, k:]
    edges = np.concatenate([[0.0], (n_classes - k) ** (np.arange(1, 33) / 32)])
    offset = np.sqrt(np.maximum(edges[:-1], 0.5) * edges[1:])
    slope = np.polyfit(np.log1p(offset[4:] / k), tail[4:], 1)[0]
    assert slope == pytest.approx(-1.5, abs=0.1)


def test_scaling_at_temperature_one_is_the_identity():
    logits, _ = _zipf_logits(15, 2000, seed=1)
    top = TopKScores.from_logits(logits, k=5)
    same = scale_topk_tail(top, 1.0)
    np.testing.assert_allclose(same.values, top.values, atol=1e-12)
    np.testing.assert_allclose(same.rest_logmass, top.rest_logmass, atol=1e-10)
    hotter = scale_topk_tail(top, 0.5)  # the leftover grows, the top falls
    assert (hotter.rest_logmass > top.rest_logmass).all()
    total = np.exp(hotter.values).sum(axis=1) + np.exp(hotter.rest_logmass)
    np.testing.assert_allclose(total, 1.0, atol=1e-12)


def _censored_nll(z, mult, top, y, beta):
    """Mean NLL of ``softmax(beta z)`` over the weighted columns: a listed
    label by its own probability, an unlisted one by the tail's mass."""
    k = top.k
    e = mult * np.exp(beta * (z - z.max(axis=1, keepdims=True)))
    total = e.sum(axis=1)
    out = []
    for i in range(len(y)):
        hit = np.nonzero(top.indices[i] == y[i])[0]
        mass = e[i, hit[0]] if hit.size else e[i, k:].sum()
        out.append(-np.log(mass / total[i]))
    return float(np.mean(out))


def test_objective_derivatives_match_a_censored_nll():
    logits, rng = _zipf_logits(60, 1500, seed=2)
    y = rng.integers(0, 1500, 60)
    y[:30] = logits[:30].argmax(axis=1)  # half listed, most of the rest not
    top = TopKScores.from_logits(logits, k=8)
    weight = np.ones(60)
    objective = TopKTailTemperatureObjective(top, y, weight, scale=1.0)
    z, mult = tail_columns(top)
    for beta in (0.6, 1.0, 1.7):
        grad, hess = objective.derivatives(beta)
        h = 1e-5
        f = [_censored_nll(z, mult, top, y, beta + d) for d in (-h, 0.0, h)]
        assert grad == pytest.approx((f[2] - f[0]) / (2 * h), rel=1e-5)
        assert hess == pytest.approx((f[2] - 2 * f[1] + f[0]) / h**2, rel=1e-3)


def test_full_topk_tail_equals_dense_temperature_scaling():
    logits, rng = _zipf_logits(200, 12, seed=3)
    p = np.exp(logits - logits.max(axis=1, keepdims=True))
    y = np.array([rng.choice(12, p=row / row.sum()) for row in p])
    top = TopKScores.from_logits(logits, k=12)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        dense = TemperatureScaling(device="cpu").fit(logits, y)
    tail = TemperatureScaling(rest_model="tail").fit(top, y)
    assert tail.temperature_ == pytest.approx(dense.temperature_, rel=1e-9)


def test_tail_temperature_is_closer_on_a_zipf_distribution():
    """Labels drawn from the softmax at temperature 1.6 of Zipf-like logits
    over 8,000 classes: the equal spread's temperature is several percent
    low, the tail's within 3% of the full logits' one."""
    logits, rng = _zipf_logits(200, 8000, seed=4)
    p = np.exp(logits / 1.6 - (logits / 1.6).max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    y = np.array([rng.choice(8000, p=row) for row in p])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        full = TemperatureScaling(device="cpu").fit(logits, y).temperature_
    top = TopKScores.from_logits(logits, k=20)
    equal = TemperatureScaling().fit(top, y).temperature_
    tail = TemperatureScaling(rest_model="tail").fit(top, y).temperature_
    assert abs(tail / full - 1) < 0.03
    assert abs(tail / full - 1) < abs(equal / full - 1) - 0.02


def test_rest_model_is_validated():
    top = TopKScores.from_logits(np.log([[0.5, 0.3, 0.2]]), k=2)
    with pytest.raises(ValueError, match="rest_model"):
        TemperatureScaling(rest_model="flat").fit(top, [0])
