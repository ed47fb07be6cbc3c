"""Dask support: metrics by tree reduction of chunk states, lazy predictions.

Dask is optional (``pip install "skcal[dask]"``). Dask collections are
recognised by their type's module, so nothing here imports dask unless the
user passed one.
"""

from __future__ import annotations

import functools

import numpy as np

__all__ = ["is_dask_collection", "dask_metric", "lazy_on_dask"]

#: Chunk states merged per task of the tree reduction.
_FAN_IN = 8


def is_dask_collection(x) -> bool:
    """Whether ``x`` is a Dask collection (array, dataframe, ...)."""
    return type(x).__module__.partition(".")[0] == "dask"


def _whole_rows(x):
    """A dask array of ``x`` with known row chunks, each holding whole rows."""
    if not hasattr(x, "chunks"):  # a dask dataframe or series
        x = x.to_dask_array(lengths=True)
    if any(np.isnan(c) for c in x.chunks[0]):
        x = x.compute_chunk_sizes()
    return x.rechunk({1: -1}) if x.ndim == 2 else x


def _rows(x, row_chunks):
    """``x`` (dask, numpy or None) as a dask array with these row chunks."""
    import dask.array as da

    if x is None:
        return None
    x = np.asarray(x) if not is_dask_collection(x) else _whole_rows(x)
    if x.shape[0] != sum(row_chunks):
        raise ValueError(
            f"Inputs of different lengths: {x.shape[0]} and {sum(row_chunks)} "
            "rows; y_true, y_proba and sample_weight must describe the same "
            "samples."
        )
    if isinstance(x, np.ndarray):
        return da.from_array(x, chunks=(row_chunks,) + (-1,) * (x.ndim - 1))
    return x if x.chunks[0] == tuple(row_chunks) else x.rechunk({0: row_chunks})


def aligned_rows(*arrays):
    """The inputs as dask arrays with the row chunks of the first Dask one.

    Returns the aligned arrays (None stays None) and the list of their
    blocks, one tuple of delayed objects per row chunk (None for a missing
    input).
    """
    lead = next(x for x in arrays if is_dask_collection(x))
    row_chunks = _whole_rows(lead).chunks[0]
    aligned = [_rows(x, row_chunks) for x in arrays]
    columns = [
        [None] * len(row_chunks) if x is None else x.to_delayed().ravel()
        for x in aligned
    ]
    return aligned, list(zip(*columns))


def _chunk_state(template, y_true, y_proba, sample_weight):
    return template.copy().update(y_true, y_proba, sample_weight)


def tree_reduce(parts):
    """Merge delayed states ``_FAN_IN`` at a time (``a.merge(b)``, which adds
    ``b`` into ``a`` and returns it) and compute the result."""
    from dask import delayed

    def merge_many(*states):
        head = states[0]
        for state in states[1:]:
            head = head.merge(state)
        return head

    level = list(parts)
    while len(level) > 1:
        level = [
            delayed(merge_many)(*level[i : i + _FAN_IN])
            for i in range(0, len(level), _FAN_IN)
        ]
    return level[0].compute()


def _reduce(template, blocks):
    """Tree reduction of the chunk states of ``blocks`` (delayed objects).

    The template enters the graph once (one key), not once per chunk.
    """
    from dask import delayed

    template = delayed(template, pure=True)
    return tree_reduce(delayed(_chunk_state)(template, *block) for block in blocks)


