"""CalibratorSearchCV on real data: the selector against every candidate and the oracle.

For every real task of ``benchmarks/_lib/datasets`` (see ``DATASETS.md``) and
every calibration size the pool allows (100, 500, 2,000, 10,000 rows), on
several random calibration subsets (``--repeats`` seeds at 100 and 500 rows,
one at 2,000 and 10,000), on the network's logits:

* ``CalibratorSearchCV(random_state=seed)`` with its defaults is fitted on the
  subset: the selected candidate, the reason and the fit time are recorded;
* every default candidate is refitted on the whole subset exactly as the
  search refits its winner (same clone, classes and seed), and scored with
  the selector and "uncalibrated" (softmax of the logits) on the whole test
  set: NLL and top-label ECE (15 equal-width bins), each with a 90% bootstrap
  interval (``skcal.metrics.confidence_interval``, the same resamples for
  every method), and the selector against uncalibrated with
  ``skcal.metrics.paired_comparison`` on NLL (difference, interval, p-value);
* the oracle is the candidate with the best test NLL.

Summary: per task and size the gap ``selector NLL / oracle NLL - 1`` (%),
averaged over every case; the cases where the selector is significantly
worse than uncalibrated (paired 90% interval of the NLL difference entirely
above 0); what it selects at 100 rows; the candidates it never picked.
Local calibration: on each task at 2,000 rows (seed 0), ``VQLocalCalibrator``
(defaults, with the task's head ``coef``/``intercept``, on the embeddings),
fitted in a subprocess with a time limit (``--local-timeout``), next to the
oracle of the score calibrators.

NLL is ``skcal.metrics.negative_log_likelihood`` (probabilities floored at
1e-12, as every method is scored), so on tasks with very large logits the
uncalibrated NLL is a little below the unfloored one of DATASETS.md.

Budget. Every size the pools allow (10,000 rows on four tasks) took 13.2
min on 2 cores with nothing else running (2026-12-02; the searches at
10,000 rows took 18-60 s each, at 2,000 rows 0.1-21 s), when the default
search skipped DirichletCalibratorCV above 20 classes (its inner grid took
219 s and 414 s of the searches at 2,000 rows of wordnet_supersenses and
kjv_books). Since its fits are 21 times faster the search runs it wherever
its work fits about a minute: ``--sizes 10000`` on the four tasks with
that many rows took 6.3 min (searches 35-149 s; 2026-12-03).
``--large-tasks`` limits the 10,000-row cases to the tasks it names
(default: all).
The bootstrap uses 200 resamples (p-values are then at least 0.00995).

Run:  python benchmarks/bench_select.py [--tasks satimage letter] [--sizes 100 500]
      [--repeats 3] [--n-resamples 200] [--threads 1] [--n-jobs 1]
      [--add StructuredVectorScaling ...]  (candidates judged as default ones)
      [--skip-local] [--local-timeout 300] [--json out.json]
The docs' table from a saved run:
      python benchmarks/bench_select.py --rst-from out.json
"""

import argparse
import json
import os
import platform
import subprocess
import sys
import time
import warnings
from collections import Counter
from datetime import datetime, timezone

import numpy as np
from _lib.datasets import DEFAULT_CAL_SIZES, available_tasks, load_task
from scipy.special import softmax

#: Seeds at the small sizes (``--repeats``); one seed above.
SMALL_SIZES = (100, 500)
#: The size of the local-calibration comparison.
LOCAL_SIZE = 2000
LARGE_SIZE = 10000
#: Tasks run at 10,000 rows by default ("all": every task whose pool allows;
#: a search there takes under about a minute, see the module docstring).
DEFAULT_LARGE_TASKS = ("all",)
CONFIDENCE = 0.9
ECE_BINS = 15


def _softmax(z):
    return softmax(z, axis=1)


def _interval(metric, y, proba, n_resamples, seed):
    from skcal.metrics import confidence_interval

    params = {"n_bins": ECE_BINS} if metric == "expected_calibration_error" else {}
    ci = confidence_interval(
        metric,
        y,
        proba,
        n_resamples=n_resamples,
        confidence_level=CONFIDENCE,
        random_state=seed,
        **params,
    )
    return [float(ci.estimate), float(ci.low), float(ci.high)]


