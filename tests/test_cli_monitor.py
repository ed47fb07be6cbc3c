"""``skcal monitor``: batches from files and folders, the persisted state,
the verdict, --fail-on-alarm, groups and errors."""

import json

import numpy as np
import pytest

from skcal.cli import main
from skcal.monitor import CalibrationMonitor


def _write_batches(folder, temperatures, seed=0, n=300):
    rng = np.random.default_rng(seed)
    folder.mkdir(exist_ok=True)
    batches = []
    for i, t in enumerate(temperatures):
        logits = rng.normal(size=(n, 4)) * 2
        p = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
        q = np.exp(logits / t) / np.exp(logits / t).sum(axis=1, keepdims=True)
        y = np.minimum((rng.random((n, 1)) > q.cumsum(axis=1)).sum(axis=1), 3)
        np.savez(folder / f"batch{i:02d}.npz", proba=p, labels=y)
        batches.append((y, p))
    return batches


def test_a_folder_is_one_look_per_file_and_equals_the_library(tmp_path, capsys):
    batches = _write_batches(tmp_path / "b", [1.0, 1.0, 1.0])
    state = tmp_path / "state.json"
    assert main(["monitor", "--state", str(state), str(tmp_path / "b"), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    library = CalibrationMonitor()
    for y, p in batches:
        library.update(y, p)
    assert [look["look"] for look in out["looks"]] == [1, 2, 3]
    assert out["looks"][-1]["e_value"] == pytest.approx(library.e_value_, rel=1e-12)
    assert CalibrationMonitor.load(state).n_rows_ == 900


def test_the_state_carries_on_and_the_alarm_sets_the_exit_code(tmp_path, capsys):
    _write_batches(tmp_path / "calm", [1.0, 1.0])
    _write_batches(tmp_path / "drift", [1.8, 1.8, 1.8], seed=1)
    state = str(tmp_path / "state.json")
    assert main(["monitor", "--state", state, str(tmp_path / "calm")]) == 0
    capsys.readouterr()
    code = main(
        ["monitor", "--state", state, "--fail-on-alarm", str(tmp_path / "drift")]
    )
    out = capsys.readouterr().out
    assert code == 1
    assert "refit the temperature" in out
    assert CalibrationMonitor.load(state).n_looks_ == 5


def test_groups_from_a_column(tmp_path, capsys):
    pd = pytest.importorskip("pandas")
    rng = np.random.default_rng(2)
    p = rng.dirichlet(np.ones(3), size=200)
    frame = pd.DataFrame(p, columns=["proba_0", "proba_1", "proba_2"])
    frame["label"] = rng.integers(0, 3, 200)
    frame["site"] = rng.choice(["north", "south"], 200)
    frame.to_csv(tmp_path / "b.csv", index=False)
    assert (
        main(["monitor", str(tmp_path / "b.csv"), "--group-col", "site", "--json"]) == 0
    )
    out = json.loads(capsys.readouterr().out)
    library = CalibrationMonitor().update(
        frame["label"].to_numpy(), p, groups=frame["site"].to_numpy()
    )
    assert out["looks"][0]["e_value"] == pytest.approx(library.e_value_, rel=1e-12)


def test_errors_are_one_line(tmp_path, capsys):
    _write_batches(tmp_path / "b", [1.0])
    state = str(tmp_path / "state.json")
    main(["monitor", "--state", state, str(tmp_path / "b")])
    capsys.readouterr()
    assert (
        main(["monitor", "--state", state, "--alpha", "0.01", str(tmp_path / "b")]) == 2
    )
    assert "keeps its alpha" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    assert main(["monitor", str(tmp_path / "empty")]) == 2
    assert "holds no file" in capsys.readouterr().err
    (tmp_path / "bad.json").write_text("{}")
    assert (
        main(["monitor", "--state", str(tmp_path / "bad.json"), str(tmp_path / "b")])
        == 2
    )
    assert "not a monitor state" in capsys.readouterr().err
