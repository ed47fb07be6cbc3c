"""Centred isotonic regression and scaling-binning against their references.

* CIR (Oron & Flournoy 2017): probmetrics' ``"cir"`` (``cir_model``'s
  ``CenteredIsotonicRegression`` one-vs-rest, float32 inputs).
* Scaling-binning (Kumar, Liang & Ma 2019), marginal: uncertainty-
  calibration's ``PlattBinnerMarginalCalibrator`` (its rows floored at
  1e-12 and renormalised, as skcal does) and probmetrics'
  ``BinaryPlattBinnerCalibrator`` one-vs-rest.
* Scaling-binning, top-label: ``PlattBinnerTopCalibrator``, whose
  calibrated confidence goes to the argmax and ``1 - c`` to the other
  classes in proportion to their probabilities (skcal's rule: the
  reference returns only the confidence).

uncertainty-calibration bins with a Python loop over the rows of every
class, so its rows are not run above 100 classes.
"""

import numpy as np

from ..peers import probmetrics_method, skcal_method
from . import Row

#: uncertainty-calibration's floor before renormalising (skcal's)
_FLOOR = 1e-12


def _renormalised(Q):
    Q = np.maximum(np.asarray(Q, dtype=np.float64), _FLOOR)
    return Q / Q.sum(axis=1, keepdims=True)


def _skcal(cls_name, **params):
    def make():
        import skcal

        return skcal_method(getattr(skcal, cls_name), **params)

    return make


def _probmetrics_cir():
    import cir_model  # noqa: F401  (probmetrics' "cir" needs it)
    from probmetrics.calibrators import get_calibrator

    return probmetrics_method(lambda: get_calibrator("cir"))


def _probmetrics_platt_binner():
    from probmetrics.calibrators import (
        BinaryPlattBinnerCalibrator,
        MulticlassOneVsRestCalibrator,
    )

    return probmetrics_method(
        lambda: MulticlassOneVsRestCalibrator(BinaryPlattBinnerCalibrator())
    )


def _uc_marginal():
    from calibration import PlattBinnerMarginalCalibrator

    def fit(P, y):
        model = PlattBinnerMarginalCalibrator(len(P), num_bins=10)
        model.train_calibration(P, y)
        return model

    return fit, lambda m, P: _renormalised(m.calibrate(P))


def _uc_top_label():
    from calibration import PlattBinnerTopCalibrator

    def fit(P, y):
        model = PlattBinnerTopCalibrator(len(P), num_bins=10)
        model.train_calibration(P, y)
        return model

    def predict(model, P):
        conf = np.asarray(model.calibrate(P), dtype=np.float64)
        rows, top = np.arange(len(P)), np.argmax(P, axis=1)
        rest = np.array(P, dtype=np.float64)
        rest[rows, top] = 0.0
        total = rest.sum(axis=1)
        even = np.full(rest.shape, 1.0 / max(P.shape[1] - 1, 1))
        share = np.where(
            (total > 0)[:, None], rest / np.where(total > 0, total, 1)[:, None], even
        )
        out = share * (1.0 - conf)[:, None]
        out[rows, top] = conf
        return _renormalised(out)

    return fit, predict


def rows() -> list[Row]:
    return [
        Row(
            method="centred isotonic regression",
            skcal=_skcal("CenteredIsotonicCalibrator"),
            references=[("probmetrics cir", _probmetrics_cir)],
        ),
        Row(
            method="scaling-binning (marginal)",
            skcal=_skcal("ScalingBinningCalibrator", mode="marginal"),
            references=[
                ("uncertainty-calibration PlattBinnerMarginal", _uc_marginal),
                ("probmetrics BinaryPlattBinner ovr", _probmetrics_platt_binner),
            ],
            max_peer_classes=100,
        ),
        Row(
            method="scaling-binning (top-label)",
            skcal=_skcal("ScalingBinningCalibrator", mode="top_label"),
            references=[("uncertainty-calibration PlattBinnerTop", _uc_top_label)],
            max_peer_classes=100,
        ),
    ]
