"""A fitted calibrator's probabilities as a new column of a Spark DataFrame."""

from __future__ import annotations

import functools
from numbers import Integral

import numpy as np

from ._arrow import arrow_available, arrow_partition, check_calibrator, check_width
from ._frame import batches, check_frame, row_arrays

_ENGINES = ("auto", "arrow", "rdd")

__all__ = ["transform"]


def _predict_partition(rows, *, index, layout, calibrator, batch_size):
    """The partition's rows, each with its calibrated probabilities appended."""
    model = calibrator.value  # a broadcast variable
    for batch in batches(rows, batch_size):
        picked = [tuple(row[i] for i in index) for row in batch]
        # 2-D, one column per class (or feature), as predict_proba takes it
        proba = row_arrays(picked, layout)["proba"].reshape(len(picked), -1)
        calibrated = np.asarray(model.predict_proba(proba), dtype=np.float64)
        for row, out in zip(batch, calibrated.tolist()):
            yield (*row, out)


def _check(df, calibrator, input_cols, output_col, batch_size):
    """The layout of ``input_cols``, once the other arguments are checked."""
    check_calibrator(calibrator)
    if not isinstance(batch_size, Integral) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}.")
    layout = check_frame(df, input_cols)
    if output_col in df.columns:
        raise ValueError(
            f"The DataFrame already has a column {output_col!r}; pick another "
            "output_col (or drop that column first)."
        )
    if not layout.array:
        expected = getattr(calibrator, "n_features_in_", None)
        check_width(layout.n_proba, expected, "input_cols names")
    return layout


def _engine(engine) -> str:
    if engine not in _ENGINES:
        raise ValueError(f"engine must be one of {list(_ENGINES)}; got {engine!r}.")
    if engine == "auto":
        return "arrow" if arrow_available() else "rdd"
    if engine == "arrow" and not arrow_available():
        raise ImportError(
            "engine='arrow' needs pyarrow: pip install pyarrow (or engine='rdd')."
        )
    return engine


def transform(
    df,
    calibrator,
    input_cols,
    output_col="calibrated_proba",
    *,
    batch_size=8192,
    engine="auto",
):
    """``df`` with a column of ``calibrator.predict_proba`` of its rows.

    The fitted calibrator is broadcast to the executors once; each partition
    is predicted ``batch_size`` rows at a time on float64 scores, so the
    values equal ``calibrator.predict_proba`` on the collected rows (1e-12).
    Rows keep their order and their other columns. With pyarrow installed
    the partitions travel as Arrow batches (``DataFrame.mapInArrow``);
    without it, as pickled rows over the RDD API (several times slower).
    Both need a classic SparkSession, not Spark Connect (there, use
    :func:`calibrate_udf`).

    Parameters
    ----------
    df : pyspark.sql.DataFrame
    calibrator : fitted estimator with ``predict_proba``
        A skcal calibrator (or any fitted estimator, e.g. a
        :class:`~skcal.CalibratedClassifier` on feature columns).
    input_cols : str or list of str
        What ``predict_proba`` takes: one array column of numbers, or one
        numeric column per class (or feature), in the calibrator's order.
    output_col : str, default="calibrated_proba"
        The new ``array<double>`` column.
    batch_size : int, default=8192
        Rows per ``predict_proba`` call on an executor.
    engine : {"auto", "arrow", "rdd"}, default="auto"
        ``"auto"``: Arrow when pyarrow can be imported, else the RDD API.

    Returns
    -------
    pyspark.sql.DataFrame

    Examples
    --------
    >>> from skcal.spark import transform
    >>> out = transform(df, calibrator, "proba", "calibrated")  # doctest: +SKIP
    """
    from pyspark.sql.types import ArrayType, DoubleType, StructField, StructType

    layout = _check(df, calibrator, input_cols, output_col, batch_size)
    names = df.columns
    index = [names.index(name) for name in layout.columns]
    spark = df.sparkSession
    model = spark.sparkContext.broadcast(calibrator)
    field = StructField(output_col, ArrayType(DoubleType(), False), False)
    schema = StructType([*df.schema.fields, field])
    if _engine(engine) == "arrow":
        work = functools.partial(
            arrow_partition,
            model=model,
            batch_size=int(batch_size),
            index=index,
            array=layout.array,
            name=output_col,
        )
        return df.mapInArrow(work, schema)
    work = functools.partial(
        _predict_partition,
        index=index,
        layout=layout,
        calibrator=model,
        batch_size=int(batch_size),
    )
    return spark.createDataFrame(df.rdd.mapPartitions(work), schema)
