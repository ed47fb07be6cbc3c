"""Parameter constraints shared by families of calibrators and of metrics.

Each calibrator's ``_parameter_constraints`` spreads the dicts of its family
here, so that a shared parameter is declared once. A class whose bound for
one of them differs keeps its own entry after the spread, with the reason.
"""

from __future__ import annotations

from numbers import Integral, Real

from ._sklearn import DEVICE_CONSTRAINT, Interval

__all__ = [
    "LBFGS_CONSTRAINTS",
    "METRIC_ARRAYS",
    "MINIBATCH_CONSTRAINTS",
    "TRAINING_CONSTRAINTS",
]

#: The arrays of the probability metrics (``validate_params``).
METRIC_ARRAYS = {
    "y_true": ["array-like"],
    "y_proba": ["array-like"],
    "sample_weight": ["array-like", None],
    "labels": ["array-like", None],
}

#: The calibrators fitted by full-batch L-BFGS (vector and matrix scaling,
#: Dirichlet calibration, structured matrix scaling).
LBFGS_CONSTRAINTS = {
    "device": DEVICE_CONSTRAINT,
    "tol": [Interval(Real, 0, None, closed="neither")],
    "max_iter": [Interval(Integral, 1, None, closed="left")],
    "verbose": ["verbose"],
}

#: The calibrators trained by Adam with early stopping (SMART, PTS, VQ,
#: KCal, Local Nets): the parameters of
#: :func:`skcal.utils._training.training_options` that all of them have.
#: ``max_iter=0`` keeps the initial model.
TRAINING_CONSTRAINTS = {
    "learning_rate": [Interval(Real, 0, None, closed="neither")],
    "max_iter": [Interval(Integral, 0, None, closed="left")],
    "n_iter_no_change": [Interval(Integral, 1, None, closed="left")],
    "random_state": ["random_state"],
    "device": DEVICE_CONSTRAINT,
    "verbose": ["verbose"],
}

#: Those of them trained on mini-batches with weight decay and early
#: stopping on a held-out part of the calibration set (PTS, VQ, Local Nets).
MINIBATCH_CONSTRAINTS = {
    "batch_size": [Interval(Integral, 1, None, closed="left")],
    "weight_decay": [Interval(Real, 0, None, closed="left")],
    "validation_fraction": [Interval(Real, 0, 1, closed="neither")],
}
