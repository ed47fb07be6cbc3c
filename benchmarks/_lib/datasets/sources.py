"""Where the data live: installed packages, versions, the loaded raw data."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import subprocess
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .task import MissingDataError


def package_dir(import_name: str, install_hint: str) -> Path:
    """Directory of an installed package, found without importing it."""
    spec = importlib.util.find_spec(import_name)
    if spec is None or not spec.submodule_search_locations:
        raise MissingDataError(
            f"the data of this task ship in the package {import_name!r}, which is "
            f"not installed. Install it with: {install_hint}"
        )
    return Path(next(iter(spec.submodule_search_locations)))


def dist_version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def deb_version(package: str) -> str:
    try:
        out = subprocess.run(
            ["dpkg-query", "-W", "-f", "${Version}", package],
            capture_output=True,
            text=True,
            check=False,
            timeout=30,
        )
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return out.stdout.strip() or "unknown"


@dataclass
class Raw:
    """A data set as loaded: features (or texts), labels, optional fixed test."""

    X: object  # ndarray of features, or list of str for text tasks
    y: np.ndarray
    class_names: tuple
    source: str
    license: str
    X_test: object = None
    y_test: np.ndarray | None = None


def encode_labels(raw_labels, order=None):
    """Map labels to 0..C-1 (sorted unless ``order`` is given)."""
    raw_labels = np.asarray(raw_labels)
    names = np.unique(raw_labels) if order is None else np.asarray(order)
    lookup = {v: i for i, v in enumerate(names.tolist())}
    y = np.array([lookup[v] for v in raw_labels.tolist()], dtype=np.int64)
    return y, tuple(str(v) for v in names.tolist())
