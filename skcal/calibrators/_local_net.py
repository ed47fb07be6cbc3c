"""Local Nets: logits corrected toward a local kernel estimate of the labels."""

from __future__ import annotations

from numbers import Integral, Real

import numpy as np
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted

from .._torch.kernels import fit_local_net, local_net_predict
from ..base import BaseLocalCalibrator
from ..utils._constraints import MINIBATCH_CONSTRAINTS, TRAINING_CONSTRAINTS
from ..utils._parameters import hidden_sizes, mlp_count
from ..utils._sklearn import Interval
from ..utils._split import stratified_split
from ..utils._training import training_options
from ..utils._validation import check_hidden_layer_sizes
from ._vq_local import warn_accuracy_drop

__all__ = ["LocalNetCalibrator"]


class LocalNetCalibrator(BaseLocalCalibrator):
    """Local Nets: logits corrected toward a local kernel estimate of the labels.

    The network of Barbera et al. (AISTATS 2026). From the embeddings ``h``
    (standardised), a hidden layer ``u = Dropout(ReLU(h W1 + b1))`` (one per
    entry of ``hidden_layer_sizes``, each feeding the next) feeds
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
    hidden_layer_sizes : int or tuple of int, default=(64,)
        Widths of the shared hidden ReLU layers; the paper has one, of width
        64 for CIFAR-10, 128 for CIFAR-100 and 256 for Tissue. ``()`` feeds
        the standardised embeddings to the two heads directly.
    dropout : float, default=0.3
        Dropout rate of each hidden layer during training.
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
    max_iter : int, default=100
        Maximum passes over the training part.
    validation_fraction : float, default=0.1
        Part of the calibration set held out for early stopping.
    n_iter_no_change : int, default=10
        Epochs without improvement of the validation loss before stopping.
    random_state : int, RandomState instance or None, default=None
        Seeds the split, the initialisation, the batches and the dropout.
    device : {"auto", "cpu", "cuda"} or "cuda:N", default="auto"
        Where the network is trained and evaluated.
    verbose : int, default=0
        0: silent. 1: a progress bar on stderr for each training phase (its
        name, epoch k of ``max_iter``, elapsed and remaining time, the
        validation loss). 2: also one line per epoch.

    Attributes
    ----------
    coef_, intercept_ : ndarray
        Head used (``coef`` and ``intercept``, or the fitted one).
    space_ : LocalSpace
        Standardisation and PCA of the embeddings (fitted on the training
        part); its scaler also standardises ``h``.
    network_ : dict of ndarray
        Parameters ``W1, b1, ..., Wk, bk`` (the ``k`` hidden layers), ``Ws,
        bs, a_sim, b_sim, Wc, bc, a_cls, b_cls``.
    best_iter_, n_iter_ : int
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

    **Accuracy.** The calibrated logits can rank the classes differently
    from the head. When the head is given (``coef``), the accuracy of
    :meth:`predict_proba` on the validation part is compared with the
    head's on the same rows, and a drop of more than one point and two
    standard errors of the paired difference raises an
    :class:`~skcal.exceptions.AccuracyDropWarning`. A head fitted here has
    seen those rows, so it is not compared.

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
    C. Barbera, L. Perini, G. De Toni, A. Passerini, A. Pugnana. "Multiclass
    Local Calibration With the Jensen-Shannon Distance" (Local Nets).
    AISTATS 2026, arXiv:2510.26566.

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
        "hidden_layer_sizes": [
            Interval(Integral, 1, None, closed="left"),
            "array-like",
        ],
        "dropout": [Interval(Real, 0, 1, closed="left")],
        "n_components": [Interval(Integral, 1, None, closed="left")],
        "bandwidth": [Interval(Real, 0, None, closed="neither")],
        "lambda_js": [Interval(Real, 0, None, closed="left")],
        "alpha_ce": [Interval(Real, 0, None, closed="left")],
        **TRAINING_CONSTRAINTS,
        **MINIBATCH_CONSTRAINTS,
        # at least 2: a row's kernel estimate is over the other rows of its
        # batch (leave-one-out), so a batch of one has no target
        "batch_size": [Interval(Integral, 2, None, closed="left")],
    }

    def __init__(
        self,
        *,
        coef=None,
        intercept=None,
        classes=None,
        hidden_layer_sizes=(64,),
        dropout=0.3,
        n_components=50,
        bandwidth=10.0,
        lambda_js=1.0,
        alpha_ce=1.0,
        learning_rate=1e-3,
        weight_decay=0.0,
        batch_size=1024,
        max_iter=100,
        validation_fraction=0.1,
        n_iter_no_change=10,
        random_state=None,
        device="auto",
        verbose=0,
    ):
        self.coef = coef
        self.intercept = intercept
        self.classes = classes
        self.hidden_layer_sizes = hidden_layer_sizes
        self.dropout = dropout
        self.n_components = n_components
        self.bandwidth = bandwidth
        self.lambda_js = lambda_js
        self.alpha_ce = alpha_ce
        self.learning_rate = learning_rate
        self.weight_decay = weight_decay
        self.batch_size = batch_size
        self.max_iter = max_iter
        self.validation_fraction = validation_fraction
        self.n_iter_no_change = n_iter_no_change
        self.random_state = random_state
        self.device = device
        self.verbose = verbose

    def n_free_parameters(self, n_classes, n_features=None):
        """The network's weights: the hidden layers, the similarity head to
        ``n_components`` and the class head, with their affine maps of the
        PCA features and the logits (vectors above 10 classes)."""
        n_features = n_classes if n_features is None else int(n_features)
        hidden = hidden_sizes(self.hidden_layer_sizes)
        width, d = hidden[-1], int(self.n_components)
        affine = (d + n_classes) if n_classes > 10 else 2
        return (
            mlp_count([n_features, *hidden])
            + (width + 1) * d
            + (width + 1) * n_classes
            + 2 * affine
        )

    def _inputs(self, X):
        X = np.asarray(X, dtype=np.float64)
        h = self.space_.scaler_.transform(X)
        return h, self._logits(X), self.space_.pca_.transform(h)

    def _split(self, y_index, sample_weight, seed):
        """Rows that train and rows that validate (of positive weight)."""
        val, train = stratified_split(
            y_index,
            self.validation_fraction,
            len(y_index),
            seed,
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
        return train, val

    def _fit(self, X, y_index, sample_weight):
        from ..metrics import LocalSpace

        hidden = check_hidden_layer_sizes(self.hidden_layer_sizes)
        rng = check_random_state(self.random_state)
        split_seed, torch_seed = rng.randint(np.iinfo(np.int32).max, size=2)
        train, val = self._split(y_index, sample_weight, split_seed)
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
        fit = fit_local_net(
            h,
            z,
            pi,
            y_index,
            sample_weight,
            train_idx=train,
            val_idx=val,
            hidden=hidden,
            dropout=float(self.dropout),
            bandwidth=float(self.bandwidth),
            lambda_js=float(self.lambda_js),
            alpha_ce=float(self.alpha_ce),
            vector_affine=len(self.classes_) > 10,
            options=training_options(self, torch_seed),
            present=self.present_classes_,
        )
        self.network_ = fit.network
        self.best_iter_, self.n_iter_ = fit.best_epoch, fit.n_epochs
        if self.coef is not None:  # a fitted head has seen the validation rows
            warn_accuracy_drop(
                "LocalNetCalibrator",
                y_index[val],
                self._predict_proba(X[val]),
                z[val],
                sample_weight[val],
                f"Its logits are pulled toward the kernel estimate of the "
                f"labels, which averages them over neighbours within about "
                f"bandwidth={self.bandwidth:g} in the PCA space: lower "
                f"bandwidth (an absolute scale; low-dimensional embeddings "
                f"need less) or lambda_js={self.lambda_js:g}, or use a global "
                f"calibrator of the head's logits if accuracy matters.",
            )

    def _predict_proba(self, X):
        return local_net_predict(self.network_, *self._inputs(X), self.device)

    def to_torch(self):
        """The fitted calibrator as a torch module: embeddings to calibrated
        probabilities.

        The standardisation of the embeddings, the hidden layers and the
        logits head of the network, the frozen head's logits ``coef_``,
        ``intercept_``, a softmax (the similarity embedding, used only in
        training, is left out). See :func:`skcal.export.to_torch`.

        Returns
        -------
        torch.nn.Module

        Examples
        --------
        >>> from skcal import LocalNetCalibrator
        >>> from skcal.export import check_export
        >>> from skcal.utils._testing import make_region_miscalibrated_embeddings
        >>> X, y, coef, intercept, _ = make_region_miscalibrated_embeddings(
        ...     300, 3, random_state=0)
        >>> cal = LocalNetCalibrator(coef=coef, intercept=intercept, max_iter=5,
        ...                          random_state=0).fit(X, y)
        >>> bool(check_export(cal, X, cal.to_torch()) < 1e-12)
        True
        """
        from .._torch._export import Chain, LocalNetLogits, Softmax
        from .._torch.kernels._local_net import n_hidden_layers

        check_is_fitted(self)
        net, scaler = self.network_, self.space_.scaler_
        hidden = [
            (net[f"W{i}"], net[f"b{i}"]) for i in range(1, n_hidden_layers(net) + 1)
        ]
        output = tuple(net[name] for name in ("Wc", "bc", "a_cls", "b_cls"))
        logits = LocalNetLogits(
            scaler.mean_, scaler.scale_, self.coef_, self.intercept_, hidden, output
        )
        return Chain(logits, Softmax())

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
            self.device,
            embedding=True,
        )
