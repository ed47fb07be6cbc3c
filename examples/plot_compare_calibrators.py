"""
Every calibrator on one classifier: reliability diagrams and a metrics table
============================================================================

An over-fitted neural network is over-confident. Here a small
``MLPClassifier`` is trained on generated data (6 classes), and every skcal
calibrator is fitted on the same held-out calibration set and judged on the
same test set:

* the **score calibrators** see the network's logits;
* the **local calibrators** see the embeddings of its last hidden layer, with
  its output layer as the frozen linear head (``coef``, ``intercept``).

The table reports accuracy, the proper scores (log loss, Brier) and several
calibration errors; the reliability diagrams show the top-label confidence
against the accuracy, per family of methods.
"""

# %%
# The classifier and its three data splits
# ----------------------------------------
import re
import warnings

import matplotlib.pyplot as plt
from scipy.special import softmax
from sklearn.datasets import make_classification
from sklearn.model_selection import train_test_split
from sklearn.neural_network import MLPClassifier
from sklearn.preprocessing import StandardScaler

from skcal.base import BaseLocalCalibrator
from skcal.discovery import all_estimators
from skcal.display import ReliabilityDisplay
from skcal.metrics import (
    brier_score,
    classwise_calibration_error,
    cumulative_calibration_error,
    expected_calibration_error,
    negative_log_likelihood,
    smooth_expected_calibration_error,
)
from skcal.wrappers import extract_embeddings

X, y = make_classification(
    n_samples=12000,
    n_features=20,
    n_informative=10,
    n_classes=6,
    n_clusters_per_class=2,
    class_sep=1.0,
    random_state=0,
)
X_train, X_rest, y_train, y_rest = train_test_split(
    X, y, train_size=3000, stratify=y, random_state=0
)
X_cal, X_test, y_cal, y_test = train_test_split(
    X_rest, y_rest, train_size=3000, stratify=y_rest, random_state=0
)
scaler = StandardScaler().fit(X_train)
with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # the MLP is meant to over-fit
    mlp = MLPClassifier(
        hidden_layer_sizes=(128,), alpha=1e-6, max_iter=300, random_state=0
    ).fit(scaler.transform(X_train), y_train)

# last hidden layer (the embeddings) and the output layer (the head)
emb_cal, coef, intercept = extract_embeddings(mlp, scaler.transform(X_cal))
emb_test = extract_embeddings(mlp, scaler.transform(X_test))[0]
logits_cal = emb_cal @ coef.T + intercept
logits_test = emb_test @ coef.T + intercept

# %%
# Fit every calibrator
# --------------------
# Defaults everywhere, except the vector-quantized calibrator: its defaults
# (64 slots, 64 codewords) are meant for 512- to 2048-wide embeddings and
# thousands more calibration samples; these embeddings have 128 dimensions.
SETTINGS = {"VQLocalCalibrator": {"n_slots": 32, "n_codewords": 32}}

predictions = {"uncalibrated": softmax(logits_test, axis=1)}
for name, cls in all_estimators():
    calibrator = cls(**SETTINGS.get(name, {}))
    params = calibrator.get_params()
    fixed = {"device": "cpu", "random_state": 0}
    calibrator.set_params(**{k: v for k, v in fixed.items() if k in params})
    local = isinstance(calibrator, BaseLocalCalibrator)
    if local and "coef" in params:
        calibrator.set_params(coef=coef, intercept=intercept)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        calibrator.fit(*((emb_cal, y_cal) if local else (logits_cal, y_cal)))
    X_test_k = emb_test if local else logits_test
    predictions[name] = calibrator.predict_proba(X_test_k)

# %%
# The metrics table
# -----------------
# ECE: top-label, 15 equal-width bins; cwECE: classwise; ECCE: the
# cumulative (Kolmogorov-Smirnov) error of the top label, which needs no
# bins; smECE: smooth ECE. Lower is better everywhere but accuracy.
rows = []
for name, proba in predictions.items():
    rows.append(
        {
            "method": name,
            "acc": float((proba.argmax(axis=1) == y_test).mean()),
            "NLL": negative_log_likelihood(y_test, proba),
            "Brier": brier_score(y_test, proba),
            "ECE": expected_calibration_error(y_test, proba),
            "cwECE": classwise_calibration_error(y_test, proba),
            "ECCE": cumulative_calibration_error(y_test, proba),
            "smECE": smooth_expected_calibration_error(y_test, proba),
        }
    )
rows = [rows[0]] + sorted(rows[1:], key=lambda r: r["ECE"])
# names without "Calibrator" / "Scaling", so that the table fits the page
width = max(len(re.sub("Calibrator$|Scaling$", "", r["method"])) for r in rows)
print(f"{'method':<{width}}" + "".join(f"{k:>7}" for k in list(rows[0])[1:]))
for r in rows:
    name = re.sub("Calibrator$|Scaling$", "", r["method"])
    print(f"{name:<{width}}" + "".join(f"{r[k]:>7.4f}" for k in list(r)[1:]))

# %%
# Every calibrator cuts the network's calibration error several times over.
# Its over-confidence is global (one temperature explains most of it), so
# temperature scaling and its relatives come first here, and the
# non-parametric maps, which spend data on shapes the problem does not need,
# come after. The local calibrators are built for miscalibration that changes
# across regions of the embedding space (see the local calibration example)
# and for larger calibration sets; KCal and Local Nets even improve the log
# loss and Brier score but not the top-label ECE. The top-label methods
# (spline, ProCal) keep the original label in ``predict``; the accuracy
# column scores the argmax of the probabilities, as every metric does.

# %%
# Reliability diagrams, one family per panel
# ------------------------------------------
# Each panel repeats the uncalibrated network (grey) for reference; the
# diagonal is perfect calibration.
FAMILIES = {
    "Temperature and matrix scaling": [
        "TemperatureScaling",
        "VectorScaling",
        "MatrixScaling",
        "DirichletCalibrator",
        "StructuredMatrixScaling",
    ],
    "Temperature models": [
        "ClassTemperatureScaling",
        "ParameterizedTemperatureScaling",
        "SMARTCalibrator",
    ],
    "One-vs-rest and top-label": [
        "IsotonicCalibrator",
        "HistogramBinningCalibrator",
        "PlattCalibrator",
        "BetaCalibrator",
        "SplineCalibrator",
    ],
    "Local (on embeddings)": [
        "VQLocalCalibrator",
        "KCalCalibrator",
        "LocalNetCalibrator",
        "ProCalCalibrator",
    ],
}
fig, axes = plt.subplots(2, 2, figsize=(11, 10), sharex=True, sharey=True)
for ax, (title, names) in zip(axes.ravel(), FAMILIES.items()):
    ReliabilityDisplay.from_predictions(
        y_test,
        predictions["uncalibrated"],
        name="uncalibrated",
        ax=ax,
        show_counts=False,
        color="0.6",
    )
    for name in names:
        ReliabilityDisplay.from_predictions(
            y_test, predictions[name], name=name, ax=ax, show_counts=False
        )
    ax.set_title(title)
    ax.legend(loc="upper left", fontsize="small")
fig.tight_layout()
plt.show()
