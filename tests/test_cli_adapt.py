"""``skcal adapt``: label-shift adaptation of a saved calibrator (issue 38).

The command runs on real files: the logits of a logistic regression on
scikit-learn's digits, a calibration file and a target file drawn from the
held-out rows with shifted class priors. Its priors and probabilities are
checked against the authors' package ``abstention`` (EM) and against BBSE
computed by hand from its formula (Lipton et al. 2018: ``w = C^-1 mu``), on
the probabilities of the saved model.
"""

import json

import numpy as np
import pytest
from sklearn.datasets import load_digits
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split

pytest.importorskip("skops.io")

from skcal.cli import main  # noqa: E402
from skcal.utils.persistence import load  # noqa: E402

#: the target set's class priors: three digits take 70% of it
TARGET_PRIORS = np.r_[[0.35, 0.2, 0.15], np.full(7, 0.3 / 7)][
    [3, 1, 4, 0, 5, 6, 2, 7, 8, 9]
]


@pytest.fixture(scope="module")
def digits_files(tmp_path_factory):
    """cal.npz (logits, labels), target.npz (logits), target_labeled.npz,
    and a temperature-scaling model saved by ``skcal calibrate --save``."""
    tmp = tmp_path_factory.mktemp("adapt")
    X, y = load_digits(return_X_y=True)
    X_tr, X_rest, y_tr, y_rest = train_test_split(
        X, y, train_size=0.4, stratify=y, random_state=0
    )
    X_cal, X_test, y_cal, y_test = train_test_split(
        X_rest, y_rest, train_size=0.5, stratify=y_rest, random_state=0
    )
    model = LogisticRegression(C=0.01, max_iter=2000).fit(X_tr, y_tr)
    rng = np.random.default_rng(0)
    counts = rng.multinomial(800, TARGET_PRIORS)
    rows = np.concatenate(
        [rng.choice(np.flatnonzero(y_test == k), c) for k, c in enumerate(counts)]
    )
    L_cal, L_target = model.predict_log_proba(X_cal), model.predict_log_proba(X_test)
    np.savez(tmp / "cal.npz", logits=L_cal, labels=y_cal)
    np.savez(tmp / "target.npz", logits=L_target[rows])
    np.savez(tmp / "target_labeled.npz", logits=L_target[rows], labels=y_test[rows])
    argv = ["calibrate", "--method", "temperature", "--fit", str(tmp / "cal.npz")]
    argv += ["--apply", str(tmp / "cal.npz"), "--out", str(tmp / "cal_out.npz")]
    assert main([*argv, "--save", str(tmp / "ts.skops"), "--quiet"]) == 0
    return tmp, L_cal, y_cal, L_target[rows], y_test[rows]


def _adapt(tmp, out, *extra, target="target.npz"):
    argv = ["adapt", "--model", str(tmp / "ts.skops"), "--fit", str(tmp / "cal.npz")]
    argv += ["--target", str(tmp / target), "--out", str(out)]
    return main([*argv, *extra])


def _error(capsys) -> str:
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert lines[-1].startswith("skcal adapt: error: "), captured.err
    assert "Traceback" not in captured.err and captured.out == ""
    return lines[-1]


