"""Dirichlet (ODIR) and SMS: skcal against dirichletcal and probmetrics.

Same data, same run: synthetic over-confident logits with class confusions
(10,000 calibration and 10,000 test samples; 10 and 100 classes), given to
every method as softmax probabilities. Prints fit time and test NLL of

* skcal ``DirichletCalibrator(reg_lambda, reg_mu, ref_row=True)`` vs
  dirichletcal ``FullDirichletCalibrator(reg_lambda, reg_mu)`` (same
  objective), run through ``--dirichletcal-python`` (an interpreter whose
  environment has dirichletcal, e.g. a Python 3.12 venv);
* skcal ``StructuredMatrixScaling`` vs probmetrics ``get_calibrator("sms")``;

and the time ratios (reference / skcal: > 1 means skcal is faster).
``--tasks`` adds real models (``_lib/datasets``: 4,000 calibration rows of the
task's pool, its whole test set); ``--repeats R`` reports the median of R
fits; ``--threads N`` sets torch's thread count; ``--sms-tol T`` adds skcal's
SMS at the gradient tolerance ``T`` (its default is 1e-5; probmetrics solves
in float32 and stops where float32 no longer resolves a step, at gradients
of about 1e-4 to 1e-3, so ``T = 1e-4`` compares the two at equal precision).

Run:  python benchmarks/bench_global.py [--dirichletcal-python PATH]
          [--classes 10 100] [--tasks kjv_books wordnet_supersenses]
          [--repeats 3] [--threads 1] [--sms-tol 1e-4]
"""

import argparse
import os
import sys
import time
import warnings

import numpy as np
from _lib.peers import dirichletcal_full
from scipy.special import softmax


def make_data(n_classes, seed=0):
    from skcal.utils._testing import make_miscalibrated_logits

    X, y = make_miscalibrated_logits(
        20_000, n_classes, temperature=2.0, random_state=seed
    )
    rng = np.random.default_rng(seed)
    # confusions between classes: a random near-identity mixing of the logits
    mix = np.eye(n_classes) + 0.3 * rng.random((n_classes, n_classes)) / n_classes
    X = X @ mix.T + rng.normal(0, 0.5, n_classes)
    P = softmax(X, axis=1)
    return P[:10_000], y[:10_000], P[10_000:], y[10_000:]


def nll(proba, y):
    return float(-np.mean(np.log(np.clip(proba[np.arange(len(y)), y], 1e-300, None))))


def real_data(name, n_cal=4000):
    from _lib.datasets import load_task

    task = load_task(name)
    L, _, y = task.calibration_subset(min(n_cal, task.n_cal), random_state=0)
    return softmax(L, axis=1), y, softmax(task.test_logits, axis=1), task.test_labels


def timed(fit, predict, repeats=1):
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        model = fit()
        times.append(time.perf_counter() - start)
    fit_s = float(np.median(times))
    start = time.perf_counter()
    proba = predict(model)
    return fit_s, time.perf_counter() - start, proba


def build_parser():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dirichletcal-python", default=None)
    parser.add_argument("--classes", type=int, nargs="+", default=[10, 100])
    parser.add_argument("--reg", type=float, default=1e-3, help="reg_lambda = reg_mu")
    parser.add_argument("--tasks", nargs="*", default=[], help="real tasks")
    parser.add_argument("--repeats", type=int, default=1, help="median of R fits")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--timeout", type=int, default=1200)
    parser.add_argument(
        "--sms-tol",
        type=float,
        default=None,
        help="also fit skcal's SMS at this gradient tolerance (e.g. 1e-4)",
    )
    return parser


def fit_case(P, y, Pt, yt, args, get_calibrator, sms_tol_name):
    """``{method: (fit_s, predict_s, test probabilities or NLL)}`` of one case."""
    from skcal import DirichletCalibrator, StructuredMatrixScaling

    res = {}
    res["skcal Dirichlet"] = timed(
        lambda: DirichletCalibrator(
            input="proba",
            reg_lambda=args.reg,
            reg_mu=args.reg,
            ref_row=True,
            device="cpu",
        ).fit(P, y),
        lambda m: m.predict_proba(Pt),
        args.repeats,
    )
    if args.dirichletcal_python:
        res["dirichletcal Full"] = dirichletcal_full(
            args.dirichletcal_python, P, y, Pt, yt, args.reg, args.timeout
        )
    res["skcal SMS"] = timed(
        lambda: StructuredMatrixScaling(input="proba", device="cpu").fit(P, y),
        lambda m: m.predict_proba(Pt),
        args.repeats,
    )
    if args.sms_tol:
        res[sms_tol_name] = timed(
            lambda: StructuredMatrixScaling(
                input="proba", device="cpu", tol=args.sms_tol
            ).fit(P, y),
            lambda m: m.predict_proba(Pt),
            args.repeats,
        )
    if get_calibrator is not None:

        def fit_pm():
            cal = get_calibrator("sms")
            cal.fit(P, y)
            return cal

        res["probmetrics SMS"] = timed(
            fit_pm,
            lambda m: m.predict_proba(Pt),
            args.repeats,
        )
    return res


def print_case(c, res, Pt, yt, rows, sms_tol_name):
    """Print one case's rows (appended to ``rows``) and the ratios to the peers."""
    for name, (fit_s, pred_s, proba) in res.items():
        value = proba if isinstance(proba, float) else nll(proba, yt)
        rows.append((c, name, fit_s, pred_s, value))
        print(
            f"C={c!s:>4}  {name:18s} fit {fit_s:9.3f} s  predict {pred_s:7.3f} s  "
            f"test NLL {value:.5f}",
            flush=True,
        )
    print(f"C={c!s:>4}  uncalibrated       test NLL {nll(Pt, yt):.5f}")
    d = {name: (f, v) for cc, name, f, _, v in rows if cc == c}
    for ours, ref in [
        ("skcal Dirichlet", "dirichletcal Full"),
        ("skcal SMS", "probmetrics SMS"),
        (sms_tol_name, "probmetrics SMS"),
    ]:
        if ref in d and ours in d:
            print(
                f"C={c!s:>4}  {ref} / {ours}: fit time ratio "
                f"{d[ref][0] / d[ours][0]:.2f}, NLL difference (ours - ref) "
                f"{d[ours][1] - d[ref][1]:+.5f}",
                flush=True,
            )


def main(argv=None):
    args = build_parser().parse_args(argv)
    from skcal import DirichletCalibrator

    sms_tol_name = f"skcal SMS tol={args.sms_tol:g}" if args.sms_tol else None
    warnings.simplefilter("ignore")
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
        print(f"torch threads {torch.get_num_threads()}; load {os.getloadavg()}")
    try:
        from probmetrics.calibrators import get_calibrator
    except ImportError:
        get_calibrator = None
    # torch imports its optimiser machinery on first use (seconds): warm up
    P, y, _, _ = make_data(3)
    DirichletCalibrator(input="proba", device="cpu").fit(P[:200], y[:200])
    rows = []
    cases = [(c, lambda c=c: make_data(c)) for c in args.classes]
    cases += [(name, lambda name=name: real_data(name)) for name in args.tasks]
    for c, data in cases:
        P, y, Pt, yt = data()
        res = fit_case(P, y, Pt, yt, args, get_calibrator, sms_tol_name)
        print_case(c, res, Pt, yt, rows, sms_tol_name)


if __name__ == "__main__":
    sys.exit(main())
