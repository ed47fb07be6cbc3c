"""Helpers on probability vectors shared by the top-label calibrators."""

from __future__ import annotations

import numpy as np


def replace_top_label(proba: np.ndarray, top: np.ndarray, confidence: np.ndarray):
    """Give class ``top`` probability ``confidence``; rescale the others.

    The other classes keep their proportions and share ``1 - confidence``.
    A row whose other classes have no mass shares it equally among them.
    The result may rank another class above ``top``: callers that keep the
    original label for ``predict`` must say so. ``proba`` is not modified.
    """
    n, n_classes = proba.shape
    rows = np.arange(n)
    rest = np.array(proba, dtype=np.float64)
    rest[rows, top] = 0.0
    rest_sum = rest.sum(axis=1)
    empty = rest_sum <= 0.0
    rest[empty] = 1.0
    rest[rows[empty], top[empty]] = 0.0
    rest_sum[empty] = n_classes - 1
    out = rest * ((1.0 - confidence) / rest_sum)[:, None]
    out[rows, top] = confidence
    return out
