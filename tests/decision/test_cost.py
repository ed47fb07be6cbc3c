"""Cost-aware decisions: the rule against a brute-force argmin, the cost
against hand-computed sums, and the errors for malformed input."""

import itertools

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GridSearchCV

from skcal import CalibratedClassifier, TemperatureScaling
from skcal.decision import (
    CostSensitiveClassifier,
    bayes_decision_cost,
    check_cost_matrix,
    cost_sensitive_predict,
    expected_cost,
    make_cost_scorer,
)

COSTS = [
    np.array([[0.0, 1.0], [5.0, 0.0]]),
    np.array([[0.0, 2.0, 7.0], [1.0, 0.0, 3.0], [10.0, 4.0, 0.0]]),
    np.array([[-1.0, 2.0, 2.0], [3.0, -2.0, 1.0], [0.5, 0.5, 0.0]]),  # rewards
]


def _brute_force(proba, cost, abstain_cost=None):
    """Each row's decision by trying every option in turn."""
    decisions = []
    for p in proba:
        best, best_cost = None, np.inf
        for j in range(cost.shape[1]):
            c = sum(p[i] * cost[i, j] for i in range(cost.shape[0]))
            if c < best_cost:
                best, best_cost = j, c
        if abstain_cost is not None and abstain_cost < best_cost:
            best = -1
        decisions.append(best)
    return decisions


@pytest.mark.parametrize("cost", COSTS)
@pytest.mark.parametrize("abstain_cost", [None, 0.3, 0.8])
def test_rule_is_the_brute_force_argmin(cost, abstain_cost):
    rng = np.random.default_rng(len(cost))
    proba = rng.dirichlet(np.ones(len(cost)) * 0.7, size=300)
    got = cost_sensitive_predict(proba, cost, abstain_cost=abstain_cost)
    assert got.tolist() == _brute_force(proba, cost, abstain_cost)


def test_rule_hand_case_and_labels():
    # expected costs: row 0 -> [0.2*5, 0.8*1] = [1.0, 0.8]: predict "b";
    # row 1 -> [0.05*5, 0.95] = [0.25, 0.95]: predict "a"
    proba = np.array([[0.8, 0.2], [0.95, 0.05]])
    cost = [[0, 1], [5, 0]]
    got = cost_sensitive_predict(proba, cost, classes=["a", "b"])
    assert got.tolist() == ["b", "a"]
    got = cost_sensitive_predict(
        proba, cost, classes=["a", "b"], abstain_cost=0.5, abstain_label="?"
    )
    assert got.tolist() == ["?", "a"]
    # a 1-D array is the positive class of a binary task
    assert cost_sensitive_predict(proba[:, 1], cost).tolist() == [1, 0]


def test_expected_cost_hand_computed():
    cost = [[0, 2, 7], [1, 0, 3], [10, 4, 0]]
    y_true = [0, 1, 2, 2, 0]
    y_pred = [1, 1, 0, -1, 2]
    # costs 2, 0, 10, abstain 1.5, 7 -> mean 20.5 / 5
    got = expected_cost(y_true, y_pred, cost, abstain_label=-1, abstain_cost=1.5)
    assert got == pytest.approx(20.5 / 5)
    weighted = expected_cost(
        y_true,
        y_pred,
        cost,
        abstain_label=-1,
        abstain_cost=1.5,
        sample_weight=[1, 1, 2, 1, 0],
    )
    assert weighted == pytest.approx((2 + 0 + 20 + 1.5) / 5)
    # labels give the order of the rows and columns
    assert expected_cost(["x", "y"], ["y", "y"], [[0, 3], [1, 0]]) == 1.5
    assert expected_cost(["x", "y"], ["y", "y"], [[0, 1], [3, 0]], labels=["y", "x"])


def test_bayes_decision_cost_is_decide_then_cost():
    rng = np.random.default_rng(1)
    proba = rng.dirichlet(np.ones(3), size=200)
    y = np.array([rng.choice(3, p=p) for p in proba])
    cost = COSTS[1]
    decisions = _brute_force(proba, cost)
    manual = np.mean([cost[t, d] for t, d in zip(y, decisions)])
    assert bayes_decision_cost(y, proba, cost_matrix=cost) == pytest.approx(manual)


