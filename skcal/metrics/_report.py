"""One-call calibration report: the main metrics, each with its interval."""

from __future__ import annotations

import textwrap
from dataclasses import dataclass
from numbers import Integral, Real

import numpy as np
from sklearn.utils import check_random_state

from ..utils._constraints import METRIC_ARRAYS
from ..utils._sklearn import Interval, StrOptions, validate_params
from ..utils._validation import check_proba_targets
from ._cumulative import cumulative_calibration_error, cumulative_calibration_test
from ._ece import classwise_calibration_error, expected_calibration_error
from ._groups import groupable
from ._names import find_metric
from ._proper import brier_score, negative_log_likelihood
from ._smooth import smooth_expected_calibration_error
from ._uncertainty import ConfidenceInterval, confidence_interval

__all__ = ["CalibrationReport", "calibration_report"]

#: Rows of the report: (name, description).
REPORT_METRICS = (
    ("accuracy", "accuracy (argmax), higher is better"),
    ("NLL", "negative_log_likelihood"),
    ("Brier", "brier_score"),
    ("ECE", "expected_calibration_error (top-label, equal-width bins)"),
    ("cwECE", "classwise_calibration_error (equal-width bins)"),
    ("ECCE", "cumulative_calibration_error (top-label, Kolmogorov-Smirnov)"),
    ("smECE", "smooth_expected_calibration_error"),
)
#: Metrics that cost one full metric call per resample.
SLOW_METRICS = ("cwECE", "ECCE", "smECE")


def accuracy(y_true, correct, sample_weight=None):
    """Weighted share of correct predictions (``correct`` holds 0/1 per row)."""
    return float(np.average(correct, weights=sample_weight))


def _fmt(x: float) -> str:
    return f"{x:.4f}"


#: Below this a p-value is printed as a bound: its digits are those of the
#: resampling or of float rounding (a test's 1.11e-16 is "0 up to rounding").
P_VALUE_FLOOR = 1e-4


def format_p_value(p: float) -> str:
    """A p-value for a table: three significant digits, or ``<0.0001``
    (one token, so that tables split on white space keep their columns)."""
    return f"<{P_VALUE_FLOOR:g}" if p < P_VALUE_FLOOR else f"{p:.3g}"


