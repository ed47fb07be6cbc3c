"""Structured matrix and vector scaling (Berta, Holzmüller, Jordan, Bach, 2026).

Both share the temperature-scaling-and-uniform-mixture features ("ts-mix"),
the ridge fit toward temperature scaling and the predict path
(:class:`_StructuredScaling`); they differ in the map, a full matrix or a
diagonal, and so in their penalties.
"""

from __future__ import annotations

from numbers import Real

import numpy as np

from .._torch.kernels import affine_rows, fit_affine_softmax, softmax_inplace
from .._torch.kernels._softmax import (
    exp_into,
    log_inplace,
    row_max,
    row_min,
    row_sum,
    scale_rows_inplace,
)
from ..base import BaseCalibrator, export_input
from ..utils._constants import FLOAT32_LOG_FLOOR
from ..utils._constraints import LBFGS_CONSTRAINTS
from ..utils._docstrings import LBFGS_DOC, fill_doc
from ..utils._parameters import affine_count, is_zero
from ..utils._sklearn import Interval
from ..utils._validation import effective_sample_size
from ..utils._warnings import warn_unconverged
from ._scaling import fit_inverse_temperature

__all__ = ["StructuredMatrixScaling", "StructuredVectorScaling"]

#: Up to this many classes a full map is solved in whitened coordinates
#: (measured at 10-100 classes; the kernel gives each row its own factor up
#: to 200): beyond, the plain coordinates, as before.
_PRECONDITION_MAX_CLASSES = 200
#: Entries per block of rows of the predict path (2 MiB per scratch block).
_ROWS_BLOCK = 1 << 18


