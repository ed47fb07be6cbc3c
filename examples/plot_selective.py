"""
Deciding with calibrated probabilities: abstain, or pay the least
=================================================================

Two ways to act on calibrated probabilities.
:class:`~skcal.decision.SelectiveClassifier` predicts only where the
calibrated confidence reaches a threshold chosen so that the error rate
among the predicted rows (the *selective risk*) is at most a target, with
probability at least ``1 - delta`` over the calibration rows (Geifman &
El-Yaniv's SGR bound). :func:`~skcal.decision.cost_sensitive_predict` picks
the class of least expected cost under a cost matrix. Both need
probabilities that mean what they say.
"""

# %%
# A miscalibrated classifier
# --------------------------
# A logistic regression on a fifth of scikit-learn's bundled digits:
# accurate enough, but its probabilities are not calibrated (here they are
# underconfident). Its log-probabilities are the logits that a calibrator
# takes.
import matplotlib.pyplot as plt
import numpy as np
from sklearn.datasets import load_digits
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split

from skcal import TemperatureScaling
from skcal.decision import (
    SelectiveClassifier,
    cost_sensitive_predict,
    expected_cost,
)

X, y = load_digits(return_X_y=True)
X_train, X_rest, y_train, y_rest = train_test_split(
    X, y, train_size=0.2, stratify=y, random_state=0
)
X_cal, X_test, y_cal, y_test = train_test_split(
    X_rest, y_rest, train_size=0.5, stratify=y_rest, random_state=0
)
model = LogisticRegression(max_iter=5000).fit(X_train, y_train)
logits_cal = model.predict_log_proba(X_cal)
logits_test = model.predict_log_proba(X_test)
raw_test = np.exp(logits_test)
print(f"test accuracy {np.mean(raw_test.argmax(1) == y_test):.3f}")

# %%
# Selective prediction with a guarantee
# -------------------------------------
# Half of the calibration rows fit temperature scaling, the other half choose
# the threshold. The naive alternative, "predict when the raw confidence is
# at least 1 - target", trusts the raw probabilities: here it abstains more
# than it needs to at 10%; with overconfident ones it would exceed the
# target. It promises nothing either way.
for target in (0.10, 0.05):
    selective = SelectiveClassifier(
        TemperatureScaling(), target_risk=target, delta=0.1, random_state=0
    ).fit(logits_cal, y_cal)
    pred = selective.predict(logits_test)
    kept = pred != -1
    naive = raw_test.max(1) >= 1 - target
    print(
        f"target {target:.0%}: selective covers {kept.mean():.2f}, "
        f"test risk {np.mean(pred[kept] != y_test[kept]):.3f} (bound "
        f"{selective.risk_upper_bound_:.3f}); naive raw rule covers "
        f"{naive.mean():.2f} with risk "
        f"{np.mean(raw_test[naive].argmax(1) != y_test[naive]):.3f}"
    )

# %%
# The risk-coverage trade-off on the test rows: each point keeps the rows
# above a confidence threshold. Temperature scaling does not change the
# ranking, so the two curves coincide: calibration moves *where* a stated
# confidence sits on the curve, which is what the naive rule relies on.
calibrated_test = selective.predict_proba(logits_test)


def risk_coverage(proba, y):
    order = np.argsort(-proba.max(1), kind="stable")
    wrong = proba.argmax(1)[order] != y[order]
    n = np.arange(1, len(y) + 1)
    return n / len(y), np.cumsum(wrong) / n


fig, ax = plt.subplots(figsize=(6, 4))
for name, proba in (("calibrated", calibrated_test), ("raw", raw_test)):
    coverage, risk = risk_coverage(proba, y_test)
    ax.plot(coverage, risk, label=name)
ax.axhline(0.05, color="grey", linestyle=":", label="target 5%")
ax.plot(
    kept.mean(), np.mean(pred[kept] != y_test[kept]), "ko", label="SGR, 5%"
)
ax.set_xlabel("coverage")
ax.set_ylabel("selective risk")
ax.legend()
fig.tight_layout()

# %%
# Decisions of least expected cost
# --------------------------------
# Mistaking any digit costs 1, except that missing a 9 (the truth is 9, the
# decision is another digit) costs 20. The least-cost decisions from the
# calibrated probabilities cost less than those from the raw ones, and far
# less than the cost-blind argmax.
cost = np.ones((10, 10)) - np.eye(10)
cost[9, :9] = 20.0
for name, proba in (("raw", raw_test), ("calibrated", calibrated_test)):
    decisions = cost_sensitive_predict(proba, cost)
    mean_cost = expected_cost(y_test, decisions, cost)
    print(f"{name:>10}: mean cost {mean_cost:.3f}")
argmax_cost = expected_cost(y_test, raw_test.argmax(1), cost)
print(f"    argmax: mean cost {argmax_cost:.3f}")
