"""Counts of free parameters, which each calibrator states for its data.

:meth:`skcal.base.BaseCalibrator.n_free_parameters` (and the local
calibrators' :meth:`~skcal.base.BaseLocalCalibrator.n_free_parameters`) use
these helpers; :class:`~skcal.CalibratorSearchCV`'s small-data guard reads
the counts (its Notes give the rules).
"""

from __future__ import annotations

import math

import numpy as np

#: A penalised affine map counts at least one free parameter per this many
#: classes: with fewer than 2 events per class its per-class entries are
#: fitted to noise, whatever the ridge (on four real tasks at 100 rows the
#: penalised vector scaling and SMS, counted as 1, were selected and lost
#: 0.5-5% of test NLL to temperature scaling).
PENALISED_CLASSES_PER_PARAMETER = 5


def is_zero(value) -> bool:
    """Whether a penalty strength is the number 0 (``"auto"`` is not)."""
    return not isinstance(value, str) and float(value) == 0.0


def affine_count(n_classes: int, *, diag: bool, off: bool, bias: bool) -> int:
    """Unpenalised entries of an affine map ``W x + b``, at least one per
    :data:`PENALISED_CLASSES_PER_PARAMETER` classes (and at least 1)."""
    free = n_classes * diag + n_classes * (n_classes - 1) * off + n_classes * bias
    return max(1, math.ceil(n_classes / PENALISED_CLASSES_PER_PARAMETER), free)


def mlp_count(sizes) -> int:
    """Weights and biases of a fully connected network with layer ``sizes``."""
    sizes = [int(s) for s in sizes]
    return sum((a + 1) * b for a, b in zip(sizes[:-1], sizes[1:]))


def hidden_sizes(hidden_layer_sizes) -> list[int]:
    """``hidden_layer_sizes`` (an int or a sequence) as a list of ints."""
    return [int(h) for h in np.atleast_1d(np.asarray(hidden_layer_sizes))]


def dirichlet_count(matrix, reg_lambda, reg_mu, n_classes: int) -> int:
    """Free parameters of a Dirichlet map with these penalties."""
    if reg_lambda == "auto":  # shrunk toward temperature scaling
        return affine_count(n_classes, diag=False, off=False, bias=False)
    if matrix == "fixed_diagonal":
        return 1
    full = matrix == "full"
    if reg_mu is None:  # one L2 penalty on every entry
        free = is_zero(reg_lambda)
        return affine_count(n_classes, diag=free, off=full and free, bias=free)
    # ODIR: the diagonal is never penalised
    return affine_count(
        n_classes,
        diag=True,
        off=full and is_zero(reg_lambda),
        bias=is_zero(reg_mu),
    )
