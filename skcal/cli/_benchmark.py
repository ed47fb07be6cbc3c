"""The ``benchmark`` and ``demo`` commands: every calibrator on a real model.

Both train an MLP on a bundled or generated dataset (no download), split
50/25/25 into train / calibration / test, calibrate it with each method
(score methods on its logits, local methods on its last hidden layer with
the output layer as head) and print a table of test metrics: ``demo`` for
one seed on digits, ``benchmark`` as mean ± std over several seeds
(:func:`run_benchmark`).
"""

from __future__ import annotations

import itertools
import sys
import time
import warnings
from dataclasses import dataclass

import numpy as np

from .. import __version__
from ._common import CLIError, check_device, reporter
from ._format import format_table, metrics_row, plus_minus, print_json, wrap
from ._methods import (
    comma_names,
    make_estimator,
    method_list,
    methods_help,
    resolve_method,
)
from ._options import HelpFormatter, add_common, add_device, add_seed, positive_int


def mlp_embeddings(mlp, X):
    """Last hidden layer of a fitted ``MLPClassifier``, and its output layer.

    :func:`skcal.wrappers.extract_embeddings` for an MLP (a binary MLP's
    single logistic output becomes two columns).

    Returns
    -------
    embeddings : ndarray of shape (n_samples, n_hidden)
        Activations of the last hidden layer.
    coef : ndarray of shape (n_classes, n_hidden)
        Output weights, so that the logits are ``embeddings @ coef.T +
        intercept``.
    intercept : ndarray of shape (n_classes,)
        Output bias.
    """
    from ..wrappers import extract_embeddings

    return extract_embeddings(mlp, X)


def mlp_logits(mlp, X) -> np.ndarray:
    """Pre-softmax outputs of a fitted ``MLPClassifier``.

    Their softmax equals ``mlp.predict_proba(X)``.
    """
    embeddings, coef, intercept = mlp_embeddings(mlp, X)
    return embeddings @ coef.T + intercept


_DATASETS = {
    "digits": "scikit-learn's bundled digits (1797 samples, 10 classes)",
    "synthetic": "make_classification (1500 samples, 20 features, 5 classes)",
}


def _load_dataset(name: str):
    """The features and labels of the dataset ``name`` (see ``_DATASETS``)."""
    if name == "digits":
        from sklearn.datasets import load_digits

        return load_digits(return_X_y=True)
    from sklearn.datasets import make_classification

    return make_classification(
        n_samples=1500,
        n_features=20,
        n_informative=10,
        n_redundant=4,
        n_classes=5,
        n_clusters_per_class=2,
        random_state=0,
    )


@dataclass
class _Backbone:
    """An MLP's last hidden layer on calibration and test data, and its head."""

    n_train: int
    h_cal: np.ndarray
    y_cal: np.ndarray
    h_test: np.ndarray
    y_test: np.ndarray
    coef: np.ndarray
    intercept: np.ndarray

    def logits(self, h):
        return h @ self.coef.T + self.intercept


def _train_backbone(dataset: str, seed: int) -> _Backbone:
    """Split 50/25/25 (stratified) and train an MLP on the first half."""
    from sklearn.model_selection import train_test_split
    from sklearn.neural_network import MLPClassifier
    from sklearn.preprocessing import StandardScaler

    X, y = _load_dataset(dataset)
    X_train, X_rest, y_train, y_rest = train_test_split(
        X, y, train_size=0.5, stratify=y, random_state=seed
    )
    X_cal, X_test, y_cal, y_test = train_test_split(
        X_rest, y_rest, train_size=0.5, stratify=y_rest, random_state=seed
    )
    scaler = StandardScaler().fit(X_train)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # MLP convergence chatter
        mlp = MLPClassifier(
            hidden_layer_sizes=(64,), alpha=1e-5, max_iter=400, random_state=seed
        ).fit(scaler.transform(X_train), y_train)
    h_cal, coef, intercept = mlp_embeddings(mlp, scaler.transform(X_cal))
    h_test = mlp_embeddings(mlp, scaler.transform(X_test))[0]
    return _Backbone(len(y_train), h_cal, y_cal, h_test, y_test, coef, intercept)


