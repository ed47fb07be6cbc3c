"""Metrics by group: one wrapper splits the rows and calls the metric per group.

Every metric function of :mod:`skcal.metrics` (and :func:`confidence_interval`,
:func:`paired_comparison`, :func:`calibration_report`) takes ``groups=``
through :func:`groupable`: with ``groups=None`` it returns what it always
did; with one group label per row it returns a :class:`GroupedResult`, the
function's own result on each group's rows, on all rows, the worst group and
a permutation test of whether the groups differ.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
from dataclasses import dataclass

import numpy as np
from sklearn.utils import _safe_indexing
from sklearn.utils.validation import check_random_state

from ..llm._topk import TopKScores
from ..utils._groups import MAX_GROUPS, check_groups

__all__ = [
    "GroupDifferenceTest",
    "GroupedMetricState",
    "GroupedResult",
    "MAX_GROUPS",
    "groupable",
]

#: What every grouped metric's docstring says about ``groups``.
GROUPS_DOC = """\
    groups : array-like of shape (n_samples,), default=None
        A group label per row (a task, a site, a population). When given,
        the result is a :class:`~skcal.metrics.GroupedResult`: this
        function on each group's rows (``.by_group``), on all rows
        (``.overall``), the worst group (``.worst``) and a permutation test
        of a difference between groups (``.difference_test()``).
