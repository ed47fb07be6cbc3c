"""Accuracy of the binning calibrators on many classes (issue 49, item 2).

Binning maps make many classes' probabilities equal; before the tie rule
(ties broken by the input scores) and the accuracy warning, scaling-binning
lost 0.33 of accuracy on UCI letter (26 classes). For each real task
(``_lib/datasets``), every binning-type calibrator with its defaults is
fitted on ``--n-cal`` rows of the calibration pool (the task's logits) and
evaluated on the whole test set: accuracy of ``predict`` (and of the argmax
of ``predict_proba``, first column among ties, which is what a user taking
``np.argmax`` gets), test NLL, against the input's own accuracy and
temperature scaling's NLL, and the change of test accuracy from the
input's (points). A method that warned ``AccuracyDropWarning`` at fit is
marked, with the held-out accuracies its message names; the column
``in-sample rule`` says whether the first draft's check (the same
materiality rule, one point and two standard errors, on the calibration
rows themselves, computed here from ``predict``) would have warned.

Run:  python benchmarks/bench_binning_accuracy.py [--tasks letter satimage
          wordnet_supersenses] [--n-cal 4000]   (default: every cached task)
"""

from __future__ import annotations

import argparse
import re
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))


def _methods() -> dict:
    """The calibrators compared (imported after the arguments are parsed)."""
    from skcal import calibrators as c

    return {
        "TS": c.TemperatureScaling,
        "scaling-binning": c.ScalingBinningCalibrator,
        "histogram binning": c.HistogramBinningCalibrator,
        "isotonic": c.IsotonicCalibrator,
        "centred isotonic": c.CenteredIsotonicCalibrator,
        "BBQ": c.BBQCalibrator,
        "ENIR": c.ENIRCalibrator,
        "spline": c.SplineCalibrator,
        "TvA(isotonic)": lambda: c.TopVersusAll(c.IsotonicCalibrator()),
        "TvA(histogram)": lambda: c.TopVersusAll(c.HistogramBinningCalibrator()),
    }


def _nll(proba, y):
    return float(-np.mean(np.log(np.maximum(proba[np.arange(len(y)), y], 1e-300))))


def _in_sample_rule(cal, logits, y) -> bool:
    """Whether the drop of accuracy on the calibration rows themselves is
    material: over one point and two standard errors of the paired
    difference (equal weights)."""
    diff = (logits.argmax(axis=1) == y) - 1.0 * (cal.predict(logits) == y)
    n = len(diff)
    return bool(diff.mean() > max(0.01, 2.0 * diff.std(ddof=1) / np.sqrt(n)))


def _warning(caught) -> str:
    """'yes (held-out a -> b)' if an AccuracyDropWarning was caught."""
    from skcal.exceptions import AccuracyDropWarning

    for w in caught:
        if issubclass(w.category, AccuracyDropWarning):
            found = re.search(r"held-out accuracy (\S+ -> \S+)", str(w.message))
            return f"yes ({found.group(1)})" if found else "yes"
    return ""


def _row(task, name, make, logits, y, input_acc):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        start = time.perf_counter()
        cal = make().fit(logits, y)
        seconds = time.perf_counter() - start
    proba = cal.predict_proba(task.test_logits)
    y_test = task.test_labels
    acc = float(np.mean(cal.predict(task.test_logits) == y_test))
    acc_argmax = float(np.mean(proba.argmax(axis=1) == y_test))
    old = "yes" if _in_sample_rule(cal, logits, y) else ""
    return (
        f"| {task.name} | {task.n_classes} | {name} | {acc:.4f} | "
        f"{100 * (acc - input_acc):+.2f} | {acc_argmax:.4f} | "
        f"{_nll(proba, y_test):.4f} | {old} | {_warning(caught)} | {seconds:.1f} |"
    )


def _cached_tasks() -> list:
    """The tasks whose logits are cached here (no task is built)."""
    from _lib.datasets import CACHE_DIR, TASK_NAMES

    return [name for name in TASK_NAMES if (CACHE_DIR / f"{name}.npz").exists()]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", nargs="*", default=None)
    parser.add_argument("--n-cal", type=int, default=4000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    from _lib.datasets import available_tasks, load_task

    print(
        "| task | classes | method | accuracy (predict) | vs input (points) | "
        "accuracy (argmax) | NLL | in-sample rule | AccuracyDropWarning "
        "(held-out accuracy) | fit s |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name in args.tasks or _cached_tasks():
        if name not in available_tasks():
            print(f"| {name} | | (data missing) | | | | | | | |")
            continue
        task = load_task(name)
        n = min(args.n_cal, len(task.cal_labels))
        logits, _, y = task.calibration_subset(n, random_state=args.seed)
        input_acc = float(np.mean(task.test_logits.argmax(axis=1) == task.test_labels))
        print(
            f"| {name} | {task.n_classes} | input (n_cal={n}) | {input_acc:.4f} | | "
            f"{input_acc:.4f} | | | | |",
            flush=True,
        )
        for method, make in _methods().items():
            print(_row(task, method, make, logits, y, input_acc), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
