"""Public results of two trees compared: every calibrator of the property suite.

Each case of ``tests/test_properties.py`` (every public estimator and its
variants) is fitted on fixed problems of the kinds the suite draws (2 to 5
classes, 24 to 40 rows, signal from none to strong, with and without
weights; logits, their probabilities with ``input="proba"``, float32
logits; embeddings with a head for the local calibrators), on one torch
thread; its fitted attributes (every public attribute ending in ``_``,
nested estimators and dataclasses included) and its ``predict_proba``,
``predict_log_proba``, ``decision_function``, ``predict`` and ``score`` on
50 test rows are stored. A refactoring that promises unchanged results runs
this on the tree before and after and compares::

    PYTHONPATH=OLD python benchmarks/compare_trees.py dump OLD old.pkl
    PYTHONPATH=NEW python benchmarks/compare_trees.py dump NEW new.pkl
    python benchmarks/compare_trees.py compare old.pkl new.pkl

``compare`` prints the largest absolute difference and every value that
differs by more than ``--atol`` (default 1e-12), and exits with 1 if any
does.
"""

import argparse
import importlib.util
import os
import pickle
import sys
import warnings

import numpy as np


def problems(local):
    """The fixed problems: ``(kind, seed, X, y, w, X_test, head)`` tuples."""
    out = []
    for seed in range(6):
        rng = np.random.default_rng(seed)
        n_classes = [2, 3, 5, 4, 3, 5][seed]
        n = int(rng.integers(24, 41))
        y = np.concatenate(
            [
                np.repeat(np.arange(n_classes), 2),
                rng.integers(0, n_classes, n - 2 * n_classes),
            ]
        )
        signal = [0.0, 1.0, 3.0, 6.0, 2.0, 0.5][seed]
        w = rng.uniform(0.2, 3.0, n) if seed % 2 else None
        if not local:
            scale = [0.1, 1.0, 10.0, 3.0, 1.0, 0.5][seed]
            X = scale * (
                rng.uniform(-4, 4, (n, n_classes)) + signal * np.eye(n_classes)[y]
            )
            Xt = scale * (rng.uniform(-4, 4, (50, n_classes)) * 1.5)
            out.append(("logits", seed, X, y, w, Xt, None))
            e = np.exp(X - X.max(1, keepdims=True))
            P = e / e.sum(1, keepdims=True)
            e = np.exp(Xt - Xt.max(1, keepdims=True))
            Pt = e / e.sum(1, keepdims=True)
            out.append(("proba", seed, P, y, w, Pt, None))
            if seed == 2:
                out.append(
                    (
                        "logits32",
                        seed,
                        X.astype(np.float32),
                        y,
                        w,
                        Xt.astype(np.float32),
                        None,
                    )
                )
        else:
            f = int(rng.integers(2, 7))
            coef = rng.uniform(-2, 2, (n_classes, f))
            b = rng.uniform(-1, 1, n_classes)
            E = rng.uniform(-3, 3, (n, f)) + signal * coef[y] / 4 + np.eye(n, f)
            head = np.argmax(E @ coef.T + b, axis=1)
            y = y.copy()
            y[-4:-2] = head[-4:-2]
            for i in (n - 2, n - 1):
                y[i] = (head[i] + 1) % n_classes
            Et = rng.uniform(-3, 3, (50, f))
            out.append(("emb", seed, E, y, w, Et, (coef, b)))
    return out


def attrs(est):
    """The fitted attributes of ``est``: public names ending in ``_``."""
    d = {}
    for k, v in vars(est).items():
        if k.endswith("_") and not k.startswith("_"):
            d[k] = v
    return d


def flatten(obj, prefix=""):
    """Numbers and arrays inside obj, by path."""
    out = {}
    if isinstance(obj, (np.ndarray, np.generic, float, int, bool)) and not isinstance(
        obj, str
    ):
        arr = np.asarray(obj)
        if arr.dtype.kind in "fiub":
            out[prefix] = arr.astype(np.float64) if arr.dtype.kind != "b" else arr
        else:
            out[prefix] = repr(arr.tolist())
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            out.update(flatten(v, f"{prefix}[{i}]"))
    elif isinstance(obj, dict):
        for k, v in obj.items():
            out.update(flatten(v, f"{prefix}[{k!r}]"))
    elif hasattr(obj, "get_params") and hasattr(obj, "__dict__"):
        for k, v in attrs(obj).items():
            out.update(flatten(v, f"{prefix}.{k}"))
    elif hasattr(obj, "__dataclass_fields__"):
        for k in obj.__dataclass_fields__:
            out.update(flatten(getattr(obj, k), f"{prefix}.{k}"))
    elif obj is None or isinstance(obj, str):
        out[prefix] = repr(obj)
    else:
        out[prefix] = f"<{type(obj).__name__}>"
    return out


