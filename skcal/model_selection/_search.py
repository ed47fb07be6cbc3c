"""CalibratorSearchCV: a cross-validated choice among calibrators, guarded."""

from __future__ import annotations

import inspect
import math
import sys
import threading
import time
import warnings
from collections import Counter
from contextlib import nullcontext
from dataclasses import dataclass
from numbers import Integral, Real

import numpy as np
from scipy.stats import rankdata
from sklearn.base import clone
from sklearn.model_selection import StratifiedKFold, check_cv
from sklearn.utils import check_random_state
from sklearn.utils.parallel import Parallel, delayed
from sklearn.utils.validation import check_is_fitted, has_fit_parameter

from .._torch.kernels import affine_rows
from ..base import (
    _LOG_PROBA_EPS,
    BaseCalibrator,
    BaseLocalCalibrator,
    check_fit_targets,
)
from ..calibrators import (
    DirichletCalibratorCV,
    GroupedTemperatureScaling,
    IdentityCalibrator,
    StructuredMatrixScaling,
    StructuredVectorScaling,
    TemperatureScaling,
    VectorScaling,
)
from ..exceptions import GridEdgeWarning
from ..metrics._scorer import get_scorer, scorer_name
from ..utils._constants import FLOOR_BEFORE_LOG
from ..utils._dask import is_dask_collection, lazy_on_dask
from ..utils._groups import check_groups
from ..utils._sklearn import Interval, StrOptions, _fit_context
from ..utils._validation import (
    check_finite,
    check_labels,
    check_sample_weight,
    class_column_order,
    count_events,
    effective_sample_size,
    frame_column_names,
    paired_mean_difference,
    scores_to_logits,
)
from ..utils._warnings import warn

__all__ = ["CalibratorSearchCV"]

#: The small-data guard skips a candidate with more free parameters than
#: one per ``EVENTS_PER_PARAMETER`` events: calibration rows the classifier
#: gets wrong (or right, if those are fewer); rows, when the classifier's
#: predictions are unknown (local candidates without a head).
EVENTS_PER_PARAMETER = 10

#: Temperature scaling, whose one parameter is shared by every class, needs
#: this many events instead: the lower end of the 5-9 events per variable
#: that Vittinghoff & McCulloch (2007) found adequate (measured in
#: ``benchmarks/bench_select_small.py``; see the Notes of the search).
TEMPERATURE_EVENTS = 5

#: The simple candidates of the guard, simplest first.
_SIMPLE = (IdentityCalibrator, TemperatureScaling)
#: The default Dirichlet-CV candidate is skipped where its CPU work over the
#: search's folds (:meth:`~skcal.DirichletCalibratorCV.cpu_work`) exceeds
#: this: about a minute on 2 cores (10,000 rows up to about 86 classes, 2,000
#: rows up to about 190).
DIRICHLET_CV_MAX_WORK = 1e10
#: ...and below these rows or classes, where it has never won: on the
#: benchmark of the user guide (``benchmarks/bench_select_loo.py``) it was
#: selected only at 10,000 rows of 45 and 66 classes, and took most of the
#: search's time at 2,000 rows without being selected.
DIRICHLET_CV_MIN_ROWS = 5000
DIRICHLET_CV_MIN_CLASSES = 20


#: The regularisation grid of the default Dirichlet candidate: every other
#: point of DirichletCalibratorCV's default 5 x 5 grid, scored on 3 folds
#: (27 fits per outer fold instead of 125: at 2,000 x 10 the default search
#: took 47 s, 42 s of them in this candidate). The grid is not grown past its
#: edges, nor given the "auto" point: the search's own candidates hold
#: temperature scaling and ridges toward it.
_DIRICHLET_GRID = dict(
    reg_lambdas=(1e-1, 1e-3, 1e-5), reg_mus=(1e-1, 1e-3, 1e-5), cv=3,
    include_auto=False, grid_extensions=0,
)  # fmt: skip


def _default_candidates() -> list:
    """The default candidates, cheapest first: the families that the
    benchmark of the user guide selected (see "Choosing a calibrator")."""
    return [
        IdentityCalibrator(),
        TemperatureScaling(),
        VectorScaling(),
        StructuredMatrixScaling(),
        StructuredVectorScaling(),
        DirichletCalibratorCV(**_DIRICHLET_GRID),
    ]


def _same_settings(estimator, default) -> bool:
    """Whether ``estimator`` is ``default``'s class with its settings, on any
    device (``device`` is where it runs, not what it fits)."""
    if type(estimator) is not type(default):
        return False
    mine, theirs = estimator.get_params(deep=False), default.get_params(deep=False)
    mine.pop("device", None), theirs.pop("device", None)
    return mine.keys() == theirs.keys() and all(
        type(mine[k]) is type(v) and not isinstance(v, np.ndarray) and mine[k] == v
        for k, v in theirs.items()
    )


def _with_grouped(candidates: list) -> list:
    """``candidates`` with :class:`~skcal.GroupedTemperatureScaling` before
    the Dirichlet-CV candidate (at the end without it): the default set of a
    fit given ``groups``, still cheapest first (its repeated cross-fitting
    of the shrinkage took 10 s a fold on 3,600 x 26 rows in 20 groups, the
    affine candidates 0.1-0.5 s)."""
    kinds = [type(c) for c in candidates]
    at = kinds.index(DirichletCalibratorCV) if DirichletCalibratorCV in kinds else None
    at = len(candidates) if at is None else at
    return [*candidates[:at], GroupedTemperatureScaling(), *candidates[at:]]


def _is_default_set(candidates) -> bool:
    """Whether ``candidates`` is None or the default candidates, in order (as
    the command line passes them, on its ``--device``), with or without the
    grouped one."""
    if candidates is None:
        return True
    if not isinstance(candidates, (list, tuple)):
        return False
    return any(
        len(candidates) == len(defaults)
        and all(_same_settings(c, d) for c, d in zip(candidates, defaults))
        for defaults in (_default_candidates(), _with_grouped(_default_candidates()))
    )


# ---------------------------------------------------------------- groups
def _takes_groups(estimator) -> bool:
    """Whether ``estimator`` is group-aware: its ``fit`` has a ``groups``
    parameter (scikit-learn's :func:`~sklearn.utils.validation.has_fit_parameter`),
    and then its ``predict_proba`` takes ``groups=`` too."""
    return has_fit_parameter(estimator, "groups")


class _FoldGroups:
    """A fitted group-aware calibrator bound to the groups of the rows it
    will predict (a fold's test rows), for the scorers, which call
    ``predict_proba(X)`` alone. Estimator type and ``classes_`` are its own."""

    def __init__(self, estimator, groups):
        self.estimator, self.groups = estimator, groups

    def __sklearn_tags__(self):
        return self.estimator.__sklearn_tags__()

    @property
    def classes_(self):
        return self.estimator.classes_

    def predict_proba(self, X):
        return self.estimator.predict_proba(X, groups=self.groups)

    def predict_log_proba(self, X):
        if hasattr(self.estimator, "predict_log_proba"):
            return self.estimator.predict_log_proba(X, groups=self.groups)
        with np.errstate(divide="ignore"):
            return np.log(np.asarray(self.predict_proba(X), dtype=np.float64))

    def predict(self, X):
        return self.estimator.predict(X, groups=self.groups)


# ------------------------------------------------------------ embeddings
def _is_local(estimator) -> bool:
    """Whether ``estimator`` is fitted on embeddings (a local calibrator).

    A :class:`~skcal.base.BaseLocalCalibrator`, or an estimator that says
    so through ``_reads_embeddings()`` (a search with a local candidate).
    """
    if isinstance(estimator, BaseLocalCalibrator):
        return True
    reads = getattr(estimator, "_reads_embeddings", None)
    return bool(reads()) if callable(reads) else False


def _candidate_estimators(candidates) -> list:
    """The estimators of a ``candidates`` parameter, unvalidated (None: none)."""
    if not isinstance(candidates, (list, tuple)):
        return []
    return [
        item[1] if isinstance(item, tuple) and len(item) == 2 else item
        for item in candidates
    ]


def _head_logits(X: np.ndarray, coef: np.ndarray, intercept: np.ndarray):
    """The frozen head's logits ``X @ coef.T + intercept`` in float64, finite."""
    logits = affine_rows(X, coef, intercept)  # inf where it overflows: refused below
    check_finite(logits, "the head's logits X @ coef.T + intercept")
    return logits


def _check_weights(sample_weight, n_rows: int):
    """The user's weights validated once (None stays None: no weights)."""
    if sample_weight is None:
        return None
    return check_sample_weight(sample_weight, n_rows)


# ------------------------------------------------------------ parameter count
def _n_parameters(estimator, n_classes: int, n_groups=None) -> float:
    """Free parameters of a candidate for the small-data guard; NaN if not
    counted (local calibrators, nested searches and estimators that do not
    state their count: see the Notes of :class:`CalibratorSearchCV`). A
    group-aware candidate whose count takes ``n_groups`` is given the number
    of groups of ``fit`` (None: fitted without groups)."""
    count = getattr(estimator, "n_free_parameters", None)
    if _is_local(estimator) or count is None:
        return math.nan
    if n_groups is not None and _takes_groups(estimator):
        if "n_groups" in inspect.signature(count).parameters:
            return float(count(n_classes, n_groups=n_groups))
    return float(count(n_classes))


# ---------------------------------------------------------------- one fold
def _row_log_losses(estimator, X, labels, classes) -> np.ndarray:
    """``-log p(y)`` of each row, floored as :func:`skcal.base.negative_log_loss`.

    The probability of a label the estimator has no column for is 0.
    """
    if hasattr(estimator, "predict_log_proba"):
        log_proba = np.asarray(estimator.predict_log_proba(X), dtype=np.float64)
    else:
        with np.errstate(divide="ignore"):
            log_proba = np.log(np.asarray(estimator.predict_proba(X), dtype=np.float64))
    own = np.asarray(getattr(estimator, "classes_", classes))
    n = len(labels)
    if log_proba.shape != (n, len(own)):
        raise ValueError(
            f"predict_proba returned shape {log_proba.shape} for {n} rows and "
            f"{len(own)} classes."
        )
    order = np.argsort(own, kind="stable")
    pos = np.clip(np.searchsorted(own[order], labels), 0, len(own) - 1)
    found = own[order][pos] == labels
    picked = np.where(found, log_proba[np.arange(n), order[pos]], -np.inf)
    losses = -np.clip(picked, _LOG_PROBA_EPS, 0.0)
    if np.isnan(losses).any():
        raise ValueError("predict_proba returned NaN probabilities.")
    return losses


