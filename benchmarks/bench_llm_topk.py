"""Temperature scaling and metrics on top-k scores (issue 52 item 2).

Three parts, each in a process of its own (so that its peak RSS is its own):

* ``lm``: the LM's 10,000 held-out next-token rows (``benchmarks/_lm.py``,
  12,263-token vocabulary, float32 log-softmax outputs): temperature scaling
  fitted on the first 5,000 rows given as top-20 (``TopKScores.from_logits``)
  against fitted on their full logits; both temperatures evaluated by the
  NLL of the full logits of the last 5,000 rows, with each ``rest_model``
  (``"equal"``, ``"tail"``), and the bound no rest model can beat: the
  temperature of the full logits when an unlisted label is known only to be
  unlisted. Targets: the NLL ratio within 1%, the temperature ratio within 2%.
* ``fit``: 100,000 rows of a 256,000-token vocabulary as generated top-20
  input (the top-20 are generated directly, never a dense matrix; labels
  drawn from a distribution whose logits are the reported ones divided by
  1.5, so the fitted temperature should be about 1.5): time of the
  ``TemperatureScaling`` fit and of ``predict_proba``, peak RSS. Targets:
  under 10 s on 2 cores, under 2 GB.
* ``stream``: 10^7 such rows, 100 chunks of 100,000, through metric states
  of the top-label ECE and the NLL: time (generation excluded) and peak RSS.
* ``zipf``: a known Zipf-like distribution over 20,000 classes (labels
  drawn at temperature 1.6): TS on its top-20 with each ``rest_model``
  against TS on the full logits.
* ``refuse``: the dense path at the size of ``fit`` is refused up front.

Run:  SKCAL_LM_DIR=... python benchmarks/bench_llm_topk.py [--part PART]
          [--stream-rows 10000000]
"""

import argparse
import os
import resource
import subprocess
import sys
import time
import warnings

import numpy as np

