"""scikit-learn pass-through classifiers (prefit, frozen) for ``peers``.

The calibrator sees exactly the scores of the given probabilities. This
module imports scikit-learn; ``peers.sklearn_calibrated`` imports it lazily.
"""

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils.metaestimators import available_if


def _log(P):
    return np.log(np.clip(P, np.finfo(np.float64).tiny, None))


class ScoresOf(ClassifierMixin, BaseEstimator):
    """A 'classifier' whose outputs are computed from probabilities ``X``.

    ``score="proba"``: ``predict_proba(X) = X``; ``"log"``:
    ``decision_function(X) = log X``; ``"log_odds"``: ``decision_function(X) =
    log X - log(1 - X)`` column by column.
    """

    def __init__(self, score="proba"):
        self.score = score

    def fit(self, X, y):
        self.classes_ = np.unique(y)
        return self

    def _has_proba(self):
        return self.score == "proba"

    def _has_decision(self):
        return self.score != "proba"

    @available_if(_has_proba)
    def predict_proba(self, X):
        return np.asarray(X)

    @available_if(_has_decision)
    def decision_function(self, X):
        X = np.asarray(X)
        if self.score == "log":
            return _log(X)
        return _log(X) - _log(1.0 - X)

    def predict(self, X):
        return self.classes_[np.argmax(X, axis=1)]