def dask_metric(name: str, y_true, y_proba, sample_weight=None, **params):
    """A metric of Dask inputs, by tree reduction of per-chunk states.

    ``y_proba`` is rechunked to whole rows, ``y_true`` and
    ``sample_weight`` to the same row chunks; each chunk becomes a state
    (:func:`~skcal.metrics.metric_state`) and the states are merged
    ``_FAN_IN`` at a time, on whatever scheduler Dask is using (a
    ``distributed.Client`` if one is active). Nothing is gathered but the
    states. Equal-mass bins take two such reductions.
    """
    from ..metrics._state import metric_state

    template = metric_state(name, **params)  # errors before any work
    # the row chunks of the first Dask input (y_proba's when it is one)
    _, blocks = aligned_rows(y_proba, y_true, sample_weight)
    blocks = [(y, p, w) for p, y, w in blocks]
    state = _reduce(template, blocks)
    if state.n_passes == 2:  # equal-mass bins: the edges, then the bins
        state.next_pass()
        state.sketch_ = None  # the edges are frozen; no need to ship it
        state = _reduce(state, blocks)
    return state.compute()


def _local_lce(*args, **kwargs):
    from ..metrics._local_rff import dask_local_errors

    return dask_local_errors(*args, **kwargs)[0]


def _local_mlce(*args, **kwargs):
    from ..metrics._local_rff import dask_local_errors

    return dask_local_errors(*args, **kwargs)[1]


def _local_both(*args, **kwargs):
    from ..metrics._local import LocalCalibrationErrors
    from ..metrics._local_rff import dask_local_errors

    lce, mlce = dask_local_errors(*args, **kwargs)
    return LocalCalibrationErrors(lce=lce, mlce=mlce, anchor_errors=None)


#: the local metrics that Dask inputs reach through random features
_LOCAL = {
    "local_calibration_error": _local_lce,
    "max_local_calibration_error": _local_mlce,
    "local_calibration_errors": _local_both,
}


def dask_dispatch(name: str):
    """Route a metric function's Dask inputs to :func:`dask_metric`.

    Metrics with no mergeable state refuse Dask inputs with the reason,
    rather than gather them into one process.
    """

    def decorate(func):
        @functools.wraps(func)
        def wrapper(y_true, y_proba, *args, **kwargs):
            inputs = (y_true, y_proba, *args, *kwargs.values())
            if not any(is_dask_collection(x) for x in inputs):
                return func(y_true, y_proba, *args, **kwargs)
            if name in _LOCAL:
                return _LOCAL[name](y_true, y_proba, *args, **kwargs)
            from ..metrics._state import metric_state

            metric_state(name)  # a metric without a mergeable state says why
            return dask_metric(name, y_true, y_proba, *args, **kwargs)

        return wrapper

    return decorate


def lazy_on_dask(kind: str):
    """Make a prediction method lazy on Dask arrays (``map_blocks`` by rows).

    ``kind`` is ``"proba"`` (one column per class, float64) or ``"labels"``
    (one label per row). The estimator is checked before anything is
    scheduled; each block of whole rows is then predicted independently,
    which is what ``dask_ml.wrappers.ParallelPostFit`` does. An empty block
    (ragged chunks after a filter) gives an empty block of the same kind,
    without calling the method: estimators refuse 0 rows, as sklearn's do.
    """

    def decorate(method):
        @functools.wraps(method)
        def wrapper(self, X, *args, **kwargs):
            if not is_dask_collection(X):
                return method(self, X, *args, **kwargs)
            from sklearn.utils.validation import check_is_fitted

            check_is_fitted(self)
            if X.ndim == 2:
                X = X.rechunk({1: -1})

            classes = self.classes_
            empty = (
                np.empty((0,), dtype=classes.dtype)
                if kind == "labels"
                else np.empty((0, len(classes)), dtype=np.float64)
            )

            def block(x):
                if x.shape[0] == 0:
                    return empty.copy()
                return method(self, x, *args, **kwargs)

            if kind == "labels":
                return X.map_blocks(
                    block,
                    drop_axis=list(range(1, X.ndim)),
                    dtype=classes.dtype,
                    meta=np.empty((0,), dtype=classes.dtype),
                )
            return X.map_blocks(
                block,
                chunks=(X.chunks[0], (len(classes),)),
                dtype=np.float64,
                meta=np.empty((0, 0), dtype=np.float64),
            )

        return wrapper

    return decorate
