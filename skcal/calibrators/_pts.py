"""Parameterized temperature scaling (Tomani et al., 2022)."""

from __future__ import annotations

from numbers import Integral

import numpy as np
from sklearn.utils import check_random_state

from .._torch.kernels import fit_pts, pts_predict_logits
from ..base import BaseCalibrator, export_input
from ..utils._constraints import MINIBATCH_CONSTRAINTS, TRAINING_CONSTRAINTS
from ..utils._parameters import hidden_sizes, mlp_count
from ..utils._sklearn import Interval
from ..utils._split import split_rows
from ..utils._training import training_options
from ..utils._validation import check_hidden_layer_sizes
from ._scaling import fit_inverse_temperature

__all__ = ["ParameterizedTemperatureScaling"]


class ParameterizedTemperatureScaling(BaseCalibrator):
    """Parameterized temperature scaling (PTS): a temperature per sample.

    ``T(z) = |MLP(top-k sorted logits)|`` (clipped to [1e-12, 1e12]) and
    ``p = softmax(z / T(z))``, with ``k = min(n_top, n_classes)``. The network
    (by default two hidden layers of 5 ReLU units, as in the paper) is
    trained with mini-batch Adam on the Brier score, the paper's MSE loss, on
    a random ``1 - validation_fraction`` of the calibration set (stratified
    on the labels when every class has two samples or more; at least one
    sample is held out and one is trained on); training stops when the loss
    on the rest has not improved for ``n_iter_no_change`` epochs, and the best
    epoch's weights are kept. A temperature never changes the predicted
    class.

    Two departures from the paper make the method independent of the
    logits' offset and scale, which the softmax ignores:

    * the network reads ``z = (X - max(X)) / T0``, each row shifted so that
      its largest logit is 0 and divided by the NLL-optimal global
      temperature ``T0`` (``temperature_init_``); it is this ``z`` that is
      clipped, at -100 (the paper clips raw logits at +-100, which sends
      every row of logits offset by 150 to the uniform distribution);
    * its output layer starts at weight 0 and bias 1 (the paper: random), so
      training starts from temperature scaling and ``T`` is relative to
      ``T0``.

    Fitting on ``a * X + c`` (``a > 0``, ``c`` a constant per row) therefore
    gives the same probabilities as fitting on ``X``.

    Parameters
    ----------
    input : {"logits", "proba"}, default="logits"
        What ``X`` holds.
    classes : array-like of shape (n_classes,), default=None
        The label of each column of ``X``.
    n_top : int, default=10
        Number of largest logits fed to the network (capped at the number
        of classes).
    hidden_layer_sizes : tuple of int, default=(5, 5)
        Widths of the hidden ReLU layers.
    learning_rate : float, default=5e-3
        Adam step size.
    weight_decay : float, default=0.0
        Adam's L2 weight decay.
    batch_size : int, default=1000
        Mini-batch size.
    max_iter : int, default=300
        Maximum number of passes over the training part.
    validation_fraction : float, default=0.1
        Part of the calibration set held out for early stopping.
    n_iter_no_change : int, default=20
        Epochs without improvement of the validation loss before stopping.
    random_state : int, RandomState instance or None, default=None
        Seeds the split, the initialisation and the shuffling.
    device : {"auto", "cpu", "cuda"} or "cuda:N", default="auto"
        Where the network is trained and evaluated.
    verbose : int, default=0
        0: silent. 1: a progress bar on stderr for each training phase (its
        name, epoch k of ``max_iter``, elapsed and remaining time, the
        validation loss). 2: also one line per epoch.

    Attributes
    ----------
    coefs_ : list of ndarray
        Weight matrices of the network, input layer first.
    intercepts_ : list of ndarray
        Bias vectors of the network.
    n_top_ : int
        Number of sorted logits used.
    temperature_init_ : float
        Global temperature the training started from.
    best_iter_ : int
        Epoch whose weights were kept (0: the initial, global temperature).
    n_iter_ : int
        Epochs run.
    classes_ : ndarray of shape (n_classes,)
        Label of each column.
    n_features_in_ : int
        Number of columns of ``X``.

    References
    ----------
    C. Tomani, D. Cremers, F. Buettner. "Parameterized Temperature Scaling
    for Boosting the Expressive Power in Post-Hoc Uncertainty Calibration".
    ECCV 2022.

    Examples
    --------
    >>> import numpy as np
    >>> from skcal import ParameterizedTemperatureScaling
    >>> from skcal.utils._testing import make_miscalibrated_logits
    >>> logits, y = make_miscalibrated_logits(1000, 4, temperature=2.0, random_state=0)
    >>> pts = ParameterizedTemperatureScaling(random_state=0, device="cpu")
    >>> pts.fit(logits, y).n_top_
    4
    >>> bool(np.all(pts.predict(logits) == logits.argmax(axis=1)))
    True
    """

    _needs_torch = True  # its fit runs torch kernels
    _shift_invariant = True
    _keeps_argmax = "proba"

    _parameter_constraints: dict = {
        **BaseCalibrator._parameter_constraints,
        "n_top": [Interval(Integral, 1, None, closed="left")],
        "hidden_layer_sizes": ["array-like"],
        **TRAINING_CONSTRAINTS,
        **MINIBATCH_CONSTRAINTS,
    }

    def __init__(
        self,
        *,
        input="logits",
        classes=None,
        n_top=10,
        hidden_layer_sizes=(5, 5),
        learning_rate=5e-3,
        weight_decay=0.0,
        batch_size=1000,
        max_iter=300,
        validation_fraction=0.1,
        n_iter_no_change=20,
        random_state=None,
        device="auto",
        verbose=0,
    ):
        self.input = input
        self.classes = classes
        self.n_top = n_top
        self.hidden_layer_sizes = hidden_layer_sizes
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
        """The weights and biases of the temperature network on the top
        ``min(n_top, C)`` sorted logits."""
        sizes = [
            min(int(self.n_top), n_classes),
            *hidden_sizes(self.hidden_layer_sizes),
        ]
        return mlp_count([*sizes, 1])

    def _fit(self, logits, y_index, sample_weight):
        n_samples, n_classes = logits.shape
        if n_samples < 4:
            raise ValueError(
                f"ParameterizedTemperatureScaling needs at least 4 calibration "
                f"samples (a training and a validation part); got {n_samples}."
            )
        rng = check_random_state(self.random_state)
        split_seed, torch_seed = rng.randint(np.iinfo(np.int32).max, size=2)
        train_idx, val_idx = self._train_validation_split(y_index, int(split_seed))
        beta = fit_inverse_temperature(logits, y_index, sample_weight, self.device).x
        self.temperature_init_ = float(1.0 / beta)
        self.n_top_ = int(min(self.n_top, n_classes))
        fitted = fit_pts(
            logits * beta,
            y_index,
            sample_weight,
            k=self.n_top_,
            hidden=check_hidden_layer_sizes(self.hidden_layer_sizes),
            initial_temperature=1.0,
            train_idx=train_idx,
            val_idx=val_idx,
            options=training_options(self, torch_seed),
        )
        self.coefs_ = fitted.coefs
        self.intercepts_ = fitted.intercepts
        self.best_iter_ = fitted.best_epoch
        self.n_iter_ = fitted.n_epochs

    def _train_validation_split(self, y_index, seed):
        """Sorted rows of the training and the validation part.

        The validation part holds ``round(validation_fraction * n)`` rows, at
        least 1 and at most ``n - 1``. The split is stratified when every
        class present has 2 samples or more and each part can hold one of every
        class; it is stratified on the labels' sorted order (not on the
        column order of ``X``), so that reordering the columns together with
        ``classes`` gives the same split.
        """
        n_samples = len(y_index)
        n_val = int(round(self.validation_fraction * n_samples))
        n_val = min(n_samples - 1, max(1, n_val))
        labels = np.unique(self.classes_[y_index], return_inverse=True)[1]
        return split_rows(labels, np.arange(n_samples), n_samples - n_val, seed)

    def to_torch(self):
        """The fitted map as a torch module: scores to calibrated probabilities.

        The input handling, the temperature network on the sorted top logits,
        the division by its temperature, a softmax. See
        :func:`skcal.export.to_torch`.

        Returns
        -------
        torch.nn.Module

        Examples
        --------
        >>> from skcal import ParameterizedTemperatureScaling
        >>> from skcal.export import check_export
        >>> from skcal.utils._testing import make_miscalibrated_logits
        >>> X, y = make_miscalibrated_logits(n_samples=200, random_state=0)
        >>> cal = ParameterizedTemperatureScaling(max_iter=5, random_state=0).fit(X, y)
        >>> bool(check_export(cal, X, cal.to_torch()) < 1e-12)
        True
        """
        from .._torch._export import Chain, Softmax, TopTemperature
        from .._torch.kernels._pts import LOGIT_CLIP

        network = TopTemperature(
            self.temperature_init_, self.coefs_, self.intercepts_, self.n_top_,
            LOGIT_CLIP,
        )  # fmt: skip
        return Chain(export_input(self), network, Softmax())

    def _calibrated_logits(self, logits):
        return pts_predict_logits(
            self.coefs_,
            self.intercepts_,
            logits,
            self.temperature_init_,
            self.n_top_,
            self.device,
        )
