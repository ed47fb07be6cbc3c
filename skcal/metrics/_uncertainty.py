"""Bootstrap confidence intervals of metrics, and paired comparisons.

A bootstrap resample of ``n`` rows is a vector of multinomial counts ``c``
(how often each row was drawn). For skcal's metrics whose ``sample_weight``
acts as a frequency weight, the metric with ``sample_weight = c * w`` equals
the metric on the repeated rows, so a resample costs one weighted call and
no copy of ``y_proba``. Three routes evaluate a resample:

* per-row losses (NLL, Brier): the losses are computed once and each
  resample is a weighted mean, a product of the counts matrix with the
  losses;
* top-label binned errors (ECE, MCE on equal-width bins): the bin of each
  row is found once and each resample's per-bin sums are a product of the
  counts matrix with a sparse bin-membership matrix;
* other frequency-weighted metrics: one call per resample with the counts
  as weights; and anything else (other callables, equal-mass bins, the
  normalised cumulative error, the local metrics): one call per resample on
  the resampled rows.

Resamples are processed in chunks of bounded memory (about 2 million
entries of the counts matrix at a time).
"""

from __future__ import annotations

import inspect
import warnings
from contextlib import contextmanager
from dataclasses import dataclass, field
from numbers import Integral, Real

import numpy as np
from scipy import sparse
from scipy.special import ndtr, ndtri
from sklearn import config_context
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_consistent_length

from ..utils._sklearn import Interval, StrOptions, _BaseScorer, validate_params
from ..utils._validation import (
    check_proba_targets,
    check_sample_weight,
    proba_in_class_order,
)
from ..utils._warnings import warn
from ._binning import assign_bins, bin_means, binned_errors, uniform_edges
from ._cumulative import cumulative_calibration_error, ecce_binned_mean
from ._ece import (
    classwise_calibration_error,
    expected_calibration_error,
    max_calibration_error,
)
from ._groups import groupable
from ._local import local_calibration_error, max_local_calibration_error
from ._names import did_you_mean, find_metric, metric_function, names_listing
from ._proper import brier_score, negative_log_likelihood
from ._smooth import smooth_expected_calibration_error
from ._soft import soft_binned_calibration_error, soft_expected_calibration_error

__all__ = [
    "ConfidenceInterval",
    "PairedComparison",
    "confidence_interval",
    "paired_comparison",
]

#: The metric functions of skcal.metrics that ``metric`` may name.
METRICS = {
    f.__name__: f
    for f in (
        brier_score,
        classwise_calibration_error,
        cumulative_calibration_error,
        ecce_binned_mean,
        expected_calibration_error,
        local_calibration_error,
        max_calibration_error,
        max_local_calibration_error,
        negative_log_likelihood,
        smooth_expected_calibration_error,
        soft_binned_calibration_error,
        soft_expected_calibration_error,
    )
}

#: Entries of the counts (or index) matrix held at once.
_CHUNK_ENTRIES = 1 << 21
#: The jackknife of ``method="bca"`` leaves out one row at a time up to this
#: many rows, and random groups of rows (this many groups) above.
JACKKNIFE_MAX_GROUPS = 1000
#: Per-row arguments of skcal's metrics, resampled with the rows.
_PER_ROW = {
    local_calibration_error: ("features",),
    max_local_calibration_error: ("features",),
}


def _fmt(x) -> str:
    return f"{x:.4g}"


@dataclass(frozen=True, eq=False)
class ConfidenceInterval:
    """Bootstrap confidence interval of a metric, from :func:`confidence_interval`.

    Attributes
    ----------
    metric : str
        Name of the metric.
    estimate : float
        The metric on all rows.
    low, high : float
        Bounds of the interval.
    confidence_level : float
        Nominal coverage of the interval.
    method : {"percentile", "bca"}
        How the bounds were read from the bootstrap distribution.
    n_resamples : int
        Number of bootstrap resamples.
    resamples : ndarray of shape (n_resamples,)
        The metric on each resample (read-only): the bootstrap distribution.
    """

    metric: str
    estimate: float
    low: float
    high: float
    confidence_level: float
    method: str
    n_resamples: int
    resamples: np.ndarray = field(repr=False)  # the repr leaves it out

    @property
    def standard_error(self) -> float:
        """Bootstrap standard error: the standard deviation of ``resamples``."""
        return _standard_error(self.resamples)

    @property
    def covers_estimate(self) -> bool:
        """Whether ``low <= estimate <= high``. A percentile interval of a
        calibration error can lie above its estimate (the error grows on
        resampled rows); ``method="bca"`` corrects for that bias."""
        return bool(self.low <= self.estimate <= self.high)

    def __str__(self) -> str:
        return (
            f"{self.metric} = {_fmt(self.estimate)}, "
            f"{100 * self.confidence_level:g}% CI [{_fmt(self.low)}, "
            f"{_fmt(self.high)}] ({self.method}, {self.n_resamples} resamples)"
        )


