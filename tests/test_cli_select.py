"""``skcal select``: CalibratorSearchCV on the command line."""

import json
import pickle
import subprocess
import sys
import warnings

import joblib
import numpy as np
import pytest
from scipy.special import softmax
from sklearn.metrics import log_loss
from sklearn.model_selection import StratifiedKFold, cross_val_score

from skcal import IdentityCalibrator, TemperatureScaling, VectorScaling
from skcal.cli import main
from skcal.exceptions import GridEdgeWarning
from skcal.metrics import calibration_report, negative_log_likelihood
from skcal.model_selection import CalibratorSearchCV
from skcal.utils._testing import make_miscalibrated_logits

#: class names of CalibratorSearchCV's default candidates
DEFAULT_NAMES = [
    "IdentityCalibrator",
    "TemperatureScaling",
    "VectorScaling",
    "StructuredMatrixScaling",
    "StructuredVectorScaling",
    "DirichletCalibratorCV",
]


@pytest.fixture
def files(tmp_path):
    """Over-confident logits of 3 classes: 300 calibration, 200 test samples."""
    z, y = make_miscalibrated_logits(500, 3, random_state=0)
    cal, test = tmp_path / "cal.npz", tmp_path / "test.npz"
    np.savez(cal, logits=z[:300], labels=y[:300])
    np.savez(test, logits=z[300:], labels=y[300:])
    return cal, test, (z[:300], y[:300]), (z[300:], y[300:])


def _search(candidates, **params):
    """The search the command runs, built and fitted here without the CLI."""
    return CalibratorSearchCV(candidates, **params)


def _three():
    return [
        IdentityCalibrator(),
        TemperatureScaling(device="cpu"),
        VectorScaling(device="cpu"),
    ]


def _table(out: str) -> dict:
    """``{candidate: [mean, std, rank, fit_s, n_params, note]}`` of the table."""
    lines = out.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("candidate"))
    assert lines[header].split() == [
        "candidate",
        "mean_score",
        "std_score",
        "rank",
        "fit_s",
        "n_params",
        "note",
    ]
    rows = {}
    for line in lines[header + 2 :]:
        if not line.strip():
            break
        cells = line.split(maxsplit=6)
        rows[cells[0]] = cells[1:6] + [cells[6] if len(cells) > 6 else ""]
    return rows


def _error(capsys) -> str:
    captured = capsys.readouterr()
    err = captured.err.strip().splitlines()
    assert err, "no error message"
    assert err[-1].startswith("skcal select: error: "), err
    assert "Traceback" not in captured.err and captured.out == ""
    return err[-1]


