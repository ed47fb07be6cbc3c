"""Mergeable metric states: compute a metric over chunks of rows.

A state holds the sufficient statistics of one metric: per-bin sums for the
binned errors, per-soft-bin sums for SoftECE, totals for NLL and Brier. Its
size depends on the number of bins and classes only, never on the number of
rows. ``update`` adds a chunk, ``merge`` adds another state (of another
chunk, process or machine), ``compute`` gives the metric; the result equals
the metric function on all the rows at once, whatever the chunking, up to
floating-point summation order.

Equal-mass (quantile) bins need their edges before the rows can be binned:
those states take two passes over the data. The first feeds a fixed sketch
of each binned column (a histogram over the float64 bit patterns of the
scores, so that tiny probabilities are resolved as finely as large ones,
which also keeps the scores themselves up to ``_EXACT_BUDGET``);
:meth:`MetricState.next_pass` turns it into edges, exact on kept scores and
otherwise within a relative ``2**-edge_bits`` of the exact quantile edge
where the scores are dense (the extreme edges are exact), and the second
pass bins the rows on those edges exactly.
"""

from __future__ import annotations

import copy
import difflib
from numbers import Integral, Real

import numpy as np

from ..exceptions import ApproximationWarning
from ..llm._topk import TopKScores
from ..llm._topk_ops import check_topk_targets, topk_brier, topk_nll, topk_top_label
from ..utils._sklearn import Interval, StrOptions, validate_params
from ..utils._validation import (
    _is_integral,
    check_class_weight,
    check_proba_targets,
    check_sample_weight,
)
from ..utils._warnings import warn
from ._binning import (
    BinStatistics,
    assign_bins,
    bin_edges,
    bin_means,
    binned_calibration_error,
    binned_errors,
    classwise_tables,
    uniform_edges,
)
from ._cumulative import binned_mean_ecce
from ._debiased import (
    bin_sums,
    column_blocks,
    combine,
    reference_edges,
    squared_errors,
)
from ._ece import top_label
from ._names import find_metric
from ._spiegelhalter import spiegelhalter_from_sums, spiegelhalter_sums

__all__ = ["MetricState", "mergeable_metrics", "metric_state"]

#: Float64 exponents below ``2**-_MIN_EXPONENT`` share the sketch's first
#: bucket (scores under 1e-18 are 0 for every edge that matters).
_MIN_EXPONENT = 60
#: Mantissa bits of the sketch's buckets: top-label (one column) and the
#: budget of buckets over all columns of the classwise sketches.
_TOP_EDGE_BITS = 12
_SKETCH_BUDGET = 1 << 20
#: Scores a sketch keeps exactly (over all its columns), 16 MiB with their
#: weights: below it, the edges are those of the in-memory metric.
_EXACT_BUDGET = 1 << 20