class _StructuredScaling(BaseCalibrator):
    """The steps that structured matrix and vector scaling share.

    ts-mix features (temperature scaling on ``z = log p``, mixed with the
    uniform distribution, then the log), the ridge-penalised fit of an
    affine map of them starting from the identity (i.e. from temperature
    scaling), and the predict path. A subclass sets ``_kind``, the map of
    :func:`~skcal._torch.kernels.fit_affine_softmax` (``"full"`` or
    ``"diagonal"``), and returns its ridge strengths from
    :meth:`_penalties`.
    """

    _needs_torch = True  # its fit runs torch kernels
    _kind = "full"
    _shift_invariant = True
    # the logits are read through their log-softmax, which subtracts the row
    # maxima itself: predict_proba passes float64 scores unshifted
    _reads = "softmax"
    # full maps are solved in whitened coordinates (fit_affine_softmax's
    # precondition; no effect on a diagonal map)
    _precondition = True

    _parameter_constraints: dict = {
        **BaseCalibrator._parameter_constraints,
        "reg_intercept": [Interval(Real, 0, None, closed="left")],
        "reg_diagonal": [Interval(Real, 0, None, closed="left")],
        "rho": [Real],
        "tau": [Real],
        **LBFGS_CONSTRAINTS,
    }

    def _penalties(self, n_classes: int, n_samples: float) -> dict:
        """The ridge strengths, as keywords of ``fit_affine_softmax``."""
        raise NotImplementedError

    def _scale(self, n_parameters: float, n_samples: float) -> float:
        """``n_parameters ** rho / n_samples ** tau``, the factor of a base
        strength (``n_parameters``: ``C`` or ``C (C - 1)``)."""
        return n_parameters**self.rho / n_samples**self.tau

    def _floor(self) -> float:
        """The floor of ``log p``: none for logits, whose log-probabilities
        are exact (on logits times 10 the float32 floor cost 12% of test NLL
        against temperature scaling on real letter logits, 1-2% above it
        without it; times 100, 110%)."""
        return FLOAT32_LOG_FLOOR if self.input == "proba" else -np.inf

    def _log_floor(self, logits):
        """``max(log p, floor)`` up to a constant per row, as :meth:`_predict`.

        With ``t = z - max(z)`` and ``L = log sum exp(t)``, ``max(t - L,
        floor) = max(t, floor + L) - L``, and the features (a softmax of
        these values) do not see ``-L``. Unlike ``log p`` itself, ``t``
        keeps logit differences far below the resolution of ``log p``
        (~1e-16 of ``log C``): logits of scale 1e-17 are still informative.
        """
        t = np.array(logits, dtype=np.float64)
        t -= t.max(axis=1, keepdims=True)
        floor = self._floor()
        if floor == -np.inf:
            return t
        return np.maximum(t, (floor + np.log(np.exp(t).sum(axis=1)))[:, None])

    def _features(self, z):
        """``log`` of the temperature-scaled probabilities mixed with uniform."""
        p = softmax_inplace(self.beta_ * z)
        p *= 1.0 - self.mix_
        p += self.mix_ / z.shape[1]
        return log_inplace(p)

    def _fit(self, logits, y_index, sample_weight):
        n_samples = effective_sample_size(sample_weight)
        z = self._log_floor(logits)
        self.beta_ = float(
            fit_inverse_temperature(z, y_index, sample_weight, self.device).x
        )
        self.mix_ = 1.0 / (n_samples + 1.0)
        fit = fit_affine_softmax(
            self._features(z),
            y_index,
            sample_weight,
            kind=self._kind,
            **self._penalties(logits.shape[1], n_samples),
            device=self.device,
            tol=self.tol,
            max_iter=self.max_iter,
            verbose=self.verbose,
            desc=type(self).__name__,
            precondition=self._precondition
            and logits.shape[1] <= _PRECONDITION_MAX_CLASSES,
        )
        warn_unconverged(type(self).__name__, fit.result, self.max_iter)
        self.coef_, self.intercept_ = fit.coef, fit.intercept
        self.n_iter_ = fit.result.n_iter

    def to_torch(self):
        """The fitted map as a torch module: scores to calibrated probabilities.

        The input handling, the smoothed log-probabilities the map reads, the
        affine map ``coef_``, ``intercept_``, a softmax. See
        :func:`skcal.export.to_torch`.

        Returns
        -------
        torch.nn.Module

        Examples
        --------
        >>> from skcal import StructuredMatrixScaling
        >>> from skcal.export import check_export
        >>> from skcal.utils._testing import make_miscalibrated_logits
        >>> X, y = make_miscalibrated_logits(n_samples=200, random_state=0)
        >>> cal = StructuredMatrixScaling().fit(X, y)
        >>> bool(check_export(cal, X, cal.to_torch()) < 1e-12)
        True
        """
        from .._torch._export import Affine, Chain, SmoothedLogProba, Softmax

        features = SmoothedLogProba(
            self.beta_, self.mix_, self.n_features_in_, self._floor()
        )
        affine = Affine(self.coef_, self.intercept_)
        return Chain(export_input(self), features, affine, Softmax())

    def _calibrated_logits(self, logits):
        return self._predict(logits, proba=False)

    def _calibrated_proba(self, logits):
        return self._predict(logits, proba=True)

    def _predict(self, logits, *, proba):
        """``W x + b`` (or its softmax) of the features of ``logits``.

        The operations of :meth:`_log_floor`, :meth:`_features` and the
        affine map, by blocks of rows, in two scratch blocks and the
        returned array (each block of which gets its softmax while it is in
        cache). With ``t = z - max(z)`` (row maxima 0), the log-softmax is
        ``t - L``, ``L = log sum exp(t)``, and ``max(t - L, floor) = max(t,
        floor + L) - L``: the constant ``-L`` of each row drops out of
        ``softmax(beta z)``, whose argument ``beta max(t, floor + L)`` has
        row maxima 0 (no shift needed). ``L`` lies between 0 and ``log C``:
        a row whose ``t`` stays above ``floor + log C`` never reaches the
        floor, and only the other rows pay for the exponentials of ``L``.
        The results are those of the step by step formulas up to rounding
        (~1e-14 relative).
        """
        z = np.asarray(logits, dtype=np.float64)
        n, n_classes = z.shape
        out = np.empty((n, n_classes))
        block = max(1, _ROWS_BLOCK // n_classes)
        t = np.empty((min(block, n), n_classes))
        e = np.empty(t.shape)
        floor = self._floor()
        near_floor = floor + np.log(n_classes)  # below it, t - L may be floored
        for start in range(0, n, block):
            zb = z[start : start + block]
            tb, eb, ob = t[: len(zb)], e[: len(zb)], out[start : start + len(zb)]
            np.subtract(zb, row_max(zb)[:, None], out=tb)
            low = row_min(tb) < near_floor
            if low.any():  # t = max(t, floor + L) there
                rows = None if low.all() else np.flatnonzero(low)
                tl = tb if rows is None else tb[rows]
                total = row_sum(exp_into(tl, eb[: len(tl)]))
                np.maximum(tl, (floor + np.log(total))[:, None], out=tl)
                if rows is not None:
                    tb[rows] = tl
            # x = log((1 - mix) softmax(beta t) + mix / C)
            tb *= self.beta_
            exp_into(tb, eb, None if self.beta_ > 0 else row_max(tb))
            scale_rows_inplace(eb, (1.0 - self.mix_) / row_sum(eb))
            eb += self.mix_ / n_classes
            log_inplace(eb)
            affine_rows(eb, self.coef_, self.intercept_, out=ob)
            if proba:
                softmax_inplace(ob)
        return out


#: What SMS and SVS document alike.
_fill_doc = fill_doc(
    params="""\
    Parameters
    ----------
    input : {"logits", "proba"}, default="logits"
        What ``X`` holds.
    classes : array-like of shape (n_classes,), default=None
        The label of each column of ``X``.
""",
    solver=LBFGS_DOC
    + """\

    Attributes
    ----------
    beta_ : float
        Inverse temperature of the pre-scaling.
    mix_ : float
        Weight ``1/(n+1)`` of the uniform distribution in the mixture.
""",
    attributes="""\
    intercept_ : ndarray of shape (n_classes,)
        ``b``.
    n_iter_ : int
        Number of L-BFGS iterations run.
    classes_ : ndarray of shape (n_classes,)
        Label of each column.
    n_features_in_ : int
        Number of columns of ``X``.
""",
)


@_fill_doc
class StructuredMatrixScaling(_StructuredScaling):
    """Structured matrix scaling (SMS): regularised matrix scaling after TS.

    Three steps, as in the authors' ``probmetrics`` implementation:

    1. ``z = log p`` (``log_softmax`` of logits, or the log of probabilities;
       with ``input="proba"`` floored at ``log(float32 tiny) = -87.3``, as
       ``probmetrics`` floors the logs of float32 probabilities, and at the
       log of ``proba_floor_`` where that is higher); temperature
       scaling on ``z`` gives the inverse temperature ``beta_``;
    2. the scaled probabilities are mixed with the uniform distribution,
       ``p~ = (1 - 1/(n+1)) softmax(beta z) + 1/((n+1) C)``, so that the
       features ``x = log p~`` are bounded below;
    3. ``softmax((I + Delta) x + b)`` is fitted by L-BFGS on the mean NLL
       plus ``lambda_b ||b||^2 + lambda_d ||diag Delta||^2 + lambda_o
       ||offdiag Delta||^2`` with ``lambda_b = reg_intercept C^rho / n^tau``,
       ``lambda_d = reg_diagonal C^rho / n^tau`` and
       ``lambda_o = reg_off_diagonal (C (C - 1))^rho / n^tau``.

    ``n`` is the number of calibration samples (the sum of the sample
    weights). With the defaults the penalties are ``C / n`` on the intercept
    and the diagonal and ``C (C - 1) / n`` on the off-diagonal: strong
    shrinkage towards temperature scaling with few samples per parameter,
    fading as data grows. Computations are in float64 on ``device``
    (``probmetrics`` works in float32). For two classes this is the same
    model (``probmetrics`` switches to quadratic scaling there).

    {params}
    reg_intercept, reg_diagonal, reg_off_diagonal : float, default=1.0
        Base strengths of the three ridge penalties.
    rho, tau : float, default=1.0
        Exponents of the number of classes and of samples in the strengths.
    device : {"auto", "cpu", "cuda"} or "cuda:N", default="auto"
        Where the fit runs.
    tol : float, default=1e-5
        L-BFGS gradient tolerance (on the map in coordinates whitened by an
        approximate Hessian of each row, where the solver works: about half
        the iterations of the plain coordinates at 50-100 classes).
    {solver}
    coef_ : ndarray of shape (n_classes, n_classes)
        ``W = I + Delta``.
    {attributes}

    References
    ----------
    E. Berta, D. Holzmüller, M. I. Jordan, F. Bach. "Structured matrix
    scaling for multi-class calibration". AISTATS 2026.

    Examples
    --------
    >>> from skcal import StructuredMatrixScaling
    >>> from skcal.utils._testing import make_miscalibrated_logits
    >>> logits, y = make_miscalibrated_logits(1000, 5, temperature=2.0, random_state=0)
    >>> sms = StructuredMatrixScaling(device="cpu").fit(logits, y)
    >>> sms.coef_.shape, round(1 / sms.beta_, 1)
    ((5, 5), 2.0)
    """

    _parameter_constraints: dict = {
        **_StructuredScaling._parameter_constraints,
        "reg_off_diagonal": [Interval(Real, 0, None, closed="left")],
    }

    def __init__(
        self,
        *,
        input="logits",
        classes=None,
        reg_intercept=1.0,
        reg_diagonal=1.0,
        reg_off_diagonal=1.0,
        rho=1.0,
        tau=1.0,
        device="auto",
        tol=1e-5,
        max_iter=1000,
        verbose=0,
    ):
        self.input = input
        self.classes = classes
        self.reg_intercept = reg_intercept
        self.reg_diagonal = reg_diagonal
        self.reg_off_diagonal = reg_off_diagonal
        self.rho = rho
        self.tau = tau
        self.device = device
        self.tol = tol
        self.max_iter = max_iter
        self.verbose = verbose

    def n_free_parameters(self, n_classes, n_features=None):
        """The unpenalised entries, at least ``ceil(C / 5)`` (``ceil(C / 5)``
        by default: every entry is shrunk by a ridge ``C / n``)."""
        return affine_count(
            n_classes,
            diag=is_zero(self.reg_diagonal),
            off=is_zero(self.reg_off_diagonal),
            bias=is_zero(self.reg_intercept),
        )

    def _penalties(self, n_classes, n_samples):
        scale = self._scale(n_classes, n_samples)
        return {
            "l2_bias": self.reg_intercept * scale,
            "l2_diag": self.reg_diagonal * scale,
            "l2_off": self.reg_off_diagonal
            * self._scale(n_classes * (n_classes - 1), n_samples),
        }


@_fill_doc
class StructuredVectorScaling(_StructuredScaling):
    """Structured vector scaling (SVS): regularised vector scaling after TS.

    The diagonal member of the structured family, as ``probmetrics``'
    ``get_calibrator("svs")``: the steps of :class:`StructuredMatrixScaling`
    with a diagonal map,

    1. ``z = log p`` (as in :class:`StructuredMatrixScaling`: with
       ``input="proba"`` floored at ``log(float32 tiny) = -87.3`` and at
       the log of ``proba_floor_``);
       temperature scaling on ``z`` gives the inverse temperature ``beta_``;
    2. ``x = log p~`` with ``p~ = (1 - 1/(n+1)) softmax(beta z) + 1/((n+1)
       C)``, the scaled probabilities mixed with the uniform distribution;
    3. ``softmax(v * x + b)`` (one scale and one offset per class, ``v = 1
       + delta``) fitted by L-BFGS on the mean NLL plus ``lambda_b ||b||^2
       + lambda_d ||delta||^2``, with ``lambda_b = reg_intercept C^rho /
       n^tau`` and ``lambda_d = reg_diagonal C^rho / n^tau``.

    With the defaults both penalties are ``C / n``: shrinkage towards
    temperature scaling (``v = 1``, ``b = 0``) that fades as data grow.
    ``n`` is the number of calibration samples (Kish's effective sample
    size with weights). ``2 C`` parameters and ``O(n C)`` work per
    iteration: a thousand classes are cheap. Computations are in float64 on
    ``device`` (``probmetrics`` works in float32). Two classes get the same
    model (so does ``probmetrics``' ``"svs"``; its ``"logistic"`` switches
    to quadratic scaling there). A class absent from the calibration labels
    keeps ``v = 1``, ``b = 0`` (its temperature-scaled logit), with a
    warning.

    {params}
    reg_intercept, reg_diagonal : float, default=1.0
        Base strengths of the ridge penalties on ``b`` and on ``v - 1``.
    rho, tau : float, default=1.0
        Exponents of the number of classes and of samples in the strengths.
    device : {"auto", "cpu", "cuda"} or "cuda:N", default="auto"
        Where the fit runs.
    tol : float, default=1e-5
        L-BFGS gradient tolerance.
    {solver}
    coef_ : ndarray of shape (n_classes,)
        ``v = 1 + delta``, the scale of each class's feature.
    {attributes}

    See Also
    --------
    StructuredMatrixScaling : the full-matrix member of the family.
    VectorScaling : vector scaling on the logits, without the ts-mix features.

    References
    ----------
    E. Berta, D. Holzmüller, M. I. Jordan, F. Bach. "Structured matrix
    scaling for multi-class calibration". AISTATS 2026.

    Examples
    --------
    >>> from skcal import StructuredVectorScaling
    >>> from skcal.utils._testing import make_miscalibrated_logits
    >>> logits, y = make_miscalibrated_logits(1000, 5, temperature=2.0, random_state=0)
    >>> svs = StructuredVectorScaling(device="cpu").fit(logits, y)
    >>> svs.coef_.shape, svs.intercept_.shape, round(1 / svs.beta_, 1)
    ((5,), (5,), 2.0)
    >>> svs.predict_proba(logits[:2]).sum(axis=1).round(6)
    array([1., 1.])
    """

    _kind = "diagonal"

    def __init__(
        self,
        *,
        input="logits",
        classes=None,
        reg_intercept=1.0,
        reg_diagonal=1.0,
        rho=1.0,
        tau=1.0,
        device="auto",
        tol=1e-5,
        max_iter=1000,
        verbose=0,
    ):
        self.input = input
        self.classes = classes
        self.reg_intercept = reg_intercept
        self.reg_diagonal = reg_diagonal
        self.rho = rho
        self.tau = tau
        self.device = device
        self.tol = tol
        self.max_iter = max_iter
        self.verbose = verbose

    def n_free_parameters(self, n_classes, n_features=None):
        """The unpenalised entries, at least ``ceil(C / 5)`` (``ceil(C / 5)``
        by default: every entry is shrunk by a ridge ``C / n``)."""
        return affine_count(
            n_classes,
            diag=is_zero(self.reg_diagonal),
            off=False,
            bias=is_zero(self.reg_intercept),
        )

    def _penalties(self, n_classes, n_samples):
        scale = self._scale(n_classes, n_samples)
        return {
            "l2_bias": self.reg_intercept * scale,
            "l2_diag": self.reg_diagonal * scale,
        }
