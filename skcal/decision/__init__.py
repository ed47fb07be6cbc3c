"""Decisions from calibrated probabilities.

:class:`SelectiveClassifier` abstains unless the calibrated confidence
reaches a threshold chosen on held-out rows so that the selective risk is at
most a target with a stated probability (SGR or learn-then-test);
:func:`cost_sensitive_predict`, :class:`CostSensitiveClassifier` and
:func:`expected_cost` decide and score with a cost matrix.
"""

from ._cost import (
    CostSensitiveClassifier,
    bayes_decision_cost,
    check_cost_matrix,
    cost_sensitive_predict,
    expected_cost,
    make_cost_scorer,
)
from ._selective import NoValidThresholdWarning, SelectiveClassifier

__all__ = [
    "CostSensitiveClassifier",
    "NoValidThresholdWarning",
    "SelectiveClassifier",
    "bayes_decision_cost",
    "check_cost_matrix",
    "cost_sensitive_predict",
    "expected_cost",
    "make_cost_scorer",
]
