"""Selective prediction with a risk guarantee, and cost-aware decisions, on
the real tasks (issue 54).

Guarantee. For each task (``_lib/datasets``), the calibration pool and the
test set are pooled and re-split at random ``--splits`` times (1,000 by
default) into a calibration part of the pool's size and a test part of the
test set's size. As :class:`skcal.decision.SelectiveClassifier` does by
default, the calibration part is split in two halves (stratified):
temperature scaling is fitted on one, the threshold is chosen on the other
(here through ``FrozenEstimator`` and ``threshold_fraction=1.0``, so that
one temperature serves every target and method of a split). For the target
selective risks 1%, 5% and 10% and ``delta = 0.1``, reported over the
splits: the fraction where the realised selective risk on the test part
exceeds the target (the guarantee asks for at most ``delta``, within the
Monte-Carlo error ``sqrt(0.09 / splits)``, and the test part's own sampling
noise), the mean coverage on the test part, and the mean coverage of the
oracle threshold (the lowest threshold whose selective risk *on the test
part* is at most the target). Methods: SGR (Geifman & El-Yaniv 2017), LTT
(learn then test, Angelopoulos et al. 2021), and ``plugin``, the lowest
threshold whose *empirical* risk on the threshold rows is at most the target
(no bound: what one does without a guarantee). When a method finds no
threshold it abstains on everything (coverage 0, no excess).

Costs. On each task, an asymmetric cost matrix: any error costs 1, except
that missing class 0 (true class 0, another class predicted) costs 10.
Decisions of least expected cost (:func:`skcal.decision.cost_sensitive_predict`)
from the raw softmax of the network's logits and from temperature-scaled and
vector-scaled probabilities (fitted on the whole calibration part), and the
cost-blind argmax, are scored by :func:`skcal.decision.expected_cost` on the
test part; means over the first ``--cost-splits`` splits (100 by default),
with the paired difference raw - calibrated and its standard error.

Run:  python benchmarks/bench_selective_guarantee.py [--tasks letter satimage]
          [--splits 1000] [--cost-splits 100] [--out FILE]
"""

import argparse
import sys
import time
import warnings

import numpy as np
from scipy.special import softmax

# skcal, scikit-learn and the tasks (torch) are imported after parsing, so
# that --help answers at once (tests/test_benchmarks.py)

TARGETS = (0.01, 0.05, 0.10)
DELTA = 0.1
METHODS = ("sgr", "ltt", "plugin")


def _lowest_threshold(conf, wrong, target):
    """Lowest confidence threshold whose empirical selective risk is at
    most ``target`` (inf: none); ties in confidence are selected together."""
    order = np.argsort(-conf, kind="stable")
    conf, wrong = conf[order], wrong[order]
    risk = np.cumsum(wrong) / np.arange(1, conf.size + 1)
    last_of_tie = np.r_[conf[1:] != conf[:-1], True]
    ok = np.flatnonzero((risk <= target) & last_of_tie)
    return conf[ok[-1]] if ok.size else np.inf


def _selection(conf, wrong, threshold):
    """(coverage, selective risk) of ``threshold`` on rows."""
    selected = conf >= threshold
    coverage = selected.mean()
    risk = wrong[selected].mean() if selected.any() else 0.0
    return coverage, risk


def _split(task, seed):
    """(logits, labels) of the fit half, threshold half and test part."""
    from sklearn.model_selection import train_test_split

    logits = np.vstack([task.cal_logits, task.test_logits])
    labels = np.concatenate([task.cal_labels, task.test_labels])
    rng = np.random.default_rng(seed)
    order = rng.permutation(labels.size)
    cal, test = order[: task.n_cal], order[task.n_cal :]
    fit, held = train_test_split(
        cal, test_size=0.5, random_state=seed, stratify=_stratify(labels[cal])
    )
    return [(logits[rows], labels[rows]) for rows in (fit, held, test)]


def _stratify(y):
    counts = np.unique(y, return_counts=True)[1]
    return y if counts.min() >= 2 else None


def _thresholds(ts, held, target):
    """Each method's threshold on the threshold rows."""
    from sklearn.frozen import FrozenEstimator

    from skcal.decision import SelectiveClassifier

    out = {}
    for method in ("sgr", "ltt"):
        clf = SelectiveClassifier(
            FrozenEstimator(ts),
            target_risk=target,
            delta=DELTA,
            method=method,
            threshold_fraction=1.0,
        ).fit(*held)
        out[method] = clf.threshold_
    proba = ts.predict_proba(held[0])
    wrong = ts.classes_[proba.argmax(1)] != held[1]
    out["plugin"] = _lowest_threshold(proba.max(1), wrong, target)
    return out


