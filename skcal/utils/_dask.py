"""Dask support: aligned row chunks, tree reductions, lazy predictions.

The metrics' side (chunk states reduced over a Dask array) is in
:mod:`skcal.metrics._dask`. Dask is optional (``pip install
"skcal[dask]"``). Dask collections are recognised by their type's module, so
nothing here imports dask unless the user passed one.
"""

from __future__ import annotations

import functools

import numpy as np

__all__ = ["aligned_rows", "is_dask_collection", "lazy_on_dask", "tree_reduce"]

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


def lazy_on_dask(kind: str, rows: tuple = ()):
    """Make a prediction method lazy on Dask arrays (``map_blocks`` by rows).

    ``kind`` is ``"proba"`` (one column per class, float64) or ``"labels"``
    (one label per row). The estimator is checked before anything is
    scheduled; each block of whole rows is then predicted independently,
    which is what ``dask_ml.wrappers.ParallelPostFit`` does. An empty block
    (ragged chunks after a filter) gives an empty block of the same kind,
    without calling the method: estimators refuse 0 rows, as sklearn's do.
    ``rows`` names keyword arguments with one entry per row of ``X`` (such
    as ``groups``): given (not None), numpy or Dask, they are split along
    ``X``'s row blocks, each block's method call getting its own part.
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
            per_row = {k: kwargs.pop(k) for k in rows if kwargs.get(k) is not None}
            classes = self.classes_
            empty = (
                np.empty((0,), dtype=classes.dtype)
                if kind == "labels"
                else np.empty((0, len(classes)), dtype=np.float64)
            )

            def block(x, *parts):
                if x.shape[0] == 0:
                    return empty.copy()
                return method(self, x, *args, **kwargs, **dict(zip(per_row, parts)))

            if per_row:
                return _blockwise_rows(block, X, per_row.values(), kind, classes)
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


def _blockwise_rows(block, X, extras, kind, classes):
    """``block(x, *parts)`` over the row blocks of the 2-D ``X`` and of the
    1-D ``extras`` aligned to them (lengths checked here, before anything
    runs)."""
    import dask.array as da

    X = _whole_rows(X)
    parts = []
    for extra in extras:
        aligned = _rows(extra, X.chunks[0])
        parts += [aligned, "i"]
    if kind == "labels":
        return da.blockwise(
            block, "i", X, "ij", *parts, concatenate=True,
            dtype=classes.dtype, meta=np.empty((0,), dtype=classes.dtype),
        )  # fmt: skip
    return da.blockwise(
        block, "ik", X, "ij", *parts, concatenate=True,
        new_axes={"k": len(classes)}, dtype=np.float64,
        meta=np.empty((0, 0), dtype=np.float64),
    )  # fmt: skip