class _Sketch:
    """Mergeable histogram of scores in [0, 1] over float64 bit patterns.

    Bucket ``j`` covers the scores whose exponent and top ``bits`` mantissa
    bits are those of ``j`` (relative width ``2**-bits``), above
    ``2**-_MIN_EXPONENT``; one bucket below. Each bucket keeps its weight
    and the smallest and largest score it saw, so an edge is interpolated
    between scores that exist.

    Until the sketch has seen ``_EXACT_BUDGET`` scores over all its columns
    it also keeps them (and their weights), and its edges are then exactly
    those of :func:`~skcal.metrics.bin_edges`: on few rows the gaps between
    neighbouring scores are wide, and an edge between two buckets could be
    anywhere between them.
    """

    def __init__(self, n_columns: int, bits: int):
        self.bits = int(bits)
        self.n_buckets = (_MIN_EXPONENT << self.bits) + 2
        self.weight = np.zeros((n_columns, self.n_buckets))
        self.low = np.full((n_columns, self.n_buckets), np.inf)
        self.high = np.full((n_columns, self.n_buckets), -np.inf)
        self.max_row_weight = 0.0
        self.exact = [[] for _ in range(n_columns)]  # (scores, weights) chunks
        self.n_exact = 0  # scores kept; the list is None beyond the budget

    def bucket(self, scores: np.ndarray) -> np.ndarray:
        scores = np.clip(np.asarray(scores, dtype=np.float64), 0.0, 1.0)
        bits = scores.view(np.uint64) >> np.uint64(52 - self.bits)
        floor = np.uint64((1023 - _MIN_EXPONENT) << self.bits)
        # bucket 0: below 2**-_MIN_EXPONENT; 1.0 gets the last bucket
        idx = np.where(bits < floor, 0, bits - floor + np.uint64(1))
        return np.minimum(idx, self.n_buckets - 1).astype(np.int64)

    def add(self, column: int, scores: np.ndarray, weight: np.ndarray) -> None:
        if scores.size == 0:
            return
        idx = self.bucket(scores)
        self.weight[column] += np.bincount(
            idx, weights=weight, minlength=self.n_buckets
        )
        np.minimum.at(self.low[column], idx, scores)
        np.maximum.at(self.high[column], idx, scores)
        self.max_row_weight = max(self.max_row_weight, float(weight.max()))
        self._keep([(column, (np.array(scores, np.float64), np.array(weight)))])

    def _keep(self, chunks) -> None:
        """Keep exact scores while the budget allows; drop them all beyond."""
        if self.exact is None:
            return
        self.n_exact += sum(len(scores) for _, (scores, _) in chunks)
        if self.n_exact > _EXACT_BUDGET:
            self.exact = None
            return
        for column, chunk in chunks:
            self.exact[column].append(chunk)

    def merge(self, other: _Sketch) -> None:
        self.weight += other.weight
        np.minimum(self.low, other.low, out=self.low)
        np.maximum(self.high, other.high, out=self.high)
        self.max_row_weight = max(self.max_row_weight, other.max_row_weight)
        if other.exact is None:
            self.exact = None
        else:
            self._keep([(k, c) for k, chunks in enumerate(other.exact) for c in chunks])

    def edges(self, column: int, n_bins: int) -> np.ndarray:
        """Equal-mass edges of one column (as :func:`bin_edges`, sketched).

        Exact while the scores are kept. Otherwise edge ``j`` is where the
        cumulative weight reaches ``j / n_bins`` of the total: in the bucket
        that holds that point, between its smallest and largest score in
        proportion to the weight before it. The first and last edges are the
        exact minimum and maximum.
        """
        if self.exact is not None and self.exact[column]:
            scores, weights = map(np.concatenate, zip(*self.exact[column]))
            return bin_edges(scores, n_bins, "quantile", weights)
        w = self.weight[column]
        seen = w > 0
        if not seen.any():
            return np.linspace(0.0, 1.0, n_bins + 1)
        w, low, high = w[seen], self.low[column, seen], self.high[column, seen]
        cum = np.cumsum(w)
        targets = cum[-1] * np.arange(1, n_bins) / n_bins
        idx = np.minimum(np.searchsorted(cum, targets, side="right"), len(w) - 1)
        frac = np.clip((targets - (cum[idx] - w[idx])) / w[idx], 0.0, 1.0)
        inner = low[idx] + frac * (high[idx] - low[idx])
        self._warn_if_between_buckets(targets, cum, idx, low, high)
        edges = np.concatenate([[low[0]], inner, [high[-1]]])
        return np.maximum.accumulate(edges)

    def _warn_if_between_buckets(self, targets, cum, idx, low, high) -> None:
        """Warn when an edge may lie in a gap between buckets.

        A target within one row's weight of its bucket's end may fall after
        the bucket's last score: the exact edge is then interpolated towards
        the next bucket's first score, and the documented precision holds
        only if the empty stretch between them is within a relative
        ``2**-bits`` too.
        """
        last = len(cum) - 1
        near_end = (cum[idx] - targets <= self.max_row_weight) & (idx < last)
        upper = low[np.minimum(idx + 1, last)]
        stretch = np.where(near_end, upper - high[idx], 0.0)
        far = stretch > 2.0**-self.bits * upper
        if far.any():
            j = int(np.argmax(far))
            warn(
                f"An equal-mass bin edge of this metric state may be off by up "
                f"to {stretch[j]:.3g} (it lies between {high[idx][j]:.6g} and "
                f"{upper[j]:.6g}), more than the sketch's relative "
                f"2**-{self.bits}: the scores near it are sparse. The metric is "
                "exact given its edges, but the edges are approximate; compute "
                "the metric in memory, or use strategy='uniform'.",
                ApproximationWarning,
            )


