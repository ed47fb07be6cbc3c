"""Progress of long fits: verbose=1 shows a bar per phase on stderr, 2 adds
lines, 0 prints nothing; the command line shows the bar on a terminal."""

import re
import sys

import numpy as np
import pytest

from skcal._torch._progress import Progress
from skcal.cli import main
from skcal.discovery import all_estimators
from skcal.utils._testing import (
    make_estimator,
    make_miscalibrated_logits,
    make_region_miscalibrated_embeddings,
)

#: Every estimator with ``verbose``: the phase names its bars show, and a
#: pattern of its ``verbose=2`` lines.
EPOCH = r": epoch \d+: validation loss \d"
ITERATION = r": iteration \d+: loss \d\S*, largest gradient \d"
PHASES = {
    "VectorScaling": (["VectorScaling"], ITERATION),
    "MatrixScaling": (["MatrixScaling"], ITERATION),
    "DirichletCalibrator": (["DirichletCalibrator"], ITERATION),
    "StructuredMatrixScaling": (["StructuredMatrixScaling"], ITERATION),
    "DirichletCalibratorCV": (
        ["DirichletCalibratorCV"],
        r"fold \d/\d \{.*\}: held-out log loss \d",
    ),
    "KCalCalibrator": (["KCal: projection"], EPOCH),
    "LocalNetCalibrator": (["Local Nets: correction network"], EPOCH),
    "ParameterizedTemperatureScaling": (["PTS: temperature network"], EPOCH),
    "SMARTCalibrator": (["SMART: temperature network"], r": epoch \d+: loss \d"),
    "ClassTemperatureScaling": (
        ["ClassTemperatureScaling: greedy search"],
        r"pass \d, class \d: ECE \d",
    ),
    "ProCalCalibrator": (["ProCal: nearest neighbours"], r"rows \d+ of 300"),
    "VQLocalCalibrator": (
        ["VQ stage 1: codebook and head", "VQ stage 2: compositional map"],
        EPOCH,
    ),
}
#: the bar's counter and times: "k/N [elapsed<remaining"
BAR = re.compile(r"\d+/\d+ \[\d\d:\d\d<\d\d:\d\d")


def _with_verbose():
    return {
        name: cls for name, cls in all_estimators() if "verbose" in cls().get_params()
    }


def test_every_estimator_with_verbose_is_listed():
    assert set(_with_verbose()) == set(PHASES)


def _fit(cls, verbose):
    est = make_estimator(cls, device="cpu", verbose=verbose)
    params = est.get_params()
    if "max_iter" in params:
        est.set_params(max_iter=min(params["max_iter"], 5))
    if cls.__name__ in (
        "KCalCalibrator",
        "LocalNetCalibrator",
        "ProCalCalibrator",
        "VQLocalCalibrator",
    ):
        X, y, coef, intercept, _ = make_region_miscalibrated_embeddings(
            300, 3, n_features=8, random_state=0
        )
        if "coef" in params:
            est.set_params(coef=coef, intercept=intercept)
    else:
        X, y = make_miscalibrated_logits(300, 3, random_state=0)
    return est.fit(X, y)


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("name", sorted(PHASES))
def test_verbose_levels(name, capsys):
    cls = _with_verbose()[name]
    phases, line = PHASES[name]
    _fit(cls, 0)
    captured = capsys.readouterr()
    assert captured.err == "" and captured.out == ""

    _fit(cls, 1)
    captured = capsys.readouterr()
    assert captured.out == ""  # stdout stays clean
    for phase in phases:
        assert f"{phase}:" in captured.err
    assert BAR.search(captured.err), captured.err
    assert not re.search(line, captured.err)  # no per-step lines at verbose=1

    _fit(cls, 2)
    captured = capsys.readouterr()
    assert captured.out == ""
    assert BAR.search(captured.err)
    assert re.search(line, captured.err)


def test_progress_counts_steps_and_writes_lines_only_at_2(capsys):
    with Progress(1, total=4, desc="phase", unit="step") as progress:
        for k in range(3):  # stopped early: 3 of 4
            progress.step(f"line {k}", loss=0.25)
    err = capsys.readouterr().err
    assert "phase:" in err and "3/4" in err and "loss=0.25" in err
    assert "line" not in err
    with Progress(2, total=2, desc="phase") as progress:
        progress.step("line A")
        progress.step("line B")
    err = capsys.readouterr().err
    assert err.index("line A") < err.index("line B") and "2/2" in err
    with Progress(0, total=2, desc="phase") as progress:
        progress.step("line A")
    assert capsys.readouterr().err == ""


@pytest.mark.filterwarnings("ignore")
def test_cli_shows_the_bar_on_a_terminal_only(tmp_path, capsys, monkeypatch):
    z, y = make_miscalibrated_logits(400, 3, random_state=1)
    cal, test = tmp_path / "cal.npz", tmp_path / "test.npz"
    np.savez(cal, logits=z[:300], labels=y[:300])
    np.savez(test, logits=z[300:], labels=y[300:])
    argv = ["calibrate", "--method", "SMARTCalibrator", "--fit", str(cal)]
    argv += [
        "--apply",
        str(test),
        "--out",
        str(tmp_path / "o.npz"),
        "--param",
        "max_iter=5",
    ]
    phase = "SMART: temperature network"

    assert main(argv) == 0  # not a terminal: no bar
    assert phase not in capsys.readouterr().err
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True, raising=False)
    assert main(argv) == 0
    err = capsys.readouterr().err
    assert phase in err and BAR.search(err)
    assert main([*argv, "--quiet"]) == 0
    assert phase not in capsys.readouterr().err
    assert main([*argv, "--param", "verbose=0"]) == 0
    assert phase not in capsys.readouterr().err
