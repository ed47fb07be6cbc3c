"""Venn-Abers predictors (Vovk et al. 2015; Manokhin 2017) against the
``venn-abers`` package and MAPIE.

Both references calibrate a fitted classifier's probabilities with
``predict_proba_prefitted_va`` (inductive, one-vs-one or one-vs-rest); their
cross Venn-Abers refits a classifier per fold, so the CVAP reference here is
``venn_abers.VennAbersCV`` on a frozen pass-through classifier, one per pair,
coupled as ``VennAbersMultiClass`` does. The references take their classes
from the calibration labels (a class absent there loses its column: the
factory then raises). One-vs-one reads ``C (C - 1) / 2`` pairs per row:
skcal refuses it above 100 classes, and the references' one-vs-rest
(``O(n^2)`` corner rescans per class) is also not run above 100.
"""

import numpy as np

from ..peers import skcal_method
from . import Row

_MAX_CLASSES = 100


def _skcal(**params):
    def factory():
        from skcal import VennAbersCalibrator

        return skcal_method(VennAbersCalibrator, **params)

    return factory


def _columns(P, y, proba):
    if proba.shape != P.shape:
        raise ValueError(
            f"the reference returned {proba.shape[1]} columns for {P.shape[1]} "
            "classes (a class absent from the calibration labels)"
        )
    return proba


def _prefitted(module, va_type):
    def factory():
        import importlib

        va = importlib.import_module(module).predict_proba_prefitted_va

        def fit(P, y):
            return np.asarray(P, dtype=np.float64), np.asarray(y)

        def predict(model, P):
            P_cal, y_cal = model
            with np.errstate(divide="ignore", invalid="ignore"):
                proba, _ = va(P_cal, y_cal, P, va_tpe=va_type)
            return _columns(P, y_cal, proba)

        return fit, predict

    return factory


def _cross_pairs(n_splits=5, random_state=0):
    def factory():
        from venn_abers.venn_abers import VennAbersCV

        from ..passthrough import ScoresOf

        def fit(P, y):
            n_classes, models = P.shape[1], {}
            for i in range(n_classes):
                for j in range(i + 1, n_classes):
                    rows = (y == i) | (y == j)
                    pair = P[rows][:, [i, j]]
                    model = VennAbersCV(
                        ScoresOf("proba"),
                        inductive=False,
                        n_splits=n_splits,
                        random_state=random_state,
                        shuffle=True,
                    )
                    model.fit(pair / pair.sum(axis=1, keepdims=True), y[rows] == j)
                    models[i, j] = model
            return n_classes, models

        def predict(model, P):
            n_classes, models = model
            inverse = np.full(P.shape, -(n_classes - 2.0))
            with np.errstate(divide="ignore", invalid="ignore"):
                for (i, j), va in models.items():
                    pair = P[:, [i, j]]
                    p = va.predict_proba(pair / pair.sum(axis=1, keepdims=True))[:, 1]
                    inverse[:, i] += 1 / (1 - p)
                    inverse[:, j] += 1 / p
            proba = 1 / inverse
            return proba / proba.sum(axis=1, keepdims=True)

        return fit, predict

    return factory


def rows() -> list[Row]:
    return [
        Row(
            method="Venn-Abers IVAP one-vs-rest",
            skcal=_skcal(strategy="ovr"),
            references=[
                (
                    "venn-abers one_vs_all",
                    _prefitted("venn_abers.venn_abers", "one_vs_all"),
                ),
                ("MAPIE one_vs_all", _prefitted("mapie._venn_abers", "one_vs_all")),
            ],
            max_peer_classes=_MAX_CLASSES,
        ),
        Row(
            method="Venn-Abers IVAP one-vs-one",
            skcal=_skcal(strategy="ovo"),
            references=[
                (
                    "venn-abers one_vs_one",
                    _prefitted("venn_abers.venn_abers", "one_vs_one"),
                ),
                ("MAPIE one_vs_one", _prefitted("mapie._venn_abers", "one_vs_one")),
            ],
            max_peer_classes=_MAX_CLASSES,
            max_skcal_classes=_MAX_CLASSES,
        ),
        Row(
            method="Venn-Abers CVAP one-vs-one (5 folds)",
            skcal=_skcal(strategy="ovo", method="cross", n_splits=5, random_state=0),
            references=[("venn-abers VennAbersCV per pair", _cross_pairs())],
            max_peer_classes=_MAX_CLASSES,
            max_skcal_classes=_MAX_CLASSES,
        ),
    ]
