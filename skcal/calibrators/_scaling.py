"""Temperature, vector and matrix scaling (Guo et al., 2017).

Class-based temperature scaling is in ``_cts.py``, next to its kernel.
"""

from __future__ import annotations

import math
from dataclasses import replace
from numbers import Integral, Real

import numpy as np
from sklearn.utils.validation import check_is_fitted

from .._torch import newton_root_1d
from .._torch.kernels import (
    TemperatureObjective,
    fit_affine_softmax,
    logit_scale,
)
from ..base import BaseCalibrator, export_input, fit_logits
from ..exceptions import ConvergenceWarning
from ..llm._topk import TopKScores
from ..llm._topk_ops import (
    TopKTemperatureObjective,
    check_topk_targets,
    scale_topk,
    top_listed,
    topk_logit_scale,
)
from ..llm._topk_tail import TopKTailTemperatureObjective, scale_topk_tail
from ..utils._constraints import LBFGS_CONSTRAINTS
from ..utils._docstrings import LBFGS_DOC, fill_doc
from ..utils._parameters import affine_count, is_zero
from ..utils._sklearn import DEVICE_CONSTRAINT, Interval, StrOptions
from ..utils._validation import check_sample_weight, effective_sample_size
from ..utils._warnings import warn, warn_unconverged
from ._affine_map import AffineMap
from ._top_label import (
    check_top_label_problem,
    fit_binary_vector,
    top_label_classes,
    top_label_temperature,
)

__all__ = [
    "BiasCorrectedTemperatureScaling",
    "MatrixScaling",
    "TemperatureScaling",
    "VectorScaling",
]

#: Inverse temperatures times the logits' scale are searched in [exp(-16), exp(16)].
_LOG_BETA_BOUND = 16.0


def fit_inverse_temperature(
    logits, y_index, sample_weight, device, tol=1e-12, max_iter=100
):
    """NLL-optimal inverse temperature ``beta`` of ``softmax(beta * logits)``.

    Shared by every calibrator that starts from temperature scaling. Solves
    the convex 1-D problem with :func:`~skcal._torch.newton_root_1d` on the
    logits divided by their scale ``s`` (:func:`logit_scale`, the median
    range of a row), over ``beta * s`` in ``[exp(-16), exp(16)]``, so that
    neither the solve nor its bounds depend on the logits' units: logits
    multiplied by ``a`` give ``beta / a``. Warns (``ConvergenceWarning``)
    when the optimum lies outside the bounds or the solver did not converge.

    Returns
    -------
    OptimResult
        ``result.x`` is ``beta``, in the units of ``logits``.
    """
    scale = logit_scale(logits)
    objective = TemperatureObjective(logits, y_index, sample_weight, device, scale)
    return solve_inverse_temperature(objective.derivatives, scale, tol, max_iter)


def solve_inverse_temperature(derivatives, scale, tol=1e-12, max_iter=100):
    """The Newton solve of :func:`fit_inverse_temperature` on an objective's
    ``derivatives(beta * scale)``, with its bounds and warnings; ``result.x``
    in the units of the logits."""
    bound = math.exp(_LOG_BETA_BOUND)
    # start at beta = 1 when the logits' scale allows it
    start = min(max(scale, 1.0 / bound), bound)
    result = newton_root_1d(
        derivatives, start, 1.0 / bound, bound, xtol=tol, max_iter=max_iter
    )
    if result.at_bound == "upper":
        # the scores separate the classes: the likelihood has no maximum, and
        # nothing in the data says how confident to be: keep T = 1
        warn(
            "Temperature scaling: every calibration row's top class is its label "
            "(the scores separate the classes), so the likelihood keeps growing as "
            "the temperature goes to 0 and has no maximum; the classifier's own "
            "temperature T = 1 was kept. A calibration set with some errors of the "
            "classifier lets the temperature be estimated.",
            ConvergenceWarning,
        )
        result = replace(result, x=min(max(scale, 1.0 / bound), bound))
    elif result.at_bound is not None:
        warn(
            f"Temperature scaling: the log-likelihood has no minimum for a "
            f"temperature within exp(+-16) of the logits' scale {scale:.4g} (the "
            f"median range of a row) (the scores carry no information about the "
            f"labels, or are anti-correlated with them); the temperature was set "
            f"to the bound {scale / result.x:.4g}.",
            ConvergenceWarning,
        )
    elif not result.converged:
        warn(
            f"Temperature scaling did not converge in max_iter={max_iter} Newton "
            "iterations; increase max_iter.",
            ConvergenceWarning,
        )
    return replace(result, x=result.x / scale)