def _calibrate_backbone(backbone: _Backbone, methods, *, device, seed):
    """Fit each calibrator on the backbone's calibration data.

    Score calibrators see the logits; local calibrators the embeddings of the
    last hidden layer, with the output layer as the frozen head.

    Yields
    ------
    name, proba, predictions, fit_s, messages
        Test probabilities and predicted labels, fit time and the messages
        of the warnings raised while fitting.
    """
    from ..base import BaseLocalCalibrator

    z_cal, z_test = backbone.logits(backbone.h_cal), backbone.logits(backbone.h_test)
    for name, cls in methods:
        estimator = make_estimator(cls, device=device, seed=seed)
        local = isinstance(estimator, BaseLocalCalibrator)
        if local and "coef" in estimator.get_params():
            estimator.set_params(coef=backbone.coef, intercept=backbone.intercept)
        X_fit, X_eval = (backbone.h_cal, backbone.h_test) if local else (z_cal, z_test)
        start = time.perf_counter()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            estimator.fit(X_fit, backbone.y_cal)
        elapsed = time.perf_counter() - start
        messages = [str(w.message) for w in caught]
        proba = estimator.predict_proba(X_eval)
        yield name, proba, estimator.predict(X_eval), elapsed, messages


def _first_sentences(name, messages) -> list[str]:
    """The first sentence of each distinct warning, prefixed by the method."""
    firsts = sorted({m.split(". ")[0].rstrip(".") for m in messages})
    return [f"  {m}." if m.startswith(name) else f"  {name}: {m}." for m in firsts]


def run_demo(seed: int = 0, device: str = "auto", out=sys.stdout) -> list[dict]:
    """Train an MLP on digits, calibrate it with every calibrator, report."""
    from scipy.special import softmax

    from ..discovery import all_estimators

    check_device(device)
    backbone = _train_backbone("digits", seed)
    y_test = backbone.y_test
    print(
        f"skcal {__version__} demo: MLP on scikit-learn's digits (10 classes); "
        f"{backbone.n_train} train / {len(backbone.y_cal)} calibration / "
        f"{len(y_test)} test samples, seed {seed}, device {device}.\n",
        file=out,
    )
    proba = softmax(backbone.logits(backbone.h_test), axis=1)
    rows = [{"method": "uncalibrated", **metrics_row(y_test, proba), "fit_s": 0.0}]
    notes = []
    for name, proba, predictions, elapsed, messages in _calibrate_backbone(
        backbone, all_estimators(), device=device, seed=seed
    ):
        notes.extend(_first_sentences(name, messages))
        rows.append(
            {
                "method": name,
                **metrics_row(y_test, proba, predictions),
                "fit_s": elapsed,
            }
        )
    columns = [
        "method",
        "accuracy",
        "NLL",
        "Brier",
        "ECE",
        "cwECE",
        "MCE",
        "SoftECE",
        "fit_s",
    ]
    print(format_table(rows, columns), file=out)
    print(
        "\nLower is better for every column but accuracy. ECE: top-label, 15 "
        "equal-width bins; cwECE: classwise; MCE: max bin gap.",
        file=out,
    )
    if notes:
        print("\nWarnings raised while fitting:", *sorted(notes), sep="\n", file=out)
    print("\n" + _search_line(backbone, seed), file=out)
    return rows


def _search_line(backbone: _Backbone, seed: int) -> str:
    """What the default :class:`~skcal.model_selection.CalibratorSearchCV`
    (``random_state=seed``) selects on the demo's calibration logits, and
    why, as one line: the question the table leaves to the reader."""
    from ..model_selection import CalibratorSearchCV

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the fits' warnings are listed above
        search = CalibratorSearchCV(random_state=seed).fit(
            backbone.logits(backbone.h_cal), backbone.y_cal
        )
    res = search.cv_results_
    n_candidates = len(res["candidate"])
    n_skipped = sum(str(r).startswith("skipped") for r in res["skipped_reason"])
    n_scored = int(np.isfinite(res["mean_test_score"]).sum())
    skipped = f", {n_skipped} skipped by its small-data guard" if n_skipped else ""
    return (
        f"CalibratorSearchCV() on the same {len(backbone.y_cal)} "
        f"calibration samples ({search.n_splits_}-fold, {n_scored} of "
        f"{n_candidates} default candidates scored{skipped}) selects "
        f"{search.selected_}: {search.selection_reason_}"
    )