class MetricState:
    """Sufficient statistics of one metric, filled chunk by chunk.

    Made by :func:`metric_state`. ``update`` and ``merge`` return the state
    itself, so that ``functools.reduce(MetricState.merge, states)`` and
    chained updates work. A state is plain numpy: it pickles and travels
    between processes (a Dask tree reduction merges states of chunks).

    Attributes
    ----------
    metric : str
        Name of the metric.
    params : dict
        The metric's parameters.
    n_samples_ : int
        Rows seen in the current pass.
    n_passes : int
        1, or 2 for equal-mass (quantile) bins: see :meth:`next_pass`.
    pass_ : int
        The current pass (1 or 2).
    """

    n_passes = 1

    def __init__(self, metric: str, params: dict):
        self.metric = metric
        self.params = dict(params)
        self.labels = params.get("labels")
        self.n_classes_ = None
        self.n_samples_ = 0
        self.has_weight_ = False  # any row of positive weight in this pass
        self.pass_ = 1
        if self.labels is not None:
            self._init_classes(len(self.labels))

    # ------------------------------------------------------------ public
    def update(self, y_true, y_proba, sample_weight=None) -> MetricState:
        """Add a chunk of rows; an empty chunk changes nothing.

        ``y_proba`` may be a :class:`~skcal.llm.TopKScores` (with ``y_true``
        its class indices) for the NLL, the Brier score and the top-label
        metrics: they read it under its rest model, never densely.
        """
        if isinstance(y_proba, TopKScores):
            chunk = self._check_topk(y_true, y_proba, sample_weight)
        else:
            chunk = self._check(y_true, y_proba, sample_weight)
        if chunk is not None:
            proba, y_index, w = chunk
            if self.pass_ == 1 and self.n_passes == 2:
                self._sketch_chunk(proba, y_index, w)
            else:
                self._add_chunk(proba, y_index, w)
            self.n_samples_ += len(y_index)
            self.has_weight_ = self.has_weight_ or bool(w.any())
        return self

    def merge(self, other: MetricState) -> MetricState:
        """Add the rows of ``other`` (same metric, parameters and pass)."""
        if not isinstance(other, MetricState) or (
            type(other) is not type(self)
            or other.metric != self.metric
            or not _same_params(other.params, self.params)
        ):
            raise ValueError(
                f"Cannot merge a state of {getattr(other, 'metric', other)!r} "
                f"into a state of {self.metric!r} {self.params}: merge states "
                "made by metric_state with the same metric and parameters."
            )
        if other.pass_ != self.pass_:
            raise ValueError(
                f"Cannot merge a pass-{other.pass_} state into a pass-"
                f"{self.pass_} state: call next_pass() on both first."
            )
        if other.n_classes_ is not None:
            if self.n_classes_ is None:
                self._init_classes(other.n_classes_)
            elif other.n_classes_ != self.n_classes_:
                raise ValueError(
                    f"Cannot merge states of {other.n_classes_} and "
                    f"{self.n_classes_} classes."
                )
            if other.n_samples_:
                self._merge(other)
        self.n_samples_ += other.n_samples_
        self.has_weight_ = self.has_weight_ or other.has_weight_
        return self

    #: The attributes that merging adds up (in the first pass of quantile
    #: bins, the sketch of the scores merges instead).
    _sums: tuple = ()

    def _merge(self, other):
        if getattr(self, "sketch_", None) is not None and self.pass_ == 1:
            self.sketch_.merge(other.sketch_)
            return
        for name in self._sums:
            setattr(self, name, getattr(self, name) + getattr(other, name))

    def next_pass(self) -> MetricState:
        """Quantile bins: turn the first pass's sketch into bin edges.

        The state then takes the same rows again, binned on those edges.
        """
        if self.n_passes == 1 or self.pass_ == 2:
            raise ValueError(
                f"{self.metric} with these parameters takes one pass; "
                "next_pass() is only for the first pass of quantile bins."
            )
        if self.n_samples_ == 0:
            raise ValueError("next_pass() needs at least one row in the first pass.")
        self._freeze_edges()
        self.pass_, self.n_samples_, self.has_weight_ = 2, 0, False
        return self

    def compute(self):
        """The metric on every row added so far."""
        if self.pass_ == 1 and self.n_passes == 2:
            raise ValueError(
                f"{self.metric} with strategy='quantile' takes two passes: "
                "call next_pass() after the first and update with the same "
                "rows again."
            )
        if self.n_samples_ == 0:
            raise ValueError("Found 0 samples; metrics need at least one.")
        if not self.has_weight_:
            # as the in-memory metric (scikit-learn's check), on the whole set:
            # a chunk may have weights that are all 0
            raise ValueError(
                "Sample weights must contain at least one non-zero number."
            )
        return self._compute()

    def copy(self) -> MetricState:
        """A deep copy (states merge in place)."""
        return copy.deepcopy(self)

    def __repr__(self) -> str:
        return (
            f"<MetricState {self.metric} {self.params} pass {self.pass_}/"
            f"{self.n_passes}, {self.n_samples_} rows>"
        )

    # ------------------------------------------------------------ helpers
    def _check(self, y_true, y_proba, sample_weight):
        values = np.asarray(y_proba)  # y_proba itself: a frame's names count
        n_rows = values.shape[0] if values.ndim else 0
        if n_rows == 0 and np.asarray(y_true).size == 0:
            return None
        y_true = np.asarray(y_true)
        if self.labels is None and y_true.size:
            self._check_unlabelled(y_true, values)
        proba, y_index, _ = check_proba_targets(
            y_true, y_proba, labels=self.labels, copy=False
        )
        w = check_sample_weight(sample_weight, len(y_index), allow_zero=True)
        n_classes = proba.shape[1]
        if self.n_classes_ is None:
            self._init_classes(n_classes)
        elif n_classes != self.n_classes_:
            raise ValueError(
                f"y_proba has {n_classes} columns but earlier chunks (or "
                f"labels) had {self.n_classes_}: every chunk must have one "
                "column per class."
            )
        return proba, y_index, w

    #: Whether the state reads TopKScores chunks (its ``_add_chunk`` and
    #: ``_sketch_chunk`` then get the TopKScores as ``proba``).
    _takes_topk = False

    def _check_topk(self, y_true, top, sample_weight):
        if not self._takes_topk:
            raise TypeError(
                f"A metric state of {self.metric} does not take TopKScores; "
                "negative_log_likelihood, brier_score and the top-label metrics "
                "(expected_calibration_error, max_calibration_error, "
                "binned_statistics) do. Dense scores: y_proba.to_dense() (the "
                "rest model's log-probabilities, refused above max_bytes), "
                "exponentiated."
            )
        if self.labels is not None:
            raise ValueError(
                "labels must be None with TopKScores chunks: y_true holds the "
                "class indices the top-k lists."
            )
        if len(top) == 0 and np.asarray(y_true).size == 0:
            return None
        y_index, w = check_topk_targets(top, y_true, sample_weight, allow_zero=True)
        if self.n_classes_ is None:
            self._init_classes(top.n_classes)
        elif top.n_classes != self.n_classes_:
            raise ValueError(
                f"This TopKScores chunk has n_classes={top.n_classes} but earlier "
                f"chunks had {self.n_classes_}."
            )
        return top, y_index, w

    def _check_unlabelled(self, y_true: np.ndarray, y_proba: np.ndarray) -> None:
        """Without ``labels``, only integer labels ``0..C-1`` have a column.

        The batch metrics map other labels to columns in sorted order, which
        needs every class in the data; a chunk may lack some, so the state
        refuses them rather than map a chunk's labels differently.
        """
        n_columns = y_proba.shape[1] if y_proba.ndim == 2 else 2
        if n_columns == 1:
            n_columns = 2
        values = y_true.ravel()
        if _is_integral(values):
            low, high = values.min(), values.max()
            if low >= 0 and high < n_columns:
                return
            problem = (
                f"integer labels from {low} to {high}, but label k is column k, "
                f"so they must lie in 0..{n_columns - 1} for {n_columns} columns"
            )
        else:
            problem = f"labels like {np.unique(values)[:5].tolist()}"
        raise ValueError(
            f"A metric state of {self.metric} got {problem}: a chunk may not "
            "hold every class, so the state cannot tell which column is which "
            "label. Pass labels=[...] listing every label in the column order "
            "of y_proba (e.g. labels=np.unique(y) over all the rows)."
        )

    def _init_classes(self, n_classes: int) -> None:
        self.n_classes_ = int(n_classes)

    def _sketch_chunk(self, proba, y_index, w):  # pragma: no cover - abstract
        raise NotImplementedError

    def _freeze_edges(self):  # pragma: no cover - abstract
        raise NotImplementedError


