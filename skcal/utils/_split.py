"""The calibration set split in two parts (training / held out), stratified."""

from __future__ import annotations

import numpy as np
from sklearn.model_selection import train_test_split

__all__ = ["split_rows", "stratified_split"]


def stratified_split(y_index, fraction, n_samples, seed, name, sample_weight=None):
    """Stratified (when possible) split of ``range(n_samples)``.

    A class with a single sample (of positive weight, when ``sample_weight``
    is given) puts it in the second part (the kernel's memory, the network's
    training part), so that the class is not lost from what predicts.
    """
    if n_samples < 4:
        raise ValueError(
            f"{name} splits the calibration set in two parts of at least 2 "
            f"samples each, so it needs at least 4 samples; got {n_samples}."
        )
    n_first = min(max(2, int(round(fraction * n_samples))), n_samples - 2)
    rows = np.arange(n_samples)
    counted = np.ones(n_samples, bool) if sample_weight is None else sample_weight > 0
    counts = np.bincount(y_index[counted], minlength=int(y_index.max()) + 1)
    pinned = counted & (counts[y_index] == 1)
    if pinned.any() and np.count_nonzero(~pinned) >= n_first + 1:
        first, second = split_rows(y_index, rows[~pinned], n_first, seed)
        return first, np.sort(np.concatenate([second, rows[pinned]]))
    return split_rows(y_index, rows, n_first, seed)


def split_rows(y_index, rows, n_first, seed):
    """``rows`` split in ``n_first`` and the rest, stratified when possible."""
    labels = y_index[rows]
    counts = np.bincount(labels)
    present = np.count_nonzero(counts)
    stratify = (
        labels
        if counts[counts > 0].min() >= 2
        and min(n_first, len(rows) - n_first) >= present
        else None
    )
    first, second = train_test_split(
        rows, train_size=n_first, stratify=stratify, random_state=seed
    )
    return np.sort(first), np.sort(second)
