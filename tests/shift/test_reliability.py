"""Label shift on confusable classes and small sets (issue 49, item 5): the
shift test under no shift, the reliability check, the intervals' coverage
and BBSE / RLLS priors that are never 0 for a class the target gives mass."""

import numpy as np
import pytest
from scipy.special import softmax
from scipy.stats import binom

from skcal import TemperatureScaling
from skcal.shift import (
    PriorShiftAdapter,
    UnreliableEstimateWarning,
    estimate_class_priors,
)

MEANS = np.array([[0.0, 0.0], [2.5, 0.0], [0.0, 2.5]])


def _draw(rng, n, priors, means=MEANS):
    """Rows of three Gaussian classes and their exact posteriors for equal
    priors (calibrated probabilities of the population of 1/3 each)."""
    y = rng.choice(len(priors), n, p=priors)
    x = means[y] + rng.normal(size=(n, 2))
    logit = -0.5 * ((x[:, None, :] - means[None]) ** 2).sum(-1)
    return softmax(logit, axis=1), y


def _bound(n, level, tail=1e-4):
    """The count of ``n`` Bernoulli(``level``) draws exceeded with
    probability ``tail``: a Monte-Carlo tolerance that cannot flip by chance."""
    return int(binom.isf(tail, n, level))


@pytest.mark.parametrize("method", ["bbse", "rlls"])
def test_confusion_methods_never_zero_a_class_with_mass(method):
    """Hand-made: on the source, class-0 rows are predicted 0 at 0.8 and
    class-1 rows at 0.3; the target predicts 0 on 20% of its rows, below
    what any mix allows, so ``C^-1 mu`` has a negative weight for class 0
    and the papers' clipping sets its prior to 0. The target's calibrated
    probabilities give class 0 a mean of 0.5 (0.2 x 0.7 + 0.8 x 0.45): its
    prior stays at least half of that, 0.25."""
    y_source = np.repeat([0, 1], 10)
    pred0, pred1 = [0.6, 0.4], [0.4, 0.6]
    P_source = np.array([pred0] * 8 + [pred1] * 2 + [pred0] * 3 + [pred1] * 7)
    P_target = np.array([[0.7, 0.3]] * 2 + [[0.45, 0.55]] * 8)
    C = np.array([[0.4, 0.15], [0.1, 0.35]])
    assert np.linalg.solve(C, [0.2, 0.8])[0] < 0  # the old clipping case
    est = estimate_class_priors(
        P_target,
        source_priors=[0.5, 0.5],
        method=method,
        y_proba_source=P_source,
        y_source=y_source,
        shift_test=None,
        reliability_check=False,
    )
    assert est.priors[0] >= 0.25 - 1e-12
    np.testing.assert_allclose(est.priors.sum(), 1.0)


def test_no_shift_false_alarms_within_the_level():
    """No shift, 50 source rows and 500 target rows: the BIC alone takes the
    source frequencies' noise (ten times the target's) for a shift in about
    two thirds of the draws; with the simulated null the rate stays within
    5% (binomial tolerance)."""
    rng = np.random.default_rng(0)
    pi, n_draws, detected = np.full(3, 1 / 3), 20, 0
    for seed in range(n_draws):
        P_source, y_source = _draw(rng, 50, pi)
        P_target, _ = _draw(rng, 500, pi)
        est = estimate_class_priors(
            P_target,
            source_priors=np.bincount(y_source, minlength=3) / 50,
            y_proba_source=P_source,
            y_source=y_source,
            reliability_check=False,
            random_state=seed,
        )
        detected += est.shift_detected
    assert detected <= _bound(n_draws, 0.05)


def test_interval_covers_with_source_noise():
    """BBSE with 200 source rows and 2,000 target rows: the source confusion
    matrix's noise dominates, and an interval over the target rows alone
    covered the true prior about 40% of the time (nominal 90%); resampling
    both sets keeps each class's coverage within the binomial tolerance of
    90%."""
    rng = np.random.default_rng(0)
    pi, q, n_draws = np.full(3, 1 / 3), np.array([0.6, 0.3, 0.1]), 40
    covered = np.zeros(3)
    for seed in range(n_draws):
        P_source, y_source = _draw(rng, 200, pi)
        P_target, _ = _draw(rng, 2000, q)
        est = estimate_class_priors(
            P_target,
            source_priors=np.bincount(y_source, minlength=3) / 200,
            method="bbse",
            y_proba_source=P_source,
            y_source=y_source,
            shift_test=None,
            reliability_check=False,
            n_resamples=100,
            random_state=seed,
        )
        covered += (est.low <= q) & (q <= est.high)
    assert np.all(covered >= n_draws - _bound(n_draws, 0.1))


def test_unreliable_estimate_keeps_the_calibrated_probabilities():
    """Confusable classes (means 0.3 apart), no shift, 40 target rows, no
    shift test: EM's estimate is noise, and on pseudo-targets drawn from the
    source rows it misses their priors by more than the source priors do.
    The adapter warns and keeps the calibrated probabilities."""
    rng = np.random.default_rng(0)
    means = MEANS * 0.12
    P_source, y_source = _draw(rng, 600, np.full(3, 1 / 3), means)
    P_target, _ = _draw(rng, 40, np.full(3, 1 / 3), means)
    adapter = PriorShiftAdapter(TemperatureScaling(device="cpu"), shift_test=None)
    adapter.fit(np.log(P_source), y_source)
    with pytest.warns(UnreliableEstimateWarning, match="Kept the source priors"):
        adapter.adapt(np.log(P_target))
    est = adapter.prior_estimate_
    assert est.reliable is False
    assert not np.allclose(est.estimated, adapter.source_priors_, atol=1e-3)
    np.testing.assert_array_equal(adapter.priors_, adapter.source_priors_)
    np.testing.assert_array_equal(
        adapter.predict_proba(np.log(P_target)),
        adapter.calibrator_.predict_proba(np.log(P_target)),
    )
