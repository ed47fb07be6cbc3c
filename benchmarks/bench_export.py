"""Exported calibrators against skcal's ``predict_proba``; one-graph export
of classifier + calibrator; what skl2onnx fails on (issue 53).

Three tables, one process:

1. **Latency.** Each calibrator (TemperatureScaling, VectorScaling,
   DirichletCalibrator, IsotonicCalibrator, CenteredIsotonicCalibrator,
   HistogramBinningCalibrator) is
   fitted on ImageNet-like logits (``_lib/synthetic.score_data``) of 10 and
   1,000 classes, exported by ``skcal.export.to_onnx`` (float32), and timed
   on 1 row and on 10,000 rows: onnxruntime's ``session.run`` (CPU, one
   intra-op thread) against skcal's ``predict_proba`` on the same float32
   rows, call for call alternately, median of ``--repeats``; with the
   largest difference of the two and the graph's size in bytes. The
   Dirichlet map at 1,000 classes is fitted with ``max_iter=20`` (its
   predict costs the same converged or not). With ``--torch``, also the
   module of ``skcal.export.to_torch`` (eager, float32 rows, one thread)
   against ``predict_proba`` in the same way, ``--torch-repeats`` times on
   10,000 rows.
2. **One graph per classifier.** ``CalibratedClassifier(FrozenEstimator(
   clf), TemperatureScaling())`` on digits (half to fit, a quarter to
   calibrate, a quarter to test), exported by ``model_to_onnx`` (float32):
   the largest difference of the composed graph from ``predict_proba``, and
   skl2onnx's own error on the classifier alone (its converted
   ``decision_function``/``predict_proba`` against scikit-learn's).
3. **skl2onnx's failures.** ``CalibratedClassifierCV(FrozenEstimator(clf))``
   and ``method="temperature"`` given to ``skl2onnx.to_onnx`` (the error it
   raises), then the same calibration by skcal (temperature, isotonic)
   exported in float64: the largest difference from ``predict_proba``.

Run (from the repository root)::

    python benchmarks/bench_export.py [--repeats 15] [--out FILE.md] [--only NAME ...]
        [--torch [--torch-repeats 5]]
"""

import argparse
import datetime
import os
import platform
import sys
import time
import warnings

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from _lib.synthetic import score_data  # noqa: E402

N_ROWS = 10_000


def _session(onnx_model):
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    return onnxruntime.InferenceSession(
        onnx_model.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )


def _alternate(f, g, repeats):
    """Median times of ``f()`` and ``g()``, called alternately."""
    tf, tg = [], []
    f(), g()  # warm up
    for _ in range(repeats):
        start = time.perf_counter()
        f()
        tf.append(time.perf_counter() - start)
        start = time.perf_counter()
        g()
        tg.append(time.perf_counter() - start)
    return float(np.median(tf)), float(np.median(tg))


def _calibrators(n_classes):
    from skcal import DirichletCalibrator, TemperatureScaling, VectorScaling
    from skcal.calibrators import (
        CenteredIsotonicCalibrator,
        HistogramBinningCalibrator,
        IsotonicCalibrator,
    )

    yield "TemperatureScaling", TemperatureScaling(device="cpu")
    yield "VectorScaling", VectorScaling(device="cpu")
    dirichlet = {"max_iter": 20} if n_classes > 100 else {}
    yield (
        "DirichletCalibrator",
        DirichletCalibrator(device="cpu", reg_lambda=1e-3, **dirichlet),
    )
    yield "IsotonicCalibrator", IsotonicCalibrator()
    yield "CenteredIsotonicCalibrator", CenteredIsotonicCalibrator()
    yield "HistogramBinningCalibrator", HistogramBinningCalibrator()


