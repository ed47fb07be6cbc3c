"""The export of the per-group calibrators: a module and a graph of two
inputs, the scores and each row's group position (-1: the pooled map)."""

import numpy as np
import pytest
from threadpoolctl import threadpool_limits

from skcal import GroupedTemperatureScaling, GroupedVectorScaling
from skcal.export import check_export, to_onnx, to_torch
from skcal.model_selection import CalibratorSearchCV

torch = pytest.importorskip("torch")
ort = pytest.importorskip("onnxruntime")


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    with threadpool_limits(1):
        yield


def _data(seed=0, n=300, k=4):
    """Logits of three groups ("a", "b", "c") of different temperatures;
    test rows with a fourth, unseen group ("new")."""
    rng = np.random.default_rng(seed)
    groups = rng.choice(["a", "b", "c"], n)
    X = rng.normal(size=(n, k)) * 3
    T = np.select([groups == "a", groups == "b"], [0.5, 2.0], 1.0)[:, None]
    P = np.exp(X / T - (X / T).max(axis=1, keepdims=True))
    y = np.array([rng.choice(k, p=p / p.sum()) for p in P])
    X_test = rng.normal(size=(200, k)) * 3
    g_test = rng.choice(["a", "b", "c", "new"], 200)
    return X, y, groups, X_test, g_test


def _softmax(Z):
    E = np.exp(Z - Z.max(axis=1, keepdims=True))
    return E / E.sum(axis=1, keepdims=True)


def _onnx_run(model, X, group):
    session = ort.InferenceSession(
        model.SerializeToString(), providers=["CPUExecutionProvider"]
    )
    scores, second = session.get_inputs()
    dtype = np.float64 if scores.type == "tensor(double)" else np.float32
    feed = {scores.name: X.astype(dtype), second.name: group}
    return session.run(None, feed)[0].astype(np.float64)


ESTIMATORS = [
    lambda: GroupedTemperatureScaling(shrinkage=1.0),
    lambda: GroupedVectorScaling(shrinkage=1.0),
]


@pytest.mark.parametrize("make", ESTIMATORS, ids=["temperature", "vector"])
@pytest.mark.parametrize("input", ["logits", "proba"])
def test_parity_with_predict_proba_unseen_groups_included(make, input):
    X, y, groups, X_test, g_test = _data()
    if input == "proba":
        X, X_test = _softmax(X), _softmax(X_test)
    est = make().set_params(input=input).fit(X, y, groups=groups)
    assert (est.group_positions(g_test) == -1).sum() > 20  # unseen rows
    module = to_torch(est)
    assert check_export(est, X_test, module, groups=g_test) <= 1e-6
    assert check_export(est, X_test, torch.jit.script(module), groups=g_test) <= 1e-6
    assert check_export(est, X_test, to_torch(est).float(), groups=g_test) <= 1e-5
    for dtype, tol in ((np.float64, 1e-6), (np.float32, 1e-5)):
        graph = to_onnx(est, dtype=dtype)
        assert [i.name for i in graph.graph.input] == ["scores", "group"]
        assert check_export(est, X_test, graph, groups=g_test) <= tol
        # groups=None: every row at the pooled map
        assert check_export(est, X_test, graph) <= tol


def test_hand_computed_temperatures_per_group():
    X, y, groups, X_test, g_test = _data(seed=1)
    est = GroupedTemperatureScaling(shrinkage=0.5).fit(X, y, groups=groups)
    labels = list(est.groups_)
    T = {g: t for g, t in zip(labels, est.group_temperatures_)}
    rows_T = np.array([T.get(g, est.temperature_) for g in g_test])[:, None]
    expected = _softmax(X_test / rows_T)  # softmax(x / T_g), pooled T unseen
    positions = np.array([labels.index(g) if g in T else -1 for g in g_test])
    np.testing.assert_array_equal(est.group_positions(g_test), positions)
    group = torch.from_numpy(positions)
    out = to_torch(est)(torch.from_numpy(X_test), group).numpy()
    assert np.abs(out - expected).max() <= 1e-6
    scripted = torch.jit.script(to_torch(est))
    out = scripted(torch.from_numpy(X_test), group).numpy()
    assert np.abs(out - expected).max() <= 1e-6
    graph = _onnx_run(to_onnx(est, dtype=np.float64), X_test, positions)
    assert np.abs(graph - expected).max() <= 1e-6
    graph32 = _onnx_run(to_onnx(est), X_test, positions)
    assert np.abs(graph32 - expected).max() <= 1e-5


