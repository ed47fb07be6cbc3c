"""Load a task from ``benchmarks/.cache``, building and caching it if needed."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import numpy as np

from .registry import SPECS, TASK_NAMES, probe
from .task import CACHE_DIR, MissingDataError, RealTask
from .training import build


def _save(task: RealTask, path: Path, key: str) -> None:
    meta = {
        "name": task.name,
        "source": task.source,
        "domain": task.domain,
        "n_classes": task.n_classes,
        "class_names": list(task.class_names),
        "model": task.model,
        "n_train": task.n_train,
        "info": task.info,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp.npz")
    np.savez_compressed(
        tmp,
        version=np.array(key),
        meta=np.array(json.dumps(meta)),
        **{
            k: getattr(task, k)
            for k in (
                "cal_logits cal_embeddings cal_labels test_logits test_embeddings "
                "test_labels coef intercept"
            ).split()
        },
    )
    os.replace(tmp, path)


def _load_cached(path: Path, key: str) -> RealTask | None:
    if not path.exists():
        return None
    with np.load(path, allow_pickle=False) as z:
        if str(z["version"]) != key:
            return None
        meta = json.loads(str(z["meta"]))
        arrays = {k: z[k] for k in z.files if k not in ("version", "meta")}
    meta["class_names"] = tuple(meta["class_names"])
    return RealTask(**meta, **arrays)


def load_task(name: str, *, rebuild: bool = False, cache_dir=None, verbose=False):
    """Load a task from the cache, building (and caching) it if needed.

    Parameters
    ----------
    name : str
        One of :data:`TASK_NAMES`.
    rebuild : bool, default=False
        Build again even when a cache with the current version exists.
    cache_dir : path-like, optional
        Defaults to ``benchmarks/.cache``.
    verbose : bool, default=False
        Print progress to stderr while building.

    Returns
    -------
    RealTask

    Raises
    ------
    MissingDataError
        When the task must be built and the package with its data is missing.
    """
    if name not in SPECS:
        raise KeyError(f"unknown task {name!r}; the tasks are {', '.join(TASK_NAMES)}")
    spec = SPECS[name]
    cache_dir = Path(cache_dir) if cache_dir is not None else CACHE_DIR
    path = cache_dir / f"{name}.npz"
    key = spec.key()
    if not rebuild:
        task = _load_cached(path, key)
        if task is not None:
            return task
    if verbose:
        print(f"building {name} ...", file=sys.stderr)
    task = build(spec, cache_dir, verbose)
    _save(task, path, key)
    return task


def is_available(name: str, cache_dir=None) -> bool:
    """Whether ``name`` loads here: cached with the current version, or buildable."""
    cache_dir = Path(cache_dir) if cache_dir is not None else CACHE_DIR
    path = cache_dir / f"{name}.npz"
    if path.exists():
        with np.load(path, allow_pickle=False) as z:
            if str(z["version"]) == SPECS[name].key():
                return True
    try:
        probe(name)
    except MissingDataError:
        return False
    return True


def available_tasks(cache_dir=None) -> tuple:
    """Names of the tasks that load here (cached or buildable)."""
    return tuple(n for n in TASK_NAMES if is_available(n, cache_dir))


def load_tasks(names=None, **kwargs) -> dict:
    """``{name: RealTask}`` for ``names`` (default: :func:`available_tasks`)."""
    names = available_tasks(kwargs.get("cache_dir")) if names is None else names
    return {n: load_task(n, **kwargs) for n in names}