"""


def take_rows(x, rows: np.ndarray):
    """The rows ``rows`` of an array-like, a DataFrame or a TopKScores."""
    if x is None:
        return None
    if isinstance(x, TopKScores):
        return x[rows]
    if isinstance(x, list | tuple):
        x = np.asarray(x)
    return _safe_indexing(x, rows)


@dataclass(frozen=True, eq=False)
class GroupDifferenceTest:
    """Permutation test of a difference between groups.

    Attributes
    ----------
    statistic : float
        The row-weighted variance of the per-group values around their
        row-weighted mean: ``sum_g n_g (v_g - v_bar)^2 / n``.
    pvalue : float
        ``(1 + #{permuted statistic >= statistic}) / (1 + n_permutations)``.
    n_permutations : int
        Number of permutations of the group labels.
    null : str
        The null hypothesis, in words.
    """

    statistic: float
    pvalue: float
    n_permutations: int
    null: str = dataclasses.field(repr=False)  # the repr leaves it out


def _field_names(result) -> list:
    """The fields of a dataclass or named-tuple result (none for a float)."""
    if dataclasses.is_dataclass(result):
        return [f.name for f in dataclasses.fields(result)]
    if isinstance(result, tuple):
        return list(inspect.get_annotations(type(result)))
    return []


def _spread(values: np.ndarray, counts: np.ndarray) -> float:
    mean = counts @ values / counts.sum()
    return float(counts @ (values - mean) ** 2 / counts.sum())


class GroupedResult:
    """A metric computed per group, from any metric function given ``groups=``.

    Attributes
    ----------
    metric : str
        The function's name.
    groups : ndarray of shape (n_groups,)
        The group labels, sorted.
    results : tuple
        The function's result on each group's rows, in the order of
        ``groups`` (a float for a metric, a
        :class:`~skcal.metrics.ConfidenceInterval` for
        :func:`~skcal.metrics.confidence_interval`, ...).
    counts : ndarray of shape (n_groups,)
        Rows per group.
    overall :
        The function's result on all rows (the same as ``groups=None``).
    values : ndarray of shape (n_groups,)
        The number each group is ranked by (larger: worse calibrated): the
        metric itself, an interval's estimate, a test's ``|z|``.

    Examples
    --------
    >>> from skcal.metrics import brier_score
    >>> r = brier_score([0, 1, 1, 0], [0.1, 0.9, 0.4, 0.7], groups=[0, 0, 1, 1])
    >>> {g: round(v, 3) for g, v in r.by_group.items()}
    {0: 0.02, 1: 0.85}
    >>> r.worst
    1
    """

    def __init__(self, metric, groups, results, counts, overall, values, rerun):
        self.metric = metric
        self.groups = groups
        self.results = tuple(results)
        self.counts = np.asarray(counts)
        self.overall = overall
        self.values = np.asarray(values, dtype=np.float64)
        self._rerun = rerun

    @property
    def by_group(self) -> dict:
        """``{group: result}``, groups in sorted order."""
        return dict(zip(self.groups.tolist(), self.results, strict=True))

    @property
    def worst(self):
        """The label of the group of largest value (ties: the first)."""
        if np.all(np.isnan(self.values)):
            raise ValueError(f"{self.metric} is NaN on every group: no worst group.")
        return self.groups.tolist()[int(np.nanargmax(self.values))]

    def __getitem__(self, group):
        return self.by_group[group]

    def __len__(self) -> int:
        return len(self.groups)

    def to_frame(self):
        """A pandas DataFrame, one row per group: ``n_samples``, ``value``
        and the fields of each result (an interval's ``low``, ``high``...)."""
        import pandas as pd

        rows = []
        for result, n, value in zip(
            self.results, self.counts, self.values, strict=True
        ):
            row = {"n_samples": int(n), "value": float(value)}
            for name in _field_names(result):
                item = getattr(result, name)
                if np.ndim(item) == 0 and not isinstance(item, tuple):
                    row[name] = item
            rows.append(row)
        return pd.DataFrame(rows, index=pd.Index(self.groups, name="group"))

    def difference_test(self, n_permutations=999, random_state=None):
        """Permutation test of "calibration does not differ between groups".

        Null: the group labels are exchangeable with the rows, i.e. each
        group's rows are a random draw of the pooled rows, so the per-group
        values differ only through sampling. The statistic is the
        row-weighted variance of the per-group values; the group labels
        are shuffled ``n_permutations`` times (group sizes kept, so the
        small-sample bias of a binned error, larger for small groups, is
        in the null distribution too). A small p-value says that some
        groups are calibrated differently; which ones, ``values`` and
        ``worst`` show.

        Parameters
        ----------
        n_permutations : int, default=999
        random_state : int, RandomState instance or None, default=None

        Returns
        -------
        GroupDifferenceTest
        """
        if int(n_permutations) < 1:
            raise ValueError(f"n_permutations must be >= 1, got {n_permutations}.")
        if not np.all(np.isfinite(self.values)):
            raise ValueError(
                f"{self.metric} is not finite on some group: no spread to test."
            )
        if self._rerun is None:
            raise ValueError(
                "difference_test needs the rows, and this result comes from a "
                "grouped metric state, which keeps only per-group statistics: "
                "call the metric function with groups= on the rows instead."
            )
        rng = check_random_state(random_state)
        observed = _spread(self.values, self.counts)
        index = np.repeat(np.arange(len(self.groups)), self.counts)
        exceed = 0
        for _ in range(int(n_permutations)):
            shuffled = rng.permutation(index)
            values = self._rerun(shuffled)
            exceed += _spread(values, self.counts) >= observed * (1 - 1e-12)
        return GroupDifferenceTest(
            statistic=observed,
            pvalue=(1 + exceed) / (1 + int(n_permutations)),
            n_permutations=int(n_permutations),
            null="the group labels are exchangeable with the rows",
        )

    def __repr__(self) -> str:
        body = ", ".join(
            f"{g!r}: {v:.4g}" for g, v in zip(self.groups.tolist(), self.values)
        )
        return f"GroupedResult(metric={self.metric!r}, values={{{body}}})"


def _pooled_labels(arguments):
    """The labels of all rows, so that a group missing a class keeps the
    column order of the whole data (None when that cannot be read)."""
    y_true, y_proba = arguments.get("y_true"), arguments.get("y_proba")
    if y_true is None or y_proba is None or isinstance(y_proba, TopKScores):
        return None
    n_columns = 2 if np.ndim(y_proba) == 1 else np.shape(y_proba)[1]
    labels = np.unique(np.asarray(y_true))
    return labels if len(labels) == n_columns else None


def _grouped_call(func, sig, rows, value, score, args, kwargs, groups):
    bound = sig.bind(*args, **kwargs)
    first = bound.arguments[rows[0]]
    labels, index = check_groups(groups, len(first))
    if "labels" in sig.parameters and bound.arguments.get("labels") is None:
        bound.arguments["labels"] = _pooled_labels(bound.arguments)
    order = np.argsort(index, kind="stable")
    counts = np.bincount(index, minlength=len(labels))

    def call(f, take):
        sub = sig.bind(*bound.args, **bound.kwargs)
        for name in rows:
            if name in sub.arguments:
                sub.arguments[name] = take_rows(sub.arguments[name], take)
        return f(*sub.args, **sub.kwargs)

    def per_group(f, order):
        return [call(f, part) for part in np.split(order, np.cumsum(counts)[:-1])]

    results = per_group(func, order)
    values = [value(r) for r in results]

    def rerun(shuffled):
        perm_order = np.argsort(shuffled, kind="stable")
        if score is None:
            return np.array([value(r) for r in per_group(func, perm_order)])
        return np.array([float(r) for r in per_group(score(bound), perm_order)])

    overall = func(*bound.args, **bound.kwargs)
    return GroupedResult(func.__name__, labels, results, counts, overall, values, rerun)


def _with_groups_doc(doc: str | None) -> str | None:
    """``doc`` with the ``groups`` parameter at the end of its Parameters."""
    if not doc or "\n    Returns\n" not in doc:
        return doc
    head, tail = doc.split("\n    Returns\n", 1)
    return f"{head.rstrip()}\n{GROUPS_DOC}\n    Returns\n{tail}"


def groupable(rows=("y_true", "y_proba", "sample_weight"), value=float, score=None):
    """Give a metric function a keyword ``groups=``.

    Parameters
    ----------
    rows : tuple of str
        The arguments holding one entry per row (split by group); the
        first gives the number of rows.
    value : callable
        ``result -> float`` that ranks the groups (larger: worse).
    score : callable or None
        ``bound arguments -> callable`` giving a cheaper function with the
        same arguments that returns the value directly, used by the
        permutation test (e.g. the metric of an interval, without its
        bootstrap); None: ``value`` of the function itself.
    """

    def decorate(func):
        sig = inspect.signature(func)

        @functools.wraps(func)
        def wrapper(*args, groups=None, **kwargs):
            if groups is None:
                return func(*args, **kwargs)
            return _grouped_call(func, sig, rows, value, score, args, kwargs, groups)

        params = list(sig.parameters.values())
        at = len(params) - int(params[-1].kind is params[-1].VAR_KEYWORD)
        extra = inspect.Parameter(
            "groups", inspect.Parameter.KEYWORD_ONLY, default=None
        )
        wrapper.__signature__ = sig.replace(
            parameters=[*params[:at], extra, *params[at:]]
        )
        wrapper.__doc__ = _with_groups_doc(func.__doc__)
        return wrapper

    return decorate


class GroupedMetricState:
    """A mergeable metric state per group, from ``metric_state(..., grouped=True)``.

    ``update(y_true, y_proba, sample_weight=None, groups=...)`` splits the
    chunk by group into one :class:`~skcal.metrics.MetricState` per group
    (and one for all rows); ``merge`` adds another grouped state's groups;
    ``compute()`` returns a :class:`GroupedResult`, each group's value equal
    to the metric function on that group's rows. At most ``max_groups``
    groups (default :data:`MAX_GROUPS`) in all: a state's size grows with
    its groups, and more is refused with a clear error. The permutation test
    of :meth:`GroupedResult.difference_test` needs the rows, which a state
    does not keep.

    Attributes
    ----------
    metric : str
    max_groups : int
    states : dict
        ``{group: MetricState}`` of the groups seen.
    overall : MetricState
        The state of all rows.
    """

    def __init__(self, template, max_groups: int):
        self.metric = template.metric
        self.max_groups = int(max_groups)
        self._template = template.copy()
        self.overall = template.copy()
        self.states = {}

    def _state_of(self, group):
        if group not in self.states:
            if len(self.states) >= self.max_groups:
                raise ValueError(
                    f"This grouped state of {self.metric} already holds "
                    f"{self.max_groups} groups (max_groups) and met another "
                    f"({group!r}). Merge rare groups into one before updating, "
                    "or pass a larger max_groups to metric_state."
                )
            self.states[group] = self._template.copy()
        return self.states[group]

    def update(self, y_true, y_proba, sample_weight=None, *, groups):
        """Add a chunk of rows with their group labels."""
        n = len(y_proba) if isinstance(y_proba, TopKScores) else len(y_true)
        labels, index = check_groups(groups, n)
        for k, group in enumerate(labels.tolist()):
            rows = np.flatnonzero(index == k)
            self._state_of(group).update(
                take_rows(y_true, rows),
                take_rows(y_proba, rows),
                take_rows(sample_weight, rows),
            )
        self.overall.update(y_true, y_proba, sample_weight)
        return self

    def merge(self, other: GroupedMetricState) -> GroupedMetricState:
        """Add the groups and rows of another grouped state of the same metric."""
        if not isinstance(other, GroupedMetricState):
            raise ValueError(
                f"Cannot merge {type(other).__name__} into a grouped state of "
                f"{self.metric}: merge states made by metric_state(..., grouped=True)."
            )
        self.overall.merge(other.overall)
        for group, state in other.states.items():
            self._state_of(group).merge(state)
        return self

    def next_pass(self) -> GroupedMetricState:
        """Equal-mass bins: freeze each group's edges (and the overall ones)."""
        for state in (*self.states.values(), self.overall):
            state.next_pass()
        return self

    def compute(self) -> GroupedResult:
        """The metric per group, as :class:`GroupedResult` (no permutation test)."""
        if not self.states:
            raise ValueError("Found 0 samples; metrics need at least one.")
        groups = np.array(sorted(self.states))
        results = [self.states[g].compute() for g in groups.tolist()]
        counts = [self.states[g].n_samples_ for g in groups.tolist()]
        values = [_state_value(r) for r in results]
        return GroupedResult(
            self.metric, groups, results, counts, self.overall.compute(), values, None
        )

    def copy(self) -> GroupedMetricState:
        import copy

        return copy.deepcopy(self)

    def __repr__(self) -> str:
        return (
            f"<GroupedMetricState {self.metric}, {len(self.states)} groups, "
            f"{self.overall.n_samples_} rows>"
        )


def _state_value(result) -> float:
    """The ranking value of a state's result (a float, or a test's |z|)."""
    if hasattr(result, "normalized"):
        return abs(float(result.normalized))
    if hasattr(result, "mean_score"):  # BinStatistics: no single number
        return float("nan")
    return float(result)
