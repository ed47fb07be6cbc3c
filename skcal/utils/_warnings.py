"""Warnings that point at the user's line, however deep skcal raised them."""

from __future__ import annotations

import sys
import warnings

__all__ = ["warn", "warn_unconverged"]

_INTERNAL = ("skcal.", "sklearn.")


def _internal(frame) -> bool:
    name = frame.f_globals.get("__name__", "")
    return name == "skcal" or name.startswith(_INTERNAL)


def warn(message, category=UserWarning) -> None:
    """``warnings.warn`` attributed to the first caller outside skcal and scikit-learn.

    A fixed ``stacklevel`` breaks whenever a frame is added between the
    user and the warning (a helper, a decorator such as scikit-learn's
    ``_fit_context``, a meta-estimator): the warning then names a line of
    skcal or scikit-learn, and a filter on the user's module misses it.
    This walks the stack instead: the warning names the line of the user's
    code (a script, a test, a notebook cell) that called into the library.

    Parameters
    ----------
    message : str
    category : type of Warning, default=UserWarning
    """
    frame, level = sys._getframe(1), 2  # stacklevel 2 is our caller
    while frame is not None and _internal(frame):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, category, stacklevel=level)


def warn_unconverged(name: str, result, max_iter: int) -> None:
    """A ``ConvergenceWarning`` when an L-BFGS ``result`` did not converge."""
    from ..exceptions import ConvergenceWarning

    if not result.converged:
        warn(
            f"{name} did not converge in max_iter={max_iter} iterations (largest "
            f"gradient entry {result.grad_max:.3g}). Increase max_iter, add "
            "regularisation, or check the scores for extreme values.",
            ConvergenceWarning,
        )
