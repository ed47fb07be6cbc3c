"""``skcal calibrate --save``, ``select --save`` and ``skcal apply`` (issue 20).

Item 4 of the issue.

A calibrator fitted once is applied many times: the probabilities ``apply``
writes must equal bitwise those the same fitted model gives in Python (and
those ``calibrate`` wrote for the same file); the metrics it prints are
checked against scikit-learn's log loss.
"""

import json
import pickle

import numpy as np
import pytest
from sklearn.metrics import log_loss

pytest.importorskip("skops.io")

from skcal import LocalNetCalibrator, TemperatureScaling  # noqa: E402
from skcal.cli import main  # noqa: E402
from skcal.utils._testing import (  # noqa: E402
    make_miscalibrated_logits,
    make_region_miscalibrated_embeddings,
)
from skcal.utils.persistence import dump, load  # noqa: E402


def _error(capsys, command="apply") -> str:
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert lines[-1].startswith(f"skcal {command}: error: "), captured.err
    assert "Traceback" not in captured.err and captured.out == ""
    return lines[-1]


@pytest.fixture
def files(tmp_path):
    X, y = make_miscalibrated_logits(900, 4, temperature=2.0, random_state=0)
    np.savez(tmp_path / "cal.npz", logits=X[:300], labels=y[:300])
    np.savez(tmp_path / "val.npz", logits=X[300:600], labels=y[300:600])
    np.savez(tmp_path / "test.npz", logits=X[600:])  # no labels
    return tmp_path, X, y


def _calibrate_ts(tmp, out, save, *extra):
    """``skcal calibrate`` of temperature scaling on cal.npz, applied to val.npz."""
    argv = ["calibrate", "--method", "temperature", "--fit", str(tmp / "cal.npz")]
    argv += ["--apply", str(tmp / "val.npz"), "--out", str(out), "--save", str(save)]
    return main([*argv, *extra])


def test_calibrate_save_then_apply_equals_the_fitted_model(files, capsys):
    tmp, X, y = files
    model = tmp / "ts.skops"
    assert _calibrate_ts(tmp, tmp / "val_cal.npz", model, "--quiet") == 0
    assert "skcal apply --model" in capsys.readouterr().out
    reference = TemperatureScaling(device="cpu").fit(X[:300], y[:300])
    saved = load(model)
    assert saved.temperature_ == reference.temperature_
    for name in ("val", "test"):
        out = tmp / f"{name}_applied.npz"
        code = main(
            [
                "apply",
                "--model",
                str(model),
                "--apply",
                str(tmp / f"{name}.npz"),
                "--out",
                str(out),
                "--json",
            ]
        )
        assert code == 0
        report = json.loads(capsys.readouterr().out)
        rows = X[300:600] if name == "val" else X[600:]
        with np.load(out) as written:
            np.testing.assert_array_equal(
                written["proba"], reference.predict_proba(rows)
            )
            np.testing.assert_array_equal(written["predict"], rows.argmax(axis=1))
            assert ("labels" in written) == (name == "val")
        assert report["estimator"] == "TemperatureScaling"
        assert report["input"] == "logits" and report["n_apply"] == len(rows)
        if name == "val":
            with np.load(tmp / "val_cal.npz") as by_calibrate:
                np.testing.assert_array_equal(
                    by_calibrate["proba"], reference.predict_proba(rows)
                )
            nll = {r["method"]: r["NLL"] for r in report["metrics"]}
            proba = reference.predict_proba(rows)
            assert nll["TemperatureScaling"] == pytest.approx(
                log_loss(y[300:600], proba), rel=1e-9
            )
        else:
            assert report["metrics"] == []


