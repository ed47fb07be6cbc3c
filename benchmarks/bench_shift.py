"""Label-shift adaptation on the eight real tasks: EM, BBSE and RLLS (issue 38).

For each task (``_lib/datasets``), the calibrators are fitted on the
calibration pool (``--n-cal`` rows of it, 5,000 by default) inside
``skcal.shift.PriorShiftAdapter``; target sets are then drawn from the test
set with shifted class priors and the adapter estimates them from the
unlabeled target probabilities (``adapt``). The shifts, as in Alexandari,
Kundaje and Shrikumar (ICML 2020):

* ``dir0.1``, ``dir1``, ``dir10``: target priors ~ Dirichlet(alpha, ..., alpha);
* ``tweak0.5``: one class (drawn per seed) gets prior 0.5, the others share the
  rest in proportion to their source priors;
* ``none``: the target priors are the source ones (an estimator must not
  invent shift: adaptation should not make the NLL worse).

A target set of ``n`` rows draws its class counts from a multinomial of the
target priors and samples each class's rows from the test set with
replacement. Reported, as means over the seeds: the mean squared error of
the estimated priors against the target set's class frequencies, and the
target NLL and accuracy of the adapted probabilities, for EM on temperature
scaling (TS), bias-corrected TS (BCTS), vector scaling (VS) and structured
matrix scaling (SMS), BBSE and RLLS (on BCTS), each with skcal's defaults
(EM from the mean calibrated probability of the calibration rows, with one
pseudo-row per class toward it; every method behind the BIC shift test),
the papers' maximum-likelihood EM on BCTS without the test, and no
adaptation (BCTS). The authors' package ``abstention`` (when
installed) runs EM and BBSE on the same BCTS probabilities: the largest
absolute difference of its priors from skcal's papers' estimators.
Also printed: the NLL change that adaptation causes when there is no shift,
per task; the target sets where a class holding at least 1% of the rows got
less than 1% of its true prior (a collapsed class, whose rows' NLL
explodes); and the EM runs stopped by ``max_iter``. BBSE and RLLS refuse a
task whose confusion matrix is singular; the summary tables average the
tasks where every method ran.

Run:  python benchmarks/bench_shift.py [--tasks letter satimage] [--seeds 10]
          [--sizes 500 5000] [--shifts dir0.1 dir1 dir10 tweak0.5 none]
          [--n-cal 5000] [--per-task] [--json FILE]
      python benchmarks/bench_shift.py --from-json FILE [--per-task] [--seeds 3]
"""

import argparse
import json
import sys
import time
import warnings

import numpy as np
from _lib.datasets import TASK_NAMES

SHIFTS = ("dir0.1", "dir1", "dir10", "tweak0.5", "none")
#: The papers' estimators: maximum-likelihood EM, no shift test, no reliability check.
PAPER = {"prior_strength": 0, "shift_test": None, "reliability_check": False}
#: ... and in an adapter, the label frequencies as the source priors
#: (Saerens et al.)
PAPER_ADAPTER = {**PAPER, "source_priors": "labels"}
#: (row name, calibrator class name, estimation method, adapter settings):
#: skcal's defaults (EM with C pseudo-rows from the mean calibrated
#: probabilities, the BIC shift test) and, for comparison, the papers' EM on
#: BCTS
METHODS = (
    ("EM+TS", "TemperatureScaling", "em", {}),
    ("EM+BCTS", "BiasCorrectedTemperatureScaling", "em", {}),
    ("EM+VS", "VectorScaling", "em", {}),
    ("EM+SMS", "StructuredMatrixScaling", "em", {}),
    ("BBSE (BCTS)", "BiasCorrectedTemperatureScaling", "bbse", {}),
    ("RLLS (BCTS)", "BiasCorrectedTemperatureScaling", "rlls", {}),
    ("ML-EM+BCTS, no test", "BiasCorrectedTemperatureScaling", "em", PAPER_ADAPTER),
)
NONE = "none (BCTS)"


