"""Venn-Abers predictors: inductive (IVAP) and cross (CVAP), multiclass.

A Venn-Abers predictor (Vovk, Petej & Fedorova 2015) calibrates a binary
score ``s`` by two isotonic regressions of the calibration labels on the
calibration scores, each with the test object added: once with label 0,
giving ``p0``, once with label 1, giving ``p1``. The pair ``[p0, p1]`` is a
multiprobability prediction (one of the two is valid); the merged
probability ``p1 / (1 - p0 + p1)`` minimises the worst-case log loss.

Both isotonic regressions, for every possible position of the test object
at once, come from the greatest convex minorant of the cumulative sum
diagram (Vovk et al.'s Algorithms 1 to 4): two stack passes over the
sorted calibration scores, ``O(n log n)`` for the sort and ``O(n)`` after
it. A test score then costs one binary search per table. The binary
problems of a multiclass fit (one per class or per pair, and per fold) are
swept together, one vectorised step per block for all of them, in batches
whose work arrays hold at most 4 Mi entries; a few problems are swept one
by one on Python floats, which is faster there.
"""

from __future__ import annotations

import warnings
from numbers import Integral

import numpy as np
from sklearn.model_selection import StratifiedKFold
from sklearn.utils.validation import check_is_fitted

from .._torch._progress import Progress
from ..base import BaseCalibrator
from ..utils._constants import FLOOR_BEFORE_LOG
from ..utils._sklearn import Interval, StrOptions
from ..utils._softmax import softmax_into
from ..utils._validation import check_probabilities, check_scores_shape

__all__ = ["VennAbersCalibrator", "venn_abers_tables"]

#: One-vs-one fits and evaluates one predictor per pair of classes: every
#: predicted row reads C (C - 1) / 2 tables. Refused above this many classes
#: (4,950 pairs, about 50 times the look-ups of one-vs-rest per row; 1,000
#: classes would be 499,500 pairs per row).
MAX_OVO_CLASSES = 100


#: Entries of one ``(problems, blocks)`` work array: the binary problems are
#: processed in batches of at most this many (32 MiB per array).
_BATCH_ENTRIES = 1 << 22


def _cross(ax, ay, bx, by, cx, cy):
    """Twice the signed area of the triangles ``a, b, c`` (> 0: a left turn)."""
    return (bx - ax) * (cy - by) - (by - ay) * (cx - bx)


def _hull(px, py, n_points):
    """Stacks of the lower convex hulls of the first ``n_points[r]`` points
    ``(px[:, r], py[:, r])`` of each column ``r`` (one stack per column:
    level ``l`` of every stack is a contiguous row), and each top's level."""
    width, m = px.shape
    rows = np.arange(m)
    SX, SY = np.empty((width, m)), np.empty((width, m))
    sx, sy = SX.reshape(-1), SY.reshape(-1)
    SX[:2], SY[:2] = px[:2], py[:2]
    h = np.ones(m, dtype=np.intp)
    for i in range(2, width):
        active = i < n_points
        if not active.any():
            break
        x, y = px[i], py[i]
        while True:  # pop the tops that do not turn left towards the point
            top = h * m + rows
            pop = active & (h >= 1)
            below = top - m
            pop &= _cross(sx[below], sy[below], sx[top], sy[top], x, y) <= 0
            if not pop.any():
                break
            h -= pop
        h += active
        at = (h * m + rows)[active]
        sx[at], sy[at] = x[active], y[active]
    return SX, SY, h


def _upper_tables(X, Y, k, t):
    """``p1`` of the test object before each block, then 1, per row.

    Vovk et al.'s Algorithms 1 and 2 on the cumulative sum diagrams ``P_i =
    (X[r, i], Y[r, i])``, ``i <= k[r]``, all rows at once: the convex
    minorant of ``P_-1 = (-t, -t), P_0, ...``; then, as the test object
    (label 1, weight ``t``) moves right past block ``i``, ``P_(i-1)``
    becomes ``P_(i-2) + P_i - P_(i-1)`` and the corner of the minorant at
    the test object is updated on the (reversed) stack. The work arrays are
    transposed: step ``i`` of every problem is a contiguous row.
    """
    m, width = X.shape[0], X.shape[1] + 1
    rows = np.arange(m)
    px, py = np.empty((width, m)), np.empty((width, m))
    px[0], py[0] = -t, -t
    px[1:], py[1:] = X.T, Y.T
    SX, SY, h = _hull(px, py, k + 2)
    reverse = np.maximum(h - np.arange(width)[:, None], 0)
    SX, SY = np.take_along_axis(SX, reverse, 0), np.take_along_axis(SY, reverse, 0)
    sx, sy = SX.reshape(-1), SY.reshape(-1)
    table = np.ones((width - 1, m))
    with np.errstate(divide="ignore", invalid="ignore"):  # finished problems
        for i in range(1, width - 1):
            active = i <= k
            if not active.any():
                break
            top = h * m + rows
            tx, ty, nx, ny = sx[top], sy[top], sx[top - m], sy[top - m]
            np.copyto(table[i - 1], (ny - ty) / (nx - tx), where=active)
            qx = px[i - 1] + px[i + 1] - px[i]  # P_(i-2) + P_i - P_(i-1)
            qy = py[i - 1] + py[i + 1] - py[i]
            px[i], py[i] = qx, qy
            # below the corner's line (tx < nx): the corner moves
            below = active & ((qy - ty) * (nx - tx) < (ny - ty) * (qx - tx))
            if not below.any():
                continue
            h -= below
            while True:
                top = h * m + rows
                pop = below & (h >= 1)
                pop &= _cross(qx, qy, sx[top], sy[top], sx[top - m], sy[top - m]) <= 0
                if not pop.any():
                    break
                h -= pop
            h += below
            at = (h * m + rows)[below]
            sx[at], sy[at] = qx[below], qy[below]
    return table.T


