"""Saving and loading fitted models in a format that is safe to load (skops).

A pickle (or joblib) file runs arbitrary code when it is loaded, so loading
one from someone else is as dangerous as running their script. ``skops.io``
stores a model as data and, at load time, only rebuilds the types the caller
trusts. :func:`dump` and :func:`load` wrap it: :func:`load` trusts skcal's own
types (:func:`trusted_types`) and skops' defaults (numpy, scipy and most of
scikit-learn), and refuses a file holding any other type unless the caller
names it in ``trusted`` after reading :func:`untrusted_types`.

skops is optional: ``pip install skops`` (or ``pip install "skcal[io]"``).
"""

from __future__ import annotations

import importlib
import inspect
import json
import os
import pkgutil
import warnings
import zipfile
from functools import lru_cache

import numpy as np

from ..exceptions import UntrustedTypesError

__all__ = ["dump", "dumps", "load", "trusted_types", "untrusted_types"]

#: skcal's subpackages whose classes can appear in a fitted model. Not
#: ``skcal._torch`` (fitted state never holds a torch object), ``skcal.cli``
#: or ``skcal.display`` (no estimator holds one).
_STATE_PACKAGES = (
    "skcal.base",
    "skcal.calibrators",
    "skcal.decision",
    "skcal.metrics",
    "skcal.model_selection",
    "skcal.shift",
    "skcal.wrappers",
)


def _skops_io():
    try:
        import skops.io as sio
    except ImportError as exc:  # pragma: no cover - exercised without skops
        raise ImportError(
            "Saving and loading skcal models in the skops format needs the "
            "optional package skops: pip install skops (or pip install "
            "'skcal[io]')."
        ) from exc
    return sio


def _modules(package_name):
    package = importlib.import_module(package_name)
    yield package
    for info in pkgutil.walk_packages(
        getattr(package, "__path__", []), prefix=package_name + "."
    ):
        yield importlib.import_module(info.name)


@lru_cache(maxsize=1)
def _trusted_types():
    names = set()
    for package_name in _STATE_PACKAGES:
        for module in _modules(package_name):
            for _, obj in inspect.getmembers(module, inspect.isclass):
                if not obj.__module__.startswith("skcal."):
                    continue
                if obj.__module__.startswith("skcal._torch"):
                    continue  # torch objects are never part of fitted state
                if issubclass(obj, BaseException):
                    continue
                names.add(f"{obj.__module__}.{obj.__qualname__}")
    return tuple(sorted(names))


def trusted_types() -> list[str]:
    """The skcal types :func:`load` trusts: every class a fitted skcal model may hold.

    Returns
    -------
    list of str
        Fully qualified type names, sorted (for instance
        ``"skcal.calibrators._scaling.TemperatureScaling"``): the
        calibrators, the wrapper, the search and their helper classes (for
        instance the :class:`~skcal.metrics.LocalSpace` of a
        local calibrator).

    Examples
    --------
    >>> from skcal.utils.persistence import trusted_types
    >>> "skcal.calibrators._scaling.TemperatureScaling" in trusted_types()
    True
    """
    return list(_trusted_types())


def _source(file, *, rewind: bool = False):
    """``skops.io`` keyword for ``file``: a path, bytes or an open binary file.

    An open file is read from its current position; with ``rewind`` (a
    look that is not a load) it is put back there when it can seek, so that
    ``untrusted_types(f)`` then ``load(f)`` read the same model.
    """
    if isinstance(file, (bytes, bytearray)):
        return {"data": bytes(file)}
    if isinstance(file, (str, os.PathLike)):
        return {"file": os.fspath(file)}
    start = (
        file.tell() if rewind and getattr(file, "seekable", lambda: False)() else None
    )
    data = file.read()
    if isinstance(data, str):
        raise TypeError(
            "The model file was opened in text mode; a saved model is binary: "
            "open it with open(path, 'rb'), or pass the path itself."
        )
    if start is not None:
        file.seek(start)
    return {"data": bytes(data)}