@dataclass(frozen=True, eq=False)
class CalibrationReport:
    """Calibration metrics with bootstrap intervals, from :func:`calibration_report`.

    Attributes
    ----------
    metrics : tuple of str
        Names of the rows: ``"accuracy"``, ``"NLL"``, ``"Brier"``, ``"ECE"``,
        ``"cwECE"``, ``"ECCE"``, ``"smECE"``.
    intervals : tuple of ConfidenceInterval
        The interval of each row, in the order of ``metrics``; index the
        report by name (``report["NLL"]``, or any name of the metric in any
        case: ``report["nll"]``, ``report["neg_log_loss"]``) to get one.
    ecce_pvalue : float
        Asymptotic p-value of perfect calibration of the ECCE test
        (:func:`~skcal.metrics.cumulative_calibration_test`).
    n_samples, n_classes : int
        Size of the data.
    confidence_level : float
        Nominal coverage of the intervals.
    method : {"percentile", "bca"}
        How the intervals were read from the bootstrap distributions.
    n_bins : int
        Bins of ECE and classwise ECE.
    random_state : int
        The seed every interval was computed with (all metrics see the same
        resampled rows).
    """

    metrics: tuple
    intervals: tuple
    ecce_pvalue: float
    n_samples: int
    n_classes: int
    confidence_level: float
    method: str
    n_bins: int
    random_state: int

    def __getitem__(self, name: str) -> ConfidenceInterval:
        """The :class:`ConfidenceInterval` of the row ``name``: its label
        (``"ECE"``), or any name of the same metric in any case (``"ece"``,
        ``"expected_calibration_error"``, ``"neg_log_loss"``)."""
        entry = find_metric(name)
        for key in (name, entry and entry.label, str(name).lower()):
            if key in self.metrics:
                return self.intervals[self.metrics.index(key)]
        raise KeyError(
            f"No metric {name!r} in the report; its metrics are "
            f"{list(self.metrics)} (or another name of the same metric: "
            "'ece', 'expected_calibration_error', 'nll', ...)."
        )

    def _rows(self):
        for name, ci in zip(self.metrics, self.intervals):
            p = self.ecce_pvalue if name == "ECCE" else None
            yield name, ci, p

    def __str__(self) -> str:
        level = f"{100 * self.confidence_level:g}% CI"
        header = ["metric", "estimate", level, "resamples", "p-value"]
        cells = [
            [
                name,
                _fmt(ci.estimate) + ("" if ci.covers_estimate else "*"),
                f"[{_fmt(ci.low)}, {_fmt(ci.high)}]",
                str(ci.n_resamples),
                "" if p is None else format_p_value(p),
            ]
            for name, ci, p in self._rows()
        ]
        widths = [max(len(r[i]) for r in [header, *cells]) for i in range(5)]

        def line(values):
            first = values[0].ljust(widths[0])
            rest = [v.rjust(w) for v, w in zip(values[1:], widths[1:])]
            return "  ".join([first, *rest]).rstrip()

        sep = "  ".join("-" * w for w in widths)
        title = (
            f"Calibration report: {self.n_samples} samples, {self.n_classes} "
            f"classes, {self.method} bootstrap intervals."
        )
        note = (
            f"ECE and cwECE: {self.n_bins} equal-width bins; p-value: ECCE test "
            "of perfect calibration."
        )
        outside = [name for name, ci, _ in self._rows() if not ci.covers_estimate]
        if outside:
            note += (
                f" *: the interval excludes its estimate ({', '.join(outside)}): "
                "calibration errors grow on resampled rows, so the bootstrap "
                "distribution lies above the estimate"
                + (
                    "; method='bca' (skcal evaluate --ci-method bca) corrects this."
                    if self.method == "percentile"
                    else "."
                )
            )
        elif self.method == "percentile":
            note += (
                " Calibration errors grow on resampled rows, so their percentile "
                "intervals may lie above the estimate; method='bca' corrects this."
            )
        table = [line(header), sep, *map(line, cells)]
        return "\n".join([title, "", *table, "", textwrap.fill(note, 79)])

    def to_dict(self) -> dict:
        """The report as plain Python values (JSON-ready).

        Returns
        -------
        dict
            ``n_samples``, ``n_classes``, ``confidence_level``, ``method``,
            ``n_bins``, ``random_state`` and ``metrics``: for each row name,
            a dict with ``estimate``, ``low``, ``high``, ``n_resamples``,
            ``p_value`` (None but for ECCE) and ``covers_estimate`` (whether
            the interval holds the estimate).
        """
        return {
            "n_samples": self.n_samples,
            "n_classes": self.n_classes,
            "confidence_level": self.confidence_level,
            "method": self.method,
            "n_bins": self.n_bins,
            "random_state": self.random_state,
            "metrics": {
                name: {
                    "estimate": ci.estimate,
                    "low": ci.low,
                    "high": ci.high,
                    "n_resamples": ci.n_resamples,
                    "p_value": p,
                    "covers_estimate": ci.covers_estimate,
                }
                for name, ci, p in self._rows()
            },
        }

    def to_frame(self):
        """The report as a pandas DataFrame, one row per metric.

        Returns
        -------
        pandas.DataFrame
            Indexed by metric name, with columns ``estimate``, ``low``,
            ``high``, ``n_resamples``, ``p_value`` (NaN but for ECCE) and
            ``covers_estimate``.

        Raises
        ------
        ImportError
            If pandas is not installed.
        """
        try:
            import pandas as pd
        except ImportError:
            raise ImportError(
                "CalibrationReport.to_frame needs pandas, which is not installed: "
                "pip install pandas (or use to_dict() or str(report))."
            ) from None
        rows = self.to_dict()["metrics"]
        frame = pd.DataFrame.from_dict(rows, orient="index")
        frame["p_value"] = frame["p_value"].astype(float)
        frame.index.name = "metric"
        return frame


def _report_ece(bound):
    """The report's ECE alone, for the permutation test of grouped reports."""

    def ece(y_true, y_proba, *, sample_weight=None, n_bins=15, labels=None, **_):
        return expected_calibration_error(
            y_true, y_proba, n_bins=n_bins, sample_weight=sample_weight, labels=labels
        )

    return ece


