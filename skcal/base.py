"""Base class of every skcal calibrator: the input contract lives here."""

from __future__ import annotations

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils.validation import (
    check_consistent_length,
    check_is_fitted,
    column_or_1d,
    validate_data,
)

from ._torch._threads import threaded
from .exceptions import InputWarning, MissingClassWarning
from .llm._topk import TopKScores
from .utils._dask import lazy_on_dask
from .utils._output import ProbaOutputMixin
from .utils._proba import argmax_ties_by_scores
from .utils._sklearn import StrOptions, _fit_context
from .utils._softmax import softmax_inplace
from .utils._validation import (
    PROBA_EPS,
    as_numpy,
    check_embeddings,
    check_finite,
    check_labels,
    check_probabilities,
    check_sample_weight,
    check_scores_shape,
    class_column_order,
    frame_column_names,
    log_probabilities_inplace,
    proba_floor,
    resolve_classes,
    scores_to_logits,
    sum_tolerance,
)
from .utils._warnings import warn

__all__ = ["BaseCalibrator", "BaseLocalCalibrator"]

#: ``log(PROBA_EPS)``, about -708.4: the floor of the log-probabilities that
#: :func:`negative_log_loss` averages.
_LOG_PROBA_EPS = float(np.log(PROBA_EPS))
#: The smallest positive float64 (subnormal): the floor of the probabilities
#: whose logs :meth:`BaseCalibrator.predict_log_proba` takes, so that a
#: probability that underflowed to 0 has a finite log (about -744.4).
_SMALLEST = float(np.nextafter(0.0, 1.0))


def _is_one_dimensional(X) -> bool:
    """Whether ``X`` is a 1-D array or a flat list (without converting it)."""
    ndim = getattr(X, "ndim", None)
    if ndim is not None:
        return ndim == 1
    return (
        isinstance(X, (list, tuple)) and len(X) > 0 and all(np.isscalar(v) for v in X)
    )


def _owned(out, logits: np.ndarray) -> np.ndarray:
    """``out`` as a fresh, writeable, C-contiguous float64 array.

    Copied only if it is not already one: a view of ``logits`` (which may be
    the caller's own ``X``) or a read-only array.
    """
    out = np.asarray(out, dtype=np.float64, order="C")
    if not out.flags.writeable or np.may_share_memory(out, logits):
        out = out.copy()
    return out


def _work(estimator, X, *args, **kwargs) -> float:
    """The work of a call on ``X``, for its choice of torch threads: its
    entries."""
    shape = getattr(X, "shape", None)
    if shape is None or len(shape) != 2:
        return 0.0  # lists and 1-D input are small, or refused
    return float(shape[0]) * shape[1]


def _softmax_rows(calibrator, a: np.ndarray, *, log: bool = False) -> np.ndarray:
    """Row (log-)softmax of the owned float64 ``a``, in place: torch's
    kernel for a calibrator that needs torch, numpy's otherwise (the two
    agree to a few units in the last place)."""
    if calibrator._needs_torch:
        from ._torch.kernels import softmax_inplace as torch_softmax

        return torch_softmax(a, log=log)
    return softmax_inplace(a, log=log)


#: The values of ``_reads`` of the calibrators that map the validated
#: probabilities of ``input="proba"`` themselves.
_PROBABILITY_READS = ("probabilities", "log-probabilities", "given probabilities")
#: The values of ``_reads`` that keep those probabilities as given: no
#: ``proba_floor_``.
_UNFLOORED_READS = ("probabilities", "given probabilities")


def maps_probabilities(calibrator) -> bool:
    """Whether ``calibrator`` maps the probabilities of ``X`` themselves:
    ``input="proba"`` and a ``_reads`` of probabilities."""
    return calibrator._reads in _PROBABILITY_READS and calibrator.input == "proba"


def shifted_rows(logits: np.ndarray) -> np.ndarray:
    """``logits - logits.max(axis=1)`` as a new float64 array: the shift of
    the validation (see :func:`scores_to_logits`), bit for bit, for a
    shift-invariant calibrator that reads the probabilities
    (``_reads`` of probabilities) but computes them from shifted logits."""
    z = np.asarray(logits, dtype=np.float64)
    return z - z.max(axis=1)[:, None]


def fit_logits(calibrator, scores: np.ndarray) -> np.ndarray:
    """The logits of the ``scores`` that ``_fit`` is given: ``scores``
    themselves, or for a calibrator that reads the probabilities
    (``_reads`` of probabilities) with ``input="proba"``, their logs, taken
    in ``scores`` (the calibrator's own copy), bit for bit those that the
    validation of logits would give."""
    if maps_probabilities(calibrator):
        return log_probabilities_inplace(scores)
    return scores


def export_input(calibrator):
    """The torch block of a fitted calibrator's input handling, for its
    ``to_torch``: the logits its validation gives (see
    :class:`skcal._torch._export.ScoresToLogits`)."""
    from ._torch._export import ScoresToLogits

    check_is_fitted(calibrator)
    return ScoresToLogits(
        calibrator.input, calibrator._proba_eps(), calibrator._shift_invariant
    )


class GivenProbabilities:
    """The probabilities given to ``fit`` or a prediction
    (``input="proba"``), not yet validated as such: what ``_fit`` and
    ``_calibrated_proba`` (its ``P``) of a calibrator that reads them as
    given (``_reads = "given probabilities"``) receive.

    ``X`` (float32 or float64, checked by scikit-learn, columns in the
    order of the classes; the caller's array, not to be modified) and
    ``tol``, the row-sum tolerance of its dtype, for the calibrator's own
    validation; :meth:`validated` is :func:`check_probabilities` of them.
    """

    def __init__(self, X: np.ndarray, tol: float):
        self.X, self.tol, self.shape = X, tol, X.shape

    def validated(self, **options) -> np.ndarray:
        """:func:`check_probabilities` of ``X`` with ``options`` (``X``
        itself if it has no rows)."""
        if not len(self.X):
            return self.X
        return check_probabilities(self.X, tol=self.tol, **options)


