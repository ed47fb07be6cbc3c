"""VQLocalCalibrator: speed at scale, and local calibration against the baselines.

Speed: full fit (both stages) on 20,000 x 512 generated embeddings with 10
and with 100 classes, each in a fresh subprocess; wall time and peak memory
(resident set above the process's size before the fit).

Evidence: over several seeds, a table like Table 6 of the VQ paper (LCE,
MLCE, ECCE, classwise ECE, accuracy, NLL; mean +- std) for no calibration,
temperature scaling, Dirichlet calibration (ODIR, cross-validated), KCal,
Local Nets, ProCal and VQ, on

* ``region``: generated embeddings whose linear head is over-confident in
  some regions and under-confident in others (64 features, 10 classes);
* ``digits``: scikit-learn's bundled digits, with a small torch MLP as the
  backbone (its 64-unit last hidden layer is the embedding, its output layer
  the head).

LCE and MLCE of every method are computed in one LocalSpace (standardise +
PCA-50) fitted on the calibration embeddings.

Run:  python benchmarks/bench_vq.py [--seeds 5] [--skip-speed] [--skip-evidence]
"""

import argparse
import json
import resource
import subprocess
import sys
import time
import warnings

import numpy as np
from _lib.common import current_rss_mb

SPEED_CASES = [(20_000, 10, 512), (20_000, 100, 512)]


def speed_case(index: int, device: str) -> dict:
    import torch

    from skcal import VQLocalCalibrator
    from skcal.utils._testing import make_region_miscalibrated_embeddings

    n, n_classes, dim = SPEED_CASES[index]
    X, y, _, _, _ = make_region_miscalibrated_embeddings(
        n, n_classes, n_features=dim, n_regions=8, random_state=0
    )
    before = current_rss_mb()
    start = time.perf_counter()
    vq = VQLocalCalibrator(random_state=0, device=device).fit(X, y)
    elapsed = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {
        "n": n,
        "classes": n_classes,
        "dim": dim,
        "device": device,
        "threads": torch.get_num_threads(),
        "fit_s": elapsed,
        "epochs": vq.n_iter_,
        "peak_extra_mb": peak - before,
    }


def speed(device: str) -> None:
    print("\nVQLocalCalibrator full fit (defaults: 64 slots, 64 codewords)")
    for index in range(len(SPEED_CASES)):
        out = subprocess.run(
            [sys.executable, __file__, "--speed-case", str(index), "--device", device],
            capture_output=True,
            text=True,
            check=True,
        )
        r = json.loads(out.stdout.strip().splitlines()[-1])
        print(
            f"{r['n']} x {r['dim']}, {r['classes']} classes, {r['device']}, "
            f"{r['threads']} threads: fit {r['fit_s']:.1f} s (epochs "
            f"{r['epochs'][0]} + {r['epochs'][1]}), peak memory "
            f"+{r['peak_extra_mb']:.0f} MB"
        )


# --------------------------------------------------------------- evidence
def region_data(seed):
    from skcal.utils._testing import make_region_miscalibrated_embeddings

    X, y, coef, intercept, _ = make_region_miscalibrated_embeddings(
        10_000, 10, n_features=64, n_regions=8, random_state=seed
    )
    return X[:5000], y[:5000], X[5000:], y[5000:], coef, intercept


def digits_data(seed, device):
    """A torch MLP trained on half of digits; embeddings of the other half."""
    import torch
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    X, y = load_digits(return_X_y=True)
    X = X / 16.0
    X_tr, X_rest, y_tr, y_rest = train_test_split(
        X, y, train_size=0.5, stratify=y, random_state=seed
    )
    X_cal, X_te, y_cal, y_te = train_test_split(
        X_rest, y_rest, train_size=0.5, stratify=y_rest, random_state=seed
    )
    gen = torch.Generator().manual_seed(seed)
    body = torch.nn.Sequential(
        torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 64)
    ).double()
    head = torch.nn.Linear(64, 10).double()
    with torch.no_grad():
        for p in [*body.parameters(), *head.parameters()]:
            p.copy_((torch.rand(p.shape, generator=gen, dtype=p.dtype) * 2 - 1) * 0.1)
    opt = torch.optim.Adam([*body.parameters(), *head.parameters()], lr=1e-2)
    xt, yt = torch.as_tensor(X_tr), torch.as_tensor(y_tr)
    for _ in range(300):  # over-trained on purpose: an over-confident backbone
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(head(torch.relu(body(xt))), yt)
        loss.backward()
        opt.step()
    with torch.no_grad():

        def embed(A):
            return torch.relu(body(torch.as_tensor(A))).numpy()

        coef, intercept = head.weight.numpy().copy(), head.bias.numpy().copy()
        return embed(X_cal), y_cal, embed(X_te), y_te, coef, intercept


