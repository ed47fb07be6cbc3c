"""The shared base of the one-vs-rest calibrators.

A one-vs-rest calibrator fits one binary map per class, of that class's
score (its probability, or its log-odds) against ``y == k``, and
renormalises the mapped rows to sum to 1. :class:`OneVsRestCalibrator`
holds what they share: the fit over the classes with a calibration
sample, the mean map for a class without one, the convergence warning,
the renormalisation and the log of the probabilities as calibrated
logits. Platt scaling, beta calibration, isotonic regression and
histogram binning are its subclasses.
"""

from __future__ import annotations

import warnings
from abc import ABCMeta, abstractmethod

import numpy as np
from sklearn.base import clone
from sklearn.utils.validation import check_is_fitted

from ..base import BaseCalibrator, fit_logits
from ..exceptions import AccuracyDropWarning, ConvergenceWarning
from ..utils._constants import FLOOR_BEFORE_LOG
from ..utils._proba import argmax_ties_by_scores
from ..utils._softmax import (
    normalize_rows_inplace,
    row_sum,
    softmax_inplace,
    softmax_into,
)
from ..utils._validation import paired_mean_difference
from ..utils._warnings import warn

__all__ = [
    "PROBA_FLOOR",
    "ConfidenceMapMixin",
    "OneVsRestCalibrator",
    "map_transposed",
    "held_out_folds",
    "present_classes",
    "renormalize_inplace",
    "stratified_folds",
]

#: One-vs-rest values are floored here before the rows are renormalised: a
#: class never seen positive in a region would otherwise get probability 0
#: and an infinite log loss (scikit-learn's log_loss clips at ~2e-16).
PROBA_FLOOR = 1e-12
#: An accuracy drop is material (an AccuracyDropWarning) beyond one point
#: and two standard errors of the paired difference: the criterion of the
#: local calibrators' warning.
_ACCURACY_DROP_MIN = 0.01
_ACCURACY_DROP_SE = 2.0
#: The drop is measured out of sample: the maps are fitted again on all but
#: one of this many stratified folds of the calibration rows, and judged on
#: the fold left out (a fit judged on its own rows keeps their top class
#: better than new rows'). Three folds: maps fitted on half the rows are
#: coarser than the fit's and made the check warn of test losses of half a
#: point or less (synthetic problems of 3 to 10 classes); on problems of more
#: than _HELD_OUT_ENTRIES scores (rows times classes), two folds, which
#: cost half as much. The folds are drawn with this seed.
_HELD_OUT_FOLDS = 3
_HELD_OUT_FOLDS_LARGE = 2
_HELD_OUT_ENTRIES = 1_000_000
_HELD_OUT_SEED = 0
#: Rows per block of the transposed copy in :func:`map_transposed`.
_TRANSPOSE_ROWS = 512


def present_classes(y_index, sample_weight, n_classes: int) -> np.ndarray:
    """Whether each class has a calibration sample of positive weight."""
    return np.bincount(y_index[sample_weight > 0], minlength=n_classes) > 0


def probabilities_of(logits, P=None) -> np.ndarray:
    """The probabilities that the one-vs-rest maps read: ``P`` if given
    (the validated probabilities of ``input="proba"``), else a new array
    holding the softmax of ``logits`` (see
    ``BaseCalibrator._calibrated_proba``)."""
    return softmax_into(logits, np.empty(logits.shape)) if P is None else P


def renormalize_inplace(Q: np.ndarray, logits) -> np.ndarray:
    """Rows of ``Q`` floored at :data:`PROBA_FLOOR` and divided by their sums.

    ``Q`` (C-contiguous float64, overwritten and returned) holds the
    one-vs-rest values of the rows of ``logits``; a row whose values are
    all 0 keeps its original probabilities instead of a 0/0, so their
    softmax is computed for those rows alone, and the row sums are only
    looked at when some value is 0. ``logits`` may be any object whose
    ``logits[rows]`` gives those rows (see
    ``BaseCalibrator._calibrated_proba``).
    """
    empty = None
    if Q.size and not Q.min() > 0:
        empty = np.flatnonzero(row_sum(Q) <= 0)
    normalize_rows_inplace(Q, PROBA_FLOOR)
    if empty is not None and empty.size:
        Q[empty] = softmax_into(logits[empty], np.empty((empty.size, Q.shape[1])))
    return Q