def _upper_table(X, Y, t):
    """:func:`_upper_tables` of one diagram, on Python floats: a loop of
    scalar steps beats numpy's per-call cost when there are few rows."""
    k = len(X) - 1
    px, py = [-t, *X], [-t, *Y]
    stack = [(px[0], py[0]), (px[1], py[1])]
    for i in range(2, k + 2):
        x, y = px[i], py[i]
        while len(stack) > 1 and _cross(*stack[-2], *stack[-1], x, y) <= 0:
            stack.pop()
        stack.append((x, y))
    stack.reverse()
    table = [1.0] * (k + 1)
    for i in range(1, k + 1):
        (tx, ty), (nx, ny) = stack[-1], stack[-2]
        table[i - 1] = (ny - ty) / (nx - tx)
        px[i] = px[i - 1] + px[i + 1] - px[i]
        py[i] = py[i - 1] + py[i + 1] - py[i]
        qx, qy = px[i], py[i]
        if (qy - ty) * (nx - tx) >= (ny - ty) * (qx - tx):
            continue
        stack.pop()
        while len(stack) > 1 and _cross(qx, qy, *stack[-1], *stack[-2]) <= 0:
            stack.pop()
        stack.append((qx, qy))
    return table


#: Below this many problems, their tables are computed one by one.
_MIN_BATCH = 32


def _cumulative(a):
    out = np.zeros((a.shape[0], a.shape[1] + 1))
    np.cumsum(a, axis=1, out=out[:, 1:])
    return out


def _tables_of_one(weight, positive, t):
    """:func:`_tables_of_blocks` of one row of blocks, by :func:`_upper_table`."""
    zero = np.zeros(1)
    cumulative = [
        np.concatenate([zero, np.cumsum(a)]).tolist()
        for a in (weight, positive, weight[::-1], (weight - positive)[::-1])
    ]
    upper = _upper_table(cumulative[0], cumulative[1], t)
    mirrored = _upper_table(cumulative[2], cumulative[3], t)
    return 1.0 - np.array(mirrored[::-1]), np.array(upper)


def _tables_of_blocks(weight, positive, k, t):
    """``(p0, p1)`` tables of rows of blocks (weights, positive weights; the
    first ``k[r]`` of row ``r``). ``p0`` is ``p1`` of the mirror image:
    scores negated, labels flipped, read backwards and subtracted from 1."""
    if len(k) < _MIN_BATCH:
        return [
            _tables_of_one(weight[r, : k[r]], positive[r, : k[r]], t)
            for r in range(len(k))
        ]
    upper = _upper_tables(_cumulative(weight), _cumulative(positive), k, t)
    L = weight.shape[1]
    reverse = np.maximum(k[:, None] - 1 - np.arange(L), 0)
    valid = np.arange(L) < k[:, None]
    mirror_weight = np.where(valid, np.take_along_axis(weight, reverse, 1), 0.0)
    negative = np.take_along_axis(weight - positive, reverse, 1)
    mirror_positive = np.where(valid, negative, 0.0)
    mirrored = _upper_tables(
        _cumulative(mirror_weight), _cumulative(mirror_positive), k, t
    )
    return [
        (1.0 - mirrored[r, : k[r] + 1][::-1], upper[r, : k[r] + 1].copy())
        for r in range(len(k))
    ]


