"""Class-based temperature scaling (Frenkel & Goldberger, 2021)."""

from __future__ import annotations

from numbers import Integral

import numpy as np

from .._torch.kernels import class_temperature_search
from ..base import BaseCalibrator, export_input
from ..utils._sklearn import DEVICE_CONSTRAINT, Interval, StrOptions
from ._scaling import fit_inverse_temperature

__all__ = ["ClassTemperatureScaling"]


class ClassTemperatureScaling(BaseCalibrator):
    """Class-based temperature scaling (CTS): one temperature per class.

    Frenkel & Goldberger (2021). All temperatures start at the NLL-optimal
    global temperature (clamped to the grid's range; see ``grid``); then
    ``n_iter`` greedy passes visit the classes in turn and give class ``k``
    the value of ``grid`` that most lowers the top-label ECE (``n_bins``
    equal-width bins) on the calibration set without lowering its accuracy.
    Classes are visited in sorted label order, so the result does not depend
    on the column order of ``X``.

    ``mode`` says where the temperatures apply:

    * ``"column"`` (the paper): column ``k`` of the logits is divided by
      ``T_k``. The predicted class can change (accuracy may even rise on the
      calibration set, and may fall on new data).
    * ``"predicted"``: every logit of a row is divided by the temperature of
      the row's predicted class, so predictions never change.

    Parameters
    ----------
    input : {"logits", "proba"}, default="logits"
        What ``X`` holds.
    classes : array-like of shape (n_classes,), default=None
        The label of each column of ``X``.
    mode : {"column", "predicted"}, default="column"
        Temperature of each column, or of each row's predicted class.
    grid : array-like of float, default=None
        Candidate temperatures (positive). None: the paper's 0.5, 0.6, ...,
        5.0, multiplied by ``T / 5`` (or ``T / 0.5``) when the global
        temperature ``T`` lies above (or below) it, so that logits far from
        the usual scale (times 100, say) start from temperature scaling
        instead of the grid's edge. A given grid is used as it is.
    n_iter : int, default=5
        Number of greedy passes over the classes.
    n_bins : int, default=15
        Bins of the ECE objective.
    device : {"auto", "cpu", "cuda"} or "cuda:N", default="auto"
        Where the search runs.
    verbose : int, default=0
        0: silent. 1: a progress bar on stderr over the ``n_iter x
        n_classes`` class visits of the search. 2: also one line per visit.

    Attributes
    ----------
    temperatures_ : ndarray of shape (n_classes,)
        Fitted temperature of each class.
    temperature_init_ : float
        The global temperature the search started from, clamped to the grid.
    grid_ : ndarray
        The candidate temperatures searched.
    classes_ : ndarray of shape (n_classes,)
        Label of each column.
    n_features_in_ : int
        Number of columns of ``X``.

    Notes
    -----
    Cost, for ``n`` rows, ``C`` classes and ``G`` candidates: in
    ``"predicted"`` mode one table of bin sums per class and candidate is
    built once (``O(n G)``), then each pass costs ``O(C G n_bins)`` (2,000 x
    1,000 logits: 0.6 s). In ``"column"`` mode every candidate of every
    class re-bins the rows, ``O(n C G)`` per pass, in blocks of bounded
    memory (2,000 x 1,000 logits: about 12 s).

    References
    ----------
    L. Frenkel, J. Goldberger. "Network calibration by class-based
    temperature scaling". EUSIPCO 2021.

    Examples
    --------
    >>> import numpy as np
    >>> from skcal import ClassTemperatureScaling
    >>> from skcal.utils._testing import make_miscalibrated_logits
    >>> logits, y = make_miscalibrated_logits(2000, 4, temperature=2.0, random_state=0)
    >>> cts = ClassTemperatureScaling(mode="predicted", device="cpu").fit(logits, y)
    >>> cts.temperatures_.shape
    (4,)
    >>> bool(np.all(cts.predict(logits) == logits.argmax(axis=1)))
    True
    """

    _needs_torch = True  # its fit runs torch kernels

    @property
    def _shift_invariant(self):
        return self.mode == "predicted"  # a temperature per column is not

    @property
    def _keeps_argmax(self):
        return "proba" if self.mode == "predicted" else None

    _parameter_constraints: dict = {
        **BaseCalibrator._parameter_constraints,
        "mode": [StrOptions({"column", "predicted"})],
        "grid": ["array-like", None],
        "n_iter": [Interval(Integral, 0, None, closed="left")],
        "n_bins": [Interval(Integral, 1, None, closed="left")],
        "device": DEVICE_CONSTRAINT,
        "verbose": ["verbose"],
    }

    def __init__(
        self,
        *,
        input="logits",
        classes=None,
        mode="column",
        grid=None,
        n_iter=5,
        n_bins=15,
        device="auto",
        verbose=0,
    ):
        self.input = input
        self.classes = classes
        self.mode = mode
        self.grid = grid
        self.n_iter = n_iter
        self.n_bins = n_bins
        self.device = device
        self.verbose = verbose

    def n_free_parameters(self, n_classes, n_features=None):
        """``C``: one temperature per class."""
        return n_classes

    def _fit(self, logits, y_index, sample_weight):
        grid = (
            np.round(np.arange(0.5, 5.0 + 1e-9, 0.1), 10)
            if self.grid is None
            else np.asarray(self.grid, dtype=np.float64).ravel()
        )
        if grid.size == 0 or np.any(~np.isfinite(grid)) or np.any(grid <= 0):
            raise ValueError(
                f"grid must hold positive finite temperatures; got {self.grid!r}."
            )
        beta = fit_inverse_temperature(logits, y_index, sample_weight, self.device).x
        global_t = 1.0 / beta
        if self.grid is None and not grid.min() <= global_t <= grid.max():
            # the paper's grid is for logits of the usual scale: scaled so
            # that it starts at temperature scaling's value, not at its edge
            grid = grid * (global_t / np.clip(global_t, grid.min(), grid.max()))
        self.grid_ = grid
        self.temperature_init_ = float(np.clip(global_t, grid.min(), grid.max()))
        self.temperatures_ = class_temperature_search(
            logits,
            y_index,
            sample_weight,
            initial=self.temperature_init_,
            grid=grid,
            n_iter=self.n_iter,
            n_bins=self.n_bins,
            predicted=self.mode == "predicted",
            # visit classes in label order: the result ignores the column order
            order=np.argsort(self.classes_, kind="stable"),
            device=self.device,
            verbose=self.verbose,
        )

    def to_torch(self):
        """The fitted map as a torch module: scores to calibrated probabilities.

        The input handling, the division by the temperature of each column
        (``mode="column"``) or of each row's top column (``mode="predicted"``),
        a softmax. See :func:`skcal.export.to_torch`.

        Returns
        -------
        torch.nn.Module

        Examples
        --------
        >>> from skcal import ClassTemperatureScaling
        >>> from skcal.export import check_export
        >>> from skcal.utils._testing import make_miscalibrated_logits
        >>> X, y = make_miscalibrated_logits(n_samples=200, random_state=0)
        >>> cal = ClassTemperatureScaling().fit(X, y)
        >>> bool(check_export(cal, X, cal.to_torch()) < 1e-12)
        True
        """
        from .._torch._export import Chain, ClassTemperature, Softmax, Temperature

        if self.mode == "column":
            block = Temperature(self.temperatures_)
        else:
            block = ClassTemperature(self.temperatures_)
        return Chain(export_input(self), block, Softmax())

    def _calibrated_logits(self, logits):
        logits = np.asarray(logits, dtype=np.float64)
        if self.mode == "column":
            return logits / self.temperatures_
        return logits / self.temperatures_[np.argmax(logits, axis=1)][:, None]
