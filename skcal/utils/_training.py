"""The training options of the Adam-trained calibrators, from their parameters."""

from __future__ import annotations

from .._torch import TrainingOptions

__all__ = ["training_options"]


def training_options(estimator, seed, **changes) -> TrainingOptions:
    """The :class:`~skcal._torch.TrainingOptions` of an estimator's parameters.

    Reads ``learning_rate``, ``max_iter``, ``n_iter_no_change``, ``device``
    and ``verbose`` (:data:`~skcal.utils._constraints.TRAINING_CONSTRAINTS`),
    and ``weight_decay`` and ``batch_size`` where the estimator has them
    (without them: no weight decay, full batch). ``device`` is passed as
    given: the kernels resolve it.

    Parameters
    ----------
    estimator : estimator
        SMART, PTS, VQ, KCal or Local Nets.
    seed : int
        The kernel's seed, drawn from the estimator's ``random_state``.
    **changes
        Fields to set otherwise (e.g. ``max_iter=0``).

    Returns
    -------
    TrainingOptions
    """
    batch_size = getattr(estimator, "batch_size", None)
    options = dict(
        learning_rate=float(estimator.learning_rate),
        max_iter=int(estimator.max_iter),
        n_iter_no_change=int(estimator.n_iter_no_change),
        seed=int(seed),
        weight_decay=float(getattr(estimator, "weight_decay", 0.0)),
        batch_size=None if batch_size is None else int(batch_size),
        device=estimator.device,
        verbose=int(estimator.verbose),
    )
    return TrainingOptions(**{**options, **changes})
