"""Data shared by the tests of the local calibrators.

Used by ``test_local_baselines.py`` (the contract every local calibrator
meets) and by the per-method ``test_kcal.py``, ``test_local_net.py`` and
``test_procal.py``; each wraps these in a module-scoped fixture.
"""

from skcal.utils._testing import make_region_miscalibrated_embeddings


def region_data():
    """800 embeddings of 16 features, 3 classes: ``(X, y, coef, intercept)``."""
    X, y, coef, intercept, _ = make_region_miscalibrated_embeddings(
        800, 3, random_state=0
    )
    return X, y, coef, intercept


def absent_region_data():
    """5 classes, 8 features: ``(X, y, X_test, y_test, coef, intercept)``."""
    X, y, coef, intercept, _ = make_region_miscalibrated_embeddings(
        2000, 5, n_features=8, random_state=3
    )
    return X[:1000], y[:1000], X[1000:], y[1000:], coef, intercept
