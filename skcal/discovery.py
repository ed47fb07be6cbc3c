"""Discovery of skcal's public estimators and functions."""

from __future__ import annotations

import inspect


def all_estimators(kind: str | None = None) -> list[tuple[str, type]]:
    """Every public calibrator class of skcal, sorted by name.

    Parameters
    ----------
    kind : {"score", "local", "decision"} or None, default=None
        ``"score"``: calibrators of classifier scores
        (:class:`~skcal.base.BaseCalibrator`); ``"local"``: local calibrators
        fitted on embeddings (:class:`~skcal.base.BaseLocalCalibrator`);
        None: both; ``"decision"``: the meta-estimators of
        :mod:`skcal.decision`, which hold a calibrator (not calibrators
        themselves, so not part of None).

    Returns
    -------
    list of (name, class)
        Concrete calibrator classes exported by :mod:`skcal.calibrators`
        (for ``"decision"``, the estimator classes of :mod:`skcal.decision`).

    Examples
    --------
    >>> from skcal.discovery import all_estimators
    >>> "TemperatureScaling" in [name for name, _ in all_estimators("score")]
    True
    >>> "ProCalCalibrator" in [name for name, _ in all_estimators("local")]
    True
    >>> [name for name, _ in all_estimators("decision")]
    ['CostSensitiveClassifier', 'SelectiveClassifier']
    """
    if kind == "decision":
        from . import decision

        found = [(name, getattr(decision, name)) for name in decision.__all__]
        return sorted(
            (name, obj)
            for name, obj in found
            if inspect.isclass(obj) and hasattr(obj, "fit")
        )
    from . import calibrators
    from .base import BaseCalibrator, BaseLocalCalibrator

    bases = {
        "score": (BaseCalibrator,),
        "local": (BaseLocalCalibrator,),
        None: (BaseCalibrator, BaseLocalCalibrator),
    }
    if kind not in bases:
        raise ValueError(
            f"kind must be 'score', 'local', 'decision' or None; got {kind!r}."
        )
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