@dataclass(frozen=True, eq=False)
class PairedComparison:
    """Paired bootstrap comparison of two predictions, from :func:`paired_comparison`.

    Attributes
    ----------
    metric : str
        Name of the metric.
    difference : float
        ``estimate_a - estimate_b``.
    low, high : float
        Bounds of the interval of the difference.
    p_value : float
        Two-sided bootstrap p-value of "no difference", see
        :func:`paired_comparison`.
    estimate_a, estimate_b : float
        The metric of ``y_proba_a`` and of ``y_proba_b`` on all rows.
    confidence_level : float
        Nominal coverage of the interval.
    method : {"percentile", "bca"}
        How the bounds were read from the bootstrap distribution.
    n_resamples : int
        Number of bootstrap resamples.
    resamples : ndarray of shape (n_resamples,)
        The difference on each resample (read-only).
    """

    metric: str
    difference: float
    low: float
    high: float
    p_value: float
    estimate_a: float
    estimate_b: float
    confidence_level: float
    method: str
    n_resamples: int
    resamples: np.ndarray = field(repr=False)  # the repr leaves it out

    @property
    def standard_error(self) -> float:
        """Bootstrap standard error of the difference."""
        return _standard_error(self.resamples)

    def __str__(self) -> str:
        return (
            f"{self.metric}: A - B = {_fmt(self.difference)}, "
            f"{100 * self.confidence_level:g}% CI [{_fmt(self.low)}, "
            f"{_fmt(self.high)}], p = {self.p_value:.3g} "
            f"(A = {_fmt(self.estimate_a)}, B = {_fmt(self.estimate_b)}; "
            f"{self.method}, {self.n_resamples} resamples)"
        )


def _standard_error(values: np.ndarray) -> float:
    finite = values[np.isfinite(values)]
    return float(np.std(finite, ddof=1)) if finite.size > 1 else 0.0


# ---------------------------------------------------------------------------
# the metric


def _metric_names_hint() -> str:
    return names_listing()


def _resolve_metric(metric):
    """(function, name, is_skcal) of ``metric``, or a clear error."""
    from . import __all__ as public  # the package's names, imported lazily

    if isinstance(metric, str):
        entry = find_metric(metric)  # any name of the shared table
        if entry is not None and entry.scorer is not None:
            return metric_function(entry), entry.function, entry.function in METRICS
        if metric in public or entry is not None:
            raise ValueError(
                f"metric={metric!r} is a name in skcal.metrics but not a metric "
                "function mapping (y_true, y_proba) to a float. Metric names: "
                f"{_metric_names_hint()}."
            )
        raise ValueError(
            f"Unknown metric {metric!r}.{did_you_mean(metric)} Pass a metric name "
            f"or alias, in any case ({names_listing()}), or a callable "
            "f(y_true, y_proba, **params) returning a float. A scorer name "
            "(neg_log_loss) names its metric: the error, lower is better."
        )
    if isinstance(metric, _BaseScorer):
        raise TypeError(
            "metric is a scorer, which takes (estimator, X, y); pass the metric "
            "function itself, e.g. skcal.metrics.expected_calibration_error, or "
            "its name."
        )
    if not callable(metric):
        raise TypeError(
            "metric must be the name of a skcal metric or a callable "
            f"f(y_true, y_proba, **params) returning a float; got {metric!r} "
            f"({type(metric).__name__})."
        )
    for f in METRICS.values():
        if metric is f:
            return f, f.__name__, True
    name = getattr(metric, "__name__", None)
    if name is None and hasattr(metric, "func"):  # functools.partial
        name = getattr(metric.func, "__name__", None)
    name = name or type(metric).__name__
    module = getattr(metric, "__module__", "") or ""
    if module.startswith("skcal.metrics") and name in public:
        raise ValueError(
            f"skcal.metrics.{name} is not a metric function mapping (y_true, "
            f"y_proba) to a float. Metric functions: {_metric_names_hint()}."
        )
    return metric, name, False


def _signature(func):
    try:
        return inspect.signature(func)
    except (TypeError, ValueError):  # some builtins and C callables
        return None


def _check_metric_params(func, name, params, sample_weight) -> None:
    """Refuse keyword arguments ``func`` does not take, before any call."""
    sig = _signature(func)
    if sig is None or any(p.kind is p.VAR_KEYWORD for p in sig.parameters.values()):
        return
    accepted = [
        p.name
        for p in sig.parameters.values()
        if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)
    ][2:]
    unknown = sorted(set(params) - set(accepted))
    if unknown:
        raise TypeError(
            f"{name} does not take the parameter(s) {unknown}; its parameters "
            f"are {accepted}."
        )
    if sample_weight is not None and "sample_weight" not in accepted:
        raise TypeError(
            f"sample_weight was given but {name} takes no sample_weight; drop "
            "it, or pass a metric that accepts sample_weight."
        )


def _as_float(value, name: str) -> float:
    """The metric's value as a float, or a clear error."""
    if isinstance(value, (Real, np.number)) or (
        isinstance(value, np.ndarray) and value.ndim == 0
    ):
        return float(value)
    raise TypeError(
        f"metric {name} must return a single number; it returned {value!r} "
        f"({type(value).__name__}). Wrap it to return one float."
    )


