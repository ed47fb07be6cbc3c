"""The seed papers' claims on real data: the VQ paper's Table 6 and SMART's Figure 4.

Both parts run on the real tasks of ``benchmarks/_lib/datasets`` (see
``DATASETS.md``: tabular, image and text models, 6 to 66 classes, each a
trained MLP whose last hidden layer gives the embeddings and whose linear head
gives the logits). Every number is on the task's held-out test set, mean +-
std over ``--seeds`` random calibration subsets of the task's pool (seed s
draws subset s and seeds every calibrator with s).

Part ``table`` ("Divide et Calibra", Table 6 format). At one calibration size
(``--size``, 2,000 rows by default), every skcal calibrator with its defaults:
the score calibrators on the logits, the local ones (KCal, Local Nets, ProCal,
VQ) on the embeddings, Local Nets, ProCal and VQ given the network's head
(``coef``/``intercept``; VQ's default fine-tunes it or trains a new head,
whichever has the lower validation loss; VQ-new is the paper's new head,
VQ-frz its frozen-head ablation). Columns as in the paper: LCE and
MLCE (bandwidth 10, 15 bins, in one ``LocalSpace``, standardise + PCA-50, fitted on the
calibration embeddings, the same space for every method), ECCE (the paper's
binned mean), ECE (classwise, as the paper's tables), then top-label ECE,
accuracy (ACC) and NLL. The paper's targets are checked per task: does VQ
have the lowest mean LCE of all methods, and is its accuracy within 0.2
points of the uncalibrated network's?

Part ``smart`` (SMART's Figure 4). Top-label ECE (15 equal-width bins) and NLL
of temperature scaling, PTS, spline and SMART by calibration-set size
(``--smart-sizes``, 50 to 10,000 rows where the pool allows), with the
uncalibrated network for reference. For each task and size, SMART's paired
difference to TS over the seeds (mean +- std of ``ECE_SMART - ECE_TS``); the
summary counts the tasks where SMART's mean ECE is at or below TS's.

Run:  python benchmarks/bench_papers.py [--part table|smart|both]
      [--tasks letter satimage ...] [--size 2000] [--seeds 5]
      [--methods TS VQ ...] [--smart-sizes 50 100 500 2000 10000]
      [--threads 1] [--json out.json]
"""

import argparse
import json
import os
import platform
import sys
import time
import warnings
from datetime import datetime, timezone

import numpy as np
from _lib.calibrators import table_methods
from _lib.datasets import available_tasks, load_task
from scipy.special import softmax

SCORE_COLUMNS = ("ECCE", "ECE", "topECE", "ACC", "NLL")
#: LCE bandwidths: the paper's 10, and 2 (see the module docstring).
DEFAULT_BANDWIDTHS = (10.0, 2.0)
SMART_METHODS = ("none", "TS", "PTS", "spline", "SMART")
DEFAULT_SMART_SIZES = (50, 100, 500, 2000, 10000)
ECE_BINS = 15
#: How much accuracy VQ may lose against the uncalibrated network (issue 18).
ACC_TOLERANCE = 0.002


def _softmax(z):
    return softmax(z, axis=1)


def smart_methods(seed, n_classes):
    import skcal

    classes = {"classes": np.arange(n_classes)}
    return {
        "TS": skcal.TemperatureScaling(device="cpu", **classes),
        "PTS": skcal.ParameterizedTemperatureScaling(
            random_state=seed, device="cpu", **classes
        ),
        "spline": skcal.SplineCalibrator(**classes),
        "SMART": skcal.SMARTCalibrator(random_state=seed, device="cpu", **classes),
    }


def _fit_predict(estimator, X_fit, y_fit, X_test):
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        estimator.fit(X_fit, y_fit)
        elapsed = time.perf_counter() - start
        proba = estimator.predict_proba(X_test)
    return proba, elapsed


def _local_columns(bandwidths):
    cols = []
    for i, bw in enumerate(bandwidths):
        tag = "" if i == 0 else f"@{bw:g}"
        cols += [f"LCE{tag}", f"MLCE{tag}"]
    return tuple(cols)


def table_scores(y, proba, features, space, bandwidths):
    from skcal.metrics import (
        classwise_calibration_error,
        ecce_binned_mean,
        expected_calibration_error,
        local_calibration_errors,
        negative_log_likelihood,
    )

    labels = np.arange(proba.shape[1])
    out = {}
    for i, bw in enumerate(bandwidths):
        tag = "" if i == 0 else f"@{bw:g}"
        with warnings.catch_warnings():  # FlatKernelWarning at the paper's 10
            warnings.simplefilter("ignore")
            local = local_calibration_errors(
                y, proba, features, space=space, bandwidth=bw, labels=labels
            )
        out[f"LCE{tag}"], out[f"MLCE{tag}"] = local.lce, local.mlce
    return {
        **out,
        "ECCE": ecce_binned_mean(y, proba, labels=labels),
        "ECE": classwise_calibration_error(y, proba, n_bins=ECE_BINS, labels=labels),
        "topECE": expected_calibration_error(y, proba, n_bins=ECE_BINS, labels=labels),
        "ACC": float(np.mean(proba.argmax(axis=1) == y)),
        "NLL": negative_log_likelihood(y, proba, labels=labels),
    }


