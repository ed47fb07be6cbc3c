"""The ``skcal`` command line.

``skcal demo`` calibrates a real classifier (an MLP on scikit-learn's bundled
digits data, no download) with every calibrator skcal has and prints a table
of test metrics.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings

import numpy as np

from . import __version__


def mlp_embeddings(mlp, X):
    """Last hidden layer of a fitted multiclass ``MLPClassifier``, and its head.

    Computed from the public ``coefs_``, ``intercepts_`` and ``activation``.

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
    activations = {
        "identity": lambda a: a,
        "logistic": lambda a: 1.0 / (1.0 + np.exp(-a)),
        "tanh": np.tanh,
        "relu": lambda a: np.maximum(a, 0.0),
    }
    hidden = activations[mlp.activation]
    a = np.asarray(X, dtype=np.float64)
    for W, b in zip(mlp.coefs_[:-1], mlp.intercepts_[:-1]):
        a = hidden(a @ W + b)
    return a, mlp.coefs_[-1].T.copy(), mlp.intercepts_[-1].copy()


def mlp_logits(mlp, X) -> np.ndarray:
    """Pre-softmax outputs of a fitted ``MLPClassifier`` (multiclass).

    Their softmax equals ``mlp.predict_proba(X)``.
    """
    embeddings, coef, intercept = mlp_embeddings(mlp, X)
    return embeddings @ coef.T + intercept


def _metrics_row(y, proba, predictions=None):
    from .metrics import (
        brier_score,
        classwise_calibration_error,
        expected_calibration_error,
        max_calibration_error,
        negative_log_likelihood,
        soft_expected_calibration_error,
    )

    return {
        "accuracy": float(
            np.mean(
                (np.argmax(proba, axis=1) if predictions is None else predictions) == y
            )
        ),
        "NLL": negative_log_likelihood(y, proba),
        "Brier": brier_score(y, proba),
        "ECE": expected_calibration_error(y, proba),
        "cwECE": classwise_calibration_error(y, proba),
        "MCE": max_calibration_error(y, proba),
        "SoftECE": soft_expected_calibration_error(y, proba),
    }


def format_table(rows: list[dict], columns: list[str]) -> str:
    """Plain-text table: first column left-aligned, numbers right-aligned."""
    cells = [
        [str(r[c]) if isinstance(r[c], str) else f"{r[c]:.4f}" for c in columns]
        for r in rows
    ]
    widths = [
        max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(columns)
    ]

    def line(values):
        first = values[0].ljust(widths[0])
        return "  ".join([first] + [v.rjust(w) for v, w in zip(values[1:], widths[1:])])

    sep = "  ".join("-" * w for w in widths)
    return "\n".join([line(columns), sep] + [line(r) for r in cells])


def run_demo(seed: int = 0, device: str = "cpu", out=sys.stdout) -> list[dict]:
    """Train an MLP on digits, calibrate it with every calibrator, report."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split
    from sklearn.neural_network import MLPClassifier
    from sklearn.preprocessing import StandardScaler

    from ._torch import resolve_device
    from .base import BaseLocalCalibrator
    from .utils.discovery import all_estimators

    resolve_device(device)  # fail fast on an unavailable device
    X, y = load_digits(return_X_y=True)
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
    z_cal = h_cal @ coef.T + intercept
    z_test = h_test @ coef.T + intercept
    print(
        f"skcal {__version__} demo: MLP on scikit-learn's digits (10 classes); "
        f"{len(y_train)} train / {len(y_cal)} calibration / {len(y_test)} test "
        f"samples, seed {seed}, device {device}.\n",
        file=out,
    )
    from scipy.special import softmax

    rows = [
        {
            "method": "uncalibrated",
            **_metrics_row(y_test, softmax(z_test, axis=1)),
            "fit_s": 0.0,
        }
    ]
    notes = []
    for name, cls in all_estimators():
        estimator = cls()
        if "device" in estimator.get_params():
            estimator.set_params(device=device)
        if "random_state" in estimator.get_params():
            estimator.set_params(random_state=seed)
        # score calibrators see the logits; local calibrators the embeddings
        # of the last hidden layer, with the output layer as the frozen head
        local = isinstance(estimator, BaseLocalCalibrator)
        if local and "coef" in estimator.get_params():
            estimator.set_params(coef=coef, intercept=intercept)
        X_fit, X_eval = (h_cal, h_test) if local else (z_cal, z_test)
        start = time.perf_counter()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            estimator.fit(X_fit, y_cal)
        elapsed = time.perf_counter() - start
        for w in {str(w.message).split(". ")[0] for w in caught}:
            notes.append(f"  {name}: {w.rstrip('.')}.")
        proba = estimator.predict_proba(X_eval)
        predictions = estimator.predict(X_eval)
        rows.append(
            {
                "method": name,
                **_metrics_row(y_test, proba, predictions),
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
    return rows


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="skcal", description="Post-hoc calibration of multiclass classifiers."
    )
    parser.add_argument("--version", action="version", version=f"skcal {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser(
        "demo", help="calibrate an MLP on bundled digits with every calibrator"
    )
    demo.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    demo.add_argument(
        "--device",
        default="cpu",
        help="'cpu', 'cuda', 'cuda:N' or 'auto' (default cpu)",
    )
    return parser


def main(argv=None) -> int:
    """Entry point of the ``skcal`` console script."""
    args = build_parser().parse_args(argv)
    if args.command == "demo":
        try:
            run_demo(seed=args.seed, device=args.device)
        except ValueError as exc:
            print(f"skcal demo: error: {exc}", file=sys.stderr)
            return 2
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
