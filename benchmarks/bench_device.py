"""Fit and predict times of the scaling family on one device, at ImageNet size.

For ``gpu_check.py`` (issue 16: fit and predict times at 50,000 x 1,000 on a
GPU). Every method of ``--methods`` (default: temperature, vector and matrix
scaling, structured matrix scaling and the Dirichlet calibrator, with their
defaults and ``device=--device``) is fitted on ``n`` calibration rows of
ImageNet-like logits (``_lib/synthetic.py``'s ``score_data``: C classes,
over-confident, top-1 accuracy about 0.67 at 1,000 classes) and predicts
``n`` test rows drawn the same way. Reported per method: the fit time (one
fit, after an untimed fit of temperature scaling on 1,000 rows that starts
the device), the ``predict_proba`` time (median of ``--repeats`` calls; the
fitted state is numpy on the CPU, so prediction runs on the CPU whatever the
device), the test NLL next to the uncalibrated one, and the solver's
iterations where the method reports them. A method whose fit raises (out of
memory, a refusal up front) is reported with the error, and the others go on.
On a CUDA device the times include the copies between host and device.

Run:  python benchmarks/bench_device.py [--device cuda] [--shape 50000x1000]
      [--methods TemperatureScaling VectorScaling] [--repeats 3] [--threads N]
      [--json FILE]
"""

import argparse
import json
import sys
import time

import numpy as np
from _lib.common import median_time
from _lib.synthetic import score_data

METHODS = (
    "TemperatureScaling",
    "VectorScaling",
    "MatrixScaling",
    "StructuredMatrixScaling",
    "DirichletCalibrator",
)


def _nll(proba, y):
    return float(-np.mean(np.log(np.maximum(proba[np.arange(len(y)), y], 1e-12))))


def _synchronize(device):
    import torch

    if str(device).startswith("cuda"):
        torch.cuda.synchronize()


def run(method, device, X, y, X_test, y_test, repeats):
    import skcal

    est = getattr(skcal, method)(device=device)
    row = {"method": method}
    try:
        start = time.perf_counter()
        est.fit(X, y)
        _synchronize(device)
        row["fit_s"] = time.perf_counter() - start
    except Exception as exc:  # recorded; the other methods go on
        row["error"] = f"{type(exc).__name__}: {exc}"[:300]
        return row
    row["predict_s"], proba = median_time(lambda: est.predict_proba(X_test), repeats)
    row["test_nll"] = _nll(proba, y_test)
    if hasattr(est, "n_iter_"):
        row["n_iter"] = int(np.sum(est.n_iter_))
    return row


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--shape", default="50000x1000", metavar="NxC")
    parser.add_argument("--methods", nargs="+", default=list(METHODS))
    parser.add_argument("--repeats", type=int, default=3, help="predict: median of R")
    parser.add_argument("--threads", type=int, default=None, help="torch threads")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", default=None, help="write the rows to this file")
    args = parser.parse_args(argv)

    import torch

    import skcal

    if args.threads:
        torch.set_num_threads(args.threads)
    n, n_classes = (int(v) for v in args.shape.lower().split("x"))
    rng = np.random.default_rng(args.seed)
    X, y = score_data(n, n_classes, rng)
    X_test, y_test = score_data(n, n_classes, rng)
    name = (
        torch.cuda.get_device_name(0)
        if args.device.startswith("cuda")
        else f"CPU, {torch.get_num_threads()} torch threads"
    )
    print(
        f"bench_device: skcal {skcal.__version__}, torch {torch.__version__}, "
        f"device {args.device} ({name}); {n:,} x {n_classes:,} logits, "
        f"uncalibrated test NLL {_nll(_softmax(X_test), y_test):.4f}",
        flush=True,
    )
    # start the device (CUDA context, kernels) outside the timings
    skcal.TemperatureScaling(device=args.device).fit(X[:1000], y[:1000])
    print(f"{'method':<26} {'fit s':>8} {'predict s':>10} {'test NLL':>9} {'iters':>6}")
    rows = []
    for method in args.methods:
        row = run(method, args.device, X, y, X_test, y_test, args.repeats)
        rows.append(row)
        if "error" in row:
            print(f"{method:<26} failed: {row['error']}", flush=True)
            continue
        print(
            f"{method:<26} {row['fit_s']:8.2f} {row['predict_s']:10.3f} "
            f"{row['test_nll']:9.4f} {row.get('n_iter', ''):>6}",
            flush=True,
        )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(
                {
                    "device": args.device,
                    "name": name,
                    "shape": [n, n_classes],
                    "rows": rows,
                },
                f,
                indent=1,
            )
        print(f"wrote {args.json}")
    return 0 if all("error" not in r for r in rows) else 1


def _softmax(z):
    from scipy.special import softmax

    return softmax(z, axis=1)


if __name__ == "__main__":
    sys.exit(main())