def _scores(y, proba, n_resamples, seed):
    """Test NLL and ECE of one prediction, with their bootstrap intervals."""
    return {
        "nll": _interval("negative_log_likelihood", y, proba, n_resamples, seed),
        "ece": _interval("expected_calibration_error", y, proba, n_resamples, seed),
        "acc": float(np.mean(proba.argmax(axis=1) == y)),
    }


def _short(name):
    """A compact label of a candidate for the tables."""
    return {
        "IdentityCalibrator": "identity",
        "TemperatureScaling": "TS",
        "VectorScaling": "VS",
        "StructuredMatrixScaling": "SMS",
        "DirichletCalibratorCV": "DirCV",
        "SMARTCalibrator": "SMART",
        "IsotonicCalibrator": "isotonic",
        "BetaCalibrator": "beta",
        "SplineCalibrator": "spline",
    }.get(name, name)


# ------------------------------------------------------------------ one case
def add_candidates(names):
    """Make the search's default set end with ``names`` (skcal class names,
    default settings), in this process: a candidate is judged as if it were a
    default one (the default set's rules apply) before it is made one."""
    import skcal
    import skcal.model_selection._search as search

    defaults = search._default_candidates
    search._default_candidates = lambda: [
        *defaults(),
        *(getattr(skcal, name)() for name in names),
    ]


def default_candidates():
    """The default candidates of ``CalibratorSearchCV`` (its ``candidates=None``)."""
    from skcal.model_selection._search import _default_candidates

    return _default_candidates()


def _refit_templates(search, estimators):
    """Clones of ``estimators`` configured as ``search`` configures its candidates.

    Each clone gets the search's ``classes_`` and ``input``, and, when its own
    ``random_state`` is None, the seed the search draws for it: one
    ``randint(2**31 - 1)`` per candidate, in order, from ``random_state``
    (see ``CalibratorSearchCV``'s ``random_state``).
    """
    from sklearn.base import clone
    from sklearn.utils import check_random_state

    rng = check_random_state(search.random_state)
    templates = []
    for est in estimators:
        template = clone(est)
        params = template.get_params(deep=False)
        wrapper = {"classes": search.classes_, "input": search.input}
        template.set_params(**{k: v for k, v in wrapper.items() if k in params})
        seed = int(rng.randint(np.iinfo(np.int32).max))
        if "random_state" in params and params["random_state"] is None:
            template.set_params(random_state=seed)
        templates.append(template)
    return templates


def _refit_candidates(search, logits, y, z_test, y_test, args, seed):
    """Every default candidate refitted on the subset and scored on the test set.

    The refit the search would do: the same clone, with the search's classes
    and input and the seed the search gives it.
    """
    from sklearn.base import clone

    res = search.cv_results_
    names = [str(c) for c in res["candidate"]]
    templates = _refit_templates(search, default_candidates())
    candidates = {}
    for name, template, cv_score, reason in zip(
        names, templates, res["mean_test_score"], res["skipped_reason"]
    ):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            start = time.perf_counter()
            try:
                # the selected candidate's refit is the search's own (the same
                # fit; skipping it saves minutes for Dirichlet on many classes)
                if name == search.selected_:
                    est = search.best_calibrator_
                else:
                    est = clone(template).fit(logits, y)
                proba = np.asarray(est.predict_proba(z_test), dtype=np.float64)
                error = None
            except Exception as exc:  # recorded, the benchmark goes on
                proba, error = None, f"{type(exc).__name__}: {exc}"
            fit_s = time.perf_counter() - start
        entry = {
            "cv_score": None if np.isnan(cv_score) else float(cv_score),
            "skipped_reason": str(reason),
            "refit_s": search.refit_time_ if name == search.selected_ else fit_s,
            "error": error,
        }
        if proba is not None:
            entry.update(_scores(y_test, proba, args.n_resamples, seed))
        candidates[name] = entry
    return candidates


