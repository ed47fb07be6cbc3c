"""Fit dirichletcal's FullDirichletCalibrator on an npz file; print JSON.

Run by ``peers.dirichletcal_full`` (bench_global.py), from ``benchmarks/``,
with the interpreter of an environment where dirichletcal installs (it needs
Python >= 3.12, which skcal's CI lacks): ``python -m _lib.dirichletcal_worker
data.npz reg_lambda reg_mu``. The npz holds ``P_cal``, ``y_cal``, ``P_test``,
``y_test`` (probabilities and labels).
"""

import json
import sys
import time

import numpy as np


def main():
    from dirichletcal.calib.fulldirichlet import FullDirichletCalibrator

    data = np.load(sys.argv[1])
    reg_lambda, reg_mu = float(sys.argv[2]), float(sys.argv[3])
    start = time.perf_counter()
    cal = FullDirichletCalibrator(reg_lambda=reg_lambda, reg_mu=reg_mu).fit(
        data["P_cal"], data["y_cal"]
    )
    fit_s = time.perf_counter() - start
    start = time.perf_counter()
    proba = np.asarray(cal.predict_proba(data["P_test"]))
    predict_s = time.perf_counter() - start
    y = data["y_test"]
    nll = float(-np.mean(np.log(np.clip(proba[np.arange(len(y)), y], 1e-300, None))))
    print(json.dumps({"fit_s": fit_s, "predict_s": predict_s, "nll": nll}))


if __name__ == "__main__":
    main()
