"""The one import point for scikit-learn helpers that are not public API.

Keeping them here means a scikit-learn upgrade that moves one of them breaks
exactly one file.
"""

from functools import cache

from sklearn.base import BaseEstimator, _fit_context
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


@cache
def _param_names_of(cls) -> tuple:
    return tuple(BaseEstimator._get_param_names.__func__(cls))


class CachedParamNames:
    """Mixin (before ``BaseEstimator``): each class's parameter names read
    from its ``__init__`` signature once. scikit-learn's private
    ``_get_param_names`` inspects the signature on every ``get_params``,
    ``set_params``, ``clone`` and parameter validation (about 10 us a call,
    several calls per fit); a class's signature does not change."""

    @classmethod
    def _get_param_names(cls):
        return list(_param_names_of(cls))


__all__ = [
    "CachedParamNames",
    "DEVICE_CONSTRAINT",
    "HasMethods",
    "_BaseScorer",
    "Interval",
    "StrOptions",
    "_check_sample_weight",
    "_fit_context",
    "validate_params",
]
