"""Model files of the command line: ``calibrate --save``, ``select --save``
and ``apply --model``.

A fitted model is written in the skops format when its name ends in
``.skops`` (safe to load: ``skcal apply`` and
:func:`skcal.utils.persistence.load` rebuild only trusted types), else as a
pickle (``.pkl`` by convention; loading a pickle runs code, so ``skcal
apply`` reads one only with ``--allow-pickle``).
"""

from __future__ import annotations

import importlib.util
import os
import pickle

from ._common import CLIError
from ._io import FORMATS


def check_model_path(path: str, flag: str) -> None:
    """Raise a CLIError unless ``path`` can name a model file we can write.

    The extensions of the array files are refused: a model is no array
    file, and ``--save out.npz`` more likely means calibrated probabilities.
    A ``.skops`` name needs the optional package skops.
    """
    ext = os.path.splitext(path)[1].lower()
    if ext in FORMATS:
        raise CLIError(
            f"{flag} writes the fitted model, not arrays, but {path!r} has the "
            f"extension {ext!r} of an array file; name it *.skops (safe to load, "
            "needs skops) or *.pkl (a pickle)."
        )
    if ext == ".skops" and importlib.util.find_spec("skops") is None:
        raise CLIError(
            f"{flag} {path}: the .skops format needs the optional package skops "
            "(pip install skops); or name the file *.pkl for a pickle."
        )
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise CLIError(f"cannot write {path}: folder {folder} does not exist.")


def _is_skops(path: str) -> bool:
    """Whether ``path`` names a skops file (else a model file is a pickle)."""
    return os.path.splitext(path)[1].lower() == ".skops"


def write_model(path: str, model) -> None:
    """Write ``model`` to ``path``: skops for ``*.skops``, else a pickle."""
    try:
        if _is_skops(path):
            from ..utils.persistence import dump

            dump(model, path)
            return
        with open(path, "wb") as file:
            pickle.dump(model, file, protocol=pickle.HIGHEST_PROTOCOL)
    except OSError as exc:
        raise CLIError(f"cannot write {path}: {exc}") from None


def read_model(path: str, *, trusted=(), allow_pickle: bool = False):
    """Load a model written by :func:`write_model`.

    A ``.skops`` file is loaded trusting skcal's types, skops' defaults and
    ``trusted``; any other file is a pickle, read only with
    ``allow_pickle`` (loading a pickle runs code from whoever wrote it).
    """
    if not os.path.isfile(path):
        raise CLIError(f"--model {path}: no such file.")
    if _is_skops(path):
        if importlib.util.find_spec("skops") is None:
            raise CLIError(
                f"--model {path}: reading a .skops model needs the optional "
                "package skops (pip install skops)."
            )
        from ..exceptions import UntrustedTypesError
        from ..utils.persistence import load

        try:
            return load(path, trusted=list(trusted))
        except UntrustedTypesError as exc:
            listed = ", ".join(exc.types)
            flags = " ".join(f"--trust {name}" for name in exc.types)
            raise CLIError(
                f"--model {path} holds types that are neither skcal's nor trusted "
                f"by skops by default: {listed}. Loading them could run code "
                "written by whoever made the file. If you trust its author and "
                "expect these types (for instance the trees of a scikit-learn "
                f"forest), pass them explicitly: {flags}.{_not_importable(exc.types)}"
            ) from None
        except ValueError as exc:  # load's errors start with the path
            text = str(exc)
            where = "--model" if text.startswith(path) else f"--model {path}:"
            raise CLIError(f"{where} {text}") from None
        except OSError as exc:
            raise CLIError(f"--model {path} cannot be read: {exc}") from None
        except ImportError as exc:  # a type of the user's own, not importable
            raise CLIError(f"--model {exc}") from None
    if not allow_pickle:
        raise CLIError(
            f"--model {path} is not a .skops file, so it is read as a pickle, and "
            "loading a pickle runs whatever code its author put in it. Pass "
            "--allow-pickle if you made the file yourself or trust its author; "
            "better, save models as *.skops (calibrate/select --save model.skops)."
        )
    try:
        with open(path, "rb") as file:
            return pickle.load(file)
    except (OSError, pickle.UnpicklingError, EOFError) as exc:
        raise CLIError(f"--model {path} is not a readable pickle: {exc}") from None
    except (ImportError, AttributeError) as exc:
        raise CLIError(
            f"--model {path} is a pickle of a class this installation does not "
            f"have ({exc}): it was written with another version of skcal or of "
            "its dependencies. Fit and save the model again, as *.skops."
        ) from None


def _not_importable(types) -> str:
    """A note on the ``types`` whose top-level package is not on the path
    (looked up without importing anything), for the untrusted-types error."""
    tops = sorted({name.split(".")[0] for name in types})
    missing = [top for top in tops if importlib.util.find_spec(top) is None]
    if not missing:
        return ""
    return (
        f" The module(s) {', '.join(missing)} of these types cannot be imported "
        "here, which --trust alone does not fix: install the package that "
        "defines them, or set PYTHONPATH to the folder of the .py file."
    )


def saved_note(path: str, what: str) -> str:
    """How to use a model file ``calibrate``/``select --save`` wrote."""
    again = f"skcal apply --model {path} --apply FILE --out FILE"
    if _is_skops(path):
        return (
            f"Reapply the {what} with {again}, or load it in Python with "
            "skcal.utils.persistence.load (safe: it rebuilds only skcal's types "
            "and those skops trusts)."
        )
    return (
        f"It is a pickle: load it in Python with pickle.load or joblib.load, from "
        f"a trusted file only, or reapply the {what} with {again} --allow-pickle. "
        "A *.skops name writes a file that is safe to load."
    )
