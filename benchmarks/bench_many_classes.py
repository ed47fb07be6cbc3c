"""Fit and predict time and peak memory of every calibrator at many classes.

Every class of ``skcal.discovery.all_estimators()`` is fitted with its
default parameters (``device="cpu"``, ``random_state=0`` and
``classes=range(C)``, since a few of the ``C`` classes may have no
calibration sample) on ``n`` calibration samples and then predicts ``n``
test samples:

* score calibrators on ImageNet-like logits: Gaussian logits (sd 2) plus a
  margin of 10 on a latent class, labels drawn from their softmax, logits
  multiplied by 1.5 (over-confident); top-1 accuracy about 0.67 at 1,000
  classes;
* local calibrators on 64-d embeddings (class means plus unit noise) with
  a linear head of one row per class, passed as ``coef`` / ``intercept``
  where the calibrator takes one; labels drawn from the softmax of the
  head's logits divided by 1.5 (the head is over-confident); the head's
  accuracy is about 0.69 at 1,000 classes.

Each method runs in a fresh process, which generates the data, reports its
resident memory, fits, predicts and reports again. **Time**: wall time of
``fit`` and of ``predict_proba``. **Memory**: the peak resident set size
(``VmHWM`` of ``/proc/<pid>/status``, read by the parent every 0.2 s and by
the child itself, ``ru_maxrss``, at the end) minus the resident size after
the data were generated: it counts everything, numpy and torch allocations
alike (tracemalloc would miss torch's). A method gets ``--time-limit``
seconds for fit and predict together, and ``--memory-limit`` MiB of resident
memory; one that goes over is killed and reported as such, with the peak
memory it had reached. A method that raises an error (e.g. refuses the
problem up front) shows the error.

Run:  python benchmarks/bench_many_classes.py [--n 5000 50000] [--classes 1000]
      [--methods NAME ...] [--time-limit 600] [--memory-limit 8000]
      [--threads N] [--json FILE]
      [--params '{"VQLocalCalibrator": {"max_iter": 1}}']

``--threads`` sets torch's (and BLAS's) thread count in the child; on a
machine that other jobs share, fewer threads give steadier numbers.
"""

import argparse
import json
import os
import resource
import signal
import sys
import time

import numpy as np
from _lib.common import next_record, select_methods, spawn_json_lines
from _lib.synthetic import EMBED_DIM, local_data, score_data


def _log(**record):
    print(json.dumps(record), flush=True)


def _rss_mb(field="VmRSS", pid="self"):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


def one(name, n, n_classes, threads, overrides):
    """Child process: generate the data, fit, predict; JSON lines on stdout."""
    import warnings

    if threads:
        import torch

        torch.set_num_threads(threads)
    from skcal.base import BaseLocalCalibrator
    from skcal.discovery import all_estimators

    warnings.simplefilter("ignore")
    cls = dict(all_estimators())[name]
    rng = np.random.default_rng(0)
    local = issubclass(cls, BaseLocalCalibrator)
    # every class has a column, even one that no calibration label hits
    params = {"classes": np.arange(n_classes)}
    if local:
        means = 0.45 * rng.standard_normal((n_classes, EMBED_DIM))
        coef, intercept = 2.0 * means, -(means**2).sum(axis=1)
        X_fit, y_fit = local_data(n, n_classes, rng, (coef, intercept))
        X_test, y_test = local_data(n, n_classes, rng, (coef, intercept))
        if "coef" in cls().get_params():
            params.update(coef=coef, intercept=intercept)
    else:
        X_fit, y_fit = score_data(n, n_classes, rng)
        X_test, y_test = score_data(n, n_classes, rng)
    defaults = cls().get_params()
    params.update(
        {k: v for k, v in (("device", "cpu"), ("random_state", 0)) if k in defaults}
    )
    params.update(overrides)
    est = cls(**params)
    _log(event="ready", rss_mb=_rss_mb())
    start = time.perf_counter()
    try:
        est.fit(X_fit, y_fit)
    except Exception as exc:  # a refusal (or a failure): show it
        _log(
            event="error",
            stage="fit",
            s=time.perf_counter() - start,
            error=f"{type(exc).__name__}: {exc}",
        )
        return
    _log(event="fit", s=time.perf_counter() - start, hwm_mb=_rss_mb("VmHWM"))
    start = time.perf_counter()
    proba = est.predict_proba(X_test)
    elapsed = time.perf_counter() - start
    p_true = np.clip(proba[np.arange(n), y_test], 1e-300, 1.0)
    _log(
        event="predict",
        s=elapsed,
        hwm_mb=max(
            _rss_mb("VmHWM"), resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        ),
        nll=float(-np.mean(np.log(p_true))),
        acc=float(np.mean(proba.argmax(axis=1) == y_test)),
        finite=bool(np.isfinite(proba).all()),
    )