def _same_params(a: dict, b: dict) -> bool:
    if a.keys() != b.keys():
        return False
    for key in a:
        x, y = a[key], b[key]
        if isinstance(x, (np.ndarray, list, tuple)) or isinstance(
            y, (np.ndarray, list, tuple)
        ):
            if x is None or y is None or not np.array_equal(x, y):
                return False
        elif x != y:
            return False
    return True


class _ProperState(MetricState):
    """NLL or Brier: the weighted loss total and the weight total."""

    _sums = ("loss_sum_", "weight_sum_")

    def _init_classes(self, n_classes):
        super()._init_classes(n_classes)
        self.loss_sum_, self.weight_sum_ = 0.0, 0.0

    _takes_topk = True

    def _add_chunk(self, proba, y_index, w):
        rows = np.arange(len(y_index))
        if isinstance(proba, TopKScores):
            if self.metric == "negative_log_likelihood":
                loss = topk_nll(proba, y_index, self.params["eps"])
            else:
                loss = topk_brier(proba, y_index)
        elif self.metric == "negative_log_likelihood":
            p_true = proba[rows, y_index]
            loss = -np.log(np.maximum(p_true, self.params["eps"]))
        else:
            sq = np.einsum("ij,ij->i", proba, proba, dtype=np.float64)
            loss = sq - 2.0 * proba[rows, y_index] + 1.0
        self.loss_sum_ += float(w @ loss)
        self.weight_sum_ += float(w.sum())

    def _compute(self):
        return self.loss_sum_ / self.weight_sum_


class _TopLabelState(MetricState):
    """Top-label binned statistics: ECE (any norm), MCE, reliability bins."""

    _sums = ("count_", "weight_", "sum_score_", "sum_target_")

    def __init__(self, metric, params):
        self.n_passes = 2 if params.get("strategy") == "quantile" else 1
        n_bins = params["n_bins"]
        self.edges_ = None if self.n_passes == 2 else uniform_edges(n_bins)
        self.count_ = np.zeros(n_bins, dtype=np.int64)
        self.weight_ = np.zeros(n_bins)
        self.sum_score_ = np.zeros(n_bins)
        self.sum_target_ = np.zeros(n_bins)
        self.sketch_ = _Sketch(1, _TOP_EDGE_BITS) if self.n_passes == 2 else None
        super().__init__(metric, params)

    _takes_topk = True

    def _sketch_chunk(self, proba, y_index, w):
        conf, _ = _top_label_of(proba, y_index)
        self.sketch_.add(0, conf, w)

    def _freeze_edges(self):
        self.edges_ = self.sketch_.edges(0, self.params["n_bins"])

    def _add_chunk(self, proba, y_index, w):
        conf, correct = _top_label_of(proba, y_index)
        idx = assign_bins(conf, self.edges_, self.params.get("closed", "left"))
        n_bins = self.params["n_bins"]
        self.count_ += np.bincount(idx, minlength=n_bins)
        self.weight_ += np.bincount(idx, weights=w, minlength=n_bins)
        self.sum_score_ += np.bincount(idx, weights=w * conf, minlength=n_bins)
        self.sum_target_ += np.bincount(idx, weights=w * correct, minlength=n_bins)

    def statistics(self) -> BinStatistics:
        """The reliability-diagram statistics of the top-label confidence."""
        return BinStatistics(
            self.edges_.copy(),
            self.count_.copy(),
            self.weight_.copy(),
            bin_means(self.weight_, self.sum_score_),
            bin_means(self.weight_, self.sum_target_),
        )

    def _compute(self):
        if self.metric == "binned_statistics":
            return self.statistics()
        norm = "max" if self.metric == "max_calibration_error" else self.params["norm"]
        return binned_calibration_error(self.statistics(), norm)


