"""Vector scaling per group, shrunk toward the pooled fit.

The grouped sibling of :class:`~skcal.GroupedTemperatureScaling` (defined in
:mod:`skcal.llm`, where it began as a per-prompt correction): one scale and
one offset per class and per group, pulled toward the pooled vector scaling
by a strength chosen by repeated cross-fitting on the calibration rows.
"""

from __future__ import annotations

import numpy as np
from scipy import sparse
from scipy.optimize import minimize
from scipy.special import log_softmax
from sklearn.utils.validation import check_is_fitted
from threadpoolctl import threadpool_limits

from ..llm._corrections import (
    _GroupedCalibrator,
    _option_log_proba,
    fit_log_temperature,
    fitted_group_positions,
)
from ..utils._constants import PROBA_EPS
from ..utils._groups import check_groups
from ..utils._sklearn import _fit_context
from ..utils._validation import check_sample_weight

__all__ = ["GroupedVectorScaling"]

#: Pseudo-rows at the centre that every fit keeps (on top of the shrinkage):
#: a group whose rows are separable, or that misses a class, still gets a
#: finite map. One row's worth of curvature barely moves a group of dozens.
BASE_PSEUDO_ROWS = 1.0


def _affine_loss(theta, Z, y, w, member, center, pen):
    """Weighted NLL of ``softmax(Z a_g + b_g)`` plus ``pen / 2 (theta - center)^2``
    and its gradient; ``theta`` is ``(n_groups, 2, n_classes)`` flattened."""
    n_groups = member.shape[0]
    theta = theta.reshape(n_groups, 2, -1)
    rows = member.T @ theta.reshape(n_groups, -1)
    a, b = np.split(rows, 2, axis=1)
    logq = log_softmax(Z * a + b, axis=1)
    idx = np.arange(len(y))
    residual = np.exp(logq)
    residual[idx, y] -= 1.0
    residual *= w[:, None]
    grad = np.stack([member @ (residual * Z), member @ residual], axis=1)
    diff = theta - center
    loss = -(w @ logq[idx, y]) + 0.5 * np.sum(pen * diff * diff)
    return loss, (grad + pen * diff).ravel()


def _fisher(Z, w, a, b) -> np.ndarray:
    """Mean diagonal Fisher information per row of ``(a, b)``: ``(2, K)``."""
    q = np.exp(log_softmax(Z * a + b, axis=1))
    v = q * (1 - q)
    fa = np.average(v * Z * Z, axis=0, weights=w)
    fb = np.average(v, axis=0, weights=w)
    return np.maximum(np.stack([fa, fb]), 1e-12)


def _fit_affine(Z, y, w, g_index, n_groups, center, pen, start=None) -> np.ndarray:
    """The maps of all groups at once (the loss is a sum over groups), by
    L-BFGS from ``start`` (default: every group at ``center``)."""
    member = sparse.csr_matrix(
        (np.ones(len(y)), (g_index, np.arange(len(y)))), shape=(n_groups, len(y))
    )
    if start is None:
        start = np.broadcast_to(center, (n_groups, *center.shape))
    result = minimize(
        _affine_loss,
        np.ravel(start),
        args=(Z, y, w, member, center, pen),
        jac=True,
        method="L-BFGS-B",
        options={"maxiter": 1000, "gtol": 1e-7 * w.sum()},
    )
    return result.x.reshape(n_groups, *center.shape)


def _vector_fits(Z, y, w, g_index, n_groups, strengths):
    """``(pooled (2, K), (len(strengths), n_groups, 2, K))`` maps."""
    k = Z.shape[1]
    ts = np.stack([np.full(k, np.exp(-fit_log_temperature(Z, y, w))), np.zeros(k)])
    c = _fisher(Z, w, *ts)
    zeros = np.zeros(len(y), dtype=int)
    pooled = _fit_affine(Z, y, w, zeros, 1, ts, BASE_PSEUDO_ROWS * c)[0]
    c = _fisher(Z, w, *pooled)
    out = np.empty((len(strengths), n_groups, 2, k))
    start = None
    # strongest first, each fit starting from the previous (a nearby optimum)
    for i in np.argsort(strengths)[::-1]:
        lam = strengths[i]
        if np.isfinite(lam):
            pen = (lam + BASE_PSEUDO_ROWS) * c
            out[i] = start = _fit_affine(Z, y, w, g_index, n_groups, pooled, pen, start)
        else:
            out[i] = pooled
    return pooled, out