def map_transposed(Q: np.ndarray, logits, map_column) -> np.ndarray:
    """One-vs-rest values of the softmax ``Q``, renormalised, in place.

    ``map_column(k, p)`` maps the probabilities ``p`` of class ``k``. The
    columns of ``Q`` are copied into the rows of a transposed array (by
    blocks of rows, whose cache lines serve the next columns), so that each
    map reads contiguous memory (a strided column costs more than the
    copy); the values are floored as they are written back, and divided by
    their row sums as they are transposed into ``Q`` (C-contiguous float64,
    returned): :func:`renormalize_inplace`'s result, computed in that
    layout (``logits`` as there).
    """
    n, n_classes = Q.shape
    if Q.size == 0:
        return Q
    QT = np.empty((n_classes, n))
    for start in range(0, n, _TRANSPOSE_ROWS):
        QT[:, start : start + _TRANSPOSE_ROWS] = Q[start : start + _TRANSPOSE_ROWS].T
    for k in range(n_classes):
        np.maximum(map_column(k, QT[k]), PROBA_FLOOR, out=QT[k])
    sums = QT.sum(axis=0)
    # a row whose values are all 0 keeps its softmax: its floored values all
    # equal the floor, so only rows of so small a sum are looked at again,
    # on their values before the floor (Q still holds the softmax)
    rows = np.flatnonzero(sums <= 2 * n_classes * PROBA_FLOOR)
    if rows.size:
        positive = [map_column(k, Q[rows, k]) > 0 for k in range(n_classes)]
        rows = rows[~np.any(positive, axis=0)]
    np.divide(QT.T, sums[:, None], out=Q)
    if rows.size:
        Q[rows] = softmax_into(logits[rows], np.empty((rows.size, n_classes)))
    return Q


def held_out_folds(shape) -> int:
    """The number of folds of the held-out accuracy check of scores of
    ``shape`` (rows, classes): 3, or 2 beyond a million scores."""
    return _HELD_OUT_FOLDS if shape[0] * shape[1] <= _HELD_OUT_ENTRIES else (
        _HELD_OUT_FOLDS_LARGE
    )  # fmt: skip


def stratified_folds(y_index, n_folds: int, seed: int = _HELD_OUT_SEED) -> np.ndarray:
    """The fold (``0 .. n_folds - 1``) of each row: the rows of each class, in
    a random order drawn with ``seed``, dealt to the folds in turn (one
    class's deal continues where the previous class's stopped), so that
    every class is spread evenly over the folds."""
    y_index = np.asarray(y_index)
    order = np.lexsort((np.random.default_rng(seed).random(y_index.size), y_index))
    folds = np.empty(y_index.size, dtype=np.intp)
    folds[order] = np.arange(y_index.size) % n_folds
    return folds


class _LogsOf:
    """``logits[rows]``: the logs of rows of floored probabilities ``P``
    (what the renormalisation needs for its rare all-zero rows)."""

    def __init__(self, P: np.ndarray):
        self._P = P

    def __getitem__(self, rows) -> np.ndarray:
        return np.log(self._P[rows])


def _check_confidence(confidence, method: str) -> np.ndarray:
    """The declared input of the one-map protocol: a 1-D array of
    probabilities in [0, 1] (float64; the caller's array itself if it is
    one, never modified)."""
    c = np.asarray(confidence, dtype=np.float64)
    if c.ndim != 1 or not (c.size == 0 or (c.min() >= 0.0 and c.max() <= 1.0)):
        low, high = (np.nanmin(c), np.nanmax(c)) if c.size else (0.0, 0.0)
        raise ValueError(
            f"{method} expects confidence as a 1-D array of probabilities in "
            f"[0, 1] (the probability of class 1 of a binary problem), but got "
            f"shape {c.shape} with values in [{low:.6g}, {high:.6g}] (NaN counts "
            "as outside). Pass the top-label confidence, e.g. "
            "P.max(axis=1) of probabilities P, not logits."
        )
    return c


