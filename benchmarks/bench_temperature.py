"""TemperatureScaling vs scikit-learn's temperature scaling, same data, same run.

Times ``fit`` and ``predict_proba`` of ``skcal.TemperatureScaling`` and of
``CalibratedClassifierCV(FrozenEstimator(...), method="temperature")`` on
synthetic over-confident logits, and prints the fitted temperatures and the
time ratios (sklearn / skcal: > 1 means skcal is faster), medians of
``--repeat`` runs, with torch's thread count.

Run:  python benchmarks/bench_temperature.py [--device cpu] [--repeat 5]
      [--threads N] [--shapes 20000x100 50000x1000 200000x10]
"""

import argparse

from _lib.common import median_time

SHAPES = ["20000x100", "50000x1000", "200000x10"]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--shapes", nargs="+", default=SHAPES)
    parser.add_argument("--dtype", default="float64", choices=["float32", "float64"])
    args = parser.parse_args(argv)
    import threadpoolctl
    import torch
    from sklearn.calibration import CalibratedClassifierCV
    from sklearn.frozen import FrozenEstimator

    from skcal import TemperatureScaling
    from skcal.utils._testing import FixedLogits, make_miscalibrated_logits

    if args.threads:  # torch's and BLAS's (scikit-learn's numpy) alike
        torch.set_num_threads(args.threads)
        threadpoolctl.threadpool_limits(args.threads)
    print(
        f"torch {torch.__version__} threads={torch.get_num_threads()} "
        f"device={args.device}; BLAS: "
        f"{[i['internal_api'] for i in threadpoolctl.threadpool_info()]}"
    )
    header = (
        f"{'shape':>14} {'T skcal':>10} {'T sklearn':>10} {'rel diff':>9} "
        f"{'fit skcal':>10} {'fit sk':>10} {'ratio':>6} "
        f"{'pred skcal':>10} {'pred sk':>10} {'ratio':>6}"
    )
    print(header)
    for shape in args.shapes:
        n, c = (int(v) for v in shape.split("x"))
        X, y = make_miscalibrated_logits(n, c, temperature=2.0, random_state=0)
        X = X.astype(args.dtype)
        ts = TemperatureScaling(device=args.device)
        TemperatureScaling(device=args.device).fit(X[:100], y[:100])  # warm-up
        t_fit, _ = median_time(lambda: ts.fit(X, y), args.repeat)  # noqa: B023
        t_pred, _ = median_time(lambda: ts.predict_proba(X), args.repeat)  # noqa: B023
        ref = CalibratedClassifierCV(
            FrozenEstimator(FixedLogits().fit(X, y)), method="temperature"
        )
        s_fit, _ = median_time(lambda: ref.fit(X, y), args.repeat)  # noqa: B023
        s_pred, _ = median_time(lambda: ref.predict_proba(X), args.repeat)  # noqa: B023
        t_ref = 1.0 / float(ref.calibrated_classifiers_[0].calibrators[0].beta_)
        rel = abs(ts.temperature_ - t_ref) / t_ref
        print(
            f"{f'{n}x{c}':>14} {ts.temperature_:10.6f} {t_ref:10.6f} {rel:9.1e} "
            f"{t_fit:10.3f} {s_fit:10.3f} {s_fit / t_fit:6.2f} "
            f"{t_pred:10.3f} {s_pred:10.3f} {s_pred / t_pred:6.2f}",
            flush=True,
        )


if __name__ == "__main__":
    main()
