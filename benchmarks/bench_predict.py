"""Predict time of every score calibrator against one bare softmax pass and the peers.

Every class of ``skcal.discovery.all_estimators("score")`` is fitted
once with its default parameters (``device="cpu"``, ``random_state=0``,
``classes=range(C)``) on ImageNet-like logits (``score_data`` of
``_lib/synthetic.py``), and ``predict_proba`` is then called on ``n`` test
rows: one untimed call, then ``--repeats`` timed ones, of which the **median**
is reported. The reference rows are one bare softmax pass over the same test
matrix, in float64:

* ``numpy softmax``: ``a = X - X.max(axis=1, keepdims=True)``, then
  ``np.exp(a, out=a)`` and ``a /= a.sum(axis=1, keepdims=True)`` (one new
  array, the memory-bound limit of a calibrator that returns a new array);
* ``scipy softmax``: ``scipy.special.softmax(X, axis=1)``;
* ``numpy log + softmax``: the numpy softmax of ``np.log(P)``, ``P`` the
  softmax of ``X`` (the least a map of probabilities computes: one
  logarithm per entry, then a softmax);
* ``numpy C x C product + softmax``: the numpy softmax of ``X @ W.T`` for a
  C x C matrix ``W`` (the least a full affine map computes).

``x softmax`` is each time divided by that of a numpy softmax pass over
the same matrix, timed alternately with it (call for call) in the same
process, so that the ratio is little affected by a shared machine's load
(so are the other reference rows; the numpy softmax row is timed on its
own). Where a peer library implements the same model (see
``compare_peers.py``; the method factories are ``_lib/peers.py``'s), the peer's
predict is timed the same way on the softmax probabilities of the test
logits, next to skcal's with ``input="proba"`` on those same
probabilities: ``x skcal`` is the peer's ``x softmax`` divided by
skcal's (``> 1``: skcal is faster). netcal's ``LogisticCalibration`` and
dirichletcal are left out (their fits take minutes; netcal's ``BetaCalibration``
is a different model).

Each (method, size) runs in a fresh process that generates the data, fits,
and predicts. A fit that takes more than ``--fit-limit`` seconds (default
60) is stopped and the method is reported as skipped at that size; so is a
method that refuses the size up front. Torch runs on ``--threads`` intra-op
threads (default 1, so that numbers do not depend on the other jobs of a
shared machine; BLAS and OpenMP get the same count); ``--threads 0`` leaves
every thread pool at its library's default, as a user gets them (where a
numpy BLAS call next to torch's kernels can cost milliseconds of waiting
for the other pool's spinning threads). The load average of the
machine is printed before and after: on a busy machine, compare ratios
measured in the same run rather than absolute times.

Run (by hand, from the repository root)::

    python benchmarks/bench_predict.py [--sizes 10000x10 10000x100 50000x1000]
        [--methods NAME ...] [--repeats 5] [--fit-limit 60] [--threads 1]
        [--no-peers] [--json FILE]
"""

import argparse
import json
import os
import signal
import sys
import time

import numpy as np
from _lib.common import next_record, select_methods, spawn_json_lines

#: Reference rows beside the softmax pass: the least arithmetic of a map
#: from probabilities (one log per entry before the softmax) and of a full
#: affine map (a C x C matrix product before it), in numpy
FLOOR_LOG = "numpy log + softmax"
FLOOR_PRODUCT = "numpy C x C product + softmax"
DEFAULT_SIZES = ["10000x10", "10000x100", "50000x1000"]

#: skcal method -> [(peer label, factory name in _lib.peers, args)], the
#: peers that implement the same model
PEERS = {
    "TemperatureScaling": [
        ("sklearn CCV temperature", "sklearn_calibrated", ("temperature", "log")),
        (
            "netcal TemperatureScaling",
            "netcal_method",
            ("scaling", "TemperatureScaling"),
        ),
        ("probmetrics temp-scaling", "probmetrics_ts", ()),
    ],
    "VectorScaling": [("probmetrics VectorScaling", "probmetrics_vs", ())],
    "MatrixScaling": [("probmetrics MatrixScaling", "probmetrics_ms", ())],
    "IsotonicCalibrator": [
        ("sklearn CCV isotonic", "sklearn_calibrated", ("isotonic", "proba")),
        (
            "netcal IsotonicRegression",
            "netcal_method",
            ("binning", "IsotonicRegression"),
        ),
    ],
    "HistogramBinningCalibrator": [
        ("netcal HistogramBinning", "netcal_method", ("binning", "HistogramBinning")),
    ],
    "PlattCalibrator": [
        ("sklearn CCV sigmoid", "sklearn_calibrated", ("sigmoid", "log_odds")),
    ],
    "BetaCalibrator": [("betacal one-vs-rest", "betacal_ovr", ())],
}


