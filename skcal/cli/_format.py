"""What the commands print: plain-text tables, paragraphs, JSON and metrics.

The metric rows are those of ``calibrate``, ``apply``, ``evaluate`` and
``demo``; :func:`interval_report` is the bootstrap report of ``evaluate
--ci`` and ``select --test``.
"""

from __future__ import annotations

import json
import sys
import textwrap

import numpy as np


def format_table(rows: list[dict], columns: list[str], *, left=()) -> str:
    """Plain-text table: first column left-aligned, numbers right-aligned.

    Floats are written with 4 decimals, strings as they are; the columns
    named in ``left`` are left-aligned too (text such as reasons).

    Examples
    --------
    >>> from skcal.cli import format_table
    >>> rows = [{"method": "ts", "ECE": 0.01234}, {"method": "vector", "ECE": 0.1}]
    >>> print(format_table(rows, ["method", "ECE"]))
    method     ECE
    ------  ------
    ts      0.0123
    vector  0.1000
    """
    cells = [
        [str(r[c]) if isinstance(r[c], str) else f"{r[c]:.4f}" for c in columns]
        for r in rows
    ]
    widths = [
        max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(columns)
    ]
    flush_left = [i == 0 or c in left for i, c in enumerate(columns)]

    def line(values):
        padded = [
            v.ljust(w) if flush else v.rjust(w)
            for v, w, flush in zip(values, widths, flush_left)
        ]
        return "  ".join(padded).rstrip()

    sep = "  ".join("-" * w for w in widths)
    return "\n".join([line(columns), sep] + [line(r) for r in cells])


def wrap(text: str) -> str:
    """``text`` wrapped at 79 columns (the descriptions of ``--help``)."""
    return textwrap.fill(text, 79)


def paragraph(text: str) -> str:
    """``text`` wrapped at 79 columns, never inside a word (names, numbers)."""
    return textwrap.fill(text, 79, break_on_hyphens=False, break_long_words=False)


def plus_minus() -> str:
    """``"±"``, or ``"+-"`` where stdout cannot encode it."""
    try:
        "±".encode(getattr(sys.stdout, "encoding", None) or "utf-8")
    except (UnicodeEncodeError, LookupError):
        return "+-"
    return "±"


def _jsonable(value):
    """``value`` with numpy types as Python's and NaN or infinity as None."""
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | np.ndarray):
        return [_jsonable(v) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not np.isfinite(value):
        return None
    if isinstance(value, bool | int | float | str) or value is None:
        return value
    return str(value)


def print_json(obj) -> None:
    """Print ``obj`` as indented JSON (:func:`_jsonable`)."""
    print(json.dumps(_jsonable(obj), indent=2))


def metrics_row(y, proba, predictions=None, *, labels=None, n_bins=15):
    """Accuracy, NLL, Brier, ECE, cwECE, MCE and SoftECE of ``proba``.

    ``labels`` lists the label of each column (default: the metrics' rule,
    integer labels ``0..C-1`` are their own column); accuracy uses
    ``predictions`` when given, else the most probable column.
    """
    from ..metrics import (
        brier_score,
        classwise_calibration_error,
        expected_calibration_error,
        max_calibration_error,
        negative_log_likelihood,
        soft_expected_calibration_error,
    )

    if predictions is None:
        columns = np.arange(proba.shape[1]) if labels is None else np.asarray(labels)
        predictions = columns[np.argmax(proba, axis=1)]
    kw = {"labels": labels}
    return {
        "accuracy": float(np.mean(predictions == y)),
        "NLL": negative_log_likelihood(y, proba, **kw),
        "Brier": brier_score(y, proba, **kw),
        "ECE": expected_calibration_error(y, proba, n_bins=n_bins, **kw),
        "cwECE": classwise_calibration_error(y, proba, n_bins=n_bins, **kw),
        "MCE": max_calibration_error(y, proba, n_bins=n_bins, **kw),
        "SoftECE": soft_expected_calibration_error(y, proba, n_bins=n_bins, **kw),
    }


def evaluation_row(y, proba, predictions=None, *, labels=None, n_bins=15):
    """:func:`metrics_row` plus ECCE (cumulative, KS) and smECE."""
    from ..metrics import (
        cumulative_calibration_error,
        smooth_expected_calibration_error,
    )

    return {
        **metrics_row(y, proba, predictions, labels=labels, n_bins=n_bins),
        "ECCE": cumulative_calibration_error(y, proba, labels=labels),
        "smECE": smooth_expected_calibration_error(y, proba, labels=labels),
    }


#: the columns of :func:`evaluation_row`, in the order of the tables
EVALUATION_COLUMNS = [
    "accuracy",
    "NLL",
    "Brier",
    "ECE",
    "cwECE",
    "MCE",
    "SoftECE",
    "ECCE",
    "smECE",
]


#: what the columns of :data:`EVALUATION_COLUMNS` are (format ``n_bins``)
METRICS_NOTE = (
    "Lower is better for every metric but accuracy. ECE: top-label, {n_bins} "
    "equal-width bins; cwECE: classwise; MCE: max bin gap; ECCE: cumulative "
    "(Kolmogorov-Smirnov); smECE: smooth ECE."
)


def print_metrics(rows: list[dict], path: str) -> None:
    """The table of the metric ``rows`` on the labels of ``path``, and its note."""
    print(f"\nMetrics on the labels of {path}:")
    print(format_table(rows, ["method", *EVALUATION_COLUMNS]))
    print("\n" + METRICS_NOTE.format(n_bins=15))


def interval_report(args, y, proba, classes, report):
    """The calibration report with bootstrap intervals of ``proba``.

    Shared by ``evaluate --ci`` and ``select --test``: the options of
    :func:`~skcal.cli._options.add_interval_options`, ``--n-bins`` and
    ``--seed``.
    """
    from ..metrics import calibration_report

    report(f"computing bootstrap intervals ({args.n_resamples} resamples) ...")
    return calibration_report(
        y,
        proba,
        n_resamples=args.n_resamples,
        confidence_level=args.confidence_level,
        method=args.ci_method,
        n_bins=args.n_bins,
        labels=classes,
        random_state=args.seed,
    )
