"""The abstention label next to the classes."""

from __future__ import annotations

import numpy as np

from ..utils._validation import _kind_of_labels

__all__ = ["check_abstain_label", "labels_with_abstention"]


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
