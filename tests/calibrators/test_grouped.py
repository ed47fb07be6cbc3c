"""GroupedVectorScaling: per-group vector scaling shrunk toward the pooled map."""

import pickle

import numpy as np
import pytest
from scipy.optimize import minimize
from scipy.special import log_softmax, logsumexp
from sklearn.base import clone
from sklearn.utils.estimator_checks import parametrize_with_checks

from skcal import GroupedTemperatureScaling, GroupedVectorScaling, TemperatureScaling


def _problem(seed, n_groups=3, n_per=120, k=3):
    rng = np.random.default_rng(seed)
    groups = np.repeat(np.arange(n_groups), n_per)
    logits = rng.normal(size=(len(groups), k)) * 2
    shift = rng.normal(0, 1.0, (n_groups, k))[groups]
    z = logits + shift
    p = np.exp(z - logsumexp(z, axis=1, keepdims=True))
    y = np.array([rng.choice(k, p=row) for row in p])
    return logits, y, groups


def _nll(theta, Z, y):
    a, b = theta[: Z.shape[1]], theta[Z.shape[1] :]
    L = Z * a + b
    return np.sum(logsumexp(L, axis=1) - L[np.arange(len(y)), y])


def _fisher(Z, theta):
    """Mean diagonal Fisher information per row of (a, b), written here."""
    k = Z.shape[1]
    L = Z * theta[:k] + theta[k:]
    q = np.exp(L - logsumexp(L, axis=1, keepdims=True))
    return np.concatenate([np.mean(q * (1 - q) * Z**2, 0), np.mean(q * (1 - q), 0)])


def _argmin(f, x0):
    return minimize(
        f,
        x0,
        method="Nelder-Mead",
        options={"xatol": 1e-9, "fatol": 1e-12, "maxiter": 40000},
    ).x


def test_the_maps_minimise_the_stated_objectives():
    logits, y, groups = _problem(0)
    strength = 30.0
    cal = GroupedVectorScaling(shrinkage=strength).fit(logits, y, groups=groups)
    k = logits.shape[1]
    logits = log_softmax(logits, axis=1)  # the map acts on log-probabilities
    # pooled: within one pseudo-row of temperature scaling
    T = TemperatureScaling().fit(logits, y).temperature_
    ts = np.concatenate([np.full(k, 1 / T), np.zeros(k)])
    c = _fisher(logits, ts)
    pooled = _argmin(lambda t: _nll(t, logits, y) + 0.5 * c @ (t - ts) ** 2, ts)
    got = np.concatenate([cal.coef_, cal.intercept_])
    np.testing.assert_allclose(got, pooled, atol=2e-4)
    c = _fisher(logits, got)
    for i, g in enumerate(cal.groups_):
        Z, yy = logits[groups == g], y[groups == g]
        ref = _argmin(
            lambda t, Z=Z, yy=yy: (
                _nll(t, Z, yy) + (strength + 1) / 2 * c @ (t - got) ** 2
            ),
            got,
        )
        mine = np.concatenate([cal.group_coef_[i], cal.group_intercept_[i]])
        # the offsets are identified up to a common shift: compare probabilities
        np.testing.assert_allclose(
            np.exp(log_softmax(Z * mine[:k] + mine[k:], axis=1)),
            np.exp(log_softmax(Z * ref[:k] + ref[k:], axis=1)),
            atol=1e-4,
        )


def test_infinite_shrinkage_is_the_pooled_map_and_unseen_groups_get_it():
    logits, y, groups = _problem(1)
    cal = GroupedVectorScaling(shrinkage=np.inf).fit(logits, y, groups=groups)
    np.testing.assert_array_equal(cal.group_coef_, np.tile(cal.coef_, (3, 1)))
    Z = log_softmax(logits, axis=1)
    pooled = np.exp(log_softmax(Z * cal.coef_ + cal.intercept_, axis=1))
    np.testing.assert_allclose(cal.predict_proba(logits, groups=groups), pooled)
    np.testing.assert_allclose(cal.predict_proba(logits, groups=[9] * len(y)), pooled)


