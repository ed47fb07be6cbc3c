"""Real evaluation tasks for the benchmarks, built from data that ships in packages.

The command line of ``python benchmarks/_datasets.py``: build (or rebuild)
the cache of the tasks and print their summary table.
"""

from __future__ import annotations

import argparse

from .cache import is_available, load_task
from .registry import TASK_NAMES
from .task import MissingDataError


def _table(tasks) -> str:
    lines = [
        "| task | domain | classes | train | cal pool | test | features | "
        "test acc | test NLL | test ECE | build s |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for t in tasks:
        m = t.info["test"]
        lines.append(
            f"| {t.name} | {t.domain} | {t.n_classes} | {t.n_train} | {t.n_cal} | "
            f"{t.n_test} | {t.coef.shape[1]} | {m['accuracy']:.4f} | {m['nll']:.4f} | "
            f"{m['ece']:.4f} | {t.info['build_seconds']} |"
        )
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("names", nargs="*", help=f"some of {TASK_NAMES} (default: all)")
    parser.add_argument("--rebuild", action="store_true", help="ignore the cache")
    parser.add_argument("--list", action="store_true", help="list tasks and exit")
    args = parser.parse_args(argv)
    if args.list:
        for n in TASK_NAMES:
            print(f"{n:22s} {'available' if is_available(n) else 'missing data'}")
        return 0
    names = args.names or TASK_NAMES
    tasks, missing = [], []
    for n in names:
        try:
            tasks.append(load_task(n, rebuild=args.rebuild, verbose=True))
        except MissingDataError as exc:
            missing.append(f"{n}: {exc}")
    print(_table(tasks))
    for line in missing:
        print(f"skipped {line}")
    return 0
