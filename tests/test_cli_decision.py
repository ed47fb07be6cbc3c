"""``skcal select-threshold``: the command against SelectiveClassifier called
directly on the same files, and its errors."""

import json

import numpy as np
import pytest

from skcal import TemperatureScaling
from skcal.cli import main
from skcal.decision import NoValidThresholdWarning, SelectiveClassifier
from skcal.utils.persistence import load


def _logits(n, seed):
    """Logits of 3 classes where the classifier is right about 80% of the time."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 3, n)
    return 2.5 * np.eye(3)[y] + rng.normal(size=(n, 3)), y


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("select_threshold")
    (z_cal, y_cal), (z_test, y_test) = _logits(2000, 0), _logits(800, 1)
    cal, test = folder / "cal.npz", folder / "test.npz"
    np.savez(cal, logits=z_cal, labels=y_cal)
    np.savez(test, logits=z_test, labels=y_test)
    return cal, test, (z_cal, y_cal), (z_test, y_test)


def _run(capsys, *args):
    """``skcal select-threshold ARGS`` in process: (rc, stdout, stderr)."""
    rc = main(["select-threshold", "--device", "cpu", *map(str, args)])
    out = capsys.readouterr()
    return rc, out.out, out.err


def _reference(X, y, seed=0, **params):
    """SelectiveClassifier around TemperatureScaling, as the command builds it."""
    calibrator = TemperatureScaling(device="cpu")  # it has no random_state
    if "classes" in params:
        calibrator.set_params(classes=params.pop("classes"))
    return SelectiveClassifier(calibrator, random_state=seed, **params).fit(X, y)


@pytest.mark.parametrize("bound", ["sgr", "ltt"])
def test_threshold_decisions_and_realised_risk_equal_the_library(
    files, tmp_path, capsys, bound
):
    cal, test, (z_cal, y_cal), (z_test, y_test) = files
    out = tmp_path / "decisions.npz"
    argv = ["--fit", cal, "--method", "ts", "--bound", bound, "--target-risk", 0.1]
    rc, stdout, stderr = _run(capsys, *argv, "--apply", test, "--out", out, "--json")
    assert rc == 0, stderr
    report = json.loads(stdout)
    ref = _reference(z_cal, y_cal, target_risk=0.1, method=bound)
    assert report["met"] and report["warning"] is None
    assert 0 < ref.coverage_ < 1  # a real threshold, not all or nothing
    np.testing.assert_allclose(report["threshold"], ref.threshold_, rtol=1e-12)
    np.testing.assert_allclose(report["coverage"], ref.coverage_, rtol=1e-12)
    assert report["risk_upper_bound"] == pytest.approx(ref.risk_upper_bound_)
    assert report["n_threshold_rows"] == ref.n_threshold_rows_ == 1000
    written = np.load(out, allow_pickle=False)
    decisions = ref.predict(z_test)
    np.testing.assert_array_equal(written["decision"], decisions)
    proba = ref.predict_proba(z_test)
    np.testing.assert_allclose(written["proba"], proba, rtol=1e-9)
    np.testing.assert_allclose(written["confidence"], proba.max(axis=1), rtol=1e-9)
    np.testing.assert_array_equal(written["labels"], y_test)
    # realised selective risk and coverage, counted here from the decisions
    selected = decisions != -1
    assert report["apply"]["coverage"] == pytest.approx(selected.mean())
    expected_risk = np.mean(decisions[selected] != y_test[selected])
    assert report["apply"]["risk"] == pytest.approx(expected_risk)


def test_per_class_thresholds_on_string_classes_in_csv(tmp_path, capsys):
    """CSV files with class names: proba_<class> columns, the default
    abstention 'abstain', one threshold per class as the library's."""
    pd = pytest.importorskip("pandas")
    names = np.array(["cat", "dog", "fox"])
    (z_cal, y_cal), (z_test, y_test) = _logits(2000, 2), _logits(300, 3)
    cal, test, out = tmp_path / "cal.csv", tmp_path / "test.csv", tmp_path / "d.csv"
    for path, z, y in ((cal, z_cal, y_cal), (test, z_test, y_test)):
        table = {"id": np.arange(len(y)), "label": names[y]}
        table.update({f"logit_{c}": z[:, j] for j, c in enumerate(names)})
        pd.DataFrame(table).to_csv(path, index=False)
    argv = ["--fit", cal, "--method", "temperature", "--per-class", "--seed", 3]
    rc, stdout, stderr = _run(
        capsys, *argv, "--target-risk", 0.1, "--apply", test, "--out", out
    )
    assert rc == 0, stderr
    ref = _reference(
        z_cal, names[y_cal], seed=3, target_risk=0.1, per_class=True,
        abstain_label="abstain", classes=names,
    )  # fmt: skip
    assert np.isfinite(ref.thresholds_).all()
    shown = ", ".join(f"{c}: {t:.6g}" for c, t in zip(names, ref.thresholds_))
    assert f"thresholds: {shown}" in stdout
    assert f"coverage on the threshold rows: {ref.coverage_:.4f}" in stdout
    assert f"selective risk upper bound: {ref.risk_upper_bound_:.4g} " in stdout
    written = pd.read_csv(out)
    assert list(written.columns) == [
        "id", "label", "decision", "confidence", "proba_cat", "proba_dog", "proba_fox"
    ]  # fmt: skip
    decisions = ref.predict(z_test)
    assert (decisions == "abstain").any()
    np.testing.assert_array_equal(written["decision"].to_numpy(str), decisions)
    np.testing.assert_array_equal(written["id"], np.arange(300))
    selected = decisions != "abstain"
    risk = np.mean(decisions[selected] != names[y_test][selected])
    assert f"selective risk {risk:.4f}, coverage {selected.mean():.4f}" in stdout