def _time_pair(session, calibrator, X, repeats):
    """The largest difference, and the times on 1 row and on all rows."""

    def run(Z):
        return session.run(None, {"scores": Z})[0]

    times = [
        _alternate(
            lambda: run(X[:1]), lambda: calibrator.predict_proba(X[:1]), 10 * repeats
        )
    ]
    try:
        diff = np.abs(run(X) - calibrator.predict_proba(X)).max()
    except Exception as exc:  # noqa: BLE001 - e.g. onnxruntime out of memory
        text = " ".join(str(exc).split())
        size = text[text.find("buffer of size") :][:30] if "buffer" in text else text
        return f"ORT failed on {len(X)} rows: {size[:60]}", times + [(np.nan,) * 2]
    times.append(
        _alternate(lambda: run(X), lambda: calibrator.predict_proba(X), repeats)
    )
    return diff, times


def _time_torch(calibrator, X, repeats, repeats_all):
    """The torch module's largest difference, and its times (and
    ``predict_proba``'s, alternately) on 1 row and on all rows."""
    import torch

    from skcal.export import to_torch

    module = to_torch(calibrator)
    x = torch.from_numpy(X)

    def run(Z):
        with torch.no_grad():
            return module(Z)

    diff = np.abs(run(x).numpy() - calibrator.predict_proba(X)).max()
    times = _alternate(
        lambda: run(x[:1]), lambda: calibrator.predict_proba(X[:1]), 10 * repeats
    )
    times_all = _alternate(
        lambda: run(x), lambda: calibrator.predict_proba(X), repeats_all
    )
    return diff, times, times_all


def torch_rows(repeats, repeats_all, only=None, classes=(10, 1000)):
    """Table 1b: (method, classes, max diff, 1-row and 10k-row times) of
    the torch modules, against ``predict_proba``."""
    rows = []
    for n_classes in classes:
        rng = np.random.default_rng(0)
        X_fit, y_fit = score_data(max(2000, 3 * n_classes), n_classes, rng)
        X = score_data(N_ROWS, n_classes, rng)[0].astype(np.float32)
        for name, calibrator in _calibrators(n_classes):
            if only is not None and name not in only:
                continue
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                calibrator.set_params(classes=np.arange(n_classes))
                calibrator.fit(X_fit, y_fit)
            diff, (t1, s1), (tn, sn) = _time_torch(calibrator, X, repeats, repeats_all)
            rows.append((name, n_classes, "", diff, t1, s1, tn, sn))
    return rows


def latency_rows(repeats, only=None, classes=(10, 1000)):
    """Table 1: (method, classes, bytes, max diff, 1-row and 10k-row times),
    of the calibrators named in ``only`` (all if None)."""
    from skcal.exceptions import NotExportableError
    from skcal.export import to_onnx

    rows = []
    for n_classes in classes:
        rng = np.random.default_rng(0)
        X_fit, y_fit = score_data(max(2000, 3 * n_classes), n_classes, rng)
        X = score_data(N_ROWS, n_classes, rng)[0].astype(np.float32)
        for name, calibrator in _calibrators(n_classes):
            if only is not None and name not in only:
                continue
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                calibrator.set_params(classes=np.arange(n_classes))
                calibrator.fit(X_fit, y_fit)
            try:
                onnx_model = to_onnx(calibrator)
            except (NotExportableError, AttributeError) as exc:
                rows.append((name, n_classes, f"not exported: {exc}"[:80]))
                continue
            diff, times = _time_pair(_session(onnx_model), calibrator, X, repeats)
            size = len(onnx_model.SerializeToString())
            rows.append((name, n_classes, size, diff, *times[0], *times[1]))
    return rows


def _classifiers():
    from sklearn.ensemble import (
        GradientBoostingClassifier,
        HistGradientBoostingClassifier,
    )
    from sklearn.linear_model import LogisticRegression
    from sklearn.neural_network import MLPClassifier
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    yield "LogisticRegression", LogisticRegression(max_iter=500)
    yield (
        "StandardScaler + LogisticRegression",
        make_pipeline(StandardScaler(), LogisticRegression(max_iter=500)),
    )
    yield "MLPClassifier", MLPClassifier((64,), max_iter=300, random_state=0)
    yield (
        "GradientBoostingClassifier",
        GradientBoostingClassifier(n_estimators=30, random_state=0),
    )
    yield (
        "HistGradientBoostingClassifier",
        HistGradientBoostingClassifier(max_iter=30, random_state=0),
    )


