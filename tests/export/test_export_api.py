"""skcal.export: what the exports read, files, a saved script without skcal,
and the refusals."""

import subprocess
import sys
import textwrap

import numpy as np
import pytest
from _export_cases import fitted, scores
from scipy.special import softmax
from sklearn.linear_model import LogisticRegression

from skcal import KCalCalibrator, ProCalCalibrator
from skcal.exceptions import NotExportableError
from skcal.export import check_export, to_onnx, to_torch
from skcal.export._graph import GraphBuilder
from skcal.utils._testing import make_region_miscalibrated_embeddings

torch = pytest.importorskip("torch")
onnxruntime = pytest.importorskip("onnxruntime")
# torch 2.9+ deprecates scripting; a scripted module is still what runs
# without Python packages (torch.jit.save / torch.jit.load)
pytestmark = pytest.mark.filterwarnings("ignore:.*torch.jit.*:DeprecationWarning")


def _run_graph(model, X):
    session = onnxruntime.InferenceSession(
        model.SerializeToString(), providers=["CPUExecutionProvider"]
    )
    dtype = np.float64 if session.get_inputs()[0].type == "tensor(double)" else None
    return session.run(None, {"scores": np.asarray(X, dtype=dtype or np.float32)})[0]


def test_graph_reads_probabilities_for_a_shift_invariant_calibrator():
    # fitted on logits, exported for probabilities: log p is the logits up
    # to a constant per row, which temperature scaling ignores
    X, _ = scores("digits", "logits")
    cal = fitted("TemperatureScaling", "digits", "logits")
    model = to_onnx(cal, input="proba", dtype=np.float64)
    out = _run_graph(model, softmax(X, axis=1))
    np.testing.assert_allclose(out, cal.predict_proba(X), rtol=0, atol=1e-9)


def test_graph_reads_logits_for_a_calibrator_fitted_on_probabilities():
    X, _ = scores("digits", "logits")
    cal = fitted("DirichletCalibrator", "digits", "proba")
    out = _run_graph(to_onnx(cal, input="logits", dtype=np.float64), X)
    expected = cal.predict_proba(softmax(X, axis=1))
    np.testing.assert_allclose(out, expected, rtol=0, atol=1e-9)


def test_probabilities_are_refused_where_the_level_of_the_logits_counts():
    cal = fitted("VectorScaling", "generated", "logits")
    with pytest.raises(NotExportableError, match="input='logits'"):
        to_onnx(cal, input="proba")
    with pytest.raises(ValueError, match="input must be"):
        to_onnx(cal, input="scores")


def test_file_and_dynamic_batch(tmp_path):
    X, _ = scores("generated", "logits")
    cal = fitted("MatrixScaling", "generated", "logits")
    path = tmp_path / "ms.onnx"
    model = to_onnx(cal, path, dtype=np.float64)
    assert path.stat().st_size > 0
    assert check_export(cal, X, str(path)) <= 1e-12
    dims = model.graph.input[0].type.tensor_type.shape.dim
    assert dims[0].dim_param == "batch" and dims[1].dim_value == X.shape[1]
    assert _run_graph(model, X[:0]).shape == (0, X.shape[1])


def test_saved_script_runs_without_skcal(tmp_path):
    X, _ = scores("digits", "proba")
    cal = fitted("SMARTCalibrator", "digits", "proba")
    path = tmp_path / "smart.pt"
    torch.jit.save(torch.jit.script(to_torch(cal)), str(path))
    np.save(tmp_path / "X.npy", X)
    code = f"""
        import os
        import sys

        def holds_skcal(p):  # a source tree of skcal (not site-packages)
            return os.path.isdir(os.path.join(p, "skcal")) and "site-" not in p

        sys.path = [p for p in sys.path if p and not holds_skcal(p)]

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
        try:
            import skcal  # noqa: F401
        except ImportError:
            print("blocked")
        """
    out = subprocess.run(
        [sys.executable, "-I", "-c", textwrap.dedent(code)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.split() == ["blocked"]
    P = np.load(tmp_path / "P.npy")
    assert np.abs(P - cal.predict_proba(X)).max() <= 1e-6


def test_state_that_grows_with_the_data_is_refused():
    X, y, coef, intercept, _ = make_region_miscalibrated_embeddings(
        200, 3, n_features=4, random_state=0
    )
    kcal = KCalCalibrator(max_iter=2, random_state=0)
    procal = ProCalCalibrator(coef=coef, intercept=intercept)
    for cal, state in [(kcal, "memory_"), (procal, "embeddings_")]:
        cal.fit(X, y)
        rows = getattr(cal, state).shape[0]  # KCal keeps part of the rows
        assert 50 <= rows <= 200
        with pytest.raises(NotExportableError, match=f"{rows} calibration"):
            to_torch(cal)
        with pytest.raises(NotExportableError, match="grows with the calibration"):
            to_onnx(cal)


def test_an_estimator_without_to_torch_is_refused():
    clf = LogisticRegression()
    with pytest.raises(NotExportableError, match="LogisticRegression"):
        to_onnx(clf)
    assert issubclass(NotExportableError, ValueError)


def test_graph_builder_refuses_other_types_and_old_opsets():
    with pytest.raises(ValueError, match="float32 or np.float64"):
        GraphBuilder(np.float16)
    with pytest.raises(ValueError, match="at least 13"):
        GraphBuilder(np.float32, opset=11)
    g = GraphBuilder(np.float64, opset=18)  # ReduceMax's axes as an input
    cal = fitted("TemperatureScaling", "generated", "logits")
    model = to_onnx(cal, dtype=np.float64, opset=18)
    X, _ = scores("generated", "logits")
    assert check_export(cal, X, model) <= 1e-12
    assert g.const(np.arange(3)) and g.dtype is np.float64