def _fold_rows(indices, k: int, part: str, n_rows: int) -> np.ndarray:
    """The ``part`` rows of split ``k`` of ``cv``, checked against ``n_rows``.

    ``check_cv`` passes an iterable of splits through unchecked: integer
    positions (negative ones count from the end, as in numpy) and boolean
    masks of ``n_rows`` entries are accepted, anything else is refused here
    rather than with an IndexError inside every candidate's fit.
    """
    indices = np.asarray(indices)
    if indices.size == 0:
        return indices.astype(np.intp).reshape(0)
    where = f"CalibratorSearchCV: the {part} part of split {k} of cv"
    if indices.dtype == bool and indices.shape == (n_rows,):
        return np.flatnonzero(indices)
    if indices.ndim != 1 or indices.dtype.kind not in "iu":
        raise ValueError(
            f"{where} must be a 1-D array of integer row positions (or a boolean "
            f"mask of the {n_rows} rows); got dtype {indices.dtype} and shape "
            f"{indices.shape}. Give np.flatnonzero(mask) or integer indices."
        )
    bad = (indices < -n_rows) | (indices >= n_rows)
    if bad.any():
        raise ValueError(
            f"{where} holds the index {indices[bad][0]}, out of range for the "
            f"{n_rows} rows of X (valid: {-n_rows} to {n_rows - 1}). Build the "
            "splits from the X and y passed to fit."
        )
    return indices


def _fit_and_score(
    template, X, labels, classes, sample_weight, train, test, scorer, groups=None
):
    """Fit a clone of ``template`` on ``train``, score it on ``test``; never raises.

    ``groups`` (given to group-aware candidates only): ``groups[train]`` is
    passed to ``fit`` and ``groups[test]`` to ``predict_proba``.

    Returns a dict: ``fit_time``, ``score_time``, ``score``, ``losses`` (the
    per-row log losses of ``test``), ``error`` (None, or the exception as
    text) and ``warnings`` (the ``(category, message)`` pairs raised).
    """
    out = {"fit_time": np.nan, "score_time": np.nan, "score": np.nan}
    out.update(losses=None, error=None)
    # catch_warnings swaps process-wide state: only the main thread of a
    # process may use it (in other threads, e.g. joblib's threading backend,
    # warnings are raised where they occur)
    capture = threading.current_thread() is threading.main_thread()
    recorder = warnings.catch_warnings(record=True) if capture else nullcontext([])
    with recorder as caught:
        if capture:
            warnings.simplefilter("always")
        try:
            estimator = clone(template)
            fit_params = {}
            if sample_weight is not None:
                fit_params["sample_weight"] = sample_weight[train]
            if groups is not None:
                fit_params["groups"] = groups[train]
            start = time.perf_counter()
            estimator.fit(X[train], labels[train], **fit_params)
            out["fit_time"] = time.perf_counter() - start
            start = time.perf_counter()
            if groups is not None:
                estimator = _FoldGroups(estimator, groups[test])
            losses = _row_log_losses(estimator, X[test], labels[test], classes)
            weights = None if sample_weight is None else sample_weight[test]
            if scorer is None:
                score = -np.average(losses, weights=weights)
            elif weights is None:
                score = scorer(estimator, X[test], labels[test])
            else:
                score = scorer(estimator, X[test], labels[test], sample_weight=weights)
            out["score_time"] = time.perf_counter() - start
            out.update(score=float(score), losses=losses)
        except Exception as exc:  # recorded as the candidate's failure
            out["error"] = f"{type(exc).__name__}: {exc}"
    out["warnings"] = [(w.category, str(w.message)) for w in caught]
    return out


def _fit_and_score_at(c: int, k: int, *args):
    """:func:`_fit_and_score` of candidate ``c`` on fold ``k``, as
    ``(c, k, result)``: results may arrive in any order."""
    return c, k, _fit_and_score(*args)


def _failure(fold_results) -> str:
    """Why a candidate's fold results give no score ("" when they do)."""
    n_splits = len(fold_results)
    for k, r in enumerate(fold_results):
        if r["error"]:
            return f"failed on fold {k} of {n_splits}: {r['error']}"
    if not np.isfinite([r["score"] for r in fold_results]).all():
        return "failed: a test score is not finite"
    return ""


def _candidate_line(fold_results) -> str:
    """The ``verbose`` line of a candidate whose folds are done."""
    failure = _failure(fold_results)
    if failure:
        return failure
    scores = [r["score"] for r in fold_results]
    fit_time = np.mean([r["fit_time"] for r in fold_results])
    return (
        f"score {np.mean(scores):.5g} +- {np.std(scores):.2g}, fit "
        f"{fit_time:.3g} s per fold"
    )


def _parallel(n_jobs):
    """A :class:`joblib.Parallel` yielding results as they finish (in order
    with joblib 1.3), or returning them at the end where the backend (e.g.
    multiprocessing) or joblib (before 1.3) cannot yield them."""
    for return_as in ("generator_unordered", "generator"):
        try:
            return Parallel(n_jobs=n_jobs, return_as=return_as)
        except (TypeError, ValueError):  # unknown return_as, or not supported
            continue
    return Parallel(n_jobs=n_jobs)


class _TimeBudget:
    """``max_time``: whether each candidate starts, in order (its folds are
    handed to joblib only then). The first candidate and the guard's simple
    ones always start; the others only while the cross-fitting has taken at
    most ``max_time`` seconds. ``late``: the candidates held back, with the
    seconds elapsed when their turn came."""

    def __init__(self, max_time, templates):
        self.max_time, self.late = max_time, {}
        self.always = {0} | {c for c, t in enumerate(templates) if type(t) in _SIMPLE}
        self.started = time.perf_counter()

    def starts(self, c: int) -> bool:
        if self.max_time is None or c in self.always:
            return True
        elapsed = time.perf_counter() - self.started
        if elapsed <= self.max_time:
            return True
        self.late[c] = elapsed
        return False


# -------------------------------------------------------------- the guard


class _LiveReport:
    """The ``verbose`` lines of the cross-fitting, on stderr as it runs.

    A first line says what runs, then each skipped candidate gets its
    reason, and each candidate that runs one line as its last fold
    finishes (its score and fit time, or why it failed), with how many are
    done and the time since the start.
    """

    def __init__(self, verbose, names, n_run: int, n_splits: int):
        self.verbose, self.names, self.n_run = verbose, names, n_run
        self.n_splits, self.done = n_splits, 0
        self.width = max(len(name) for name in names)
        self.started = time.perf_counter()

    def _print(self, name: str, line: str) -> None:
        print(
            f"[CalibratorSearchCV] {name:<{self.width}}  {line}",
            file=sys.stderr,
            flush=True,  # live, also where stderr is a pipe or a file
        )

    def start(self, n_rows: int, reasons) -> None:
        """The first line, and the skipped candidates."""
        if not self.verbose:
            return
        print(
            f"[CalibratorSearchCV] scoring {self.n_run} of {len(self.names)} "
            f"candidates x {self.n_splits} folds on {n_rows} rows; one line per "
            "candidate as its folds finish",
            file=sys.stderr,
            flush=True,
        )
        for name, reason in zip(self.names, reasons):
            if reason:
                self._print(name, reason)

    def skipped(self, name: str, reason: str) -> None:
        """The line of a candidate skipped while the others ran (``max_time``)."""
        if self.verbose:
            self._print(name, reason)

    def candidate(self, c: int, line: str) -> None:
        """The line of candidate ``c``, whose folds are done."""
        self.done += 1
        if self.verbose:
            elapsed = time.perf_counter() - self.started
            self._print(
                self.names[c], f"{line} [{self.done}/{self.n_run}, {elapsed:.1f} s]"
            )


def _scoring_name(scoring) -> str:
    """The name of a scoring for the selection's reason."""
    return scoring if isinstance(scoring, str) else "score"


def _change(verb_up: str, verb_down: str, diff: float) -> tuple[str, float]:
    """The verb that makes a difference read naturally, and its size."""
    return (verb_up, diff) if diff >= 0 else (verb_down, -diff)


@dataclass(frozen=True)
class _RowLosses:
    """The guard's noise for the log loss: paired per-row differences."""

    losses: np.ndarray  # candidates x rows held out
    weights: np.ndarray

    def compare(self, base: int, other: int, names) -> tuple[bool, str]:
        diff, se = paired_mean_difference(
            self.losses[base] - self.losses[other], self.weights
        )
        verb, size = _change("lowers", "raises", diff)
        return diff > se, (
            f"{names[other]} {verb} the per-row out-of-fold log loss of "
            f"{names[base]} by {size:.4g} (one standard error: {se:.4g})"
        )


@dataclass(frozen=True)
class _FoldScores:
    """The guard's noise for any other scoring: paired per-fold differences
    of the scores (greater is better), as in the one-standard-error rule of
    Hastie, Tibshirani and Friedman (ESL, 7.10)."""

    scores: np.ndarray  # candidates x folds
    name: str

    def compare(self, base: int, other: int, names) -> tuple[bool, str]:
        diff = self.scores[other] - self.scores[base]
        k = len(diff)
        mean = float(np.mean(diff))
        se = float(np.std(diff, ddof=1) / math.sqrt(k)) if k > 1 else math.inf
        error = self.name.startswith("neg_")
        what = self.name[4:] if error else self.name
        verbs = ("lowers", "raises") if error else ("raises", "lowers")
        verb, size = _change(*verbs, mean)
        return mean > se, (
            f"{names[other]} {verb} the held-out {what} of {names[base]} by "
            f"{size:.4g} on average over the {k} folds (one standard error: "
            f"{se:.4g})"
        )


