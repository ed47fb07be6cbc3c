"""Calibration by group (issue 55): tasks of ``benchmarks/_datasets.py`` as groups.

Each real task (its own network, its own over- or under-confidence) is one
group, as a user with several models or sites would calibrate them. Per
seed, each task contributes ``--low``-``--high`` calibration rows (drawn
from its calibration pool) and ``--n-test`` test rows; the logits are
padded to the largest class count with a column ``-10,000`` below the row's
smallest logit (probability 0 at any fitted temperature: ``exp(-10,000 /
T)``), and the test NLL is read on each task's own columns.

Reported, per size and seed: the test NLL (mean over the test rows of all
groups) of

- ``GroupedTemperatureScaling`` with ``shrinkage="auto"`` (per group,
  shrunk toward the pooled temperature by a strength chosen by repeated
  cross-fitting),
- ``shrinkage=inf`` (one pooled temperature),
- ``TemperatureScaling`` fitted on each group's rows alone (unpooled),

and the number of seeds where ``auto`` beats both. Then the grouped
metrics on one seed: the uncalibrated ECE by group with its permutation test
of a difference between groups, before and after the grouped calibration.

Run:  python benchmarks/bench_groups.py [--seeds 20] [--quick]
"""

import argparse
import datetime
import os
import sys
import time

import numpy as np
from scipy.special import log_softmax

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _lib.datasets import load_task  # noqa: E402

PAD = 10_000.0
#: The tasks used as groups: the five whose data ship in installed packages
#: here (the text tasks need a sentence encoder; fashion-MNIST a Debian
#: package).
TASKS = ("letter", "pendigits", "portal_rodents", "optdigits", "satimage")


def pad(logits, k):
    """``logits`` with ``k - n_classes`` columns far below the row's minimum."""
    out = np.empty((len(logits), k))
    out[:, : logits.shape[1]] = logits
    out[:, logits.shape[1] :] = logits.min(axis=1, keepdims=True) - PAD
    return out


def draw(tasks, rng, low, high, n_test):
    """Stacked calibration and test rows: ``(Z, y, g)`` each, plus the class
    count of each test row's task."""
    k = max(t.n_classes for t in tasks.values())
    parts = {"fit": [], "test": []}
    for name, task in tasks.items():
        n = int(rng.integers(low, high + 1))
        fit = rng.choice(task.n_cal, size=n, replace=False)
        test = rng.choice(task.n_test, size=min(n_test, task.n_test), replace=False)
        for key, Z, y, idx in (
            ("fit", task.cal_logits, task.cal_labels, fit),
            ("test", task.test_logits, task.test_labels, test),
        ):
            parts[key].append(
                (pad(Z[idx], k), y[idx], np.full(len(idx), name), task.n_classes)
            )
    out = {}
    for key, rows in parts.items():
        Z = np.concatenate([r[0] for r in rows])
        y = np.concatenate([r[1] for r in rows])
        g = np.concatenate([r[2] for r in rows])
        kk = np.concatenate([np.full(len(r[1]), r[3]) for r in rows])
        out[key] = (Z, y, g, kk)
    return out


def own_columns_nll(logp, y, kk):
    """Mean NLL with each row renormalised over its task's own classes."""
    total = 0.0
    for k in np.unique(kk):
        rows = kk == k
        lp = log_softmax(logp[rows][:, :k], axis=1)
        total -= lp[np.arange(rows.sum()), y[rows]].sum()
    return total / len(y)


def unpooled(Z, y, g, Zt, gt):
    """Log-probabilities of a ``TemperatureScaling`` fitted per group."""
    from skcal import TemperatureScaling

    logp = np.empty_like(Zt)
    for group in np.unique(g):
        ts = TemperatureScaling(device="cpu").fit(Z[g == group], y[g == group])
        logp[gt == group] = log_softmax(Zt[gt == group] / ts.temperature_, axis=1)
    return logp