# ------------------------------------------------------------------ scores
def test_table_equals_a_direct_search_and_sklearn_cross_val_score(files, capsys):
    cal, _, (z, y), _ = files
    argv = ["select", "--fit", str(cal), "--candidates", "identity", "ts", "vs"]
    argv += ["--cv", "4", "--seed", "3"]
    assert main([*argv, "--quiet"]) == 0
    out = capsys.readouterr().out
    rows = _table(out)
    reference = _search(_three(), cv=4, random_state=3).fit(z, y)
    res = reference.cv_results_
    assert list(rows) == list(res["candidate"])
    for c, name in enumerate(res["candidate"]):
        mean, std, rank, _, n_params, note = rows[name]
        assert mean == f"{res['mean_test_score'][c]:.4f}"
        assert std == f"{res['std_test_score'][c]:.4f}"
        assert int(rank) == res["rank_test_score"][c]
        assert int(n_params) == res["n_parameters"][c]
        assert note == ("selected" if name == reference.selected_ else "")
    assert f"Selected {reference.selected_}: " in out
    assert "4-fold stratified cross-fitting, shuffled with seed 3" in out

    # independent references on the same folds: scikit-learn's scorer...
    folds = StratifiedKFold(4, shuffle=True, random_state=3)
    ts = cross_val_score(
        TemperatureScaling(device="cpu"), z, y, cv=folds, scoring="neg_log_loss"
    )
    assert float(rows["TemperatureScaling"][0]) == pytest.approx(ts.mean(), abs=5.1e-5)
    # ...and, for no calibration, the log loss of the softmax by hand
    identity = [
        -log_loss(y[test], softmax(z[test], axis=1), labels=[0, 1, 2])
        for _, test in folds.split(z, y)
    ]
    assert float(rows["IdentityCalibrator"][0]) == pytest.approx(
        np.mean(identity), abs=5.1e-5
    )

    # --json: the same, unrounded
    assert main([*argv, "--json", "--quiet"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["cv_results"]["candidate"] == list(res["candidate"])
    np.testing.assert_allclose(
        got["cv_results"]["mean_test_score"], res["mean_test_score"], rtol=1e-12
    )
    for k in range(4):
        np.testing.assert_allclose(
            got["cv_results"][f"split{k}_test_score"],
            res[f"split{k}_test_score"],
            rtol=1e-12,
        )
    assert got["cv_results"]["mean_test_score"][1] == pytest.approx(ts.mean(), rel=1e-9)
    assert got["cv_results"]["mean_test_score"][0] == pytest.approx(
        np.mean(identity), rel=1e-9
    )
    assert got["selected"] == reference.selected_
    assert got["selection_reason"] == reference.selection_reason_
    assert (got["cv"], got["n_samples"], got["n_classes"]) == (4, 300, 3)
    assert got["input"] == "logits" and got["guard"] == "one_se"


def test_candidates_restrict_the_set_case_and_aliases(files, capsys):
    cal, _, _, _ = files
    argv = ["select", "--fit", str(cal), "--cv", "3", "--json", "--quiet"]
    argv += ["--candidates", "Identity", "TEMPERATURE,ts", "temperature-scaling"]
    assert main(argv) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["cv_results"]["candidate"] == DEFAULT_NAMES[:2]
    assert len(got["cv_results"]["mean_test_score"]) == 2


def test_no_guard_and_scoring_follow_the_search(tmp_path, capsys):
    # vector scaling scores best, but not by one standard error (the
    # docstring example of CalibratorSearchCV)
    z, y = make_miscalibrated_logits(600, 3, temperature=3.0, random_state=0)
    cal = tmp_path / "cal.npz"
    np.savez(cal, logits=z, labels=y)
    guarded = _search(_three(), cv=3, random_state=0).fit(z, y)
    free = _search(_three(), cv=3, random_state=0, guard=None).fit(z, y)
    assert guarded.selected_ != free.selected_  # the option matters here

    argv = ["select", "--fit", str(cal), "--candidates", "identity", "ts", "vs"]
    argv += ["--cv", "3", "--seed", "0", "--quiet"]
    assert main([*argv, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["selected"] == guarded.selected_
    assert main([*argv, "--no-guard"]) == 0
    out = capsys.readouterr().out
    assert f"Selected {free.selected_}: " in out and "guard off" in out
    assert _table(out)[free.selected_][5] == "selected"

    scoring = "neg_expected_calibration_error"
    assert main([*argv, "--scoring", scoring, "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    reference = _search(_three(), cv=3, random_state=0, scoring=scoring).fit(z, y)
    np.testing.assert_allclose(
        got["cv_results"]["mean_test_score"],
        reference.cv_results_["mean_test_score"],
        rtol=1e-12,
    )
    assert got["scoring"] == scoring and got["selected"] == reference.selected_


def test_guard_skips_are_shown(files, capsys):
    cal, _, _, _ = files
    argv = ["select", "--fit", str(cal), "--candidates", "ts", "smart", "--quiet"]
    assert main(argv) == 0
    smart = _table(capsys.readouterr().out)["SMARTCalibrator"]
    # 49 parameters need 490 rows; the file has 300
    assert smart[:2] == ["-", "-"] and smart[4] == "49"
    assert smart[5].startswith("skipped: 49 free parameters need at least 490")


# ---------------------------------------------------------- --test, --save
def test_test_file_prints_the_calibration_report(files, capsys):
    cal, test, (z, y), (z_test, y_test) = files
    argv = ["select", "--fit", str(cal), "--candidates", "identity", "ts"]
    argv += ["--test", str(test), "--n-resamples", "40", "--confidence-level", "0.8"]
    assert main([*argv, "--seed", "2", "--quiet"]) == 0
    out = capsys.readouterr().out
    # the selected calibrator, refitted on all rows (TS is deterministic)
    assert "Selected TemperatureScaling: " in out
    proba = TemperatureScaling(device="cpu").fit(z, y).predict_proba(z_test)
    expected = calibration_report(
        y_test, proba, n_resamples=40, confidence_level=0.8, random_state=2
    )
    assert str(expected) in out and "80% CI" in out
    assert out.index("Selected") < out.index("Calibration report")

    assert main([*argv, "--seed", "2", "--json", "--quiet"]) == 0
    got = json.loads(capsys.readouterr().out)["test"]
    assert got["n_samples"] == 200
    nll = got["intervals"]["metrics"]["NLL"]
    assert nll["estimate"] == pytest.approx(
        negative_log_likelihood(y_test, proba), rel=1e-9
    )
    assert (nll["low"], nll["high"]) == pytest.approx(
        (expected["NLL"].low, expected["NLL"].high), rel=1e-9
    )


def test_save_then_load_predicts_as_the_selected_calibrator(files, tmp_path, capsys):
    cal, _, (z, y), (z_test, _) = files
    path = tmp_path / "search.pkl"
    argv = ["select", "--fit", str(cal), "--candidates", "identity", "ts", "vs"]
    assert main([*argv, "--save", str(path), "--quiet"]) == 0
    assert f"Wrote the fitted search to {path}" in capsys.readouterr().out
    with open(path, "rb") as file:
        loaded = pickle.load(file)
    reference = _search(_three(), random_state=0).fit(z, y)
    assert loaded.selected_ == reference.selected_ == "TemperatureScaling"
    np.testing.assert_allclose(
        loaded.predict_proba(z_test), reference.predict_proba(z_test), rtol=1e-12
    )
    # the selected candidate refitted on all rows, fitted here on its own
    np.testing.assert_allclose(
        loaded.predict_proba(z_test),
        TemperatureScaling(device="cpu").fit(z, y).predict_proba(z_test),
        rtol=1e-12,
    )
    from_joblib = joblib.load(path)
    np.testing.assert_array_equal(from_joblib.predict(z_test), loaded.predict(z_test))


# ------------------------------------------------------------------ errors
@pytest.mark.parametrize(
    "names, expected",
    [
        (["nope"], "unknown method 'nope'"),
        (["vq"], "VQLocalCalibrator calibrates embeddings"),
        (["ts,,vs"], "--candidates 'ts,,vs' has an empty name"),
    ],
)
def test_unknown_candidate_lists_the_valid_ones(files, capsys, names, expected):
    cal, _, _, _ = files
    assert main(["select", "--fit", str(cal), "--candidates", *names]) == 2
    err = _error(capsys)
    assert expected in err
    assert all(name in err for name in DEFAULT_NAMES) or "unknown method" in err


def test_any_calibrator_is_a_candidate(files, capsys):
    """--candidates takes any score calibrator by name or alias (ETS and
    Dirichlet are not among the defaults): the search is the Python one
    with those candidates, scored on the same folds."""
    from skcal import DirichletCalibrator, EnsembleTemperatureScaling

    cal, _, (z, y), _ = files
    argv = ["select", "--fit", str(cal), "--candidates", "ts", "ets", "dirichlet"]
    assert main(argv + ["--quiet", "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    reference = _search(
        [
            TemperatureScaling(device="cpu"),
            EnsembleTemperatureScaling(),
            DirichletCalibrator(device="cpu"),
        ],
        random_state=0,
    ).fit(z, y)
    assert got["selected"] == reference.selected_
    assert got["cv_results"]["candidate"] == [
        "TemperatureScaling",
        "EnsembleTemperatureScaling",
        "DirichletCalibrator",
    ]
    np.testing.assert_allclose(
        got["cv_results"]["mean_test_score"],
        reference.cv_results_["mean_test_score"],
        rtol=1e-9,
    )


def _write_bad_files(tmp_path):
    z, y = make_miscalibrated_logits(100, 3, random_state=5)
    nan = z.copy()
    nan[7, 1] = np.nan
    arrays = {
        "good": dict(logits=z, labels=y),
        "nolabels": dict(logits=z),
        "nan": dict(logits=nan, labels=y),
        "embeddings": dict(embeddings=z, labels=y),
        "four": dict(logits=np.c_[z, z[:, :1]], labels=y),
        "unseen": dict(logits=z[:10], labels=np.r_[y[:9], 7]),
    }
    for name, values in arrays.items():
        np.savez(tmp_path / f"{name}.npz", **values)
    (tmp_path / "junk.npz").write_text("not a zip file")


@pytest.mark.parametrize(
    "fit, extra, expected",
    [
        ("missing", [], "cannot read {tmp}/missing.npz: no such file"),
        ("junk", [], "junk.npz is not an .npz archive"),
        ("nolabels", [], "nolabels.npz has no array 'labels'"),
        ("nan", [], "NaN or infinite values in 1 row(s) (first: row 7)"),
        ("embeddings", [], "has neither logits nor proba (it holds embeddings"),
        ("good", ["--input", "proba"], "good.npz has no array 'proba'"),
        ("good", ["--scoring", "nlll"], "--scoring: 'nlll' is not a valid scoring"),
        ("good", ["--save", "{tmp}/model.npz"], "not arrays, but '{tmp}/model.npz'"),
        ("good", ["--save", "{tmp}/no/model.pkl"], "folder {tmp}/no does not exist"),
        ("good", ["--test", "{tmp}/nolabels.npz"], "which --test reports on"),
        ("good", ["--test", "{tmp}/four.npz"], "has 3 classes (logits columns) but"),
        ("good", ["--test", "{tmp}/unseen.npz"], "labels of --test {tmp}/unseen.npz"),
        ("good", ["--device", "tpu"], "device must be"),
        ("good", ["--candidates", "smart"], "no candidate could be scored"),
    ],
)
def test_input_errors_are_one_clear_line(tmp_path, capsys, fit, extra, expected):
    _write_bad_files(tmp_path)
    extra = [arg.format(tmp=tmp_path) for arg in extra]
    argv = ["select", "--fit", f"{tmp_path}/{fit}.npz", "--cv", "2", *extra]
    assert main(argv) == 2
    assert expected.format(tmp=tmp_path) in _error(capsys)
    assert not (tmp_path / "model.npz").exists()


@pytest.mark.parametrize("argv", [["--cv", "1"], ["--n-jobs", "0"]])
def test_bad_option_values_are_usage_errors(files, capsys, argv):
    cal, _, _, _ = files
    with pytest.raises(SystemExit) as exc:
        main(["select", "--fit", str(cal), *argv])
    assert exc.value.code == 2
    assert f"argument {argv[0]}: expected" in capsys.readouterr().err


def _nan_proba(self, X):
    return np.full((len(X), len(self.classes_)), np.nan)


def test_nan_scores_fail_the_candidate_or_are_a_clear_error(files, capsys, monkeypatch):
    cal, _, _, _ = files
    monkeypatch.setattr(TemperatureScaling, "predict_proba", _nan_proba)
    monkeypatch.setattr(TemperatureScaling, "predict_log_proba", _nan_proba)
    argv = ["select", "--fit", str(cal), "--cv", "2", "--quiet", "--candidates"]
    assert main([*argv, "identity", "ts"]) == 0
    rows = _table(capsys.readouterr().out)
    assert rows["TemperatureScaling"][:2] == ["-", "-"]
    assert rows["TemperatureScaling"][5].startswith("failed on fold 0 of 2:")
    assert "NaN" in rows["TemperatureScaling"][5]
    assert rows["IdentityCalibrator"][5] == "selected"
    # no candidate left: an error, not a table of NaN
    assert main([*argv, "ts"]) == 2
    err = _error(capsys)
    assert "no candidate could be scored" in err and "NaN" in err


# ----------------------------------------------------------------- stderr
def test_progress_goes_to_stderr_unless_quiet(files, capsys):
    cal, _, _, _ = files
    argv = ["select", "--fit", str(cal), "--candidates", "identity", "ts", "--cv", "2"]
    assert main(argv) == 0
    captured = capsys.readouterr()
    assert "[CalibratorSearchCV] TemperatureScaling" in captured.err
    assert "[CalibratorSearchCV]" not in captured.out
    assert main([*argv, "--quiet"]) == 0
    assert capsys.readouterr().err == ""


def test_select_runs_as_a_console_command(files):
    cal, _, _, _ = files
    proc = subprocess.run(
        [sys.executable, "-m", "skcal", "select", "--fit", str(cal), "--json"]
        + ["--candidates", "identity", "ts", "--cv", "3"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)  # stdout holds only the JSON
    assert got["cv_results"]["candidate"] == DEFAULT_NAMES[:2]
    assert got["selected"] in got["cv_results"]["candidate"]
    assert "[CalibratorSearchCV] selected" in proc.stderr


def test_without_candidates_the_python_default_rules_apply(files, capsys, monkeypatch):
    """Without ``--candidates`` the command runs ``CalibratorSearchCV()``'s
    default set under its own rules (issue 37): with the cost limit of the
    default Dirichlet-CV candidate lowered to 0, both skip it, with the same
    reason, and select the same candidate; a user's own list is not skipped."""
    import skcal.model_selection._search as search_module

    monkeypatch.setattr(search_module, "DIRICHLET_CV_MAX_WORK", 0.0)
    monkeypatch.setattr(search_module, "DIRICHLET_CV_MIN_ROWS", 0)
    monkeypatch.setattr(search_module, "DIRICHLET_CV_MIN_CLASSES", 0)
    cal, _, (z, y), _ = files
    assert main(["select", "--fit", str(cal), "--json", "--quiet"]) == 0
    cli = json.loads(capsys.readouterr().out)
    python = CalibratorSearchCV(random_state=0).fit(z, y)
    assert cli["cv_results"]["candidate"] == list(python.cv_results_["candidate"])
    assert cli["cv_results"]["skipped_reason"] == list(
        python.cv_results_["skipped_reason"]
    )
    k = DEFAULT_NAMES.index("DirichletCalibratorCV")
    assert cli["cv_results"]["skipped_reason"][k].startswith(
        "skipped: a default candidate whose inner grid would take minutes"
    )
    assert cli["selected"] == python.selected_
    own = [TemperatureScaling(), search_module._default_candidates()[k]]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", GridEdgeWarning)  # its grid, not the point
        mine = CalibratorSearchCV(own, random_state=0).fit(z, y)
    assert mine.cv_results_["skipped_reason"][1] == ""


def test_max_time_is_the_search_s(files, capsys):
    cal, _, (z, y), _ = files
    argv = ["select", "--fit", str(cal), "--candidates", "vs", "ts", "identity"]
    assert main([*argv, "--max-time", "0", "--json", "--quiet"]) == 0
    got = json.loads(capsys.readouterr().out)["cv_results"]
    # vector scaling is first: it always runs; nothing else is held back
    assert got["skipped_reason"] == ["", "", ""]
    argv = ["select", "--fit", str(cal), "--candidates", "ts", "identity", "vs"]
    assert main([*argv, "--max-time", "0", "--json", "--quiet"]) == 0
    got = json.loads(capsys.readouterr().out)["cv_results"]
    assert got["skipped_reason"][:2] == ["", ""]
    assert got["skipped_reason"][2].startswith(
        "skipped: the time budget max_time=0 s was spent before its turn"
    )
    python = CalibratorSearchCV(
        [TemperatureScaling(), IdentityCalibrator(), VectorScaling()],
        max_time=0,
        random_state=0,
    ).fit(z, y)
    np.testing.assert_allclose(
        got["mean_test_score"][:2], python.cv_results_["mean_test_score"][:2]
    )


@pytest.mark.parametrize("value", ["-1", "soon", "nan"])
def test_max_time_refuses_what_is_not_seconds(files, capsys, value):
    cal, _, _, _ = files
    with pytest.raises(SystemExit) as exc:
        main(["select", "--fit", str(cal), "--max-time", value])
    assert exc.value.code == 2
    assert f"expected a number of seconds, 0 or more, got '{value}'" in (
        capsys.readouterr().err
    )