def _top_label_of(proba, y_index):
    """:func:`top_label` of dense probabilities or of a TopKScores."""
    if isinstance(proba, TopKScores):
        return topk_top_label(proba, y_index)
    return top_label(proba, y_index)


class _ClasswiseState(MetricState):
    """Per-class binned statistics: classwise ECE and the binned-mean ECCE."""

    _sums = ("weight_", "sum_score_", "sum_target_")

    def __init__(self, metric, params):
        self.n_passes = 2 if params.get("strategy") == "quantile" else 1
        self.edges_ = None
        self.sketch_ = None
        super().__init__(metric, params)

    def _init_classes(self, n_classes):
        super()._init_classes(n_classes)
        shape = (n_classes, self.params["n_bins"])
        self.weight_ = np.zeros(shape)
        self.sum_score_ = np.zeros(shape)
        self.sum_target_ = np.zeros(shape)
        if self.n_passes == 2 and self.sketch_ is None:
            budget = _SKETCH_BUDGET // max(n_classes, 1) // _MIN_EXPONENT
            bits = int(np.clip(np.floor(np.log2(max(budget, 1))), 4, _TOP_EDGE_BITS))
            self.sketch_ = _Sketch(n_classes, bits)

    def _sketch_chunk(self, proba, y_index, w):
        for k in range(proba.shape[1]):
            self.sketch_.add(k, proba[:, k], w)

    def _freeze_edges(self):
        n_bins = self.params["n_bins"]
        self.edges_ = np.stack(
            [self.sketch_.edges(k, n_bins) for k in range(self.n_classes_)]
        )

    def _add_chunk(self, proba, y_index, w):
        closed = self.params.get("closed", "left")
        n_bins = self.params["n_bins"]
        if self.edges_ is None:  # equal-width: every class at once
            weights = None if np.all(w == 1.0) else w
            _, weight, sum_score, sum_target = classwise_tables(
                proba, y_index, weights, n_bins=n_bins, closed=closed
            )
            self.weight_ += weight
            self.sum_score_ += sum_score
            self.sum_target_ += sum_target
            return
        for k in range(proba.shape[1]):
            idx = assign_bins(proba[:, k], self.edges_[k], closed)
            self.weight_[k] += np.bincount(idx, weights=w, minlength=n_bins)
            self.sum_score_[k] += np.bincount(
                idx, weights=w * proba[:, k], minlength=n_bins
            )
            self.sum_target_[k] += np.bincount(
                idx, weights=w * (y_index == k), minlength=n_bins
            )

    def _class_weights(self):
        class_weight = self.params.get("class_weight")
        frequencies = None
        if isinstance(class_weight, str):  # "frequency": weight of y == k
            frequencies = self.sum_target_.sum(axis=1)
        return check_class_weight(
            class_weight, self.n_classes_, frequencies=frequencies
        )

    def _compute(self):
        mean_score = bin_means(self.weight_, self.sum_score_)
        mean_target = bin_means(self.weight_, self.sum_target_)
        cw = self._class_weights()
        if self.metric == "classwise_calibration_error":
            errors = binned_errors(
                self.weight_, mean_score, mean_target, self.params["norm"]
            )
            return float(np.dot(cw, errors))
        errors = [  # ecce_binned_mean
            binned_mean_ecce(self.weight_[k], mean_score[k], mean_target[k])
            for k in range(self.n_classes_)
        ]
        return float(np.dot(cw, errors))


class _SoftState(MetricState):
    """Soft-binned errors: per soft bin mass, confidence and accuracy sums."""

    _sums = ("mass_", "conf_sum_", "acc_sum_", "weight_sum_")

    def __init__(self, metric, params):
        n_bins = params["n_bins"]
        self.mass_ = np.zeros(n_bins)
        self.conf_sum_ = np.zeros(n_bins)
        self.acc_sum_ = np.zeros(n_bins)
        self.weight_sum_ = 0.0
        super().__init__(metric, params)

    def _kernel_args(self):
        p = self.params
        if self.metric == "soft_expected_calibration_error":
            return dict(sharpness=float(p["alpha"])), dict(
                power=float(p["q"]),
                eps=1e-6,
                eps_mode="add",
                smoothing=float(p["smoothing"]),
            )
        return dict(sharpness=1.0 / float(p["temperature"])), dict(
            power=float(p["p"]), eps=1e-5, eps_mode="floor"
        )

    def _add_chunk(self, proba, y_index, w):
        from .._torch.kernels import (
            soft_bin_sums_value,  # torch: imported by the metrics that need it only
        )

        conf, correct = top_label(proba, y_index)
        sums = soft_bin_sums_value(
            conf, correct, w, n_bins=self.params["n_bins"], **self._kernel_args()[0]
        )
        self.mass_ += sums.mass
        self.conf_sum_ += sums.conf_sum
        self.acc_sum_ += sums.acc_sum
        self.weight_sum_ += float(w.sum())

    def _compute(self):
        from .._torch.kernels import soft_error_from_sums_value

        return soft_error_from_sums_value(
            self.mass_,
            self.conf_sum_,
            self.acc_sum_,
            self.weight_sum_,
            self.n_samples_,
            **self._kernel_args()[1],
        )


