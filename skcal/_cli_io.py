"""Array files of the ``skcal`` command line: reading, checking, writing.

The format follows the file extension.

``.npz`` (numpy; read with ``allow_pickle=False``)
    Arrays named ``labels`` of shape (n_samples,); ``logits`` or ``proba``
    of shape (n_samples, n_classes); ``embeddings`` of shape (n_samples,
    n_features); in a calibration file, optionally the frozen linear head
    ``coef`` of shape (n_classes, n_features) and ``intercept`` of shape
    (n_classes,), and ``classes`` of shape (n_classes,), the label of each
    column. Output files hold ``proba``, ``predict``, ``classes`` and, when
    known, ``labels``.

``.csv`` and ``.parquet`` (need pandas; Parquet also pyarrow or fastparquet)
    One row per sample. Columns ``label``; ``logit_0`` ... ``logit_{C-1}``
    or ``proba_0`` ... ``proba_{C-1}``; ``emb_0`` ... ``emb_{D-1}``
    (numbered from 0 without gaps; other columns are ignored). Output files
    add ``predict``. A table cannot hold ``coef``, ``intercept`` or
    ``classes``: column ``j`` is the ``j``-th label in sorted order (integer
    labels ``0..C-1`` are their own column).

A fitted model (``skcal select --save``) is a pickle, with any extension
but those of the array files (``.pkl`` by convention).
"""

from __future__ import annotations

import importlib.util
import os
import pickle
import re
import zipfile

import numpy as np

#: npz key of each per-sample matrix -> column prefix in CSV/Parquet files
MATRIX_PREFIXES = {"logits": "logit_", "proba": "proba_", "embeddings": "emb_"}
#: npz key of each per-sample vector -> column name in CSV/Parquet files
VECTOR_COLUMNS = {"labels": "label", "predict": "predict"}
#: npz keys of arrays with one entry per class, not per sample: never a column
PER_CLASS_KEYS = frozenset({"classes", "coef", "intercept"})
FORMATS = {".npz": "npz", ".csv": "csv", ".parquet": "parquet"}


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


_PARQUET_ENGINE = (
    "{verb} {path} needs pyarrow or fastparquet (pip install pyarrow); or use "
    ".npz or .csv."
)


def check_output_path(path: str) -> None:
    """Raise a CLIError unless ``path`` can name an output file we can write."""
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

    Parameters
    ----------
    path : str
        File to read; the format follows its extension.
    """

    def __init__(self, path: str):
        self.path = path
        self.format = file_format(path)
        if not os.path.isfile(path):
            raise CLIError(f"cannot read {path}: no such file.")
        if self.format == "npz":
            self.arrays = _read_npz(path)
            self.found = sorted(self.arrays)
        else:
            frame = _read_frame(path, self.format)
            self.found = [str(c) for c in frame.columns]
            self.arrays = _frame_to_arrays(frame, path)

    def __contains__(self, key: str) -> bool:
        return key in self.arrays

    def describe(self, key: str) -> str:
        """How ``key`` is spelled in this file's format, for messages."""
        if self.format == "npz":
            return f"array {key!r}"
        if key in MATRIX_PREFIXES:
            prefix = MATRIX_PREFIXES[key]
            return f"columns {prefix}0, {prefix}1, ... ({key})"
        return f"column {VECTOR_COLUMNS.get(key, key)!r}"

    def require(self, key: str, why: str) -> np.ndarray:
        """The array ``key``, or a CLIError saying what the file holds."""
        if key not in self.arrays:
            found = ", ".join(self.found[:12]) + (
                ", ..." if len(self.found) > 12 else ""
            )
            kind = "arrays" if self.format == "npz" else "columns"
            raise CLIError(
                f"{self.path} has no {self.describe(key)}, {why}; its {kind}: "
                f"{found or 'none'}."
            )
        value = self.arrays[key]
        if not isinstance(value, np.ndarray):  # an npz member that is no .npy
            raise CLIError(
                f"member {key!r} of {self.path} is not a numpy array (it is not "
                "in .npy format); write the file with numpy.savez(path, "
                f"{key}=...)."
            )
        return value

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

    def vector(self, key: str, why: str) -> np.ndarray:
        """``key`` as a 1-D array (an (n, 1) column is flattened)."""
        value = self.require(key, why)
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


