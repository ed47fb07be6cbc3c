"""Ensemble temperature scaling (Zhang et al. 2020) and ts-mix against
probmetrics' ``ETSCalibrator`` and ``get_calibrator("ts-mix")``."""

from ..peers import probmetrics_method, skcal_method
from . import Row


def _skcal(**params):
    def factory():
        from skcal import EnsembleTemperatureScaling

        return skcal_method(EnsembleTemperatureScaling, device="cpu", **params)

    return factory


def _probmetrics_ets(loss):
    def factory():
        from probmetrics.calibrators import ETSCalibrator

        return probmetrics_method(lambda: ETSCalibrator(loss=loss))

    return factory


def _probmetrics_ts_mix():
    from probmetrics.calibrators import get_calibrator

    return probmetrics_method(lambda: get_calibrator("ts-mix"))


def rows() -> list[Row]:
    return [
        Row(
            method="ensemble temperature scaling (MSE)",
            skcal=_skcal(loss="mse"),
            references=[("probmetrics ets", _probmetrics_ets("mse"))],
        ),
        Row(
            method="ensemble temperature scaling (NLL)",
            skcal=_skcal(loss="log_loss"),
            references=[("probmetrics ets ce", _probmetrics_ets("ce"))],
        ),
        Row(
            method="temperature scaling mixed with uniform (ts-mix)",
            skcal=_skcal(mixture="uniform"),
            references=[("probmetrics ts-mix", _probmetrics_ts_mix)],
        ),
    ]
