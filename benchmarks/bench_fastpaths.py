"""Each speed-only fast path of skcal against its plain twin, at users' sizes.

A fast path earns its place (CONTRIBUTING.md, "Fast paths") only if, at a
size users run (at least 100,000 rows or 1,000 classes, or a whole
:class:`~skcal.CalibratorSearchCV` fit), it is more than 1.5x faster than
the plain code or saves more than 1 ms per call. This script times each
one both ways in the same process: the plain twin is made by switching the
fast path off (a flag set to False, a hook put back to the base class's, a
helper that declines), and the two are timed alternately, call for call,
``--repeats`` times; the medians are reported with their ratio, their
difference and the noise (half the interquartile range of the slower of
the two): a difference below the noise is no gain. A fast path that was
retired is reported as such (its symbol is gone) when the script runs on a
tree without it.

On a shared machine the milliseconds move with the load; the ratios, taken
call for call in one process, much less.

Run::

    python benchmarks/bench_fastpaths.py [--repeats 9] [--only NAME]
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import time
from unittest import mock

import numpy as np


def _logits(n, n_classes, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, n_classes)) * 2.0
    y = rng.integers(0, n_classes, size=n)
    return X, y


def _softmax(X):
    e = np.exp(X - X.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def _time(call, repeats, fast, plain):
    """Times (seconds) of ``call`` with the fast path on and off."""
    on, off = [], []
    for r in range(repeats + 1):
        order = [(fast, on), (plain, off)]
        if r % 2:
            order.reverse()
        for switch, times in order:
            with switch():
                start = time.perf_counter()
                call()
                elapsed = time.perf_counter() - start
            if r:  # the first round warms both up
                times.append(elapsed)
    return on, off


def _spread(times) -> float:
    """Half the interquartile range: the noise of a median."""
    q = statistics.quantiles(times, n=4) if len(times) > 1 else [0, 0, 0]
    return (q[2] - q[0]) / 2


# ------------------------------------------------------------------ switches
def _plain_score_array(self, X, *, reset):
    """``BaseCalibrator._score_array`` without its float-array shortcut."""
    from sklearn.utils.validation import validate_data

    from skcal.base import _is_one_dimensional
    from skcal.utils._validation import (
        as_numpy,
        check_scores_shape,
        frame_column_names,
        sum_tolerance,
    )

    X = as_numpy(X)
    if _is_one_dimensional(X):
        check_scores_shape(np.asarray(X))
    tol = sum_tolerance(getattr(X, "dtype", None))
    order = None
    if not reset:
        X, order = self._fitted_column_order(X, frame_column_names(X))
    X = validate_data(
        self, X, reset=reset, dtype=[np.float64, np.float32], ensure_all_finite=False
    )
    return (X, tol) if order is None else (X[:, order], tol)


def _cases():
    """(name, what it is, size, setup) for each fast path; ``setup()`` returns
    ``(call, fast_switch, plain_switch)``, or None where it was retired."""
    import skcal
    import skcal.base as base
    import skcal.utils._validation as validation

    on = contextlib.nullcontext

    def off(target, name, value):
        return lambda: mock.patch.object(target, name, value)

    def fitted(cls, n_fit, n_classes, **params):
        X, y = _logits(n_fit, n_classes, seed=1)
        params.setdefault("classes", np.arange(n_classes))
        return cls(**params).fit(X, y)

    def param_names():
        mixin = getattr(skcal.utils._sklearn, "CachedParamNames", None)
        if mixin is None:
            return None
        from sklearn.base import BaseEstimator

        plain = classmethod(BaseEstimator._get_param_names.__func__)
        X, y = _logits(20_000, 10)
        candidates = [
            skcal.TemperatureScaling(),
            skcal.VectorScaling(),
            skcal.HistogramBinningCalibrator(),
            skcal.IsotonicCalibrator(),
        ]
        search = skcal.CalibratorSearchCV(candidates, cv=5)
        return lambda: search.fit(X, y), on, off(mixin, "_get_param_names", plain)

    def score_array(n, n_classes):
        def setup():
            if "_SCORE_DTYPES" not in vars(base):  # the shortcut's mark
                return None
            est = fitted(skcal.TemperatureScaling, 2000, n_classes)
            X, _ = _logits(n, n_classes)
            switch = off(base.BaseCalibrator, "_score_array", _plain_score_array)
            return lambda: est.predict_proba(X), on, switch

        return setup

    def labels(n, n_classes):
        def setup():
            if not hasattr(validation, "_labels_as_columns"):
                return None
            _, y = _logits(n, n_classes)
            call = lambda: validation.resolve_classes(y, n_classes)  # noqa: E731
            return call, on, off(validation, "_labels_as_columns", lambda *a: None)

        return setup

    def flag(cls_name, plain, n, n_classes, input="logits", method="predict_proba"):
        """The fast paths of ``_reads = "probabilities"``, switched off by
        declaring ``plain`` instead (``"logits"``: float64 logits shifted;
        ``"softmax"``: probabilities through their logs)."""

        def setup():
            cls = getattr(skcal, cls_name)
            if getattr(cls, "_reads", None) not in (
                "probabilities",
                "log-probabilities",
                "given probabilities",
            ):
                return None
            X, y = _logits(n, n_classes)
            if input == "proba":
                X = _softmax(X)
            if method == "fit":
                est = cls(input=input, classes=np.arange(n_classes))
                call = lambda: est.fit(X, y)  # noqa: E731
            else:
                Xf, yf = _logits(2000, n_classes, seed=1)
                Xf = _softmax(Xf) if input == "proba" else Xf
                est = cls(input=input, classes=np.arange(n_classes)).fit(Xf, yf)
                call = lambda: getattr(est, method)(X)  # noqa: E731
            return call, on, off(cls, "_reads", plain)

        return setup

    def hook(cls_name, name, n, n_classes, plain, **params):
        def setup():
            cls = getattr(skcal, cls_name)
            own = [k for k in cls.__mro__ if name in vars(k)]
            if not own or own[0] is base.BaseCalibrator:
                return None
            n_fit = 2000 if n_classes < 500 else 3 * n_classes
            est = fitted(cls, n_fit, n_classes, **{k: v() for k, v in params.items()})
            X, _ = _logits(n, n_classes)

            def call():
                if name != "_cost_per_entry":
                    return est.predict_proba(X)
                with skcal.config_context(n_threads=None):  # the thread choice
                    return est.predict_proba(X)

            return call, on, off(cls, name, plain)

        return setup

    def proba_array(n, n_classes):
        def setup():
            from sklearn.utils import check_array

            from skcal.metrics import expected_calibration_error

            source = validation.check_proba_array
            if "without its search" not in (source.__doc__ or ""):
                return None
            P = _softmax(_logits(n, n_classes)[0])
            y = np.argmax(P, axis=1)

            def plain(y_proba):
                return check_array(
                    y_proba,
                    ensure_2d=False,
                    dtype=[np.float64, np.float32],
                    ensure_all_finite=False,
                    input_name="y_proba",
                )

            call = lambda: expected_calibration_error(y, P)  # noqa: E731
            return call, on, off(validation, "check_proba_array", plain)

        return setup

    def spline(n, n_classes):
        def setup():
            from skcal.utils import _proba

            if not hasattr(_proba, "replace_top_label_inplace"):
                return None
            cls = skcal.SplineCalibrator
            if "_calibrated_proba" not in vars(cls):
                return None
            est = fitted(cls, 2000, n_classes)
            X, _ = _logits(n, n_classes)
            plain = base.BaseCalibrator._calibrated_proba
            return (
                lambda: est.predict_proba(X),
                on,
                off(cls, "_calibrated_proba", plain),
            )

        return setup

    def sorted_interp(cls_name, n, n_classes):
        def setup():
            from skcal.utils import _proba

            if not hasattr(_proba, "_SORTED_MIN_KNOTS"):
                return None
            est = fitted(getattr(skcal, cls_name), 5000, n_classes)
            X, _ = _logits(n, n_classes)
            switch = off(_proba, "_SORTED_MIN_KNOTS", 10**12)
            return lambda: est.predict_proba(X), on, switch

        return setup

    base_inplace = getattr(base.BaseCalibrator, "_calibrated_proba_inplace", None)
    one = lambda self, n_columns: 1.0  # noqa: E731

    def fused(n, n_classes):
        def setup():
            P = _softmax(_logits(n, n_classes)[0])

            def plain_check():
                if not (np.isfinite(P).all() and P.min() >= 0 and P.max() <= 1):
                    raise ValueError
                sums = P.sum(axis=1)
                if np.abs(sums - 1).max() > 1e-4:
                    raise ValueError
                Q = np.maximum(P / sums[:, None], validation.PROBA_EPS)
                return Q / Q.sum(axis=1, keepdims=True)

            state = {"plain": False}

            def call():
                if state["plain"]:
                    return plain_check()
                return validation.check_probabilities(P, floor=True)

            @contextlib.contextmanager
            def plain():
                state["plain"] = True
                yield
                state["plain"] = False

            return call, on, plain

        return setup

    rows = [
        (
            "CachedParamNames",
            "parameter names cached per class",
            "search 20k x 10",
            param_names,
        ),
        (
            "_score_array shortcut",
            "validate_data bookkeeping skipped",
            "100k x 10",
            score_array(100_000, 10),
        ),
        ("_score_array shortcut", "", "10k x 1000", score_array(10_000, 1000)),
        (
            "_labels_as_columns",
            "no sort of integer labels",
            "100k, 10 classes",
            labels(100_000, 10),
        ),
        ("_labels_as_columns", "", "1M, 10 classes", labels(1_000_000, 10)),
        ("_labels_as_columns", "", "100k, 1000 classes", labels(100_000, 1000)),
        (
            "_reads (softmax first)",
            "no shifted copy (isotonic)",
            "100k x 10",
            flag("IsotonicCalibrator", "logits", 100_000, 10),
        ),
        (
            "_reads (softmax first)",
            "",
            "10k x 1000",
            flag("IsotonicCalibrator", "logits", 10_000, 1000),
        ),
        (
            "_reads (maps proba)",
            "no log round trip (isotonic, proba)",
            "100k x 10",
            flag("IsotonicCalibrator", "softmax", 100_000, 10, "proba"),
        ),
        (
            "_reads (maps proba)",
            "",
            "10k x 1000",
            flag("IsotonicCalibrator", "softmax", 10_000, 1000, "proba"),
        ),
        (
            "_reads (fits proba)",
            "no log round trip (isotonic fit, proba)",
            "100k x 10",
            flag("IsotonicCalibrator", "softmax", 100_000, 10, "proba", "fit"),
        ),
        (
            "_calibrated_proba_inplace",
            "temperature",
            "100k x 10",
            hook(
                "TemperatureScaling",
                "_calibrated_proba_inplace",
                100_000,
                10,
                base_inplace,
            ),
        ),
        (
            "_calibrated_proba_inplace",
            "temperature",
            "10k x 1000",
            hook(
                "TemperatureScaling",
                "_calibrated_proba_inplace",
                10_000,
                1000,
                base_inplace,
            ),
        ),
        (
            "_calibrated_proba_inplace",
            "vector scaling",
            "100k x 10",
            hook(
                "VectorScaling", "_calibrated_proba_inplace", 100_000, 10, base_inplace
            ),
        ),
        (
            "_calibrated_proba_inplace",
            "vector scaling",
            "10k x 1000",
            hook(
                "VectorScaling", "_calibrated_proba_inplace", 10_000, 1000, base_inplace
            ),
        ),
        *[
            (
                "_calibrated_proba_inplace",
                "top-versus-all, isotonic" if n == 100_000 else "",
                f"{n // 1000}k x {n_classes}",
                hook(
                    "TopVersusAll",
                    "_calibrated_proba_inplace",
                    n,
                    n_classes,
                    base_inplace,
                    calibrator=lambda: skcal.IsotonicCalibrator(),
                ),
            )
            for n, n_classes in ((100_000, 10), (10_000, 1000))
        ],
        (
            "_cost_per_entry",
            "thread choice (matrix scaling)",
            "100k x 10",
            hook("MatrixScaling", "_cost_per_entry", 100_000, 10, one),
        ),
        (
            "_cost_per_entry",
            "",
            "100k x 100",
            hook("MatrixScaling", "_cost_per_entry", 100_000, 100, one),
        ),
        (
            "check_proba_array shortcut",
            "check_array skipped (ECE)",
            "100k x 10",
            proba_array(100_000, 10),
        ),
        (
            "replace_top_label_inplace",
            "spline predict over the softmax",
            "100k x 10",
            spline(100_000, 10),
        ),
        ("replace_top_label_inplace", "", "10k x 1000", spline(10_000, 1000)),
        (
            "interp on sorted queries",
            "spline predict",
            "100k x 10",
            sorted_interp("SplineCalibrator", 100_000, 10),
        ),
        (
            "interp on sorted queries",
            "isotonic predict",
            "100k x 10",
            sorted_interp("IsotonicCalibrator", 100_000, 10),
        ),
        (
            "fused validation (kept)",
            "check_probabilities floor=True",
            "100k x 10",
            fused(100_000, 10),
        ),
        ("fused validation (kept)", "", "10k x 1000", fused(10_000, 1000)),
    ]
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument(
        "--only", default=None, help="comma-separated substrings of the names"
    )
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        help="skcal's torch threads (0: its automatic choice); the "
        "_cost_per_entry rows always use the automatic choice",
    )
    args = parser.parse_args(argv)
    import skcal

    skcal.set_config(n_threads=args.threads or None)
    only = args.only.split(",") if args.only else None
    header = (
        f"{'fast path':<26} {'what':<40} {'size':<19} "
        f"{'fast ms':>9} {'plain ms':>9} {'ratio':>6} {'saved ms':>9} {'noise ms':>9}"
    )
    print(header)
    print("-" * len(header))
    for name, what, size, setup in _cases():
        if only and not any(part in name for part in only):
            continue
        found = setup()
        if found is None:
            print(f"{name:<26} {what:<40} {size:<19} {'retired':>9}")
            continue
        call, fast, plain = found
        repeats = 3 if "search" in size else args.repeats
        on, off = _time(call, repeats, fast, plain)
        t_on, t_off = statistics.median(on), statistics.median(off)
        noise = max(_spread(on), _spread(off))
        print(
            f"{name:<26} {what:<40} {size:<19} {t_on * 1e3:9.2f} {t_off * 1e3:9.2f} "
            f"{t_off / t_on:6.2f} {(t_off - t_on) * 1e3:9.2f} {noise * 1e3:9.2f}",
            flush=True,
        )


if __name__ == "__main__":
    main()