def test_em_equals_abstention_and_reweights(digits_files, capsys):
    label_shift = pytest.importorskip("abstention.label_shift")
    tmp, L_cal, y_cal, L_target, _ = digits_files
    out = tmp / "em.npz"
    tight = ["--tol", "1e-13", "--max-iter", "100000", "--n-resamples", "0"]
    tight += ["--prior-strength", "0", "--no-shift-test"]  # the paper's EM
    assert _adapt(tmp, out, *tight) == 0
    stdout = capsys.readouterr().out
    assert "EM, converged" in stdout and "Class priors" in stdout
    ts = load(tmp / "ts.skops")
    P_cal, P_target = ts.predict_proba(L_cal), ts.predict_proba(L_target)
    onehot = np.eye(10)[y_cal]
    # abstention's default: the source priors are the mean calibrated
    # probability of the calibration rows, as skcal's for EM
    ref = label_shift.EMImbalanceAdapter(tolerance=1e-13, max_iterations=10**5)(
        P_target, P_cal, valid_labels=onehot
    )
    source = P_cal.mean(axis=0)
    with np.load(out) as written:
        np.testing.assert_allclose(written["source_priors"], source, rtol=1e-12)
        np.testing.assert_allclose(
            written["priors"], ref.multipliers * source, atol=1e-6
        )
        np.testing.assert_allclose(written["proba"], ref(P_target), atol=1e-6)
        np.testing.assert_array_equal(written["classes"], np.arange(10))
        assert "priors_low" not in written  # --n-resamples 0: no interval
    # the estimate is near the target's class mix, far from the source's
    truth = np.bincount(digits_files[4], minlength=10) / len(L_target)
    source = onehot.mean(axis=0)
    error = np.abs(ref.multipliers * source - truth).max()
    assert error < 0.05 < np.abs(source - truth).max()


def test_bbse_equals_the_formula(digits_files, capsys):
    tmp, L_cal, y_cal, L_target, _ = digits_files
    out = tmp / "bbse.npz"
    flags = ["--method", "bbse", "--n-resamples", "0", "--no-shift-test", "--quiet"]
    assert _adapt(tmp, out, *flags) == 0
    ts = load(tmp / "ts.skops")
    pred_cal = ts.predict_proba(L_cal).argmax(axis=1)
    C = np.zeros((10, 10))  # C[i, j] = P(argmax = i, y = j) on the source
    np.add.at(C, (pred_cal, y_cal), 1.0 / len(y_cal))
    mu = np.bincount(ts.predict_proba(L_target).argmax(axis=1), minlength=10)
    w = np.linalg.solve(C, mu / len(L_target))
    assert np.all(w > 0)  # no clipping on this shift
    source = np.bincount(y_cal, minlength=10) / len(y_cal)
    with np.load(out) as written:
        np.testing.assert_allclose(written["priors"], w * source, atol=1e-9)
    assert "BBSE" in capsys.readouterr().out


def test_no_shift_keeps_the_calibrated_probabilities(digits_files, capsys):
    """The calibration rows as the target: no shift to find. The shift test
    says so with its numbers, the written probabilities are the calibrated
    ones, and the table shows the estimate it set aside."""
    tmp, L_cal, _, L_target, _ = digits_files
    out = tmp / "none.npz"
    assert _adapt(tmp, out, "--n-resamples", "0", target="cal.npz") == 0
    stdout = " ".join(capsys.readouterr().out.split())
    assert "no shift detected (2 log likelihood ratio" in stdout
    assert "estimated" in stdout and "--no-shift-test" in stdout
    ts = load(tmp / "ts.skops")
    with np.load(out) as written:
        np.testing.assert_array_equal(written["priors"], written["source_priors"])
        np.testing.assert_allclose(
            written["proba"], ts.predict_proba(L_cal), atol=1e-12
        )
    # the shifted target passes the test
    assert _adapt(tmp, tmp / "shifted.npz", "--n-resamples", "0", "--json") == 0
    report = json.loads(capsys.readouterr().out)
    assert report["shift_detected"] and report["statistic"] > report["threshold"]


def test_intervals_json_and_metrics_with_target_labels(digits_files, capsys):
    tmp, *_ = digits_files
    out = tmp / "ci.npz"
    code = _adapt(
        tmp, out, "--n-resamples", "100", "--json", target="target_labeled.npz"
    )
    assert code == 0
    report = json.loads(capsys.readouterr().out)
    assert report["method"] == "em" and report["converged"] is True
    assert report["n_target"] == 800 and report["n_resamples"] == 100
    rows = report["priors"]
    assert [r["class"] for r in rows] == [str(k) for k in range(10)]
    for row in rows:
        assert row["low"] <= row["high"]
        assert row["weight"] == pytest.approx(row["target"] / row["source"])
    with np.load(out) as written:
        np.testing.assert_allclose(written["priors_low"], [r["low"] for r in rows])
        np.testing.assert_array_equal(written["labels"], digits_files[4])
    before, after = report["metrics"]
    assert before["method"].endswith("(not adapted)")
    assert after["NLL"] < before["NLL"]  # a strong shift, 800 target rows


