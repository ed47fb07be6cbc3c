"""Venn-Abers and spline calibration exported to torch and ONNX.

References: each calibrator's own numpy ``predict_proba`` (independent of
the exported blocks), Venn-Abers probabilities worked out by hand from the
isotonic regressions of a four-row calibration set, spline probabilities
written here from the fitted map for rows whose other classes underflow,
and ``np.nextafter`` / ``np.sum`` for the exact blocks (the ONNX
nextafter on every power of two and subnormal binade). The scores include
the calibration rows themselves (each on a step of the Venn-Abers tables),
rounded logits (ties), probabilities with exact zeros and ones, rounded
probabilities, and near-certain rows."""

import warnings

import numpy as np
import pytest
from scipy.special import softmax

from skcal import SplineCalibrator, VennAbersCalibrator
from skcal.export import check_export, to_onnx, to_torch
from skcal.utils._testing import make_miscalibrated_logits

torch = pytest.importorskip("torch")
ort = pytest.importorskip("onnxruntime")
pytestmark = pytest.mark.filterwarnings("ignore:.*torch.jit.*:DeprecationWarning")

from skcal._torch._export_exact import pairwise_plan  # noqa: E402

TOL = {np.float64: 1e-6, np.float32: 1e-5}


def _fit(cls, X, y, **params):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return cls(**params).fit(X, y)


def _session(model):
    return ort.InferenceSession(
        model.SerializeToString(), providers=["CPUExecutionProvider"]
    )


def _scores(input, n_classes=4, n=240, random_state=0):
    """Calibration and test scores: the calibration rows themselves, rounded
    logits (ties), near-certain rows (logit gaps of 40 and 800)."""
    X, y = make_miscalibrated_logits(n, n_classes, temperature=3.0,
                                     random_state=random_state)  # fmt: skip
    rng = np.random.default_rng(random_state)
    rounded = np.round(X[:60], 1)
    certain = rng.normal(size=(20, n_classes))
    certain[:10, 0] += 40.0
    certain[10:, 1] += 800.0
    X_test = np.vstack([X, rounded, certain])
    if input == "logits":
        return X, y, X_test
    P, P_test = softmax(X, axis=1), softmax(X_test, axis=1)
    hard = np.eye(n_classes)[np.argmax(P_test[:20], axis=1)]  # exact 0 and 1
    coarse = np.round(P_test[20:60], 2)
    coarse /= coarse.sum(axis=1, keepdims=True)
    return P, y, np.vstack([P_test, hard, coarse])


def _check_forms(cal, X, *, script=False, program=False):
    forms = []
    for dtype in (np.float64, np.float32):
        module = to_torch(cal)
        forms.append(
            (dtype, module.double() if dtype == np.float64 else module.float())
        )
        forms.append((dtype, to_onnx(cal, dtype=dtype)))
    if script:
        forms.append((np.float64, torch.jit.script(to_torch(cal).double())))
    if program:
        example = (torch.from_numpy(np.ascontiguousarray(X[:3])),)
        dims = {"x": {0: torch.export.Dim("batch")}}
        forms.append(
            (
                np.float64,
                torch.export.export(
                    to_torch(cal), example, dynamic_shapes=dims
                ).module(),
            )  # fmt: skip
        )
    for dtype, exported in forms:
        for rows in (X, X[:1]):
            diff = check_export(cal, rows, exported)
            assert diff <= TOL[dtype], (type(exported).__name__, dtype, diff)


VA_CASES = [
    (input, strategy, method)
    for input in ("logits", "proba")
    for strategy in ("ovr", "ovo")
    for method in ("inductive", "cross")
]


@pytest.mark.parametrize("input, strategy, method", VA_CASES)
def test_venn_abers_exports_predict_proba(input, strategy, method):
    X, y, X_test = _scores(input)
    cal = _fit(VennAbersCalibrator, X, y, input=input, strategy=strategy,
               method=method, random_state=0)  # fmt: skip
    first = (strategy, method) == ("ovr", "inductive")
    _check_forms(cal, X_test, script=first or method == "cross",
                 program=first or (strategy, method) == ("ovo", "cross"))  # fmt: skip


@pytest.mark.parametrize("input", ["logits", "proba"])
def test_venn_abers_two_classes_with_weights(input):
    X, y, X_test = _scores(input, n_classes=2)
    w = np.random.default_rng(0).uniform(0.5, 2.0, size=len(y))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cal = VennAbersCalibrator(input=input, method="cross", random_state=0)
        cal.fit(X, y, sample_weight=w)
    _check_forms(cal, X_test)