def build_parser():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", nargs="+", default=list(TASK_NAMES))
    parser.add_argument("--seeds", type=int, default=10, help="seeds per setting")
    parser.add_argument("--sizes", type=int, nargs="+", default=[500, 5000])
    parser.add_argument("--shifts", nargs="+", default=list(SHIFTS))
    parser.add_argument("--n-cal", type=int, default=5000, help="calibration rows")
    parser.add_argument(
        "--per-task", action="store_true", help="also print one table per task"
    )
    parser.add_argument("--json", default=None, metavar="FILE", help="write rows")
    parser.add_argument(
        "--from-json",
        default=None,
        metavar="FILE",
        help="print the tables of the rows a --json run wrote (runs nothing)",
    )
    return parser


def target_priors(shift, source, rng):
    """The class priors of one target set under ``shift``."""
    n_classes = len(source)
    if shift == "none":
        return source.copy()
    if shift.startswith("dir"):
        return rng.dirichlet(np.full(n_classes, float(shift[3:])))
    if shift.startswith("tweak"):
        rho, k = float(shift[5:]), rng.integers(n_classes)
        q = source * (1 - rho) / (1 - source[k])
        q[k] = rho
        return q
    raise ValueError(f"unknown shift {shift!r}; known: {SHIFTS}")


def draw_target(y_test, priors, n, rng):
    """Row indices of a target set of ``n`` rows with class ``priors``.

    The class counts are multinomial; each class's rows are drawn from the
    test rows of that class with replacement (a class without test rows gets
    prior 0).
    """
    n_classes = len(priors)
    present = np.bincount(y_test, minlength=n_classes) > 0
    q = np.where(present, priors, 0.0)
    counts = rng.multinomial(n, q / q.sum())
    rows = [
        rng.choice(np.flatnonzero(y_test == k), size=c, replace=True)
        for k, c in enumerate(counts)
        if c
    ]
    return np.concatenate(rows)


def nll(y, proba):
    return float(-np.mean(np.log(np.clip(proba[np.arange(len(y)), y], 1e-300, None))))


def fit_adapters(L_cal, y_cal):
    """``{row name: PriorShiftAdapter}`` fitted on the calibration rows."""
    import skcal
    from skcal.shift import PriorShiftAdapter

    adapters = {}
    for name, cls, method, settings in METHODS:
        calibrator = getattr(skcal, cls)(device="cpu")
        adapter = PriorShiftAdapter(
            calibrator, method=method, random_state=0, **settings
        )
        start = time.perf_counter()
        adapters[name] = adapter.fit(L_cal, y_cal)
        print(f"  fitted {name} in {time.perf_counter() - start:.1f} s", flush=True)
    return adapters


def abstention_check(adapter, L_cal, y_cal, P_target):
    """Largest |difference| of abstention's EM and BBSE priors from skcal's.

    Same inputs: the BCTS probabilities of the calibration rows (with their
    labels, whose frequencies are the source priors) and of the target rows.
    Returns ``{"EM": diff, "BBSE": diff}`` (NaN without abstention).
    """
    try:
        from abstention.label_shift import BBSEImbalanceAdapter, EMImbalanceAdapter
    except ImportError:
        return {"EM": float("nan"), "BBSE": float("nan")}
    from skcal.shift import estimate_class_priors

    P_cal = adapter.calibrator_.predict_proba(L_cal)
    C = P_cal.shape[1]
    onehot = np.eye(C)[np.searchsorted(adapter.classes_, y_cal)]
    source = onehot.mean(axis=0)
    em = EMImbalanceAdapter(
        estimate_priors_from_valid_labels=True, tolerance=1e-10, max_iterations=10_000
    )(P_target, P_cal, valid_labels=onehot)
    try:
        bbse = BBSEImbalanceAdapter()(onehot, P_target, P_cal)
    except np.linalg.LinAlgError:  # a singular confusion matrix (skcal refuses)
        return {"EM": _em_diff(em, source, P_target), "BBSE": float("nan")}
    ours = estimate_class_priors(
        P_target,
        source_priors=source,
        method="bbse",
        y_proba_source=P_cal,
        y_source=y_cal,
        labels=adapter.classes_,
        **PAPER,
    ).priors
    ref = bbse.multipliers * source
    diff = float(np.max(np.abs(ours - ref / ref.sum())))
    return {"EM": _em_diff(em, source, P_target), "BBSE": diff}


