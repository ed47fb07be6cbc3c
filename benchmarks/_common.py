"""Helpers shared by the benchmark scripts (not part of the package)."""

import time

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin


class FixedLogits(ClassifierMixin, BaseEstimator):
    """A prefit 'classifier' whose decision function returns X itself.

    Lets scikit-learn's CalibratedClassifierCV calibrate precomputed logits
    through FrozenEstimator. For two classes it returns d with logits
    (-d, d) = (z0 - z1, z1 - z0) / 2, which sklearn expects.
    """

    def fit(self, X, y):
        self.classes_ = np.unique(y)
        return self

    def decision_function(self, X):
        X = np.asarray(X)
        if X.shape[1] == 2:
            return (X[:, 1] - X[:, 0]) / 2
        return X

    def predict(self, X):
        return self.classes_[np.argmax(X, axis=1)]


def best_time(fn, repeat=3):
    """Smallest wall time of ``repeat`` calls of ``fn()`` and its last result."""
    times, result = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return min(times), result