def dump(tree, path):
    """Fit every case of ``tree``'s property suite; pickle the results."""
    spec = importlib.util.spec_from_file_location(
        "tp", os.path.join(tree, "tests/test_properties.py")
    )
    tp = importlib.util.module_from_spec(spec)
    sys.modules["tp"] = tp
    sys.path.insert(0, os.path.join(tree, "tests"))
    spec.loader.exec_module(tp)
    import torch

    torch.set_num_threads(1)
    results = {}
    for case in tp.CASES:
        for kind, seed, X, y, w, Xt, head in problems(case.local):
            if case.local != (kind == "emb"):
                continue
            key = (case.name, kind, seed)
            params = {"random_state": 0} if case.stochastic else {}
            if kind == "proba":
                params["input"] = "proba"
            try:
                est = case.make(**params)
                if head is not None and case.uses_head:
                    est.set_params(coef=head[0], intercept=head[1])
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    est.fit(X, y, sample_weight=w)
                    r = {"attrs": flatten(attrs(est))}
                    r["proba"] = est.predict_proba(Xt)
                    r["predict"] = repr(est.predict(Xt).tolist())
                    r["log_proba"] = est.predict_log_proba(Xt)
                    if hasattr(est, "decision_function"):
                        r["decision"] = est.decision_function(Xt)
                    r["score"] = est.score(
                        Xt,
                        np.arange(len(Xt)) % X.shape[1]
                        if kind != "emb"
                        else np.arange(len(Xt)) % len(est.classes_),
                    )
            except Exception as exc:  # noqa: BLE001
                r = {"error": f"{type(exc).__name__}: {exc}"}
            results[key] = r
    with open(path, "wb") as f:
        pickle.dump(results, f)
    print(len(results), "cases dumped")


def compare(a, b, atol=1e-12):
    """Print the differences of two dumps; 1 if any exceeds ``atol``."""
    A = pickle.load(open(a, "rb"))
    B = pickle.load(open(b, "rb"))
    assert A.keys() == B.keys(), set(A) ^ set(B)
    worst, bad = 0.0, []
    for key in A:
        ra, rb = A[key], B[key]
        if ra.keys() != rb.keys():
            bad.append((key, "keys", ra.get("error"), rb.get("error")))
            continue
        for part in ra:
            va, vb = ra[part], rb[part]
            if part == "attrs":
                if va.keys() != vb.keys():
                    bad.append((key, "attr names", set(va) ^ set(vb)))
                    continue
                pairs = [(f"attrs{k}", va[k], vb[k]) for k in va]
            else:
                pairs = [(part, va, vb)]
            for name, x, z in pairs:
                if isinstance(x, str) or isinstance(z, str):
                    if x != z:
                        bad.append((key, name, str(x)[:80], str(z)[:80]))
                    continue
                x, z = np.asarray(x, float), np.asarray(z, float)
                if x.shape != z.shape:
                    bad.append((key, name, "shape", x.shape, z.shape))
                    continue
                same_inf = x == z
                d = np.where(same_inf, 0.0, np.abs(x - z))
                m = float(np.nanmax(d)) if d.size else 0.0
                if np.isnan(x).any() or np.isnan(z).any():
                    if not np.array_equal(np.isnan(x), np.isnan(z)):
                        m = np.inf
                worst = max(worst, m)
                if m > atol:
                    bad.append((key, name, m))
    print(f"{len(A)} cases, worst abs difference {worst:.3g}, {len(bad)} above {atol}")
    for item in bad[:40]:
        print("  ", item)
    return 1 if bad else 0


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    d = sub.add_parser("dump", help="fit every case with the skcal on PYTHONPATH")
    d.add_argument("tree", help="the repository whose tests/test_properties.py to read")
    d.add_argument("out", help="the pickle to write")
    c = sub.add_parser("compare", help="compare two dumps")
    c.add_argument("a")
    c.add_argument("b")
    c.add_argument("--atol", type=float, default=1e-12)
    args = parser.parse_args(argv)
    if args.command == "dump":
        dump(args.tree, args.out)
        return 0
    return compare(args.a, args.b, args.atol)


if __name__ == "__main__":
    sys.exit(main())
