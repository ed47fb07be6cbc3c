"""Array files of the ``skcal`` command line: reading, checking, writing.

The format follows the file extension: ``.npz`` (numpy; read with
``allow_pickle=False``), ``.csv`` or ``.parquet`` (pandas; Parquet also
pyarrow or fastparquet). The same names work in every format
(:data:`COLUMNS_HELP`, shown by ``skcal <command> --help``):

labels
    The column or array ``label`` or ``labels`` (``--label-col NAME``).
logits, proba, embeddings
    A matrix, read from a 2-D npz array (``logits``, ``proba``,
    ``embeddings``), or from the columns (or 1-D npz arrays) whose names
    start with a prefix (``logit_``, ``proba_``, ``emb_``): in file order,
    or by number when every suffix is a number. ``--logit-cols``,
    ``--proba-cols`` and ``--emb-cols`` give another array name or prefix
    (``p_`` matches ``p_0 ... p_9`` or ``p_cat, p_dog``), or, with a comma,
    the exact column names in column order (``p_cat,p_dog``).
classes
    The label of each score column: an npz array ``classes``; else, when
    the columns' suffixes (after a prefix, or after the common prefix of a
    list) name every label, these names (``proba_cat`` is class ``cat``);
    else integer labels ``0..C-1`` are their own column and other labels
    go in sorted order (:func:`column_classes`).
coef, intercept
    The frozen linear head of local calibrators, npz only.

Output files hold ``proba``, ``predict``, ``classes`` and ``method`` (the
calibrator's name; npz only) and, when known, ``labels``; in CSV and
Parquet the columns are ``label``,
``predict`` and ``proba_<class>`` when the classes are strings or were
named by the input (an npz ``classes`` array, or named columns), else
``proba_0 ... proba_{C-1}``.

A fitted model (``skcal calibrate --save``, ``skcal select --save``) is
written in the skops format when its name ends in ``.skops`` (safe to load:
``skcal apply`` and :func:`skcal.utils.persistence.load` rebuild only
trusted types), else as a pickle (``.pkl`` by convention; loading a pickle
runs code, so ``skcal apply`` reads one only with ``--allow-pickle``).
"""

from __future__ import annotations

import difflib
import importlib.util
import os
import pickle
import re
import zipfile
from dataclasses import dataclass

import numpy as np

#: npz key of each per-sample matrix -> default column prefix
MATRIX_PREFIXES = {"logits": "logit_", "proba": "proba_", "embeddings": "emb_"}
#: npz key of each per-sample vector -> column name in CSV/Parquet outputs
VECTOR_COLUMNS = {"labels": "label", "predict": "predict"}
#: names of the labels without --label-col, tried in this order in every format
LABEL_NAMES = ("label", "labels")
#: npz keys of arrays with one entry per class, not per sample: never a column
PER_CLASS_KEYS = frozenset({"classes", "coef", "intercept", "method"})
FORMATS = {".npz": "npz", ".csv": "csv", ".parquet": "parquet"}
#: option naming where each per-sample array is read from
FLAGS = {
    "labels": "--label-col",
    "logits": "--logit-cols",
    "proba": "--proba-cols",
    "embeddings": "--emb-cols",
}
#: characters that end the common prefix of a list of column names
_SEPARATORS = "_-.: "

COLUMNS_HELP = """\
columns and keys (the same names in .npz, .csv and .parquet files):
  labels           --label-col NAME: the column or npz array NAME (default:
                   label, else labels).
  logits, proba,   --logit-cols, --proba-cols, --emb-cols SPEC, one of:
  embeddings       - NAME: the 2-D npz array NAME (defaults: logits, proba,
                     embeddings), else the columns (or 1-D npz arrays) whose
                     names start with the prefix NAME (defaults: logit_,
                     proba_, emb_), in file order, or by number when every
                     suffix is a number: p_ matches p_0 ... p_9 or p_cat,
                     p_dog;
                   - A,B,...: exactly these columns, in this order.
  classes          the label of each score column: an npz array classes;
                   else the columns' suffixes (after the prefix, or after
                   the common prefix of a list ending in _ - . : or a
                   space) when they name every label (proba_cat: class
                   cat); else integer labels 0..C-1 are their own column,
                   and other labels go in sorted order.
  outputs          proba, predict, labels (when known) and, in npz,
                   classes; in a table the columns label, predict and
                   proba_<class> when the classes are strings or named by
                   the input, else proba_0 ... proba_{C-1}."""


