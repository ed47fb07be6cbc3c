"""Temperature, vector and matrix scaling (Guo et al., 2017)."""

from __future__ import annotations

import math
import warnings
from numbers import Integral, Real

import numpy as np

from .._torch import newton_root_1d, resolve_device
from .._torch.kernels import TemperatureObjective, fit_affine_softmax
from ..base import BaseCalibrator
from ..exceptions import ConvergenceWarning
from ..utils._sklearn import Interval, StrOptions

__all__ = ["MatrixScaling", "TemperatureScaling", "VectorScaling"]

# "auto", "cpu", "cuda" or "cuda:N"; checked by resolve_device at fit time
_DEVICE = [str]

#: Inverse temperatures are searched in [exp(-16), exp(16)].
_LOG_BETA_BOUND = 16.0


def _warn_unconverged(name: str, result, max_iter: int) -> None:
    if not result.converged:
        warnings.warn(
            f"{name} did not converge in max_iter={max_iter} iterations (largest "
            f"gradient entry {result.grad_max:.3g}). Increase max_iter, add "
            "regularisation, or check the scores for extreme values.",
            ConvergenceWarning,
            stacklevel=3,
        )


class TemperatureScaling(BaseCalibrator):
    """Temperature scaling: ``softmax(z / T)`` with one scalar ``T > 0``.

    ``T`` minimises the (weighted) mean negative log-likelihood on the
    calibration set. The NLL is convex in the inverse temperature
    ``beta = 1 / T``; it is solved to machine precision by a safeguarded
    Newton iteration on its derivative, in float64, on ``device``. ``beta``
    is searched in ``[exp(-16), exp(16)]``: if the NLL has no minimum inside
    (the scores separate the classes perfectly, or are unrelated or
    anti-correlated with the labels) the bound is returned with a
    ``ConvergenceWarning``, so the temperature is always positive and finite.
    Temperature scaling never changes the predicted class.

    Parameters
    ----------
    input : {"logits", "proba"}, default="logits"
        What ``X`` holds. Probabilities are validated and turned into
        log-probabilities ``log(max(p, 1e-12))``. Never guessed.
    classes : array-like of shape (n_classes,), default=None
        The label of each column of ``X``. See :class:`~skcal.base.BaseCalibrator`.
    device : {"auto", "cpu", "cuda"} or "cuda:N", default="auto"
        Where the fit runs; ``"auto"`` uses CUDA when available.
    tol : float, default=1e-12
        Relative tolerance on the inverse temperature.
    max_iter : int, default=100
        Maximum number of Newton iterations.

    Attributes
    ----------
    temperature_ : float
        Fitted temperature ``T``; calibrated logits are ``X / T``.
    n_iter_ : int
        Number of Newton iterations run.
    classes_ : ndarray of shape (n_classes,)
        Label of each column.
    n_features_in_ : int
        Number of columns of ``X`` (the number of classes).

    See Also
    --------
    VectorScaling : one scale and one offset per class.
    MatrixScaling : a full affine map of the logits.

    References
    ----------
    C. Guo, G. Pleiss, Y. Sun, K. Q. Weinberger. "On Calibration of Modern
    Neural Networks". ICML 2017.

    Examples
    --------
    >>> import numpy as np
    >>> from skcal import TemperatureScaling
    >>> rng = np.random.default_rng(0)
    >>> logits = rng.normal(size=(500, 3))
    >>> y = np.array([rng.choice(3, p=np.exp(z) / np.exp(z).sum()) for z in logits])
    >>> ts = TemperatureScaling(device="cpu").fit(3 * logits, y)  # over-confident
    >>> 2.5 < ts.temperature_ < 3.5
    True
    >>> ts.predict_proba(3 * logits[:2]).sum(axis=1)
    array([1., 1.])
    """

    _parameter_constraints: dict = {
        **BaseCalibrator._parameter_constraints,
        "device": _DEVICE,
        "tol": [Interval(Real, 0, None, closed="neither")],
        "max_iter": [Interval(Integral, 1, None, closed="left")],
    }

    def __init__(
        self, *, input="logits", classes=None, device="auto", tol=1e-12, max_iter=100
    ):
        self.input = input
        self.classes = classes
        self.device = device
        self.tol = tol
        self.max_iter = max_iter

    def _fit(self, logits, y_index, sample_weight):
        objective = TemperatureObjective(
            logits, y_index, sample_weight, resolve_device(self.device)
        )
        bound = math.exp(_LOG_BETA_BOUND)
        result = newton_root_1d(
            objective.derivatives,
            1.0,
            1.0 / bound,
            bound,
            xtol=self.tol,
            max_iter=self.max_iter,
        )
        if result.at_bound is not None:
            reason = (
                "the scores separate the classes perfectly"
                if result.at_bound == "upper"
                else "the scores carry no information about the labels, or are "
                "anti-correlated with them"
            )
            warnings.warn(
                f"TemperatureScaling: the log-likelihood has no minimum for a "
                f"temperature in [exp(-16), exp(16)] ({reason}); the temperature "
                f"was set to the bound {1.0 / result.x:.4g}.",
                ConvergenceWarning,
                stacklevel=3,
            )
        elif not result.converged:
            warnings.warn(
                f"TemperatureScaling did not converge in max_iter={self.max_iter} "
                "Newton iterations; increase max_iter.",
                ConvergenceWarning,
                stacklevel=3,
            )
        self.temperature_ = float(1.0 / result.x)
        self.n_iter_ = result.n_iter

    def _calibrated_logits(self, logits):
        return np.asarray(logits, dtype=np.float64) / self.temperature_


