"""Held-out probabilities of quick classifiers on scikit-learn's real data
sets, shared by the tests of the metrics compared with reference packages."""

import functools
import warnings

from sklearn.datasets import load_breast_cancer, load_digits, load_wine
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split

LOADERS = {
    "digits": load_digits,
    "wine": load_wine,
    "breast_cancer": load_breast_cancer,
}


@functools.cache
def real_scores(name):
    """Held-out probabilities of a quick logistic regression on real data."""
    X, y = LOADERS[name](return_X_y=True)
    X = (X - X.mean(0)) / (X.std(0) + 1e-12)
    X_fit, X_test, y_fit, y_test = train_test_split(
        X, y, test_size=0.5, random_state=0, stratify=y
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        clf = LogisticRegression(C=0.05, max_iter=300).fit(X_fit, y_fit)
    return y_test, clf.predict_proba(X_test)
