"""Dirichlet calibration with ODIR regularisation (Kull et al., 2019)."""

from __future__ import annotations

import warnings
from itertools import product
from numbers import Integral, Real

import numpy as np
from sklearn.model_selection import StratifiedKFold
from sklearn.utils.parallel import Parallel, delayed

from .._torch import check_device
from .._torch._progress import Progress
from .._torch.kernels import fit_affine_softmax, softmax_inplace
from ..base import BaseCalibrator, export_input
from ..exceptions import GridEdgeWarning
from ..utils._constraints import LBFGS_CONSTRAINTS
from ..utils._docstrings import LBFGS_DOC, fill_doc
from ..utils._parameters import dirichlet_count
from ..utils._sklearn import Interval, StrOptions
from ..utils._validation import count_events, effective_sample_size
from ..utils._warnings import warn, warn_unconverged
from ._affine_map import AffineMap, affine_module
from ._scaling import (
    fit_inverse_temperature,
)

__all__ = ["DirichletCalibrator", "DirichletCalibratorCV"]

_KIND = {"full": "full", "diagonal": "diagonal", "fixed_diagonal": "scalar"}
#: ``beta`` in the published penalties ``lam beta^2`` is capped here (logits
#: below ~1e-100 in scale): ``beta^2`` would overflow from ~1e154.
_MAX_BETA = 1e100
#: Largest candidates x folds x n_samples x n_classes^2 x max_iter / 1000
#: cross-validated on the CPU, about ten minutes (one default fit at 5,000 x
#: 1,000 took 45 s; 25 x 5 of them take hours).
_MAX_CPU_CV_WORK = 5e10
#: Gradient tolerance of the fold fits of DirichletCalibratorCV: ranking the
#: candidates needs far less precision than the final fit.
_CV_TOL = 3e-5
#: The fold fits (from 20 classes) run in float32 alone.
_FOLD_FLOAT32 = True
#: A grid edge beats its neighbour when its mean held-out NLL is lower by more
#: than this, relative: less is immaterial, and within the rounding of fold
#: fits stopped at ``_CV_TOL`` (a parameter without effect differed by up to
#: 7e-6 relative between grid points).
_EDGE_RTOL = 1e-4

#: The candidate of DirichletCalibrator's default regularisation (a ridge
#: toward temperature scaling), scored first when ``include_auto``.
_AUTO = {"reg_lambda": "auto", "reg_mu": None}

#: The path over ``reg_lambda`` stops after a row whose best mean held-out
#: NLL is this much (relative) above the best of the rows before it.
_PATH_RTOL = 1e-3


#: Below this spread of the logits within every row, ``log p = z -
#: logsumexp(z)`` keeps fewer than ~4 of their digits (float64 holds ~16 of
#: ``log C``): Dirichlet's features are then mostly rounding.
_MIN_LOGIT_SPREAD = 1e-12


def _check_log_probability_resolution(logits: np.ndarray, name: str) -> None:
    """Refuse logits whose differences ``log p`` would round away.

    A row of equal logits is fine (its ``log p`` is exact); rows that differ,
    but all by less than :data:`_MIN_LOGIT_SPREAD`, would be fitted on the
    rounding of their log-probabilities (a temperature of ~1e16 blows it up
    into features of order 1).
    """
    spread = (logits.max(axis=1) - logits.min(axis=1)).max(initial=0.0)
    if 0 < spread < _MIN_LOGIT_SPREAD:
        raise ValueError(
            f"{name} works on log-probabilities, and the logits differ by at "
            f"most {spread:.3g} within a row: at this scale log p = z - "
            "logsumexp(z) rounds their differences away (float64 keeps about "
            "16 digits of log C). Multiply the logits by a constant (e.g. "
            f"{1.0 / spread:.1g}; the fitted temperature absorbs it), or use "
            "MatrixScaling, StructuredMatrixScaling or TemperatureScaling."
        )


def _end(edge) -> tuple:
    """The parameter and end (largest: True) of an edge of
    :meth:`DirichletCalibratorCV._grid_edges`."""
    return edge[0], edge[2] == 0


def log_probabilities(logits: np.ndarray) -> np.ndarray:
    """``log_softmax`` of the rows, in float64 (a new array)."""
    return softmax_inplace(np.array(logits, dtype=np.float64, order="C"), log=True)


def _prepare(logits, y_index, sample_weight, device, name) -> tuple:
    """What every fit on these rows starts from, whatever its penalties:
    ``(log p, events, beta)``, with ``beta`` the inverse temperature of
    temperature scaling on ``log p`` (the solver's start and scale).

    Fitted on the features themselves: their rounding (~1e-16 of log C)
    hides logit differences below it, and a temperature fitted on the
    logits would blow that rounding up into features of order 1. ``name``:
    the estimator that refuses logits too close to tell apart.
    """
    _check_log_probability_resolution(logits, name)
    log_p = log_probabilities(logits)
    classes = np.arange(logits.shape[1])
    events = max(1.0, count_events(log_p, y_index, classes, sample_weight))
    beta = fit_inverse_temperature(log_p, y_index, sample_weight, device).x
    return log_p, events, beta


