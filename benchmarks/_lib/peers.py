"""Other libraries' calibrators, for ``compare_peers.py`` and ``bench_predict.py``.

Method factories return ``(fit(P, y) -> model, predict(model, P) -> proba)``
on probabilities ``P`` and raise (ImportError when the peer is not
installed); the peers are imported when a factory is called. dirichletcal
needs Python >= 3.12, so it runs in a subprocess, ``python -m
_lib.peer_dirichletcal`` (or ``_lib.dirichletcal_worker``) from
``benchmarks/`` with the interpreter of an environment that has it.
"""

import importlib
import json
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

#: The folder ``benchmarks/``: the workers run there, so ``_lib`` imports.
BENCHMARKS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def short_error(exc):
    text = f"{type(exc).__name__}: {exc}".replace("\n", " ")
    return text if len(text) <= 110 else text[:107] + "..."


# ----------------------------------------------------------------------------
# scikit-learn's CalibratedClassifierCV on a frozen pass-through classifier


def sklearn_calibrated(method, score):
    from sklearn.calibration import CalibratedClassifierCV
    from sklearn.frozen import FrozenEstimator

    from .passthrough import ScoresOf

    def fit(P, y):
        base = FrozenEstimator(ScoresOf(score).fit(P, y))
        return CalibratedClassifierCV(base, method=method).fit(P, y)

    return fit, lambda m, P: m.predict_proba(P)


# ----------------------------------------------------------------------------
# method factories: each returns (fit(P, y) -> model, predict(model, P) -> proba)
# and raises if the peer is not available


def skcal_method(cls, **params):
    def fit(P, y):
        return cls(input="proba", **params).fit(P, y)

    return fit, lambda m, P: m.predict_proba(P)


def netcal_method(module, name, **params):
    mod = importlib.import_module(f"netcal.{module}")
    cls = getattr(mod, name)

    def fit(P, y):
        model = cls(**params)
        model.fit(P, y)
        return model

    return fit, lambda m, P: np.asarray(m.transform(P), dtype=np.float64)


def probmetrics_method(make):
    def fit(P, y):
        return make().fit(P, y)

    return fit, lambda m, P: np.asarray(m.predict_proba(P), dtype=np.float64)


def probmetrics_ts():
    from probmetrics.calibrators import get_calibrator

    return probmetrics_method(lambda: get_calibrator("temp-scaling"))


def probmetrics_vs():
    from probmetrics.calibrators import VectorScalingCalibrator

    return probmetrics_method(VectorScalingCalibrator)


def probmetrics_ms():
    from probmetrics.calibrators import MatrixScalingCalibrator

    return probmetrics_method(MatrixScalingCalibrator)


def betacal_ovr():
    from betacal import BetaCalibration

    def fit(P, y):
        return [
            BetaCalibration(parameters="abm").fit(P[:, k], (y == k).astype(int))
            for k in range(P.shape[1])
        ]

    def predict(models, P):
        Q = np.column_stack([m.predict(P[:, k]) for k, m in enumerate(models)])
        Q = np.maximum(Q, 1e-12)  # skcal's one-vs-rest floor
        return Q / Q.sum(axis=1, keepdims=True)

    return fit, predict


# ----------------------------------------------------------------------------
# dirichletcal, in a subprocess


def find_dirichletcal_python(explicit):
    """Interpreter whose environment has dirichletcal, and how it was found."""
    env = os.environ.get("SKCAL_DIRICHLETCAL_PYTHON")
    if explicit or env:
        return explicit or env, None
    candidates = [sys.executable] + [
        shutil.which(n) for n in ("python3.13", "python3.12", "python3")
    ]
    probe = (
        "import importlib.util as u, sys; sys.exit(u.find_spec('dirichletcal') is None)"
    )
    seen = set()
    for exe in candidates:
        if not exe or exe in seen:
            continue
        seen.add(exe)
        try:
            ok = subprocess.run([exe, "-c", probe], capture_output=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            continue
        if ok.returncode == 0:
            return exe, None
    return None, (
        "no interpreter with dirichletcal found (it needs Python >= 3.12): pass "
        "--dirichletcal-python or set SKCAL_DIRICHLETCAL_PYTHON"
    )


def _from_benchmarks(python):
    """The interpreter ``python`` as a child started in ``benchmarks/`` finds it.

    A path (relative to the current folder) is made absolute; a bare name is
    looked up on ``PATH`` as before.
    """
    return os.path.abspath(python) if os.sep in python else python


def run_dirichletcal(python, specs, P, y, Pt, repeats, budget, timeout):
    """``{name: {"fit_s", "predict_s", "runs", "proba"} or {"error"}}``."""
    with tempfile.TemporaryDirectory() as tmp:
        data, out = os.path.join(tmp, "data.npz"), os.path.join(tmp, "out.npz")
        np.savez(data, P_cal=P, y_cal=y, P_test=Pt)
        cmd = [
            _from_benchmarks(python),
            "-m",
            "_lib.peer_dirichletcal",
            data,
            out,
            json.dumps(specs),
            str(repeats),
            str(budget),
        ]
        try:
            res = subprocess.run(
                cmd,
                capture_output=True,
                text=True,
                timeout=timeout,
                check=False,
                cwd=BENCHMARKS,
            )
        except subprocess.TimeoutExpired:
            return {s["name"]: {"error": f"timed out after {timeout} s"} for s in specs}
        except OSError as exc:
            return {s["name"]: {"error": short_error(exc)} for s in specs}
        lines = res.stdout.strip().splitlines()
        if res.returncode != 0 or not lines:
            tail = (res.stderr.strip().splitlines() or ["no output"])[-1]
            return {s["name"]: {"error": f"worker failed: {tail}"} for s in specs}
        report = json.loads(lines[-1])
        if os.path.exists(out):
            with np.load(out) as arrays:
                for name, r in report.items():
                    if "proba_" + name in arrays:
                        r["proba"] = arrays["proba_" + name]
        return report


def dirichletcal_full(python, P, y, Pt, yt, reg, timeout):
    """dirichletcal's ``FullDirichletCalibrator(reg, reg)``, for ``bench_global.py``.

    Run by the interpreter ``python`` in a subprocess (``dirichletcal_worker``);
    returns ``(fit_s, predict_s, test NLL)``, or ``(inf, nan, nan)`` when it
    takes more than ``timeout`` seconds.
    """
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "data.npz")
        np.savez(path, P_cal=P, y_cal=y, P_test=Pt, y_test=yt)
        try:
            out = subprocess.run(
                [
                    _from_benchmarks(python),
                    "-m",
                    "_lib.dirichletcal_worker",
                    path,
                    str(reg),
                    str(reg),
                ],
                capture_output=True,
                text=True,
                timeout=timeout,
                check=True,
                cwd=BENCHMARKS,
            )
            r = json.loads(out.stdout.strip().splitlines()[-1])
            return r["fit_s"], r["predict_s"], r["nll"]
        except subprocess.TimeoutExpired:
            return float("inf"), float("nan"), float("nan")
