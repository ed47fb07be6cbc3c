"""IdentityCalibrator: no calibration, checked against scipy and scikit-learn."""

import numpy as np
import pytest
from scipy.special import log_softmax, softmax
from sklearn.metrics import log_loss
from sklearn.model_selection import GridSearchCV, StratifiedKFold
from sklearn.pipeline import Pipeline

from skcal import IdentityCalibrator, TemperatureScaling
from skcal.utils._testing import make_miscalibrated_logits


def test_logits_give_their_softmax():
    X, y = make_miscalibrated_logits(200, 4, temperature=2.0, random_state=0)
    X_before = X.copy()
    cal = IdentityCalibrator().fit(X, y)
    np.testing.assert_allclose(cal.predict_proba(X), softmax(X, axis=1), rtol=1e-13)
    np.testing.assert_allclose(
        cal.predict_log_proba(X), log_softmax(X, axis=1), rtol=1e-12, atol=1e-14
    )
    # logits up to a constant per row: the row maximum is 0
    np.testing.assert_allclose(
        cal.decision_function(X), X - X.max(axis=1, keepdims=True), atol=1e-14
    )
    np.testing.assert_array_equal(cal.predict(X), np.argmax(X, axis=1))
    np.testing.assert_allclose(
        cal.score(X, y), -log_loss(y, softmax(X, axis=1)), rtol=1e-12
    )
    np.testing.assert_array_equal(X, X_before)  # nothing modified in place
    assert cal.n_features_in_ == 4


def test_probabilities_are_validated_and_renormalised():
    P = np.array([[0.5, 0.3, 0.2], [0.0, 0.25, 0.75], [0.1, 0.1, 0.80004]])
    cal = IdentityCalibrator(input="proba").fit(P, [0, 2, 1])
    expected = P / P.sum(axis=1, keepdims=True)  # the last row sums to 1.00004
    out = cal.predict_proba(P)
    np.testing.assert_allclose(out, expected, rtol=1e-15, atol=3e-308)
    assert out[1, 0] > 0  # floored at 2.2e-308, not 0: its log is finite
    np.testing.assert_allclose(
        cal.decision_function(P)[[0, 2]], np.log(expected[[0, 2]]), rtol=1e-14
    )
    assert cal.decision_function(P)[1, 0] == pytest.approx(np.log(2.2250738585e-308))
    with pytest.raises(ValueError, match="sum"):
        cal.predict_proba(np.array([[0.5, 0.6, 0.2]]))


def test_fit_records_the_classes_and_validates_weights():
    X, y = make_miscalibrated_logits(60, 3, random_state=0)
    labels = np.array(["cat", "dog", "eel"])[y]
    cal = IdentityCalibrator().fit(X, labels, sample_weight=np.ones(60))
    np.testing.assert_array_equal(cal.classes_, ["cat", "dog", "eel"])
    np.testing.assert_array_equal(cal.predict(X), cal.classes_[np.argmax(X, axis=1)])
    with pytest.raises(ValueError, match="Negative values"):
        IdentityCalibrator().fit(X, y, sample_weight=-np.ones(60))


def test_is_the_no_calibration_candidate_of_a_grid_search():
    """GridSearchCV over calibrators can include "no calibration"; on
    over-confident logits temperature scaling beats it."""
    X, y = make_miscalibrated_logits(600, 3, temperature=3.0, random_state=0)
    grid = GridSearchCV(
        Pipeline([("cal", IdentityCalibrator())]),
        {"cal": [IdentityCalibrator(), TemperatureScaling(device="cpu")]},
        cv=3,
    ).fit(X, y)
    assert isinstance(grid.best_params_["cal"], TemperatureScaling)
    # the identity's split scores are the held-out log losses of the softmax
    for k, (_, test) in enumerate(StratifiedKFold(3).split(X, y)):
        expected = -log_loss(y[test], softmax(X[test], axis=1), labels=[0, 1, 2])
        np.testing.assert_allclose(
            grid.cv_results_[f"split{k}_test_score"][0], expected, rtol=1e-12
        )