def guarantee_rows(task, n_splits):
    """Per (target, method): exceed fraction, mean coverage, oracle coverage."""
    from skcal import TemperatureScaling

    stats = {(t, m): [] for t in TARGETS for m in (*METHODS, "oracle")}
    for seed in range(n_splits):
        fit, held, test = _split(task, seed)
        ts = TemperatureScaling(device="cpu").fit(*fit)
        proba = ts.predict_proba(test[0])
        conf, wrong = proba.max(1), ts.classes_[proba.argmax(1)] != test[1]
        for target in TARGETS:
            for method, threshold in _thresholds(ts, held, target).items():
                coverage, risk = _selection(conf, wrong, threshold)
                stats[target, method].append((risk > target, coverage))
            oracle = _lowest_threshold(conf, wrong, target)
            stats[target, "oracle"].append((False, _selection(conf, wrong, oracle)[0]))
    return {key: np.mean(values, axis=0) for key, values in stats.items()}


def cost_rows(task, n_splits):
    """Mean test cost of each decision rule, and raw - TS paired."""
    from skcal import TemperatureScaling, VectorScaling
    from skcal.decision import cost_sensitive_predict, expected_cost

    cost = np.ones((task.n_classes, task.n_classes)) - np.eye(task.n_classes)
    cost[0, 1:] = 10.0
    results = {name: [] for name in ("argmax", "raw", "TS", "VS")}
    for seed in range(n_splits):
        fit, held, test = _split(task, seed)
        X = np.vstack([fit[0], held[0]])
        y = np.concatenate([fit[1], held[1]])
        probas = {"raw": softmax(test[0], axis=1)}
        for name, cls in (("TS", TemperatureScaling), ("VS", VectorScaling)):
            probas[name] = cls(device="cpu").fit(X, y).predict_proba(test[0])
        labels = np.arange(task.n_classes)
        results["argmax"].append(
            expected_cost(test[1], probas["raw"].argmax(1), cost, labels=labels)
        )
        for name, proba in probas.items():
            decisions = cost_sensitive_predict(proba, cost)
            results[name].append(expected_cost(test[1], decisions, cost, labels=labels))
    return {name: np.asarray(values) for name, values in results.items()}


def _guarantee_table(name, stats, n_splits):
    lines = [
        f"{name}: {n_splits} splits, delta={DELTA}, Monte-Carlo s.e. of a "
        f"{DELTA} rate {np.sqrt(DELTA * (1 - DELTA) / n_splits):.3f}",
        f"{'target':>7} {'method':>7} {'exceed':>7} {'coverage':>9} {'oracle':>7}",
    ]
    for target in TARGETS:
        oracle = stats[target, "oracle"][1]
        for method in METHODS:
            exceed, coverage = stats[target, method]
            lines.append(
                f"{target:>7.2f} {method:>7} {exceed:>7.3f} {coverage:>9.3f} "
                f"{oracle:>7.3f}"
            )
    return lines


def _cost_table(costs):
    lines = [
        "task            argmax     raw      TS      VS   raw-TS (s.e.)",
    ]
    for name, res in costs.items():
        diff = res["raw"] - res["TS"]
        se = diff.std(ddof=1) / np.sqrt(diff.size) if diff.size > 1 else np.nan
        lines.append(
            f"{name:<14} {res['argmax'].mean():>7.4f} {res['raw'].mean():>7.4f} "
            f"{res['TS'].mean():>7.4f} {res['VS'].mean():>7.4f}   "
            f"{diff.mean():+.4f} ({se:.4f})"
        )
    return lines


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", nargs="*", default=None)
    parser.add_argument("--splits", type=int, default=1000)
    parser.add_argument("--cost-splits", type=int, default=100)
    parser.add_argument("--out", default=None, help="also write the tables here")
    args = parser.parse_args(argv)
    from _lib.datasets import available_tasks, load_task

    from skcal.decision import NoValidThresholdWarning

    tasks = args.tasks or available_tasks()
    lines, costs = [], {}
    warnings.simplefilter("ignore", NoValidThresholdWarning)
    for name in tasks:
        task = load_task(name)
        start = time.perf_counter()
        stats = guarantee_rows(task, args.splits)
        lines += _guarantee_table(name, stats, args.splits)
        costs[name] = cost_rows(task, args.cost_splits)
        lines.append(f"({time.perf_counter() - start:.0f} s)\n")
        print("\n".join(lines[-13:]), flush=True)
    lines += [f"Costs ({args.cost_splits} splits; missing class 0 costs 10):"]
    lines += _cost_table(costs)
    print("\n".join(lines[-(len(costs) + 2) :]))
    if args.out:
        with open(args.out, "w") as f:
            f.write("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