def _tables_batch(problems, t):
    """:func:`venn_abers_tables` of each ``(scores, labels, weights)``."""
    knots, blocks = [], []
    for scores, labels, weights in problems:
        keep = weights > 0
        c, block = np.unique(scores[keep], return_inverse=True)
        w, hits = weights[keep], (labels * weights)[keep]
        knots.append(c)
        blocks.append(
            (
                np.bincount(block, weights=w, minlength=c.size),
                np.bincount(block, weights=hits, minlength=c.size),
            )
        )
    k = np.array([c.size for c in knots], dtype=np.intp)
    weight = np.zeros((len(k), int(k.max(initial=0))))
    positive = np.zeros(weight.shape)
    for r, (w, hits) in enumerate(blocks):
        weight[r, : k[r]], positive[r, : k[r]] = w, hits
    tables = _tables_of_blocks(weight, positive, k, t)
    # slopes of the hull, which rounding can put an ulp outside [0, 1]
    return [
        (c, np.clip(p0, 0.0, 1.0), np.clip(p1, 0.0, 1.0))
        for c, (p0, p1) in zip(knots, tables)
    ]


def venn_abers_tables(scores, labels, sample_weight=None, test_weight=1.0):
    """The Venn-Abers tables of a binary calibration set.

    Parameters
    ----------
    scores : ndarray of shape (n_samples,)
        Calibration scores (any increasing transform gives the same tables).
    labels : ndarray of shape (n_samples,)
        Whether each sample is positive (0 or 1).
    sample_weight : ndarray of shape (n_samples,), default=None
        Non-negative weights (a sample of weight 2 counts twice); rows of
        weight 0 are dropped.
    test_weight : float, default=1.0
        The weight of the test object added to each isotonic regression.

    Returns
    -------
    knots : ndarray of shape (k,)
        The distinct calibration scores, sorted.
    p0, p1 : ndarray of shape (k + 1,)
        For a test score ``s``, ``p0[searchsorted(knots, s, "right")]`` and
        ``p1[searchsorted(knots, s, "left")]`` are the isotonic fits at ``s``
        of the calibration set with ``(s, 0)``, respectively ``(s, 1)``,
        added (tied scores pooled, as scikit-learn's isotonic regression
        does). Without calibration samples they are ``[0]`` and ``[1]``.
    """
    scores = np.asarray(scores, dtype=np.float64)
    labels = np.asarray(labels, dtype=np.float64)
    if sample_weight is None:
        sample_weight = np.ones(scores.shape)
    weights = np.asarray(sample_weight, dtype=np.float64)
    return _tables_batch([(scores, labels, weights)], float(test_weight))[0]


def _batches(subproblems):
    """Consecutive lists of ``subproblems`` whose ``(problems, largest)``
    work arrays hold at most :data:`_BATCH_ENTRIES` entries (one at least)."""
    batch, largest = [], 1
    for item in subproblems:
        size = max(item[1].size, largest)
        if batch and (len(batch) + 1) * size > _BATCH_ENTRIES:
            yield batch
            batch, size = [], max(item[1].size, 1)
        batch.append(item)
        largest = size
    if batch:
        yield batch


def _lookup(tables, s):
    """``(p0, p1)`` of the scores ``s`` in ``(knots, p0, p1)``: one binary
    search, the right side of a tie found by comparing with its knot."""
    knots, p0, p1 = tables
    left = np.searchsorted(knots, s, side="left")
    if knots.size == 0:
        return p0[left], p1[left]
    tie = knots[np.minimum(left, knots.size - 1)] == s
    return p0[left + tie], p1[left]


def _normalised_bounds(low, high):
    """Bounds of ``m_k / sum_j m_j`` over the box ``low <= m <= high`` (one
    row per class): increasing in ``m_k`` and decreasing in the others, the
    ratio is lowest at ``low_k / (low_k + sum_(j != k) high_j)`` and highest
    at ``high_k / (high_k + sum_(j != k) low_j)``; 0 / 0 gives [0, 1]."""
    others_high = np.maximum(high.sum(axis=0) - high, 0.0)
    others_low = np.maximum(low.sum(axis=0) - low, 0.0)
    lower, upper = np.zeros(low.shape), np.ones(low.shape)
    np.divide(low, low + others_high, out=lower, where=low + others_high > 0)
    np.divide(high, high + others_low, out=upper, where=high + others_low > 0)
    return lower, upper