@dataclass(frozen=True)
class _SearchData:
    """What :meth:`CalibratorSearchCV.fit` validated: the rows, labels and
    weights (``relative``: normalised for the scores), each candidate's
    template and input, the classifier's own predictions (its scores, or
    its head's logits; None without a head), and the groups of the rows
    with the candidates that take them (None: fitted without groups)."""

    X: np.ndarray
    labels: np.ndarray
    sample_weight: np.ndarray | None
    relative: np.ndarray
    templates: list
    inputs: list
    predicted: np.ndarray | None
    groups: np.ndarray | None = None
    grouped: tuple = ()

    def groups_of(self, c: int):
        """The groups given to candidate ``c``: None unless it takes them."""
        return self.groups if self.groups is not None and self.grouped[c] else None


class CalibratorSearchCV(BaseCalibrator):
    """Choose a calibrator by cross-validation, with a small-data guard.

    A meta-calibrator named after :class:`~sklearn.model_selection.GridSearchCV`:
    each candidate calibrator is scored by K-fold cross-fitting on the
    calibration set (fitted on the training rows of each fold, scored on
    its held-out rows), the winner is chosen with the guard below, and it
    is refitted on all rows as :attr:`best_calibrator_`, to which
    :meth:`predict_proba`, :meth:`predict`, :meth:`decision_function` and
    :meth:`predict_log_proba` delegate. It is itself a calibrator:
    usable as ``CalibratedClassifier(calibrator=CalibratorSearchCV(...))``,
    in a ``Pipeline``, with ``clone`` and pickle.

    Candidates are cloned, never fitted in place; each clone is given the
    search's ``input`` and ``classes`` through the wrapper protocol
    (:meth:`~skcal.base.BaseCalibrator._wrapper_params`), so that every
    candidate reads ``X`` the same way and has a column for every class,
    even where a training fold lacks one.

    **Local calibrators** (:class:`~skcal.base.BaseLocalCalibrator`, such
    as :class:`~skcal.LocalNetCalibrator`) can be candidates too. When one
    is, ``X`` holds the *embeddings* of the classifier, ``(n_samples,
    n_features)``, and ``coef`` and ``intercept`` its frozen linear head:
    the local candidates are given the head (and ``classes``) through their
    wrapper protocol (:meth:`~skcal.base.BaseLocalCalibrator._wrapper_params`)
    and read ``X``, while the score candidates read the head's logits
    ``X @ coef.T + intercept``, computed once per :meth:`fit` and per
    prediction, as ``input="logits"``. Without a head, only local
    candidates that do not use one (e.g. :class:`~skcal.KCalCalibrator`,
    or one given its own ``coef``) are accepted: score candidates cannot
    be scored on embeddings. Inside
    :class:`~skcal.CalibratedClassifier`, such a search is handed the
    classifier's embeddings and head (:meth:`_reads_embeddings`).

    **Calibration by group.** ``fit(X, y, groups=g)`` gives each row a
    group (a segment, site or prompt template that is known again when the
    model serves). The group-aware candidates, those whose ``fit`` has a
    ``groups`` parameter (scikit-learn's ``has_fit_parameter``), such as
    :class:`~skcal.GroupedTemperatureScaling` and
    :class:`~skcal.GroupedVectorScaling`, are fitted on each fold with
    ``groups[train]`` and scored with ``predict_proba(X[test],
    groups=groups[test])``; the other candidates ignore the groups. With
    ``candidates=None``, :class:`~skcal.GroupedTemperatureScaling` joins the
    default candidates, before the Dirichlet one (cheapest first: its
    cross-fitted shrinkage costs 20-100 times a vector scaling fit, e.g.
    10 s a fold on 3,600 rows x 26 classes in 20 groups on a busy
    machine); grouped vector scaling
    does not, as its ``2 C`` parameters per group need ``20 C`` events per
    group under the guard (10,400 for 26 classes and 20 groups), and its
    cross-fitted shrinkage costs tens of L-BFGS fits per fold. The folds are
    still stratified by class, *not* split by group: the groups are meant
    to be seen again at prediction, so each group's rows fall in both the
    training and the test part of every fold, as they will at deployment (a
    :class:`~sklearn.model_selection.GroupKFold` given as ``cv``, which
    receives ``groups``, would score every grouped candidate on groups it
    never saw, i.e. on its pooled map). The selected calibrator is refitted
    with the groups when it takes them; :meth:`predict_proba`,
    :meth:`predict_log_proba`, :meth:`decision_function` and :meth:`predict`
    take ``groups=`` and forward them to it (rows of unseen groups, or all
    rows without ``groups``, get its pooled map). When the winner is not
    group-aware, its map is the same for every group and ``groups`` is
    checked and unused, so the same serving code works whichever candidate
    wins; a search fitted without groups refuses them. A group-aware winner
    has no :meth:`to_torch` export. ``cv_results_`` keeps its form.

    **Small-data guard** (``guard="one_se"``, see Notes):

    a. a candidate with more than one free parameter per 10 events (the
       calibration rows the classifier gets wrong, or right if those are
       fewer) is skipped, with the reason recorded; temperature scaling
       needs 5;
    b. the best-scoring candidate must beat the simple candidates,
       :class:`~skcal.IdentityCalibrator` then
       :class:`~skcal.TemperatureScaling` (those present), by more than one
       standard error of the paired per-row difference of out-of-fold log
       losses; otherwise the simplest such candidate is kept.

    A candidate that raises during a fold (or returns NaN probabilities) is
    recorded as failed with the error message; the search goes on.

    Parameters
    ----------
    candidates : list of calibrators or of (name, calibrator) pairs, default=None
        The calibrators to compare: skcal score calibrators, or any
        estimator with ``fit(X, y, sample_weight=...)`` and
        ``predict_proba`` that reads the scores ``X``. Names default to the
        class name (``"-1"``, ``"-2"``, ... appended to repeated ones).
        None is the families that the benchmark of the user guide selected
        (:ref:`choosing-defaults`), cheapest first, with their defaults:
        :class:`~skcal.IdentityCalibrator`, :class:`~skcal.TemperatureScaling`,
        :class:`~skcal.VectorScaling`, :class:`~skcal.StructuredMatrixScaling`,
        :class:`~skcal.StructuredVectorScaling` and
        :class:`~skcal.DirichletCalibratorCV` (on every other point of its
        default grid, ``reg_lambdas = reg_mus = (1e-1, 1e-3, 1e-5)``, with
        ``cv=3``: the search scores it again anyway, and the full grid made
        it 90% of a default search's time). SMART, isotonic, beta and spline
        calibration, never selected there, are no longer default candidates;
        pass them to compare them. The default set's own rules (the
        Dirichlet-CV candidate run only from 5,000 rows and 20 classes, where
        it has won, and skipped where its grid would take minutes; its
        grid-edge warnings hidden) apply to None and to a list of the same
        estimators with the same settings on any ``device`` (what ``skcal
        select`` passes without ``--candidates``). Local calibrators are
        allowed: then ``X`` holds embeddings (see above).
    scoring : str or callable, default="neg_log_loss"
        Higher is better. ``"neg_log_loss"`` is the negative weighted mean
        log loss of every skcal calibrator's ``score`` (scikit-learn's scorer
        of that name wherever no probability of a true class is below
        2.2e-16, where scikit-learn clips); any other name is looked up by
        :func:`skcal.metrics.get_scorer` (skcal's calibration scorers, then
        scikit-learn's, then a metric's name or alias in any case: ``"nll"``
        is ``"neg_log_loss"``, ``"ece"`` is
        ``"neg_expected_calibration_error"``); a callable is
        ``scorer(estimator, X, y) -> float``, called with ``sample_weight=``
        when weights are given.
    cv : int, cross-validation generator or iterable, default=5
        An int is :class:`~sklearn.model_selection.StratifiedKFold` with
        ``shuffle=True`` and ``random_state``; anything else is passed to
        :func:`~sklearn.model_selection.check_cv` (a splitter, or an
        iterable of ``(train, test)`` index arrays), as in ``GridSearchCV``.
        None is 5.
    guard : "one_se" or None, default="one_se"
        The small-data guard (parameter count and one-standard-error rule).
        None keeps the best mean test score, as ``GridSearchCV`` does, and
        skips nothing.
    n_jobs : int, default=None
        Candidate x fold fits run in parallel through :class:`joblib.Parallel`
        (any joblib backend, a Dask cluster included). Results do not
        depend on it.
    max_time : float or None, default=None
        A time budget in seconds for the cross-fitting. Candidates start in
        their order; once the folds run so far have taken more than
        ``max_time``, the candidates not yet started are skipped, with the
        reason in ``cv_results_["skipped_reason"]``. The first candidate,
        :class:`~skcal.IdentityCalibrator` and
        :class:`~skcal.TemperatureScaling` always run. A candidate already
        started finishes its folds, and the winner is then refitted: the
        search can take longer than ``max_time`` by about one candidate's
        folds and one fit. The default candidates are ordered cheapest
        first. None (the default) sets no limit, and the selection does not
        depend on the machine's speed; with a budget it can. The time a
        default search takes, by rows and classes, is in the user guide
        (:ref:`choosing-time`).
    random_state : int, RandomState instance or None, default=None
        Shuffling of the folds of an int ``cv``; also the seed given to
        every candidate whose own ``random_state`` parameter is None (one
        seed per candidate, the same for all its folds and its refit).
    verbose : int, default=0
        With ``verbose >= 1``, live lines on stderr: what runs, each skipped
        candidate and why, then one line per candidate as soon as its folds
        finish (its name, mean +- std score and fit time, or why it failed;
        how many are done and the time so far; in the order they finish
        when ``n_jobs`` runs them in parallel), then the selection.
    input : {"logits", "proba"}, default="logits"
        What ``X`` holds; passed to every candidate.
    classes : array-like of shape (n_classes,), default=None
        The label of each column of ``X`` (of each row of ``coef`` for
        embeddings); see :class:`~skcal.base.BaseCalibrator`. The resolved
        ``classes_`` is passed to every candidate.
    coef : array-like of shape (n_classes, n_features), default=None
        The frozen linear head of the classifier whose embeddings ``X``
        holds, when a candidate is a local calibrator (scikit-learn's
        naming, as the local calibrators take it); given to every local
        candidate that takes a head, replacing its own. Refused when no
        candidate is local. For a binary head with one row ``w``, pass
        ``np.vstack([-w, w]) / 2``.
    intercept : array-like of shape (n_classes,), default=None
        Its bias (zeros when None).

    Attributes
    ----------
    best_calibrator_ : estimator
        The selected candidate, refitted on all rows.
    selected_ : str
        Its name.
    best_index_ : int
        Its index in the candidates (and in ``cv_results_``).
    best_score_ : float
        Its mean test score. With the guard it may be below the best one.
    selection_reason_ : str
        Why it was selected: the comparisons of the guard, with the mean
        difference of per-row log losses and its standard error.
    cv_results_ : dict of ndarray
        One entry per candidate, as in ``GridSearchCV``: ``candidate`` (the
        names), ``split{k}_test_score``, ``mean_test_score``,
        ``std_test_score``, ``rank_test_score`` (skipped and failed
        candidates share the last rank), ``mean_fit_time``,
        ``std_fit_time``, ``mean_score_time``, ``std_score_time``,
        ``n_parameters`` (the count of the guard, NaN when not counted) and
        ``skipped_reason`` ("" when scored). Scores and times are NaN for
        skipped and failed candidates. ``pandas.DataFrame(cv_results_)``
        gives a table.
    n_splits_ : int
        Number of folds.
    refit_time_ : float
        Seconds spent refitting the selected candidate on all rows.
    classes_ : ndarray of shape (n_classes,)
        Label of each column.
    reads_embeddings_ : bool
        Whether ``X`` held embeddings (a candidate is local).
    groups_ : ndarray of shape (n_groups,) or None
        The sorted group labels given to :meth:`fit`; None when fitted
        without groups.
    coef_, intercept_ : ndarray of shape (n_classes, n_features), (n_classes,)
        The head, validated, as float64 (only when ``coef`` is given).
    n_features_in_ : int
        Number of columns of ``X`` (scores or embedding dimensions).

    See Also
    --------
    sklearn.model_selection.GridSearchCV : the same cross-validated scores
        (``split{k}_test_score``) for a grid over ``calibrator``, without
        the guard.
    DirichletCalibratorCV : a search over the regularisation of one family.

    Notes
    -----
    **Parameter count (guard a).** A candidate is skipped when its number
    ``p`` of free parameters exceeds ``e / 10`` (temperature scaling: when
    ``e < 5``, see below), ``e`` the *events*: the
    calibration rows whose top class (the largest score, of the scores or
    of the head's logits) is not the label, or the rows where it is if
    those are fewer, each set counted as Kish's effective sample size
    ``(sum w)^2 / sum w^2`` with weights. This is the "ten events per
    variable" rule of thumb of logistic regression (Peduzzi et al. 1996),
    which the unregularised :class:`~skcal.DirichletCalibrator` also warns
    by; the events are the classifier's errors because they are what a
    calibration map learns from: on 100 rows of a 99%-accurate model (0 or
    1 error) a cross-fitted log loss cannot see an over-confident map,
    every held-out row being right (seen on a real 10-class set: the
    former rule of 10 *rows* per parameter let a Dirichlet map and
    isotonic regression through, at 3-7 times the uncalibrated test NLL).
    Without a head, a search over local calibrators counts rows instead. It
    removes only the candidates that cannot be estimated at all; the
    one-standard-error rule judges the rest.

    The counts, with ``C`` classes (each calibrator states its own,
    :meth:`~skcal.base.BaseCalibrator.n_free_parameters`):

    - identity 0; temperature scaling 1; class temperatures ``C``; Platt
      ``2C``; beta ``3C`` (``2C`` for "am" and "ab"); histogram binning
      ``C n_bins``; spline ``n_knots``; isotonic regression ``C``
      (non-parametric: at least one step per class; its steps grow with
      the data); SMART and PTS the weights and biases of their network (49
      for SMART's default);
    - penalised affine maps (vector and matrix scaling, Dirichlet,
      structured matrix scaling) count their *unpenalised* entries, and at
      least one parameter per five classes (``ceil(C / 5)``, at least 1): a
      ridge whose strength grows as the data shrink (their ``"auto"``
      defaults, SMS's ``C / n``) pulls them to temperature scaling (or
      toward 0) when rows are few, so they cannot over-fit the way an
      unpenalised map does; but with fewer than two events per class their
      per-class entries still follow the noise of the rows (on four real
      tasks at 100 rows, penalised vector scaling and SMS, then counted as
      1, were selected and raised the test NLL 0.5-4.9% above temperature
      scaling's). So vector scaling counts ``ceil(C / 5)`` with its default
      ridge and ``2C`` with ``reg_lambda=0``, matrix scaling and Dirichlet
      ``C^2 + C`` unpenalised, SMS ``ceil(C / 5)``, and
      :class:`~skcal.DirichletCalibratorCV` is counted at the least
      penalised point of its grid (``C``, the diagonal that ODIR leaves
      free, by default);
    - group-aware candidates are counted with the number of groups ``G``
      of ``fit`` when their count takes it: grouped temperature scaling
      ``G`` (its cross-fitted shrinkage can be 0), grouped vector scaling
      ``2 C G``;
    - nested searches and estimators that do not state a count are not
      counted and never skipped;
    - local calibrators are not counted either (``n_parameters`` is NaN):
      their weights grow with the embedding dimension (a default
      :class:`~skcal.LocalNetCalibrator` on 512-d embeddings of 10 classes
      has 36,736; a :class:`~skcal.VQLocalCalibrator` retrains a ``C x
      (n_features + 1)`` head), while what limits their over-fitting is not
      that number but their own regularisation: early stopping on a
      held-out split that restores the best epoch, from a start at the
      head's own predictions (Local Nets, VQ's map), a bandwidth chosen by
      inner cross-validation (KCal) or by a reference rule (ProCal's two
      2-D densities). Ten rows per weight would skip them even on the
      calibration sets of thousands of rows they are meant for; the
      one-standard-error rule judges them against the simple candidates
      instead, and one that cannot be fitted on the rows of a fold is
      recorded as failed.

    Temperature scaling is counted too, but its one parameter, shared by
    every class and estimated from all the events at once, needs 5 events
    instead of 10: the lower end of the 5-9 events per variable that
    Vittinghoff and McCulloch (2007) found adequate. Exempted and judged by
    the one-standard-error rule alone, it was selected on 100 rows of
    pendigits with a single error and raised the test NLL by 38.6% over
    identity: with one or two events the standard error rests on those rows.
    ``benchmarks/bench_select_small.py`` measures the threshold on 400 real
    calibration subsets of 100 rows (8 tasks, 50 seeds), where only these
    two can be chosen: with 5 events the test NLL is on average 2.12% above
    the better of identity and temperature scaling, against 3.70% with 10,
    and 4 subsets lose more than 1% to identity either way; with 2 events
    (or 0) 9 (22) subsets do. At 500 rows it costs a little: 0.82% against
    0.72%, and 18 subsets instead of 16 that lose more than 1% to identity
    (16 of them on optdigits, where temperature scaling fitted on the whole
    calibration pool raises the test NLL too, 0.156 to 0.160). With the
    default candidates,
    :class:`~skcal.DirichletCalibratorCV` is skipped below
    :data:`DIRICHLET_CV_MIN_ROWS` rows or :data:`DIRICHLET_CV_MIN_CLASSES`
    classes (5,000 and 20: on the benchmark it was selected only at 10,000
    rows of 45 and 66 classes) and where its inner grid
    would take minutes on the CPU (work over the folds above
    :data:`DIRICHLET_CV_MAX_WORK`: 10,000 rows above about 86 classes,
    2,000 rows above about 190; always run on a GPU).

    **One-standard-error rule (guard b).** Let ``b`` be the candidate with
    the best mean test score and ``s`` a simple candidate (identity, then
    temperature scaling). For every row ``i`` held out, ``d_i = l_s(i) -
    l_b(i)`` is the difference of their out-of-fold log losses (averaged
    over the folds that held the row out, when a ``cv`` holds rows out
    more than once), with ``b`` standing for any candidate compared with
    ``s``; it beats ``s`` when the (weighted) mean of ``d`` exceeds its
    standard error ``sd(d) / sqrt(n)``. The simple reference is identity,
    replaced by temperature scaling only when temperature scaling beats it
    (a simple candidate not clearly better than identity is never preferred
    to it: on 100 rows its out-of-fold losses can hold one enormous loss
    whose standard error would otherwise shelter it); ``b`` is selected
    when it beats the reference, else the reference is kept. Why this rule:
    it is the one-standard-error rule of Breiman et al. (1984) and Hastie,
    Tibshirani and Friedman (ESL, 7.10): among models whose estimated risk
    is within one standard error of the best, prefer the simplest. Its
    standard error is taken on the *paired* per-row differences, which
    removes the variation of difficulty between rows that both candidates
    share, so it is far tighter than one computed from a handful of fold
    scores, and it shrinks as ``1 / sqrt(n)``: a real improvement is kept
    on large sets, while on small ones a richer candidate must win clearly
    (a one-sided paired z-test at about 16%). Held-out losses of different
    folds are not independent (the fits share training rows; Bengio and
    Grandvalet 2004), so this is a rule of thumb, not a calibrated test.
    The rule judges by the ``scoring`` that ranks the candidates. For the
    log loss (the default) the differences are per row, as above. Most
    calibration errors (ECE and its kin) have no per-row form: for any other
    ``scoring`` the paired differences are those of the fold scores, ``d_k
    = score_b(fold k) - score_s(fold k)``, with the standard error
    ``sd(d) / sqrt(K)`` over the ``K`` folds (ESL's rule as written): a
    coarser noise estimate, so a richer candidate must win in most folds.

    ``sample_weight`` weights every fold fit, every score (as the scorer's
    ``sample_weight``), the guard's means and standard errors, and the
    refit. Rows are split, not weights: a row repeated ``k`` times can fall
    in several folds, a row of weight ``k`` falls in one, so weights and
    repetitions give different splits; with the same splits, candidates
    whose fits treat integer weights as repetitions get the same scores.

    Warnings raised by the candidates in the folds are collected and raised
    after the search, once per candidate and category, with the first
    message and the number of folds that raised one, whatever ``n_jobs``
    (with a joblib backend that runs folds in threads of this process, such
    as "threading", they are raised where they occur instead).

    Examples
    --------
    >>> from skcal import IdentityCalibrator, TemperatureScaling, VectorScaling
    >>> from skcal.model_selection import CalibratorSearchCV
    >>> from skcal.utils._testing import make_miscalibrated_logits
    >>> logits, y = make_miscalibrated_logits(600, 3, temperature=3.0, random_state=0)
    >>> search = CalibratorSearchCV(
    ...     [IdentityCalibrator(), TemperatureScaling(device="cpu"),
    ...      VectorScaling(device="cpu")], cv=3, random_state=0,
    ... ).fit(logits, y)
    >>> search.cv_results_["rank_test_score"]  # vector scaling scores best...
    array([3, 2, 1], dtype=int32)
    >>> search.selected_  # ...but not by more than one standard error
    'TemperatureScaling'
    >>> search.predict_proba(logits[:2]).shape
    (2, 3)

    With groups whose temperatures differ, the grouped candidate wins:

    >>> import numpy as np
    >>> from skcal import GroupedTemperatureScaling
    >>> rng = np.random.default_rng(0)
    >>> groups = rng.choice(["north", "south", "west"], size=1500)
    >>> T = np.select([groups == "north", groups == "south"], [0.5, 2.0], 1.0)
    >>> logits = rng.normal(size=(1500, 3)) * 3
    >>> p = np.exp(logits / T[:, None])
    >>> cdf = np.cumsum(p / p.sum(1, keepdims=True), axis=1)
    >>> y = (cdf > rng.random((1500, 1))).argmax(1)
    >>> search = CalibratorSearchCV(
    ...     [IdentityCalibrator(), TemperatureScaling(device="cpu"),
    ...      GroupedTemperatureScaling()], cv=3, random_state=0,
    ... ).fit(logits, y, groups=groups)
    >>> search.selected_
    'GroupedTemperatureScaling'
    >>> search.predict_proba(logits[:2], groups=groups[:2]).shape
    (2, 3)
    """

    _parameter_constraints: dict = {
        **BaseCalibrator._parameter_constraints,
        "candidates": [list, tuple, None],
        "scoring": [str, callable],
        "cv": ["cv_object"],
        "guard": [StrOptions({"one_se"}), None],
        "n_jobs": [Integral, None],
        "max_time": [Interval(Real, 0, None, closed="left"), None],
        "random_state": ["random_state"],
        "verbose": ["verbose"],
        "coef": ["array-like", None],
        "intercept": ["array-like", None],
    }

    def __init__(
        self,
        candidates=None,
        *,
        scoring="neg_log_loss",
        cv=5,
        guard="one_se",
        n_jobs=None,
        max_time=None,
        random_state=None,
        verbose=0,
        input="logits",
        classes=None,
        coef=None,
        intercept=None,
    ):
        self.candidates = candidates
        self.scoring = scoring
        self.cv = cv
        self.guard = guard
        self.n_jobs = n_jobs
        self.max_time = max_time
        self.random_state = random_state
        self.verbose = verbose
        self.input = input
        self.classes = classes
        self.coef = coef
        self.intercept = intercept

    # ------------------------------------------------------- wrapper protocol
    def n_free_parameters(self, n_classes, n_features=None):
        """NaN: a nested search is not counted (its count is that of the
        candidate it selects, unknown before it is fitted)."""
        return math.nan

    def _reads_embeddings(self) -> bool:
        """Whether ``X`` holds embeddings: some candidate is a local calibrator.

        Read from the parameters, before :meth:`fit`, so that a wrapper can
        decide whether to give the search a classifier's embeddings and
        linear head (:meth:`_wrapper_params` with ``coef`` and
        ``intercept``) or its scores (with ``input``).
        """
        return any(_is_local(est) for est in _candidate_estimators(self.candidates))

    @property
    def _uses_head(self) -> bool:
        """Whether the search needs the frozen head (as a local calibrator).

        True when it reads embeddings and a score candidate (which reads
        the head's logits) or a local candidate that uses a head is among
        its candidates.
        """
        estimators = _candidate_estimators(self.candidates)
        return any(_is_local(est) for est in estimators) and any(
            not _is_local(est) or getattr(est, "_uses_head", False)
            for est in estimators
        )

    def _wrapper_params(
        self, *, classes, input=None, coef=None, intercept=None
    ) -> dict:
        """The parameters :class:`~skcal.CalibratedClassifier` sets on a clone.

        Both wrapper protocols: ``input`` for a search over score
        calibrators (:meth:`skcal.base.BaseCalibrator._wrapper_params`),
        ``coef`` and ``intercept`` for one that reads embeddings
        (:meth:`skcal.base.BaseLocalCalibrator._wrapper_params`).

        Parameters
        ----------
        classes : ndarray of shape (n_classes,)
            The wrapper's ``classes_``.
        input : {"logits", "proba"}, default=None
            What the classifier's scores are (score calibrators).
        coef : ndarray of shape (n_classes, n_features), default=None
            The classifier's linear head (embeddings).
        intercept : ndarray of shape (n_classes,), default=None
            Its bias.

        Returns
        -------
        dict
            Keyword arguments for :meth:`set_params`.
        """
        params = {"classes": classes}
        if input is not None:
            params["input"] = input
        if coef is not None or intercept is not None:
            params.update(coef=coef, intercept=intercept)
        return params

    # ------------------------------------------------------------- helpers
    def _named_candidates(self, grouped=False) -> list[tuple[str, object]]:
        """``(name, estimator)`` pairs, validated, with unique names
        (``grouped``: the default set holds the grouped candidate)."""
        if self.candidates is not None:
            items = list(self.candidates)
        else:
            items = _default_candidates()
            items = _with_grouped(items) if grouped else items
        if not items:
            raise ValueError(
                "candidates is empty: pass at least one calibrator, or None for "
                "the default set."
            )
        pairs = []
        for i, item in enumerate(items):
            name = None
            if isinstance(item, tuple):
                if len(item) != 2 or not isinstance(item[0], str) or not item[0]:
                    raise ValueError(
                        f"candidates[{i}] must be a calibrator or a (name, "
                        f"calibrator) pair with a non-empty string name; got "
                        f"{item!r}."
                    )
                name, item = item
            if not (hasattr(item, "fit") and hasattr(item, "predict_proba")):
                raise TypeError(
                    f"candidates[{i}] must be a calibrator with fit and "
                    f"predict_proba, such as skcal.TemperatureScaling(); got "
                    f"{type(item).__name__}."
                )
            pairs.append((name, item))
        explicit = [name for name, _ in pairs if name is not None]
        repeated = sorted(name for name, k in Counter(explicit).items() if k > 1)
        if repeated:
            raise ValueError(
                f"candidate names must be unique; {repeated} appear more than once."
            )
        defaults = Counter(type(est).__name__ for name, est in pairs if name is None)
        seen, named = Counter(), []
        for name, est in pairs:
            if name is None:
                name = type(est).__name__
                if defaults[name] > 1 or name in explicit:
                    base = name
                    while name in explicit or name == base:
                        seen[base] += 1
                        name = f"{base}-{seen[base]}"
            named.append((name, est))
        return named

    def _check_kinds(self, names, local) -> None:
        """Refuse mixes of candidates that ``X`` and the head cannot serve."""
        head = self.coef is not None or self.intercept is not None
        if not any(local):
            if head:
                raise ValueError(
                    "coef and intercept are the linear head of the classifier "
                    "whose embeddings X holds, for searches with a local "
                    "calibrator among the candidates; every candidate here is a "
                    "score calibrator, which reads the scores X. Remove coef and "
                    "intercept, or add a local candidate and pass embeddings."
                )
            return
        if self.input != "logits":
            raise ValueError(
                f"input={self.input!r}, but X holds embeddings, not scores, because "
                f"candidate {names[local.index(True)]!r} is a local calibrator; the "
                "score candidates read the head's logits X @ coef.T + intercept. "
                "Leave input='logits'."
            )
        if head:
            return
        scores = [n for n, is_local in zip(names, local) if not is_local]
        if scores:
            raise ValueError(
                f"candidate(s) {scores} are score calibrators, which read the "
                f"classifier's scores, but X holds embeddings because candidate "
                f"{names[local.index(True)]!r} is a local calibrator, and scores "
                "cannot be derived from embeddings without the classifier's "
                "linear head. Pass it to CalibratorSearchCV as coef= (n_classes, "
                "n_features) and intercept= (n_classes,), or compare local "
                "calibrators only."
            )

    def _check_local_heads(self, names, estimators, local) -> None:
        """Without the search's head, refuse local candidates that need one."""
        if self.coef is not None or self.intercept is not None:
            return  # an intercept alone is refused with the head's checks
        for name, est, is_local in zip(names, estimators, local):
            if (
                is_local
                and getattr(est, "_uses_head", False)
                and getattr(est, "coef", None) is None
            ):
                raise ValueError(
                    f"candidate {name!r} ({type(est).__name__}) starts from the "
                    "classifier's predictions and needs its linear head, but "
                    "neither it nor the search was given one (alone it would fit "
                    "a logistic-regression head on each fold, a new classifier "
                    "instead of a calibration of yours). Pass the head to "
                    "CalibratorSearchCV as coef= (n_classes, n_features) and "
                    "intercept= (n_classes,)."
                )

    def _templates(self, estimators, local, head) -> list:
        """Clones configured by the wrapper protocol, seeded by ``random_state``.

        A score candidate gets ``classes`` and ``input`` (``"logits"`` when
        it reads the head's logits); a local one ``classes`` and the head
        ``coef``, ``intercept`` (only ``classes`` without a head: its own
        head, if any, is kept).
        """
        rng = (
            None if self.random_state is None else check_random_state(self.random_state)
        )
        coef, intercept = (None, None) if head is None else head
        templates = []
        for est, is_local in zip(estimators, local):
            template = clone(est)
            configure = getattr(template, "_wrapper_params", None)
            if configure is not None and not is_local:
                template.set_params(
                    **configure(classes=self.classes_, input=self.input)
                )
            elif configure is not None:
                params = configure(
                    classes=self.classes_, coef=coef, intercept=intercept
                )
                if head is None:
                    params = {k: v for k, v in params.items() if v is not None}
                template.set_params(**params)
            seed = None if rng is None else int(rng.randint(np.iinfo(np.int32).max))
            params = template.get_params(deep=False)
            if seed is not None and "random_state" in params:
                if params["random_state"] is None:
                    template.set_params(random_state=seed)
            templates.append(template)
        return templates

    def _folds(self, X, labels, groups=None) -> list:
        """The ``(train, test)`` index arrays of ``cv`` (a splitter is given
        ``groups`` too, as in ``GridSearchCV``)."""
        cv = 5 if self.cv is None else self.cv
        if isinstance(cv, Integral):
            counts = np.unique(labels, return_counts=True)[1]
            if counts.max() < cv:
                raise ValueError(
                    f"cv={cv} stratified folds need at least {cv} samples of some "
                    f"class, but the largest class has {counts.max()}. Use fewer "
                    "folds (cv=2 at least) or a larger calibration set."
                )
            if counts.min() < cv:
                warn(
                    f"CalibratorSearchCV(cv={cv}): {np.count_nonzero(counts < cv)} "
                    f"class(es) have fewer than {cv} samples (the smallest has "
                    f"{counts.min()}), so some folds are fitted or scored without "
                    "them. Lower cv if the scores look unstable.",
                    UserWarning,
                )
            splitter = StratifiedKFold(cv, shuffle=True, random_state=self.random_state)
            with warnings.catch_warnings():  # sklearn's says the same, less clearly
                warnings.filterwarnings("ignore", "The least populated class")
                folds = list(splitter.split(X, labels))
        else:
            splitter = check_cv(cv, labels, classifier=True)
            folds = list(splitter.split(X, labels, groups))
        if not folds:
            raise ValueError(f"cv={self.cv!r} gave no split.")
        n_rows = X.shape[0]
        folds = [
            (
                _fold_rows(train, k, "training", n_rows),
                _fold_rows(test, k, "test", n_rows),
            )
            for k, (train, test) in enumerate(folds)
        ]
        for k, (train, test) in enumerate(folds):
            if len(train) == 0 or len(test) == 0:
                raise ValueError(
                    f"fold {k} of cv={self.cv!r} has an empty training or test part; "
                    "every fold needs both."
                )
        return folds

    def _validate_fit_inputs(self, X, y, sample_weight):
        """Validated scores (as given), labels, user weights and relative weights."""
        self.reads_embeddings_ = False
        names = frame_column_names(X)
        X, tol = self._score_array(X, reset=True)
        # the candidates' checks, once, with the search's name in the messages
        scores_to_logits(X, self.input, tol=tol)
        # the weights are validated once, here; the candidates' fits get them
        # as float64 arrays (their own check costs 0.24 ms at 100,000 rows)
        sample_weight = _check_weights(sample_weight, X.shape[0])
        self.classes_, y_index, relative = check_fit_targets(
            self,
            y,
            X.shape[0],
            X.shape[1],
            self.classes,
            sample_weight,
            weights_checked=True,
        )
        # columns named after the classes: in their order, once for every fit
        order = class_column_order(names, self.classes_)
        if order is not None:
            X = X[:, order]
        return X, self.classes_[y_index], sample_weight, relative

    def _validate_embedding_inputs(self, X, y, sample_weight):
        """As :meth:`_validate_fit_inputs` for embeddings; also the head.

        Returns the embeddings (as given), the head ``(coef, intercept)``
        validated as float64 (None without ``coef``), labels, user weights
        and relative weights. The columns are the head's rows; without a
        head, ``classes`` or the labels of ``y``, as for a local calibrator.
        """
        self.reads_embeddings_ = True
        # the checks and messages of the local calibrators, once
        X = BaseLocalCalibrator._validate_embeddings(self, X, reset=True)
        head = BaseLocalCalibrator._head_columns(self, X.shape[1])
        if head is not None:
            n_columns = head[0].shape[0]
            self.coef_, self.intercept_ = head
        elif self.classes is not None:
            n_columns = len(np.atleast_1d(self.classes))
        else:
            n_columns = 0 if y is None else len(np.unique(check_labels(y)))
        sample_weight = _check_weights(sample_weight, X.shape[0])
        self.classes_, y_index, relative = check_fit_targets(
            self,
            y,
            X.shape[0],
            n_columns,
            self.classes,
            sample_weight,
            weights_checked=True,
        )
        return X, head, self.classes_[y_index], sample_weight, relative

    # ------------------------------------------------------------------ fit
    @_fit_context(
        # the candidates are the user's, unvalidated: their own fit validates them
        prefer_skip_nested_validation=False
    )
    def fit(self, X, y, sample_weight=None, *, groups=None):
        """Score every candidate by cross-fitting, select one, refit it.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_classes) or (n_samples, n_features)
            Scores of the classifier being calibrated, read as logits or as
            probabilities according to ``input``; or, when a candidate is a
            local calibrator, the embeddings that ``coef`` and ``intercept``
            map to its logits.
        y : array-like of shape (n_samples,)
            True labels.
        sample_weight : array-like of shape (n_samples,), default=None
            Non-negative sample weights, used by every fit and every score.
        groups : array-like of shape (n_samples,), default=None
            The group (segment, site, prompt template) of each row, for
            group-aware candidates: those whose ``fit`` has a ``groups``
            parameter, fitted with ``groups[train]`` and scored with
            ``predict_proba(X[test], groups=groups[test])``; the others
            ignore them. With ``candidates=None``,
            :class:`~skcal.GroupedTemperatureScaling` joins the candidates.
            A ``cv`` splitter is given them too (``split(X, y, groups)``).
            See "Calibration by group" in the class docstring.

        Returns
        -------
        self : object
            The fitted search.
        """
        for attr in ("coef_", "intercept_"):  # of an earlier fit on embeddings
            self.__dict__.pop(attr, None)
        names, estimators = zip(*self._named_candidates(groups is not None))
        data = self._prepare(names, estimators, X, y, sample_weight, groups)
        scoring, scorer = self._resolve_scoring()
        folds = self._folds(data.X, data.labels, data.groups)
        self.n_splits_ = len(folds)
        n_params, reasons = self._guard(data, len(folds))
        by_candidate = self._cross_fit(names, data, folds, reasons, scorer)
        scores, fit_times, score_times, row_losses, tested = self._collect(
            names, folds, by_candidate, reasons, data.X.shape[0]
        )
        self.cv_results_ = self._results(
            names, scores, fit_times, score_times, n_params, reasons
        )
        # the guard judges by the user's scoring: per row for the log loss,
        # per fold for any other score (most have no per-row form)
        noise = (
            _RowLosses(row_losses, data.relative[tested])
            if scorer is None
            else _FoldScores(scores, _scoring_name(scoring))
        )
        self.best_index_, self.selection_reason_ = self._select(
            names, data.templates, noise
        )
        self.selected_ = names[self.best_index_]
        self.best_score_ = float(self.cv_results_["mean_test_score"][self.best_index_])
        if self.verbose:
            self._report()
        self._refit(data)
        return self

    def _resolve_scoring(self):
        """``(scoring, scorer)``: the scoring with an alias ("nll", "ece")
        resolved to its scorer's name, and its scorer (None: the log loss)."""
        scoring = self.scoring
        if isinstance(scoring, str):
            scoring = scorer_name(scoring)
        scorer = None if scoring == "neg_log_loss" else scoring
        if isinstance(scorer, str):
            scorer = get_scorer(scorer)
        return scoring, scorer

    def _prepare(self, names, estimators, X, y, sample_weight, groups) -> _SearchData:
        """The validated data, each candidate's template and input."""
        local = [_is_local(est) for est in estimators]
        self._check_kinds(names, local)
        self._check_local_heads(names, estimators, local)
        if any(local):
            X, head, labels, sample_weight, relative = self._validate_embedding_inputs(
                X, y, sample_weight
            )
            # the score candidates' input, computed once
            logits = None if head is None else _head_logits(X, *head)
            inputs = [X if is_local else logits for is_local in local]
        else:
            X, labels, sample_weight, relative = self._validate_fit_inputs(
                X, y, sample_weight
            )
            head, logits, inputs = None, X, [X] * len(estimators)
        groups = self._validate_groups(groups, len(labels), names, estimators)
        return _SearchData(
            X=X,
            labels=labels,
            sample_weight=sample_weight,
            relative=relative,
            templates=self._templates(estimators, local, head),
            inputs=inputs,
            predicted=logits,  # the classifier's scores, or its head's logits
            groups=groups,
            grouped=tuple(_takes_groups(est) for est in estimators),
        )

    def _validate_groups(self, groups, n_rows: int, names, estimators):
        """``groups`` as a 1-D array of ``n_rows`` labels (None stays None);
        sets ``groups_``. Warns when nothing will read them."""
        self.groups_ = None
        if groups is None:
            return None
        groups = np.asarray(groups)  # a Dask array or series is computed here
        if groups.shape != (n_rows,):
            raise ValueError(
                f"CalibratorSearchCV.fit: groups must give the group of each row "
                f"of X and y, a 1-D array of shape ({n_rows},); got shape "
                f"{groups.shape}. Pass one label (segment, site, prompt template) "
                "per calibration row, or groups=None."
            )
        self.groups_, _ = check_groups(groups, n_rows)
        takers = [n for n, est in zip(names, estimators) if _takes_groups(est)]
        if not takers and (self.cv is None or isinstance(self.cv, Integral)):
            warn(
                f"CalibratorSearchCV.fit: groups were given, but no candidate takes "
                f"them (none has a groups parameter in fit: {list(names)}) and "
                f"cv={self.cv!r} does not split by them, so they change nothing. "
                "Add a group-aware candidate such as GroupedTemperatureScaling(), "
                "or leave candidates=None to have it added.",
                UserWarning,
            )
        return groups

    def _guard(self, data: _SearchData, n_splits: int):
        """Each candidate's parameter count and skip reason ("" to run it)."""
        templates = data.templates
        n_groups = None if self.groups_ is None else len(self.groups_)
        n_params = np.array(
            [_n_parameters(t, len(self.classes_), n_groups) for t in templates],
            dtype=float,
        )
        events = (
            math.nan
            if data.predicted is None
            else count_events(data.predicted, data.labels, self.classes_, data.relative)
        )
        required = np.where(
            [isinstance(t, TemperatureScaling) for t in templates],
            TEMPERATURE_EVENTS,
            n_params * EVENTS_PER_PARAMETER,
        )
        reasons = self._skip_reasons(n_params, required, data.relative, events)
        if _is_default_set(self.candidates):
            self._skip_costly(templates, reasons, len(data.relative), n_splits)
        return n_params, reasons

    def _cross_fit(self, names, data: _SearchData, folds, reasons, scorer) -> dict:
        """Every candidate that runs, fitted and scored on every fold:
        ``{candidate: [fold results]}``. With ``verbose``, the skipped
        candidates first, then one line per candidate as its folds finish."""
        run = [c for c in range(len(data.templates)) if not reasons[c]]
        n = len(folds)
        report = _LiveReport(self.verbose, names, len(run), n)
        report.start(len(data.labels), reasons)
        budget = _TimeBudget(self.max_time, data.templates)
        tasks = (
            delayed(_fit_and_score_at)(
                c,
                k,
                data.templates[c],
                data.inputs[c],
                data.labels,
                self.classes_,
                data.sample_weight,
                *fold,
                scorer,
                data.groups_of(c),
            )
            for c in run
            if budget.starts(c)  # asked when joblib reaches the candidate
            for k, fold in enumerate(folds)
        )
        by_candidate = {c: [None] * n for c in run}
        waiting = dict.fromkeys(run, n)
        for c, k, result in _parallel(self.n_jobs)(tasks):
            by_candidate[c][k] = result
            waiting[c] -= 1
            if not waiting[c]:
                report.candidate(c, _candidate_line(by_candidate[c]))
        for c, elapsed in budget.late.items():
            del by_candidate[c]
            reasons[c] = (
                f"skipped: the time budget max_time={self.max_time:g} s was spent "
                f"before its turn ({elapsed:.3g} s of cross-fitting); raise "
                "max_time, or None for no limit, to score it"
            )
            report.skipped(names[c], reasons[c])
        return by_candidate

    def _refit(self, data: _SearchData) -> None:
        """The selected candidate on every row: ``best_calibrator_``."""
        start = time.perf_counter()
        weight = data.sample_weight
        fit_params = {} if weight is None else {"sample_weight": weight}
        if data.groups_of(self.best_index_) is not None:
            fit_params["groups"] = data.groups
        with warnings.catch_warnings():
            if _is_default_set(self.candidates):  # as in the folds
                warnings.simplefilter("ignore", GridEdgeWarning)
            self.best_calibrator_ = clone(data.templates[self.best_index_]).fit(
                data.inputs[self.best_index_], data.labels, **fit_params
            )
        self.refit_time_ = time.perf_counter() - start

    def _skip_costly(self, templates, reasons, n_rows, n_splits) -> None:
        """Skip the default Dirichlet-CV candidate below
        :data:`DIRICHLET_CV_MIN_ROWS` rows or :data:`DIRICHLET_CV_MIN_CLASSES`
        classes, and where its CPU work over the folds exceeds
        :data:`DIRICHLET_CV_MAX_WORK` (set in ``reasons``)."""
        n_classes = len(self.classes_)
        for c, t in enumerate(templates):
            if not isinstance(t, DirichletCalibratorCV) or reasons[c]:
                continue
            if n_rows < DIRICHLET_CV_MIN_ROWS or n_classes < DIRICHLET_CV_MIN_CLASSES:
                reasons[c] = (
                    f"skipped: a default candidate run only where it has won on "
                    f"the benchmark, from {DIRICHLET_CV_MIN_ROWS} rows and "
                    f"{DIRICHLET_CV_MIN_CLASSES} classes ({n_rows} rows x "
                    f"{n_classes} classes here); pass your own candidates, e.g. "
                    "[DirichletCalibratorCV(), ...], to include it"
                )
                continue
            work = n_splits * t.cpu_work(n_rows, n_classes)
            if work > DIRICHLET_CV_MAX_WORK:
                reasons[c] = (
                    f"skipped: a default candidate whose inner grid would take "
                    f"minutes on the CPU here ({n_rows} rows x {n_classes} "
                    f"classes x {n_splits} folds: work {work:.2g} > "
                    f"{DIRICHLET_CV_MAX_WORK:.0e}); pass your own candidates, "
                    "e.g. [DirichletCalibratorCV(), ...], to include it"
                )

    def _skip_reasons(self, n_params, required, relative, events) -> list[str]:
        """Guard (a): why each candidate is skipped ("" when it is not).

        ``required``: the events each candidate needs (NaN: not counted).
        ``events``: ``count_events`` of the classifier's scores; NaN when its
        predictions are unknown, and then the rows count instead.
        """
        reasons = [""] * len(n_params)
        if self.guard is None:
            return reasons
        if np.isnan(events):
            available, unit = effective_sample_size(relative), "calibration rows"
        else:
            available, unit = (
                events,
                (
                    "events (calibration rows the classifier gets wrong, or right "
                    "if those are fewer: what a calibration map learns from)"
                ),
            )
        for c, (p, need) in enumerate(zip(n_params, required)):
            if not need > available:  # False for NaN
                continue
            if need == p * EVENTS_PER_PARAMETER:
                rule = f"{EVENTS_PER_PARAMETER} per parameter"
            else:  # temperature scaling
                rule = "its one parameter is shared by every class"
            count = (
                "1 free parameter needs" if p == 1 else f"{int(p)} free parameters need"
            )
            reasons[c] = (
                f"skipped: {count} at least {int(need)} {unit}, {rule}; "
                f"got {available:.4g}"
            )
        return reasons

    def _collect(self, names, folds, by_candidate, reasons, n_rows):
        """The fold results as arrays; records failures in ``reasons``.

        Returns the scores, fit and score times (candidates x folds, NaN
        where not scored), the out-of-fold log loss of each row held out
        (candidates x rows, averaged over the folds that held it out), and
        the mask of those rows.
        """
        n_candidates, n_splits = len(names), len(folds)
        scores = np.full((n_candidates, n_splits), np.nan)
        fit_times = np.full((n_candidates, n_splits), np.nan)
        score_times = np.full((n_candidates, n_splits), np.nan)
        losses = np.zeros((n_candidates, n_rows))
        times_tested = np.zeros(n_rows)
        for _, test in folds:
            np.add.at(times_tested, test, 1.0)
        for c, fold_results in by_candidate.items():
            # a default candidate's own grid is not the user's: no edge warning
            quiet = (GridEdgeWarning,) if _is_default_set(self.candidates) else ()
            self._warn_candidate(names[c], fold_results, quiet)
            reasons[c] = _failure(fold_results)
            if reasons[c]:
                continue
            scores[c] = [r["score"] for r in fold_results]
            fit_times[c] = [r["fit_time"] for r in fold_results]
            score_times[c] = [r["score_time"] for r in fold_results]
            for (_, test), r in zip(folds, fold_results):
                np.add.at(losses[c], test, r["losses"])
        if all(reasons):
            raise ValueError(
                "no candidate could be scored:\n"
                + "\n".join(f"  {n}: {r}" for n, r in zip(names, reasons))
            )
        tested = times_tested > 0
        row_losses = losses[:, tested] / times_tested[tested]
        return scores, fit_times, score_times, row_losses, tested

    @staticmethod
    def _warn_candidate(name, fold_results, quiet=()) -> None:
        """Raise each category of warning of a candidate's folds once.

        With the first message, and the number of folds that raised one;
        categories in ``quiet`` are dropped.
        """
        first, folds = {}, Counter()
        for r in fold_results:
            caught = [(c, m) for c, m in r["warnings"] if not issubclass(c, quiet)]
            for category, message in caught:
                first.setdefault(category, message)
            folds.update({category for category, _ in caught})
        for category, message in first.items():
            warn(
                f"candidate {name!r} ({folds[category]} of {len(fold_results)} "
                f"folds): {message}",
                category,
            )

    @staticmethod
    def _results(names, scores, fit_times, score_times, n_params, reasons) -> dict:
        """``cv_results_``: GridSearchCV's keys, one entry per candidate."""
        results = {"candidate": np.array(names, dtype=object)}
        for k in range(scores.shape[1]):
            results[f"split{k}_test_score"] = scores[:, k]
        # NaN rows (skipped and failed candidates) stay NaN
        results["mean_test_score"] = mean = np.mean(scores, axis=1)
        results["std_test_score"] = np.std(scores, axis=1)
        results["mean_fit_time"] = np.mean(fit_times, axis=1)
        results["std_fit_time"] = np.std(fit_times, axis=1)
        results["mean_score_time"] = np.mean(score_times, axis=1)
        results["std_score_time"] = np.std(score_times, axis=1)
        # as GridSearchCV: unscored candidates share the last rank
        filled = np.where(np.isnan(mean), np.nanmin(mean) - 1.0, mean)
        results["rank_test_score"] = rankdata(-filled, method="min").astype(np.int32)
        results["n_parameters"] = n_params
        results["skipped_reason"] = np.array(reasons, dtype=object)
        return results

    def _select(self, names, templates, noise):
        """Index of the selected candidate, and why (the guard's rule b)."""
        mean = self.cv_results_["mean_test_score"]
        order = np.flatnonzero(np.isfinite(mean))
        best = int(order[np.argmax(mean[order])])  # the first of equal scores
        top = f"{names[best]} has the best mean test score ({mean[best]:.6g})"
        if self.guard is None:
            return best, f"{top}; no guard."
        simples = [
            next((c for c in order if type(templates[c]) is kind), None)
            for kind in _SIMPLE
        ]
        simples = [int(c) for c in simples if c is not None]
        if not simples:
            return best, (
                f"{top}; no IdentityCalibrator or TemperatureScaling candidate "
                "to compare it with."
            )

        def compare(base, other):
            return noise.compare(base, other, names)

        # the fallback: the simplest adequate candidate (identity, replaced
        # by temperature scaling only where it beats identity clearly)
        fallback, steps = simples[0], []
        if best == fallback:
            return best, f"{top}."
        for simple in simples[1:]:
            if simple == best:  # compared below, as the best
                break
            beats, text = compare(fallback, simple)
            if beats:
                steps.append(f"{names[simple]} beats {names[fallback]}: {text}.")
                fallback = simple
            else:
                steps.append(
                    f"{names[fallback]} stays the simple reference: {text}, not "
                    "more than one standard error."
                )
        notes = "".join(f" {step}" for step in steps)
        if best == fallback:
            return best, f"{top}.{notes}"
        beats, text = compare(fallback, best)
        if beats:
            return best, f"{top}. It beats {names[fallback]}: {text}.{notes}"
        return fallback, (
            f"{names[fallback]} kept by the one-standard-error rule: {top}, but "
            f"{text}, not more than one standard error.{notes}"
        )

    def _report(self) -> None:
        """The last ``verbose`` line: the selection and why."""
        print(
            f"[CalibratorSearchCV] selected {self.selected_}: {self.selection_reason_}",
            file=sys.stderr,
            flush=True,
        )

    # -------------------------------------------------------------- predict
    def _check_scores(self, X):
        """``X`` checked against the fit (columns, feature names) for delegation.

        On embeddings: ``X`` itself for a local winner, the head's logits
        for a score calibrator.
        """
        check_is_fitted(self)
        if not self.reads_embeddings_:
            return self._score_array(X, reset=False)[0]
        X = BaseLocalCalibrator._validate_embeddings(self, X, reset=False)
        if _is_local(self.best_calibrator_):
            return X
        return _head_logits(X, self.coef_, self.intercept_)

    def _predict_groups(self, X, groups):
        """``groups`` checked for a prediction of ``X``: what to forward to
        the selected calibrator (None: nothing).

        Refused when the search was fitted without groups; checked, then
        not forwarded, when the selected calibrator does not take them (its
        map is the same for every group).
        """
        if groups is None:
            return None
        check_is_fitted(self)
        if getattr(self, "groups_", None) is None:  # or saved by an earlier skcal
            raise ValueError(
                "CalibratorSearchCV was fitted without groups, so no candidate "
                "learnt anything by group; groups given to a prediction would be "
                "ignored. Fit with groups=... to compare group-aware "
                "calibrators, or predict without groups."
            )
        if not is_dask_collection(groups):
            groups = np.asarray(groups)
        n_rows = X.shape[0] if hasattr(X, "shape") else len(X)
        if groups.ndim != 1 or not (
            math.isnan(n_rows) or math.isnan(groups.shape[0]) or len(groups) == n_rows
        ):
            raise ValueError(
                f"groups must give the group of each row of X: expected shape "
                f"({n_rows},), got {groups.shape}. Pass one label per row, as in fit."
            )
        return groups if _takes_groups(self.best_calibrator_) else None

    def predict_proba(self, X, groups=None) -> np.ndarray:
        """Calibrated probabilities of the selected calibrator.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_classes) or (n_samples, n_features)
            Scores or embeddings, read as in :meth:`fit`; a Dask array gives
            a lazy Dask array, predicted by row blocks.
        groups : array-like of shape (n_samples,), default=None
            Each row's group, for a search fitted with ``groups``: forwarded
            to the selected calibrator when it is group-aware (rows of groups
            not seen in :meth:`fit`, and every row when None, get its pooled
            map), checked and unused otherwise. Refused when the search was
            fitted without groups. A Dask array (or numpy array) with a Dask
            ``X`` is split along ``X``'s row blocks.

        Returns
        -------
        ndarray of shape (n_samples, n_classes)
            Column ``j`` is the probability of ``classes_[j]``.
        """
        return self._proba(X, groups=self._predict_groups(X, groups))

    def predict_log_proba(self, X, groups=None) -> np.ndarray:
        """Logarithm of :meth:`predict_proba`, from the selected calibrator."""
        return self._log_proba(X, groups=self._predict_groups(X, groups))

    def decision_function(self, X, groups=None) -> np.ndarray:
        """Calibrated logits of the selected calibrator.

        Their softmax is :meth:`predict_proba` (``groups`` as there).
        """
        return self._logits(X, groups=self._predict_groups(X, groups))

    def predict(self, X, groups=None) -> np.ndarray:
        """Labels predicted by the selected calibrator (``groups`` as in
        :meth:`predict_proba`)."""
        return self._labels(X, groups=self._predict_groups(X, groups))

    @staticmethod
    def _by_group(groups) -> dict:
        return {} if groups is None else {"groups": groups}

    @lazy_on_dask("proba", rows=("groups",))
    def _proba(self, X, groups=None) -> np.ndarray:
        X = self._check_scores(X)
        best = self.best_calibrator_
        proba = best.predict_proba(X, **self._by_group(groups))
        return np.asarray(proba, dtype=np.float64)

    @lazy_on_dask("proba", rows=("groups",))
    def _log_proba(self, X, groups=None) -> np.ndarray:
        X = self._check_scores(X)
        best, by_group = self.best_calibrator_, self._by_group(groups)
        if hasattr(best, "predict_log_proba"):
            return np.asarray(best.predict_log_proba(X, **by_group), dtype=np.float64)
        with np.errstate(divide="ignore"):
            return np.log(np.asarray(best.predict_proba(X, **by_group), np.float64))

    @lazy_on_dask("proba", rows=("groups",))
    def _logits(self, X, groups=None) -> np.ndarray:
        X = self._check_scores(X)
        best, by_group = self.best_calibrator_, self._by_group(groups)
        if hasattr(best, "decision_function"):
            return np.asarray(best.decision_function(X, **by_group), dtype=np.float64)
        proba = np.asarray(best.predict_proba(X, **by_group), dtype=np.float64)
        return np.log(np.maximum(proba, FLOOR_BEFORE_LOG))

    @lazy_on_dask("labels", rows=("groups",))
    def _labels(self, X, groups=None) -> np.ndarray:
        X = self._check_scores(X)
        return self.best_calibrator_.predict(X, **self._by_group(groups))

    def group_positions(self, groups) -> np.ndarray:
        """The group input of the export of a group-aware winner.

        Parameters
        ----------
        groups : array-like of shape (n_samples,)
            Group labels, as :meth:`predict_proba` takes them.

        Returns
        -------
        ndarray of shape (n_samples,), dtype int64
            ``best_calibrator_.group_positions(groups)``: each label's
            position in its ``groups_``, -1 for a group not seen in fit.

        Raises
        ------
        ValueError
            If the selected calibrator is not group-aware.
        """
        check_is_fitted(self)
        method = getattr(self.best_calibrator_, "group_positions", None)
        if method is None:
            raise ValueError(
                f"the search's selected {self.selected_} "
                f"({type(self.best_calibrator_).__name__}) is not group-aware: its "
                "export reads the scores alone, with no group input."
            )
        return method(groups)

    def to_torch(self):
        """The selected calibrator's module (``best_calibrator_.to_torch()``).

        It maps the scores the search reads to :meth:`predict_proba`;
        :func:`skcal.export.to_onnx` writes the same graph. A search on
        embeddings whose winner is a score calibrator (fed the head's
        logits) is not exported: export ``best_calibrator_`` and compute the
        logits ``X @ coef_.T + intercept_`` before it.

        Returns
        -------
        torch.nn.Module

        Raises
        ------
        NotExportableError
            If the selected calibrator cannot be exported.

        Notes
        -----
        A group-aware winner (:class:`~skcal.GroupedTemperatureScaling`,
        :class:`~skcal.GroupedVectorScaling`) gives its module of two inputs,
        ``module(scores, group)``, ``group`` the int64 positions of
        :meth:`group_positions` (-1: a group not seen in fit, the pooled map).

        Examples
        --------
        >>> import numpy as np, torch
        >>> from skcal import TemperatureScaling, VectorScaling
        >>> from skcal.model_selection import CalibratorSearchCV
        >>> from skcal.utils._testing import make_miscalibrated_logits
        >>> X, y = make_miscalibrated_logits(n_samples=600, random_state=0)
        >>> search = CalibratorSearchCV(
        ...     [TemperatureScaling(), VectorScaling(device="cpu")]
        ... ).fit(X, y)
        >>> out = search.to_torch()(torch.from_numpy(X)).numpy()
        >>> bool(np.abs(out - search.predict_proba(X)).max() < 1e-10)
        True
        """
        from ..exceptions import NotExportableError
        from ..export import to_torch

        check_is_fitted(self)
        if self.reads_embeddings_ and not _is_local(self.best_calibrator_):
            raise NotExportableError(
                f"the search reads embeddings, and its selected {self.selected_} "
                "is a score calibrator fed the linear head's logits: export "
                "best_calibrator_ and compute X @ coef_.T + intercept_ before it."
            )
        return to_torch(self.best_calibrator_)
