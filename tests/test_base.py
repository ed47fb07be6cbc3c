"""The input contract of BaseCalibrator, exercised through every calibrator."""

import pickle
import re
import warnings

import joblib
import numpy as np
import pytest
from scipy.special import log_softmax, softmax
from sklearn.base import clone
from sklearn.metrics import log_loss

from skcal import TemperatureScaling
from skcal.discovery import all_estimators
from skcal.exceptions import InputWarning, MissingClassWarning
from skcal.utils._testing import make_estimator, make_miscalibrated_logits

ESTIMATORS = [cls for _, cls in all_estimators("score")]
# Top-label calibrators whose predict is the argmax of X by definition: the
# rescaled other classes may outrank the calibrated top class.
PREDICT_KEEPS_ARGMAX = {"SplineCalibrator"}


@pytest.fixture
def data():
    return make_miscalibrated_logits(600, 4, temperature=2.0, random_state=0)


@pytest.mark.parametrize("cls", ESTIMATORS)
def test_fit_returns_self_and_keeps_params(cls, device, data):
    X, y = data
    est = make_estimator(cls, device=device)
    params = est.get_params()
    assert est.fit(X, y) is est
    assert est.get_params() == params


@pytest.mark.parametrize("cls", ESTIMATORS)
def test_proba_logproba_decision_predict_consistent(cls, device, data):
    X, y = data
    est = make_estimator(cls, device=device).fit(X, y)
    decision = est.decision_function(X)
    proba = est.predict_proba(X)
    np.testing.assert_allclose(proba, softmax(decision, axis=1), rtol=1e-12)
    # np.log(p) of p = 1 - 1e-9 is only accurate to ~1e-16 absolute
    np.testing.assert_allclose(
        est.predict_log_proba(X), np.log(proba), rtol=1e-9, atol=1e-15
    )
    top = X.argmax(1) if cls.__name__ in PREDICT_KEEPS_ARGMAX else proba.argmax(1)
    np.testing.assert_array_equal(est.predict(X), est.classes_[top])
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, rtol=1e-12)


@pytest.mark.parametrize("cls", ESTIMATORS)
def test_input_not_modified_and_readonly_memmap(cls, data, tmp_path):
    X, y = data
    X_copy, y_copy = X.copy(), y.copy()
    est = make_estimator(cls, device="cpu").fit(X, y)
    expected = est.predict_proba(X)
    np.testing.assert_array_equal(X, X_copy)
    np.testing.assert_array_equal(y, y_copy)
    joblib.dump((X, y), tmp_path / "data.pkl")
    X_mm, y_mm = joblib.load(tmp_path / "data.pkl", mmap_mode="r")
    assert not X_mm.flags.writeable
    proba = make_estimator(cls, device="cpu").fit(X_mm, y_mm).predict_proba(X_mm)
    np.testing.assert_allclose(proba, expected, rtol=1e-10)


@pytest.mark.parametrize("cls", ESTIMATORS)
def test_pickle_joblib_clone_roundtrip(cls, device, data, tmp_path):
    X, y = data
    est = make_estimator(cls, device=device).fit(X, y)
    expected = est.predict_proba(X)
    np.testing.assert_array_equal(
        pickle.loads(pickle.dumps(est)).predict_proba(X), expected
    )
    joblib.dump(est, tmp_path / "est.joblib")
    np.testing.assert_array_equal(
        joblib.load(tmp_path / "est.joblib").predict_proba(X), expected
    )
    fresh = clone(est)
    assert not hasattr(fresh, "classes_")
    np.testing.assert_allclose(fresh.fit(X, y).predict_proba(X), expected, rtol=1e-12)
    # fitted state is plain numpy / python numbers: no torch objects kept, so
    # a model fitted on a GPU predicts after loading on a CPU-only machine
    for key, value in vars(est).items():
        assert "torch" not in type(value).__module__, key
    on_cpu = pickle.loads(pickle.dumps(est))
    if "device" in on_cpu.get_params():
        on_cpu.set_params(device="cpu")
    np.testing.assert_array_equal(on_cpu.predict_proba(X), expected)