# ---------------------------------------------------------------------------
# evaluators: the metric on resamples (index or multiplicity matrices)


def _counts(idx: np.ndarray, n: int) -> np.ndarray:
    """Multiplicity of every row in each row of ``idx``: shape (r, n)."""
    r = idx.shape[0]
    keys = idx + (np.arange(r, dtype=np.intp) * n)[:, None]
    return np.bincount(keys.ravel(), minlength=r * n).reshape(r, n).astype(float)


def _mask_rows(groups, n: int) -> np.ndarray:
    """Multiplicities 1, and 0 for the rows of one group per row of the result."""
    m = np.ones((len(groups), n))
    for j, group in enumerate(groups):
        m[j, group] = 0.0
    return m


class _Rows:
    """The metric on the resampled rows themselves (any callable)."""

    closed_form_jackknife = False

    def __init__(self, func, name, y, proba, weight, params, per_row=None):
        self.func, self.name, self.y, self.proba = func, name, y, proba
        self.weight, self.params, self.per_row = weight, params, per_row or {}

    def _on(self, rows) -> float:
        kwargs = dict(self.params)
        if self.weight is not None:
            kwargs["sample_weight"] = self.weight[rows]
        for key, values in self.per_row.items():
            kwargs[key] = values[rows]
        value = self.func(self.y[rows], self.proba[rows], **kwargs)
        return _as_float(value, self.name)

    def resampled(self, idx: np.ndarray) -> np.ndarray:
        return np.array([self._on(rows) for rows in idx], dtype=float)

    def deleted(self, groups, pool: np.ndarray, n: int) -> np.ndarray:
        values = np.empty(len(groups))
        keep = np.ones(n, dtype=bool)
        for j, group in enumerate(groups):
            keep[group] = False
            values[j] = self._on(pool[keep[pool]])
            keep[group] = True
        return values