def _skl2onnx_error(clf, response, X):
    """skl2onnx's own error on the classifier: its raw scores (or
    probabilities) against scikit-learn's, float32 rows."""
    from skl2onnx import to_onnx as skl2onnx_to_onnx

    final = clf.steps[-1][1] if hasattr(clf, "steps") else clf
    options = {id(final): {"zipmap": False}}
    if response == "decision_function":
        options[id(final)]["raw_scores"] = True
    session = _session(skl2onnx_to_onnx(clf, X[:1], options=options))
    got = session.run(None, {session.get_inputs()[0].name: X})[1]
    if response == "mlp_logits":  # the graph gives probabilities
        return np.abs(got - clf.predict_proba(X)).max(), "predict_proba"
    expected = getattr(clf, response)(X)
    expected = expected if expected.ndim == 2 else np.c_[-expected, expected]
    return np.abs(got - expected).max(), response


def composed_rows():
    """Table 2: (classifier, response, skl2onnx error, composed diff, bytes)."""
    from sklearn.datasets import load_digits
    from sklearn.frozen import FrozenEstimator

    from skcal import CalibratedClassifier, TemperatureScaling
    from skcal.export import model_to_onnx

    X, y = load_digits(return_X_y=True)
    X = X.astype(np.float32)
    rows = []
    for name, clf in _classifiers():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            clf.fit(X[::2], y[::2])
            model = CalibratedClassifier(
                FrozenEstimator(clf), calibrator=TemperatureScaling()
            ).fit(X[1::4], y[1::4])
        test = X[3::4]
        try:
            onnx_model = model_to_onnx(model)
        except Exception as exc:  # noqa: BLE001 - reported in the table
            rows.append((name, model.response_, f"{type(exc).__name__}: {exc}"[:90]))
            continue
        proba = _session(onnx_model).run(None, {"X": test})[0]
        diff = np.abs(proba - model.predict_proba(test)).max()
        base, of = _skl2onnx_error(clf, model.response_, test)
        size = len(onnx_model.SerializeToString())
        rows.append((name, model.response_, f"{base:.2g} ({of})", diff, size))
    return rows


def failure_rows():
    """Table 3: (case, skl2onnx's error, skcal calibrator, float64 diff)."""
    from skl2onnx import to_onnx as skl2onnx_to_onnx
    from sklearn.calibration import CalibratedClassifierCV
    from sklearn.datasets import load_digits
    from sklearn.frozen import FrozenEstimator
    from sklearn.linear_model import LogisticRegression

    from skcal import CalibratedClassifier, TemperatureScaling
    from skcal.calibrators import IsotonicCalibrator
    from skcal.export import model_to_onnx

    X, y = load_digits(return_X_y=True)
    X = X.astype(np.float32)
    clf = LogisticRegression(max_iter=500).fit(X[:900], y[:900])
    cases = [
        (
            "CalibratedClassifierCV(FrozenEstimator(lr), 'sigmoid')",
            FrozenEstimator(clf),
            "sigmoid",
            None,
        ),
        ("CalibratedClassifierCV(lr, 'temperature', cv=3)", clf, "temperature", 3),
    ]
    rows = []
    for label, base, method, cv in cases:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            sk = CalibratedClassifierCV(base, method=method, cv=cv)
            sk.fit(X[900:1400], y[900:1400])
        try:
            skl2onnx_to_onnx(sk, X[:1], options={"zipmap": False})
            error = "converted"
        except Exception as exc:  # noqa: BLE001 - the failure is the result
            error = f"{type(exc).__name__}: {exc}"[:70]
        for name, calibrator in (
            ("TemperatureScaling", TemperatureScaling()),
            ("IsotonicCalibrator", IsotonicCalibrator()),
        ):
            model = CalibratedClassifier(FrozenEstimator(clf), calibrator=calibrator)
            model.fit(X[900:1400], y[900:1400])
            try:
                onnx_model = model_to_onnx(model, dtype=np.float64)
            except Exception as exc:  # noqa: BLE001
                rows.append((label, error, name, f"not exported: {exc}"[:60]))
                continue
            test = X[1400:].astype(np.float64)
            proba = _session(onnx_model).run(None, {"X": test})[0]
            rows.append(
                (label, error, name, np.abs(proba - model.predict_proba(test)).max())
            )
    return rows