def run_case(task, n, seed, args):
    """Search, refits and test scores of one task / size / seed."""
    from skcal import CalibratorSearchCV
    from skcal.metrics import paired_comparison

    logits, _, y = task.calibration_subset(n, random_state=seed)
    y_test, z_test = task.test_labels, task.test_logits
    search = CalibratorSearchCV(random_state=seed, n_jobs=args.n_jobs)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        start = time.perf_counter()
        search.fit(logits, y)
        search_s = time.perf_counter() - start
    search_warnings = sorted({f"{w.category.__name__}: {w.message}" for w in caught})
    candidates = _refit_candidates(search, logits, y, z_test, y_test, args, seed)

    p_uncal = _softmax(z_test)
    p_sel = search.predict_proba(z_test)
    uncal = _scores(y_test, p_uncal, args.n_resamples, seed)
    selector = _scores(y_test, p_sel, args.n_resamples, seed)
    cmp = paired_comparison(
        "negative_log_likelihood",
        y_test,
        p_sel,
        p_uncal,
        n_resamples=args.n_resamples,
        confidence_level=CONFIDENCE,
        random_state=seed,
    )
    scored = {k: v for k, v in candidates.items() if "nll" in v}
    oracle = min(scored, key=lambda k: scored[k]["nll"][0])
    return {
        "task": task.name,
        "n_classes": task.n_classes,
        "size": n,
        "seed": seed,
        "search_s": search_s,
        "selected": search.selected_,
        "reason": search.selection_reason_,
        "search_warnings": search_warnings,
        "candidates": candidates,
        "uncalibrated": uncal,
        "selector": selector,
        "selector_vs_uncalibrated_nll": {
            "difference": float(cmp.difference),
            "low": float(cmp.low),
            "high": float(cmp.high),
            "p_value": float(cmp.p_value),
        },
        "significantly_worse": bool(cmp.low > 0),
        "oracle": oracle,
        "oracle_nll": scored[oracle]["nll"][0],
        "gap_pct": 100 * (selector["nll"][0] / scored[oracle]["nll"][0] - 1),
    }


def _ci(v, digits=4):
    return f"{v[0]:.{digits}f} [{v[1]:.{digits}f}, {v[2]:.{digits}f}]"


def print_case(r):
    print(
        f"\n{r['task']} ({r['n_classes']} classes), {r['size']} calibration rows, "
        f"seed {r['seed']}: search {r['search_s']:.1f} s, selected "
        f"{r['selected']}, oracle {r['oracle']}, gap {r['gap_pct']:+.2f}%"
    )
    print(f"  reason: {r['reason']}")
    width = max(len(k) for k in r["candidates"]) + 2
    print(
        f"  {'method':<{width}} {'cv score':>9}  {'test NLL [90% CI]':>27}  "
        f"{'test ECE [90% CI]':>27}  {'refit s':>7}"
    )
    rows = [("uncalibrated", None, r["uncalibrated"], None)]
    for name, c in r["candidates"].items():
        rows.append((name, c["cv_score"], c, c))
    rows.append(("selector", None, r["selector"], None))
    for name, cv, s, c in rows:
        mark = ""
        if name == r["selected"]:
            mark += "*"
        if name == r["oracle"]:
            mark += "o"
        label = f"{name}{mark}"
        cv_text = "" if cv is None else f"{cv:9.4f}"
        if c is not None and "nll" not in c:
            print(f"  {label:<{width}} {cv_text:>9}  failed on refit: {c['error']}")
            continue
        note = ""
        if c is not None and c["skipped_reason"]:
            note = "  (" + c["skipped_reason"].split(":")[0] + " by the search)"
        refit = "" if c is None else f"{c['refit_s']:7.2f}"
        print(
            f"  {label:<{width}} {cv_text:>9}  {_ci(s['nll']):>27}  "
            f"{_ci(s['ece']):>27}  {refit:>7}{note}"
        )
    d = r["selector_vs_uncalibrated_nll"]
    print(
        f"  selector - uncalibrated NLL: {d['difference']:+.4f} "
        f"[{d['low']:+.4f}, {d['high']:+.4f}], p = {d['p_value']:.3g}"
        + ("  SIGNIFICANTLY WORSE" if r["significantly_worse"] else "")
    )
    sys.stdout.flush()


