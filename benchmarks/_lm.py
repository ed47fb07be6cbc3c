"""The language-model data of ``make_lm_data.py``: loaders for benchmark scripts.

``python benchmarks/make_lm_data.py`` trains a small next-token model on the King
James Bible and writes its held-out outputs to a cache folder (default
``benchmarks/.cache/lm/``; the environment variable ``SKCAL_LM_DIR`` or the
``path`` argument of every function here points elsewhere). See the section
"A small language model" of ``benchmarks/DATASETS.md``.

In a script under ``benchmarks/`` (only numpy is needed to load)::

    from _lm import DEFAULT_LETTER_BIAS, inject_letter_bias
    from _lm import jsonl_paths, load_cloze, load_logits

    lm = load_logits()            # full-vocabulary log-probabilities, memory-mapped
    lm.logits[:100], lm.targets[:100]
    cloze = load_cloze()          # 4-option cloze task, one group per Bible book
    z = inject_letter_bias(cloze.option_logprobs, DEFAULT_LETTER_BIAS)
    jsonl_paths()["next_token"]   # OpenAI-shaped records, one JSON object a line

Every array is in the cache's row order, a seeded random order of the held-out
positions, so that any prefix is a random sample.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

DEFAULT_DIR = Path(__file__).resolve().parent / ".cache" / "lm"
LETTERS = ("A", "B", "C", "D")
# OpenAI's value for a listed alternative whose probability underflows
PAD_LOGPROB = -9999.0
# entries below log(2**-24) (float16's smallest subnormal) are written PAD_LOGPROB
PAD_BELOW = float(np.log(2.0**-24))
# the prompt bias of cloze_biased.jsonl, added to the option logits of A..D
DEFAULT_LETTER_BIAS = (2.0, 1.0, 0.0, -1.0)

FILES = {
    "model": "model.pt",
    "vocab": "vocab.json",
    "summary": "summary.json",
    "logits": "heldout_logits.npy",
    "heldout": "heldout.npz",
    "cloze": "cloze.npz",
}
JSONL = {
    "next_token": "next_token.jsonl",
    "next_token_legacy": "next_token_legacy.jsonl",
    "cloze": "cloze.jsonl",
    "cloze_biased": "cloze_biased.jsonl",
    "cloze_legacy": "cloze_legacy.jsonl",
}


def lm_dir(path=None) -> Path:
    """The cache folder: ``path``, else ``$SKCAL_LM_DIR``, else the default."""
    if path is not None:
        return Path(path)
    return Path(os.environ.get("SKCAL_LM_DIR", DEFAULT_DIR))


def _require(path: Path) -> Path:
    if not path.exists():
        raise FileNotFoundError(
            f"{path} does not exist: the language-model data are not built in "
            f"{path.parent}. Build them with: python benchmarks/make_lm_data.py "
            f"--out {path.parent}"
        )
    return path


def jsonl_paths(path=None) -> dict:
    """Paths of the OpenAI-shaped JSONL files, by name (see ``JSONL``)."""
    root = lm_dir(path)
    return {name: root / fname for name, fname in JSONL.items()}


def load_summary(path=None) -> dict:
    """The settings and figures of the build (``summary.json``)."""
    with open(_require(lm_dir(path) / FILES["summary"]), encoding="utf-8") as f:
        return json.load(f)


def load_vocab(path=None) -> list:
    """The model's tokens, by id (words lowercased; ``<s>``, ``<unk>`` first)."""
    with open(_require(lm_dir(path) / FILES["vocab"]), encoding="utf-8") as f:
        return json.load(f)["tokens"]


@dataclass
class LMLogits:
    """Full-vocabulary outputs of the model on held-out positions.

    ``logits[i]`` is the model's log-softmax output (normalised logits) for
    row ``i``; ``targets[i]`` the id of the true next token; ``groups[i]`` its
    book (0-65, names in ``group_names``); ``context[i]`` the verse up to the
    position.
    """

    logits: np.ndarray  # (n, n_vocab) float32, memory-mapped
    targets: np.ndarray  # (n,) int64
    groups: np.ndarray  # (n,) int64
    group_names: tuple
    context: np.ndarray  # (n,) str
    vocab: list

    @property
    def n_vocab(self) -> int:
        return self.logits.shape[1]


def load_logits(path=None, *, mmap: bool = True) -> LMLogits:
    """The held-out full logits (``heldout_logits.npy``) and their labels."""
    root = lm_dir(path)
    logits = np.load(_require(root / FILES["logits"]), mmap_mode="r" if mmap else None)
    n = logits.shape[0]
    with np.load(_require(root / FILES["heldout"]), allow_pickle=False) as z:
        targets = z["targets"][:n].astype(np.int64)
        groups = z["groups"][:n].astype(np.int64)
        names = tuple(str(s) for s in z["group_names"])
        context = z["context"][:n]
    return LMLogits(logits, targets, groups, names, context, load_vocab(root))


