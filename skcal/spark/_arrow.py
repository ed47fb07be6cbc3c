"""A fitted calibrator over Arrow batches: a pandas UDF, a ``mapInArrow`` pass.

Both turn a batch of score columns into one float64 matrix (float32 scores
are widened, as the collected rows would be), check its width against the
calibrator's ``n_features_in_`` and call ``predict_proba`` on it. pyarrow,
pandas and pyspark are imported only inside the functions that need them.
"""

import functools
import importlib.util

import numpy as np

__all__ = ["arrow_available", "arrow_partition", "calibrate_udf"]

_RETURN_TYPES = ("array<double>", "array<float>", "double")
_INPUTS = ("array", "columns")


def arrow_available() -> bool:
    """Whether pyarrow can be imported (the Arrow path of :func:`transform`)."""
    return importlib.util.find_spec("pyarrow") is not None


def check_calibrator(calibrator) -> None:
    """A fitted estimator with ``predict_proba``, or a clear error."""
    from sklearn.utils.validation import check_is_fitted

    if not hasattr(calibrator, "predict_proba"):
        raise TypeError(
            f"calibrator must be a fitted estimator with predict_proba; got "
            f"{type(calibrator).__name__}."
        )
    check_is_fitted(calibrator)


def check_width(width: int, expected, where: str) -> None:
    """The number of scores per row against the calibrator's input width."""
    if expected is not None and width != expected:
        raise ValueError(
            f"{where} {width} score(s) per row, but the calibrator was fitted on "
            f"{expected} (n_features_in_): pass one score per class (or feature) "
            "in the order of the calibrator's classes_."
        )


def _no_nulls(n_null: int) -> None:
    if n_null:
        raise ValueError(
            f"The score column(s) hold {n_null} null value(s); calibrate rows "
            "with complete scores (filter or fill the nulls first)."
        )


def _as_float(values: np.ndarray) -> np.ndarray:
    try:
        return np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(
            f"The score column(s) must hold numbers; got {values.dtype} ({exc})."
        ) from None


def _list_matrix(column) -> np.ndarray:
    """An Arrow list array of equal-length numeric rows as a float64 matrix."""
    import pyarrow.compute as pc

    _no_nulls(column.null_count)
    n = len(column)
    lengths = pc.list_value_length(column).to_numpy(zero_copy_only=False)
    width = int(lengths[0]) if n else 0
    if n and (lengths != width).any():
        raise ValueError(
            "The score arrays have different lengths "
            f"({sorted(set(lengths.tolist()))[:5]}); every row needs one score "
            "per class."
        )
    values = column.flatten()  # honours the offsets of a sliced batch
    _no_nulls(values.null_count)
    return _as_float(values.to_numpy(zero_copy_only=False)).reshape(n, width)


def _predict(calibrator, scores: np.ndarray, expected, where: str) -> np.ndarray:
    if not len(scores):  # an empty partition
        return np.empty((0, 0))
    check_width(scores.shape[1], expected, where)
    return np.asarray(calibrator.predict_proba(scores), dtype=np.float64)


def _arrow_batch(batch, *, index, array, calibrator, expected, name):
    """``batch`` with a list<double> column of calibrated probabilities."""
    import pyarrow as pa

    columns = [batch.column(i) for i in index]
    if array:
        scores = _list_matrix(columns[0])
    else:
        for column in columns:
            _no_nulls(column.null_count)
        parts = [_as_float(c.to_numpy(zero_copy_only=False)) for c in columns]
        scores = np.stack(parts, axis=1) if parts[0].size else np.empty((0, 0))
        scores = scores.reshape(batch.num_rows, len(columns))
    where = "The score array column has" if array else "The input columns give"
    proba = _predict(calibrator, scores, expected, where)
    width = proba.shape[1] if proba.ndim == 2 else 0
    offsets = pa.array(np.arange(len(proba) + 1, dtype=np.int32) * width)
    out = pa.ListArray.from_arrays(offsets, pa.array(proba.ravel(), pa.float64()))
    return pa.RecordBatch.from_arrays(
        [*batch.columns, out], names=[*batch.schema.names, name]
    )


def arrow_partition(batches, *, model, batch_size, **options):
    """``mapInArrow``'s function: each batch, ``batch_size`` rows at a time."""
    calibrator = model.value  # a broadcast variable
    expected = getattr(calibrator, "n_features_in_", None)
    for batch in batches:
        for start in range(0, max(batch.num_rows, 1), batch_size):
            piece = batch.slice(start, batch_size)
            yield _arrow_batch(
                piece, calibrator=calibrator, expected=expected, **options
            )