def test_hand_computed_vector_maps_and_out_of_range_positions():
    X, y, groups, X_test, _ = _data(seed=2)
    est = GroupedVectorScaling(shrinkage=2.0).fit(X, y, groups=groups)
    Z = X_test - X_test.max(axis=1, keepdims=True)
    Z = Z - np.log(np.exp(Z).sum(axis=1, keepdims=True))  # log softmax
    n = len(est.groups_)
    # in range, -1, past the end and far below: the last three are pooled
    positions = np.resize(np.array([0, 1, 2, -1, n, -7]), len(X_test))
    a = np.vstack([est.group_coef_, est.coef_])
    b = np.vstack([est.group_intercept_, est.intercept_])
    rows = np.where((positions >= 0) & (positions < n), positions, n)
    expected = _softmax(Z * a[rows] + b[rows])
    out = to_torch(est)(torch.from_numpy(X_test), torch.from_numpy(positions))
    assert np.abs(out.numpy() - expected).max() <= 1e-6
    graph = _onnx_run(to_onnx(est, dtype=np.float64), X_test, positions)
    assert np.abs(graph - expected).max() <= 1e-6


def test_group_positions_contract():
    X, y, groups, _, _ = _data()
    est = GroupedTemperatureScaling(shrinkage=1.0).fit(X, y, groups=groups)
    out = est.group_positions(np.array(["c", "a", "zzz", "b"]))
    assert out.dtype == np.int64
    assert out.tolist() == [2, 0, -1, 1]
    with pytest.raises(ValueError, match="1-D"):
        est.group_positions(np.array([["a"]]))


def test_onnx_input_conversion_and_groups_refused_for_a_one_input_export():
    X, y, groups, X_test, g_test = _data()
    est = GroupedVectorScaling(shrinkage=1.0).fit(X, y, groups=groups)
    # a graph reading probabilities: logs of probabilities are logits up to
    # a shift per row, which the log-softmax removes
    graph = to_onnx(est, input="proba", dtype=np.float64)
    positions = est.group_positions(g_test)
    out = _onnx_run(graph, _softmax(X_test), positions)
    ref = est.predict_proba(X_test, groups=g_test)
    assert np.abs(out - ref).max() <= 1e-6
    from skcal import TemperatureScaling

    ts = TemperatureScaling(device="cpu").fit(X, y)
    with pytest.raises(ValueError, match="reads no group"):
        check_export(ts, X_test, to_onnx(ts), groups=g_test)


def test_search_exports_its_grouped_winner():
    X, y, groups, X_test, g_test = _data(seed=3, n=600)
    search = CalibratorSearchCV(
        [GroupedTemperatureScaling(cv=3, random_state=0)], cv=3, random_state=0
    ).fit(X, y, groups=groups)
    assert search.selected_ == "GroupedTemperatureScaling"
    module = search.to_torch()
    assert check_export(search, X_test, module, groups=g_test) <= 1e-6
    assert check_export(search, X_test, to_onnx(search), groups=g_test) <= 1e-5
    np.testing.assert_array_equal(
        search.group_positions(g_test), search.best_calibrator_.group_positions(g_test)
    )


def test_the_deploying_page_snippet_runs():
    import re
    from pathlib import Path

    text = (Path(__file__).parents[2] / "doc" / "deploying.rst").read_text()
    section = text[text.index("Per-group calibrators") :]
    code = re.findall(r"\.\. code-block:: python\n\n((?:   .*\n|\n)+)", section)[0]
    code = "\n".join(line[3:] for line in code.splitlines())
    exec(compile(code, "doc/deploying.rst", "exec"), {})


def test_a_saved_script_runs_with_both_inputs(tmp_path):
    X, y, groups, X_test, g_test = _data(seed=4)
    est = GroupedTemperatureScaling(shrinkage=1.0).fit(X, y, groups=groups)
    path = str(tmp_path / "grouped.pt")
    torch.jit.save(torch.jit.script(to_torch(est)), path)
    loaded = torch.jit.load(path)
    assert check_export(est, X_test, loaded, groups=g_test) <= 1e-6
    assert check_export(est, X_test, loaded) <= 1e-6  # every row pooled