@dataclass
class ClozeTask:
    """The 4-option cloze task: which word comes next, A, B, C or D?

    ``option_logprobs[i, j]`` is the model's log-probability of option word
    ``j`` as the next token (from the full logits); the uncalibrated answer
    probabilities are their softmax. ``cf_option_logprobs`` are the same
    words' log-probabilities after a content-free context (every context token
    ``<unk>``), for contextual calibration. ``answer[i]`` is the index (0-3)
    of the true word, ``groups[i]`` its book.
    """

    option_logprobs: np.ndarray  # (n, 4) float64
    cf_option_logprobs: np.ndarray  # (n, 4) float64
    option_ids: np.ndarray  # (n, 4) int64
    option_words: np.ndarray  # (n, 4) str
    answer: np.ndarray  # (n,) int64, 0..3
    groups: np.ndarray  # (n,) int64, 0..65
    group_names: tuple
    context: np.ndarray  # (n,) str
    remainder: np.ndarray  # (n,) mass on non-letter tokens in the JSONL records

    @property
    def answer_letter(self) -> np.ndarray:
        return np.asarray(LETTERS)[self.answer]

    def option_proba(self, bias=None) -> np.ndarray:
        """Softmax over the 4 options, after an optional per-letter bias."""
        z = (
            self.option_logprobs
            if bias is None
            else inject_letter_bias(self.option_logprobs, bias)
        )
        z = z - z.max(axis=1, keepdims=True)
        p = np.exp(z)
        return p / p.sum(axis=1, keepdims=True)


def load_cloze(path=None) -> ClozeTask:
    """The cloze multiple-choice task (``cloze.npz``)."""
    with np.load(_require(lm_dir(path) / FILES["cloze"]), allow_pickle=False) as z:
        return ClozeTask(
            option_logprobs=z["option_logprobs"].astype(np.float64),
            cf_option_logprobs=z["cf_option_logprobs"].astype(np.float64),
            option_ids=z["option_ids"].astype(np.int64),
            option_words=z["option_words"],
            answer=z["answer"].astype(np.int64),
            groups=z["groups"].astype(np.int64),
            group_names=tuple(str(s) for s in z["group_names"]),
            context=z["context"],
            remainder=z["remainder"].astype(np.float64),
        )


def inject_letter_bias(option_logits, bias=DEFAULT_LETTER_BIAS) -> np.ndarray:
    """A prompt bias: ``bias[j]`` added to the logit of letter ``j`` in every row.

    Models the prior a prompt format puts on answer letters (Zhao et al. 2021):
    the same shift for every question, whatever its content. Returns a new
    array; the input is not modified.
    """
    z = np.asarray(option_logits, dtype=np.float64)
    b = np.asarray(bias, dtype=np.float64)
    if b.shape != (z.shape[-1],):
        raise ValueError(
            f"bias must hold one value per option ({z.shape[-1]}); got shape "
            f"{b.shape}. Pass e.g. DEFAULT_LETTER_BIAS = {DEFAULT_LETTER_BIAS}."
        )
    return z + b


def letter_logprobs(option_logits, remainder) -> np.ndarray:
    """Log-probabilities of the answer letters in the JSONL records.

    ``log((1 - r) * softmax(option_logits))``: the letters share ``1 - r`` in
    proportion to the softmax of the option logits, and the remainder ``r`` of
    the mass goes to other tokens. A softmax over the 4 letter log-probabilities
    therefore gives back ``softmax(option_logits)`` exactly.
    """
    z = np.asarray(option_logits, dtype=np.float64)
    z = z - z.max(axis=1, keepdims=True)
    log_soft = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
    return log_soft + np.log1p(-np.asarray(remainder, dtype=np.float64))[:, None]


def main(argv=None) -> int:
    """Print what the cache holds: its folder, files and summary figures."""
    import argparse

    parser = argparse.ArgumentParser(
        description="The language-model cache written by make_lm_data.py: its "
        "folder, files and summary (vocabulary, sizes, the model's figures)."
    )
    parser.add_argument("--dir", default=None, help="cache folder (SKCAL_LM_DIR)")
    args = parser.parse_args(argv)
    folder = lm_dir(args.dir)
    print(f"cache: {folder}")
    if not folder.exists():
        print("not built: run python benchmarks/make_lm_data.py")
        return 1
    for path in sorted(folder.iterdir()):
        print(f"  {path.name:<28} {path.stat().st_size / 2**20:10.1f} MiB")
    print(json.dumps(load_summary(args.dir), indent=2)[:4000])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
