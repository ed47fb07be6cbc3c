"""Calibrating a language model's multiple-choice answers: the cloze task (issue 52).

The data are those of ``make_lm_data.py`` (a small next-token model trained on
the King James Bible; see "A small language model" in ``DATASETS.md``): which
of four words (A-D) comes next in a held-out verse, one group per Bible book.
Set ``SKCAL_LM_DIR`` to the cache folder when it is not
``benchmarks/.cache/lm/``.

Reported:

(a) uncalibrated option probabilities vs temperature scaling (fit on a random
    half, scored on the other): test NLL and top-label ECE (15 bins);
(b) with the letter bias of ``cloze_biased.jsonl`` injected (``+2, +1, 0, -1``
    on the logits of A-D): uncalibrated, TS, ``BatchCalibrator`` (prior: the
    mean prediction on the fit half) and ``ContextualCalibrator`` (prior: the
    model's probabilities after a content-free context, biased the same way),
    each alone and followed by TS: NLL, ECE, accuracy;
(c) many small tasks: per seed, ``--books`` books drawn as tasks, each with
    20-60 calibration rows and up to ``--n-test`` test rows of the same book;
    ``GroupedTemperatureScaling`` with ``shrinkage="auto"`` (per book, shrunk
    toward the pooled temperature), ``inf`` (pooled) and ``0`` (unpooled):
    test NLL, and the number of seeds where ``auto`` beats both;
(d) the JSONL route: ``read_option_logprobs(cloze.jsonl, ["A".."D"])`` gives
    the same option probabilities as the npz option log-probabilities.

Run:  SKCAL_LM_DIR=... python benchmarks/bench_llm_cloze.py [--seeds 20]
          [--quick] [--books 30]
"""

import argparse
import os
import sys
import time

import numpy as np
from scipy.special import log_softmax, softmax

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _lm import (  # noqa: E402
    DEFAULT_LETTER_BIAS,
    LETTERS,
    inject_letter_bias,
    jsonl_paths,
    load_cloze,
)


def _import_skcal():
    """skcal's names, imported after the arguments are parsed (``--help`` stays
    light)."""
    global TemperatureScaling, BatchCalibrator, ContextualCalibrator
    global GroupedTemperatureScaling, read_option_logprobs
    global expected_calibration_error
    from skcal import TemperatureScaling
    from skcal.llm import (
        BatchCalibrator,
        ContextualCalibrator,
        GroupedTemperatureScaling,
        read_option_logprobs,
    )
    from skcal.metrics import expected_calibration_error


def nll(y, p):
    return float(-np.mean(np.log(np.clip(p[np.arange(len(y)), y], 1e-300, None))))


def scores(y, p):
    return (
        nll(y, p),
        float(expected_calibration_error(y, p, labels=np.arange(p.shape[1]))),
        float(np.mean(p.argmax(axis=1) == y)),
    )


def row(name, y, p):
    n, e, a = scores(y, p)
    print(f"  {name:<34} {n:8.4f} {e:8.4f} {a:8.4f}")


def header(title):
    print(f"\n{title}")
    print(f"  {'':<34} {'NLL':>8} {'ECE':>8} {'acc':>8}")