def _name(file) -> str:
    """How messages name ``file``: its path, the file object's name, or bytes."""
    if isinstance(file, (str, os.PathLike)):
        return os.fspath(file)
    if isinstance(file, (bytes, bytearray)):
        return "the data given"
    name = getattr(file, "name", None)
    return name if isinstance(name, str) else "the file object given"


#: What skops raises on a file that is no skops archive: not a zip (a
#: pickle, a truncated or random file), no or a broken schema.json.
_NOT_SKOPS = (
    zipfile.BadZipFile,
    KeyError,
    json.JSONDecodeError,
    EOFError,
    AttributeError,
    TypeError,
)


def _read(func, source: dict, name: str, **kwargs):
    """``func(**source, **kwargs)`` (a skops reader), with one clear error
    when the file is not a skops archive."""
    if source.get("data") == b"":
        raise ValueError(
            f"{name} is not a readable .skops file: it is empty. Pass a file "
            "written by skcal.utils.persistence.dump (or skops.io.dump)."
        )
    try:
        return func(**source, **kwargs)
    except _NOT_SKOPS as exc:
        raise ValueError(
            f"{name} is not a readable .skops file ({type(exc).__name__}: {exc}); "
            "a skops file is a zip archive written by skcal.utils.persistence.dump "
            "(or skops.io.dump), and a pickle, a joblib file or a truncated copy is "
            "not one: load a pickle with pickle.load (trusted files only) and save "
            "the model again with dump."
        ) from None


def untrusted_types(file) -> list[str]:
    """The types in a saved model that :func:`load` does not trust by itself.

    Parameters
    ----------
    file : str, path-like, bytes or binary file object
        A file written by :func:`dump` (or ``skops.io.dump``), or its bytes.

    Returns
    -------
    list of str
        Fully qualified names of the types that are neither skcal's
        (:func:`trusted_types`) nor trusted by skops by default; empty for a
        model made only of skcal calibrators and scikit-learn's common types.
        Read them before passing any to :func:`load`'s ``trusted``.

    Examples
    --------
    >>> from skcal import TemperatureScaling
    >>> from skcal.utils.persistence import dumps, untrusted_types
    >>> from skcal.utils._testing import make_miscalibrated_logits
    >>> X, y = make_miscalibrated_logits(200, 3, random_state=0)
    >>> untrusted_types(dumps(TemperatureScaling(device="cpu").fit(X, y)))
    []
    """
    sio = _skops_io()
    ours = set(_trusted_types())
    found = _read(sio.get_untrusted_types, _source(file, rewind=True), _name(file))
    return [name for name in found if name not in ours]


def dumps(model) -> bytes:
    """The skops bytes of ``model`` (see :func:`dump`)."""
    return _skops_io().dumps(model)


def dump(model, file) -> None:
    """Save a fitted (or unfitted) model in the skops format.

    Parameters
    ----------
    model : estimator
        Any skcal estimator, or a scikit-learn estimator / pipeline holding
        skcal estimators (for instance a
        :class:`~skcal.CalibratedClassifier`).
    file : str, path-like or binary file object
        Where to write (the convention is a ``.skops`` extension).

    See Also
    --------
    load : Load it back, trusting only skcal's and skops' default types.

    Examples
    --------
    >>> import numpy as np
    >>> from pathlib import Path
    >>> from tempfile import TemporaryDirectory
    >>> from skcal import TemperatureScaling
    >>> from skcal.utils.persistence import dump, load
    >>> from skcal.utils._testing import make_miscalibrated_logits
    >>> X, y = make_miscalibrated_logits(200, 3, random_state=0)
    >>> ts = TemperatureScaling(device="cpu").fit(X, y)
    >>> with TemporaryDirectory() as tmp:
    ...     dump(ts, Path(tmp) / "ts.skops")
    ...     again = load(Path(tmp) / "ts.skops")
    >>> bool(np.array_equal(again.predict_proba(X), ts.predict_proba(X)))
    True
    """
    sio = _skops_io()
    if isinstance(file, (str, os.PathLike)):
        sio.dump(model, os.fspath(file))
    else:
        file.write(sio.dumps(model))


