"""Fit time and peak memory of every score calibrator at 100 and 1,000 classes.

Each fit runs in a fresh process (so peak resident memory is its own) on
2,000 synthetic calibration samples; the report gives wall time, peak RSS
minus the RSS of the same process before the fit, and test NLL on 2,000
more samples.

Run:  python benchmarks/bench_many_classes.py [--classes 100 1000] [--n 2000]
"""

import argparse
import json
import resource
import subprocess
import sys
import time
import warnings


def one(name: str, n_classes: int, n: int) -> None:
    import numpy as np

    from skcal.utils._testing import make_estimator, make_miscalibrated_logits
    from skcal.utils.discovery import all_estimators

    warnings.simplefilter("ignore")
    cls = dict(all_estimators("score"))[name]
    X, y = make_miscalibrated_logits(2 * n, n_classes, temperature=2.0, random_state=0)
    est = make_estimator(cls, device="cpu")
    if "random_state" in est.get_params():
        est.set_params(random_state=0)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.perf_counter()
    est.fit(X[:n], y[:n])
    fit_s = time.perf_counter() - start
    proba = est.predict_proba(X[n:])
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    nll = float(-np.mean(np.log(proba[np.arange(n), y[n:]])))
    print(
        json.dumps(
            {
                "fit_s": fit_s,
                "extra_mb": (peak - before) / 1024,
                "peak_mb": peak / 1024,
                "nll": nll,
            }
        )
    )


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--classes", type=int, nargs="+", default=[100, 1000])
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--methods", nargs="+", default=None, help="default: all")
    parser.add_argument("--one", nargs=2, metavar=("NAME", "C"))
    args = parser.parse_args(argv)
    if args.one:
        return one(args.one[0], int(args.one[1]), args.n)
    from skcal.utils.discovery import all_estimators

    print(
        f"{'method':32s} {'C':>5s} {'fit s':>8s} {'extra MiB':>10s} "
        f"{'peak MiB':>9s} {'test NLL':>9s}"
    )
    for c in args.classes:
        for name, _ in all_estimators("score"):
            if args.methods and name not in args.methods:
                continue
            out = subprocess.run(
                [sys.executable, __file__, "--one", name, str(c), "--n", str(args.n)],
                capture_output=True,
                text=True,
            )
            if out.returncode:
                print(f"{name:32s} {c:5d} failed: {out.stderr.strip()[-200:]}")
                continue
            r = json.loads(out.stdout.strip().splitlines()[-1])
            print(
                f"{name:32s} {c:5d} {r['fit_s']:8.2f} {r['extra_mb']:10.0f} "
                f"{r['peak_mb']:9.0f} {r['nll']:9.4f}",
                flush=True,
            )


if __name__ == "__main__":
    sys.exit(main())
