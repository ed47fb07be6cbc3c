"""Warnings name the user's line, not a line of skcal or scikit-learn."""

import warnings

import numpy as np
import pytest

from skcal import MatrixScaling, TemperatureScaling, VQLocalCalibrator
from skcal.exceptions import ConvergenceWarning, MissingClassWarning
from skcal.utils._testing import make_miscalibrated_logits
from skcal.utils._warnings import warn


def _caught(fn):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fn()
    return caught


def test_warn_skips_library_frames():
    def library_like():  # this test module is not skcal: it is the user
        warn("hello", UserWarning)

    caught = _caught(library_like)
    assert caught[0].filename == __file__


@pytest.mark.parametrize(
    "fit, category",
    [
        (
            lambda X, y: TemperatureScaling(classes=[0, 1, 2, 3], device="cpu").fit(
                X[y < 3], y[y < 3]
            ),
            MissingClassWarning,
        ),
        (
            lambda X, y: MatrixScaling(reg_lambda=0.0, max_iter=2, device="cpu").fit(
                X, y
            ),
            ConvergenceWarning,
        ),
    ],
)
def test_calibrator_warnings_point_at_the_fit_call(fit, category):
    X, y = make_miscalibrated_logits(300, 4, temperature=2.0, random_state=0)
    caught = [w for w in _caught(lambda: fit(X, y)) if w.category is category]
    assert caught, f"no {category.__name__}"
    assert all(w.filename == __file__ for w in caught), [w.filename for w in caught]


def test_local_calibrator_missing_class_warning_points_at_the_fit_call():
    rng = np.random.default_rng(0)
    E = rng.normal(size=(200, 8))
    y = (E[:, 0] > 0).astype(int)
    cal = VQLocalCalibrator(
        classes=[0, 1, 2],
        n_slots=2,
        n_codewords=4,
        max_iter=2,
        device="cpu",
        random_state=0,
    )
    caught = [
        w for w in _caught(lambda: cal.fit(E, y)) if w.category is MissingClassWarning
    ]
    assert caught and all(w.filename == __file__ for w in caught)