def run_table(task, size, seeds, only, bandwidths, log):
    from skcal.metrics import LocalSpace

    rows, times, errors = {}, {}, {}
    y_te, z_te, e_te = task.test_labels, task.test_logits, task.test_embeddings
    for seed in range(seeds):
        z, emb, y = task.calibration_subset(size, random_state=seed)
        space = LocalSpace().fit(emb)
        cases = {"none": None, **table_methods(task, seed)}
        for name, spec in cases.items():
            if only and name not in only and name != "none":
                continue
            if spec is None:
                proba, elapsed = _softmax(z_te), 0.0
            else:
                kind, est = spec
                fit_X, te_X = (z, z_te) if kind == "logits" else (emb, e_te)
                try:
                    proba, elapsed = _fit_predict(est, fit_X, y, te_X)
                except Exception as exc:  # recorded, the run goes on
                    errors.setdefault(name, f"{type(exc).__name__}: {exc}")
                    log(f"  {task.name} seed {seed} {name}: {errors[name]}")
                    continue
            rows.setdefault(name, []).append(
                table_scores(y_te, proba, e_te, space, bandwidths)
            )
            times.setdefault(name, []).append(elapsed)
        log(f"  {task.name} n={size} seed {seed} done")
    return {"rows": rows, "fit_s": times, "errors": errors}


def _mean_std(values):
    a = np.asarray(values, dtype=float)
    return float(a.mean()), float(a.std())


def print_table(task, size, seeds, result, bandwidths):
    rows = result["rows"]
    columns = _local_columns(bandwidths) + SCORE_COLUMNS
    print(
        f"\n### {task.name} ({task.domain}, {task.n_classes} classes): {size} "
        f"calibration rows, {task.n_test} test rows, {seeds} seeds\n"
    )
    print("| method | " + " | ".join(columns) + " | fit s |")
    print("|---" * (len(columns) + 2) + "|")
    for name, per_seed in rows.items():
        cells = []
        for col in columns:
            m, s = _mean_std([r[col] for r in per_seed])
            cells.append(f"{m:.4f} ± {s:.4f}")
        fit = np.mean(result["fit_s"][name])
        n = len(per_seed)
        label = name if n == seeds else f"{name} ({n}/{seeds} seeds)"
        print(f"| {label} | " + " | ".join(cells) + f" | {fit:.1f} |")
    for name, err in result["errors"].items():
        print(f"\n{name} failed: {err}")
    verdict = table_verdict(rows, bandwidths)
    if verdict:
        best = ", ".join(f"{k}: {v}" for k, v in verdict["best"].items())
        print(
            f"\nlowest mean ({best}); VQ's accuracy minus the uncalibrated "
            f"network's: {verdict['vq_acc_delta']:+.4f}"
        )


def table_verdict(rows, bandwidths):
    if "VQ" not in rows or "none" not in rows:
        return None
    best = {}
    for col in _local_columns(bandwidths)[::2]:
        # VQ against every other method (its own variants are not rivals)
        means = {
            n: np.mean([r[col] for r in v])
            for n, v in rows.items()
            if not n.startswith("VQ-")
        }
        best[col] = min(means, key=means.get)
    acc = {n: np.mean([r["ACC"] for r in v]) for n, v in rows.items()}
    return {
        "best": best,
        "vq_lowest": {col: name == "VQ" for col, name in best.items()},
        "vq_acc_delta": float(acc["VQ"] - acc["none"]),
        "vq_acc_ok": bool(acc["VQ"] >= acc["none"] - ACC_TOLERANCE),
    }


def run_smart(task, sizes, seeds, log):
    from skcal.metrics import expected_calibration_error, negative_log_likelihood

    out = {}
    y_te, z_te = task.test_labels, task.test_logits
    labels = np.arange(task.n_classes)
    for size in sizes:
        per = {m: {"ECE": [], "NLL": []} for m in SMART_METHODS}
        for seed in range(seeds):
            z, _, y = task.calibration_subset(size, random_state=seed)
            probas = {"none": _softmax(z_te)}
            for name, est in smart_methods(seed, task.n_classes).items():
                try:
                    probas[name], _ = _fit_predict(est, z, y, z_te)
                except Exception as exc:
                    log(f"  {task.name} n={size} seed {seed} {name}: {exc}")
                    probas[name] = None
            for name, proba in probas.items():
                if proba is None:
                    per[name]["ECE"].append(np.nan)
                    per[name]["NLL"].append(np.nan)
                    continue
                per[name]["ECE"].append(
                    expected_calibration_error(
                        y_te, proba, n_bins=ECE_BINS, labels=labels
                    )
                )
                per[name]["NLL"].append(
                    negative_log_likelihood(y_te, proba, labels=labels)
                )
        out[size] = per
        log(f"  {task.name} SMART sizes: n={size} done")
    return out