@fill_doc(lbfgs=LBFGS_DOC)
class DirichletCalibrator(AffineMap, BaseCalibrator):
    """Dirichlet calibration: ``softmax(W log p + b)``.

    A multinomial logistic regression on the log-probabilities of the
    classifier (Kull et al., 2019). ``log p`` is ``log_softmax(X)`` for
    logits, and ``log(max(p, proba_floor_))`` renormalised for probabilities
    (``proba_floor_``: half the smallest positive calibration probability,
    at least 2.2e-308), so the
    features never reach the ``log(float32 tiny) = -87`` of clipping at the
    smallest float, which can dominate a fit. The map is fitted full-batch
    by L-BFGS in float64 on ``device``, starting from temperature scaling
    (``W = I / T0``, ``b = 0``, ``T0`` the NLL-optimal temperature); the
    solver works on ``log p / T0``, so that it sees the same, well-scaled
    problem whatever the logits' units. The objective is the published one.

    By default (``reg_lambda="auto"``) the map is shrunk toward temperature
    scaling: with ``W = (I + D) / T0``, the penalty added to the mean NLL is
    ``4 C / n * (a (||diag(D)||^2 + ||b||^2) + o ||offdiag(D)||^2)``, where
    ``n`` is Kish's effective sample size, ``a = clip(g, 1, 4)``, ``o =
    clip(g, 1, 4 (C - 1))`` and ``g = 8 (C^2 / E)^2`` grows with the
    parameters per event (``E``: the calibration rows the scores' argmax
    gets wrong, or right if those are fewer). With few events per parameter
    it is the default ridge of structured matrix scaling (Berta et al.,
    2026, ``rho = tau = 1``) 16 times stronger, which keeps the fit near
    temperature scaling instead of over-fitting (unregularised, the
    published method gave a test NLL of 2.0 where temperature scaling gave
    0.096 on a real 26-class model with 4,000 calibration rows); with many
    it falls to 4 times that ridge on every entry, and the fit tends to the
    published method. Chosen on the eight real tasks of
    ``benchmarks/_datasets.py`` (6 to 66 classes): at 500 rows (2 draws) the
    test NLL is at most 3.0% above temperature scaling's (as the earlier
    rule, ``16 C / n`` and ``16 C (C - 1) / n`` throughout); at the largest
    calibration sets (2,500 to 10,000 rows) it is 1.5-9% below, and within
    1.4% of :class:`DirichletCalibratorCV`'s cross-validated choice except
    on optdigits (7.9% above at 2,500 rows), where the earlier rule was 0.2%
    to 8.8% above on every task (4.3% on wordnet_supersenses). Where the
    data allow, :class:`DirichletCalibratorCV` chooses better.

    With numbers, regularisation follows the ``dirichletcal`` package: with
    ``reg_mu=None`` the penalty is ``reg_lambda * ||[W | b]||^2`` (towards zero); with
    ``reg_mu`` set it is ODIR, ``reg_lambda * sum_{i != j} W_ij^2 + reg_mu *
    ||b||^2``. Penalties are added to the mean NLL. With ``reg_norm`` they
    are divided by the number of penalised entries (``C (C + 1)`` for L2;
    ``C (C - 1)`` and ``C`` for ODIR), as in the paper. By default the
    penalties apply to ``W`` and ``b`` themselves, so relabelling the classes
    permutes the fitted map and nothing else. ``ref_row=True`` reproduces
    the ``dirichletcal`` package, which applies them to ``[W | b]`` minus its
    last row (an identifiable parametrisation, but one that treats the last
    class as a reference). The strengths are meant to be chosen by
    cross-validation: see :class:`DirichletCalibratorCV`.

    Parameters
    ----------
    input : {"logits", "proba"}, default="logits"
        What ``X`` holds.
    classes : array-like of shape (n_classes,), default=None
        The label of each column of ``X``.
    matrix : {"full", "diagonal", "fixed_diagonal"}, default="full"
        ``W`` is a full matrix, a diagonal matrix (one scale per class), or
        a multiple of the identity with no intercept (temperature scaling on
        log-probabilities).
    reg_lambda : float or "auto", default="auto"
        Strength of the L2 penalty, or of the off-diagonal penalty with ODIR.
        ``"auto"`` (with ``reg_mu=None``) shrinks the map toward temperature
        scaling, with the penalties of structured matrix scaling: see Notes.
        ``0`` (with ``reg_mu=None``) is the unregularised published method.
    reg_mu : float or None, default=None
        Strength of the intercept penalty; setting it selects ODIR (and
        needs a numeric ``reg_lambda``).
    reg_norm : bool, default=False
        Divide the strengths by the number of penalised entries.
    ref_row : bool, default=False
        Penalise ``[W | b]`` relative to its last row, as ``dirichletcal``
        does.
    device : {"auto", "cpu", "cuda"} or "cuda:N", default="auto"
        Where the fit runs.
    tol : float, default=1e-5
        Stop when the largest absolute gradient entry is below ``tol``.
    {lbfgs}

    Attributes
    ----------
    coef_ : ndarray of shape (n_classes, n_classes)
        The matrix ``W`` applied to ``log p``.
    intercept_ : ndarray of shape (n_classes,)
        The intercept ``b``.
    n_iter_ : int
        Number of L-BFGS iterations run.
    classes_ : ndarray of shape (n_classes,)
        Label of each column.
    n_features_in_ : int
        Number of columns of ``X``.

    See Also
    --------
    DirichletCalibratorCV : picks ``reg_lambda`` and ``reg_mu`` by
        cross-validated log loss.
    MatrixScaling : the same map applied to logits.

    References
    ----------
    M. Kull, M. Perello-Nieto, M. Kängsepp, T. Silva Filho, H. Song, P.
    Flach. "Beyond temperature scaling: Obtaining well-calibrated multi-class
    probabilities with Dirichlet calibration". NeurIPS 2019.

    Examples
    --------
    >>> import numpy as np
    >>> from skcal import DirichletCalibrator
    >>> from skcal.utils._testing import make_miscalibrated_logits
    >>> logits, y = make_miscalibrated_logits(2000, 4, temperature=2.5, random_state=0)
    >>> dc = DirichletCalibrator(reg_lambda=1e-3, reg_mu=1e-3, device="cpu")
    >>> dc.fit(logits, y).coef_.shape
    (4, 4)
    >>> bool(dc.score(logits, y) > -np.log(4))
    True
    """

    _needs_torch = True  # its fit runs torch kernels
    _shift_invariant = True
    _log_softmax_first = True

    _parameter_constraints: dict = {
        **BaseCalibrator._parameter_constraints,
        "matrix": [StrOptions(set(_KIND))],
        "reg_lambda": [StrOptions({"auto"}), Interval(Real, 0, None, closed="left")],
        "reg_mu": [Interval(Real, 0, None, closed="left"), None],
        "reg_norm": ["boolean"],
        "ref_row": ["boolean"],
        **LBFGS_CONSTRAINTS,
    }

    def __init__(
        self,
        *,
        input="logits",
        classes=None,
        matrix="full",
        reg_lambda="auto",
        reg_mu=None,
        reg_norm=False,
        ref_row=False,
        device="auto",
        tol=1e-5,
        max_iter=1000,
        verbose=0,
    ):
        self.input = input
        self.classes = classes
        self.matrix = matrix
        self.reg_lambda = reg_lambda
        self.reg_mu = reg_mu
        self.reg_norm = reg_norm
        self.ref_row = ref_row
        self.device = device
        self.tol = tol
        self.max_iter = max_iter
        self.verbose = verbose

    def n_free_parameters(self, n_classes, n_features=None):
        """The unpenalised entries of the map (ODIR leaves the diagonal
        free), at least ``ceil(C / 5)``; ``ceil(C / 5)`` with the "auto"
        ridge toward temperature scaling."""
        return dirichlet_count(self.matrix, self.reg_lambda, self.reg_mu, n_classes)

    def _penalties(
        self, n_classes: int, beta: float, n_samples: float, events: float = 1.0
    ) -> dict:
        """The penalties on ``W`` and ``b``, written for ``W / beta``.

        The solver works on the temperature-scaled log-probabilities
        ``beta * log p`` (well scaled whatever the logits' units) and
        penalises the map relative to them, ``W / beta``: the published
        penalties on ``W`` are that times ``beta^2``.
        """
        if self.reg_lambda == "auto":
            if self.reg_mu is not None:
                raise ValueError(
                    "reg_mu selects ODIR with a numeric reg_lambda; with "
                    "reg_lambda='auto' leave reg_mu=None, or give both numbers."
                )
            # structured matrix scaling's ridge, 4 to 16 times stronger (see
            # the class docstring), around temperature scaling
            scale = 4.0 * n_classes / n_samples
            need = 8.0 * (n_classes**2 / events) ** 2  # from parameters per event
            return {
                "l2_diag": scale * min(4.0, max(1.0, need)),
                "l2_off": scale * min(4.0 * (n_classes - 1), max(1.0, need)),
                "l2_bias": scale * min(4.0, max(1.0, need)),
            }
        lam, mu = float(self.reg_lambda), self.reg_mu
        # beta^2 overflows for logits below ~1e-154 (beta ~ 1 / scale): the
        # penalty is then capped, far above what pins W / beta at 0
        beta2 = min(beta, _MAX_BETA) ** 2
        if mu is None:
            if self.reg_norm:
                lam /= n_classes * (n_classes + 1)
            lam_w = lam * beta2
            return {
                "l2_diag": lam_w,
                "l2_off": lam_w,
                "l2_bias": lam,
                "diag_target": 0.0,
            }
        mu = float(mu)
        if self.reg_norm:
            lam /= n_classes * (n_classes - 1)
            mu /= n_classes
        return {"l2_off": lam * beta2, "l2_bias": mu}

    def _fit(
        self, logits, y_index, sample_weight, init=(), precondition=False,
        prepared=None, float32_only=False,
    ):  # fmt: skip
        """Fit on ``logits``; return the solver's raw parameters (to warm-start
        another fit). ``prepared``: :func:`_prepare` of these very rows, to
        share between fits of the same rows (a fold's grid points).
        ``precondition``, ``float32_only``: those of ``fit_affine_softmax``
        (Dirichlet-CV's fold fits)."""
        if prepared is None:
            name = type(self).__name__
            prepared = _prepare(logits, y_index, sample_weight, self.device, name)
        log_p, events, beta = prepared
        n_classes = logits.shape[1]
        n_params = {"full": n_classes * (n_classes + 1), "diagonal": 2 * n_classes}
        n_params = n_params.get(self.matrix, 1)
        n_samples = effective_sample_size(sample_weight)
        if self.reg_lambda == 0 and not self.reg_mu and 10 * n_params > n_samples:
            warn(
                f"DirichletCalibrator without regularisation fits {n_params} "
                f"parameters on {n_samples:.0f} samples (fewer than 10 "
                "per parameter) and is likely to over-fit: set reg_lambda and "
                "reg_mu, or use DirichletCalibratorCV to choose them.",
                UserWarning,
            )
        fit = fit_affine_softmax(
            log_p,
            y_index,
            sample_weight,
            kind=_KIND[self.matrix],
            fit_intercept=self.matrix != "fixed_diagonal",
            scale=beta,
            ref_row=self.ref_row,
            init=init,
            precondition=precondition,
            float32_only=float32_only,
            device=self.device,
            tol=self.tol,
            max_iter=self.max_iter,
            verbose=self.verbose,
            desc=type(self).__name__,
            **self._penalties(n_classes, beta, n_samples, events),
        )
        warn_unconverged(type(self).__name__, fit.result, self.max_iter)
        coef = fit.coef
        self.coef_ = coef if coef.ndim == 2 else np.diag(coef)
        self.intercept_ = fit.intercept
        self.n_iter_ = fit.result.n_iter
        return fit.raw


