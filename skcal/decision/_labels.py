"""The abstention label next to the classes."""

from __future__ import annotations

import numpy as np
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import (
    check_array,
    check_consistent_length,
    column_or_1d,
)

from ..utils._validation import _kind_of_labels, check_labels

__all__ = ["check_abstain_label", "check_rows", "labels_with_abstention"]


def check_rows(X, y, name):
    """``X`` (a dataframe kept as it is, else a dense array) and 1-D labels
    ``y`` of the same length, for a meta-estimator that indexes rows."""
    if y is None:
        raise ValueError(
            f"{name} requires y to be passed, but the target y is None: give "
            "the labels of the rows."
        )
    if not hasattr(X, "iloc"):
        X = check_array(
            X,
            accept_sparse=False,
            dtype=None,
            ensure_all_finite=False,
            ensure_2d=False,
            input_name="X",
        )
    y = check_labels(column_or_1d(y, warn=True))
    check_consistent_length(X, y)
    check_classification_targets(y)
    return X, y


def check_abstain_label(abstain_label, classes) -> None:
    """Refuse an abstention label that is a class or of another kind."""
    classes = np.asarray(classes)
    label = np.asarray([abstain_label])
    if _kind_of_labels(label) != _kind_of_labels(classes):
        raise ValueError(
            f"abstain_label={abstain_label!r} is not of the kind of the classes "
            f"{classes[:4].tolist()}: predictions would mix strings and numbers. "
            "Pass an abstain_label of their kind, e.g. abstain_label='abstain' "
            "for string classes or -1 for number classes."
        )
    if np.isin(label, classes).any():
        raise ValueError(
            f"abstain_label={abstain_label!r} is one of the classes "
            f"{classes.tolist()[:8]}: an abstention would read as that class. "
            "Pass a value that is not a class."
        )


def labels_with_abstention(classes, abstain_label) -> np.ndarray:
    """``classes`` followed by ``abstain_label``, in a dtype that holds both."""
    classes = np.asarray(classes)
    if classes.dtype == object:
        return np.array([*classes.tolist(), abstain_label], dtype=object)
    return np.concatenate([classes, np.asarray([abstain_label])])
