"""Array files of the ``skcal`` command line: reading, checking, writing.

The format follows the file extension: ``.npz`` (numpy; read with
``allow_pickle=False``), ``.csv`` or ``.parquet`` (pandas; Parquet also
pyarrow or fastparquet). :class:`ArrayFile` finds the arrays where the
column options say (:mod:`skcal.cli._columns`), the same way in every
format.

Output files hold ``proba``, ``predict``, ``classes`` and ``method`` (the
calibrator's name; npz only) and, when known, ``labels``; in CSV and
Parquet the columns are ``label``,
``predict`` and ``proba_<class>`` when the classes are strings or were
named by the input (an npz ``classes`` array, or named columns), else
``proba_0 ... proba_{C-1}``. The interval of each probability, when the
calibrator reports one (Venn-Abers), is the npz arrays ``proba_lower`` and
``proba_upper``, or the columns ``lower_<class>`` and ``upper_<class>``
(not ``proba_...``, which would read back as more probability columns).
"""

from __future__ import annotations

import importlib.util
import os
import zipfile
from dataclasses import dataclass

import numpy as np

from ._columns import FLAGS, SEPARATORS, Columns, number_names, strip_common_prefix
from ._common import CLIError, did_you_mean, listing
from ._records import is_records, read_records

#: npz key of each per-sample matrix -> default column prefix
MATRIX_PREFIXES = {"logits": "logit_", "proba": "proba_", "embeddings": "emb_"}


#: npz key of each per-sample matrix of the outputs only -> column prefix
OUTPUT_PREFIXES = {"proba_lower": "lower_", "proba_upper": "upper_"}


#: npz key of each per-sample vector -> column name in CSV/Parquet outputs
VECTOR_COLUMNS = {"labels": "label", "predict": "predict"}


#: names of the labels without --label-col, tried in this order in every format
LABEL_NAMES = ("label", "labels")


#: npz keys of arrays with one entry per class, not per sample: never a column
PER_CLASS_KEYS = frozenset({"classes", "coef", "intercept", "method"})


FORMATS = {".npz": "npz", ".csv": "csv", ".parquet": "parquet"}


def file_format(path: str) -> str:
    """``"npz"``, ``"csv"`` or ``"parquet"``, from the extension of ``path``."""
    ext = os.path.splitext(path)[1].lower()
    if ext not in FORMATS:
        raise CLIError(
            f"cannot tell the format of {path!r} from its extension {ext!r}: "
            "name the file *.npz, *.csv or *.parquet (inputs may also be "
            "language-model records, *.jsonl or *.json)."
        )
    return FORMATS[ext]


@dataclass(frozen=True)
class _Location:
    """Where a per-sample array was found in a file."""

    members: tuple  # one 2-D npz array or 1-D vector, or the stacked columns
    stacked: bool  # True: the members are the columns of a matrix
    names: list | None  # class-name part of each stacked column
    text: str  # how it is spelled, for messages


