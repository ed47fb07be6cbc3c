"""Which default candidates of CalibratorSearchCV earn their time: leave one out.

For every real task of ``benchmarks/_lib/datasets`` (see ``DATASETS.md``) and
calibration size (``--repeats`` random subsets at 100 and 500 rows, one at
2,000 and 10,000), on the network's logits:

* the search over the *full* candidate set (the default set, plus ``--add``)
  is fitted once, with ``random_state=seed``; the time of each candidate
  (its fold fits and scores, from ``cv_results_``) is recorded;
* every candidate is refitted on the whole subset as the search refits its
  winner and scored on the test set (NLL, probabilities floored at 1e-12);
  the *oracle* is the candidate of the full set with the best test NLL;
* **leave one out**: for each candidate, the guard's selection is rerun on
  the out-of-fold losses of the others (the same folds, the same fits; the
  only difference from refitting a search without it is the seed drawn for
  the candidates after it, which only SMART reads), and the test NLL of what
  it selects is compared with the same oracle: ``gap = NLL / oracle - 1``;
* the same for ``--subset`` sets (candidates dropped together), e.g. the
  proposed default set.

A check in every case: the rerun selection over the full set is the
search's own.

Summary per candidate: how often it was selected and the oracle, its share
of the search time, and the mean and largest gap over the cases with it and
without it; per subset, the same gap and the search time it saves.

Run:  python benchmarks/bench_select_loo.py [--tasks satimage letter]
      [--sizes 100 500 2000] [--repeats 3] [--add StructuredVectorScaling]
      [--subset SMARTCalibrator,IsotonicCalibrator ...] [--json out.json]
      python benchmarks/bench_select_loo.py --from-json a.json b.json  (together)
"""

import argparse
import json
import math
import os
import sys
import time
import warnings
from collections import Counter
from datetime import datetime, timezone
from types import SimpleNamespace

import numpy as np
from _lib.datasets import DEFAULT_CAL_SIZES, available_tasks, load_task
from bench_select import SMALL_SIZES, _refit_templates, add_candidates
from bench_select import _short as _bench_short


def _short(name):
    """A compact label of a candidate."""
    return {"StructuredVectorScaling": "SVS"}.get(name) or _bench_short(name)


def _instrument():
    """Keep the validated data and out-of-fold losses of every search fit on
    the instance (this process only): ``_bench_data``, ``_bench_losses``."""
    from skcal.model_selection import _search

    cls = _search.CalibratorSearchCV
    prepare, collect = cls._prepare, cls._collect

    def _prepare(self, *args, **kwargs):
        self._bench_data = prepare(self, *args, **kwargs)
        return self._bench_data

    def _collect(self, *args, **kwargs):
        out = collect(self, *args, **kwargs)
        self._bench_losses = out[3], out[4]  # row losses, rows tested
        return out

    cls._prepare, cls._collect = _prepare, _collect


def reselect(search, keep):
    """The guard's selection among the candidates ``keep`` (indices) of a
    fitted ``search``, from its out-of-fold losses: the index selected (None
    when none of them was scored: a search over them raises)."""
    from skcal.model_selection._search import CalibratorSearchCV, _RowLosses

    keep = [c for c in keep if np.isfinite(search.cv_results_["mean_test_score"][c])]
    if not keep:
        return None
    losses, tested = search._bench_losses
    data = search._bench_data
    shim = SimpleNamespace(
        cv_results_={"mean_test_score": search.cv_results_["mean_test_score"][keep]},
        guard=search.guard,
    )
    names = [str(search.cv_results_["candidate"][c]) for c in keep]
    noise = _RowLosses(losses[keep], data.relative[tested])
    best, _ = CalibratorSearchCV._select(
        shim, names, [data.templates[c] for c in keep], noise
    )
    return keep[best]


def _candidate_times(search):
    """Seconds each candidate took in the search (fold fits and scores)."""
    res = search.cv_results_
    n = search.n_splits_
    total = n * (np.asarray(res["mean_fit_time"]) + np.asarray(res["mean_score_time"]))
    return np.nan_to_num(total, nan=0.0)


def _test_nll(search, logits, y, z_test, y_test, candidates):
    """Test NLL of every candidate refitted on the subset (NaN if it fails)."""
    from sklearn.base import clone

    from skcal.metrics import negative_log_likelihood

    out = []
    for c, template in enumerate(_refit_templates(search, candidates)):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                est = (
                    search.best_calibrator_
                    if c == search.best_index_
                    else clone(template).fit(logits, y)
                )
                proba = np.asarray(est.predict_proba(z_test), dtype=np.float64)
                out.append(float(negative_log_likelihood(y_test, proba)))
            except Exception:  # a failed refit is no oracle
                out.append(float("nan"))
    return np.array(out)


