"""The skcal command line."""

import subprocess
import sys

import numpy as np
import pytest
from scipy.special import softmax
from sklearn.datasets import load_iris
from sklearn.neural_network import MLPClassifier

from skcal.cli import format_table, main, mlp_logits
from skcal.utils.discovery import all_estimators


@pytest.mark.parametrize("activation", ["relu", "tanh", "logistic", "identity"])
def test_mlp_logits_reproduce_predict_proba(activation):
    X, y = load_iris(return_X_y=True)
    mlp = MLPClassifier((8, 5), activation=activation, max_iter=50, random_state=0)
    with pytest.warns(Warning):  # not converged in 50 iterations: irrelevant here
        mlp.fit(X, y)
    np.testing.assert_allclose(
        softmax(mlp_logits(mlp, X), axis=1),
        mlp.predict_proba(X),
        rtol=1e-10,
        atol=1e-12,
    )


def test_format_table():
    table = format_table([{"m": "a", "x": 0.5}, {"m": "long", "x": 12.0}], ["m", "x"])
    assert table.splitlines() == [
        "m           x",
        "----  -------",
        "a      0.5000",
        "long  12.0000",
    ]


def test_demo_runs_as_a_console_command():
    proc = subprocess.run(
        [sys.executable, "-m", "skcal", "demo", "--seed", "1", "--device", "cpu"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("method"))
    rows = {}
    for line in lines[header + 2 :]:
        if not line.strip():  # the table ends at the first blank line
            break
        rows[line.split()[0]] = line.split()[1:]
    expected = {"uncalibrated"} | {name for name, _ in all_estimators()}
    assert expected <= set(rows)
    for name in expected:
        values = [float(v) for v in rows[name]]
        accuracy, nll = values[0], values[1]
        assert 0.8 < accuracy <= 1 and 0 < nll < 5  # parsed, finite, sane
    # temperature scaling never changes the predictions
    assert rows["TemperatureScaling"][0] == rows["uncalibrated"][0]


def test_bad_device_is_a_clear_error(capsys):
    assert main(["demo", "--device", "tpu"]) == 2
    assert "device must be" in capsys.readouterr().err


def test_version(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0
    assert capsys.readouterr().out.startswith("skcal ")