@pytest.mark.parametrize("cls", ESTIMATORS)
def test_float32_input(cls, device, data):
    X, y = data
    est64 = make_estimator(cls, device=device).fit(X, y)
    est32 = make_estimator(cls, device=device).fit(X.astype(np.float32), y)
    p32 = est32.predict_proba(X.astype(np.float32))
    assert np.isfinite(p32).all()
    if "max_iter" in est64.get_params():
        # networks trained by Adam amplify the float32 rounding of the inputs
        # over hundreds of steps (another early-stopping epoch): same quality
        assert est32.score(X, y) == pytest.approx(est64.score(X, y), abs=0.02)
    else:  # the convex fits agree to solver precision
        np.testing.assert_allclose(p32, est64.predict_proba(X), atol=1e-4)


@pytest.mark.parametrize("cls", ESTIMATORS)
def test_string_labels_and_classes_parameter(cls, data):
    X, y = data
    names = np.array(["ant", "bee", "cat", "dog"])
    est = make_estimator(cls, device="cpu").fit(X, names[y])
    np.testing.assert_array_equal(est.classes_, names)
    assert set(est.predict(X)) <= set(names)
    # explicit column order different from the sorted order
    order = np.array([2, 0, 3, 1])
    est2 = make_estimator(cls, device="cpu", classes=names[order]).fit(
        X[:, order], names[y]
    )
    np.testing.assert_array_equal(est2.classes_, names[order])
    if "max_iter" in est.get_params():
        # Adam amplifies the rounding of sums taken in another column order
        # over hundreds of steps: same model up to training noise
        assert est2.score(X[:, order], names[y]) == pytest.approx(
            est.score(X, names[y]), abs=0.02
        )
    else:
        np.testing.assert_allclose(
            est2.predict_proba(X[:, order]), est.predict_proba(X)[:, order], atol=1e-6
        )


def test_integer_labels_map_to_their_own_column(data):
    X, y = data
    est = TemperatureScaling(device="cpu").fit(X, y)
    np.testing.assert_array_equal(est.classes_, [0, 1, 2, 3])
    # labels 1..4 on 4 columns are not in range(4): mapped in sorted order
    est = TemperatureScaling(device="cpu").fit(X, y + 1)
    np.testing.assert_array_equal(est.classes_, [1, 2, 3, 4])


@pytest.mark.parametrize(
    "dtype, n_columns", [(np.int8, 200), (np.uint8, 300), (np.float16, 2100)]
)
def test_small_label_dtypes_are_widened_to_hold_every_column(dtype, n_columns):
    # classes_ = range(n_columns) in y's kind of number: int8 cannot hold 150
    rng = np.random.default_rng(0)
    X = rng.normal(size=(400, n_columns))
    y = rng.integers(0, 100, 400).astype(dtype)
    with pytest.warns(MissingClassWarning):  # labels cover 100 of the columns
        est = TemperatureScaling(device="cpu").fit(X, y)
    np.testing.assert_array_equal(est.classes_, np.arange(n_columns))
    assert est.classes_.dtype.kind == np.dtype(dtype).kind
    X_test = np.zeros((1, n_columns))
    X_test[0, 150] = 10.0
    assert est.predict(X_test)[0] == 150


@pytest.mark.parametrize("cls", ESTIMATORS)
def test_missing_class_keeps_its_column(cls, device, data):
    X, y = data
    keep = y != 2
    with pytest.warns(MissingClassWarning, match=r"\[2\]"):
        est = make_estimator(cls, device=device).fit(X[keep], y[keep])
    np.testing.assert_array_equal(est.classes_, [0, 1, 2, 3])
    proba = est.predict_proba(X)
    assert proba.shape == (len(X), 4)
    assert np.isfinite(proba).all()
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)


