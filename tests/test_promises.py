"""A promise flag is a statement a test can contradict, in both directions.

``tests/test_properties.py`` checks every declared promise on drawn inputs
(``_keeps_argmax``: the argmax of the scores is the argmax of
``predict_proba``; ``_shift_invariant``: adding a constant to a row of logits
changes nothing). A class that keeps a promise without declaring it is caught
here: for every score calibrator that does not declare a promise, one of a few
fixed problems must show it broken (a witness). A class that keeps the promise
on all of them has forgotten its flag (step 1 of CONTRIBUTING.md's recipe).
"""

import warnings

import numpy as np
import pytest

from skcal.discovery import all_estimators
from skcal.utils._testing import make_estimator, make_miscalibrated_logits

SCORE = [cls for _, cls in all_estimators("score")]


def _problems():
    """Calibration sets where a map that may move the argmax or read the
    level of the logits does: over-confident, biased towards a class, and
    under-confident with unequal class frequencies."""
    rng = np.random.default_rng(0)
    for seed, temperature in ((0, 2.5), (1, 0.5)):
        X, y = make_miscalibrated_logits(
            1500, 4, temperature=temperature, random_state=seed
        )
        yield X, y
        # a bias: class 0's scores lifted by 1.5 (its probability over-stated)
        Xb = X.copy()
        Xb[:, 0] += 1.5
        yield Xb, y
    # labels that disagree with the scores' ranking on a third of the rows
    X = 2.0 * rng.normal(size=(1500, 4))
    y = np.where(rng.random(1500) < 0.35, (X.argmax(1) + 1) % 4, X.argmax(1))
    yield X, y


def _fitted(cls, X, y):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return make_estimator(cls, device="cpu").fit(X, y)


def _moves_argmax(cls) -> bool:
    for X, y in _problems():
        est = _fitted(cls, X, y)
        if np.any(est.predict_proba(X).argmax(axis=1) != X.argmax(axis=1)):
            return True
    return False


def _reads_the_level(cls) -> bool:
    rng = np.random.default_rng(1)
    for X, y in _problems():
        est = _fitted(cls, X, y)
        shift = rng.normal(scale=3.0, size=(len(X), 1))
        moved = _fitted(cls, X + shift, y).predict_proba(X + shift)
        if np.abs(moved - est.predict_proba(X)).max() > 1e-6:
            return True
    return False


@pytest.mark.parametrize("cls", SCORE, ids=lambda c: c.__name__)
def test_an_undeclared_argmax_promise_has_a_witness(cls):
    if getattr(cls, "_keeps_argmax", None):
        pytest.skip("declared: tests/test_properties.py checks the promise")
    assert _moves_argmax(cls), (
        f"{cls.__name__} kept the argmax of its scores on every witness "
        "problem: declare _keeps_argmax (and document the promise), or add a "
        "problem to _problems() where it moves the argmax"
    )


@pytest.mark.parametrize("cls", SCORE, ids=lambda c: c.__name__)
def test_an_undeclared_shift_invariance_has_a_witness(cls):
    if getattr(cls, "_shift_invariant", False):
        pytest.skip("declared: tests/test_properties.py checks the promise")
    if getattr(cls(), "input", "logits") != "logits":
        pytest.skip("reads probabilities by default: shifts do not apply")
    assert _reads_the_level(cls), (
        f"{cls.__name__} gave the same probabilities for logits shifted by a "
        "constant per row on every witness problem: declare _shift_invariant, "
        "or add a problem to _problems() where the level of the logits matters"
    )