def test_apply_a_local_calibrator_on_embeddings(tmp_path, capsys):
    X, y, coef, intercept, _ = make_region_miscalibrated_embeddings(
        900, 3, n_features=8, random_state=0
    )
    est = LocalNetCalibrator(
        coef=coef, intercept=intercept, max_iter=3, random_state=0, device="cpu"
    ).fit(X[:600], y[:600])
    dump(est, tmp_path / "ln.skops")
    np.savez(tmp_path / "new.npz", embeddings=X[600:], labels=y[600:])
    code = main(
        [
            "apply",
            "--model",
            str(tmp_path / "ln.skops"),
            "--apply",
            str(tmp_path / "new.npz"),
            "--out",
            str(tmp_path / "o.npz"),
            "--json",
        ]
    )
    assert code == 0
    report = json.loads(capsys.readouterr().out)
    with np.load(tmp_path / "o.npz") as written:
        np.testing.assert_array_equal(written["proba"], est.predict_proba(X[600:]))
    # the head (coef/intercept, a parameter of the model) gives the
    # uncalibrated row
    methods = [r["method"] for r in report["metrics"]]
    assert methods == ["uncalibrated", "LocalNetCalibrator"]
    logits = X[600:] @ coef.T + intercept
    uncal = np.exp(logits - logits.max(1, keepdims=True))
    uncal /= uncal.sum(1, keepdims=True)
    assert report["metrics"][0]["NLL"] == pytest.approx(
        log_loss(y[600:], uncal), rel=1e-9
    )


def test_select_save_then_apply(files, capsys):
    tmp, X, y = files
    model = tmp / "search.skops"
    code = main(
        [
            "select",
            "--fit",
            str(tmp / "cal.npz"),
            "--save",
            str(model),
            "--candidates",
            "identity,temperature",
            "--quiet",
        ]
    )
    assert code == 0
    capsys.readouterr()
    search = load(model)
    assert (
        main(
            [
                "apply",
                "--model",
                str(model),
                "--apply",
                str(tmp / "test.npz"),
                "--out",
                str(tmp / "o.npz"),
                "--quiet",
            ]
        )
        == 0
    )
    with np.load(tmp / "o.npz") as written:
        np.testing.assert_array_equal(written["proba"], search.predict_proba(X[600:]))
    # the rows are named by the calibrator the search selected (issue 51)
    argv = ["apply", "--model", str(model), "--apply", str(tmp / "test.npz")]
    assert main([*argv, "--out", str(tmp / "o2.npz"), "--quiet"]) == 0
    out = capsys.readouterr().out
    assert f"{search.selected_} (selected by CalibratorSearchCV)" in out


def test_pickles_need_allow_pickle(files, capsys):
    tmp, X, y = files
    reference = TemperatureScaling(device="cpu").fit(X[:300], y[:300])
    with open(tmp / "ts.pkl", "wb") as f:
        pickle.dump(reference, f)
    args = [
        "apply",
        "--model",
        str(tmp / "ts.pkl"),
        "--apply",
        str(tmp / "test.npz"),
        "--out",
        str(tmp / "o.npz"),
    ]
    assert main(args) == 2
    assert "--allow-pickle" in _error(capsys)
    assert not (tmp / "o.npz").exists()
    assert main([*args, "--allow-pickle", "--quiet"]) == 0
    with np.load(tmp / "o.npz") as written:
        np.testing.assert_array_equal(
            written["proba"], reference.predict_proba(X[600:])
        )


def test_apply_errors(files, capsys):
    tmp, X, y = files
    model = tmp / "ts.skops"
    dump(TemperatureScaling(device="cpu").fit(X[:300], y[:300]), model)
    out = ["--out", str(tmp / "o.npz")]
    # wrong number of classes
    np.savez(tmp / "three.npz", logits=X[:50, :3])
    assert (
        main(["apply", "--model", str(model), "--apply", str(tmp / "three.npz"), *out])
        == 2
    )
    assert "3 logits columns" in _error(capsys)
    # labels the model never saw
    np.savez(tmp / "unseen.npz", logits=X[:50], labels=np.full(50, 7))
    assert (
        main(["apply", "--model", str(model), "--apply", str(tmp / "unseen.npz"), *out])
        == 2
    )
    assert "not among the classes of --model" in _error(capsys)
    # an unfitted calibrator
    dump(TemperatureScaling(), tmp / "raw.skops")
    assert (
        main(
            [
                "apply",
                "--model",
                str(tmp / "raw.skops"),
                "--apply",
                str(tmp / "test.npz"),
                *out,
            ]
        )
        == 2
    )
    assert "unfitted TemperatureScaling" in _error(capsys)
    # not a calibrator: a classifier's features are not scores
    from sklearn.linear_model import LogisticRegression

    dump(LogisticRegression().fit(X[:300], y[:300]), tmp / "lr.skops")
    assert (
        main(
            [
                "apply",
                "--model",
                str(tmp / "lr.skops"),
                "--apply",
                str(tmp / "test.npz"),
                *out,
            ]
        )
        == 2
    )
    assert "not a calibrator" in _error(capsys)
    # no such file; not a skops file
    assert (
        main(
            [
                "apply",
                "--model",
                str(tmp / "nope.skops"),
                "--apply",
                str(tmp / "test.npz"),
                *out,
            ]
        )
        == 2
    )
    assert "no such file" in _error(capsys)
    (tmp / "bad.skops").write_bytes(b"not a zip")
    assert (
        main(
            [
                "apply",
                "--model",
                str(tmp / "bad.skops"),
                "--apply",
                str(tmp / "test.npz"),
                *out,
            ]
        )
        == 2
    )
    assert "not a readable .skops file" in _error(capsys)