class _L2State(MetricState):
    """Debiased L2 error: per column and bin, the sums of :func:`bin_sums`.

    Equal-mass edges are the reference's midpoint edges on the scores the
    sketch keeps (up to 2**20 over all columns); beyond, the sketch's
    approximate equal-mass edges.
    """

    _sums = ("sums_",)

    def __init__(self, metric, params):
        self.n_passes = 2 if params.get("strategy") == "quantile" else 1
        self.edges_ = None
        self.sketch_ = None
        self.sums_ = None
        super().__init__(metric, params)

    def _n_columns(self, n_classes):
        return 1 if self.params["mode"] == "top_label" else n_classes

    def _init_classes(self, n_classes):
        super()._init_classes(n_classes)
        n_columns = self._n_columns(n_classes)
        n_bins = self.params["n_bins"]
        self.sums_ = np.zeros((n_columns, 5, n_bins))
        if self.n_passes == 1:
            self.edges_ = reference_edges(None, n_bins, "uniform")
        elif self.sketch_ is None:
            budget = _SKETCH_BUDGET // max(n_columns, 1) // _MIN_EXPONENT
            bits = int(np.clip(np.floor(np.log2(max(budget, 1))), 4, _TOP_EDGE_BITS))
            self.sketch_ = _Sketch(n_columns, bits)

    def _sketch_chunk(self, proba, y_index, w):
        keep = w > 0
        k = 0
        for scores, _ in column_blocks(proba, y_index, self.params["mode"]):
            for column in scores.T:
                self.sketch_.add(k, column[keep], w[keep])
                k += 1

    def _freeze_edges(self):
        n_bins, sketch = self.params["n_bins"], self.sketch_
        # padded with 1.0 (an empty bin) to n_bins edges per column
        self.edges_ = np.ones((n_bins, self._n_columns(self.n_classes_)))
        for k in range(self.edges_.shape[1]):
            if sketch.exact is not None and sketch.exact[k]:
                scores = np.concatenate([c[0] for c in sketch.exact[k]])
                edges = reference_edges(scores[:, None], n_bins, "quantile")[:, 0]
            else:  # approximate equal-mass edges
                edges = np.append(sketch.edges(k, n_bins)[1:-1], 1.0)
            self.edges_[: len(edges), k] = edges

    def _add_chunk(self, proba, y_index, w):
        n_bins, start = self.params["n_bins"], 0
        for scores, targets in column_blocks(proba, y_index, self.params["mode"]):
            stop = start + scores.shape[1]
            edges = self.edges_ if self.n_passes == 1 else self.edges_[:, start:stop]
            self.sums_[start:stop] += bin_sums(scores, targets, w, edges, n_bins)
            start = stop

    def _compute(self):
        squared = squared_errors(self.sums_, self.params["debias"])
        return combine(squared, self.params["mode"])


class _SpiegelhalterState(MetricState):
    """Spiegelhalter's Z: its numerator and variance are sums over rows."""

    _sums = ("numerator_", "variance_")

    def _init_classes(self, n_classes):
        super()._init_classes(n_classes)
        self.numerator_, self.variance_ = 0.0, 0.0

    def _add_chunk(self, proba, y_index, w):
        numerator, variance = spiegelhalter_sums(proba, y_index, w)
        self.numerator_ += numerator
        self.variance_ += variance

    def _compute(self):
        return spiegelhalter_from_sums(
            self.numerator_, self.variance_, self.params["alternative"]
        )


class _SelectiveState(MetricState):
    """AURC, E-AURC or AUGRC: these sort all the confidences, so the state
    keeps every row's 0-1 loss, confidence and weight (24 bytes a row,
    O(n), not fixed-size); exact, whatever the chunking."""

    def _init_classes(self, n_classes):
        super()._init_classes(n_classes)
        self.rows_ = []  # (loss, confidence, weight) chunks

    def _add_chunk(self, proba, y_index, w):
        loss = (np.argmax(proba, axis=1) != y_index).astype(np.float64)
        conf = np.asarray(proba.max(axis=1), dtype=np.float64)
        self.rows_.append((loss, conf, np.array(w, dtype=np.float64)))

    def _merge(self, other):
        self.rows_.extend(other.rows_)

    def _compute(self):
        from ._selective import AREAS

        loss, conf, w = map(np.concatenate, zip(*self.rows_))
        return AREAS[self.metric](loss, conf, w)