def _check_weights(sample_weight, n: int) -> np.ndarray:
    """Non-negative, finite float64 weights of length ``n``, not all 0 (ones
    if None): the checks of :func:`~skcal.utils._validation.check_sample_weight`
    in a few passes (scikit-learn's costs a fit of one map on 20,000 rows)."""
    if sample_weight is None:
        return np.ones(n)
    w = np.asarray(sample_weight, dtype=np.float64)
    if w.shape != (n,) or not (n == 0 or (w.min() >= 0 and np.isfinite(w.max()))):
        raise ValueError(
            f"fit_confidence expects sample_weight as {n} non-negative, finite "
            f"weights, one per confidence, but got shape {w.shape}"
            + (f" with values in [{w.min():.6g}, {w.max():.6g}]" if w.size else "")
            + ". Pass None for equal weights."
        )
    if n and not w.any():
        raise ValueError("Sample weights must contain at least one non-zero number.")
    return w


class ConfidenceMapMixin:
    """The one-map protocol of a one-vs-rest calibrator: a binary problem fitted
    and mapped from one column, the probability ``p`` of class 1.

    For the binary problem of the columns ``[1 - p, p]``, the calibrator
    fits the map ``f`` of ``p`` alone and stores its mirror image for class
    0 (the fit of ``1 - p``, in exact arithmetic): the top-label reduction's
    one map of the confidence (Le Coz et al. 2024), which needs neither the
    other classes' sums nor a second fit. :class:`TopVersusAll` calls
    :meth:`fit_confidence` and :meth:`predict_confidence` on a calibrator
    that has them, and ``fit`` / ``predict_proba`` on any other. The host
    class implements ``_fit_mirrored(p, positive, sample_weight)`` and
    ``_map_column(k, p)``.
    """

    def fit_confidence(self, confidence, correct, sample_weight=None):
        """Fit the one map of the confidence of a binary problem.

        Parameters
        ----------
        confidence : array-like of shape (n_samples,)
            The probability of class 1 (for the top label: the confidence,
            the probability of the predicted class), in [0, 1].
        correct : array-like of shape (n_samples,)
            1 where class 1 is the label (the prediction is right), else 0.
        sample_weight : array-like of shape (n_samples,), default=None
            Non-negative weights.

        Returns
        -------
        self : object
            Fitted on the binary problem of the columns ``[1 - p, p]``
            (``classes_`` is ``[0, 1]``, ``n_features_in_`` 2): its
            ``predict_proba`` of those two columns maps ``p`` by the map
            of ``p`` and ``1 - p`` by the mirror image.

        Examples
        --------
        >>> import numpy as np
        >>> from skcal import IsotonicCalibrator
        >>> p = np.array([0.5, 0.6, 0.7, 0.8, 0.9, 0.95])
        >>> iso = IsotonicCalibrator().fit_confidence(p, [0, 1, 0, 1, 1, 1])
        >>> iso.predict_confidence(np.array([0.5, 0.65, 0.9]))  # 0, 1, 0 pooled
        array([0. , 0.5, 1. ])
        """
        self._validate_params()
        c = _check_confidence(confidence, "fit_confidence")
        right = np.asarray(correct, dtype=np.float64)
        if right.shape != c.shape or not ((right == 0.0) | (right == 1.0)).all():
            raise ValueError(
                f"fit_confidence expects correct as {c.size} values in {{0, 1}}, "
                f"one per confidence, but got shape {right.shape}. Pass "
                "(top == y).astype(float)."
            )
        weight = _check_weights(sample_weight, c.size)
        self._fit_mirrored(c, right, weight)
        self.classes_, self.n_features_in_ = np.arange(2), 2
        return self

    def predict_confidence(self, confidence) -> np.ndarray:
        """The calibrated probability of class 1: the one map's value at
        each ``confidence`` (in [0, 1]), clipped to [0, 1].

        Parameters
        ----------
        confidence : array-like of shape (n_samples,)
            Probabilities of class 1, as given to :meth:`fit_confidence`.

        Returns
        -------
        ndarray of shape (n_samples,)
        """
        check_is_fitted(self)
        c = _check_confidence(confidence, "predict_confidence")
        return np.clip(self._map_column(1, c), 0.0, 1.0)

    def confidence_to_torch(self):
        """:meth:`predict_confidence` as a torch module: a ``(n, 1)`` column
        of confidences to their calibrated values (float64 inside, the
        input's dtype out), with an ``onnx`` method as the blocks of
        :func:`skcal.export.to_torch`; for :meth:`TopVersusAll.to_torch`.

        Returns
        -------
        torch.nn.Module

        Examples
        --------
        >>> import numpy as np, torch
        >>> from skcal import IsotonicCalibrator
        >>> p = np.array([0.5, 0.6, 0.7, 0.8, 0.9, 0.95])
        >>> iso = IsotonicCalibrator().fit_confidence(p, [0, 1, 0, 1, 1, 1])
        >>> module = iso.confidence_to_torch()
        >>> module(torch.tensor([[0.5], [0.65], [0.9]], dtype=torch.float64))[:, 0]
        tensor([0.0000, 0.5000, 1.0000], dtype=torch.float64)
        """
        from .._torch._export_tva import ConfidenceMap

        check_is_fitted(self)
        return ConfidenceMap(self._torch_map()[0])


