"""Kernel-based local calibrators: KCal and Local Nets."""

from __future__ import annotations

import warnings
from numbers import Integral, Real

import numpy as np
import torch
from sklearn.model_selection import KFold
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted

from .._torch import resolve_device, to_numpy, to_tensor
from .._torch.kernels import (
    cv_log_loss,
    fit_kcal,
    fit_local_net,
    golden_section_min,
    kcal_proba,
    kcal_project,
    local_net_predict,
)
from ..base import BaseLocalCalibrator
from ..exceptions import MissingClassWarning
from ..utils._sklearn import DEVICE_CONSTRAINT, Interval, StrOptions
from ..utils._split import stratified_split

#: KCal warns below this many memory samples per class, on average.
_MIN_MEMORY_PER_CLASS = 10

__all__ = ["KCalCalibrator", "LocalNetCalibrator"]


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
    ``n_folds``-fold cross-validated log loss, as in the paper.

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
        ``h``: chosen by cross-validation, or fixed.
    n_folds : int, default=20
        Folds of the bandwidth's cross-validation (capped at the memory
        size).
    batch_size : int, default=64
        Queries per training step.
    n_per_class : int, default=20
        Background samples per class in a training step.
    learning_rate : float, default=1e-3
        Adam step size.
    max_epochs : int, default=100
        Maximum passes over the projection's training part.
    patience : int, default=10
        Epochs without improvement of the held-out log loss before stopping.
    random_state : int, RandomState instance or None, default=None
        Seeds the split, the initialisation, the episodes and the folds.
    device : {"auto", "cpu", "cuda"} or "cuda:N", default="auto"
        Where the projection is trained and the kernels are computed.
    verbose : int, default=0
        Print the held-out log loss of every epoch.

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
    best_epoch_, n_epochs_ : int
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
    >>> kcal = KCalCalibrator(max_epochs=5, random_state=0, device="cpu").fit(X, y)
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
        "n_folds": [Interval(Integral, 2, None, closed="left")],
        "batch_size": [Interval(Integral, 1, None, closed="left")],
        "n_per_class": [Interval(Integral, 1, None, closed="left")],
        "learning_rate": [Interval(Real, 0, None, closed="neither")],
        "max_epochs": [Interval(Integral, 0, None, closed="left")],
        "patience": [Interval(Integral, 1, None, closed="left")],
        "random_state": ["random_state"],
        "device": DEVICE_CONSTRAINT,
        "verbose": ["verbose"],
    }

    def __init__(
        self,
        *,
        classes=None,
        n_components=32,
        projection_fraction=0.5,
        bandwidth="auto",
        n_folds=20,
        batch_size=64,
        n_per_class=20,
        learning_rate=1e-3,
        max_epochs=100,
        patience=10,
        random_state=None,
        device="auto",
        verbose=0,
    ):
        self.classes = classes
        self.n_components = n_components
        self.projection_fraction = projection_fraction
        self.bandwidth = bandwidth
        self.n_folds = n_folds
        self.batch_size = batch_size
        self.n_per_class = n_per_class
        self.learning_rate = learning_rate
        self.max_epochs = max_epochs
        self.patience = patience
        self.random_state = random_state
        self.device = device
        self.verbose = verbose

    def _project(self, X, dev) -> torch.Tensor:
        x = to_tensor((np.asarray(X, np.float64) - self.mean_) / self.scale_, dev)
        params = [to_tensor(p, dev, torch.float64) for p in self.projection_]
        with torch.no_grad():
            return kcal_project(params, x)

    def _fit(self, X, y_index, sample_weight):
        n_samples = X.shape[0]
        n_classes = len(self.classes_)
        rng = check_random_state(self.random_state)
        split_seed, torch_seed, fold_seed = rng.randint(np.iinfo(np.int32).max, size=3)
        train, memory = stratified_split(
            y_index,
            self.projection_fraction,
            n_samples,
            split_seed,
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
        in_y = np.bincount(y_index, weights=sample_weight, minlength=n_classes) > 0
        in_memory = np.bincount(y_index[memory], minlength=n_classes) > 0
        lost = self.classes_[in_y & ~in_memory]
        if lost.size:
            warnings.warn(
                f"KCalCalibrator: {lost.size} class(es) of y have no sample in "
                f"the kernel's memory (the part of the calibration set that does "
                f"not train the projection): {lost.tolist()[:10]}. KCal gives "
                "them probability 0; lower projection_fraction or add samples.",
                MissingClassWarning,
                stacklevel=3,
            )
        per_class = memory.size / max(np.count_nonzero(in_memory), 1)
        if per_class < _MIN_MEMORY_PER_CLASS:
            warnings.warn(
                f"KCalCalibrator predicts from the kernel neighbours among its "
                f"memory of {memory.size} samples: {per_class:.1f} per class on "
                f"average ({n_classes} classes), fewer than "
                f"{_MIN_MEMORY_PER_CLASS}, so its probabilities and accuracy are "
                "unreliable (at 1,000 classes and 5,000 rows its accuracy fell "
                "to 0.02). Use a global calibrator on the head's logits, or more "
                "calibration data.",
                UserWarning,
                stacklevel=3,
            )
        X = np.asarray(X, dtype=np.float64)
        self.mean_ = np.average(X[train], axis=0, weights=sample_weight[train])
        # the spread per feature, computed on deviations divided by their
        # largest absolute value, so that squaring cannot overflow
        dev_train = X[train] - self.mean_
        top = np.max(np.abs(dev_train), axis=0, initial=0.0)
        top = np.where(top > 0, top, 1.0)
        var = np.average((dev_train / top) ** 2, axis=0, weights=sample_weight[train])
        self.scale_ = np.where(var > 0, top * np.sqrt(var), 1.0)
        Z = (X - self.mean_) / self.scale_
        dev = resolve_device(self.device)
        self.projection_, self.bandwidth_init_, self.best_epoch_, self.n_epochs_ = (
            fit_kcal(
                Z[train],
                y_index[train],
                sample_weight[train],
                Z[memory],
                y_index[memory],
                sample_weight[memory],
                n_classes=n_classes,
                n_components=self.n_components,
                batch_size=self.batch_size,
                n_per_class=self.n_per_class,
                lr=self.learning_rate,
                max_epochs=self.max_epochs,
                patience=self.patience,
                seed=int(torch_seed),
                device=dev,
                verbose=self.verbose,
            )
        )
        G = self._project(X[memory], dev)
        self.memory_ = to_numpy(G)
        self.memory_labels_ = y_index[memory]
        self.memory_weights_ = sample_weight[memory]
        y_t = to_tensor(self.memory_labels_, dev, torch.int64)
        w_t = to_tensor(self.memory_weights_, dev, torch.float64)
        targets = self._targets(dev)
        n_folds = min(self.n_folds, memory.size)
        folds = np.empty(memory.size, dtype=np.int64)
        kfold = KFold(n_folds, shuffle=True, random_state=int(fold_seed))
        for k, (_, test) in enumerate(kfold.split(folds)):
            folds[test] = k
        folds_t = to_tensor(folds, dev, torch.int64)

        def objective(log_h: float) -> float:
            return cv_log_loss(G, targets, y_t, w_t, folds_t, float(np.exp(log_h)))

        if self.bandwidth == "auto":
            h0 = np.log(self.bandwidth_init_)
            log_h = golden_section_min(
                objective, h0 - np.log(10.0), h0 + np.log(10.0), xtol=1e-4
            )
            self.bandwidth_ = float(np.exp(log_h))
        else:
            self.bandwidth_ = float(self.bandwidth)
        self.cv_log_loss_ = objective(np.log(self.bandwidth_))

    def _targets(self, dev) -> torch.Tensor:
        onehot = np.zeros((self.memory_labels_.size, len(self.classes_)))
        onehot[np.arange(self.memory_labels_.size), self.memory_labels_] = (
            self.memory_weights_
        )
        return to_tensor(onehot, dev, torch.float64)

    def _predict_proba(self, X):
        dev = resolve_device(self.device)
        with torch.no_grad():
            proba = kcal_proba(
                self._project(X, dev),
                to_tensor(self.memory_, dev, torch.float64),
                self._targets(dev),
                self.bandwidth_,
            )
        return to_numpy(proba)


class LocalNetCalibrator(BaseLocalCalibrator):
    """Local Nets: logits corrected toward a local kernel estimate of the labels.

    The network of Barbera et al. (AISTATS 2026). From the embeddings ``h``
    (standardised), a hidden layer ``u = Dropout(ReLU(h W1 + b1))`` feeds
    two heads: a similarity embedding ``e = u Ws + bs + a_sim * pi + b_sim``,
    ``pi`` the PCA projection of ``h`` (:class:`~skcal.metrics.LocalSpace`,
    up to 50 components), and the calibrated logits ``l = u Wc + bc + a_cls
    * z + b_cls``, ``z = X @ coef.T + intercept`` the frozen head's logits.
    The affine terms ``a, b`` are scalars for up to 10 classes and vectors
    (per dimension / per class) beyond. At initialisation ``l ~ z`` and
    ``e ~ pi``.

    Training (mini-batch Adam): inside each batch, the leave-one-out kernel
    estimate ``p_ker(i) = sum_{j != i} wbar_ij y_j``, ``wbar_ij`` proportional to
    ``exp(-|e_i - e_j|^2 / (2 bandwidth^2))``, is a local estimate of the
    label distribution; the loss is ``lambda_js`` times the mean binary
    (one-vs-rest) Jensen-Shannon distance between ``softmax(l)`` and
    ``p_ker`` plus ``alpha_ce`` times the log loss of ``p_ker`` (which
    shapes the embedding). Early stopping monitors the JS term on a
    held-out ``validation_fraction`` and restores the best epoch.
    :meth:`predict_proba` is ``softmax(l)``.

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
    hidden_size : int, default=64
        Width of the shared hidden layer (the paper: 64 for CIFAR-10, 128
        for CIFAR-100, 256 for Tissue).
    dropout : float, default=0.3
        Dropout rate of the hidden layer during training.
    n_components : int, default=50
        Dimension of ``pi`` and ``e`` (capped by the data).
    bandwidth : float, default=10.0
        Standard deviation ``gamma`` of the Gaussian kernel of ``p_ker``
        (fixed, as in the paper). It is an absolute scale in the PCA space:
        lower it for low-dimensional embeddings.
    lambda_js : float, default=1.0
        Weight of the JS distance. With 0 the logits are not trained toward
        the kernel estimate (only through the shared hidden layer); the VQ
        paper's "KC" baseline trains this way but predicts with the kernel
        estimate, which this class does not do.
    alpha_ce : float, default=1.0
        Weight of the kernel estimate's log loss.
    learning_rate : float, default=1e-3
        Adam step size.
    weight_decay : float, default=0.0
        Adam's L2 weight decay.
    batch_size : int, default=1024
        Mini-batch size; the kernel estimate of a row uses its batch.
    max_epochs : int, default=100
        Maximum passes over the training part.
    validation_fraction : float, default=0.1
        Part of the calibration set held out for early stopping.
    patience : int, default=10
        Epochs without improvement of the validation loss before stopping.
    random_state : int, RandomState instance or None, default=None
        Seeds the split, the initialisation, the batches and the dropout.
    device : {"auto", "cpu", "cuda"} or "cuda:N", default="auto"
        Where the network is trained and evaluated.
    verbose : int, default=0
        Print the validation loss of every epoch.

    Attributes
    ----------
    coef_, intercept_ : ndarray
        Head used (``coef`` and ``intercept``, or the fitted one).
    space_ : LocalSpace
        Standardisation and PCA of the embeddings (fitted on the training
        part); its scaler also standardises ``h``.
    network_ : dict of ndarray
        Parameters ``W1, b1, Ws, bs, a_sim, b_sim, Wc, bc, a_cls, b_cls``.
    best_epoch_, n_epochs_ : int
        Epoch whose parameters were kept (0: the initial, identity-like
        network), and epochs run.
    present_classes_ : ndarray of shape (n_classes,), dtype=bool
        Whether each class has samples (of positive weight) in the training
        part; the others get the mean logit map of these.
    classes_ : ndarray of shape (n_classes,)
        Label of each column.
    n_features_in_ : int
        Number of embedding dimensions.

    Notes
    -----
    **A class without calibration samples** (absent from ``y``, with a
    :class:`~skcal.exceptions.MissingClassWarning`, or from the training
    part) has no kernel estimate: ``p_ker`` is 0 for it by construction,
    not by evidence, and training toward it would teach the network that
    the class never occurs. So the losses run over the present classes
    only (softmax and JS distance over them), and after training the
    absent class's logit parameters (its columns of ``Wc`` and ``bc``, and
    of ``a_cls``, ``b_cls`` when they are per class) are the mean of the
    present classes': nothing was learned about the class, so it gets the
    correction common to all classes, as the one-vs-rest calibrators give
    such a class the mean of the others' maps. With every class present
    this is the method as published.

    The reference feeds the raw embeddings to the hidden layer; here they
    are standardised first (the same affine map at prediction time), so
    the ``N(0, 0.01^2)`` initialisation means the same for any feature
    scale. The kernel weights are a softmax over the batch, self excluded:
    where every kernel value underflows the nearest neighbours decide (the
    reference's ``+1e-6`` denominator gives about 0 there), and a row with
    no other positive-weight row in its batch adds nothing to the loss.
    Sample weights weight the kernel estimate and the losses as
    frequencies; zero-weight rows are left out, also of the scaler and PCA.

    References
    ----------
    L. Barbera, L. Perini, G. De Toni, A. Passerini, A. Pugnana. "Local
    calibration networks" (Local Nets). AISTATS 2026, arXiv:2510.26566.

    Examples
    --------
    >>> import numpy as np
    >>> from skcal import LocalNetCalibrator
    >>> from skcal.utils._testing import make_region_miscalibrated_embeddings
    >>> X, y, coef, intercept, _ = make_region_miscalibrated_embeddings(
    ...     600, 3, random_state=0)
    >>> net = LocalNetCalibrator(coef=coef, intercept=intercept, bandwidth=2.0,
    ...                          random_state=0, device="cpu").fit(X, y)
    >>> net.predict_proba(X).shape
    (600, 3)
    >>> net.embed(X).shape
    (600, 16)
    """

    _uses_head = True
    _parameter_constraints: dict = {
        **BaseLocalCalibrator._parameter_constraints,
        "coef": ["array-like", None],
        "intercept": ["array-like", None],
        "hidden_size": [Interval(Integral, 1, None, closed="left")],
        "dropout": [Interval(Real, 0, 1, closed="left")],
        "n_components": [Interval(Integral, 1, None, closed="left")],
        "bandwidth": [Interval(Real, 0, None, closed="neither")],
        "lambda_js": [Interval(Real, 0, None, closed="left")],
        "alpha_ce": [Interval(Real, 0, None, closed="left")],
        "learning_rate": [Interval(Real, 0, None, closed="neither")],
        "weight_decay": [Interval(Real, 0, None, closed="left")],
        "batch_size": [Interval(Integral, 2, None, closed="left")],
        "max_epochs": [Interval(Integral, 0, None, closed="left")],
        "validation_fraction": [Interval(Real, 0, 1, closed="neither")],
        "patience": [Interval(Integral, 1, None, closed="left")],
        "random_state": ["random_state"],
        "device": DEVICE_CONSTRAINT,
        "verbose": ["verbose"],
    }

    def __init__(
        self,
        *,
        coef=None,
        intercept=None,
        classes=None,
        hidden_size=64,
        dropout=0.3,
        n_components=50,
        bandwidth=10.0,
        lambda_js=1.0,
        alpha_ce=1.0,
        learning_rate=1e-3,
        weight_decay=0.0,
        batch_size=1024,
        max_epochs=100,
        validation_fraction=0.1,
        patience=10,
        random_state=None,
        device="auto",
        verbose=0,
    ):
        self.coef = coef
        self.intercept = intercept
        self.classes = classes
        self.hidden_size = hidden_size
        self.dropout = dropout
        self.n_components = n_components
        self.bandwidth = bandwidth
        self.lambda_js = lambda_js
        self.alpha_ce = alpha_ce
        self.learning_rate = learning_rate
        self.weight_decay = weight_decay
        self.batch_size = batch_size
        self.max_epochs = max_epochs
        self.validation_fraction = validation_fraction
        self.patience = patience
        self.random_state = random_state
        self.device = device
        self.verbose = verbose

    def _inputs(self, X):
        X = np.asarray(X, dtype=np.float64)
        h = self.space_.scaler_.transform(X)
        return h, self._logits(X), self.space_.pca_.transform(h)

    def _fit(self, X, y_index, sample_weight):
        from ..metrics import LocalSpace

        n_samples = X.shape[0]
        rng = check_random_state(self.random_state)
        split_seed, torch_seed = rng.randint(np.iinfo(np.int32).max, size=2)
        val, train = stratified_split(
            y_index,
            self.validation_fraction,
            n_samples,
            split_seed,
            "LocalNetCalibrator",
            sample_weight,
        )
        positive = sample_weight > 0
        train, val = train[positive[train]], val[positive[val]]
        if train.size < 2 or val.size < 1:
            raise ValueError(
                "LocalNetCalibrator: too few samples with a positive weight "
                f"({train.size} to train, {val.size} to validate); give more "
                "samples a positive weight."
            )
        self.space_ = LocalSpace(n_components=self.n_components).fit(X[train])
        self.present_classes_ = (
            np.bincount(
                y_index[train],
                weights=sample_weight[train],
                minlength=len(self.classes_),
            )
            > 0
        )
        h, z, pi = self._inputs(X)
        self.network_, self.best_epoch_, self.n_epochs_ = fit_local_net(
            h,
            z,
            pi,
            y_index,
            sample_weight,
            train_idx=train,
            val_idx=val,
            hidden=self.hidden_size,
            dropout=float(self.dropout),
            bandwidth=float(self.bandwidth),
            lambda_js=float(self.lambda_js),
            alpha_ce=float(self.alpha_ce),
            vector_affine=len(self.classes_) > 10,
            lr=float(self.learning_rate),
            weight_decay=float(self.weight_decay),
            batch_size=self.batch_size,
            max_epochs=self.max_epochs,
            patience=self.patience,
            seed=int(torch_seed),
            device=resolve_device(self.device),
            verbose=self.verbose,
            present=self.present_classes_,
        )

    def _predict_proba(self, X):
        return local_net_predict(
            self.network_, *self._inputs(X), resolve_device(self.device)
        )

    def embed(self, X) -> np.ndarray:
        """Similarity embedding ``e`` of each sample (the Local Net's space).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Embeddings.

        Returns
        -------
        ndarray of shape (n_samples, d)
            ``d`` is the number of PCA components, ``space_.n_components_``.
        """
        check_is_fitted(self)
        X = self._validate_embeddings(X, reset=False)
        return local_net_predict(
            self.network_,
            *self._inputs(X),
            resolve_device(self.device),
            embedding=True,
        )