def run(name, n, n_classes, time_limit, threads, overrides=None, memory_limit=None):
    """Run one method in a child process; kill it past the time or memory limit."""
    cmd = [
        sys.executable,
        os.path.abspath(__file__),
        "--one",
        name,
        str(n),
        str(n_classes),
    ]
    env = dict(os.environ)
    if threads:
        env.update(OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
        cmd += ["--threads", str(threads)]
    if overrides:
        cmd += ["--params", json.dumps({name: overrides})]
    proc, lines, errors = spawn_json_lines(cmd, env)
    out = {"method": name, "n": n, "classes": n_classes}
    ready_at, peaks, note = None, [], None
    while True:
        record = next_record(lines)
        if record is not None:
            event = record.pop("event")
            if event == "ready":
                ready_at, out["base_mb"] = time.perf_counter(), record["rss_mb"]
            elif event == "error":
                out["error"], out["error_after_s"] = record["error"], record["s"]
            else:
                out[f"{event}_s"] = record.pop("s")
                peaks.append(record.pop("hwm_mb"))
                out.update(record)
        peaks.append(_rss_mb("VmHWM", proc.pid))
        if proc.poll() is not None and lines.empty():
            break
        if memory_limit and _rss_mb("VmRSS", proc.pid) > memory_limit:
            note = f"stopped: over the {memory_limit:.0f} MiB memory limit"
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            break
        if ready_at is not None and time.perf_counter() - ready_at > time_limit:
            note = f"stopped: over the {time_limit:.0f} s limit"
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            break
    if note is None and proc.returncode:
        errors.seek(0)
        note = f"crashed ({proc.returncode}): {errors.read().strip()[-300:]}"
    if note is None and "error" in out:
        note = out["error"]
    out["note"] = note or ""
    peaks = [p for p in peaks if p == p]  # NaN once the process is gone
    out["peak_mb"] = max(peaks) if peaks else float("nan")
    out["extra_mb"] = out["peak_mb"] - out.get("base_mb", float("nan"))
    return out


def _fmt(x, spec):
    return (
        format(x, spec)
        if isinstance(x, (int, float)) and x == x
        else "-".rjust(len(format(0, spec)))
    )


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, nargs="+", default=[5000, 50000])
    parser.add_argument("--classes", type=int, nargs="+", default=[1000])
    parser.add_argument("--methods", nargs="+", default=None, help="default: all")
    parser.add_argument("--kind", choices=["score", "local"], default=None)
    parser.add_argument("--time-limit", type=float, default=600.0)
    parser.add_argument("--threads", type=int, default=0, help="0: torch's default")
    parser.add_argument(
        "--memory-limit", type=float, default=8000.0, help="MiB of resident memory"
    )
    parser.add_argument("--json", default=None, help="append every result to FILE")
    parser.add_argument(
        "--params",
        type=json.loads,
        default={},
        help="per-method parameters, JSON: {NAME: {PARAM: VALUE}}",
    )
    parser.add_argument(
        "--one", nargs=3, metavar=("NAME", "N", "C"), help=argparse.SUPPRESS
    )
    args = parser.parse_args(argv)
    if args.one:
        name, n, c = args.one
        return one(name, int(n), int(c), args.threads, args.params.get(name, {}))
    from skcal.discovery import all_estimators

    names = select_methods(
        parser, [name for name, _ in all_estimators(args.kind)], args.methods
    )
    print(
        f"{'method':32s} {'n':>6s} {'C':>5s} {'fit s':>8s} {'predict s':>9s} "
        f"{'peak MiB':>8s} {'extra MiB':>9s} {'test NLL':>8s} {'acc':>6s}  note"
    )
    for c in args.classes:
        for n in args.n:
            for name in names:
                overrides = args.params.get(name, {})
                r = run(
                    name,
                    n,
                    c,
                    args.time_limit,
                    args.threads,
                    overrides,
                    args.memory_limit,
                )
                note = r["note"]
                if overrides:
                    r["params"] = overrides
                    note = f"{json.dumps(overrides)} {note}"
                print(
                    f"{name:32s} {n:6d} {c:5d} {_fmt(r.get('fit_s'), '8.1f')} "
                    f"{_fmt(r.get('predict_s'), '9.1f')} {_fmt(r['peak_mb'], '8.0f')} "
                    f"{_fmt(r['extra_mb'], '9.0f')} {_fmt(r.get('nll'), '8.3f')} "
                    f"{_fmt(r.get('acc'), '6.3f')}  {note[:300]}",
                    flush=True,
                )
                if args.json:
                    with open(args.json, "a") as f:
                        f.write(json.dumps(r) + "\n")


if __name__ == "__main__":
    sys.exit(main())