@pytest.mark.parametrize(
    "cost, match",
    [
        ([[0, 1, 2], [1, 0, 1]], "square"),
        ([0, 1], "square"),
        ([[0, np.nan], [1, 0]], "non-finite"),
        ([["a", "b"], ["c", "d"]], "array of numbers"),
    ],
)
def test_malformed_cost_matrices(cost, match):
    with pytest.raises(ValueError, match=match):
        check_cost_matrix(cost)


def test_cost_matrix_of_the_wrong_size_and_other_errors():
    proba = np.full((4, 3), 1 / 3)
    with pytest.raises(ValueError, match="3 classes"):
        cost_sensitive_predict(proba, [[0, 1], [1, 0]])
    with pytest.raises(ValueError, match="abstain_cost"):
        cost_sensitive_predict(proba, np.ones((3, 3)), abstain_cost=np.inf)
    with pytest.raises(ValueError, match="one of the classes"):
        cost_sensitive_predict(proba, np.ones((3, 3)), abstain_cost=0, abstain_label=1)
    with pytest.raises(ValueError, match="abstain_cost is None"):
        expected_cost([0, 1], [-1, 1], [[0, 1], [1, 0]], abstain_label=-1)
    with pytest.raises(ValueError, match="not among labels"):
        expected_cost([0, 5], [0, 1], [[0, 1], [1, 0]], labels=[0, 1])
    with pytest.raises(ValueError, match="sum"):
        cost_sensitive_predict(np.full((2, 2), 0.9), [[0, 1], [1, 0]])


def _binary_scores(n, seed):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, n)
    return 1.5 * np.column_stack([-y, y]) + rng.normal(size=(n, 2)), y


def test_classifier_predicts_the_rule_and_rejects_bad_costs():
    X, y = _binary_scores(600, 0)
    cost = [[0, 1], [8, 0]]
    clf = CostSensitiveClassifier(TemperatureScaling(device="cpu"), cost).fit(X, y)
    expected = _brute_force(clf.predict_proba(X), np.asarray(cost, float))
    assert clf.predict(X).tolist() == expected
    with pytest.raises(ValueError, match="2 classes"):
        CostSensitiveClassifier(TemperatureScaling(device="cpu"), np.eye(3)).fit(X, y)


def test_scorer_picks_the_cheaper_model_in_a_grid_search():
    """The cost scorer inside GridSearchCV prefers a calibrated model over
    one whose probabilities are squashed toward 1/2 (C tiny), which misses
    the expensive positives' threshold."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(600, 2))
    y = (X[:, 0] + rng.normal(size=600) > 1.0).astype(int)
    search = GridSearchCV(
        LogisticRegression(),
        {"C": [1e-4, 1.0]},
        scoring=make_cost_scorer([[0, 1], [6, 0]]),
        cv=3,
    ).fit(X, y)
    assert search.best_params_ == {"C": 1.0}
    wrapped = CalibratedClassifier(
        LogisticRegression(), calibrator=TemperatureScaling(device="cpu")
    ).fit(X, y)
    assert make_cost_scorer([[0, 1], [6, 0]])(wrapped, X, y) <= 0


def test_inputs_are_not_modified():
    proba = np.array([[0.7, 0.3], [0.2, 0.8]])
    cost = np.array([[0.0, 1.0], [2.0, 0.0]])
    before = proba.copy(), cost.copy()
    cost_sensitive_predict(proba, cost, abstain_cost=0.1)
    assert np.array_equal(proba, before[0]) and np.array_equal(cost, before[1])


def test_all_decisions_enumerated_for_two_rows():
    """Every assignment of two rows' decisions costs at least the rule's
    expected cost (the rule is optimal row by row)."""
    proba = np.array([[0.6, 0.3, 0.1], [0.1, 0.2, 0.7]])
    cost = COSTS[1]
    rule = cost_sensitive_predict(proba, cost)
    risk = proba @ cost
    best = min(
        risk[0, a] + risk[1, b] for a, b in itertools.product(range(3), repeat=2)
    )
    assert risk[0, rule[0]] + risk[1, rule[1]] == pytest.approx(best)