def run_case(task, n, seed, subsets):
    """The full search, the refits and every left-out selection of one case."""
    from skcal import CalibratorSearchCV
    from skcal.model_selection._search import _default_candidates

    logits, _, y = task.calibration_subset(n, random_state=seed)
    search = CalibratorSearchCV(random_state=seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        start = time.perf_counter()
        search.fit(logits, y)
        search_s = time.perf_counter() - start
    names = [str(c) for c in search.cv_results_["candidate"]]
    everyone = list(range(len(names)))
    assert reselect(search, everyone) == search.best_index_, "rerun differs"
    nll = _test_nll(
        search, logits, y, task.test_logits, task.test_labels, _default_candidates()
    )
    oracle = int(np.nanargmin(nll))
    times = _candidate_times(search)

    def outcome(keep):
        chosen = reselect(search, keep)
        if chosen is None:  # e.g. identity left out where only it was scored
            return {
                "selected": "(none scored)",
                "nll": math.nan,
                "gap_pct": math.nan,
                "time_s": float(times[keep].sum()),
            }
        return {
            "selected": names[chosen],
            "nll": float(nll[chosen]),
            "gap_pct": float(100 * (nll[chosen] / nll[oracle] - 1)),
            "time_s": float(times[keep].sum()),
        }

    without = {
        name: outcome([c for c in everyone if c != k]) for k, name in enumerate(names)
    }
    dropped = {
        label: outcome([c for c in everyone if names[c] not in drop])
        for label, drop in subsets.items()
    }
    return {
        "task": task.name,
        "n_classes": task.n_classes,
        "size": n,
        "seed": seed,
        "search_s": search_s,
        "refit_s": search.refit_time_,
        "candidates": names,
        "candidate_s": times.tolist(),
        "skipped": [str(r) for r in search.cv_results_["skipped_reason"]],
        "test_nll": nll.tolist(),
        "oracle": names[oracle],
        "full": outcome(everyone),
        "without": without,
        "subsets": dropped,
    }


def print_case(r):
    full = r["full"]
    print(
        f"\n{r['task']} ({r['n_classes']}), {r['size']} rows, seed {r['seed']}: "
        f"search {r['search_s']:.1f} s, selected {_short(full['selected'])} "
        f"(gap {full['gap_pct']:+.2f}%), oracle {_short(r['oracle'])}"
    )
    for name, s, nll, why in zip(
        r["candidates"], r["candidate_s"], r["test_nll"], r["skipped"]
    ):
        w = r["without"][name]
        change = (
            ""
            if w["selected"] == full["selected"]
            else f"  without: {_short(w['selected'])} ({w['gap_pct']:+.2f}%)"
        )
        skip = f"  [{why.split(':')[0]}]" if why else ""
        print(f"  {_short(name):>9} {s:8.2f} s  test NLL {nll:.4f}{skip}{change}")
    for label, o in r["subsets"].items():
        print(
            f"  subset {label}: {_short(o['selected'])} ({o['gap_pct']:+.2f}%), "
            f"{o['time_s']:.1f} s of the candidates' {sum(r['candidate_s']):.1f} s"
        )
    sys.stdout.flush()


def summarise(cases):
    """Per candidate and per subset: selections, oracle, time, gaps."""
    names = cases[0]["candidates"]
    total_s = sum(sum(r["candidate_s"]) for r in cases)
    full_gap = np.array([r["full"]["gap_pct"] for r in cases])
    selected = Counter(r["full"]["selected"] for r in cases)
    oracle = Counter(r["oracle"] for r in cases)
    rows = []
    for k, name in enumerate(names):
        gaps = np.array([r["without"][name]["gap_pct"] for r in cases])
        changed = sum(
            r["without"][name]["selected"] != r["full"]["selected"] for r in cases
        )
        rows.append(
            {
                "candidate": name,
                "selected": selected[name],
                "oracle": oracle[name],
                "time_s": float(sum(r["candidate_s"][k] for r in cases)),
                "time_share_pct": float(
                    100 * sum(r["candidate_s"][k] for r in cases) / total_s
                ),
                "mean_gap_without_pct": float(np.nanmean(gaps)),
                "max_gap_increase_pct": float(np.nanmax(gaps - full_gap)),
                "none_scored": int(np.isnan(gaps).sum()),
                "selections_changed": int(changed),
            }
        )
    subsets = {}
    for label in cases[0]["subsets"]:
        gaps = np.array([r["subsets"][label]["gap_pct"] for r in cases])
        subsets[label] = {
            "mean_gap_pct": float(np.nanmean(gaps)),
            "max_gap_increase_pct": float(np.nanmax(gaps - full_gap)),
            "selections_changed": int(
                sum(
                    r["subsets"][label]["selected"] != r["full"]["selected"]
                    for r in cases
                )
            ),
            "time_s": float(sum(r["subsets"][label]["time_s"] for r in cases)),
        }
    return {
        "n_cases": len(cases),
        "mean_gap_full_pct": float(np.nanmean(full_gap)),
        "candidate_time_s": total_s,
        "search_time_s": float(sum(r["search_s"] for r in cases)),
        "candidates": rows,
        "subsets": subsets,
    }


def print_summary(s):
    print(
        f"\n{s['n_cases']} cases; mean gap of the full set "
        f"{s['mean_gap_full_pct']:.2f}%; "
        f"searches {s['search_time_s']:.0f} s (candidates' folds "
        f"{s['candidate_time_s']:.0f} s)"
    )
    print(
        f"{'candidate':>10} {'selected':>8} {'oracle':>6} {'time s':>8} {'share':>6} "
        f"{'gap w/o':>8} {'max +gap':>8} {'changed':>7}"
    )
    for r in s["candidates"]:
        print(
            f"{_short(r['candidate']):>10} {r['selected']:>8} {r['oracle']:>6} "
            f"{r['time_s']:8.1f} {r['time_share_pct']:5.1f}% "
            f"{r['mean_gap_without_pct']:7.2f}% {r['max_gap_increase_pct']:+7.2f}% "
            f"{r['selections_changed']:>7}"
        )
    for label, r in s["subsets"].items():
        print(
            f"without {label}: mean gap {r['mean_gap_pct']:.2f}%, largest increase "
            f"{r['max_gap_increase_pct']:+.2f}%, {r['selections_changed']} selections "
            f"changed, candidates' time {r['time_s']:.0f} s"
        )


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", nargs="+", default=None)
    parser.add_argument("--sizes", nargs="+", type=int, default=None)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--add", nargs="+", default=(), metavar="CLASS")
    parser.add_argument(
        "--subset",
        nargs="+",
        default=(),
        metavar="A,B",
        help="candidates dropped together (comma-separated class names)",
    )
    parser.add_argument("--json", default=None)
    parser.add_argument(
        "--from-json", nargs="+", default=None, help="summarise saved runs together"
    )
    args = parser.parse_args(argv)
    if args.from_json:
        cases = []
        for path in args.from_json:
            with open(path) as f:
                cases += json.load(f)["cases"]
        for r in cases:
            print_case(r)
        print_summary(summarise(cases))
        return

    import torch

    torch.set_num_threads(1)
    add_candidates(args.add)
    _instrument()
    subsets = {label: set(label.split(",")) for label in args.subset}
    names = args.tasks or list(available_tasks())
    started = datetime.now(timezone.utc)
    print(
        f"bench_select_loo {started:%Y-%m-%d %H:%M} UTC; {os.cpu_count()} CPUs, "
        f"load average {os.getloadavg()}; tasks {names}"
    )
    record = {"command": sys.argv, "started_utc": started.isoformat(), "cases": []}
    record["load_average_start"] = os.getloadavg()
    for name in names:
        task = load_task(name)
        for n in task.calibration_sizes(args.sizes or DEFAULT_CAL_SIZES):
            for seed in range(args.repeats if n in SMALL_SIZES else 1):
                r = run_case(task, n, seed, subsets)
                record["cases"].append(r)
                print_case(r)
                if args.json:
                    with open(args.json, "w") as f:
                        json.dump(record, f, indent=1)
    record["summary"] = summary = summarise(record["cases"])
    record["load_average_end"] = os.getloadavg()
    record["wall_s"] = (datetime.now(timezone.utc) - started).total_seconds()
    print_summary(summary)
    print(f"\nwall {record['wall_s'] / 60:.1f} min; load average {os.getloadavg()}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(record, f, indent=1)


if __name__ == "__main__":
    main()
