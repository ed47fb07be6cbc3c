"""Every form of valid input an estimator may get: views of any stride, torch
tensors, dataframes whose columns name the classes, and labels whose types
cannot be ordered or are missing (a clear error)."""

import numpy as np
import pytest
import torch
from sklearn.base import clone

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


# ================================= dataframes whose columns name the classes
#: Income classes in their natural order; sorted, "<10k" comes last.
INCOME = np.array(["10-15k", "15-20k", "20-25k", "<10k"])
NATURAL = [3, 0, 1, 2]  # "<10k", "10-15k", "15-20k", "20-25k"


@pytest.fixture(scope="module")
def income(scores):
    """Logits in classes_ order (sorted labels) and the labels as strings."""
    X, y = scores
    return X, INCOME[y]


@pytest.mark.filterwarnings("ignore::skcal.exceptions.InputWarning")
@pytest.mark.parametrize("cls", ["TemperatureScaling", "StructuredMatrixScaling"])
@pytest.mark.parametrize("input", ["logits", "proba"])
def test_columns_named_after_the_classes_are_read_by_name(cls, input, income):
    """Issue 49: a dataframe whose columns are the classes in their natural
    order (not classes_' sorted order) gives the model of the array in
    classes_ order, and its predictions; the user's frame is not changed."""
    pd = pytest.importorskip("pandas")
    from scipy.special import softmax

    X, y = income
    X = softmax(X, axis=1) if input == "proba" else X
    est = make_estimator(dict(all_estimators())[cls], device="cpu", input=input)
    frame = pd.DataFrame(X[:, NATURAL], columns=INCOME[NATURAL])
    before = frame.copy()
    reference = clone(est).fit(X, y)
    named = clone(est).fit(frame, y)
    pd.testing.assert_frame_equal(frame, before)
    np.testing.assert_array_equal(named.classes_, INCOME)
    assert list(named.feature_names_in_) == list(INCOME[NATURAL])
    expected = reference.predict_proba(X)
    np.testing.assert_allclose(named.predict_proba(frame), expected, atol=1e-9)
    np.testing.assert_array_equal(named.predict(frame), reference.predict(X))
    # predictions read a frame by its names, in any order
    shuffled = pd.DataFrame(X[:, [2, 3, 1, 0]], columns=INCOME[[2, 3, 1, 0]])
    np.testing.assert_allclose(named.predict_proba(shuffled), expected, atol=1e-9)
    np.testing.assert_array_equal(named.predict(shuffled), reference.predict(X))
    assert named.score(shuffled, y) == pytest.approx(reference.score(X, y))
    # explicit classes set the order; the names follow it
    order = INCOME[NATURAL]
    explicit = clone(est).set_params(classes=order).fit(frame, y)
    np.testing.assert_allclose(
        explicit.predict_proba(shuffled), expected[:, NATURAL], atol=1e-9
    )
    # an array after a fit on names in another order: which order is unknown
    with pytest.raises(ValueError, match="cannot tell which order"):
        named.predict_proba(X)


def test_columns_that_name_some_classes_are_refused(income):
    pd = pytest.importorskip("pandas")
    X, y = income
    for columns, match in [
        (["<10k", "10-15k", "15-20k", "20-25K"], r"no column for \['20-25k'\]"),
        (["<10k", "10-15k", "15-20k", "other"], r"naming no class \['other'\]"),
    ]:
        frame = pd.DataFrame(X, columns=columns)
        with pytest.raises(ValueError, match=match) as info:
            TemperatureScaling(device="cpu").fit(frame, y)
        assert "Name one column after each class" in str(info.value)
    named = TemperatureScaling(device="cpu").fit(pd.DataFrame(X, columns=INCOME), y)
    with pytest.raises(ValueError, match="named after classes"):
        named.predict_proba(pd.DataFrame(X[:, :3], columns=INCOME[:3]))


@pytest.mark.filterwarnings("ignore")
def test_columns_not_named_after_the_classes_keep_their_order(scores):
    """pandas' default columns 0..K-1, names of no class and numbered names
    are positions, as before; integer names that are the (integer) classes
    are read by name."""
    pd = pytest.importorskip("pandas")
    X, y = scores
    expected = TemperatureScaling(device="cpu").fit(X, y).predict_proba(X)
    shifted = y + 1  # classes 1..4, against columns 0..3
    for frame, labels in [
        (pd.DataFrame(X), y),
        (pd.DataFrame(X), shifted),
        (pd.DataFrame(X, columns=[f"logit_{j}" for j in range(4)]), y),
        (pd.DataFrame(X, columns=["0", "1", "2", "3"]), shifted),
        (pd.DataFrame(X[:, [2, 0, 3, 1]], columns=[2, 0, 3, 1]), y),
        (pd.DataFrame(X[:, [2, 0, 3, 1]], columns=["2", "0", "3", "1"]), y),
    ]:
        est = TemperatureScaling(device="cpu").fit(frame, labels)
        np.testing.assert_allclose(est.predict_proba(frame), expected, atol=1e-12)


