"""Dirichlet-CV's fit time and test NLL on the real tasks, beside temperature scaling.

Issue 49 (item 8) asked for ``DirichletCalibratorCV()`` under a minute at
about 12,000 rows x 53 classes on an idle 2-core machine. For each real task
(``_lib/datasets``) this script fits, on ``--n-cal`` rows of the calibration
pool (all of it when smaller), temperature scaling, ``DirichletCalibrator()``
and ``DirichletCalibratorCV(random_state=0)`` with their defaults, in that
order, ``--repeats`` times, and prints the median fit time, the test NLL and
Dirichlet-CV's selected strengths. The load average before and after each
task is printed too: on a shared machine the seconds move with it.

Run:  python benchmarks/bench_dirichlet_cv.py [--tasks wordnet_supersenses
          kjv_books letter] [--n-cal 12104] [--repeats 1]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))


def _nll(proba, y):
    return float(-np.mean(np.log(np.maximum(proba[np.arange(len(y)), y], 1e-300))))


def _fit(make, logits, y, repeats):
    times, cal = [], None
    for _ in range(repeats):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            start = time.perf_counter()
            cal = make().fit(logits, y)
            times.append(time.perf_counter() - start)
    return cal, statistics.median(times)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--tasks", nargs="*", default=["wordnet_supersenses", "kjv_books", "letter"]
    )
    parser.add_argument("--n-cal", type=int, default=12_104)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    from _lib.datasets import available_tasks, load_task

    from skcal import DirichletCalibrator, DirichletCalibratorCV, TemperatureScaling

    methods = {
        "TS": TemperatureScaling,
        "Dirichlet": DirichletCalibrator,
        "Dirichlet-CV": lambda: DirichletCalibratorCV(random_state=0),
    }
    print("| task | classes | rows | method | fit s | test NLL | selected | load |")
    print("|---|---|---|---|---|---|---|---|")
    for name in args.tasks:
        if name not in available_tasks():
            print(f"| {name} | | | (data missing) | | | | |")
            continue
        task = load_task(name)
        n = min(args.n_cal, len(task.cal_labels))
        logits, _, y = task.calibration_subset(n, random_state=args.seed)
        for method, make in methods.items():
            load = os.getloadavg()[0]
            cal, seconds = _fit(make, logits, y, args.repeats)
            nll = _nll(cal.predict_proba(task.test_logits), task.test_labels)
            selected = ""
            if hasattr(cal, "reg_lambda_"):
                selected = f"reg_lambda={cal.reg_lambda_}, reg_mu={cal.reg_mu_}"
            print(
                f"| {name} | {task.n_classes} | {n} | {method} | {seconds:.1f} | "
                f"{nll:.4f} | {selected} | {load:.1f}-{os.getloadavg()[0]:.1f} |",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