def test_foreign_types_need_trust(tmp_path, capsys):
    from sklearn.ensemble import RandomForestClassifier

    from skcal import CalibratedClassifier

    X, y = make_miscalibrated_logits(200, 3, random_state=0)
    cc = CalibratedClassifier(
        RandomForestClassifier(n_estimators=2, random_state=0),
        calibrator=TemperatureScaling(device="cpu"),
    ).fit(X, y)
    dump(cc, tmp_path / "cc.skops")
    np.savez(tmp_path / "d.npz", logits=X)
    args = [
        "apply",
        "--model",
        str(tmp_path / "cc.skops"),
        "--apply",
        str(tmp_path / "d.npz"),
        "--out",
        str(tmp_path / "o.npz"),
    ]
    assert main(args) == 2
    message = _error(capsys)
    assert "sklearn.tree._tree.Tree" in message and "--trust" in message
    assert "--trust sklearn.tree._tree.Tree" in message  # the flag, as typed
    # trusted, it loads, and is then refused for what it is (a classifier)
    assert main([*args, "--trust", "sklearn.tree._tree.Tree"]) == 2
    assert "not a calibrator" in _error(capsys)


def test_save_path_checked_before_fitting(files, capsys):
    tmp, _, _ = files
    code = _calibrate_ts(tmp, tmp / "o.npz", tmp / "model.npz")
    assert code == 2
    assert "*.skops" in _error(capsys, "calibrate")
    assert not (tmp / "o.npz").exists()


@pytest.mark.parametrize("command", ["apply", "calibrate"])
def test_an_npz_classes_array_orders_the_applied_columns(tmp_path, capsys, command):
    """Was: ignored by apply and calibrate (evaluate read it), so columns in
    another order were silently taken as the model's (accuracy 0.85 -> 0.05)."""
    X, y = make_miscalibrated_logits(600, 4, temperature=2.0, random_state=0)
    names = np.array(["fox", "cat", "dog", "eel"])
    order = [2, 0, 3, 1]
    np.savez(tmp_path / "fit.npz", logits=X[:300], labels=names[y[:300]], classes=names)
    np.savez(tmp_path / "in.npz", logits=X[300:], classes=names)
    shuffled = dict(logits=X[300:, order], classes=names[order])
    np.savez(tmp_path / "shuffled.npz", **shuffled)
    np.savez(
        tmp_path / "unknown.npz", logits=X[300:], classes=["fox", "cat", "dog", "cow"]
    )
    np.savez(tmp_path / "short.npz", logits=X[300:], classes=names[:3])
    model = tmp_path / "ts.skops"
    fit = ["calibrate", "--method", "temperature", "--fit", str(tmp_path / "fit.npz")]
    fit += ["--device", "cpu", "--quiet"]

    def run(apply, out):
        if command == "apply":
            argv = ["apply", "--model", str(model), "--apply", str(apply)]
        else:
            argv = [*fit, "--apply", str(apply)]
        return main([*argv, "--out", str(out), "--quiet"])

    assert main([*fit, "--apply", str(tmp_path / "in.npz"), "--out",
                 str(tmp_path / "ref.npz"), "--save", str(model)]) == 0  # fmt: skip
    capsys.readouterr()
    assert run(tmp_path / "shuffled.npz", tmp_path / "out.npz") == 0
    got, reference = np.load(tmp_path / "out.npz"), np.load(tmp_path / "ref.npz")
    np.testing.assert_array_equal(got["classes"], names)
    np.testing.assert_allclose(got["proba"], reference["proba"], rtol=1e-12)
    capsys.readouterr()
    for bad in ("unknown.npz", "short.npz"):
        assert run(tmp_path / bad, tmp_path / "bad.npz") == 2
        message = _error(capsys, command)
        assert "classes array" in message and "eel" in message