@pytest.mark.filterwarnings("ignore")
def test_search_reads_named_columns_once(income):
    """CalibratorSearchCV on a class-named frame: the search and its refit
    see the columns in classes_ order, as from the array."""
    pd = pytest.importorskip("pandas")
    X, y = income
    frame = pd.DataFrame(X[:, NATURAL], columns=INCOME[NATURAL])
    reference = clone(SEARCH).fit(X, y)
    named = clone(SEARCH).fit(frame, y)
    assert named.selected_ == reference.selected_
    np.testing.assert_allclose(
        named.cv_results_["mean_test_score"],
        reference.cv_results_["mean_test_score"],
        rtol=1e-9,
    )
    np.testing.assert_allclose(
        named.predict_proba(frame), reference.predict_proba(X), atol=1e-9
    )


def test_metrics_read_class_named_columns(income):
    pd = pytest.importorskip("pandas")
    from scipy.special import softmax
    from sklearn.metrics import log_loss

    from skcal.metrics import (
        brier_score,
        confidence_interval,
        expected_calibration_error,
        metric_state,
        negative_log_likelihood,
    )

    X, y = income
    P = softmax(X, axis=1)
    frame = pd.DataFrame(P[:, NATURAL], columns=INCOME[NATURAL])
    # scikit-learn's log loss of the array in sorted order is the reference
    assert negative_log_likelihood(y, frame) == pytest.approx(log_loss(y, P))
    assert negative_log_likelihood(y, frame, labels=INCOME[NATURAL]) == pytest.approx(
        log_loss(y, P)
    )
    for metric in (brier_score, expected_calibration_error):
        assert metric(y, frame) == pytest.approx(metric(y, P), rel=1e-12)
    state = metric_state("expected_calibration_error", labels=INCOME)
    state.update(y, frame)
    assert state.compute() == pytest.approx(expected_calibration_error(y, P))
    interval = confidence_interval(
        expected_calibration_error, y, frame, n_resamples=20, random_state=0
    )
    same = confidence_interval(
        expected_calibration_error, y, P, n_resamples=20, random_state=0
    )
    assert interval.estimate == pytest.approx(same.estimate)
    with pytest.raises(ValueError, match="y_proba's columns are named after"):
        expected_calibration_error(y, frame.rename(columns={"<10k": "<10K"}))


@pytest.mark.parametrize(
    "est",
    _score_estimators() + [make_estimator(cls, device="cpu") for cls in LOCAL],
    ids=_ids(_score_estimators()) + [cls.__name__ for cls in LOCAL],
)
def test_label_mistakes_are_explained(est, scores, embeddings):
    """Issue 49: integer-coded labels against string classes, and missing
    labels, get what went wrong and the fix (never astype(str), which would
    make a class called 'nan')."""
    pd = pytest.importorskip("pandas")
    X = embeddings[0] if type(est) in LOCAL else scores[0]
    y = scores[1]
    coded = clone(est).set_params(classes=INCOME)
    with pytest.raises(ValueError, match=r"y holds integers 0\.\.3 but classes are "):
        coded.fit(X, y)
    for missing in (None, np.nan, pd.NA):
        labels = INCOME[y].astype(object)
        labels[[3, 17]] = missing
        with pytest.raises(ValueError) as info:
            clone(est).fit(X, labels)
        message = str(info.value)
        assert "y has 2 missing label(s) at rows [3, 17]: drop those rows" in message
        assert "astype" not in message
    floats = y.astype(float)
    floats[[3, 17]] = np.nan
    with pytest.raises(
        ValueError, match=r"y has 2 missing label\(s\) at rows \[3, 17\]"
    ):
        clone(est).fit(X, floats)


def test_metrics_explain_label_mistakes(scores):
    pd = pytest.importorskip("pandas")
    from scipy.special import softmax

    from skcal.metrics import expected_calibration_error, negative_log_likelihood

    X, y = scores
    P = softmax(X, axis=1)
    for metric in (expected_calibration_error, negative_log_likelihood):
        with pytest.raises(
            ValueError,
            match=r"y_true holds integers 0\.\.3 but labels are strings "
            r"\['10-15k', '15-20k', '20-25k', '<10k'\]: map them with labels\[y_true\]",
        ):
            metric(y, P, labels=INCOME.astype(object))
        labels = pd.Series(INCOME[y], dtype="string")
        labels[[5, 6, 7]] = pd.NA
        with pytest.raises(ValueError, match=r"y_true has 3 missing label\(s\)"):
            metric(labels, P)
