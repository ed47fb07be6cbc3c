"""The calibration monitor on real tasks: false alarms and detection delays (issue 55).

For each real task (``_lib/datasets``), temperature scaling is fitted on the
calibration pool; its probabilities on the test rows are the deployed
model. Batches are drawn from the test rows (with replacement) and their
labels are drawn from a stated truth, so that the null is exact:

* ``calibrated``: labels drawn from the deployed probabilities themselves
  (the null: any alarm is a false alarm), ``--looks`` looks per run;
* ``temperature``: labels drawn from ``softmax(log p / 1.5)`` (the model
  became overconfident by a temperature change 1 -> 1.5);
* ``prior``: labels drawn from ``p * w`` renormalised, ``w = pi' / pi`` with
  ``pi`` the deployed mean prediction and ``pi'`` a prior 0.2 away in total
  variation (the mass of the classes ranked first half by ``pi`` scaled down,
  the rest up).

Printed: the number and fraction of null runs that ever raised an alarm (at
most alpha within Monte-Carlo error is the guarantee; the exact 95%
Clopper-Pearson interval of the rate is shown), and
for each shift and batch size the median number of looks (and rows) until
the alarm and the share of runs whose verdict named the right family.

Run:  python benchmarks/bench_monitor.py [--tasks letter satimage] [--runs 100]
          [--looks 10000] [--null-batch 20] [--alpha 0.05] [--seed 0]
          [--delay-runs 50 (0: the null runs only)] [--verbose]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))


def _softmax(z):
    z = np.exp(z - z.max(axis=1, keepdims=True))
    return z / z.sum(axis=1, keepdims=True)


def _draw(rng, truth):
    u = rng.random((len(truth), 1))
    return np.minimum((u > truth.cumsum(axis=1)).sum(axis=1), truth.shape[1] - 1)


def _shifted_prior(pi, tv=0.2):
    """A prior at total variation ``tv`` from ``pi``: mass ``tv`` moved from
    the larger half of the classes to the smaller half, proportionally."""
    order = np.argsort(-pi)
    top, rest = order[: len(pi) // 2], order[len(pi) // 2 :]
    new = pi.copy()
    new[top] -= tv * pi[top] / pi[top].sum()
    new[rest] += tv * pi[rest] / pi[rest].sum()
    return new


def _truth(kind, p):
    if kind == "calibrated":
        return p
    if kind == "temperature":
        return _softmax(np.log(np.maximum(p, 1e-300)) / 1.5)
    pi = p.mean(axis=0)
    q = p * (_shifted_prior(pi) / pi)
    return q / q.sum(axis=1, keepdims=True)


def _run(p, truth, batch, max_looks, alpha, rng, settle=0):
    """Looks until the alarm (and ``settle`` more, for the verdict)."""
    from skcal.monitor import CalibrationMonitor

    monitor = CalibrationMonitor(alpha=alpha)
    for _ in range(max_looks):
        rows = rng.integers(0, len(p), batch)
        monitor.update(_draw(rng, truth[rows]), p[rows])
        if monitor.alarm_ and monitor.n_looks_ - monitor.alarm_look_ >= settle:
            break
    return monitor


def _deployed(task):
    from skcal.calibrators import TemperatureScaling

    ts = TemperatureScaling().fit(task.cal_logits, task.cal_labels)
    return ts.predict_proba(task.test_logits)


def _clopper_pearson(k, n, level=0.95):
    """The exact two-sided binomial confidence interval for ``k`` of ``n``."""
    from scipy.stats import beta

    a = (1 - level) / 2
    low = 0.0 if k == 0 else float(beta.ppf(a, k, n - k + 1))
    high = 1.0 if k == n else float(beta.ppf(1 - a, k + 1, n - k))
    return low, high


def _null_row(name, p, args, rng):
    start = time.perf_counter()
    alarms = 0
    for run in range(args.runs):
        m = _run(p, p, args.null_batch, args.looks, args.alpha, rng)
        alarms += m.alarm_
        if args.verbose:  # one line per run: a partial run still counts
            print(
                f"# {name} batch {args.null_batch} run {run}: alarm look "
                f"{m.alarm_look_}, looks {m.n_looks_}",
                flush=True,
            )
    low, high = _clopper_pearson(alarms, args.runs)
    return (
        f"| {name} | {args.runs} x {args.looks} looks of {args.null_batch} | "
        f"{alarms} | {alarms / args.runs:.3f} | [{low:.3f}, {high:.3f}] | "
        f"{args.alpha} | {time.perf_counter() - start:.0f} s |"
    )


def _delay_row(name, p, kind, batch, args, rng):
    truth = _truth(kind, p)
    family = {"temperature": "temperature", "prior": "prior"}[kind]
    looks, right = [], 0
    for _ in range(args.delay_runs):
        m = _run(p, truth, batch, 2000, args.alpha, rng, settle=3)
        looks.append(m.alarm_look_ if m.alarm_ else np.inf)
        right += m.verdict().family == family
    med = float(np.median(looks))
    return (
        f"| {name} | {kind} | {batch} | {med:g} | {med * batch:g} | "
        f"{right / args.delay_runs:.2f} |"
    )


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", nargs="*", default=["letter", "satimage"])
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--looks", type=int, default=10_000)
    parser.add_argument("--null-batch", type=int, default=20)
    parser.add_argument("--delay-runs", type=int, default=50)
    parser.add_argument("--alpha", type=float, default=0.05)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--verbose", action="store_true", help="a line per null run")
    args = parser.parse_args(argv)
    from _lib.datasets import available_tasks, load_task

    tasks = [t for t in args.tasks if t in available_tasks()]
    rng = np.random.default_rng(args.seed)
    null_rows, delay_rows = [], []
    for name in tasks:
        p = _deployed(load_task(name))
        null_rows.append(_null_row(name, p, args, rng))
        for kind in ("temperature", "prior") if args.delay_runs else ():
            for batch in (100, 1000):
                delay_rows.append(_delay_row(name, p, kind, batch, args, rng))
        print(null_rows[-1], *delay_rows[-4:], sep="\n", flush=True)
    print("\n| task | null runs | alarms | false-alarm rate | 95% CI | alpha | time |")
    print("|---|---|---|---|---|---|---|")
    print(*null_rows, sep="\n")
    if delay_rows:
        print(
            "\n| task | shift | batch | median looks to alarm | rows | right verdict |"
        )
        print("|---|---|---|---|---|---|")
        print(*delay_rows, sep="\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
