"""Metrics over 10^8 rows: streaming states in one process, then a Dask cluster.

Top-label ECE, classwise ECE and NLL of 10 classes over ``--rows`` rows
(default 10^8), generated lazily block by block from per-block seeds and
never held in memory at once:

1. one process: three :func:`skcal.metrics.metric_state` states updated
   block by block (generation timed apart from the metric updates);
2. a ``distributed.LocalCluster`` of ``--workers`` worker processes (one
   thread each): the same blocks as a Dask array, each block turned into the
   three states by a task, the states merged by a tree reduction;
3. the reference: the batch functions on 10^6 rows held in memory.

Reports rows per second, each worker's peak resident memory and the ratio
of the streaming metric throughput to the in-memory batch throughput.

    python benchmarks/bench_scale.py [--rows 100000000] [--block 1000000]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import threading
import time

import numpy as np
from scipy.special import softmax

N_CLASSES = 10


def metrics() -> dict:
    """The three metrics, by name (skcal is imported here, not at start-up)."""
    from skcal.metrics import (
        classwise_calibration_error,
        expected_calibration_error,
        negative_log_likelihood,
    )

    return {
        "ece": expected_calibration_error,
        "cw_ece": classwise_calibration_error,
        "nll": negative_log_likelihood,
    }


def block(seed: int, rows: int):
    """One block of labels and probabilities (over-confident by 2x)."""
    rng = np.random.default_rng(seed)
    logits = 3.0 * rng.standard_normal((rows, N_CLASSES))
    proba = softmax(logits, axis=1)
    truth = softmax(logits / 2.0, axis=1)
    labels = (truth.cumsum(axis=1) > rng.random((rows, 1))).argmax(axis=1)
    return labels, proba


def states_of_block(seed: int, rows: int):
    from skcal.metrics import metric_state

    labels, proba = block(seed, rows)
    return {k: metric_state(m).update(labels, proba) for k, m in metrics().items()}


def merge_all(*parts):
    head = parts[0]
    for part in parts[1:]:
        for key in head:
            head[key].merge(part[key])
    return head


class PeakRSS:
    """The largest resident memory of this process, sampled every 20 ms.

    (``ru_maxrss`` is not used: Linux keeps it across fork and exec, so a
    worker would report its parent's peak.)
    """

    def __init__(self):
        import psutil

        self._proc = psutil.Process()
        self.peak = self._proc.memory_info().rss
        threading.Thread(target=self._loop, daemon=True).start()

    def _loop(self):
        while True:
            self.peak = max(self.peak, self._proc.memory_info().rss)
            time.sleep(0.02)

    def mib(self) -> float:
        return self.peak / 2**20


def start_sampler(dask_worker):
    dask_worker.skcal_peak = PeakRSS()


def read_sampler(dask_worker):
    return dask_worker.skcal_peak.mib()


def streaming(n_rows: int, rows: int) -> dict:
    from skcal.metrics import metric_state

    sampler = PeakRSS()
    states = {k: metric_state(m) for k, m in metrics().items()}
    gen_s = upd_s = 0.0
    for b in range(n_rows // rows):
        t0 = time.perf_counter()
        labels, proba = block(b, rows)
        t1 = time.perf_counter()
        for state in states.values():
            state.update(labels, proba)
        upd_s += time.perf_counter() - t1
        gen_s += t1 - t0
    values = {k: s.compute() for k, s in states.items()}
    return {
        "rows": n_rows,
        "generate_s": gen_s,
        "metrics_s": upd_s,
        "metric_rows_per_s": n_rows / upd_s,
        "total_rows_per_s": n_rows / (gen_s + upd_s),
        "peak_rss_mib": sampler.mib(),
        "values": values,
    }


def batch_reference(rows: int) -> dict:
    labels, proba = block(0, rows)
    named = metrics()
    for m in named.values():  # warm up (first calls import and allocate)
        m(labels[:1000], proba[:1000])
    t0 = time.perf_counter()
    values = {k: m(labels, proba) for k, m in named.items()}
    elapsed = time.perf_counter() - t0
    return {
        "rows": rows,
        "metrics_s": elapsed,
        "metric_rows_per_s": rows / elapsed,
        "values": values,
    }


@contextlib.contextmanager
def cluster_client(workers: int):
    """A LocalCluster of ``workers`` one-thread processes, imports warmed and
    each worker's memory sampled."""
    from distributed import Client, LocalCluster

    with (
        LocalCluster(
            n_workers=workers,
            threads_per_worker=1,
            processes=True,
            dashboard_address=None,
            memory_limit="4GiB",
        ) as cluster,
        Client(cluster) as client,
    ):
        client.run(lambda: __import__("skcal.metrics"))  # warm the imports
        client.run(start_sampler)
        yield client


def on_cluster(n_rows: int, rows: int, workers: int) -> dict:
    import dask

    with cluster_client(workers) as client:
        parts = [dask.delayed(states_of_block)(b, rows) for b in range(n_rows // rows)]
        while len(parts) > 1:
            parts = [
                dask.delayed(merge_all)(*parts[i : i + 8])
                for i in range(0, len(parts), 8)
            ]
        t0 = time.perf_counter()
        merged = parts[0].compute()
        elapsed = time.perf_counter() - t0
        peaks = client.run(read_sampler)
    return {
        "rows": n_rows,
        "workers": workers,
        "total_s": elapsed,
        "total_rows_per_s": n_rows / elapsed,
        "peak_rss_mib_per_worker": sorted(peaks.values()),
        "values": {k: s.compute() for k, s in merged.items()},
    }


def approximate_lce(n_rows: int, dim: int, n_components: int) -> dict:
    """Random-feature LCE and MLCE of ``n_rows`` x 10 classes x ``dim``-d."""
    from skcal.metrics import local_calibration_errors

    rng = np.random.default_rng(7)
    centres = 3.0 * rng.standard_normal((N_CLASSES, dim))
    labels, proba = block(123, n_rows)
    emb = centres[proba.argmax(axis=1)] + rng.standard_normal((n_rows, dim))
    t0 = time.perf_counter()
    result = local_calibration_errors(
        labels,
        proba,
        emb,
        space=None,
        bandwidth="auto",
        method="rff",
        n_components=n_components,
        device="cpu",
    )
    elapsed = time.perf_counter() - t0
    return {
        "rows": n_rows,
        "dim": dim,
        "n_components": n_components,
        "s": elapsed,
        "lce": result.lce,
        "mlce": result.mlce,
    }


def embedded_block(seed: int, rows: int, dim: int = 50):
    """A block of labels, probabilities and ``dim``-d embeddings."""
    labels, proba = block(seed, rows)
    centres = 3.0 * np.random.default_rng(7).standard_normal((N_CLASSES, dim))
    noise = np.random.default_rng(10**6 + seed).standard_normal((rows, dim))
    return labels, proba, centres[proba.argmax(axis=1)] + noise


def dask_lce(n_rows: int, rows: int, workers: int, n_components: int) -> dict:
    """The random-feature LCE of a lazily generated Dask array on a cluster."""
    import dask
    import dask.array as da

    from skcal.metrics import LocalSpace, local_calibration_errors

    n_blocks = n_rows // rows
    parts = [dask.delayed(embedded_block)(b, rows) for b in range(n_blocks)]
    y = da.concatenate([da.from_delayed(p[0], (rows,), dtype=np.int64) for p in parts])
    proba = da.concatenate(
        [da.from_delayed(p[1], (rows, N_CLASSES), dtype=float) for p in parts]
    )
    emb = da.concatenate(
        [da.from_delayed(p[2], (rows, 50), dtype=float) for p in parts]
    )
    space = LocalSpace().fit(embedded_block(0, 50_000)[2])
    with cluster_client(workers) as client:
        t0 = time.perf_counter()
        result = local_calibration_errors(
            y,
            proba,
            emb,
            space=space,
            bandwidth=10.0,
            method="rff",
            n_components=n_components,
            device="cpu",
        )
        elapsed = time.perf_counter() - t0
        peaks = client.run(read_sampler)
    return {
        "rows": n_rows,
        "workers": workers,
        "s": elapsed,
        "lce": result.lce,
        "mlce": result.mlce,
        "peak_rss_mib_per_worker": sorted(peaks.values()),
    }


def build_parser():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000_000)
    parser.add_argument("--block", type=int, default=1_000_000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--skip-cluster", action="store_true")
    parser.add_argument("--lce-rows", type=int, default=1_000_000)
    parser.add_argument("--lce-components", type=int, default=1024)
    parser.add_argument("--only-lce", action="store_true")
    parser.add_argument(
        "--dask-lce-rows",
        type=int,
        default=0,
        help="also the random-feature LCE of this many rows as a Dask array on "
        "the cluster (e.g. 10000000; two passes, generation included)",
    )
    return parser


def main(argv=None) -> None:
    args = build_parser().parse_args(argv)
    if args.dask_lce_rows:
        out = dask_lce(args.dask_lce_rows, 250_000, args.workers, args.lce_components)
        print(
            f"approximate LCE on a Dask array of {out['rows']:,} rows x 10 "
            f"classes x 50-d, LocalCluster of {out['workers']}: {out['s']:.1f} s "
            f"(LCE {out['lce']:.4f}, MLCE {out['mlce']:.4f}), peak RSS per "
            f"worker {out['peak_rss_mib_per_worker']} MiB",
            flush=True,
        )
        return
    if args.lce_rows:
        lce = approximate_lce(args.lce_rows, 50, args.lce_components)
        print(
            f"approximate LCE, {lce['rows']:,} rows x 10 classes x 50-d, D="
            f"{lce['n_components']}: {lce['s']:.1f} s (LCE {lce['lce']:.4f}, "
            f"MLCE {lce['mlce']:.4f})",
            flush=True,
        )
        if args.only_lce:
            return

    ref = batch_reference(args.block)
    print(
        f"batch, {args.block:,} rows in memory: {ref['metrics_s']:.2f} s, "
        f"{ref['metric_rows_per_s']:,.0f} rows/s",
        flush=True,
    )
    stream = streaming(args.rows, args.block)
    print(
        f"streaming, {args.rows:,} rows in one process: metrics "
        f"{stream['metrics_s']:.1f} s ({stream['metric_rows_per_s']:,.0f} rows/s, "
        f"{stream['metric_rows_per_s'] / ref['metric_rows_per_s']:.2f}x the batch "
        f"throughput), generation {stream['generate_s']:.1f} s, peak RSS "
        f"{stream['peak_rss_mib']:.0f} MiB",
        flush=True,
    )
    result = {"batch": ref, "streaming": stream}
    if not args.skip_cluster:
        cl = on_cluster(args.rows, args.block, args.workers)
        print(
            f"LocalCluster, {args.workers} workers: {cl['total_s']:.1f} s "
            f"including generation ({cl['total_rows_per_s']:,.0f} rows/s), peak "
            f"RSS per worker {cl['peak_rss_mib_per_worker']} MiB",
            flush=True,
        )
        for key, value in cl["values"].items():
            assert abs(value - stream["values"][key]) < 1e-12, key
        result["cluster"] = cl
    print(json.dumps(result, indent=1, default=float))


if __name__ == "__main__":
    main()
