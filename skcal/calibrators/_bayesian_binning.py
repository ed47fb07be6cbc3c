"""Naeini's Bayesian binning family: BBQ and ENIR, one-vs-rest.

Both average many binary step maps of a class's probability, each weighted
by its relative model likelihood ``exp(-score / 2)`` (BIC or AIC), after
netcal's "elbow" cut of the models of negligible weight:

* BBQ (Naeini, Cooper & Hauskrecht 2015) averages histogram-binning maps
  of every bin count between ``N^(1/3) / 10`` and ``10 N^(1/3)``;
* ENIR (Naeini & Cooper 2016) averages the near-isotonic regressions along
  the path of the modified pool-adjacent-violators algorithm (Tibshirani,
  Hoefling & Tibshirani 2011), from the perfect fit to the isotonic one.

Every map is a right-closed step map ``(edges, values)``: ``p`` in
``(edges[b], edges[b + 1]]`` (the first bin closed) gets ``values[b]``,
netcal's convention; the average of step maps is the step map on the union
of their edges, so a fitted class holds one map.
"""

from __future__ import annotations

import numpy as np

from .._torch._progress import Progress
from ..base import BaseCalibrator
from ..utils._constants import BCE_LOG_FLOOR
from ..utils._docstrings import fill_doc
from ..utils._sklearn import StrOptions
from ..utils._validation import effective_sample_size
from ._one_vs_rest import OneVsRestCalibrator, map_transposed, probabilities_of

__all__ = ["BBQCalibrator", "ENIRCalibrator"]

#: netcal's elbow threshold on the gaps between sorted model weights,
#: relative to their variance.
_ELBOW_ALPHA = 1e-3


# ---------------------------------------------------------------- the models
def _log_likelihood(pos, neg, value):
    """``pos log(v) + neg log(1 - v)`` per entry, logs floored at -100."""
    with np.errstate(divide="ignore", invalid="ignore"):
        log_v = np.maximum(np.log(np.clip(value, 0.0, 1.0)), BCE_LOG_FLOOR)
        log_w = np.maximum(np.log1p(-np.clip(value, 0.0, 1.0)), BCE_LOG_FLOOR)
    return pos * log_v + neg * log_w


def _elbow_weights(log_lik, dof, n, score):
    """Indices and normalised weights of the models kept by netcal's elbow.

    The relative likelihood of a model is ``exp((min(s) - s) / 2)`` with
    ``s`` its BIC (``-2 L + dof log n``) or AIC (``-2 L + 2 dof``); sorted
    decreasingly, models are kept while consecutive weights tie, then while
    their gap exceeds ``1e-3`` times the weights' variance.
    """
    penalty = np.log(n) if score == "bic" else 2.0
    s = -2.0 * np.asarray(log_lik) + penalty * np.asarray(dof, dtype=np.float64)
    rel = np.exp((s.min() - s) / 2.0)
    order = np.argsort(rel, kind="stable")[::-1]
    ranked = rel[order]
    k, m = 0, rel.size
    while k < m - 1 and ranked[k] == ranked[k + 1]:
        k += 1
    variance = np.var(rel)
    while k < m - 1 and (ranked[k] - ranked[k + 1]) / variance > _ELBOW_ALPHA:
        k += 1
    kept = order[: k + 1]
    return kept, rel[kept] / rel[kept].sum()


def _step_map(edges, values, p):
    """The right-closed step map ``(edges, values)`` at ``p``."""
    if values.size == 1:
        return np.full_like(p, values[0])
    return values[np.searchsorted(edges[1:-1], p, side="left")]


def _merge_step_maps(maps, weights):
    """The weighted sum of step maps: a step map on the union of their edges."""
    edges = np.unique(np.concatenate([e for e, _ in maps]))
    if edges.size == 1:
        edges = np.repeat(edges, 2)
    values = np.zeros(edges.size - 1)
    for (e, v), w in zip(maps, weights):
        values += w * _step_map(e, v, edges[1:])
    return edges, values


