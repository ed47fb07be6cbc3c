"""The methods of issue 36 against their references: real tasks, speed, scale.

Run (by hand, from the repository root)::

    python benchmarks/compare_field.py [--part real speed large metrics]
        [--tasks letter ...] [--n-cal 5000] [--only TEXT [TEXT ...]]
        [--repeats 3] [--budget 5] [--threads 1] [--large-timeout 600]
        [--json]
    python benchmarks/compare_field.py --from-json run.json [large.json ...]

Methods and references come from ``benchmarks/_lib/field/`` (one module per
family, each with ``rows()``; the metrics' module has ``metric_rows()``).
Every method, skcal's and the references', gets the same softmax
probabilities and labels, so the metrics of its rows are comparable.

Parts (``--part``, default all but ``large``):

* ``real``: the eight real tasks of ``benchmarks/DATASETS.md`` (cached in
  ``benchmarks/.cache/``): each method is fitted on ``--n-cal`` rows of the
  calibration pool (seed 0; the whole pool when it is smaller) and scored on
  the task's test set: test NLL and top-label ECE (15 equal-width bins, the
  same skcal functions for every row), fit and predict times (best of
  ``--repeats`` within ``--budget`` seconds; skcal and its references take
  turns, one call each per round, so that a slow spell of a noisy machine
  falls on all of them) and ``x``, the reference's time
  divided by skcal's (``> 1``: skcal is faster), and the time of a fit on
  the 300 warm-up rows (about a fit's fixed cost; a table of its own for
  the ``speed`` part);
* ``speed``: synthetic ImageNet-like logits (``_lib/synthetic.py``), 10,000
  calibration and 10,000 test rows at 10 and 100 classes: times and ratios;
* ``large``: skcal alone at 50,000 x 1,000 (synthetic, test = calibration
  rows), one child process per method (its peak memory from ``wait4``),
  killed after ``--large-timeout`` seconds; a refusal up front (an error
  before any work) is reported with its time and message;
* ``metrics``: the new metrics against their references on each real task's
  uncalibrated test probabilities: values, absolute differences, times.

A reference whose library is missing or fails is a row with the reason; a
reference above its ``max_peer_classes`` (one-vs-one over many classes) is
not run. Every method is fitted once on 300 rows first (not timed), so that
import and first-call costs are not timed. ``--threads`` sets torch's
intra-op threads for every library (default 1: the benchmark's own rule of
comparing single-threaded kernels).
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import pkgutil
import resource
import subprocess
import sys
import time

import _lib.field as field
import numpy as np
from _lib.common import current_rss_mb, timed
from _lib.datasets import available_tasks, load_task
from _lib.peers import short_error
from _lib.synthetic import score_data
from scipy.special import softmax

N_BINS = 15
WARM_UP_ROWS = 300
LARGE_SHAPE = (50_000, 1_000)
SPEED_CLASSES = (10, 100)


# ----------------------------------------------------------------------------
# rows


def field_modules():
    """The modules of ``_lib/field``, sorted by name."""
    names = sorted(m.name for m in pkgutil.iter_modules(field.__path__))
    return [importlib.import_module(f"_lib.field.{n}") for n in names]


def load_rows(only=None):
    """Every :class:`~_lib.field.Row`, those matching ``only`` if given."""
    rows = [r for m in field_modules() if hasattr(m, "rows") for r in m.rows()]
    if only:
        rows = [r for r in rows if any(t.lower() in r.method.lower() for t in only)]
    return rows


def load_metric_rows(only=None):
    rows = [
        r for m in field_modules() if hasattr(m, "metric_rows") for r in m.metric_rows()
    ]
    if only:
        rows = [r for r in rows if any(t.lower() in r[0].lower() for t in only)]
    return rows


# ----------------------------------------------------------------------------
# one method on one data set


def scores(y, proba):
    from skcal.metrics import expected_calibration_error, negative_log_likelihood

    proba = np.clip(proba, 1e-300, None)
    proba = proba / proba.sum(axis=1, keepdims=True)
    return {
        "nll": float(negative_log_likelihood(y, proba)),
        "ece": float(expected_calibration_error(y, proba, n_bins=N_BINS)),
    }


class _Timing:
    """One method's fit and predict on one data set, timed call by call."""

    def __init__(self, factory, P, y, Pt):
        self.data, self.Pt = (P, y), Pt
        self.fit, self.predict = factory()
        model = self.fit(P[:WARM_UP_ROWS], y[:WARM_UP_ROWS])
        self.predict(model, Pt[:WARM_UP_ROWS])
        self.best = {"fit_small_s": np.inf, "fit_s": np.inf, "pred_s": np.inf}
        self.spent = dict.fromkeys(self.best, 0.0)
        self.runs, self.model, self.proba = 0, None, None

    def _call(self, key, fn):
        start = time.perf_counter()
        result = fn()
        elapsed = time.perf_counter() - start
        self.best[key] = min(self.best[key], elapsed)
        self.spent[key] += elapsed
        return result

    def round(self, budget) -> None:
        """One call of each (the first round always; later ones within
        ``budget`` seconds per kind of call)."""
        P, y = self.data
        if self.runs and max(self.spent.values()) >= budget:
            return
        self._call("fit_small_s", lambda: self.fit(P[:WARM_UP_ROWS], y[:WARM_UP_ROWS]))
        self.model = self._call("fit_s", lambda: self.fit(P, y))
        self.proba = self._call("pred_s", lambda: self.predict(self.model, self.Pt))
        self.runs += 1


