"""Calibration metrics of a Spark DataFrame beside the Dask path, same data.

1,000,000 rows x 100 classes by default, generated chunk by chunk from a
seed (chunk ``i``: ``numpy.random.default_rng([seed, i])``, softmax of
normal logits, labels drawn from sharper probabilities), so that every path
builds the same rows without shipping them:

* ``memory``: the chunks concatenated, the skcal.metrics functions (and the
  argmax accuracy) on the whole arrays: the reference values;
* ``spark``: the chunks made by the executors of a local Spark (one chunk
  per partition, one ``array<double>`` probability column), cached in the
  JVM, then :func:`skcal.spark.calibration_metrics` (accuracy, NLL, Brier,
  ECE, classwise ECE in one pass of per-partition states);
* ``dask``: dask arrays of the same chunks, persisted on the local threaded
  scheduler (so the rows live in the driver process), then the
  skcal.metrics functions on them (one tree reduction of states each,
  ``skcal/metrics/_dask.py``).

Each path runs in its own process. Time: the metrics only (not the data
generation nor the caching). Driver memory: the peak resident set of the
path's Python process (``resource.getrusage(RUSAGE_SELF).ru_maxrss``, the
whole process life, data generation included); for Spark also the JVM's
peak (``VmHWM`` of ``/proc/<jvm pid>/status``), which holds the cached rows
in local mode. Every value is compared with the ``memory`` path (relative
1e-12). The load average is printed before and after: the machine's other
jobs show in the times.

With ``--predict`` it times a fitted calibrator's probabilities as a new
column of the same cached rows instead (temperature scaling fitted on 20,000
rows of another seed): the pandas UDF of :func:`skcal.spark.calibrate_udf`,
:func:`skcal.spark.transform` on its Arrow path (``mapInArrow``) and on its
RDD path (pickled rows), each forced by a ``noop`` write of every column (the best of
``--repeat`` runs, 2 by default: the first pays the Python workers' start);
each path's first 2,000 rows are compared with ``predict_proba`` of their
collected scores.

Run:  python benchmarks/bench_spark.py [--rows 1000000] [--classes 100]
      [--chunks 8] [--cores 2] [--predict] [--out FILE]
"""

import argparse
import json
import os
import resource
import subprocess
import sys
import time

import numpy as np

NAMES = ("accuracy", "NLL", "Brier", "ECE", "cwECE")


def chunk(i, rows, n_classes, seed=0):
    """Chunk ``i``: labels (int64) and probabilities (float64)."""
    rng = np.random.default_rng([seed, i])
    logits = rng.normal(size=(rows, n_classes)) * 2.0
    logits -= logits.max(axis=1, keepdims=True)
    proba = np.exp(logits)
    proba /= proba.sum(axis=1, keepdims=True)
    sharp = proba**1.5
    sharp /= sharp.sum(axis=1, keepdims=True)
    u = rng.uniform(size=(rows, 1))
    y = np.minimum((sharp.cumsum(axis=1) < u).sum(axis=1), n_classes - 1)
    return y.astype(np.int64), proba


def _sizes(args):
    base, extra = divmod(args.rows, args.chunks)
    return [base + (i < extra) for i in range(args.chunks)]


def _peak_rss_mib():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def run_memory(args):
    from skcal.metrics import (
        brier_score,
        classwise_calibration_error,
        expected_calibration_error,
        negative_log_likelihood,
    )

    parts = [chunk(i, n, args.classes) for i, n in enumerate(_sizes(args))]
    y = np.concatenate([p[0] for p in parts])
    proba = np.concatenate([p[1] for p in parts])
    del parts
    start = time.perf_counter()
    values = {
        "accuracy": float(np.mean(proba.argmax(axis=1) == y)),
        "NLL": negative_log_likelihood(y, proba),
        "Brier": brier_score(y, proba),
        "ECE": expected_calibration_error(y, proba),
        "cwECE": classwise_calibration_error(y, proba),
    }
    return values, time.perf_counter() - start, {}