def _columns_text(columns, key: str) -> str:
    """How stacked columns are named in messages (the first and last ones)."""
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
    """The pandas module, or a CLIError saying that ``path`` needs it."""
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
    :data:`~skcal.cli._columns.COLUMNS_HELP`); any other key is an npz array
    of that name.

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
        self.records = is_records(path)
        self.format = "npz" if self.records else file_format(path)
        if not os.path.isfile(path):
            raise CLIError(f"cannot read {path}: no such file.")
        if self.records:  # held as npz arrays
            self._members = read_records(path, self.columns.records)
            self.found = list(self._members)
        elif self.format == "npz":
            # in file order (the order of numpy.savez's keywords)
            self._members = _read_npz(path)
            self.found = sorted(self._members)
        else:
            frame = _read_frame(path, self.format)
            self._members = {str(c): frame[c] for c in frame.columns}
            self.found = list(self._members)
        self._kind = "arrays" if self.format == "npz" else "columns"
        self._used: set[str] = set()  # the members an option or key read

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
            names = strip_common_prefix(spec)
            names = number_names(names) or names
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
        numbers = number_names(rests)
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
            hint = did_you_mean(missing, found)
        elif key in MATRIX_PREFIXES:
            prefix = MATRIX_PREFIXES[key] if spec is None else spec
            prefixes = {
                name[: i + 1]
                for name in found
                for i, ch in enumerate(name)
                if ch in SEPARATORS
            } | {name.rstrip("0123456789") for name in found}
            hint = did_you_mean(prefix, sorted(prefixes - {""}))
        else:
            wanted = spec or (LABEL_NAMES[0] if key == "labels" else key)
            hint = did_you_mean(wanted, found)
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
                f"{listing(self.found)}{self._suggestion(key)}."
            )
        self._used.update(location.members)
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
        value = _finite_float(value, name)
        return _probability_rows(value, name, self.columns) if key == "proba" else value

    def column_names(self, key: str) -> list[str] | None:
        """The class-name part of each column of ``key`` (None for a 2-D array).

        The suffixes after the prefix, or the names of a list without their
        common prefix; numbers in canonical form (``"07"`` -> ``"7"``).
        """
        location = self._locate(key)
        return None if location is None else location.names

    def passthrough(self, keep, n_rows: int) -> dict:
        """The members to copy to an output beside the results (``--keep-cols``).

        ``keep`` None: every column of a table that nothing read (an id, a
        date), none of an npz file; ``()``: none; else those names, which
        must be 1-D with ``n_rows`` entries. Call after reading the scores
        and labels.
        """
        if keep is None and self.records:
            names = ["id"] if "id" in self._members else []
        elif keep is None:
            names = (
                []
                if self.format == "npz"
                else [name for name in self.found if name not in self._used]
            )
        else:
            missing = [name for name in keep if name not in self._members]
            if missing:
                raise CLIError(
                    f"--keep-cols: {self.path} has no {self._spelled(missing[0])}; "
                    f"its {self._kind}: {listing(self.found)}"
                    f"{did_you_mean(missing[0], self.found)}."
                )
            names = list(keep)
        out = {}
        for name in names:
            value = self._members[name]
            value = value.to_numpy() if self.format != "npz" else np.asarray(value)
            if value.ndim != 1 or len(value) != n_rows:
                raise CLIError(
                    f"--keep-cols: {self._spelled(name)} of {self.path} has shape "
                    f"{value.shape}, not one entry per row ({n_rows}); keep only "
                    "per-row columns."
                )
            out[name] = value
        return out

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
    """``value`` as float64, or a CLIError if not numeric or not finite."""
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


def _probability_rows(P: np.ndarray, name: str, columns: Columns) -> np.ndarray:
    """``P`` checked as rows of probabilities, or with ``--renormalize``
    (``columns.renormalize``) each row divided by its sum.

    Refused, with the options that fix it: negative entries (scores, not
    probabilities: ``--input logits``); without ``--renormalize``, rows
    whose sums are off by more than the tolerance of skcal's calibrators
    and metrics (``SUM_TOL``); with it, rows that sum to 0. The flag sets no
    limit on how far a sum may be from 1, since rounding each of ``C``
    entries to ``d`` decimals moves it by up to ``C 10^-d / 2`` (0.5 for
    1,000 classes and 3 decimals); the note on stderr gives the range of
    the sums divided.
    """
    from ..utils._validation import SUM_TOL

    if P.min() < -SUM_TOL:
        row = int(np.argmin(P.min(axis=1)))
        raise CLIError(
            f"{name} should hold probabilities in [0, 1], but row {row} has "
            f"{P[row].min():.6g}. If these are logits or decision scores, read "
            "them as logits: --input logits (and --logit-cols to name their "
            "columns)."
        )
    if columns.renormalize:
        P = np.clip(P, 0.0, None)  # entries within the tolerance below 0
    sums = P.sum(axis=1)
    worst = int(np.argmax(np.abs(sums - 1.0)))
    span = f"[{sums.min():.6g}, {sums.max():.6g}]"
    if not columns.renormalize:
        if abs(sums[worst] - 1.0) > SUM_TOL:
            raise CLIError(
                f"{name} should hold probabilities whose rows sum to 1 "
                f"(tolerance {SUM_TOL:g}), but row {worst} sums to "
                f"{sums[worst]:.6g} (the sums range over {span}). If these are "
                "rounded or unnormalised probabilities, add --renormalize to "
                "divide each row by its sum; if they are logits or decision "
                "scores, read them with --input logits."
            )
        return P
    if sums.min() <= 0:
        row = int(np.argmin(sums))
        raise CLIError(
            f"row {row} of {name} sums to 0: --renormalize cannot divide it by "
            "its sum; drop or repair that row."
        )
    if columns.report is not None:
        columns.report(
            f"--renormalize: divided each row of {name} by its sum (sums in {span})"
        )
    return P / sums[:, None]