def methods(dataset, coef, intercept, seed, device, n_features):
    from skcal import (
        DirichletCalibratorCV,
        KCalCalibrator,
        LocalNetCalibrator,
        ProCalCalibrator,
        TemperatureScaling,
        VQLocalCalibrator,
    )

    head = {"coef": coef, "intercept": intercept}
    slots = 64 if n_features % 64 == 0 else 1
    return {
        "TS": ("scores", TemperatureScaling(device=device)),
        "DC": ("scores", DirichletCalibratorCV(random_state=seed, device=device)),
        "KCal": ("local", KCalCalibrator(random_state=seed, device=device)),
        "LN": ("local", LocalNetCalibrator(**head, random_state=seed, device=device)),
        "ProCal": ("local", ProCalCalibrator(**head, device=device)),
        "VQ": (
            "local",
            VQLocalCalibrator(n_slots=slots, random_state=seed, device=device),
        ),
    }


def evaluate(y, proba, features, space, bandwidth):
    from skcal.metrics import (
        classwise_calibration_error,
        ecce_binned_mean,
        local_calibration_errors,
        negative_log_likelihood,
    )

    local = local_calibration_errors(
        y, proba, features, space=space, bandwidth=bandwidth
    )
    return [
        local.lce,
        local.mlce,
        ecce_binned_mean(y, proba),
        classwise_calibration_error(y, proba),
        float(np.mean(proba.argmax(1) == y)),
        negative_log_likelihood(y, proba),
    ]


def evidence(dataset, seeds, device, bandwidth):
    from scipy.special import softmax

    from skcal.metrics import LocalSpace

    names = ["none", "TS", "DC", "KCal", "LN", "ProCal", "VQ"]
    rows = {name: [] for name in names}
    times = {name: [] for name in names}
    for seed in range(seeds):
        if dataset == "region":
            X_cal, y_cal, X_te, y_te, coef, intercept = region_data(seed)
        else:
            X_cal, y_cal, X_te, y_te, coef, intercept = digits_data(seed, device)
        space = LocalSpace().fit(X_cal)
        z_cal, z_te = X_cal @ coef.T + intercept, X_te @ coef.T + intercept
        rows["none"].append(
            evaluate(y_te, softmax(z_te, axis=1), X_te, space, bandwidth)
        )
        for name, (kind, est) in methods(
            dataset, coef, intercept, seed, device, X_cal.shape[1]
        ).items():
            fit_X, te_X = (z_cal, z_te) if kind == "scores" else (X_cal, X_te)
            start = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                est.fit(fit_X, y_cal)
            times[name].append(time.perf_counter() - start)
            rows[name].append(
                evaluate(y_te, est.predict_proba(te_X), X_te, space, bandwidth)
            )
    print(
        f"\n{dataset}: {len(y_cal)} calibration / {len(y_te)} test samples, "
        f"{X_cal.shape[1]}-d embeddings, {seeds} seeds, LCE bandwidth {bandwidth}"
    )
    header = ["LCE", "MLCE", "ECCE", "cwECE", "ACC", "NLL"]
    print(f"{'method':>7} " + " ".join(f"{h:>17}" for h in header) + "   fit s")
    for name in names:
        vals = np.array(rows[name])
        cells = " ".join(
            f"{m:8.4f} +- {s:6.4f}" for m, s in zip(vals.mean(0), vals.std(0))
        )
        fit = np.mean(times[name]) if times[name] else 0.0
        print(f"{name:>7} {cells} {fit:7.1f}")
    best = min(names, key=lambda n: np.mean(np.array(rows[n])[:, 0]))
    wins = sum(
        rows["VQ"][s][0] == min(rows[n][s][0] for n in names) for s in range(seeds)
    )
    print(f"lowest mean LCE: {best}; VQ has the lowest LCE in {wins}/{seeds} seeds")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--bandwidth", type=float, default=10.0)
    parser.add_argument(
        "--dataset", choices=["region", "digits", "both"], default="both"
    )
    parser.add_argument("--skip-speed", action="store_true")
    parser.add_argument("--skip-evidence", action="store_true")
    parser.add_argument("--speed-case", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.speed_case is not None:
        print(json.dumps(speed_case(args.speed_case, args.device)))
        return
    if not args.skip_evidence:
        for dataset in ("region", "digits"):
            if args.dataset in (dataset, "both"):
                evidence(dataset, args.seeds, args.device, args.bandwidth)
    if not args.skip_speed:
        speed(args.device)


if __name__ == "__main__":
    main()
