"""Prompt-level corrections of a language model's option scores.

A prompt biases a language model toward some answers whatever the question
(the order of the options, the label words, the examples shown). Two
corrections need no labels: contextual calibration (Zhao et al., 2021)
divides by the probabilities the model gives a content-free input, batch
calibration (Zhou et al., 2024) by the mean prediction over a batch of real
inputs. Per-group temperature scaling fits one temperature per task or
prompt template, shrunk toward the pooled one by a strength chosen on the
calibration data.
"""

from __future__ import annotations

from numbers import Integral, Real

import numpy as np
from scipy.special import log_softmax, logsumexp
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.model_selection import RepeatedKFold, check_cv
from sklearn.utils.validation import (
    check_is_fitted,
    check_random_state,
    validate_data,
)

from ..utils._constants import PROBA_EPS
from ..utils._proba import argmax_ties_by_scores
from ..utils._sklearn import Interval, StrOptions, _fit_context
from ..utils._validation import check_sample_weight, resolve_classes, scores_to_logits

__all__ = [
    "BatchCalibrator",
    "ContextualCalibrator",
    "GroupedTemperatureScaling",
]

#: The shrinkage strengths (pseudo-rows at the pooled temperature) tried by
#: ``GroupedTemperatureScaling(shrinkage="auto")``: 0 fits each group alone,
#: ``inf`` (``shrinkage=np.inf``) gives every group the pooled temperature.
#: The grid stops at 3,000: a group of a few dozen rows is then at the pooled
#: temperature to within a few percent, while a group with many more rows
#: than that still follows its own data. On the cloze task of
#: ``benchmarks/bench_llm_cloze.py`` (30 books, 20-60 rows each, 20 seeds),
#: this grid with repeated folds beat both pooled and unpooled temperatures
#: in 18 seeds, against 14 for one 5-fold split over a grid ending at ``inf``
#: (which it chose on three seeds that every finite strength won).
SHRINKAGE_GRID = (0.0, 1.0, 3.0, 10.0, 30.0, 100.0, 300.0, 1000.0, 3000.0)
#: Repetitions of the shuffled K-fold split of ``shrinkage="auto"``: the
#: held-out NLL of a few dozen rows per group is noisy, and averaging four
#: splits steadies the choice (cost: four times the cross-fitting).
CV_REPEATS = 4
#: Bounds of the log-temperature (temperatures from 1e-3 to 1e3).
_LOG_T_BOUND = float(np.log(1e3))
#: Newton / bisection iterations of the temperature fits (bisection alone
#: reaches 1e-12 from a bracket of width 14 in 44).
_MAX_ITER = 200


def _option_log_proba(est, X, *, reset: bool, y=None) -> np.ndarray:
    """Validated rows of ``X`` (and labels ``y``) as log-probabilities over
    the options (scikit-learn's checks: sparse, complex, empty, column count,
    lengths; then skcal's input contract)."""
    if y is None:
        X = validate_data(est, X, reset=reset, dtype=(np.float64, np.float32))
    else:
        X, y = validate_data(est, X, y, dtype=(np.float64, np.float32))
    if X.shape[1] < 2:
        raise ValueError(
            f"X must have one column per option, at least 2; got {X.shape[1]} "
            f"column(s) (n_features = {X.shape[1]})."
        )
    Z = log_softmax(scores_to_logits(X, est.input, "X"), axis=1)
    return Z if y is None else (Z, y)


def _classes(est, n_columns: int) -> np.ndarray:
    """``classes`` checked against the columns (``0 .. n - 1`` without it)."""
    if est.classes is None:
        return np.arange(n_columns)
    classes = np.asarray(est.classes)
    if classes.ndim != 1 or len(classes) != n_columns:
        raise ValueError(
            f"classes must list one label per column of X: expected {n_columns} "
            f"labels, got {classes.size}."
        )
    if len(np.unique(classes)) != n_columns:
        raise ValueError(f"classes contains duplicate labels: {classes.tolist()}.")
    return classes