#: metric name -> (state class, parameter names, parameter constraints); the
#: defaults are the metric function's own (:func:`_defaults`)
_BINNED = {
    "n_bins": [Interval(Integral, 1, None, closed="left")],
    "labels": ["array-like", None],
}
_STRATEGY = {
    "strategy": [StrOptions({"uniform", "quantile"})],
    "closed": [StrOptions({"left", "right"})],
}
_REGISTRY = {
    "expected_calibration_error": (
        _TopLabelState,
        ("n_bins", "strategy", "norm", "closed", "labels"),
        {**_BINNED, **_STRATEGY, "norm": [StrOptions({"l1", "l2", "max"})]},
    ),
    "max_calibration_error": (
        _TopLabelState,
        ("n_bins", "strategy", "closed", "labels"),
        {**_BINNED, **_STRATEGY},
    ),
    "binned_statistics": (
        _TopLabelState,
        ("n_bins", "strategy", "closed", "labels"),
        {**_BINNED, **_STRATEGY},
    ),
    "classwise_calibration_error": (
        _ClasswiseState,
        ("n_bins", "strategy", "norm", "closed", "class_weight", "labels"),
        {
            **_BINNED,
            **_STRATEGY,
            "norm": [StrOptions({"l1", "l2", "max"})],
            "class_weight": ["array-like", None],
        },
    ),
    "ecce_binned_mean": (
        _ClasswiseState,
        ("n_bins", "class_weight", "labels"),
        {**_BINNED, "class_weight": ["array-like", StrOptions({"frequency"}), None]},
    ),
    "negative_log_likelihood": (
        _ProperState,
        ("eps", "labels"),
        {
            "eps": [Interval(Real, 0, 1, closed="neither")],
            "labels": ["array-like", None],
        },
    ),
    "brier_score": (_ProperState, ("labels",), {"labels": ["array-like", None]}),
    "soft_expected_calibration_error": (
        _SoftState,
        ("n_bins", "alpha", "q", "smoothing", "labels"),
        {
            **_BINNED,
            "alpha": [Interval(Real, 0, None, closed="neither")],
            "q": [Interval(Real, 0, None, closed="neither")],
            "smoothing": [Interval(Real, 0, None, closed="left")],
        },
    ),
    "soft_binned_calibration_error": (
        _SoftState,
        ("n_bins", "temperature", "p", "labels"),
        {
            **_BINNED,
            "temperature": [Interval(Real, 0, None, closed="neither")],
            "p": [Interval(Real, 0, None, closed="neither")],
        },
    ),
    "l2_calibration_error": (
        _L2State,
        ("n_bins", "strategy", "mode", "debias", "labels"),
        {
            **_BINNED,
            "strategy": [StrOptions({"uniform", "quantile"})],
            "mode": [StrOptions({"classwise", "top_label"})],
            "debias": ["boolean"],
        },
    ),
    "spiegelhalter_test": (
        _SpiegelhalterState,
        ("alternative", "labels"),
        {
            "alternative": [StrOptions({"two-sided", "greater", "less"})],
            "labels": ["array-like", None],
        },
    ),
    # selective prediction: exact, but the state keeps every row (O(n))
    "aurc": (_SelectiveState, ("labels",), {"labels": ["array-like", None]}),
    "eaurc": (_SelectiveState, ("labels",), {"labels": ["array-like", None]}),
    "augrc": (_SelectiveState, ("labels",), {"labels": ["array-like", None]}),
}
#: metrics that no fixed-size state computes exactly, and why
_NOT_MERGEABLE = {
    "cumulative_calibration_error": "it sorts all scores (Tygert's cumulative "
    "differences); ecce_binned_mean is the binned, mergeable variant",
    "cumulative_calibration_test": "it sorts all scores",
    "smooth_expected_calibration_error": "its kernel smoothing and bandwidth "
    "search need all scores at once",
    "local_calibration_error": "its kernel compares every pair of rows",
    "max_local_calibration_error": "its kernel compares every pair of rows",
    "local_calibration_errors": "its kernel compares every pair of rows",
    "effective_sample_size": "its kernel compares every pair of rows",
    "ess_profile": "its kernel compares every pair of rows",
    "maximum_mean_calibration_error": "its kernel compares every pair of rows "
    "(an exact merge would have to keep the rows)",
    "selective_risk": "it sorts all confidences; compute it in memory (aurc, "
    "eaurc and augrc have states that keep the rows)",
    "coverage_at_risk": "it sorts all confidences; compute it in memory (aurc, "
    "eaurc and augrc have states that keep the rows)",
}


def mergeable_metrics() -> list[str]:
    """Names of the metrics that :func:`metric_state` accepts."""
    return sorted(_REGISTRY)


