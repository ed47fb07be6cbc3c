"""Metrics of a Spark DataFrame: per-partition states merged on the driver.

Each partition fills one mergeable state per metric (and per group)
(:func:`skcal.metrics.metric_state`), ships it pickled (its size depends on
the bins and classes, never on the rows) and the driver merges them. The
states' sums are float64, so the result equals the in-memory metric up to
summation order. Equal-mass bins take a second pass on the edges the first
pass's merged sketch gives, as on Dask.
"""

from __future__ import annotations

import functools
import inspect
import pickle
import zlib
from numbers import Integral

from ._frame import batches, check_frame, row_arrays

__all__ = ["calibration_metrics", "spark_metric"]

#: the rows of :func:`skcal.metrics.calibration_report` that merge exactly
REPORT_METRICS = ("accuracy", "NLL", "Brier", "ECE", "cwECE")
#: rows per numpy chunk on an executor
BATCH_SIZE = 8192


class _Accuracy:
    """Accuracy of the argmax from a one-bin top-label state (its weighted
    sum of correct predictions over its weight)."""

    def __init__(self, labels):
        from ..metrics import metric_state

        self.state = metric_state("binned_statistics", n_bins=1, labels=labels)
        self.n_passes = 1

    def update(self, y_true, y_proba, sample_weight=None):
        self.state.update(y_true, y_proba, sample_weight)
        return self

    def merge(self, other):
        self.state.merge(other.state)
        return self

    def copy(self):
        import copy

        return copy.deepcopy(self)

    def compute(self):
        stats = self.state.compute()
        return float((stats.weight @ stats.mean_target) / stats.weight.sum())


def _template(name, n_bins, labels, params):
    """The empty state of one metric (``"accuracy"`` or any metric name)."""
    from .. import metrics
    from ..metrics import metric_state
    from ..metrics._names import find_metric

    if isinstance(name, str) and name.lower() == "accuracy":
        return _Accuracy(labels)
    key = name if isinstance(name, str) else getattr(name, "__name__", "")
    entry = find_metric(key)
    function = getattr(metrics, entry.function if entry else key, None)
    takes = inspect.signature(function).parameters if callable(function) else {}
    given = {"labels": labels, **params}
    if n_bins is not None and "n_bins" in takes and "n_bins" not in params:
        given["n_bins"] = n_bins
    return metric_state(name, **given)


def _partition_states(rows, *, layout, start, batch_size):
    """One partition's states: ``{group: [state, ...]}``, pickled, compressed.

    ``start`` maps a group to its empty states (pass 2: its own edges), or
    holds them under ``None`` for every group (pass 1).
    """
    states = {}
    for batch in batches(rows, batch_size):
        arrays = row_arrays(batch, layout)
        groups = arrays["group"]
        if groups is None:
            parts = {None: slice(None)}
        else:
            parts = {}
            for i, key in enumerate(groups):
                parts.setdefault(key, []).append(i)
        for key, rows_of in parts.items():
            if key not in states:
                empty = start[key] if key in start else start[None]
                states[key] = [state.copy() for state in empty]
            weight = arrays["weight"]
            for state in states[key]:
                state.update(
                    arrays["label"][rows_of],
                    arrays["proba"][rows_of],
                    None if weight is None else weight[rows_of],
                )
    # level 1: the sketches of equal-mass bins are mostly empty buckets
    yield zlib.compress(pickle.dumps(states, protocol=pickle.HIGHEST_PROTOCOL), 1)


def _reduce(rdd, layout, start, batch_size) -> dict:
    """Run one pass; the merged states per group."""
    work = functools.partial(
        _partition_states, layout=layout, start=start, batch_size=batch_size
    )
    merged = {}
    for blob in rdd.mapPartitions(work).collect():
        for key, states in pickle.loads(zlib.decompress(blob)).items():
            if key not in merged:
                merged[key] = states
            else:
                for mine, theirs in zip(merged[key], states):
                    mine.merge(theirs)
    return merged


def _second_pass(rdd, layout, merged, batch_size) -> None:
    """Equal-mass bins: freeze each group's edges, bin the rows again."""
    slots = [i for i, s in enumerate(next(iter(merged.values()))) if s.n_passes == 2]
    if not slots:
        return
    start = {}
    for key, states in merged.items():
        start[key] = []
        for i in slots:
            states[i].next_pass()
            states[i].sketch_ = None  # the edges are frozen; no need to ship it
            start[key].append(states[i])
    again = _reduce(rdd, layout, start, batch_size)
    for key, states in again.items():
        for i, state in zip(slots, states):
            merged[key][i] = state


def _labels(df, label, labels):
    """``labels``, or the sorted distinct labels of a non-integer column."""
    from pyspark.sql.types import IntegralType

    if labels is not None:
        return labels
    if isinstance(df.schema[label].dataType, IntegralType):
        return None
    return sorted(row[0] for row in df.select(label).distinct().collect())