def load(file, *, trusted=None):
    """Load a model saved by :func:`dump`, rebuilding only trusted types.

    skcal's own types (:func:`trusted_types`) and the types skops trusts by
    default (numpy, scipy, most of scikit-learn) are rebuilt; a file holding
    any other type is refused with a ``ValueError`` naming it, before
    anything is rebuilt. Nothing in the file is executed.

    Parameters
    ----------
    file : str, path-like, bytes or binary file object
        A file written by :func:`dump` (or ``skops.io.dump``), or its bytes.
    trusted : list of str, default=None
        Further fully qualified type names to trust, e.g. the tree
        structures of a scikit-learn forest inside a
        :class:`~skcal.CalibratedClassifier`
        (``"sklearn.tree._tree.Tree"``). Read :func:`untrusted_types` and
        trust only what you expect the model to hold.

    Returns
    -------
    model : estimator
        The model, as it was saved.

    Raises
    ------
    UntrustedTypesError
        (a ``ValueError``) When the file holds types that are neither trusted
        by default nor listed in ``trusted``; its ``types`` lists them.
    ImportError
        When a trusted type cannot be imported here (a class of the user's
        own whose module is not on the path or no longer defines it, or one
        made in a script, ``__main__``): the message names it and the fix.

    See Also
    --------
    dump : Save a model.
    untrusted_types : What a file holds beyond the default trusted types.

    Examples
    --------
    >>> from skcal import TemperatureScaling
    >>> from skcal.utils.persistence import dumps, load
    >>> from skcal.utils._testing import make_miscalibrated_logits
    >>> X, y = make_miscalibrated_logits(200, 3, random_state=0)
    >>> ts = TemperatureScaling(device="cpu").fit(X, y)
    >>> load(dumps(ts)).temperature_ == ts.temperature_
    True
    """
    sio = _skops_io()
    source, name = _source(file), _name(file)
    found = _read(sio.get_untrusted_types, source, name)
    ours, extra = set(_trusted_types()), set(trusted or ())
    refused = [name for name in found if name not in ours and name not in extra]
    if refused:
        listed = ", ".join(repr(name) for name in refused)
        raise UntrustedTypesError(
            f"load: the file holds types that are neither skcal's nor trusted by "
            f"skops by default: {listed}. Loading them could run code written by "
            f"whoever made the file. If you trust its author and expect these "
            f"types (for instance the trees of a scikit-learn forest), pass them "
            f"explicitly: load(file, trusted=[{listed}]).",
            refused,
        )
    reader = sio.loads if "data" in source else sio.load  # data= or file=
    model = _construct(reader, source, name, found, ours)
    _check_complete(model, name)
    return model


def _construct(reader, source: dict, name: str, found: list, ours: set):
    """Rebuild the model; a type of the user's own that cannot be imported
    here (its module is not on the path, or no longer defines it) is one
    clear ImportError naming it and the fix."""
    try:
        return _read(reader, source, name, trusted=found)
    except ValueError as exc:
        cause = exc.__context__
        if not isinstance(cause, AttributeError):
            raise
        missing = _missing_types(found, ours)
        if not missing:
            raise
        raise ImportError(_import_message(name, missing, cause)) from None
    except ImportError as exc:
        module = getattr(exc, "name", None) or ""
        missing = [t for t in found if module and t.startswith(module + ".")]
        raise ImportError(
            _import_message(name, missing or _missing_types(found, ours), exc),
            name=exc.name,
        ) from None


def _missing_types(found: list, ours: set) -> list:
    """The types of ``found`` (not skcal's) whose class cannot be imported."""
    missing = []
    for full in found:
        module, _, attr = full.rpartition(".")
        if full in ours or not module:
            continue
        try:
            getattr(importlib.import_module(module), attr)
        except (ImportError, AttributeError):
            missing.append(full)
    return missing


