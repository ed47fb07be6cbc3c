"""Exports of the one-vs-rest calibrators (isotonic, centred isotonic,
histogram binning, scaling-binning, BBQ, ENIR, Platt, beta) compute their
predict_proba: torch modules (eager, scripted, torch.export) and ONNX graphs
under onnxruntime, in float64 (within 1e-6) and float32 (within 1e-5).

The references are independent of the exported blocks: np.interp and
np.searchsorted for the blocks themselves, and each calibrator's own numpy
prediction for the calibrators, on scores that hit the corners (tied rows,
values exactly on bin edges and knots, rows of exact zeros and one-hot rows,
scores outside the calibration range, an absent class, rows whose every
one-vs-rest value is 0) and on a real task (a logistic regression on
scikit-learn's digits, data shipped in the package).
"""

import functools
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest
from scipy.special import softmax
from sklearn.datasets import load_digits
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split

import skcal
from skcal.export import to_onnx, to_torch
from skcal.utils._testing import make_miscalibrated_logits

torch = pytest.importorskip("torch")
ort = pytest.importorskip("onnxruntime")

from skcal._torch._export_piecewise import PiecewiseLinear, StepMap  # noqa: E402

TOL = {np.float64: 1e-6, np.float32: 1e-5}

#: (name, extra parameters) of every exported one-vs-rest calibrator
CALIBRATORS = [
    ("IsotonicCalibrator", {}),
    ("CenteredIsotonicCalibrator", {}),
    ("HistogramBinningCalibrator", {}),
    ("HistogramBinningCalibrator", {"strategy": "quantile", "n_bins": 8}),
    ("ScalingBinningCalibrator", {}),
    ("ScalingBinningCalibrator", {"mode": "top_label"}),
    ("BBQCalibrator", {}),
    ("ENIRCalibrator", {}),
    ("PlattCalibrator", {}),
    ("BetaCalibrator", {}),
]
IDS = [
    name + ("-" + "-".join(map(str, p.values())) if p else "")
    for name, p in CALIBRATORS
]


# ----------------------------------------------------------------- helpers
def _onnx_run(model, X):
    session = ort.InferenceSession(
        model.SerializeToString(), providers=["CPUExecutionProvider"]
    )
    name = session.get_inputs()[0].name
    return session.run(None, {name: X})[0]


def _torch_run(module, X):
    with torch.no_grad():
        return module(torch.from_numpy(np.ascontiguousarray(X))).numpy()


def _forms(cal, X, *, program=True):
    """``(form, dtype, outputs)`` of every export of ``cal`` on ``X``."""
    out = []
    for dtype in (np.float64, np.float32):
        Xd = np.ascontiguousarray(X, dtype=dtype)
        module = to_torch(cal)
        module = module.double() if dtype == np.float64 else module.float()
        out.append(("eager", dtype, _torch_run(module, Xd)))
        out.append(("script", dtype, _torch_run(torch.jit.script(module), Xd)))
        out.append(("onnx", dtype, _onnx_run(to_onnx(cal, dtype=dtype), Xd)))
        if program:
            batch = torch.export.Dim("batch")
            example = torch.from_numpy(Xd[:3])
            ep = torch.export.export(
                module, (example,), dynamic_shapes={"x": {0: batch}}
            )
            out.append(("torch.export", dtype, _torch_run(ep.module(), Xd)))
    return out


def _check(cal, X, **kwargs):
    """Every export of ``cal`` gives ``cal.predict_proba`` of the same numbers."""
    for form, dtype, got in _forms(cal, X, **kwargs):
        assert got.dtype == dtype, (form, got.dtype)
        want = cal.predict_proba(np.asarray(X, dtype=dtype))
        diff = float(np.abs(got.astype(np.float64) - want).max())
        assert diff <= TOL[dtype], (form, dtype.__name__, diff)


def _fit(name, params, X, y, input, **extra):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # convergence, accuracy-drop warnings
        est = getattr(skcal, name)(input=input, **params, **extra)
        return est.fit(X, y)


@functools.cache
def _generated():
    X, y = make_miscalibrated_logits(400, 4, temperature=3.0, random_state=0)
    return X, y