def _bbq_bin_counts(n):
    """netcal's bin counts for ``n`` samples: ``N^(1/3) / 10`` to ``10 N^(1/3)``
    (at least 1, at most ``N / 5``)."""
    root = np.power(n, 1.0 / 3.0)
    low = int(max(1, np.floor(root / 10.0)))
    high = int(min(np.ceil(n / 5.0), np.ceil(root * 10.0)))
    return np.arange(low, max(low, high) + 1)


def _uniform_grids(counts):
    """``np.linspace(0, 1, b + 1)`` for every ``b`` of ``counts``, bit for bit
    (``i * (1 / b)``, the last edge 1), concatenated; and where each ends."""
    sizes = counts + 1
    ends = np.cumsum(sizes)
    i = np.arange(ends[-1]) - np.repeat(ends - sizes, sizes)
    edges = i * np.repeat(1.0 / counts, sizes)
    edges[ends - 1] = 1.0
    return edges, ends


def _bbq_fit_column(p, positive, weight, score):
    """BBQ of one class: ``(edges, values, kept bin counts, their weights)``.

    The column is sorted once; the weight and positive weight of every bin
    of every model are differences of the cumulative sums at the bin edges
    (one ``searchsorted`` for all models).
    """
    order = np.argsort(p, kind="stable")
    xs, w = p[order], weight[order]
    cum_w = np.concatenate([[0.0], np.cumsum(w)])
    cum_pos = np.concatenate([[0.0], np.cumsum(w * positive[order])])
    n = cum_w[-1]
    counts = _bbq_bin_counts(n)
    edges, ends = _uniform_grids(counts)
    idx = np.searchsorted(xs, edges, side="right")
    idx[ends - counts - 1], idx[ends - 1] = 0, xs.size  # clip into the end bins
    inner = np.ones(idx.size - 1, dtype=bool)
    inner[ends[:-1] - 1] = False  # the step from a model's last edge to the next
    total = np.diff(cum_w[idx])[inner]
    pos = np.diff(cum_pos[idx])[inner]
    centre = ((edges[:-1] + edges[1:]) / 2.0)[inner]
    values = np.divide(pos, total, out=centre, where=total > 0)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    log_lik = np.add.reduceat(_log_likelihood(pos, total - pos, values), starts)
    kept, model_weights = _elbow_weights(log_lik, counts, n, score)
    maps = [
        (
            edges[ends[m] - counts[m] - 1 : ends[m]],
            values[starts[m] : starts[m] + counts[m]],
        )
        for m in kept
    ]
    merged_edges, merged = _merge_step_maps(maps, model_weights)
    return merged_edges, merged, counts[kept], model_weights


def _nir_blocks(p, positive, weight):
    """Distinct sorted scores of positive weight, with their weights and
    positive weights (tied scores are one block: a map cannot split them)."""
    keep = weight > 0
    p, positive, weight = p[keep], positive[keep], weight[keep]
    order = np.argsort(p, kind="stable")
    x = p[order]
    new = np.empty(x.size, dtype=bool)
    new[:1] = True
    np.not_equal(x[1:], x[:-1], out=new[1:])
    starts = np.flatnonzero(new)
    total = np.add.reduceat(weight[order], starts)
    pos = np.add.reduceat((weight * positive)[order], starts)
    return x[starts], total, pos


def _nir_path(total, pos):
    """The near-isotonic path of the modified PAVA, one model per collision.

    Yields ``(values, starts, lambda)``: each group's value and first block,
    and the penalty of the model. Groups
    start as the runs of equal block means (the fit at ``lambda = 0``); each
    moves at the slope ``(violation on its left - violation on its right) /
    weight`` until two neighbours collide and merge (all collisions of the
    same ``lambda`` at once), until no violation is left (isotonic).
    """
    mean = pos / total
    first = np.concatenate([[True], mean[1:] != mean[:-1]])
    starts = np.flatnonzero(first)
    v, n = mean[starts], np.add.reduceat(total, starts)
    lam = 0.0
    while v.size > 1:
        ind = np.zeros(v.size + 1)
        ind[1:-1] = v[:-1] > v[1:]
        slopes = (ind[:-1] - ind[1:]) / n
        sd = slopes[:-1] - slopes[1:]
        t = np.full(sd.size, np.inf)
        np.divide(v[1:] - v[:-1], sd, out=t, where=sd != 0)
        t += lam
        nxt = t.min()
        if nxt < lam or nxt == np.inf:
            return
        v = v + slopes * (nxt - lam)
        keep = np.concatenate([[True], t != nxt])
        kept = np.flatnonzero(keep)
        v, n, starts = v[kept], np.add.reduceat(n, kept), starts[kept]
        lam = nxt
        yield v, starts, lam