def _frame_to_arrays(frame, path: str) -> dict:
    arrays = {}
    for key, prefix in MATRIX_PREFIXES.items():
        pattern = re.compile(re.escape(prefix) + r"(\d+)$")
        numbered = {
            int(m.group(1)): column
            for column in frame.columns
            if (m := pattern.match(str(column)))
        }
        if not numbered:
            continue
        expected = list(range(len(numbered)))
        if sorted(numbered) != expected:
            missing = sorted(set(range(max(numbered) + 1)) - set(numbered))
            raise CLIError(
                f"{path}: columns {prefix}0 ... {prefix}{len(numbered) - 1} "
                f"must be numbered from 0 without gaps; missing "
                f"{', '.join(prefix + str(i) for i in missing[:5])}."
            )
        columns = [numbered[i] for i in expected]
        block = frame[columns]
        non_numeric = [c for c in columns if block[c].dtype.kind not in "biuf"]
        if non_numeric:
            raise CLIError(
                f"{path}: column {non_numeric[0]} must be numeric; got values "
                f"such as {block[non_numeric[0]].iloc[0]!r}."
            )
        arrays[key] = block.to_numpy(dtype=np.float64)
    for key, column in VECTOR_COLUMNS.items():
        if column in frame.columns:
            arrays[key] = _column_values(frame[column], path, column)
    return arrays


def _column_values(series, path: str, column: str) -> np.ndarray:
    if series.isna().any():
        raise CLIError(
            f"{path}: column {column!r} has {int(series.isna().sum())} missing "
            f"value(s) (first: row {int(np.flatnonzero(series.isna())[0])}); "
            "every row needs a label."
        )
    if series.dtype.kind in "biuf":
        return series.to_numpy()
    return series.astype(str).to_numpy(dtype=str)


def write_arrays(path: str, arrays: dict) -> None:
    """Write per-sample arrays (and, in npz, any other array) to ``path``.

    CSV and Parquet files get the per-sample arrays only, under the column
    names of the module docstring: the per-class arrays
    (``PER_CLASS_KEYS``, such as ``classes``) are left out by name,
    whatever their length.
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
        frame = pd.DataFrame(_table_columns(arrays))
        if fmt == "csv":
            frame.to_csv(path, index=False)
        else:
            frame.to_parquet(path, index=False)
    except ImportError:
        raise CLIError(_PARQUET_ENGINE.format(verb="writing", path=path)) from None
    except OSError as exc:
        raise CLIError(f"cannot write {path}: {exc}") from None


def _table_columns(arrays: dict) -> dict:
    per_sample = {k: v for k, v in arrays.items() if k not in PER_CLASS_KEYS}
    lengths = {key: len(value) for key, value in per_sample.items()}
    if len(set(lengths.values())) > 1:  # a bug of the caller, not of the input
        raise ValueError(f"per-sample arrays of different lengths: {lengths}")
    columns = {}
    for key, value in per_sample.items():
        if value.ndim == 2:
            prefix = MATRIX_PREFIXES.get(key, key + "_")
            columns.update({f"{prefix}{j}": value[:, j] for j in range(value.shape[1])})
        else:
            columns[VECTOR_COLUMNS.get(key, key)] = value
    return columns


def check_model_path(path: str, flag: str) -> None:
    """Raise a CLIError unless ``path`` can name a pickled model we can write.

    The extensions of the array files are refused: a model is no array
    file, and ``--save out.npz`` more likely means calibrated probabilities.
    """
    ext = os.path.splitext(path)[1].lower()
    if ext in FORMATS:
        raise CLIError(
            f"{flag} writes the fitted model as a pickle, not arrays, but {path!r} "
            f"has the extension {ext!r} of an array file; name it *.pkl."
        )
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise CLIError(f"cannot write {path}: folder {folder} does not exist.")


def write_model(path: str, model) -> None:
    """Pickle ``model`` to ``path`` (loaded by ``pickle.load`` or ``joblib.load``)."""
    try:
        with open(path, "wb") as file:
            pickle.dump(model, file, protocol=pickle.HIGHEST_PROTOCOL)
    except OSError as exc:
        raise CLIError(f"cannot write {path}: {exc}") from None
