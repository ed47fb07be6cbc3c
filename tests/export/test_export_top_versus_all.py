"""Export of TopVersusAll: the exact next float of the ONNX graphs, and the
torch module and ONNX graph of every inner calibrator against
``predict_proba`` (skcal's numpy path) and a hand-computed case."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")
ort = pytest.importorskip("onnxruntime")
pytestmark = pytest.mark.filterwarnings("ignore:.*torch.jit.*:DeprecationWarning")

from skcal._torch._export import NextAfterUp  # noqa: E402
from skcal.export._graph import GraphBuilder  # noqa: E402


def _next_up_cases(dtype):
    """Powers of two and their neighbours over the whole range (subnormals
    included), 0, -0, the extremes, infinities, and random values of every
    magnitude, with both signs."""
    info = np.finfo(dtype)
    rng = np.random.default_rng(0)
    exponents = np.arange(info.minexp - info.nmant - 1, info.maxexp)
    powers = np.ldexp(1.0, exponents).astype(dtype)
    zero = dtype(0)
    values = [
        powers,
        np.nextafter(powers, zero),
        np.nextafter(powers, dtype(np.inf)),
        powers * dtype(1.5),
        np.arange(300, dtype=dtype) * info.smallest_subnormal,
        rng.uniform(0.0, 1.0, 5000).astype(dtype),
        np.exp(
            rng.uniform(
                np.log(float(info.smallest_subnormal)), np.log(float(info.max)), 5000
            )
        ).astype(dtype),  # fmt: skip
        np.array([0.0, 1.0, info.max, info.tiny, np.inf], dtype=dtype),
    ]
    x = np.concatenate([np.ravel(v) for v in values]).astype(dtype)
    return np.concatenate([x, -x])


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_next_after_up_is_numpy_nextafter(dtype):
    x = _next_up_cases(dtype)
    with np.errstate(over="ignore"):
        expected = np.nextafter(x, dtype(np.inf))
    g = GraphBuilder(dtype)
    model = g.model("x", NextAfterUp().onnx(g, "x"), 1)
    session = ort.InferenceSession(
        model.SerializeToString(), providers=["CPUExecutionProvider"]
    )
    graph = session.run(None, {"x": x[:, None]})[0][:, 0]
    np.testing.assert_array_equal(graph, expected)
    eager = NextAfterUp()(torch.from_numpy(x)).numpy()
    np.testing.assert_array_equal(eager, expected)
    scripted = torch.jit.script(NextAfterUp())(torch.from_numpy(x)).numpy()
    np.testing.assert_array_equal(scripted, expected)


# ------------------------------------------------------------ TopVersusAll
import warnings  # noqa: E402

from scipy.special import softmax  # noqa: E402
from sklearn.linear_model import LogisticRegression  # noqa: E402

import skcal  # noqa: E402
from skcal import TopVersusAll  # noqa: E402
from skcal.exceptions import NotExportableError  # noqa: E402
from skcal.export import check_export, to_onnx  # noqa: E402
from skcal.utils._testing import make_miscalibrated_logits  # noqa: E402

#: inner calibrators of each protocol: scaling (fit_top_label), one map
#: (fit_confidence), binary (to_torch of the two columns)
INNERS = {
    "TemperatureScaling": None,
    "VectorScaling": skcal.VectorScaling,
    "IsotonicCalibrator": skcal.IsotonicCalibrator,
    "HistogramBinningCalibrator": skcal.HistogramBinningCalibrator,
    "PlattCalibrator": skcal.PlattCalibrator,
    "BBQCalibrator": skcal.BBQCalibrator,
    "ScalingBinningCalibrator": skcal.ScalingBinningCalibrator,
}


def _hard_logits(n_classes=5):
    """Logits of the property suite's kinds: rounded (ties), a tied top,
    all equal, near-certain rows, others that underflow or are subnormal,
    tiny gaps, an enormous gap, and plain rows."""
    rng = np.random.default_rng(0)
    Z = rng.normal(0.0, 2.0, (140, n_classes))
    Z[0:20] = np.round(Z[0:20])
    Z[20:30, :2] = Z[20:30].max(axis=1, keepdims=True) + 1.0
    Z[30:40] = 0.0
    Z[40:60, 0] += 40.0
    Z[60:80, 1] += 800.0
    Z[80:90, 2] += 740.0
    Z[90:100] *= 1e-9
    Z[100:110, 0] += 1e5
    return Z


def _hard_probabilities(n_classes=5):
    """Their softmax, plus rounded rows, exact zeros, certain rows, rows
    all tied and rows of float32 precision."""
    P = softmax(_hard_logits(n_classes), axis=1)
    P[110:120] = np.round(P[110:120], 2)
    P[110:120] /= P[110:120].sum(axis=1, keepdims=True)
    P[120:125, 1:], P[120:125, 0] = 0.0, 1.0
    P[125:130, 2] = 0.0
    P[125:130] /= P[125:130].sum(axis=1, keepdims=True)
    P[130:135] = 1.0 / n_classes
    P[135:140] = P[135:140].astype(np.float32)
    return P


def _fitted(name, input, redistribution="temperature", **kw):
    X, y = make_miscalibrated_logits(400, 5, temperature=3.0, random_state=0)
    if input == "proba":
        X = softmax(X, axis=1)
    inner = INNERS[name]
    inner = None if inner is None else inner(**kw)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return TopVersusAll(inner, input=input, redistribution=redistribution).fit(X, y)


def _forms(cal, X):
    """The exports of ``cal``: eager float64 and float32, scripted, and the
    ONNX graphs in both types, each with its tolerance."""
    return {
        "eager64": (cal.to_torch(), 1e-6),
        "eager32": (cal.to_torch().float(), 1e-5),
        "script64": (torch.jit.script(cal.to_torch()), 1e-6),
        "onnx64": (to_onnx(cal, dtype=np.float64), 1e-6),
        "onnx32": (to_onnx(cal, dtype=np.float32), 1e-5),
    }


def _check_predict(cal, X, P):
    """The argmax of the exported probabilities is ``cal.predict`` on every
    row where ``predict_proba`` has no tie at its maximum."""
    ref = cal.predict_proba(X)
    tied = (ref == ref.max(axis=1, keepdims=True)).sum(axis=1) > 1
    np.testing.assert_array_equal(
        cal.classes_[np.argmax(P, axis=1)][~tied], cal.predict(X)[~tied]
    )


@pytest.mark.parametrize("input", ["logits", "proba"])
@pytest.mark.parametrize("name", list(INNERS))
def test_every_form_matches_predict_proba(name, input):
    cal = _fitted(name, input)
    X = _hard_logits() if input == "logits" else _hard_probabilities()
    for form, (exported, tol) in _forms(cal, X).items():
        assert check_export(cal, X, exported) <= tol, form
    from skcal.export import _run

    _check_predict(cal, X, _run(to_onnx(cal, dtype=np.float64), X))


@pytest.mark.parametrize("input", ["logits", "proba"])
@pytest.mark.parametrize("name", ["TemperatureScaling", "IsotonicCalibrator"])
def test_proportional_shares_and_torch_export(name, input):
    cal = _fitted(name, input, redistribution="proportional")
    X = _hard_logits() if input == "logits" else _hard_probabilities()
    program = torch.export.export(
        cal.to_torch(),
        (torch.from_numpy(X[:4]),),
        dynamic_shapes=({0: torch.export.Dim("batch")},),
    )
    assert check_export(cal, X, program) <= 1e-6
    assert check_export(cal, X, to_onnx(cal, dtype=np.float64)) <= 1e-6


def test_hand_computed_confidence_and_shares():
    """The top class gets the isotonic map of its softmax confidence, the
    others ``(1 - c~)`` in the proportions of ``softmax(z / T)``."""
    cal = _fitted("IsotonicCalibrator", "logits")
    z = np.array([[2.0, 0.5, -1.0, 0.0, 0.3], [0.1, 3.0, 1.0, -2.0, 0.0]])
    top = z.argmax(axis=1)
    c = softmax(z, axis=1)[np.arange(2), top]
    calibrated = cal.calibrator_.predict_confidence(c)
    expected = np.empty_like(z)
    for i in range(2):
        others = np.delete(z[i], top[i]) / cal.temperature_
        shares = np.exp(others - others.max())
        expected[i] = np.insert(
            (1 - calibrated[i]) * shares / shares.sum(), top[i], calibrated[i]
        )
    # a plain case: the calibrated confidence is above every other share
    others = np.where(np.arange(5) == top[:, None], 0.0, expected)
    assert (calibrated > others.max(axis=1)).all()
    module = cal.to_torch()
    np.testing.assert_allclose(
        module(torch.from_numpy(z)).numpy(), expected, rtol=1e-12, atol=1e-15
    )


def test_a_low_confidence_keeps_the_top_class_first_by_one_unit():
    """A confidence below the largest other's share is raised to it and the
    top class is then the next float above that share, as predict_proba
    does with np.nextafter; a tied top stays tied."""
    X, y = make_miscalibrated_logits(400, 5, temperature=3.0, random_state=0)
    y = (X.argmax(axis=1) + 1) % 5  # almost always wrong: a low confidence
    y[:20] = X[:20].argmax(axis=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cal = TopVersusAll(skcal.HistogramBinningCalibrator(n_bins=1)).fit(X, y)
    z = np.array([[1.0, 0.999, 0.0, -1.0, -2.0], [1.0, 1.0, 0.0, 0.0, 0.0]])
    for exported in (cal.to_torch(), to_onnx(cal, dtype=np.float64)):
        from skcal.export import _run

        P = _run(exported, z)
        np.testing.assert_allclose(P, cal.predict_proba(z), rtol=0, atol=1e-15)
        assert P[0, 0] == np.nextafter(P[0, 1:].max(), np.inf)
        assert P[1, 0] >= P[1, 1]  # tied logits: at least level, never behind


def test_without_a_binary_problem_the_probabilities_are_kept():
    X, y = make_miscalibrated_logits(200, 4, temperature=3.0, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cal = TopVersusAll(skcal.IsotonicCalibrator()).fit(X, X.argmax(axis=1))
    assert cal.calibrator_ is None
    X = _hard_logits(4)
    np.testing.assert_allclose(
        cal.to_torch()(torch.from_numpy(X)).numpy(), softmax(X, axis=1), atol=1e-15
    )
    assert check_export(cal, X, to_onnx(cal, dtype=np.float32)) <= 1e-5


def test_an_inner_calibrator_without_export_is_refused():
    X, y = make_miscalibrated_logits(200, 4, temperature=3.0, random_state=0)
    cal = TopVersusAll(LogisticRegression()).fit(X, y)
    with pytest.raises(NotExportableError, match="LogisticRegression has no to_torch"):
        cal.to_torch()
    with pytest.raises(NotExportableError, match="TopVersusAll"):
        to_onnx(cal)