def set_proba_floor(calibrator, given, y_index, sample_weight) -> None:
    """For a calibrator that validates the probabilities of ``fit`` itself
    (``_reads = "given probabilities"``) and takes their logs: sets its
    ``proba_floor_`` (see :func:`~skcal.utils._validation.proba_floor`)
    from the :class:`GivenProbabilities` ``given`` and warns about the
    calibration rows whose true class has probability 0, as the validation
    of the other calibrators does."""
    calibrator.proba_floor_ = proba_floor(given.X)
    _warn_zero_true_class(given.X, y_index, sample_weight, calibrator.proba_floor_)


class _LogRows:
    """Rows of the logits of validated probabilities, computed on demand.

    ``logits[rows]`` is what :func:`scores_to_logits` returns for those rows
    of ``X`` with ``input="proba"``: ``log(max(p, eps))`` of the
    renormalised rows (``eps``: the calibrator's ``proba_floor_``). The
    ``input="proba"`` path of a calibrator that maps
    probabilities (``_reads`` of probabilities) needs them only for the rare
    rows of its fallbacks.
    """

    def __init__(self, X: np.ndarray, tol: float, eps: float = PROBA_EPS):
        self._X, self._tol, self._eps = X, tol, eps

    def __getitem__(self, rows) -> np.ndarray:
        return check_probabilities(
            self._X[rows], tol=self._tol, log=True, eps=self._eps
        )


def check_fit_targets(
    estimator, y, n_rows, n_columns, classes, sample_weight, *, weights_checked=False
):
    """Validate the labels and weights given to ``fit``; map labels to columns.

    Shared by score and local calibrators. Requires labels of at least two
    classes with positive weight and warns (``MissingClassWarning``) about
    classes of ``classes_`` that have none. With ``weights_checked``,
    ``sample_weight`` is the output of ``check_sample_weight`` (or None),
    which the caller validated once: it is only made relative here.

    Returns
    -------
    classes_ : ndarray of shape (n_columns,)
    y_index : ndarray of shape (n_rows,), column of each label
    sample_weight : ndarray of shape (n_rows,)
    """
    name = type(estimator).__name__
    if y is None:
        raise ValueError(f"{name} requires y to be passed, but the target y is None.")
    y, sample_weight = np.asarray(as_numpy(y)), as_numpy(sample_weight)
    if y.ndim == 2 and y.shape[1] == 1:
        y = column_or_1d(y, warn=True)
    if y.ndim != 1:
        raise ValueError(
            f"y must be 1-D labels of shape (n_samples,), got shape {y.shape}."
        )
    if len(y) != n_rows:
        raise ValueError(
            f"X and y have inconsistent numbers of samples: X has {n_rows} rows, "
            f"y has {len(y)}."
        )
    classes_, y_index = resolve_classes(y, n_columns, classes)
    if weights_checked and sample_weight is not None:
        sample_weight = sample_weight / sample_weight.max()  # > 0 once checked
    else:
        sample_weight = check_sample_weight(sample_weight, n_rows, relative=True)
    counts = np.bincount(y_index, weights=sample_weight, minlength=len(classes_))
    n_present = int(np.count_nonzero(counts))
    if n_present < 2:
        raise ValueError(
            f"{name} needs calibration samples (with positive weight) from at "
            f"least 2 classes, but y holds only one class "
            f"({np.unique(y).tolist()[:3]}). Calibrating needs both correct and "
            "incorrect predictions: use a larger calibration set."
        )
    if n_present < len(classes_):
        missing = classes_[counts == 0]
        warn(
            f"{missing.size} class(es) have no calibration sample: "
            f"{missing.tolist()[:10]}. Their columns are kept, but nothing is "
            "learned about them; use a calibration set that covers every class "
            "if possible.",
            MissingClassWarning,
        )
    return classes_, y_index, sample_weight


def negative_log_loss(log_proba, y, classes, sample_weight=None) -> float:
    """Negative weighted mean log loss: the ``score`` of every skcal estimator.

    The weighted mean over samples of ``log p_i(y_i)``, the log-probability
    of the true class, floored at ``log(PROBA_EPS)`` (about -708.4): the
    floor at which skcal takes the log of probabilities (``input="proba"``),
    so that a sample given probability 0 costs 708.4 instead of an infinite
    loss, while every probability of a normal float64 keeps its own log
    (capped at 0, against a probability rounded above 1).
    This is ``-sklearn.metrics.log_loss(y, p, labels=classes,
    sample_weight=sample_weight)`` whenever the probabilities of the true
    classes lie in ``[eps, 1 - eps]`` (``eps`` = 2.2e-16), the range to which
    scikit-learn clips them; below ``eps`` scikit-learn's clipping caps the
    loss of a sample at 36.04, which would tie confident mistakes of very
    different sizes.

    Parameters
    ----------
    log_proba : ndarray of shape (n_samples, n_classes)
        Log-probabilities, column ``j`` for ``classes[j]``; ``-inf`` allowed.
    y : array-like of shape (n_samples,)
        True labels, each one of ``classes``.
    classes : ndarray of shape (n_classes,)
        The label of each column.
    sample_weight : array-like of shape (n_samples,), default=None
        Non-negative sample weights.

    Returns
    -------
    float
        At most 0, higher is better.
    """
    check_consistent_length(log_proba, y, sample_weight)
    _, y_index = resolve_classes(y, len(classes), classes)
    sample_weight = check_sample_weight(sample_weight, len(y_index), relative=True)
    log_p = np.clip(log_proba[np.arange(len(y_index)), y_index], _LOG_PROBA_EPS, 0.0)
    return float(np.average(log_p, weights=sample_weight))