class _PriorCorrection(BaseEstimator):
    """Probabilities divided by a prior over the options, renormalised.

    Not a scikit-learn classifier: no label is read (the options come from
    ``classes``), so ``fit(X)`` takes unlabeled rows.
    """

    _parameter_constraints: dict = {
        "input": [StrOptions({"logits", "proba"})],
        "classes": ["array-like", None],
    }

    def _corrected_log_proba(self, X) -> tuple[np.ndarray, np.ndarray]:
        check_is_fitted(self)
        logp = _option_log_proba(self, X, reset=False)
        return log_softmax(logp - self._log_prior(logp), axis=1), logp

    def predict_proba(self, X) -> np.ndarray:
        """Probabilities over the options, divided by the prior.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_options)
            The model's option scores (``input``).

        Returns
        -------
        ndarray of shape (n_samples, n_options)
            ``p(y | x) / prior(y)``, renormalised over the options.
        """
        return np.exp(self._corrected_log_proba(X)[0])

    def predict_log_proba(self, X) -> np.ndarray:
        """Logs of :meth:`predict_proba` (finite)."""
        return self._corrected_log_proba(X)[0]

    def predict(self, X) -> np.ndarray:
        """The option of largest corrected probability (ties: the input's)."""
        logq, logp = self._corrected_log_proba(X)
        return self.classes_[argmax_ties_by_scores(logq, logp)]

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.required = False
        return tags

    def _set_prior(self, X):
        """Validated log-probabilities of the rows given to ``fit``."""
        logp = _option_log_proba(self, X, reset=True)
        self.classes_ = _classes(self, logp.shape[1])
        return logp


def _mean_log_proba(logp: np.ndarray) -> np.ndarray:
    """``log mean_i p_i`` of rows of log-probabilities (the mean of the
    probabilities, as both papers average them)."""
    return logsumexp(logp, axis=0) - np.log(len(logp))


class ContextualCalibrator(_PriorCorrection):
    """Contextual calibration: divide by a content-free input's probabilities.

    Zhao et al. (2021) query the model with the prompt and a content-free
    input ("N/A", "[MASK]", the empty string) in place of the question; the
    probabilities it gives the options then measure the prompt's own bias.
    ``fit`` takes the option scores of one or more content-free inputs and
    averages their probabilities into ``content_free_proba_``; predictions
    are ``p(y | x) / content_free_proba_[y]``, renormalised over the options.
    The paper writes the correction as ``softmax(W p)`` with
    ``W = diag(p_cf)^-1``; the argmax is the same, and the renormalised ratio
    used here is a probability correction (Bayes' rule with the prior
    ``p_cf`` replaced by a uniform one), which ``softmax(W p)`` is not. No
    label is needed.

    Parameters
    ----------
    input : {"logits", "proba"}, default="logits"
        What the columns of ``X`` are: logits or log-probabilities of the
        options (an API's ``logprob`` values), or probabilities.
    classes : array-like of shape (n_options,), default=None
        The option labels in column order (``predict`` returns them);
        ``0 .. n_options - 1`` by default.

    Attributes
    ----------
    content_free_proba_ : ndarray of shape (n_options,)
        The mean probabilities of the content-free inputs.
    classes_ : ndarray of shape (n_options,)
    n_features_in_ : int

    References
    ----------
    Zhao, Wallace, Feng, Klein and Singh (2021), "Calibrate Before Use:
    Improving Few-Shot Performance of Language Models", ICML.

    Examples
    --------
    >>> import numpy as np
    >>> from skcal.llm import ContextualCalibrator
    >>> content_free = np.log([[0.7, 0.2, 0.1]])  # the prompt favours option 0
    >>> cal = ContextualCalibrator(classes=["A", "B", "C"]).fit(content_free)
    >>> cal.predict_proba(np.log([[0.5, 0.3, 0.2]])).round(3)
    array([[0.169, 0.356, 0.475]])
    >>> cal.predict(np.log([[0.5, 0.3, 0.2]]))
    array(['C'], dtype='<U1')
    """

    def __init__(self, *, input="logits", classes=None):
        self.input = input
        self.classes = classes

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y=None):
        """Average the content-free inputs' probabilities.

        Parameters
        ----------
        X : array-like of shape (n_content_free, n_options)
            Option scores of content-free inputs (one row each).
        y : None
            Ignored (no label is needed).

        Returns
        -------
        self : ContextualCalibrator
        """
        logp = self._set_prior(X)
        self._log_content_free = _mean_log_proba(logp)
        self.content_free_proba_ = np.exp(self._log_content_free)
        return self

    def _log_prior(self, logp):
        return self._log_content_free


