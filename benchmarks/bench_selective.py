"""Selective-prediction metrics of skcal against torch-uncertainty 0.13.

For each real task (a network's test probabilities, ``benchmarks/.cache``;
plus held-out probabilities of scikit-learn models on scikit-learn's own
data sets), prints skcal's AURC, E-AURC, AUGRC, risk at 80% coverage and
coverage at 5% risk, and their absolute differences from
``torch_uncertainty.metrics.classification`` (AURC, AUGRC, RiskAtxCov,
CovAtxRisk; E-AURC as its AURC minus its AURC of the oracle scores
``1 - loss``), computed in float64 (torch's default dtype set to
float64: torch-uncertainty's coverage grid takes it, and float32 gives
differences of ~1e-8).

torch-uncertainty's package ``__init__`` imports ``lightning``; its metric
module is loaded here by file path. Its tied confidences are ordered as
``torch.argsort`` happens to: on the models with ties (the tree ensembles)
the table also gives the spread of its AURC over 20 shuffles of the rows,
and skcal's value (the mean over the orders of tied rows) lies within it.

    python benchmarks/bench_selective.py [--cache-dir DIR]
"""

import argparse
import importlib.util
import sys
import warnings
from pathlib import Path

import numpy as np
from scipy.special import softmax

sys.path.insert(0, str(Path(__file__).resolve().parent))


def load_tu():
    """torch-uncertainty's risk_coverage module, without its package."""
    spec = importlib.util.find_spec("torch_uncertainty")
    path = Path(spec.submodule_search_locations[0])
    path = path / "metrics" / "classification" / "risk_coverage.py"
    module_spec = importlib.util.spec_from_file_location("tu_risk_coverage", path)
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    return module


def tu_values(tu, y, proba, order=None):
    import torch

    if order is not None:
        y, proba = y[order], proba[order]
    p, t = torch.from_numpy(proba), torch.from_numpy(y)
    out = {}
    for key, metric in [
        ("AURC", tu.AURC()),
        ("AUGRC", tu.AUGRC()),
        ("risk@80", tu.RiskAtxCov(cov_threshold=0.8)),
        ("cov@5", tu.CovAtxRisk(risk_threshold=0.05)),
    ]:
        metric.update(p, t)
        out[key] = float(metric.compute())
    loss = (proba.argmax(1) != y).astype(np.float64)
    oracle = tu.AURC()
    oracle.scores.append(torch.from_numpy(1.0 - loss))
    oracle.errors.append(torch.from_numpy(loss))
    out["E-AURC"] = out["AURC"] - float(oracle.compute())
    if np.isnan(out["cov@5"]):
        out["cov@5"] = 0.0  # skcal's convention: no coverage reaches the risk
    return out


def skcal_values(y, proba):
    from skcal.metrics import augrc, aurc, coverage_at_risk, eaurc, selective_risk

    return {
        "AURC": aurc(y, proba),
        "E-AURC": eaurc(y, proba),
        "AUGRC": augrc(y, proba),
        "risk@80": selective_risk(y, proba, coverage=0.8),
        "cov@5": coverage_at_risk(y, proba, risk=0.05),
    }


def sklearn_tasks():
    from sklearn.datasets import load_breast_cancer, load_digits, load_wine
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import train_test_split

    for name, loader in [
        ("digits", load_digits),
        ("wine", load_wine),
        ("breast_cancer", load_breast_cancer),
    ]:
        X, y = loader(return_X_y=True)
        X = (X - X.mean(0)) / (X.std(0) + 1e-12)
        Xa, Xb, ya, yb = train_test_split(
            X, y, test_size=0.5, random_state=0, stratify=y
        )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            lr = LogisticRegression(C=0.05, max_iter=300).fit(Xa, ya)
        yield f"{name} / logistic", yb, lr.predict_proba(Xb)
        rf = RandomForestClassifier(n_estimators=25, random_state=0).fit(Xa, ya)
        yield f"{name} / forest (ties)", yb, rf.predict_proba(Xb)


def real_tasks(cache_dir):
    from _lib.datasets import available_tasks, load_task

    for name in available_tasks(cache_dir):
        task = load_task(name, cache_dir=cache_dir)
        yield f"{name} / network", task.test_labels, softmax(task.test_logits, axis=1)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache-dir", default=None)
    args = parser.parse_args()
    import torch

    # torch-uncertainty's coverage grid torch.arange(1, n + 1) / n takes the
    # default dtype: float32 would differ from float64 by ~1e-8
    torch.set_default_dtype(torch.float64)
    warnings.filterwarnings("ignore", message=".*before the ``update`` method")
    tu = load_tu()
    keys = ["AURC", "E-AURC", "AUGRC", "risk@80", "cov@5"]
    print(
        f"{'task':32s} {'n':>6s} ties " + " ".join(f"{k:>9s} |diff|   " for k in keys)
    )
    rng = np.random.default_rng(0)
    for label, y, proba in [*real_tasks(args.cache_dir), *sklearn_tasks()]:
        y, proba = np.asarray(y, np.int64), np.asarray(proba, np.float64)
        conf = proba.max(1)
        ties = len(conf) - len(np.unique(conf))
        ours, ref = skcal_values(y, proba), tu_values(tu, y, proba)
        cells = " ".join(f"{ours[k]:9.6f} {abs(ours[k] - ref[k]):8.1e}" for k in keys)
        print(f"{label:32s} {len(y):6d} {ties:4d} {cells}")
        if ties:
            shuffled = [
                tu_values(tu, y, proba, rng.permutation(len(y)))["AURC"]
                for _ in range(20)
            ]
            print(
                f"{'':32s} torch-uncertainty AURC over 20 row orders: "
                f"{min(shuffled):.10f} .. {max(shuffled):.10f} "
                f"(skcal {ours['AURC']:.10f})"
            )


if __name__ == "__main__":
    main()
