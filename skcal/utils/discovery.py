"""Discovery of skcal's public estimators and functions."""

from __future__ import annotations

import inspect


def all_estimators() -> list[tuple[str, type]]:
    """Every public calibrator class of skcal, sorted by name.

    Returns
    -------
    list of (name, class)
        Concrete subclasses of :class:`~skcal.base.BaseCalibrator` exported by
        :mod:`skcal.calibrators`.

    Examples
    --------
    >>> from skcal.utils.discovery import all_estimators
    >>> "TemperatureScaling" in [name for name, _ in all_estimators()]
    True
    """
    from .. import calibrators
    from ..base import BaseCalibrator

    found = []
    for name in calibrators.__all__:
        obj = getattr(calibrators, name)
        if (
            inspect.isclass(obj)
            and issubclass(obj, BaseCalibrator)
            and not inspect.isabstract(obj)
            and not name.startswith("_")
        ):
            found.append((name, obj))
    return sorted(found)
