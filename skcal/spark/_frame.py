"""Reading a Spark DataFrame's rows as numpy chunks (no pyarrow needed).

The columns are checked on the driver against the DataFrame's schema; the
executors turn each partition's rows into numpy arrays ``batch_size`` rows
at a time. pyspark is imported only inside the functions that need it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["Layout", "batches", "check_frame", "row_arrays"]


@dataclass(frozen=True)
class Layout:
    """Where each input sits in the selected rows.

    ``columns``: the selected column names, in order; the label (when any)
    first, then the probability column(s), the weight, the group.
    ``array``: whether the probabilities are one array column.
    """

    columns: tuple
    n_proba: int
    array: bool
    has_label: bool
    has_weight: bool
    has_group: bool


def _field_types(df) -> dict:
    schema = getattr(df, "schema", None)
    if schema is None or not hasattr(df, "select"):
        raise TypeError(
            f"Expected a pyspark.sql.DataFrame, got {type(df).__name__}. "
            "In-memory arrays go to the skcal.metrics functions directly."
        )
    return {field.name: field.dataType for field in schema.fields}


def _numeric(data_type) -> bool:
    from pyspark.sql.types import NumericType

    return isinstance(data_type, NumericType)


def _need(types: dict, name, role: str) -> None:
    if not isinstance(name, str) or name not in types:
        raise ValueError(
            f"The {role} column {name!r} is not in the DataFrame; its columns "
            f"are {sorted(types)}. Pass the name of a column."
        )


def _proba_columns(types: dict, proba) -> tuple:
    """``(names, array)`` of the probability input, checked."""
    from pyspark.sql.types import ArrayType

    names = [proba] if isinstance(proba, str) else list(proba)
    if not names:
        raise ValueError("proba is empty: pass a column name or a list of them.")
    for name in names:
        _need(types, name, "probability")
    first = types[names[0]]
    if len(names) == 1 and isinstance(first, ArrayType):
        if not _numeric(first.elementType):
            raise ValueError(
                f"The probability column {names[0]!r} holds arrays of "
                f"{first.elementType.simpleString()}; expected arrays of numbers."
            )
        return tuple(names), True
    wrong = [n for n in names if not _numeric(types[n])]
    if wrong:
        raise ValueError(
            f"The probability column(s) {wrong} are not numeric "
            f"({[types[n].simpleString() for n in wrong]}): pass one numeric "
            "column per class, or one array<double> column."
        )
    return tuple(names), False


def check_frame(df, proba, label=None, weight=None, group=None) -> Layout:
    """Check the named columns of ``df``; the layout of the selected rows."""
    types = _field_types(df)
    names, array = _proba_columns(types, proba)
    columns = []
    if label is not None:
        _need(types, label, "label")
        columns.append(label)
    columns += names
    if weight is not None:
        _need(types, weight, "weight")
        if not _numeric(types[weight]):
            raise ValueError(
                f"The weight column {weight!r} is {types[weight].simpleString()}; "
                "expected a numeric column."
            )
        columns.append(weight)
    if group is not None:
        _need(types, group, "group")
        columns.append(group)
    return Layout(
        tuple(columns),
        len(names),
        array,
        label is not None,
        weight is not None,
        group is not None,
    )


def batches(rows, batch_size: int):
    """Lists of up to ``batch_size`` rows of an iterator."""
    batch = []
    for row in rows:
        batch.append(row)
        if len(batch) == batch_size:
            yield batch
            batch = []
    if batch:
        yield batch


def _proba_array(rows, start: int, layout: Layout) -> np.ndarray:
    try:
        if layout.array:
            proba = np.array([row[start] for row in rows], dtype=np.float64)
        else:
            stop = start + layout.n_proba
            proba = np.array([row[start:stop] for row in rows], dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(
            "The probability column(s) must hold numbers, or arrays of one "
            f"length, with no nulls ({exc})."
        ) from None
    if proba.ndim == 2 and proba.shape[1] == 1:
        proba = proba[:, 0]  # one column: the positive class of a binary task
    return proba


def row_arrays(rows, layout: Layout) -> dict:
    """The numpy arrays of a batch of selected rows: ``label``, ``proba``,
    ``weight`` (None when absent) and ``group`` (a list, or None)."""
    k = 0
    out = {"label": None, "weight": None, "group": None}
    if layout.has_label:
        out["label"] = np.asarray([row[0] for row in rows])
        k = 1
    out["proba"] = _proba_array(rows, k, layout)
    k += 1 if layout.array else layout.n_proba
    if layout.has_weight:
        out["weight"] = np.array([row[k] for row in rows], dtype=np.float64)
        k += 1
    if layout.has_group:
        out["group"] = [row[k] for row in rows]
    return out
