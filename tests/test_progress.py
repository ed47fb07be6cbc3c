"""Progress of long fits: verbose=1 shows a bar per phase on stderr, 2 adds
lines, 0 prints nothing; the command line shows the bar on a terminal."""

import re
import sys

import joblib
import numpy as np
import pytest
import torch
from sklearn.utils.fixes import parse_version

from skcal import IdentityCalibrator, TemperatureScaling, VectorScaling
from skcal._torch import TrainingOptions, minimize_adam, train_adam
from skcal._torch._progress import Progress
from skcal.cli import main
from skcal.discovery import all_estimators
from skcal.model_selection import CalibratorSearchCV
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
    "BiasCorrectedTemperatureScaling": (
        ["BiasCorrectedTemperatureScaling"],
        ITERATION,
    ),
    "MatrixScaling": (["MatrixScaling"], ITERATION),
    "DirichletCalibrator": (["DirichletCalibrator"], ITERATION),
    "StructuredMatrixScaling": (["StructuredMatrixScaling"], ITERATION),
    "StructuredVectorScaling": (["StructuredVectorScaling"], ITERATION),
    "BBQCalibrator": (["BBQCalibrator"], r"class \d+: \d+ models kept"),
    "ENIRCalibrator": (["ENIRCalibrator"], r"class \d+: \d+ models kept"),
    "VennAbersCalibrator": (["VennAbersCalibrator"], r"problem \d+ of \d+ fitted"),
    "ScalingBinningCalibrator": (["ScalingBinningCalibrator"], r"map \d+: slope "),
    "TopVersusAll": (["TopVersusAll: binary temperature"], ITERATION),
    "CenteredIsotonicCalibrator": (
        ["CenteredIsotonicCalibrator"],
        r"class \d+: \d+ knots",
    ),
    "EnsembleTemperatureScaling": (
        [
            "EnsembleTemperatureScaling: NLL temperature",
            "EnsembleTemperatureScaling: Brier temperature",
            "EnsembleTemperatureScaling: weights",
        ],
        r"Brier temperature: evaluation \d+: beta \d",
    ),
    "DirichletCalibratorCV": (
        ["DirichletCalibratorCV"],
        r"fold \d/\d \{.*\}: held-out log loss \d",
    ),
    "KCalCalibrator": (["KCal: projection", "KCal: bandwidth"], EPOCH),
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


# ------------------------------------------------------ bars that end early
def test_an_early_stopped_bar_ends_at_its_epoch_with_a_note(capsys):
    with Progress(1, total=10, desc="phase") as progress:
        for _ in range(4):
            progress.step(loss=0.5)
        progress.stopped_early(epoch=4, patience=3)
    err = capsys.readouterr().err
    last = err.replace("\r", "\n").strip().splitlines()[-1]
    assert "phase: 100%" in last and "4/4 [" in last and "/10" not in last
    assert last.endswith("loss=0.5, stopped early at epoch 4 (no improvement for 3)]")
    with Progress(0, total=10, desc="phase") as progress:
        progress.stopped_early(epoch=4, patience=3)
    assert capsys.readouterr().err == ""


def _options(verbose, patience=3):
    return TrainingOptions(
        learning_rate=1e-2,
        max_iter=50,
        n_iter_no_change=patience,
        seed=0,
        device="cpu",
        verbose=verbose,
    )


@pytest.mark.parametrize("loop", ["train_adam", "minimize_adam"])
def test_training_loops_note_early_stopping(loop, capsys):
    """A loss that never improves: both loops stop after ``n_iter_no_change``
    epochs (3), and their bars say so, at 3/3 rather than 3/50."""
    w = torch.zeros(2, requires_grad=True)

    def loss(*_):
        return (w * 0.0).sum() + 1.0  # constant: never an improvement

    if loop == "train_adam":
        gen = torch.Generator().manual_seed(0)
        kwargs = dict(n_samples=4, generator=gen, options=_options(1))
        train_adam(loss, lambda: 1.0, [w], desc="phase", **kwargs)
    else:
        minimize_adam(loss, [w], options=_options(1), desc="phase")
    err = capsys.readouterr().err
    assert "3/3 [" in err and "/50" not in err.splitlines()[-1]
    assert "stopped early at epoch 3 (no improvement for 3)" in err


@pytest.mark.filterwarnings("ignore")
def test_a_converged_solve_ends_its_bar_with_a_note(capsys):
    X, y = make_miscalibrated_logits(300, 3, random_state=0)
    est = VectorScaling(device="cpu", verbose=1, max_iter=500).fit(X, y)
    last = capsys.readouterr().err.replace("\r", "\n").strip().splitlines()[-1]
    if est.n_iter_ < 500:  # converged before its maximum (no warning)
        assert f" {est.n_iter_}/{est.n_iter_} [" in last
        assert last.endswith(f"converged at iteration {est.n_iter_}]")


