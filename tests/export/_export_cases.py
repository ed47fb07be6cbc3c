"""Fitted calibrators and the scores they are exported for, shared by the
export tests: generated logits, and the held-out logits of a logistic
regression on scikit-learn's digits (10 classes, data shipped in the
package)."""

import functools
import warnings

import numpy as np
from scipy.special import softmax
from sklearn.datasets import load_digits
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split

import skcal
from skcal.utils._testing import make_estimator, make_miscalibrated_logits

#: the calibrators of the parametric family, each with a to_torch method
PARAMETRIC = [
    "TemperatureScaling",
    "VectorScaling",
    "MatrixScaling",
    "BiasCorrectedTemperatureScaling",
    "DirichletCalibrator",
    "DirichletCalibratorCV",
    "StructuredMatrixScaling",
    "StructuredVectorScaling",
    "EnsembleTemperatureScaling",
    "ClassTemperatureScaling",
    "ParameterizedTemperatureScaling",
    "SMARTCalibrator",
    "IdentityCalibrator",
]
#: quick fits: a few epochs are enough to export a trained network, one
#: point of the grid a cross-validated choice
_QUICK = {
    "ParameterizedTemperatureScaling": {"max_iter": 20},
    "SMARTCalibrator": {"max_iter": 20},
    "DirichletCalibratorCV": {
        "reg_lambdas": [1e-2],
        "reg_mus": [1e-2],
        "include_auto": False,
    },
}
#: extra parameters of a second variant of a calibrator
VARIANTS = {"ClassTemperatureScaling": {"mode": "predicted"}}


@functools.cache
def digits_logits():
    """Held-out logits and labels of a logistic regression on digits."""
    X, y = load_digits(return_X_y=True)
    X_fit, X_cal, y_fit, y_cal = train_test_split(
        X / 16.0, y, test_size=0.5, random_state=0, stratify=y
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        clf = LogisticRegression(C=1.0, max_iter=300).fit(X_fit, y_fit)
    return clf.decision_function(X_cal), y_cal


@functools.cache
def scores(data: str, input: str):
    """``(X, y)``: ``data`` in {"generated", "wide", "digits"} as logits or
    as their softmax. "wide" logits (scale 40) give probabilities far below
    float32's range."""
    if data == "digits":
        X, y = digits_logits()
    elif data == "wide":
        X, y = make_miscalibrated_logits(300, 5, scale=10.0, temperature=4.0,
                                         random_state=1)  # fmt: skip
    else:
        X, y = make_miscalibrated_logits(300, 4, temperature=3.0, random_state=0)
    return (X if input == "logits" else softmax(X, axis=1)), y


@functools.cache
def fitted(name: str, data: str, input: str, variant: bool = False):
    """A calibrator ``name`` fitted on :func:`scores`."""
    X, y = scores(data, input)
    params = {"input": input, **(VARIANTS.get(name, {}) if variant else {})}
    params.update(_QUICK.get(name, {}))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # convergence, input warnings
        return make_estimator(getattr(skcal, name), **params).fit(X, y)


def as_rows(X):
    """``X`` as a writeable float64 array (one row and all of them)."""
    return np.ascontiguousarray(X, dtype=np.float64)


@functools.cache
def digits_embeddings():
    """Digits pixels (64 features) and a logistic regression's head on the
    other half: ``(X, y, coef, intercept)`` of 900 held-out rows."""
    X, y = load_digits(return_X_y=True)
    X_fit, X_cal, y_fit, y_cal = train_test_split(
        X / 16.0, y, test_size=0.5, random_state=0, stratify=y
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        clf = LogisticRegression(C=1.0, max_iter=300).fit(X_fit, y_fit)
    return X_cal, y_cal, clf.coef_, clf.intercept_