def _em_diff(em, source, P_target):
    """Largest |difference| of abstention's EM priors from skcal's."""
    from skcal.shift import estimate_class_priors

    ours = estimate_class_priors(
        P_target, source_priors=source, tol=1e-10, max_iter=10_000, **PAPER
    ).priors
    return float(np.max(np.abs(ours - em.multipliers * source)))


def _row(priors, true_priors, y, proba, converged=True):
    """The scores of one estimate; ``collapsed``: a class holding at least 1%
    of the target rows got less than 1% of its true prior (the NLL of its
    rows explodes)."""
    big = true_priors >= 0.01
    return {
        "mse": float(np.mean((priors - true_priors) ** 2)),
        "nll": nll(y, proba),
        "acc": float(np.mean(proba.argmax(axis=1) == y)),
        "converged": bool(converged),
        "collapsed": bool(np.any(priors[big] < 0.01 * true_priors[big])),
    }


def run_setting(adapters, L_test, y_test, idx, true_priors):
    """One target set: ``{row name: {mse, nll, acc, converged}}``.

    Besides each adapter's row, ``"<name> unadapted"`` holds its calibrator's
    probabilities without adaptation, and :data:`NONE` those of BCTS.
    """
    out, X, y = {}, L_test[idx], y_test[idx]
    for name, adapter in adapters.items():
        try:
            proba = adapter.adapt(X).predict_proba(X)
        except ValueError as exc:  # BBSE, RLLS: a singular confusion matrix
            nan = float("nan")
            out[name] = {"mse": nan, "nll": nan, "acc": nan, "converged": True}
            out[name]["collapsed"] = False
            out[name]["refused"] = str(exc).split(":")[0]
        else:
            est = adapter.prior_estimate_
            out[name] = _row(adapter.priors_, true_priors, y, proba, est.converged)
            out[name]["detected"] = est.shift_detected
        before = adapter.calibrator_.predict_proba(X)
        source = adapter.source_priors_
        out[f"{name} unadapted"] = _row(source, true_priors, y, before)
    out[NONE] = out["EM+BCTS unadapted"]
    return out


def run_task(name, args, records):
    """Every shift, size and seed of task ``name``; appends rows to ``records``."""
    from _lib.datasets import load_task

    task = load_task(name)
    L_cal, _, y_cal = task.calibration_subset(
        min(args.n_cal, task.n_cal), random_state=0
    )
    L_test, y_test = task.test_logits, task.test_labels
    print(f"{name}: {len(y_cal)} calibration rows, {task.n_classes} classes")
    adapters = fit_adapters(L_cal, y_cal)
    source = adapters["EM+BCTS"].source_priors_
    for shift in args.shifts:
        for n in args.sizes:
            for seed in range(args.seeds):
                rng = np.random.default_rng([seed, n, SHIFTS.index(shift)])
                idx = draw_target(y_test, target_priors(shift, source, rng), n, rng)
                true = np.bincount(y_test[idx], minlength=len(source)) / len(idx)
                result = run_setting(adapters, L_test, y_test, idx, true)
                check = {}
                if seed == 0:
                    P = adapters["EM+BCTS"].calibrator_.predict_proba(L_test[idx])
                    check = abstention_check(adapters["EM+BCTS"], L_cal, y_cal, P)
                where = dict(task=name, shift=shift, n=n, seed=seed)
                for method, row in result.items():
                    if method == "EM+BCTS":
                        row.update({f"abstention_{k}": v for k, v in check.items()})
                    records.append({**where, "method": method, **row})
        print(f"  {shift} done", flush=True)


