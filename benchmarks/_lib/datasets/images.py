"""Fashion-MNIST from Debian's dataset-fashion-mnist (idx files)."""

from __future__ import annotations

import gzip
import os
from pathlib import Path

import numpy as np

from .sources import Raw, deb_version
from .task import MissingDataError

FASHION_MNIST_DIR = Path(
    os.environ.get("SKCAL_FASHION_MNIST_DIR", "/usr/share/datasets/fashion-mnist")
)
FASHION_MNIST_CLASSES = (
    "T-shirt/top",
    "Trouser",
    "Pullover",
    "Dress",
    "Coat",
    "Sandal",
    "Shirt",
    "Sneaker",
    "Bag",
    "Ankle boot",
)


def _read_idx(path: Path) -> np.ndarray:
    with gzip.open(path, "rb") as f:
        data = f.read()
    ndim = data[3]
    dims = [int.from_bytes(data[4 + 4 * i : 8 + 4 * i], "big") for i in range(ndim)]
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def fashion_mnist() -> Raw:
    files = {
        key: FASHION_MNIST_DIR / f"{key}-idx{3 if 'images' in key else 1}-ubyte.gz"
        for key in ("train-images", "train-labels", "t10k-images", "t10k-labels")
    }
    if not all(p.exists() for p in files.values()):
        raise MissingDataError(
            f"Fashion-MNIST is not in {FASHION_MNIST_DIR}. It ships in the Debian "
            "package dataset-fashion-mnist: apt-get install dataset-fashion-mnist "
            "(or set SKCAL_FASHION_MNIST_DIR to a folder with the four idx .gz files)."
        )
    X = _read_idx(files["train-images"]).reshape(-1, 784).astype(np.float64) / 255.0
    y = _read_idx(files["train-labels"]).astype(np.int64)
    Xt = _read_idx(files["t10k-images"]).reshape(-1, 784).astype(np.float64) / 255.0
    yt = _read_idx(files["t10k-labels"]).astype(np.int64)
    source = (
        f"dataset-fashion-mnist=={deb_version('dataset-fashion-mnist')} (Debian), "
        f"{FASHION_MNIST_DIR}; original: H. Xiao, K. Rasul, R. Vollgraf (2017), "
        "Fashion-MNIST: a novel image dataset for benchmarking machine learning "
        "algorithms, arXiv:1708.07747"
    )
    return Raw(X, y, FASHION_MNIST_CLASSES, source, "MIT", X_test=Xt, y_test=yt)
