"""Fit and predict times on an idle and on a busy machine, by torch thread policy.

Every calibrator (its defaults, ``_lib/calibrators.py``), the default
``CalibratorSearchCV`` and a ``GridSearchCV(n_jobs=2)`` around vector
scaling, on a real task (letter: 26 classes; the local calibrators on its
64-d embeddings), with 0, 2 and 4 other busy processes (``while True:
pass``) on the machine, under three thread policies:

* ``torch``: torch's default pool (every core), which skcal used before
  it chose its threads;
* ``auto``: skcal's choice (``skcal.set_config(n_threads=None)``, the
  default);
* ``one``: one thread (``n_threads=1``), whose idle time is the reference.

Each measurement runs in a child process with a time limit (a spinning
pool under load can take minutes); the table gives the median of
``--repeats`` fits and of as many predictions. Targets (issue 35): with 2
busy processes on 2 cores, ``auto`` no more than 2x the idle ``one`` time;
idle, ``auto`` no slower than ``torch``.

Run:  python benchmarks/bench_threads.py [--busy 0 2 4] [--policies torch auto one]
      [--methods TS VS ...] [--rows 2000] [--repeats 3] [--timeout 300]
      [--json out.json]
"""

import argparse
import json
import os
import subprocess
import sys
import time

from _lib.common import select_methods

#: the extra cases next to the calibrators
SEARCHES = ("search", "grid-n_jobs-2")


def _measure(method, policy, rows, repeats):
    """``{"fit": s, "predict": s}`` medians of one case, in this process."""
    import warnings

    import numpy as np
    import torch
    from _lib.calibrators import table_methods
    from _lib.datasets import load_task

    import skcal

    if policy == "one":
        skcal.set_config(n_threads=1)
    elif policy == "torch":
        skcal.set_config(n_threads=torch.get_num_threads())
    task = load_task("letter")
    z, emb, y = task.calibration_subset(rows, random_state=0)
    kind, est = _case(method, task, table_methods, rows)
    X = z if kind == "logits" else emb
    fits, predicts = [], []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(repeats):
            start = time.perf_counter()
            est.fit(X, y)
            fits.append(time.perf_counter() - start)
            start = time.perf_counter()
            est.predict_proba(X)
            predicts.append(time.perf_counter() - start)
    return {"fit": float(np.median(fits)), "predict": float(np.median(predicts))}


def _case(method, task, table_methods, rows):
    """The estimator of a case: a calibrator, the default search, or a grid."""
    import skcal

    if method == "search":
        return "logits", skcal.CalibratorSearchCV(random_state=0)
    if method == "grid-n_jobs-2":
        from sklearn.model_selection import GridSearchCV

        grid = {"reg_lambda": ["auto", 1e-3, 1e-2]}
        est = skcal.VectorScaling(device="cpu")
        return "logits", GridSearchCV(est, grid, cv=3, n_jobs=2)
    return table_methods(task, 0)[method]


def _child(args):
    result = _measure(args.one[0], args.one[1], int(args.one[2]), int(args.one[3]))
    print(json.dumps(result), flush=True)


def _busy(n):
    """``n`` processes that keep a core busy."""
    code = "while True: pass"
    return [subprocess.Popen([sys.executable, "-c", code]) for _ in range(n)]


def _run_case(method, policy, args):
    """One case in a child process: its times, or the reason it has none."""
    cmd = [sys.executable, __file__, "--one", method, policy]
    cmd += [str(args.rows), str(args.repeats)]
    try:
        out = subprocess.run(
            cmd, capture_output=True, text=True, timeout=args.timeout, check=True
        )
    except subprocess.TimeoutExpired:
        return {"note": f">{args.timeout}s"}
    except subprocess.CalledProcessError as exc:
        return {"note": exc.stderr.strip().splitlines()[-1][:60]}
    return json.loads(out.stdout.strip().splitlines()[-1])


def _table(results, busy_levels, policies, methods):
    """One line per case: fit and predict seconds per busy level and policy."""
    head = [f"{b} busy {p}" for b in busy_levels for p in policies]
    print("\nfit seconds (median); predict seconds below")
    print(f"{'case':32s}" + "".join(f"{h:>16s}" for h in head))
    for what in ("fit", "predict"):
        print(f"-- {what}")
        for method in methods:
            cells = []
            for b in busy_levels:
                for p in policies:
                    r = results.get((method, b, p), {})
                    cells.append(
                        f"{r[what]:16.4f}"
                        if what in r
                        else f"{r.get('note', '-'):>16s}"
                    )
            print(f"{method:32s}" + "".join(cells))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--busy", type=int, nargs="+", default=[0, 2, 4])
    parser.add_argument("--policies", nargs="+", default=["torch", "auto", "one"])
    parser.add_argument("--methods", nargs="+", default=None)
    parser.add_argument("--rows", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=300.0)
    parser.add_argument("--json", default=None)
    parser.add_argument("--one", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:
        return _child(args)
    from _lib.calibrators import METHOD_NAMES

    methods = select_methods(parser, [*METHOD_NAMES, *SEARCHES], args.methods)
    print(f"# bench_threads: {os.cpu_count()} cores, {args.rows} rows of letter")
    results = {}
    for level in args.busy:
        procs = _busy(level)
        try:
            time.sleep(1.0 if level else 0.0)
            for method in methods:
                for policy in args.policies:
                    r = _run_case(method, policy, args)
                    results[(method, level, policy)] = r
                    print(f"{level} busy {policy:5s} {method:20s} {r}", flush=True)
        finally:
            for p in procs:
                p.kill()
    _table(results, args.busy, args.policies, methods)
    if args.json:
        with open(args.json, "a") as f:
            for (m, b, p), r in results.items():
                f.write(json.dumps({"case": m, "busy": b, "policy": p, **r}) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
