"""Resampling the labeled source rows: what the estimators' noise is made of.

The calibrated probabilities of the target rows depend on the calibration
(source) set twice: the calibrator was fitted on it, and the estimators read
its class frequencies (EM's source priors) or its confusion matrix (BBSE,
RLLS). A bootstrap of the target rows alone takes those as exact. Here each
resample also draws the source rows again (with replacement) and refits
what the estimator depends on:

- BBSE and RLLS: the confusion matrix and the class frequencies of the
  resampled source rows;
- EM: the source priors, moved by the resampled rows' label frequencies
  ``f*`` against the real ones ``f`` (``p* = p + f* - f``), and the part of
  the calibrator that sets the class marginals, refitted as one factor per
  class so that the mean of the re-weighted calibrated probabilities of the
  resampled rows is ``p*`` (what the per-class biases of BCTS or vector
  scaling do at their optimum). The rest of the calibrator (its
  temperature, its matrix) is held fixed: a documented approximation.

:func:`simulate` draws pseudo-target sets from the source rows themselves,
with known class priors, to measure the estimator (and the shift test's
statistic) where the truth is known.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from ._estimate import _point, confusion_matrix, shift_statistic

__all__ = ["SourceRows", "joint_bootstrap", "simulate"]

_TINY = np.finfo(np.float64).tiny
#: EM's tolerance on the resamples (below the spread of the resamples).
_TOL = 1e-6


@dataclass(frozen=True, eq=False)
class SourceRows:
    """The labeled source rows: calibrated probabilities, label indices,
    relative weights, and the weighted label frequencies ``f``."""

    proba: np.ndarray
    y: np.ndarray
    weights: np.ndarray

    @property
    def frequencies(self) -> np.ndarray:
        n_classes = self.proba.shape[1]
        counts = np.bincount(self.y, weights=self.weights, minlength=n_classes)
        return counts / counts.sum()


def reweight(P: np.ndarray, factors: np.ndarray) -> np.ndarray:
    """Rows of ``P * factors``, renormalised."""
    Q = P * factors
    Q /= np.maximum(Q.sum(axis=1, keepdims=True), _TINY)
    return Q


def _marginal_factors(P, weights, target, tol=1e-6, max_iter=200):
    """Per-class factors ``b`` with ``mean_w(reweight(P, b)) = target``."""
    b = np.ones(P.shape[1])
    total = weights.sum()
    for _ in range(max_iter):
        mean = weights @ reweight(P, b) / total
        if np.max(np.abs(mean - target)) <= tol:
            break
        b *= target / np.maximum(mean, _TINY)
    return b


def _floor(priors: np.ndarray, n: int) -> np.ndarray:
    """Priors floored at ``0.5 / n`` (a class drawn no row) and renormalised."""
    priors = np.maximum(priors, 0.5 / n)
    return priors / priors.sum()


def resample_problem(problem, source: SourceRows, rng):
    """``(problem*, factors*)`` refitted on a resample of the source rows,
    or ``(None, None)`` when its confusion matrix is singular."""
    n, n_classes = source.proba.shape
    problem = replace(problem, tol=max(problem.tol, _TOL))
    rows = rng.randint(0, n, n)
    P, y, w = source.proba[rows], source.y[rows], source.weights[rows]
    counts = np.bincount(y, weights=w, minlength=n_classes)
    f_star = _floor(counts / counts.sum(), n)
    if problem.method == "em":
        priors = _floor(problem.source_priors + f_star - source.frequencies, n)
        return replace(problem, source_priors=priors), _marginal_factors(P, w, priors)
    confusion = confusion_matrix(np.argmax(P, axis=1), y, n_classes, w)
    if np.any(confusion.sum(axis=1) == 0) or (
        np.linalg.matrix_rank(confusion) < n_classes
    ):
        return None, None
    return replace(problem, source_priors=f_star, confusion=confusion), None


def _estimate(P, problem, factors):
    """The priors of the rows ``P`` (re-weighted by ``factors``, if any)."""
    Q = P if factors is None else reweight(P, factors)
    return _point(Q, problem)[0], Q


def joint_bootstrap(P, problem, source: SourceRows, n_resamples: int, rng):
    """Priors on ``n_resamples`` joint resamples of the source and target rows.

    Each resample refits the source side (:func:`resample_problem`) and
    draws the target rows with replacement. Resamples whose confusion
    matrix is singular are skipped.
    """
    n = len(P)
    out = []
    for _ in range(n_resamples):
        problem_k, factors = resample_problem(problem, source, rng)
        if problem_k is None:
            continue
        out.append(_estimate(P[rng.randint(0, n, n)], problem_k, factors)[0])
    return np.array(out).reshape(-1, P.shape[1])


def simulate(problem, source: SourceRows, n_target: int, priors, n_draws: int, rng):
    """The estimator on pseudo-target sets drawn from the source rows.

    Each draw resamples the source side (:func:`resample_problem`) and draws
    ``n_target`` source rows with class counts multinomial in ``priors``
    (rows of a class drawn with replacement): a target set under label shift
    whose class frequencies are known.

    Returns
    -------
    estimates, truths, sources : ndarray of shape (n_kept, n_classes)
        The estimated priors, the pseudo-target's class frequencies, and the
        resampled source priors (the priors of not adapting).
    statistics : ndarray of shape (n_kept,)
        The shift test's statistic of each estimate.
    losses : ndarray of shape (n_kept, 2)
        The pseudo-target rows' mean negative log-likelihood of their labels,
        not adapted and adapted to the estimate.
    """
    by_class = [np.flatnonzero(source.y == k) for k in range(source.proba.shape[1])]
    priors = np.where([len(rows) > 0 for rows in by_class], priors, 0.0)
    priors = priors / priors.sum()
    kept = []
    for _ in range(n_draws):
        problem_k, factors = resample_problem(problem, source, rng)
        if problem_k is None:
            continue
        counts = rng.multinomial(n_target, priors)
        rows = np.concatenate(
            [rng.choice(r, c) for r, c in zip(by_class, counts) if c > 0]
        )
        q, Q = _estimate(source.proba[rows], problem_k, factors)
        p = problem_k.source_priors
        statistic = shift_statistic(Q, q, p)
        y = source.y[rows]
        losses = [_nll(Q, y), _nll(reweight(Q, q / p), y)]
        kept.append((q, counts / n_target, p, statistic, losses))
    if not kept:
        n_classes = len(by_class)
        empty = np.empty((0, n_classes))
        return empty, empty, empty, np.empty(0), np.empty((0, 2))
    return tuple(np.array(column) for column in zip(*kept))


def _nll(Q, y) -> float:
    """Mean negative log-likelihood of the labels ``y`` under the rows ``Q``."""
    return float(-np.mean(np.log(np.maximum(Q[np.arange(len(y)), y], _TINY))))