class BatchCalibrator(_PriorCorrection):
    """Batch calibration: divide by the mean prediction of unlabeled inputs.

    Zhou et al. (2024) estimate the prompt's bias as the mean of the
    model's option probabilities over a batch of real inputs, without
    labels, and divide each row's probabilities by it (renormalised over
    the options). With ``prior="fit"`` (the default) the mean is taken over
    the unlabeled rows given to ``fit`` and every later row is corrected by
    it; with ``prior="batch"`` each call to ``predict_proba`` uses the mean
    of the rows it is given (the paper's test-time form: a row's result then
    depends on the other rows of its batch, and a batch of one row is
    refused, because it would come out uniform).

    Parameters
    ----------
    input : {"logits", "proba"}, default="logits"
        What the columns of ``X`` are (log-probabilities are logits).
    prior : {"fit", "batch"}, default="fit"
        Where the mean prediction comes from.
    classes : array-like of shape (n_options,), default=None
        The option labels in column order.

    Attributes
    ----------
    prior_ : ndarray of shape (n_options,)
        The mean probabilities of the rows given to ``fit``.
    classes_ : ndarray of shape (n_options,)
    n_features_in_ : int

    References
    ----------
    Zhou, Wan, Vulić and Korhonen (2024), "Batch Calibration: Rethinking
    Calibration for In-Context Learning and Prompt Engineering", ICLR.

    Examples
    --------
    >>> import numpy as np
    >>> from skcal.llm import BatchCalibrator
    >>> P = np.array([[0.8, 0.2], [0.6, 0.4], [0.7, 0.3]])
    >>> cal = BatchCalibrator(input="proba").fit(P)
    >>> cal.prior_.round(3)
    array([0.7, 0.3])
    >>> cal.predict_proba(P).round(3)
    array([[0.632, 0.368],
           [0.391, 0.609],
           [0.5  , 0.5  ]])
    """

    _parameter_constraints: dict = {
        **_PriorCorrection._parameter_constraints,
        "prior": [StrOptions({"fit", "batch"})],
    }

    def __init__(self, *, input="logits", prior="fit", classes=None):
        self.input = input
        self.prior = prior
        self.classes = classes

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y=None):
        """Average the unlabeled rows' probabilities.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_options)
            Option scores of unlabeled inputs.
        y : None
            Ignored.

        Returns
        -------
        self : BatchCalibrator
        """
        logp = self._set_prior(X)
        self._log_fit_prior = _mean_log_proba(logp)
        self.prior_ = np.exp(self._log_fit_prior)
        return self

    def _log_prior(self, logp):
        if self.prior == "fit":
            return self._log_fit_prior
        if len(logp) < 2:
            raise ValueError(
                f"prior='batch' divides by the mean prediction of the rows given, "
                f"and a batch of {len(logp)} row would come out uniform. Pass a "
                "batch of rows, or use prior='fit' to correct single rows by the "
                "mean of the rows given to fit."
            )
        return _mean_log_proba(logp)