class OneVsRestCalibrator(BaseCalibrator, metaclass=ABCMeta):
    """A binary map of each class's score, then row renormalisation.

    Subclasses implement:

    * ``_fit_class(k, scores, positive, sample_weight) -> bool``: fit and
      store the map of class ``k`` from its scores (a contiguous array),
      whether each row is of class ``k`` and the weights; return whether
      the fit converged;
    * ``_fill_absent(present)``: give the classes without a calibration
      sample (``~present``) the mean of the other classes' maps: nothing
      was learned about them, so they are calibrated as the average class,
      where a fit to their all-negative labels would give them probability
      0;
    * ``_map_column(k, p)``: the map of class ``k`` on probabilities ``p``
      (the default prediction path maps the softmax of the logits);

    and may override ``_class_scores(logits)`` (the scores the maps read;
    the softmax by default, or with ``input="proba"`` the validated
    probabilities; a subclass that reads something else is fitted on the
    logs of ``input="proba"``) and the prediction paths. A fit that did not
    converge for some classes raises a ``ConvergenceWarning`` naming them; a
    fit whose probabilities are materially less accurate than the input out
    of sample (maps fitted again on stratified folds of the calibration
    rows, each judged on the fold left out; three classes or more) raises
    an :class:`~skcal.exceptions.AccuracyDropWarning` with both held-out
    accuracies. The check costs about two more fits of the maps (one beyond
    a million scores, rows times classes).
    """

    _shift_invariant = True
    #: the maps read the softmax, or with ``input="proba"`` the validated
    #: probabilities (a subclass whose ``_class_scores`` reads the logits
    #: fits on their logs, :func:`~skcal.base.fit_logits`); the maps bin or
    #: sort the probabilities, or clip them before their logs as their
    #: references do (a subclass that takes logs of the floored
    #: probabilities, as Platt scaling, reads ``"log-probabilities"``)
    _reads = "probabilities"
    #: appended to the ConvergenceWarning of classes whose fit did not converge
    _unconverged_hint = ""

    def _class_scores(self, logits: np.ndarray) -> np.ndarray:
        return softmax_inplace(np.array(logits, dtype=np.float64))

    @classmethod
    def _scores_are_softmax(cls) -> bool:
        """Whether the maps read the softmax (``_class_scores`` not
        overridden)."""
        return cls._class_scores is OneVsRestCalibrator._class_scores

    def _fit(self, scores, y_index, sample_weight):
        if self.input == "proba" and self._scores_are_softmax():
            self._fit_proba(scores, y_index, sample_weight)
            return
        logits = fit_logits(self, scores)
        scores = self._class_scores(logits)
        self._fit_scores(scores, y_index, sample_weight)
        if logits.shape[1] > 2 and len(logits):
            P = scores if self._scores_are_softmax() else softmax_inplace(
                np.array(logits, dtype=np.float64)
            )  # fmt: skip
            self._warn_accuracy_drop(scores, P, y_index, sample_weight, logits)

    def _fit_proba(self, P, y_index, sample_weight):
        """With ``input="proba"``, the maps of the softmax are fitted on the
        validated probabilities ``P`` themselves (no round trip through
        logs)."""
        self._fit_scores(P, y_index, sample_weight)
        if P.shape[1] > 2 and len(P):
            self._warn_accuracy_drop(P, P, y_index, sample_weight, None)

    def _calibrated_rows(self, logits, P, rows):
        """The calibrated probabilities of the calibration rows ``rows`` (an
        array of indices: a copy), from their ``logits``, or where those are
        None from their validated probabilities ``P``."""
        if logits is not None:
            return self._calibrated_proba(logits[rows])
        given = P[rows]
        return self._calibrated_proba(_LogsOf(given), given.copy())

    def _held_out_proba(self, scores, y_index, weights, calibrated):
        """The cross-fitted calibrated probabilities of the calibration rows
        (each row's from maps fitted without its fold, by a clone of this
        calibrator through its own ``_fit_scores``; their warnings are
        dropped), with the number of folds; None where a fold would leave no
        weight to fit on. ``calibrated``: the ``(logits, P)`` of
        :meth:`_calibrated_rows`."""
        n_folds = held_out_folds(scores.shape)
        folds = stratified_folds(y_index, n_folds)
        twin = clone(self)
        if "verbose" in twin.get_params():
            twin.set_params(verbose=0)
        held_out = np.empty(scores.shape)
        columns = np.ascontiguousarray(scores.T)  # one transpose for all folds
        for fold in range(n_folds):
            train, test = folds != fold, np.flatnonzero(folds == fold)
            if not (weights[train] > 0).any() or not test.size:
                return None
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                # the rows of the fold as the transpose of contiguous columns,
                # which _fit_scores reads without copying them again
                train_scores = columns[:, train].T
                twin._fit_scores(train_scores, y_index[train], weights[train])
            held_out[test] = twin._calibrated_rows(*calibrated, test)
        return held_out, n_folds

    def _warn_accuracy_drop(self, scores, P, y_index, sample_weight, logits):
        """:class:`~skcal.exceptions.AccuracyDropWarning` when the calibrated
        probabilities are materially less accurate than their input
        probabilities ``P``, out of sample.

        The one-vs-rest maps rank the classes of a row by their own
        calibrated values: coarse maps of many classes (equal-mass bins of
        ten values each, with a few per cent of positives per class) give
        unrelated classes similar values and move the top class. Maps judged
        on the rows they were fitted on keep those rows' top class better
        than new rows' (histogram binning on 45 classes: no loss there, 1.3
        points on the test set), so the drop is cross-fitted: the maps are
        fitted again, by a clone of the calibrator, on all but one of three
        stratified folds of the calibration rows (drawn with a fixed seed)
        and judged on the fold left out, for each fold; where a fold would
        leave no row of positive weight to fit on, on the calibration rows
        themselves. The fitted maps are those of the whole calibration set,
        as without the check. The check costs about two more fits (three
        fits of two thirds of the rows); beyond a million scores (rows times
        classes) it is bounded to two folds, about one more fit (two fits of
        half the rows), whose coarser maps make it warn a little more
        readily, and the message leaves out the accuracy of the calibration
        rows themselves (one more prediction). Both
        predictions follow the tie rule of :meth:`predict`. Material: a
        drop of more than one point and two standard errors of the paired
        difference (as for the local calibrators). Problems of three
        classes or more only (a binary problem's top class is one
        threshold, and TopVersusAll fits these maps on one). ``logits``: the
        calibration rows' logits, or None where the maps read the validated
        probabilities ``P``.
        """
        weights = np.asarray(sample_weight, dtype=np.float64)
        calibrated, every_row = (logits, P), np.arange(len(P))
        found = self._held_out_proba(scores, y_index, weights, calibrated)
        in_sample = n_folds = None
        if found is None:
            held_out = in_sample = self._calibrated_rows(*calibrated, every_row)
        else:
            held_out, n_folds = found
        before = argmax_ties_by_scores(P, P)
        right_before = before == y_index
        right_after = argmax_ties_by_scores(held_out, P) == y_index
        drop, se = paired_mean_difference(right_before - 1.0 * right_after, weights)
        if not drop > max(_ACCURACY_DROP_MIN, _ACCURACY_DROP_SE * se):
            return
        moved = right_in_sample = None
        if in_sample is None and P.size <= _HELD_OUT_ENTRIES:
            in_sample = self._calibrated_rows(*calibrated, every_row)
        if in_sample is not None:  # (not beyond a million scores: its cost)
            after = argmax_ties_by_scores(in_sample, P)
            right_in_sample = after == y_index
            moved = np.average(before != after, weights=weights)
        self._accuracy_drop_message(
            P.shape[1], weights, right_before, right_after, right_in_sample,
            (drop, se, moved, n_folds),
        )  # fmt: skip

    def _accuracy_drop_message(
        self, n_classes, weights, right_before, right_after, right_in_sample, drop
    ):
        """Warn the :class:`~skcal.exceptions.AccuracyDropWarning`: the
        held-out accuracies before and after (``right_after``), the
        ``drop``, its standard error and the share of the calibration rows
        whose top class the fitted maps move, with the accuracy there
        (``right_in_sample``; None: left out), and the number of folds
        (None: the calibration rows themselves)."""
        drop, se, moved, n_folds = drop

        def accuracy(right):
            return f"{np.average(right, weights=weights):.4f}"

        if n_folds is None:  # no fold held out: the in-sample accuracies
            what = "accuracy on the calibration rows"
            how = (
                "the calibration rows, judged on themselves: too few rows of "
                "positive weight to hold a fold out"
            )
        else:
            what = "held-out accuracy"
            how = (
                f"all but one of {n_folds} stratified folds of the calibration "
                "rows, each judged on the fold left out"
            )
        in_sample = ""
        if right_in_sample is not None:
            there = ""  # without folds: the accuracies named first
            if n_folds is not None:
                there = (
                    f"; accuracy there {accuracy(right_before)} -> "
                    f"{accuracy(right_in_sample)}"
                )
            in_sample = (
                f"Fitted on all the rows, it changes the top class of {moved:.1%} "
                f"of the calibration rows{there}. "
            )
        warn(
            f"{type(self).__name__} loses accuracy: {what} "
            f"{accuracy(right_before)} -> {accuracy(right_after)} (a drop of "
            f"{drop:.4f}, standard error {se:.4f}; maps fitted on {how}). "
            f"{in_sample}Its "
            f"one-vs-rest maps rank the {n_classes} classes by their own "
            "calibrated values, and coarse maps of many classes give unrelated "
            "classes similar values. To keep the classifier's top class, "
            "calibrate the top-label confidence instead: TopVersusAll(<this "
            "calibrator>), ScalingBinningCalibrator(mode='top_label') or "
            "TemperatureScaling().",
            AccuracyDropWarning,
        )

    def _fit_scores(self, scores, y_index, sample_weight):
        """Fit the map of each class on its column of ``scores``."""
        n_classes = scores.shape[1]
        present = present_classes(y_index, sample_weight, n_classes)
        self._start_maps(n_classes)
        columns = np.ascontiguousarray(scores.T)  # contiguous columns
        failed = [
            int(k)
            for k in np.flatnonzero(present)
            if not self._fit_class(k, columns[k], y_index == k, sample_weight)
        ]
        if not present.all():
            self._fill_absent(present)
        if failed:
            warn(
                f"{type(self).__name__}: Newton's method did not converge for "
                f"classes {failed[:10]} in 100 iterations{self._unconverged_hint}.",
                ConvergenceWarning,
            )

    @abstractmethod
    def _start_maps(self, n_classes: int) -> None:
        """Allocate the fitted attributes of ``n_classes`` maps."""

    @abstractmethod
    def _fit_class(self, k, scores, positive, sample_weight) -> bool:
        """Fit and store the map of class ``k``; whether it converged."""

    @abstractmethod
    def _fill_absent(self, present: np.ndarray) -> None:
        """Give the classes of ``~present`` the mean of the others' maps."""

    def _map_column(self, k: int, p: np.ndarray) -> np.ndarray:
        """The map of class ``k`` on its probabilities ``p`` (what the default
        prediction path calls; a subclass with its own path need not)."""
        raise NotImplementedError

    def _calibrated_proba(self, logits, P=None):
        P = probabilities_of(logits, P)
        self._map_columns(P)
        return renormalize_inplace(P, logits)

    def _calibrated_logits(self, logits):
        return np.log(np.maximum(self._calibrated_proba(logits), FLOOR_BEFORE_LOG))

    def predict_log_proba(self, X) -> np.ndarray:
        """Logarithm of :meth:`predict_proba`, of the same probabilities.

        Finite: the one-vs-rest values are floored at :data:`PROBA_FLOOR`
        before the rows are renormalised. Taken from :meth:`predict_proba`
        rather than from the logits, because a step map can put two inputs
        that differ in the last place (given probabilities, and the softmax
        of their logs) in different bins.
        """
        return np.log(self.predict_proba(X))

    def to_torch(self):
        """The fitted maps as a torch module: scores to calibrated probabilities.

        The probabilities of the scores (their softmax, or the validated
        probabilities themselves with ``input="proba"``), each class's map,
        and the renormalisation of the rows (values floored at 1e-12; a row
        whose values are all 0 keeps its probabilities), computed as
        :meth:`predict_proba` computes them, in float64 whatever the input's
        dtype. See :func:`skcal.export.to_torch` and
        :func:`skcal.export.to_onnx`.

        With ``input="logits"``, a softmax probability that lands exactly on
        a bin edge (a test row whose logits equal a calibration row's, under
        quantile bins) can fall in the neighbouring bin: numpy's, torch's
        and onnxruntime's ``exp`` differ in the last place on some entries
        (one row of 4,000 on the letter task). Scaling-binning's ``q``
        (``log``, ``log1p``, ``expit``) can likewise cross an edge it is
        within a few units in the last place of.

        Returns
        -------
        torch.nn.Module

        Examples
        --------
        >>> import numpy as np, torch
        >>> from skcal import IsotonicCalibrator
        >>> from skcal.utils._testing import make_miscalibrated_logits
        >>> X, y = make_miscalibrated_logits(300, 3, random_state=0)
        >>> iso = IsotonicCalibrator().fit(X, y)
        >>> P = iso.to_torch()(torch.from_numpy(X)).numpy()
        >>> bool(np.abs(P - iso.predict_proba(X)).max() < 1e-12)
        True
        """
        from .._torch._export import Chain
        from .._torch._export_piecewise import OneVsRest, Probabilities

        check_is_fitted(self)
        mapping, reads_scores = self._torch_map()
        n_classes = int(self.n_features_in_)
        scores = Probabilities(self.input, n_classes, self._proba_eps())
        return Chain(OneVsRest(scores, mapping, PROBA_FLOOR, reads_scores))

    def _torch_map(self):
        """The torch block of the per-class maps (see :meth:`to_torch`), and
        whether it reads the scores (else their probabilities)."""
        raise NotImplementedError

    def _map_columns(self, P):
        """Replace each column ``P[:, k]`` by its one-vs-rest value, in place."""
        for k in range(P.shape[1]):
            P[:, k] = self._map_column(k, P[:, k])