class _AffineScaling(BaseCalibrator):
    """Shared fit of vector and matrix scaling."""

    _matrix = False
    _parameter_constraints: dict = {
        **BaseCalibrator._parameter_constraints,
        "l2_reg": [StrOptions({"auto"}), Interval(Real, 0, None, closed="left")],
        "device": _DEVICE,
        "tol": [Interval(Real, 0, None, closed="neither")],
        "max_iter": [Interval(Integral, 1, None, closed="left")],
    }

    def _penalties(self) -> dict:
        return {"l2_diag": self.l2_reg_, "l2_bias": self.l2_reg_}

    def _fit(self, logits, y_index, sample_weight):
        # frequency semantics: a weight of 2 counts as two samples
        n_samples = float(np.sum(sample_weight))
        self.l2_reg_ = (
            logits.shape[1] / n_samples if self.l2_reg == "auto" else float(self.l2_reg)
        )
        fit = fit_affine_softmax(
            logits,
            y_index,
            sample_weight,
            matrix=self._matrix,
            device=resolve_device(self.device),
            tol=self.tol,
            max_iter=self.max_iter,
            **self._penalties(),
        )
        _warn_unconverged(type(self).__name__, fit.result, self.max_iter)
        self.coef_ = fit.coef
        self.intercept_ = fit.intercept
        self.n_iter_ = fit.result.n_iter


class VectorScaling(_AffineScaling):
    """Vector scaling: ``softmax(z * w + b)`` with one scale and offset per class.

    Fitted by full-batch L-BFGS on the weighted mean negative log-likelihood
    plus ``l2_reg * (||w - 1||^2 + ||b||^2)``, in float64 on ``device``,
    starting from the identity map (``w = 1``, ``b = 0``). The default
    ``l2_reg="auto"`` is ``n_classes / n_samples``: a fixed-precision prior
    whose weight shrinks as the calibration set grows (the ridge scaling of
    structured matrix scaling, Berta et al. 2026). It keeps the fit finite
    when the calibration scores are (nearly) separable or a class is absent;
    ``l2_reg=0`` is the unregularised method of Guo et al. Vector scaling can
    change the predicted class.

    Parameters
    ----------
    input : {"logits", "proba"}, default="logits"
        What ``X`` holds; probabilities become ``log(max(p, 1e-12))``.
    classes : array-like of shape (n_classes,), default=None
        The label of each column of ``X``.
    l2_reg : float or "auto", default="auto"
        Ridge penalty pulling the map towards the identity; ``"auto"`` is
        ``n_classes / n_samples`` (``n_samples`` is the sum of the sample
        weights).
    device : {"auto", "cpu", "cuda"} or "cuda:N", default="auto"
        Where the fit runs.
    tol : float, default=1e-7
        Stop when the largest absolute gradient entry is below ``tol``.
    max_iter : int, default=1000
        Maximum number of L-BFGS iterations.

    Attributes
    ----------
    coef_ : ndarray of shape (n_classes,)
        Per-class scales ``w``.
    l2_reg_ : float
        The ridge penalty used.
    intercept_ : ndarray of shape (n_classes,)
        Per-class offsets ``b``.
    n_iter_ : int
        Number of L-BFGS iterations run.
    classes_ : ndarray of shape (n_classes,)
        Label of each column.
    n_features_in_ : int
        Number of columns of ``X``.

    References
    ----------
    C. Guo, G. Pleiss, Y. Sun, K. Q. Weinberger. "On Calibration of Modern
    Neural Networks". ICML 2017.

    Examples
    --------
    >>> import numpy as np
    >>> from skcal import VectorScaling
    >>> rng = np.random.default_rng(0)
    >>> logits = rng.normal(size=(500, 3))
    >>> y = np.array([rng.choice(3, p=np.exp(z) / np.exp(z).sum()) for z in logits])
    >>> vs = VectorScaling(device="cpu").fit(2 * logits + [1.0, 0.0, 0.0], y)
    >>> bool(np.allclose(vs.coef_, 0.5, atol=0.15)), vs.intercept_.shape
    (True, (3,))
    """

    def __init__(
        self,
        *,
        input="logits",
        classes=None,
        l2_reg="auto",
        device="auto",
        tol=1e-7,
        max_iter=1000,
    ):
        self.input = input
        self.classes = classes
        self.l2_reg = l2_reg
        self.device = device
        self.tol = tol
        self.max_iter = max_iter

    def _calibrated_logits(self, logits):
        return np.asarray(logits, dtype=np.float64) * self.coef_ + self.intercept_