def run_dask(args):
    import dask
    import dask.array as da

    from skcal.metrics import (
        brier_score,
        classwise_calibration_error,
        expected_calibration_error,
        negative_log_likelihood,
    )

    make = dask.delayed(chunk, nout=2)
    ys, ps = [], []
    for i, n in enumerate(_sizes(args)):
        y, p = make(i, n, args.classes)
        ys.append(da.from_delayed(y, (n,), np.int64))
        ps.append(da.from_delayed(p, (n, args.classes), np.float64))
    with dask.config.set(scheduler="threads", num_workers=args.cores):
        y, proba = dask.persist(da.concatenate(ys), da.concatenate(ps))
        start = time.perf_counter()
        values = {"accuracy": float((proba.argmax(axis=1) == y).mean().compute())}
        values["NLL"] = negative_log_likelihood(y, proba)
        values["Brier"] = brier_score(y, proba)
        values["ECE"] = expected_calibration_error(y, proba)
        values["cwECE"] = classwise_calibration_error(y, proba)
        return values, time.perf_counter() - start, {}


def _rows_of(n_classes, sizes):
    def rows(indices):
        for i in indices:
            y, p = chunk(i, sizes[i], n_classes)
            yield from zip(y.tolist(), p.tolist())

    return rows


def _jvm_peak_mib(spark):
    pid = spark.sparkContext._gateway.proc.pid  # the JVM the driver started
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024.0
    return float("nan")


