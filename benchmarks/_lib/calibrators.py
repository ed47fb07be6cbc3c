"""Every skcal calibrator with its defaults, for a real task (``bench_papers.py``)."""

import numpy as np


def table_methods(task, seed):
    """Every skcal calibrator with its defaults: name -> (input kind, estimator).

    Each is given the task's classes, so that a class absent from a small
    calibration subset keeps its column.
    """
    methods = _table_methods(task, seed)
    classes = np.arange(task.n_classes)
    for _, est in methods.values():
        if "classes" in est.get_params():
            est.set_params(classes=classes)
    return methods


def _table_methods(task, seed):
    import skcal

    head = {"coef": task.coef, "intercept": task.intercept}
    common = {"device": "cpu"}
    seeded = {"random_state": seed, **common}
    return {
        "TS": ("logits", skcal.TemperatureScaling(**common)),
        "VS": ("logits", skcal.VectorScaling(**common)),
        "MS": ("logits", skcal.MatrixScaling(**common)),
        "SMS": ("logits", skcal.StructuredMatrixScaling(**common)),
        "DC": ("logits", skcal.DirichletCalibrator(**common)),
        "DC-CV": ("logits", skcal.DirichletCalibratorCV(**seeded)),
        "CTS": ("logits", skcal.ClassTemperatureScaling(**common)),
        "PTS": ("logits", skcal.ParameterizedTemperatureScaling(**seeded)),
        "SMART": ("logits", skcal.SMARTCalibrator(**seeded)),
        "isotonic": ("logits", skcal.IsotonicCalibrator()),
        "histogram": ("logits", skcal.HistogramBinningCalibrator()),
        "Platt": ("logits", skcal.PlattCalibrator()),
        "beta": ("logits", skcal.BetaCalibrator()),
        "spline": ("logits", skcal.SplineCalibrator()),
        "KCal": ("embeddings", skcal.KCalCalibrator(**seeded)),
        "LN": ("embeddings", skcal.LocalNetCalibrator(**head, **seeded)),
        "ProCal": ("embeddings", skcal.ProCalCalibrator(**head, **common)),
        "VQ": ("embeddings", skcal.VQLocalCalibrator(**head, **seeded)),
        # the paper's VQ (a new head) and its VQ_frz ablation
        "VQ-new": (
            "embeddings",
            skcal.VQLocalCalibrator(head="train", **head, **seeded),
        ),
        "VQ-frz": (
            "embeddings",
            skcal.VQLocalCalibrator(head="frozen", **head, **seeded),
        ),
    }


#: the names of :func:`table_methods`, without building a task
METHOD_NAMES = (
    "TS", "VS", "MS", "SMS", "DC", "DC-CV", "CTS", "PTS", "SMART", "isotonic",
    "histogram", "Platt", "beta", "spline", "KCal", "LN", "ProCal", "VQ",
    "VQ-new", "VQ-frz",
)  # fmt: skip
