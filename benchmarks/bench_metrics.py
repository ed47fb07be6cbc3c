"""Binned metrics against a plain numpy binned pass and torchmetrics, same run.

Times skcal's top-label ``expected_calibration_error`` on 1e6 x 10 and
1e5 x 1000 probabilities and ``classwise_calibration_error`` on 1e5 x 1000
(15 equal-width bins, ``[l, u)``), next to:

* a plain numpy pass, the floor for a numpy implementation: argmax and max
  of each row, integer binning ``min(floor(conf * 15), 14)``, three
  ``np.bincount`` sums and the weighted ``|acc - conf|`` sum; for the
  classwise ECE the same per class, in a loop over the columns. It validates
  nothing;
* torchmetrics' ``MulticlassCalibrationError`` (top-label ECE, on a tensor
  sharing the numpy array's memory), when torchmetrics can be imported.

Each time is the median of ``--repeat`` calls (after one warm-up call on a
few rows); the ratio is to the numpy pass of the same case (< 1: faster).
The value column shows that the implementations agree. torch's intra-op
threads and BLAS's are set by ``--threads`` (default 1) and printed, with
the load average before and after: the machine's other jobs show in it.

Run:  python benchmarks/bench_metrics.py [--repeat 5] [--threads 1]
      [--dtypes float32 float64] [--cases ece-1e6x10 ece-1e5x1000 cw-1e5x1000]
      [--skcal PATH]

``--skcal PATH`` imports skcal from the directory PATH (for instance a
checkout of an older commit) to compare versions with the same script.
torchmetrics is not a dependency of skcal; a virtual environment that has it
and can import skcal from this checkout runs every row.
"""

import argparse
import importlib.util
import os
import sys

import numpy as np
from _lib.common import median_time
from _lib.common import torchmetrics_ece as common_torchmetrics_ece

HERE = os.path.dirname(os.path.abspath(__file__))

N_BINS = 15
CASES = {
    "ece-1e6x10": ("ece", 1_000_000, 10),
    "ece-1e5x1000": ("ece", 100_000, 1000),
    "cw-1e5x1000": ("classwise", 100_000, 1000),
}


def make_problem(n, c, dtype, seed=0):
    """Over-confident softmax probabilities and labels drawn from calibrated ones."""
    rng = np.random.default_rng(seed)
    logits = rng.standard_normal((n, c), dtype=np.float32)
    logits *= 3.0
    logits -= logits.max(axis=1, keepdims=True)
    calibrated = np.exp(logits / 2.0)
    calibrated /= calibrated.sum(axis=1, keepdims=True)
    cum = np.cumsum(calibrated, axis=1, dtype=np.float64)
    u = rng.uniform(size=(n, 1)) * cum[:, -1:]
    y = np.minimum((u > cum).sum(axis=1), c - 1)
    del calibrated, cum
    np.exp(logits, out=logits)
    logits /= logits.sum(axis=1, keepdims=True)
    return y, logits.astype(dtype, copy=False)


def numpy_top_label(y, P):
    """Plain numpy top-label ECE: no validation, integer binning."""
    pred = P.argmax(axis=1)
    conf = P.max(axis=1).astype(np.float64)
    idx = np.minimum((conf * N_BINS).astype(np.intp), N_BINS - 1)
    count = np.bincount(idx, minlength=N_BINS)
    conf_sum = np.bincount(idx, weights=conf, minlength=N_BINS)
    acc_sum = np.bincount(idx, weights=pred == y, minlength=N_BINS)
    return float(np.abs(acc_sum - conf_sum).sum() / count.sum())


def numpy_classwise(y, P):
    """Plain numpy classwise ECE: the top-label pass on each column."""
    total = 0.0
    for k in range(P.shape[1]):
        p = P[:, k].astype(np.float64)
        idx = np.minimum((p * N_BINS).astype(np.intp), N_BINS - 1)
        p_sum = np.bincount(idx, weights=p, minlength=N_BINS)
        y_sum = np.bincount(idx, weights=y == k, minlength=N_BINS)
        total += np.abs(y_sum - p_sum).sum() / len(y)
    return total / P.shape[1]


def import_skcal(root):
    """Import the package ``skcal`` from the folder ``root/skcal``.

    What ``sys.path.insert(0, root); import skcal`` does for skcal alone: its
    submodules are then found under ``root/skcal`` too.
    """
    folder = os.path.join(os.path.abspath(root), "skcal")
    spec = importlib.util.spec_from_file_location(
        "skcal",
        os.path.join(folder, "__init__.py"),
        submodule_search_locations=[folder],
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules["skcal"] = module
    spec.loader.exec_module(module)
    return module


def implementations(kind):
    """(name, factory) pairs; a factory returns f(y, P) or raises ImportError."""
    from skcal.metrics import classwise_calibration_error, expected_calibration_error

    if kind == "classwise":
        return [
            ("numpy per-class loop", lambda: numpy_classwise),
            (
                "skcal classwise_calibration_error",
                lambda: lambda y, P: classwise_calibration_error(y, P, n_bins=N_BINS),
            ),
        ]

    def torchmetrics_ece():
        return common_torchmetrics_ece(N_BINS)

    return [
        ("numpy plain pass", lambda: numpy_top_label),
        (
            "skcal expected_calibration_error",
            lambda: lambda y, P: expected_calibration_error(y, P, n_bins=N_BINS),
        ),
        ("torchmetrics MulticlassCalibrationError", torchmetrics_ece),
    ]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument(
        "--dtypes",
        nargs="+",
        default=["float32", "float64"],
        choices=["float32", "float64"],
    )
    parser.add_argument("--cases", nargs="+", default=list(CASES), choices=list(CASES))
    parser.add_argument("--skcal", default=os.path.dirname(HERE))
    args = parser.parse_args(argv)
    skcal = import_skcal(args.skcal)

    try:
        import threadpoolctl

        threadpoolctl.threadpool_limits(args.threads)
    except ImportError:
        pass
    try:
        import torch

        torch.set_num_threads(args.threads)
        torch_info = f"torch {torch.__version__} threads={torch.get_num_threads()}"
    except ImportError:
        torch_info = "torch not installed"
    print(
        f"skcal from {os.path.dirname(os.path.dirname(skcal.__file__))}; "
        f"numpy {np.__version__}; {torch_info}; BLAS threads={args.threads}; "
        f"load average {os.getloadavg()[0]:.2f}; median of {args.repeat} calls"
    )
    print(
        f"{'case':>13} {'dtype':>8} {'method':<40} {'median s':>9} "
        f"{'vs numpy':>8} {'value':>12}"
    )
    for case in args.cases:
        kind, n, c = CASES[case]
        for dtype in args.dtypes:
            y, P = make_problem(n, c, dtype)
            base = None
            for name, factory in implementations(kind):
                try:
                    f = factory()
                except ImportError:
                    print(f"{case:>13} {dtype:>8} {name:<40} {'not installed':>9}")
                    continue
                f(y[:1000], P[:1000])  # warm-up
                t, value = median_time(lambda f=f, y=y, P=P: f(y, P), args.repeat)
                base = t if base is None else base
                print(
                    f"{case:>13} {dtype:>8} {name:<40} {t:9.4f} "
                    f"{t / base:8.2f} {value:12.8f}",
                    flush=True,
                )
            del y, P
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
