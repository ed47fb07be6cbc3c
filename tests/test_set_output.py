"""``set_output(transform="pandas")``: probabilities as a DataFrame by class."""

import numpy as np
import pytest
from sklearn.base import clone

from skcal import TemperatureScaling
from skcal.base import BaseLocalCalibrator
from skcal.discovery import all_estimators
from skcal.utils._testing import make_estimator, make_miscalibrated_logits

pd = pytest.importorskip("pandas")

ESTIMATORS = [cls for _, cls in all_estimators()]
METHODS = ["predict_proba", "predict_log_proba", "decision_function"]
CLASSES = np.array(["ant", "bee", "cat"])


def _fitted(cls, X, y):
    est = make_estimator(cls, device="cpu")
    if issubclass(cls, BaseLocalCalibrator) and est._uses_head:
        rng = np.random.default_rng(1)
        est.set_params(coef=rng.normal(size=(3, X.shape[1])), intercept=np.zeros(3))
    return est.fit(X, y)


def _data(cls):
    if issubclass(cls, BaseLocalCalibrator):
        rng = np.random.default_rng(0)
        X = rng.normal(size=(300, 4))
        y_index = (X[:, 0] > 0.3).astype(int) + (X[:, 1] > 0.5)
    else:
        X, y_index = make_miscalibrated_logits(300, 3, temperature=2.0, random_state=0)
    return X, CLASSES[y_index]


@pytest.mark.filterwarnings("ignore::skcal.exceptions.GridEdgeWarning")
@pytest.mark.parametrize("cls", ESTIMATORS, ids=lambda c: c.__name__)
def test_pandas_output_is_the_array_named_by_class(cls):
    X, y = _data(cls)
    est = _fitted(cls, X, y)
    index = pd.Index([f"r{i}" for i in range(X.shape[0] - 50, 2 * X.shape[0] - 50)])
    frame = pd.DataFrame(X, index=index)  # unnamed columns: read by position
    arrays = {m: getattr(est, m)(X) for m in METHODS if hasattr(est, m)}
    labels = est.predict(X)
    assert est.set_output(transform="pandas") is est
    for method, expected in arrays.items():
        for given, want_index in ((X, pd.RangeIndex(X.shape[0])), (frame, index)):
            out = getattr(est, method)(given)
            assert isinstance(out, pd.DataFrame), method
            assert list(out.columns) == list(est.classes_) == list(CLASSES)
            pd.testing.assert_index_equal(out.index, want_index)
            np.testing.assert_array_equal(out.to_numpy(), expected)
    # labels stay an array, computed from the probabilities as before
    np.testing.assert_array_equal(est.predict(frame), labels)
    assert isinstance(est.predict(frame), np.ndarray)
    assert est.score(X, y) == pytest.approx(_fitted(cls, X, y).score(X, y))
    # back to arrays
    est.set_output(transform="default")
    assert isinstance(est.predict_proba(frame), np.ndarray)


def test_set_output_is_kept_by_clone_and_refit_and_checked():
    X, y = _data(TemperatureScaling)
    est = TemperatureScaling(device="cpu").set_output(transform="pandas")
    assert est.set_output() is est  # None leaves the choice unchanged
    twin = clone(est).fit(X, y)
    assert isinstance(twin.predict_proba(X), pd.DataFrame)
    assert twin.get_params() == TemperatureScaling(device="cpu").get_params()
    with pytest.raises(ValueError, match=r"must be one of \['default', 'pandas'\]"):
        est.set_output(transform="polars")


def test_global_transform_output_is_not_followed():
    # sklearn applies transform_output to transform only, never predict_proba
    import sklearn

    X, y = _data(TemperatureScaling)
    est = TemperatureScaling(device="cpu").fit(X, y)
    with sklearn.config_context(transform_output="pandas"):
        assert isinstance(est.predict_proba(X), np.ndarray)


def test_integer_classes_and_a_shuffled_index():
    X, y_index = make_miscalibrated_logits(200, 2, temperature=2.0, random_state=0)
    y = np.array([3, 7])[y_index]
    index = pd.Index(np.random.default_rng(0).permutation(200) * 3, name="id")
    frame = pd.DataFrame(X, index=index)
    est = TemperatureScaling(device="cpu").fit(X, y)
    expected = est.predict_proba(X)
    out = est.set_output(transform="pandas").predict_proba(frame)
    assert list(out.columns) == [3, 7]
    pd.testing.assert_index_equal(out.index, index)
    np.testing.assert_array_equal(out.to_numpy(), expected)
