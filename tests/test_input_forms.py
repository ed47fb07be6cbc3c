"""Every form of valid input an estimator may get: views of any stride, torch
tensors, and labels whose types cannot be ordered (a clear error)."""

import numpy as np
import pytest
import torch

from skcal import CalibratorSearchCV, IdentityCalibrator, TemperatureScaling
from skcal.discovery import all_estimators
from skcal.utils._testing import make_estimator, make_miscalibrated_logits

SCORE = [cls for _, cls in all_estimators("score")]
LOCAL = [cls for _, cls in all_estimators("local")]
SEARCH = CalibratorSearchCV(
    candidates=[IdentityCalibrator(), TemperatureScaling(device="cpu")],
    cv=2,
    random_state=0,
)


@pytest.fixture(scope="module")
def scores():
    return make_miscalibrated_logits(300, 4, temperature=2.0, random_state=0)


@pytest.fixture(scope="module")
def embeddings():
    rng = np.random.default_rng(0)
    centers = rng.normal(size=(4, 8))
    y = rng.integers(0, 4, 300)
    return centers[y] + rng.normal(size=(300, 8)), y


def _score_estimators():
    return [make_estimator(cls, device="cpu") for cls in SCORE] + [SEARCH]


def _ids(estimators):
    return [type(e).__name__ for e in estimators]


def _fitted_pair(est, X, y):
    """The estimator fitted on contiguous rows, and a clone for the view."""
    from sklearn.base import clone

    return clone(est).fit(np.ascontiguousarray(X), y), clone(est)


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("est", _score_estimators(), ids=_ids(_score_estimators()))
def test_negative_strides_equal_a_contiguous_copy(est, scores):
    """``X[::-1]``, ``y[::-1]`` and reversed columns with reversed classes are
    valid numpy input: the same model as from a contiguous copy."""
    X, y = scores
    rows = X[::-1]
    reference, model = _fitted_pair(est, rows, y[::-1].copy())
    model.fit(rows, y[::-1])
    expected = reference.predict_proba(np.ascontiguousarray(rows))
    np.testing.assert_allclose(model.predict_proba(rows), expected, rtol=1e-9)
    np.testing.assert_allclose(
        reference.predict_proba(rows), expected, rtol=1e-12, atol=0
    )
    # columns in reverse order, declared by classes
    columns = X[:, ::-1]
    reverse = est.__class__(**{**est.get_params(), "classes": [3, 2, 1, 0]})
    if isinstance(est, CalibratorSearchCV):
        reverse = est.set_params(
            candidates=[
                IdentityCalibrator(classes=[3, 2, 1, 0]),
                TemperatureScaling(device="cpu", classes=[3, 2, 1, 0]),
            ]
        )
    fitted = reverse.fit(columns, y)
    direct = reverse.fit(np.ascontiguousarray(columns), y).predict_proba(
        np.ascontiguousarray(columns)
    )
    np.testing.assert_allclose(fitted.predict_proba(columns), direct, rtol=1e-9)


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("cls", LOCAL)
def test_local_calibrators_take_negative_strides(cls, embeddings):
    X, y = embeddings
    rows = X[::-1]
    reference, model = _fitted_pair(make_estimator(cls, device="cpu"), rows, y[::-1])
    model.fit(rows, y[::-1])
    np.testing.assert_allclose(
        model.predict_proba(rows),
        reference.predict_proba(np.ascontiguousarray(rows)),
        rtol=1e-9,
    )


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("est", _score_estimators(), ids=_ids(_score_estimators()))
def test_torch_tensors_are_converted_at_the_edge(est, scores):
    """A network's logits as a CPU tensor (float32 or float64): the same
    predictions as from numpy, returned as numpy arrays."""
    X, y = scores
    for dtype in (torch.float64, torch.float32):
        X_t = torch.tensor(X, dtype=dtype)
        numpy_model, tensor_model = _fitted_pair(est, X_t.numpy(), y)
        tensor_model.fit(X_t, torch.tensor(y))
        proba = tensor_model.predict_proba(X_t)
        assert isinstance(proba, np.ndarray)
        np.testing.assert_allclose(
            proba, numpy_model.predict_proba(X_t.numpy()), rtol=1e-6
        )
        labels = tensor_model.predict(X_t)
        assert isinstance(labels, np.ndarray)


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("cls", LOCAL)
def test_local_calibrators_take_torch_tensors(cls, embeddings):
    X, y = embeddings
    numpy_model, tensor_model = _fitted_pair(make_estimator(cls, device="cpu"), X, y)
    tensor_model.fit(torch.tensor(X), torch.tensor(y))
    proba = tensor_model.predict_proba(torch.tensor(X))
    assert isinstance(proba, np.ndarray)
    np.testing.assert_allclose(proba, numpy_model.predict_proba(X), rtol=1e-9)


MIXED = [
    np.array([0, "a", 2, 3], dtype=object),
    np.array([1.5, "b", 2, 3], dtype=object),
]


@pytest.mark.parametrize("labels", MIXED, ids=["int-str", "float-str"])
@pytest.mark.parametrize(
    "est",
    _score_estimators() + [make_estimator(cls, device="cpu") for cls in LOCAL],
    ids=_ids(_score_estimators()) + [cls.__name__ for cls in LOCAL],
)
def test_labels_of_mixed_types_are_a_clear_error(est, labels, scores, embeddings):
    X = embeddings[0] if type(est) in LOCAL else scores[0]
    y = np.resize(labels, len(X))
    with pytest.raises(ValueError, match="mixes labels of different types"):
        est.fit(X, y)


@pytest.mark.filterwarnings("ignore")
def test_tensors_on_any_device_and_dtype_give_numpy(device, scores):
    """A tensor on the GPU (where one is present), a bfloat16 tensor and one
    that requires grad: numpy results equal to those of the numpy input."""
    X, y = scores
    X16 = torch.tensor(X, dtype=torch.bfloat16)
    reference = TemperatureScaling(device="cpu").fit(X16.float().numpy(), y)
    for X_t in (X16, torch.tensor(X, requires_grad=True)):
        X_t = X_t.to(device)
        model = TemperatureScaling(device=device).fit(X_t, torch.tensor(y).to(device))
        proba = model.predict_proba(X_t)
        assert isinstance(proba, np.ndarray)
        assert isinstance(model.temperature_, float | np.floating)
        expected = TemperatureScaling(device="cpu").fit(
            X_t.detach().cpu().float().numpy(), y
        )
        np.testing.assert_allclose(
            proba,
            expected.predict_proba(X_t.detach().cpu().float().numpy()),
            rtol=1e-6,
        )
    np.testing.assert_allclose(
        reference.temperature_,
        TemperatureScaling(device="cpu").fit(X16, y).temperature_,
        rtol=1e-12,
    )
    from skcal.metrics import negative_log_likelihood

    P = reference.predict_proba(X)
    assert negative_log_likelihood(torch.tensor(y), torch.tensor(P)) == pytest.approx(
        negative_log_likelihood(y, P), rel=1e-12
    )