# ---------------------------------------------------------------- per group
def _derivatives(Z, y, w, s_rows):
    """Per-row first and second derivatives of the NLL in the log-temperature
    ``s`` (``T = exp(s)``): with ``b = exp(-s)``, ``q = softmax(b z)``,
    ``m = E_q[z]`` and ``v = Var_q[z]``, ``d/ds = -b (m - z_y)`` and
    ``d2/ds2 = b (m - z_y) + b^2 v``."""
    beta = np.exp(-s_rows)
    q = np.exp(log_softmax(Z * beta[:, None], axis=1))
    m = np.einsum("ij,ij->i", q, Z)
    v = np.einsum("ij,ij->i", q, Z * Z) - m * m
    gap = m - Z[np.arange(len(y)), y]
    return -w * beta * gap, w * (beta * gap + beta * beta * v)


def fit_log_temperatures(
    Z, y, w, g_index, n_groups, *, center=0.0, penalty=0.0, lower=-_LOG_T_BOUND
):
    """Each group's log-temperature minimising
    ``NLL_g(s) + penalty / 2 (s - center)^2`` (``center``: a float or one per
    group) over ``s >= lower`` (a float or one per group), all groups at once.

    Safeguarded Newton (Newton's step inside the bracket of a sign change of
    the derivative, else bisection) over temperatures from 1e-3 to 1e3, to
    a step below 1e-12: one softmax per iteration of the rows of the groups
    not yet converged (a group stops at its first step below the tolerance:
    most take 4-6 steps, a group near the bound of its temperature 30-40).
    A group without rows gets ``center``.
    """
    center = np.broadcast_to(np.asarray(center, dtype=np.float64), (n_groups,))
    lo = np.maximum(np.full(n_groups, -_LOG_T_BOUND), lower)
    hi = np.full(n_groups, _LOG_T_BOUND)
    s = np.clip(center, lo, hi).copy()
    active = np.ones(n_groups, dtype=bool)
    rows = slice(None)
    for _ in range(_MAX_ITER):
        g = g_index[rows]
        d1, d2 = _derivatives(Z[rows], y[rows], w[rows], s[g])
        # (the derivatives of converged groups, whose rows are left out, are
        # wrong, and unused: their step is 0)
        grad = np.bincount(g, d1, n_groups) + penalty * (s - center)
        hess = np.bincount(g, d2, n_groups) + penalty
        lo = np.where(grad < 0, s, lo)
        hi = np.where(grad > 0, s, hi)
        with np.errstate(divide="ignore", invalid="ignore"):
            newton = s - grad / hess
        inside = (hess > 0) & (newton > lo) & (newton < hi)
        step = np.where(inside, newton, (lo + hi) / 2) - s
        step[(grad == 0) | ~active] = 0.0
        s += step
        converged = active & (np.abs(step) <= 1e-12 * (1 + np.abs(s)))
        if converged.any():
            active &= ~converged
            if not active.any():
                break
            rows = np.flatnonzero(active[g_index])
    return s


def fit_log_temperature(Z, y, w) -> float:
    """The pooled temperature scaling's log-temperature."""
    return float(fit_log_temperatures(Z, y, w, np.zeros(len(y), dtype=int), 1)[0])


def _curvature(Z, y, w, s: float) -> float:
    """Mean second derivative of the per-row NLL in ``s`` at ``s``."""
    d2 = _derivatives(Z, y, w, np.full(len(y), s))[1]
    return float(max(d2.sum() / w.sum(), 1e-12))


def shrinkage_folds(cv, random_state):
    """The folds whose held-out NLL chooses the shrinkage: ``cv`` folds
    repeated :data:`CV_REPEATS` times (seeded by ``random_state``) for an
    integer ``cv``, else the user's splitter."""
    if isinstance(cv, Integral):
        seed = check_random_state(random_state).randint(2**31 - 1)
        return RepeatedKFold(n_splits=cv, n_repeats=CV_REPEATS, random_state=seed)
    return check_cv(cv)


def best_shrinkage(cv_nll: np.ndarray) -> float:
    """The strongest strength of :data:`SHRINKAGE_GRID` whose held-out NLL
    is the smallest (within a relative 1e-12)."""
    best = np.flatnonzero(cv_nll <= cv_nll.min() * (1 + 1e-12))
    return float(SHRINKAGE_GRID[best[-1]])


