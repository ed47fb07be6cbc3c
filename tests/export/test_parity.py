"""Exported calibrators compute predict_proba: torch modules (eager,
scripted, torch.export) and ONNX graphs under onnxruntime, in float64
(within 1e-6) and float32 (within 1e-5), for one row and many.

The reference is each calibrator's own numpy prediction, an implementation
independent of the exported blocks; one test also checks a graph against
the formula written here with scipy."""

import numpy as np
import pytest
from _export_cases import PARAMETRIC, VARIANTS, fitted, scores
from scipy.special import softmax

from skcal.export import check_export, to_onnx, to_torch

torch = pytest.importorskip("torch")
pytest.importorskip("onnxruntime")
# torch 2.9+ deprecates scripting; a scripted module is still what runs
# without Python packages (torch.jit.save / torch.jit.load)
pytestmark = pytest.mark.filterwarnings("ignore:.*torch.jit.*:DeprecationWarning")

TOL = {np.float64: 1e-6, np.float32: 1e-5}
INPUTS = ("logits", "proba")


def _module(cal, dtype):
    module = to_torch(cal)
    return module.double() if dtype == np.float64 else module.float()


def _forms(cal, X, *, program):
    """The exports of ``cal`` to check: (form, dtype, object). The scripted
    module is float64 only: scripting compiles the same code for both."""
    forms = [("script", np.float64, torch.jit.script(_module(cal, np.float64)))]
    for dtype in (np.float64, np.float32):
        forms.append(("eager", dtype, _module(cal, dtype)))
        forms.append(("onnx", dtype, to_onnx(cal, dtype=dtype)))
    if program:  # the batch dimension of the program is dynamic
        example = (torch.from_numpy(np.ascontiguousarray(X[:3])),)
        dims = {"x": {0: torch.export.Dim("batch")}}
        exported = torch.export.export(to_torch(cal), example, dynamic_shapes=dims)
        forms.append(("torch.export", np.float64, exported.module()))
    return forms


def _check(cal, X, forms):
    for form, dtype, exported in forms:
        for rows in (X, X[:1]):  # many rows and one
            diff = check_export(cal, rows, exported)
            assert diff <= TOL[dtype], (form, dtype.__name__, len(rows), diff)


#: the calibrators whose torch.export is also checked with input="proba"
#: (the input block is shared; these add their own handling of it)
PROGRAM_PROBA = {"TemperatureScaling", "StructuredMatrixScaling", "DirichletCalibrator"}


@pytest.mark.parametrize("input", INPUTS)
@pytest.mark.parametrize("name", PARAMETRIC)
def test_every_form_on_a_real_task(name, input):
    # held-out logits of a logistic regression on digits (10 classes)
    X, _ = scores("digits", input)
    cal = fitted(name, "digits", input)
    program = input == "logits" or name in PROGRAM_PROBA
    _check(cal, X, _forms(cal, X, program=program))


@pytest.mark.parametrize("input", INPUTS)
@pytest.mark.parametrize(
    "name, variant",
    [(name, False) for name in PARAMETRIC] + [(name, True) for name in VARIANTS],
)
def test_generated_scores(name, variant, input):
    X, _ = scores("generated", input)
    cal = fitted(name, "generated", input, variant)
    _check(cal, X, _forms(cal, X, program=False))


@pytest.mark.parametrize("name", PARAMETRIC)
def test_probabilities_beyond_float32_range(name):
    # probabilities down to 1e-80, and 0 in float32: the exports take
    # max(log p, log proba_floor_), which float32 holds
    X, _ = scores("wide", "proba")
    assert X.min() < 1e-45
    cal = fitted(name, "wide", "proba")
    for dtype in (np.float64, np.float32):
        for exported in (_module(cal, dtype), to_onnx(cal, dtype=dtype)):
            assert check_export(cal, X, exported) <= TOL[dtype]


def test_graph_is_the_tempered_softmax():
    import onnxruntime

    X, _ = scores("digits", "logits")
    cal = fitted("TemperatureScaling", "digits", "logits")
    session = onnxruntime.InferenceSession(
        to_onnx(cal, dtype=np.float64).SerializeToString(),
        providers=["CPUExecutionProvider"],
    )
    out = session.run(None, {"scores": X})[0]
    expected = softmax(X / cal.temperature_, axis=1)
    np.testing.assert_allclose(out, expected, rtol=1e-12, atol=1e-15)
    assert [i.name for i in session.get_inputs()] == ["scores"]
    assert [o.name for o in session.get_outputs()] == ["probabilities"]
