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

from abc import ABCMeta, abstractmethod

import numpy as np
from sklearn.utils.validation import check_is_fitted

from ..base import BaseCalibrator
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
    "present_classes",
    "renormalize_inplace",
]

#: One-vs-rest values are floored here before the rows are renormalised: a
#: class never seen positive in a region would otherwise get probability 0
#: and an infinite log loss (scikit-learn's log_loss clips at ~2e-16).
PROBA_FLOOR = 1e-12
#: An accuracy drop on the calibration rows is material (an
#: AccuracyDropWarning) beyond one point and two standard errors of the
#: paired difference: the criterion of the local calibrators' warning.
_ACCURACY_DROP_MIN = 0.01
_ACCURACY_DROP_SE = 2.0
#: Rows per block of the transposed copy in :func:`map_transposed`.
_TRANSPOSE_ROWS = 512


def present_classes(y_index, sample_weight, n_classes: int) -> np.ndarray:
    """Whether each class has a calibration sample of positive weight."""
    return np.bincount(y_index[sample_weight > 0], minlength=n_classes) > 0


def renormalize_inplace(Q: np.ndarray, logits) -> np.ndarray:
    """Rows of ``Q`` floored at :data:`PROBA_FLOOR` and divided by their sums.

    ``Q`` (C-contiguous float64, overwritten and returned) holds the
    one-vs-rest values of the rows of ``logits``; a row whose values are
    all 0 keeps its original probabilities instead of a 0/0, so their
    softmax is computed for those rows alone, and the row sums are only
    looked at when some value is 0. ``logits`` may be any object whose
    ``logits[rows]`` gives those rows (see
    ``BaseCalibrator._calibrated_proba_of_probabilities``).
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
    probabilities; a subclass that reads something else sets
    ``_fits_probabilities = False``) and the prediction paths. A fit that did not
    converge for some classes raises a ``ConvergenceWarning`` naming them; a
    fit whose probabilities are materially less accurate than the input on
    the calibration rows (three classes or more) raises an
    :class:`~skcal.exceptions.AccuracyDropWarning` with both accuracies.
    """

    _shift_invariant = True
    _softmax_first = True
    _maps_probabilities = True
    #: the maps read the softmax (a subclass whose ``_class_scores`` reads
    #: the logits sets False)
    _fits_probabilities = True
    #: the maps bin or sort the probabilities, or clip them before their logs
    #: as their references do (a subclass that takes logs of the floored
    #: probabilities, as Platt scaling, sets True)
    _floors_probabilities = False
    #: appended to the ConvergenceWarning of classes whose fit did not converge
    _unconverged_hint = ""

    def _class_scores(self, logits: np.ndarray) -> np.ndarray:
        return softmax_inplace(np.array(logits, dtype=np.float64))

    def _fit(self, logits, y_index, sample_weight):
        scores = self._class_scores(logits)
        self._fit_scores(scores, y_index, sample_weight)
        if logits.shape[1] > 2 and len(logits):
            P = scores if self._fits_probabilities else softmax_inplace(
                np.array(logits, dtype=np.float64)
            )  # fmt: skip
            calibrated = self._calibrated_proba(logits)
            self._warn_accuracy_drop(P, calibrated, y_index, sample_weight)

    def _fit_probabilities(self, P, y_index, sample_weight):
        """With ``input="proba"``, the maps of the softmax are fitted on the
        validated probabilities themselves (no round trip through logs)."""
        self._fit_scores(P, y_index, sample_weight)
        if P.shape[1] > 2 and len(P):
            calibrated = self._calibrated_proba_of_probabilities(P.copy(), _LogsOf(P))
            self._warn_accuracy_drop(P, calibrated, y_index, sample_weight)

    def _warn_accuracy_drop(self, P, calibrated, y_index, sample_weight) -> None:
        """:class:`~skcal.exceptions.AccuracyDropWarning` when the
        ``calibrated`` probabilities of the calibration rows are materially
        less accurate than their input probabilities ``P``.

        The one-vs-rest maps rank the classes of a row by their own
        calibrated values: coarse maps of many classes (equal-mass bins of
        ten values each, with a few per cent of positives per class) give
        unrelated classes similar values and move the top class. Both
        predictions follow the tie rule of :meth:`predict`. Material: a
        drop of more than one point and two standard errors of the paired
        difference (as for the local calibrators). Problems of three
        classes or more only (a binary problem's top class is one
        threshold, and TopVersusAll fits these maps on one).
        """
        weights = np.asarray(sample_weight, dtype=np.float64)
        before = argmax_ties_by_scores(P, P)
        after = argmax_ties_by_scores(calibrated, P)
        right_before, right_after = before == y_index, after == y_index
        drop, se = paired_mean_difference(right_before - 1.0 * right_after, weights)
        if not drop > max(_ACCURACY_DROP_MIN, _ACCURACY_DROP_SE * se):
            return
        moved = np.average(before != after, weights=weights)
        warn(
            f"{type(self).__name__} changes the top class of {moved:.1%} of the "
            f"calibration rows; accuracy there "
            f"{np.average(right_before, weights=weights):.4f} -> "
            f"{np.average(right_after, weights=weights):.4f} (a drop of "
            f"{drop:.4f}, standard error {se:.4f}). Its one-vs-rest maps rank "
            f"the {P.shape[1]} classes by their own calibrated values, and "
            "coarse maps of many classes give unrelated classes similar "
            "values. To keep the classifier's top class, calibrate the "
            "top-label confidence instead: TopVersusAll(<this calibrator>), "
            "ScalingBinningCalibrator(mode='top_label') or TemperatureScaling().",
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

    def _calibrated_proba(self, logits):
        Q = softmax_into(logits, np.empty(logits.shape))
        return self._calibrated_proba_of_probabilities(Q, logits)

    def _calibrated_proba_of_probabilities(self, P, logits):
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
