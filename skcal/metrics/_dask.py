"""Metrics of Dask inputs: per-chunk states merged by a tree reduction.

The metric functions route Dask inputs here (:func:`dask_dispatch`); the
row alignment and the reduction itself are :mod:`skcal.utils._dask`'s.
"""

from __future__ import annotations

import functools

import numpy as np

from .._torch._threads import torch_threads
from ..utils._dask import aligned_rows, is_dask_collection, tree_reduce

__all__ = ["dask_dispatch", "dask_metric"]


def _chunk_state(template, y_true, y_proba, sample_weight):
    return template.copy().update(y_true, y_proba, sample_weight)


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
    eight at a time, on whatever scheduler Dask is using (a
    ``distributed.Client`` if one is active). Nothing is gathered but the
    states. Equal-mass bins take two such reductions.
    """
    from ._state import metric_state

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
    from ._local_rff import dask_local_errors

    return dask_local_errors(*args, **kwargs)[0]


def _local_mlce(*args, **kwargs):
    from ._local_rff import dask_local_errors

    return dask_local_errors(*args, **kwargs)[1]


def _local_both(*args, **kwargs):
    from ._local import LocalCalibrationErrors
    from ._local_rff import dask_local_errors

    lce, mlce = dask_local_errors(*args, **kwargs)
    return LocalCalibrationErrors(lce=lce, mlce=mlce, anchor_errors=None)


#: the local metrics that Dask inputs reach through random features
_LOCAL = {
    "local_calibration_error": _local_lce,
    "max_local_calibration_error": _local_mlce,
    "local_calibration_errors": _local_both,
}


def _entries(x) -> float:
    """The number of entries of an array-like (0 when it has no shape)."""
    shape = getattr(x, "shape", None)
    return float(np.prod(shape)) if shape is not None else 0.0


def dask_dispatch(name: str):
    """Route a metric function's Dask inputs to :func:`dask_metric`, and run
    it on the torch threads its work calls for (:mod:`skcal._torch._threads`).

    Metrics with no mergeable state refuse Dask inputs with the reason,
    rather than gather them into one process.
    """

    def decorate(func):
        @functools.wraps(func)
        def wrapper(y_true, y_proba, *args, **kwargs):
            inputs = (y_true, y_proba, *args, *kwargs.values())
            if not any(is_dask_collection(x) for x in inputs):
                with torch_threads(_entries(y_proba)):
                    return func(y_true, y_proba, *args, **kwargs)
            if name in _LOCAL:
                return _LOCAL[name](y_true, y_proba, *args, **kwargs)
            from ._state import metric_state

            metric_state(name)  # a metric without a mergeable state says why
            return dask_metric(name, y_true, y_proba, *args, **kwargs)

        return wrapper

    return decorate