@groupable(value=lambda r: r["ECE"].estimate, score=_report_ece)
@validate_params(
    METRIC_ARRAYS
    | {  # a union, not {**...}: Sphinx's source parser fails on the latter
        "n_resamples": [Interval(Integral, 2, None, closed="left")],
        "confidence_level": [Interval(Real, 0, 1, closed="neither")],
        "method": [StrOptions({"percentile", "bca"})],
        "n_bins": [Interval(Integral, 1, None, closed="left")],
        "slow_resamples": [Interval(Integral, 2, None, closed="left"), None],
        "random_state": ["random_state"],
    },
    prefer_skip_nested_validation=False,
)
def calibration_report(
    y_true,
    y_proba,
    *,
    sample_weight=None,
    n_resamples=1000,
    confidence_level=0.9,
    method="percentile",
    n_bins=15,
    slow_resamples=200,
    labels=None,
    random_state=None,
):
    """Accuracy, proper scores and calibration errors, each with its interval.

    One call for the usual picture of a classifier's probabilities: accuracy,
    negative log-likelihood, Brier score, top-label ECE, classwise ECE, ECCE
    (with the p-value of its test of perfect calibration) and smooth ECE,
    each with a bootstrap confidence interval from
    :func:`confidence_interval`. Every interval uses the same seed, so all
    metrics are evaluated on the same resampled rows and a report is
    reproducible.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        True labels.
    y_proba : array-like of shape (n_samples, n_classes) or (n_samples,)
        Predicted probabilities (1-D: positive class of a binary problem).
    sample_weight : array-like of shape (n_samples,), default=None
        Sample weights, passed to every metric.
    n_resamples : int, default=1000
        Bootstrap resamples of the fast metrics (accuracy, NLL, Brier, ECE).
    confidence_level : float, default=0.9
        Nominal coverage of the intervals, in (0, 1).
    method : {"percentile", "bca"}, default="percentile"
        How the intervals are read, see :func:`confidence_interval`.
    n_bins : int, default=15
        Equal-width bins of ECE and classwise ECE.
    slow_resamples : int or None, default=200
        At most this many resamples for the metrics that cost one full
        metric call per resample (classwise ECE, ECCE, smooth ECE), see
        Notes; None uses ``n_resamples`` for them too.
    labels : array-like of shape (n_classes,), default=None
        Label of each column of ``y_proba``.
    random_state : int, RandomState instance or None, default=None
        Seed of the resampling. An int is passed to every
        :func:`confidence_interval` call; otherwise one int seed is drawn
        from it first (stored as ``random_state`` in the report).

    Returns
    -------
    CalibrationReport
        Printable (an aligned table), indexable by metric name, with
        ``to_dict()`` and ``to_frame()``.

    See Also
    --------
    confidence_interval : The interval of one metric.
    cumulative_calibration_test : The ECCE p-value.

    Notes
    -----
    Each row equals the metric function called directly (accuracy is that of
    the most probable column, :func:`sklearn.metrics.accuracy_score`), and
    each interval equals :func:`confidence_interval` called with the same
    arguments and seed (and ``n_resamples=min(n_resamples,
    slow_resamples)`` for the slow metrics). The ECCE row is
    :func:`cumulative_calibration_error` (top-label ECCE-MAD, unnormalised),
    and its p-value that of :func:`cumulative_calibration_test` (asymptotic;
    it assumes many rows with spread-out confidences).

    Cost: NLL, Brier, ECE and accuracy are vectorised over resamples;
    classwise ECE, ECCE and smooth ECE call the metric once per resample
    (on 10,000 rows x 10 classes, on the order of 3 ms, 3 ms and 14 ms per
    resample on one CPU core), hence ``slow_resamples``. With the defaults
    a report on 10,000 x 10 took about 5 s on a busy 2-core machine (about
    20 s with ``slow_resamples=None``), most of it in smooth ECE.

    Examples
    --------
    >>> import numpy as np
    >>> from skcal.metrics import calibration_report
    >>> rng = np.random.default_rng(0)
    >>> proba = rng.dirichlet(np.ones(3), size=500)
    >>> y = (proba.cumsum(axis=1) < rng.uniform(size=(500, 1))).sum(axis=1)
    >>> report = calibration_report(y, proba, n_resamples=200, random_state=0)
    >>> report.metrics
    ('accuracy', 'NLL', 'Brier', 'ECE', 'cwECE', 'ECCE', 'smECE')
    >>> nll = report["NLL"]
    >>> bool(nll.low < nll.estimate < nll.high)
    True
    >>> print(str(report).splitlines()[0])
    Calibration report: 500 samples, 3 classes, percentile bootstrap intervals.
    """
    # validate once, with the metrics' own messages
    proba, y_index, _ = check_proba_targets(
        y_true, y_proba, labels=labels, sample_weight=sample_weight, copy=False
    )
    if isinstance(random_state, Integral):
        seed = int(random_state)
    else:
        seed = int(check_random_state(random_state).randint(np.iinfo(np.int32).max))
    common = {
        "sample_weight": sample_weight,
        "confidence_level": confidence_level,
        "method": method,
        "random_state": seed,
    }
    slow = n_resamples if slow_resamples is None else min(n_resamples, slow_resamples)
    calls = _report_calls(y_true, y_proba, proba, y_index, labels, n_bins)
    names = tuple(name for name, _ in REPORT_METRICS)
    intervals = []
    for name in names:
        func, y, p, params = calls[name]
        intervals.append(
            confidence_interval(
                func,
                y,
                p,
                n_resamples=slow if name in SLOW_METRICS else n_resamples,
                **common,
                **params,
            )
        )
    test = cumulative_calibration_test(
        y_true, y_proba, sample_weight=sample_weight, labels=labels
    )
    return CalibrationReport(
        metrics=names,
        intervals=tuple(intervals),
        ecce_pvalue=float(test.pvalue),
        n_samples=int(len(y_index)),
        n_classes=int(proba.shape[1]),
        confidence_level=float(confidence_level),
        method=method,
        n_bins=int(n_bins),
        random_state=seed,
    )


def _report_calls(y_true, y_proba, proba, y_index, labels, n_bins) -> dict:
    """``name -> (metric, y, proba, params)`` of each row of the report."""
    correct = (np.argmax(proba, axis=1) == y_index).astype(np.float64)
    kw = {"labels": labels}
    binned = {"n_bins": n_bins, **kw}
    return {
        "accuracy": (accuracy, y_index, correct, {}),
        "NLL": (negative_log_likelihood, y_true, y_proba, kw),
        "Brier": (brier_score, y_true, y_proba, kw),
        "ECE": (expected_calibration_error, y_true, y_proba, binned),
        "cwECE": (classwise_calibration_error, y_true, y_proba, binned),
        "ECCE": (cumulative_calibration_error, y_true, y_proba, kw),
        "smECE": (smooth_expected_calibration_error, y_true, y_proba, kw),
    }