# ------------------------------------------------------------------ local
def local_case(name, threads, n_resamples):
    """VQLocalCalibrator on one task at 2,000 rows, seed 0 (in a subprocess)."""
    import torch

    from skcal import VQLocalCalibrator

    torch.set_num_threads(threads)
    task = load_task(name)
    _, emb, y = task.calibration_subset(LOCAL_SIZE, random_state=0)
    vq = VQLocalCalibrator(
        coef=task.coef, intercept=task.intercept, random_state=0, device="cpu"
    )
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        vq.fit(emb, y)
    fit_s = time.perf_counter() - start
    proba = np.asarray(vq.predict_proba(task.test_embeddings), dtype=np.float64)
    out = _scores(task.test_labels, proba, n_resamples, 0)
    out.update(fit_s=fit_s, epochs=[int(e) for e in np.atleast_1d(vq.n_iter_)])
    return out


def run_local(name, args):
    """``local_case`` in a subprocess killed after ``--local-timeout`` seconds."""
    cmd = [
        sys.executable,
        os.path.abspath(__file__),
        "--local-case",
        name,
        "--threads",
        str(args.threads),
        "--n-resamples",
        str(args.n_resamples),
    ]
    start = time.perf_counter()
    try:
        out = subprocess.run(
            cmd, capture_output=True, text=True, timeout=args.local_timeout
        )
    except subprocess.TimeoutExpired:
        return {
            "skipped": f"VQLocalCalibrator took more than {args.local_timeout:g} s "
            f"(--local-timeout) on {LOCAL_SIZE} rows; stopped"
        }
    if out.returncode != 0:
        tail = out.stderr.strip().splitlines()[-1:] or ["no output"]
        return {"skipped": f"VQLocalCalibrator failed: {tail[0]}"}
    r = json.loads(out.stdout.strip().splitlines()[-1])
    r["wall_s"] = time.perf_counter() - start
    return r


# ------------------------------------------------------------------ summary
def _summary_table(cases):
    """Text lines and rows of the summary table: one per task and size."""
    lines, cells = [], {}
    for r in cases:
        cells.setdefault((r["task"], r["size"]), []).append(r)
    lines.append(
        "\nSummary: test NLL per task and size (mean over seeds; selector and "
        "oracle refitted on the whole subset)"
    )
    header = (
        f"{'task':<20} {'C':>3} {'rows':>6} {'seeds':>5} {'uncal':>8} {'selector':>8} "
        f"{'oracle':>8} {'gap %':>7} {'worse':>5}  selected (oracle)"
    )
    lines.append(header)
    table = []
    for (task, size), rs in cells.items():
        row = {
            "task": task,
            "n_classes": rs[0]["n_classes"],
            "size": size,
            "seeds": len(rs),
            "uncalibrated_nll": float(
                np.mean([r["uncalibrated"]["nll"][0] for r in rs])
            ),
            "selector_nll": float(np.mean([r["selector"]["nll"][0] for r in rs])),
            "oracle_nll": float(np.mean([r["oracle_nll"] for r in rs])),
            "gap_pct": float(np.mean([r["gap_pct"] for r in rs])),
            "n_significantly_worse": int(sum(r["significantly_worse"] for r in rs)),
            "selected": [r["selected"] for r in rs],
            "oracle": [r["oracle"] for r in rs],
            "search_s": float(np.mean([r["search_s"] for r in rs])),
        }
        table.append(row)
        picks = ", ".join(
            f"{_short(s)} ({_short(o)})" for s, o in zip(row["selected"], row["oracle"])
        )
        lines.append(
            f"{task:<20} {row['n_classes']:>3} {size:>6} {len(rs):>5} "
            f"{row['uncalibrated_nll']:8.4f} {row['selector_nll']:8.4f} "
            f"{row['oracle_nll']:8.4f} {row['gap_pct']:+7.2f} "
            f"{row['n_significantly_worse']:>5}  {picks}"
        )
    return lines, table