def fitted_group_positions(fitted_groups: np.ndarray, groups, n: int):
    """Each row's position in the sorted ``fitted_groups`` and whether its
    group is one of them, for ``groups`` of ``n`` rows (shape checked)."""
    groups = np.asarray(groups)
    if groups.shape != (n,):
        raise ValueError(
            f"groups must give one group per row of X: expected shape ({n},), "
            f"got {groups.shape}."
        )
    pos = np.clip(np.searchsorted(fitted_groups, groups), 0, len(fitted_groups) - 1)
    return pos, fitted_groups[pos] == groups


def group_positions(fitted_groups: np.ndarray, groups) -> np.ndarray:
    """The int64 position in ``fitted_groups`` of each label of ``groups``,
    -1 for a label not among them: the second input of the exported module
    of a per-group calibrator (its ``group_positions``)."""
    groups = np.asarray(groups)
    if groups.ndim != 1:
        raise ValueError(
            f"groups must be a 1-D array of group labels, one per row; got shape "
            f"{groups.shape}."
        )
    pos, seen = fitted_group_positions(fitted_groups, groups, len(groups))
    return np.where(seen, pos, -1).astype(np.int64)


def _group_fits(Z, y, w, g_index, n_groups, strengths):
    """``(pooled s, (len(strengths), n_groups) log-temperatures)``.

    A group without a (weighted) error among its rows is not sharpened
    beyond the pooled temperature: its NLL falls all the way to the lower
    bound of the temperature, and held-out rows of that group, without
    errors either, cannot show what that costs on new rows.
    """
    s0 = fit_log_temperature(Z, y, w)
    c = _curvature(Z, y, w, s0)
    wrong = w * (np.argmax(Z, axis=1) != y)
    errors = np.bincount(g_index, wrong, n_groups) > 0
    lower = np.where(errors, -_LOG_T_BOUND, min(s0, _LOG_T_BOUND))
    out = np.full((len(strengths), n_groups), s0)
    for k, lam in enumerate(strengths):
        if np.isfinite(lam):
            out[k] = fit_log_temperatures(
                Z, y, w, g_index, n_groups, center=s0, penalty=lam * c, lower=lower
            )
    return s0, out


def _held_out_nll(Z, y, w, s0, s_groups, seen):
    """Weighted NLL of rows at their group's log-temperature (``s_groups``,
    per row) where ``seen``, else at the pooled ``s0``."""
    s = np.where(seen, s_groups, s0)
    logq = log_softmax(Z * np.exp(-s)[:, None], axis=1)
    return float(-(w @ logq[np.arange(len(y)), y]))


