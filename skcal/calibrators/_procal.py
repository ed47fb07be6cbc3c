"""ProCal: proximity-informed calibration (Xiong et al., NeurIPS 2023)."""

from __future__ import annotations

from numbers import Integral

import numpy as np
from sklearn.utils.validation import check_is_fitted

from .._torch.kernels import density_ratio_confidence, knn_proximity, softmax_inplace
from ..base import BaseLocalCalibrator
from ..utils._dask import lazy_on_dask
from ..utils._proba import replace_top_label
from ..utils._sklearn import DEVICE_CONSTRAINT, Interval
from ..utils._validation import effective_sample_size

__all__ = ["ProCalCalibrator"]

#: Floor of the KDE bandwidths: both variables live in [0, 1].
_MIN_BANDWIDTH = 1e-3


def _l2_normalize(X: np.ndarray) -> np.ndarray:
    # rows divided by their largest absolute value first: the norm of
    # entries beyond ~1e154 would overflow, and the direction is the same
    top = np.max(np.abs(X), axis=1, keepdims=True)
    X = X / np.where(top > 0, top, 1.0)
    norm = np.linalg.norm(X, axis=1, keepdims=True)
    return X / np.maximum(norm, 1e-12)


def _normal_reference(points: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Scott's rule of statsmodels' ``normal_reference``, with sample weights.

    ``1.06 * std * n^(-1 / (4 + d))`` per dimension (weighted ``std`` with
    ``ddof=0``), where ``n`` is Kish's effective sample size
    ``(sum w)^2 / sum w^2`` (the count for unit weights; unchanged when all
    weights are scaled).
    """
    total = weights.sum()
    mean = weights @ points / total
    std = np.sqrt(weights @ (points - mean) ** 2 / total)
    n_eff = effective_sample_size(weights)
    h = 1.06 * std * n_eff ** (-1.0 / (4 + points.shape[1]))
    return np.maximum(h, _MIN_BANDWIDTH)


class ProCalCalibrator(BaseLocalCalibrator):
    """ProCal: calibrate the confidence given the proximity to the data.

    The density-ratio variant of Xiong et al. Embeddings are L2-normalised;
    the proximity of a sample is ``mean_k exp(-D_k)`` over the squared
    Euclidean distances ``D_k`` to its ``n_neighbors`` nearest calibration
    embeddings (a calibration sample does not count itself). On the
    calibration set, two 2-D Gaussian kernel densities of
    ``(confidence, proximity)`` are fitted, ``f1`` on the correctly and
    ``f0`` on the wrongly classified samples (bandwidths by Scott's normal
    reference rule, as statsmodels' ``KDEMultivariate``), and the new
    confidence is Bayes' rule

    ``c_new = f1 / max(f1 + rho f0, 1e-10)``, ``rho = n_wrong / n_correct``.

    The predicted class gets ``c_new``; the other classes share ``1 -
    c_new`` in proportion to their original probabilities, computed from
    the head's logits (exact even where those probabilities underflow to
    0, at logit gaps beyond ~745). The new vector can rank another class first (e.g.
    ``[0.5, 0.3, 0.2]`` with ``c_new = 0.3`` becomes ``[0.3, 0.42, 0.28]``),
    so :meth:`predict` returns the original argmax, the class whose
    confidence was calibrated.

    Parameters
    ----------
    coef : array-like of shape (n_classes, n_features), default=None
        Weights of the classifier's linear head: logits are ``X @ coef.T +
        intercept``. Without it, a logistic-regression head is fitted on
        ``(X, y)`` first (see :class:`~skcal.base.BaseLocalCalibrator`).
    intercept : array-like of shape (n_classes,), default=None
        Bias of the head (zeros when None).
    classes : array-like of shape (n_classes,), default=None
        The label of each row of ``coef``.
    n_neighbors : int, default=10
        Neighbours that define the proximity (at most the number of
        calibration samples minus one).
    device : {"auto", "cpu", "cuda"} or "cuda:N", default="auto"
        Where the neighbour search and the densities are computed.
    verbose : int, default=0
        0: silent. 1: a progress bar on stderr over the blocks of the
        calibration set's neighbour search (the O(n^2) part of the fit).
        2: also one line per block.

    Attributes
    ----------
    coef_ : ndarray of shape (n_classes, n_features)
        Head used.
    intercept_ : ndarray of shape (n_classes,)
        Bias of the head used.
    embeddings_ : ndarray of shape (n_samples, n_features)
        L2-normalised calibration embeddings of positive weight (the
        neighbour memory).
    points_correct_, points_wrong_ : ndarray of shape (n, 2)
        ``(confidence, proximity)`` of the correctly / wrongly classified
        calibration samples with positive weight.
    weights_correct_, weights_wrong_ : ndarray of shape (n,)
        Their sample weights.
    bandwidth_correct_, bandwidth_wrong_ : ndarray of shape (2,)
        Kernel standard deviations of ``f1`` and ``f0`` (floored at 1e-3).
    ratio_ : float
        ``rho``, weight of the wrong over the correct predictions.
    n_neighbors_ : int
        Neighbours used.
    classes_ : ndarray of shape (n_classes,)
        Label of each column.
    n_features_in_ : int
        Number of embedding dimensions.

    Notes
    -----
    Neighbours are searched exactly (brute force, in row chunks) instead of
    with faiss; the densities are evaluated exactly, which costs
    ``O(n_calibration)`` per query. Sample weights weight the densities,
    their bandwidths and ``rho``; rows of weight 0 are left out (also of the
    neighbour memory), but other weights do not enter the neighbour search
    (a row of weight 2 is not its own neighbour, a duplicated row is). The
    leave-one-out proximity of the calibration samples is used only inside
    :meth:`fit`; :meth:`predict_proba` treats every input as a new sample.

    References
    ----------
    M. Xiong, A. Deng, P. W. Koh, J. Wu, S. Li, J. Xu, B. Hooi.
    "Proximity-Informed Calibration for Deep Neural Networks". NeurIPS 2023.

    Examples
    --------
    >>> import numpy as np
    >>> from skcal import ProCalCalibrator
    >>> from skcal.utils._testing import make_region_miscalibrated_embeddings
    >>> X, y, coef, intercept, _ = make_region_miscalibrated_embeddings(
    ...     1000, 3, random_state=0)
    >>> procal = ProCalCalibrator(coef=coef, intercept=intercept, device="cpu")
    >>> proba = procal.fit(X, y).predict_proba(X)
    >>> proba.shape
    (1000, 3)
    >>> bool(np.all(procal.predict(X) == (X @ coef.T + intercept).argmax(axis=1)))
    True
    """

    _uses_head = True
    _parameter_constraints: dict = {
        **BaseLocalCalibrator._parameter_constraints,
        "coef": ["array-like", None],
        "intercept": ["array-like", None],
        "n_neighbors": [Interval(Integral, 1, None, closed="left")],
        "device": DEVICE_CONSTRAINT,
        "verbose": ["verbose"],
    }

    def __init__(
        self,
        *,
        coef=None,
        intercept=None,
        classes=None,
        n_neighbors=10,
        device="auto",
        verbose=0,
    ):
        self.coef = coef
        self.intercept = intercept
        self.classes = classes
        self.n_neighbors = n_neighbors
        self.device = device
        self.verbose = verbose

    def n_free_parameters(self, n_classes, n_features=None):
        """5: the two 2-D densities' bandwidths and the error ratio (the
        densities themselves are non-parametric)."""
        return 5

    def _proximity(self, E: np.ndarray | None) -> np.ndarray:
        """Proximity of ``E`` to the memory (None: of the memory, leave-one-out).

        The fit's search (``E`` None) shows progress at ``verbose >= 1``.
        """
        return knn_proximity(
            self.embeddings_,
            E,
            self.n_neighbors_,
            device=self.device,
            verbose=self.verbose if E is None else 0,
        )

    def _fit(self, X, y_index, sample_weight):
        # weights are frequencies: a zero-weight row is no sample at all
        positive = sample_weight > 0
        X, y_index, sample_weight = (
            X[positive],
            y_index[positive],
            sample_weight[positive],
        )
        self.n_neighbors_ = int(min(self.n_neighbors, X.shape[0] - 1))
        self.embeddings_ = _l2_normalize(np.asarray(X, dtype=np.float64))
        proba = softmax_inplace(self._logits(X))
        conf = proba.max(axis=1)
        correct = proba.argmax(axis=1) == y_index
        prox = self._proximity(None)
        points = np.column_stack([conf, prox])
        groups = {}
        for name, keep in (("correct", correct), ("wrong", ~correct)):
            if np.count_nonzero(keep) < 2:
                raise ValueError(
                    f"ProCalCalibrator needs at least 2 {name}ly classified "
                    f"calibration samples with positive weight to fit the density "
                    f"of their confidences; the head classifies "
                    f"{np.count_nonzero(correct)} of {correct.size} correctly. "
                    "Use a larger "
                    "calibration set."
                )
            groups[name] = (points[keep], sample_weight[keep])
        self.points_correct_, self.weights_correct_ = groups["correct"]
        self.points_wrong_, self.weights_wrong_ = groups["wrong"]
        self.bandwidth_correct_ = _normal_reference(*groups["correct"])
        self.bandwidth_wrong_ = _normal_reference(*groups["wrong"])
        self.ratio_ = float(self.weights_wrong_.sum() / self.weights_correct_.sum())

    def _calibrated_confidence(self, points: np.ndarray) -> np.ndarray:
        return density_ratio_confidence(
            points,
            points_correct=self.points_correct_,
            weights_correct=self.weights_correct_,
            bandwidth_correct=self.bandwidth_correct_,
            points_wrong=self.points_wrong_,
            weights_wrong=self.weights_wrong_,
            bandwidth_wrong=self.bandwidth_wrong_,
            ratio=self.ratio_,
            device=self.device,
        )

    def to_torch(self):
        """Refused: ProCal's prediction reads its calibration embeddings.

        Raises
        ------
        NotExportableError
            Always, with the size of the state (``embeddings_`` for the
            proximity of each sample, and the density points of the correct
            and wrong predictions), which grows with the calibration set.

        Examples
        --------
        >>> from skcal import ProCalCalibrator
        >>> ProCalCalibrator().to_torch()
        Traceback (most recent call last):
        ...
        skcal.exceptions.NotExportableError: ProCalCalibrator ...
        """
        from ..exceptions import NotExportableError

        size = "its calibration rows"
        if hasattr(self, "embeddings_"):
            n, d = self.embeddings_.shape
            points = len(self.points_correct_) + len(self.points_wrong_)
            size = f"{n} calibration embeddings of {d} features and {points} "
            size += "density points"
        raise NotExportableError(
            f"ProCalCalibrator cannot be exported: each prediction searches "
            f"the nearest neighbours among its calibration embeddings and sums "
            f"kernels over its density points ({size}), state that grows "
            "with the calibration set. Keep it in Python "
            "(skcal.utils.persistence.dump)."
        )

    def _predict_proba(self, X):
        logits = self._logits(X)
        proba = softmax_inplace(logits.copy())
        top = np.argmax(logits, axis=1)
        conf = proba[np.arange(len(top)), top]
        prox = self._proximity(_l2_normalize(np.asarray(X, dtype=np.float64)))
        new_conf = np.clip(
            self._calibrated_confidence(np.column_stack([conf, prox])), 0.0, 1.0
        )
        return replace_top_label(logits, top, new_conf)

    @lazy_on_dask("labels")
    def predict(self, X) -> np.ndarray:
        """The original argmax of the head, as labels from ``classes_``.

        ProCal calibrates the confidence of this class; the other classes
        are rescaled and may end up ranked above it in :meth:`predict_proba`.
        """
        check_is_fitted(self)
        X = self._validate_embeddings(X, reset=False)
        return self.classes_[np.argmax(self._logits(X), axis=1)]
