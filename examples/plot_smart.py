"""
SMART: a temperature that depends on the logit gap
==================================================

Networks are often over-confident on samples close to the decision boundary
and under-confident on easy ones (SMART's appendix B). One global
temperature cannot fix both. :class:`skcal.SMARTCalibrator` reads a
temperature from the *logit gap*, the margin between the two largest logits,
with a 49-parameter network trained on SoftECE.

Here the logits are generated so that the ideal temperature of each sample is
known: it decreases from 2 (over-confident) at small gaps to 0.6
(under-confident) at large ones.
"""

# %%
# Generated logits with gap-dependent miscalibration
# --------------------------------------------------
import matplotlib.pyplot as plt
import numpy as np
from scipy.special import softmax

from skcal import SMARTCalibrator, TemperatureScaling
from skcal.metrics import (
    expected_calibration_error,
    negative_log_likelihood,
    soft_expected_calibration_error,
)
from skcal.utils._testing import make_gap_miscalibrated_logits

X, y, ideal_T = make_gap_miscalibrated_logits(13_000, 10, random_state=0)
X_cal, y_cal = X[:3000], y[:3000]
X_test, y_test, T_test = X[3000:], y[3000:], ideal_T[3000:]

# %%
# Fit temperature scaling and SMART on the calibration set
# --------------------------------------------------------
ts = TemperatureScaling(device="cpu").fit(X_cal, y_cal)
smart = SMARTCalibrator(random_state=0, device="cpu").fit(X_cal, y_cal)

for name, proba in [
    ("uncalibrated", softmax(X_test, axis=1)),
    ("temperature scaling", ts.predict_proba(X_test)),
    ("SMART", smart.predict_proba(X_test)),
    ("ideal temperatures", softmax(X_test / T_test[:, None], axis=1)),
]:
    print(
        f"{name:>20}: ECE {expected_calibration_error(y_test, proba):.4f}  "
        f"SoftECE {soft_expected_calibration_error(y_test, proba):.4f}  "
        f"NLL {negative_log_likelihood(y_test, proba):.4f}"
    )

# %%
# Temperature against logit gap
# -----------------------------
# SMART's learned temperature follows the ideal one; temperature scaling is a
# compromise that is wrong at both ends.
top2 = np.sort(X_test, axis=1)[:, -2:]
gap = top2[:, 1] - top2[:, 0]
order = np.argsort(gap)

fig, ax = plt.subplots(figsize=(6, 4))
ax.scatter(
    gap, T_test, s=2, alpha=0.2, color="0.5", label="ideal (per sample)"
)
T_smart = smart.predict_temperature(X_test)
ax.plot(gap[order], T_smart[order], lw=2, label="SMART")
ax.axhline(
    ts.temperature_, color="C1", lw=2, ls="--", label="temperature scaling"
)
ax.axhline(1.0, color="k", lw=0.8, ls=":")
ax.set_xlabel("logit gap  $z_{(1)} - z_{(2)}$")
ax.set_ylabel("temperature")
ax.legend()
fig.tight_layout()
plt.show()
