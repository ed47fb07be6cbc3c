"""CorrectnessCalibrator: P(correct) from a scalar score, against scikit-learn's
logistic regression and isotonic regression and hand-computed cases.

scikit-learn's common regressor checks are not run: they draw X with many
columns and real-valued targets, both outside this estimator's domain (one
score per answer, targets in [0, 1]); the contracts they check that apply
(parameter validation, clone, pickle, weights, input untouched, fitted
checks) are tested here directly.
"""

import pickle
import warnings

import numpy as np
import pytest
from scipy.sparse import csr_matrix
from sklearn.base import clone
from sklearn.exceptions import NotFittedError
from sklearn.isotonic import IsotonicRegression
from sklearn.linear_model import LogisticRegression
from sklearn.utils.estimator_checks import check_param_validation

from skcal.llm import CorrectnessCalibrator


def _problem(seed, n=400):
    rng = np.random.default_rng(seed)
    score = rng.normal(size=n)
    correct = (rng.random(n) < 1 / (1 + np.exp(-(1.7 * score - 0.4)))).astype(int)
    return score, correct


def _unpenalised_logistic():
    # C = inf is "no penalty" in every supported scikit-learn release
    return LogisticRegression(C=np.inf, tol=1e-12, max_iter=10_000)


def test_platt_equals_unpenalised_logistic_regression():
    score, correct = _problem(0)
    cal = CorrectnessCalibrator().fit(score, correct)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = _unpenalised_logistic().fit(score[:, None], correct)
    np.testing.assert_allclose(cal.coef_, ref.coef_[0, 0], rtol=1e-6)
    np.testing.assert_allclose(cal.intercept_, ref.intercept_[0], rtol=1e-6)
    grid = np.linspace(-3, 3, 7)
    np.testing.assert_allclose(
        cal.predict(grid), ref.predict_proba(grid[:, None])[:, 1], rtol=1e-6
    )


def test_fractional_targets_equal_weighted_duplicated_rows():
    # a target of 0.3 = a correct row of weight 0.3 plus a wrong one of 0.7
    rng = np.random.default_rng(1)
    score = rng.normal(size=300)
    grade = rng.random(300) * (score > 0) * 0.8 + 0.1
    w = rng.random(300) + 0.5
    cal = CorrectnessCalibrator().fit(score, grade, sample_weight=w)
    X2 = np.concatenate([score, score])[:, None]
    y2 = np.r_[np.ones(300), np.zeros(300)]
    w2 = np.r_[w * grade, w * (1 - grade)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = _unpenalised_logistic().fit(X2, y2, sample_weight=w2)
    np.testing.assert_allclose(
        cal.predict(score), ref.predict_proba(score[:, None])[:, 1], rtol=1e-6
    )
    iso = CorrectnessCalibrator(method="isotonic").fit(score, grade, sample_weight=w)
    iso_ref = IsotonicRegression(out_of_bounds="clip").fit(
        score, grade, sample_weight=w
    )
    np.testing.assert_allclose(iso.predict(score), iso_ref.predict(score))


def test_isotonic_by_hand_on_verbalised_confidences():
    # PAV by hand: the mean correctness of each confidence level, merged
    # where it decreases: 0.6 -> 1/4, 0.8 -> 3/4 and 0.9 -> 2/4 merge to 5/8
    verbal = np.array([0.6] * 4 + [0.8] * 4 + [0.9] * 4)
    correct = np.array([1, 0, 0, 0, 1, 1, 1, 0, 1, 1, 0, 0])
    cal = CorrectnessCalibrator(method="isotonic", input="proba").fit(verbal, correct)
    np.testing.assert_allclose(cal.predict([0.6, 0.8, 0.9]), [0.25, 0.625, 0.625])
    # clipped outside the range seen, and in [0, 1]
    np.testing.assert_allclose(cal.predict([0.0, 1.0]), [0.25, 0.625])


def test_proba_input_uses_the_logit():
    score, correct = _problem(2)
    conf = 1 / (1 + np.exp(-score))
    a = CorrectnessCalibrator(input="proba").fit(conf, correct)
    b = CorrectnessCalibrator().fit(score, correct)
    np.testing.assert_allclose(a.predict(conf), b.predict(score), rtol=1e-8)


def test_separated_scores_warn():
    score = np.array([-2.0, -1.0, 1.0, 2.0])
    with pytest.warns(Warning, match="separate correct from wrong answers"):
        CorrectnessCalibrator().fit(score, [0, 0, 1, 1])


def test_bad_input_gets_a_clear_error():
    cal = CorrectnessCalibrator()
    with pytest.raises(ValueError, match="0 or 1 .* got values from 0 to 2"):
        cal.fit([0.1, 0.2, 0.3], [0, 1, 2])
    with pytest.raises(ValueError, match="one confidence score per answer"):
        cal.fit(np.zeros((3, 2)), [0, 1, 1])
    with pytest.raises(
        ValueError, match=r"input='proba' needs confidences in \[0, 1\]"
    ):
        CorrectnessCalibrator(input="proba").fit([0.5, 1.5], [0, 1])
    with pytest.raises(ValueError, match="requires y to be passed"):
        cal.fit([0.1, 0.2], None)
    with pytest.raises(TypeError, match="[Ss]parse"):
        cal.fit(csr_matrix(np.ones((3, 1))), [0, 1, 1])
    with pytest.raises(ValueError, match="NaN"):
        cal.fit([0.1, np.nan], [0, 1])
    with pytest.raises(NotFittedError):
        CorrectnessCalibrator().predict([0.1])


@pytest.mark.parametrize("method", ["platt", "isotonic"])
def test_contracts(method):
    est = CorrectnessCalibrator(method=method)
    check_param_validation("CorrectnessCalibrator", est)
    score, correct = _problem(3, n=60)
    X = score.copy()
    fitted = clone(est).fit(X, correct)
    np.testing.assert_array_equal(X, score)
    again = pickle.loads(pickle.dumps(fitted))
    np.testing.assert_array_equal(again.predict(X), fitted.predict(X))
    p = fitted.predict(X)
    assert np.all((p >= 0) & (p <= 1))
    # integer weights equal repeated rows
    w = np.arange(len(X)) % 3
    weighted = clone(est).fit(X, correct, sample_weight=w)
    repeated = clone(est).fit(np.repeat(X, w), np.repeat(correct, w))
    np.testing.assert_allclose(weighted.predict(X), repeated.predict(X), atol=1e-8)
