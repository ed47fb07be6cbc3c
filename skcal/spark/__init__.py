"""Calibration where the predictions live: Spark DataFrames.

Metrics of a DataFrame's rows computed per partition and merged on the
driver (:func:`calibration_metrics`, :func:`spark_metric` and the named
metrics below), and a fitted calibrator's probabilities as a new column
(:func:`transform`, or :func:`calibrate_udf`: a pandas UDF). pyspark is
imported only when one of them runs (``pip install "skcal[spark]"``; Spark
needs a Java runtime).
"""

from __future__ import annotations

from ._arrow import calibrate_udf
from ._metrics import calibration_metrics, spark_metric
from ._predict import transform

__all__ = [
    "brier_score",
    "calibrate_udf",
    "calibration_metrics",
    "classwise_calibration_error",
    "expected_calibration_error",
    "negative_log_likelihood",
    "spark_metric",
    "transform",
]


def _named(function: str, title: str):
    def metric(df, *, proba, label, weight=None, group=None, **params):
        return spark_metric(
            df,
            function,
            proba=proba,
            label=label,
            weight=weight,
            group=group,
            **params,
        )

    metric.__name__ = metric.__qualname__ = function
    metric.__doc__ = (
        f"{title} of the rows of a Spark DataFrame: "
        f":func:`skcal.metrics.{function}` computed per partition and merged.\n\n"
        "Parameters as :func:`spark_metric` (``params``: the metric's own,\n"
        f"e.g. ``n_bins``, ``labels``). Returns a float, or with ``group`` a\n"
        "dict from each group value to it.\n"
    )
    return metric


expected_calibration_error = _named("expected_calibration_error", "Top-label ECE")
classwise_calibration_error = _named("classwise_calibration_error", "Classwise ECE")
negative_log_likelihood = _named("negative_log_likelihood", "Negative log-likelihood")
brier_score = _named("brier_score", "Brier score")