def _series_matrix(series) -> np.ndarray:
    """A pandas Series of equal-length numeric arrays as a float64 matrix."""
    if series.isna().any():
        _no_nulls(int(series.isna().sum()))
    if not len(series):
        return np.empty((0, 0))
    try:
        return _as_float(np.stack(series.to_numpy()))
    except ValueError as exc:
        if "same shape" not in str(exc):
            raise
        lengths = sorted({len(row) for row in series})[:5]
        raise ValueError(
            f"The score arrays have different lengths ({lengths}); every row "
            "needs one score per class."
        ) from None


def _columns_matrix(columns) -> np.ndarray:
    for column in columns:
        _no_nulls(int(column.isna().sum()))
    return _as_float(np.stack([c.to_numpy() for c in columns], axis=1))


def _apply(scores: np.ndarray, *, calibrator, expected, where, kind):
    """The pandas Series the UDF returns for a batch's score matrix."""
    import pandas as pd

    proba = _predict(calibrator, scores, expected, where)
    if kind == "double":
        return pd.Series(proba[:, 1] if len(proba) else [], dtype=np.float64)
    if kind == "array<float>":
        proba = proba.astype(np.float32)
    return pd.Series(list(proba), dtype=object)


def _check_udf_options(calibrator, input, return_type) -> str:
    check_calibrator(calibrator)
    if input not in _INPUTS:
        raise ValueError(
            f"input must be 'array' (one array column of scores) or 'columns' "
            f"(one numeric column per class); got {input!r}."
        )
    kind = return_type.replace(" ", "").lower() if isinstance(return_type, str) else ""
    if kind not in _RETURN_TYPES:
        raise ValueError(
            f"return_type must be one of {list(_RETURN_TYPES)}; got {return_type!r}."
        )
    classes = getattr(calibrator, "classes_", None)
    if kind == "double" and (classes is None or len(classes) != 2):
        raise ValueError(
            "return_type='double' returns the positive-class probability of a "
            f"binary calibrator; this one has classes {classes!r}. Use "
            "'array<double>' for several classes."
        )
    return kind


def calibrate_udf(calibrator, *, input="array", return_type="array<double>"):
    """A pandas UDF applying a fitted calibrator's ``predict_proba``.

    The UDF takes the scores of a Spark DataFrame, one ``array`` column or
    one numeric column per class (in the order of ``calibrator.classes_``,
    whatever the DataFrame's column order), and returns the calibrated
    probabilities, computed one Arrow batch at a time (the session's
    ``spark.sql.execution.arrow.maxRecordsPerBatch`` rows) on float64
    scores: they equal ``calibrator.predict_proba`` of the collected rows.
    Needs pyarrow and pandas on the executors; it needs no SparkContext, so
    a Spark Connect session can run it too (the tests use a classic one).

    The calibrator travels pickled inside the UDF, with each task: fine for
    a fitted calibrator (a few kB); for a large model (a
    :class:`~skcal.CalibratedClassifier` around a big forest) prefer
    :func:`transform`, which broadcasts it once per executor.

    Parameters
    ----------
    calibrator : fitted estimator with ``predict_proba``
    input : {"array", "columns"}, default="array"
        ``"array"``: the UDF takes one column of numeric arrays (float or
        double), one score per class. ``"columns"``: it takes one numeric
        column per class, ``udf("p0", "p1", "p2")``.
    return_type : {"array<double>", "array<float>", "double"}, default="array<double>"
        The calibrated probabilities per row; ``"double"``: the positive
        class's of a binary calibrator.

    Returns
    -------
    pandas UDF
        Call it on column names or Columns:
        ``df.withColumn("calibrated", udf("scores"))``. A row of another
        width than the calibrator's ``n_features_in_``, a null or a ragged
        array fails the query with a ``ValueError`` naming the fix.

    Examples
    --------
    >>> from skcal.spark import calibrate_udf
    >>> udf = calibrate_udf(calibrator)  # doctest: +SKIP
    >>> df.withColumn("calibrated", udf("scores"))  # doctest: +SKIP
    """
    import pandas as pd
    from pyspark.sql.functions import pandas_udf

    kind = _check_udf_options(calibrator, input, return_type)
    apply = functools.partial(
        _apply,
        calibrator=calibrator,
        expected=getattr(calibrator, "n_features_in_", None),
        kind=kind,
    )
    if input == "array":

        def calibrated(scores):
            return apply(_series_matrix(scores), where="The score array column has")

        calibrated.__annotations__ = {"scores": pd.Series, "return": pd.Series}
    else:

        def calibrated(*columns):
            return apply(_columns_matrix(columns), where="The UDF was given")

        calibrated.__annotations__ = {"columns": pd.Series, "return": pd.Series}
    calibrated.__name__ = calibrated.__qualname__ = "calibrate_udf"
    return pandas_udf(calibrated, returnType=kind)
