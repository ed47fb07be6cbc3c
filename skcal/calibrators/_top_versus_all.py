"""Top-versus-all calibration (Le Coz, Herbin and Adjed, NeurIPS 2024).

The multiclass problem becomes one binary problem: the top-label
confidence of each row against whether the top label is right. A binary
calibrator is fitted on that problem; a scaling calibrator (temperature or
vector scaling) is fitted on the binary cross-entropy of the confidence of
its own scaled softmax. The calibrated confidence replaces the top class's
probability; the other classes share the rest.
"""

from __future__ import annotations

import numpy as np
from scipy.special import expit
from sklearn import config_context
from sklearn.base import clone
from sklearn.utils.validation import check_is_fitted

from .._torch.kernels._softmax import (
    row_max,
    row_min,
    row_sum,
    softmax_inplace,
    softmax_into,
)
from ..base import (
    BaseCalibrator,
    BaseLocalCalibrator,
    set_proba_floor,
    shifted_rows,
)
from ..exceptions import ConvergenceWarning
from ..llm._topk import TopKScores
from ..llm._topk_ops import (
    TopKTemperatureObjective,
    scale_topk,
    top_listed,
    topk_logit_scale,
)
from ..llm._topk_top_label import replace_top_topk, topk_binary_scores
from ..utils._constants import FLOOR_BEFORE_LOG, SUM_FLOOR
from ..utils._proba import (
    _hold_top,
    replace_top_label,
    replace_top_label_inplace,
)
from ..utils._sklearn import HasMethods, StrOptions
from ..utils._validation import (
    PROBA_EPS,
    SUM_TOL,
    _above_floor,
    _copy_block,
    _floor_rows,
    _reciprocals,
    _Scan,
    _scan_and_check,
    log_probabilities_inplace,
    top_and_rest,
    top_entries,
)
from ..utils._warnings import warn
from ._scaling import (
    TemperatureScaling,
    fit_inverse_temperature,
    solve_inverse_temperature,
)
from ._top_label import BLOCK
from ._topk_input import TopKInputMixin

__all__ = ["TopVersusAll"]

#: ``log`` of the smallest positive float64: the floor of ``log(1 - c)`` in
#: the binary problem (a row whose other shares all underflow).
_LOG_TINY = float(np.log(np.nextafter(0.0, 1.0)))


def _kind(inner) -> str:
    """How :class:`TopVersusAll` fits ``inner``, by the public protocols it
    offers: ``"scaling"`` (``fit_top_label``: its parameters on the binary
    objective of the whole logits), ``"one_map"`` (``fit_confidence`` /
    ``predict_confidence``: one map of the confidence, mirrored) or
    ``"binary"`` (``fit`` / ``predict_proba`` on the two columns of the
    binary problem)."""
    if callable(getattr(inner, "fit_top_label", None)):
        return "scaling"
    if callable(getattr(inner, "fit_confidence", None)) and callable(
        getattr(inner, "predict_confidence", None)
    ):
        return "one_map"
    return "binary"


def _reads_input(inner) -> bool:
    """Whether ``inner`` has skcal's ``input`` and ``classes`` parameters (it
    is then told what the binary problem's columns hold)."""
    params = inner.get_params(deep=False)
    return "input" in params and "classes" in params


def _top_log_probabilities(z: np.ndarray, top: np.ndarray):
    """``(log c, log(1 - c))`` of the softmax of ``z`` at ``top``, stably.

    One exponential pass, shifted by the row maxima: ``1 - c`` is the sum of
    the other classes' shares (never ``1 - c``, which rounds to 0 for
    confident rows). ``log(1 - c)`` is floored at the log of the smallest
    positive float64 (where the other shares underflow: logit gaps beyond
    about 745), so that the binary problem stays finite.
    """
    rows = np.arange(len(top))
    e = np.subtract(z, row_max(z)[:, None], dtype=np.float64)
    np.exp(e, out=e)
    top_share = e[rows, top]  # a copy (fancy indexing)
    e[rows, top] = 0.0
    rest = row_sum(e)
    with np.errstate(divide="ignore"):  # a row of one class: log(0) = -inf
        log_total = np.log(top_share + rest)
        log_rest = np.maximum(np.log(rest), _LOG_TINY) - log_total
        return np.log(top_share) - log_total, log_rest


def _shifted(logits: np.ndarray) -> np.ndarray:
    """``logits`` minus their row maxima (the logits a scaling calibrator
    sees, whether ``X`` held logits or probabilities)."""
    return np.subtract(logits, row_max(logits)[:, None], dtype=np.float64)


def _top_first(values: np.ndarray, top: np.ndarray) -> np.ndarray:
    """``values`` with ``top`` raised to its row's maximum where rounding put
    another class a unit in the last place above it (a confidence equal to
    the largest other share, e.g. on rows of equal logits): a tie, never
    another class ahead."""
    below = values[np.arange(len(top)), top] < row_max(values)
    if below.any():
        _hold_top(values, top, np.flatnonzero(below))
    return values


def _softmax2(scores: np.ndarray) -> np.ndarray:
    """The softmax of the binary problem's two columns of scores, floored at
    ``PROBA_EPS`` as validated probabilities are: what a calibrator that
    reads probabilities is given (by two ``expit`` of the scores'
    difference; a row-wise softmax costs more per row than its work on two
    columns)."""
    d = scores[:, 1] - scores[:, 0]
    out = np.empty((len(d), 2))
    expit(-d, out=out[:, 0])
    expit(d, out=out[:, 1])
    return np.maximum(out, PROBA_EPS, out=out)