def _nir_map(x, values, starts):
    """A model of the path as a step map: edges at the midpoints between
    groups."""
    mids = (x[starts[1:] - 1] + x[starts[1:]]) / 2.0
    return np.concatenate([[0.0], mids, [1.0]]), values


def _enir_fit_column(p, positive, weight, score):
    """ENIR of one class: ``(edges, values, kept lambdas' group counts, their
    weights)``. Two passes over the path: its models' scores, then the kept
    ones (the path is deterministic; storing every model would take memory
    quadratic in the number of groups)."""
    x, total, pos = _nir_blocks(p, positive, weight)
    n = total.sum()
    log_lik, dof = [], []
    for v, starts, _ in _nir_path(total, pos):
        group_pos = np.add.reduceat(pos, starts)
        group_neg = np.add.reduceat(total, starts) - group_pos
        log_lik.append(_log_likelihood(group_pos, group_neg, v).sum())
        dof.append(v.size)
    if not log_lik:  # isotonic from the start (or one group): that fit alone
        mean = pos / total
        first = np.flatnonzero(np.concatenate([[True], mean[1:] != mean[:-1]]))
        edges, values = _nir_map(x, mean[first], first)
        return edges, values, np.array([first.size]), np.ones(1)
    kept, model_weights = _elbow_weights(log_lik, dof, n, score)
    rank = {int(m): r for r, m in enumerate(kept)}
    maps = [None] * kept.size
    for m, (v, starts, _) in enumerate(_nir_path(total, pos)):
        if m in rank:
            maps[rank[m]] = _nir_map(x, v, starts)
    edges, values = _merge_step_maps(maps, model_weights)
    return edges, values, np.asarray(dof)[kept], model_weights


# ---------------------------------------------------------------- estimators
class _AveragedStepMaps(OneVsRestCalibrator):
    """What BBQ and ENIR share: per class, one averaged right-closed step map."""

    _parameter_constraints: dict = {
        **BaseCalibrator._parameter_constraints,
        "criterion": [StrOptions({"bic", "aic"})],
        "verbose": ["verbose"],
    }
    _shift_invariant = True
    _keeps_argmax = None

    def __init__(self, *, input="logits", classes=None, criterion="bic", verbose=0):
        self.input = input
        self.classes = classes
        self.criterion = criterion
        self.verbose = verbose

    def _fit_scores(self, scores, y_index, sample_weight):
        name = type(self).__name__
        self._progress = Progress(self.verbose, scores.shape[1], name, "class")
        try:
            with self._progress:
                super()._fit_scores(scores, y_index, sample_weight)
        finally:
            del self._progress

    def _start_maps(self, n_classes):
        self.bin_edges_, self.bin_values_ = [None] * n_classes, [None] * n_classes
        self.model_sizes_ = [np.zeros(0, dtype=np.int64)] * n_classes
        self.model_weights_ = [np.zeros(0)] * n_classes

    def _fit_class(self, k, scores, positive, sample_weight):
        if sample_weight is None:
            sample_weight = np.ones(scores.size)
        # relative weights, summing to Kish's effective sample size: the
        # number of samples of the bin counts and of the BIC
        w = sample_weight * (effective_sample_size(sample_weight) / sample_weight.sum())
        edges, values, sizes, weights = self._fit_column(
            scores, positive.astype(np.float64), w, self.criterion
        )
        self.bin_edges_[k], self.bin_values_[k] = edges, values
        self.model_sizes_[k], self.model_weights_[k] = sizes, weights
        self._progress.step(f"class {k}: {sizes.size} models kept")
        return True

    def _fill_absent(self, present):
        classes = np.flatnonzero(present)
        edges, values = _merge_step_maps(
            [(self.bin_edges_[k], self.bin_values_[k]) for k in classes],
            np.full(classes.size, 1.0 / classes.size),
        )
        for k in np.flatnonzero(~present):
            self.bin_edges_[k], self.bin_values_[k] = edges, values

    def _calibrated_proba(self, logits, P=None):
        P = probabilities_of(logits, P)
        return map_transposed(P, logits, self._map_column)

    def _torch_map(self):
        from .._torch._export_piecewise import StepMap

        return StepMap(self.bin_edges_, self.bin_values_, closed="right"), False

    def _map_column(self, k, p):
        return _step_map(self.bin_edges_[k], self.bin_values_[k], p)