class MatrixScaling(_AffineScaling):
    """Matrix scaling: ``softmax(z W^T + b)``, a full affine map of the logits.

    Fitted by full-batch L-BFGS on the weighted mean negative log-likelihood
    plus ``l2_reg * (||W - I||_F^2 + ||b||^2) + off_diagonal_reg *
    sum_{i != j} W_ij^2``, in float64 on ``device``, from the identity map.
    With ``C`` classes it has ``C^2 + C`` parameters and over-fits small
    calibration sets without regularisation. The default ``l2_reg="auto"``
    is ``n_classes / n_samples``, a fixed-precision prior whose weight
    shrinks as the calibration set grows; ``off_diagonal_reg`` further
    shrinks the interactions between classes (as ODIR does); ``l2_reg=0``
    is the unregularised method of Guo et al. On ``input="proba"`` it is
    Dirichlet calibration (Kull et al., 2019) with a ridge penalty.

    Parameters
    ----------
    input : {"logits", "proba"}, default="logits"
        What ``X`` holds; probabilities become ``log(max(p, 1e-12))``.
    classes : array-like of shape (n_classes,), default=None
        The label of each column of ``X``.
    l2_reg : float or "auto", default="auto"
        Ridge penalty on ``W - I`` and ``b``; ``"auto"`` is
        ``n_classes / n_samples`` (``n_samples`` is the sum of the sample
        weights).
    off_diagonal_reg : float, default=0.0
        Extra ridge penalty on the off-diagonal entries of ``W``.
    device : {"auto", "cpu", "cuda"} or "cuda:N", default="auto"
        Where the fit runs.
    tol : float, default=1e-7
        Stop when the largest absolute gradient entry is below ``tol``.
    max_iter : int, default=1000
        Maximum number of L-BFGS iterations.

    Attributes
    ----------
    coef_ : ndarray of shape (n_classes, n_classes)
        The matrix ``W``.
    l2_reg_ : float
        The ridge penalty used on ``W - I`` and ``b``.
    intercept_ : ndarray of shape (n_classes,)
        The offsets ``b``.
    n_iter_ : int
        Number of L-BFGS iterations run.
    classes_ : ndarray of shape (n_classes,)
        Label of each column.
    n_features_in_ : int
        Number of columns of ``X``.

    References
    ----------
    C. Guo, G. Pleiss, Y. Sun, K. Q. Weinberger. "On Calibration of Modern
    Neural Networks". ICML 2017.

    Examples
    --------
    >>> import numpy as np
    >>> from skcal import MatrixScaling
    >>> rng = np.random.default_rng(0)
    >>> logits = rng.normal(size=(1000, 3))
    >>> y = np.array([rng.choice(3, p=np.exp(z) / np.exp(z).sum()) for z in logits])
    >>> swapped = logits[:, [1, 0, 2]]  # a model that confuses classes 0 and 1
    >>> ms = MatrixScaling(off_diagonal_reg=1e-3, device="cpu").fit(swapped, y)
    >>> ms.coef_.shape
    (3, 3)
    >>> bool((ms.predict(swapped) == y).mean() > (swapped.argmax(1) == y).mean())
    True
    """

    _matrix = True
    _parameter_constraints: dict = {
        **_AffineScaling._parameter_constraints,
        "off_diagonal_reg": [Interval(Real, 0, None, closed="left")],
    }

    def __init__(
        self,
        *,
        input="logits",
        classes=None,
        l2_reg="auto",
        off_diagonal_reg=0.0,
        device="auto",
        tol=1e-7,
        max_iter=1000,
    ):
        self.input = input
        self.classes = classes
        self.l2_reg = l2_reg
        self.off_diagonal_reg = off_diagonal_reg
        self.device = device
        self.tol = tol
        self.max_iter = max_iter

    def _penalties(self) -> dict:
        return {
            "l2_diag": self.l2_reg_,
            "l2_off": self.l2_reg_ + self.off_diagonal_reg,
            "l2_bias": self.l2_reg_,
        }

    def _calibrated_logits(self, logits):
        return np.asarray(logits, dtype=np.float64) @ self.coef_.T + self.intercept_