class VennAbersCalibrator(BaseCalibrator):
    """Inductive and cross Venn-Abers predictors, one-vs-rest or one-vs-one.

    A Venn-Abers predictor (Vovk, Petej & Fedorova, 2015) turns a binary
    score ``s`` into two probabilities: ``p0`` and ``p1``, the isotonic
    regressions of the calibration labels on the calibration scores, each
    fitted with the test object added with label 0, respectively 1, and
    read at ``s``. One of them is perfectly calibrated under
    exchangeability; :meth:`predict_proba` returns their merge ``p1 / (1 -
    p0 + p1)`` (the probability of least worst-case log loss), which lies
    in ``[p0, p1]``. The tables of every test
    position are computed at once (the convex-minorant Algorithms 1 to 4 of
    the paper, two stack passes after one sort), so a prediction is a binary
    search, never a refitted isotonic regression.

    **Multiclass** (Manokhin, 2017), as the ``venn-abers`` and MAPIE
    packages do with a fitted classifier's probabilities:

    * ``strategy="ovr"``: one predictor per class ``k``, of ``p_k`` against
      ``y == k``; the merged probabilities are divided by their row sum.
    * ``strategy="ovo"``: one predictor per pair ``i < j``, of ``p_j / (p_i
      + p_j)`` on the calibration rows of the two classes against ``y ==
      j``; the pairwise merged probabilities are coupled by ``p_i = 1 /
      (sum_j 1 / p_(i vs j) - (C - 2))`` (Price et al., 1995) and divided by
      their row sum. It is refused above 100 classes: the pairs grow as
      ``C^2`` and every row reads all of them (1,000 classes: 499,500).

    With two classes both are the single predictor of ``p_1`` against ``y
    == classes_[1]``.

    **Intervals.** :meth:`predict_interval` returns, by default, an interval
    of each reported probability: the range of :meth:`predict_proba` when
    the value of every binary problem ranges over its ``[p0, p1]``, which
    contains the reported probability. With more than two classes the raw
    pairs do not: the merged one-vs-rest values are divided by their row
    sum, which moves them out of their own ``[p0, p1]`` (on real 6- to
    26-class tasks, most entries). ``predict_interval(X, kind="binary")``
    gives the raw pairs of the binary problems.

    **Probabilities as input.** With ``input="proba"`` the binary problems
    read the given probabilities themselves (validated, not renormalised):
    equal probabilities stay ties, as in the ``venn-abers`` package, where
    the softmax of their logs would split them by rounding.

    **Cross Venn-Abers** (``method="cross"``): the calibration rows of each
    binary problem are split into ``n_splits`` stratified folds (shuffled
    with ``random_state``), each fold gives one predictor, and the
    ``(p0, p1)`` of the folds are pooled by geometric means, ``p1 = GM(p1)``
    and ``1 - p0 = GM(1 - p0)``, whose merge is the cross Venn-Abers
    probability of the paper (log loss). This is the ``venn-abers``
    package's ``VennAbersCV`` with a frozen classifier: a score calibrator
    has nothing to refit, so the folds only split the calibration set.

    **Weights.** ``sample_weight`` are frequency weights: a row of weight 2
    counts as two rows in both isotonic regressions, and the test object
    counts as the lightest calibration row (weight 1 when all weights are 1,
    as in the paper). Only the ratios of the weights matter.

    A class absent from the calibration labels keeps its column: its
    one-vs-rest predictor has no positive, so its ``p0`` is 0 and its ``p1``
    the weight of the test object in the regression's last pool (a
    pair without any calibration row gives the vacuous ``[0, 1]``).

    Parameters
    ----------
    input : {"logits", "proba"}, default="logits"
        What ``X`` holds; logits are turned into probabilities by softmax.
    classes : array-like of shape (n_classes,), default=None
        The label of each column of ``X``.
    strategy : {"ovr", "ovo"}, default="ovr"
        One-vs-rest or one-vs-one decomposition (see above).
    method : {"inductive", "cross"}, default="inductive"
        One predictor on all calibration rows (IVAP), or ``n_splits``
        pooled predictors (CVAP).
    n_splits : int, default=5
        Folds of ``method="cross"`` (a binary problem whose larger class
        has fewer rows than folds gets one predictor on all of them).
    random_state : int, RandomState instance or None, default=None
        Shuffles the folds of ``method="cross"``; the same for every binary
        problem when it is an int (as the reference implementation does).
    verbose : int, default=0
        Show a progress bar over the binary problems (tqdm, on stderr).

    Attributes
    ----------
    problems_ : ndarray of shape (n_problems, 2)
        The binary problems ``(i, j)``: class ``j`` against class ``i``
        (``i = -1``: against the rest).
    knots_, p0_, p1_ : list of list of ndarray
        Per problem and fold, the tables of :func:`venn_abers_tables`.
    test_weight_ : float
        The weight of the test object (the smallest positive weight).
    classes_ : ndarray of shape (n_classes,)
        Label of each column.
    n_features_in_ : int
        Number of columns of ``X``.

    Notes
    -----
    Compared with the reference implementations: the ``venn-abers`` package
    (1.5.4) gives the same ``(p0, p1)`` (its Algorithms 1 to 4 rescan the
    diagram at each corner, ``O(n^2)`` in the worst case, where the stacks
    here are ``O(n)``); MAPIE 1.6 returns, for a test score above every
    calibration score, the last corner's slope as ``p1`` where the isotonic
    regression with the test object added gives 1 (it drops the line
    ``p1[-1] = 1`` of the package it was copied from).

    References
    ----------
    .. [1] V. Vovk, I. Petej and V. Fedorova, "Large-scale probabilistic
       predictors with and without guarantees of validity", NeurIPS 2015.
    .. [2] V. Manokhin, "Multi-class probabilistic classification using
       inductive and cross Venn-Abers predictors", COPA 2017, PMLR 60.

    Examples
    --------
    >>> import numpy as np
    >>> from skcal import VennAbersCalibrator
    >>> rng = np.random.default_rng(0)
    >>> logits = rng.normal(size=(500, 3))
    >>> y = np.array([rng.choice(3, p=np.exp(z) / np.exp(z).sum()) for z in logits])
    >>> va = VennAbersCalibrator().fit(3 * logits, y)  # over-confident scores
    >>> proba = va.predict_proba(3 * logits[:4])
    >>> proba.shape
    (4, 3)
    >>> lower, upper = va.predict_interval(3 * logits[:4])
    >>> bool(np.all((lower <= proba) & (proba <= upper)))
    True
    >>> p0, p1 = va.predict_interval(3 * logits[:4], kind="binary")
    >>> bool(np.all(p0 <= p1))
    True
    """

    _parameter_constraints: dict = {
        **BaseCalibrator._parameter_constraints,
        "strategy": [StrOptions({"ovr", "ovo"})],
        "method": [StrOptions({"inductive", "cross"})],
        "n_splits": [Interval(Integral, 2, None, closed="left")],
        "random_state": ["random_state"],
        "verbose": ["verbose"],
    }
    _shift_invariant = True
    # input="proba": isotonic fits of the probabilities as given, no logs,
    # validated by _fit (not renormalised)
    _reads = "given probabilities"

    def __init__(
        self,
        *,
        input="logits",
        classes=None,
        strategy="ovr",
        method="inductive",
        n_splits=5,
        random_state=None,
        verbose=0,
    ):
        self.input = input
        self.classes = classes
        self.strategy = strategy
        self.method = method
        self.n_splits = n_splits
        self.random_state = random_state
        self.verbose = verbose

    def n_free_parameters(self, n_classes, n_features=None):
        """One isotonic map per binary problem: ``C`` (one-vs-rest) or ``C (C -
        1) / 2`` (one-vs-one), 1 for two classes (non-parametric: the steps
        grow with the data)."""
        if n_classes <= 2:
            return 1
        return n_classes if self.strategy == "ovr" else n_classes * (n_classes - 1) // 2

    # ------------------------------------------------------------------- fit
    def _problems(self, n_classes: int) -> np.ndarray:
        if n_classes == 2:
            return np.array([[0, 1]])
        if self.strategy == "ovr":
            return np.column_stack([np.full(n_classes, -1), np.arange(n_classes)])
        if n_classes > MAX_OVO_CLASSES:
            raise ValueError(
                f"strategy='ovo' fits one Venn-Abers predictor per pair of classes "
                f"and reads every pair for every predicted row: {n_classes} classes "
                f"make {n_classes * (n_classes - 1) // 2} pairs. It is refused above "
                f"{MAX_OVO_CLASSES} classes (4,950 pairs); use strategy='ovr' "
                "(one predictor per class)."
            )
        i, j = np.triu_indices(n_classes, k=1)
        return np.column_stack([i, j])

    @staticmethod
    def _binary_scores(columns, i: int, j: int, rows=slice(None)) -> np.ndarray:
        """The scores of problem ``(i, j)``: ``p_j``, or ``p_j / (p_i + p_j)``
        for a pair (0.5 where both are 0), of the ``rows`` of the
        probability columns ``columns[k]``."""
        if i < 0 or len(columns) == 2:
            return columns[j][rows]
        pi, pj = columns[i][rows], columns[j][rows]
        total = pi + pj
        out = np.full(total.shape, 0.5)
        np.divide(pj, total, out=out, where=total > 0)
        return out

    def _folds(self, labels: np.ndarray) -> list:
        n = labels.size
        largest = np.bincount(labels.astype(np.intp), minlength=1).max() if n else 0
        if self.method == "inductive" or largest < self.n_splits:
            return [np.arange(n)]  # too few rows to split
        cv = StratifiedKFold(
            self.n_splits, shuffle=True, random_state=self.random_state
        )
        with warnings.catch_warnings():
            # a class with fewer rows than folds misses some folds: expected
            # in small one-vs-one pairs, and harmless (a fold of one label)
            warnings.filterwarnings("ignore", "The least populated class", UserWarning)
            return [test for _, test in cv.split(np.zeros((n, 1)), labels)]

    def _subproblems(self, columns, y_index, sample_weight):
        """``(problem, scores, labels, weights)`` of every problem and fold."""
        for m, (i, j) in enumerate(self.problems_):
            rows = sample_weight > 0
            if i >= 0 and len(columns) > 2:
                rows &= (y_index == i) | (y_index == j)
            rows = np.flatnonzero(rows)
            scores = self._binary_scores(columns, i, j, rows)
            labels = (y_index[rows] == j).astype(np.float64)
            weights = sample_weight[rows]
            for fold in self._folds(labels):
                yield m, scores[fold], labels[fold], weights[fold]

    def _fit(self, scores, y_index, sample_weight):
        """With ``input="proba"``, the binary problems read the given
        probabilities themselves: no round trip through their logs, which
        would break their ties."""
        if self.input == "proba":  # clipped to [0, 1], not renormalised
            P = scores.validated(renormalize=False)  # see _columns
            self._fit_columns(np.ascontiguousarray(P.T), y_index, sample_weight)
            return
        logits = scores
        columns = softmax_into(logits, np.empty(logits.shape)).T.copy()
        self._fit_columns(columns, y_index, sample_weight)

    def _fit_columns(self, columns, y_index, sample_weight):
        """Fit every problem on the probability columns (one row per class)."""
        self.problems_ = self._problems(len(columns))
        self.test_weight_ = float(sample_weight[sample_weight > 0].min())
        n_problems = len(self.problems_)
        self.knots_ = [[] for _ in range(n_problems)]
        self.p0_ = [[] for _ in range(n_problems)]
        self.p1_ = [[] for _ in range(n_problems)]
        name = type(self).__name__
        with Progress(self.verbose, n_problems, name, "problem") as progress:
            done = 0
            for batch in _batches(self._subproblems(columns, y_index, sample_weight)):
                tables = _tables_batch([b[1:] for b in batch], self.test_weight_)
                for (m, *_), (knots, p0, p1) in zip(batch, tables):
                    self.knots_[m].append(knots)
                    self.p0_[m].append(p0)
                    self.p1_[m].append(p1)
                for m in range(done, batch[-1][0] + 1):
                    progress.step(f"problem {m + 1} of {n_problems} fitted")
                done = batch[-1][0] + 1

    # --------------------------------------------------------------- predict
    def _columns(self, X) -> np.ndarray:
        """The probability columns of ``X`` (one contiguous row per class)
        that the binary problems read: the softmax of the logits, or with
        ``input="proba"`` the validated probabilities as given (clipped to
        [0, 1], not renormalised: equal entries stay equal)."""
        if self.input != "proba":
            logits = self._validate_scores(X, reset=False)
            return np.ascontiguousarray(softmax_into(logits, np.empty(logits.shape)).T)
        X, tol = self._score_array(X, reset=False)
        check_scores_shape(X)
        if X.shape[0] == 0:
            return np.empty(X.shape[::-1])
        P = check_probabilities(X, tol=tol, renormalize=False)
        return np.ascontiguousarray(P.T)

    def _problem_interval(self, columns: np.ndarray, m: int):
        """``(p0, p1)`` of problem ``m`` for the probability columns
        ``columns`` (one row per class), pooled over the folds by geometric
        means (of ``p1`` and of ``1 - p0``)."""
        i, j = self.problems_[m]
        s = self._binary_scores(columns, i, j)
        folds = list(zip(self.knots_[m], self.p0_[m], self.p1_[m]))
        if len(folds) == 1:
            return _lookup(folds[0], s)
        log_q0, log_p1 = np.zeros(s.shape), np.zeros(s.shape)
        for tables in folds:
            p0, p1 = _lookup(tables, s)
            log_q0 += np.log1p(-p0)
            log_p1 += np.log(p1)
        k = len(folds)
        # 0 - expm1: p0 = +0, never -0 (whose reciprocal, -inf, the bounds
        # of the one-vs-one coupling would add to +inf)
        return 0.0 - np.expm1(log_q0 / k), np.exp(log_p1 / k)

    def _binary_intervals(self, columns: np.ndarray):
        """``(p0, p1)`` of every problem: arrays of shape (n, n_problems)."""
        shape = (columns.shape[1], len(self.problems_))
        p0, p1 = np.empty(shape), np.empty(shape)
        for m in range(shape[1]):
            p0[:, m], p1[:, m] = self._problem_interval(columns, m)
        return p0, p1

    def _class_values(self, columns: np.ndarray, bounds: bool = False) -> list:
        """The unnormalised value of each class, one contiguous row per class:
        the merged one-vs-rest values, or their pairwise coupling ``q_k = 1 /
        (sum_j 1 / p_(k vs j) - (C - 2))`` (increasing in each ``p_(k vs
        j)``); with ``bounds``, also each class's value with every problem at
        the end of its interval lowest, then highest, for that class. The
        problems are read one at a time (one-vs-one keeps ``C`` rows, not a
        row per pair)."""
        n_classes, n = columns.shape
        ovr = self.strategy == "ovr"
        fill = 0.0 if ovr else -(n_classes - 2.0)
        out = [np.full((n_classes, n), fill) for _ in range(3 if bounds else 1)]
        with np.errstate(divide="ignore"):  # a pair's 0: the class's q is 0
            for m, (i, j) in enumerate(self.problems_):
                p0, p1 = self._problem_interval(columns, m)
                merged = [p1 / (1.0 - p0 + p1)]
                if bounds:  # (cross: the pooled p0 may exceed the pooled p1)
                    merged += [np.minimum(p0, p1), np.maximum(p0, p1)]
                if ovr:
                    for row, value in zip(out, merged):
                        row[j] = value
                    continue
                for row, win, loss in zip(out, merged, merged[:1] + merged[:0:-1]):
                    row[j] += 1.0 / win
                    row[i] += 1.0 / (1.0 - loss)
            return out if ovr else [np.divide(1.0, row, out=row) for row in out]

    def _proba_of_columns(self, columns: np.ndarray, bounds: bool = False):
        """:meth:`predict_proba` of the probability columns; with ``bounds``
        also the lower and upper bounds of :meth:`predict_interval`."""
        if columns.shape[0] == 2:
            p0, p1 = self._problem_interval(columns, 0)
            p = p1 / (1.0 - p0 + p1)
            Q = np.column_stack([1.0 - p, p])
            if not bounds:
                return Q
            lo, hi = np.minimum(p0, p1), np.maximum(p0, p1)
            lower = np.column_stack([1.0 - hi, lo])
            upper = np.column_stack([1.0 - lo, hi])
            return Q, np.minimum(lower, Q), np.maximum(upper, Q)
        values = self._class_values(columns, bounds)
        QT = values[0]
        QT /= QT.sum(axis=0)
        Q = np.ascontiguousarray(QT.T)
        if not bounds:
            return Q
        lower, upper = _normalised_bounds(values[1], values[2])
        # the exact bounds contain the exact value: widened by its rounding
        return Q, np.minimum(lower.T, Q), np.maximum(upper.T, Q)

    def _calibrated_proba(self, logits, P=None):
        if P is not None:  # input="proba": read as given (see _columns)
            P = P.validated(renormalize=False)
            return self._proba_of_columns(np.ascontiguousarray(P.T))
        columns = np.ascontiguousarray(softmax_into(logits, np.empty(logits.shape)).T)
        return self._proba_of_columns(columns)

    def to_torch(self):
        """The fitted predictors as a torch module: scores to :meth:`predict_proba`.

        The probability columns (the softmax of the logits, or the given
        probabilities clipped to [0, 1]), each binary problem's score, its
        tables' ``(p0, p1)`` (one step map per problem and fold, a step per
        calibration score), the folds pooled by geometric means, the merge
        ``p1 / (1 - p0 + p1)`` and the classes' probabilities (two classes,
        one-vs-rest renormalised, or one-vs-one coupled), in float64 whatever
        the input's dtype. See :func:`skcal.export.to_torch` and
        :func:`skcal.export.to_onnx`; the graph's size grows with the
        calibration set, about 64 bytes per calibration row and binary
        problem (a 19-class one-vs-rest graph: 2.5 MB at 2,000 calibration
        rows, 12 MB at 10,000).

        A score on a step (a test row equal to a calibration row) must be
        read on the side numpy's softmax puts it, but torch's, onnxruntime's
        and numpy's ``exp`` differ in the last place (on 2-15% of entries):
        with ``input="logits"`` the softmax's row sum is added in numpy's
        order and a score within 8 units in the last place of a calibration
        score is put on it (below ``1 - 2**-20``, where numpy's top
        probability and the export's agree bit for bit). Predicting the
        calibration rows themselves is then exact (without this, 3-6% of
        them were off by up to 0.01); a row that numpy puts a few units in
        the last place off a calibration score is read on the step instead:
        measured on 1,000 generated rows, the calibration rows shifted by
        3.7 (15-20% of them off), and for one-vs-one rows that share the two
        logits of a pair with a calibration row (its top logit raised by 2:
        8%; by 700: 1%). New rows are exact.

        Returns
        -------
        torch.nn.Module

        Examples
        --------
        >>> import numpy as np, torch
        >>> from skcal import VennAbersCalibrator
        >>> from skcal.utils._testing import make_miscalibrated_logits
        >>> X, y = make_miscalibrated_logits(300, 3, random_state=0)
        >>> va = VennAbersCalibrator(method="cross", random_state=0).fit(X, y)
        >>> P = va.to_torch()(torch.from_numpy(X)).numpy()
        >>> bool(np.abs(P - va.predict_proba(X)).max() < 1e-12)
        True
        """
        from .._torch._export import Chain
        from .._torch._export_venn_abers import VennAbersMap

        check_is_fitted(self)
        tables = [
            list(zip(knots, p0, p1))
            for knots, p0, p1 in zip(self.knots_, self.p0_, self.p1_)
        ]
        pairwise = self.strategy == "ovo"
        n_classes = len(self.classes_)
        return Chain(
            VennAbersMap(self.input, self.problems_, tables, n_classes, pairwise)
        )

    def _calibrated_logits(self, logits):
        return np.log(np.maximum(self._calibrated_proba(logits), FLOOR_BEFORE_LOG))

    def decision_function(self, X) -> np.ndarray:
        """Calibrated logits of shape (n_samples, n_classes).

        The logs of :meth:`predict_proba` (floored at 1e-300); with
        ``input="proba"`` of the probabilities computed from ``X`` as given,
        not from the softmax of its logs (whose rounding can move a score
        across a step of the isotonic tables).
        """
        if self.input == "proba":
            return np.log(np.maximum(self.predict_proba(X), FLOOR_BEFORE_LOG))
        return super().decision_function(X)

    def predict_interval(self, X, kind="proba"):
        """Intervals of the probabilities: of :meth:`predict_proba`, or the
        Venn-Abers pair ``(p0, p1)`` of every binary problem.

        Every binary problem ``m`` gives an interval ``[p0, p1]`` (one of
        the two is calibrated) and merges it into ``p1 / (1 - p0 + p1)``,
        which lies in it. The reported probabilities combine these merged
        values (divided by their row sum, or coupled pairwise), which can
        leave them outside every problem's interval: one-vs-rest values
        need not sum to 1. ``kind="proba"`` (the default) therefore gives
        the interval of each *reported* probability: the lowest and highest
        values the reported probability takes when the value of every
        problem ranges over its ``[p0, p1]``. It contains
        :meth:`predict_proba` for every entry.

        * Two classes: ``[p0, p1]`` for ``classes_[1]``, ``[1 - p1, 1 -
          p0]`` for ``classes_[0]``.
        * One-vs-rest: ``p_k = m_k / sum_j m_j`` increases with ``m_k`` and
          decreases with the others, so its range over the box of the
          ``m_j`` in ``[p0_j, p1_j]`` is exactly ``[p0_k / (p0_k + sum_(j
          != k) p1_j), p1_k / (p1_k + sum_(j != k) p0_j)]``.
        * One-vs-one: the same bounds with the coupled values ``q_k = 1 /
          (sum_j 1 / p_(k vs j) - (C - 2))`` at the ends of the pairs'
          intervals in place of ``p0_k`` and ``p1_k``; each class's ``q``
          is bounded on its own, so the interval contains the range of the
          reported value but may be wider than it.

        With ``method="cross"``, the folds' pairs are pooled by geometric
        means first (the pooled ``p0`` may then exceed the pooled ``p1``;
        the interval is between the two). The bounds are widened to the
        reported value where rounding leaves it a unit in the last place
        outside.

        ``kind="binary"`` gives the raw Venn-Abers pairs of the binary
        problems themselves (the one-vs-rest ``[p0, p1]`` of each class,
        what the ``venn-abers`` package returns): they bound the merged
        value of each problem, not the reported probabilities.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_classes)
            Scores, read as ``input`` says.
        kind : {"proba", "binary"}, default="proba"
            The interval of each reported probability, or the pair of each
            binary problem.

        Returns
        -------
        lower, upper : ndarray of shape (n_samples, n_classes) or \
                (n_samples, n_problems)
            ``kind="proba"``: column ``j`` bounds ``predict_proba(X)[:, j]``
            (``lower <= predict_proba(X) <= upper``). ``kind="binary"``:
            ``p0`` and ``p1``, column ``m`` of problem ``problems_[m] = (i,
            j)``, the lower and upper probability of class ``classes_[j]``
            (against ``classes_[i]``, or against the rest when ``i = -1``);
            one column for two classes. With ``method="cross"``, the folds
            pooled by geometric means (``p1 / (1 - p0 + p1)`` is then the
            cross Venn-Abers probability).
        """
        if kind not in ("proba", "binary"):
            raise ValueError(
                f"kind must be 'proba' (the interval of each reported "
                f"probability) or 'binary' (the (p0, p1) of each binary "
                f"problem); got {kind!r}."
            )
        check_is_fitted(self)
        columns = self._columns(X)
        if kind == "binary":
            return self._binary_intervals(columns)
        return self._proba_of_columns(columns, bounds=True)[1:]