#: What BBQ and ENIR document alike: the note on many classes, the
#: parameters and the first and last attributes.
_fill_doc = fill_doc(
    shared="""\
    **Many classes.** Each class's map is learned from that class's own
    positives, one-vs-rest: with many classes and few calibration rows per
    class, the renormalised rows can score a higher log loss than the
    uncalibrated scores; prefer temperature scaling or a structured map
    there, or let :class:`~skcal.CalibratorSearchCV` choose.

    Parameters
    ----------
    input : {"logits", "proba"}, default="logits"
        What ``X`` holds; logits are turned into probabilities by softmax.
    classes : array-like of shape (n_classes,), default=None
        The label of each column of ``X``.
    criterion : {"bic", "aic"}, default="bic"
        The score whose relative likelihood ``exp(-score / 2)`` weights the
        models.
    verbose : int, default=0
        0: silent; 1: a progress bar over the classes (stderr); 2: also a
        line per class.

    Attributes
    ----------
    bin_edges_ : list of ndarray
        Per class, the edges of the averaged step map.
    bin_values_ : list of ndarray
        Per class, its value on each bin (one fewer than its edges).
""",
    attributes="""\
    model_weights_ : list of ndarray
        Per class, their weights (summing to 1).
    classes_ : ndarray of shape (n_classes,)
        Label of each column.
    n_features_in_ : int
        Number of columns of ``X``.
""",
)


@_fill_doc
class BBQCalibrator(_AveragedStepMaps):
    """One-vs-rest Bayesian Binning into Quantiles (BBQ).

    For each class ``k``, equal-width histogram-binning maps of ``p_k``
    against ``y == k`` are fitted for every bin count ``B`` from
    ``max(1, floor(N^(1/3) / 10))`` to ``min(ceil(N / 5), ceil(10 N^(1/3)))``
    (``N`` calibration samples; Naeini, Cooper & Hauskrecht 2015), and
    averaged with weights ``exp(-score / 2)``, ``score`` the BIC (``-2 log L
    + B log N``) or AIC of the model. As in netcal's ``BBQ``, each bin holds
    its frequency of ``y == k`` (an empty bin its centre), bins are
    right-closed (``(l, u]``, the first closed), and the models of
    negligible weight are dropped by netcal's elbow rule (sorted weights
    kept while their consecutive gaps exceed 1e-3 times their variance).
    The average is one step map on the union of the kept models' edges.
    Rows are renormalised to sum to 1 after flooring the values at 1e-12;
    a class without calibration sample gets the mean of the other maps.

    The authors' code scores the models with a BDeu marginal likelihood,
    uses equal-frequency bins and smooths each bin's frequency toward its
    scores; this is netcal's variant (BIC, equal-width bins, raw
    frequencies), the one in common use, whose predictions it reproduces
    (to 1e-6: netcal scores its models in float32). Sample weights are
    relative: ``N`` is Kish's effective sample size ``(sum w)^2 / sum w^2``
    and the weights are rescaled to sum to it. All models of a class are
    fitted from one sort of its column: ``O(N log N + N^(2/3))`` per class.

    {shared}
    model_sizes_ : list of ndarray
        Per class, the bin counts of the kept models (empty for a class
        without calibration sample).
    {attributes}

    References
    ----------
    Naeini, M. P., Cooper, G. F. and Hauskrecht, M. (2015). Obtaining well
    calibrated probabilities using Bayesian binning. AAAI 2015.

    Examples
    --------
    >>> import numpy as np
    >>> from skcal import BBQCalibrator
    >>> from skcal.utils._testing import make_miscalibrated_logits
    >>> logits, y = make_miscalibrated_logits(1000, 3, temperature=2.0, random_state=0)
    >>> bbq = BBQCalibrator().fit(logits, y)
    >>> proba = bbq.predict_proba(logits)
    >>> proba.shape, bool(np.allclose(proba.sum(axis=1), 1.0))
    ((1000, 3), True)
    >>> bool(np.isclose(bbq.model_weights_[0].sum(), 1.0))
    True
    """

    _fit_column = staticmethod(_bbq_fit_column)

    def n_free_parameters(self, n_classes, n_features=None):
        """``C``: at least one bin per class (non-parametric: the averaged
        models' bins grow with the data)."""
        return n_classes