def test_venn_abers_by_hand():
    # calibration scores 0.2, 0.4, 0.6, 0.8 with labels 0, 1, 0, 1: the
    # isotonic regressions with the test object added (label 0, then 1)
    # give (p0, p1) = (1/3, 2/3) at 0.5 and at the calibration score 0.4
    # (pooled with it), (1/2, 1) above every score, (0, 1/2) below; merged
    # p1 / (1 - p0 + p1): 1/2, 1/2, 2/3, 1/3
    s = np.array([0.2, 0.4, 0.6, 0.8])
    cal = _fit(VennAbersCalibrator, np.column_stack([1 - s, s]), [0, 1, 0, 1],
               input="proba")  # fmt: skip
    t = np.array([0.5, 0.4, 0.9, 0.1])
    X = np.column_stack([1 - t, t])
    expected = np.array([1 / 2, 1 / 2, 2 / 3, 1 / 3])
    out = to_torch(cal)(torch.from_numpy(X)).numpy()
    np.testing.assert_allclose(out[:, 1], expected, rtol=0, atol=1e-15)
    np.testing.assert_allclose(out[:, 0], 1 - expected, rtol=0, atol=1e-15)
    graph = _session(to_onnx(cal, dtype=np.float64)).run(None, {"scores": X})[0]
    np.testing.assert_allclose(graph[:, 1], expected, rtol=0, atol=1e-15)


@pytest.mark.parametrize("input", ["logits", "proba"])
@pytest.mark.parametrize("redistribution", ["temperature", "proportional"])
def test_spline_exports_predict_proba(input, redistribution):
    X, y, X_test = _scores(input, n=400)
    cal = _fit(SplineCalibrator, X, y, input=input, redistribution=redistribution)
    _check_forms(cal, X_test, script=True, program=input == "logits")


def test_spline_two_classes():
    X, y, X_test = _scores("logits", n_classes=2, n=300)
    _check_forms(_fit(SplineCalibrator, X, y), X_test)


def test_spline_underflowing_rows_by_hand():
    # others at logits -800 and -801 (probabilities 0 in float64): they share
    # 1 - c in the proportions 1 : e^-1, c the map's value at p_top = 1
    X, y = make_miscalibrated_logits(300, 3, temperature=3.0, random_state=0)
    cal = _fit(SplineCalibrator, X, y, redistribution="proportional")
    c = np.clip(np.interp(1.0, cal.scores_, cal.calibrated_scores_),
                *cal.confidence_bounds_)  # fmt: skip
    expected = [c, (1 - c) / (1 + np.exp(-1.0)), (1 - c) / (1 + np.exp(1.0))]
    rows = np.array([[0.0, -800.0, -801.0]])
    for dtype in (np.float64, np.float32):
        tol = 1e-15 if dtype == np.float64 else 1e-7
        graph = _session(to_onnx(cal, dtype=dtype))
        out = graph.run(None, {"scores": rows.astype(dtype)})[0][0]
        np.testing.assert_allclose(out, expected, rtol=tol, atol=0)
        module = (
            to_torch(cal).double() if dtype == np.float64 else to_torch(cal).float()
        )
        out = module(torch.from_numpy(rows.astype(dtype))).numpy()[0]
        np.testing.assert_allclose(out, expected, rtol=tol, atol=0)


def test_spline_keeps_the_top_class_strictly_first():
    # labels drawn against the argmax: the map lowers the top confidence
    # below the others' share, and the top class is raised to (the next
    # float above) the largest other, in float64 and in float32
    X, _ = make_miscalibrated_logits(400, 4, temperature=0.3, random_state=1)
    y = (np.argmax(X, axis=1) + 1) % 4
    cal = _fit(SplineCalibrator, X, y, redistribution="proportional")
    reference = cal.predict_proba(X)
    top = np.argmax(X, axis=1)
    rows = np.arange(len(X))
    others = reference.copy()
    others[rows, top] = -1.0
    level = reference[rows, top] == np.nextafter(others.max(axis=1), np.inf)
    assert level.sum() > 10  # the raised rows this test is about
    for dtype in (np.float64, np.float32):
        for exported in (to_torch(cal), to_onnx(cal, dtype=dtype)):
            if not hasattr(exported, "graph"):
                exported = (
                    exported.double() if dtype == np.float64 else exported.float()
                )
                out = exported(torch.from_numpy(X.astype(dtype))).numpy()
            else:
                out = _session(exported).run(None, {"scores": X.astype(dtype)})[0]
            rest = out.copy()
            rest[rows, top] = -1.0
            assert (out[rows, top] > rest.max(axis=1)).all(), dtype
            # and the same probabilities (the raised rows within rounding)
            assert np.abs(out - reference).max() <= TOL[dtype]


@pytest.mark.parametrize("n", [2, 3, 7, 8, 9, 16, 26, 31, 130, 300])
def test_pairwise_plan_is_numpys_sum(n):
    rng = np.random.default_rng(n)
    a = np.exp(rng.normal(size=(500, n)) * 20)
    slots = [a[:, k] for k in range(n)]
    first, second, out = pairwise_plan(n)
    for i, j in zip(first, second):
        slots.append(slots[i] + slots[j])
    np.testing.assert_array_equal(slots[out], a.sum(axis=1))
