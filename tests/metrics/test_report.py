"""calibration_report: every row against the metric functions called directly."""

import json
import sys

import numpy as np
import pytest
from sklearn.metrics import accuracy_score

from skcal.metrics import (
    CalibrationReport,
    brier_score,
    calibration_report,
    classwise_calibration_error,
    confidence_interval,
    cumulative_calibration_error,
    cumulative_calibration_test,
    expected_calibration_error,
    negative_log_likelihood,
    smooth_expected_calibration_error,
)

NAMES = ("accuracy", "NLL", "Brier", "ECE", "cwECE", "ECCE", "smECE")


def _data(n=300, k=4, seed=0):
    rng = np.random.default_rng(seed)
    proba = rng.dirichlet(np.full(k, 0.6), size=n)
    sharp = proba**0.7 / (proba**0.7).sum(axis=1, keepdims=True)
    y = (sharp.cumsum(axis=1) < rng.uniform(size=(n, 1))).sum(axis=1)
    return y, proba


def _sklearn_accuracy(y_true, y_proba, sample_weight=None):
    return accuracy_score(
        y_true, np.argmax(y_proba, axis=1), sample_weight=sample_weight
    )


def _references(n_bins):
    """The metric of each row, as a function and its parameters."""
    return {
        "accuracy": (_sklearn_accuracy, {}),
        "NLL": (negative_log_likelihood, {}),
        "Brier": (brier_score, {}),
        "ECE": (expected_calibration_error, {"n_bins": n_bins}),
        "cwECE": (classwise_calibration_error, {"n_bins": n_bins}),
        "ECCE": (cumulative_calibration_error, {}),
        "smECE": (smooth_expected_calibration_error, {}),
    }


@pytest.mark.parametrize("weighted", [False, True])
def test_rows_and_intervals_equal_direct_calls(weighted):
    y, proba = _data()
    rng = np.random.default_rng(5)
    w = rng.integers(0, 4, size=len(y)).astype(float) if weighted else None
    report = calibration_report(
        y,
        proba,
        sample_weight=w,
        n_resamples=60,
        slow_resamples=40,
        n_bins=10,
        random_state=7,
    )
    assert isinstance(report, CalibrationReport)
    assert report.metrics == NAMES
    assert (report.n_samples, report.n_classes, report.n_bins) == (300, 4, 10)
    for name, (func, params) in _references(10).items():
        ci = report[name]
        direct = func(y, proba, sample_weight=w, **params)
        assert ci.estimate == pytest.approx(direct, rel=1e-12, abs=1e-15), name
        b = 40 if name in ("cwECE", "ECCE", "smECE") else 60
        ref = confidence_interval(
            func,
            y,
            proba,
            sample_weight=w,
            n_resamples=b,
            random_state=7,
            **params,
        )
        assert ci.n_resamples == b, name
        np.testing.assert_allclose(
            [ci.low, ci.high], [ref.low, ref.high], rtol=1e-12, err_msg=name
        )
        np.testing.assert_allclose(ci.resamples, ref.resamples, rtol=1e-12)
    pvalue = cumulative_calibration_test(y, proba, sample_weight=w).pvalue
    assert report.ecce_pvalue == pytest.approx(pvalue, rel=1e-12)
    # the ECCE row is the statistic of the test
    assert report["ECCE"].estimate == pytest.approx(
        cumulative_calibration_test(y, proba, sample_weight=w).statistic, rel=1e-12
    )


def test_accuracy_against_sklearn_with_labels():
    y, proba = _data(200, 3, seed=2)
    names = np.array(["cat", "dog", "eel"])
    report = calibration_report(
        names[y], proba, labels=names, n_resamples=20, random_state=0
    )
    assert report["accuracy"].estimate == pytest.approx(
        accuracy_score(names[y], names[proba.argmax(axis=1)]), rel=1e-12
    )
    assert report["NLL"].estimate == pytest.approx(
        negative_log_likelihood(y, proba), rel=1e-12
    )


def test_binary_one_dimensional_proba():
    rng = np.random.default_rng(3)
    p = rng.uniform(size=250)
    y = (rng.uniform(size=250) < p).astype(int)
    report = calibration_report(y, p, n_resamples=20, random_state=0)
    assert report.n_classes == 2
    assert report["accuracy"].estimate == pytest.approx(
        accuracy_score(y, (p > 0.5).astype(int)), rel=1e-12
    )
    assert report["Brier"].estimate == pytest.approx(
        brier_score(y, np.column_stack([1 - p, p])), rel=1e-12
    )


def test_str_lists_every_metric_with_its_numbers():
    y, proba = _data()
    report = calibration_report(
        y, proba, n_resamples=30, confidence_level=0.8, random_state=1
    )
    text = str(report)
    assert "80% CI" in text and "300 samples, 4 classes" in text
    lines = text.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("metric"))
    table = lines[header + 2 : header + 2 + len(NAMES)]
    assert [line.split()[0] for line in table] == list(NAMES)
    for name, row in zip(NAMES, table):
        ci = report[name]
        assert f"{ci.estimate:.4f}" in row
        assert f"[{ci.low:.4f}, {ci.high:.4f}]" in row
    ecce = table[NAMES.index("ECCE")]
    assert ecce.endswith(f"{report.ecce_pvalue:.3g}")
    # aligned: the intervals (right-aligned) end in the same column
    assert len({row.index("]") for row in table}) == 1
    assert lines[header].index("CI") == table[0].index("]") - 1