def test_auto_picks_the_lowest_cross_fitted_nll():
    logits, y, groups = _problem(2, n_per=80)
    cal = GroupedVectorScaling(cv=3, random_state=0).fit(logits, y, groups=groups)
    grid = np.array([0, 1, 3, 10, 30, 100, 300, 1000, 3000])
    assert cal.cv_nll_[grid == cal.shrinkage_][0] == cal.cv_nll_.min()
    # the groups differ by their offsets: the per-group maps beat the pooled one
    assert cal.shrinkage_ < 3000


def test_bad_groups_are_refused_and_inputs_untouched():
    logits, y, groups = _problem(3, n_per=40)
    with pytest.raises(ValueError, match="one group label per row"):
        GroupedVectorScaling(shrinkage=1.0).fit(logits, y, groups=groups[:-1])
    X = logits.copy()
    fitted = GroupedVectorScaling(shrinkage=1.0).fit(X, y, groups=groups)
    np.testing.assert_array_equal(X, logits)
    again = pickle.loads(pickle.dumps(clone(fitted).fit(X, y, groups=groups)))
    np.testing.assert_array_equal(
        again.predict_proba(X, groups=groups), fitted.predict_proba(X, groups=groups)
    )


COLUMNS_ARE_CLASSES = (
    "X must have one column per class: the check's X has fewer columns than y "
    "has classes, which a score calibrator rejects with a ValueError by design."
)


SOLVER_TOLERANCE = (
    "The maps are L-BFGS solutions to a tolerance of about 1e-5 on the "
    "probabilities: weights and repeated rows reach the same optimum only to "
    "that tolerance, not to the check's rtol of 1e-7."
)


def _expected_failed(estimator):
    return {
        "check_sample_weight_equivalence_on_dense_data": SOLVER_TOLERANCE,
    } | {
        name: COLUMNS_ARE_CLASSES
        for name in (
            "check_estimators_overwrite_params",
            "check_estimators_fit_returns_self",
            "check_readonly_memmap_input",
            "check_classifiers_classes",
            "check_classifiers_train",
        )
    }


@parametrize_with_checks(
    [GroupedVectorScaling(shrinkage=10.0)], expected_failed_checks=_expected_failed
)
def test_sklearn_compatible(estimator, check):
    check(estimator)


def test_both_grouped_calibrators_are_found_in_skcal():
    import skcal.llm

    assert skcal.GroupedTemperatureScaling is skcal.llm.GroupedTemperatureScaling
    assert GroupedTemperatureScaling is skcal.llm.GroupedTemperatureScaling


def test_a_group_without_errors_is_not_sharpened_beyond_the_pooled_temperature():
    rng = np.random.default_rng(4)
    logits = rng.normal(size=(300, 3)) * 2
    y = np.array([rng.choice(3, p=np.exp(r) / np.exp(r).sum()) for r in logits])
    groups = np.repeat([0, 1], 150)
    y[groups == 1] = np.argmax(logits[groups == 1], axis=1)  # group 1: no error
    cal = GroupedTemperatureScaling(shrinkage=0).fit(logits, y, groups=groups)
    # alone, group 1's NLL keeps falling below the pooled temperature
    Z1, y1 = logits[groups == 1], y[groups == 1]
    T = cal.temperature_
    assert _nll(np.r_[np.full(3, 2 / T), np.zeros(3)], Z1, y1) < _nll(
        np.r_[np.full(3, 1 / T), np.zeros(3)], Z1, y1
    )
    assert cal.group_temperatures_[1] == pytest.approx(cal.temperature_, rel=1e-12)
    # group 0 has errors: it is fitted alone, as before
    own = TemperatureScaling().fit(logits[groups == 0], y[groups == 0]).temperature_
    assert cal.group_temperatures_[0] == pytest.approx(own, rel=1e-6)
