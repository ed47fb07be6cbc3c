"""CalibratorSearchCV with and without ``groups`` on a real task (issue 55).

The task is ``letter`` of ``benchmarks/_datasets.py`` (26 classes; a network's
logits on a 6,000-row calibration pool and 4,000 test rows). Per seed, a
calibration subset of ``--n-cal`` rows is drawn from the pool, and three
kinds of groups (``--n-groups`` of them) are given to every calibration and
test row:

- ``bins``: quantile bins of the first principal component of the network's
  embeddings (fitted on the calibration subset): a real feature, whatever
  calibration differences it carries;
- ``random``: random segments, nothing to learn by group (the null case);
- ``shifted``: random segments whose logits (calibration and test alike)
  are multiplied by a factor of the segment, log-uniform in ``[1/s, s]``
  (``--shift``): a model over-confident on some segments and
  under-confident on others, the labels being the real ones.

For each, the default search (``CalibratorSearchCV(random_state=seed)``) is
fitted without groups and with them (its default candidates then gain
``GroupedTemperatureScaling``), and the test NLL of each is printed with the
selected candidate. ``bins`` and ``random`` share the search without groups
(same logits).

Run:  python benchmarks/bench_search_groups.py [--seeds 3] [--n-cal 2000]
"""

import argparse
import datetime
import os
import sys
import time
import warnings

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def first_component_bins(emb_cal, emb_test, n_groups):
    """Quantile bins of the first principal component of the calibration
    embeddings, for calibration and test rows."""
    mean = emb_cal.mean(axis=0)
    _, _, vt = np.linalg.svd(emb_cal - mean, full_matrices=False)
    pc_cal, pc_test = (emb_cal - mean) @ vt[0], (emb_test - mean) @ vt[0]
    edges = np.quantile(pc_cal, np.linspace(0, 1, n_groups + 1)[1:-1])
    return np.searchsorted(edges, pc_cal), np.searchsorted(edges, pc_test)


def nll(search, Z, y, groups=None):
    from sklearn.metrics import log_loss

    kwargs = {} if groups is None else {"groups": groups}
    return log_loss(y, search.predict_proba(Z, **kwargs), labels=search.classes_)


def run_seed(task, seed, args):
    from skcal.model_selection import CalibratorSearchCV

    rng = np.random.default_rng(seed)
    Z, emb, y = task.calibration_subset(args.n_cal, random_state=seed)
    Zt, yt = task.test_logits, task.test_labels
    G = args.n_groups
    bins = first_component_bins(emb, task.test_embeddings, G)
    segments = rng.integers(0, G, len(y)), rng.integers(0, G, len(yt))
    factor = np.exp(rng.uniform(-np.log(args.shift), np.log(args.shift), G))
    shifted = Z * factor[segments[0]][:, None], Zt * factor[segments[1]][:, None]
    rows, cache = [], {}
    for kind, (Zc, Zs), (gc, gs) in [
        ("bins", (Z, Zt), bins),
        ("random", (Z, Zt), segments),
        ("shifted", shifted, segments),
    ]:
        key = "shifted" if kind == "shifted" else "plain"
        if key not in cache:
            start = time.perf_counter()
            plain = CalibratorSearchCV(random_state=seed).fit(Zc, y)
            cache[key] = (plain, time.perf_counter() - start)
        plain, plain_time = cache[key]
        start = time.perf_counter()
        grouped = CalibratorSearchCV(random_state=seed).fit(Zc, y, groups=gc)
        grouped_time = time.perf_counter() - start
        best = grouped.best_calibrator_
        rows.append(
            dict(
                seed=seed,
                kind=kind,
                nll_without=nll(plain, Zs, yt),
                nll_with=nll(grouped, Zs, yt, gs),
                selected_without=plain.selected_,
                selected_with=grouped.selected_,
                shrinkage=getattr(best, "shrinkage_", np.nan),
                time_without=plain_time,
                time_with=grouped_time,
            )
        )
        print(rows[-1], file=sys.stderr, flush=True)
    return rows


def table(rows, args, task):
    lines = [
        f"# CalibratorSearchCV with and without groups ({datetime.date.today()})",
        "",
        f"Task letter ({task.n_classes} classes): {args.n_cal} calibration rows "
        f"drawn per seed from the pool of {len(task.cal_labels)}, test on "
        f"{len(task.test_labels)} rows; {args.n_groups} groups; shift factors "
        f"log-uniform in [1/{args.shift:g}, {args.shift:g}]; default candidates; "
        f"{args.seeds} seeds. Command: `python benchmarks/bench_search_groups.py "
        f"--seeds {args.seeds} --n-cal {args.n_cal} --n-groups {args.n_groups} "
        f"--shift {args.shift:g}`.",
        "",
        "| groups | seed | test NLL without | test NLL with | selected without "
        "| selected with | shrinkage | time without (s) | time with (s) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['kind']} | {r['seed']} | {r['nll_without']:.4f} | "
            f"{r['nll_with']:.4f} | {r['selected_without']} | {r['selected_with']} "
            f"| {r['shrinkage']:g} | {r['time_without']:.1f} | {r['time_with']:.1f} |"
        )
    lines += [
        "",
        "| groups | mean test NLL without | mean test NLL with |",
        "|---|---|---|",
    ]
    for kind in ("bins", "random", "shifted"):
        sel = [r for r in rows if r["kind"] == kind]
        lines.append(
            f"| {kind} | {np.mean([r['nll_without'] for r in sel]):.4f} | "
            f"{np.mean([r['nll_with'] for r in sel]):.4f} |"
        )
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--n-cal", type=int, default=2000)
    parser.add_argument("--n-groups", type=int, default=20)
    parser.add_argument("--shift", type=float, default=2.0)
    parser.add_argument(
        "--cache-dir", default=None, help="the tasks' cache (default: _lib's)"
    )
    parser.add_argument("--out", default=None, help="also write the table here")
    args = parser.parse_args()
    from _lib.datasets import CACHE_DIR, load_task  # after parsing: a fast --help

    task = load_task("letter", cache_dir=args.cache_dir or CACHE_DIR)
    rows = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the candidates' convergence notes
        for seed in range(args.seeds):
            rows += run_seed(task, seed, args)
    text = table(rows, args, task)
    print(text)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