def _sorted_keys(merged):
    try:
        return sorted(merged)
    except TypeError:  # mixed types (None among strings): as found
        return list(merged)


def _run(df, templates, proba, label, weight, group, batch_size) -> dict:
    """``{group: [value of each template]}`` (group None without one)."""
    if not isinstance(batch_size, Integral) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}.")
    layout = check_frame(df, proba, label, weight, group)
    rdd = df.select(*layout.columns).rdd
    merged = _reduce(rdd, layout, {None: templates}, int(batch_size))
    if not merged:
        raise ValueError("Found 0 rows in the DataFrame; metrics need at least one.")
    _second_pass(rdd, layout, merged, int(batch_size))
    return {key: [s.compute() for s in merged[key]] for key in _sorted_keys(merged)}


def spark_metric(
    df,
    metric,
    *,
    proba,
    label,
    weight=None,
    group=None,
    batch_size=BATCH_SIZE,
    **params,
):
    """One metric of the rows of a Spark DataFrame, where they live.

    Each partition fills the metric's mergeable state
    (:func:`skcal.metrics.metric_state`), which travels pickled to the driver
    and is merged there; the result equals the :mod:`skcal.metrics`
    function on the collected rows up to float64 summation order (1e-12).

    Parameters
    ----------
    df : pyspark.sql.DataFrame
        The predictions.
    metric : str or callable
        A mergeable metric (:func:`skcal.metrics.mergeable_metrics`): its
        function, name or alias (``"ece"``, ``"cwECE"``, ``"nll"``), or
        ``"accuracy"``.
    proba : str or list of str
        One ``array<double>`` column of probabilities, or one numeric column
        per class (in the class order), or one numeric column of a binary
        task's positive-class probability.
    label : str
        The label column. Labels that are not integers are mapped to
        columns in sorted order (read by one ``distinct()`` job) unless
        ``labels`` is given.
    weight : str, optional
        A numeric column of sample weights.
    group : str, optional
        A column to compute the metric per value of.
    batch_size : int, default=8192
        Rows per numpy chunk on the executors.
    **params
        The metric's parameters (``n_bins``, ``strategy``, ``norm``,
        ``labels``, ...).

    Returns
    -------
    float, or dict
        The metric; with ``group``, a dict from each group value (sorted) to it.

    See Also
    --------
    calibration_metrics : several metrics in one pass over the rows.
    """
    check_frame(df, proba, label, weight, group)  # before any Spark job
    labels = _labels(df, label, params.pop("labels", None))
    template = _template(metric, None, labels, params)
    values = _run(df, [template], proba, label, weight, group, batch_size)
    if group is None:
        return values[None][0]
    return {key: value[0] for key, value in values.items()}


def calibration_metrics(
    df,
    *,
    proba,
    label,
    metrics=REPORT_METRICS,
    weight=None,
    group=None,
    n_bins=15,
    labels=None,
    batch_size=BATCH_SIZE,
):
    """Several metrics of a Spark DataFrame in one pass over its rows.

    The default metrics are those of :func:`skcal.metrics.calibration_report`
    that merge exactly: accuracy, NLL, Brier, top-label ECE and classwise
    ECE (its ECCE and smECE sort or smooth all scores and have no
    fixed-size state; its bootstrap intervals resample rows). Each value
    equals the :mod:`skcal.metrics` function on the collected rows (the
    report's estimate) up to float64 summation order.

    Parameters
    ----------
    df, proba, label, weight, group, batch_size
        As for :func:`spark_metric`.
    metrics : sequence of str, default=("accuracy", "NLL", "Brier", "ECE", "cwECE")
        Mergeable metric names or aliases, or ``"accuracy"``.
    n_bins : int, default=15
        Bins of the binned metrics (equal-width, as the report's).
    labels : array-like, optional
        Every label in column order (see :func:`spark_metric`).

    Returns
    -------
    dict
        ``{metric: value}`` in the order of ``metrics``; with ``group``,
        ``{group value: {metric: value}}``.

    Examples
    --------
    >>> from skcal.spark import calibration_metrics
    >>> calibration_metrics(df, proba="proba", label="y")  # doctest: +SKIP
    {'accuracy': 0.71, 'NLL': 0.79, 'Brier': 0.39, 'ECE': 0.04, 'cwECE': 0.02}
    """
    names = list(metrics)
    if not names:
        raise ValueError("metrics is empty: name at least one metric.")
    check_frame(df, proba, label, weight, group)  # before any Spark job
    labels = _labels(df, label, labels)
    templates = [_template(name, n_bins, labels, {}) for name in names]
    values = _run(df, templates, proba, label, weight, group, batch_size)
    rows = {key: dict(zip(names, value)) for key, value in values.items()}
    return rows[None] if group is None else rows
