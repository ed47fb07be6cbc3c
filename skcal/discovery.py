"""Discovery of skcal's public estimators and functions."""

from __future__ import annotations

import inspect


def all_estimators(kind: str | None = None) -> list[tuple[str, type]]:
    """Every public calibrator class of skcal, sorted by name.

    Parameters
    ----------
    kind : {"score", "local"} or None, default=None
        ``"score"``: calibrators of classifier scores
        (:class:`~skcal.base.BaseCalibrator`); ``"local"``: local calibrators
        fitted on embeddings (:class:`~skcal.base.BaseLocalCalibrator`);
        None: both.

    Returns
    -------
    list of (name, class)
        Concrete calibrator classes exported by :mod:`skcal.calibrators`.

    Examples
    --------
    >>> from skcal.discovery import all_estimators
    >>> "TemperatureScaling" in [name for name, _ in all_estimators("score")]
    True
    >>> "ProCalCalibrator" in [name for name, _ in all_estimators("local")]
    True
    """
    from . import calibrators
    from .base import BaseCalibrator, BaseLocalCalibrator

    bases = {
        "score": (BaseCalibrator,),
        "local": (BaseLocalCalibrator,),
        None: (BaseCalibrator, BaseLocalCalibrator),
    }
    if kind not in bases:
        raise ValueError(f"kind must be 'score', 'local' or None; got {kind!r}.")
    found = []
    for name in calibrators.__all__:
        obj = getattr(calibrators, name)
        if (
            inspect.isclass(obj)
            and issubclass(obj, bases[kind])
            and not inspect.isabstract(obj)
            and not name.startswith("_")
        ):
            found.append((name, obj))
    return sorted(found)