def _read_npz(path: str) -> dict:
    """The members of the .npz file ``path``, read without pickles."""
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
    """The table of a CSV or Parquet file, with at least one row."""
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
    """A table column as an array: numbers, else strings; no missing value."""
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


def write_arrays(
    path: str, arrays: dict, *, class_names=None, label_name=None, keep=None
) -> None:
    """Write per-sample arrays (and, in npz, any other array) to ``path``.

    ``label_name`` (the input's ``--label-col``) names the labels in every
    format, so that an output reads back with the same option; by default
    they are ``labels`` in npz and the column ``label`` in CSV and Parquet.

    CSV and Parquet files get the per-sample arrays only, under the column
    names of the module docstring: the per-class arrays
    (``PER_CLASS_KEYS``, such as ``classes``) are left out by name,
    whatever their length. ``class_names``
    (:func:`~skcal.cli._columns.named_columns`) names the ``proba`` columns
    ``proba_<name>`` instead of ``proba_<j>``. ``keep`` (from
    :meth:`ArrayFile.passthrough`) are copied first, under their own names
    (an id column leads the table), except where the output has a column of
    that name.
    """
    fmt = file_format(path)
    arrays = {
        (label_name if key == "labels" and label_name else key): (
            value.astype(str) if value.dtype == object else value
        )
        for key, value in arrays.items()
    }
    try:
        keep = dict(keep or {})
        if fmt == "npz":
            kept = {
                k: (v.astype(str) if v.dtype == object else v)
                for k, v in keep.items()
                if k not in arrays
            }
            np.savez(path, **kept, **arrays)
            return
        pd = _pandas(path)
        columns = _table_columns(arrays, class_names)
        kept = {k: v for k, v in keep.items() if k not in columns}
        frame = pd.DataFrame({**kept, **columns})
        if fmt == "csv":
            frame.to_csv(path, index=False)
        else:
            frame.to_parquet(path, index=False)
    except ImportError:
        raise CLIError(_PARQUET_ENGINE.format(verb="writing", path=path)) from None
    except OSError as exc:
        raise CLIError(f"cannot write {path}: {exc}") from None


def _table_columns(arrays: dict, class_names=None) -> dict:
    """The columns of a CSV or Parquet output, from the per-sample arrays."""
    per_sample = {k: v for k, v in arrays.items() if k not in PER_CLASS_KEYS}
    lengths = {key: len(value) for key, value in per_sample.items()}
    if len(set(lengths.values())) > 1:  # a bug of the caller, not of the input
        raise ValueError(f"per-sample arrays of different lengths: {lengths}")
    columns = {}
    for key, value in per_sample.items():
        if value.ndim == 2:
            prefix = {**MATRIX_PREFIXES, **OUTPUT_PREFIXES}.get(key, key + "_")
            suffixes = range(value.shape[1])
            if key in ("proba", *OUTPUT_PREFIXES) and class_names is not None:
                suffixes = class_names
            columns.update(
                {f"{prefix}{s}": value[:, j] for j, s in enumerate(suffixes)}
            )
        else:
            columns[VECTOR_COLUMNS.get(key, key)] = value
    return columns