def test_missing_string_class_with_classes_parameter(data):
    X, y = data
    names = np.array(["a", "b", "c", "d"])
    keep = y != 3
    with pytest.warns(MissingClassWarning):
        est = TemperatureScaling(device="cpu", classes=names).fit(
            X[keep], names[y[keep]]
        )
    assert est.predict_proba(X).shape == (len(X), 4)


def test_proba_input_equals_log_proba_logits(data):
    X, y = data
    P = softmax(X, axis=1)
    t_proba = TemperatureScaling(input="proba", device="cpu").fit(P, y).temperature_
    t_logp = TemperatureScaling(device="cpu").fit(np.log(P), y).temperature_
    assert t_proba == pytest.approx(t_logp, rel=1e-9)


def test_logits_that_look_like_probabilities_warn(data):
    X, y = data
    with pytest.warns(InputWarning, match="input='proba'"):
        TemperatureScaling(device="cpu").fit(softmax(X, axis=1), y)


@pytest.mark.parametrize(
    "P, match",
    [
        (np.array([[0.5, 0.6], [0.5, 0.5]] * 5), "row 0 sums to 1.1"),
        (np.array([[1.5, -0.5], [0.5, 0.5]] * 5), r"values range over \[-0.5, 1.5\]"),
    ],
)
def test_bad_probabilities_raise(P, match):
    y = np.array([0, 1] * 5)
    with pytest.raises(ValueError, match=match):
        TemperatureScaling(input="proba", device="cpu").fit(P, y)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
@pytest.mark.parametrize("method", ["fit", "predict_proba"])
def test_non_finite_scores_raise(bad, method, data):
    X, y = data
    X_bad = X.copy()
    X_bad[5, 1] = bad
    est = TemperatureScaling(device="cpu")
    if method == "predict_proba":
        est.fit(X, y)
    with pytest.raises(
        ValueError, match=r"(NaN|inf) values in 1 row\(s\) \(first: row 5"
    ):
        getattr(est, method)(X_bad) if method != "fit" else est.fit(X_bad, y)


@pytest.mark.parametrize("n_columns", [9, 20, 35])
def test_non_finite_message_shows_the_whole_row(n_columns):
    # a 9-column row used to show its first 6 values, hiding its NaN
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, n_columns))
    y = np.arange(40) % n_columns
    X[7, n_columns - 1] = np.nan
    with pytest.raises(ValueError) as info:
        TemperatureScaling(device="cpu").fit(X, y)
    shown = re.search(r"row 7: \[([^\]]*)", str(info.value)).group(1).split()
    expected = [f"{v:.4g}" for v in X[7]]
    if n_columns <= 20:  # every value, the NaN last
        assert len(shown) == n_columns and shown[-1] == "nan"
        assert all(
            np.isclose(float(a), float(b), rtol=1e-3)
            for a, b in zip(shown[:-1], expected[:-1])
        )
    else:  # the first 20, then how many are left out and where the NaN is
        assert shown[:20] and shown[20] == "..." and len(shown) == 21
        assert f"{n_columns - 20} more values omitted" in str(info.value)
        assert f"non-finite at columns [{n_columns - 1}]" in str(info.value)


def test_shape_errors(data):
    X, y = data
    est = TemperatureScaling(device="cpu")
    with pytest.raises(ValueError, match="at least 2 columns"):
        est.fit(X[:, :1], y)
    with pytest.raises(ValueError, match="inconsistent numbers of samples"):
        est.fit(X, y[:-1])
    est.fit(X, y)
    with pytest.raises(ValueError, match="expecting 4 features"):
        est.predict_proba(X[:, :3])


def test_label_errors(data):
    X, y = data
    with pytest.raises(ValueError, match="only one class"):
        TemperatureScaling(device="cpu").fit(X, np.zeros_like(y))
    with pytest.raises(ValueError, match="Pass classes="):
        TemperatureScaling(device="cpu").fit(X, np.where(y > 1, "x", "y"))
    with pytest.raises(ValueError, match="not in classes"):
        TemperatureScaling(device="cpu", classes=[0, 1, 2, 5]).fit(X, y)
    with pytest.raises(ValueError, match="one label per column"):
        TemperatureScaling(device="cpu", classes=[0, 1, 2]).fit(X, y)
    with pytest.raises(ValueError, match="Unknown label type"):
        TemperatureScaling(device="cpu").fit(X, np.linspace(0, 1, len(y)))


