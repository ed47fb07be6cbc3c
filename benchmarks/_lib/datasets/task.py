"""A real task (a trained model's outputs) and the constants of the cache."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

#: ``benchmarks/.cache`` (this file is ``benchmarks/_lib/datasets/task.py``).
CACHE_DIR = Path(__file__).resolve().parents[2] / ".cache"
#: Bump to invalidate every cached task (the per-task specification, split
#: sizes and training settings are part of the key as well).
CACHE_VERSION = "1"
#: The calibration-set sizes the benchmarks draw, where the pool allows.
DEFAULT_CAL_SIZES = (100, 500, 2000, 10000)
SEED = 0


class MissingDataError(RuntimeError):
    """The package that ships a task's data is not installed (and no cache)."""


@dataclass(frozen=True, eq=False)
class RealTask:
    """A trained model's outputs on a real calibration pool and test set.

    Attributes
    ----------
    name : str
        Registry name.
    source : str
        Package and version the data came from, and the original citation.
    domain : {"image", "tabular", "text"}
        Kind of input the model sees.
    n_classes : int
        Number of classes; labels are ``0 .. n_classes - 1``.
    class_names : tuple of str
        Name of each class.
    model : str
        Description of the trained network.
    n_train : int
        Rows the network was trained on (disjoint from the pool and test set).
    cal_logits, test_logits : ndarray of shape (n, n_classes), float64
        Logits of the network, equal to ``embeddings @ coef.T + intercept``.
    cal_embeddings, test_embeddings : ndarray of shape (n, n_features), float32
        Activations of the network's last hidden layer (after its ReLU).
    cal_labels, test_labels : ndarray of shape (n,), int64
        True classes.
    coef : ndarray of shape (n_classes, n_features), float32
        Weights of the network's linear head.
    intercept : ndarray of shape (n_classes,), float32
        Bias of the network's linear head.
    info : dict
        Build facts: license, split sizes, training settings, build time,
        test accuracy and NLL.
    """

    name: str
    source: str
    domain: str
    n_classes: int
    class_names: tuple
    model: str
    n_train: int
    cal_logits: np.ndarray
    cal_embeddings: np.ndarray
    cal_labels: np.ndarray
    test_logits: np.ndarray
    test_embeddings: np.ndarray
    test_labels: np.ndarray
    coef: np.ndarray
    intercept: np.ndarray
    info: dict = field(default_factory=dict)

    @property
    def n_cal(self) -> int:
        """Rows in the calibration pool."""
        return len(self.cal_labels)

    @property
    def n_test(self) -> int:
        """Rows in the test set."""
        return len(self.test_labels)

    def calibration_sizes(self, sizes=DEFAULT_CAL_SIZES) -> tuple:
        """The sizes in ``sizes`` that the calibration pool can supply."""
        return tuple(int(n) for n in sizes if n <= self.n_cal)

    def calibration_subset(self, n, random_state=None):
        """Draw ``n`` rows of the calibration pool uniformly without replacement.

        Parameters
        ----------
        n : int
            Number of rows, at most :attr:`n_cal`.
        random_state : int, numpy Generator or None
            Seed of the draw (a user collects ``n`` random rows).

        Returns
        -------
        logits : ndarray of shape (n, n_classes)
        embeddings : ndarray of shape (n, n_features)
        labels : ndarray of shape (n,)
        """
        n = int(n)
        if not 1 <= n <= self.n_cal:
            raise ValueError(
                f"calibration_subset: n must be between 1 and the pool size "
                f"{self.n_cal} of task {self.name!r}, got {n}."
            )
        rng = np.random.default_rng(random_state)
        idx = np.sort(rng.choice(self.n_cal, size=n, replace=False))
        return self.cal_logits[idx], self.cal_embeddings[idx], self.cal_labels[idx]

    def __repr__(self) -> str:
        return (
            f"RealTask({self.name!r}, domain={self.domain!r}, "
            f"n_classes={self.n_classes}, n_cal={self.n_cal}, n_test={self.n_test}, "
            f"n_features={self.coef.shape[1]})"
        )