def mean_of(records, key, **where):
    """Mean of ``key`` over the records matching ``where`` (NaN if none)."""
    values = [r[key] for r in records if all(r[k] == v for k, v in where.items())]
    return float(np.mean(values)) if values else float("nan")


def table(records, key, fmt, tasks, args, title):
    """A markdown table: rows the methods, columns shift x size, cells the
    means over ``tasks`` and the seeds."""
    names = [m[0] for m in METHODS] + [NONE]
    cols = [(s, n) for s in args.shifts for n in args.sizes]
    print(f"\n{title}\n")
    print("| method | " + " | ".join(f"{s}, n={n}" for s, n in cols) + " |")
    print("|---" * (len(cols) + 1) + "|")
    for name in names:
        cells = [
            np.mean(
                [
                    mean_of(records, key, task=t, shift=s, n=n, method=name)
                    for t in tasks
                ]
            )
            for s, n in cols
        ]
        print(f"| {name} | " + " | ".join(format(c, fmt) for c in cells) + " |")


def common_tasks(records, tasks):
    """The tasks where every method ran (BBSE and RLLS refuse a singular
    confusion matrix), and a note naming the others."""
    refused = {r["task"] for r in records if "refused" in r}
    common = [t for t in tasks if t not in refused]
    note = ""
    if refused:
        note = (
            f"; BBSE and RLLS refused {', '.join(t for t in tasks if t in refused)} "
            "(a singular confusion matrix), left out here"
        )
    return common, note


def wins(records, tasks, args):
    """Settings where EM+BCTS or EM+VS has a lower MSE than BBSE and RLLS."""
    total = won = refused = 0
    for t in tasks:
        for s in args.shifts:
            for n in args.sizes:
                m = {
                    name: mean_of(records, "mse", task=t, shift=s, n=n, method=name)
                    for name in ("EM+BCTS", "EM+VS", "BBSE (BCTS)", "RLLS (BCTS)")
                }
                if np.isnan(m["BBSE (BCTS)"]) or np.isnan(m["RLLS (BCTS)"]):
                    refused += 1
                    continue
                best_em = min(m["EM+BCTS"], m["EM+VS"])
                won += best_em < min(m["BBSE (BCTS)"], m["RLLS (BCTS)"])
                total += 1
    print(
        f"\nEM+BCTS or EM+VS has a lower prior MSE than both BBSE and RLLS in "
        f"{won} of {total} settings (task x shift x size)"
        + (f"; BBSE and RLLS refused {refused} more." if refused else ".")
    )
    refusals = sorted({(r["task"], r["refused"]) for r in records if "refused" in r})
    for task, why in refusals:
        print(f"* {task}: BBSE and RLLS refused: {why}.")


def no_shift_guard(records, tasks, args):
    """NLL after minus before adaptation when the true shift is zero, per task
    (mean over sizes and seeds, and the largest)."""
    if "none" not in args.shifts:
        return
    before = {
        (r["method"], r["task"], r["n"], r["seed"]): r["nll"]
        for r in records
        if r["shift"] == "none"
    }
    print(
        "\nNo shift: target NLL after adaptation minus before (same calibrator), "
        "mean (max) over sizes and seeds\n"
    )
    print("| method | " + " | ".join(tasks) + " |")
    print("|---" * (len(tasks) + 1) + "|")
    for name, *_ in METHODS:
        cells = []
        for t in tasks:
            diffs = np.array(
                [
                    r["nll"] - before[(f"{name} unadapted", t, r["n"], r["seed"])]
                    for r in records
                    if r["shift"] == "none" and r["method"] == name and r["task"] == t
                ]
            )
            ok = not diffs.size or np.isnan(diffs).any()
            cells.append(
                "refused" if ok else f"{diffs.mean():+.4f} ({diffs.max():+.4f})"
            )
        print(f"| {name} | " + " | ".join(cells) + " |")


