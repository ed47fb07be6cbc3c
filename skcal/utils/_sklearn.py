"""The one import point for scikit-learn helpers that are not public API.

Keeping them here means a scikit-learn upgrade that moves one of them breaks
exactly one file.
"""

from sklearn.base import _fit_context
from sklearn.metrics._scorer import _BaseScorer
from sklearn.utils._param_validation import (
    HasMethods,
    Interval,
    StrOptions,
    validate_params,
)
from sklearn.utils.validation import _check_sample_weight

#: Constraint of every ``device`` parameter: "auto", "cpu", "cuda" or
#: "cuda:N", checked by ``skcal._torch.resolve_device`` at fit time.
DEVICE_CONSTRAINT = [str]


__all__ = [
    "DEVICE_CONSTRAINT",
    "HasMethods",
    "_BaseScorer",
    "Interval",
    "StrOptions",
    "_check_sample_weight",
    "_fit_context",
    "validate_params",
]