_BENCHMARK_COLUMNS = ["accuracy", "NLL", "ECE", "cwECE", "ECCE", "LCE", "MLCE"]


def _benchmark_scorer(backbone: _Backbone, device: str):
    """Test metrics of the benchmark; LCE/MLCE in one PCA space per seed."""
    from ..metrics import (
        LocalSpace,
        classwise_calibration_error,
        cumulative_calibration_error,
        expected_calibration_error,
        local_calibration_errors,
        negative_log_likelihood,
    )

    y, h = backbone.y_test, backbone.h_test
    space = LocalSpace().fit(backbone.h_cal)

    def score(proba, predictions):
        local = local_calibration_errors(y, proba, h, space=space, device=device)
        return {
            "accuracy": float(np.mean(predictions == y)),
            "NLL": negative_log_likelihood(y, proba),
            "ECE": expected_calibration_error(y, proba),
            "cwECE": classwise_calibration_error(y, proba),
            "ECCE": cumulative_calibration_error(y, proba),
            "LCE": local.lce,
            "MLCE": local.mlce,
        }

    return score


def _benchmark_seed(dataset, methods, *, seed, device, tag, report):
    """Test metrics (with ``fit_s``) of each method on one seed's MLP.

    Returns the backbone, ``[(name, metrics), ...]`` starting with the
    uncalibrated MLP, and the first sentence of every fit warning.
    """
    from scipy.special import softmax

    start = time.perf_counter()
    backbone = _train_backbone(dataset, seed)
    report(f"{tag} MLP on {dataset} (seed {seed}) {time.perf_counter() - start:.2f} s")
    score = _benchmark_scorer(backbone, device)
    proba = softmax(backbone.logits(backbone.h_test), axis=1)
    uncalibrated = ("uncalibrated", proba, proba.argmax(axis=1), 0.0, [])
    fitted = _calibrate_backbone(backbone, methods, device=device, seed=seed)
    results, notes = [], []
    for name, proba, predictions, elapsed, messages in itertools.chain(
        [uncalibrated], fitted
    ):
        if name != "uncalibrated":
            report(f"{tag} {name} {elapsed:.2f} s")
        notes.extend(_first_sentences(name, messages))
        results.append((name, {**score(proba, predictions), "fit_s": elapsed}))
    return backbone, results, notes


def run_benchmark(
    dataset="digits", methods=None, *, seeds=3, seed=0, device="auto", report=None
) -> dict:
    """Every calibrator in ``methods`` on ``dataset`` over ``seeds`` seeds.

    Seed ``i`` (from 0) uses ``seed + i`` for the split, the MLP and the
    calibrators. Returns a dict with the per-seed ``values`` and their
    ``mean`` and ``std`` (numpy's, ddof=0) for each method.
    """
    from ..discovery import all_estimators

    report = report or (lambda message: None)
    methods = list(all_estimators() if methods is None else methods)
    if not methods:
        raise ValueError(
            "methods is empty: pass None to run every calibrator, or a list of "
            "(name, class) pairs."
        )
    values, notes = {}, set()
    for i in range(seeds):
        backbone, results, seed_notes = _benchmark_seed(
            dataset,
            methods,
            seed=seed + i,
            device=device,
            tag=f"[seed {i + 1}/{seeds}]",
            report=report,
        )
        notes.update(seed_notes)
        for name, metrics in results:
            for column, value in metrics.items():
                values.setdefault(name, {}).setdefault(column, []).append(value)
    return {
        "dataset": dataset,
        "description": _DATASETS[dataset],
        "seeds": [seed + i for i in range(seeds)],
        "device": device,
        "n_classes": backbone.coef.shape[0],
        "n_train": backbone.n_train,
        "n_calibration": len(backbone.y_cal),
        "n_test": len(backbone.y_test),
        "metrics": [*_BENCHMARK_COLUMNS, "fit_s"],
        "rows": [
            {
                "method": name,
                "mean": {c: float(np.mean(v)) for c, v in columns.items()},
                "std": {c: float(np.std(v)) for c, v in columns.items()},
                "values": columns,
            }
            for name, columns in values.items()
        ],
        "warnings": sorted(notes),
    }