class TemperatureScaling(BaseCalibrator):
    """Temperature scaling: ``softmax(z / T)`` with one scalar ``T > 0``.

    ``T`` minimises the (weighted) mean negative log-likelihood on the
    calibration set. The NLL is convex in the inverse temperature
    ``beta = 1 / T``; it is solved to machine precision by a safeguarded
    Newton iteration on its derivative, in float64, on ``device``, on the
    logits shifted to a row maximum of 0 and divided by their scale ``s``
    (the median range of a row), so that the result does not depend on the
    logits' offset or units: fitting on ``a * X + c`` gives ``a * T``.
    ``T / s`` is searched in ``[exp(-16), exp(16)]``, so the temperature is
    always positive and finite. When the NLL has no minimum there, a
    ``ConvergenceWarning`` says why and what was done:

    * the scores separate the classes (every calibration row's top class is
      its label; common on 100 rows of an accurate model): the likelihood
      grows without bound as ``T -> 0``, and the maximum-likelihood
      temperature, 0, would make every later mistake infinitely costly (on
      a real 10-class model, 100 error-free rows gave a test NLL of 0.25
      against 0.036 uncalibrated). The classifier's own temperature ``T = 1``
      is kept instead: the data hold no error to estimate a temperature from
      (a rule that depends on ``n``, such as Laplace's, would break the
      equivalence of integer weights and repeated rows). This departs from
      the method, which has no answer here;
    * the scores carry no information about the labels, or are
      anti-correlated with them: ``T`` is the bound ``exp(16) s``.

    Temperature scaling never changes the predicted class.

    **Top-k input.** ``X`` may be a :class:`~skcal.llm.TopKScores` (the
    top-k log-probabilities of a vocabulary-sized distribution) with ``y``
    its class indices: nothing of size ``n_samples x n_classes`` is built.
    Its rest model (the leftover mass spread equally over the unlisted
    classes, each with log-probability ``u``) is scaled as dense logits
    would be: listed ``v / T - L``, each unlisted ``u / T - L``, with
    ``L = logaddexp(logsumexp(v / T), log(m) + u / T)`` for ``m`` unlisted
    classes, so the leftover mass changes with ``T`` too. A label outside
    a row's top-k counts with the unlisted log-probability ``u / T - L``.
    The same Newton solve, over row chunks of the ``n x k`` arrays, gives
    the temperature of the dense rest model; ``predict_proba``,
    ``predict_log_proba`` and ``decision_function`` return a ``TopKScores``
    of the calibrated log-probabilities (same indices), ``predict`` the top
    listed class. ``classes`` must be ``None``; ``input`` does not apply.
    With ``rest_model="tail"`` the unlisted class of rank ``r`` gets
    ``v_k - s log(r / k)`` (``v_k`` the smallest listed log-probability,
    ``s >= 0`` fitted per row so that the unlisted classes hold the
    leftover mass), so the leftover shrinks faster as ``T`` falls, as a
    real softmax tail does; an unlisted label then counts by the tail's
    whole mass (it is known to be unlisted, not which class it is).

    Parameters
    ----------
    input : {"logits", "proba"}, default="logits"
        What ``X`` holds. Probabilities are validated and turned into
        log-probabilities ``log(max(p, proba_floor_))`` (``proba_floor_``:
        half the smallest positive calibration probability, at least
        2.2e-308; see the user guide's input contract). Never guessed.
    classes : array-like of shape (n_classes,), default=None
        The label of each column of ``X``. See :class:`~skcal.base.BaseCalibrator`.
    device : {"auto", "cpu", "cuda"} or "cuda:N", default="auto"
        Where the fit runs; ``"auto"`` uses CUDA when available.
    tol : float, default=1e-12
        Relative tolerance on the inverse temperature.
    max_iter : int, default=100
        Maximum number of Newton iterations.
    rest_model : {"equal", "tail"}, default="equal"
        With a :class:`~skcal.llm.TopKScores` only: how the leftover mass
        is spread over the unlisted classes when the temperature changes
        it. ``"equal"``: an equal share each (the rest model of
        ``TopKScores``); ``"tail"``: a Zipf-like tail continuing below the
        k-th listed class, fitted per row to the leftover mass (see
        "Top-k input"). Dense input ignores it.

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

    Top-k input (the rest of each row's mass spread over its unlisted classes):

    >>> from skcal.llm import TopKScores
    >>> top = TopKScores.from_logits(3 * logits, k=2)
    >>> ts_top = TemperatureScaling().fit(top, y)
    >>> 2.5 < ts_top.temperature_ < 3.5
    True
    >>> ts_top.predict_proba(top[:2])
    TopKScores(n_samples=2, k=2, n_classes=3, rest_logmass=known)
    >>> ts_tail = TemperatureScaling(rest_model="tail").fit(top, y)
    >>> 2.5 < ts_tail.temperature_ < 3.5
    True
    """

    _needs_torch = True  # its fit runs torch kernels
    _shift_invariant = True
    _keeps_argmax = "proba"

    _parameter_constraints: dict = {
        **BaseCalibrator._parameter_constraints,
        "device": DEVICE_CONSTRAINT,
        "tol": [Interval(Real, 0, None, closed="neither")],
        "max_iter": [Interval(Integral, 1, None, closed="left")],
        "rest_model": [StrOptions({"equal", "tail"})],
    }

    def __init__(
        self,
        *,
        input="logits",
        classes=None,
        device="auto",
        tol=1e-12,
        max_iter=100,
        rest_model="equal",
    ):
        self.input = input
        self.classes = classes
        self.device = device
        self.tol = tol
        self.max_iter = max_iter
        self.rest_model = rest_model

    def n_free_parameters(self, n_classes, n_features=None):
        """1: one temperature shared by every class."""
        return 1

    def _fit(self, logits, y_index, sample_weight):
        result = fit_inverse_temperature(
            logits, y_index, sample_weight, self.device, self.tol, self.max_iter
        )
        self.temperature_ = float(1.0 / result.x)
        self.n_iter_ = result.n_iter

    def _calibrated_logits(self, logits):
        return np.asarray(logits, dtype=np.float64) / self.temperature_

    def to_torch(self):
        """The fitted map as a torch module: scores to calibrated probabilities.

        See :func:`skcal.export.to_torch`.

        Returns
        -------
        torch.nn.Module
            Input handling, division by ``temperature_``, softmax.

        Examples
        --------
        >>> import numpy as np
        >>> from skcal import TemperatureScaling
        >>> from skcal.utils._testing import make_miscalibrated_logits
        >>> X, y = make_miscalibrated_logits(n_samples=300, random_state=0)
        >>> ts = TemperatureScaling().fit(X, y)
        >>> module = ts.to_torch()
        >>> import torch
        >>> P = module(torch.from_numpy(X)).numpy()
        >>> bool(np.abs(P - ts.predict_proba(X)).max() < 1e-12)
        True
        """
        from .._torch._export import Chain, Softmax, Temperature

        return Chain(export_input(self), Temperature(self.temperature_), Softmax())

    # -------------------------------------------------------- top-k input
    def fit(self, X, y, sample_weight=None):
        """Fit the temperature on scores ``X`` and labels ``y``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_classes) or TopKScores
            Scores of the classifier being calibrated, read as logits or as
            probabilities according to ``input``; or a
            :class:`~skcal.llm.TopKScores` (see "Top-k input" above).
        y : array-like of shape (n_samples,)
            True labels, none missing; with a ``TopKScores``, class indices
            in ``[0, n_classes)``.
        sample_weight : array-like of shape (n_samples,), default=None
            Non-negative sample weights; the objective is a weighted mean.

        Returns
        -------
        self : TemperatureScaling
            The fitted calibrator.
        """
        if not isinstance(X, TopKScores):
            return super().fit(X, y, sample_weight)
        self._validate_params()
        if self.classes is not None:
            raise ValueError(
                "TemperatureScaling(classes=...) with TopKScores input: the "
                "top-k's class indices are the classes, and y holds them; leave "
                "classes=None."
            )
        y_index, weight = check_topk_targets(X, y, sample_weight)
        scale = topk_logit_scale(X)
        if self.rest_model == "tail":
            objective = TopKTailTemperatureObjective(X, y_index, weight, scale)
        else:
            objective = TopKTemperatureObjective(X, y_index, weight, scale)
        result = solve_inverse_temperature(
            objective.derivatives, scale, self.tol, self.max_iter
        )
        self.temperature_ = float(1.0 / result.x)
        self.n_iter_ = result.n_iter
        self.classes_ = np.arange(X.n_classes)
        self.n_features_in_ = X.n_classes
        return self

    def _scaled_topk(self, X):
        check_is_fitted(self)
        if X.n_classes != self.n_features_in_:
            raise ValueError(
                f"X has n_classes={X.n_classes}, but TemperatureScaling was "
                f"fitted on {self.n_features_in_} classes."
            )
        if getattr(self, "rest_model", "equal") == "tail":
            return scale_topk_tail(X, 1.0 / self.temperature_)
        return scale_topk(X, 1.0 / self.temperature_)

    def predict_proba(self, X):
        """Calibrated probabilities of shape (n_samples, n_classes).

        Column ``j`` is the probability of ``classes_[j]``; rows sum to 1.
        With a :class:`~skcal.llm.TopKScores`, a ``TopKScores`` of the
        calibrated log-probabilities (same indices; see "Top-k input").
        """
        if isinstance(X, TopKScores):
            return self._scaled_topk(X)
        return super().predict_proba(X)

    def predict_log_proba(self, X):
        """Logarithm of :meth:`predict_proba`, computed stably; finite.

        With a :class:`~skcal.llm.TopKScores`, the same ``TopKScores`` as
        :meth:`predict_proba` (it holds log-probabilities).
        """
        if isinstance(X, TopKScores):
            return self._scaled_topk(X)
        return super().predict_log_proba(X)

    def decision_function(self, X):
        """Calibrated logits of shape (n_samples, n_classes).

        With a :class:`~skcal.llm.TopKScores`, the ``TopKScores`` of
        :meth:`predict_log_proba` (log-probabilities are logits).
        """
        if isinstance(X, TopKScores):
            return self._scaled_topk(X)
        return super().decision_function(X)

    def predict(self, X):
        """Most probable class of each sample, as labels from ``classes_``.

        The argmax of ``X`` (temperature scaling keeps it); with a
        :class:`~skcal.llm.TopKScores`, each row's top listed class index.
        """
        if not isinstance(X, TopKScores):
            return super().predict(X)
        top = self._scaled_topk(X)
        best = np.argmax(top.values, axis=1)
        return self.classes_[top.indices[np.arange(len(top)), best]]

    def fit_top_label(self, logits, top, correct, sample_weight=None, *, verbose=0):
        """Fit the temperature on the top-versus-all objective.

        The top-label protocol of the scaling calibrators (what
        :class:`TopVersusAll` calls): the inverse temperature minimises the
        weighted binary cross-entropy of the top-label confidence of
        ``softmax(logits / T)`` against ``correct`` (Le Coz et al. 2024),
        by L-BFGS-B over ``log(scale / T)`` in ``[-16, 16]`` (``scale`` the
        median row range of the logits), in at most ``max(max_iter, 100)``
        iterations, with a ``ConvergenceWarning`` at a bound. ``logits``
        may be a :class:`~skcal.llm.TopKScores` (its rest model's binary
        objective, in ``n x k`` arrays), ``top`` then each row's top listed
        class index.

        Parameters
        ----------
        logits : array-like of shape (n_samples, n_classes) or TopKScores
            Finite logits (log-probabilities are valid logits), read as
            they are: ``input`` is not applied.
        top : array-like of shape (n_samples,)
            The top class of each row, a column index (the argmax of
            ``logits``, or of the probabilities they are the logs of).
        correct : array-like of shape (n_samples,)
            1 where the top class is the row's label, 0 where it is not.
        sample_weight : array-like of shape (n_samples,), default=None
            Non-negative weights; the objective is a weighted mean.
        verbose : int, default=0
            0: silent; 1: a progress bar over the iterations; 2: also a line
            per iteration.

        Returns
        -------
        self : TemperatureScaling
            Fitted: ``temperature_``, ``n_iter_``, ``classes_`` (``classes``,
            or the column indices) and ``n_features_in_``.

        Examples
        --------
        >>> import numpy as np
        >>> from skcal import TemperatureScaling
        >>> from skcal.utils._testing import make_miscalibrated_logits
        >>> logits, y = make_miscalibrated_logits(2000, 10, random_state=0)
        >>> top = logits.argmax(axis=1)
        >>> ts = TemperatureScaling().fit_top_label(logits, top, top == y)
        >>> 1.0 < ts.temperature_ < 4.0
        True
        """
        self._validate_params()
        if isinstance(logits, TopKScores):
            return self._fit_top_label_topk(
                logits, top, correct, sample_weight, verbose
            )
        z, top, right, weight = check_top_label_problem(
            logits, top, correct, sample_weight
        )
        beta, n_iter = top_label_temperature(
            z, top, right, weight / weight.sum(),
            max_iter=max(self.max_iter, 100), verbose=verbose,
        )  # fmt: skip
        self.temperature_ = 1.0 / beta
        self.n_iter_ = n_iter
        self.classes_ = top_label_classes(self.classes, z.shape[1])
        self.n_features_in_ = z.shape[1]
        return self

    def _fit_top_label_topk(self, X, top, correct, sample_weight, verbose):
        """:meth:`fit_top_label` of a ``TopKScores``' rest model; ``top``
        must be each row's top listed class index."""
        j, index = top_listed(X)
        if np.shape(top) != index.shape or not np.array_equal(top, index):
            raise ValueError(
                "With TopKScores, fit_top_label expects top as each row's top "
                "listed class index (the indices of the largest values); got "
                "other indices."
            )
        right = np.asarray(correct, dtype=np.float64)
        if right.shape != index.shape or not np.isin(right, (0.0, 1.0)).all():
            raise ValueError(
                f"fit_top_label expects correct as {len(index)} values 0 or 1."
            )
        weight = check_sample_weight(sample_weight, len(X))
        beta, n_iter = top_label_temperature(
            X, j, right, weight / weight.sum(),
            max_iter=max(self.max_iter, 100), verbose=verbose,
        )  # fmt: skip
        self.temperature_ = 1.0 / beta
        self.n_iter_ = n_iter
        self.classes_ = np.arange(X.n_classes)
        self.n_features_in_ = X.n_classes
        return self


