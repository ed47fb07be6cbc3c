"""Fit time of every skcal calibrator by calibration-set size, on real tasks.

Each calibrator of ``_lib/calibrators.py``'s ``table_methods`` (its defaults; the local
ones on the embeddings, given the network's head) is fitted once per task
and size on a random calibration subset (seed 0), and its wall-clock fit
time is printed in seconds: the numbers behind the user guide's "Progress
and typical fit times". Run it alone on the machine: a second job on the
same cores inflates every time.

Run:  python benchmarks/bench_fit_times.py [--tasks fashion_mnist ...]
      [--sizes 500 2000 10000] [--methods TS VQ ...] [--threads N]
      [--json out.json]
"""

import argparse
import json
import os
import platform
import sys
import time
import warnings

from _lib.calibrators import table_methods
from _lib.datasets import load_task

DEFAULT_TASKS = ("fashion_mnist", "wordnet_supersenses")
DEFAULT_SIZES = (500, 2000, 10000)


def fit_times(task, size, only):
    """``{method: seconds}`` of one fit of each method on ``size`` rows."""
    z, emb, y = task.calibration_subset(size, random_state=0)
    out = {}
    for name, (kind, est) in table_methods(task, 0).items():
        if only and name not in only:
            continue
        X = z if kind == "logits" else emb
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            start = time.perf_counter()
            est.fit(X, y)
            out[name] = time.perf_counter() - start
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", nargs="*", default=list(DEFAULT_TASKS))
    parser.add_argument("--sizes", type=int, nargs="*", default=list(DEFAULT_SIZES))
    parser.add_argument("--methods", nargs="*", default=None)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    print(
        f"# bench_fit_times: {platform.machine()}, torch threads "
        f"{torch.get_num_threads()}, load average {os.getloadavg()[0]:.1f}\n"
    )
    results = {}
    columns = []
    for name in args.tasks:
        task = load_task(name)
        for size in args.sizes:
            if size > task.n_cal:
                continue
            columns.append(f"{name} n={size}")
            results[columns[-1]] = fit_times(task, size, args.methods)
            print(f"  {columns[-1]} done", file=sys.stderr, flush=True)
    methods = list(dict.fromkeys(m for r in results.values() for m in r))
    print("| method | " + " | ".join(columns) + " |")
    print("|---" * (len(columns) + 1) + "|")
    for m in methods:
        cells = [f"{results[c][m]:.2f}" if m in results[c] else "" for c in columns]
        print(f"| {m} | " + " | ".join(cells) + " |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
