"""Approximate LCE / MLCE (random Fourier features) against the exact metric.

On the test embeddings of the real tasks of ``benchmarks/_lib/datasets``
(uncalibrated network probabilities, the default space: standardise + PCA
to 50), at the paper's bandwidth 10 and at ``bandwidth="auto"``: the
relative error of ``method="rff"`` for several numbers of random
frequencies ``D``, averaged over ``--seeds`` seeds of the frequencies, and
the times of both methods.

    python benchmarks/bench_lce_rff.py [--tasks letter fashion_mnist kjv_books]
        [--rows 6000] [--seeds 3]
"""

from __future__ import annotations

import argparse
import json
import time
import warnings

import numpy as np
from _lib.datasets import load_task
from scipy.special import softmax

COMPONENTS = (256, 1024, 4096)


def run(task: str, rows: int, seeds: int) -> list[dict]:
    from skcal.metrics import local_bandwidth, local_calibration_errors

    data = load_task(task)
    emb = np.asarray(data.test_embeddings[:rows], dtype=np.float64)
    proba = softmax(data.test_logits[:rows], axis=1)
    y = data.test_labels[:rows]
    out = []
    for bandwidth in (10.0, "auto"):
        h = local_bandwidth(emb) if bandwidth == "auto" else bandwidth
        kw = dict(bandwidth=h, device="cpu")
        t0 = time.perf_counter()
        exact = local_calibration_errors(y, proba, emb, **kw)
        exact_s = time.perf_counter() - t0
        row = {
            "task": task,
            "rows": len(y),
            "classes": proba.shape[1],
            "dim": emb.shape[1],
            "bandwidth": str(bandwidth),
            "h": h,
            "lce": exact.lce,
            "mlce": exact.mlce,
            "exact_s": exact_s,
        }
        for D in COMPONENTS:
            lce_err, mlce_err, times = [], [], []
            for seed in range(seeds):
                t0 = time.perf_counter()
                approx = local_calibration_errors(
                    y, proba, emb, method="rff", n_components=D, random_state=seed, **kw
                )
                times.append(time.perf_counter() - t0)
                lce_err.append(approx.lce / exact.lce - 1)
                mlce_err.append(approx.mlce / exact.mlce - 1)
            row[f"D{D}"] = {
                "lce_rel_err": float(np.mean(np.abs(lce_err))),
                "lce_bias": float(np.mean(lce_err)),
                "mlce_rel_err": float(np.mean(np.abs(mlce_err))),
                "s": float(np.median(times)),
            }
        print(json.dumps(row), flush=True)
        out.append(row)
    return out


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--tasks", nargs="+", default=["letter", "fashion_mnist", "kjv_books"]
    )
    parser.add_argument("--rows", type=int, default=6000)
    parser.add_argument("--seeds", type=int, default=3)
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")  # flat-kernel warnings are part of the table
    rows = [r for task in args.tasks for r in run(task, args.rows, args.seeds)]
    print(
        "\n| task | bandwidth | exact LCE | exact s | "
        + " | ".join(f"D={D}: LCE err / MLCE err / s" for D in COMPONENTS)
        + " |"
    )
    print("|---" * (4 + len(COMPONENTS)) + "|")
    for r in rows:
        cells = [
            f"{100 * r[f'D{D}']['lce_rel_err']:.1f}% / "
            f"{100 * r[f'D{D}']['mlce_rel_err']:.0f}% / {r[f'D{D}']['s']:.1f}"
            for D in COMPONENTS
        ]
        print(
            f"| {r['task']} ({r['dim']}-d, {r['classes']} cl.) | {r['bandwidth']} "
            f"({r['h']:.2f}) | {r['lce']:.5f} | {r['exact_s']:.1f} | "
            + " | ".join(cells)
            + " |"
        )


if __name__ == "__main__":
    main()
