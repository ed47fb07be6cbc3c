"""Fit dirichletcal calibrators on an npz file for compare_peers.py.

Run by ``peers.run_dirichletcal`` (compare_peers.py), from ``benchmarks/``,
with the interpreter of an environment where dirichletcal installs (it needs
Python >= 3.12): ``python -m _lib.peer_dirichletcal data.npz out.npz
SPEC_JSON REPEATS BUDGET_S``.

``data.npz`` holds ``P_cal``, ``y_cal``, ``P_test`` (probabilities and
labels). ``SPEC_JSON`` is a list of ``{"name", "kind", "reg_lambda",
"reg_mu"}`` with ``kind`` ``"full"`` (FullDirichletCalibrator) or ``"diag"``
(DiagonalDirichletCalibrator). Each calibrator is fitted and applied up to
``REPEATS`` times (best time kept), but not repeated once a method has used
``BUDGET_S`` seconds. There is no warm-up fit: dirichletcal runs JAX
eagerly, whose per-shape compilation a small warm-up would not cover.
Writes ``proba_<name>`` arrays to ``out.npz`` and prints one JSON line:
``{name: {"fit_s", "predict_s", "runs"} or {"error"}}``.
"""

import json
import sys
import warnings

import numpy as np

from .common import timed  # stdlib only: fine under the other interpreter


def main():
    warnings.simplefilter("ignore")
    data = np.load(sys.argv[1])
    out_path, spec = sys.argv[2], json.loads(sys.argv[3])
    repeats, budget = int(sys.argv[4]), float(sys.argv[5])
    report, arrays = {}, {}
    try:
        from dirichletcal.calib.diagdirichlet import DiagonalDirichletCalibrator
        from dirichletcal.calib.fulldirichlet import FullDirichletCalibrator
    except Exception as exc:  # noqa: BLE001
        print(json.dumps({s["name"]: {"error": repr(exc)} for s in spec}))
        return 0
    kinds = {"full": FullDirichletCalibrator, "diag": DiagonalDirichletCalibrator}
    P, y, Pt = data["P_cal"], data["y_cal"], data["P_test"]
    for s in spec:
        try:
            cls = kinds[s["kind"]]
            kwargs = {"reg_lambda": s["reg_lambda"], "reg_mu": s["reg_mu"]}
            fit_s, cal, runs = timed(lambda: cls(**kwargs).fit(P, y), repeats, budget)  # noqa: B023
            predict_s, proba, _ = timed(
                lambda: np.asarray(cal.predict_proba(Pt), dtype=np.float64),  # noqa: B023
                repeats,
                budget,
            )
            arrays["proba_" + s["name"]] = proba
            report[s["name"]] = {"fit_s": fit_s, "predict_s": predict_s, "runs": runs}
        except Exception as exc:  # noqa: BLE001
            report[s["name"]] = {"error": f"{type(exc).__name__}: {exc}"}
    np.savez(out_path, **arrays)
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