def test_sample_weight_equals_repetition(data):
    X, y = data
    w = np.random.default_rng(1).integers(0, 4, size=len(y))
    weighted = TemperatureScaling(device="cpu").fit(X, y, sample_weight=w)
    repeated = TemperatureScaling(device="cpu").fit(np.repeat(X, w, 0), np.repeat(y, w))
    assert weighted.temperature_ == pytest.approx(repeated.temperature_, rel=1e-9)
    with pytest.raises(ValueError, match="[Nn]egative"):
        TemperatureScaling(device="cpu").fit(X, y, sample_weight=-np.ones(len(y)))


def test_score_is_negative_log_loss(data):
    X, y = data
    names = np.array(["a", "b", "c", "d"])
    est = TemperatureScaling(device="cpu").fit(X, names[y])
    expected = -log_loss(names[y], est.predict_proba(X), labels=est.classes_)
    assert est.score(X, names[y]) == pytest.approx(expected, rel=1e-10)
    w = np.arange(len(y)) % 3
    expected_w = -log_loss(
        names[y], est.predict_proba(X), labels=est.classes_, sample_weight=w
    )
    assert est.score(X, names[y], sample_weight=w) == pytest.approx(
        expected_w, rel=1e-10
    )


def test_score_floors_hopeless_samples_at_the_input_floor(data):
    # a true class 3000 below the top logit has log-probability -3000 / T
    # (T ~ 2): the score counts it as log(2.2e-308) = -708.4, the floor of
    # probabilities taken to their log, so that one such sample cannot
    # outweigh thousands of others in a grid search
    X, y = data
    est = TemperatureScaling(device="cpu").fit(X, y)
    X_test, y_test = X[:50].copy(), y[:50]
    X_test[0] = 0.0
    X_test[0, (y_test[0] + 1) % 4] = 3000.0
    log_p = log_softmax(X_test / est.temperature_, axis=1)
    true = log_p[np.arange(50), y_test]
    assert true[0] < -1000
    floor = np.log(np.finfo(np.float64).tiny)
    expected = np.r_[floor, true[1:]].mean()
    assert est.score(X_test, y_test) == pytest.approx(expected, rel=1e-9)
    w = 1.0 + np.arange(50) % 3
    expected_w = np.average(np.r_[floor, true[1:]], weights=w)
    assert est.score(X_test, y_test, sample_weight=w) == pytest.approx(
        expected_w, rel=1e-9
    )


def test_init_stores_only_and_device_errors_at_fit(data):
    X, y = data
    est = TemperatureScaling(device="tpu")  # no error at construction
    assert est.device == "tpu"
    with pytest.raises(
        ValueError, match=re.escape("'auto', 'cpu', 'cuda' or 'cuda:N'")
    ):
        est.fit(X, y)


def test_unavailable_cuda_is_a_clear_error(data):
    import torch

    if torch.cuda.is_available():
        pytest.skip("CUDA is available on this machine")
    X, y = data
    with pytest.raises(ValueError, match="CUDA is not available"):
        TemperatureScaling(device="cuda").fit(X, y)


@pytest.mark.parametrize("cls", ESTIMATORS)
def test_one_dimensional_scores_get_skcal_advice(cls, data):
    """sklearn's reshape(-1, 1) advice would lead a binary user to a 2nd error."""
    X, y = data
    binary = (y > 1).astype(int)
    with pytest.raises(ValueError, match=r"np\.column_stack\(\[-d, d\]\)"):
        make_estimator(cls, device="cpu").fit(X[:, 0] - X[:, 1], binary)
    est = make_estimator(cls, device="cpu").fit(X[:, :2], binary)
    with pytest.raises(ValueError, match="at least 2 columns"):
        est.predict_proba(X[:, 0])