@pytest.mark.parametrize("method", ["percentile", "bca"])
def test_an_interval_that_excludes_its_estimate_is_marked(method):
    """Issue 37: a row whose interval lies above its estimate (here cwECE,
    0.0027 [0.0028, 0.0034] as a user met it) is starred and named in the
    note, which points a percentile report to BCa; the others are not."""
    y, proba = _data()
    report = calibration_report(y, proba, n_resamples=30, random_state=2)
    cw = report["cwECE"]
    shifted = type(cw)("cwECE", 0.0027, 0.0028, 0.0034, 0.9, method, 30, cw.resamples)
    intervals = tuple(shifted if n == "cwECE" else report[n] for n in NAMES)
    others = [n for n in NAMES if n != "cwECE" and not report[n].covers_estimate]
    fake = CalibrationReport(
        NAMES, intervals, report.ecce_pvalue, 300, 4, 0.9, method, 15, 2
    )
    assert not fake["cwECE"].covers_estimate
    text = str(fake)
    row = next(line for line in text.splitlines() if line.startswith("cwECE"))
    assert "0.0027*" in row and "[0.0028, 0.0034]" in row
    outside = [n for n in NAMES if not fake[n].covers_estimate]
    assert outside == sorted(["cwECE", *others], key=NAMES.index)
    flat = " ".join(text.split())
    assert f"the interval excludes its estimate ({', '.join(outside)})" in flat
    assert ("--ci-method bca" in flat) == (method == "percentile")
    for name in NAMES:
        line = next(x for x in text.splitlines() if x.startswith(name + " "))
        assert ("*" in line.split()[1]) == (not fake[name].covers_estimate)


def test_to_dict_and_to_frame():
    y, proba = _data()
    report = calibration_report(y, proba, n_resamples=30, random_state=2)
    d = json.loads(json.dumps(report.to_dict()))
    assert list(d["metrics"]) == list(NAMES)
    for name in NAMES:
        row = d["metrics"][name]
        assert row["estimate"] == report[name].estimate
        assert (row["low"], row["high"]) == (report[name].low, report[name].high)
        assert row["p_value"] == (report.ecce_pvalue if name == "ECCE" else None)
        ci = report[name]
        assert row["covers_estimate"] == (ci.low <= ci.estimate <= ci.high)
    pd = pytest.importorskip("pandas")
    frame = report.to_frame()
    assert isinstance(frame, pd.DataFrame)
    assert frame.shape == (7, 6)
    assert list(frame.index) == list(NAMES)
    assert list(frame.columns) == [
        "estimate",
        "low",
        "high",
        "n_resamples",
        "p_value",
        "covers_estimate",
    ]
    np.testing.assert_array_equal(frame["low"], [report[name].low for name in NAMES])
    assert frame.loc["ECCE", "p_value"] == report.ecce_pvalue
    assert frame["p_value"].drop("ECCE").isna().all()


def test_to_frame_without_pandas_is_a_clear_error(monkeypatch):
    y, proba = _data(100)
    report = calibration_report(y, proba, n_resamples=10, random_state=0)
    monkeypatch.setitem(sys.modules, "pandas", None)
    with pytest.raises(ImportError, match="pip install pandas"):
        report.to_frame()


def test_reproducible():
    y, proba = _data()
    kw = {"n_resamples": 40, "slow_resamples": 20}
    a = calibration_report(y, proba, random_state=3, **kw)
    b = calibration_report(y, proba, random_state=3, **kw)
    assert a.to_dict() == b.to_dict()
    c = calibration_report(y, proba, random_state=np.random.RandomState(3), **kw)
    assert isinstance(c.random_state, int)
    again = calibration_report(y, proba, random_state=c.random_state, **kw)
    assert c.to_dict() == again.to_dict()
    # every metric was resampled on the same rows: the NLL interval of the
    # drawn seed equals confidence_interval's with that seed
    ref = confidence_interval(
        "negative_log_likelihood", y, proba, n_resamples=40, random_state=c.random_state
    )
    assert (c["NLL"].low, c["NLL"].high) == (ref.low, ref.high)
    with pytest.raises(KeyError, match="its metrics are"):
        a["MCE"]


def test_bad_input_raises_the_metrics_error():
    y, proba = _data(50)
    bad = proba.copy()
    bad[0] *= 2  # a row that does not sum to 1
    with pytest.raises(ValueError) as direct:
        negative_log_likelihood(y, bad)
    with pytest.raises(ValueError) as raised:
        calibration_report(y, bad, n_resamples=10)
    assert str(raised.value) == str(direct.value)
    with pytest.raises(ValueError, match="inconsistent numbers of samples"):
        calibration_report(y[:-1], proba, n_resamples=10)
    with pytest.raises(ValueError, match="n_resamples"):
        calibration_report(y, proba, n_resamples=1)
    with pytest.raises(ValueError, match="confidence_level"):
        calibration_report(y, proba, confidence_level=1.0)