def _emit(**record):
    print(json.dumps(record), flush=True)


def _paired_times(fn, reference, repeats):
    """Medians of ``fn`` and ``reference``, timed alternately after one call each.

    Alternating the two calls in the same process cancels most of a shared
    machine's drift from the ratio ``fn / reference``.
    """
    fn()
    reference()
    times, ref_times = [], []
    for _ in range(repeats):
        start = time.perf_counter()
        reference()
        ref_times.append(time.perf_counter() - start)
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return float(np.median(times)), float(np.median(ref_times))


def _median_time(fn, repeats):
    fn()  # untimed: first-call costs
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def _data(n, n_classes):
    from _lib.synthetic import score_data

    rng = np.random.default_rng(0)
    X_fit, y_fit = score_data(n, n_classes, rng)
    X_test, _ = score_data(n, n_classes, rng)
    return X_fit, y_fit, X_test


def _softmax_numpy(X):
    a = X - X.max(axis=1, keepdims=True)
    np.exp(a, out=a)
    a /= a.sum(axis=1, keepdims=True)
    return a


def _reference(name, X_test, n_classes, repeats):
    """Time one reference row (a bare softmax pass); JSON lines on stdout."""
    from scipy.special import softmax

    P_test = _softmax_numpy(X_test)
    W = np.random.default_rng(1).normal(size=(n_classes, n_classes))
    fn = {
        "numpy softmax": lambda: _softmax_numpy(X_test),
        "scipy softmax": lambda: softmax(X_test, axis=1),
        FLOOR_LOG: lambda: _softmax_numpy(np.log(P_test)),
        FLOOR_PRODUCT: lambda: _softmax_numpy(X_test @ W.T),
    }[name]
    if name == "numpy softmax":
        _emit(event="predict", s=_median_time(fn, repeats))
    else:  # paired with the softmax pass, as the calibrators
        s, softmax_s = _paired_times(fn, lambda: _softmax_numpy(X_test), repeats)
        _emit(event="predict", s=s, softmax_s=softmax_s)


def _peer_methods(name):
    """``(fit, predict)`` of the peer row ``name``; ImportError if not installed."""
    from _lib import peers as peer_factories

    factory, fargs = next(
        (f, a) for peers in PEERS.values() for (lbl, f, a) in peers if lbl == name
    )
    return getattr(peer_factories, factory)(*fargs)


def _skcal_methods(kind, name, n_classes):
    """``(fit, predict)`` of skcal's ``name`` (``input="proba"`` for skcal-proba)."""
    from skcal.discovery import all_estimators

    cls = dict(all_estimators("score"))[name]
    defaults = cls().get_params()
    params = {"classes": np.arange(n_classes)}
    params.update(
        {k: v for k, v in (("device", "cpu"), ("random_state", 0)) if k in defaults}
    )
    if kind == "skcal-proba":
        params["input"] = "proba"

    def fit(X, y):
        return cls(**params).fit(X, y)

    def predict(model, X):
        return model.predict_proba(X)

    return fit, predict


def child(kind, name, n, n_classes, repeats, threads):
    """One method at one size; JSON lines on stdout."""
    import warnings

    import torch

    if threads > 0:
        torch.set_num_threads(threads)
    warnings.simplefilter("ignore")
    X_fit, y_fit, X_test = _data(n, n_classes)
    if kind == "softmax":
        _reference(name, X_test, n_classes, repeats)
        return
    if kind == "peer":
        try:
            fit, predict = _peer_methods(name)
        except ImportError as exc:
            _emit(event="error", error=f"not installed: {exc}"[:300])
            return
    else:
        fit, predict = _skcal_methods(kind, name, n_classes)

    if kind != "skcal":  # the peers' input: probabilities
        from skcal.utils._testing import softmax_rows

        X_fit, X_test = softmax_rows(X_fit), softmax_rows(X_test)
    _emit(event="fit_start")
    start = time.perf_counter()
    try:
        model = fit(X_fit, y_fit)
    except Exception as exc:  # a refusal (or a failure): show it
        _emit(event="error", error=f"{type(exc).__name__}: {exc}"[:300])
        return
    _emit(event="fit", s=time.perf_counter() - start)
    predict_s, softmax_s = _paired_times(
        lambda: predict(model, X_test), lambda: _softmax_numpy(X_test), repeats
    )
    _emit(event="predict", s=predict_s, softmax_s=softmax_s)