class _Weighted:
    """The metric with the multiplicities (times the user's weights) as weights."""

    closed_form_jackknife = False

    def __init__(self, func, y_index, proba, weight, params):
        self.func, self.y_index, self.proba = func, y_index, proba
        self.weight, self.params = weight, params
        self.n = len(y_index)

    def _weights(self, m: np.ndarray) -> np.ndarray:
        return m if self.weight is None else m * self.weight

    def weighted(self, m: np.ndarray) -> np.ndarray:
        return np.array(
            [
                self.func(self.y_index, self.proba, sample_weight=w, **self.params)
                for w in self._weights(m)
            ],
            dtype=float,
        )

    def resampled(self, idx: np.ndarray) -> np.ndarray:
        return self.weighted(_counts(idx, self.n))

    def deleted(self, groups, pool: np.ndarray, n: int) -> np.ndarray:
        step = max(1, _CHUNK_ENTRIES // n)
        return np.concatenate(
            [
                self.weighted(_mask_rows(groups[i : i + step], n))
                for i in range(0, len(groups), step)
            ]
        )


class _RowLoss(_Weighted):
    """Weighted mean of per-row losses (NLL, Brier): a matrix product."""

    closed_form_jackknife = True

    def __init__(self, loss, weight):
        self.loss, self.weight, self.n = loss, weight, len(loss)
        self.w = np.ones_like(loss) if weight is None else weight
        self.wl = self.w * loss

    def weighted(self, m: np.ndarray) -> np.ndarray:
        return (m @ self.wl) / (m @ self.w)

    def deleted(self, groups, pool: np.ndarray, n: int) -> np.ndarray:
        if all(len(g) == 1 for g in groups):  # leave-one-out in closed form
            rows = np.concatenate(groups)
            total, mass = self.wl[pool].sum(), self.w[pool].sum()
            return (total - self.wl[rows]) / (mass - self.w[rows])
        return super().deleted(groups, pool, n)


class _TopLabelBinned(_Weighted):
    """Top-label ECE / MCE on equal-width bins from per-bin weighted sums."""

    def __init__(self, conf, correct, weight, *, n_bins, closed, norm):
        self.weight, self.n_bins, self.norm = weight, n_bins, norm
        self.n = n = len(conf)
        bins = assign_bins(conf, uniform_edges(n_bins), closed)
        rows = np.tile(np.arange(n), 3)
        cols = np.concatenate([bins, bins + n_bins, bins + 2 * n_bins])
        data = np.concatenate([np.ones(n), conf, correct])
        # (3 n_bins, n): weight, score and target sums of each bin
        self.sums = sparse.csr_array((data, (cols, rows)), shape=(3 * n_bins, n))

    def weighted(self, m: np.ndarray) -> np.ndarray:
        sums = (self.sums @ self._weights(m).T).T
        weight, score, target = np.split(sums, 3, axis=1)
        return binned_errors(
            weight, bin_means(weight, score), bin_means(weight, target), self.norm
        )


def _defaults(func) -> dict:
    sig = _signature(func)
    if sig is None:
        return {}
    return {
        p.name: p.default
        for p in sig.parameters.values()
        if p.default is not inspect.Parameter.empty
    }


def _evaluator(func, name, is_skcal, y_true, y_proba, sample_weight, params):
    """The fastest exact evaluator of ``func`` on resamples, and the pool data.

    Returns the evaluator, the class of each row (for stratification) and the
    weights (None without ``sample_weight``).
    """
    if not is_skcal:
        return _foreign_evaluator(func, name, y_true, y_proba, sample_weight, params)
    opts = {**_defaults(func), **params}
    labels = params.get("labels")
    call = {k: v for k, v in params.items() if k != "labels"}
    proba, y_index, w = check_proba_targets(
        y_true, y_proba, labels=labels, sample_weight=sample_weight, copy=False
    )
    weight = None if sample_weight is None else w
    if func in (negative_log_likelihood, brier_score):
        proba, _, _ = check_proba_targets(y_true, y_proba, labels=labels)
        return _row_losses(func, proba, y_index, opts, weight), y_index, weight
    checked = proba_in_class_order(y_true, y_proba, labels)
    uniform = opts.get("strategy", "uniform") == "uniform"
    if func in (expected_calibration_error, max_calibration_error) and uniform:
        _, _, _, pred, conf = check_proba_targets(
            y_true, checked, labels=labels, copy=False, top_label=True
        )
        evaluator = _TopLabelBinned(
            np.asarray(conf, dtype=np.float64),
            (pred == y_index).astype(np.float64),
            weight,
            n_bins=opts["n_bins"],
            closed=opts["closed"],
            norm="max" if func is max_calibration_error else opts["norm"],
        )
        return evaluator, y_index, weight
    if _frequency_weighted(func, opts, uniform):
        return _Weighted(func, y_index, checked, weight, call), y_index, weight
    per_row = {
        key: np.asarray(call.pop(key)) for key in _PER_ROW.get(func, ()) if key in call
    }
    evaluator = _Rows(func, name, y_index, checked, weight, call, per_row)
    return evaluator, y_index, weight


def _foreign_evaluator(func, name, y_true, y_proba, sample_weight, params):
    """:func:`_evaluator` of a metric that is not skcal's: rows resampled."""
    y = np.asarray(y_true)
    if y.ndim == 2 and y.shape[1] == 1:
        y = y.ravel()
    proba = np.asarray(y_proba)
    weight = None
    if sample_weight is not None:
        weight = check_sample_weight(sample_weight, len(y))
    check_consistent_length(y, proba)
    if y.ndim != 1:
        raise ValueError(f"y_true must be 1-D; got shape {y.shape}.")
    _, classes = np.unique(y, return_inverse=True)
    evaluator = _Rows(func, name, y, proba, weight, params)
    return evaluator, classes.ravel(), weight


def _row_losses(func, proba, y_index, opts, weight):
    """NLL or Brier as a mean of per-row losses."""
    p_true = proba[np.arange(len(y_index)), y_index]
    if func is negative_log_likelihood:
        loss = -np.log(np.maximum(p_true, opts["eps"]))
    else:
        onehot = np.zeros_like(proba)
        onehot[np.arange(len(y_index)), y_index] = 1.0
        loss = ((proba - onehot) ** 2).sum(axis=1)
    return _RowLoss(loss, weight)


def _frequency_weighted(func, opts, uniform) -> bool:
    """Whether ``func`` is a weighted mean over rows given their weights
    (a resample is then a reweighting of the pool)."""
    return (
        func
        in (
            ecce_binned_mean,
            smooth_expected_calibration_error,
            soft_expected_calibration_error,
            soft_binned_calibration_error,
        )
        or (func is classwise_calibration_error and uniform)
        or (func is cumulative_calibration_error and not opts.get("normalize"))
    )


# ---------------------------------------------------------------------------
# resampling and intervals


def _draw_indices(rng, strata, n_resamples: int, chunk: int):
    """Bootstrap resamples of the rows, in chunks of shape (r, n_rows).

    Each stratum (an array of row indices) is resampled with replacement to
    its own size; the strata of one resample are concatenated.
    """
    for start in range(0, n_resamples, chunk):
        r = min(chunk, n_resamples - start)
        yield np.concatenate(
            [rows[rng.randint(0, len(rows), size=(r, len(rows)))] for rows in strata],
            axis=1,
        )


@contextmanager
def _gathered_warnings():
    """Show each distinct warning of the repeated metric calls once, counted."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield
    seen: dict = {}
    for w in caught:
        key = (w.category, str(w.message))
        seen[key] = seen.get(key, 0) + 1
    for (category, message), count in seen.items():
        warn(f"{message} (raised {count} times while resampling)", category)


@contextmanager
def _noted(name: str, where: str):
    """Say on which rows the metric failed (Python >= 3.11 shows notes)."""
    try:
        yield
    except Exception as exc:
        if hasattr(exc, "add_note"):
            exc.add_note(
                f"Raised by {name} on {where}. A resample may miss classes or "
                "repeat rows: pass labels=[...] to the metric if it needs "
                "every class, or stratify=True to keep the class counts."
            )
        raise


def _bca_levels(theta_hat, boot, jack, alpha):
    """Levels (alpha_1, alpha_2) of Efron's BCa interval, always finite."""
    b = boot.size
    # ties count half, as in scipy.stats.bootstrap; values within a few
    # units of rounding of the estimate are ties (a metric constant but for
    # the order of its sums must not look biased)
    tie = 8 * np.finfo(np.float64).eps * abs(theta_hat)
    share = (
        np.count_nonzero(boot < theta_hat - tie)
        + np.count_nonzero(boot <= theta_hat + tie)
    ) / (2 * b)
    if share <= 0 or share >= 1:
        warn(
            "method='bca': the estimate lies outside the range of the bootstrap "
            "distribution, so the bias correction is infinite; the share of "
            "resamples below the estimate was clipped to [1 / (2 B), 1 - 1 / (2 "
            f"B)] with B = {b}, and the bounds are extreme order statistics of "
            "the resamples. Use method='percentile' or more resamples.",
            UserWarning,
        )
        share = min(max(share, 1 / (2 * b)), 1 - 1 / (2 * b))
    z0 = float(ndtri(share))
    jack = jack[np.isfinite(jack)]
    u = jack.mean() - jack if jack.size else np.zeros(0)
    spread = float(np.sum(u**2))
    accel = float(np.sum(u**3) / (6 * spread**1.5)) if spread > 0 else 0.0
    levels = []
    for z in (ndtri(alpha), ndtri(1 - alpha)):
        num = z0 + z
        den = 1 - accel * num
        if den <= 0:  # the limit of the BCa map as den -> 0+
            warn(
                f"method='bca': the acceleration {accel:.3g} is too large for "
                "this confidence level; a bound was set to an extreme order "
                "statistic of the resamples. Use method='percentile'.",
                UserWarning,
            )
            levels.append(1.0 if num > 0 else 0.0)
        else:
            levels.append(float(ndtr(z0 + num / den)))
    return levels


def _interval(theta_hat, boot, alpha, method, jackknife):
    """(low, high) from the finite resamples; ``jackknife()`` for BCa."""
    finite = boot[np.isfinite(boot)]
    if finite.size < boot.size:
        warn(
            f"The metric was not finite on {boot.size - finite.size} of "
            f"{boot.size} resamples (stored as such in resamples); the interval "
            "is computed from the others.",
            UserWarning,
        )
    if finite.size < 2:
        raise ValueError(
            "The metric was not finite on the resamples (fewer than 2 finite "
            "values); no interval can be computed."
        )
    if method == "bca":
        levels = _bca_levels(theta_hat, finite, jackknife(), alpha)
    else:
        levels = [alpha, 1 - alpha]
    low, high = np.quantile(finite, levels)
    return float(low), float(high)


def _bootstrap(
    caller,
    metric,
    y_true,
    probas,
    sample_weight,
    n_resamples,
    confidence_level,
    method,
    stratify,
    random_state,
    params,
):
    """Estimates, bootstrap values and jackknife of each of ``probas``."""
    func, name, is_skcal = _resolve_metric(metric)
    _check_metric_params(func, name, params, sample_weight)
    estimates = _estimates(func, name, y_true, probas, sample_weight, params)
    built = [
        _evaluator(func, name, is_skcal, y_true, proba, sample_weight, params)
        for proba in probas
    ]
    evaluators = [b[0] for b in built]
    classes, weight = built[0][1], built[0][2]
    n = len(classes)
    pool, strata = _strata(caller, classes, weight, stratify)
    rng = check_random_state(random_state)
    values = _resampled(evaluators, name, rng, strata, n_resamples, n)

    def jackknife():
        """Leave-one-out (or delete-a-group) values of each evaluator."""
        if pool.size <= JACKKNIFE_MAX_GROUPS or all(
            e.closed_form_jackknife for e in evaluators
        ):
            groups = list(pool[:, None])
        else:
            groups = np.array_split(rng.permutation(pool), JACKKNIFE_MAX_GROUPS)
        with (
            config_context(skip_parameter_validation=True),
            _gathered_warnings(),
            _noted(name, "the rows left by the jackknife of method='bca'"),
        ):
            return [e.deleted(groups, pool, n) for e in evaluators]

    return name, estimates, values, jackknife


def _estimates(func, name, y_true, probas, sample_weight, params) -> list[float]:
    """The metric on the rows themselves, finite, validated by the metric
    (once, with its own messages)."""
    weight_arg = {} if sample_weight is None else {"sample_weight": sample_weight}
    estimates = [
        _as_float(func(y_true, proba, **weight_arg, **params), name) for proba in probas
    ]
    for estimate in estimates:
        if not np.isfinite(estimate):
            raise ValueError(
                f"metric {name} is {estimate} on the given rows; a bootstrap "
                "interval needs a finite value."
            )
    return estimates


def _strata(caller, classes, weight, stratify):
    """The rows of positive weight, and the groups they are drawn within."""
    pool = np.arange(len(classes)) if weight is None else np.flatnonzero(weight > 0)
    if pool.size < 2:
        raise ValueError(
            f"{caller} resamples rows and needs at least 2 rows of positive "
            f"weight; got {pool.size}."
        )
    if stratify:
        return pool, [pool[classes[pool] == k] for k in np.unique(classes[pool])]
    return pool, [pool]


def _resampled(evaluators, name, rng, strata, n_resamples, n) -> list:
    """Each evaluator's values on ``n_resamples`` bootstrap resamples."""
    chunk = max(1, min(n_resamples, _CHUNK_ENTRIES // max(n, 1)))
    values = [np.empty(n_resamples) for _ in evaluators]
    start = 0
    with (
        config_context(skip_parameter_validation=True),
        _gathered_warnings(),
        _noted(name, "a bootstrap resample (rows drawn with replacement)"),
    ):
        for idx in _draw_indices(rng, strata, n_resamples, chunk):
            for out, evaluator in zip(values, evaluators):
                out[start : start + len(idx)] = evaluator.resampled(idx)
            start += len(idx)
    return values


_COMMON_PARAMS = {
    "metric": [str, callable],
    "y_true": ["array-like"],
    "sample_weight": ["array-like", None],
    "n_resamples": [Interval(Integral, 2, None, closed="left")],
    "confidence_level": [Interval(Real, 0, 1, closed="neither")],
    "method": [StrOptions({"percentile", "bca"})],
    "stratify": ["boolean"],
    "random_state": ["random_state"],
}


# merged here, not in the decorators: Sphinx's source parser cannot unparse
# a decorator holding ``{**a, ...}``, and then documents no attribute
_INTERVAL_PARAMS = {**_COMMON_PARAMS, "y_proba": ["array-like"]}
_PAIRED_PARAMS = {
    **_COMMON_PARAMS,
    "y_proba_a": ["array-like"],
    "y_proba_b": ["array-like"],
}


def _frozen(values: np.ndarray) -> np.ndarray:
    values.setflags(write=False)
    return values


#: The bootstrap's own arguments: not the metric's.
_BOOTSTRAP_ARGS = (
    "n_resamples",
    "confidence_level",
    "method",
    "stratify",
    "random_state",
)


def _metric_only(metric, params) -> tuple:
    """The metric function and its keyword arguments, without the bootstrap's."""
    func = _resolve_metric(metric)[0]
    params = {k: v for k, v in params.items() if k not in _BOOTSTRAP_ARGS}
    if params.get("sample_weight") is None:
        params.pop("sample_weight", None)
    return func, params


def _interval_estimate(bound):
    """The metric alone, for the permutation test of grouped intervals."""

    def estimate(metric, y_true, y_proba, **params):
        func, params = _metric_only(metric, params)
        return func(y_true, y_proba, **params)

    return estimate


def _difference_estimate(bound):
    """The difference alone, for the permutation test of grouped comparisons."""

    def estimate(metric, y_true, y_proba_a, y_proba_b, **params):
        func, params = _metric_only(metric, params)
        return func(y_true, y_proba_a, **params) - func(y_true, y_proba_b, **params)

    return estimate


@groupable(value=lambda r: r.estimate, score=_interval_estimate)
@validate_params(_INTERVAL_PARAMS, prefer_skip_nested_validation=False)
def confidence_interval(
    metric,
    y_true,
    y_proba,
    *,
    sample_weight=None,
    n_resamples=1000,
    confidence_level=0.9,
    method="percentile",
    stratify=False,
    random_state=None,
    **metric_params,
):
    """Bootstrap confidence interval of a metric.

    Resamples the rows with replacement ``n_resamples`` times, computes the
    metric on each resample and reads the interval from this bootstrap
    distribution: its ``(1 - confidence_level) / 2`` and ``(1 +
    confidence_level) / 2`` quantiles (``method="percentile"``), or Efron's
    bias-corrected and accelerated quantiles (``method="bca"``).

    Parameters
    ----------
    metric : str or callable
        A skcal metric function (e.g.
        :func:`~skcal.metrics.expected_calibration_error`), its name or an
        alias in any case (``"expected_calibration_error"``, ``"ECE"``,
        ``"ece"``, ``"nll"``; a scorer name such as ``"neg_log_loss"`` names
        its metric, the error, lower is better), or any callable
        ``f(y_true, y_proba, **metric_params) -> float``. The interval's
        ``metric`` is the function's name.
    y_true : array-like of shape (n_samples,)
        True labels.
    y_proba : array-like of shape (n_samples, n_classes) or (n_samples,)
        Predicted probabilities, as the metric takes them.
    sample_weight : array-like of shape (n_samples,), default=None
        Sample weights, passed to the metric (resampled with the rows). Rows
        of zero weight are left out of the resampling: they carry no
        information.
    n_resamples : int, default=1000
        Number of bootstrap resamples (at least 2).
    confidence_level : float, default=0.9
        Nominal coverage of the interval, in (0, 1).
    method : {"percentile", "bca"}, default="percentile"
        ``"percentile"``: quantiles of the bootstrap distribution. ``"bca"``:
        bias-corrected and accelerated quantiles (Efron, 1987), with the
        bias correction from the share of resamples below the estimate (ties
        counted half) and the acceleration from a jackknife: leave-one-out
        up to ``JACKKNIFE_MAX_GROUPS = 1000`` rows of positive weight (and
        for NLL and Brier at any size, in closed form), above it
        delete-a-group with 1000 random groups of near-equal size (the same
        acceleration estimate to first order, for at most 1000 metric
        calls). BCa corrects the bias of metrics that are biased on
        resamples (binned calibration errors such as ECE grow on resampled
        data); the two methods differ little for smooth metrics such as
        NLL.
    stratify : bool, default=False
        Resample within each class (of ``y_true``), so that every resample
        keeps the class counts.
    random_state : int, RandomState instance or None, default=None
        Seed of the resampling; the same seed gives the same resamples (also
        in :func:`paired_comparison`) and the same interval.
    **metric_params
        Keyword arguments of the metric (e.g. ``n_bins=10``). Per-row
        arguments of skcal's local metrics (``features``) are resampled with
        the rows.

    Returns
    -------
    ConfidenceInterval
        With ``estimate`` (the metric on all rows), ``low``, ``high``,
        ``confidence_level``, ``method``, ``n_resamples``, ``resamples``
        (the bootstrap distribution) and ``standard_error``.

    See Also
    --------
    paired_comparison : Interval and p-value of the difference of a metric
        between two predictions on the same rows.
    scipy.stats.bootstrap : The same intervals for statistics of arrays.

    Notes
    -----
    Every resample has the size of the data (of each class with
    ``stratify``). For skcal's metrics whose sample weights act as
    frequencies (NLL, Brier, ECE, MCE and classwise ECE on equal-width bins,
    ECCE, the unnormalised cumulative error, smooth and soft ECEs), a
    resample is evaluated as the metric with the resample's counts as
    weights, which equals the metric on the repeated rows; NLL, Brier and
    top-label binned errors are moreover evaluated for a chunk of resamples
    at once. Other metrics and callables are called on the resampled rows
    (``np.asarray`` of the inputs, indexed). Warnings of the metric on the
    resamples are shown once each, with their count.

    Degenerate cases: if every resample gives the same value, the interval
    is that value (values within a few units of rounding of the estimate
    count as ties with it). With ``method="bca"``, when the estimate lies
    outside the range of the resamples (the bias correction is infinite;
    this happens with few resamples of a biased metric such as ECE on small
    data), the share of resamples below the estimate is clipped to
    ``[1 / (2 B), 1 - 1 / (2 B)]`` (``B = n_resamples``), and when the
    acceleration is too large for the level a bound is the extreme
    resample; both warn, and the bounds are then extreme order statistics
    of the resamples, always finite. A jackknife without spread gives no
    acceleration (0). If the metric is not finite on some resamples, the
    interval uses the others, with a warning; fewer than 2 finite values
    are an error.

    References
    ----------
    B. Efron. "Better bootstrap confidence intervals". Journal of the
    American Statistical Association 82(397), 1987.

    Examples
    --------
    >>> import numpy as np
    >>> from skcal.metrics import confidence_interval
    >>> rng = np.random.default_rng(0)
    >>> proba = rng.dirichlet(np.ones(3), size=500)
    >>> y = (proba.cumsum(axis=1) < rng.uniform(size=(500, 1))).sum(axis=1)
    >>> ci = confidence_interval("negative_log_likelihood", y, proba, random_state=0)
    >>> bool(ci.low < ci.estimate < ci.high)
    True
    >>> ci.resamples.shape
    (1000,)
    >>> ece = confidence_interval(
    ...     "expected_calibration_error", y, proba, n_bins=10, method="bca",
    ...     random_state=0)
    >>> print(ece)
    expected_calibration_error = 0.05077, 90% CI [0.0245, 0.06765] (bca, 1000 resamples)
    """
    name, estimates, values, jackknife = _bootstrap(
        "confidence_interval",
        metric,
        y_true,
        [y_proba],
        sample_weight,
        n_resamples,
        confidence_level,
        method,
        stratify,
        random_state,
        metric_params,
    )
    alpha = (1 - confidence_level) / 2
    low, high = _interval(
        estimates[0], values[0], alpha, method, lambda: jackknife()[0]
    )
    return ConfidenceInterval(
        metric=name,
        estimate=estimates[0],
        low=low,
        high=high,
        confidence_level=float(confidence_level),
        method=method,
        n_resamples=int(n_resamples),
        resamples=_frozen(values[0]),
    )


@groupable(
    rows=("y_true", "y_proba_a", "y_proba_b", "sample_weight"),
    value=lambda r: r.difference,
    score=_difference_estimate,
)
@validate_params(_PAIRED_PARAMS, prefer_skip_nested_validation=False)
def paired_comparison(
    metric,
    y_true,
    y_proba_a,
    y_proba_b,
    *,
    sample_weight=None,
    n_resamples=1000,
    confidence_level=0.9,
    method="percentile",
    stratify=False,
    random_state=None,
    **metric_params,
):
    """Paired bootstrap comparison of a metric between two predictions.

    The difference ``metric(y_true, y_proba_a) - metric(y_true, y_proba_b)``
    on the same rows, with its bootstrap interval and a p-value of "no
    difference". Both predictions are evaluated on the *same* resampled
    rows, so what the rows share (their difficulty) cancels: the interval
    of the difference is usually much narrower than the two marginal
    intervals suggest.

    Parameters
    ----------
    metric : str or callable
        As in :func:`confidence_interval`.
    y_true : array-like of shape (n_samples,)
        True labels.
    y_proba_a, y_proba_b : array-like of shape (n_samples, n_classes) or \
(n_samples,)
        The two predictions of the same rows (e.g. two calibrators'
        outputs), of the same shape.
    sample_weight : array-like of shape (n_samples,), default=None
        Sample weights, see :func:`confidence_interval`.
    n_resamples : int, default=1000
        Number of bootstrap resamples (at least 2).
    confidence_level : float, default=0.9
        Nominal coverage of the interval of the difference, in (0, 1).
    method : {"percentile", "bca"}, default="percentile"
        How the interval is read from the bootstrap distribution of the
        difference, see :func:`confidence_interval` (the jackknife of
        ``"bca"`` leaves out the same rows of both predictions).
    stratify : bool, default=False
        Resample within each class.
    random_state : int, RandomState instance or None, default=None
        Seed of the resampling. With the same seed (and rows),
        :func:`confidence_interval` of each prediction sees the same
        resamples, so that ``resamples`` is the difference of theirs.
    **metric_params
        Keyword arguments of the metric.

    Returns
    -------
    PairedComparison
        With ``difference``, ``low``, ``high``, ``p_value``,
        ``estimate_a``, ``estimate_b``, ``confidence_level``, ``method``,
        ``n_resamples``, ``resamples`` (the bootstrap distribution of the
        difference) and ``standard_error``.

    See Also
    --------
    confidence_interval : Interval of one prediction's metric.

    Notes
    -----
    The p-value is the two-sided bootstrap p-value of the difference being
    0 (Davison & Hinkley 1997, eq. 4.11): with ``B`` finite resampled
    differences ``d_b``, ``p = min(1, 2 min((1 + #{d_b <= 0}) / (1 + B),
    (1 + #{d_b >= 0}) / (1 + B)))``, twice the smaller share of resampled
    differences on one side of 0 (ties with 0 on both). It is at least
    ``2 / (1 + B)``, it is 1 when every resampled difference is 0 (identical
    predictions), and it is below ``1 - confidence_level`` roughly when the
    percentile interval excludes 0. It does not depend on ``method``.

    References
    ----------
    A. C. Davison, D. V. Hinkley. "Bootstrap Methods and their Application".
    Cambridge University Press, 1997.

    Examples
    --------
    >>> import numpy as np
    >>> from skcal.metrics import paired_comparison
    >>> rng = np.random.default_rng(0)
    >>> proba = rng.dirichlet(np.ones(3), size=500)
    >>> y = (proba.cumsum(axis=1) < rng.uniform(size=(500, 1))).sum(axis=1)
    >>> sharp = proba**3 / (proba**3).sum(axis=1, keepdims=True)  # overconfident
    >>> result = paired_comparison("negative_log_likelihood", y, proba, sharp,
    ...                            random_state=0)
    >>> bool(result.high < 0), bool(result.p_value < 0.01)
    (True, True)
    """
    shape_a, shape_b = np.shape(y_proba_a), np.shape(y_proba_b)
    if shape_a != shape_b:
        raise ValueError(
            "y_proba_a and y_proba_b must be two predictions of the same rows "
            f"and classes, of the same shape; got {shape_a} and {shape_b}."
        )
    name, estimates, values, jackknife = _bootstrap(
        "paired_comparison",
        metric,
        y_true,
        [y_proba_a, y_proba_b],
        sample_weight,
        n_resamples,
        confidence_level,
        method,
        stratify,
        random_state,
        metric_params,
    )
    difference = estimates[0] - estimates[1]
    diffs = values[0] - values[1]

    def jack_difference():
        a, b = jackknife()
        return a - b

    alpha = (1 - confidence_level) / 2
    low, high = _interval(difference, diffs, alpha, method, jack_difference)
    finite = diffs[np.isfinite(diffs)]
    b = finite.size
    tail = min(np.count_nonzero(finite <= 0), np.count_nonzero(finite >= 0))
    p_value = min(1.0, 2 * (1 + tail) / (1 + b))
    return PairedComparison(
        metric=name,
        difference=difference,
        low=low,
        high=high,
        p_value=float(p_value),
        estimate_a=estimates[0],
        estimate_b=estimates[1],
        confidence_level=float(confidence_level),
        method=method,
        n_resamples=int(n_resamples),
        resamples=_frozen(diffs),
    )
