"""skcal against other calibration libraries: same data, same run, same metrics.

Run (by hand, from the repository root)::

    python benchmarks/compare_peers.py [--n-cal 10000] [--n-test 10000]
        [--n-classes 10] [--seed 0] [--logit-scale 1] [--repeats 3]
        [--budget 5] [--threads N]
        [--dirichletcal-python PATH] [--dirichletcal-all]
        [--skip TEXT [TEXT ...]] [--json]

The default run takes about a minute on 2 idle cores, most of it in
dirichletcal and netcal's ``BetaCalibration`` and ``LogisticCalibration``
(scipy with numerical gradients), and several times longer when other jobs
share the cores. ``--skip "netcal Beta" dirichletcal`` leaves out the methods
whose label contains any of the given texts. ``--threads N`` sets torch's
intra-op threads (skcal, probmetrics, netcal and torchmetrics all run torch
kernels); on a busy machine torch's default of one thread per core can make
small kernels much slower.
``--json`` prints one JSON document instead of the tables.

Data: synthetic over-confident scores (``make_miscalibrated_logits`` with
temperature 2) plus a fixed per-class offset, so that temperature scaling
cannot fix everything and the per-class maps (vector / matrix scaling,
Dirichlet) have something to do. The calibration and test sets are drawn with
different random states. Every method, skcal's and the peers', gets the same
softmax probabilities (skcal with ``input="proba"``) and labels.

Compared, each skcal calibrator against every installed peer that fits the
same model (the first row of a table is skcal, the reference):

* temperature scaling: scikit-learn ``CalibratedClassifierCV(method=
  "temperature")`` on a frozen pass-through classifier whose
  ``decision_function`` is ``log p``; netcal ``TemperatureScaling``;
  probmetrics ``get_calibrator("temp-scaling")``;
* vector scaling (unregularised, ``reg_lambda=0``; skcal's default ``"auto"``
  ridge is shown too): netcal ``LogisticCalibration`` (vector scaling on
  ``log p`` for multiclass input), probmetrics ``VectorScalingCalibrator``,
  dirichletcal ``DiagonalDirichletCalibrator`` (with ``--dirichletcal-all``);
* matrix scaling (unregularised; skcal's default shown too): probmetrics
  ``MatrixScalingCalibrator``, dirichletcal
  ``FullDirichletCalibrator(reg_lambda=0)`` (with ``--dirichletcal-all``);
* Dirichlet calibration with ODIR (``reg_lambda = reg_mu = 1e-3``, reference
  row): dirichletcal ``FullDirichletCalibrator`` (same objective);
* isotonic regression, one-vs-rest and renormalised: scikit-learn
  ``CalibratedClassifierCV(method="isotonic")`` (frozen pass-through whose
  ``predict_proba`` is ``p``), netcal ``IsotonicRegression``;
* histogram binning, 15 equal-width bins one-vs-rest: netcal
  ``HistogramBinning``;
* Platt scaling of each class's log-odds, one-vs-rest: scikit-learn
  ``CalibratedClassifierCV(method="sigmoid")`` (pass-through whose
  ``decision_function`` is ``log p_k - log(1 - p_k)``);
* beta calibration: betacal ``BetaCalibration("abm")`` one-vs-rest (same
  model) and netcal ``BetaCalibration``, which fits a joint softmax over the
  classes' beta features (a different model, shown for reference);
* metrics: top-label ECE, 15 equal-width bins, of skcal, netcal ``ECE``,
  torchmetrics ``MulticlassCalibrationError`` and probmetrics
  ``CalibrationError`` (torchmetrics inside), on the uncalibrated and on the
  temperature-scaled test probabilities: values, absolute differences from
  skcal, times.

dirichletcal needs Python >= 3.12, so it runs in a subprocess
(``_lib/peer_dirichletcal.py``) with the interpreter given by
``--dirichletcal-python``, else ``$SKCAL_DIRICHLETCAL_PYTHON``, else the first
of this Python, ``python3.13``, ``python3.12``, ``python3`` on ``PATH`` that
has it; its times include the subprocess's own work only (not its start).

Reading the tables: ``fit s`` and ``pred s`` are the best wall times of
``--repeats`` runs (``runs`` says how many were made: a method is not run again
once it has used ``--budget`` seconds); ``fit x`` and ``pred x`` are the peer's
time divided by skcal's (the first row), so ``> 1`` means skcal is faster.
``NLL`` and ``ECE`` are computed on every method's test probabilities by the
same functions (``skcal.metrics.negative_log_likelihood`` and
``expected_calibration_error``, top-label, 15 bins), so they are comparable
across rows; rows of the same model should agree up to the optimiser's
tolerance. A peer that is not installed, or that fails, is a row with the
reason instead of numbers. Every method is first fitted once on 300 samples
(outside the timings) so that import-time and first-call costs are not timed,
except netcal's two slow fits (whose shared code path netcal's temperature
scaling has warmed) and dirichletcal.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import sys
import time
import traceback
import warnings

import numpy as np
from _lib.common import timed
from _lib.common import torchmetrics_ece as common_torchmetrics_ece
from _lib.peers import (
    betacal_ovr,
    find_dirichletcal_python,
    netcal_method,
    probmetrics_ms,
    probmetrics_ts,
    probmetrics_vs,
    run_dirichletcal,
    short_error,
    skcal_method,
    sklearn_calibrated,
)
from scipy.special import softmax

ODIR_REG = 1e-3
N_BINS = 15
WARM_UP_ROWS = 300
#: Not warmed up: even on 300 rows their fits take seconds to a minute (scipy
#: with numerical gradients over pyro model calls), and netcal's
#: TemperatureScaling, fitted before them, already warms the shared code path.
NO_WARM_UP = {"netcal LogisticCalibration", "netcal BetaCalibration"}
VERSIONED = (
    "skcal",
    "torch",
    "scikit-learn",
    "netcal",
    "probmetrics",
    "torchmetrics",
    "betacal",
)


# ----------------------------------------------------------------------------
# data, metrics


def make_data(n_cal, n_test, n_classes, seed, logit_scale=1.0):
    """Over-confident (temperature 2) probabilities with per-class offsets.

    ``logit_scale`` multiplies the logits before the softmax (badly scaled,
    far more confident scores; a calibrator's fit should not slow down).
    """
    from skcal.utils._testing import make_miscalibrated_logits

    offsets = np.random.default_rng(seed).normal(0.0, 1.0, n_classes)
    z_cal, y_cal = make_miscalibrated_logits(
        n_cal, n_classes, temperature=2.0, random_state=seed + 1
    )
    z_test, y_test = make_miscalibrated_logits(
        n_test, n_classes, temperature=2.0, random_state=seed + 2
    )
    return (
        softmax(logit_scale * (z_cal + offsets), axis=1),
        y_cal,
        softmax(logit_scale * (z_test + offsets), axis=1),
        y_test,
    )


def common_metrics(y, proba):
    """Test NLL and top-label ECE by skcal's functions, the same for every row."""
    from skcal.metrics import expected_calibration_error, negative_log_likelihood

    proba = np.asarray(proba, dtype=np.float64)
    return (
        float(negative_log_likelihood(y, proba)),
        float(expected_calibration_error(y, proba, n_bins=N_BINS)),
    )


def version(dist):
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


# ----------------------------------------------------------------------------
# the families: (title, [(label, factory, note), ...]); skcal's row first


def _temperature_family():
    from skcal import TemperatureScaling

    return (
        "Temperature scaling",
        [
            (
                "skcal TemperatureScaling",
                lambda: skcal_method(TemperatureScaling, device="cpu"),
                "",
            ),
            (
                "sklearn CCV temperature",
                lambda: sklearn_calibrated("temperature", "log"),
                "frozen pass-through, decision_function = log p",
            ),
            (
                "netcal TemperatureScaling",
                lambda: netcal_method("scaling", "TemperatureScaling"),
                "method='mle' (scipy, numerical gradient)",
            ),
            ("probmetrics temp-scaling", probmetrics_ts, "bisection"),
        ],
    )


def _vector_family():
    from skcal import VectorScaling

    return (
        "Vector scaling (unregularised)",
        [
            (
                "skcal VectorScaling reg_lambda=0",
                lambda: skcal_method(VectorScaling, reg_lambda=0.0, device="cpu"),
                "",
            ),
            (
                "skcal VectorScaling default",
                lambda: skcal_method(VectorScaling, device="cpu"),
                "reg_lambda='auto' = C/n ridge (not the same objective)",
            ),
            (
                "netcal LogisticCalibration",
                lambda: netcal_method("scaling", "LogisticCalibration"),
                "multiclass = vector scaling of log p; scipy, numerical grad",
            ),
            ("probmetrics VectorScaling", probmetrics_vs, "torchmin BFGS"),
        ],
    )


def _matrix_family():
    from skcal import MatrixScaling

    return (
        "Matrix scaling (unregularised)",
        [
            (
                "skcal MatrixScaling reg_lambda=0",
                lambda: skcal_method(MatrixScaling, reg_lambda=0.0, device="cpu"),
                "",
            ),
            (
                "skcal MatrixScaling default",
                lambda: skcal_method(MatrixScaling, device="cpu"),
                "reg_lambda='auto' = C/n ridge (not the same objective)",
            ),
            ("probmetrics MatrixScaling", probmetrics_ms, "torchmin BFGS"),
        ],
    )


def _dirichlet_family():
    from skcal import DirichletCalibrator

    return (
        f"Dirichlet calibration, ODIR reg_lambda = reg_mu = {ODIR_REG:g}",
        [
            (
                "skcal DirichletCalibrator",
                lambda: skcal_method(
                    DirichletCalibrator,
                    reg_lambda=ODIR_REG,
                    reg_mu=ODIR_REG,
                    ref_row=True,
                    device="cpu",
                ),
                "ref_row=True",
            ),
        ],
    )


def _isotonic_family():
    from skcal import IsotonicCalibrator

    return (
        "Isotonic regression, one-vs-rest",
        [
            (
                "skcal IsotonicCalibrator",
                lambda: skcal_method(IsotonicCalibrator),
                "",
            ),
            (
                "sklearn CCV isotonic",
                lambda: sklearn_calibrated("isotonic", "proba"),
                "frozen pass-through, predict_proba = p",
            ),
            (
                "netcal IsotonicRegression",
                lambda: netcal_method("binning", "IsotonicRegression"),
                "",
            ),
        ],
    )


def _histogram_family():
    from skcal import HistogramBinningCalibrator

    return (
        f"Histogram binning, {N_BINS} equal-width bins, one-vs-rest",
        [
            (
                "skcal HistogramBinning",
                lambda: skcal_method(HistogramBinningCalibrator, n_bins=N_BINS),
                "",
            ),
            (
                "netcal HistogramBinning",
                lambda: netcal_method("binning", "HistogramBinning", bins=N_BINS),
                "",
            ),
        ],
    )


def _platt_family():
    from skcal import PlattCalibrator

    return (
        "Platt scaling of the log-odds, one-vs-rest",
        [
            ("skcal PlattCalibrator", lambda: skcal_method(PlattCalibrator), ""),
            (
                "sklearn CCV sigmoid",
                lambda: sklearn_calibrated("sigmoid", "log_odds"),
                "pass-through, decision_function = log-odds",
            ),
        ],
    )


def _beta_family():
    from skcal import BetaCalibrator

    return (
        "Beta calibration (abm)",
        [
            ("skcal BetaCalibrator", lambda: skcal_method(BetaCalibrator), ""),
            ("betacal one-vs-rest", betacal_ovr, "renormalised as skcal"),
            (
                "netcal BetaCalibration",
                lambda: netcal_method("scaling", "BetaCalibration"),
                "joint softmax of beta features: a different model",
            ),
        ],
    )


def build_families(args, dc_reason):
    """Families of (label, factory or None, note); the first label is skcal's."""
    dc = "dirichletcal (subprocess)"
    families = [
        _temperature_family(),
        _vector_family(),
        _matrix_family(),
        _dirichlet_family(),
        _isotonic_family(),
        _histogram_family(),
        _platt_family(),
        _beta_family(),
    ]
    # dirichletcal rows: ("family index", label, worker spec, note)
    dc_rows = [(3, "dirichletcal FullDirichlet", "odir", "full", ODIR_REG, ODIR_REG)]
    if args.dirichletcal_all:
        dc_rows += [
            (1, "dirichletcal DiagonalDirichlet", "diag0", "diag", 0.0, None),
            (2, "dirichletcal FullDirichlet reg 0", "full0", "full", 0.0, None),
        ]
    specs = []
    for fam, label, name, kind, lam, mu in dc_rows:
        families[fam][1].append((label, ("dirichletcal", name), dc_reason or dc))
        specs.append(
            {
                "name": name,
                "label": label,
                "kind": kind,
                "reg_lambda": lam,
                "reg_mu": mu,
            }
        )
    return families, specs


# ----------------------------------------------------------------------------
# the comparison


def run_row(label, factory, P, y, Pt, args):
    """Warm up, then time fit and predict of one in-process method."""
    fit, predict = factory()
    if label not in NO_WARM_UP:
        # the first rows plus one of each class (some peers refuse a fit on
        # a subset that lacks a class)
        rows = np.union1d(
            np.arange(min(WARM_UP_ROWS, len(y))), np.unique(y, return_index=True)[1]
        )
        predict(fit(P[rows], y[rows]), Pt[rows])
    fit_s, model, runs = timed(lambda: fit(P, y), args.repeats, args.budget)
    pred_s, proba, _ = timed(lambda: predict(model, Pt), args.repeats, args.budget)
    return {"fit_s": fit_s, "predict_s": pred_s, "runs": runs, "proba": proba}


def score(row, yt):
    if "proba" in row:
        try:
            row["nll"], row["ece"] = common_metrics(yt, row.pop("proba"))
        except Exception as exc:  # noqa: BLE001
            row["error"] = "metric: " + short_error(exc)


def compare_ece(y, P_list, repeats, budget):
    """Top-label ECE (15 equal-width bins) by each library, on each input."""
    import torch

    from skcal.metrics import expected_calibration_error

    impls = [
        (
            "skcal expected_calibration_error",
            lambda: lambda y, P: float(expected_calibration_error(y, P, n_bins=N_BINS)),
        )
    ]

    def netcal_ece():
        from netcal.metrics import ECE

        return lambda y, P: float(ECE(bins=N_BINS).measure(P, y))

    def torchmetrics_ece():
        return common_torchmetrics_ece(N_BINS)

    def probmetrics_ece():
        from probmetrics.metrics import CalibrationError

        metric = CalibrationError(n_bins=N_BINS, norm="l1")
        return lambda y, P: float(
            metric.compute_from_labels_probs(torch.from_numpy(y), torch.from_numpy(P))
        )

    impls += [
        ("netcal ECE", netcal_ece),
        ("torchmetrics MulticlassCalibrationError", torchmetrics_ece),
        ("probmetrics CalibrationError", probmetrics_ece),
    ]
    rows = []
    for input_name, P in P_list:
        for label, make in impls:
            row = {"family": f"Top-label ECE, {N_BINS} bins, on {input_name}"}
            row["method"] = label
            try:
                f = make()
                f(y[:WARM_UP_ROWS], P[:WARM_UP_ROWS])
                t, value, runs = timed(lambda f=f, P=P: f(y, P), repeats, budget)
                row.update(time_s=t, value=value, runs=runs)
            except ImportError as exc:
                row["error"] = "not installed: " + short_error(exc)
            except Exception as exc:  # noqa: BLE001
                row["error"] = short_error(exc)
            rows.append(row)
    return rows


def fmt(x, spec):
    return format(x, spec) if isinstance(x, float) and np.isfinite(x) else "-"


def print_family(title, rows):
    ref = rows[0]
    print(f"\n== {title}   (reference: {ref['method']})")
    print(
        f"{'method':34s} {'fit s':>8s} {'pred s':>8s} {'fit x':>7s} {'pred x':>7s} "
        f"{'runs':>4s} {'test NLL':>9s} {'ECE':>7s}  note"
    )
    for r in rows:
        if "error" in r:
            print(f"{r['method']:34s} {'-- ' + r['error']}")
            continue
        fx = r["fit_s"] / ref["fit_s"] if "fit_s" in ref else float("nan")
        px = r["predict_s"] / ref["predict_s"] if "predict_s" in ref else float("nan")
        print(
            f"{r['method']:34s} {r['fit_s']:8.3f} {r['predict_s']:8.3f} "
            f"{fmt(fx, '7.2f'):>7s} {fmt(px, '7.2f'):>7s} {r['runs']:4d} "
            f"{fmt(r.get('nll'), '9.5f'):>9s} {fmt(r.get('ece'), '7.4f'):>7s}  "
            f"{r.get('note', '')}"
        )


def print_ece(rows):
    by_family = {}
    for r in rows:
        by_family.setdefault(r["family"], []).append(r)
    for title, group in by_family.items():
        ref = group[0]
        print(f"\n== {title}   (reference: {ref['method']})")
        print(
            f"{'implementation':40s} {'ECE':>10s} {'|diff|':>9s} "
            f"{'time s':>8s} {'x':>7s}"
        )
        for r in group:
            if "error" in r:
                print(f"{r['method']:40s} {'-- ' + r['error']}")
                continue
            diff = abs(r["value"] - ref["value"]) if "value" in ref else float("nan")
            ratio = r["time_s"] / ref["time_s"] if "time_s" in ref else float("nan")
            print(
                f"{r['method']:40s} {r['value']:10.6f} {fmt(diff, '9.1e'):>9s} "
                f"{r['time_s']:8.4f} {fmt(ratio, '7.2f'):>7s}"
            )


def build_parser():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-cal", type=int, default=10_000)
    parser.add_argument("--n-test", type=int, default=10_000)
    parser.add_argument("--n-classes", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--logit-scale",
        type=float,
        default=1.0,
        help="multiply the logits by this before the softmax (default 1)",
    )
    parser.add_argument("--repeats", type=int, default=3, help="best of R runs")
    parser.add_argument(
        "--budget",
        type=float,
        default=5.0,
        help="seconds after which a method is not run again (default 5)",
    )
    parser.add_argument(
        "--threads", type=int, default=None, help="torch.set_num_threads(N)"
    )
    parser.add_argument("--dirichletcal-python", default=None)
    parser.add_argument(
        "--dirichletcal-all",
        action="store_true",
        help="also run dirichletcal's vector and matrix scaling (slow)",
    )
    parser.add_argument("--dirichletcal-timeout", type=int, default=900)
    parser.add_argument(
        "--skip",
        nargs="+",
        default=[],
        metavar="TEXT",
        help="skip the methods whose label contains TEXT, e.g. 'netcal Beta'",
    )
    parser.add_argument(
        "--json", action="store_true", help="print one JSON document, no tables"
    )
    return parser


def run_families(families, dc, data, args):
    """Every row of every family: ``[(title, rows)]``, each row scored.

    ``dc`` is ``(python, reason, results)`` of dirichletcal, run before.
    """
    dc_python, dc_reason, dc_results = dc
    P, y, Pt, yt = data
    results = []
    for title, entries in families:
        rows = []
        for label, factory, note in entries:
            row = {"family": title, "method": label, "note": note}
            print(f"  {label} ...", file=sys.stderr, flush=True)
            if any(pattern in label for pattern in args.skip):
                row["error"] = "skipped (--skip)"
            elif isinstance(factory, tuple):  # dirichletcal, run above
                if dc_python is None:
                    row["error"] = f"skipped: {dc_reason}"
                else:
                    row.update(dc_results.get(factory[1], {"error": "no result"}))
            else:
                try:
                    row.update(run_row(label, factory, P, y, Pt, args))
                except ImportError as exc:
                    row["error"] = "not installed: " + short_error(exc)
                except Exception as exc:  # noqa: BLE001
                    row["error"] = short_error(exc)
                    if os.environ.get("SKCAL_BENCH_DEBUG"):
                        traceback.print_exc()
            score(row, yt)
            rows.append(row)
        results.append((title, rows))
    return results


def run_dirichletcal_rows(dc_python, dc_specs, data, args, log):
    """dirichletcal's rows (not skipped), fitted in one subprocess, by name."""
    P, y, Pt, _ = data
    dc_results = {}
    dc_specs = [s for s in dc_specs if not any(t in s["label"] for t in args.skip)]
    if dc_python and dc_specs:
        print(
            f"running dirichletcal ({len(dc_specs)} fits) in a subprocess ...",
            file=log,
            flush=True,
        )
        dc_results = run_dirichletcal(
            dc_python,
            dc_specs,
            P,
            y,
            Pt,
            args.repeats,
            args.budget,
            args.dirichletcal_timeout,
        )
    return dc_results


def report(args, versions, dc_python, uncalibrated, results, ece_rows, total):
    """Print the tables, or with ``--json`` one JSON document; exit status 0."""
    nll0, ece0 = uncalibrated
    if args.json:
        doc = {
            "args": vars(args),
            "versions": versions,
            "dirichletcal_python": dc_python,
            "uncalibrated": {"nll": nll0, "ece": ece0},
            "methods": [r for _, rows in results for r in rows],
            "ece": ece_rows,
            "total_s": total,
        }
        print(json.dumps(doc, indent=1))
        return 0
    for title, rows in results:
        print_family(title, rows)
    print_ece(ece_rows)
    print(f"\ntotal wall time {total:.0f} s")
    return 0


def main(argv=None):
    args = build_parser().parse_args(argv)
    import torch

    from skcal import TemperatureScaling

    warnings.simplefilter("ignore")
    if args.threads:
        torch.set_num_threads(args.threads)
    start = time.perf_counter()
    log = sys.stderr if args.json else sys.stdout

    P, y, Pt, yt = make_data(
        args.n_cal, args.n_test, args.n_classes, args.seed, args.logit_scale
    )
    dc_python, dc_reason = find_dirichletcal_python(args.dirichletcal_python)
    families, dc_specs = build_families(args, dc_reason)
    versions = {d: version(d) for d in VERSIONED}
    nll0, ece0 = common_metrics(yt, Pt)
    installed = ", ".join(f"{k} {v or 'not installed'}" for k, v in versions.items())
    print(
        f"data: {args.n_cal} calibration / {args.n_test} test samples, "
        f"{args.n_classes} classes, seed {args.seed}, logits x "
        f"{args.logit_scale:g}; uncalibrated test NLL "
        f"{nll0:.5f}, ECE {ece0:.4f}\n"
        f"versions: {installed}; torch threads {torch.get_num_threads()}\n"
        f"dirichletcal: {dc_python or dc_reason}",
        file=log,
        flush=True,
    )

    dc_results = run_dirichletcal_rows(dc_python, dc_specs, (P, y, Pt, yt), args, log)
    results = run_families(
        families, (dc_python, dc_reason, dc_results), (P, y, Pt, yt), args
    )
    ts_proba = (
        TemperatureScaling(input="proba", device="cpu").fit(P, y).predict_proba(Pt)
    )
    ece_rows = compare_ece(
        yt,
        [
            ("uncalibrated test probabilities", Pt),
            ("temperature-scaled test", ts_proba),
        ],
        args.repeats,
        args.budget,
    )
    total = time.perf_counter() - start

    return report(args, versions, dc_python, (nll0, ece0), results, ece_rows, total)


if __name__ == "__main__":
    sys.exit(main())