def _log_proba(Z, maps) -> np.ndarray:
    """``log softmax(Z a + b)`` with one ``(a, b)`` per row: ``(n, 2, K)``."""
    return log_softmax(Z * maps[:, 0] + maps[:, 1], axis=1)


def _held_out_nll(Z, y, w, pooled, maps, seen):
    """Weighted NLL of rows at their group's map (``maps``, per row) where
    ``seen``, else at the ``pooled`` map."""
    logq = _log_proba(Z, np.where(seen[:, None, None], maps, pooled))
    return -(w @ logq[np.arange(len(y)), y])


class GroupedVectorScaling(_GroupedCalibrator):
    """Vector scaling with one map per group, shrunk to the pooled map.

    Each group ``g`` gets per-class scales and offsets ``theta_g = (a_g,
    b_g)`` (``softmax(z * a_g + b_g)``, ``z = log softmax(X)``: the map acts
    on log-probabilities, so that a per-row shift of the logits, which
    leaves the model's probabilities unchanged, changes nothing) minimising

    ``NLL_g(theta_g) + (lambda + 1) / 2 * sum_j c_j (theta_gj - theta_0j)^2``

    where ``theta_0`` is the pooled vector scaling (fitted on all rows,
    itself kept within one pseudo-row of temperature scaling) and ``c_j``
    the mean Fisher information per row of parameter ``j`` at ``theta_0``:
    ``lambda`` counts pseudo-rows at the pooled map, as in
    :class:`~skcal.GroupedTemperatureScaling`, and the extra pseudo-row
    keeps a separable group finite. ``shrinkage="auto"`` chooses ``lambda``
    among :data:`~skcal.llm._corrections.SHRINKAGE_GRID` by the held-out NLL of
    ``cv``-fold cross-fitting repeated four times (ties: the stronger
    shrinkage); ``shrinkage=np.inf`` gives every group the pooled map. A
    group not seen in ``fit`` (or ``groups=None``) gets the pooled map.
    With ``2 * n_classes`` parameters a group, it needs more rows per group
    than temperature scaling to beat it; prefer
    :class:`~skcal.GroupedTemperatureScaling` for groups of a few dozen rows.

    Parameters
    ----------
    input : {"logits", "proba"}, default="logits"
        What the columns of ``X`` are (log-probabilities are logits).
    shrinkage : "auto" or float >= 0, default="auto"
        The strength ``lambda`` in pseudo-rows, or chosen by cross-fitting.
    cv : int, cross-validation generator or iterable, default=5
        Folds of the cross-fitting of ``shrinkage="auto"`` (an int: a
        shuffled ``KFold`` repeated four times, seeded by ``random_state``).
    classes : array-like of shape (n_classes,), default=None
        The labels in column order.
    random_state : int, RandomState instance or None, default=None
        Seed of the folds.

    Attributes
    ----------
    coef_, intercept_ : ndarray of shape (n_classes,)
        The pooled map's scales ``a_0`` and offsets ``b_0``.
    groups_ : ndarray of shape (n_groups,)
        The groups seen in ``fit`` (sorted).
    group_coef_, group_intercept_ : ndarray of shape (n_groups, n_classes)
        Each group's scales and offsets.
    shrinkage_ : float
        The strength used.
    cv_nll_ : ndarray of shape (len(SHRINKAGE_GRID),) or None
        The cross-fitted NLL per row of each strength (``shrinkage="auto"``).
    classes_ : ndarray of shape (n_classes,)
    n_features_in_ : int

    Examples
    --------
    >>> import numpy as np
    >>> from skcal import GroupedVectorScaling
    >>> rng = np.random.default_rng(0)
    >>> groups = np.repeat(["a", "b"], 300)
    >>> logits = rng.normal(size=(600, 3)) * 2
    >>> shift = np.where(groups == "a", 1.0, -1.0)[:, None] * [1, 0, 0]
    >>> y = np.array([rng.choice(3, p=np.exp(r) / np.exp(r).sum())
    ...               for r in logits + shift])
    >>> cal = GroupedVectorScaling(random_state=0).fit(logits, y, groups=groups)
    >>> (cal.group_intercept_[:, 0] - cal.group_intercept_[:, 1] > 0).tolist()
    [True, False]
    >>> cal.predict_proba(logits[:2], groups=groups[:2]).shape
    (2, 3)
    """

    _grid_fits = staticmethod(_vector_fits)
    _held_out_nll = staticmethod(_held_out_nll)

    def n_free_parameters(self, n_classes, n_features=None, n_groups=1):
        """A scale and an offset per class and per group: ``2 C n_groups``.

        What :class:`~skcal.model_selection.CalibratorSearchCV`'s small-data
        guard reads, given the number of groups: the shrinkage toward the
        pooled map is chosen by cross-fitting and can be 0, and the pooled
        map is held by one pseudo-row only, so every entry counts as free.

        Parameters
        ----------
        n_classes : int
            Number of classes (columns of ``X``).
        n_features : int, default=None
            Columns of ``X`` (unused: the classes).
        n_groups : int, default=1
            Number of groups the calibrator is fitted on.

        Returns
        -------
        float

        Examples
        --------
        >>> from skcal import GroupedVectorScaling
        >>> GroupedVectorScaling().n_free_parameters(3, n_groups=4)
        24.0
        """
        return float(2 * n_classes * n_groups)

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y, groups=None, sample_weight=None):
        """Fit the pooled and the per-group maps.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_classes)
        y : array-like of shape (n_samples,)
        groups : array-like of shape (n_samples,), default=None
            The group of each row; None: one group.
        sample_weight : array-like of shape (n_samples,), default=None

        Returns
        -------
        self : GroupedVectorScaling
        """
        Z, y_index = self._fit_labels(X, y)
        w = check_sample_weight(sample_weight, len(Z))  # a weight counts as rows
        if groups is None:
            groups = np.zeros(len(Z), dtype=int)
        self.groups_, g_index = check_groups(groups, len(Z))
        with threadpool_limits(limits=1, user_api="blas"):
            return self._fit(Z, y_index, w, g_index)

    def _fit(self, Z, y_index, w, g_index):
        # one BLAS thread: L-BFGS-B's small dense steps otherwise spend most
        # of their time waking threads (10 times slower on a busy machine)
        pooled, maps = self._shrunk_fits(Z, y_index, w, g_index)
        self.coef_, self.intercept_ = pooled[0].copy(), pooled[1].copy()
        self.group_coef_ = maps[:, 0].copy()
        self.group_intercept_ = maps[:, 1].copy()
        return self

    def _maps(self, X, groups):
        check_is_fitted(self)
        Z = _option_log_proba(self, X, reset=False)
        maps = np.broadcast_to(
            np.stack([self.coef_, self.intercept_]), (len(Z), 2, Z.shape[1])
        ).copy()
        if groups is not None:
            pos, seen = fitted_group_positions(self.groups_, groups, len(Z))
            maps[seen, 0] = self.group_coef_[pos[seen]]
            maps[seen, 1] = self.group_intercept_[pos[seen]]
        return Z, maps

    def predict_log_proba(self, X, groups=None) -> np.ndarray:
        """Log-probabilities ``log softmax(X * a_group + b_group)``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_classes)
        groups : array-like of shape (n_samples,), default=None
            Each row's group; rows of groups not seen in ``fit`` (all rows
            when None) use the pooled map.
        """
        return _log_proba(*self._maps(X, groups))

    def to_torch(self):
        """The fitted maps as a torch module of two inputs, ``(scores, group)``.

        ``module(scores, group)`` gives ``softmax(z * a_g + b_g)`` with ``z``
        the log-softmax of the scores and ``(a_g, b_g)`` the map of each
        row's group: ``group`` is an int64 tensor of positions in
        ``groups_`` (:meth:`group_positions`); -1, or any position outside
        ``groups_``, gives the pooled map. :func:`skcal.export.to_onnx`
        writes the same graph, of inputs ``scores`` and ``group``.

        Returns
        -------
        torch.nn.Module

        Examples
        --------
        >>> import numpy as np, torch
        >>> from skcal import GroupedVectorScaling
        >>> rng = np.random.default_rng(0)
        >>> X, y = rng.normal(size=(90, 3)), np.arange(90) % 3
        >>> groups = np.repeat(["a", "b", "c"], 30)
        >>> cal = GroupedVectorScaling(shrinkage=10.0).fit(X, y, groups=groups)
        >>> group = torch.from_numpy(cal.group_positions(groups))
        >>> P = cal.to_torch()(torch.from_numpy(X), group).numpy()
        >>> bool(np.abs(P - cal.predict_proba(X, groups=groups)).max() < 1e-12)
        True
        """
        from .._torch._export import grouped_module

        check_is_fitted(self)
        scale = np.vstack([self.group_coef_, self.coef_])
        offset = np.vstack([self.group_intercept_, self.intercept_])
        return grouped_module(self.input, PROBA_EPS, scale, offset)

    def predict(self, X, groups=None) -> np.ndarray:
        """The class of largest calibrated probability (vector scaling can
        change the argmax)."""
        best = np.argmax(self.predict_log_proba(X, groups), axis=1)
        return self.classes_[best]
