"""``skcal calibrate`` / ``apply`` / ``evaluate`` on language-model records
(``.jsonl`` / ``.json`` files of API responses with ``top_logprobs``; issue 52,
item 5).

The records are written by hand from known log-probabilities, so that the
expected logits are those numbers (not the reader's output); the written
probabilities must equal those of the calibrator fitted in Python on them.
"""

import json

import numpy as np
import pytest
from scipy.special import logsumexp, softmax
from sklearn.metrics import log_loss

from skcal import TemperatureScaling
from skcal.cli import main
from skcal.llm import read_option_logprobs

OPTIONS = ["A", "B", "C", "D"]


def _error(capsys, command) -> str:
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert lines[-1].startswith(f"skcal {command}: error: "), captured.err
    assert "Traceback" not in captured.err
    return lines[-1]


def _record(i, logprobs, answer, tokens=OPTIONS, extra=()):
    """A chat completion whose first token's top_logprobs are ``tokens`` with
    ``logprobs`` (then the ``extra`` (token, logprob) pairs)."""
    top = [{"token": t, "logprob": float(v)} for t, v in zip(tokens, logprobs)]
    top += [{"token": t, "logprob": v} for t, v in extra]
    best = max(top, key=lambda e: e["logprob"])
    content = [
        {"token": best["token"], "logprob": best["logprob"], "top_logprobs": top}
    ]
    return {
        "id": f"q{i}",
        "choices": [{"index": 0, "logprobs": {"content": content}}],
        "metadata": {"answer": answer},
    }


def _write(path, records):
    with open(path, "w", encoding="utf-8") as f:
        for r in records:
            f.write(json.dumps(r) + "\n")
    return path


@pytest.fixture
def data(tmp_path):
    """Fit and apply files: 4 options, all listed, and a token 'The' beside
    them; log-probabilities over-confident (temperature 3 on the truth)."""
    rng = np.random.default_rng(0)
    n = 240
    z = rng.normal(scale=3.0, size=(n, 4))
    y = np.array([rng.choice(4, p=softmax(row / 3.0)) for row in z])
    # log-probabilities of the options: 0.9 of the mass, 0.1 to "The"
    logp = z - logsumexp(z, axis=1, keepdims=True) + np.log(0.9)
    logp = np.round(logp, 6)
    records = [
        _record(i, logp[i], OPTIONS[y[i]], extra=[("The", np.log(0.1))])
        for i in range(n)
    ]
    fit = _write(tmp_path / "fit.jsonl", records[:160])
    test = _write(tmp_path / "test.jsonl", records[160:])
    return tmp_path, fit, test, logp, np.asarray(OPTIONS)[y]


def _calibrate(tmp, fit, test, out, *extra):
    argv = ["calibrate", "--method", "temperature", "--fit", str(fit)]
    argv += ["--apply", str(test), "--out", str(out), "--options", *OPTIONS]
    return main([*argv, "--label-key", "metadata.answer", "--quiet", *extra])


def test_calibrate_writes_the_probabilities_of_the_python_path(data):
    tmp, fit, test, logp, y = data
    assert _calibrate(tmp, fit, test, tmp / "out.npz") == 0
    with np.load(tmp / "out.npz") as out:
        proba, classes = out["proba"], out["classes"]
        assert out["labels"].tolist() == y[160:].tolist()
        assert out["id"].tolist() == [f"q{i}" for i in range(160, 240)]
    # the logits are the hand-written log-probabilities
    reference = TemperatureScaling(device="cpu").fit(logp[:160], y[:160])
    assert classes.tolist() == OPTIONS
    np.testing.assert_array_equal(proba, reference.predict_proba(logp[160:]))
    # and the Python route through the reader gives the same
    read = read_option_logprobs(fit, OPTIONS)
    np.testing.assert_array_equal(read.logprobs, logp[:160])


def test_calibrate_csv_has_id_and_option_columns(data):
    pd = pytest.importorskip("pandas")  # CSV files are written through pandas
    tmp, fit, test, logp, y = data
    assert _calibrate(tmp, fit, test, tmp / "out.csv") == 0

    frame = pd.read_csv(tmp / "out.csv")
    assert list(frame.columns) == [
        "id",
        "label",
        "predict",
        *(f"proba_{o}" for o in OPTIONS),
    ]
    assert frame["id"].tolist() == [f"q{i}" for i in range(160, 240)]
    reference = TemperatureScaling(device="cpu").fit(logp[:160], y[:160])
    np.testing.assert_allclose(
        frame[[f"proba_{o}" for o in OPTIONS]].to_numpy(),
        reference.predict_proba(logp[160:]),
        rtol=1e-15,
        atol=0,
    )


def test_apply_a_saved_model_to_records(data):
    pytest.importorskip("skops.io")
    from skcal.utils.persistence import load

    tmp, fit, test, logp, y = data
    model = tmp / "ts.skops"
    assert _calibrate(tmp, fit, test, tmp / "out.npz", "--save", str(model)) == 0
    argv = ["apply", "--model", str(model), "--apply", str(test)]
    argv += ["--out", str(tmp / "applied.npz"), "--options", *OPTIONS, "--quiet"]
    assert main(argv) == 0
    with np.load(tmp / "applied.npz") as out:
        np.testing.assert_array_equal(
            out["proba"], load(model).predict_proba(logp[160:])
        )
        assert "labels" not in out.files  # no --label-key: no labels