def _summary_totals(cases, table, candidate_names):
    """The targets over every case, as text lines and a dict."""
    lines = []
    gaps = np.array([r["gap_pct"] for r in cases])
    cell_gaps = np.array([row["gap_pct"] for row in table])
    worse = [
        f"{r['task']} n={r['size']} seed={r['seed']}"
        for r in cases
        if r["significantly_worse"]
    ]
    at_100 = Counter(r["selected"] for r in cases if r["size"] == 100)
    picked = {r["selected"] for r in cases}
    never = [n for n in candidate_names if n not in picked]
    out = {
        "table": table,
        "mean_gap_pct_over_cases": float(gaps.mean()) if gaps.size else None,
        "mean_gap_pct_over_cells": float(cell_gaps.mean()) if cell_gaps.size else None,
        "max_gap_pct": float(gaps.max()) if gaps.size else None,
        "n_cases": len(cases),
        "significantly_worse_than_uncalibrated": worse,
        "selected_at_100": dict(at_100),
        "never_selected": never,
        "selection_counts": dict(Counter(r["selected"] for r in cases)),
        "oracle_counts": dict(Counter(r["oracle"] for r in cases)),
    }
    if gaps.size:
        worst = cases[int(gaps.argmax())]
        lines.append(
            f"\ngap to the oracle: mean {gaps.mean():+.2f}% over {len(cases)} cases "
            f"({cell_gaps.mean():+.2f}% over the {len(table)} task/size cells; "
            f"target within 1%); largest {gaps.max():+.2f}% ({worst['task']}, "
            f"{worst['size']} rows, seed {worst['seed']})"
        )
    lines.append(
        f"selector significantly worse than uncalibrated (paired 90% interval of the "
        f"NLL difference above 0): {len(worse)} case(s)"
        + (f": {'; '.join(worse)}" if worse else " (target: none)")
    )
    if at_100:
        lines.append(
            "selected at 100 rows: "
            + ", ".join(f"{k} x{v}" for k, v in at_100.most_common())
            + " (target: TS or identity)"
        )
    lines.append(
        "selected overall: "
        + ", ".join(
            f"{k} x{v}" for k, v in Counter(r["selected"] for r in cases).most_common()
        )
    )
    lines.append(
        "oracle overall: "
        + ", ".join(
            f"{k} x{v}" for k, v in Counter(r["oracle"] for r in cases).most_common()
        )
    )
    lines.append("never selected: " + (", ".join(never) if never else "none"))
    return lines, out


def _local_lines(local, cases):
    """Text lines of the local-calibration comparison (VQ against the oracle)."""
    lines = []
    lines.append(
        f"\nLocal calibration at {LOCAL_SIZE} rows (seed 0), test NLL / ECE "
        "[90% CI]: VQLocalCalibrator on the embeddings vs the oracle of the "
        "score calibrators"
    )
    for task, lr in local.items():
        case = next(
            (
                r
                for r in cases
                if r["task"] == task and r["size"] == LOCAL_SIZE and r["seed"] == 0
            ),
            None,
        )
        ref = ""
        if case is not None:
            o = case["candidates"][case["oracle"]]
            ref = (
                f" | oracle {_short(case['oracle'])} NLL {_ci(o['nll'])} "
                f"ECE {_ci(o['ece'])}"
            )
        if "skipped" in lr:
            lines.append(f"{task:<20} VQ skipped: {lr['skipped']}{ref}")
        else:
            lines.append(
                f"{task:<20} VQ NLL {_ci(lr['nll'])} ECE {_ci(lr['ece'])} "
                f"acc {lr['acc']:.4f} (fit {lr['fit_s']:.0f} s){ref}"
            )
    return lines


def summarise(cases, local, candidate_names):
    """The summary table and the targets, as text lines and a dict."""
    lines, table = _summary_table(cases)
    total_lines, out = _summary_totals(cases, table, candidate_names)
    lines += total_lines
    if local:
        lines += _local_lines(local, cases)
    return lines, out