N_VOCAB = 256_000
K = 20
T_TRUE = 1.5


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def generate_topk(n, rng, n_vocab=N_VOCAB, k=K):
    """Top-k log-probabilities over ``n_vocab`` classes, and labels.

    The true distribution of a row: ``k`` listed logits ``z`` (sorted) and
    the leftover fraction ``f ~ Beta(2, 6)`` spread over the other classes;
    the label is drawn from it. The reported scores are the log-softmax of
    ``T_TRUE * z`` (and of the unlisted logit) under the rest model.
    """
    from skcal.llm import TopKScores

    z = -np.sort(-rng.normal(0.0, 2.5, size=(n, k)), axis=1)
    lse = np.log(np.exp(z - z[:, :1]).sum(axis=1)) + z[:, 0]
    f = rng.beta(2.0, 6.0, size=n)
    log_m = np.log(n_vocab - k)
    u = lse + np.log(f / (1 - f)) - log_m  # each unlisted class's true logit
    stride = rng.integers(1, n_vocab // k, size=n)
    indices = rng.integers(0, n_vocab, size=n)[:, None] + np.arange(k) * stride[:, None]
    indices %= n_vocab
    # labels: the rest with probability f (any class; a listed one is rare),
    # else a listed class drawn from softmax(z)
    p = np.exp(z - lse[:, None])
    pick = (p.cumsum(axis=1) < rng.random(n)[:, None] * p.sum(axis=1)[:, None]).sum(
        axis=1
    )
    y = np.where(
        rng.random(n) < f,
        rng.integers(0, n_vocab, size=n),
        indices[np.arange(n), np.minimum(pick, k - 1)],
    )
    zs, us = T_TRUE * z, T_TRUE * u
    high = zs[:, 0]
    total = high + np.log(
        np.exp(zs - high[:, None]).sum(axis=1) + np.exp(log_m + us - high)
    )
    top = TopKScores(indices, zs - total[:, None], n_vocab, log_m + us - total)
    return top, y


def part_lm():
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from _lm import load_logits

    from skcal import TemperatureScaling
    from skcal.exceptions import MissingClassWarning
    from skcal.llm import TopKScores

    data = load_logits()
    logits, y = data.logits, data.targets
    n = len(y)
    half = n // 2
    t0 = time.perf_counter()
    top = TopKScores.from_logits(logits[:half], k=K)
    t_topk = time.perf_counter() - t0
    in_top = (top.indices == y[:half, None]).any(axis=1).mean()
    t0 = time.perf_counter()
    ts_top = TemperatureScaling().fit(top, y[:half])
    t_fit_top = time.perf_counter() - t0
    t0 = time.perf_counter()
    ts_tail = TemperatureScaling(rest_model="tail").fit(top, y[:half])
    t_fit_tail = time.perf_counter() - t0
    dense = np.asarray(logits[:half], dtype=np.float64)
    t0 = time.perf_counter()
    with warnings.catch_warnings():  # most tokens never occur: expected
        warnings.simplefilter("ignore", MissingClassWarning)
        ts_full = TemperatureScaling(device="cpu").fit(dense, y[:half])
    t_fit_full = time.perf_counter() - t0
    t_censored = _censored_bound(dense, y[:half], top.indices)
    del dense
    test = np.asarray(logits[half:], dtype=np.float64)
    nll = {}
    models = (("full", ts_full), ("top20", ts_top), ("tail", ts_tail), ("T=1", None))
    for name, ts in models:
        z = test if ts is None else test / ts.temperature_
        high = z.max(axis=1)
        lse = high + np.log(np.exp(z - high[:, None]).sum(axis=1))
        nll[name] = float(np.mean(lse - z[np.arange(len(z)), y[half:]]))
    test_top = TopKScores.from_logits(test, k=K)
    from skcal.metrics import negative_log_likelihood

    nll_top_rest = negative_log_likelihood(y[half:], ts_top.predict_proba(test_top))
    print(
        f"[lm] {n} rows x {logits.shape[1]} vocabulary; fit on {half}, "
        f"test on {n - half}"
    )
    print(f"[lm] true next token in the top-{K}: {in_top:.1%} of the fit rows")
    print(
        f"[lm] T full logits = {ts_full.temperature_:.5f}, T top-{K} = "
        f"{ts_top.temperature_:.5f}, "
        f"ratio {ts_top.temperature_ / ts_full.temperature_:.5f}"
    )
    print(
        f"[lm] T top-{K} rest_model='tail' = {ts_tail.temperature_:.5f}, ratio "
        f"{ts_tail.temperature_ / ts_full.temperature_:.5f}; the exact tail with "
        f"the label known only as unlisted: T = {t_censored:.5f}, ratio "
        f"{t_censored / ts_full.temperature_:.5f} (the limit of a rest model)"
    )
    print(
        f"[lm] test NLL (full logits) of TS top-{K} rest_model='tail': "
        f"{nll['tail']:.5f}, ratio {nll['tail'] / nll['full']:.5f}; fit "
        f"{t_fit_tail:.3f} s"
    )
    print(
        f"[lm] test NLL (full logits): T=1 {nll['T=1']:.5f}, "
        f"TS full {nll['full']:.5f}, "
        f"TS top-{K} {nll['top20']:.5f}, ratio {nll['top20'] / nll['full']:.5f}"
    )
    print(f"[lm] test NLL of the top-{K} rest model, TS top-{K}: {nll_top_rest:.5f}")
    print(
        f"[lm] times: from_logits {t_topk:.2f} s, fit top-{K} {t_fit_top:.3f} s, "
        f"fit full {t_fit_full:.2f} s"
    )


def _censored_bound(logits, y, indices, n_iter=60):
    """The temperature fitted on the full logits when a label outside the
    top-k is known only to be unlisted (its likelihood the mass of all the
    unlisted classes): the best any rest model can do, by Newton's method."""
    z = logits - logits.max(axis=1, keepdims=True)
    rows = np.arange(len(y))
    listed = (indices == y[:, None]).any(axis=1)
    tail = np.ones(z.shape, dtype=bool)
    np.put_along_axis(tail, indices, False, axis=1)
    beta = 1.0
    for _ in range(n_iter):
        e = np.exp(beta * z)
        m1 = (e * z).sum(1) / e.sum(1)
        v = (e * z * z).sum(1) / e.sum(1) - m1**2
        et = e * tail
        t1 = (et * z).sum(1) / et.sum(1)
        tv = (et * z * z).sum(1) / et.sum(1) - t1**2
        g = np.where(listed, m1 - z[rows, y], m1 - t1).mean()
        h = np.where(listed, v, v - tv).mean()
        beta -= g / h
        if abs(g / h) < 1e-12 * beta:
            break
    return 1.0 / beta


def part_zipf(n=300, n_vocab=20_000, seed=0):
    """A known Zipf-like logit distribution (logits -1.1 log(rank) plus
    noise, ranks shuffled per row), labels drawn at temperature 1.6: TS on
    the top-20 with each rest model against TS on the full logits."""
    from skcal import TemperatureScaling
    from skcal.llm import TopKScores

    rng = np.random.default_rng(seed)
    rank = np.arange(1, n_vocab + 1)
    logits = np.empty((n, n_vocab))
    for i in range(n):
        row = -1.1 * np.log(rank) + rng.normal(0, 0.3, n_vocab)
        logits[i, rng.permutation(n_vocab)] = row + rng.normal(0, 1.0) * (rank <= 5)
    p = np.exp(logits / 1.6 - (logits / 1.6).max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    y = np.array([rng.choice(n_vocab, p=row) for row in p])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t_full = TemperatureScaling(device="cpu").fit(logits, y).temperature_
    top = TopKScores.from_logits(logits, k=K)
    print(f"[zipf] {n} rows x {n_vocab}; T full logits = {t_full:.5f}")
    for rest_model in ("equal", "tail"):
        t = TemperatureScaling(rest_model=rest_model).fit(top, y).temperature_
        ratio = t / t_full
        print(f"[zipf] top-{K} rest_model={rest_model!r} = {t:.5f}, ratio {ratio:.5f}")


def part_fit(n=100_000):
    from skcal import TemperatureScaling

    rng = np.random.default_rng(0)
    t0 = time.perf_counter()
    top, y = generate_topk(n, rng)
    t_gen = time.perf_counter() - t0
    rss_data = _rss_mb()
    t0 = time.perf_counter()
    ts = TemperatureScaling().fit(top, y)
    t_fit = time.perf_counter() - t0
    t0 = time.perf_counter()
    out = ts.predict_proba(top)
    t_pred = time.perf_counter() - t0
    print(
        f"[fit] {n} rows x {N_VOCAB} vocabulary, top-{K}: generated in "
        f"{t_gen:.2f} s; T = {ts.temperature_:.4f} (generated with {T_TRUE}), "
        f"{ts.n_iter_} Newton steps"
    )
    print(
        f"[fit] fit {t_fit:.2f} s, predict_proba {t_pred:.2f} s "
        f"({type(out).__name__}); "
        f"peak RSS {_rss_mb():.0f} MB (after generation {rss_data:.0f} MB)"
    )


def part_stream(n_rows, chunk=100_000):
    from skcal.metrics import (
        expected_calibration_error,
        metric_state,
        negative_log_likelihood,
    )

    rng = np.random.default_rng(1)
    ece = metric_state(expected_calibration_error)
    nll = metric_state(negative_log_likelihood)
    t_gen = t_upd = 0.0
    for _ in range(n_rows // chunk):
        t0 = time.perf_counter()
        top, y = generate_topk(chunk, rng)
        t1 = time.perf_counter()
        ece.update(y, top)
        nll.update(y, top)
        t_upd += time.perf_counter() - t1
        t_gen += t1 - t0
    print(
        f"[stream] {ece.n_samples_} rows x {N_VOCAB} vocabulary, top-{K}, chunks of "
        f"{chunk}: ECE {ece.compute():.4f}, NLL {nll.compute():.4f}"
    )
    print(
        f"[stream] state updates {t_upd:.1f} s (generation {t_gen:.1f} s), "
        f"peak RSS {_rss_mb():.0f} MB"
    )


def part_refuse(n=100_000):
    from skcal import TemperatureScaling
    from skcal.calibrators import VectorScaling

    top, y = generate_topk(n, np.random.default_rng(2))
    try:
        top.to_dense()
    except ValueError as exc:
        print(f"[refuse] to_dense(): ValueError: {exc}")
    try:
        VectorScaling().fit(top, y)
    except TypeError as exc:
        print(f"[refuse] VectorScaling().fit: TypeError: {exc}")
    TemperatureScaling().fit(top, y)
    print(f"[refuse] peak RSS {_rss_mb():.0f} MB (nothing dense was built)")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--part", choices=["all", "lm", "zipf", "fit", "stream", "refuse"]
    )
    parser.add_argument("--stream-rows", type=int, default=10_000_000)
    args = parser.parse_args()
    if args.part in (None, "all"):
        for part in ("lm", "zipf", "fit", "stream", "refuse"):
            cmd = [sys.executable, __file__, "--part", part]
            cmd += ["--stream-rows", str(args.stream_rows)]
            subprocess.run(cmd, check=True)
        return
    if args.part == "lm":
        part_lm()
    elif args.part == "zipf":
        part_zipf()
    elif args.part == "fit":
        part_fit()
    elif args.part == "stream":
        part_stream(args.stream_rows)
    else:
        part_refuse()


if __name__ == "__main__":
    main()