def run_methods(factories, P, y, Pt, yt, args):
    """Fit, predict and score the methods, taking turns (see the module
    docstring); a dict with each one's numbers or error."""
    timings = {}
    for label, factory in factories:
        try:
            timings[label] = _Timing(factory, P, y, Pt)
        except Exception as exc:  # a peer's failure is a row, not a crash
            timings[label] = {"error": short_error(exc)}
    for _ in range(max(args.repeats, 1)):
        for label, timing in timings.items():
            if isinstance(timing, _Timing):
                try:
                    timing.round(args.budget)
                except Exception as exc:
                    timings[label] = {"error": short_error(exc)}
    return {label: _numbers(timing, yt) for label, timing in timings.items()}


def _numbers(timing, yt):
    if not isinstance(timing, _Timing):
        return timing
    out = {**timing.best, "runs": timing.runs}
    if yt is not None:
        out.update(scores(yt, np.asarray(timing.proba, dtype=np.float64)))
    return out


def run_row(row, P, y, Pt, yt, args):
    """skcal's result and each reference's, with the time ratios."""
    n_classes = P.shape[1]
    skipped = row.max_peer_classes is not None and n_classes > row.max_peer_classes
    factories = [("skcal", row.skcal)] + ([] if skipped else row.references)
    measured = run_methods(factories, P, y, Pt, yt, args)
    ours = measured["skcal"]
    results = [("skcal", ours)]
    for label, _ in row.references:
        if skipped:
            results.append(
                (label, {"error": f"not run above {row.max_peer_classes} classes"})
            )
            continue
        ref = measured[label]
        for key in ("fit", "pred"):
            if f"{key}_s" in ref and f"{key}_s" in ours:
                ref[f"{key}_x"] = ref[f"{key}_s"] / ours[f"{key}_s"]
        if "nll" in ref and "nll" in ours:
            ref["nll_gap"] = ours["nll"] - ref["nll"]
        results.append((label, ref))
    return results


# ----------------------------------------------------------------------------
# parts


def log(*parts):
    print(*parts, file=sys.stderr, flush=True)


def real_part(rows, args):
    out = []
    for name in args.tasks or available_tasks():
        task = load_task(name)
        n = min(args.n_cal, task.n_cal)
        logits, _, y = task.calibration_subset(n, random_state=0)
        P, Pt = softmax(logits, axis=1), softmax(task.test_logits, axis=1)
        for row in rows:
            log(f"[real] {name} {row.method}")
            res = run_row(row, P, y, Pt, task.test_labels, args)
            out.append(
                {
                    "task": name,
                    "classes": task.n_classes,
                    "n_cal": n,
                    "method": row.method,
                    "results": res,
                }
            )
    return out


def speed_part(rows, args):
    out = []
    for n_classes in SPEED_CLASSES:
        rng = np.random.default_rng(0)
        logits, y = score_data(2 * args.n_speed, n_classes, rng)
        P = softmax(logits, axis=1)
        cal, test = slice(0, args.n_speed), slice(args.n_speed, None)
        for row in rows:
            log(f"[speed] {n_classes} classes {row.method}")
            res = run_row(row, P[cal], y[cal], P[test], y[test], args)
            out.append({"classes": n_classes, "method": row.method, "results": res})
    return out


def large_child(index, args):
    """In a child process: fit and predict row ``index`` at 50,000 x 1,000."""
    row = load_rows(args.only)[index]
    n, n_classes = LARGE_SHAPE
    logits, y = score_data(n, n_classes, np.random.default_rng(0))
    P = softmax(logits, axis=1)
    del logits
    data_mb = current_rss_mb()
    fit, predict = row.skcal()
    start = time.perf_counter()
    try:
        model = fit(P, y)
    except ValueError as exc:
        print(
            json.dumps({"refused": short_error(exc), "s": time.perf_counter() - start})
        )
        return
    fit_s = time.perf_counter() - start
    start = time.perf_counter()
    predict(model, P)
    pred_s = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        json.dumps(
            {"fit_s": fit_s, "pred_s": pred_s, "data_mb": data_mb, "peak_mb": peak}
        )
    )


