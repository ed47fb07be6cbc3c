"""Exact LCE + MLCE at scale: wall time and peak memory.

Cases: 50,000 points x 10 classes and 20,000 points x 100 classes, 50-d
features (space=None, so the time is the kernel's, not the PCA's). Each case
runs in a fresh subprocess; it reports the wall time of
``local_calibration_error``, ``max_local_calibration_error`` and of
``local_calibration_errors`` (both from one kernel run), and the peak
resident memory of the process above what it held before the metrics (the
inputs themselves are a few MB).

Run:  python benchmarks/bench_local.py [--device cpu] [--case 0|1]
"""

import argparse
import json
import os
import resource
import subprocess
import sys
import time

import numpy as np
from _lib.common import current_rss_mb

CASES = [(50_000, 10, 50), (20_000, 100, 50)]


def run_case(index: int, device: str) -> dict:
    import torch

    from skcal.metrics import (
        local_calibration_error,
        local_calibration_errors,
        max_local_calibration_error,
    )
    from skcal.utils._testing import sample_labels

    n, n_classes, dim = CASES[index]
    rng = np.random.default_rng(0)
    centres = rng.normal(size=(n_classes, dim)) * 2
    y_true = rng.integers(0, n_classes, n)
    features = centres[y_true] + rng.normal(size=(n, dim)) * 2
    logits = features @ centres.T / dim * 4
    proba = np.exp(logits - logits.max(1, keepdims=True))
    proba /= proba.sum(1, keepdims=True)
    y = sample_labels(proba, rng)
    before = current_rss_mb()
    start = time.perf_counter()
    lce = local_calibration_error(y, proba, features, space=None, device=device)
    t_lce = time.perf_counter() - start
    start = time.perf_counter()
    mlce = max_local_calibration_error(y, proba, features, space=None, device=device)
    t_mlce = time.perf_counter() - start
    start = time.perf_counter()
    both = local_calibration_errors(y, proba, features, space=None, device=device)
    t_both = time.perf_counter() - start
    assert (both.lce, both.mlce) == (lce, mlce)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    largest_bin = max(
        np.bincount(np.minimum((proba[:, k] * 15).astype(int), 14)).max()
        for k in range(n_classes)
    )
    return {
        "n": n,
        "classes": n_classes,
        "dim": dim,
        "device": device,
        "threads": torch.get_num_threads(),
        "lce": lce,
        "mlce": mlce,
        "lce_s": t_lce,
        "mlce_s": t_mlce,
        "both_s": t_both,
        "rss_before_mb": before,
        "peak_rss_mb": peak,
        "largest_bin": int(largest_bin),
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--case", type=int, default=None)
    args = parser.parse_args(argv)
    if args.case is not None:
        print(json.dumps(run_case(args.case, args.device)))
        return
    for index in range(len(CASES)):
        out = subprocess.run(
            [
                sys.executable,
                os.path.abspath(__file__),
                "--case",
                str(index),
                "--device",
                args.device,
            ],
            capture_output=True,
            text=True,
            check=True,
        )
        r = json.loads(out.stdout.strip().splitlines()[-1])
        extra = r["peak_rss_mb"] - r["rss_before_mb"]
        print(
            f"{r['n']} x {r['classes']} classes, {r['dim']}-d, {r['device']}, "
            f"{r['threads']} threads: LCE {r['lce']:.4f} in {r['lce_s']:.1f} s, "
            f"MLCE {r['mlce']:.4f} in {r['mlce_s']:.1f} s, both in one call "
            f"(local_calibration_errors) {r['both_s']:.1f} s; peak RSS "
            f"{r['peak_rss_mb']:.0f} MB ({extra:.0f} MB "
            f"above the {r['rss_before_mb']:.0f} MB before the metrics); largest "
            f"class-bin {r['largest_bin']} points"
        )


if __name__ == "__main__":
    main()
