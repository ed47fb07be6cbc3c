"""Real evaluation tasks for the benchmarks, built from data that ships in packages.

Builds (or rebuilds) the cache of the real tasks, ``benchmarks/.cache``, and
prints their summary table; the code is the package ``_lib/datasets`` (see
its docstring and ``benchmarks/DATASETS.md``)::

    python benchmarks/_datasets.py              # every task whose data is here
    python benchmarks/_datasets.py letter kjv_books --rebuild
    python benchmarks/_datasets.py --list       # which tasks load here

The names below are re-exported for code that still imports ``_datasets``;
new code imports ``from _lib.datasets import ...``.
"""

import sys

from _lib.datasets import (  # noqa: F401 (re-exported)
    CACHE_DIR,
    CACHE_VERSION,
    DEFAULT_CAL_SIZES,
    SEED,
    TASK_NAMES,
    MissingDataError,
    RealTask,
    available_tasks,
    is_available,
    load_task,
    load_tasks,
)
from _lib.datasets.cli import main

if __name__ == "__main__":
    sys.exit(main())