def large_part(rows, args):
    out = []
    for index, row in enumerate(rows):
        log(f"[large] {row.method}")
        cmd = [
            sys.executable,
            os.path.abspath(__file__),
            "--large-child",
            str(index),
            "--threads",
            str(args.threads),
        ]
        cmd += ["--only", *args.only] if args.only else []
        proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        try:
            stdout, stderr = proc.communicate(timeout=args.large_timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            out.append({"method": row.method, "error": f"over {args.large_timeout} s"})
            continue
        lines = stdout.strip().splitlines()
        res = (
            json.loads(lines[-1])
            if proc.returncode == 0 and lines
            else {"error": (stderr.strip().splitlines() or ["?"])[-1][:110]}
        )
        out.append({"method": row.method, **res})
    return out


def time_metric(fn, y, P, args):
    """Best time and value of ``fn(y, P)``, or the error's text."""
    try:
        s, value, _ = timed(lambda: fn(y, P), args.repeats, args.budget)
    except Exception as exc:
        return {"error": short_error(exc)}
    return {"value": float(value), "s": s}


def metrics_part(metric_rows, args):
    out = []
    for name in args.tasks or available_tasks():
        task = load_task(name)
        Pt, yt = softmax(task.test_logits, axis=1), task.test_labels
        for metric, ours, refs in metric_rows:
            log(f"[metrics] {name} {metric}")
            mine = time_metric(ours, yt, Pt, args)
            results = [("skcal", mine)]
            for label, ref in refs:
                res = time_metric(ref, yt, Pt, args)
                if "value" in res and "value" in mine:
                    res["diff"] = abs(res["value"] - mine["value"])
                    res["x"] = res["s"] / mine["s"]
                results.append((label, res))
            out.append({"task": name, "metric": metric, "results": results})
    return out


# ----------------------------------------------------------------------------
# tables


def fmt(res, key, spec):
    value = res.get(key)
    return "" if value is None else format(value, spec)


def method_table(entries, head):
    lines = [
        f"| {head} | method | library | NLL | ECE | fit s | pred s | fit x | pred x |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for e in entries:
        where = e.get("task", f"{e['classes']} classes")
        for label, res in e["results"]:
            if "error" in res:
                lines.append(
                    f"| {where} | {e['method']} | {label} | {res['error']} |||||"
                )
                continue
            lines.append(
                f"| {where} | {e['method']} | {label} | {fmt(res, 'nll', '.4f')} | "
                f"{fmt(res, 'ece', '.4f')} | {fmt(res, 'fit_s', '.4f')} | "
                f"{fmt(res, 'pred_s', '.4f')} | {fmt(res, 'fit_x', '.2f')} | "
                f"{fmt(res, 'pred_x', '.2f')} |"
            )
    return "\n".join(lines)


def fixed_cost_table(entries):
    """The fit on the 300 warm-up rows, in milliseconds: about a fit's
    fixed cost (parameter and input checks, bookkeeping), per library."""
    lines = ["| data | method | library | fit ms, 300 rows |", "|---|---|---|---|"]
    for e in entries:
        for label, res in e["results"]:
            if "fit_small_s" in res:
                lines.append(
                    f"| {e['classes']} classes | {e['method']} | {label} | "
                    f"{res['fit_small_s'] * 1e3:.2f} |"
                )
    return "\n".join(lines)


def large_table(entries):
    lines = [
        "| method | fit s | pred s | refused or failed | data MB | peak MB |",
        "|---|---|---|---|---|---|",
    ]
    for e in entries:
        status = e.get("refused") or e.get("error", "")
        lines.append(
            f"| {e['method']} | {fmt(e, 'fit_s', '.1f')} | "
            f"{fmt(e, 'pred_s', '.1f')} | {status} | "
            f"{fmt(e, 'data_mb', '.0f')} | {fmt(e, 'peak_mb', '.0f')} |"
        )
    return "\n".join(lines)


def metrics_table(entries):
    lines = [
        "| task | metric | library | value | abs diff | s | x |",
        "|---|---|---|---|---|---|---|",
    ]
    for e in entries:
        for label, res in e["results"]:
            if "error" in res:
                lines.append(
                    f"| {e['task']} | {e['metric']} | {label} | {res['error']} |||"
                )
                continue
            lines.append(
                f"| {e['task']} | {e['metric']} | {label} | "
                f"{fmt(res, 'value', '.6g')} | {fmt(res, 'diff', '.1e')} | "
                f"{fmt(res, 's', '.4f')} | {fmt(res, 'x', '.2f')} |"
            )
    return "\n".join(lines)


def _median(values):
    values = sorted(v for v in values if v is not None)
    return values[len(values) // 2] if values else None


def summary_table(results):
    """One row per method and reference: the targets of issue 36 at a glance.

    ``NLL ok``: real tasks where skcal's test NLL is within 1e-3 of the
    reference's or lower; ``gap``: the largest ``skcal - reference`` NLL;
    ``fit x``/``pred x``: median time ratios over the real tasks, then the
    ratios at 10 and 100 classes (``> 1``: skcal is faster).
    """
    by = {}
    for part in ("real", "speed"):
        for e in results.get(part, []):
            for label, res in e["results"][1:]:
                key = (e["method"], label)
                by.setdefault(key, {"real": [], 10: None, 100: None})
                if part == "real":
                    by[key]["real"].append(res)
                elif "fit_x" in res:
                    by[key][e["classes"]] = res
    lines = [
        "| method | reference | NLL ok | gap | fit x | pred x "
        "| fit x 10 / 100 | pred x 10 / 100 |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for (method, label), d in by.items():
        ran = [r for r in d["real"] if "nll_gap" in r]
        ok = sum(r["nll_gap"] <= 1e-3 for r in ran)
        gap = max((r["nll_gap"] for r in ran), default=None)
        speed = [d[10] or {}, d[100] or {}]
        lines.append(
            f"| {method} | {label} | {ok}/{len(ran)} | "
            f"{'' if gap is None else format(gap, '+.1e')} | "
            f"{fmt({'x': _median(r.get('fit_x') for r in ran)}, 'x', '.2f')} | "
            f"{fmt({'x': _median(r.get('pred_x') for r in ran)}, 'x', '.2f')} | "
            + " / ".join(fmt(s, "fit_x", ".2f") or "n/a" for s in speed)
            + " | "
            + " / ".join(fmt(s, "pred_x", ".2f") or "n/a" for s in speed)
            + " |"
        )
    return "\n".join(lines)


def print_tables(results):
    tables = {
        "real": lambda r: method_table(r, "task"),
        "speed": lambda r: method_table(r, "data"),
        "large": large_table,
        "metrics": metrics_table,
    }
    if "real" in results or "speed" in results:
        print(f"\n## summary\n\n{summary_table(results)}")
    for name, res in results.items():
        print(f"\n## {name}\n\n{tables[name](res)}")
    if any(
        "fit_small_s" in r for e in results.get("speed", []) for _, r in e["results"]
    ):
        print(f"\n## fixed cost\n\n{fixed_cost_table(results['speed'])}")


# ----------------------------------------------------------------------------
# command line


def build_parser():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument(
        "--part",
        nargs="+",
        default=["real", "speed", "metrics"],
        choices=["real", "speed", "large", "metrics"],
    )
    p.add_argument("--tasks", nargs="+", default=None)
    p.add_argument("--n-cal", type=int, default=5000)
    p.add_argument("--n-speed", type=int, default=10_000)
    p.add_argument(
        "--only",
        nargs="+",
        default=None,
        help="run only the methods whose name contains one of these",
    )
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--budget", type=float, default=5.0)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--large-timeout", type=float, default=600.0)
    p.add_argument("--large-child", type=int, default=None, help=argparse.SUPPRESS)
    p.add_argument("--json", action="store_true")
    p.add_argument(
        "--from-json",
        nargs="+",
        default=None,
        metavar="FILE",
        help="print the tables of saved --json runs (their parts merged)",
    )
    return p


def main(argv=None):
    args = build_parser().parse_args(argv)
    if args.from_json:
        results = {}
        for path in args.from_json:
            with open(path) as f:
                results.update(json.load(f))
        return print_tables(results)
    import torch

    torch.set_num_threads(args.threads)
    if args.large_child is not None:
        return large_child(args.large_child, args)
    rows = load_rows(args.only)
    parts = {
        "real": lambda: real_part(rows, args),
        "speed": lambda: speed_part(rows, args),
        "large": lambda: large_part(rows, args),
        "metrics": lambda: metrics_part(load_metric_rows(args.only), args),
    }
    results = {name: parts[name]() for name in args.part}
    if args.json:
        print(json.dumps(results, indent=1, default=str))
        return
    print_tables(results)


if __name__ == "__main__":
    main()