def test_out_may_not_replace_an_input_file(files, capsys):
    """Was: written over --fit (or --apply), destroying the input."""
    tmp, X, y = files
    before = (tmp / "cal.npz").read_bytes()
    assert _calibrate_ts(tmp, tmp / "cal.npz", tmp / "ts.skops") == 2
    message = _error(capsys, "calibrate")
    assert "--fit" in message and "replace the input" in message
    assert (tmp / "cal.npz").read_bytes() == before
    assert _calibrate_ts(tmp, tmp / "out.npz", tmp / "ts.skops", "--quiet") == 0
    capsys.readouterr()
    val = (tmp / "val.npz").read_bytes()
    argv = ["apply", "--model", str(tmp / "ts.skops"), "--apply", str(tmp / "val.npz")]
    assert main([*argv, "--out", str(tmp / "val.npz")]) == 2
    assert "replace the input" in _error(capsys)
    assert (tmp / "val.npz").read_bytes() == val


def test_broken_model_files_are_clear_errors(files, capsys):
    """Was: tracebacks (AttributeError, KeyError, ModuleNotFoundError) for a
    model with a fitted attribute missing, a .skops archive without its
    schema, and a pickle of a class that no longer exists."""
    import zipfile

    tmp, X, y = files
    model = TemperatureScaling(device="cpu").fit(X[:300], y[:300])
    del model.temperature_
    with open(tmp / "broken.pkl", "wb") as file:
        pickle.dump(model, file)
    with zipfile.ZipFile(tmp / "noschema.skops", "w") as archive:
        archive.writestr("other.txt", "no schema here")
    module = tmp / "gone_module.py"
    module.write_text("class Gone:\n    pass\n")
    import sys

    sys.path.insert(0, str(tmp))
    try:
        import gone_module

        with open(tmp / "gone.pkl", "wb") as file:
            pickle.dump(gone_module.Gone(), file)
    finally:
        sys.path.remove(str(tmp))
        sys.modules.pop("gone_module", None)
    module.unlink()
    expected = {
        "broken.pkl": "does not work (AttributeError",
        "noschema.skops": "not a readable .skops file",
        "gone.pkl": "a class this installation does not have",
    }
    for name, text in expected.items():
        argv = ["apply", "--model", str(tmp / name), "--apply", str(tmp / "val.npz")]
        assert main([*argv, "--out", str(tmp / "o.npz"), "--allow-pickle"]) == 2
        assert text in _error(capsys), name


def test_a_class_mismatch_names_the_difference_first(tmp_path, capsys):
    """26 classes A..Z fitted, a file of 25 columns without Z applied: the
    error says ``missing Z`` before the (cut) lists of both (issue 37)."""
    pd = pytest.importorskip("pandas")
    names = np.array([chr(ord("A") + j) for j in range(26)])
    X, y = make_miscalibrated_logits(600, 26, random_state=0)
    frame = pd.DataFrame({"target": names[y]})
    for j, name in enumerate(names):
        frame[f"s_{name}"] = X[:, j]
    cal, new = tmp_path / "cal.csv", tmp_path / "new.csv"
    frame.to_csv(cal, index=False)
    frame.drop(columns="s_Z").to_csv(new, index=False)
    opts = ["--label-col", "target", "--logit-cols", "s_", "--quiet"]
    opts += ["--out", str(tmp_path / "o.csv")]
    model = tmp_path / "m.skops"
    fit = ["calibrate", "--method", "ts", "--fit", str(cal), "--apply", str(cal)]
    assert main([*fit, "--save", str(model), *opts]) == 0
    capsys.readouterr()
    assert main(["apply", "--model", str(model), "--apply", str(new), *opts]) == 2
    error = _error(capsys)
    assert "(missing Z)" in error
    assert error.index("missing Z") < error.index("A, B, C")
    assert "25 columns" in error and "26 classes" in error
