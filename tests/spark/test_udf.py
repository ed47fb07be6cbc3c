"""Spark: a calibrator as a pandas UDF, and transform's Arrow path.

Every column is compared with ``calibrator.predict_proba`` of the collected
rows (their scores as Spark stores them: float32 columns widen exactly to
float64), to 1e-12.
"""

import numpy as np
import pytest
from sklearn.exceptions import NotFittedError

from skcal import IsotonicCalibrator, PlattCalibrator, VectorScaling
from skcal import spark as sk_spark

pytest.importorskip("pyarrow", reason="the Arrow path needs pyarrow")
pytest.importorskip("pandas", reason="pandas UDFs need pandas")

RTOL = 1e-12


def _data(n, n_classes, seed):
    rng = np.random.default_rng(seed)
    logits = rng.normal(size=(n, n_classes)) * 2.0
    proba = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    sharp = proba**1.5 / (proba**1.5).sum(axis=1, keepdims=True)
    y = np.array([rng.choice(n_classes, p=row) for row in sharp])
    return proba, y


def _with_empty_partitions(spark, rows, schema):
    """Rows in 2 partitions, then 2 empty ones (a union keeps them apart)."""
    sc = spark.sparkContext
    rdd = sc.parallelize(rows, 2).union(sc.parallelize([], 2))
    df = spark.createDataFrame(rdd, schema)
    assert df.rdd.getNumPartitions() == 4
    return df


def _column(rows, name):
    return np.array([row[name] for row in rows], dtype=np.float64)


def test_array_udf_and_transform_equal_predict_proba(spark):
    proba, y = _data(500, 4, seed=0)
    calibrator = VectorScaling(input="proba").fit(proba[:250], y[:250])
    rows = [(i, p.tolist(), p.tolist()) for i, p in enumerate(proba[250:])]
    schema = "i long, s32 array<float>, s64 array<double>"
    df = _with_empty_partitions(spark, rows, schema)
    udf = sk_spark.calibrate_udf(calibrator)
    frames = {
        "udf": df.withColumn("c32", udf("s32")).withColumn("c64", udf("s64")),
        "arrow": sk_spark.transform(df, calibrator, "s32", "c32", batch_size=37),
        "rdd": sk_spark.transform(df, calibrator, "s64", "c64", engine="rdd"),
    }
    for name, frame in frames.items():
        got = frame.collect()
        assert [row["i"] for row in got] == list(range(250)), name
        for bits in ("32", "64"):
            if f"c{bits}" not in frame.columns:
                continue
            scores = _column(got, f"s{bits}")
            if bits == "32":  # Spark stored them as float32
                np.testing.assert_array_equal(scores, proba[250:].astype(np.float32))
            want = calibrator.predict_proba(scores)
            got_c = _column(got, f"c{bits}")
            np.testing.assert_allclose(got_c, want, rtol=RTOL, atol=0)
            assert not np.allclose(want, scores, atol=1e-3)  # it changed them


def test_columns_in_class_order_not_frame_order(spark):
    proba, y = _data(400, 3, seed=1)
    names = np.array(["cat", "dog", "emu"])
    calibrator = IsotonicCalibrator(input="proba").fit(proba[:200], names[y[:200]])
    rows = [(float(p[2]), float(p[0]), float(p[1])) for p in proba[200:]]
    schema = "emu double, cat float, dog double"  # not the classes' order
    df = _with_empty_partitions(spark, rows, schema)
    udf = sk_spark.calibrate_udf(calibrator, input="columns")
    frames = [
        df.withColumn("c", udf("cat", "dog", "emu")),
        sk_spark.transform(df, calibrator, ["cat", "dog", "emu"], "c"),
    ]
    for frame in frames:
        got = frame.collect()
        scores = np.column_stack([_column(got, k) for k in names])
        want = calibrator.predict_proba(scores)
        np.testing.assert_allclose(_column(got, "c"), want, rtol=RTOL, atol=0)


def test_binary_positive_class_as_double(spark):
    rng = np.random.default_rng(2)
    p = rng.uniform(0.02, 0.98, 300)
    y = (rng.uniform(size=300) < p**2).astype(int)
    scores = np.column_stack([1 - p, p])
    calibrator = PlattCalibrator(input="proba").fit(scores, y)
    df = spark.createDataFrame([(s.tolist(),) for s in scores], "s array<double>")
    udf = sk_spark.calibrate_udf(calibrator, return_type="double")
    udf32 = sk_spark.calibrate_udf(calibrator, return_type="array<float>")
    got = df.withColumn("c", udf("s")).withColumn("c32", udf32("s")).collect()
    want = calibrator.predict_proba(_column(got, "s"))
    np.testing.assert_allclose(_column(got, "c"), want[:, 1], rtol=RTOL, atol=0)
    np.testing.assert_array_equal(_column(got, "c32"), want.astype(np.float32))


def test_bad_input_says_what_was_expected(spark):
    proba, y = _data(60, 3, seed=3)
    calibrator = VectorScaling(input="proba").fit(proba, y)
    with pytest.raises(NotFittedError):
        sk_spark.calibrate_udf(VectorScaling())
    with pytest.raises(TypeError, match="predict_proba"):
        sk_spark.calibrate_udf(object())
    with pytest.raises(ValueError, match="input must be 'array'"):
        sk_spark.calibrate_udf(calibrator, input="matrix")
    with pytest.raises(ValueError, match="binary calibrator"):
        sk_spark.calibrate_udf(calibrator, return_type="double")
    rows = [(p.tolist(), p.tolist(), float(p[0])) for p in proba]
    rows[7] = (proba[7].tolist(), proba[7, :2].tolist(), 0.5)
    df = spark.createDataFrame(rows, "s array<double>, ragged array<double>, a double")
    udf = sk_spark.calibrate_udf(calibrator)
    with pytest.raises(Exception, match="nope"):  # Spark's own analysis error
        df.withColumn("c", udf("nope")).collect()
    with pytest.raises(Exception, match="different lengths"):
        df.withColumn("c", udf("ragged")).collect()
    columns = sk_spark.calibrate_udf(calibrator, input="columns")
    with pytest.raises(Exception, match=r"1 score\(s\) per row.*fitted on 3"):
        df.withColumn("c", columns("a")).collect()
    with pytest.raises(Exception, match="different lengths"):
        sk_spark.transform(df, calibrator, "ragged", "c").collect()
    with pytest.raises(ValueError, match=r"2 score\(s\) per row.*fitted on 3"):
        sk_spark.transform(df, calibrator, ["a", "a"], "c")
    with pytest.raises(ValueError, match="engine must be one of"):
        sk_spark.transform(df, calibrator, "s", "c", engine="pandas")


def test_the_docs_udf_example_runs(spark, capsys):
    """doc/spark.rst's pandas UDF example, in this session (getOrCreate)."""
    import re
    import textwrap
    from pathlib import Path

    text = (Path(__file__).parents[2] / "doc" / "spark.rst").read_text()
    blocks = re.findall(r"code-block:: python\n\n((?:    .*\n|\n)+)", text)
    block = next(b for b in blocks if "calibrate_udf(" in b)
    namespace = {}
    exec(compile(textwrap.dedent(block), "doc/spark.rst", "exec"), namespace)
    calibrator, proba = namespace["calibrator"], namespace["proba"]
    first = np.asarray(namespace["first"]["calibrated"])
    want = calibrator.predict_proba(proba[:1])[0]
    np.testing.assert_allclose(first, want, rtol=RTOL, atol=0)