def _session(args):
    from pyspark.sql import SparkSession

    os.environ["PYSPARK_PYTHON"] = sys.executable
    spark = (
        SparkSession.builder.master(f"local[{args.cores}]")
        .appName("skcal-bench")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", str(args.cores))
        .config("spark.driver.memory", "6g")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def _cached_rows(spark, args):
    sizes = _sizes(args)
    rdd = spark.sparkContext.parallelize(range(args.chunks), args.chunks)
    df = spark.createDataFrame(
        rdd.mapPartitions(_rows_of(args.classes, sizes)),
        "y long, proba array<double>",
    ).cache()
    t0 = time.perf_counter()
    n = df.count()
    cache_s = time.perf_counter() - t0
    assert n == args.rows, n
    return df, cache_s


def run_spark(args):
    from skcal.spark import calibration_metrics

    spark = _session(args)
    df, cache_s = _cached_rows(spark, args)
    start = time.perf_counter()
    values = calibration_metrics(df, proba="proba", label="y", metrics=NAMES)
    seconds = time.perf_counter() - start
    extra = {"jvm_peak_mib": _jvm_peak_mib(spark), "cache_s": cache_s}
    spark.stop()
    return values, seconds, extra


def _predict_paths(df, calibrator):
    from skcal.spark import calibrate_udf, transform

    udf = calibrate_udf(calibrator)
    return {
        "pandas UDF": lambda: df.withColumn("c", udf("proba")),
        "transform, Arrow": lambda: transform(df, calibrator, "proba", "c"),
        "transform, RDD": lambda: transform(df, calibrator, "proba", "c", engine="rdd"),
    }


def run_predict(args):
    from skcal import TemperatureScaling

    y_fit, p_fit = chunk(0, 20_000, args.classes, seed=1)
    calibrator = TemperatureScaling(input="proba").fit(p_fit, y_fit)
    spark = _session(args)
    df, cache_s = _cached_rows(spark, args)
    times, diffs = {}, {}
    for name, make in _predict_paths(df, calibrator).items():
        runs = []
        for _ in range(args.repeat):
            start = time.perf_counter()
            make().write.format("noop").mode("overwrite").save()
            runs.append(time.perf_counter() - start)
        times[name] = min(runs)
        rows = make().limit(2000).collect()
        scores = np.array([row["proba"] for row in rows])
        got = np.array([row["c"] for row in rows])
        want = calibrator.predict_proba(scores)
        diffs[name] = float(np.max(np.abs(got - want) / want))
    spark.stop()
    return times, diffs, cache_s


def _predict_main(args):
    argv = [f"--rows={args.rows}", f"--classes={args.classes}"]
    argv += [f"--chunks={args.chunks}", f"--cores={args.cores}"]
    argv += [f"--repeat={args.repeat}"]
    load_before = os.getloadavg()
    res = _spawn("predict", argv)
    load_after = os.getloadavg()
    times, diffs = res["values"]
    lines = [
        f"{args.rows:,} rows x {args.classes} classes, {args.chunks} partitions, "
        f"{args.cores} cores: temperature scaling's probabilities as a new column",
        "",
        f"| path | time (noop write, best of {args.repeat}) | rows / s "
        "| max rel. diff (2,000 rows) |",
        "|---|---|---|---|",
    ]
    for name, seconds in times.items():
        lines.append(
            f"| {name} | {seconds:.2f} s | {args.rows / seconds:,.0f} | "
            f"{diffs[name]:.1e} |"
        )
    lines.append(
        f"\nload average (1, 5, 15 min) before: {load_before}, after: "
        f"{load_after}; generating and caching the rows {res['cache_s']:.1f} s"
    )
    return "\n".join(lines)


def _child(args):
    if args.path == "predict":
        times, diffs, cache_s = run_predict(args)
        out = {"values": [times, diffs], "seconds": 0.0, "cache_s": cache_s}
        print("RESULT " + json.dumps(out))
        return None
    run = {"memory": run_memory, "dask": run_dask, "spark": run_spark}[args.path]
    values, seconds, extra = run(args)
    out = {"values": values, "seconds": seconds, "peak_rss_mib": _peak_rss_mib()}
    print("RESULT " + json.dumps({**out, **extra}))


def _spawn(path, argv):
    cmd = [sys.executable, os.path.abspath(__file__), "--path", path, *argv]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    if proc.returncode or not lines:
        sys.exit(f"{path} failed:\n{proc.stderr[-3000:]}")
    return json.loads(lines[-1][7:])


def _table(results, args):
    ref = results["memory"]["values"]
    lines = [
        f"{args.rows:,} rows x {args.classes} classes, {args.chunks} chunks, "
        f"{args.cores} cores",
        "",
        "| path | metrics time | driver peak RSS | JVM peak RSS | max rel. diff |",
        "|---|---|---|---|---|",
    ]
    for path, res in results.items():
        diff = max(
            abs(res["values"][k] - ref[k]) / max(abs(ref[k]), 1e-300) for k in NAMES
        )
        jvm = res.get("jvm_peak_mib")
        lines.append(
            f"| {path} | {res['seconds']:.2f} s | {res['peak_rss_mib']:.0f} MiB | "
            f"{'-' if jvm is None else f'{jvm:.0f} MiB'} | {diff:.1e} |"
        )
    lines += ["", "| metric | " + " | ".join(results) + " |"]
    lines.append("|---|" + "---|" * len(results))
    for k in NAMES:
        cells = " | ".join(f"{res['values'][k]:.15g}" for res in results.values())
        lines.append(f"| {k} | {cells} |")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--classes", type=int, default=100)
    parser.add_argument("--chunks", type=int, default=8)
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--paths", nargs="+", default=["memory", "dask", "spark"])
    parser.add_argument("--predict", action="store_true", help="time transform")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--out", help="also write the table to this file")
    parser.add_argument("--path", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.path:
        return _child(args)
    if args.predict:
        text = _predict_main(args)
        print(text)
        if args.out:
            with open(args.out, "w") as f:
                f.write(text + "\n")
        return None
    argv = [f"--rows={args.rows}", f"--classes={args.classes}"]
    argv += [f"--chunks={args.chunks}", f"--cores={args.cores}"]
    load_before = os.getloadavg()
    results = {path: _spawn(path, argv) for path in ["memory", *args.paths[1:]]}
    load_after = os.getloadavg()
    cache_s = results.get("spark", {}).get("cache_s", 0.0)
    text = _table(results, args) + (
        f"\n\nload average (1, 5, 15 min) before: {load_before}, after: "
        f"{load_after}; spark: generating and caching the rows {cache_s:.1f} s"
    )
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