def _corner_rows(cal, input, n_classes=4):
    """Test rows that hit the corners of the fitted maps of ``cal``."""
    X, _ = make_miscalibrated_logits(300, n_classes, temperature=3.0, random_state=1)
    P = softmax(X, axis=1)
    rows = [P, P[:20]]  # tied rows: the same rows twice
    eye = np.eye(n_classes)
    rows.append(eye)  # one-hot rows: exact zeros, outside the fitted range
    rows.append(np.full((1, n_classes), 1.0 / n_classes))  # every class tied
    # exact knots and bin edges of the fitted maps, as a row's first entry
    points = []
    for attr in ("thresholds_", "bin_edges_"):
        for t in getattr(cal, attr, [])[:2]:
            points.extend(np.asarray(t)[:: max(1, len(t) // 6)])
    points = [p for p in points if 0.0 <= p <= 1.0]
    if points and input == "proba":  # (the softmax of logits moves them)
        p = np.array(points)
        block = np.zeros((p.size, n_classes))
        block[:, 0] = p
        block[:, 1] = 1.0 - p  # a row sum within a unit of 1: used as given
        rows.append(block)
    P = np.vstack(rows)
    if input == "proba":
        return P
    with np.errstate(divide="ignore"):
        Z = np.log(P)
    Z = np.where(np.isfinite(Z), Z, -800.0)  # exact zeros: logit gaps of 800
    return np.vstack([Z, X * 50.0])  # and far outside the calibration range


# -------------------------------------------------------- the blocks alone
def test_piecewise_linear_is_np_interp_with_ties_and_ends():
    rng = np.random.default_rng(0)
    xp = [
        np.array([0.1, 0.3, 0.3, 0.5, 0.9]),  # a jump at 0.3 (tied knots)
        np.sort(rng.uniform(0, 1, 30)),
        np.array([0.4]),  # one knot: a constant map
        np.array([0.0, 1e-320, 0.5, 1.0]),  # a slope that overflows
    ]
    fp = [
        np.array([0.0, 0.2, 0.8, 0.85, 1.0]),
        np.sort(rng.uniform(0, 1, 30)),
        np.array([0.7]),
        np.array([0.0, 0.5, 0.6, 1.0]),
    ]
    queries = np.concatenate(
        [np.linspace(-0.5, 1.5, 101), *xp, [0.3, 0.9, 1.0, 0.0, 5e-321]]
    )
    X = np.repeat(queries[:, None], 4, axis=1)
    module = PiecewiseLinear(xp, fp)
    got = _torch_run(module, X)
    for k in range(3):  # np.interp itself
        np.testing.assert_allclose(
            got[:, k], np.interp(queries, xp[k], fp[k]), atol=1e-15
        )
    # the overflowing segment: the fraction of the segment (np.interp gives inf)
    assert np.isfinite(got[:, 3]).all()
    assert got[queries == 5e-321, 3][0] == pytest.approx(0.25)
    assert got[queries == 0.3, 0][0] == 0.8  # the value right of the jump
    g_onnx = _onnx_run(_graph(module, 4), X)
    np.testing.assert_allclose(g_onnx, got, atol=1e-15)


def _graph(module, n_columns, dtype=np.float64):
    from skcal.export._graph import GraphBuilder

    g = GraphBuilder(dtype)
    x = "x" if dtype == np.float64 else g.op("Cast", "x", to=11)
    out = module.onnx(g, x)
    if dtype != np.float64:
        out = g.op("Cast", out, to=1)
    return g.model("x", out, n_columns)


@pytest.mark.parametrize("closed", ["left", "right"])
def test_step_map_puts_edge_values_on_the_side_of_searchsorted(closed):
    edges = [np.arange(11) / 10, np.array([0.0, 0.25, 0.5, 1.0]), np.array([0.0, 1.0])]
    values = [np.arange(10) / 10.0, np.array([0.1, 0.2, 0.3]), np.array([0.5])]
    queries = np.concatenate([np.linspace(-1, 2, 61), edges[0], edges[1]])
    X = np.repeat(queries[:, None], 3, axis=1)
    side = "right" if closed == "left" else "left"
    want = np.column_stack(
        [
            v[np.clip(np.searchsorted(e[1:-1], queries, side=side), 0, v.size - 1)]
            for e, v in zip(edges, values)
        ]
    )
    module = StepMap(edges, values, closed=closed)
    np.testing.assert_array_equal(_torch_run(module, X), want)
    np.testing.assert_array_equal(_onnx_run(_graph(module, 3), X), want)


def test_float32_values_on_a_float64_edge_fall_as_in_float64():
    # 0.7 is not a float32: float32(0.7) lies below it, so the float64 code
    # puts it in the bin below the edge, where a comparison with the edge
    # rounded to float32 would put it above
    e = 0.7
    below = np.float32(e)
    above = np.nextafter(below, np.float32(1))
    assert float(below) < e < float(above)
    module = StepMap([np.array([0.0, e, 1.0])], [np.array([1.0, 2.0])]).float()
    X = np.array([[below], [above]], dtype=np.float32)
    np.testing.assert_array_equal(_torch_run(module, X), [[1.0], [2.0]])


def test_the_module_keeps_its_float64_constants_under_float():
    X, y = _generated()
    module = to_torch(_fit("IsotonicCalibrator", {}, X, y, "logits")).float()
    floats = {b.dtype for b in module.buffers() if b.is_floating_point()}
    assert torch.float64 in floats  # the maps' constants
    assert torch.float32 in floats  # the dtype marker, which follows .float()


# ------------------------------------------------------- the calibrators
@pytest.mark.parametrize("input", ["logits", "proba"])
@pytest.mark.parametrize("name, params", CALIBRATORS, ids=IDS)
def test_export_matches_predict_proba_on_corner_rows(name, params, input):
    X, y = _generated()
    cal = _fit(name, params, X if input == "logits" else softmax(X, axis=1), y, input)
    _check(cal, _corner_rows(cal, input), program=input == "logits")


@functools.cache
def _digits():
    X, y = load_digits(return_X_y=True)
    X_fit, X_cal, y_fit, y_cal = train_test_split(
        X / 16.0, y, test_size=0.6, random_state=0, stratify=y
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        clf = LogisticRegression(C=1.0, max_iter=300).fit(X_fit, y_fit)
    Z = clf.decision_function(X_cal)
    return Z[:600], y_cal[:600], Z[600:]


@pytest.mark.parametrize("input", ["logits", "proba"])
@pytest.mark.parametrize("name, params", CALIBRATORS, ids=IDS)
def test_export_matches_predict_proba_on_digits(name, params, input):
    Z, y, Z_test = _digits()
    if input == "proba":
        Z, Z_test = softmax(Z, axis=1), softmax(Z_test, axis=1)
    cal = _fit(name, params, Z, y, input)
    _check(cal, Z_test, program=False)


@pytest.mark.parametrize("name", ["IsotonicCalibrator", "HistogramBinningCalibrator",
                                  "PlattCalibrator", "BBQCalibrator"])  # fmt: skip
def test_an_absent_class_gets_the_mean_map_in_the_export(name):
    X, y = _generated()
    keep = y != 2
    cal = _fit(
        name, {}, softmax(X[keep], axis=1), y[keep], "proba", classes=[0, 1, 2, 3]
    )
    _check(cal, _corner_rows(cal, "proba"), program=False)


def test_rows_whose_every_value_is_zero_keep_their_probabilities():
    X, y = _generated()
    P = softmax(X, axis=1)
    cal = _fit("HistogramBinningCalibrator", {"n_bins": 4}, P, y, "proba")
    for v in cal.bin_values_:
        v[:2] = 0.0  # every class maps [0, 0.5) to 0
    rows = np.array(
        [[0.3, 0.3, 0.2, 0.2], [0.1, 0.2, 0.3, 0.4], [0.25, 0.25, 0.25, 0.25]]
    )
    np.testing.assert_allclose(cal.predict_proba(rows), rows, atol=1e-15)
    _check(cal, np.vstack([rows, P[:50]]), program=False)


def test_probabilities_input_renormalises_as_the_validation_does():
    X, y = _generated()
    cal = _fit("HistogramBinningCalibrator", {}, softmax(X, axis=1), y, "proba")
    # rows off 1 by 5e-5 (divided by their sums), rows within a unit of 1
    # (used as given) with values on the edges i / 15
    rows = np.array(
        [
            [0.2, 0.2, 0.3, 0.30005],
            [0.5, 0.2, 0.3 - 4e-5, 0.0],
            [1 / 15, 14 / 15, 0.0, 0.0],
            [4 / 15, 11 / 15, 0.0, 0.0],
            [0.6, 0.4, 0.0, 0.0],
        ]
    )
    _check(cal, rows, program=False)


def test_a_saved_float32_script_runs_without_skcal(tmp_path):
    X, y = _generated()
    P = softmax(X, axis=1)
    cal = _fit("IsotonicCalibrator", {}, P, y, "proba")
    path = tmp_path / "iso.pt"
    torch.jit.save(torch.jit.script(to_torch(cal).float()), str(path))
    np.save(tmp_path / "X.npy", P.astype(np.float32))
    code = f"""
        import sys

        class Block:
            def find_spec(self, name, path=None, target=None):
                if name == "skcal" or name.startswith("skcal."):
                    raise ImportError("skcal is blocked in this process")

        sys.meta_path.insert(0, Block())
        import numpy as np
        import torch

        module = torch.jit.load({str(path)!r})
        X = torch.from_numpy(np.load({str(tmp_path / "X.npy")!r}))
        np.save({str(tmp_path / "P.npy")!r}, module(X).numpy())
        print("skcal" in sys.modules)
        """
    out = subprocess.run(
        [sys.executable, "-I", "-c", textwrap.dedent(code)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.split() == ["False"]
    got = np.load(tmp_path / "P.npy")
    assert got.dtype == np.float32
    want = cal.predict_proba(P.astype(np.float32))
    assert np.abs(got - want).max() <= 1e-5
