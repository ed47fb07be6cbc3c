"""Export of TopVersusAll: the exact next float of the ONNX graphs, and the
torch module and ONNX graph of every inner calibrator against
``predict_proba`` (skcal's numpy path) and a hand-computed case."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")
ort = pytest.importorskip("onnxruntime")

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