def _import_message(name: str, types: list, exc: Exception) -> str:
    listed = ", ".join(types) or "a type in the file"
    if any(t.startswith("__main__.") for t in types):
        fix = (
            "The class was defined in a script or notebook (__main__), which no "
            "other program can import: move it to a module (a .py file), import "
            "it from there, fit and save the model again."
        )
    else:
        fix = (
            "A model of a class of your own is rebuilt by importing that class: "
            "make its module importable here, by installing the package that "
            "defines it or by adding the folder of its .py file to PYTHONPATH "
            "(PYTHONPATH=/path/to/folder; the skcal command does not look in "
            "the current folder), and check that the module still defines it."
        )
    return (
        f"{name} holds {listed}, which cannot be imported here "
        f"({type(exc).__name__}: {exc}). {fix}"
    )


def _calibrators(obj, seen: set) -> list:
    """The skcal calibrators held in ``obj`` (itself included, outermost
    first), through skcal's and scikit-learn's objects, lists and dicts.

    A calibrator is recognised by the wrapper protocol that both of skcal's
    base classes define (``_wrapper_params``), so that this module, in
    :mod:`skcal.utils`, imports nothing above it.
    """
    if id(obj) in seen:
        return []
    seen.add(id(obj))
    if isinstance(obj, (list, tuple)):
        items = obj
    elif isinstance(obj, dict):
        items = obj.values()
    elif type(obj).__module__.partition(".")[0] in ("skcal", "sklearn"):
        items = getattr(obj, "__dict__", {}).values()
    else:
        return []
    found = [obj] if callable(getattr(obj, "_wrapper_params", None)) else []
    for item in items:
        found += _calibrators(item, seen)
    return found


def _is_fitted(estimator) -> bool:
    from sklearn.exceptions import NotFittedError
    from sklearn.utils.validation import check_is_fitted

    try:
        check_is_fitted(estimator)
    except NotFittedError:
        return False
    return True


def _input_of(estimator):
    """The ``input`` of ``estimator``, or of the calibrator it wraps (a
    :class:`~skcal.shift.PriorShiftAdapter` has none of its own)."""
    params = estimator.get_params(deep=False)
    if "input" in params:
        return params["input"]
    inner = getattr(estimator, "calibrator_", None)
    return None if inner is None else _input_of(inner)


def _probe(calibrator) -> None:
    """Predict one row with ``calibrator``; raise unless it gives one finite
    row of ``len(classes_)`` probabilities (a local calibrator, which has
    the ``_takes_head`` of :class:`~skcal.base.BaseLocalCalibrator`, reads
    embeddings)."""
    n = calibrator.n_features_in_
    reads_proba = (
        not hasattr(calibrator, "_takes_head")
        and not getattr(calibrator, "reads_embeddings_", False)
        and _input_of(calibrator) == "proba"
    )
    row = np.full((1, n), 1.0 / n) if reads_proba else np.zeros((1, n))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        proba = np.asarray(calibrator.predict_proba(row), dtype=np.float64)
    if proba.shape != (1, len(calibrator.classes_)) or not np.isfinite(proba).all():
        raise ValueError(f"a prediction of shape {proba.shape}: {proba}")


def _check_complete(model, name: str) -> None:
    """Raise a ValueError if a fitted skcal calibrator in ``model`` cannot predict.

    check_is_fitted passes as soon as one fitted attribute is there, so each
    fitted calibrator (the model itself, or one it holds) predicts one row,
    on the CPU: a missing or edited fitted attribute fails here, naming
    ``name`` (the file) and the attribute, rather than at predict time.
    Unfitted calibrators are left alone.
    """
    fitted = [c for c in _calibrators(model, set()) if _is_fitted(c)]
    devices = [(c, c.device) for c in fitted if "device" in vars(c)]
    try:
        for calibrator, _ in devices:
            calibrator.device = "cpu"  # no GPU work, nor error, at load
        for calibrator in fitted:
            _probe(calibrator)
    except Exception as exc:  # noqa: BLE001 - any failure means the same
        missing = (
            f"; its fitted attribute {exc.name!r} is missing"
            if isinstance(exc, AttributeError) and exc.name
            else ""
        )
        raise ValueError(
            f"{name} holds a {type(calibrator).__name__} that does not work "
            f"({type(exc).__name__}: {exc}){missing}: the file was written by "
            "another version of skcal, or edited. Fit the model and save it again."
        ) from None
    finally:
        for calibrator, device in devices:
            calibrator.device = device
