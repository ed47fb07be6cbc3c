"""Exported local calibrators (embeddings in, probabilities out) compute
predict_proba in every form; ONNX's lgamma (Lanczos) against scipy's."""

import warnings

import numpy as np
import pytest
from _export_cases import digits_embeddings
from scipy.special import gammaln

from skcal import LocalNetCalibrator, VQLocalCalibrator
from skcal.export import check_export, to_onnx, to_torch
from skcal.export._graph import GraphBuilder
from skcal.utils._testing import make_region_miscalibrated_embeddings

torch = pytest.importorskip("torch")
onnxruntime = pytest.importorskip("onnxruntime")
pytestmark = pytest.mark.filterwarnings("ignore:.*torch.jit.*:DeprecationWarning")

TOL = {np.float64: 1e-6, np.float32: 1e-5}
VQ = dict(n_codewords=8, max_iter=5, random_state=0)
CALIBRATORS = {
    "localnet": lambda coef, b, slots: LocalNetCalibrator(
        coef=coef, intercept=b, max_iter=3, random_state=0
    ),
    "vq": lambda coef, b, slots: VQLocalCalibrator(n_slots=slots, **VQ),
    "vq-variance": lambda coef, b, slots: VQLocalCalibrator(
        n_slots=slots, learn_variance=True, **VQ
    ),
    "vq-dirichlet": lambda coef, b, slots: VQLocalCalibrator(
        n_slots=slots, calibration="dirichlet", **VQ
    ),
    "vq-frozen-none": lambda coef, b, slots: VQLocalCalibrator(
        n_slots=slots,
        calibration="none",
        head="frozen",
        coef=coef,
        intercept=b,
        **VQ,
    ),  # fmt: skip
}


def _data(name):
    if name == "digits":  # pixels of digits, a logistic regression's head
        X, y, coef, intercept = digits_embeddings()
        return X, y, coef, intercept, 8
    X, y, coef, intercept, _ = make_region_miscalibrated_embeddings(
        400, 3, random_state=0
    )
    return X, y, coef, intercept, 4


def _forms(cal, X):
    program = torch.export.export(
        to_torch(cal),
        (torch.from_numpy(np.ascontiguousarray(X[:3])),),
        dynamic_shapes={"x": {0: torch.export.Dim("batch")}},
    )
    return [
        ("eager", np.float64, to_torch(cal)),
        ("eager", np.float32, to_torch(cal).float()),
        ("script", np.float64, torch.jit.script(to_torch(cal))),
        ("torch.export", np.float64, program.module()),
        ("onnx", np.float64, to_onnx(cal, dtype=np.float64)),
        ("onnx", np.float32, to_onnx(cal, dtype=np.float32)),
    ]


@pytest.mark.parametrize(
    "name, data",
    [(name, "region") for name in CALIBRATORS]
    + [("localnet", "digits"), ("vq", "digits")],
)
def test_every_form_matches_predict_proba(name, data):
    X, y, coef, intercept, slots = _data(data)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # accuracy, codebook warnings
        cal = CALIBRATORS[name](coef, intercept, slots).fit(X, y)
    for form, dtype, exported in _forms(cal, X):
        for rows in (X, X[:1]):
            diff = check_export(cal, rows, exported)
            assert diff <= TOL[dtype], (form, dtype.__name__, len(rows), diff)
    model = to_onnx(cal)
    dims = [d.dim_value for d in model.graph.output[0].type.tensor_type.shape.dim]
    assert dims[1] == len(cal.classes_) and len(cal.classes_) != X.shape[1]


def test_lgamma_of_the_graph():
    from skcal._torch._export import _onnx_lgamma

    x = np.concatenate([[1e-8, 1e-3, 0.5, 1.0, 1.5, 2.0], np.geomspace(0.01, 300, 60)])
    g = GraphBuilder(np.float64)
    model = g.model("x", _onnx_lgamma(g, "x"), len(x))
    session = onnxruntime.InferenceSession(
        model.SerializeToString(), providers=["CPUExecutionProvider"]
    )
    out = session.run(None, {"x": x[None, :]})[0][0]
    np.testing.assert_allclose(out, gammaln(x), rtol=1e-12, atol=1e-12)
