"""A fitted calibrator's probabilities as a new column of a Spark DataFrame."""

from __future__ import annotations

import functools
from numbers import Integral

import numpy as np

from ._frame import batches, check_frame, row_arrays

__all__ = ["transform"]


def _predict_partition(rows, *, index, layout, calibrator, batch_size):
    """The partition's rows, each with its calibrated probabilities appended."""
    model = calibrator.value  # a broadcast variable
    for batch in batches(rows, batch_size):
        picked = [tuple(row[i] for i in index) for row in batch]
        proba = row_arrays(picked, layout)["proba"]
        calibrated = np.asarray(model.predict_proba(proba), dtype=np.float64)
        for row, out in zip(batch, calibrated.tolist()):
            yield (*row, out)


def _check(df, calibrator, input_cols, output_col, batch_size):
    """The layout of ``input_cols``, once the other arguments are checked."""
    from sklearn.utils.validation import check_is_fitted

    if not hasattr(calibrator, "predict_proba"):
        raise TypeError(
            f"calibrator must be a fitted estimator with predict_proba; got "
            f"{type(calibrator).__name__}."
        )
    check_is_fitted(calibrator)
    if not isinstance(batch_size, Integral) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}.")
    layout = check_frame(df, input_cols)
    if output_col in df.columns:
        raise ValueError(
            f"The DataFrame already has a column {output_col!r}; pick another "
            "output_col (or drop that column first)."
        )
    return layout


def transform(
    df, calibrator, input_cols, output_col="calibrated_proba", *, batch_size=8192
):
    """``df`` with a column of ``calibrator.predict_proba`` of its rows.

    The fitted calibrator is broadcast to the executors once; each partition
    is predicted ``batch_size`` rows at a time, so the values equal
    ``calibrator.predict_proba`` on the collected rows (1e-12). Rows keep
    their order and their other columns. It runs on pyspark's RDD API (no
    pyarrow needed), so it needs a classic SparkSession, not Spark Connect.

    Parameters
    ----------
    df : pyspark.sql.DataFrame
    calibrator : fitted estimator with ``predict_proba``
        A skcal calibrator (or any fitted estimator, e.g. a
        :class:`~skcal.CalibratedClassifier` on feature columns).
    input_cols : str or list of str
        What ``predict_proba`` takes: one ``array<double>`` column, one
        numeric column per class (or feature), or one numeric column of a
        binary task's positive-class probability.
    output_col : str, default="calibrated_proba"
        The new ``array<double>`` column.
    batch_size : int, default=8192
        Rows per ``predict_proba`` call on an executor.

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
    spark = df.sparkSession
    work = functools.partial(
        _predict_partition,
        index=[names.index(name) for name in layout.columns],
        layout=layout,
        calibrator=spark.sparkContext.broadcast(calibrator),
        batch_size=int(batch_size),
    )
    field = StructField(output_col, ArrayType(DoubleType(), False), False)
    schema = StructType([*df.schema.fields, field])
    return spark.createDataFrame(df.rdd.mapPartitions(work), schema)