class CLIError(ValueError):
    """An input or usage error reported as one line, without a traceback."""


def file_format(path: str) -> str:
    """``"npz"``, ``"csv"`` or ``"parquet"``, from the extension of ``path``."""
    ext = os.path.splitext(path)[1].lower()
    if ext not in FORMATS:
        raise CLIError(
            f"cannot tell the format of {path!r} from its extension {ext!r}: "
            "name the file *.npz, *.csv or *.parquet."
        )
    return FORMATS[ext]


def parse_columns(text: str | None, flag: str):
    """The value of ``--logit-cols``/``--proba-cols``/``--emb-cols``.

    Returns None (the defaults) for None, the name or prefix for a text
    without a comma, else the tuple of the comma-separated names.

    Raises
    ------
    CLIError
        If the text or one of its names is empty, or a name repeats.
    """
    if text is None:
        return None
    if "," not in text:
        if not text.strip():
            raise CLIError(
                f"{flag} is empty: give an array name or column prefix such as "
                "p_, or comma-separated column names such as p_cat,p_dog."
            )
        return text.strip()
    names = tuple(name.strip() for name in text.split(","))
    if not all(names):
        raise CLIError(
            f"{flag} {text!r} has an empty name: give comma-separated column "
            "names such as p_cat,p_dog (or, without a comma, a prefix such as p_)."
        )
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise CLIError(
            f"{flag} {text!r} names {repeated[0]!r} more than once: give each "
            "column once, in column order."
        )
    return names


@dataclass(frozen=True)
class Columns:
    """Where the per-sample arrays of a file are read from.

    Each attribute is None for the defaults of :data:`COLUMNS_HELP`;
    ``labels`` is a column or npz array name, the matrices a name or prefix
    (str) or a tuple of exact column names.
    """

    labels: str | None = None
    logits: str | tuple | None = None
    proba: str | tuple | None = None
    embeddings: str | tuple | None = None

    @classmethod
    def from_args(cls, args) -> Columns:
        """From the options ``--label-col``, ``--logit-cols``, ``--proba-cols``
        and ``--emb-cols`` of ``args`` (absent options: the defaults)."""
        label = getattr(args, "label_col", None)
        if label is not None and not label.strip():
            raise CLIError(
                "--label-col is empty: give the name of the column (or npz "
                "array) of the labels."
            )
        return cls(
            labels=None if label is None else label.strip(),
            logits=parse_columns(getattr(args, "logit_cols", None), FLAGS["logits"]),
            proba=parse_columns(getattr(args, "proba_cols", None), FLAGS["proba"]),
            embeddings=parse_columns(
                getattr(args, "emb_cols", None), FLAGS["embeddings"]
            ),
        )

    def spec(self, key: str):
        """The option's value for ``key`` (None: the defaults)."""
        return getattr(self, key, None) if key in FLAGS else None

    def option(self, key: str) -> str:
        """``key``'s option as given, such as ``--proba-cols p_``."""
        spec = self.spec(key)
        value = ",".join(spec) if isinstance(spec, tuple) else spec
        return f"{FLAGS[key]} {value}"


@dataclass(frozen=True)
class _Location:
    """Where a per-sample array was found in a file."""

    members: tuple  # one 2-D npz array or 1-D vector, or the stacked columns
    stacked: bool  # True: the members are the columns of a matrix
    names: list | None  # class-name part of each stacked column
    text: str  # how it is spelled, for messages


def _strip_common_prefix(names) -> list[str]:
    """The names without their longest common prefix that ends in a separator."""
    prefix = os.path.commonprefix(list(names))
    cut = max((i + 1 for i, ch in enumerate(prefix) if ch in _SEPARATORS), default=0)
    if any(len(name) == cut for name in names):
        cut = 0
    return [name[cut:] for name in names]


def _number_names(names: list[str]) -> list[str] | None:
    """``names`` as canonical integers (``"07"`` -> ``"7"``) if all are, else None."""
    if all(re.fullmatch(r"\d+", name) for name in names):
        return [str(int(name)) for name in names]
    return None


def _listing(names, limit: int = 12) -> str:
    names = list(names)
    shown = ", ".join(names[:limit]) + (", ..." if len(names) > limit else "")
    return shown or "none"


