"""Label-shift adaptation: when the class mix changes between calibration
and prediction.

:func:`estimate_class_priors` estimates the class priors of an unlabeled
target set from calibrated probabilities (EM, BBSE, RLLS);
:class:`PriorShiftAdapter` wraps a calibrator, estimates the target priors
with :meth:`~PriorShiftAdapter.adapt` and re-weights its probabilities.
"""

from ._adapter import PriorShiftAdapter
from ._estimate import PriorEstimate, UnreliableEstimateWarning, estimate_class_priors

__all__ = [
    "PriorEstimate",
    "PriorShiftAdapter",
    "UnreliableEstimateWarning",
    "estimate_class_priors",
]
