"""The VQ paper's binned cumulative calibration error."""

import numpy as np
import pytest

from skcal.metrics import ecce_binned_mean


def _loop_reference(y, P, n_bins, w):
    """Bins, residuals and running sums written out sample by sample."""
    n, C = P.shape
    per_class = []
    for k in range(C):
        sums = {}
        for i in range(n):
            b = min(int(P[i, k] * n_bins), n_bins - 1)
            tot, sp, sy = sums.get(b, (0.0, 0.0, 0.0))
            sums[b] = (tot + w[i], sp + w[i] * P[i, k], sy + w[i] * (y[i] == k))
        total = sum(v[0] for v in sums.values())
        running, cum = 0.0, []
        for b in sorted(sums):
            tot, sp, sy = sums[b]
            running += tot / total * (sp / tot - sy / tot)
            cum.append(abs(running))
        per_class.append(np.mean(cum))
    return float(np.mean(per_class))


def test_hand_case():
    y = [0, 1, 1, 0]
    P = [[0.9, 0.1], [0.2, 0.8], [0.4, 0.6], [0.3, 0.7]]
    # class 0: C = -0.125, -0.025, -0.05; class 1: C = 0.025, 0.1, 0.05
    expected = ((0.125 + 0.025 + 0.05) / 3 + (0.025 + 0.1 + 0.05) / 3) / 2
    assert ecce_binned_mean(y, P, n_bins=5) == pytest.approx(expected, abs=1e-15)


@pytest.mark.parametrize("weighted", [False, True])
def test_matches_loop_reference(weighted):
    rng = np.random.default_rng(0)
    P = rng.dirichlet(np.ones(4) * 0.7, size=300)
    y = rng.integers(0, 4, size=300)
    w = rng.uniform(0, 2, size=300) if weighted else np.ones(300)
    value = ecce_binned_mean(y, P, sample_weight=w if weighted else None)
    assert value == pytest.approx(_loop_reference(y, P, 15, w), rel=1e-12)


def test_perfect_calibration_is_small_and_frequency_weights():
    rng = np.random.default_rng(1)
    P = rng.dirichlet(np.ones(3), size=20000)
    y = (rng.uniform(size=(20000, 1)) > P.cumsum(1)).sum(1)
    assert ecce_binned_mean(y, P) < 0.005
    y_bad = np.zeros(20000, dtype=int)
    y_bad[:10] = [0, 1, 2, 0, 1, 2, 0, 1, 2, 1]
    uniform = ecce_binned_mean(y_bad, P)
    freq = ecce_binned_mean(y_bad, P, class_weight="frequency")
    assert uniform > 0.05 and freq != pytest.approx(uniform)