def print_smart(results, seeds):
    print(
        f"\n## SMART against TS, PTS and spline by calibration size (test "
        f"top-label ECE, {ECE_BINS} bins; mean ± std over {seeds} seeds)\n"
    )
    head = " | ".join(SMART_METHODS)
    print(f"| task | n | {head} | SMART − TS (paired) | SMART NLL − TS NLL |")
    print("|---" * (len(SMART_METHODS) + 4) + "|")
    wins = {}
    for task_name, by_size in results.items():
        for size, per in by_size.items():
            cells = [
                "{:.4f} ± {:.4f}".format(*_mean_std(per[m]["ECE"]))
                for m in SMART_METHODS
            ]
            d = np.subtract(per["SMART"]["ECE"], per["TS"]["ECE"])
            dn = np.subtract(per["SMART"]["NLL"], per["TS"]["NLL"])
            wins.setdefault(size, []).append(bool(np.nanmean(d) <= 0))
            print(
                f"| {task_name} | {size} | "
                + " | ".join(cells)
                + f" | {np.nanmean(d):+.4f} ± {np.nanstd(d):.4f}"
                + f" | {np.nanmean(dn):+.4f} ± {np.nanstd(dn):.4f} |"
            )
    print()
    for size, w in sorted(wins.items()):
        print(
            f"n = {size}: SMART's mean ECE at or below TS's on "
            f"{sum(w)} of {len(w)} tasks"
        )
    return {str(k): [sum(v), len(v)] for k, v in wins.items()}


def table_part(names, args, record, log):
    """Part ``table``: each task's table, then the verdicts over the tasks."""
    verdicts = {}
    print(f"\n## Table 6 format ({args.size} calibration rows)")
    for name in names:
        task = load_task(name)
        size = min(args.size, task.n_cal)
        result = run_table(task, size, args.seeds, args.methods, args.bandwidths, log)
        print_table(task, size, args.seeds, result, args.bandwidths)
        record["table"][name] = {"size": size, **result}
        verdicts[name] = table_verdict(result["rows"], args.bandwidths)
    done = {k: v for k, v in verdicts.items() if v}
    if done:
        for col in _local_columns(args.bandwidths)[::2]:
            lowest = sum(v["vq_lowest"][col] for v in done.values())
            print(f"\nVQ has the lowest mean {col} on {lowest} of {len(done)}")
        acc_ok = sum(v["vq_acc_ok"] for v in done.values())
        print(
            f"VQ's accuracy is within {ACC_TOLERANCE * 100:.1f} points of the "
            f"uncalibrated network's on {acc_ok} of {len(done)} tasks."
        )
        record["table_verdicts"] = done


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=["table", "smart", "both"], default="both")
    parser.add_argument("--tasks", nargs="*", default=None)
    parser.add_argument("--size", type=int, default=2000)
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--methods", nargs="*", default=None)
    parser.add_argument(
        "--bandwidths", type=float, nargs="*", default=list(DEFAULT_BANDWIDTHS)
    )
    parser.add_argument(
        "--smart-sizes", type=int, nargs="*", default=list(DEFAULT_SMART_SIZES)
    )
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)

    import torch

    torch.set_num_threads(args.threads)
    names = args.tasks or available_tasks()

    def log(msg):
        print(msg, file=sys.stderr, flush=True)

    started = time.perf_counter()
    print(
        f"# bench_papers: {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC, "
        f"{platform.processor() or platform.machine()}, torch threads "
        f"{args.threads}, load average {os.getloadavg()[0]:.1f}"
    )
    record = {"args": vars(args), "table": {}, "smart": {}}
    if args.part in ("table", "both"):
        table_part(names, args, record, log)
    if args.part in ("smart", "both"):
        for name in names:
            task = load_task(name)
            sizes = [s for s in args.smart_sizes if s <= task.n_cal]
            record["smart"][name] = run_smart(task, sizes, args.seeds, log)
        record["smart_wins"] = print_smart(record["smart"], args.seeds)
    print(f"\ntotal {time.perf_counter() - started:.0f} s")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(record, f, indent=1, default=float)


if __name__ == "__main__":
    main()