def test_logits_beyond_1e300_are_refused_clearly(data):
    X, y = data
    with pytest.raises(ValueError, match="accepts up to 1e\\+300"):
        TemperatureScaling(device="cpu").fit(X * 1e302, y)
    huge = X / np.abs(X).max() * 1e300  # the largest accepted
    ts = TemperatureScaling(device="cpu").fit(huge, y)
    ref = TemperatureScaling(device="cpu").fit(X, y)
    np.testing.assert_allclose(ts.predict_proba(huge), ref.predict_proba(X), rtol=1e-9)
    with pytest.raises(ValueError, match="accepts up to 1e\\+300"):
        ts.predict_proba(X * 1e302)


@pytest.mark.parametrize("cls", ESTIMATORS)
def test_float16_probabilities_renormalised_in_float16_are_accepted(cls, data):
    """Their row sums are off by ~5e-4, beyond the float64 tolerance of 1e-4."""
    X, y = data
    P16 = softmax(X, axis=1).astype(np.float16)
    P16 = P16 / P16.sum(axis=1, keepdims=True)
    assert np.abs(P16.astype(np.float64).sum(axis=1) - 1).max() > 1e-4
    est = make_estimator(cls, input="proba", device="cpu").fit(P16, y)
    proba = est.predict_proba(P16)
    assert np.isfinite(proba).all()
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, rtol=1e-12)
    # but a float16 row that is far from summing to 1 is still refused
    bad = P16.copy()
    bad[0] *= np.float16(0.9)
    with pytest.raises(ValueError, match="sum to 1"):
        est.predict_proba(bad)


def test_sample_weights_are_relative(data):
    X, y = data
    w = np.random.default_rng(2).uniform(0.1, 2.0, size=len(y))
    ref = TemperatureScaling(device="cpu").fit(X, y, sample_weight=w)
    for c in (1e-300, 3.7e-150, 1e150, 1e300):
        scaled = TemperatureScaling(device="cpu").fit(X, y, sample_weight=w * c)
        assert scaled.temperature_ == pytest.approx(ref.temperature_, rel=1e-12)
        assert scaled.score(X, y, sample_weight=w * c) == pytest.approx(
            ref.score(X, y, sample_weight=w), rel=1e-12
        )
    original = w.copy()
    TemperatureScaling(device="cpu").fit(X, y, sample_weight=w)
    np.testing.assert_array_equal(w, original)  # not modified in place


@pytest.mark.parametrize("cls", ESTIMATORS)
def test_predict_proba_is_a_fresh_array_whatever_the_layout(cls, data):
    # calibrators that compute probabilities in place read float64 logits
    # without a copy: the result must never be (a view of) X, and X must not
    # change, for C- and F-ordered, read-only and float32 inputs alike
    X, y = data
    est = make_estimator(cls, device="cpu").fit(X, y)
    expected = est.predict_proba(X)
    readonly = X.copy()
    readonly.flags.writeable = False
    for Xt in (X.copy(), np.asfortranarray(X), readonly):
        before = Xt.copy()
        proba = est.predict_proba(Xt)
        assert proba.dtype == np.float64 and proba.flags.c_contiguous
        assert proba.flags.writeable and not np.may_share_memory(proba, Xt)
        np.testing.assert_array_equal(Xt, before)
        np.testing.assert_allclose(proba, expected, rtol=1e-12, atol=1e-300)
    # softmax of the calibrated logits, rows summing to 1, for float32 too
    proba32 = est.predict_proba(X.astype(np.float32))
    np.testing.assert_allclose(
        proba32,
        softmax(est.decision_function(X.astype(np.float32)), axis=1),
        rtol=1e-12,
        atol=1e-300,
    )


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
@pytest.mark.parametrize("cls", ESTIMATORS)
def test_non_finite_entry_below_the_row_maximum_raises(cls, bad, data):
    # validation looks at the largest and smallest entry of the whole array,
    # not at every entry: a NaN or -inf that is no row's maximum must still
    # be found and named
    X, y = data
    est = make_estimator(cls, device="cpu").fit(X, y)
    X_bad = X.copy()
    row = 7
    X_bad[row, np.argmin(X[row])] = bad
    with pytest.raises(ValueError, match=rf"values in 1 row\(s\) \(first: row {row}"):
        est.predict_proba(X_bad)