def rst_table(record) -> str:
    """The docs' table ("Choosing a calibrator") of a saved run, as RST.

    Per task and size: the NLL of seed 0 with its interval (uncalibrated,
    selector, oracle), the gap of seed 0 and, at the sizes with several
    subsets, its mean over them, and the selected / oracle candidate of
    every subset.
    """
    cells = {}
    for r in record["cases"]:
        cells.setdefault((r["task"], r["size"]), []).append(r)
    rows = []
    for (task, size), rs in cells.items():
        rs = sorted(rs, key=lambda r: r["seed"])
        first = rs[0]
        oracle = first["candidates"][first["oracle"]]["nll"]
        gap = f"{first['gap_pct']:.2f}"
        if len(rs) > 1:
            gap += f" ({np.mean([r['gap_pct'] for r in rs]):.2f})"
        rows.append(
            [
                f"{task} ({first['n_classes']})",
                f"{size:,}",
                _ci(first["uncalibrated"]["nll"]),
                _ci(first["selector"]["nll"]),
                _ci(oracle),
                gap,
                ", ".join(
                    f"{_short(r['selected'])} / {_short(r['oracle'])}" for r in rs
                ),
            ]
        )
    head = [
        "task (classes)",
        "rows",
        "uncalibrated NLL",
        "selector NLL",
        "oracle NLL",
        "gap %",
        "selected / oracle, per subset",
    ]
    widths = [max(len(x) for x in col) for col in zip(head, *rows)]
    rule = "  ".join("=" * w for w in widths)

    def line(cells):
        return "  ".join(c.ljust(w) for c, w in zip(cells, widths)).rstrip()

    return "\n".join([rule, line(head), rule, *map(line, rows), rule])


# ------------------------------------------------------------------ main
def build_parser():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--tasks", nargs="+", default=None, help="default: all available"
    )
    parser.add_argument(
        "--sizes",
        nargs="+",
        type=int,
        default=None,
        help=f"calibration sizes (default {DEFAULT_CAL_SIZES}, where the pool allows)",
    )
    parser.add_argument(
        "--repeats",
        type=int,
        default=3,
        help=f"random subsets (seeds 0..R-1) at {SMALL_SIZES} rows; 1 above",
    )
    parser.add_argument(
        "--large-tasks",
        nargs="*",
        default=list(DEFAULT_LARGE_TASKS),
        help=f"tasks run at {LARGE_SIZE} rows when --sizes is not given "
        f"(default {' '.join(DEFAULT_LARGE_TASKS)}); 'all' for every task",
    )
    parser.add_argument("--n-resamples", type=int, default=200)
    parser.add_argument("--threads", type=int, default=1, help="torch threads")
    parser.add_argument("--n-jobs", type=int, default=None, help="passed to the search")
    parser.add_argument("--skip-local", action="store_true")
    parser.add_argument(
        "--add",
        nargs="+",
        default=(),
        metavar="CLASS",
        help="skcal calibrators appended to the default candidates for this run",
    )
    parser.add_argument("--local-timeout", type=float, default=300.0)
    parser.add_argument("--json", default=None, help="write everything to this file")
    parser.add_argument("--local-case", default=None, help=argparse.SUPPRESS)
    parser.add_argument(
        "--rst-from", default=None, help="print the docs' table of a saved --json run"
    )
    return parser


def start_record(args, names):
    """Print the run's header; the record that ``--json`` writes, without cases."""
    import torch

    import skcal

    started = datetime.now(timezone.utc)
    print(
        f"bench_select {started:%Y-%m-%d %H:%M} UTC; skcal {skcal.__version__}, "
        f"torch {torch.__version__}, threads {torch.get_num_threads()}, n_jobs "
        f"{args.n_jobs}; {os.cpu_count()} CPUs, load average {os.getloadavg()}; "
        f"{platform.processor() or platform.machine()}"
    )
    print(f"command: python benchmarks/bench_select.py {' '.join(sys.argv[1:])}")
    code = _code_version()
    print(
        f"code: commit {code['commit']}; skcal files changed since: "
        f"{', '.join(code['skcal_changed']) or 'none'}"
    )
    print(
        f"tasks {names}; repeats {args.repeats} at {SMALL_SIZES} rows; "
        f"{args.n_resamples} bootstrap resamples; {int(100 * CONFIDENCE)}% intervals"
    )
    print("'*' selected, 'o' oracle (best test NLL among the candidates)")
    sys.stdout.flush()
    record = {
        "command": sys.argv,
        "code": code,
        "started_utc": started.isoformat(),
        "load_average_start": os.getloadavg(),
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "skcal_version": skcal.__version__,
        "settings": {
            k: v for k, v in vars(args).items() if k not in ("local_case", "json")
        },
        "cut": [],
        "cases": [],
        "local": {},
    }
    return started, record


