"""One table of metric names: function, report label, scorer and aliases.

Every entry point that takes a metric by name (``paired_comparison``,
``confidence_interval``, ``metric_state``, ``get_scorer``, the rows of
``calibration_report`` and ``skcal select --scoring``) resolves it here, so
``"ece"``, ``"ECE"``, ``"expected_calibration_error"`` and
``"neg_expected_calibration_error"`` name the same metric everywhere.
Lookup ignores case and the characters ``_``, ``-`` and spaces.

A scorer name names its metric: ``"neg_log_loss"`` resolves to
:func:`negative_log_likelihood` (the error, lower is better) where a metric
is expected, and a metric name resolves to its scorer (the negated error,
higher is better) where a scorer is expected.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass

__all__ = ["MetricName", "METRIC_NAMES", "find_metric", "metric_function"]


@dataclass(frozen=True)
class MetricName:
    """One row of the table.

    Attributes
    ----------
    function : str
        Name of the metric function (in ``skcal.metrics`` or, for
        ``spiegelhalter_abs_z``, its module): the canonical name.
    label : str
        Short label of tables and reports (``"ECE"``).
    scorer : str or None
        Name of its scorer for :func:`~skcal.metrics.get_scorer` (skcal's or
        scikit-learn's); None where the metric has none.
    aliases : tuple of str
        Further names.
    """

    function: str
    label: str
    scorer: str | None
    aliases: tuple = ()

    @property
    def names(self) -> tuple:
        """Every name of the entry, canonical first."""
        extra = (self.label, self.scorer, *self.aliases)
        return (self.function, *(name for name in extra if name))


def _neg(function: str) -> str:
    return f"neg_{function}"


#: The table. Scorers named ``neg_<function>`` are skcal's (``_scorer.py``),
#: and so are ``neg_log_loss`` and ``neg_brier_score`` (scikit-learn's
#: names, the values of skcal's functions).
METRIC_NAMES = (
    MetricName(
        "negative_log_likelihood",
        "NLL",
        "neg_log_loss",
        ("log_loss", "cross_entropy"),
    ),
    MetricName("brier_score", "Brier", "neg_brier_score"),
    MetricName(
        "expected_calibration_error",
        "ECE",
        _neg("expected_calibration_error"),
        ("top_label_ece",),
    ),
    MetricName(
        "classwise_calibration_error",
        "cwECE",
        _neg("classwise_calibration_error"),
        ("classwise_ece",),
    ),
    MetricName("max_calibration_error", "MCE", _neg("max_calibration_error")),
    MetricName(
        "cumulative_calibration_error",
        "ECCE",
        _neg("cumulative_calibration_error"),
        ("ecce_mad",),
    ),
    MetricName(
        "ecce_binned_mean", "ECCE-binned", _neg("ecce_binned_mean"), ("ecce_binned",)
    ),
    MetricName(
        "smooth_expected_calibration_error",
        "smECE",
        _neg("smooth_expected_calibration_error"),
        ("smooth_ece",),
    ),
    MetricName(
        "soft_expected_calibration_error",
        "softECE",
        _neg("soft_expected_calibration_error"),
    ),
    MetricName(
        "soft_binned_calibration_error",
        "SB-ECE",
        _neg("soft_binned_calibration_error"),
        ("soft_binned_ece",),
    ),
    MetricName("l2_calibration_error", "L2CE", _neg("l2_calibration_error")),
    MetricName(
        "maximum_mean_calibration_error",
        "MMCE",
        _neg("maximum_mean_calibration_error"),
    ),
    MetricName(
        "spiegelhalter_abs_z",
        "Spiegelhalter |Z|",
        _neg("spiegelhalter_abs_z"),
        ("spiegelhalter", "spiegelhalter_z"),
    ),
    MetricName("spiegelhalter_test", "Spiegelhalter test", None),
    MetricName("local_calibration_error", "LCE", _neg("local_calibration_error")),
    MetricName(
        "max_local_calibration_error", "MLCE", _neg("max_local_calibration_error")
    ),
    # selective prediction (skcal.metrics._selective)
    MetricName("aurc", "AURC", _neg("aurc"), ("area_under_risk_coverage",)),
    MetricName("eaurc", "E-AURC", _neg("eaurc"), ("excess_aurc",)),
    MetricName(
        "augrc", "AUGRC", _neg("augrc"), ("area_under_generalized_risk_coverage",)
    ),
)


def _key(name: str) -> str:
    """``name`` as the table compares it: lower case, letters and digits."""
    return re.sub(r"[^0-9a-z]", "", name.lower())


def _index() -> dict:
    index = {}
    for entry in METRIC_NAMES:
        for name in entry.names:
            if index.setdefault(_key(name), entry) is not entry:  # pragma: no cover
                raise RuntimeError(f"metric name {name!r} names two metrics")
    return index


_INDEX = _index()


def find_metric(name: str) -> MetricName | None:
    """The entry ``name`` names (any case, ``_``/``-``/space ignored), or None.

    Examples
    --------
    >>> from skcal.metrics._names import find_metric
    >>> find_metric("ECE").function
    'expected_calibration_error'
    >>> find_metric("neg_log_loss").label
    'NLL'
    >>> find_metric("no such metric") is None
    True
    """
    return _INDEX.get(_key(name)) if isinstance(name, str) else None


def names_listing() -> str:
    """Every metric with its label and short aliases, for error messages."""
    rows = []
    for entry in METRIC_NAMES:
        short = [entry.label, *(a for a in entry.aliases if len(a) <= 12)]
        rows.append(f"{entry.function} ({', '.join(short)})")
    return "; ".join(rows)


def did_you_mean(name: str, choices=()) -> str:
    """`` Did you mean 'x'?`` with the closest metric name, or ``""``."""
    names = {_key(n): n for e in METRIC_NAMES for n in e.names}
    names.update({_key(c): c for c in choices})
    close = difflib.get_close_matches(_key(name), list(names), n=1)
    return f" Did you mean {names[close[0]]!r}?" if close else ""


def metric_function(entry: MetricName):
    """The function of ``entry`` (imported here, lazily: the metric modules
    import this one)."""
    from .. import metrics
    from . import _spiegelhalter

    return getattr(metrics, entry.function, None) or getattr(
        _spiegelhalter, entry.function
    )