@pytest.mark.parametrize("cls", ESTIMATORS)
def test_probabilities_path_is_the_softmax_of_decision_function(cls, data):
    # with input="proba", predict_proba (which maps the probabilities
    # themselves where a calibrator can) is the softmax of decision_function
    # (the logits of the probabilities, mapped)
    X, y = data
    P = softmax(X, axis=1)
    est = make_estimator(cls, input="proba", device="cpu").fit(P, y)
    np.testing.assert_allclose(
        est.predict_proba(P),
        softmax(est.decision_function(P), axis=1),
        rtol=1e-10,
        atol=1e-15,
    )


def test_integer_labels_that_are_column_indices_map_directly():
    # hand-computed columns: the shortcut for labels already in 0..C-1 (and
    # for classes = 0..C-1) agrees with the general mapping's rules
    from skcal.utils._validation import resolve_classes

    y = np.array([2, 0, 1, 2], dtype=np.uint8)
    classes_, index = resolve_classes(y, 3)
    np.testing.assert_array_equal(classes_, [0, 1, 2])
    assert classes_.dtype.kind == "u" and index.dtype == np.int64
    np.testing.assert_array_equal(index, [2, 0, 1, 2])
    classes_, index = resolve_classes(y, 3, classes=np.arange(3))
    np.testing.assert_array_equal(index, [2, 0, 1, 2])
    classes_, index = resolve_classes(y, 3, classes=[2, 1, 0])
    np.testing.assert_array_equal(classes_, [2, 1, 0])
    np.testing.assert_array_equal(index, [0, 2, 1, 0])
    classes_, index = resolve_classes(np.array([1, 2, 3]), 3)
    np.testing.assert_array_equal(classes_, [1, 2, 3])
    np.testing.assert_array_equal(index, [0, 1, 2])
    with pytest.raises(ValueError, match=r"not in classes: \[2\]"):
        resolve_classes(y, 2, classes=np.arange(2))
    with pytest.raises(ValueError, match="one label per column"):
        resolve_classes(y, 3, classes=np.arange(4))
    with pytest.raises(ValueError, match="Pass classes="):
        resolve_classes(np.array([0, 5]), 3)
    # scikit-learn's target checks warn alike whatever the labels' encoding
    # (from 1.7: more distinct labels than half the samples); integer labels
    # take no shortcut past them
    many = np.arange(100) % 60
    emitted = []
    for labels in (many, many.astype(str)):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            resolve_classes(labels, 60, classes=np.unique(labels))
        emitted.append(sorted(str(w.message) for w in caught))
    assert emitted[0] == emitted[1]


def test_refit_on_an_array_after_a_dataframe_forgets_the_feature_names():
    """A fit on a plain float array after one on a dataframe: ``n_features_in_``
    set, the names of the earlier fit removed."""
    pd = pytest.importorskip("pandas")
    Z, y = make_miscalibrated_logits(300, 4, random_state=0)
    frame = pd.DataFrame(Z, columns=["a", "b", "c", "d"])
    ts = TemperatureScaling(device="cpu").fit(frame, y)
    assert list(ts.feature_names_in_) == ["a", "b", "c", "d"]
    ts.fit(Z[:, :3], y % 3)
    assert not hasattr(ts, "feature_names_in_") and ts.n_features_in_ == 3
    with pytest.raises(ValueError, match="X has 4 features, but TemperatureScaling"):
        ts.predict_proba(Z)


