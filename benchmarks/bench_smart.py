"""SMART vs temperature scaling: calibration on gap-dependent miscalibration, and speed.

Part 1 (evidence). Logits from ``make_gap_miscalibrated_logits``: over-confident
at small logit gaps, under-confident at large ones (SMART's appendix B). For
each calibration-set size and seed, fits TemperatureScaling and
SMARTCalibrator on the calibration set and scores a 20,000-sample test set:
top-label ECE (15 bins), SoftECE, NLL and accuracy, mean +- std over seeds.
"oracle" divides each row by its true temperature (the best any calibrator
can do); "uncalibrated" is softmax of the raw logits; "SMART h=()" is SMART
with no hidden layer (2 parameters, ``T = softplus(a g_hat + b)``).

Part 2 (speed). fit and predict_proba of both on 50,000 x 1,000 logits in the
same run, with the ratio SMART / TS, for several SMART random states (the
number of Adam epochs varies with it).

Run:  python benchmarks/bench_smart.py [--seeds 5] [--device cpu] [--skip-speed]
      [--skip-evidence] [--speed-seeds 3] [--repeat 1]
"""

import argparse
import functools
import time
import warnings

import numpy as np
from _lib.common import best_time
from scipy.special import softmax

N_TEST = 20_000


def scores(y, proba):
    from skcal.metrics import (
        expected_calibration_error,
        negative_log_likelihood,
        soft_expected_calibration_error,
    )

    return (
        expected_calibration_error(y, proba),
        soft_expected_calibration_error(y, proba),
        negative_log_likelihood(y, proba),
        float(np.mean(proba.argmax(1) == y)),
    )


def evidence(n_cal, n_classes, seeds, device):
    from skcal import SMARTCalibrator, TemperatureScaling
    from skcal.utils._testing import make_gap_miscalibrated_logits

    rows = {m: [] for m in ("uncalibrated", "TS", "SMART", "SMART h=()", "oracle")}
    fit_times = {"TS": [], "SMART": [], "SMART h=()": []}
    for seed in range(seeds):
        X, y, k = make_gap_miscalibrated_logits(
            n_cal + N_TEST, n_classes, random_state=seed
        )
        cal, test = slice(0, n_cal), slice(n_cal, None)
        rows["uncalibrated"].append(scores(y[test], softmax(X[test], axis=1)))
        rows["oracle"].append(scores(y[test], softmax(X[test] / k[test, None], axis=1)))
        for name, est in (
            ("TS", TemperatureScaling(device=device)),
            ("SMART", SMARTCalibrator(random_state=seed, device=device)),
            (
                "SMART h=()",
                SMARTCalibrator(
                    hidden_layer_sizes=(), random_state=seed, device=device
                ),
            ),
        ):
            start = time.perf_counter()
            est.fit(X[cal], y[cal])
            fit_times[name].append(time.perf_counter() - start)
            rows[name].append(scores(y[test], est.predict_proba(X[test])))
    print(
        f"\n{n_cal} calibration samples, {n_classes} classes, {seeds} seeds "
        f"(test: {N_TEST})"
    )
    print(f"{'method':>13} {'ECE':>17} {'SoftECE':>17} {'NLL':>17} {'accuracy':>17}")
    for name, vals in rows.items():
        vals = np.array(vals)
        cells = " ".join(
            f"{m:8.4f} +- {s:6.4f}" for m, s in zip(vals.mean(0), vals.std(0))
        )
        print(f"{name:>13} {cells}")
    wins = sum(s[0] < t[0] for s, t in zip(rows["SMART"], rows["TS"]))
    print(
        f"SMART ECE below TS ECE in {wins}/{seeds} seeds; mean fit time TS "
        f"{np.mean(fit_times['TS']):.3f} s, SMART {np.mean(fit_times['SMART']):.3f} s"
    )


def speed(device, repeat, seeds):
    from skcal import SMARTCalibrator, TemperatureScaling
    from skcal.utils._testing import make_gap_miscalibrated_logits

    n, c = 50_000, 1_000
    X, y, _ = make_gap_miscalibrated_logits(n, c, max_margin=14.0, random_state=0)
    # warm-up: torch's first optimiser construction imports compile machinery
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # most classes are missing in 200 rows
        SMARTCalibrator(max_iter=2, device=device).fit(X[:200], y[:200])
        TemperatureScaling(device=device).fit(X[:200], y[:200])
    print(f"\nspeed on {n} x {c} float64 logits, device={device}, best of {repeat}")
    # the number of Adam epochs depends on random_state (early stopping on a
    # training loss that Adam makes oscillate), so SMART is timed for several
    # seeds, each against a TS fit timed just before it
    ratios = []
    for seed in range(seeds):
        ts = TemperatureScaling(device=device)
        smart = SMARTCalibrator(random_state=seed, device=device)
        t_fit, _ = best_time(functools.partial(ts.fit, X, y), repeat)
        s_fit, _ = best_time(functools.partial(smart.fit, X, y), repeat)
        ratios.append(s_fit / t_fit)
        print(
            f"fit, random_state={seed}: TS {t_fit:6.2f} s   SMART {s_fit:6.2f} s   "
            f"ratio {s_fit / t_fit:4.1f}x  (SMART: {smart.n_iter_} Adam epochs, "
            f"{1000 * s_fit / max(smart.n_iter_, 1):.0f} ms per epoch incl. setup)"
        )
    print(
        f"fit ratio SMART / TS over {seeds} seeds: mean {np.mean(ratios):.1f}x, "
        f"max {np.max(ratios):.1f}x"
    )
    t_pred, _ = best_time(lambda: ts.predict_proba(X), repeat)
    s_pred, _ = best_time(lambda: smart.predict_proba(X), repeat)
    print(
        f"predict_proba: TS {t_pred:7.2f} s   SMART {s_pred:7.2f} s   "
        f"ratio {s_pred / t_pred:5.1f}x"
    )


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--speed-seeds", type=int, default=3)
    parser.add_argument("--skip-speed", action="store_true")
    parser.add_argument("--skip-evidence", action="store_true")
    args = parser.parse_args(argv)
    import torch

    print(f"torch {torch.__version__} threads={torch.get_num_threads()}")
    if not args.skip_evidence:
        for n_cal, n_classes in ((50, 10), (500, 10), (5000, 10), (5000, 100)):
            evidence(n_cal, n_classes, args.seeds, args.device)
    if not args.skip_speed:
        speed(args.device, args.repeat, args.speed_seeds)


if __name__ == "__main__":
    main()