class _GroupedCalibrator(ClassifierMixin, BaseEstimator):
    """The plumbing of the grouped calibrators (GroupedTemperatureScaling and
    skcal.GroupedVectorScaling): parameters, wrapper protocol, fit's labels,
    the shrinkage choice by cross-fitting and probabilities; each subclass
    gives its own fits (``_grid_fits``, ``_held_out_nll``) and maps."""

    _parameter_constraints: dict = {
        "input": [StrOptions({"logits", "proba"})],
        "shrinkage": [StrOptions({"auto"}), Interval(Real, 0, None, closed="both")],
        "cv": ["cv_object"],
        "classes": ["array-like", None],
        "random_state": ["random_state"],
    }

    def __init__(
        self, *, input="logits", shrinkage="auto", cv=5, classes=None, random_state=None
    ):
        self.input = input
        self.shrinkage = shrinkage
        self.cv = cv
        self.classes = classes
        self.random_state = random_state

    def group_positions(self, groups) -> np.ndarray:
        """The second input of the exported module: each label's position.

        Parameters
        ----------
        groups : array-like of shape (n_samples,)
            Group labels, as :meth:`predict_proba` takes them.

        Returns
        -------
        ndarray of shape (n_samples,), dtype int64
            The position of each label in ``groups_``, -1 for a group not
            seen in ``fit`` (the module then uses the pooled fit).

        Examples
        --------
        >>> import numpy as np
        >>> from skcal.llm import GroupedTemperatureScaling
        >>> rng = np.random.default_rng(0)
        >>> X, y = rng.normal(size=(90, 3)), np.arange(90) % 3
        >>> cal = GroupedTemperatureScaling(shrinkage=10.0).fit(
        ...     X, y, groups=np.repeat(["a", "b", "c"], 30))
        >>> cal.group_positions(["c", "a", "new"]).tolist()
        [2, 0, -1]
        """
        check_is_fitted(self)
        return group_positions(self.groups_, groups)

    def _wrapper_params(self, *, classes, input) -> dict:
        """The wrapper protocol of :class:`~skcal.base.BaseCalibrator`: the
        ``classes`` and ``input`` a wrapper or a search sets on a clone."""
        return {"classes": classes, "input": input}

    def _fit_labels(self, X, y):
        """``(Z, y_index)``: validated log-probabilities and label positions;
        sets ``classes_`` (and ``n_features_in_``)."""
        if y is None:
            raise ValueError(
                f"{type(self).__name__} requires y to be passed, but the target y "
                "is None: pass the labels of the calibration rows."
            )
        Z, y = _option_log_proba(self, X, reset=True, y=y)
        self.classes_, y_index = resolve_classes(y, Z.shape[1], self.classes)
        return Z, y_index

    def predict_proba(self, X, groups=None) -> np.ndarray:
        """Probabilities; see :meth:`predict_log_proba`."""
        return np.exp(self.predict_log_proba(X, groups))

    def _shrunk_fits(self, Z, y, w, g_index):
        """``(pooled, per group)`` fits at the strength chosen (``shrinkage_``,
        ``cv_nll_``) by the subclass's ``_grid_fits`` and ``_held_out_nll``."""
        n_groups = len(self.groups_)
        if self.shrinkage == "auto":
            self.cv_nll_ = self._cross_fit(Z, y, w, g_index, n_groups)
            self.shrinkage_ = best_shrinkage(self.cv_nll_)
        else:
            self.cv_nll_, self.shrinkage_ = None, float(self.shrinkage)
        pooled, fits = self._grid_fits(Z, y, w, g_index, n_groups, [self.shrinkage_])
        return pooled, fits[0]

    def _cross_fit(self, Z, y, w, g_index, n_groups) -> np.ndarray:
        total, tested = np.zeros(len(SHRINKAGE_GRID)), 0.0
        for train, test in shrinkage_folds(self.cv, self.random_state).split(Z):
            tested += w[test].sum()
            pooled, fits = self._grid_fits(
                Z[train], y[train], w[train], g_index[train], n_groups, SHRINKAGE_GRID
            )
            seen = np.isin(g_index[test], g_index[train])
            for k in range(len(SHRINKAGE_GRID)):
                total[k] += self._held_out_nll(
                    Z[test], y[test], w[test], pooled, fits[k][g_index[test]], seen
                )
        return total / tested


