"""The flat per-class lookups of the piecewise blocks (issue 53): classes
of very different numbers of knots (0, 1, 2, and either side of powers of
two, where the binary search's steps change) against np.interp and
np.searchsorted, in torch (eager, scripted, torch.export) and ONNX; and a
graph whose size follows the total number of knots, not classes x the
largest class."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")
ort = pytest.importorskip("onnxruntime")

from skcal._torch._export_piecewise import PiecewiseLinear, StepMap  # noqa: E402
from skcal.export._graph import GraphBuilder  # noqa: E402

SIZES = [1, 2, 3, 4, 5, 7, 8, 9, 16, 17, 33, 64, 65]


def _knots(rng, size):
    """``size`` sorted knots in [0, 1] with a few exact ties."""
    x = np.sort(rng.uniform(0, 1, size))
    if size > 3:
        x[size // 2] = x[size // 2 - 1]  # a jump
    return x


def _queries(xp):
    """Every knot, its neighbours, and a grid beyond both ends."""
    knots = np.concatenate(xp)
    return np.concatenate(
        [
            np.linspace(-0.2, 1.2, 141),
            knots,
            np.nextafter(knots, -np.inf),
            np.nextafter(knots, np.inf),
        ]
    )


def _runs(module, X):
    """The module's outputs on ``X``: eager, scripted, torch.export, ONNX."""
    x = torch.from_numpy(X)
    batch = torch.export.Dim("batch")
    program = torch.export.export(module, (x[:3],), dynamic_shapes={"x": {0: batch}})
    g = GraphBuilder(np.float64)
    model = g.model("x", module.onnx(g, "x"), X.shape[1])
    session = ort.InferenceSession(
        model.SerializeToString(), providers=["CPUExecutionProvider"]
    )
    with torch.no_grad():
        yield "eager", module(x).numpy()
        yield "script", torch.jit.script(module)(x).numpy()
        yield "torch.export", program.module()(x).numpy()
    yield "onnx", session.run(None, {"x": X})[0]


def test_piecewise_linear_of_many_sizes_is_np_interp():
    rng = np.random.default_rng(0)
    xp = [_knots(rng, n) for n in SIZES]
    fp = [np.sort(rng.uniform(0, 1, n)) for n in SIZES]
    q = _queries(xp)
    X = np.repeat(q[:, None], len(SIZES), axis=1)
    want = np.column_stack([np.interp(q, x, f) for x, f in zip(xp, fp)])
    for form, got in _runs(PiecewiseLinear(xp, fp), X):
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-15, err_msg=form)


@pytest.mark.parametrize("closed", ["left", "right"])
def test_step_map_of_many_sizes_is_searchsorted(closed):
    rng = np.random.default_rng(1)
    # bins per class: 1 (no interior edge), 2, ... ; edges with ties
    edges = [np.concatenate([[0.0], _knots(rng, n - 1), [1.0]]) for n in SIZES]
    values = [rng.uniform(0, 1, n) for n in SIZES]
    q = _queries(edges)
    X = np.repeat(q[:, None], len(SIZES), axis=1)
    side = "right" if closed == "left" else "left"
    want = np.column_stack(
        [
            v[np.clip(np.searchsorted(e[1:-1], q, side=side), 0, v.size - 1)]
            for e, v in zip(edges, values)
        ]
    )
    for form, got in _runs(StepMap(edges, values, closed=closed), X):
        np.testing.assert_array_equal(got, want, err_msg=form)


def test_the_graph_grows_with_the_total_number_of_knots():
    # one class of 5,000 knots and 199 of 2: a padded table would hold
    # 200 x 5,000 doubles per constant (8 MB); the flat one about 5,400
    rng = np.random.default_rng(2)
    sizes = [5000] + [2] * 199
    xp = [np.sort(rng.uniform(0, 1, n)) for n in sizes]
    module = PiecewiseLinear(xp, xp)
    g = GraphBuilder(np.float64)
    size = len(g.model("x", module.onnx(g, "x"), len(sizes)).SerializeToString())
    assert size < 200_000, size


def test_classes_out_of_size_order_and_infinite_inputs():
    # the classes' sizes shuffled: the groups are not runs of classes, so
    # the rows are gathered and scattered back; +-inf reach no padding
    rng = np.random.default_rng(3)
    sizes = [65, 2, 17, 1, 300, 4, 9, 2, 33]
    xp = [_knots(rng, n) for n in sizes]
    fp = [np.sort(rng.uniform(0, 1, n)) for n in sizes]
    q = np.concatenate([_queries(xp), [-np.inf, np.inf]])
    X = np.repeat(q[:, None], len(sizes), axis=1)
    want = np.column_stack([np.interp(q, x, f) for x, f in zip(xp, fp)])
    for form, got in _runs(PiecewiseLinear(xp, fp), X):
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-15, err_msg=form)
    edges = [np.concatenate([[0.0], x, [1.0]]) for x in xp]
    values = [rng.uniform(0, 1, n + 1) for n in sizes]
    want = np.column_stack(
        [v[np.searchsorted(e[1:-1], q, side="right")] for e, v in zip(edges, values)]
    )
    for form, got in _runs(StepMap(edges, values), X):
        np.testing.assert_array_equal(got, want, err_msg=form)