def _columns_text(columns, key: str) -> str:
    columns = list(columns)
    if len(columns) > 4:
        shown = f"{columns[0]}, {columns[1]}, ..., {columns[-1]}"
    else:
        shown = ", ".join(columns)
    return f"columns {shown} ({key})"


_PARQUET_ENGINE = (
    "{verb} {path} needs pyarrow or fastparquet (pip install pyarrow); or use "
    ".npz or .csv."
)


def check_output_path(path: str, inputs: dict | None = None) -> None:
    """Raise a CLIError unless ``path`` can name an output file we can write.

    ``inputs`` maps the flags of the command's input files to their paths:
    the output may not be one of them (writing it would destroy the input).
    """
    for flag, given in (inputs or {}).items():
        if given is not None and os.path.exists(given):
            if os.path.exists(path) and os.path.samefile(path, given):
                raise CLIError(
                    f"--out {path} is the input file {flag} {given}: writing "
                    "it would replace the input. Write to another file."
                )
    fmt = file_format(path)
    if fmt != "npz":
        _pandas(path)
    if fmt == "parquet" and not any(
        importlib.util.find_spec(engine) for engine in ("pyarrow", "fastparquet")
    ):
        raise CLIError(_PARQUET_ENGINE.format(verb="writing", path=path))
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise CLIError(f"cannot write {path}: folder {folder} does not exist.")


def _pandas(path: str):
    try:
        import pandas as pd
    except ImportError:
        raise CLIError(
            f"reading or writing {path!r} needs pandas (pip install pandas), "
            "or use an .npz file."
        ) from None
    return pd