def test_evaluate_records_uncalibrated_and_calibrated(data, capsys):
    tmp, fit, test, logp, y = data
    assert _calibrate(tmp, fit, test, tmp / "out.npz") == 0
    capsys.readouterr()
    argv = ["evaluate", str(test), str(tmp / "out.npz"), "--options", *OPTIONS]
    assert main([*argv, "--label-key", "metadata.answer", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    files = list(report["files"].values())
    reference = TemperatureScaling(device="cpu").fit(logp[:160], y[:160])
    expected = [
        log_loss(y[160:], softmax(logp[160:], axis=1), labels=OPTIONS),
        log_loss(y[160:], reference.predict_proba(logp[160:]), labels=OPTIONS),
    ]
    got = [f["metrics"]["NLL"] for f in files]
    np.testing.assert_allclose(got, expected, rtol=1e-12)
    assert expected[1] < expected[0]  # the over-confident scores improve


def test_aliases_absent_and_a_labels_file(tmp_path, capsys):
    # Yes / No with the alias "Y" of Yes; row 1 lists no form of No
    records = [
        _record(0, [-0.5, -1.6, -2.5], "Yes", tokens=["Yes", "No", "Y"]),
        _record(1, [-0.2, -3.0], "No", tokens=["yes", "Y"]),
        _record(2, [-0.1, -2.5], "No", tokens=["No", " yes"]),
    ]
    path = _write(tmp_path / "yn.jsonl", records)
    (tmp_path / "labels.txt").write_text("Yes\nNo\nNo\n")
    argv = ["evaluate", str(path), "--options", "Yes", "No", "--alias", "Yes=Y"]
    argv += ["--absent", "floor", "--labels", str(tmp_path / "labels.txt"), "--json"]
    assert main(argv) == 0
    nll = json.loads(capsys.readouterr().out)["metrics"]["NLL"]
    yes = [np.logaddexp(-0.5, -2.5), np.logaddexp(-0.2, -3.0), -2.5]
    no = [-1.6, -3.0, -0.1]  # row 1: the floor, its smallest listed value
    p = softmax(np.column_stack([yes, no]), axis=1)
    truth = [0, 1, 1]  # Yes, No, No in the columns Yes, No
    assert nll == pytest.approx(-np.mean(np.log(p[[0, 1, 2], truth])), rel=1e-12)
    python = read_option_logprobs(
        path, ["Yes", "No"], aliases={"Yes": ["Y"]}, absent="floor"
    )
    np.testing.assert_allclose(
        python.logprobs, np.column_stack([yes, no]), rtol=1e-15, atol=0
    )


@pytest.mark.parametrize(
    "extra, expected",
    [
        ([], "--options"),
        (["--options", "A", "B", "E"], "No record lists 'E'"),
        (["--options", *OPTIONS, "--label-key", "meta.answer"], "'meta.answer'"),
    ],
)
def test_errors_are_one_line(data, capsys, extra, expected):
    tmp, fit, test, logp, y = data
    assert main(["evaluate", str(test), *extra]) == 2
    message = _error(capsys, "evaluate")
    assert expected in message and str(test) in message


def test_records_without_logprobs_are_one_line(tmp_path, capsys):
    record = {"id": "x", "choices": [{"message": {"content": "A"}}]}
    path = _write(tmp_path / "nolp.jsonl", [record])
    argv = ["calibrate", "--method", "temperature", "--fit", str(path)]
    argv += ["--apply", str(path), "--out"]
    argv += [str(tmp_path / "o.npz"), "--options", "A", "B"]
    assert main(argv) == 2
    message = _error(capsys, "calibrate")
    assert "Record 0 has no log-probabilities" in message


def test_labels_file_of_the_wrong_length(data, capsys):
    tmp, fit, test, logp, y = data
    (tmp / "labels.txt").write_text("A\nB\n")
    argv = ["evaluate", str(test), "--options", *OPTIONS, "--labels"]
    assert main([*argv, str(tmp / "labels.txt")]) == 2
    assert "has 2 labels but the records are 80" in _error(capsys, "evaluate")


def test_bad_alias_is_a_usage_error(data, capsys):
    tmp, fit, test, logp, y = data
    with pytest.raises(SystemExit) as exc:
        main(["evaluate", str(test), "--options", *OPTIONS, "--alias", "A"])
    assert exc.value.code == 2
    assert "OPTION=FORM" in capsys.readouterr().err


def _step(token, top):
    return {
        "token": token,
        "logprob": dict(top)[token],
        "top_logprobs": [{"token": t, "logprob": v} for t, v in top],
    }


@pytest.mark.parametrize("position", ["1", "first_match"])
def test_multi_token_options_at_a_later_position(tmp_path, capsys, position):
    # "Sure" first, then the answer: Bar+cel followed, Mad+rid did not
    content = [
        _step("Sure", [("Sure", -0.05), ("OK", -3.0)]),
        _step("Bar", [("Bar", -0.3), ("Mad", -1.5)]),
        _step("cel", [("cel", -0.1), ("x", -2.5)]),
    ]
    record = {"choices": [{"logprobs": {"content": content}}]}
    path = _write(tmp_path / "city.jsonl", [record, record])
    (tmp_path / "y.txt").write_text("Barcel\nMadrid\n")
    argv = ["evaluate", str(path), "--options", "Bar+cel", "Mad+rid"]
    argv += ["--position", position, "--labels", str(tmp_path / "y.txt"), "--json"]
    assert main(argv) == 0
    nll = json.loads(capsys.readouterr().out)["metrics"]["NLL"]
    # sum of the followed option's tokens; the other: its first token only
    p = softmax([-0.3 + -0.1, -1.5])
    assert nll == pytest.approx(-np.mean(np.log(p)), rel=1e-12)
