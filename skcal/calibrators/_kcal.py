"""KCal: a kernel classifier on a learned projection of the embeddings."""

from __future__ import annotations

from numbers import Integral, Real

import numpy as np
from sklearn.model_selection import KFold
from sklearn.utils import check_random_state

from .._torch.kernels import fit_kcal, kcal_proba, kcal_project, select_kcal_bandwidth
from ..base import BaseLocalCalibrator
from ..exceptions import GridEdgeWarning, MissingClassWarning
from ..utils._constraints import MINIBATCH_CONSTRAINTS, TRAINING_CONSTRAINTS
from ..utils._sklearn import Interval, StrOptions
from ..utils._split import stratified_split
from ..utils._training import training_options
from ..utils._warnings import warn

#: KCal warns below this many memory samples per class, on average.
_MIN_MEMORY_PER_CLASS = 10
#: ``bandwidth_`` this close to an end of its search range, in ``log h``, is
#: at that end (the search stops within 1e-4 of it).
_EDGE_LOG_TOL = 1e-3

__all__ = ["KCalCalibrator"]


class KCalCalibrator(BaseLocalCalibrator):
    """KCal: a kernel classifier on a learned projection of the embeddings.

    The embeddings are standardised and projected by a small "Skip-ELU"
    network, ``v = x W1 + b1``, ``g(x) = v + ELU(v) W2`` (``n_components``
    dimensions), and the calibrated prediction is the kernel classifier
    over a memory of calibration samples,

    ``p(c | x) = sum_j k(x, x_j) w_j [y_j = c] / sum_j k(x, x_j) w_j``,
    ``k(x, x') = exp(-mean_d (g(x) - g(x'))_d^2 / h)``.

    Its predictions (and accuracy) are its own: KCal replaces the head
    instead of rescaling it, so it needs no ``coef``.

    **Fitting.** KCal trains the projection on data the calibration memory
    does not contain (the original uses the backbone's training set). Here
    a stratified ``projection_fraction`` of the calibration set trains it:
    each mini-batch of ``batch_size`` queries is classified over a random
    background of ``n_per_class`` other training samples per class (columns
    reweighted to the class frequencies), the log loss is minimised by Adam
    jointly with the bandwidth, and early stopping monitors the log loss of
    the other part classified over the training part. The other part is
    then the memory, and ``h`` is chosen by golden-section search over
    ``[h0 / 10, 10 h0]`` (``h0`` the trained bandwidth) to minimise its
    ``cv``-fold cross-validated log loss, as in the paper.

    Parameters
    ----------
    classes : array-like of shape (n_classes,), default=None
        All labels, in the column order of :meth:`predict_proba`; by
        default the sorted labels of ``y``.
    n_components : int, default=32
        Dimension of the projection (the paper: 32, 128 for ImageNet).
    projection_fraction : float, default=0.5
        Part of the calibration set that trains the projection; the rest is
        the kernel's memory.
    bandwidth : "auto" or float, default="auto"
        ``h``: chosen by cross-validation, or fixed. A cross-validated
        ``h`` at an end of its search range raises a
        :class:`~skcal.exceptions.GridEdgeWarning`.
    cv : int, default=20
        Folds of the bandwidth's cross-validation (capped at the memory
        size).
    batch_size : int, default=64
        Queries per training step.
    n_per_class : int, default=20
        Background samples per class in a training step.
    learning_rate : float, default=1e-3
        Adam step size.
    max_iter : int, default=100
        Maximum passes over the projection's training part.
    n_iter_no_change : int, default=10
        Epochs without improvement of the held-out log loss before stopping.
    random_state : int, RandomState instance or None, default=None
        Seeds the split, the initialisation, the episodes and the folds.
    device : {"auto", "cpu", "cuda"} or "cuda:N", default="auto"
        Where the projection is trained and the kernels are computed.
    verbose : int, default=0
        0: silent. 1: a progress bar on stderr for each phase: the
        projection's training (epoch k of ``max_iter``, elapsed and remaining
        time, the held-out log loss; a note where early stopping ended it)
        and the bandwidth search (one step per bandwidth tried, with its
        cross-validated log loss). 2: also one line per epoch and per
        bandwidth.

    Attributes
    ----------
    mean_, scale_ : ndarray of shape (n_features,)
        Standardisation of the embeddings (from the training part).
    projection_ : list of ndarray
        ``[W1, b1, W2]`` of the projection.
    bandwidth_init_ : float
        Bandwidth learned with the projection (``h0``).
    bandwidth_ : float
        Bandwidth used.
    cv_log_loss_ : float
        Cross-validated log loss of the memory at ``bandwidth_``.
    memory_ : ndarray of shape (n_memory, n_components)
        Projected memory.
    memory_labels_ : ndarray of shape (n_memory,)
        Column index of each memory label.
    memory_weights_ : ndarray of shape (n_memory,)
        Sample weights of the memory (positive).
    best_iter_, n_iter_ : int
        Epoch whose projection was kept, and epochs run.
    classes_ : ndarray of shape (n_classes,)
        Label of each column.
    n_features_in_ : int
        Number of embedding dimensions.

    Notes
    -----
    The bandwidth search runs over ``log h`` (tolerance 1e-4, i.e. relative
    in ``h``). Sample weights are frequencies: they weight the training loss,
    the standardisation, the kernel sums and the cross-validated loss, and
    zero-weight rows are left out. The memory part serves both for early
    stopping (classified over the training part) and for the bandwidth
    search (classified over itself, by folds).

    Departures from the reference code, all for a self-contained fit on one
    calibration set: the projection trains on part of it (above); Adam with
    early stopping replaces 500,000 SGD steps with a plateau schedule; the
    batch normalisation in front of the projection is a fixed
    standardisation (the same affine map at prediction time). As in the
    reference, kernel values of at least ``1 - 1e-10`` (a query that
    coincides with a memory sample, e.g. when predicting on the memory
    itself) are dropped, so such predictions are leave-one-out. Where every
    kernel value underflows, the nearest memory samples decide (the
    reference returns a uniform vector there).

    **A class absent from the memory has probability 0.** KCal predicts
    from its memory alone and has no head to fall back to, so a class
    without calibration samples (listed in ``classes``, with a
    :class:`~skcal.exceptions.MissingClassWarning`) gets probability 0
    everywhere, and its samples an infinite log loss; the other classes'
    predictions are those of the same kernel classifier without it. A class
    with a single calibration sample keeps it in the memory; one that
    still has none there (an unstratifiable split) is warned about too.
    Without ``classes`` the columns are the labels seen in ``y``: pass
    ``classes`` to keep a column for a class that ``y`` lacks.

    References
    ----------
    Z. Lin, S. Trivedi, J. Sun. "Taking a Step Back with KCal: Multi-Class
    Kernel-Based Calibration for Deep Neural Networks". ICLR 2023.

    Examples
    --------
    >>> import numpy as np
    >>> from skcal import KCalCalibrator
    >>> from skcal.utils._testing import make_region_miscalibrated_embeddings
    >>> X, y, _, _, _ = make_region_miscalibrated_embeddings(600, 3, random_state=0)
    >>> kcal = KCalCalibrator(max_iter=5, random_state=0, device="cpu").fit(X, y)
    >>> kcal.memory_.shape
    (300, 32)
    >>> proba = kcal.predict_proba(X)
    >>> bool(np.allclose(proba.sum(axis=1), 1.0))
    True
    """

    _parameter_constraints: dict = {
        **BaseLocalCalibrator._parameter_constraints,
        "n_components": [Interval(Integral, 1, None, closed="left")],
        "projection_fraction": [Interval(Real, 0, 1, closed="neither")],
        "bandwidth": [StrOptions({"auto"}), Interval(Real, 0, None, closed="neither")],
        "cv": [Interval(Integral, 2, None, closed="left")],
        # mini-batches, but no weight decay, and projection_fraction instead
        # of a validation_fraction
        "batch_size": MINIBATCH_CONSTRAINTS["batch_size"],
        "n_per_class": [Interval(Integral, 1, None, closed="left")],
        **TRAINING_CONSTRAINTS,
    }

    def __init__(
        self,
        *,
        classes=None,
        n_components=32,
        projection_fraction=0.5,
        bandwidth="auto",
        cv=20,
        batch_size=64,
        n_per_class=20,
        learning_rate=1e-3,
        max_iter=100,
        n_iter_no_change=10,
        random_state=None,
        device="auto",
        verbose=0,
    ):
        self.classes = classes
        self.n_components = n_components
        self.projection_fraction = projection_fraction
        self.bandwidth = bandwidth
        self.cv = cv
        self.batch_size = batch_size
        self.n_per_class = n_per_class
        self.learning_rate = learning_rate
        self.max_iter = max_iter
        self.n_iter_no_change = n_iter_no_change
        self.random_state = random_state
        self.device = device
        self.verbose = verbose

    def n_free_parameters(self, n_classes, n_features=None):
        """The projection's weights (batch norm, a linear map to
        ``n_components`` and its skip layer) and the bandwidth."""
        n_features = n_classes if n_features is None else int(n_features)
        d = int(self.n_components)
        return 2 * n_features + (n_features + 1) * d + d * d + 1

    def _fit(self, X, y_index, sample_weight):
        rng = check_random_state(self.random_state)
        split_seed, torch_seed, fold_seed = rng.randint(np.iinfo(np.int32).max, size=3)
        train, memory = self._split(y_index, sample_weight, split_seed)
        self._check_memory(y_index, sample_weight, memory)
        X = np.asarray(X, dtype=np.float64)
        self._fit_standardisation(X[train], sample_weight[train])
        Z = (X - self.mean_) / self.scale_
        fit = fit_kcal(
            Z[train],
            y_index[train],
            sample_weight[train],
            Z[memory],
            y_index[memory],
            sample_weight[memory],
            n_classes=len(self.classes_),
            n_components=self.n_components,
            n_per_class=self.n_per_class,
            options=training_options(self, torch_seed),
        )
        self.projection_ = list(fit.projection)
        self.bandwidth_init_ = fit.bandwidth
        self.best_iter_, self.n_iter_ = fit.best_epoch, fit.n_epochs
        self.memory_ = kcal_project(self.projection_, Z[memory], self.device)
        self.memory_labels_ = y_index[memory]
        self.memory_weights_ = sample_weight[memory]
        folds = np.empty(memory.size, dtype=np.int64)
        kfold = KFold(
            min(self.cv, memory.size), shuffle=True, random_state=int(fold_seed)
        )
        for k, (_, test) in enumerate(kfold.split(folds)):
            folds[test] = k
        chosen = select_kcal_bandwidth(
            self.memory_,
            self.memory_labels_,
            self.memory_weights_,
            folds,
            n_classes=len(self.classes_),
            init=self.bandwidth_init_,
            fixed=None if self.bandwidth == "auto" else self.bandwidth,
            device=self.device,
            verbose=self.verbose,
        )
        self.bandwidth_, self.cv_log_loss_ = chosen.bandwidth, chosen.cv_log_loss
        if self.bandwidth == "auto":
            self._warn_bandwidth_edge()

    def _warn_bandwidth_edge(self):
        """:class:`GridEdgeWarning` when ``bandwidth_`` ends its search range.

        The golden-section search over ``log h`` in ``[log(h0 / 10), log(10
        h0)]`` stops within 1e-4 of an end when the loss still falls there;
        ``bandwidth_`` within ``_EDGE_LOG_TOL`` (in ``log h``) of an end is
        taken as that end.
        """
        low, high = self.bandwidth_init_ / 10.0, self.bandwidth_init_ * 10.0
        log_h = np.log(self.bandwidth_)
        if abs(log_h - np.log(high)) < _EDGE_LOG_TOL:
            end, beyond, hint = (
                "upper",
                "larger",
                " A kernel that wide predicts little more than the class "
                "frequencies: check that the embeddings carry the labels.",
            )
        elif abs(log_h - np.log(low)) < _EDGE_LOG_TOL:
            end, beyond, hint = "lower", "smaller", ""
        else:
            return
        step = np.sqrt(2.0) if end == "upper" else 1.0 / np.sqrt(2.0)
        warn(
            f"KCalCalibrator's cross-validated bandwidth_={self.bandwidth_:.4g} "
            f"is the {end} end of its search range [{low:.4g}, {high:.4g}] "
            f"(bandwidth_init_ / 10 to 10 x bandwidth_init_): the memory's "
            f"log loss was still falling there, so the best bandwidth may be "
            f"{beyond}. Try fixed bandwidths beyond the range (e.g. bandwidth="
            f"{self.bandwidth_ * step:.3g}, then {self.bandwidth_ * step**2:.3g}) "
            f"and compare their cv_log_loss_ with {self.cv_log_loss_:.4g}.{hint}",
            GridEdgeWarning,
        )

    def _split(self, y_index, sample_weight, seed):
        """Rows that train the projection and rows of the memory (positive weight)."""
        train, memory = stratified_split(
            y_index,
            self.projection_fraction,
            y_index.size,
            seed,
            "KCalCalibrator",
            sample_weight,
        )
        # weights are frequencies: a zero-weight row is no sample at all
        train = train[sample_weight[train] > 0]
        memory = memory[sample_weight[memory] > 0]
        if memory.size < 2 or train.size < 2:
            raise ValueError(
                "KCalCalibrator: fewer than 2 samples with a positive weight in "
                f"the projection's training part ({train.size}) or in the memory "
                f"({memory.size}); give more samples a positive weight."
            )
        return train, memory

    def _check_memory(self, y_index, sample_weight, memory):
        """Warn about classes of ``y`` the memory lacks, and a sparse memory."""
        n_classes = len(self.classes_)
        in_y = np.bincount(y_index, weights=sample_weight, minlength=n_classes) > 0
        in_memory = np.bincount(y_index[memory], minlength=n_classes) > 0
        lost = self.classes_[in_y & ~in_memory]
        if lost.size:
            warn(
                f"KCalCalibrator: {lost.size} class(es) of y have no sample in "
                f"the kernel's memory (the part of the calibration set that does "
                f"not train the projection): {lost.tolist()[:10]}. KCal gives "
                "them probability 0; lower projection_fraction or add samples.",
                MissingClassWarning,
            )
        per_class = memory.size / max(np.count_nonzero(in_memory), 1)
        if per_class < _MIN_MEMORY_PER_CLASS:
            warn(
                f"KCalCalibrator predicts from the kernel neighbours among its "
                f"memory of {memory.size} samples: {per_class:.1f} per class on "
                f"average ({n_classes} classes), fewer than "
                f"{_MIN_MEMORY_PER_CLASS}, so its probabilities and accuracy are "
                "unreliable (at 1,000 classes and 5,000 rows its accuracy fell "
                "to 0.02). Use a global calibrator on the head's logits, or more "
                "calibration data.",
                UserWarning,
            )

    def _fit_standardisation(self, X, sample_weight):
        """Weighted mean and spread of each feature of the training rows."""
        self.mean_ = np.average(X, axis=0, weights=sample_weight)
        # the spread per feature, computed on deviations divided by their
        # largest absolute value, so that squaring cannot overflow
        dev_train = X - self.mean_
        top = np.max(np.abs(dev_train), axis=0, initial=0.0)
        top = np.where(top > 0, top, 1.0)
        var = np.average((dev_train / top) ** 2, axis=0, weights=sample_weight)
        self.scale_ = np.where(var > 0, top * np.sqrt(var), 1.0)

    def to_torch(self):
        """Refused: KCal's prediction reads its whole calibration memory.

        Raises
        ------
        NotExportableError
            Always, with the size of the memory (``memory_``: projected
            calibration rows with their labels and weights), which grows
            with the calibration set: an export would ship the data itself.
            Keep the calibrator in Python (:func:`skcal.utils.persistence.dump`).

        Examples
        --------
        >>> from skcal import KCalCalibrator
        >>> KCalCalibrator().to_torch()
        Traceback (most recent call last):
        ...
        skcal.exceptions.NotExportableError: KCalCalibrator ...
        """
        from ..exceptions import NotExportableError

        size = "its calibration rows"
        if hasattr(self, "memory_"):
            size = (
                f"{self.memory_.shape[0]} calibration rows of "
                f"{self.memory_.shape[1]} projected features"
            )
        raise NotExportableError(
            f"KCalCalibrator cannot be exported: each prediction is a kernel "
            f"sum over its memory ({size}, with their labels and weights), "
            "state that grows with the calibration set. Keep it in Python "
            "(skcal.utils.persistence.dump), or export a parametric "
            "calibrator such as TemperatureScaling."
        )

    def _predict_proba(self, X):
        return kcal_proba(
            self.projection_,
            (np.asarray(X, np.float64) - self.mean_) / self.scale_,
            self.memory_,
            self.memory_labels_,
            self.memory_weights_,
            self.bandwidth_,
            n_classes=len(self.classes_),
            device=self.device,
        )