class ArrayFile:
    """The arrays of one input file, under their npz names.

    ``"labels"``, ``"predict"``, ``"logits"``, ``"proba"`` and
    ``"embeddings"`` are found where ``columns`` says (see
    :data:`COLUMNS_HELP`); any other key is an npz array of that name.

    Parameters
    ----------
    path : str
        File to read; the format follows its extension.
    columns : Columns, default=None
        Where the per-sample arrays are (None: the defaults).
    """

    def __init__(self, path: str, columns: Columns | None = None):
        self.path = path
        self.columns = Columns() if columns is None else columns
        self.format = file_format(path)
        if not os.path.isfile(path):
            raise CLIError(f"cannot read {path}: no such file.")
        if self.format == "npz":
            # in file order (the order of numpy.savez's keywords)
            self._members = _read_npz(path)
            self.found = sorted(self._members)
        else:
            frame = _read_frame(path, self.format)
            self._members = {str(c): frame[c] for c in frame.columns}
            self.found = list(self._members)
        self._kind = "arrays" if self.format == "npz" else "columns"

    def text(self, name: str) -> str | None:
        """The string stored as a 0-d npz array ``name`` (``method``), or None."""
        value = self._members.get(name) if self.format == "npz" else None
        if isinstance(value, np.ndarray) and value.ndim == 0:
            if value.dtype.kind == "U":
                return str(value)
        return None

    # ------------------------------------------------------------ locating
    def _is_column(self, name: str) -> bool:
        """Whether member ``name`` can be one column of a matrix."""
        if self.format != "npz":
            return True
        value = self._members[name]
        return (
            name not in PER_CLASS_KEYS
            and isinstance(value, np.ndarray)
            and value.ndim == 1
        )

    def _spelled(self, name: str) -> str:
        return f"{'array' if self.format == 'npz' else 'column'} {name!r}"

    def _stacked_text(self, columns, key: str) -> str:
        text = _columns_text(columns, key)
        return text if self.format != "npz" else "1-D arrays" + text[len("columns") :]

    def _locate(self, key: str) -> _Location | None:
        """Where ``key`` is in this file, or None if it is not there."""
        spec = self.columns.spec(key)
        if key in PER_CLASS_KEYS and self.format != "npz":
            return None  # a table has no per-class arrays
        if key in VECTOR_COLUMNS or key not in MATRIX_PREFIXES:
            if key == "labels":
                candidates = LABEL_NAMES if spec is None else (spec,)
            else:
                candidates = (key,)
            for name in candidates:
                if name in self._members:
                    return _Location((name,), False, None, self._spelled(name))
            return None
        if isinstance(spec, tuple):
            if not all(name in self._members for name in spec):
                return None
            names = _strip_common_prefix(spec)
            names = _number_names(names) or names
            return _Location(spec, True, names, self._stacked_text(spec, key))
        exact = key if spec is None else spec
        if self.format == "npz" and exact in self._members:
            return _Location((exact,), False, None, self._spelled(exact))
        prefix = MATRIX_PREFIXES[key] if spec is None else spec
        matched = [
            name
            for name in self._members
            if name.startswith(prefix) and len(name) > len(prefix)
            if self._is_column(name)
        ]
        if not matched:
            return None
        rests = [name[len(prefix) :] for name in matched]
        numbers = _number_names(rests)
        if numbers is not None:  # by number, not in file order
            order = sorted(range(len(matched)), key=lambda i: int(numbers[i]))
            matched = [matched[i] for i in order]
            rests = [numbers[i] for i in order]
        return _Location(tuple(matched), True, rests, self._stacked_text(matched, key))

    def __contains__(self, key: str) -> bool:
        return self._locate(key) is not None

    def describe(self, key: str) -> str:
        """How ``key`` is spelled in this file, for messages."""
        location = self._locate(key)
        if location is not None:
            return location.text
        spec = self.columns.spec(key)
        if key not in MATRIX_PREFIXES:
            if key == "labels" and spec is None:
                spec = "labels" if self.format == "npz" else "label"
            return self._spelled(spec or key)
        if isinstance(spec, tuple):
            missing = [name for name in spec if name not in self._members]
            return f"{self._spelled(missing[0])} (of {self.columns.option(key)})"
        if self.format == "npz" and spec is None:
            return self._spelled(key)
        if spec is None:
            prefix = MATRIX_PREFIXES[key]
            return f"columns {prefix}0, {prefix}1, ... ({key})"
        option = self.columns.option(key)
        if self.format == "npz":
            return f"array {spec!r} or 1-D arrays named {spec}... ({key}, {option})"
        return f"columns named {spec}... ({key}, {option})"

    def _suggestion(self, key: str) -> str:
        """`` (did you mean 'x'?)`` for a missing ``key``, or ``""``."""
        spec = self.columns.spec(key)
        found = list(self._members)
        if isinstance(spec, tuple):
            missing = next(name for name in spec if name not in self._members)
            close = difflib.get_close_matches(missing, found, n=1)
        elif key in MATRIX_PREFIXES:
            prefix = MATRIX_PREFIXES[key] if spec is None else spec
            prefixes = {
                name[: i + 1]
                for name in found
                for i, ch in enumerate(name)
                if ch in _SEPARATORS
            } | {name.rstrip("0123456789") for name in found}
            close = difflib.get_close_matches(prefix, sorted(prefixes - {""}), n=1)
        else:
            wanted = spec or (LABEL_NAMES[0] if key == "labels" else key)
            close = difflib.get_close_matches(wanted, found, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        if key in FLAGS:
            hint += f"; name {'it' if key == 'labels' else 'them'} with {FLAGS[key]}"
        return hint

    def require(self, key: str, why: str):
        """The raw array ``key``, or a CLIError saying what the file holds."""
        location = self._locate(key)
        if location is None:
            why = f", {why}" if why else ""
            raise CLIError(
                f"{self.path} has no {self.describe(key)}{why}; its {self._kind}: "
                f"{_listing(self.found)}{self._suggestion(key)}."
            )
        if location.stacked:
            return self._stack(key, location)
        value = self._members[location.members[0]]
        if self.format != "npz":
            return value
        if not isinstance(value, np.ndarray):  # an npz member that is no .npy
            raise CLIError(
                f"member {location.members[0]!r} of {self.path} is not a numpy "
                "array (it is not in .npy format); write the file with "
                f"numpy.savez(path, {location.members[0]}=...)."
            )
        return value

    def _stack(self, key: str, location: _Location) -> np.ndarray:
        """The columns of ``location`` side by side, checked numeric."""
        columns = []
        for name in location.members:
            value = self._members[name]
            if self.format != "npz":
                value = value.to_numpy()
            elif not isinstance(value, np.ndarray) or value.ndim != 1:
                shape = getattr(value, "shape", "not a numpy array")
                raise CLIError(
                    f"array {name!r} of {self.path} is one column of {key} "
                    f"({self.columns.option(key)}) and must be 1-D; got {shape}."
                )
            if value.dtype.kind not in "biuf":
                example = value[0] if len(value) else ""
                raise CLIError(
                    f"{self.path}: {self._spelled(name)} ({key}) must be numeric; "
                    f"got values such as {example!r}."
                )
            columns.append(value)
        lengths = {len(value) for value in columns}
        if len(lengths) > 1:
            raise CLIError(
                f"the {location.text} of {self.path} have different lengths "
                f"({sorted(lengths)}); give one entry per sample in each."
            )
        return np.column_stack(columns)

    # ------------------------------------------------------------- reading
    def matrix(self, key: str, why: str) -> np.ndarray:
        """``key`` as a finite float64 matrix with at least one row."""
        value = self.require(key, why)
        name = f"{self.describe(key)} of {self.path}"
        if value.ndim != 2 or value.shape[0] == 0:
            raise CLIError(
                f"{name} must be 2-D of shape (n_samples, n_columns) with at "
                f"least one row; got shape {value.shape}."
            )
        return _finite_float(value, name)

    def column_names(self, key: str) -> list[str] | None:
        """The class-name part of each column of ``key`` (None for a 2-D array).

        The suffixes after the prefix, or the names of a list without their
        common prefix; numbers in canonical form (``"07"`` -> ``"7"``).
        """
        location = self._locate(key)
        return None if location is None else location.names

    def vector(self, key: str, why: str) -> np.ndarray:
        """``key`` as a 1-D array (an (n, 1) column is flattened)."""
        value = self.require(key, why)
        if self.format != "npz":
            return _column_values(value, self.path, self.describe(key), key)
        if value.ndim == 2 and value.shape[1] == 1:
            value = value[:, 0]
        if value.ndim != 1:
            raise CLIError(
                f"{self.describe(key)} of {self.path} must be 1-D of shape "
                f"(n_samples,); got shape {value.shape}."
            )
        if value.dtype.kind == "f" and not np.isfinite(value).all():
            bad = np.flatnonzero(~np.isfinite(value))
            raise CLIError(
                f"{self.describe(key)} of {self.path} has NaN or infinite "
                f"values in {bad.size} row(s) (first: row {bad[0]}); drop or "
                "repair those rows."
            )
        return value


def _finite_float(value: np.ndarray, name: str) -> np.ndarray:
    if value.dtype.kind not in "biuf":
        raise CLIError(f"{name} must be numeric; got dtype {value.dtype}.")
    value = np.asarray(value, dtype=np.float64)
    finite = np.isfinite(value)
    if not finite.all():
        bad = np.flatnonzero(~finite.reshape(value.shape[0], -1).all(axis=1))
        raise CLIError(
            f"{name} has NaN or infinite values in {bad.size} row(s) (first: "
            f"row {bad[0]}); drop or repair those rows."
        )
    return value


def _read_npz(path: str) -> dict:
    try:
        if not zipfile.is_zipfile(path):
            raise CLIError(
                f"{path} is not an .npz archive; write it with numpy.savez(path, "
                "labels=..., logits=...)."
            )
        with np.load(path, allow_pickle=False) as data:
            # members that are not .npy files come back as bytes: kept, so
            # that using one is a clear error (ArrayFile.require)
            return {key: data[key] for key in data.files}
    except CLIError:
        raise
    except ValueError as exc:
        if "allow_pickle" not in str(exc):
            raise CLIError(f"cannot read {path} as .npz: {exc}") from None
        raise CLIError(
            f"{path} holds object arrays, which skcal does not unpickle; save "
            "numeric (or fixed-width string) arrays, e.g. np.asarray(a, "
            "dtype=float)."
        ) from None
    except (OSError, EOFError, zipfile.BadZipFile) as exc:
        raise CLIError(f"cannot read {path} as .npz: {exc}") from None


def _read_frame(path: str, fmt: str):
    pd = _pandas(path)
    try:
        if fmt == "csv":
            frame = pd.read_csv(path)
        else:
            frame = pd.read_parquet(path)
    except ImportError:
        raise CLIError(_PARQUET_ENGINE.format(verb="reading", path=path)) from None
    except (OSError, ValueError) as exc:  # parser errors are ValueErrors
        message = " ".join(str(exc).split())
        raise CLIError(f"cannot read {path} as {fmt}: {message}") from None
    if len(frame) == 0:
        raise CLIError(
            f"{path} has no rows (columns: "
            f"{', '.join(map(str, frame.columns[:12])) or 'none'}); give one row "
            "per sample."
        )
    return frame


def _column_values(series, path: str, described: str, key: str) -> np.ndarray:
    missing = series.isna()
    if missing.any():
        what = "a label" if key == "labels" else "a value"
        raise CLIError(
            f"{path}: {described} has {int(missing.sum())} missing value(s) "
            f"(first: row {int(np.flatnonzero(missing)[0])}); every row needs "
            f"{what}."
        )
    if series.dtype.kind in "biuf":
        return series.to_numpy()
    return series.astype(str).to_numpy(dtype=str)


# ------------------------------------------------------------------ classes
def column_classes(y, names, n_columns: int, classes=None):
    """The label of each score column, and whether the input named them.

    Parameters
    ----------
    y : ndarray of shape (n_samples,) or None
        The file's labels (None: a file without labels).
    names : list of str or None
        :meth:`ArrayFile.column_names` of the scores (None: a 2-D array).
    n_columns : int
        Number of score columns.
    classes : ndarray of shape (n_columns,), default=None
        An npz array ``classes``, which wins.

    Returns
    -------
    classes_ : ndarray of shape (n_columns,) or None
        The label of each column (None without labels and names).
    given : ndarray of shape (n_columns,) or None
        ``classes_`` when the input named the classes (``classes``, or
        column names that name every label), to pass to the calibrators as
        ``classes``; None when the default rule applies (integer labels
        ``0..C-1`` are their own column, other labels in sorted order).
    note : str or None
        Why the default rule applies although the columns have names (none
        of them is a label), for the user; None otherwise.

    Raises
    ------
    ValueError
        If the labels do not fit the columns; a :class:`CLIError` if the
        column names name some labels but not all, or are numbered neither
        ``0..C-1`` nor after the labels.
    """
    from .utils._validation import resolve_classes

    if classes is not None:
        if y is not None:
            resolve_classes(y, n_columns, classes)  # the labels fit the columns
        return np.asarray(classes), np.asarray(classes), None
    numbers = None if names is None else _number_names(names)
    if names is None or numbers == [str(j) for j in range(n_columns)]:
        if y is None:
            return None, None, None
        return resolve_classes(y, n_columns)[0], None, None
    labels = [] if y is None else [str(label) for label in np.unique(y)]
    unnamed = sorted(set(labels) - set(names))
    if not unnamed and len(set(names)) == len(names):
        integral = y is None or y.dtype.kind in "iu"
        if numbers is not None and integral:
            named = np.array([int(name) for name in names])
        else:
            named = np.array(names)
        if y is not None and y.dtype.kind in "US":
            named = named.astype(str)
        return named, named, None
    if numbers is not None:
        raise CLIError(
            f"the score columns are numbered {_listing(names, 6)}, neither 0..."
            f"{n_columns - 1} nor after every label (no column for "
            f"{_listing(unnamed, 6)}); number them 0..{n_columns - 1} (column j: "
            "the j-th label in sorted order) or after the labels."
        )
    if set(labels) & set(names):
        raise CLIError(
            f"the score columns name the classes {_listing(names, 6)}, but the "
            f"labels also include {_listing(unnamed, 6)}; name one column after "
            "each class."
        )
    if y is None:
        return None, None, None
    classes_ = resolve_classes(y, n_columns)[0]
    note = (
        f"the score columns' names ({_listing(names, 6)}) name no label: column "
        f"j is class j of {_listing(map(str, classes_), 10)}"
    )
    return classes_, None, note


def score_column_names(file, key: str):
    """The names of the score columns of ``file`` and whether they are binding.

    Named columns (:meth:`ArrayFile.column_names`), or else the file's
    ``classes`` array, which names the columns of its 2-D arrays and so must
    name the model's classes (``strict``).
    """
    names = file.column_names(key)
    if names is not None or "classes" not in file:
        return names, False
    return [str(c) for c in file.vector("classes", "")], True


def align_columns(X, names, classes, what: str, *, strict: bool = False) -> np.ndarray:
    """The columns of ``X`` in the order of ``classes``, by their names.

    ``names`` (:meth:`ArrayFile.column_names`) that name exactly the
    ``classes`` put the columns in their order; numbered names ``0..C-1``,
    names that name no class and a 2-D array (None) keep their order,
    unless ``strict`` (names from an npz ``classes`` array), where they must
    name the classes.

    Raises
    ------
    CLIError
        If the names name some of the classes but not all (or, ``strict``,
        not exactly them); ``what`` names the file in the message.
    """
    if names is None:
        return X
    wanted = [str(c) for c in classes]
    if strict and (len(names) != X.shape[1] or sorted(names) != sorted(wanted)):
        raise CLIError(
            f"{what} names the classes of its score columns {_listing(names, 10)} "
            f"(its classes array), but the classes are {_listing(wanted, 10)}; "
            "give one column per class and list them in its classes array, or "
            "leave the array out for columns in the classes' order."
        )
    if _number_names(names) == [str(j) for j in range(len(names))]:
        return X
    if sorted(names) == sorted(wanted) and len(set(names)) == len(names):
        return X[:, [names.index(c) for c in wanted]]
    if set(names) & set(wanted):
        raise CLIError(
            f"the score columns of {what} name the classes "
            f"{_listing(names, 10)}, but the classes are {_listing(wanted, 10)}; "
            "give one column per class, named after it."
        )
    return X


def named_columns(classes, given) -> list[str] | None:
    """The class part of the output's ``proba_*`` headers, or None for ``0..C-1``.

    Class names when the classes are strings or were named by the input
    (``given``, from :func:`column_classes`); numeric labels keep the
    column numbers.
    """
    classes = np.asarray(classes)
    if given is None and classes.dtype.kind in "biuf":
        return None
    return [str(c) for c in classes]


def write_arrays(path: str, arrays: dict, *, class_names=None) -> None:
    """Write per-sample arrays (and, in npz, any other array) to ``path``.

    CSV and Parquet files get the per-sample arrays only, under the column
    names of the module docstring: the per-class arrays
    (``PER_CLASS_KEYS``, such as ``classes``) are left out by name,
    whatever their length. ``class_names`` (:func:`named_columns`) names
    the ``proba`` columns ``proba_<name>`` instead of ``proba_<j>``.
    """
    fmt = file_format(path)
    arrays = {
        key: value.astype(str) if value.dtype == object else value
        for key, value in arrays.items()
    }
    try:
        if fmt == "npz":
            np.savez(path, **arrays)
            return
        pd = _pandas(path)
        frame = pd.DataFrame(_table_columns(arrays, class_names))
        if fmt == "csv":
            frame.to_csv(path, index=False)
        else:
            frame.to_parquet(path, index=False)
    except ImportError:
        raise CLIError(_PARQUET_ENGINE.format(verb="writing", path=path)) from None
    except OSError as exc:
        raise CLIError(f"cannot write {path}: {exc}") from None


def _table_columns(arrays: dict, class_names=None) -> dict:
    per_sample = {k: v for k, v in arrays.items() if k not in PER_CLASS_KEYS}
    lengths = {key: len(value) for key, value in per_sample.items()}
    if len(set(lengths.values())) > 1:  # a bug of the caller, not of the input
        raise ValueError(f"per-sample arrays of different lengths: {lengths}")
    columns = {}
    for key, value in per_sample.items():
        if value.ndim == 2:
            prefix = MATRIX_PREFIXES.get(key, key + "_")
            suffixes = range(value.shape[1])
            if key == "proba" and class_names is not None:
                suffixes = class_names
            columns.update(
                {f"{prefix}{s}": value[:, j] for j, s in enumerate(suffixes)}
            )
        else:
            columns[VECTOR_COLUMNS.get(key, key)] = value
    return columns


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
    return os.path.splitext(path)[1].lower() == ".skops"


def write_model(path: str, model) -> None:
    """Write ``model`` to ``path``: skops for ``*.skops``, else a pickle."""
    try:
        if _is_skops(path):
            from .utils.persistence import dump

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
        from .exceptions import UntrustedTypesError
        from .utils.persistence import load

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
                f"forest), pass them explicitly: {flags}."
            ) from None
        except ValueError as exc:  # load's errors start with the path
            text = str(exc)
            where = "--model" if text.startswith(path) else f"--model {path}:"
            raise CLIError(f"{where} {text}") from None
        except OSError as exc:
            raise CLIError(f"--model {path} cannot be read: {exc}") from None
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