class _AffineScaling(AffineMap, BaseCalibrator):
    """Shared fit of vector and matrix scaling."""

    _needs_torch = True  # its fit runs torch kernels
    _kind = "diagonal"
    # input="proba": mapped as probabilities, fitted on their logs
    _reads = "log-probabilities"
    _parameter_constraints: dict = {
        **BaseCalibrator._parameter_constraints,
        "reg_lambda": [StrOptions({"auto"}), Interval(Real, 0, None, closed="left")],
        **LBFGS_CONSTRAINTS,
    }

    def _calibrated_proba(self, logits, P=None):
        if P is None:
            return super()._calibrated_proba(logits)
        # the map of log(P), the logs taken block by block into the input of
        # the product, the result written over P
        return self._map(P, log=True, softmax=True, out=P)

    def _penalties(self) -> dict:
        return {"l2_diag": self.reg_lambda_, "l2_bias": self.reg_lambda_}

    #: ``reg_lambda="auto"`` is ``_AUTO_RIDGE * n_classes / n_samples``
    _AUTO_RIDGE = 4.0

    def _fit(self, logits, y_index, sample_weight):
        logits = fit_logits(self, logits)  # input="proba": their logs
        # weights are relative: n is Kish's effective sample size
        n_samples = effective_sample_size(sample_weight)
        self.reg_lambda_ = (
            self._AUTO_RIDGE * logits.shape[1] / n_samples
            if self.reg_lambda == "auto"
            else float(self.reg_lambda)
        )
        beta = fit_inverse_temperature(logits, y_index, sample_weight, self.device).x
        self.temperature_init_ = float(1.0 / beta)
        fit = fit_affine_softmax(
            logits,
            y_index,
            sample_weight,
            kind=self._kind,
            scale=beta,
            device=self.device,
            tol=self.tol,
            max_iter=self.max_iter,
            verbose=self.verbose,
            desc=type(self).__name__,
            **self._penalties(),
        )
        warn_unconverged(type(self).__name__, fit.result, self.max_iter)
        self.coef_ = fit.coef
        self.intercept_ = fit.intercept
        self.n_iter_ = fit.result.n_iter