def _replace_top(shares, top, confidence, complement=None, ahead=None) -> np.ndarray:
    """``confidence`` on the top class, the others sharing ``complement``
    (``1 - confidence`` if None) in the proportions of the softmax of
    ``shares`` (see :func:`replace_top_label_inplace`); the top class at
    least ties with every other, strictly above them in the rows ``ahead``
    (where the scores put it strictly first)."""
    P = softmax_into(shares, np.empty(shares.shape))
    return replace_top_label_inplace(
        P, shares, top, confidence, floor=FLOOR_BEFORE_LOG, keep_argmax=True,
        complement=complement, ahead=ahead,
    )  # fmt: skip


def _strictly_first(scores: np.ndarray, top: np.ndarray) -> np.ndarray:
    """Whether column ``top`` of each row is its only maximum."""
    best = scores[np.arange(len(top)), top]
    return np.count_nonzero(scores == best[:, None], axis=1) == 1


def binary_log_proba(logits: np.ndarray, top: np.ndarray) -> np.ndarray:
    """The top-versus-all binary problem's scores: ``[log(1 - c), log c]``.

    ``c`` is the softmax probability of column ``top`` of each row; the two
    columns are the log-probabilities of "wrong" (0) and "right" (1), valid
    logits for a binary calibrator. Computed by blocks of rows.
    """
    n = logits.shape[0]
    out = np.empty((n, 2))
    step = max(1, BLOCK // max(logits.shape[1], 1))
    for start in range(0, n, step):
        block = slice(start, start + step)
        log_c, log_rest = _top_log_probabilities(logits[block], top[block])
        out[block, 0], out[block, 1] = log_rest, log_c
    return out


def _binary_scores(c: np.ndarray, rest: np.ndarray) -> np.ndarray:
    """``[log(rest / (c + rest)), log(c / (c + rest))]`` of each row's top
    entry ``c`` and sum of the others ``rest``, ``log(1 - c)`` floored as in
    :func:`_top_log_probabilities`."""
    scores = np.empty((len(c), 2))
    with np.errstate(divide="ignore"):  # see _top_log_probabilities
        log_total = np.log(c + rest)
        scores[:, 0] = np.maximum(np.log(rest), _LOG_TINY) - log_total
        scores[:, 1] = np.log(c) - log_total
    return scores


def _binary_proba(c: np.ndarray, rest: np.ndarray) -> np.ndarray:
    """``[rest, c] / (c + rest)`` floored at ``PROBA_EPS``: the softmax of
    :func:`_binary_scores` (to a few units in the last place) without its
    logarithms and exponentials."""
    out = np.empty((len(c), 2))
    total = c + rest
    np.divide(rest, total, out=out[:, 0])
    np.divide(c, total, out=out[:, 1])
    return np.maximum(out, PROBA_EPS, out=out)


class _BinaryProblem:
    """The binary problem of the top labels, as each binary calibrator reads
    it: the scores ``[log(1 - c), log c]`` or their softmax ``[1 - c, c]``.

    Given logits, ``scores`` (the probabilities are their softmax); given
    validated probabilities, each row's top entry ``c`` and the sum of its
    others ``rest`` (arrays of their own: the probabilities may then be
    overwritten), from which both are direct (the probabilities without a
    logarithm). Without ``rest`` (None), only :meth:`confidence` is
    defined: what a calibrator of one map reads."""

    def __init__(self, scores=None, c=None, rest=None):
        self._scores, self.c, self.rest = scores, c, rest

    @classmethod
    def of_probabilities(cls, P: np.ndarray, top: np.ndarray, rest=True):
        """From validated probabilities ``P`` (C-contiguous float64, floored
        at ``PROBA_EPS``; left as it was) and their argmax ``top``; without
        ``rest``, only the top entries (for :meth:`confidence`)."""
        if not rest:
            return cls(None, top_entries(P, top), None)
        return cls(None, *top_and_rest(P, top))

    def scores(self) -> np.ndarray:
        if self._scores is None:
            self._scores = _binary_scores(self.c, self.rest)
        return self._scores

    def proba(self) -> np.ndarray:
        """``[1 - c, c]`` of validated probabilities (given ``c``)."""
        return _binary_proba(self.c, self.rest)

    def confidence(self) -> np.ndarray:
        """The confidence that a calibrator of one map reads: given
        probabilities, the top entry ``c`` of the renormalised row (the same
        product in the fit's validation and in the predictions' copy);
        given logits, the softmax's ``c`` of the scores shifted to a row
        maximum of 0."""
        if self.c is not None:
            return self.c
        scores = self.scores()
        shifted = scores - np.maximum(scores[:, 0], scores[:, 1])[:, None]
        return _softmax2(shifted)[:, 1]


class _TopRowsScan(_Scan):
    """:class:`~skcal.utils._validation._Scan` that keeps, of each row of the
    renormalised, floored copy, the argmax, its entry and the others' sum
    (see :func:`top_rows_of_probabilities`) instead of the copy."""

    def __init__(self, P: np.ndarray, rest: bool = True):
        super().__init__(P, top_label=True, copy=False)
        n = P.shape[0]
        self.c, self.rest = np.empty(n), np.empty(n) if rest else None
        # a scratch block, made when first needed: the copy of a block that
        # needs it, or else ones with 0 at the top entries, which mask them
        # out of a row product
        self.scratch_shape = (min(self.step, n), P.shape[1])
        self.scratch, self.ones = None, False

    def _scratch(self, n_rows: int, ones: bool) -> np.ndarray:
        """The scratch block's first ``n_rows``; all ones if ``ones``."""
        if self.scratch is None:
            self.scratch = (np.ones if ones else np.empty)(self.scratch_shape)
        elif ones and not self.ones:
            self.scratch.fill(1.0)
        self.ones = ones
        return self.scratch[:n_rows]

    def _emit(self, block, rows, low, clip, offsets, **options) -> None:
        top, sums = self.pred[rows], self.sums[rows]
        # the floor never reaches a row's top entry: only the others' sum
        # is summed from the copy where it can act
        if (
            clip
            or offsets is None
            or block.dtype != np.float64
            or (
                self.rest is not None
                and not _above_floor(low, sums, options["floor"], clip=clip)
            )
        ):
            scratch = self._scratch(len(block), ones=False)
            _copy_block(block, scratch, sums, clip=clip, low=low, **options)
            if self.rest is None:
                top_entries(scratch, top, self.c[rows])
            else:
                top_and_rest(scratch, top, self.c[rows], self.rest[rows])
            return
        reciprocal = _reciprocals(sums, block.shape[1])
        np.multiply(self.conf[rows], reciprocal, out=self.c[rows])
        if self.rest is None:
            return
        mask = self._scratch(len(block), ones=True)
        at = offsets[: len(block)] + top
        mask.reshape(-1)[at] = 0.0
        rest = np.einsum("ij,ij->i", block, mask, out=self.rest[rows])
        mask.reshape(-1)[at] = 1.0
        rest *= reciprocal


def top_rows_of_probabilities(
    P, name: str = "X", *, tol: float = SUM_TOL, rest: bool = True, eps=PROBA_EPS
):
    """Validate ``P`` as ``check_probabilities(P, name, tol=tol, floor=True,
    eps=eps)`` does and return, of each row of that copy (which is never
    made), its argmax, its entry there and (with ``rest``) the sum of its
    other entries.

    One read of ``P`` by cache-sized blocks, with the checks: the argmax is
    that of the row as given (the first on ties; the copy's too, but where
    the division by the row sum, which keeps the order of a row's entries,
    rounds two of them into a tie), its entry is the copy's (the same
    product), and the others' sum is taken from the given entries (the top
    one masked) times the reciprocal of the row sum: as accurate as the
    copy's sum of them (``(C - 1) u`` relative), never ``1 - c`` (which
    rounds to 0 near certainty). Blocks that need clipping, float32 rows,
    other layouts and (with ``rest``) blocks where the floor can act are
    summed from their copy, in a scratch block. For the fit of the binary
    problem on the top label; without ``rest``, the plain blocks are read
    once less (the masked sum is half of the read at 100 classes).

    Returns
    -------
    top : ndarray of shape (n_samples,) of intp
    c : ndarray of shape (n_samples,)
    rest : ndarray of shape (n_samples,), or None without ``rest``
    """
    P = np.asarray(P)
    if P.dtype != np.float32 and P.dtype != np.float64:
        P = np.asarray(P, dtype=np.float64)
    scan = _TopRowsScan(P, rest=rest)
    level = max(eps, PROBA_EPS)
    _scan_and_check(P, scan, tol, name, renormalize=True, log=False, floor=level)
    return scan.pred, scan.c, scan.rest


class _TopRows:
    """Each validated probability row's argmax, its entry and (with
    ``rest``) the sum of the others (:func:`top_rows_of_probabilities`):
    all that the fit of a binary calibrator with proportional
    redistribution reads, without a copy of the rows."""

    def __init__(self, P, tol, rest=True):
        self.shape = P.shape
        self.top, self.c, self.rest = top_rows_of_probabilities(P, tol=tol, rest=rest)


class _FlooredLogRows:
    """``rows_of[rows]`` (the logs of validated probability rows) floored at
    ``log(floor)``: the logs at the calibrator's ``proba_floor_`` (the
    renormalisation of a floored row is a shift of its logs, which the maps
    that read these, all of a softmax, ignore)."""

    def __init__(self, rows_of, floor: float):
        self.rows_of, self.log_floor = rows_of, float(np.log(floor))

    def __getitem__(self, rows) -> np.ndarray:
        return np.maximum(self.rows_of[rows], self.log_floor)


class TopVersusAll(TopKInputMixin, BaseCalibrator):
    """Top-versus-all calibration: one binary calibrator for the top label.

    The multiclass calibration problem is reduced to a single binary one
    (Le Coz et al., 2024): the confidence ``c`` of each calibration row (the
    softmax probability of its top class, the argmax of ``X``) against
    whether that top class is its label. ``calibrator`` is then fitted on
    that binary problem, with every row of every class, where a
    one-versus-all reduction would fit one map per class on few positives:

    * a binary calibrator (:class:`IsotonicCalibrator`,
      :class:`HistogramBinningCalibrator`, :class:`PlattCalibrator`,
      :class:`BetaCalibrator`, :class:`SplineCalibrator`, ..., or any
      scikit-learn classifier with ``predict_proba``) is fitted on the
      binary scores ``[log(1 - c), log c]`` (``input="logits"``, computed
      from the logits without rounding ``1 - c``) with labels "right"
      (1) / "wrong" (0), and maps ``c`` to its probability of "right";
      isotonic regression (centred or not) and histogram binning fit the
      paper's one map of ``c`` (isotonic regression scikit-learn's, ties
      merged as there; histogram binning's bins ``[l, u)``), which gives
      the calibrated confidence, and store its mirror image as their map
      of ``1 - c`` (the map a second fit of ``1 - c`` gives in exact
      arithmetic, but for scores on a bin edge);
    * a scaling calibrator (:class:`TemperatureScaling`,
      :class:`VectorScaling`) is fitted on the whole logits (shifted to a
      row maximum of 0, so that ``X`` and its log-probabilities are one
      input), as in the paper: its parameters minimise the binary
      cross-entropy of the top confidence of its own scaled softmax (for
      vector scaling plus its ridge toward the temperature,
      ``reg_lambda``), and the calibrated confidence is that softmax's
      probability of the top class.

    The calibrated confidence ``c~`` replaces the top class's probability
    and the other classes share ``1 - c~`` (the paper calibrates the
    confidence only): by default in the proportions of a temperature
    scaling (the scaling calibrator's own softmax, or for a binary
    calibrator ``softmax(z / T)`` with ``T`` fitted by temperature scaling
    on the same rows), or in their original proportions with
    ``redistribution="proportional"``; computed from the logits, exact
    where the probabilities underflow. The argmax of ``X`` keeps strictly
    the largest calibrated probability (but where ``X`` ties it with
    another class), so that :meth:`predict` and ``np.argmax`` of
    :meth:`predict_proba` both return it: where ``c~`` is below what the
    largest other class's share would then be, ``c~`` is raised to that
    share and then to the next float above it (one unit in the last place:
    a tie broken by the least change; see
    :func:`~skcal.utils._proba.replace_top_label`).

    **The inner calibrator's protocol.** ``calibrator`` is used only
    through public methods, chosen by the ones it has: ``fit_top_label``
    (:meth:`TemperatureScaling.fit_top_label`,
    :meth:`VectorScaling.fit_top_label`: a scaling calibrator's parameters
    on the binary objective of the whole logits, shifted to a row maximum
    of 0, then its ``decision_function`` of such logits); else
    ``fit_confidence`` / ``predict_confidence`` (isotonic regression,
    centred or not, and histogram binning: one map of the confidence,
    mirrored for ``1 - c``); else ``fit`` / ``predict_proba`` on the two
    columns of the binary problem. A skcal calibrator is told the columns'
    ``classes`` and ``input`` by ``set_params``. No private member of it is
    read and no fitted attribute of it is written, so that a change of its
    internals cannot change this estimator unnoticed.

    **Top-k input.** ``X`` may be a :class:`~skcal.llm.TopKScores` with
    ``y`` its class indices (``classes`` None, ``input="logits"``). A row's
    top label is its largest listed class, its confidence ``c`` listed
    exactly, ``1 - c`` the other listed classes plus the leftover mass; the
    inner calibrator (a binary one, one of one map, or
    :class:`TemperatureScaling` by ``fit_top_label`` on the rest model;
    vector scaling is refused) is fitted on that problem, the others'
    temperature on the rest model. The calibrated ``c~`` replaces ``c`` and
    the other listed classes and the leftover mass are scaled by one
    factor (the leftover stays spread equally), with the same raise of
    ``c~`` above the largest other share as on dense input.
    ``predict_proba`` returns a ``TopKScores`` (same indices); nothing of
    size ``n x V`` is built.

    Parameters
    ----------
    calibrator : estimator, default=None
        The binary or scaling calibrator, cloned before fitting. None is
        :class:`TemperatureScaling` (see Notes).
    input : {"logits", "proba"}, default="logits"
        What ``X`` holds. Probabilities are read as given for the binary
        problem (each row's top entry and the others' sum) and the others'
        proportions; where their logs are taken (a scaling calibrator, the
        temperature of the others' shares) they are floored at
        ``proba_floor_`` first, as by the other calibrators. A binary
        calibrator with an ``input`` parameter is given the binary
        problem's probabilities ``[1 - c, c]`` (``input="proba"``) and
        floors them by its own rule.
    classes : array-like of shape (n_classes,), default=None
        The label of each column of ``X``.
    redistribution : {"temperature", "proportional"}, default="temperature"
        How the other classes share ``1 - c~``: ``"temperature"`` in the
        proportions of temperature scaling (of the scaling calibrator's map
        when it is one); ``"proportional"`` in their original proportions.
    verbose : int, default=0
        0: silent; 1: a progress bar (stderr) over the iterations of the
        binary-objective fit of a scaling calibrator (at 50,000 rows of
        1,000 classes, seconds per iteration); 2: also a line per iteration.
        A scaling calibrator's own ``verbose`` also shows it.

    Attributes
    ----------
    calibrator_ : estimator or None
        The fitted clone of ``calibrator``: on the binary problem (2
        columns), or for a scaling calibrator on the ``n_classes`` columns,
        its parameters fitted on the binary objective (its ``classes_`` are
        those of this estimator). None when the calibration rows held no
        binary problem (see Notes).
    temperature_ : float or None
        Temperature of the other classes' shares for a binary calibrator
        (1.0 with ``redistribution="proportional"``); None for a scaling
        calibrator, whose own map gives the shares.
    scaling_ : bool
        Whether ``calibrator_`` was fitted as a scaling calibrator.
    proba_floor_ : float
        With ``input="proba"`` where the fit takes logs of the probabilities
        (a scaling calibrator, or ``redistribution="temperature"``): their
        floor before the log, half the smallest positive calibration
        probability (at least 2.2e-308). ``fit`` warns
        (:class:`~skcal.exceptions.InputWarning`) with the count of
        calibration rows whose true class has probability 0.
    classes_ : ndarray of shape (n_classes,)
        Label of each column.
    n_features_in_ : int
        Number of columns of ``X``.

    Notes
    -----
    The default calibrator is temperature scaling, fitted on the binary
    objective (the paper's TS with TvA): one parameter, so it needs no
    regularisation and cannot over-fit a small calibration set; it keeps
    the classes' ranking in every row and the ranking of the confidences
    across rows, and the paper reports it improves the top-label ECE of
    temperature scaling on every ImageNet, CIFAR and text model it tried.
    Histogram binning with TvA reached lower ECEs there, but its piecewise
    constant confidences tie many rows (lower AUROC of the confidence) and
    need larger calibration sets.

    Departures from the paper's code: the top class is the argmax of ``X``
    and stays the prediction (the paper's vector scaling recomputes it from
    the scaled logits, which can change the prediction); the scaling
    calibrators are fitted by full-batch L-BFGS-B to a tolerance (the paper
    uses 200 epochs of Adam), vector scaling in skcal's parametrisation and
    ridge (:class:`VectorScaling`), shrunk toward the binary-objective
    temperature. The ``device`` of a scaling calibrator is not used: the
    binary objective is computed with numpy, by blocks of rows. Calibration
    rows whose top classes are all right (or all wrong) hold no binary
    problem: the classifier's probabilities are then kept (``calibrator_``
    is None), with a ``ConvergenceWarning``, as temperature scaling keeps
    ``T = 1`` on separable scores.

    References
    ----------
    A. Le Coz, S. Herbin, F. Adjed. "Confidence Calibration of Classifiers
    with Many Classes". NeurIPS 2024.

    Examples
    --------
    >>> import numpy as np
    >>> from skcal import IsotonicCalibrator, TopVersusAll
    >>> from skcal.utils._testing import make_miscalibrated_logits
    >>> logits, y = make_miscalibrated_logits(2000, 10, random_state=0)
    >>> tva = TopVersusAll().fit(logits, y)
    >>> 1.0 < tva.calibrator_.temperature_ < 4.0
    True
    >>> iso = TopVersusAll(IsotonicCalibrator()).fit(logits, y)
    >>> proba = iso.predict_proba(logits)
    >>> proba.shape, bool(np.allclose(proba.sum(axis=1), 1.0))
    ((2000, 10), True)
    >>> top = logits.argmax(axis=1)  # keeps the largest probability
    >>> bool((proba[np.arange(2000), top] == proba.max(axis=1)).all())
    True
    """

    _needs_torch = True  # its fit runs torch kernels
    _shift_invariant = True
    _keeps_argmax = "proba"

    # input="proba": validated by the fit and the prediction themselves (see
    # _fit_proba), which floor them at proba_floor_ only for their logs
    _reads = "given probabilities"

    _parameter_constraints: dict = {
        **BaseCalibrator._parameter_constraints,
        "calibrator": [HasMethods(["fit", "predict_proba"]), None],
        "redistribution": [StrOptions({"temperature", "proportional"})],
        "verbose": ["verbose"],
    }

    def __init__(
        self,
        calibrator=None,
        *,
        input="logits",
        classes=None,
        redistribution="temperature",
        verbose=0,
    ):
        self.calibrator = calibrator
        self.input = input
        self.classes = classes
        self.redistribution = redistribution
        self.verbose = verbose

    # ------------------------------------------------------------- helpers
    def _inner(self):
        """An unfitted clone of ``calibrator`` (the default if None)."""
        if self.calibrator is None:
            return TemperatureScaling()
        if isinstance(self.calibrator, BaseLocalCalibrator):
            raise TypeError(
                f"TopVersusAll calibrates scores, but calibrator is the local "
                f"calibrator {type(self.calibrator).__name__}, fitted on "
                "embeddings. Pass a score calibrator such as "
                "IsotonicCalibrator() or TemperatureScaling()."
            )
        return clone(self.calibrator)

    def _inner_kind(self) -> str:
        """:func:`_kind` of ``calibrator`` (None: temperature scaling)."""
        return "scaling" if self.calibrator is None else _kind(self.calibrator)

    def _logs_of(self, P: np.ndarray) -> np.ndarray:
        """``log(max(P, proba_floor_))`` of validated probabilities ``P``
        (our copy, overwritten and returned), the rows the floor raised
        renormalised first: the logits every calibrator that takes logs of
        probabilities reads (see :func:`~skcal.utils._validation.proba_floor`).
        """
        floor = getattr(self, "proba_floor_", PROBA_EPS)
        if floor > PROBA_EPS:
            _floor_rows(P, floor)
        return log_probabilities_inplace(P)

    def n_free_parameters(self, n_classes, n_features=None):
        """The inner calibrator's count: on ``n_classes`` columns for a
        scaling calibrator, else on the 2 columns of the binary problem
        (plus the temperature of the others' shares by default)."""
        inner = self._inner()
        if self._inner_kind() == "scaling":
            return inner.n_free_parameters(n_classes)
        count = inner.n_free_parameters(2) if hasattr(inner, "n_free_parameters") else 2
        return count + (self.redistribution == "temperature")

    # ----------------------------------------------------------------- fit
    def _fit(self, scores, y_index, sample_weight):
        if self.input == "proba":
            self._fit_proba(scores, y_index, sample_weight)
            return
        top = np.argmax(scores, axis=1)
        binary = None
        if self._inner_kind() != "scaling":
            binary = _BinaryProblem(binary_log_proba(scores, top))
        self._fit_top(top, y_index, sample_weight, binary, scores)

    def _fit_proba(self, given, y_index, sample_weight):
        """:meth:`_fit` of the :class:`~skcal.base.GivenProbabilities`
        ``given``.

        A binary calibrator with proportional redistribution reads only each
        row's top entry and the sum of the others (or the top entry alone,
        for one map): those, validated without a copy of ``X``
        (:class:`_TopRows`). Otherwise the validated copy ``P`` (floored at
        ``PROBA_EPS`` only): the binary problem read from ``P`` as given (as
        in the predictions; a binary calibrator floors what it reads
        itself), then, for a scaling calibrator or the others' temperature,
        the logs of ``P`` taken in place (:meth:`_logs_of`), at
        ``proba_floor_`` as by every calibrator that takes them, with the
        warning about calibration rows whose true class has probability 0
        (:func:`~skcal.base.set_proba_floor`).
        """
        kind = self._inner_kind()
        if self.redistribution == "proportional" and kind != "scaling":
            rows = _TopRows(given.X, given.tol, rest=kind != "one_map")
            binary = _BinaryProblem(None, rows.c, rows.rest)
            self._fit_top(rows.top, y_index, sample_weight, binary, None)
            return
        set_proba_floor(self, given, y_index, sample_weight)
        P = given.validated(floor=True, eps=PROBA_EPS)
        top = np.argmax(P, axis=1)
        binary = None
        if kind != "scaling":  # its own arrays: P is overwritten below
            binary = _BinaryProblem.of_probabilities(P, top, rest=kind != "one_map")
        logits = None
        if kind == "scaling" or self.redistribution == "temperature":
            logits = self._logs_of(P)
        self._fit_top(top, y_index, sample_weight, binary, logits)

    def _fit_top(self, top, y_index, sample_weight, binary, logits):
        """Fit on the top classes ``top``: a binary calibrator on the
        :class:`_BinaryProblem` ``binary``, a scaling calibrator on
        ``logits`` (and the others' temperature on them)."""
        right = (top == y_index).astype(np.float64)
        inner = self._inner()
        if self._no_binary_problem(right, sample_weight):
            return
        self.scaling_ = _kind(inner) == "scaling"
        if self.scaling_:
            if _reads_input(inner):
                inner.set_params(classes=self.classes_, input="logits")
            inner.fit_top_label(  # the logits of a row maximum of 0, as below
                _shifted(logits),
                top,
                right,
                sample_weight,
                verbose=int(self.verbose or 0),
            )
            self.temperature_ = None
        else:
            self._fit_binary(inner, binary, right, sample_weight)
            self.temperature_ = 1.0
            if self.redistribution == "temperature":
                z = np.asarray(logits, dtype=np.float64)
                beta = fit_inverse_temperature(z, y_index, sample_weight, "cpu").x
                self.temperature_ = float(1.0 / beta)
        self.calibrator_ = inner

    def _no_binary_problem(self, right, sample_weight) -> bool:
        """Whether the top classes of the rows of positive weight are all
        right or all wrong: then the classifier's probabilities are kept
        (``calibrator_`` None), with a ``ConvergenceWarning``."""
        positive = sample_weight > 0
        n_right = int(right[positive].sum())
        if n_right in (0, int(positive.sum())):
            warn(
                f"TopVersusAll fits a binary calibrator of whether the top class "
                f"(the argmax of X) is the label, but the top class of every "
                f"calibration row with positive weight is "
                f"{'right' if n_right else 'wrong'}: there is no binary problem "
                "to fit, and the classifier's own probabilities were kept "
                "(calibrator_ is None). A calibration set with both right and "
                "wrong predictions lets the confidence be calibrated.",
                ConvergenceWarning,
            )
            self.calibrator_, self.scaling_, self.temperature_ = None, False, 1.0
            return True
        return False

    # -------------------------------------------------------- top-k input
    def _fit_topk(self, top, y_index, sample_weight):
        """:meth:`_fit_top` on a ``TopKScores``: the top label is each row's
        top listed class; the binary problem, temperature scaling's binary
        objective and the others' temperature read the rest model."""
        if self.input != "logits":
            raise ValueError(
                "TopVersusAll(input='proba') with TopKScores input: a top-k holds "
                "log-probabilities; leave input='logits'."
            )
        inner = self._inner()
        kind = _kind(inner)
        if kind == "scaling" and type(inner) is not TemperatureScaling:
            raise TypeError(
                f"TopVersusAll with TopKScores input takes temperature scaling, a "
                f"binary calibrator or a calibrator of one map, not "
                f"{type(inner).__name__}: its per-class parameters would act on "
                "the unlisted classes, which a top-k does not tell apart. Pass "
                "X.to_dense() for it."
            )
        j, index = top_listed(top)
        right = (index == y_index).astype(np.float64)
        if self._no_binary_problem(right, sample_weight):
            return
        self.scaling_ = kind == "scaling"
        if self.scaling_:
            inner.fit_top_label(
                top, index, right, sample_weight, verbose=int(self.verbose or 0)
            )
            self.temperature_ = None
        else:
            binary = _BinaryProblem(topk_binary_scores(top, j))
            self._fit_binary(inner, binary, right, sample_weight)
            self.temperature_ = 1.0
            if self.redistribution == "temperature":
                scale = topk_logit_scale(top)
                nll = TopKTemperatureObjective(top, y_index, sample_weight, scale)
                beta = solve_inverse_temperature(nll.derivatives, scale).x
                self.temperature_ = float(1.0 / beta)
        self.calibrator_ = inner

    def _map_topk(self, top):
        """The calibrated ``TopKScores`` (same indices): the calibrated
        confidence on each row's top listed class, the other listed classes
        and the leftover mass scaled by one factor to share the rest
        (:func:`~skcal.llm._topk_top_label.replace_top_topk`)."""
        j, _ = top_listed(top)
        if self.calibrator_ is None:  # no binary problem: the identity
            return TopKScores(
                top.indices, top.values, top.n_classes, top.leftover_logmass(),
                tokens=top.tokens,
            )  # fmt: skip
        if self.scaling_:
            scaled = self.calibrator_.decision_function(top)
            if self.redistribution == "temperature":
                return scaled
            binary = topk_binary_scores(scaled, j)
            confidence, complement = np.exp(binary[:, 1]), np.exp(binary[:, 0])
            return replace_top_topk(top, j, confidence, complement)
        binary = _BinaryProblem(topk_binary_scores(top, j))
        confidence = self._binary_confidence(binary)
        shares = top
        if self.temperature_ != 1.0:
            shares = scale_topk(top, 1.0 / self.temperature_)
        return replace_top_topk(shares, j, confidence)

    def _binary_input(self, inner, binary) -> np.ndarray:
        """What a binary calibrator is given: the probabilities ``[1 - c,
        c]`` where ``X`` held probabilities and it reads them
        (``input="proba"``), else the scores ``[log(1 - c), log c]``."""
        if self.input == "proba" and _reads_input(inner):
            return binary.proba()
        return binary.scores()

    def _fit_binary(self, inner, binary, right, sample_weight):
        """Fit ``inner`` on the :class:`_BinaryProblem` ``binary``.

        By the one-map protocol (``fit_confidence``: isotonic regression
        and histogram binning fit the paper's one map of the confidence,
        mirrored for ``1 - c``) where it has it, else by its public ``fit``
        on the two columns of :meth:`_binary_input` with labels "right" (1)
        and "wrong" (0). A skcal calibrator is told the columns' classes
        and ``input``; its parameters are validated as in a fit of its own.
        """
        params = {"classes": np.arange(2), "input": "logits"}
        if _kind(inner) == "one_map":
            if _reads_input(inner):
                inner.set_params(**params)
            inner.fit_confidence(binary.confidence(), right, sample_weight)
        else:
            if _reads_input(inner):
                params["input"] = "proba" if self.input == "proba" else "logits"
                inner.set_params(**params)
            X = self._binary_input(inner, binary)
            with config_context(skip_parameter_validation=False):
                inner.fit(X, right.astype(np.int64), sample_weight=sample_weight)
        self._right_column_ = int(np.flatnonzero(np.asarray(inner.classes_) == 1)[0])

    # ------------------------------------------------------------- predict
    def to_torch(self):
        """The fitted calibrator as a torch module: dense scores to
        :meth:`predict_proba`.

        The top class (each row's first maximum) gets the inner calibrator's
        calibrated confidence (its own exported map: a calibrator of one map
        by ``confidence_to_torch``, a binary calibrator by its ``to_torch`` on
        the binary problem's two columns, a scaling calibrator by its
        ``to_torch`` without the softmax); the others share the rest in the
        proportions of the softmax of their shares, in log space where they
        underflow; the top class is kept strictly first by one unit in the
        last place, as :meth:`predict_proba` does. Computed in float64
        whatever the input's dtype. See :func:`skcal.export.to_torch` and
        :func:`skcal.export.to_onnx`.

        The module reads dense scores (``input``); a
        :class:`~skcal.llm.TopKScores` is calibrated by :meth:`predict_proba`
        only. As for the one-vs-rest calibrators, a confidence within a few
        units in the last place of a bin edge of a step map (histogram
        binning, BBQ, ...) can fall in the neighbouring bin (numpy's,
        torch's and onnxruntime's ``exp`` and ``log`` differ in the last
        place on some entries).

        Returns
        -------
        torch.nn.Module

        Raises
        ------
        NotExportableError
            If the inner calibrator cannot be exported (a scikit-learn
            classifier, or a calibrator without ``to_torch``), with the reason.

        Examples
        --------
        >>> import numpy as np, torch
        >>> from skcal import IsotonicCalibrator, TopVersusAll
        >>> from skcal.utils._testing import make_miscalibrated_logits
        >>> X, y = make_miscalibrated_logits(300, 3, random_state=0)
        >>> cal = TopVersusAll(IsotonicCalibrator()).fit(X, y)
        >>> P = cal.to_torch()(torch.from_numpy(X)).numpy()
        >>> bool(np.abs(P - cal.predict_proba(X)).max() < 1e-12)
        True
        """
        from .._torch._export import Chain
        from .._torch._export_tva import TopVersusAllMap

        check_is_fitted(self)
        kind, inner = self._export_inner()
        binary_proba = (
            kind == "binary"
            and self.input == "proba"
            and _reads_input(self.calibrator_)
        )
        block = TopVersusAllMap(
            kind, self.input == "proba", int(self.n_features_in_), inner,
            temperature=self.temperature_ if kind in ("one_map", "binary") else 1.0,
            scaled_shares=kind == "scaling" and self.redistribution == "temperature",
            softmax_ahead=kind == "scaling" and self._temperature_only(),
            proba_floor=getattr(self, "proba_floor_", PROBA_EPS),
            binary_proba=binary_proba,
            right_column=getattr(self, "_right_column_", 1),
            floor=FLOOR_BEFORE_LOG, sum_floor=SUM_FLOOR, tiny=PROBA_EPS,
            log_tiny=_LOG_TINY,
        )  # fmt: skip
        return Chain(block)

    def _export_inner(self):
        """The kind of the fitted inner calibrator (``"none"`` without a
        binary problem) and its exported block (see :meth:`to_torch`)."""
        from .._torch._export import Chain, Softmax
        from ..exceptions import NotExportableError

        inner = self.calibrator_
        if inner is None:
            return "none", None
        kind = "scaling" if self.scaling_ else _kind(inner)
        name = type(inner).__name__
        if kind == "one_map":
            return kind, inner.confidence_to_torch()
        if not callable(getattr(inner, "to_torch", None)):
            raise NotExportableError(
                f"TopVersusAll({name}) cannot be exported: {name} has no to_torch "
                "method, so its map of the confidence has no torch or ONNX form. "
                "Use a skcal calibrator that can be exported (e.g. "
                "IsotonicCalibrator, PlattCalibrator, TemperatureScaling)."
            )
        try:
            module = inner.to_torch()
        except NotExportableError as error:
            raise NotExportableError(
                f"TopVersusAll({name}) cannot be exported, because its inner "
                f"calibrator cannot: {error}"
            ) from error
        if kind == "scaling":
            blocks = list(module.blocks) if isinstance(module, Chain) else []
            if not blocks or not isinstance(blocks[-1], Softmax):
                raise NotExportableError(
                    f"TopVersusAll({name}) cannot be exported: the module of "
                    f"{name} does not end with the softmax of its logits, which "
                    "the top-label replacement reads."
                )
            module = Chain(*blocks[:-1])
        return kind, module

    def _confidence_and_shares(self, logits, top, owned=False, confidence=None):
        """The calibrated confidence ``c`` of the argmax ``top`` of
        ``logits``, its complement where known more accurately than ``1 -
        c`` (the others' total of a softmax, which ``1 - c`` rounds to 0
        for near-certain rows; None for a binary calibrator) and the logits
        whose softmax over the other classes gives their shares
        (``logits`` themselves, divided in place if ``owned``). A binary
        calibrator's ``confidence``, if given, is not computed again."""
        logits = np.asarray(logits, dtype=np.float64)
        if self.calibrator_ is None:  # no binary problem: the identity
            log_c, log_rest = _top_log_probabilities(logits, top)
            return np.exp(log_c), np.exp(log_rest), logits
        if self.scaling_:
            scaled = self.calibrator_.decision_function(_shifted(logits))
            log_c, log_rest = _top_log_probabilities(scaled, top)
            shares = scaled if self.redistribution == "temperature" else logits
            return np.exp(log_c), np.exp(log_rest), shares
        if confidence is None:
            confidence = self._binary_confidence(
                _BinaryProblem(binary_log_proba(logits, top))
            )
        if self.temperature_ != 1.0:
            if owned:
                logits /= self.temperature_
            else:
                logits = logits / self.temperature_
        return confidence, None, logits

    def _binary_confidence(self, binary):
        """The binary calibrator's probability of "right" for the
        :class:`_BinaryProblem` ``binary``, by the protocol it was fitted
        with (:meth:`_fit_binary`)."""
        inner = self.calibrator_
        if _kind(inner) == "one_map":  # the paper's one map of the confidence
            return inner.predict_confidence(binary.confidence())
        proba = inner.predict_proba(self._binary_input(inner, binary))
        return np.clip(np.asarray(proba)[:, self._right_column_], 0.0, 1.0)

    def _map_probabilities(self, P, logits):
        """:meth:`predict_proba` of validated probabilities ``P`` (our copy).

        Where the other classes keep their proportions (a binary calibrator
        with ``redistribution="proportional"``, or no binary problem), ``P``
        is mapped directly: the binary problem from its top entries and the
        sums of the others, the others rescaled in place. Otherwise the
        logits (:meth:`_logs_of`, at ``proba_floor_``) are taken in place
        and mapped as logits, a binary calibrator's confidence read from
        ``P`` first (as in the fit).
        """
        P = P.validated(floor=True, eps=PROBA_EPS)  # see _reads
        if self._temperature_only():  # softmax(log(P) / T), in P itself
            rows_of = _FlooredLogRows(logits, getattr(self, "proba_floor_", PROBA_EPS))
            return self._temperature_proba(self._logs_of(P), rows_of)
        if self.scaling_:
            return self._proba(self._logs_of(P), owned=True)
        top = np.argmax(P, axis=1)
        one_map = self.calibrator_ is not None and _kind(self.calibrator_) == "one_map"
        if self.temperature_ != 1.0:  # the confidence of P, the shares of logs
            binary = _BinaryProblem.of_probabilities(P, top, rest=not one_map)
            confidence = self._binary_confidence(binary)
            logits = self._logs_of(P)
            return self._proba(logits, owned=True, top=top, confidence=confidence)
        complement = None
        if self.calibrator_ is None:
            c, rest = top_and_rest(P, top)
            confidence, complement = c / (c + rest), rest / (c + rest)
        else:
            binary = _BinaryProblem.of_probabilities(P, top, rest=not one_map)
            confidence = self._binary_confidence(binary)
        return replace_top_label_inplace(
            P, logits, top, confidence, floor=FLOOR_BEFORE_LOG, keep_argmax=True,
            complement=complement,
        )  # fmt: skip

    def _temperature_only(self) -> bool:
        """Whether the model is temperature scaling with its own shares."""
        return (
            self.scaling_
            and self.redistribution == "temperature"
            and type(self.calibrator_) is TemperatureScaling
        )

    def _temperature_proba(self, logits, rows_of=None):
        """``softmax(z / T)``, the calibrated probabilities of temperature
        scaling with its own shares, in one softmax.

        With ``rows_of`` (``rows_of[rows]`` gives the logits of those rows,
        as :class:`~skcal.base._LogRows` does), ``logits`` is our own array,
        divided and turned into the probabilities in place, and the rows of
        the general path are read from ``rows_of``.

        The softmax is exact to a few units in the last place wherever
        every share is a normal number, near certainty too (the others'
        shares are their own exponentials over the row sum, never
        ``1 - c``). Rows with a share below ``1e-290`` (logit gaps beyond
        about 667 T) take the general path, whose ``c`` is ``exp(log c)``
        and whose others share their total floored at 1e-300, so that
        :meth:`predict_proba` stays the exponential of
        :meth:`predict_log_proba` (finite logs). Only those rows need their
        top class (the argmax of ``z``): in the softmax, the top class's
        share is ``exp(0) / sum``, which no other share (of an ``exp`` of a
        negative number, at most 1) exceeds. Without ``rows_of``,
        ``logits`` is not modified.
        """
        temperature = self.calibrator_.temperature_
        if rows_of is None:
            P = softmax_inplace(np.divide(logits, temperature, dtype=np.float64))
            rows_of = logits
        else:
            P = softmax_inplace(np.divide(logits, temperature, out=logits))
        if P.min() < SUM_FLOOR:
            rows = np.flatnonzero(row_min(P) < SUM_FLOOR)
            given = rows_of[rows]
            top = np.argmax(given, axis=1)
            z = np.divide(given, temperature, dtype=np.float64)
            log_c, log_rest = _top_log_probabilities(z, top)
            P[rows] = _replace_top(z, top, np.exp(log_c), np.exp(log_rest))
        return P

    def _proba(self, logits, owned, top=None, confidence=None):
        if logits.shape[0] == 0:
            return np.empty(logits.shape)
        if self._temperature_only():
            return self._temperature_proba(logits)
        if top is None:
            top = np.argmax(logits, axis=1)
        ahead = _strictly_first(logits, top)  # before shares may overwrite logits
        confidence, complement, shares = self._confidence_and_shares(
            logits, top, owned, confidence
        )
        return _replace_top(shares, top, confidence, complement, ahead)

    def _calibrated_proba(self, logits, P=None):
        if P is not None:
            return self._map_probabilities(P, logits)
        # its own shifted copy (the top entries' gaps read shifted logits),
        # which the prediction may then overwrite
        return self._proba(shifted_rows(logits), owned=True)

    def _calibrated_logits(self, logits):
        if logits.shape[0] == 0:
            return np.empty(logits.shape)
        top = np.argmax(logits, axis=1)
        confidence, complement, shares = self._confidence_and_shares(logits, top)
        out = replace_top_label(
            shares, top, confidence, log=True, keep_argmax=True, complement=complement
        )
        return _top_first(out, top)
