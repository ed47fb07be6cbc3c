"""Spline calibration of the top-label confidence (Gupta et al., ICLR 2021)."""

from __future__ import annotations

from numbers import Integral

import numpy as np
from scipy.interpolate import CubicSpline
from sklearn.utils.validation import check_is_fitted

from ..base import BaseCalibrator, fit_logits
from ..utils._constants import FLOOR_BEFORE_LOG
from ..utils._proba import interp, replace_top_label, replace_top_label_inplace
from ..utils._sklearn import Interval, StrOptions
from ..utils._softmax import softmax_inplace, softmax_into
from ..utils._validation import effective_sample_size

__all__ = ["SplineCalibrator"]


def natural_spline_basis(knots: np.ndarray, t: np.ndarray, nu: int = 0) -> np.ndarray:
    """Cardinal basis of the natural cubic splines on ``knots``, at ``t``.

    Column ``j`` is the natural cubic spline that is 1 at knot ``j`` and 0
    at the others (or its ``nu``-th derivative); a natural spline is the
    combination of the columns weighted by its values at the knots.
    """
    eye = np.eye(len(knots))
    return CubicSpline(knots, eye, bc_type="natural")(t, nu)


def fit_spline_recalibration(scores, correct, weights, n_knots):
    """Gupta et al.'s recalibration map, at the distinct calibration scores.

    Sorts the samples by score (ties by correctness then weight, so that the
    result does not depend on the order of the rows), puts sample ``i`` at
    ``t_i`` = its weighted rank in [0, 1], fits a natural cubic spline with
    ``n_knots`` equally spaced knots to the cumulative residual ``E(t_i) =
    sum_{j <= i} w_j (y_j - s_j) / sum_j w_j`` by weighted least squares, and
    maps ``s_i`` to ``s_i + E'(t_i)``. Returns the distinct scores and the
    weighted mean calibrated value at each, plus the spline's knot values.
    """
    order = np.lexsort((weights, correct, scores))
    s, y, w = scores[order], correct[order], weights[order]
    cum_w = np.cumsum(w)
    t = (cum_w - w[0]) / (cum_w[-1] - w[0])
    E = np.cumsum(w * (y - s)) / cum_w[-1]
    knots = np.linspace(0.0, 1.0, n_knots)
    root_w = np.sqrt(w)
    values = np.linalg.lstsq(
        natural_spline_basis(knots, t) * root_w[:, None], E * root_w, rcond=None
    )[0]
    calibrated = s + natural_spline_basis(knots, t, nu=1) @ values
    unique, inverse = np.unique(s, return_inverse=True)
    mean = np.bincount(inverse, weights=w * calibrated) / np.bincount(
        inverse, weights=w
    )
    return unique, mean, values


