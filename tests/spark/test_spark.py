"""Spark: metrics merged from per-partition states, calibrated columns.

Every value is compared with the in-memory function on the same rows (or
scikit-learn's), to 1e-12.
"""

import numpy as np
import pytest
from sklearn.metrics import accuracy_score, log_loss

from skcal import TemperatureScaling
from skcal import spark as sk_spark
from skcal.metrics import (
    brier_score,
    classwise_calibration_error,
    expected_calibration_error,
    negative_log_likelihood,
)

RTOL = 1e-12


def _data(n=800, n_classes=4, seed=0):
    rng = np.random.default_rng(seed)
    logits = rng.normal(size=(n, n_classes)) * 2.0
    proba = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    # labels drawn from sharper probabilities: an overconfident model
    sharp = np.exp(1.5 * logits) / np.exp(1.5 * logits).sum(axis=1, keepdims=True)
    y = np.array([rng.choice(n_classes, p=row) for row in sharp])
    weight = rng.uniform(0.5, 2.0, n)
    group = rng.choice(["a", "b", "c"], n)
    return proba, y, weight, group


def _array_frame(spark, proba, y, weight, group, partitions=3):
    rows = [
        (int(t), p.tolist(), float(w), str(g))
        for t, p, w, g in zip(y, proba, weight, group)
    ]
    schema = "y long, proba array<double>, w double, g string"
    rdd = spark.sparkContext.parallelize(rows, partitions)  # no shuffle
    return spark.createDataFrame(rdd, schema)


def _close(a, b):
    assert a == pytest.approx(b, rel=RTOL, abs=1e-15)


def test_report_metrics_equal_the_in_memory_functions(spark):
    proba, y, weight, group = _data()
    df = _array_frame(spark, proba, y, weight, group)
    got = sk_spark.calibration_metrics(df, proba="proba", label="y", weight="w")
    assert list(got) == ["accuracy", "NLL", "Brier", "ECE", "cwECE"]
    _close(got["accuracy"], accuracy_score(y, proba.argmax(1), sample_weight=weight))
    _close(got["NLL"], log_loss(y, proba, sample_weight=weight))
    _close(got["Brier"], brier_score(y, proba, sample_weight=weight))
    _close(got["ECE"], expected_calibration_error(y, proba, sample_weight=weight))
    _close(got["cwECE"], classwise_calibration_error(y, proba, sample_weight=weight))
    assert got["ECE"] > 0.02  # the labels are drawn from sharper probabilities


def test_columns_string_labels_and_groups(spark):
    proba, y, weight, group = _data(n=600, n_classes=3, seed=1)
    names = np.array(["cat", "dog", "emu"])
    rows = [(str(names[t]), *map(float, p), str(g)) for t, p, g in zip(y, proba, group)]
    df = spark.createDataFrame(
        rows, "label string, p0 double, p1 double, p2 double, g string"
    )
    got = sk_spark.calibration_metrics(
        df,
        proba=["p0", "p1", "p2"],
        label="label",
        group="g",
        metrics=["ECE", "nll", "classwise_ece"],
        n_bins=10,
    )
    assert list(got) == ["a", "b", "c"]
    for key, values in got.items():
        rows_of = group == key
        yk, pk = names[y[rows_of]], proba[rows_of]
        _close(values["ECE"], expected_calibration_error(yk, pk, n_bins=10))
        _close(values["nll"], negative_log_likelihood(yk, pk))
        _close(values["classwise_ece"], classwise_calibration_error(yk, pk, n_bins=10))


def test_equal_mass_bins_take_two_passes(spark):
    proba, y, weight, group = _data(n=600, seed=2)
    df = _array_frame(spark, proba, y, weight, group, partitions=4)
    params = dict(n_bins=8, strategy="quantile")
    got = sk_spark.expected_calibration_error(
        df, proba="proba", label="y", weight="w", **params
    )
    _close(got, expected_calibration_error(y, proba, sample_weight=weight, **params))
    by_group = sk_spark.classwise_calibration_error(
        df, proba="proba", label="y", group="g", **params
    )
    for key, value in by_group.items():
        rows_of = group == key
        want = classwise_calibration_error(y[rows_of], proba[rows_of], **params)
        _close(value, want)


def test_binary_positive_class_column(spark):
    rng = np.random.default_rng(3)
    p = rng.uniform(0.01, 0.99, 800)
    y = (rng.uniform(size=800) < p**1.3).astype(int)
    df = spark.createDataFrame(
        [(int(t), float(q)) for t, q in zip(y, p)], "y int, p double"
    )
    _close(sk_spark.brier_score(df, proba="p", label="y"), brier_score(y, p))
    _close(sk_spark.negative_log_likelihood(df, proba="p", label="y"), log_loss(y, p))


def test_transform_equals_predict_proba_on_the_collected_rows(spark):
    proba, y, weight, group = _data(n=600, seed=4)
    calibrator = TemperatureScaling(input="proba").fit(proba[:300], y[:300])
    df = _array_frame(spark, proba[300:], y[300:], weight[300:], group[300:], 2)
    out = sk_spark.transform(df, calibrator, "proba", "calibrated")
    assert out.columns == ["y", "proba", "w", "g", "calibrated"]
    rows = out.collect()
    raw = np.array([row["proba"] for row in rows])
    got = np.array([row["calibrated"] for row in rows])
    np.testing.assert_allclose(got, calibrator.predict_proba(raw), rtol=RTOL, atol=0)
    assert not np.allclose(got, raw, atol=1e-3)  # the calibrator changed them


def test_bad_input_says_what_was_expected(spark):
    proba, y, weight, group = _data(n=50, seed=5)
    df = _array_frame(spark, proba, y, weight, group, 1)
    with pytest.raises(ValueError, match="'nope' is not in the DataFrame"):
        sk_spark.calibration_metrics(df, proba="nope", label="y")
    with pytest.raises(ValueError, match="not numeric"):
        sk_spark.calibration_metrics(df, proba=["g"], label="y")
    with pytest.raises(ValueError, match="no mergeable state"):
        sk_spark.spark_metric(df, "smece", proba="proba", label="y")
    with pytest.raises(ValueError, match="0 rows"):
        sk_spark.calibration_metrics(df.limit(0), proba="proba", label="y")
    with pytest.raises(TypeError, match="pyspark.sql.DataFrame"):
        sk_spark.calibration_metrics(proba, proba="proba", label="y")
    with pytest.raises(ValueError, match="already has a column"):
        sk_spark.transform(
            df, TemperatureScaling(input="proba").fit(proba, y), "proba", "g"
        )


def test_the_docs_example_runs(spark, capsys):
    """doc/spark.rst's example, in this module's session (getOrCreate)."""
    import re
    import textwrap
    from pathlib import Path

    text = (Path(__file__).parents[2] / "doc" / "spark.rst").read_text()
    block = re.search(r"code-block:: python\n\n((?:    .*\n|\n)+)", text).group(1)
    namespace = {}
    exec(compile(textwrap.dedent(block), "doc/spark.rst", "exec"), namespace)
    assert set(namespace["per_region"]) == {"eu", "us"}
    before, after = namespace["metrics"]["ECE"], namespace["after"]["ECE"]
    assert after < before  # the labels follow sharper probabilities