def _warn_zero_true_class(X, y_index, sample_weight, floor: float) -> None:
    """An ``InputWarning`` counting the calibration rows (of positive weight)
    whose true class has probability exactly 0 in ``X``."""
    if X.shape[0] == 0:
        return
    true = X[np.arange(X.shape[0]), y_index]
    count = int(np.count_nonzero((true == 0) & (sample_weight > 0)))
    if count:
        warn(
            f"{count} of {X.shape[0]} calibration rows give their true class "
            f"probability 0. Before their log, probabilities are floored at "
            f"{floor:.3g} (half the smallest positive probability of X), so a "
            "0 counts as the model's most confident mistake instead of a loss "
            "of 708 that one row can drive the fit with. To avoid it, pass "
            "logits (input='logits'), or probabilities that are not rounded.",
            InputWarning,
        )


class BaseCalibrator(ProbaOutputMixin, ClassifierMixin, BaseEstimator):
    """Base class for score calibrators.

    A score calibrator learns a map from a classifier's scores ``X`` of shape
    ``(n_samples, n_classes)`` to calibrated probabilities. Subclasses
    implement ``_fit(logits, y_index, sample_weight)`` and
    ``_calibrated_logits(logits)``; this class does everything else.
    Calibrators that compute probabilities directly also implement
    ``_calibrated_proba(logits)`` (their ``_calibrated_logits`` is its log),
    which :meth:`predict_proba` then uses without a softmax.

    **Subclass contract.** Everything a subclass may declare or override
    (each documented where it is defined); nothing else of this class is
    meant to be overridden.

    * Flags: ``_shift_invariant`` (adding a constant to a row of logits
      changes nothing), ``_keeps_argmax`` (the promise about the predicted
      class), ``_needs_torch`` (the fit or prediction runs torch kernels)
      and ``_reads`` (``"logits"``, ``"softmax"``, ``"probabilities"``,
      ``"log-probabilities"`` or ``"given probabilities"``: what the model
      reads of the scores, which decides whether float64 logits are
      shifted, whether ``input="proba"`` reaches the model as probabilities,
      whether those are floored at ``proba_floor_`` before their logs, and
      whether the fit validates them itself).
    * Hooks: ``_fit`` and ``_calibrated_logits`` (required),
      ``_calibrated_proba`` (for a ``_reads`` of probabilities, also of the
      probabilities of ``input="proba"``); ``_wrapper_params`` (the wrapper
      protocol below). Helpers for subclasses, not hooks:
      :func:`fit_logits`, :func:`shifted_rows`, :func:`export_input`,
      :class:`GivenProbabilities` and :func:`set_proba_floor` of this
      module.

    **Input contract.** ``input`` says whether ``X`` holds logits (any real
    scores whose softmax is the model's prediction; log-probabilities are
    valid logits) or probabilities. It is never guessed: a warning is raised
    when ``input="logits"`` but ``X`` looks like probabilities, and
    probabilities are validated (values in [0, 1], rows summing to 1 within
    1e-4, or four units in the last place for float16; rows within
    ``n_classes`` units in the last place of 1 are used as given, others
    divided by their sums) and turned into logits with ``log(max(p,
    proba_floor_))``: ``fit`` sets ``proba_floor_`` to half the smallest
    positive calibration probability (at least 2.2e-308), so an exact 0
    counts as half the model's smallest probability, and warns
    (:class:`~skcal.exceptions.InputWarning`) with the count of calibration
    rows whose true class has probability 0; rows the floor raises are
    renormalised. Calibrators that only bin or sort probabilities, or clip
    them before their logs as their references do (beta, scaling-binning),
    keep 2.2e-308 (``_reads`` of ``"probabilities"`` or ``"given
    probabilities"``). Logits beyond 1e300 in absolute value are refused.

    **Classes.** Column ``j`` of ``X`` is class ``classes_[j]``. Pass
    ``classes`` to give the full label set in column order; without it,
    integer labels all in ``range(n_columns)`` map to their own column, and
    any other labels (strings too) must have exactly ``n_columns`` distinct
    values, mapped in sorted order. A class with no sample in ``y`` keeps its
    column, with a :class:`~skcal.exceptions.MissingClassWarning`.

    **Named columns.** A dataframe whose column names are the classes, in
    any order, is read by name at fit and in every prediction: its columns
    are put in the order of ``classes_`` (names compared with the labels by
    value or text; ``feature_names_in_`` keeps the fit's names, and a later
    frame may list them in another order). Names of only some classes are
    refused, and so is an array without names after a fit on names in
    another order than ``classes_``. Other names (``"logit_0"``, numbered
    ``"0".."K-1"``, pandas' default ``0..K-1``) are read by position. The
    user's frame is not modified.

    **Wrapper protocol.** :class:`~skcal.CalibratedClassifier` fits clones
    of a calibrator on a classifier's scores; before each fit it calls
    ``clone.set_params(**clone._wrapper_params(classes=..., input=...))``,
    which sets ``classes`` (the classifier's ``classes_``) and ``input``
    (``"proba"`` for ``predict_proba``, else ``"logits"``). A subclass that
    names these parameters differently overrides :meth:`_wrapper_params`.

    **Predictions.** :meth:`predict` returns a class of maximal
    :meth:`predict_proba`; among classes tied at the row's maximum (exactly
    equal floats, as step maps give), the one ranked highest by ``X`` (the
    scores passed, logits or probabilities), and among classes tied there
    too, the first column. :meth:`decision_function` and
    :meth:`predict_log_proba` are finite logits whose softmax is
    :meth:`predict_proba`; for calibrators that map probabilities directly
    (``input="proba"``), they are the logs of :meth:`predict_proba` itself.

    **Score.** :meth:`score` returns the *negative mean log loss* (higher is
    better), not accuracy: a calibrator is judged on its probabilities. The
    probability of a true class is floored at 2.2e-308 before its log, as
    probabilities are at the input: the score is ``-log_loss`` of
    :func:`sklearn.metrics.log_loss` wherever that does not clip (at 2.2e-16).
    """

    _parameter_constraints: dict = {
        "input": [StrOptions({"logits", "proba"})],
        "classes": ["array-like", None],
    }
    #: Whether the model sees each row of logits only through the differences
    #: of its entries, so that adding a constant to a row changes nothing.
    #: Such calibrators work on ``X - X.max(axis=1)``: the invariance then
    #: also holds numerically, whatever the size of the constant.
    _shift_invariant = False
    #: Whether the predicted class is the argmax of ``X``: ``"proba"`` (the
    #: argmax of ``X``, the first column among tied maxima, has the largest
    #: calibrated probability, strictly wherever ``X`` ranks it strictly
    #: first, so that :meth:`predict` and ``np.argmax`` of
    #: :meth:`predict_proba` both return it) or None (it can change).
    _keeps_argmax = None
    #: Whether the fit or the prediction runs torch (the kernels of
    #: ``skcal/_torch/``). False: the calibrator imports no torch, which
    #: ``tests/test_torch_free.py`` checks in a fresh process; True:
    #: ``doc/methods.rst`` lists it as needing torch, and its row softmax is
    #: torch's (faster than numpy's, and torch is loaded anyway).
    _needs_torch = False
    #: What the model reads of the scores. ``"logits"``: the logits
    #: themselves. ``"softmax"``: only their softmax (which subtracts the row
    #: maxima itself), so :meth:`predict_proba` passes float64 logits
    #: unshifted to :meth:`_calibrated_proba` (the same probabilities bit for
    #: bit, without the shifted copy; a calibrator that computes from the
    #: logits after all shifts them itself, see :func:`shifted_rows`).
    #: ``"probabilities"``: their softmax too, and with ``input="proba"``
    #: the validated probabilities themselves, without the round trip
    #: through their logs: :meth:`_fit` is given them and
    #: :meth:`_calibrated_proba` maps them (its argument ``P``); they stay
    #: floored at ``PROBA_EPS`` only, without warning, for maps that only
    #: bin or sort probabilities, and for those whose reference clips them
    #: itself before its logs (beta calibration at float64's eps,
    #: scaling-binning at 1e-12), which bounds every row's log already.
    #: ``"log-probabilities"``: the same for a model that takes their logs
    #: (log-odds, the logs as logits), so that they are floored at
    #: ``proba_floor_`` first, with a warning about calibration rows whose
    #: true class has probability 0, as the logits of ``input="proba"`` are
    #: for ``"logits"`` and ``"softmax"``. ``"given probabilities"``: as
    #: ``"probabilities"``, but :meth:`_fit` and :meth:`_calibrated_proba`
    #: are given them unvalidated, as a :class:`GivenProbabilities` that
    #: they validate themselves (not renormalised, or only what they read;
    #: at ``PROBA_EPS``, a fit that takes their logs setting its own
    #: ``proba_floor_`` for them, :func:`set_proba_floor`).
    #: (Any of the last three: a ``_reads`` of probabilities,
    #: :func:`maps_probabilities`.)
    _reads = "logits"

    # ------------------------------------------------------------------ hooks
    def _fit(self, scores: np.ndarray, y_index: np.ndarray, sample_weight):
        """Fit on the validated ``scores`` (see :meth:`_validate_fit_data`).

        The logits, or for a calibrator that reads the probabilities
        (``_reads`` of probabilities) with ``input="proba"``, the validated
        probabilities (C-contiguous float64, the calibrator's own copy, which
        it may overwrite: the renormalised rows of ``X`` floored at
        ``proba_floor_``, the softmax of the logits to a few units in the
        last place), or with ``_reads = "given probabilities"``, a
        :class:`GivenProbabilities`. A fit that needs the logits takes
        :func:`fit_logits` of ``scores``.
        """
        raise NotImplementedError

    def _proba_eps(self) -> float:
        """The floor of the validated probabilities (and of their logs, the
        logits of ``input="proba"``): ``proba_floor_`` (set by ``fit`` with
        ``input="proba"``, see :func:`~skcal.utils._validation.proba_floor`),
        else ``PROBA_EPS``; always ``PROBA_EPS`` for a calibrator that
        validates them itself (``_reads = "given probabilities"``), whose
        ``proba_floor_`` (:func:`set_proba_floor`) floors only the logs it
        takes. Not a hook."""
        if self._reads == "given probabilities":
            return PROBA_EPS
        return getattr(self, "proba_floor_", PROBA_EPS)

    def n_free_parameters(self, n_classes: int, n_features=None) -> float:
        """Free parameters this calibrator fits for ``n_classes`` classes.

        What :class:`~skcal.CalibratorSearchCV`'s small-data guard reads (one
        free parameter needs 10 events, see its Notes). Every skcal
        calibrator states its own count, with these parameters; this
        default, for a subclass that does not, is that of a full affine map
        of the scores, ``C^2 + C``, so that the guard stays on for it.

        Parameters
        ----------
        n_classes : int
            Number of classes (columns of ``X``).
        n_features : int, default=None
            Columns of ``X`` (the classes, for a score calibrator).

        Returns
        -------
        float
        """
        return n_classes * (n_classes + 1)

    def _calibrated_logits(self, logits: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def _calibrated_proba(self, logits, P=None) -> np.ndarray:
        """Calibrated probabilities of the validated ``logits``, or of the
        validated probabilities ``P``.

        The softmax of :meth:`_calibrated_logits`. A subclass whose model
        gives probabilities directly overrides this (one pass less, and no
        round trip through the log); it must not modify ``logits`` and may
        return any float64 array, which the caller copies if needed.

        ``P`` is given only to a calibrator that reads the probabilities
        (``_reads`` of probabilities) with ``input="proba"``, which
        overrides this: ``P`` (C-contiguous float64, the calibrator's own
        copy, which it may overwrite) holds the renormalised rows of ``X``
        floored at ``proba_floor_``, the softmax of the logits it would get
        otherwise, to a few units in the last place; ``logits`` is then an
        object whose ``logits[rows]`` gives those logits for the rows a
        fallback needs (:class:`_LogRows`).
        """
        return _softmax_rows(self, _owned(self._calibrated_logits(logits), logits))

    def _wrapper_params(self, *, classes, input) -> dict:
        """The parameters :class:`~skcal.CalibratedClassifier` sets on a clone.

        The wrapper protocol (see the class docstring): a subclass whose
        parameters have other names overrides this.

        Parameters
        ----------
        classes : ndarray of shape (n_classes,)
            The wrapper's ``classes_``, the label of each score column.
        input : {"logits", "proba"}
            What the classifier's scores are.

        Returns
        -------
        dict
            Keyword arguments for :meth:`set_params`.
        """
        return {"classes": classes, "input": input}

    # ------------------------------------------------------------ validation
    def _score_array(self, X, *, reset: bool) -> tuple[np.ndarray, float]:
        """``X`` as a float32/float64 array checked by scikit-learn, and the
        row-sum tolerance of its original dtype (see :func:`sum_tolerance`).
        A torch tensor becomes a numpy array here, at the edge."""
        if isinstance(X, TopKScores):
            raise TypeError(
                f"{type(self).__name__} does not take TopKScores input; "
                "TemperatureScaling does (fit, predict_proba, ...), and so do "
                "EnsembleTemperatureScaling, TopVersusAll and SMARTCalibrator. "
                "For dense "
                "scores pass X.to_dense() (the rest model's log-probabilities, "
                "refused above max_bytes) with input='logits'."
            )
        X = as_numpy(X)
        if _is_one_dimensional(X):  # skcal's advice before sklearn's reshape
            check_scores_shape(np.asarray(X))
        tol = sum_tolerance(getattr(X, "dtype", None))
        order = None
        if not reset:
            X, order = self._fitted_column_order(X, frame_column_names(X))
        X = validate_data(
            self,
            X,
            reset=reset,
            dtype=[np.float64, np.float32],
            ensure_all_finite=False,
        )
        return (X, tol) if order is None else (X[:, order], tol)

    def _fitted_column_order(self, X, names):
        """For predictions: ``X`` and the order of its columns' classes.

        A dataframe whose columns name the classes (see
        :func:`~skcal.utils._validation.class_column_order`) in another
        order than at fit is first put in the fit's order (the
        ``feature_names_in_`` that scikit-learn checks); an array without
        names is refused where the fit's columns named the classes in
        another order than ``classes_`` (which of the two orders it follows
        cannot be told).
        """
        fitted = getattr(self, "feature_names_in_", None)
        classes = getattr(self, "classes_", None)
        if classes is None:
            return X, None
        fit_order = None
        if fitted is not None:
            fit_order = class_column_order(list(fitted), classes)
        if names is None:
            if fit_order is not None:
                raise ValueError(
                    f"X has no column names, but {type(self).__name__} was fitted "
                    f"on a DataFrame whose columns named the classes in the order "
                    f"{list(fitted)[:10]}, not that of classes_ "
                    f"{classes.tolist()[:10]}: it cannot tell which order X's "
                    "columns follow. Pass a DataFrame whose columns are named "
                    "after the classes (in any order)."
                )
            return X, None
        order = class_column_order(names, classes)
        if (
            fitted is not None
            and (order is not None or fit_order is not None)
            and names != list(fitted)
            and sorted(map(str, names)) == sorted(map(str, fitted))
        ):
            return X[list(fitted)], fit_order  # a new frame: X is not changed
        return X, order

    def _validate_scores(self, X, *, reset: bool, shift=None):
        """Validated logits of ``X`` (see :func:`scores_to_logits`)."""
        X, tol = self._score_array(X, reset=reset)
        return self._logits_of(X, tol, shift=shift)

    def _logits_of(self, X, tol, *, shift=None):
        """:meth:`_validate_scores` of the array of :meth:`_score_array`."""
        if self.input == "logits" and X.dtype != np.float64:
            # float32 logits: every computation in float64, the shift too
            # (float32 and its float64 upcast give the same result)
            X = X.astype(np.float64)
        if shift is None:
            shift = self._shift_invariant
        elif shift == "unless_float64":  # see _reads
            shift = self._shift_invariant and X.dtype != np.float64
        eps = self._proba_eps()
        return scores_to_logits(X, self.input, tol=tol, shift=shift, eps=eps)

    def _validate_fit_data(self, X, y, sample_weight, *, probabilities=False):
        """Validated scores, labels' columns and weights for :meth:`fit`.

        The scores are the logits of :meth:`_validate_scores`, or with
        ``probabilities`` (``input="proba"``) the validated, renormalised
        probabilities floored at ``proba_floor_`` (same checks, same
        messages), or their :class:`GivenProbabilities` (``_reads``). With
        ``input="proba"``, sets ``proba_floor_`` and warns about calibration
        rows whose true class has probability 0 (not for the ``_reads`` that
        keep them as given).
        """
        names, targets = frame_column_names(X), None
        X, tol = self._score_array(X, reset=True)
        floored = self.input == "proba" and self._reads not in _UNFLOORED_READS
        if floored:
            self.proba_floor_ = proba_floor(X)
        if probabilities:
            check_scores_shape(X)
        if names is not None:  # columns named after the classes: their order
            X, targets = self._fit_columns_in_class_order(X, names, y, sample_weight)
        if probabilities and self._reads == "given probabilities":
            logits = GivenProbabilities(X, tol)
        elif probabilities:
            eps = self._proba_eps()
            logits = GivenProbabilities(X, tol).validated(floor=True, eps=eps)
        else:
            logits = self._logits_of(X, tol)
        if targets is None:
            targets = check_fit_targets(
                self, y, logits.shape[0], logits.shape[1], self.classes, sample_weight
            )
        self.classes_, y_index, sample_weight = targets
        if floored:
            _warn_zero_true_class(X, y_index, sample_weight, self.proba_floor_)
        return logits, y_index, sample_weight

    def _fit_columns_in_class_order(self, X, names, y, sample_weight):
        """The validated scores ``X`` of a dataframe with columns ``names``,
        in the order of the classes when the names are the classes (see
        :func:`~skcal.utils._validation.class_column_order`; a new array),
        and :func:`check_fit_targets` of the labels."""
        targets = check_fit_targets(
            self, y, X.shape[0], X.shape[1], self.classes, sample_weight
        )
        order = class_column_order(names, targets[0])
        return (X if order is None else X[:, order]), targets

    # ---------------------------------------------------------------- public
    # the parameters are validated by the decorator; nested estimators and
    # functions get only what the calibrator built from validated values
    @_fit_context(prefer_skip_nested_validation=True)
    @threaded(_work)
    def fit(self, X, y, sample_weight=None):
        """Fit the calibrator on scores ``X`` and labels ``y``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_classes)
            Scores of the classifier being calibrated, read as logits or as
            probabilities according to ``input``. Column ``j`` is class
            ``classes_[j]``; a dataframe whose columns are named after the
            classes is read by name (see the class docstring).
        y : array-like of shape (n_samples,)
            True labels, none missing.
        sample_weight : array-like of shape (n_samples,), default=None
            Non-negative sample weights; the objective is a weighted mean.

        Returns
        -------
        self : object
            The fitted calibrator.
        """
        probabilities = maps_probabilities(self)
        scores, y_index, sample_weight = self._validate_fit_data(
            X, y, sample_weight, probabilities=probabilities
        )
        self._fit(scores, y_index, sample_weight)
        return self

    @lazy_on_dask("proba")
    @threaded(_work)
    def decision_function(self, X) -> np.ndarray:
        """Calibrated logits of shape (n_samples, n_classes).

        Their softmax is :meth:`predict_proba`. Logits are defined up to a
        constant per row; calibrators whose model ignores such a constant
        (``_shift_invariant``) return them computed from ``X - X.max(axis=1)``.
        With ``input="proba"``, calibrators that map the probabilities
        directly (``_reads`` of probabilities) return the logs of
        :meth:`predict_proba` itself (see :meth:`_log_of_proba`): a step map
        could put the probabilities and the softmax of their logs, equal to
        the last place, in different bins.
        """
        check_is_fitted(self)
        if maps_probabilities(self):
            return self._log_of_proba(X)
        logits = self._validate_scores(X, reset=False)
        return _owned(self._calibrated_logits(logits), logits)

    @lazy_on_dask("proba")
    @threaded(_work)
    def predict_proba(self, X) -> np.ndarray:
        """Calibrated probabilities of shape (n_samples, n_classes).

        Column ``j`` is the probability of ``classes_[j]``; rows sum to 1.
        """
        check_is_fitted(self)
        if maps_probabilities(self):
            return self._predict_proba_of_probabilities(X)
        shift = None if self._reads == "logits" else "unless_float64"
        logits = self._validate_scores(X, reset=False, shift=shift)
        return _owned(self._calibrated_proba(logits), logits)

    def _predict_proba_of_probabilities(self, X) -> np.ndarray:
        """:meth:`predict_proba` for ``input="proba"`` (``_reads``).

        The validation of :meth:`_validate_scores` (same checks, same
        messages), whose copy of the probabilities is mapped directly (with
        ``_reads = "given probabilities"``, their
        :class:`GivenProbabilities`).
        """
        X, tol = self._score_array(X, reset=False)
        check_scores_shape(X)
        if X.shape[0] == 0:
            return np.empty(X.shape)
        eps = self._proba_eps()
        if self._reads == "given probabilities":  # validated by the calibrator
            P = GivenProbabilities(X, tol)
        else:
            P = check_probabilities(X, tol=tol, floor=True, eps=eps)
        out = self._calibrated_proba(_LogRows(X, tol, eps), P)
        return np.asarray(out, dtype=np.float64, order="C")

    def _log_of_proba(self, X) -> np.ndarray:
        """``log(predict_proba(X))``, finite: a probability that underflowed
        to 0 has the log of the smallest positive float (about -744.4)."""
        P = self.predict_proba(X)
        return np.log(np.maximum(P, _SMALLEST, out=P), out=P)

    @lazy_on_dask("proba")
    @threaded(_work)
    def predict_log_proba(self, X) -> np.ndarray:
        """Logarithm of :meth:`predict_proba`, computed stably; finite.

        The log-softmax of :meth:`decision_function`, or with
        ``input="proba"`` for calibrators that map the probabilities
        directly, the logs of :meth:`predict_proba` itself (a probability
        that underflowed to 0 has the log of the smallest positive float,
        about -744.4).
        """
        if maps_probabilities(self):
            check_is_fitted(self)
            return self._log_of_proba(X)
        return _softmax_rows(self, self.decision_function(X), log=True)

    @lazy_on_dask("labels")
    @threaded(_work)
    def predict(self, X) -> np.ndarray:
        """Most probable class of each sample, as labels from ``classes_``.

        A class of maximal :meth:`predict_proba`. Among classes tied at the
        row's maximum (exactly equal probabilities, as step maps give), the
        one with the largest score in ``X`` (logits or probabilities, as
        passed); among classes tied in ``X`` too, the first column. For
        calibrators that keep the predicted class (``_keeps_argmax``) this
        is the argmax of ``X``.
        """
        X = as_numpy(X)
        P = self.predict_proba(X)
        index = argmax_ties_by_scores(
            P, lambda rows: self._score_array(X, reset=False)[0][rows]
        )
        return self.classes_[index]

    def score(self, X, y, sample_weight=None) -> float:
        """Negative mean log loss of the calibrated probabilities on ``(X, y)``.

        Unlike ``ClassifierMixin.score`` this is not accuracy: higher is
        better, 0 is perfect.
        """
        check_is_fitted(self)
        return negative_log_loss(
            self.predict_log_proba(X), y, self.classes_, sample_weight
        )

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = False
        # A calibrator cannot beat the ranking of the scores it is given; on
        # the arbitrary features of sklearn's generic checks its accuracy is
        # whatever argmax of those features gives.
        tags.classifier_tags.poor_score = True
        return tags


class BaseLocalCalibrator(ProbaOutputMixin, ClassifierMixin, BaseEstimator):
    """Base class for local calibrators, fitted on embeddings.

    A local calibrator learns region-dependent corrections over the frozen
    representation of a classifier: ``X`` of shape ``(n_samples,
    n_features)`` holds the embeddings (penultimate-layer features) of the
    backbone, never its scores. Subclasses implement
    ``_fit(X, y_index, sample_weight)`` and ``_predict_proba(X)``.

    **The frozen head.** Methods that start from the classifier's own
    predictions (``_uses_head = True``) take its linear head as the
    constructor parameters ``coef`` of shape ``(n_classes, n_features)`` and
    ``intercept`` of shape ``(n_classes,)``, scikit-learn's naming, so that
    the logits are ``X @ coef.T + intercept`` and :meth:`predict_proba`
    needs nothing but ``X``. Row ``j`` of ``coef`` is class ``classes_[j]``
    (same rules as the columns of a score calibrator). Without ``coef`` a
    multinomial :class:`~sklearn.linear_model.LogisticRegression` head is
    fitted on ``(X, y)`` first; that is a self-contained classifier, not
    the post-hoc calibration of an existing model, so pass the backbone's
    head when there is one.

    **Wrapper protocol.** :class:`~skcal.CalibratedClassifier` reads the
    classifier's embeddings and linear head; before fitting a clone of the
    calibrator on them it calls ``clone.set_params(**clone._wrapper_params(
    classes=..., coef=..., intercept=...))``, which sets ``classes`` and,
    for a calibrator whose constructor takes ``coef`` and ``intercept``, the
    head. A subclass that names these parameters differently overrides
    :meth:`_wrapper_params`.

    **Score.** :meth:`score` returns the negative mean log loss (higher is
    better), computed as for score calibrators (see
    :class:`BaseCalibrator`).
    """

    _parameter_constraints: dict = {"classes": ["array-like", None]}
    #: whether the method uses the frozen linear head (``coef``, ``intercept``)
    _uses_head = False
    #: every local calibrator runs torch kernels (see BaseCalibrator's flag)
    _needs_torch = True

    # ------------------------------------------------------------------ hooks
    def _fit(self, X: np.ndarray, y_index: np.ndarray, sample_weight: np.ndarray):
        raise NotImplementedError

    def n_free_parameters(self, n_classes: int, n_features=None) -> float:
        """Free parameters this calibrator fits for ``n_classes`` classes.

        Every skcal local calibrator states its own count; this default, for
        a subclass that does not, is that of a linear head on the
        embeddings, ``C (n_features + 1)``. (:class:`~skcal.CalibratorSearchCV`
        does not hold local calibrators to its parameter count: see its
        Notes.)

        Parameters
        ----------
        n_classes : int
            Number of classes.
        n_features : int, default=None
            Width of the embeddings (``n_classes`` when None).

        Returns
        -------
        float
        """
        n_features = n_classes if n_features is None else n_features
        return n_classes * (n_features + 1)

    def _predict_proba(self, X: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    @classmethod
    def _takes_head(cls) -> bool:
        """Whether the constructor takes a linear head as ``coef``/``intercept``.

        Whether it is used may depend on other parameters (``_uses_head``).
        """
        names = cls._get_param_names()
        return "coef" in names and "intercept" in names

    def _wrapper_params(self, *, classes, coef, intercept) -> dict:
        """The parameters :class:`~skcal.CalibratedClassifier` sets on a clone.

        The wrapper protocol (see the class docstring): a subclass whose
        parameters have other names overrides this.

        Parameters
        ----------
        classes : ndarray of shape (n_classes,)
            The wrapper's ``classes_``, the label of each row of ``coef``.
        coef : ndarray of shape (n_classes, n_features)
            The classifier's linear head, read with the embeddings.
        intercept : ndarray of shape (n_classes,)
            Its bias.

        Returns
        -------
        dict
            Keyword arguments for :meth:`set_params`: ``classes``, and the
            head when the calibrator takes one (:meth:`_takes_head`).
        """
        params = {"classes": classes}
        if self._takes_head():
            params.update(coef=coef, intercept=intercept)
        return params

    # ------------------------------------------------------------ validation
    def _validate_embeddings(self, X, *, reset: bool) -> np.ndarray:
        X = validate_data(
            self,
            as_numpy(X),
            reset=reset,
            dtype=[np.float64, np.float32],
            ensure_all_finite=False,
        )
        check_embeddings(X)
        return X

    def _head_columns(self, n_features: int):
        """Validated ``(coef, intercept)`` as float64, or None without coef."""
        if getattr(self, "coef", None) is None:
            if getattr(self, "intercept", None) is not None:
                raise ValueError(
                    "intercept was given without coef; pass the head's coef of "
                    "shape (n_classes, n_features) too."
                )
            return None
        coef = np.array(self.coef, dtype=np.float64)
        if coef.ndim != 2 or coef.shape[0] < 2 or coef.shape[1] != n_features:
            raise ValueError(
                f"coef must be the head's weight matrix of shape (n_classes, "
                f"n_features) = (>=2, {n_features}) for X with {n_features} "
                f"features; got shape {coef.shape}. For a binary head with one "
                "row w, pass np.vstack([-w, w]) / 2."
            )
        check_finite(coef, "coef")
        if self.intercept is None:
            intercept = np.zeros(coef.shape[0])
        else:
            intercept = np.array(self.intercept, dtype=np.float64).reshape(-1)
            if intercept.shape != (coef.shape[0],):
                raise ValueError(
                    f"intercept must have shape (n_classes,) = ({coef.shape[0]},) "
                    f"to match coef; got shape {np.shape(self.intercept)}."
                )
            check_finite(intercept[None, :], "intercept")
        return coef, intercept

    def _fit_head(self, X, y_index, sample_weight):
        from sklearn.linear_model import LogisticRegression

        n_classes = len(self.classes_)
        present = np.flatnonzero(np.bincount(y_index, minlength=n_classes))
        lr = LogisticRegression(max_iter=1000).fit(
            X, y_index, sample_weight=sample_weight
        )
        coef = np.zeros((n_classes, X.shape[1]))
        intercept = np.full(n_classes, -50.0)  # classes without samples
        if len(lr.classes_) == 2:
            coef[present] = np.vstack([-lr.coef_[0], lr.coef_[0]]) / 2
            intercept[present] = np.array([-1.0, 1.0]) * lr.intercept_[0] / 2
        else:
            coef[present] = lr.coef_
            intercept[present] = lr.intercept_
        return coef, intercept

    def head_logits(self, X) -> np.ndarray:
        """Logits of the frozen head, ``X @ coef_.T + intercept_``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Embeddings.

        Returns
        -------
        ndarray of shape (n_samples, n_classes)
        """
        check_is_fitted(self)
        if not self._uses_head:
            raise AttributeError(f"{type(self).__name__} does not use a head.")
        X = self._validate_embeddings(X, reset=False)
        return self._logits(X)

    def _logits(self, X: np.ndarray) -> np.ndarray:
        from ._torch.kernels import affine_rows  # a head: the torch calibrators

        return affine_rows(X, self.coef_, self.intercept_)

    # ---------------------------------------------------------------- public
    # the parameters are validated by the decorator; nested estimators and
    # functions get only what the calibrator built from validated values
    @_fit_context(prefer_skip_nested_validation=True)
    @threaded(_work)
    def fit(self, X, y, sample_weight=None):
        """Fit the calibrator on embeddings ``X`` and labels ``y``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Embeddings of the calibration samples.
        y : array-like of shape (n_samples,)
            True labels.
        sample_weight : array-like of shape (n_samples,), default=None
            Non-negative sample weights.

        Returns
        -------
        self : object
            The fitted calibrator.
        """
        X = self._validate_embeddings(X, reset=True)
        head = self._head_columns(X.shape[1]) if self._uses_head else None
        if head is not None:
            n_columns = head[0].shape[0]
        elif self.classes is not None:
            n_columns = len(np.atleast_1d(self.classes))
        else:
            n_columns = 0 if y is None else len(np.unique(check_labels(y)))
        self.classes_, y_index, sample_weight = check_fit_targets(
            self, y, X.shape[0], n_columns, self.classes, sample_weight
        )
        if self._uses_head:
            if head is None:
                head = self._fit_head(X, y_index, sample_weight)
            self.coef_, self.intercept_ = head
        self._fit(X, y_index, sample_weight)
        return self

    @lazy_on_dask("proba")
    @threaded(_work)
    def predict_proba(self, X) -> np.ndarray:
        """Calibrated probabilities of shape (n_samples, n_classes).

        Column ``j`` is the probability of ``classes_[j]``; rows sum to 1.
        """
        check_is_fitted(self)
        X = self._validate_embeddings(X, reset=False)
        return np.asarray(self._predict_proba(X), dtype=np.float64)

    @lazy_on_dask("proba")
    @threaded(_work)
    def predict_log_proba(self, X) -> np.ndarray:
        """Logarithm of :meth:`predict_proba` (``-inf`` where it is 0)."""
        with np.errstate(divide="ignore"):
            return np.log(self.predict_proba(X))

    @lazy_on_dask("labels")
    @threaded(_work)
    def predict(self, X) -> np.ndarray:
        """Most probable class of each sample, as labels from ``classes_``."""
        proba = self.predict_proba(X)
        return self.classes_[np.argmax(proba, axis=1)]

    def score(self, X, y, sample_weight=None) -> float:
        """Negative mean log loss of the calibrated probabilities on ``(X, y)``.

        Unlike ``ClassifierMixin.score`` this is not accuracy: higher is
        better, 0 is perfect.
        """
        check_is_fitted(self)
        return negative_log_loss(
            self.predict_log_proba(X), y, self.classes_, sample_weight
        )

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = False
        return tags