def test_no_threshold_meets_the_target_exits_0_and_abstains(files, tmp_path, capsys):
    cal, test, (z_cal, y_cal), _ = files
    out = tmp_path / "d.npz"
    argv = ["--fit", cal, "--method", "ts", "--target-risk", 0.001]
    rc, stdout, stderr = _run(capsys, *argv, "--apply", test, "--out", out)
    assert rc == 0, stderr
    with pytest.warns(NoValidThresholdWarning) as caught:
        _reference(z_cal, y_cal, target_risk=0.001)
    message = " ".join(str(caught[0].message).split())
    assert message in " ".join(stdout.split())
    assert "Decision: abstain (-1) on every row." in stdout
    assert "threshold: inf (abstain)" in stdout
    assert "coverage 0.0000 (0 of 800 rows predicted)" in stdout
    assert "warning: No confidence threshold" in stderr
    assert (np.load(out)["decision"] == -1).all()


def test_save_writes_the_fitted_selective_classifier(files, tmp_path, capsys):
    pytest.importorskip("skops.io")
    cal, _, (z_cal, y_cal), (z_test, _) = files
    model = tmp_path / "selective.skops"
    rc, stdout, stderr = _run(capsys, "--fit", cal, "--method", "ts", "--save", model)
    assert rc == 0, stderr
    loaded = load(model)
    assert isinstance(loaded, SelectiveClassifier)
    ref = _reference(z_cal, y_cal)
    np.testing.assert_array_equal(loaded.predict(z_test), ref.predict(z_test))


@pytest.mark.parametrize(
    "extra, expected",
    [
        (["--apply", "TEST"], "--apply and --out go together"),
        (["--method", "tempreature"], "did you mean 'temperature'"),
        (["--abstain-label", "1"], "--abstain-label 1 is one of the classes"),
        (["--abstain-label", "no"], "--abstain-label 'no' is not a number"),
        (["--method", "procal"], "the classifier's embeddings"),
        (["--input", "proba"], "proba"),
    ],
)
def test_errors_are_one_line(files, capsys, extra, expected):
    cal, test, _, _ = files
    extra = [str(test) if a == "TEST" else a for a in extra]
    argv = ["--fit", cal, "--method", "ts", *extra]
    rc, stdout, stderr = _run(capsys, *argv)
    assert rc == 2
    assert stdout == ""
    assert stderr.startswith("skcal select-threshold: error: ")
    assert expected in stderr
    assert len(stderr.strip().splitlines()) == 1


def test_bad_numbers_are_refused_by_the_parser(files, capsys):
    cal = files[0]
    for flag, value in (("--target-risk", "1.5"), ("--threshold-fraction", "1")):
        with pytest.raises(SystemExit) as exit_info:
            main(["select-threshold", "--fit", str(cal), "--method", "ts", flag, value])
        assert exit_info.value.code == 2
        assert "expected a number in (0, 1)" in capsys.readouterr().err


def test_local_calibrator_on_embeddings_and_the_head_of_the_fit_file(tmp_path, capsys):
    """A local calibrator reads the embeddings and the --fit file's linear
    head (coef, intercept), as in skcal calibrate."""
    from scipy.special import softmax

    from skcal import ProCalCalibrator
    from skcal.utils._testing import sample_labels

    rng = np.random.default_rng(0)
    H, coef = rng.normal(size=(900, 6)), 2 * rng.normal(size=(3, 6))
    intercept = np.array([1.0, 0.0, -1.0])
    y = sample_labels(softmax((H @ coef.T + intercept) / 2, axis=1), 0)
    cal, test, out = tmp_path / "cal.npz", tmp_path / "test.npz", tmp_path / "d.npz"
    np.savez(cal, embeddings=H[:600], labels=y[:600], coef=coef, intercept=intercept)
    np.savez(test, embeddings=H[600:])
    argv = ["--fit", cal, "--method", "procal", "--target-risk", 0.2, "--json"]
    rc, stdout, stderr = _run(capsys, *argv, "--apply", test, "--out", out)
    assert rc == 0, stderr
    report = json.loads(stdout)
    calibrator = ProCalCalibrator(coef=coef, intercept=intercept, device="cpu")
    ref = SelectiveClassifier(calibrator, target_risk=0.2, random_state=0)
    ref.fit(H[:600], y[:600])
    assert 0 < ref.coverage_ < 1
    assert report["input"] == "embeddings"
    np.testing.assert_allclose(report["threshold"], ref.threshold_, rtol=1e-9)
    np.testing.assert_allclose(report["coverage"], ref.coverage_, rtol=1e-12)
    np.testing.assert_array_equal(np.load(out)["decision"], ref.predict(H[600:]))
    assert report["apply"] == {"n_rows": 300}  # no labels: nothing realised