@pytest.mark.parametrize("form", ["array", "list", "float32", "read-only"])
def test_metrics_read_any_form_of_probabilities_alike(form):
    """The metrics' values are the same for every form of the probabilities,
    and empty or 3-D arrays are refused with scikit-learn's messages."""
    from skcal.metrics import expected_calibration_error, spiegelhalter_test

    Z, y = make_miscalibrated_logits(500, 5, random_state=1)
    P = softmax(Z, axis=1)
    given = {
        "array": P,
        "list": P.tolist(),
        "float32": P.astype(np.float32),
        "read-only": np.array(P),
    }[form]
    if form == "read-only":
        given.setflags(write=False)
    rel = 1e-5 if form == "float32" else 1e-12
    labels = list(y) if form == "list" else y
    assert spiegelhalter_test(labels, given).normalized == pytest.approx(
        spiegelhalter_test(y.tolist(), P.tolist()).normalized, rel=rel
    )
    assert expected_calibration_error(labels, given) == pytest.approx(
        expected_calibration_error(y.tolist(), P.tolist()), rel=rel
    )
    with pytest.raises(ValueError, match="0 sample"):
        expected_calibration_error(y[:0], P[:0])
    with pytest.raises(ValueError, match="dim 3"):
        expected_calibration_error(y, P[:, :, None])


def _rounded_with_a_zero(X, y):
    """Probabilities rounded to 3 decimals and renormalised, row 0's true
    class at exactly 0 (what a forest or rounding gives)."""
    P = np.round(softmax(X, axis=1), 3)
    P[0, y[0]] = 0.0
    P[0, (y[0] + 1) % P.shape[1]] += 0.5
    return P / P.sum(axis=1, keepdims=True)


@pytest.mark.parametrize("cls", ESTIMATORS)
def test_a_true_class_probability_of_zero_is_floored_and_counted(cls, data):
    # every calibrator that takes logs of probabilities floors them at half
    # the smallest positive calibration probability (the rows it raises
    # renormalised) and counts the rows whose true class has probability 0;
    # those that only bin or sort probabilities keep them (no warning)
    X, y = data
    P = _rounded_with_a_zero(X, y)
    est = make_estimator(cls, input="proba", device="cpu")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        est.fit(P, y)
    zero = [w for w in caught if "probability 0" in str(w.message)]
    if not hasattr(est, "proba_floor_"):  # no logs taken: no floor
        assert est._reads in ("probabilities", "given probabilities")
        assert not zero
        return
    assert len(zero) == 1 and issubclass(zero[0].category, InputWarning)
    n_zero = int((P[np.arange(len(y)), y] == 0).sum())  # row 0 and rounding's
    assert n_zero >= 1
    assert f"{n_zero} of {len(y)} calibration rows" in str(zero[0].message)
    floor = 0.5 * P[P > 0].min()
    assert est.proba_floor_ == floor
    Q = np.maximum(P, floor)
    raised = (P < floor).any(axis=1)
    Q[raised] /= Q[raised].sum(axis=1, keepdims=True)
    if cls.__name__ == "SplineCalibrator":
        return  # its maps of tied (rounded) scores: exp(log p) splits ties
    ref = clone(est).set_params(input="logits").fit(np.log(Q), y)
    np.testing.assert_allclose(
        est.predict_proba(P), ref.predict_proba(np.log(Q)), rtol=1e-6, atol=1e-9
    )


@pytest.mark.parametrize("cls", ESTIMATORS)
def test_float32_logits_give_the_result_of_their_float64_upcast(cls, data):
    # every computation runs in float64: float32 logits are converted before
    # the shift by the row maxima (shifted in float32, they moved the
    # probabilities by 1e-9 to 1e-7, SMART's by 5e-3), to the last bit
    X, y = data
    X32 = (X * 3).astype(np.float32)
    X64 = X32.astype(np.float64)
    a = make_estimator(cls, device="cpu").fit(X32, y)
    b = make_estimator(cls, device="cpu").fit(X64, y)
    np.testing.assert_array_equal(a.predict_proba(X32), b.predict_proba(X64))
