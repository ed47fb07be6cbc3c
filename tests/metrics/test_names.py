"""One table of metric names, shared by every entry point that takes a name:
paired_comparison / confidence_interval, get_scorer, metric_state,
calibration_report and ``skcal select --scoring`` (issue 37, item 9)."""

import json

import numpy as np
import pytest
import sklearn
from _real_data import real_scores
from sklearn.datasets import load_wine
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import brier_score_loss, log_loss
from sklearn.metrics import get_scorer as sklearn_get_scorer
from sklearn.utils.fixes import parse_version

from skcal import IdentityCalibrator, TemperatureScaling
from skcal.cli import main
from skcal.metrics import (
    calibration_report,
    expected_calibration_error,
    get_scorer,
    mergeable_metrics,
    metric_state,
    negative_log_likelihood,
    paired_comparison,
)
from skcal.metrics._names import METRIC_NAMES, find_metric, metric_function
from skcal.metrics._scorer import _SCORERS
from skcal.metrics._uncertainty import _resolve_metric
from skcal.model_selection import CalibratorSearchCV

#: scikit-learn's brier_score_loss (behind "neg_brier_score") takes
#: multiclass probabilities from 1.7 on; the minimum-versions run has 1.6
MULTICLASS_BRIER = parse_version(sklearn.__version__).release >= (1, 7)

#: (entry, name): every name of every metric, as written and in other cases
NAMES = [
    (entry, variant)
    for entry in METRIC_NAMES
    for name in entry.names
    for variant in {name, name.upper(), name.lower()}
]
FLOAT_METRICS = [entry for entry in METRIC_NAMES if entry.scorer is not None]


def _ids(case):
    return case[1] if isinstance(case, tuple) else case.function


@pytest.fixture(scope="module")
def wine():
    """Held-out probabilities of a logistic regression on wine, and a worse
    prediction of the same rows (uniform mixed in)."""
    y, proba = real_scores("wine")
    return y, proba, 0.5 * proba + 0.5 / proba.shape[1]


def test_the_brief_aliases_name_the_metrics_of_the_issue():
    expected = {
        "ece": "expected_calibration_error",
        "ECE": "expected_calibration_error",
        "nll": "negative_log_likelihood",
        "log_loss": "negative_log_likelihood",
        "neg_log_loss": "negative_log_likelihood",
        "brier": "brier_score",
        "cwece": "classwise_calibration_error",
        "ecce": "cumulative_calibration_error",
        "smece": "smooth_expected_calibration_error",
        "softece": "soft_expected_calibration_error",
        "mce": "max_calibration_error",
        "l2_calibration_error": "l2_calibration_error",
        "l2ce": "l2_calibration_error",
        "mmce": "maximum_mean_calibration_error",
        "spiegelhalter": "spiegelhalter_abs_z",
    }
    assert {name: find_metric(name).function for name in expected} == expected


def test_every_function_exists_and_every_skcal_scorer_scores_it():
    for entry in METRIC_NAMES:
        func = metric_function(entry)
        assert func.__name__ == entry.function
        if entry.scorer in _SCORERS:
            assert _SCORERS[entry.scorer].metric is func
    # every skcal scorer is a row of the table
    assert {e.scorer for e in METRIC_NAMES} >= set(_SCORERS)


def test_sklearn_scorers_of_the_table_are_the_same_metric(wine):
    """neg_log_loss and neg_brier_score are scikit-learn's scorers: on real
    data they are the negated skcal metric the names resolve to."""
    y, proba, _ = wine
    nll = metric_function(find_metric("neg_log_loss"))
    brier = metric_function(find_metric("neg_brier_score"))
    assert nll(y, proba) == pytest.approx(log_loss(y, proba), rel=1e-12)
    if MULTICLASS_BRIER:
        assert brier(y, proba) == pytest.approx(brier_score_loss(y, proba), rel=1e-12)


@pytest.mark.parametrize("entry, name", NAMES, ids=[n for _, n in NAMES])
def test_every_name_resolves_to_its_metric_in_every_entry_point(entry, name):
    assert find_metric(name) is entry
    func = metric_function(entry)
    if entry.scorer is not None:
        assert _resolve_metric(name)[:2] == (func, entry.function)
        assert repr(get_scorer(name)) == repr(get_scorer(entry.scorer))
    if entry.function in mergeable_metrics():
        assert metric_state(name).metric == entry.function


@pytest.mark.parametrize("metric", ["ece", "ECE", "neg_expected_calibration_error"])
def test_paired_comparison_by_alias_equals_by_function(wine, metric):
    y, a, b = wine
    kw = {"n_resamples": 200, "random_state": 0}
    by_name = paired_comparison(metric, y, a, b, n_bins=10, **kw)
    by_func = paired_comparison(expected_calibration_error, y, a, b, n_bins=10, **kw)
    assert by_name.metric == "expected_calibration_error"
    assert by_name.difference == expected_calibration_error(
        y, a, n_bins=10
    ) - expected_calibration_error(y, b, n_bins=10)
    for field in ("difference", "low", "high", "p_value"):
        assert getattr(by_name, field) == getattr(by_func, field)