def _fmt(value):
    if isinstance(value, float | np.floating):
        return f"{value:.3g}"
    return str(value)


def _table(header, rows):
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in rows:
        cells = [_fmt(v) for v in row] + [""] * (len(header) - len(row))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _ms(rows):
    """Times as milliseconds, with the skcal / onnxruntime ratio."""
    out = []
    for row in rows:
        if len(row) < 8:
            out.append(row)
            continue
        name, c, size, diff, o1, s1, on, sn = row
        out.append(
            (
                name,
                c,
                size,
                diff,
                o1 * 1e3,
                s1 * 1e3,
                s1 / o1,
                on * 1e3,
                sn * 1e3,
                sn / on,
            )
        )
    return out


def _other_tables():
    """Tables 2 and 3, as markdown."""
    return [
        "## 2. One graph: classifier (skl2onnx) + TemperatureScaling, digits\n\n"
        + _table(
            [
                "classifier",
                "calibrated output",
                "skl2onnx's own error",
                "composed max diff",
                "graph bytes",
            ],
            composed_rows(),
        ),
        "## 3. skl2onnx's failures, and the same calibration by skcal (float64)\n\n"
        + _table(
            ["scikit-learn model", "skl2onnx", "skcal calibrator", "max diff"],
            failure_rows(),
        ),
    ]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--out", help="also write the tables to this file")
    parser.add_argument(
        "--only",
        nargs="+",
        help="table 1 alone, of these calibrators (e.g. IsotonicCalibrator)",
    )
    parser.add_argument(
        "--torch",
        action="store_true",
        help="also time the torch modules (to_torch) against predict_proba",
    )
    parser.add_argument("--torch-repeats", type=int, default=5)
    parser.add_argument("--classes", type=int, nargs="+", default=[10, 1000])
    args = parser.parse_args(argv)
    import onnxruntime
    import skl2onnx
    import torch

    torch.set_num_threads(1)
    head = (
        f"- date: {datetime.date.today().isoformat()}\n"
        f"- CPU: {platform.machine()}, {os.cpu_count()} cores (shared), load average "
        f"{os.getloadavg()[0]:.1f}; torch {torch.__version__} (1 thread), "
        f"onnxruntime {onnxruntime.__version__} (1 intra-op thread), skl2onnx "
        f"{skl2onnx.__version__}\n"
        f"- `python benchmarks/bench_export.py {' '.join(argv or sys.argv[1:])}`\n"
    )
    tables = [
        "## 1. Latency: onnxruntime vs skcal predict_proba (float32, median ms)\n\n"
        + _table(
            [
                "calibrator",
                "classes",
                "graph bytes",
                "max diff",
                "ORT 1 row",
                "skcal 1 row",
                "skcal/ORT",
                f"ORT {N_ROWS}",
                f"skcal {N_ROWS}",
                "skcal/ORT",
            ],
            _ms(latency_rows(args.repeats, args.only, args.classes)),
        )
    ]
    if args.torch:
        tables.append(
            "## 1b. Latency: torch module (eager) vs skcal predict_proba "
            "(float32, median ms)\n\n"
            + _table(
                [
                    "calibrator",
                    "classes",
                    "",
                    "max diff",
                    "torch 1 row",
                    "skcal 1 row",
                    "skcal/torch",
                    f"torch {N_ROWS}",
                    f"skcal {N_ROWS}",
                    "skcal/torch",
                ],
                _ms(
                    torch_rows(
                        args.repeats, args.torch_repeats, args.only, args.classes
                    )
                ),
            )
        )
    if not args.only:
        tables += _other_tables()
    text = "# Export\n\n" + head + "\n" + "\n\n".join(tables) + "\n"
    print(text)
    if args.out:
        with open(args.out, "w") as file:
            file.write(text)


if __name__ == "__main__":
    main()