# ------------------------------------------------------------- the search
class _Announcing(IdentityCalibrator):
    """Identity calibration that writes a line to stderr when it is fitted."""

    def __init__(self, *, input="logits", classes=None, tag="a"):
        super().__init__(input=input, classes=classes)
        self.tag = tag

    def fit(self, X, y, sample_weight=None):
        print(f"fitting {self.tag}", file=sys.stderr)
        return super().fit(X, y, sample_weight=sample_weight)


@pytest.mark.skipif(
    parse_version(joblib.__version__).release < (1, 3),
    reason="joblib before 1.3 cannot yield results as they finish: the lines "
    "come at the end (test_a_backend_without_generators_returns_lists)",
)
def test_the_search_prints_each_candidate_as_its_folds_finish(capsys):
    """Each candidate's line comes after its own fits and before the next
    candidate's: printed as it finishes, not at the end."""
    X, y = make_miscalibrated_logits(150, 3, random_state=0)
    candidates = [(tag, _Announcing(tag=tag)) for tag in "abc"]
    search = CalibratorSearchCV(candidates, cv=3, random_state=0, verbose=1)
    search.fit(X, y)
    lines = capsys.readouterr().err.splitlines()
    assert lines[0].startswith("[CalibratorSearchCV] scoring 3 of 3 candidates x 3")
    for k, tag in enumerate("abc"):
        block = lines[1 + 4 * k : 5 + 4 * k]
        assert block[:3] == [f"fitting {tag}"] * 3, lines
        mean = search.cv_results_["mean_test_score"][k]
        assert block[3].startswith(f"[CalibratorSearchCV] {tag}  score {mean:.5g} +- ")
        assert f" s per fold [{k + 1}/3, " in block[3]
    assert lines[13].startswith(f"[CalibratorSearchCV] selected {search.selected_}")
    assert lines[14:] == [f"fitting {search.selected_}"]  # the refit


def test_the_search_reports_every_candidate_in_parallel_too(capsys):
    X, y = make_miscalibrated_logits(150, 3, random_state=0)
    candidates = [("a", IdentityCalibrator()), ("b", TemperatureScaling(device="cpu"))]
    with joblib.parallel_backend("threading", n_jobs=2):
        CalibratorSearchCV(candidates, cv=2, random_state=0, n_jobs=2, verbose=1).fit(
            X, y
        )
    lines = capsys.readouterr().err.splitlines()
    done = sorted(
        re.findall(
            r"^\[CalibratorSearchCV\] (\w)  score .* \[(\d)/2", "\n".join(lines), re.M
        )
    )
    assert [name for name, _ in done] == ["a", "b"]
    assert sorted(k for _, k in done) == ["1", "2"]


def test_a_backend_without_generators_returns_lists():
    """multiprocessing cannot yield results as they finish: the search falls
    back to joblib's list (its lines then come at the end), as with joblib
    before 1.3."""
    from skcal.model_selection._search import _parallel

    if not hasattr(joblib.Parallel(), "return_generator"):
        pytest.skip("joblib before 1.3 returns lists only")
    with joblib.parallel_config("multiprocessing", n_jobs=2):
        assert not _parallel(2).return_generator
    assert _parallel(None).return_generator


@pytest.mark.filterwarnings("ignore")
def test_cli_select_shows_the_search_live_unless_quiet(tmp_path, capsys):
    z, y = make_miscalibrated_logits(300, 3, random_state=1)
    cal = tmp_path / "cal.npz"
    np.savez(cal, logits=z, labels=y)
    argv = ["select", "--fit", str(cal), "--candidates", "identity", "ts", "--cv", "2"]
    assert main(argv) == 0
    captured = capsys.readouterr()
    err = captured.err.splitlines()
    first = next(i for i, line in enumerate(err) if "[CalibratorSearchCV]" in line)
    assert err[first].startswith("[CalibratorSearchCV] scoring 2 of 2 candidates x 2")
    assert re.search(r"IdentityCalibrator +score .* \[1/2, ", err[first + 1])
    assert re.search(r"TemperatureScaling +score .* \[2/2, ", err[first + 2])
    assert err[first + 3].startswith("[CalibratorSearchCV] selected ")
    assert "[CalibratorSearchCV]" not in captured.out
    assert main([*argv, "--quiet"]) == 0
    assert capsys.readouterr().err == ""