def run(kind, name, n, n_classes, args):
    """Run :func:`child` in a fresh process, stopping a fit past the limit."""
    cmd = [sys.executable, os.path.abspath(__file__), "--one", kind, name]
    cmd += [str(n), str(n_classes), "--repeats", str(args.repeats)]
    cmd += ["--threads", str(args.threads)]
    env = dict(os.environ)
    if args.threads > 0:  # 0: the libraries' own defaults, as a user gets them
        for pool in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
            env[pool] = str(args.threads)
    else:
        for pool in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
            env.pop(pool, None)
    proc, lines, errors = spawn_json_lines(cmd, env)
    out, fit_started = {}, None
    while True:
        record = next_record(lines)
        if record is not None:
            event = record.pop("event")
            if event == "fit_start":
                fit_started = time.perf_counter()
            elif event == "fit":
                fit_started = None
                out["fit_s"] = record["s"]
            elif event == "predict":
                out["predict_s"] = record["s"]
                if "softmax_s" in record:
                    out["softmax_s"] = record["softmax_s"]
            elif event == "error":
                out["note"] = record["error"]
        if proc.poll() is not None and lines.empty():
            break
        if (
            fit_started is not None
            and time.perf_counter() - fit_started > args.fit_limit
        ):
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            out["note"] = f"skipped: fit over {args.fit_limit:.0f} s"
            break
    if "note" not in out and "predict_s" not in out:
        errors.seek(0)
        out["note"] = f"crashed ({proc.returncode}): {errors.read().strip()[-200:]}"
    return out


def _fmt(x, spec):
    return format(x, spec) if isinstance(x, float) and x == x else "-"


def run_size(size, names, args):
    """Every reference row and method at one size ``NxC``; rows printed as they come."""
    n, c = (int(v) for v in size.lower().split("x"))
    print(f"\n== {n} x {c}")
    print(
        f"{'method':40s} {'fit s':>8s} {'predict s':>10s} {'x softmax':>9s} "
        f"{'x skcal':>8s}  note"
    )
    rows = []

    def show(label, r, base, ref=None, rows=rows, size=size):
        # the softmax pass timed alternately in the same process, if any
        ratio = r.get("predict_s", float("nan")) / r.get("softmax_s", base)
        versus = ratio / ref if ref else float("nan")
        print(
            f"{label:40s} {_fmt(r.get('fit_s'), '8.2f'):>8s} "
            f"{_fmt(r.get('predict_s'), '10.4f'):>10s} {_fmt(ratio, '9.2f'):>9s} "
            f"{_fmt(versus, '8.2f'):>8s}  {r.get('note', '')}",
            flush=True,
        )
        rows.append({"size": size, "method": label, **r, "x_softmax": ratio})

    ref = {
        k: run("softmax", k, n, c, args)
        for k in ("numpy softmax", "scipy softmax", FLOOR_LOG, FLOOR_PRODUCT)
    }
    base = ref["numpy softmax"].get("predict_s", float("nan"))
    for k, r in ref.items():
        show(k, r, base)
    for name in names:
        show(name, run("skcal", name, n, c, args), base)
        if args.no_peers or name not in PEERS:
            continue
        mine = run("skcal-proba", name, n, c, args)
        show(f"  {name} input='proba'", mine, base)
        for label, _, _ in PEERS[name]:
            show(
                f"  {label}",
                run("peer", label, n, c, args),
                base,
                mine.get("predict_s", float("nan")) / mine.get("softmax_s", base),
            )
    if args.json:
        with open(args.json, "a") as f:
            for r in rows:
                f.write(json.dumps(r) + "\n")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="+", default=DEFAULT_SIZES, metavar="NxC")
    parser.add_argument("--methods", nargs="+", default=None, help="default: all")
    parser.add_argument("--repeats", type=int, default=5, help="median of R calls")
    parser.add_argument("--fit-limit", type=float, default=60.0, help="seconds")
    parser.add_argument(
        "--threads", type=int, default=1, help="torch and BLAS threads; 0: defaults"
    )
    parser.add_argument("--no-peers", action="store_true")
    parser.add_argument("--json", default=None, help="append every result to FILE")
    parser.add_argument("--one", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:
        kind, name, n, c = args.one
        return child(kind, name, int(n), int(c), args.repeats, args.threads)

    from skcal.discovery import all_estimators

    names = select_methods(
        parser, [name for name, _ in all_estimators("score")], args.methods
    )
    print(
        f"torch threads: {args.threads or 'library defaults'}; predict: median of "
        f"{args.repeats} calls "
        f"after one untimed call; load average {os.getloadavg()}",
        flush=True,
    )
    for size in args.sizes:
        run_size(size, names, args)
    print(f"\nload average {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
