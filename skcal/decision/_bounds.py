"""Finite-sample thresholds of selective prediction: SGR and learn-then-test.

Both take the confidences of the threshold rows and whether each row's
prediction is wrong, and return the lowest confidence threshold whose
selective risk (the error rate among the rows at or above it) is at most
``target_risk`` with probability at least ``1 - delta``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.stats import beta, binom

__all__ = [
    "LTT_GRID",
    "ThresholdResult",
    "binomial_upper_bound",
    "ltt_threshold",
    "sgr_threshold",
]

#: Learn-then-test's thresholds, fixed before seeing any data (as the method
#: requires): ``1 - 10 ** -x`` for ``x`` from 8 down to 0 in steps of 0.01,
#: i.e. confidences from 1 - 1e-8 down to 0, 2.3% apart in ``1 - confidence``.
LTT_GRID = 1.0 - 10.0 ** -np.linspace(8.0, 0.0, 801)


@dataclass(frozen=True)
class ThresholdResult:
    """The chosen threshold, its bound, and what it selects.

    ``threshold`` is ``inf`` (abstain on everything) when no threshold meets
    the target; ``bound`` is then the best (lowest) bound reached.
    """

    threshold: float
    bound: float
    n_selected: int
    n_errors: int
    found: bool


def binomial_upper_bound(n_errors, n_selected, delta):
    """Clopper-Pearson's one-sided upper bound on a binomial rate.

    The ``b`` that solves ``P(Binomial(n_selected, b) <= n_errors) = delta``
    (Geifman & El-Yaniv's ``B*``, after Gascuel & Caraux, 1992): the true
    error rate exceeds it with probability at most ``delta``. 1 when no row
    is selected or every selected row is wrong.

    Examples
    --------
    >>> from skcal.decision._bounds import binomial_upper_bound
    >>> round(float(binomial_upper_bound(0, 100, 0.05)), 4)
    0.0295
    """
    n_errors = np.asarray(n_errors, dtype=np.float64)
    n_selected = np.asarray(n_selected, dtype=np.float64)
    inside = (n_selected > 0) & (n_errors < n_selected)
    a = np.where(inside, n_errors + 1.0, 1.0)
    b = np.where(inside, n_selected - n_errors, 1.0)
    return np.where(inside, beta.ppf(1.0 - delta, a, b), 1.0)


def _counts_above(confidence, wrong, thresholds):
    """Rows selected and errors among them at each threshold (conf >= t)."""
    order = np.argsort(confidence, kind="stable")
    sorted_conf = confidence[order]
    errors_from = np.concatenate([np.cumsum(wrong[order][::-1])[::-1], [0]])
    first = np.searchsorted(sorted_conf, thresholds, side="left")
    return confidence.size - first, errors_from[first]


def sgr_threshold(confidence, wrong, target_risk, delta):
    """Selection with guaranteed risk (Geifman & El-Yaniv, 2017, Algorithm 1).

    A binary search over the sorted confidences of the ``m`` rows, with
    ``k = ceil(log2 m)`` steps; each tested threshold's selective risk is
    bounded by :func:`binomial_upper_bound` at level ``delta / k``
    (Bonferroni over the steps). A step whose bound is below
    ``target_risk`` moves the search to lower thresholds, else to higher
    ones. The lowest tested threshold that met the target is returned.
    """
    confidence = np.asarray(confidence, dtype=np.float64)
    wrong = np.asarray(wrong, dtype=bool)
    m = confidence.size
    if m == 0:
        return ThresholdResult(math.inf, 1.0, 0, 0, False)
    sorted_conf = np.sort(confidence)
    k = max(1, math.ceil(math.log2(m)))
    z_min, z_max = 0, m - 1
    best, lowest = None, (math.inf, 1.0, 0, 0)
    for _ in range(k):
        z = math.ceil((z_min + z_max) / 2)
        theta = sorted_conf[z]
        n_sel, n_err = _counts_above(confidence, wrong, np.array([theta]))
        bound = float(binomial_upper_bound(n_err[0], n_sel[0], delta / k))
        result = (float(theta), bound, int(n_sel[0]), int(n_err[0]))
        if bound < lowest[1]:
            lowest = result
        if bound < target_risk:
            if best is None or theta < best[0]:
                best = result
            z_max = z
        else:
            z_min = z
    if best is None:
        return ThresholdResult(math.inf, lowest[1], 0, 0, False)
    return ThresholdResult(*best, True)


def ltt_threshold(confidence, wrong, target_risk, delta, grid=None):
    """Learn then test (Angelopoulos et al., 2021) by fixed-sequence testing.

    For each threshold ``t`` of a grid fixed in advance (:data:`LTT_GRID`),
    from the most confident down, the null hypothesis "the selective risk at
    ``t`` exceeds ``target_risk``" is tested with the binomial p-value
    ``P(Binomial(n_t, target_risk) <= e_t)`` of the ``e_t`` errors among the
    ``n_t`` selected rows (valid conditionally on ``n_t``); the sequence
    rejects while ``p <= delta`` and stops at the first non-rejection, which
    controls the family-wise error at ``delta`` without a union bound. The
    lowest rejected threshold is returned.

    Thresholds that select fewer rows than any rejection needs
    (``(1 - target_risk) ** n_t > delta``: even no error could not reject)
    are passed over rather than ending the sequence at its top.
    """
    confidence = np.asarray(confidence, dtype=np.float64)
    wrong = np.asarray(wrong, dtype=bool)
    grid = LTT_GRID if grid is None else np.sort(np.asarray(grid, float))[::-1]
    n_sel, n_err = _counts_above(confidence, wrong, grid)
    p_values = binom.cdf(n_err, n_sel, target_risk)
    testable = (1.0 - target_risk) ** n_sel <= delta
    bounds = binomial_upper_bound(n_err, n_sel, delta)
    chosen = None
    for j in np.flatnonzero(testable):
        if p_values[j] > delta:
            break
        chosen = j
    if chosen is None:
        best = float(bounds.min()) if bounds.size else 1.0
        return ThresholdResult(math.inf, best, 0, 0, False)
    return ThresholdResult(
        float(grid[chosen]),
        float(bounds[chosen]),
        int(n_sel[chosen]),
        int(n_err[chosen]),
        True,
    )