def one_size(tasks, args, low, high):
    from skcal import GroupedTemperatureScaling

    print(
        f"\n{len(tasks)} groups, {low}-{high} calibration rows each, "
        f"{args.n_test} test rows each; test NLL"
    )
    print(f"  {'seed':>4} {'auto':>8} {'pooled':>8} {'unpooled':>8} {'lambda':>8} win")
    wins, table = 0, []
    for seed in range(args.seeds):
        data = draw(tasks, np.random.default_rng(seed), low, high, args.n_test)
        Z, y, g, _ = data["fit"]
        Zt, yt, gt, kt = data["test"]
        out = []
        for shrinkage in ("auto", np.inf):
            est = GroupedTemperatureScaling(shrinkage=shrinkage, random_state=seed)
            est.fit(Z, y, groups=g)
            logp = est.predict_log_proba(Zt, groups=gt)
            out.append(own_columns_nll(logp, yt, kt))
            if shrinkage == "auto":
                lam = est.shrinkage_
        out.append(own_columns_nll(unpooled(Z, y, g, Zt, gt), yt, kt))
        win = out[0] < out[1] and out[0] < out[2]
        wins += win
        table.append(out)
        print(
            f"  {seed:>4} {out[0]:8.4f} {out[1]:8.4f} {out[2]:8.4f} {lam:8g} "
            f"{'yes' if win else 'no'}"
        )
    mean = np.mean(table, axis=0)
    print(f"  mean {mean[0]:8.4f} {mean[1]:8.4f} {mean[2]:8.4f}")
    print(
        f"  auto beats both pooled and unpooled in {wins} of {args.seeds} seeds "
        f"({100 * wins / args.seeds:.0f}%)"
    )
    return wins


def grouped_metrics(tasks, args):
    from skcal import GroupedTemperatureScaling
    from skcal.metrics import expected_calibration_error

    data = draw(tasks, np.random.default_rng(0), 200, 200, args.n_test)
    Z, y, g, _ = data["fit"]
    Zt, yt, gt, kt = data["test"]
    cal = GroupedTemperatureScaling(random_state=0).fit(Z, y, groups=g)
    print("\nGrouped metrics (seed 0, 200 calibration rows per group): test ECE")
    for label, logp in (
        ("uncalibrated", log_softmax(Zt, axis=1)),
        ("grouped TS", cal.predict_log_proba(Zt, groups=gt)),
    ):
        start = time.perf_counter()
        res = expected_calibration_error(yt, np.exp(logp), groups=gt)
        test = res.difference_test(n_permutations=199, random_state=0)
        seconds = time.perf_counter() - start
        per = ", ".join(f"{k} {v:.4f}" for k, v in res.by_group.items())
        print(
            f"  {label:<13} overall {res.overall:.4f}; {per}; worst {res.worst}; "
            f"difference test p = {test.pvalue:.3f} ({seconds:.1f} s)"
        )
    temps = ", ".join(
        f"{k} {t:.3f}" for k, t in zip(cal.groups_, cal.group_temperatures_)
    )
    print(f"  temperatures: pooled {cal.temperature_:.3f}; {temps}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--n-test", type=int, default=1000)
    parser.add_argument("--quick", action="store_true", help="5 seeds, one size")
    parser.add_argument(
        "--sizes",
        default="20-60,60-150,300-300",
        help="calibration rows per group, low-high, comma-separated",
    )
    args = parser.parse_args()
    if args.quick:
        args.seeds = min(args.seeds, 5)
    tasks = {name: load_task(name) for name in TASKS}
    print(f"bench_groups, {datetime.date.today()}: tasks as groups: ")
    for name, t in tasks.items():
        print(f"  {name}: {t.n_classes} classes, pool {t.n_cal}, test {t.n_test}")
    sizes = [tuple(map(int, part.split("-"))) for part in args.sizes.split(",")]
    sizes = sizes[:1] if args.quick else sizes
    for low, high in sizes:
        one_size(tasks, args, low, high)
    grouped_metrics(tasks, args)


if __name__ == "__main__":
    main()