def split(n, rng):
    order = rng.permutation(n)
    return order[: n // 2], order[n // 2 :]


def part_a(cloze, y, fit, test):
    z = cloze.option_logprobs
    header(f"(a) unbiased prompt: fit {len(fit)} rows, test {len(test)} rows")
    row("uncalibrated", y[test], softmax(z[test], axis=1))
    ts = TemperatureScaling().fit(z[fit], y[fit])
    row(f"TS (T = {ts.temperature_:.3f})", y[test], ts.predict_proba(z[test]))


def part_b(cloze, y, fit, test):
    z = inject_letter_bias(cloze.option_logprobs, DEFAULT_LETTER_BIAS)
    cf = inject_letter_bias(cloze.cf_option_logprobs, DEFAULT_LETTER_BIAS)
    header(f"(b) letter bias {DEFAULT_LETTER_BIAS} injected on the logits of A-D")
    row("uncalibrated", y[test], softmax(z[test], axis=1))
    ts = TemperatureScaling().fit(z[fit], y[fit])
    row("TS", y[test], ts.predict_proba(z[test]))
    # content-free outputs: one row per question (the same content-free
    # context, but the question's own option words), so the prior is the
    # row's own: a ContextualCalibrator fitted per row is exactly a
    # division by its content-free probabilities.
    corrections = {
        "BatchCalibrator": BatchCalibrator().fit(z[fit]),
        "ContextualCalibrator (per row)": None,
    }
    for name, est in corrections.items():
        if est is None:
            lz_fit = log_softmax(z[fit], axis=1) - log_softmax(cf[fit], axis=1)
            lz_test = log_softmax(z[test], axis=1) - log_softmax(cf[test], axis=1)
            # the same arithmetic through the class on one row, as a check
            one = ContextualCalibrator().fit(cf[test[:1]]).predict_proba(z[test[:1]])
            assert np.allclose(one, softmax(lz_test[:1], axis=1))
        else:
            lz_fit = est.predict_log_proba(z[fit])
            lz_test = est.predict_log_proba(z[test])
        row(name, y[test], softmax(lz_test, axis=1))
        after = TemperatureScaling().fit(lz_fit, y[fit])
        row(f"{name} + TS", y[test], after.predict_proba(lz_test))
    mean_cf = ContextualCalibrator().fit(cf[fit])
    row("ContextualCalibrator (mean prior)", y[test], mean_cf.predict_proba(z[test]))


def draw_tasks(groups, rng, n_books, low, high, n_test):
    """Calibration and test rows of ``n_books`` books drawn among those with
    enough rows: ``low``-``high`` calibration rows each, ``n_test`` test."""
    books, counts = np.unique(groups, return_counts=True)
    eligible = books[counts >= high + n_test]
    chosen = rng.choice(eligible, size=min(n_books, len(eligible)), replace=False)
    fit, test = [], []
    for b in chosen:
        rows = rng.permutation(np.flatnonzero(groups == b))
        k = int(rng.integers(low, high + 1))
        fit.append(rows[:k])
        test.append(rows[k : k + n_test])
    return np.concatenate(fit), np.concatenate(test), len(chosen)


def part_c(cloze, y, args):
    z, groups = cloze.option_logprobs, cloze.groups
    print(
        f"\n(c) many small tasks: {args.books} books a seed, 20-60 calibration rows "
        f"each, {args.n_test} test rows each; test NLL"
    )
    print(f"  {'seed':>4} {'auto':>8} {'pooled':>8} {'unpooled':>8} {'lambda':>8} win")
    wins, table = 0, []
    for seed in range(args.seeds):
        rng = np.random.default_rng(seed)
        fit, test, n_books = draw_tasks(groups, rng, args.books, 20, 60, args.n_test)
        out = []
        for shrinkage in ("auto", np.inf, 0.0):
            est = GroupedTemperatureScaling(shrinkage=shrinkage, random_state=seed)
            est.fit(z[fit], y[fit], groups=groups[fit])
            out.append(nll(y[test], est.predict_proba(z[test], groups=groups[test])))
            if shrinkage == "auto":
                lam = est.shrinkage_
        win = out[0] < out[1] and out[0] < out[2]
        wins += win
        table.append(out)
        print(
            f"  {seed:>4} {out[0]:8.4f} {out[1]:8.4f} {out[2]:8.4f} {lam:8g} "
            f"{'yes' if win else 'no'}"
        )
    mean = np.mean(table, axis=0)
    alone = GroupedTemperatureScaling(shrinkage=0.0).fit(z, y, groups=groups)
    t = alone.group_temperatures_
    print(
        f"  (per-book temperatures fitted on every row of each book: median "
        f"{np.median(t):.3f}, 10-90% {np.quantile(t, 0.1):.3f}-"
        f"{np.quantile(t, 0.9):.3f}; pooled {alone.temperature_:.3f})"
    )
    print(f"  mean {mean[0]:8.4f} {mean[1]:8.4f} {mean[2]:8.4f}")
    print(
        f"  auto beats both pooled and unpooled in {wins} of {args.seeds} seeds "
        f"({100 * wins / args.seeds:.0f}%); books drawn: {n_books}"
    )


def part_d(cloze, limit):
    path = jsonl_paths()["cloze"]
    if limit is None:
        source = path
    else:
        with open(path, encoding="utf-8") as f:
            source = "".join(next(f) for _ in range(limit))
    print(f"\n(d) JSONL route: read {path.name} with read_option_logprobs")
    for match in ("exact", "normalized"):
        start = time.perf_counter()
        read = read_option_logprobs(source, list(LETTERS), match=match)
        seconds = time.perf_counter() - start
        n = len(read)
        p_npz = softmax(cloze.option_logprobs[:n], axis=1)
        gap = np.abs(read.proba() - p_npz).max(axis=1)
        listed = ~read.absent.any(axis=1)
        y = cloze.answer[:n]
        print(
            f"  match={match!r}: {n} records in {seconds:.1f} s; every option in "
            f"the top-20 in {int(listed.sum())} rows, max |proba(JSONL) - "
            f"softmax(npz)| there {gap[listed].max():.1e}; {int((~listed).sum())} "
            f"rows with an absent option (absent='share'), max gap there "
            f"{gap[~listed].max():.1e}; NLL JSONL {nll(y, read.proba()):.4f} vs "
            f"npz {nll(y, p_npz):.4f}"
        )
    print(
        "  (the records round log-probs to 6 decimals; under match='normalized' "
        "the tokens 'a', ' b' ... of the top-20 count as forms of A, B ...)"
    )


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--books", type=int, default=30)
    parser.add_argument("--n-test", type=int, default=100)
    parser.add_argument(
        "--quick", action="store_true", help="5 seeds and 5,000 JSONL records"
    )
    args = parser.parse_args()
    _import_skcal()
    if args.quick:
        args.seeds = min(args.seeds, 5)
    cloze = load_cloze()
    y = cloze.answer
    n = len(y)
    print(f"cloze task: {n} questions, 4 options, {len(cloze.group_names)} books")
    fit, test = split(n, np.random.default_rng(0))
    part_a(cloze, y, fit, test)
    part_b(cloze, y, fit, test)
    part_c(cloze, y, args)
    part_d(cloze, 5000 if args.quick else None)


if __name__ == "__main__":
    main()