@validate_params(
    {"metric": [str, callable]},
    prefer_skip_nested_validation=True,
)
def metric_state(metric, *, grouped=False, max_groups=None, **params) -> MetricState:
    """A mergeable state of a metric, filled chunk by chunk.

    ``state.update(y_true, y_proba, sample_weight=None)`` adds rows,
    ``state.merge(other)`` adds another state's rows and ``state.compute()``
    returns what the metric function gives on all those rows at once
    (to floating-point summation order), whatever the chunking. The state's
    size depends on the bins and classes only, so a metric runs over data of
    any size, in one process or as a tree reduction across many.

    Supported: :func:`expected_calibration_error` (any ``norm``),
    :func:`max_calibration_error`, :func:`classwise_calibration_error`,
    :func:`ecce_binned_mean`, :func:`negative_log_likelihood`,
    :func:`brier_score`, :func:`soft_expected_calibration_error`,
    :func:`soft_binned_calibration_error`, :func:`l2_calibration_error`
    (equal-mass edges: the reference's midpoints while the sketch keeps the
    scores), :func:`spiegelhalter_test`, and :func:`binned_statistics`
    (the top-label reliability-diagram statistics, returned as a
    :class:`BinStatistics`). The selective-prediction areas :func:`aurc`,
    :func:`eaurc` and :func:`augrc` are exact too, but sort every
    confidence: their state keeps each row's loss, confidence and weight
    (24 bytes a row), so its size grows with the rows. The cumulative
    (sorting), smooth, local and MMCE (pairwise) metrics have no
    fixed-size exact state and are refused.

    **Equal-mass bins** (``strategy="quantile"``) take two passes over the
    same rows: the first fills a sketch of the scores, ``next_pass()``
    turns it into edges, the second bins the rows on them. Up to 2**20
    scores in all (that many rows for top-label errors, ``2**20 /
    n_classes`` for classwise ones) the sketch keeps them, and the edges and
    the metric are exactly those of the function. Beyond, the sketch is a
    histogram over the float64 bit patterns of the scores (12 mantissa bits
    for the top-label confidence; for classwise errors about ``2**22 /
    n_classes`` buckets per class, at least 4 bits), so each inner edge is
    within a relative ``2**-bits`` of the exact quantile edge (0.02% for
    top-label) where the scores are dense, and the extreme edges are exact;
    an edge that may fall in a wider gap between scores raises an
    :class:`~skcal.exceptions.ApproximationWarning`. The error given the
    edges is exact.

    Parameters
    ----------
    metric : str or callable
        The metric function (e.g. :func:`expected_calibration_error`), its
        name or an alias in any case (``"ECE"``, ``"ece"``, ``"nll"``,
        ``"neg_log_loss"``).
    grouped : bool, default=False
        Return a :class:`~skcal.metrics.GroupedMetricState`: one state per
        group, ``update(..., groups=g)``, ``compute()`` a
        :class:`~skcal.metrics.GroupedResult`.
    max_groups : int, default=None
        The most groups a grouped state takes (None:
        :data:`~skcal.metrics.MAX_GROUPS`); more raise a ValueError.
    **params
        The metric's keyword parameters (``n_bins``, ``strategy``,
        ``labels``, ...), as for the function. ``labels`` is needed for
        labels other than integers ``0..n_classes-1``, since one chunk may
        not hold every class. ``sample_weight`` goes to ``update``.

    Returns
    -------
    MetricState or GroupedMetricState

    Examples
    --------
    >>> import numpy as np
    >>> from skcal.metrics import expected_calibration_error, metric_state
    >>> rng = np.random.default_rng(0)
    >>> proba = rng.dirichlet(np.ones(3), size=1000)
    >>> y = rng.integers(0, 3, 1000)
    >>> state = metric_state(expected_calibration_error, n_bins=10)
    >>> for rows in np.array_split(np.arange(1000), 7):
    ...     _ = state.update(y[rows], proba[rows])
    >>> batch = expected_calibration_error(y, proba, n_bins=10)
    >>> bool(abs(state.compute() - batch) < 1e-12)
    True
    """
    name = _state_name(metric)
    if name in _NOT_MERGEABLE:
        raise ValueError(
            f"{name} has no mergeable state: {_NOT_MERGEABLE[name]}. Mergeable: "
            f"{', '.join(mergeable_metrics())}."
        )
    if name not in _REGISTRY:
        close = difflib.get_close_matches(name, list(_REGISTRY), n=1)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        raise ValueError(
            f"No metric state for {metric!r}.{hint} Mergeable (by function name, "
            f"label or alias, any case): {', '.join(mergeable_metrics())}."
        )
    cls, names, constraints = _REGISTRY[name]
    defaults = _defaults(name, names)
    unknown = set(params) - set(defaults)
    if unknown:
        raise TypeError(
            f"{name} takes no parameter(s) {sorted(unknown)} in a metric state; "
            f"it takes {sorted(defaults)} (sample_weight goes to update())."
        )
    merged = {**defaults, **params}
    _validate(name, constraints, merged)
    if merged.get("labels") is not None:
        merged["labels"] = np.asarray(merged["labels"])
    if grouped:
        from ._groups import MAX_GROUPS, GroupedMetricState

        limit = MAX_GROUPS if max_groups is None else max_groups
        return GroupedMetricState(cls(name, merged), limit)
    return cls(name, merged)


def _state_name(metric) -> str:
    """The function name of ``metric``: a name of the shared table (any case
    or alias, :mod:`._names`), another name as given, or a function's name."""
    if not isinstance(metric, str):
        return getattr(metric, "__name__", "")
    entry = find_metric(metric)
    return metric if entry is None else entry.function


def _defaults(name: str, names: tuple) -> dict:
    """The defaults of the metric function ``name`` for the state's ``names``:
    one source of truth, its signature (``labels``, which a state takes even
    where the function does not, defaults to None)."""
    import inspect

    from .. import metrics

    given = inspect.signature(getattr(metrics, name)).parameters
    return {
        key: None if key == "labels" and key not in given else given[key].default
        for key in names
    }


def _validate(name: str, constraints: dict, params: dict) -> None:
    from sklearn.utils._param_validation import validate_parameter_constraints

    validate_parameter_constraints(constraints, params, caller_name=name)
