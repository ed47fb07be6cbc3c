"""Identity or temperature scaling from 100 rows: what the calibration rows can tell.

At 100 calibration rows, :class:`skcal.CalibratorSearchCV` may only return
identity (no calibration) or temperature scaling (TS): every richer candidate
is skipped by its small-data guard. This benchmark measures how well *any*
rule of the guard's form could choose between those two from the rows
alone, on the real tasks of ``benchmarks/_lib/datasets`` (``DATASETS.md``).

For every task and ``--seeds`` random calibration subsets of ``--size`` rows
(the same subsets as ``bench_select.py``'s, seeds 0, 1, ...):

* the events of the guard (rows the network gets wrong, or right if fewer),
  the fitted temperature of TS on the subset, and the test NLL of identity
  and of that TS on the whole test set (probabilities floored at 1e-12, as
  in ``bench_select.py``); the better of the two is the *oracle* here;
* the out-of-fold log loss of every row for both, on the search's own folds
  (``StratifiedKFold(5, shuffle=True, random_state=seed)``) and with its
  floor (log 2.2e-308), and the paired mean difference ``d`` (identity
  minus TS) with its standard error ``se``;
* the search's own choice, ``CalibratorSearchCV([IdentityCalibrator(),
  TemperatureScaling()], random_state=seed)``, checked against the replica
  of its rule below (events >= ``TEMPERATURE_EVENTS`` and ``d > se``).

Then every rule "TS when events >= e0 and d > k se, else identity" of a grid
of ``e0`` and ``k`` is scored on all cases: the mean gap ``chosen NLL /
oracle NLL - 1`` (%), and the cases where the chosen map's test NLL exceeds
identity's by more than 1% (harm). The best rule of the grid is chosen *in
hindsight*, on the test sets: it bounds from below what such a rule can
reach, and shows what the search's rule (e0 = 5, k = 1; 10 before
2026-12-02) gives up for safety.

Run:  python benchmarks/bench_select_small.py [--tasks letter fashion_mnist]
      [--size 100] [--seeds 10] [--json out.json]
"""

import argparse
import json
import os
import sys
import time
import warnings
from datetime import datetime, timezone

import numpy as np
from _lib.datasets import available_tasks, load_task
from scipy.special import log_softmax

#: The grid of rules: minimum events, and the multiple of the standard error.
EVENT_THRESHOLDS = (0, 1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 15)
SE_MULTIPLIERS = (-1.0, 0.0, 0.5, 1.0, 1.5)
#: Harm: the chosen map's test NLL above identity's by more than this.
HARM = 0.01
LOSS_FLOOR = np.log(1e-12)


def _row_losses(log_proba, y, floor=LOSS_FLOOR):
    """``-log p(y)`` of each row, the log floored at ``floor``."""
    return -np.maximum(log_proba[np.arange(len(y)), y], floor)


def run_case(task, size, seed):
    from sklearn.model_selection import StratifiedKFold

    from skcal import CalibratorSearchCV, IdentityCalibrator, TemperatureScaling
    from skcal.model_selection._search import _LOG_PROBA_EPS  # the search's floor

    logits, _, y = task.calibration_subset(size, random_state=seed)
    wrong = np.argmax(logits, axis=1) != y
    events = int(min(wrong.sum(), (~wrong).sum()))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        search = CalibratorSearchCV(
            [IdentityCalibrator(), TemperatureScaling(device="cpu")],
            random_state=seed,
        ).fit(logits, y)
        folds = StratifiedKFold(5, shuffle=True, random_state=seed).split(logits, y)
        oof_ts = np.empty(size)
        for train, test in folds:
            ts = TemperatureScaling(device="cpu").fit(logits[train], y[train])
            oof_ts[test] = _row_losses(
                ts.predict_log_proba(logits[test]), y[test], _LOG_PROBA_EPS
            )
        ts = TemperatureScaling(device="cpu").fit(logits, y)
    d = _row_losses(log_softmax(logits, axis=1), y, _LOG_PROBA_EPS) - oof_ts
    y_test, z_test = task.test_labels, task.test_logits
    return {
        "task": task.name,
        "n_classes": task.n_classes,
        "size": size,
        "seed": seed,
        "events": events,
        "temperature": float(ts.temperature_),
        "d": float(d.mean()),
        "se": float(d.std(ddof=1) / np.sqrt(size)),
        "nll_identity": float(_row_losses(log_softmax(z_test, axis=1), y_test).mean()),
        "nll_ts": float(_row_losses(ts.predict_log_proba(z_test), y_test).mean()),
        "search_selected": search.selected_,
    }


def choose_ts(case, e0, k):
    """The rule of the grid: TS when events >= e0 and d > k se."""
    return case["events"] >= e0 and case["d"] > k * case["se"]