def collapsed(records, tasks, args):
    """How many target sets each method gave a present class ~0 prior."""
    print(
        "\nTarget sets where a class holding >= 1% of the rows got < 1% of its "
        "true prior (of "
        f"{len(args.shifts) * len(args.sizes) * args.seeds} per task)\n"
    )
    print("| method | " + " | ".join(tasks) + " |")
    print("|---" * (len(tasks) + 1) + "|")
    for name in [m[0] for m in METHODS] + [NONE]:
        counts = [
            sum(
                r["collapsed"]
                for r in records
                if r["task"] == t and r["method"] == name
            )
            for t in tasks
        ]
        print(f"| {name} | " + " | ".join(map(str, counts)) + " |")


def abstention_table(records, tasks):
    print("\nabstention 0.1.3 against skcal on the same BCTS probabilities\n")
    print("| task | max abs diff EM | max abs diff BBSE |\n|---|---|---|")
    for t in tasks:
        rows = [r for r in records if r["task"] == t and "abstention_EM" in r]
        em = max((r["abstention_EM"] for r in rows), default=float("nan"))
        bb = max((r["abstention_BBSE"] for r in rows), default=float("nan"))
        print(f"| {t} | {em:.1e} | {bb:.1e} |")


def detections(records, args):
    """The share of target sets where the shift test kept the estimate."""
    cols = [(s, n) for s in args.shifts for n in args.sizes]
    print("\nShift detected (BIC test), % of target sets over the tasks and seeds\n")
    print("| method | " + " | ".join(f"{s}, n={n}" for s, n in cols) + " |")
    print("|---" * (len(cols) + 1) + "|")
    for name, *_ in METHODS:
        cells = []
        for s, n in cols:
            flags = [
                r["detected"]
                for r in records
                if r["method"] == name
                and r["shift"] == s
                and r["n"] == n
                and "detected" in r
            ]
            cells.append(f"{100 * np.mean(flags):.0f}" if flags else "-")
        print(f"| {name} | " + " | ".join(cells) + " |")


def report(records, tasks, args):
    if args.per_task:
        for t in tasks:
            table(records, "mse", ".2e", [t], args, f"{t}: prior MSE")
            table(records, "nll", ".4f", [t], args, f"{t}: target NLL")
    common, note = common_tasks(records, tasks)
    where = f"mean over {len(common)} tasks and {args.seeds} seeds{note}"
    if common:
        table(records, "mse", ".2e", common, args, f"Prior MSE ({where})")
        table(records, "nll", ".4f", common, args, f"Target NLL ({where})")
        table(records, "acc", ".4f", common, args, f"Target accuracy ({where})")
    wins(records, tasks, args)
    no_shift_guard(records, tasks, args)
    detections(records, args)
    collapsed(records, tasks, args)
    failed = [r for r in records if not r["converged"]]
    which = ", ".join(sorted({r["method"] + " " + r["shift"] for r in failed}))
    which = f": {which}" if which else ""
    print(f"\nEM stopped at max_iter on {len(failed)} target sets{which}")
    abstention_table(records, tasks)


def main(argv=None):
    parser = build_parser()
    args = parser.parse_args(argv)
    for shift in args.shifts:
        if shift != "none" and not shift.startswith(("dir", "tweak")):
            parser.error(f"unknown shift {shift!r}; e.g. {list(SHIFTS)}")
    unknown = sorted(set(args.tasks) - set(TASK_NAMES))
    if unknown:
        parser.error(f"unknown tasks {unknown}; known: {list(TASK_NAMES)}")
    if args.from_json:
        with open(args.from_json) as f:
            records = json.load(f)
        report(records, list(dict.fromkeys(r["task"] for r in records)), args)
        return 0
    records, start = [], time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # EM's ConvergenceWarning: counted
        for name in args.tasks:
            run_task(name, args, records)
    report(records, args.tasks, args)
    print(f"\n{time.perf_counter() - start:.0f} s in all")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(records, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
