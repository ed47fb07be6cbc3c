"""The skcal command line."""

import importlib.util
import json
import subprocess
import sys

import numpy as np
import pytest
from scipy.special import softmax
from sklearn.datasets import load_iris
from sklearn.neural_network import MLPClassifier

from skcal import (
    HistogramBinningCalibrator,
    ProCalCalibrator,
    TemperatureScaling,
    VectorScaling,
)
from skcal.cli import (
    format_table,
    main,
    method_aliases,
    mlp_logits,
    resolve_method,
)
from skcal.cli._benchmark import _BENCHMARK_COLUMNS
from skcal.discovery import all_estimators
from skcal.metrics import (
    augrc,
    aurc,
    brier_score,
    classwise_calibration_error,
    cumulative_calibration_error,
    eaurc,
    expected_calibration_error,
    local_calibration_error,
    max_calibration_error,
    max_local_calibration_error,
    negative_log_likelihood,
    smooth_expected_calibration_error,
    soft_expected_calibration_error,
)
from skcal.model_selection import CalibratorSearchCV
from skcal.utils._testing import make_miscalibrated_logits, sample_labels


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


@pytest.fixture(scope="module")
def demo_stdout():
    """The stdout of the real ``skcal demo --seed 1`` (run once: about 20 s)."""
    proc = subprocess.run(
        [sys.executable, "-m", "skcal", "demo", "--seed", "1", "--device", "cpu"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_demo_runs_as_a_console_command(demo_stdout):
    lines = demo_stdout.splitlines()
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


@pytest.mark.filterwarnings("ignore")
def test_demo_ends_with_what_the_search_selects(demo_stdout):
    """The last line: the default search on the demo's calibration logits."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split
    from sklearn.preprocessing import StandardScaler

    # the demo's data, rebuilt: digits split 50/25/25 with seed 1, an MLP
    X, y = load_digits(return_X_y=True)
    X_train, X_rest, y_train, y_rest = train_test_split(
        X, y, train_size=0.5, stratify=y, random_state=1
    )
    X_cal, _, y_cal, _ = train_test_split(
        X_rest, y_rest, train_size=0.5, stratify=y_rest, random_state=1
    )
    scaler = StandardScaler().fit(X_train)
    mlp = MLPClassifier(
        hidden_layer_sizes=(64,), alpha=1e-5, max_iter=400, random_state=1
    ).fit(scaler.transform(X_train), y_train)
    z_cal = mlp_logits(mlp, scaler.transform(X_cal))
    search = CalibratorSearchCV(random_state=1).fit(z_cal, y_cal)

    last = demo_stdout.rstrip("\n").splitlines()[-1]
    assert last.startswith("CalibratorSearchCV() on the same ")
    assert f" {len(y_cal)} calibration samples " in last
    assert f" selects {search.selected_}: {search.selection_reason_}" in last


def test_bad_device_is_a_clear_error(capsys):
    assert main(["demo", "--device", "tpu"]) == 2
    assert "device must be" in capsys.readouterr().err


def test_version(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0
    assert capsys.readouterr().out.startswith("skcal ")


# ------------------------------------------------ calibrate / evaluate / benchmark
def _skcal(*args):
    """Run ``python -m skcal ARGS`` as the console script would; (rc, out, err)."""
    proc = subprocess.run(
        [sys.executable, "-m", "skcal", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    return proc.returncode, proc.stdout, proc.stderr


@pytest.fixture
def score_files(tmp_path):
    """Over-confident logits of 3 classes: 300 calibration, 200 test samples."""
    z, y = make_miscalibrated_logits(500, 3, random_state=0)
    cal, test = tmp_path / "cal.npz", tmp_path / "test.npz"
    np.savez(cal, logits=z[:300], labels=y[:300])
    np.savez(test, logits=z[300:], labels=y[300:])
    return cal, test, (z[:300], y[:300]), (z[300:], y[300:])


@pytest.fixture
def embedding_files(tmp_path):
    """Embeddings, a linear head and labels drawn from a softer head."""
    rng = np.random.default_rng(0)
    H, coef, intercept = rng.normal(size=(400, 6)), rng.normal(size=(3, 6)), [1, 0, -1]
    intercept = np.array(intercept, dtype=float)
    y = sample_labels(softmax((H @ coef.T + intercept) / 3, axis=1), 0)
    cal, test = tmp_path / "emb_cal.npz", tmp_path / "emb_test.npz"
    np.savez(cal, embeddings=H[:250], labels=y[:250], coef=coef, intercept=intercept)
    np.savez(test, embeddings=H[250:], labels=y[250:])
    return cal, test, H, y, coef, intercept


def test_calibrate_command_equals_fitting_in_process(score_files, tmp_path):
    cal, test, (z_cal, y_cal), (z_test, y_test) = score_files
    out = tmp_path / "out.npz"
    argv = ["calibrate", "--method", "TS", "--fit", cal, "--apply", test]
    rc, stdout, stderr = _skcal(*argv, "--out", out, "--json")
    assert rc == 0, stderr
    reference = TemperatureScaling(device="cpu").fit(z_cal, y_cal)
    written = np.load(out, allow_pickle=False)
    np.testing.assert_allclose(
        written["proba"], reference.predict_proba(z_test), rtol=0, atol=1e-10
    )
    np.testing.assert_array_equal(written["predict"], reference.predict(z_test))
    np.testing.assert_array_equal(written["labels"], y_test)
    np.testing.assert_array_equal(written["classes"], [0, 1, 2])
    summary = json.loads(stdout)
    assert summary["method"] == "TemperatureScaling" and summary["input"] == "logits"
    assert (summary["n_fit"], summary["n_apply"]) == (300, 200)
    before, after = summary["metrics"]
    assert before["method"] == "uncalibrated"
    assert before["NLL"] == pytest.approx(
        negative_log_likelihood(y_test, softmax(z_test, axis=1)), rel=1e-10
    )
    assert after["NLL"] == pytest.approx(
        negative_log_likelihood(y_test, written["proba"]), rel=1e-10
    )
    assert after["NLL"] < before["NLL"]  # over-confident logits get better


def test_evaluate_command_equals_the_metric_functions(tmp_path):
    rng = np.random.default_rng(1)
    proba = rng.dirichlet(np.full(4, 0.5), size=300)
    y = sample_labels(proba**0.7 / (proba**0.7).sum(1, keepdims=True), 2)
    path, png = tmp_path / "pred.npz", tmp_path / "diagram.png"
    np.savez(path, proba=proba, labels=y)
    plot = importlib.util.find_spec("matplotlib") is not None
    args = ["--plot", png] if plot else []
    rc, stdout, stderr = _skcal("evaluate", path, "--n-bins", 10, "--json", *args)
    assert rc == 0, stderr
    got = json.loads(stdout)["metrics"]
    expected = {
        "accuracy": np.mean(proba.argmax(1) == y),
        "NLL": negative_log_likelihood(y, proba),
        "Brier": brier_score(y, proba),
        "ECE": expected_calibration_error(y, proba, n_bins=10),
        "cwECE": classwise_calibration_error(y, proba, n_bins=10),
        "MCE": max_calibration_error(y, proba, n_bins=10),
        "SoftECE": soft_expected_calibration_error(y, proba, n_bins=10),
        "ECCE": cumulative_calibration_error(y, proba),
        "smECE": smooth_expected_calibration_error(y, proba),
        # selective prediction (tests/test_cli_selective.py)
        "AURC": aurc(y, proba),
        "E-AURC": eaurc(y, proba),
        "AUGRC": augrc(y, proba),
    }
    assert got.keys() == expected.keys()
    for name, value in expected.items():
        assert got[name] == pytest.approx(value, rel=1e-12, abs=1e-15), name
    assert expected["ECE"] != pytest.approx(expected_calibration_error(y, proba))
    if plot:
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_evaluate_softmaxes_logits_and_reports_local_errors(tmp_path, capsys):
    z, y = make_miscalibrated_logits(300, 3, random_state=3)
    features = np.random.default_rng(3).normal(size=(300, 5)) + z[:, :1]
    path = tmp_path / "scores.npz"
    np.savez(path, logits=z, labels=y, embeddings=features)
    assert main(["evaluate", str(path), "--local", "--json", "--quiet"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["input"] == "logits"
    proba = softmax(z, axis=1)
    metrics = report["metrics"]
    assert metrics["NLL"] == pytest.approx(negative_log_likelihood(y, proba))
    assert metrics["LCE"] == pytest.approx(local_calibration_error(y, proba, features))
    assert metrics["MLCE"] == pytest.approx(
        max_local_calibration_error(y, proba, features)
    )


def test_csv_round_trip_equals_npz(score_files, tmp_path, capsys):
    pd = pytest.importorskip("pandas")
    _, _, (z_cal, y_cal), (z_test, _) = score_files
    logit_columns = {f"logit_{j}": z_cal[:, j] for j in range(3)}
    frame = pd.DataFrame({"id": np.arange(300), "label": y_cal, **logit_columns})
    frame.sample(frac=1.0, axis=1, random_state=0).to_csv(tmp_path / "c.csv")
    pd.DataFrame({f"logit_{j}": z_test[:, j] for j in range(3)}).to_csv(
        tmp_path / "t.csv", index=False
    )
    argv = ["calibrate", "--method", "vector", "--fit", str(tmp_path / "c.csv")]
    argv += ["--apply", str(tmp_path / "t.csv"), "--out", str(tmp_path / "o.csv")]
    rc = main(argv)
    assert rc == 0, capsys.readouterr().err
    written = pd.read_csv(tmp_path / "o.csv")
    assert list(written.columns) == ["predict", "proba_0", "proba_1", "proba_2"]
    reference = VectorScaling(device="cpu").fit(z_cal, y_cal)
    np.testing.assert_allclose(
        written[["proba_0", "proba_1", "proba_2"]].to_numpy(),
        reference.predict_proba(z_test),
        rtol=0,
        atol=1e-10,
    )
    np.testing.assert_array_equal(written["predict"], reference.predict(z_test))


def test_parquet_needs_an_engine_or_round_trips(score_files, tmp_path, capsys):
    pd = pytest.importorskip("pandas")
    cal, test, _, (z_test, y_test) = score_files
    out = tmp_path / "o.parquet"
    args = ["calibrate", "--method", "ts", "--fit", cal, "--apply", test, "--out", out]
    rc = main([*map(str, args), "--quiet"])
    if not any(importlib.util.find_spec(m) for m in ("pyarrow", "fastparquet")):
        assert rc == 2 and "pyarrow" in capsys.readouterr().err and not out.exists()
        return
    assert rc == 0
    written = pd.read_parquet(out)
    np.testing.assert_array_equal(written["label"], y_test)
    assert written.shape == (200, 5)


def test_local_method_with_the_frozen_head(embedding_files, tmp_path, capsys):
    cal, test, H, y, coef, intercept = embedding_files
    out = tmp_path / "out.npz"
    argv = ["calibrate", "--method", "procal", "--fit", str(cal), "--apply", str(test)]
    assert main([*argv, "--out", str(out), "--json", "--quiet"]) == 0
    summary = json.loads(capsys.readouterr().out)
    reference = ProCalCalibrator(coef=coef, intercept=intercept, device="cpu")
    expected = reference.fit(H[:250], y[:250]).predict_proba(H[250:])
    np.testing.assert_allclose(np.load(out)["proba"], expected, rtol=0, atol=1e-12)
    head_proba = softmax(H[250:] @ coef.T + intercept, axis=1)
    assert summary["metrics"][0]["method"] == "uncalibrated"
    assert summary["metrics"][0]["NLL"] == pytest.approx(
        negative_log_likelihood(y[250:], head_proba)
    )
    # the same head from --head, with a fit file that has none
    bare, head = tmp_path / "bare.npz", tmp_path / "head.npz"
    np.savez(bare, embeddings=H[:250], labels=y[:250])
    np.savez(head, coef=coef, intercept=intercept)
    argv = ["calibrate", "--method", "ProCalCalibrator", "--fit", str(bare)]
    argv += ["--apply", str(test), "--out", str(out), "--head", str(head)]
    assert main(argv) == 0
    np.testing.assert_allclose(np.load(out)["proba"], expected, rtol=0, atol=1e-12)
    # without any head, ProCal fits a logistic head itself, and says so
    assert main(argv[:-2]) == 0
    assert "logistic-regression head" in capsys.readouterr().err
    own_head = ProCalCalibrator(device="cpu").fit(H[:250], y[:250])
    np.testing.assert_allclose(
        np.load(out)["proba"], own_head.predict_proba(H[250:]), rtol=0, atol=1e-12
    )


def test_proba_input_and_params(tmp_path, capsys):
    z, y = make_miscalibrated_logits(400, 3, random_state=4)
    proba = softmax(z, axis=1)
    cal, test, out = tmp_path / "cal.npz", tmp_path / "test.npz", tmp_path / "o.npz"
    np.savez(cal, proba=proba[:250], labels=y[:250])
    np.savez(test, proba=proba[250:])
    argv = ["calibrate", "--method", "histogram", "--fit", str(cal), "--apply"]
    argv += [str(test), "--out", str(out), "--param", "n_bins=5", "--json"]
    assert main(argv) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["params"] == {"input": "proba", "n_bins": 5}
    assert summary["metrics"] == []  # the apply file has no labels
    expected = HistogramBinningCalibrator(n_bins=5, input="proba").fit(
        proba[:250], y[:250]
    )
    np.testing.assert_allclose(
        np.load(out)["proba"], expected.predict_proba(proba[250:]), atol=1e-12
    )
    assert "labels" not in np.load(out)


def test_method_names_and_aliases():
    aliases = method_aliases()
    assert set(aliases) == {name for name, _ in all_estimators()}
    every = [a for names in aliases.values() for a in names]
    assert len(every) == len(set(every))  # no alias names two methods
    for name, names in aliases.items():
        for alias in [name, name.upper(), *names]:
            assert resolve_method(alias)[0] == name
    assert resolve_method("temperature-scaling")[0] == "TemperatureScaling"
    assert resolve_method("vq")[0] == "VQLocalCalibrator"
    assert resolve_method("Dirichlet")[0] == "DirichletCalibrator"


def _write_error_cases(tmp_path):
    z, y = make_miscalibrated_logits(100, 3, random_state=5)
    files = {
        "good": dict(logits=z, labels=y),
        "nolabels": dict(logits=z),
        "short": dict(logits=z, labels=y[:-1]),
        "four": dict(logits=np.c_[z, z[:, 0]], labels=y),
        "nan": dict(logits=np.where(np.arange(100)[:, None] == 7, np.nan, z), labels=y),
        "badproba": dict(proba=np.full((100, 3), 0.5), labels=y),
    }
    for name, arrays in files.items():
        np.savez(tmp_path / f"{name}.npz", **arrays)
    (tmp_path / "junk.npz").write_text("not a zip file")


@pytest.mark.parametrize(
    "fit, apply, extra, expected",
    [
        ("nolabels", "good", [], "has no array 'labels'"),
        ("short", "good", [], "'labels' of {tmp}/short.npz has 99 rows"),
        ("good", "four", [], "has 3 classes (logits columns) but --apply"),
        ("nan", "good", [], "NaN or infinite values in 1 row(s) (first: row 7)"),
        ("good", "good", ["--method", "nope"], "unknown method 'nope'"),
        ("good", "good", ["--method", "procal"], "no array 'embeddings', which Pro"),
        ("badproba", "badproba", [], "rows sum to 1"),
        ("junk", "good", [], "junk.npz is not an .npz archive"),
        ("missing", "good", [], "cannot read {tmp}/missing.npz: no such file"),
        ("good", "good", ["--param", "bins=3"], "has no parameter 'bins'"),
        ("good", "good", ["--device", "tpu"], "device must be"),
        (  # the estimator's own validation of a --param
            "good",
            "good",
            ["--method", "HistogramBinningCalibrator", "--param", "n_bins=0"],
            "'n_bins' parameter of HistogramBinningCalibrator must be",
        ),
    ],
)
def test_calibrate_errors_are_one_clear_line(
    tmp_path, capsys, fit, apply, extra, expected
):
    _write_error_cases(tmp_path)
    out = tmp_path / "out.npz"
    argv = ["calibrate", "--method", "ts", "--fit", f"{tmp_path}/{fit}.npz"]
    argv += ["--apply", f"{tmp_path}/{apply}.npz", "--out", str(out), *extra]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith("skcal calibrate: error: ")
    assert expected.format(tmp=tmp_path) in err
    assert "Traceback" not in err and not out.exists()
    if "unknown method" in expected:  # the message lists every valid name
        assert all(name in err for name, _ in all_estimators())


def _broken_by_numpy(self, logits, y_index, sample_weight):
    return np.ones(2) + np.ones(3)  # numpy raises a ValueError: a bug


def _broken_in_skcal(self, logits, y_index, sample_weight):
    from skcal.utils._proba import replace_top_label

    # one row where skcal expects a matrix: skcal's own code fails to unpack
    # its shape, a ValueError of Python's, not a message of skcal's checks
    return replace_top_label(logits[0], y_index[:1], np.ones(1))


@pytest.mark.parametrize(
    "broken, message",
    [
        (_broken_by_numpy, "could not be broadcast"),
        (_broken_in_skcal, "not enough values to unpack"),
    ],
)
def test_internal_errors_keep_their_traceback(
    score_files, tmp_path, capsys, monkeypatch, broken, message
):
    cal, test, _, _ = score_files
    out = tmp_path / "out.npz"
    argv = ["calibrate", "--method", "ts", "--fit", str(cal), "--apply", str(test)]
    argv += ["--out", str(out), "--quiet"]
    assert main(argv) == 0  # the files are fine
    monkeypatch.setattr(TemperatureScaling, "_fit", broken)
    with pytest.raises(ValueError, match=message):
        main(argv)
    assert "error:" not in capsys.readouterr().err


def test_evaluate_errors(tmp_path, capsys):
    _write_error_cases(tmp_path)
    assert main(["evaluate", str(tmp_path / "nolabels.npz")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("skcal evaluate: error: ") and "'labels'" in err
    assert main(["evaluate", str(tmp_path / "good.npz"), "--local"]) == 2
    assert "no array 'embeddings', which --local needs" in capsys.readouterr().err
    assert main(["evaluate", str(tmp_path / "good.txt")]) == 2
    assert "*.npz, *.csv or *.parquet" in capsys.readouterr().err


def test_benchmark_reports_mean_and_std_of_the_seeds(capsys):
    argv = ["benchmark", "--dataset", "synthetic", "--methods", "ts,ProCal"]
    assert main([*argv, "--seeds", "2", "--seed", "5", "--json", "--quiet"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["seeds"] == [5, 6]
    rows = {row["method"]: row for row in result["rows"]}
    assert list(rows) == ["uncalibrated", "TemperatureScaling", "ProCalCalibrator"]
    for row in rows.values():
        for metric in result["metrics"]:
            values = row["values"][metric]
            assert len(values) == 2
            assert row["mean"][metric] == pytest.approx(np.mean(values), abs=1e-15)
            assert row["std"][metric] == pytest.approx(np.std(values), abs=1e-15)
    nll = rows["uncalibrated"]["values"]["NLL"]
    assert nll[0] != nll[1]  # two seeds, two different networks
    # temperature scaling keeps the predictions and improves the NLL
    ts = rows["TemperatureScaling"]["values"]
    assert ts["accuracy"] == rows["uncalibrated"]["values"]["accuracy"]
    assert all(a < b for a, b in zip(ts["NLL"], nll))
    # the table of one seed shows the JSON's value for that seed, std 0
    assert main([*argv[:-2], "--methods", "ts", "--seeds", "1", "--seed", "6"]) == 0
    captured = capsys.readouterr()
    assert "[seed 1/1] TemperatureScaling" in captured.err
    header, _, uncalibrated, row = captured.out.split("\n\n")[1].splitlines()
    tokens = row.split()  # method, then "mean ± std" per column
    assert tokens[0] == "TemperatureScaling"
    means = dict(zip(header.split()[1:], tokens[1::3]))
    assert set(tokens[2::3]) == {"±"} and set(tokens[3::3]) == {"0.0000", "0.00"}
    for metric in _BENCHMARK_COLUMNS:
        assert means[metric] == f"{ts[metric][1]:.4f}", metric


# ------------------------------------------ malformed inputs (issue 15, item 7)
def _last_error_line(capsys, command):
    err = capsys.readouterr().err.strip().splitlines()
    assert err, "no error message"
    assert err[-1].startswith(f"skcal {command}: error: "), err
    return err[-1]


@pytest.mark.parametrize("role", ["fit", "apply", "evaluate"])
def test_csv_with_a_header_and_no_rows_is_a_clear_error(
    score_files, tmp_path, capsys, role
):
    pytest.importorskip("pandas")
    cal, test, _, _ = score_files
    empty = tmp_path / "empty.csv"
    empty.write_text("label,logit_0,logit_1,logit_2\n")
    out = tmp_path / "out.npz"
    if role == "evaluate":
        argv = ["evaluate", str(empty)]
    else:
        files = {"fit": str(cal), "apply": str(test), role: str(empty)}
        argv = ["calibrate", "--method", "ts", "--fit", files["fit"]]
        argv += ["--apply", files["apply"], "--out", str(out)]
    assert main(argv) == 2
    err = _last_error_line(capsys, argv[0])
    assert f"{empty} has no rows" in err and "label, logit_0" in err
    assert not out.exists()


def test_npz_member_that_is_not_an_array_is_a_clear_error(
    score_files, tmp_path, capsys
):
    import zipfile

    cal, test, _, _ = score_files
    odd = tmp_path / "odd.npz"
    with zipfile.ZipFile(cal) as source, zipfile.ZipFile(odd, "w") as target:
        target.writestr("logits.npy", source.read("logits.npy"))
        target.writestr("labels.npy", b"0,1,2,0,1")  # not in .npy format
        target.writestr("README.txt", b"an unused member is ignored")
    out = tmp_path / "out.npz"
    argv = ["calibrate", "--method", "ts", "--fit", str(odd), "--apply", str(test)]
    assert main([*argv, "--out", str(out)]) == 2
    err = _last_error_line(capsys, "calibrate")
    assert f"member 'labels' of {odd} is not a numpy array" in err
    assert "numpy.savez" in err and not out.exists()
    assert main(["evaluate", str(odd)]) == 2
    assert "is not a numpy array" in _last_error_line(capsys, "evaluate")


def test_table_output_has_no_classes_column_when_rows_equal_classes(
    score_files, tmp_path, capsys
):
    pd = pytest.importorskip("pandas")
    cal, _, (z_cal, y_cal), (z_test, y_test) = score_files
    three = tmp_path / "three.npz"  # as many rows as classes
    np.savez(three, logits=z_test[:3], labels=y_test[:3])
    out = tmp_path / "o.csv"
    argv = ["calibrate", "--method", "ts", "--fit", str(cal), "--apply", str(three)]
    assert main([*argv, "--out", str(out), "--quiet"]) == 0, capsys.readouterr().err
    written = pd.read_csv(out)
    columns = ["label", "predict", "proba_0", "proba_1", "proba_2"]
    assert list(written.columns) == columns
    reference = TemperatureScaling(device="cpu").fit(z_cal, y_cal)
    np.testing.assert_allclose(
        written[columns[2:]].to_numpy(),
        reference.predict_proba(z_test[:3]),
        rtol=0,
        atol=1e-10,
    )
    # the npz output keeps classes
    assert main([*argv, "--out", str(tmp_path / "o.npz"), "--quiet"]) == 0
    np.testing.assert_array_equal(np.load(tmp_path / "o.npz")["classes"], [0, 1, 2])


@pytest.mark.parametrize("methods", ["", ",", " , ", "ts,,vs"])
def test_benchmark_methods_without_a_name_are_an_error(capsys, methods):
    argv = ["benchmark", "--dataset", "synthetic", "--seeds", "1"]
    assert main([*argv, "--methods", methods, "--quiet"]) == 2
    captured = capsys.readouterr()
    err = captured.err.strip().splitlines()[-1]
    assert err.startswith(f"skcal benchmark: error: --methods {methods!r} has ")
    assert all(name in err for name, _ in all_estimators())  # the valid names
    assert captured.out == ""  # nothing was run


def test_unseen_label_in_the_apply_file_names_the_file(score_files, tmp_path, capsys):
    cal, _, _, (z_test, y_test) = score_files
    apply = tmp_path / "unseen.npz"
    np.savez(apply, logits=z_test[:20], labels=np.r_[y_test[:19], 7])
    out = tmp_path / "out.npz"
    argv = ["calibrate", "--method", "ts", "--fit", str(cal), "--apply", str(apply)]
    assert main([*argv, "--out", str(out), "--quiet"]) == 2
    err = _last_error_line(capsys, "calibrate")
    assert f"labels of --apply {apply} include 1 label(s)" in err
    assert f"--fit {cal}: [7]" in err and not out.exists()


def test_run_benchmark_refuses_an_empty_method_list():
    from skcal.cli import run_benchmark

    with pytest.raises(ValueError, match="methods is empty"):
        run_benchmark("synthetic", [], seeds=1)


def test_evaluate_ci_prints_the_calibration_report(tmp_path, capsys):
    from skcal.metrics import calibration_report, confidence_interval

    rng = np.random.default_rng(4)
    proba = rng.dirichlet(np.full(3, 0.5), size=200)
    y = sample_labels(proba**0.7 / (proba**0.7).sum(1, keepdims=True), 4)
    path = tmp_path / "pred.npz"
    np.savez(path, proba=proba, labels=y)
    argv = ["evaluate", str(path), "--ci", "--n-resamples", "40", "--seed", "3"]
    assert main([*argv, "--confidence-level", "0.8", "--quiet"]) == 0
    out = capsys.readouterr().out
    expected = calibration_report(
        y, proba, n_resamples=40, confidence_level=0.8, random_state=3
    )
    assert str(expected) in out
    assert "80% CI" in out and "p-value" in out
    # the plain table is still there, before the report
    assert out.index("SoftECE") < out.index("Calibration report")

    assert main([*argv, "--n-bins", "10", "--json", "--quiet"]) == 0
    got = json.loads(capsys.readouterr().out)["intervals"]
    assert got["n_bins"] == 10 and got["confidence_level"] == 0.9
    ece = confidence_interval(
        expected_calibration_error,
        y,
        proba,
        n_bins=10,
        n_resamples=40,
        random_state=3,
    )
    row = got["metrics"]["ECE"]
    assert row["estimate"] == pytest.approx(
        expected_calibration_error(y, proba, n_bins=10), rel=1e-12
    )
    assert (row["low"], row["high"]) == pytest.approx((ece.low, ece.high), rel=1e-12)
    assert row["p_value"] is None and got["metrics"]["ECCE"]["p_value"] > 0

    # --ci-method bca: skcal's BCa intervals (issue 37)
    assert main([*argv, "--ci-method", "bca", "--json", "--quiet"]) == 0
    got = json.loads(capsys.readouterr().out)["intervals"]
    bca = confidence_interval(
        expected_calibration_error,
        y,
        proba,
        n_resamples=40,
        method="bca",
        random_state=3,
    )
    assert got["method"] == "bca"
    row = got["metrics"]["ECE"]
    assert (row["low"], row["high"]) == pytest.approx((bca.low, bca.high), rel=1e-12)
    assert row["covers_estimate"] == (bca.low <= bca.estimate <= bca.high)


def test_evaluate_ci_options_are_checked(tmp_path, capsys):
    path = tmp_path / "pred.npz"
    np.savez(path, proba=np.full((10, 2), 0.5), labels=np.arange(10) % 2)
    with pytest.raises(SystemExit) as exc:
        main(["evaluate", str(path), "--ci", "--confidence-level", "90"])
    assert exc.value.code == 2
    assert "expected a number in (0, 1)" in capsys.readouterr().err
    assert main(["evaluate", str(path), "--ci", "--n-resamples", "1", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("skcal evaluate: error: ") and "n_resamples" in err
    # without --ci: no report, no intervals in the JSON
    assert main(["evaluate", str(path), "--json", "--quiet"]) == 0
    assert "intervals" not in json.loads(capsys.readouterr().out)


def test_help_and_import_skcal_do_not_import_torch():
    # `import skcal` and `skcal --help` load the calibrators (and torch,
    # scikit-learn) only when a name is used: checked in a fresh interpreter
    code = (
        "import sys, skcal, skcal.cli\n"
        "try:\n    skcal.cli.main(['--help'])\nexcept SystemExit:\n    pass\n"
        "print('torch' in sys.modules, 'sklearn' in sys.modules)\n"
        "skcal.TemperatureScaling\n"
        "print('torch' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.splitlines()
    assert out[-2:] == ["False False", "True"]


def test_every_public_name_of_skcal_resolves():
    import skcal
    import skcal.calibrators
    import skcal.model_selection
    import skcal.wrappers

    for name in skcal.__all__:
        assert getattr(skcal, name) is not None
    assert skcal.TemperatureScaling is skcal.calibrators.TemperatureScaling
    assert skcal.CalibratorSearchCV is skcal.model_selection.CalibratorSearchCV
    assert skcal.CalibratedClassifier is skcal.wrappers.CalibratedClassifier
    assert set(skcal.__all__) <= set(dir(skcal))
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        skcal.Nope  # noqa: B018


def test_static_method_listing_equals_the_live_one():
    # the help texts read the calibrators from the source (no import): the
    # same names, kinds, aliases, heads and default candidates as the classes
    import inspect

    from skcal.cli._methods import (
        candidate_list,
        method_list,
        static_candidates,
        static_listing,
        takes_head,
    )
    from skcal.model_selection._search import _default_candidates

    live = {
        name: kind for kind in ("score", "local") for name, _ in all_estimators(kind)
    }
    assert {c.name: c.kind for c in static_listing()} == live
    assert [c.name for c in static_listing()] == [n for n, _ in all_estimators()]
    aliases = method_aliases()
    assert method_list() == ", ".join(
        f"{n} ({', '.join(a)})" for n, a in aliases.items()
    )
    classes = dict(all_estimators())
    for listed in static_listing():
        cls = classes[listed.name]
        assert listed.takes_head == takes_head(cls), listed.name
        uses = inspect.getattr_static(cls, "_uses_head", False)
        if listed.uses_head == "depends":
            assert isinstance(uses, property), listed.name
        else:
            assert listed.uses_head is uses, listed.name
    names = [type(est).__name__ for est in _default_candidates()]
    assert list(static_candidates()) == names
    assert candidate_list() == ", ".join(
        f"{n} ({', '.join(aliases[n])})" for n in names
    )


_COMMANDS = [
    "calibrate",
    "apply",
    "adapt",
    "evaluate",
    "select",
    "benchmark",
    "demo",
    "export",
    "monitor",
    "select-threshold",
]


def _help_imports(command):
    """``python -X importtime -m skcal <command> --help``: (run, top-level modules)."""
    run = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "skcal", command, "--help"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    modules = {
        line.rsplit("|", 1)[1].strip().split(".")[0]
        for line in run.stderr.splitlines()
        if line.startswith("import time:") and line.count("|") == 2
    }
    return run, modules


def test_every_help_imports_neither_torch_nor_sklearn():
    # the epilogs list every calibrator: read from the source, not imported
    # (importing them took 7-9 s of `skcal calibrate --help`)
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=2) as pool:
        runs = dict(zip(_COMMANDS, pool.map(_help_imports, _COMMANDS)))
    for command, (run, modules) in runs.items():
        assert run.returncode == 0, run.stderr[-2000:]
        assert run.stdout.startswith("usage: skcal "), run.stdout[:300]
        heavy = sorted(modules & {"torch", "sklearn", "scipy", "pandas"})
        assert not heavy, f"skcal {command} --help imports {heavy}"
    # the list is wrapped at 79 columns: compare with the line breaks removed
    assert "VectorScaling (vector, vs)" in " ".join(runs["calibrate"][0].stdout.split())
    assert "DirichletCalibratorCV" in runs["select"][0].stdout


def test_venn_abers_writes_the_intervals_of_its_probabilities(
    score_files, tmp_path, capsys
):
    """``calibrate --method vennabers`` and ``apply`` of its saved model (the
    real commands) write ``proba_lower`` / ``proba_upper`` (npz) or
    ``lower_<class>`` / ``upper_<class>`` (CSV), the fitted calibrator's
    ``predict_interval``, which brackets the written ``proba``; the CSV
    reads back in ``evaluate`` as the probabilities alone."""
    from skcal import VennAbersCalibrator

    cal, test, (z_cal, y_cal), (z_test, _) = score_files
    out, model = tmp_path / "va.npz", tmp_path / "va.pkl"
    argv = ["calibrate", "--method", "vennabers", "--fit", cal, "--apply", test]
    rc, stdout, stderr = _skcal(*argv, "--out", out, "--save", model)
    assert rc == 0, stderr
    assert "intervals (proba_lower, proba_upper)" in stdout
    reference = VennAbersCalibrator().fit(z_cal, y_cal)
    lower, upper = reference.predict_interval(z_test)
    with np.load(out, allow_pickle=False) as written:
        np.testing.assert_array_equal(written["proba_lower"], lower)
        np.testing.assert_array_equal(written["proba_upper"], upper)
        proba = written["proba"]
    np.testing.assert_array_equal(proba, reference.predict_proba(z_test))
    assert np.all(lower <= proba) and np.all(proba <= upper)
    assert np.any(lower < proba) and np.any(proba < upper)
    pytest.importorskip("pandas")  # the CSV output (the test extra has it)
    applied = tmp_path / "applied.csv"
    rc, stdout, stderr = _skcal(
        "apply", "--model", model, "--allow-pickle", "--apply", test, "--out", applied
    )
    assert rc == 0, stderr
    import pandas as pd

    table = pd.read_csv(applied)
    for j in range(3):
        np.testing.assert_allclose(table[f"lower_{j}"], lower[:, j], rtol=1e-15)
        np.testing.assert_allclose(table[f"upper_{j}"], upper[:, j], rtol=1e-15)
        np.testing.assert_allclose(table[f"proba_{j}"], proba[:, j], rtol=1e-15)
    assert main(["evaluate", str(applied), "--json", "--quiet"]) == 0
    assert json.loads(capsys.readouterr().out)["metrics"]["NLL"] == pytest.approx(
        negative_log_likelihood(table["label"], proba), rel=1e-12
    )
    # a calibrator without intervals writes none
    argv = [*argv[:2], "temperature", *argv[3:], "--out", out, "--quiet"]
    assert main([str(a) for a in argv]) == 0
    with np.load(out, allow_pickle=False) as written:
        assert "proba_lower" not in written and "proba_upper" not in written