@pytest.mark.parametrize("metric", ["neg_log_loss", "NLL", "log_loss"])
def test_paired_comparison_of_a_scorer_name_is_its_error(wine, metric):
    """A scorer name names the metric, lower is better: NLL, not -NLL."""
    y, a, b = wine
    kw = {"n_resamples": 200, "random_state": 0}
    by_name = paired_comparison(metric, y, a, b, **kw)
    by_func = paired_comparison(negative_log_likelihood, y, a, b, **kw)
    assert by_name.difference == pytest.approx(log_loss(y, a) - log_loss(y, b))
    assert (by_name.low, by_name.high) == (by_func.low, by_func.high)


@pytest.mark.parametrize("entry", FLOAT_METRICS, ids=_ids)
def test_every_float_metric_is_compared_by_its_label(entry):
    """Each metric named by its label: the estimates are the function's."""
    y, proba = real_scores("digits")
    y, proba = y[:120], proba[:120]
    other = 0.7 * proba + 0.3 / proba.shape[1]
    func = metric_function(entry)
    local = "local" in entry.function  # features: the probabilities themselves
    params = {"features": proba, "bandwidth": "auto"} if local else {}
    result = paired_comparison(
        entry.label, y, proba, other, n_resamples=5, random_state=0, **params
    )
    assert result.metric == entry.function
    assert result.estimate_a == func(y, proba, **params)
    assert result.estimate_b == func(y, other, **params)


def test_the_report_rows_are_the_table_labels_and_take_any_name(wine):
    y, proba, _ = wine
    report = calibration_report(
        y, proba, n_resamples=20, slow_resamples=5, random_state=0
    )
    for label in report.metrics[1:]:  # accuracy is no calibration metric
        assert find_metric(label).label == label
        entry = find_metric(label)
        for name in entry.names:
            assert report[name] is report[label]
            assert report[name.lower()] is report[label]
    assert report["Accuracy"] is report["accuracy"]
    with pytest.raises(KeyError, match="No metric 'mmce' in the report"):
        report["mmce"]


def test_get_scorer_by_alias_scores_as_the_canonical_scorer():
    X, y = load_wine(return_X_y=True)
    X = (X - X.mean(0)) / X.std(0)
    model = LogisticRegression(C=0.05, max_iter=300).fit(X[::2], y[::2])
    for alias, canonical in [
        ("ECE", "neg_expected_calibration_error"),
        ("cwece", "neg_classwise_calibration_error"),
        ("nll", "neg_log_loss"),
        *([("Brier", "neg_brier_score")] if MULTICLASS_BRIER else []),
    ]:
        score = get_scorer(alias)(model, X[1::2], y[1::2])
        assert score == get_scorer(canonical)(model, X[1::2], y[1::2])
        assert score < 0
    # scikit-learn's own names keep working
    assert repr(get_scorer("accuracy")) == repr(sklearn_get_scorer("accuracy"))


@pytest.mark.parametrize(
    "call, error, match",
    [
        (
            lambda: paired_comparison("eec", [0, 1], [[1, 0]] * 2, [[1, 0]] * 2),
            ValueError,
            r"Unknown metric 'eec'\. Did you mean 'ECE'\?.*cwECE",
        ),
        (
            lambda: get_scorer("neg_expected_calibraton_error"),
            ValueError,
            "Did you mean 'neg_expected_calibration_error'.*scikit-learn scorer",
        ),
        (lambda: get_scorer("spiegelhalter_test"), ValueError, "has no scorer"),
        (
            lambda: metric_state("smECE"),
            ValueError,
            "smooth_expected_calibration_error has no mergeable state",
        ),
        (
            lambda: metric_state("spiegelhalter"),
            ValueError,
            "Did you mean 'spiegelhalter_test'",
        ),
    ],
)
def test_unknown_names_get_the_listing(call, error, match):
    with pytest.raises(error, match=match):
        call()


def _select(tmp_path, capsys, scoring):
    rng = np.random.default_rng(0)
    y, proba = real_scores("wine")
    path = tmp_path / "wine.npz"
    if not path.exists():
        logits = np.log(np.clip(proba, 1e-12, None)) * rng.uniform(1.5, 2.0)
        np.savez(path, logits=logits, labels=y)
    argv = ["select", "--fit", str(path), "--candidates", "identity", "ts"]
    assert main([*argv, "--cv", "2", "--scoring", scoring, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("alias", ["ECE", "ece"])
def test_select_scoring_takes_the_aliases(tmp_path, capsys, alias):
    by_alias = _select(tmp_path, capsys, alias)
    canonical = _select(tmp_path, capsys, "neg_expected_calibration_error")
    assert by_alias["scoring"] == "neg_expected_calibration_error"
    means = [r["cv_results"]["mean_test_score"] for r in (by_alias, canonical)]
    assert means[0] == means[1]


@pytest.mark.parametrize(
    "alias, canonical",
    [("NLL", "neg_log_loss"), ("ece", "neg_expected_calibration_error")],
)
def test_the_search_takes_an_alias_as_its_scoring(alias, canonical):
    y, proba = real_scores("wine")
    logits = np.log(proba) * 1.7  # over-confident

    def search(scoring):
        candidates = [IdentityCalibrator(), TemperatureScaling(device="cpu")]
        return CalibratorSearchCV(
            candidates, scoring=scoring, cv=2, random_state=0
        ).fit(logits, y)

    by_alias, by_name = search(alias), search(canonical)
    np.testing.assert_array_equal(
        by_alias.cv_results_["mean_test_score"], by_name.cv_results_["mean_test_score"]
    )
