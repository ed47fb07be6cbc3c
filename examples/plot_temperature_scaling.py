"""
Temperature scaling of an over-confident network
================================================

A small MLP trained on scikit-learn's bundled digits data is over-confident
on new data. Temperature scaling, fitted on a held-out calibration split,
divides its logits by one scalar ``T``. It does not change any prediction,
and it lowers the test log loss and expected calibration error.
"""

# %%
# Train a network and collect its logits
# --------------------------------------
import matplotlib.pyplot as plt
from scipy.special import softmax
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split
from sklearn.neural_network import MLPClassifier
from sklearn.preprocessing import StandardScaler

from skcal import TemperatureScaling
from skcal.metrics import (
    binned_statistics,
    expected_calibration_error,
    negative_log_likelihood,
)
from skcal.wrappers import extract_embeddings

X, y = load_digits(return_X_y=True)
X_train, X_rest, y_train, y_rest = train_test_split(
    X, y, train_size=0.5, stratify=y, random_state=0
)
X_cal, X_test, y_cal, y_test = train_test_split(
    X_rest, y_rest, train_size=0.5, stratify=y_rest, random_state=0
)
scaler = StandardScaler().fit(X_train)
mlp = MLPClassifier((64,), alpha=1e-5, max_iter=400, random_state=0)
mlp.fit(scaler.transform(X_train), y_train)


def mlp_logits(X):
    """The MLP's pre-softmax outputs: its last hidden layer, then its head."""
    embeddings, coef, intercept = extract_embeddings(mlp, scaler.transform(X))
    return embeddings @ coef.T + intercept


logits_cal = mlp_logits(X_cal)
logits_test = mlp_logits(X_test)

# %%
# Fit temperature scaling on the calibration split
# ------------------------------------------------
ts = TemperatureScaling(device="cpu").fit(logits_cal, y_cal)
print(f"fitted temperature: {ts.temperature_:.3f}")

before = softmax(logits_test, axis=1)
after = ts.predict_proba(logits_test)
for name, proba in [("uncalibrated", before), ("temperature", after)]:
    print(
        f"{name:>13}: NLL {negative_log_likelihood(y_test, proba):.4f}  "
        f"ECE {expected_calibration_error(y_test, proba):.4f}"
    )

# %%
# Reliability diagram from the metric's own bins
# ----------------------------------------------
fig, ax = plt.subplots(figsize=(5, 5))
ax.plot([0, 1], [0, 1], "k:", label="perfect calibration")
for name, proba in [("uncalibrated", before), ("temperature", after)]:
    confidence = proba.max(axis=1)
    correct = proba.argmax(axis=1) == y_test
    stats = binned_statistics(confidence, correct, n_bins=10)
    keep = stats.nonempty
    ax.plot(stats.mean_score[keep], stats.mean_target[keep], "o-", label=name)
ax.set_xlabel("mean confidence in bin")
ax.set_ylabel("accuracy in bin")
ax.set_title("Top-label reliability, digits MLP (test split)")
ax.legend()
plt.show()
