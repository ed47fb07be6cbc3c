"""Structured matrix scaling at 50-100 classes: skcal against probmetrics.

Same data, same run, one torch thread: synthetic over-confident logits with
class confusions (the generator of ``bench_global.py``) at ``--classes``
(default 53 and 92, the class counts of the two real text tasks of issues
49 and 51) x ``--rows`` calibration rows (default 12,000) and as many test
rows, given to both libraries as softmax probabilities. The fits are
interleaved (skcal, skcal without its preconditioner, probmetrics, then
again) ``--repeats`` times; the script prints each one's median fit time,
L-BFGS iterations and test NLL, and the ratios probmetrics' time / skcal's
(> 1: skcal is faster) and the relative NLL differences.

``--dirichlet-cv`` also times ``DirichletCalibratorCV(random_state=0)`` on
the same calibration rows, once per repeat, with its selected strengths
and test NLL.

Run:  python benchmarks/bench_sms_speed.py [--classes 53 92] [--rows 12000]
          [--repeats 3] [--dirichlet-cv]
"""

import argparse
import os
import sys
import time
import warnings

import numpy as np
from scipy.special import softmax


def make_data(n_classes, n_rows, seed=0):
    from skcal.utils._testing import make_miscalibrated_logits

    X, y = make_miscalibrated_logits(
        2 * n_rows, n_classes, temperature=2.0, random_state=seed
    )
    rng = np.random.default_rng(seed)
    mix = np.eye(n_classes) + 0.3 * rng.random((n_classes, n_classes)) / n_classes
    X = X @ mix.T + rng.normal(0, 0.5, n_classes)
    P = softmax(X, axis=1)
    return P[:n_rows], y[:n_rows], P[n_rows:], y[n_rows:]


def nll(proba, y):
    return float(-np.mean(np.log(np.clip(proba[np.arange(len(y)), y], 1e-300, None))))


def fit_skcal(P, y, precondition=True):
    from skcal import StructuredMatrixScaling

    class Unpreconditioned(StructuredMatrixScaling):
        _precondition = False  # the solver before issue 51 (same objective)

    cls = StructuredMatrixScaling if precondition else Unpreconditioned
    return cls(input="proba", device="cpu").fit(P, y)


def fit_probmetrics(P, y):
    from probmetrics.calibrators import get_calibrator

    cal = get_calibrator("sms")
    cal.fit(P, y)
    return cal


def time_case(P, y, Pt, yt, methods, repeats):
    """``{name: (median fit s, iterations, test NLL)}``, fits interleaved."""
    times = {name: [] for name in methods}
    models = {}
    for _ in range(repeats):
        for name, fit in methods.items():
            start = time.perf_counter()
            models[name] = fit(P, y)
            times[name].append(time.perf_counter() - start)
    return {
        name: (
            float(np.median(times[name])),
            getattr(models[name], "n_iter_", None),
            nll(models[name].predict_proba(Pt), yt),
        )
        for name in methods
    }


def report(c, res):
    for name, (fit_s, n_iter, value) in res.items():
        its = "" if n_iter is None else f"  {n_iter:4d} iterations"
        print(f"C={c:4d}  {name:26s} fit {fit_s:7.3f} s{its}  test NLL {value:.6f}")
    if "probmetrics SMS" not in res:
        return
    ref_s, _, ref = res["probmetrics SMS"]
    for name in ("skcal SMS", "skcal SMS, no preconditioner"):
        fit_s, _, value = res[name]
        print(
            f"C={c:4d}  probmetrics / {name}: fit time ratio {ref_s / fit_s:.2f}, "
            f"test NLL relative difference {(value - ref) / ref:+.1e}",
            flush=True,
        )


def dirichlet_cv(P, y, Pt, yt, repeats):
    from skcal import DirichletCalibratorCV

    L, Lt = np.log(P), np.log(Pt)
    for _ in range(repeats):
        start = time.perf_counter()
        cv = DirichletCalibratorCV(device="cpu", random_state=0).fit(L, y)
        print(
            f"         DirichletCalibratorCV() fit {time.perf_counter() - start:.1f} s"
            f"  reg_lambda {cv.reg_lambda_} reg_mu {cv.reg_mu_}  test NLL "
            f"{nll(cv.predict_proba(Lt), yt):.6f}",
            flush=True,
        )


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--classes", type=int, nargs="+", default=[53, 92])
    parser.add_argument("--rows", type=int, default=12_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--dirichlet-cv", action="store_true")
    args = parser.parse_args(argv)

    import torch

    import skcal

    warnings.simplefilter("ignore")
    torch.set_num_threads(1)
    skcal.set_config(n_threads=1)
    print(f"torch threads {torch.get_num_threads()}; load {os.getloadavg()}")
    methods = {
        "skcal SMS": fit_skcal,
        "skcal SMS, no preconditioner": lambda P, y: fit_skcal(P, y, False),
    }
    try:
        import probmetrics.calibrators  # noqa: F401

        methods["probmetrics SMS"] = fit_probmetrics
    except ImportError:
        print("probmetrics is not installed: skcal only")
    P, y, _, _ = make_data(25, 500)  # first calls import torch's machinery
    for fit in methods.values():
        fit(P, y)
    for c in args.classes:
        P, y, Pt, yt = make_data(c, args.rows)
        report(c, time_case(P, y, Pt, yt, methods, args.repeats))
        if args.dirichlet_cv:
            dirichlet_cv(P, y, Pt, yt, args.repeats)
    print(f"load {os.getloadavg()}")


if __name__ == "__main__":
    sys.exit(main())