def run_task(name, args, record, large):
    """Every case of one task, then its local comparison, into ``record``."""
    task = load_task(name)
    sizes = task.calibration_sizes(args.sizes or DEFAULT_CAL_SIZES)
    if args.sizes is None and "all" not in large and name not in large:
        if LARGE_SIZE in sizes:
            record["cut"].append(
                f"{name}: {LARGE_SIZE} rows not run (not in --large-tasks)"
            )
            print(f"\n{name}: {LARGE_SIZE} rows not run (not in --large-tasks)")
        sizes = tuple(s for s in sizes if s != LARGE_SIZE)
    for n in sizes:
        for seed in range(args.repeats if n in SMALL_SIZES else 1):
            r = run_case(task, n, seed, args)
            record["cases"].append(r)
            print_case(r)
            if args.json:
                _write(args.json, record)
    if not args.skip_local and LOCAL_SIZE <= task.n_cal:
        record["local"][name] = lr = run_local(name, args)
        print(f"\n{name}: VQLocalCalibrator at {LOCAL_SIZE} rows: {lr}")
    elif args.skip_local:
        pass
    else:
        record["local"][name] = {"skipped": f"pool smaller than {LOCAL_SIZE}"}
    sys.stdout.flush()


def finish(record, started, args):
    """The summary, printed and added to ``record`` (written with ``--json``)."""
    candidate_names = [type(c).__name__ for c in default_candidates()]
    lines, summary = summarise(record["cases"], record["local"], candidate_names)
    record["summary"] = summary
    finished = datetime.now(timezone.utc)
    record["finished_utc"] = finished.isoformat()
    record["load_average_end"] = os.getloadavg()
    record["wall_s"] = (finished - started).total_seconds()
    print("\n".join(lines))
    print(
        f"\nwall time {record['wall_s'] / 60:.1f} min; load average at the end "
        f"{os.getloadavg()} ({os.cpu_count()} CPUs; other jobs were running)"
    )
    if args.json:
        _write(args.json, record)
        print(f"wrote {args.json}")


def main(argv=None):
    args = build_parser().parse_args(argv)
    if args.rst_from is not None:
        with open(args.rst_from) as f:
            print(rst_table(json.load(f)))
        return

    import torch

    torch.set_num_threads(args.threads)
    if args.local_case is not None:
        print(json.dumps(local_case(args.local_case, args.threads, args.n_resamples)))
        return

    names = args.tasks or list(available_tasks())
    add_candidates(args.add)
    started, record = start_record(args, names)
    large = set(args.large_tasks)
    for name in names:
        run_task(name, args, record, large)
    finish(record, started, args)


def _code_version():
    """The git commit of the checkout, and the files of skcal changed since."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

    def git(*cmd):
        try:
            out = subprocess.run(
                ["git", "-C", root, *cmd], capture_output=True, text=True, timeout=30
            )
        except (OSError, subprocess.TimeoutExpired):
            return ""
        return out.stdout.rstrip() if out.returncode == 0 else ""

    changed = git("status", "--porcelain", "--", "skcal")
    return {
        "commit": git("rev-parse", "HEAD").strip() or None,
        "skcal_changed": [line[3:] for line in changed.splitlines()],
    }


def _write(path, record):
    tmp = f"{path}.tmp"
    with open(tmp, "w") as f:
        json.dump(record, f, indent=1)
    os.replace(tmp, path)


if __name__ == "__main__":
    main()