def score_rule(cases, e0, k, always=None):
    """Mean gap (%) and harm count of a rule; ``always`` forces one map."""
    gaps, harm = [], 0
    for c in cases:
        ts = choose_ts(c, e0, k) if always is None else always == "ts"
        chosen = c["nll_ts"] if ts else c["nll_identity"]
        gaps.append(chosen / min(c["nll_ts"], c["nll_identity"]) - 1)
        harm += chosen > (1 + HARM) * c["nll_identity"]
    return 100 * float(np.mean(gaps)), int(harm)


def collect_cases(args):
    """Every task's cases (``run_case``), printed one line each."""
    cases = []
    print(
        f"{'task':<20} {'seed':>4} {'events':>6} {'T':>6} {'d':>8} {'se':>7} "
        f"{'NLL id':>8} {'NLL TS':>8} {'TS/id':>6}  search"
    )
    for name in args.tasks or available_tasks():
        task = load_task(name)
        if args.size > task.n_cal:
            print(f"{name}: skipped, {task.n_cal} calibration rows")
            continue
        for seed in range(args.seeds):
            c = run_case(task, args.size, seed)
            cases.append(c)
            print(
                f"{name:<20} {seed:>4} {c['events']:>6} {c['temperature']:6.2f} "
                f"{c['d']:+8.4f} {c['se']:7.4f} {c['nll_identity']:8.4f} "
                f"{c['nll_ts']:8.4f} {c['nll_ts'] / c['nll_identity']:6.3f}  "
                f"{c['search_selected']}",
                flush=True,
            )
    return cases


def score_rules(cases):
    """Score the grid of rules and the search's; print them, return the results."""
    from skcal.model_selection._search import TEMPERATURE_EVENTS as E0

    # the replica of the search's rule must give the search's choices
    mismatches = [
        (c["task"], c["seed"])
        for c in cases
        if ("TemperatureScaling" if choose_ts(c, E0, 1.0) else "IdentityCalibrator")
        != c["search_selected"]
    ]
    grid = {
        (e0, k): score_rule(cases, e0, k)
        for e0 in EVENT_THRESHOLDS
        for k in SE_MULTIPLIERS
    }
    print(
        f"\nMean gap to the better of identity and TS (%), and harm cases "
        f"(test NLL > {1 + HARM:g} x identity's), over {len(cases)} cases, "
        "for 'TS when events >= e0 and d > k se':"
    )
    heads = " ".join(f"{'k=' + format(k, 'g'):>12}" for k in SE_MULTIPLIERS)
    print(f"{'e0':>4} {heads}")
    for e0 in EVENT_THRESHOLDS:
        cells = " ".join(
            f"{grid[e0, k][0]:7.2f} ({grid[e0, k][1]:>2})" for k in SE_MULTIPLIERS
        )
        print(f"{e0:>4} {cells}")
    best = min(grid, key=lambda key: grid[key])
    always_id = score_rule(cases, 0, 0.0, always="identity")
    always_ts = score_rule(cases, 0, 0.0, always="ts")
    search_rule, former = grid[E0, 1.0], grid[10, 1.0]
    print(
        f"\nthe search's rule (e0={E0}, k=1): {search_rule[0]:.2f}% ({search_rule[1]} "
        f"harm; e0=10, the former rule: {former[0]:.2f}%, {former[1]} harm); "
        f"replica mismatches: {len(mismatches)} {mismatches or ''}"
    )
    print(
        f"best rule in hindsight: e0={best[0]}, k={best[1]:g}: {grid[best][0]:.2f}% "
        f"({grid[best][1]} harm); always identity {always_id[0]:.2f}%, always TS "
        f"{always_ts[0]:.2f}% ({always_ts[1]} harm)"
    )
    return {
        "E0": E0,
        "mismatches": mismatches,
        "grid": grid,
        "best": best,
        "always_id": always_id,
        "always_ts": always_ts,
        "search_rule": search_rule,
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", nargs="+", default=None, help="default: all")
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--threads", type=int, default=1, help="torch threads")
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)

    import torch

    torch.set_num_threads(args.threads)
    start = time.perf_counter()
    cases = collect_cases(args)
    rules = score_rules(cases)
    E0, grid, best = rules["E0"], rules["grid"], rules["best"]
    wall = time.perf_counter() - start
    print(f"wall time {wall:.0f} s; load average {os.getloadavg()}")
    if args.json:
        record = {
            "command": sys.argv,
            "started_utc": datetime.now(timezone.utc).isoformat(),
            "settings": vars(args),
            "cases": cases,
            "grid": [
                {"e0": e0, "k": k, "mean_gap_pct": g, "harm": h}
                for (e0, k), (g, h) in grid.items()
            ],
            "search_rule": {"e0": E0, "k": 1.0, "result": rules["search_rule"]},
            "best_rule": {"e0": best[0], "k": best[1], "result": grid[best]},
            "always_identity": rules["always_id"],
            "always_ts": rules["always_ts"],
            "replica_mismatches": rules["mismatches"],
            "wall_s": wall,
        }
        with open(args.json, "w") as f:
            json.dump(record, f, indent=1)
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