@_fill_doc
class ENIRCalibrator(_AveragedStepMaps):
    """One-vs-rest Ensemble of Near-Isotonic Regressions (ENIR).

    For each class ``k``, the modified pool-adjacent-violators algorithm
    (Tibshirani, Hoefling & Tibshirani 2011) follows the path of the
    near-isotonic regressions of ``y == k`` on ``p_k``, from the perfect
    fit (``lambda = 0``) to the isotonic one: groups of samples move at the
    slope set by their order violations until two neighbours collide and
    merge, each collision giving a model. The models after each collision
    are averaged with weights ``exp(-score / 2)``, ``score`` their BIC
    (``-2 log L + G log N``, ``G`` groups) or AIC (Naeini & Cooper 2016),
    after netcal's elbow rule drops those of negligible weight. Each model
    is a step map with its steps midway between the scores of neighbouring
    groups (right-closed, as in netcal's ``ENIR``); the average is one step
    map. Tied scores are one block (a map cannot split them). Rows are
    renormalised to sum to 1 after flooring the values at 1e-12; a class
    without calibration sample gets the mean of the other maps.

    This is netcal's ``ENIR`` with two bugs of its path fixed (netcal
    updates each model in place to the next one's values, and a chain of
    simultaneous collisions loses a group's range, whose scores then map
    to 0); with them fixed, the predictions agree to 1e-7. netcal also
    fails on a class whose sorted scores already order its labels (here:
    that isotonic fit alone). The authors' code interpolates linearly
    between the training scores instead of stepping. Sample weights are
    relative, as in :class:`BBQCalibrator`.

    The path has at most as many models as the class has runs of equal
    labels in score order: its cost is quadratic in ``min(positives,
    negatives)`` of each class (vectorised per collision), so many classes
    with few positives each are cheap, a balanced class of 10^5 rows is not.

    {shared}
    model_sizes_ : list of ndarray
        Per class, the group counts of the kept models (empty for a class
        without calibration sample).
    {attributes}

    References
    ----------
    Naeini, M. P. and Cooper, G. F. (2016). Binary classifier calibration
    using an ensemble of near isotonic regression models. ICDM 2016.

    Examples
    --------
    >>> import numpy as np
    >>> from skcal import ENIRCalibrator
    >>> from skcal.utils._testing import make_miscalibrated_logits
    >>> logits, y = make_miscalibrated_logits(1000, 3, temperature=2.0, random_state=0)
    >>> enir = ENIRCalibrator().fit(logits, y)
    >>> proba = enir.predict_proba(logits)
    >>> proba.shape, bool(np.allclose(proba.sum(axis=1), 1.0))
    ((1000, 3), True)
    """

    _fit_column = staticmethod(_enir_fit_column)

    def n_free_parameters(self, n_classes, n_features=None):
        """``C``: at least one group per class (non-parametric: the averaged
        models' groups grow with the data)."""
        return n_classes
