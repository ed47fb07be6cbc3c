"""Smoke test of an installed skcal wheel (run by .ci/run).

Run it with the python of a fresh venv where the wheel (not an editable
install) and the CPU torch are installed, from a directory outside the
source tree::

    cd "$(mktemp -d)" && /path/to/venv/bin/python /path/to/skcal/.ci/smoke.py \
        --dist /path/to/dist

It checks that the installed package is the wheel (not the source tree),
that its metadata carries the version and the licence, imports every public
name, fits and predicts one calibrator of each family, computes a metric and
runs the console script (``skcal --version``, ``skcal demo``). With
``--dist`` it also checks that the wheel and the sdist built there ship the
LICENSE. Any failure raises: the exit code is non-zero.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata
import json
import pathlib
import pkgutil
import subprocess
import sys
import tarfile
import time
import zipfile

import numpy as np

SOURCE_TREE = pathlib.Path(__file__).resolve().parents[1]


def check(condition, message):
    if not condition:
        raise AssertionError(message)


def check_installed_wheel():
    """skcal comes from site-packages, installed from a wheel, not editable."""
    import skcal

    location = pathlib.Path(skcal.__file__).resolve()
    check(
        SOURCE_TREE not in location.parents,
        f"skcal is imported from the source tree ({location}): run the smoke "
        "test from outside it, with the python of the venv of the wheel",
    )
    dist = importlib.metadata.distribution("skcal")
    direct_url = dist.read_text("direct_url.json")
    if direct_url:
        editable = json.loads(direct_url).get("dir_info", {}).get("editable")
        check(not editable, "skcal is an editable install, not the wheel")
    check(
        dist.version == skcal.__version__,
        f"metadata version {dist.version} != skcal.__version__ {skcal.__version__}",
    )
    check(
        dist.metadata["License-Expression"] == "BSD-3-Clause",
        f"License-Expression is {dist.metadata['License-Expression']!r}",
    )
    licences = [f for f in dist.files or [] if f.name == "LICENSE"]
    check(licences, "the installed wheel has no LICENSE file")
    text = licences[0].locate().read_text(encoding="utf-8")
    check("BSD 3-Clause License" in text, "LICENSE is not the BSD-3-Clause text")
    print(f"installed: skcal {dist.version} at {location.parent}")
    return skcal


def check_public_names(skcal):
    """Every name of ``skcal.__all__`` and of each public module's."""
    count = 0
    for name in skcal.__all__:
        check(getattr(skcal, name) is not None, f"skcal.{name} is None")
        count += 1
    modules = ["skcal"]
    for info in pkgutil.walk_packages(skcal.__path__, "skcal."):
        if not any(part.startswith("_") for part in info.name.split(".")):
            modules.append(info.name)
    for module_name in modules[1:]:
        module = importlib.import_module(module_name)
        for name in getattr(module, "__all__", ()):
            check(
                getattr(module, name, None) is not None,
                f"{module_name}.{name} is missing",
            )
            count += 1
    print(f"imported {count} public names of {len(modules)} modules")


def make_scores(n=600, n_classes=4, seed=0):
    """Over-confident logits (three times the true ones) and their labels."""
    rng = np.random.default_rng(seed)
    true = rng.normal(size=(n, n_classes)) * 1.5
    proba = np.exp(true - true.max(axis=1, keepdims=True))
    proba /= proba.sum(axis=1, keepdims=True)
    y = np.array([rng.choice(n_classes, p=row) for row in proba])
    return 3 * true, y


