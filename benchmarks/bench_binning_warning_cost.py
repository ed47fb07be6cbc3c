"""What the out-of-sample accuracy check costs the one-vs-rest fits (issue 49).

The one-vs-rest calibrators check at fit, on problems of three classes or
more, whether their probabilities lose accuracy; the drop is cross-fitted
(the maps fitted again on each of two stratified folds, judged on the
other). Each calibrator is fitted on a synthetic problem of
``make_miscalibrated_logits`` three ways, interleaved in one process so
that a shared machine's load falls on all three alike (the least of
``--repeats`` times is kept):

* ``no check``: the maps alone (the check disabled);
* ``in-sample``: the check of version 0.2.0's first draft, on the
  calibration rows themselves (the cross-fit disabled: its fallback);
* ``held-out``: the shipped check (three folds; two beyond a million
  scores, as at 10,000 x 1,000).

Run:  python benchmarks/bench_binning_warning_cost.py [--shapes 10000x10
          10000x1000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from unittest import mock


def _methods() -> dict:
    from skcal import calibrators as c

    return {
        "histogram binning": c.HistogramBinningCalibrator,
        "isotonic": c.IsotonicCalibrator,
        "centred isotonic": c.CenteredIsotonicCalibrator,
        "scaling-binning": c.ScalingBinningCalibrator,
        "BBQ": c.BBQCalibrator,
        "ENIR": c.ENIRCalibrator,
        "Platt": c.PlattCalibrator,
        "beta": c.BetaCalibrator,
    }


def _variants():
    from skcal.calibrators._one_vs_rest import OneVsRestCalibrator as Base

    return {
        "no check": mock.patch.object(
            Base, "_warn_accuracy_drop", lambda *args, **kwargs: None
        ),
        "in-sample": mock.patch.object(
            Base, "_held_out_proba", lambda *args, **kwargs: None
        ),
        "held-out": mock.patch.object(Base, "__doc__", Base.__doc__),  # as shipped
    }


def _time(make, X, y, patch) -> float:
    with patch, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        start = time.perf_counter()
        make().fit(X, y)
        return time.perf_counter() - start


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shapes", nargs="*", default=["10000x10", "10000x1000"])
    parser.add_argument("--methods", nargs="*", default=None)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    from skcal.utils._testing import make_miscalibrated_logits

    print(
        "| rows x classes | method | no check s | in-sample s | held-out s | "
        "held-out / no check | held-out / in-sample |"
    )
    print("|---|---|---|---|---|---|---|")
    for shape in args.shapes:
        n, k = (int(v) for v in shape.split("x"))
        X, y = make_miscalibrated_logits(n, k, random_state=0)
        for name, make in _methods().items():
            if args.methods and name not in args.methods:
                continue
            times = {v: [] for v in _variants()}
            for _ in range(args.repeats):
                for variant, patch in _variants().items():
                    times[variant].append(_time(make, X, y, patch))
            best = {v: min(t) for v, t in times.items()}
            print(
                f"| {n:,} x {k:,} | {name} | {best['no check']:.3f} | "
                f"{best['in-sample']:.3f} | {best['held-out']:.3f} | "
                f"{best['held-out'] / best['no check']:.2f} | "
                f"{best['held-out'] / best['in-sample']:.2f} |",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
