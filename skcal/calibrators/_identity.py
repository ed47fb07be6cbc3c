"""The identity calibrator: no calibration, as a calibrator."""

from __future__ import annotations

import numpy as np

from ..base import BaseCalibrator, export_input

__all__ = ["IdentityCalibrator"]


class IdentityCalibrator(BaseCalibrator):
    """No calibration: the classifier's own probabilities.

    :meth:`predict_proba` is the softmax of the logits (``input="logits"``)
    or the validated probabilities, renormalised to sum to 1
    (``input="proba"``; entries floored at 2.2e-308 only: nothing is
    fitted, so no ``proba_floor_``). :meth:`fit` learns nothing: it validates ``X``,
    ``y`` and ``sample_weight`` and records ``classes_``. Use it as the
    "no calibration" baseline that any calibrator must beat, for instance
    among the candidates of :class:`~skcal.model_selection.CalibratorSearchCV`
    or in a ``GridSearchCV`` over ``calibrator``; it has no parameter to fit
    and never changes the predicted class.

    Parameters
    ----------
    input : {"logits", "proba"}, default="logits"
        What ``X`` holds. Probabilities are validated (values in [0, 1], rows
        summing to 1 within 1e-4). Never guessed.
    classes : array-like of shape (n_classes,), default=None
        The label of each column of ``X``. See :class:`~skcal.base.BaseCalibrator`.

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
        Label of each column.
    n_features_in_ : int
        Number of columns of ``X`` (the number of classes).

    See Also
    --------
    TemperatureScaling : the simplest calibrator that learns something (one
        parameter).

    Notes
    -----
    :meth:`decision_function` returns the logits shifted to a row maximum of
    0 (logits are defined up to a constant per row), or for
    ``input="proba"`` the logs of the validated probabilities.

    Examples
    --------
    >>> import numpy as np
    >>> from skcal import IdentityCalibrator
    >>> logits = np.array([[2.0, 0.0, 0.0], [0.0, 1.0, 3.0], [0.0, 2.0, 1.0]])
    >>> identity = IdentityCalibrator().fit(logits, [0, 2, 1])
    >>> identity.predict_proba(logits[:2]).round(3)
    array([[0.787, 0.107, 0.107],
           [0.042, 0.114, 0.844]])
    >>> identity.predict(logits)
    array([0, 2, 1])
    >>> proba = np.array([[0.5, 0.3, 0.2], [0.1, 0.1, 0.8], [0.2, 0.4, 0.4]])
    >>> IdentityCalibrator(input="proba").fit(proba, [0, 2, 1]).predict_proba(proba)
    array([[0.5, 0.3, 0.2],
           [0.1, 0.1, 0.8],
           [0.2, 0.4, 0.4]])
    """

    _shift_invariant = True
    _keeps_argmax = "proba"
    # no map to fit: it cannot correct an over-confident temperature
    # (tests/calibrators/test_behaviour.py reads this statement)
    _corrects_temperature = False
    # predict_proba is the softmax of the logits (float64 scores passed
    # unshifted), or with input="proba" the validated probabilities themselves
    # (nothing is fitted: the floor stays PROBA_EPS, the probabilities as given)
    _reads = "probabilities"

    def __init__(self, *, input="logits", classes=None):
        self.input = input
        self.classes = classes

    def n_free_parameters(self, n_classes, n_features=None):
        """0: the scores are returned as they are."""
        return 0

    def _fit(self, logits, y_index, sample_weight):
        """Nothing to learn: the base class validated the data and set ``classes_``."""

    def to_torch(self):
        """The fitted map as a torch module: scores to calibrated probabilities.

        The input handling and a softmax. See :func:`skcal.export.to_torch`.

        Returns
        -------
        torch.nn.Module

        Examples
        --------
        >>> from skcal import IdentityCalibrator
        >>> from skcal.export import check_export
        >>> from skcal.utils._testing import make_miscalibrated_logits
        >>> X, y = make_miscalibrated_logits(n_samples=200, random_state=0)
        >>> cal = IdentityCalibrator().fit(X, y)
        >>> bool(check_export(cal, X, cal.to_torch()) < 1e-12)
        True
        """
        from .._torch._export import Chain, Softmax

        return Chain(export_input(self), Softmax())

    def _calibrated_logits(self, logits):
        return np.asarray(logits, dtype=np.float64)

    def _calibrated_proba(self, logits, P=None):
        return super()._calibrated_proba(logits) if P is None else P