def make_embeddings(n=600, n_features=8, n_classes=3, seed=0):
    """Embeddings, a linear head and labels drawn from a softer head."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, n_features))
    coef = rng.normal(size=(n_classes, n_features))
    intercept = np.zeros(n_classes)
    logits = 0.5 * (X @ coef.T)
    proba = np.exp(logits - logits.max(axis=1, keepdims=True))
    proba /= proba.sum(axis=1, keepdims=True)
    y = np.array([rng.choice(n_classes, p=row) for row in proba])
    return X, y, coef, intercept


def check_proba(name, estimator, X, n_classes):
    proba = estimator.predict_proba(X)
    check(proba.shape == (len(X), n_classes), f"{name}: shape {proba.shape}")
    check(np.isfinite(proba).all(), f"{name}: non-finite probabilities")
    check(np.allclose(proba.sum(axis=1), 1.0), f"{name}: rows do not sum to 1")
    check(
        set(np.unique(estimator.predict(X))) <= set(estimator.classes_),
        f"{name}: predict returns unknown classes",
    )
    return proba


def check_calibrators(skcal):
    """One calibrator of each family, fitted and applied on the CPU."""
    z, y = make_scores()
    z_cal, y_cal, z_test, y_test = z[:400], y[:400], z[400:], y[400:]
    global_calibrators = [
        skcal.TemperatureScaling(device="cpu"),  # scaling
        skcal.VectorScaling(device="cpu"),
        skcal.DirichletCalibrator(device="cpu"),  # matrix
        skcal.IsotonicCalibrator(),  # one-vs-rest, non-parametric
        skcal.SplineCalibrator(),  # top-label
    ]
    for estimator in global_calibrators:
        name = type(estimator).__name__
        start = time.perf_counter()
        estimator.fit(z_cal, y_cal)
        proba = check_proba(name, estimator, z_test, 4)
        print(f"  {name:<22} {time.perf_counter() - start:6.2f} s")
    from skcal.metrics import expected_calibration_error

    ece = expected_calibration_error(y_test, proba)
    check(0.0 <= ece <= 1.0, f"ECE {ece} outside [0, 1]")
    print(f"  expected_calibration_error = {ece:.4f}")

    X, y, coef, intercept = make_embeddings()
    local_calibrators = [
        skcal.KCalCalibrator(max_iter=5, random_state=0, device="cpu"),
        skcal.VQLocalCalibrator(
            n_slots=4,
            n_codewords=8,
            coef=coef,
            intercept=intercept,
            max_iter=5,
            random_state=0,
            device="cpu",
        ),
    ]
    for estimator in local_calibrators:
        name = type(estimator).__name__
        start = time.perf_counter()
        estimator.fit(X[:400], y[:400])
        check_proba(name, estimator, X[400:], 3)
        print(f"  {name:<22} {time.perf_counter() - start:6.2f} s")


def check_console_script(version):
    """``skcal --version`` and ``skcal demo`` as a user runs them."""
    script = pathlib.Path(sys.executable).parent / "skcal"
    check(script.exists(), f"no console script at {script}")
    out = subprocess.run(
        [str(script), "--version"], capture_output=True, text=True, check=True
    ).stdout
    check(out.strip() == f"skcal {version}", f"skcal --version printed {out!r}")
    print(f"  {out.strip()}")
    start = time.perf_counter()
    demo = subprocess.run(
        [str(script), "demo", "--device", "cpu", "--seed", "0"],
        capture_output=True,
        text=True,
    )
    check(demo.returncode == 0, f"skcal demo failed:\n{demo.stdout}\n{demo.stderr}")
    rows = [line.split()[0] for line in demo.stdout.splitlines() if line.strip()]
    for name in ("uncalibrated", "TemperatureScaling", "VQLocalCalibrator"):
        check(name in rows, f"skcal demo printed no {name} row:\n{demo.stdout}")
    print(f"  skcal demo: {time.perf_counter() - start:.1f} s")


def check_archives(dist_dir):
    """The wheel and the sdist of ``dist_dir`` both ship the LICENSE."""
    (wheel,) = dist_dir.glob("skcal-*.whl")
    (sdist,) = dist_dir.glob("skcal-*.tar.gz")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
    check(
        any(n.endswith(".dist-info/licenses/LICENSE") for n in names),
        f"{wheel.name} has no LICENSE",
    )
    check(
        not any(n.startswith(("tests/", "benchmarks/", "doc/")) for n in names),
        f"{wheel.name} ships more than the package",
    )
    with tarfile.open(sdist) as archive:
        members = archive.getnames()
    root = sdist.name.removesuffix(".tar.gz")
    check(f"{root}/LICENSE" in members, f"{sdist.name} has no LICENSE")
    print(
        f"  {wheel.name}: {wheel.stat().st_size / 1024:.0f} KiB, {len(names)} "
        f"files; {sdist.name}: {sdist.stat().st_size / 1024:.0f} KiB, "
        f"{len(members)} entries; LICENSE in both"
    )


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--dist", type=pathlib.Path, help="folder of the built wheel and sdist"
    )
    args = parser.parse_args(argv)
    start = time.perf_counter()
    skcal = check_installed_wheel()
    if args.dist is not None:
        check_archives(args.dist)
    check_public_names(skcal)
    print("calibrators:")
    check_calibrators(skcal)
    print("console script:")
    check_console_script(skcal.__version__)
    print(f"smoke test passed in {time.perf_counter() - start:.1f} s")


if __name__ == "__main__":
    main()
