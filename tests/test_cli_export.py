"""``skcal export`` (issue 53): a saved calibrator, search or calibrated
classifier written as ONNX or TorchScript, and checked on a file of rows.

The written files are run here by onnxruntime and ``torch.jit.load``
themselves, against the saved model's ``predict_proba`` in Python.
"""

import json
import pickle

import numpy as np
import pytest

pytest.importorskip("skops.io")
ort = pytest.importorskip("onnxruntime")

from sklearn.datasets import load_digits  # noqa: E402
from sklearn.frozen import FrozenEstimator  # noqa: E402
from sklearn.linear_model import LogisticRegression  # noqa: E402

from skcal import CalibratedClassifier, TemperatureScaling, VectorScaling  # noqa: E402
from skcal.cli import main  # noqa: E402
from skcal.utils._testing import make_miscalibrated_logits  # noqa: E402
from skcal.utils.persistence import dump  # noqa: E402


def _error(capsys) -> str:
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert lines[-1].startswith("skcal export: error: "), captured.err
    assert "Traceback" not in captured.err and captured.out == ""
    return lines[-1]


@pytest.fixture
def saved(tmp_path):
    """A vector scaling saved as .skops, and a file of test logits."""
    X, y = make_miscalibrated_logits(600, 4, temperature=2.0, random_state=0)
    model = VectorScaling(device="cpu").fit(X[:400], y[:400])
    dump(model, tmp_path / "vs.skops")
    np.savez(tmp_path / "test.npz", logits=X[400:], labels=y[400:])
    return model, X[400:], tmp_path


def _onnx_proba(path, X, dtype=np.float32):
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    name = session.get_inputs()[0].name
    return session.run(["probabilities"], {name: X.astype(dtype)})[0]


def test_export_onnx_and_check(saved, capsys):
    model, X, tmp = saved
    out = tmp / "vs.onnx"
    argv = ["export", "--model", str(tmp / "vs.skops"), "--out", str(out)]
    assert main([*argv, "--check", str(tmp / "test.npz"), "--json", "--quiet"]) == 0
    report = json.loads(capsys.readouterr().out)
    expected = model.predict_proba(X.astype(np.float32))
    assert np.abs(_onnx_proba(out, X) - expected).max() < 1e-5
    assert report["max_abs_difference"] < 1e-5
    assert report["n_check"] == len(X) and report["bytes"] == out.stat().st_size
    assert main([*argv, "--quiet"]) == 0  # without --check: no difference line
    assert "largest difference" not in capsys.readouterr().out


@pytest.mark.filterwarnings("ignore:`torch.jit:DeprecationWarning")
def test_export_torchscript_float64(saved, capsys):
    import torch

    model, X, tmp = saved
    out = tmp / "vs.pt"
    argv = ["export", "--model", str(tmp / "vs.skops"), "--out", str(out)]
    argv += ["--format", "torchscript", "--dtype", "float64"]
    assert main([*argv, "--check", str(tmp / "test.npz"), "--quiet"]) == 0
    printed = capsys.readouterr().out
    assert "largest difference from skcal's predict_proba on the 200 rows" in printed
    with torch.no_grad():
        got = torch.jit.load(str(out))(torch.from_numpy(X)).numpy()
    assert np.abs(got - model.predict_proba(X)).max() < 1e-10


def test_export_a_calibrated_classifier_as_one_graph(tmp_path, capsys):
    X, y = load_digits(return_X_y=True)
    clf = LogisticRegression(max_iter=200).fit(X[:700], y[:700])
    model = CalibratedClassifier(
        FrozenEstimator(clf), calibrator=TemperatureScaling()
    ).fit(X[700:1300], y[700:1300])
    with open(tmp_path / "model.pkl", "wb") as file:
        pickle.dump(model, file)
    header = ",".join(f"pixel{j}" for j in range(64))
    np.savetxt(tmp_path / "rows.csv", X[1300:], delimiter=",", header=header)
    argv = ["export", "--model", str(tmp_path / "model.pkl"), "--allow-pickle"]
    argv += ["--out", str(tmp_path / "model.onnx"), "--check"]
    assert main([*argv, str(tmp_path / "rows.csv"), "--json", "--quiet"]) == 0
    assert json.loads(capsys.readouterr().out)["max_abs_difference"] < 1e-5
    got = _onnx_proba(tmp_path / "model.onnx", X[1300:])
    assert np.abs(got - model.predict_proba(X[1300:].astype(np.float32))).max() < 1e-5
    # TorchScript cannot hold the scikit-learn classifier: a one-line error
    argv[-1] = "--format"
    assert main([*argv, "torchscript"]) == 2
    assert "--format onnx" in _error(capsys)


def test_export_errors(saved, capsys):
    _, _, tmp = saved
    pickle.dump(LogisticRegression(), open(tmp / "lr.pkl", "wb"))
    argv = ["export", "--model", str(tmp / "lr.pkl"), "--out", str(tmp / "x.onnx")]
    assert main([*argv, "--allow-pickle"]) == 2
    assert "cannot export" in _error(capsys)
    argv = ["export", "--model", str(tmp / "vs.skops"), "--out", str(tmp / "x.onnx")]
    np.savez(tmp / "wide.npz", logits=np.zeros((3, 7)))
    assert main([*argv, "--check", str(tmp / "wide.npz")]) == 2
    assert "7 columns" in _error(capsys)
    assert main([*argv[:-1], str(tmp / "no" / "x.onnx")]) == 2
    assert "does not exist" in _error(capsys)