class SplineCalibrator(BaseCalibrator):
    """Spline calibration of the top-label confidence (Gupta et al. 2021).

    On the calibration set, the top-label confidences ``s`` (the largest
    probability of each row) are sorted and the cumulative difference
    between accuracy and confidence, ``E(t) = (1/N) sum_{j <= i} (y_j -
    s_j)`` at ``t_i = i / (N - 1)``, is fitted by least squares with a
    natural cubic spline with ``n_knots`` equally spaced knots on [0, 1].
    Its slope is the local miscalibration, so each calibration confidence
    ``s_i`` maps to ``s_i + E'(t_i)``; a new confidence is mapped by linear
    interpolation between the calibration scores (constant beyond them) and
    clipped to ``[1 / (n + 2), (n + 1) / (n + 2)]`` (Laplace's rule of
    succession for ``n`` calibration samples; the paper clips to [0, 1]). The
    other classes share ``1 - s~``: by default in the
    proportions of temperature scaling fitted on the same calibration set
    (``softmax(z / T)`` of their logits), or in their original proportions
    with ``redistribution="proportional"``; computed from the logits (exact
    even where their probabilities underflow to 0, at logit gaps beyond
    ~745). ``s~`` is raised where needed to the largest other class's
    share and one unit in the last place above it, so that the top class
    keeps strictly the largest probability (but where ``X`` ties it). In
    :meth:`decision_function` ``s~`` and ``1 - s~`` are floored at 1e-300.

    Parameters
    ----------
    input : {"logits", "proba"}, default="logits"
        What ``X`` holds; logits are turned into probabilities by softmax.
    classes : array-like of shape (n_classes,), default=None
        The label of each column of ``X``.
    n_knots : int, default=6
        Knots of the natural cubic spline (the paper's 6). At least this
        many calibration samples with positive weight are needed.
    redistribution : {"temperature", "proportional"}, default="temperature"
        How the other classes share ``1 - s~`` (the paper calibrates the top
        label only): ``"temperature"`` in proportion to ``exp(z_j / T)``,
        ``T`` fitted by temperature scaling on the same calibration set;
        ``"proportional"`` in proportion to the original probabilities. On
        an over-confident network with many classes the original
        proportions keep the true class of a wrong prediction as unlikely
        as the network made it: on a real 45-class text task, test NLL 1.87
        against 1.43 for ``"temperature"`` and 1.42 for temperature scaling.

    Attributes
    ----------
    scores_ : ndarray of shape (n_scores,)
        Distinct top-label confidences of the calibration set, increasing.
    calibrated_scores_ : ndarray of shape (n_scores,)
        Their calibrated values (the mean over tied samples), before
        clipping; the map interpolates between these points.
    knot_values_ : ndarray of shape (n_knots,)
        Values of the fitted spline ``E`` at its knots.
    temperature_ : float
        Temperature of the other classes' shares (1.0 with
        ``redistribution="proportional"``).
    confidence_bounds_ : tuple of float
        ``(1 / (n + 2), (n + 1) / (n + 2))``, ``n`` the effective number of
        calibration samples (Kish's, with weights): the range of ``s~``.
    classes_ : ndarray of shape (n_classes,)
        Label of each column.
    n_features_in_ : int
        Number of columns of ``X``.

    Notes
    -----
    Only the top-label confidence is recalibrated (the method's
    definition); the fitted map need not be monotone. Its slope near the
    ends is unconstrained: on drawn 54-class logits it mapped confidences
    of 0.84 to 1, and with the paper's clip to [0, 1] the wrong predictions
    among them gave their true class probability 0 (test NLL 2.84 against
    1.98 for temperature scaling); no finite calibration set supports a
    confidence beyond ``(n + 1) / (n + 2)``. The calibrated
    confidence is never below the largest other class's probability, so the
    argmax of ``X`` keeps strictly the largest calibrated probability (one
    unit in the last place above the largest other where the map would
    have put it lower; a tie only where ``X`` ties it), so that
    :meth:`predict` and ``np.argmax`` of :meth:`predict_proba` both return
    the argmax of ``X``: without this floor, the rescaled classes
    outranked the top class on 4% of the rows of the 45-class task
    (accuracy 0.5545 against 0.5936).

    With sample weights, ``t_i`` is the weighted rank ``(W_i - w_1) / (W -
    w_1)`` (``W_i`` the cumulative weight) and the least squares are
    weighted; samples of zero weight are left out. Tied confidences are
    sorted by correctness, so the fit does not depend on the row order.

    References
    ----------
    K. Gupta, A. Rahimi, T. Ajanthan, T. Mensink, C. Sminchisescu,
    R. Hartley. "Calibration of Neural Networks using Splines". ICLR 2021.

    Examples
    --------
    >>> import numpy as np
    >>> from skcal import SplineCalibrator
    >>> from skcal.utils._testing import make_miscalibrated_logits
    >>> logits, y = make_miscalibrated_logits(2000, 4, temperature=2.0, random_state=0)
    >>> spline = SplineCalibrator().fit(logits, y)
    >>> proba = spline.predict_proba(logits)
    >>> bool(np.allclose(proba.sum(axis=1), 1.0))
    True
    >>> bool((spline.predict(logits) == logits.argmax(axis=1)).all())
    True
    """

    _needs_torch = True  # its fit runs torch kernels
    _shift_invariant = True
    _keeps_argmax = "proba"
    _reads = "log-probabilities"  # fitted on the logs of input="proba"

    _parameter_constraints: dict = {
        **BaseCalibrator._parameter_constraints,
        "n_knots": [Interval(Integral, 2, None, closed="left")],
        "redistribution": [StrOptions({"temperature", "proportional"})],
    }

    def __init__(
        self, *, input="logits", classes=None, n_knots=6, redistribution="temperature"
    ):
        self.input = input
        self.classes = classes
        self.n_knots = n_knots
        self.redistribution = redistribution

    def n_free_parameters(self, n_classes, n_features=None):
        """``n_knots``, the spline's values at its knots (plus the
        temperature of the others' shares with the default redistribution)."""
        return int(self.n_knots) + (self.redistribution == "temperature")

    def _fit(self, logits, y_index, sample_weight):
        logits = fit_logits(self, logits)  # input="proba": their logs
        P = softmax_inplace(np.array(logits, dtype=np.float64))
        top = np.argmax(logits, axis=1)
        keep = sample_weight > 0
        if keep.sum() < self.n_knots:
            raise ValueError(
                f"SplineCalibrator fits a spline with n_knots={self.n_knots} to "
                f"the calibration samples and needs at least that many with "
                f"positive weight, got {int(keep.sum())}. Pass more calibration "
                f"samples or lower n_knots."
            )
        rows = np.flatnonzero(keep)
        n = effective_sample_size(sample_weight)
        self.confidence_bounds_ = (1.0 / (n + 2.0), (n + 1.0) / (n + 2.0))
        self.temperature_ = 1.0
        if self.redistribution == "temperature":
            from ._scaling import fit_inverse_temperature  # torch, for this only

            beta = fit_inverse_temperature(logits, y_index, sample_weight, "cpu").x
            self.temperature_ = float(1.0 / beta)
        self.scores_, self.calibrated_scores_, self.knot_values_ = (
            fit_spline_recalibration(
                P[rows, top[rows]],
                (top[rows] == y_index[rows]).astype(np.float64),
                np.asarray(sample_weight, dtype=np.float64)[rows],
                self.n_knots,
            )
        )

    def to_torch(self):
        """The fitted map as a torch module: scores to :meth:`predict_proba`.

        The top class's probability (of the softmax, or of the validated
        probabilities), mapped by the interpolated spline and clipped to
        ``confidence_bounds_``; the other classes' shares computed from the
        logits (divided by ``temperature_``), exact where their
        probabilities underflow; the top class raised to the largest other
        class's probability and, where it leads strictly, to the next float
        above it (written with ONNX ops, which have no ``nextafter``), in
        float64 whatever the input's dtype; a float32 output holds the top
        class strictly first in float32. See :func:`skcal.export.to_torch`
        and :func:`skcal.export.to_onnx`.

        With ``input="logits"`` the softmax's row sum is added in numpy's
        order and a top probability within 8 units in the last place of a
        calibration score is put on it, so that a steep segment of the map
        (between calibration scores a few units in the last place apart)
        reads the score numpy reads.

        Returns
        -------
        torch.nn.Module

        Examples
        --------
        >>> import numpy as np, torch
        >>> from skcal import SplineCalibrator
        >>> from skcal.utils._testing import make_miscalibrated_logits
        >>> X, y = make_miscalibrated_logits(300, 3, random_state=0)
        >>> spline = SplineCalibrator().fit(X, y)
        >>> P = spline.to_torch()(torch.from_numpy(X)).numpy()
        >>> bool(np.abs(P - spline.predict_proba(X)).max() < 1e-12)
        True
        """
        from .._torch._export import Chain
        from .._torch._export_spline import SplineTopLabel

        check_is_fitted(self)
        return Chain(
            SplineTopLabel(
                self.input,
                len(self.classes_),
                self._proba_eps(),
                self.scores_,
                self.calibrated_scores_,
                self.confidence_bounds_,
                self.temperature_,
                FLOOR_BEFORE_LOG,
            )
        )

    def _calibrated_confidence(self, s: np.ndarray) -> np.ndarray:
        if self.scores_.size == 1:
            out = np.full_like(s, self.calibrated_scores_[0])
        else:
            out = interp(s, self.scores_, self.calibrated_scores_)
        return np.clip(out, *self.confidence_bounds_)

    def _calibrated_proba(self, logits, P=None):
        if P is None:
            P = softmax_into(logits, np.empty(logits.shape))
            # the logits' own argmax: their softmax may round two of them to a tie
            return self._replace_top_label(P, logits, np.argmax(logits, axis=1))
        # the argmax of their logs log(max(p, PROBA_EPS)): log is increasing
        top = np.argmax(P, axis=1)
        if self.temperature_ != 1.0:  # the shares need the logs
            logits = np.log(P)
        return self._replace_top_label(P, logits, top)

    def _replace_top_label(self, P, logits, top):
        """Calibrate ``P``'s top label in place; ``logits`` give the shares."""
        new = self._calibrated_confidence(
            np.take(P, top + P.shape[1] * np.arange(len(top)))
        )
        if self.temperature_ != 1.0:  # the others' shares: softmax(z / T)
            logits = np.asarray(logits, dtype=np.float64) / self.temperature_
            P = softmax_into(logits, P)
        # c and 1 - c floored at FLOOR_BEFORE_LOG as in decision_function
        return replace_top_label_inplace(
            P, logits, top, new, floor=FLOOR_BEFORE_LOG, keep_argmax=True
        )

    def _calibrated_logits(self, logits):
        P = softmax_inplace(np.array(logits, dtype=np.float64))
        top = np.argmax(logits, axis=1)
        new = self._calibrated_confidence(P[np.arange(len(top)), top])
        # in log space from the logits: exact proportions of the other
        # classes even where their probabilities underflow
        shares = np.asarray(logits, dtype=np.float64) / self.temperature_
        return replace_top_label(shares, top, new, log=True, keep_argmax=True)