@fill_doc(lbfgs=LBFGS_DOC)
class VectorScaling(_AffineScaling):
    """Vector scaling: ``softmax(z * w + b)`` with one scale and offset per class.

    The map is written relative to temperature scaling, ``w = (1 + d) / T0``
    with ``T0`` the NLL-optimal temperature (``temperature_init_``), and
    fitted by full-batch L-BFGS on the weighted mean negative log-likelihood
    plus ``reg_lambda * (||d||^2 + ||b||^2)``, in float64 on ``device``, starting
    from temperature scaling (``d = 0``, ``b = 0``). So the ridge shrinks the
    map toward temperature scaling, not toward the uncalibrated identity: the
    training NLL is never above temperature scaling's, and the fit does not
    depend on the logits' units (logits multiplied by ``a`` give ``w / a``
    and the same probabilities). The default ``reg_lambda="auto"`` is
    ``4 n_classes / n_samples``: a fixed-precision prior whose weight
    shrinks as the calibration set grows (the ridge scaling of structured
    matrix scaling, Berta et al. 2026, four times stronger: see Notes). It
    keeps the fit finite when the calibration scores are (nearly) separable
    or a class is absent; ``reg_lambda=0`` is the unregularised method of Guo et
    al. Vector scaling can change the predicted class.

    Parameters
    ----------
    input : {"logits", "proba"}, default="logits"
        What ``X`` holds; probabilities become ``log(max(p, proba_floor_))``
        (half the smallest positive calibration probability, at least
        2.2e-308).
    classes : array-like of shape (n_classes,), default=None
        The label of each column of ``X``.
    reg_lambda : float or "auto", default="auto"
        Ridge penalty pulling the map towards temperature scaling; ``"auto"``
        is ``4 n_classes / n_samples`` (``n_samples`` is Kish's effective
        sample size ``(sum w)^2 / sum w^2``, the number of rows for equal
        weights).
    device : {"auto", "cpu", "cuda"} or "cuda:N", default="auto"
        Where the fit runs.
    tol : float, default=1e-5
        Stop when the largest absolute gradient entry is below ``tol``.
    {lbfgs}

    Attributes
    ----------
    coef_ : ndarray of shape (n_classes,)
        Per-class scales ``w``.
    temperature_init_ : float
        Temperature of the temperature scaling the map starts from and is
        shrunk toward.
    reg_lambda_ : float
        The ridge penalty used.
    intercept_ : ndarray of shape (n_classes,)
        Per-class offsets ``b``.
    n_iter_ : int
        Number of L-BFGS iterations run.
    classes_ : ndarray of shape (n_classes,)
        Label of each column.
    n_features_in_ : int
        Number of columns of ``X``.

    Notes
    -----
    The factor 4 of the default ridge was chosen on the eight real tasks of
    ``benchmarks/_datasets.py`` (6 to 66 classes, 300 to 4,000 calibration
    rows, 3 draws each): with it the test NLL was never above temperature
    scaling's by more than 0.1%, and below it by up to 4.6% with 4,000
    rows; with ``n_classes / n_samples`` it was up to 1.8% above at 300
    rows.

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
        reg_lambda="auto",
        device="auto",
        tol=1e-5,
        max_iter=1000,
        verbose=0,
    ):
        self.input = input
        self.classes = classes
        self.reg_lambda = reg_lambda
        self.device = device
        self.tol = tol
        self.max_iter = max_iter
        self.verbose = verbose

    def n_free_parameters(self, n_classes, n_features=None):
        """The unpenalised entries (all ``2C`` without the ridge), at least
        ``ceil(C / 5)``: see :func:`~skcal.utils._parameters.affine_count`."""
        free = is_zero(self.reg_lambda)
        return affine_count(n_classes, diag=free, off=False, bias=free)

    def fit_top_label(self, logits, top, correct, sample_weight=None, *, verbose=0):
        """Fit the map on the top-versus-all objective.

        The top-label protocol of the scaling calibrators (what
        :class:`TopVersusAll` calls): first the temperature of
        :meth:`TemperatureScaling.fit_top_label`, then ``s = z (1 + d) /
        T0 + b`` (``z`` the logits shifted to a row maximum of 0) minimising
        the weighted binary cross-entropy of the top-label confidence of
        ``softmax(s)`` against ``correct`` plus ``reg_lambda (||d||^2 +
        ||b||^2)`` (``"auto"``: ``4 n_classes / n_samples``, Kish's
        effective sample size), by L-BFGS-B from ``d = b = 0`` to ``tol``
        in ``max_iter`` iterations (a ``ConvergenceWarning`` otherwise).

        Parameters
        ----------
        logits : array-like of shape (n_samples, n_classes)
            Finite logits (log-probabilities are valid logits), read as
            they are: ``input`` is not applied. The map is fitted on them
            minus their row maxima, which is what it should be applied to:
            pass :meth:`predict_proba` logits shifted the same way (as
            :class:`TopVersusAll` does).
        top : array-like of shape (n_samples,)
            The top class of each row, a column index.
        correct : array-like of shape (n_samples,)
            1 where the top class is the row's label, 0 where it is not.
        sample_weight : array-like of shape (n_samples,), default=None
            Non-negative weights; the objective is a weighted mean.
        verbose : int, default=0
            At least this ``verbose`` (the larger of the two is used).

        Returns
        -------
        self : VectorScaling
            Fitted: ``coef_``, ``intercept_``, ``temperature_init_``,
            ``reg_lambda_``, ``n_iter_``, ``classes_`` and
            ``n_features_in_``.

        Examples
        --------
        >>> import numpy as np
        >>> from skcal import VectorScaling
        >>> from skcal.utils._testing import make_miscalibrated_logits
        >>> logits, y = make_miscalibrated_logits(2000, 10, random_state=0)
        >>> top = logits.argmax(axis=1)
        >>> vs = VectorScaling().fit_top_label(logits, top, top == y)
        >>> vs.coef_.shape, vs.intercept_.shape
        ((10,), (10,))
        """
        self._validate_params()
        z, top, right, sample_weight = check_top_label_problem(
            logits, top, correct, sample_weight
        )
        weight = sample_weight / sample_weight.sum()
        verbose = max(int(verbose or 0), int(self.verbose or 0))
        beta, _ = top_label_temperature(
            z, top, right, weight, max_iter=max(self.max_iter, 100), verbose=verbose
        )
        z = z - z.max(axis=1, keepdims=True)
        n_samples = effective_sample_size(sample_weight)
        reg = (
            self._AUTO_RIDGE * z.shape[1] / n_samples
            if self.reg_lambda == "auto"
            else float(self.reg_lambda)
        )
        coef, intercept, result = fit_binary_vector(
            z, top, right, weight, beta, reg,
            tol=self.tol, max_iter=self.max_iter, verbose=verbose,
        )  # fmt: skip
        if not result.success:
            warn(
                f"TopVersusAll: vector scaling did not converge in "
                f"max_iter={self.max_iter} iterations ({result.message}). "
                "Increase the calibrator's max_iter or its reg_lambda.",
                ConvergenceWarning,
            )
        self.coef_, self.intercept_ = coef, intercept
        self.temperature_init_, self.reg_lambda_ = 1.0 / beta, reg
        self.n_iter_ = int(result.nit)
        self.classes_ = top_label_classes(self.classes, z.shape[1])
        self.n_features_in_ = z.shape[1]
        return self


@fill_doc(lbfgs=LBFGS_DOC)
class MatrixScaling(_AffineScaling):
    """Matrix scaling: ``softmax(z W^T + b)``, a full affine map of the logits.

    The map is written relative to temperature scaling, ``W = (I + D) / T0``
    with ``T0`` the NLL-optimal temperature (``temperature_init_``), and
    fitted by full-batch L-BFGS on the weighted mean negative log-likelihood
    plus ``reg_lambda * (||D||_F^2 + ||b||^2) + reg_off_diagonal * sum_{i != j}
    D_ij^2``, in float64 on ``device``, from temperature scaling (``D = 0``,
    ``b = 0``): the ridge shrinks toward temperature scaling, the training
    NLL is never above temperature scaling's, and the fit does not depend on
    the logits' units. With ``C`` classes it has ``C^2 + C`` parameters and
    over-fits small calibration sets without regularisation. The defaults
    are structured matrix scaling's ridge (Berta et al. 2026), 16 times
    stronger (see Notes): ``reg_lambda="auto"`` is ``16 C / n_samples`` and
    ``reg_off_diagonal="auto"`` is ``(C - 2) reg_lambda``, so that an
    off-diagonal entry is penalised ``C - 1`` times more than a diagonal
    one; their weight shrinks as the calibration set grows. ``reg_lambda=0``
    with ``reg_off_diagonal=0`` (or ``"auto"``) is the unregularised method
    of Guo et al. On ``input="proba"`` it is Dirichlet calibration (Kull et
    al., 2019) with a ridge penalty toward temperature scaling.

    Parameters
    ----------
    input : {"logits", "proba"}, default="logits"
        What ``X`` holds; probabilities become ``log(max(p, proba_floor_))``
        (half the smallest positive calibration probability, at least
        2.2e-308).
    classes : array-like of shape (n_classes,), default=None
        The label of each column of ``X``.
    reg_lambda : float or "auto", default="auto"
        Ridge penalty on ``D`` and ``b``; ``"auto"`` is ``16 n_classes /
        n_samples`` (``n_samples`` is Kish's effective sample size, the
        number of rows for equal weights).
    reg_off_diagonal : float or "auto", default="auto"
        Extra ridge penalty on the off-diagonal entries of ``D``; ``"auto"``
        is ``(n_classes - 2) * reg_lambda_``.
    device : {"auto", "cpu", "cuda"} or "cuda:N", default="auto"
        Where the fit runs.
    tol : float, default=1e-5
        Stop when the largest absolute gradient entry is below ``tol``.
    {lbfgs}

    Attributes
    ----------
    coef_ : ndarray of shape (n_classes, n_classes)
        The matrix ``W``.
    temperature_init_ : float
        Temperature of the temperature scaling the map starts from and is
        shrunk toward.
    reg_lambda_ : float
        The ridge penalty used on ``D`` and ``b``.
    reg_off_diagonal_ : float
        The extra ridge penalty used on the off-diagonal entries of ``D``.
    intercept_ : ndarray of shape (n_classes,)
        The offsets ``b``.
    n_iter_ : int
        Number of L-BFGS iterations run.
    classes_ : ndarray of shape (n_classes,)
        Label of each column.
    n_features_in_ : int
        Number of columns of ``X``.

    Notes
    -----
    The factor 16 of the default ridge was chosen on the eight real tasks of
    ``benchmarks/_datasets.py`` (6 to 66 classes, 300 to 4,000 calibration
    rows, 3 draws each): with it the test NLL was never more than 0.1% above
    temperature scaling's, and below it by up to 6% with 4,000 rows; with
    ``n_classes / n_samples`` on every entry it was up to 32% above at 500
    rows (26 classes), and with structured matrix scaling's own ridge up to
    7% above at 300 rows.

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
    >>> ms = MatrixScaling(reg_off_diagonal=1e-3, device="cpu").fit(swapped, y)
    >>> ms.coef_.shape
    (3, 3)
    >>> bool((ms.predict(swapped) == y).mean() > (swapped.argmax(1) == y).mean())
    True
    """

    _kind = "full"
    _parameter_constraints: dict = {
        **_AffineScaling._parameter_constraints,
        "reg_off_diagonal": [
            StrOptions({"auto"}),
            Interval(Real, 0, None, closed="left"),
        ],
    }
    _AUTO_RIDGE = 16.0

    def __init__(
        self,
        *,
        input="logits",
        classes=None,
        reg_lambda="auto",
        reg_off_diagonal="auto",
        device="auto",
        tol=1e-5,
        max_iter=1000,
        verbose=0,
    ):
        self.input = input
        self.classes = classes
        self.reg_lambda = reg_lambda
        self.reg_off_diagonal = reg_off_diagonal
        self.device = device
        self.tol = tol
        self.max_iter = max_iter
        self.verbose = verbose

    def n_free_parameters(self, n_classes, n_features=None):
        """The unpenalised entries (all ``C^2 + C`` without the ridges), at
        least ``ceil(C / 5)``."""
        free = is_zero(self.reg_lambda)
        off = free and (
            self.reg_off_diagonal == "auto" or is_zero(self.reg_off_diagonal)
        )
        return affine_count(n_classes, diag=free, off=off, bias=free)

    def _penalties(self) -> dict:
        n_classes = len(self.classes_)
        self.reg_off_diagonal_ = (
            max(n_classes - 2, 0) * self.reg_lambda_
            if self.reg_off_diagonal == "auto"
            else float(self.reg_off_diagonal)
        )
        return {
            "l2_diag": self.reg_lambda_,
            "l2_off": self.reg_lambda_ + self.reg_off_diagonal_,
            "l2_bias": self.reg_lambda_,
        }


@fill_doc(lbfgs=LBFGS_DOC)
class BiasCorrectedTemperatureScaling(BaseCalibrator):
    """Bias-corrected temperature scaling: ``softmax(z / T + b)``.

    One temperature ``T > 0`` shared by every class and one bias ``b_k``
    per class (BCTS, Alexandari et al., 2020), fitted by minimising the
    (weighted) mean negative log-likelihood on the calibration set. Vector
    scaling with every class's scale tied to ``1 / T``: the biases correct
    a classifier whose probabilities are systematically off for some
    classes, which is what maximum-likelihood label-shift adaptation (EM
    on the calibrated probabilities, :mod:`skcal.shift`) needs, and the
    single temperature keeps the fit stable on small calibration sets.

    The softmax is blind to a common shift of the biases, so they are
    reported in the identifiable, order-free parametrisation ``sum_k b_k =
    0`` (``intercept_`` has mean 0); the paper's package (``abstention``)
    leaves them unidentified. The fit is full-batch L-BFGS in float64 on
    ``device``, unpenalised as in the paper, started from temperature
    scaling (``T0 = temperature_init_``, ``b = 0``) and written relative to
    it, so that it does not depend on the logits' units (logits multiplied
    by ``a`` give ``a T`` and the same biases) and its training NLL is
    never above temperature scaling's. The biases can change the predicted
    class.

    A class without calibration weight keeps its column with the bias of
    the mean class, 0 (the biases of the others sum to 0 without it): the
    likelihood would otherwise push its probability to 0 (it is never the
    label). When the NLL has no minimum with a positive temperature (the
    scores carry no information about the labels, or are anti-correlated
    with them) a ``ConvergenceWarning`` says so and the fit is the limit
    ``T -> 0`` on the positive side: the temperature of temperature scaling
    at its bound and the biases that reproduce the weighted class
    frequencies.

    Parameters
    ----------
    input : {"logits", "proba"}, default="logits"
        What ``X`` holds; probabilities become ``log(max(p, proba_floor_))``
        (half the smallest positive calibration probability, at least
        2.2e-308).
    classes : array-like of shape (n_classes,), default=None
        The label of each column of ``X``.
    device : {"auto", "cpu", "cuda"} or "cuda:N", default="auto"
        Where the fit runs.
    tol : float, default=1e-5
        Stop when the largest absolute gradient entry is below ``tol``.
    {lbfgs}

    Attributes
    ----------
    temperature_ : float
        Fitted temperature ``T``.
    intercept_ : ndarray of shape (n_classes,)
        Per-class biases ``b``, summing to 0; calibrated logits are
        ``X / T + b``.
    temperature_init_ : float
        Temperature of the temperature scaling the fit starts from.
    n_iter_ : int
        Number of L-BFGS iterations run.
    classes_ : ndarray of shape (n_classes,)
        Label of each column.
    n_features_in_ : int
        Number of columns of ``X``.

    See Also
    --------
    TemperatureScaling : the same without biases.
    VectorScaling : one scale and one bias per class.

    References
    ----------
    A. Alexandari, A. Kundaje, A. Shrikumar. "Maximum Likelihood with
    Bias-Corrected Calibration is Hard-To-Beat at Label Shift Adaptation".
    ICML 2020.

    Examples
    --------
    >>> import numpy as np
    >>> from skcal import BiasCorrectedTemperatureScaling
    >>> rng = np.random.default_rng(0)
    >>> logits = rng.normal(size=(1000, 3))
    >>> y = np.array([rng.choice(3, p=np.exp(z) / np.exp(z).sum()) for z in logits])
    >>> bcts = BiasCorrectedTemperatureScaling(device="cpu")
    >>> _ = bcts.fit(2 * logits + [1.0, 0.0, 0.0], y)  # over-confident, biased
    >>> 1.7 < bcts.temperature_ < 2.3
    True
    >>> np.round(bcts.intercept_ - bcts.intercept_[1], 1)  # about [-0.5, 0, 0]
    array([-0.5,  0. , -0. ])
    """

    _needs_torch = True  # its fit runs torch kernels
    _shift_invariant = True
    _keeps_argmax = None  # the biases can change the predicted class
    _parameter_constraints: dict = {
        **BaseCalibrator._parameter_constraints,
        **LBFGS_CONSTRAINTS,
    }

    def __init__(
        self,
        *,
        input="logits",
        classes=None,
        device="auto",
        tol=1e-5,
        max_iter=1000,
        verbose=0,
    ):
        self.input = input
        self.classes = classes
        self.device = device
        self.tol = tol
        self.max_iter = max_iter
        self.verbose = verbose

    def n_free_parameters(self, n_classes, n_features=None):
        """``C``: one temperature and ``C - 1`` identifiable biases."""
        return n_classes

    def _fit(self, logits, y_index, sample_weight):
        start = fit_inverse_temperature(logits, y_index, sample_weight, self.device)
        self.temperature_init_ = float(1.0 / start.x)
        name = type(self).__name__
        fit = fit_affine_softmax(
            logits,
            y_index,
            sample_weight,
            kind="scalar",
            scale=start.x,
            centre_bias=True,
            device=self.device,
            tol=self.tol,
            max_iter=self.max_iter,
            verbose=self.verbose,
            desc=name,
        )
        self.n_iter_ = fit.result.n_iter
        beta = float(fit.coef[0])
        present = np.bincount(y_index, sample_weight, len(fit.intercept)) > 0
        bias = np.where(present, fit.intercept, 0.0)
        bias -= bias[present].mean() * present
        if not beta > 0.0:
            warn(
                f"{name}: the log-likelihood has no minimum with a positive "
                "temperature (the scores carry no information about the labels, "
                "or are anti-correlated with them); the temperature was set to "
                f"temperature scaling's bound {self.temperature_init_:.4g} and the "
                "biases to the log of the class frequencies.",
                ConvergenceWarning,
            )
            self.temperature_ = self.temperature_init_
            self.intercept_ = _log_frequencies(y_index, sample_weight, present)
        elif _separates(logits * beta + bias, y_index, sample_weight):
            if start.at_bound != "upper":  # else temperature scaling said it
                warn(
                    f"{name}: with the fitted biases every calibration row's top "
                    "class is its label, so the likelihood keeps growing as the "
                    "temperature goes to 0 and has no maximum; temperature "
                    f"scaling's temperature {self.temperature_init_:.4g} was kept, "
                    "without biases. A calibration set with some errors of the "
                    "classifier lets the biases be estimated.",
                    ConvergenceWarning,
                )
            self.temperature_ = self.temperature_init_
            self.intercept_ = np.zeros(len(bias))
        else:
            warn_unconverged(name, fit.result, self.max_iter)
            self.temperature_ = 1.0 / beta
            self.intercept_ = bias

    def to_torch(self):
        """The fitted map as a torch module: scores to calibrated probabilities.

        The input handling, ``x / temperature_ + intercept_``, a softmax. See
        :func:`skcal.export.to_torch`.

        Returns
        -------
        torch.nn.Module

        Examples
        --------
        >>> from skcal import BiasCorrectedTemperatureScaling
        >>> from skcal.export import check_export
        >>> from skcal.utils._testing import make_miscalibrated_logits
        >>> X, y = make_miscalibrated_logits(n_samples=200, random_state=0)
        >>> cal = BiasCorrectedTemperatureScaling().fit(X, y)
        >>> bool(check_export(cal, X, cal.to_torch()) < 1e-12)
        True
        """
        from .._torch._export import Chain, Softmax, Temperature

        block = Temperature(self.temperature_, self.intercept_)
        return Chain(export_input(self), block, Softmax())

    def _calibrated_logits(self, logits):
        return (
            np.asarray(logits, dtype=np.float64) / self.temperature_ + self.intercept_
        )


def _separates(calibrated_logits, y_index, sample_weight) -> bool:
    """Whether every row with positive weight has its label as top class."""
    top = np.argmax(calibrated_logits, axis=1)
    return bool(np.all((top == y_index) | (sample_weight <= 0)))


def _log_frequencies(y_index, sample_weight, present):
    """The log weighted class frequencies, centred over the ``present``
    classes; 0 (their mean) for the absent ones."""
    counts = np.bincount(y_index, sample_weight, len(present))
    logs = np.zeros(len(present))
    logs[present] = np.log(counts[present])
    logs[present] -= logs[present].mean()
    return logs
