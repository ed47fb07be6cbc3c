"""How a task is built: split, train the MLP, read its embeddings and head."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .sources import Raw
from .task import CACHE_VERSION, SEED, RealTask
from .text import WORDNET_PER_CLASS, encode_texts


@dataclass(frozen=True)
class Spec:
    """How one task is built (all of it is part of the cache key)."""

    name: str
    domain: str
    loader: Callable[[], Raw]
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


def _split(raw: Raw, spec: Spec):
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


def _train_mlp(X, y, n_classes, spec: Spec, verbose: bool):
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


def _network_outputs(parts, n_classes, spec: Spec, verbose: bool):
    """Train on ``parts["train"]`` (one torch thread), then read the network.

    Returns the standardised training inputs, the last hidden layer's
    activations (``out``) and the network's own logits (``direct``) of the
    calibration and test parts, and the head's ``coef`` and ``intercept``.
    """
    import torch
    from sklearn.preprocessing import StandardScaler

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
    return X_train, out, direct, coef, intercept


def _head_logits(name, out, direct, coef, intercept):
    """``embeddings @ coef.T + intercept`` in float64, checked against the network."""
    logits = {
        part: out[part].astype(np.float64) @ coef.T.astype(np.float64)
        + intercept.astype(np.float64)
        for part in out
    }
    for part in logits:  # the head reproduces the network's own float32 logits
        scale = max(1.0, float(np.abs(direct[part]).max()))
        if not np.allclose(logits[part], direct[part], rtol=0, atol=1e-4 * scale):
            raise AssertionError(f"{name}: embeddings @ coef.T + b != logits")
    return logits


def build(spec: Spec, cache_dir: Path, verbose: bool) -> RealTask:
    import torch

    start = time.perf_counter()
    raw = spec.loader()
    if spec.domain == "text":
        raw.X = encode_texts(spec.name, raw.X, cache_dir, verbose).astype(np.float64)
    n_classes = len(raw.class_names)
    parts = _split(raw, spec)
    X_train, out, direct, coef, intercept = _network_outputs(
        parts, n_classes, spec, verbose
    )
    logits = _head_logits(spec.name, out, direct, coef, intercept)
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
