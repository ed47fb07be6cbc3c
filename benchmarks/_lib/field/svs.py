"""Structured vector scaling (Berta et al. 2026) against probmetrics' ``"svs"``."""

from ..peers import probmetrics_method, skcal_method
from . import Row


def _skcal_svs():
    from skcal import StructuredVectorScaling

    return skcal_method(StructuredVectorScaling, device="cpu")


def _probmetrics_svs():
    from probmetrics.calibrators import get_calibrator

    return probmetrics_method(lambda: get_calibrator("svs"))


def rows() -> list[Row]:
    return [
        Row(
            method="structured vector scaling",
            skcal=_skcal_svs,
            references=[("probmetrics svs", _probmetrics_svs)],
        )
    ]