def format_benchmark(result: dict) -> str:
    """The table of :func:`run_benchmark`: one ``mean ± std`` cell per metric."""
    pm = plus_minus()
    rows = []
    for row in result["rows"]:
        cells = {"method": row["method"]}
        for column in result["metrics"]:
            digits = 2 if column == "fit_s" else 4
            mean, std = row["mean"][column], row["std"][column]
            cells[column] = f"{mean:.{digits}f} {pm} {std:.{digits}f}"
        rows.append(cells)
    return format_table(rows, ["method", *result["metrics"]])


def _parse_methods(text: str | None):
    """``[(name, class), ...]`` of ``--methods A,B,...``; None (all) if not given.

    Raises
    ------
    CLIError
        If the list is empty or has an empty name (``""``, ``","``,
        ``"ts,,vs"``); the message lists the valid methods.
    """
    if text is None:
        return None
    names, what = comma_names([text], none="no method")
    if what:
        raise CLIError(
            f"--methods {text!r} has {what}: give one or more comma-separated "
            "calibrators, or leave out --methods to run them all. Valid methods "
            f"(case-insensitive; aliases in parentheses): {method_list()}."
        )
    return list(dict(resolve_method(m) for m in names).items())


def _cmd_benchmark(args) -> int:
    """Run ``skcal benchmark``; returns the exit code."""
    methods = _parse_methods(args.methods)
    check_device(args.device)
    result = run_benchmark(
        args.dataset,
        methods,
        seeds=args.seeds,
        seed=args.seed,
        device=args.device,
        report=reporter(args),
    )
    if args.json:
        print_json(result)
        return 0
    seeds = result["seeds"]
    print(
        f"skcal {__version__} benchmark: MLP on {result['description']}; "
        f"{result['n_train']} train / {result['n_calibration']} calibration / "
        f"{result['n_test']} test samples; seeds {seeds[0]}..{seeds[-1]}; "
        f"device {args.device}. Mean {plus_minus()} std over {len(seeds)} "
        "seed(s) (numpy std, ddof=0).\n"
    )
    print(format_benchmark(result))
    print(
        "\nLower is better for every column but accuracy. ECE: top-label, 15 "
        "bins; cwECE: classwise; ECCE: cumulative (Kolmogorov-Smirnov); LCE / "
        "MLCE: local calibration error (mean / max) in a PCA space of the "
        "calibration embeddings; fit_s: fit time in seconds."
    )
    if result["warnings"]:
        print("\nWarnings raised while fitting:", *result["warnings"], sep="\n")
    return 0


def _cmd_demo(args) -> int:
    """Run ``skcal demo``; returns the exit code."""
    run_demo(seed=args.seed, device=args.device)
    return 0


def add_benchmark(sub) -> None:
    """The parser of ``skcal benchmark``, a subparser of ``sub``."""
    parser = sub.add_parser(
        "benchmark",
        help="every calibrator on a dataset over several seeds",
        description=wrap(
            "For each seed: split the dataset 50/25/25 into train / "
            "calibration / test, train an MLP (64 hidden units) on the train part, "
            "calibrate it with each method (score methods on its logits, local "
            "methods on its hidden layer with the output layer as head) and score "
            "the test part. Prints mean ± std over the seeds. No download."
        ),
        epilog=lambda: (
            "datasets:\n"
            + "\n".join(f"  {k:<10} {v}" for k, v in _DATASETS.items())
            + f"\n\n{methods_help()}"
        ),
        formatter_class=HelpFormatter,
    )
    parser.add_argument(
        "--dataset", choices=list(_DATASETS), default="digits", help="default digits"
    )
    parser.add_argument(
        "--methods",
        metavar="A,B,...",
        help="comma-separated calibrators (default: all; see below)",
    )
    parser.add_argument(
        "--seeds",
        type=positive_int,
        default=3,
        help="number of seeds (default 3); seed i uses --seed + i",
    )
    add_common(parser)
    parser.set_defaults(handler=_cmd_benchmark)


def add_demo(sub) -> None:
    """The parser of ``skcal demo``, a subparser of ``sub``."""
    demo = sub.add_parser(
        "demo", help="calibrate an MLP on bundled digits with every calibrator"
    )
    add_seed(demo)
    add_device(demo)
    demo.set_defaults(handler=_cmd_demo)