class DirichletCalibratorCV(BaseCalibrator):
    """Dirichlet calibration with its regularisation chosen by cross-validation.

    Every combination of ``reg_lambdas`` x ``reg_mus`` (ODIR; with
    ``reg_mus=None``, plain L2 over ``reg_lambdas``) is scored by the
    weighted mean log loss on the held-out folds of a stratified K-fold split
    of the calibration set, as Kull et al. (2019) recommend; the best
    combination is refitted on the whole set. Ties go to the stronger
    regularisation. Within a fold the candidates are fitted from the
    strongest penalty to the weakest, each warm-started at the previous
    solution, by L-BFGS on coordinates that whiten the log-probability
    features (an approximate Hessian shared by the rows of the map): the
    same convex problems, solved 4-5 times faster at weak penalties. The
    path over ``reg_lambdas`` stops (``early_stopping``) after a value whose
    best held-out log loss is more than 0.1% above the best of the stronger
    values: the held-out loss rises as the penalty weakens past its best
    value, and the weak penalties are the slow fits. Their
    ``cv_results_`` entries are then NaN. On eight real tasks of 6-66
    classes it selected the same strengths as the full grid (see the
    performance page).

    When the best point of the grid sits at the smallest or largest value
    of a parameter and scored better (by more than 0.01%) than its
    neighbour in the grid, the best value may lie beyond the grid: with
    ``grid_extensions`` the grid then grows one step past that end
    (``value^2 / neighbour``, a factor of 10 on the default grid), scored
    on the same folds with the other parameter at its best value, until the
    new end no longer wins, at most ``grid_extensions`` times per end. Only
    where that bound stops it does a
    :class:`~skcal.exceptions.GridEdgeWarning` name the parameter, the
    value, the grid's range and a value to add.

    ODIR penalises only the off-diagonal entries of ``W`` and the
    intercept: as ``reg_lambda`` and ``reg_mu`` grow, the map tends to a
    diagonal ``W`` (one free scale of ``log p`` per class), not to
    temperature scaling, and those ``C`` scales can over-fit where
    temperature scaling does not (UCI letter, 26 classes, 4,000 rows: test
    NLL 0.166 at ``reg_lambda=1e4`` against 0.158). With ``include_auto``
    the default regularisation of :class:`DirichletCalibrator` (a ridge
    toward temperature scaling) is a candidate too, scored on the same
    folds and listed first in ``cv_results_`` (so a tie goes to it), so the
    cross-validated choice is not much worse than that default.

    Parameters
    ----------
    input : {"logits", "proba"}, default="logits"
        What ``X`` holds.
    classes : array-like of shape (n_classes,), default=None
        The label of each column of ``X``.
    matrix : {"full", "diagonal", "fixed_diagonal"}, default="full"
        See :class:`DirichletCalibrator`.
    reg_lambdas : array-like of float, default=(1e-1, 1e-2, 1e-3, 1e-4, 1e-5)
        Candidate ``reg_lambda`` values.
    reg_mus : array-like of float or None, default=(1e-1, 1e-2, 1e-3, 1e-4, 1e-5)
        Candidate ``reg_mu`` values (ODIR); None for plain L2.
    reg_norm : bool, default=False
        See :class:`DirichletCalibrator`.
    include_auto : bool, default=True
        Also score ``reg_lambda="auto"``, ``reg_mu=None`` (the default of
        :class:`DirichletCalibrator`, a ridge toward temperature scaling).
    grid_extensions : int, default=0
        How many times the grid may grow past each end of ``reg_lambdas``
        and of ``reg_mus`` while its best point sits there (0: never; the
        edge is then only warned about). Off by default: the fold fits stop
        at a loose tolerance, which at strong penalties (``reg_lambda`` of
        1e3) leaves held-out log losses up to 7% below those of the
        converged fits, so a grown grid can chase that error (pendigits:
        test NLL 0.0357 with 4 extensions against 0.0343 without).
    cv : int, default=5
        Number of stratified folds, never reduced: a class with fewer than
        ``cv`` samples is missing from some folds (with a warning that counts
        such classes), and when every class has fewer than ``cv`` samples
        ``fit`` raises a ValueError naming ``cv`` and the size of the largest
        class.
    early_stopping : bool, default=True
        Stop the path over ``reg_lambdas`` (from the largest) after a value
        scored more than 0.1% worse than the best of the larger ones; False
        scores the whole grid.
    n_jobs : int, default=None
        Folds fitted in parallel through :class:`joblib.Parallel` (each
        fold's path over the grid stays sequential, warm-started); any
        joblib backend, a Dask cluster's included, runs them. The result
        does not depend on it.
    random_state : int, RandomState instance or None, default=None
        Shuffling of the folds.
    device : {"auto", "cpu", "cuda"} or "cuda:N", default="auto"
        Where the fits run.
    tol : float, default=1e-5
        L-BFGS gradient tolerance of the final fit (the fold fits use
        ``max(tol, 3e-5)``, and from 20 classes run in float32: they only
        rank the candidates; the final fit is float64).
    max_iter : int, default=1000
        Maximum number of L-BFGS iterations per fit. On the CPU a search
        whose candidates x folds x n_samples x n_classes^2 x max_iter / 1000
        exceeds 5e10 (hours at 1,000 classes) is refused up front.
    verbose : int, default=0
        0: silent. 1: a progress bar on stderr over the candidates x folds
        fits (elapsed and remaining time). 2: also one line per fit with its
        held-out log loss.

    Attributes
    ----------
    reg_lambda_ : float or "auto"
        Selected ``reg_lambda``.
    reg_mu_ : float or None
        Selected ``reg_mu``.
    reg_lambdas_ : ndarray
        The ``reg_lambda`` values of the grid, from the largest down, with
        those that ``grid_extensions`` added.
    reg_mus_ : ndarray
        The same for ``reg_mu`` (``[None]`` for plain L2).
    cv_results_ : dict
        ``params`` (list of dicts) and ``mean_test_nll`` /
        ``std_test_nll`` (arrays), one entry per candidate: the ``"auto"``
        candidate first (with ``include_auto``), then ``reg_lambdas_`` x
        ``reg_mus_`` (``reg_lambda`` outer); NaN for the candidates that
        ``early_stopping`` left out and, in the rows and columns that the
        grid grew, for all but the point on the line of the best one.
    calibrator_ : DirichletCalibrator
        The calibrator refitted on all the data with the selected strengths.
    coef_, intercept_ : ndarray
        Those of ``calibrator_``.
    n_iter_ : int
        L-BFGS iterations of the final fit.
    classes_ : ndarray of shape (n_classes,)
        Label of each column.
    n_features_in_ : int
        Number of columns of ``X``.

    Examples
    --------
    >>> from skcal import DirichletCalibratorCV
    >>> from skcal.utils._testing import make_miscalibrated_logits
    >>> logits, y = make_miscalibrated_logits(600, 3, temperature=2.0, random_state=0)
    >>> cal = DirichletCalibratorCV(reg_lambdas=[1e-3, 1e-1], reg_mus=[1e-3, 1e-1],
    ...                             cv=3, random_state=0, device="cpu").fit(logits, y)
    >>> len(cal.cv_results_["params"])  # the plain default's ridge, then the grid
    5
    >>> cal.cv_results_["params"][0]
    {'reg_lambda': 'auto', 'reg_mu': None}
    """

    _needs_torch = True  # its fit runs torch kernels
    _shift_invariant = True

    _parameter_constraints: dict = {
        **BaseCalibrator._parameter_constraints,
        "matrix": [StrOptions(set(_KIND))],
        "reg_lambdas": ["array-like"],
        "reg_mus": ["array-like", None],
        "reg_norm": ["boolean"],
        "include_auto": ["boolean"],
        "grid_extensions": [Interval(Integral, 0, None, closed="left")],
        "cv": [Interval(Integral, 2, None, closed="left")],
        "early_stopping": ["boolean"],
        "n_jobs": [Integral, None],
        "random_state": ["random_state"],
        "verbose": ["verbose"],
        **LBFGS_CONSTRAINTS,
    }

    def __init__(
        self,
        *,
        input="logits",
        classes=None,
        matrix="full",
        reg_lambdas=(1e-1, 1e-2, 1e-3, 1e-4, 1e-5),
        reg_mus=(1e-1, 1e-2, 1e-3, 1e-4, 1e-5),
        reg_norm=False,
        include_auto=True,
        grid_extensions=0,
        cv=5,
        early_stopping=True,
        n_jobs=None,
        random_state=None,
        device="auto",
        tol=1e-5,
        max_iter=1000,
        verbose=0,
    ):
        self.input = input
        self.classes = classes
        self.matrix = matrix
        self.reg_lambdas = reg_lambdas
        self.reg_mus = reg_mus
        self.reg_norm = reg_norm
        self.include_auto = include_auto
        self.grid_extensions = grid_extensions
        self.cv = cv
        self.early_stopping = early_stopping
        self.n_jobs = n_jobs
        self.random_state = random_state
        self.device = device
        self.tol = tol
        self.max_iter = max_iter
        self.verbose = verbose

    def n_free_parameters(self, n_classes, n_features=None):
        """Those of the least penalised point of the grid, which the inner
        search may pick (``C``, the diagonal ODIR leaves free, by default)."""
        mus = self.reg_mus
        return dirichlet_count(
            self.matrix,
            min(float(v) for v in self.reg_lambdas),
            None if mus is None else min(float(v) for v in mus),
            n_classes,
        )

    def _candidate(self, tol, **regs) -> DirichletCalibrator:
        return DirichletCalibrator(
            matrix=self.matrix,
            reg_norm=self.reg_norm,
            device=self.device,
            tol=tol,
            max_iter=self.max_iter,
            **regs,
        )

    def _folds(self, logits, y_index):
        """Stratified folds, with skcal's own message when a class is small."""
        counts = np.bincount(y_index)
        counts = counts[counts > 0]
        name = f"DirichletCalibratorCV(cv={self.cv})"
        if counts.max() < self.cv:
            raise ValueError(
                f"{name} needs at least {self.cv} samples of some class to make "
                f"{self.cv} stratified folds, but the largest class has "
                f"{counts.max()}. Lower cv, or use DirichletCalibrator with "
                "fixed reg_lambda / reg_mu on so few samples."
            )
        if counts.min() < self.cv:
            warn(
                f"{name}: {np.count_nonzero(counts < self.cv)} class(es) have "
                f"fewer than cv={self.cv} samples (the smallest has "
                f"{counts.min()}), so some folds are fitted without them. Lower "
                "cv if the selected regularisation looks unstable.",
                UserWarning,
            )
        splitter = StratifiedKFold(
            self.cv, shuffle=True, random_state=self.random_state
        )
        # stratify on the labels themselves: the folds do not depend on the
        # column order of X
        with warnings.catch_warnings():  # sklearn's warning names neither
            warnings.filterwarnings("ignore", "The least populated class")
            return list(splitter.split(logits, self.classes_[y_index]))

    def _prepared_folds(self, data) -> list:
        """The folds as ``(train, test, prepared)``: :func:`_prepare` of each
        training part, done once for all the fits on it (it is the same for
        every candidate: the log-probabilities and the starting temperature)."""
        logits, y_index, sample_weight = data
        return [
            (train, test, _prepare(
                logits[train], y_index[train], sample_weight[train], self.device,
                "DirichletCalibrator",
            ))
            for train, test in self._folds(logits, y_index)
        ]  # fmt: skip

    def _fit(self, logits, y_index, sample_weight):
        _check_log_probability_resolution(logits, type(self).__name__)
        lambdas = sorted({float(v) for v in self.reg_lambdas}, reverse=True)
        mus = (
            [None]
            if self.reg_mus is None
            else sorted({float(v) for v in self.reg_mus}, reverse=True)
        )
        n_classes = logits.shape[1]
        self._check_cost(logits.shape, len(lambdas) * len(mus) + self.include_auto)
        data = (logits, y_index, sample_weight)
        folds = self._prepared_folds(data)
        table = self._cv_scores(data, folds, lambdas, mus)
        auto = self._point_scores(data, folds, _AUTO) if self.include_auto else None
        bar = np.inf if auto is None else auto.mean()  # the grid must beat it
        lambdas, mus, table = self._extend_grid(data, folds, lambdas, mus, table, bar)
        grid = [{"reg_lambda": lam, "reg_mu": mu} for lam, mu in product(lambdas, mus)]
        scores = table.reshape(-1, self.cv)
        if auto is not None:
            grid, scores = [dict(_AUTO), *grid], np.vstack([auto, scores])
        mean = scores.mean(axis=1)
        best = int(np.nanargmin(mean))  # first minimum: strongest regularisation
        self.cv_results_ = {
            "params": grid,
            "mean_test_nll": mean,
            "std_test_nll": scores.std(axis=1),
        }
        self.reg_lambdas_, self.reg_mus_ = np.array(lambdas), np.array(mus)
        self.reg_lambda_ = grid[best]["reg_lambda"]
        self.reg_mu_ = grid[best]["reg_mu"]
        final = self._candidate(self.tol, **grid[best])
        final._fit(logits, y_index, sample_weight)
        final.classes_, final.n_features_in_ = self.classes_, n_classes
        self.calibrator_ = final
        self.coef_, self.intercept_ = final.coef_, final.intercept_
        self.n_iter_ = final.n_iter_

    def _extend_grid(self, data, folds, lambdas, mus, table, bar=np.inf):
        """Grow the grid past an edge that its best point beats.

        While the best point of ``table`` (``lambdas`` x ``mus`` x folds,
        both sorted from the largest down) is at an edge of a parameter
        (see :meth:`_grid_edges`), the value one grid step beyond it
        (``value^2 / neighbour``) is scored on the same folds, the other
        parameter held at its best value (the rest of the new row or column
        is NaN); at most ``grid_extensions`` times per parameter and side.
        A :class:`GridEdgeWarning` is left only where that bound stops it,
        and only if the grid's best beats ``bar`` (the mean held-out NLL of
        the "auto" candidate, which is otherwise selected). Returns the
        grown ``lambdas``, ``mus`` and ``table``.
        """
        used = {}
        while True:
            mean = table.mean(axis=2)
            at = np.unravel_index(np.nanargmin(mean), mean.shape)
            edges = self._grid_edges(lambdas, mus, mean, at)
            todo = [e for e in edges if used.get(_end(e), 0) < self.grid_extensions]
            if not todo:
                for edge in edges if mean[at] < bar else ():
                    self._warn_grid_edge(edge, (lambdas, mus)[edge[1]], used)
                return lambdas, mus, table
            name, axis, i, value, neighbour, *_ = todo[0]
            used[_end(todo[0])] = used.get(_end(todo[0]), 0) + 1
            new = float(f"{value * value / neighbour:.12g}")  # 1e2, not 1e2 + 1ulp
            point = {"reg_lambda": lambdas[at[0]], "reg_mu": mus[at[1]], name: new}
            line = np.full(
                (len(mus), self.cv) if axis == 0 else (len(lambdas), self.cv), np.nan
            )
            line[at[1 - axis]] = self._point_scores(data, folds, point)
            where = 0 if i == 0 else table.shape[axis]
            table = np.insert(table, where, line, axis=axis)
            if axis == 0:
                lambdas = lambdas[:where] + [new] + lambdas[where:]
            else:
                mus = mus[:where] + [new] + mus[where:]

    def _point_scores(self, data, folds, regs) -> np.ndarray:
        """Held-out NLL of one candidate ``regs`` on each fold."""
        rows = Parallel(n_jobs=self.n_jobs)(
            delayed(self._fold_row)(
                data, fold, regs["reg_lambda"], [regs["reg_mu"]], ()
            )
            for fold in folds
        )
        return np.array([nll[0] for nll, _ in rows])

    def cpu_work(self, n_rows: int, n_classes: int) -> float:
        """The CPU work of a fit, in row x class^2 units of one L-BFGS
        iteration (0 where the fits run on a GPU): the grid's candidates x
        ``cv`` x ``n_rows`` x ``n_classes^2`` x ``max_iter / 1000``. About
        5e9 took 34 s on 2 cores (10,000 x 66, the default grid);
        :class:`~skcal.CalibratorSearchCV` skips its default candidate above
        a budget of this, and ``fit`` refuses above 5e10."""
        if check_device(self.device) != "cpu":
            return 0.0
        mus = 1 if self.reg_mus is None else len(set(self.reg_mus))
        n_candidates = len(set(self.reg_lambdas)) * mus + self.include_auto
        return (
            n_candidates * self.cv * n_rows * n_classes**2
            * min(self.max_iter, 1000) / 1000
        )  # fmt: skip

    def _check_cost(self, shape, n_candidates):
        """A clear error for a search that would take hours on the CPU."""
        n_rows, n_classes = shape
        if self.cpu_work(n_rows, n_classes) > _MAX_CPU_CV_WORK:
            raise ValueError(
                f"DirichletCalibratorCV fits {n_candidates} candidates x {self.cv} "
                f"folds of a {n_classes} x {n_classes} map on {n_rows} "
                f"rows: on the CPU this takes hours (one fit took 45 s at 5,000 x "
                f"1,000). Use DirichletCalibrator, regularised by default, or "
                f"StructuredMatrixScaling; or a smaller grid, fewer folds, or "
                f"device='cuda'."
            )

    def _cv_scores(self, data, folds, lambdas, mus) -> np.ndarray:
        """Held-out NLL of every grid point on every fold, of shape
        ``(len(lambdas), len(mus), cv)``; NaN where the path stopped (see
        the Notes)."""
        scores = np.full((len(lambdas), len(mus), self.cv), np.nan)
        raws = [()] * len(folds)
        progress = Progress(self.verbose, scores.size, "DirichletCalibratorCV", "fit")
        with progress, Parallel(n_jobs=self.n_jobs) as parallel:
            for r, lam in enumerate(lambdas):
                # snake order: each row starts next to where the last ended
                order = list(range(len(mus)))[:: 1 if r % 2 == 0 else -1]
                rows = parallel(
                    delayed(self._fold_row)(
                        data, fold, lam, [mus[m] for m in order], raw
                    )
                    for fold, raw in zip(folds, raws)
                )
                for f, (nll, raw) in enumerate(rows):
                    scores[r, order, f], raws[f] = nll, raw
                    for m, value in zip(order, nll):
                        regs = {"reg_lambda": lam, "reg_mu": mus[m]}
                        progress.step(
                            f"fold {f + 1}/{len(folds)} {regs}: held-out log "
                            f"loss {value:.6g}"
                        )
                if self._hopeless(scores.mean(axis=2), r):
                    progress.end(
                        f"path stopped after reg_lambda={lam:g} (held-out log "
                        "loss worse than the stronger ones)"
                    )
                    break
        return scores

    def _hopeless(self, mean, r) -> bool:
        """Whether the rows after ``r`` (weaker ``reg_lambda``) are left out:
        row ``r``'s best mean held-out NLL is worse than the best of the
        rows before it by more than ``_PATH_RTOL``, relative."""
        if not self.early_stopping or r == 0:
            return False
        before = np.nanmin(mean[:r])
        return np.nanmin(mean[r]) > before + _PATH_RTOL * abs(before)

    def _fold_row(self, data, fold, lam, mus, raw):
        """Held-out NLL along ``mus`` at ``reg_lambda=lam`` on one fold,
        warm-started from ``raw`` and then from each point; and the last
        point's raw parameters. ``fold``: one of :meth:`_prepared_folds`."""
        logits, y_index, sample_weight = data
        train, test, prepared = fold
        fit_part = (logits[train], y_index[train], sample_weight[train])
        held_out, rows = logits[test], (np.arange(len(test)), y_index[test])
        out = np.empty(len(mus))
        for m, mu in enumerate(mus):
            est = self._candidate(max(self.tol, _CV_TOL), reg_lambda=lam, reg_mu=mu)
            raw = est._fit(
                *fit_part, raw, precondition=True, prepared=prepared,
                float32_only=_FOLD_FLOAT32,
            )  # fmt: skip
            log_proba = softmax_inplace(est._calibrated_logits(held_out), log=True)
            out[m] = np.average(-log_proba[rows], weights=sample_weight[test])
        return out, raw

    def _grid_edges(self, lambdas, mus, table, at) -> list:
        """The parameters whose selected value is an end of their grid.

        ``lambdas`` and ``mus`` are sorted from the largest down, ``table``
        the mean held-out NLL of each grid point and ``at`` the index of the
        selected one. A parameter is at an edge when its grid has more than
        one value, the selected value is its first or last, and the selected
        point beats its neighbour along that parameter (the other one fixed)
        by more than ``_EDGE_RTOL``, relative: a near tie, or a neighbour
        not scored, says nothing about the values beyond. A parameter that
        penalises no entry of the map (``reg_lambda`` of ODIR on a diagonal
        map, ``reg_mu`` without intercept) is skipped, and an edge at 0 has
        nothing beyond it. Each edge is ``(name, axis, index, value,
        neighbour value, its NLL, the neighbour's NLL)``.
        """
        odir = mus != [None]
        inert = {  # parameters that penalise no entry of this map
            "reg_lambda": odir and self.matrix != "full",  # off-diagonal only
            "reg_mu": self.matrix == "fixed_diagonal",  # no intercept
        }
        edges = []
        for axis, (name, values) in enumerate(
            (("reg_lambda", lambdas), ("reg_mu", mus))
        ):
            i = int(at[axis])
            if inert[name] or len(values) < 2 or i not in (0, len(values) - 1):
                continue
            if values[i] == 0:
                continue
            other = list(at)
            other[axis] = 1 if i == 0 else i - 1
            here, there = table[tuple(at)], table[tuple(other)]
            if there - here > _EDGE_RTOL * abs(here):  # False for NaN
                edges.append(
                    (name, axis, i, values[i], values[other[axis]], here, there)
                )
        return edges

    def _warn_grid_edge(self, edge, values, used) -> None:
        """:class:`GridEdgeWarning` for an ``edge`` of :meth:`_grid_edges`
        that the bound on extensions left (``values``: its grid)."""
        name, _, i, value, neighbour, here, there = edge
        end, beyond = ("largest", "larger") if i == 0 else ("smallest", "smaller")
        grown = used.get(_end(edge), 0)
        grown = f", grown {grown} times by grid_extensions" if grown else ""
        warn(
            f"DirichletCalibratorCV selected {name}={value:g}, the {end} "
            f"value of {name}s (its grid runs from {min(values):g} to "
            f"{max(values):g}{grown}), and it scored better than its neighbour "
            f"{neighbour:g} (mean held-out log loss {here:.6g} "
            f"against {there:.6g}): the best {name} may be {beyond}. "
            f"Extend {name}s beyond {value:g} (e.g. add "
            f"{value * value / neighbour:.3g}), or raise grid_extensions.",
            GridEdgeWarning,
        )

    def to_torch(self):
        """The fitted map as a torch module: scores to calibrated probabilities.

        The input handling, the log-softmax, the selected affine map ``coef_``,
        ``intercept_``, a softmax. See :func:`skcal.export.to_torch`.

        Returns
        -------
        torch.nn.Module

        Examples
        --------
        >>> from skcal import DirichletCalibratorCV
        >>> from skcal.export import check_export
        >>> from skcal.utils._testing import make_miscalibrated_logits
        >>> X, y = make_miscalibrated_logits(n_samples=200, random_state=0)
        >>> cal = DirichletCalibratorCV(cv=2).fit(X, y)
        >>> bool(check_export(cal, X, cal.to_torch()) < 1e-12)
        True
        """
        return affine_module(
            export_input(self), self.coef_, self.intercept_, log_softmax=True
        )

    def _calibrated_logits(self, logits):
        return self.calibrator_._calibrated_logits(logits)

    def _calibrated_proba(self, logits):
        return self.calibrator_._calibrated_proba(logits)