class GroupedTemperatureScaling(_GroupedCalibrator):
    """Temperature scaling with one temperature per group, shrunk to the pooled.

    A user with many small tasks (one per prompt template, dataset or
    subject) gets neither one shared temperature, which ignores that the
    tasks differ, nor one per task, which is noisy when a task has few rows.
    Each group ``g`` gets the log-temperature ``s_g`` minimising

    ``NLL_g(s_g) + lambda * c / 2 * (s_g - s_0)^2``

    where ``NLL_g`` is the group's weighted negative log-likelihood of
    ``softmax(X / exp(s_g))``, ``s_0`` the pooled temperature scaling's
    log-temperature and ``c`` the pooled NLL's mean curvature per row at
    ``s_0``: ``lambda`` counts pseudo-rows at the pooled temperature.
    ``shrinkage="auto"`` chooses ``lambda`` among :data:`SHRINKAGE_GRID`
    (from 0, each group alone, to 3,000 pseudo-rows, near the pooled
    temperature for small groups) by the held-out NLL of ``cv``-fold
    cross-fitting on the calibration rows, repeated :data:`CV_REPEATS`
    times with new shuffles (ties: the stronger shrinkage);
    ``shrinkage=np.inf`` gives every group the pooled temperature. A group
    without an error among its calibration rows (its argmax always right)
    is never given a temperature below the pooled one: its NLL keeps
    falling as its temperature goes to 0, and cross-fitting, whose held-out
    rows of that group hold no error either, cannot see what so sharp a
    temperature costs on new rows. A group
    not seen in ``fit`` (or ``groups=None`` at prediction) gets the pooled
    temperature.

    Parameters
    ----------
    input : {"logits", "proba"}, default="logits"
        What the columns of ``X`` are (log-probabilities are logits).
    shrinkage : "auto" or float >= 0, default="auto"
        The strength ``lambda`` in pseudo-rows, or chosen by cross-fitting.
    cv : int, cross-validation generator or iterable, default=5
        Folds of the cross-fitting of ``shrinkage="auto"`` (an int: a
        shuffled ``KFold`` repeated :data:`CV_REPEATS` times, seeded by
        ``random_state``).
    classes : array-like of shape (n_classes,), default=None
        The labels in column order.
    random_state : int, RandomState instance or None, default=None
        Seed of the folds.

    Attributes
    ----------
    temperature_ : float
        The pooled temperature.
    groups_ : ndarray of shape (n_groups,)
        The groups seen in ``fit`` (sorted).
    group_temperatures_ : ndarray of shape (n_groups,)
        The temperature of each group of ``groups_``.
    shrinkage_ : float
        The strength used (``inf``: every group at the pooled temperature).
    cv_nll_ : ndarray of shape (len(SHRINKAGE_GRID),) or None
        The cross-fitted NLL per row of each strength of the grid
        (``shrinkage="auto"``).
    classes_ : ndarray of shape (n_classes,)
    n_features_in_ : int

    Examples
    --------
    >>> import numpy as np
    >>> from skcal.llm import GroupedTemperatureScaling
    >>> rng = np.random.default_rng(0)
    >>> groups = np.repeat(["easy", "hard"], 300)
    >>> logits = rng.normal(size=(600, 4)) * 3
    >>> T = np.where(groups == "easy", 0.5, 2.0)[:, None]
    >>> y = np.array([rng.choice(4, p=np.exp(r) / np.exp(r).sum())
    ...               for r in logits / T])
    >>> cal = GroupedTemperatureScaling(random_state=0).fit(logits, y, groups=groups)
    >>> (cal.group_temperatures_ > 1).tolist()  # true temperatures 0.5 and 2
    [False, True]
    >>> cal.predict_proba(logits[:2], groups=groups[:2]).shape
    (2, 4)
    """

    _grid_fits = staticmethod(_group_fits)
    _held_out_nll = staticmethod(_held_out_nll)

    def n_free_parameters(self, n_classes, n_features=None, n_groups=1):
        """One temperature per group: ``n_groups``.

        What :class:`~skcal.model_selection.CalibratorSearchCV`'s small-data
        guard reads, given the number of groups: the shrinkage toward the
        pooled temperature is chosen by cross-fitting and can be 0 (every
        group alone), so each group's temperature counts as free.

        Parameters
        ----------
        n_classes : int
            Number of classes (unused: one temperature for all).
        n_features : int, default=None
            Columns of ``X`` (unused: the classes).
        n_groups : int, default=1
            Number of groups the calibrator is fitted on.

        Returns
        -------
        float

        Examples
        --------
        >>> from skcal import GroupedTemperatureScaling
        >>> GroupedTemperatureScaling().n_free_parameters(3, n_groups=4)
        4.0
        """
        return float(n_groups)

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y, groups=None, sample_weight=None):
        """Fit the pooled and the per-group temperatures.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_classes)
            Scores (``input``).
        y : array-like of shape (n_samples,)
            Labels.
        groups : array-like of shape (n_samples,), default=None
            The group (task, prompt template) of each row; None: one group.
        sample_weight : array-like of shape (n_samples,), default=None
            Weights of the rows.

        Returns
        -------
        self : GroupedTemperatureScaling
        """
        Z, y_index = self._fit_labels(X, y)
        w = check_sample_weight(sample_weight, len(Z), relative=True)
        self.groups_, g_index = self._group_index(groups, len(Z), fit=True)
        s0, s = self._shrunk_fits(Z, y_index, w, g_index)
        self.temperature_ = float(np.exp(s0))
        self.group_temperatures_ = np.exp(s)
        return self

    def _group_index(self, groups, n: int, *, fit: bool):
        if groups is None:
            groups = np.zeros(n, dtype=int)
        if not fit:
            return fitted_group_positions(self.groups_, groups, n)
        groups = np.asarray(groups)
        if groups.shape != (n,):
            raise ValueError(
                f"groups must give one group per row of X: expected shape ({n},), "
                f"got {groups.shape}."
            )
        return np.unique(groups, return_inverse=True)

    def _log_temperatures(self, X, groups):
        check_is_fitted(self)
        Z = _option_log_proba(self, X, reset=False)
        s = np.full(len(Z), np.log(self.temperature_))
        if groups is not None:
            pos, seen = self._group_index(groups, len(Z), fit=False)
            s[seen] = np.log(self.group_temperatures_[pos[seen]])
        return Z, s

    def predict_log_proba(self, X, groups=None) -> np.ndarray:
        """Log-probabilities ``log softmax(X / T_group)`` (finite).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_classes)
        groups : array-like of shape (n_samples,), default=None
            Each row's group; rows of groups not seen in ``fit`` (all rows
            when None) use the pooled temperature.
        """
        Z, s = self._log_temperatures(X, groups)
        return log_softmax(Z * np.exp(-s)[:, None], axis=1)

    def predict_proba(self, X, groups=None) -> np.ndarray:
        """Probabilities ``softmax(X / T_group)``; see :meth:`predict_log_proba`."""
        return np.exp(self.predict_log_proba(X, groups))

    def to_torch(self):
        """The fitted map as a torch module of two inputs, ``(scores, group)``.

        ``module(scores, group)`` gives ``softmax(z / T_g)`` with ``z`` the
        log-softmax of the scores and ``T_g`` the temperature of each row's
        group: ``group`` is an int64 tensor of positions in ``groups_``
        (:meth:`group_positions`); -1, or any position outside ``groups_``,
        gives the pooled temperature. :func:`skcal.export.to_onnx` writes
        the same graph, of inputs ``scores`` and ``group``.

        Returns
        -------
        torch.nn.Module

        Examples
        --------
        >>> import numpy as np, torch
        >>> from skcal.llm import GroupedTemperatureScaling
        >>> rng = np.random.default_rng(0)
        >>> X, y = rng.normal(size=(90, 3)), np.arange(90) % 3
        >>> groups = np.repeat(["a", "b", "c"], 30)
        >>> cal = GroupedTemperatureScaling(shrinkage=10.0).fit(X, y, groups=groups)
        >>> group = torch.from_numpy(cal.group_positions(groups))
        >>> P = cal.to_torch()(torch.from_numpy(X), group).numpy()
        >>> bool(np.abs(P - cal.predict_proba(X, groups=groups)).max() < 1e-12)
        True
        """
        from .._torch._export import grouped_module

        check_is_fitted(self)
        log_t = np.log(np.append(self.group_temperatures_, self.temperature_))
        return grouped_module(self.input, PROBA_EPS, np.exp(-log_t)[:, None])

    def predict(self, X, groups=None) -> np.ndarray:
        """The class of largest probability (a temperature keeps the argmax)."""
        Z, _ = self._log_temperatures(X, None)
        return self.classes_[argmax_ties_by_scores(Z, Z)]
