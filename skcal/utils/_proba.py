"""Helpers on probability vectors shared by the top-label calibrators."""

from __future__ import annotations

import numpy as np

#: ``c`` and ``1 - c`` are floored here in log space.
_LOG_FLOOR = 1e-300


def replace_top_label(
    logits: np.ndarray, top: np.ndarray, confidence: np.ndarray, *, log: bool = False
) -> np.ndarray:
    """Give class ``top`` probability ``confidence``; the others share the rest.

    The other classes share ``1 - confidence`` in proportion to their
    original probabilities, i.e. by the softmax of their own logits::

        q_top = c,    q_j = (1 - c) exp(z_j) / sum_{i != top} exp(z_i).

    The proportions are computed from the logits, shifted by the largest
    of the other logits, so they stay exact when the other classes'
    probabilities underflow (a logit gap of ~745 or more makes them 0 in
    float64) and no intermediate can overflow: every factor is at most 1.
    The result may rank another class above ``top``: callers that keep the
    original label for ``predict`` must say so. ``logits`` is not modified.

    Parameters
    ----------
    logits : ndarray of shape (n_samples, n_classes)
        Finite logits (or log-probabilities) of the original prediction.
    top : ndarray of shape (n_samples,)
        The column whose probability is replaced, per row.
    confidence : ndarray of shape (n_samples,)
        Its new probability, in [0, 1].
    log : bool, default=False
        Return ``log q`` instead of ``q``, computed in log space, so that it
        keeps the proportions of the other classes even where ``q``
        underflows. ``c`` and ``1 - c`` are then floored at 1e-300 (the
        floor of the one-vs-rest calibrators: a calibrated 0 or 1 gives a
        finite log loss) and the result is finite.

    Returns
    -------
    ndarray of shape (n_samples, n_classes)
        ``q`` (rows sum to 1), or ``log q``.
    """
    z = np.array(logits, dtype=np.float64)
    n, n_classes = z.shape
    rows = np.arange(n)
    c = np.asarray(confidence, dtype=np.float64)
    z[rows, top] = -np.inf
    second = z.max(axis=1, keepdims=True)  # the largest of the others
    z -= second  # <= 0, with 0 at the largest other class: the sum is >= 1
    if not log:
        share = np.exp(z)
        share /= share.sum(axis=1, keepdims=True)
        out = share * (1.0 - c)[:, None]
        out[rows, top] = c
        return out
    z -= np.log(np.exp(z).sum(axis=1, keepdims=True))
    out = z + np.log(np.maximum(1.0 - c, _LOG_FLOOR))[:, None]
    out[rows, top] = np.log(np.maximum(c, _LOG_FLOOR))
    # logits spanning more than the float64 range give z = -inf
    return np.maximum(out, np.finfo(np.float64).min, out=out)