def test_table_report_and_csv_output(digits_files, capsys):
    pd = pytest.importorskip("pandas")
    tmp, *_ = digits_files
    out = tmp / "adapted.csv"
    assert _adapt(tmp, out, "--n-resamples", "50", target="target_labeled.npz") == 0
    stdout = capsys.readouterr().out
    header = next(line for line in stdout.splitlines() if line.startswith("class"))
    assert header.split() == ["class", "source", "target", "low", "high"] + [
        "weight",
        "true",
    ]
    assert "90% bootstrap intervals of 50 resamples" in " ".join(stdout.split())
    assert "Metrics on the labels of" in stdout
    frame = pd.read_csv(out)
    assert len(frame) == 800 and "proba_9" in frame.columns


def test_errors_are_one_clear_line(digits_files, capsys):
    tmp, L_cal, y_cal, L_target, _ = digits_files
    np.savez(tmp / "nolabels.npz", logits=L_cal)
    argv = ["adapt", "--model", str(tmp / "ts.skops"), "--fit"]
    argv += [str(tmp / "nolabels.npz"), "--target", str(tmp / "target.npz")]
    assert main([*argv, "--out", str(tmp / "x.npz")]) == 2
    assert "labels" in _error(capsys)
    np.savez(tmp / "narrow.npz", logits=L_target[:, :9])
    assert _adapt(tmp, tmp / "x.npz", target="narrow.npz") == 2
    message = _error(capsys)
    assert "9" in message and "10" in message
    np.savez(tmp / "tiny.npz", logits=L_target[:5])
    assert _adapt(tmp, tmp / "x.npz", target="tiny.npz") == 2
    assert "at least" in _error(capsys)
    assert _adapt(tmp, tmp / "x.npz", "--method", "bbse", target="tiny.npz") == 2
    assert "20" in _error(capsys)
    with pytest.raises(SystemExit) as exc:  # argparse's usage error
        _adapt(tmp, tmp / "x.npz", "--prior-strength", "-1")
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "expected 'auto' or a non-negative number, got '-1'" in err


def test_a_class_absent_from_the_fit_file_is_named(digits_files, capsys):
    tmp, L_cal, y_cal, *_ = digits_files
    keep = y_cal != 9
    np.savez(tmp / "cal_no9.npz", logits=L_cal[keep], labels=y_cal[keep])
    argv = ["adapt", "--model", str(tmp / "ts.skops"), "--fit"]
    argv += [str(tmp / "cal_no9.npz"), "--target", str(tmp / "target.npz")]
    assert main([*argv, "--out", str(tmp / "x.npz")]) == 2
    message = _error(capsys)
    assert "[9]" in message and "no calibration sample" in message


def test_verdict_of_an_unreliable_estimate_is_no_green_light():
    """Issue 49: a shift the reliability check found unreliable is reported
    as such, with the simulated errors, not as a plain "shift detected"."""
    from skcal.cli._adapt import _shift_verdict
    from skcal.shift import PriorEstimate

    priors = np.array([0.5, 0.5])
    est = PriorEstimate(
        priors=priors,
        low=None,
        high=None,
        method="em",
        n_iter=3,
        converged=True,
        n_samples=800,
        weights=np.ones(2),
        estimated=np.array([0.8, 0.2]),
        shift_detected=True,
        statistic=40.0,
        threshold=6.7,
        reliable=False,
        simulated_errors=(0.02, 0.01, 1.98, 1.84),
    )
    verdict = " ".join(_shift_verdict(est).split())
    assert "but the estimate is unreliable here: kept the calibrated" in verdict
    assert "0.02 against 0.01" in verdict and "1.98 against 1.84" in verdict
    reliable = PriorEstimate(**{**est.__dict__, "reliable": True})
    assert _shift_verdict(reliable).startswith("shift detected (")
