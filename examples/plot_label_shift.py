"""
When the class mix changes: label-shift adaptation
==================================================

A classifier is calibrated on data whose classes are nearly balanced, then
used where a few classes dominate. Its calibrated probabilities still assume
the old class frequencies, so they are wrong on the new data although the
classifier is unchanged. :class:`~skcal.shift.PriorShiftAdapter` estimates the
new class priors from the unlabeled new scores (EM, Saerens et al. 2002, on
bias-corrected temperature scaling, as recommended by Alexandari, Kundaje and
Shrikumar, ICML 2020) and re-weights the probabilities: no new labels needed.
"""

# %%
# A classifier, a calibration split and a shifted target set
# ----------------------------------------------------------
# A logistic regression on scikit-learn's bundled digits; its log-probabilities
# are valid logits. The target set draws 1,000 rows from the test split with
# new class priors: three digits make up 70% of it.
import matplotlib.pyplot as plt
import numpy as np
from sklearn.datasets import load_digits
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split

from skcal.metrics import negative_log_likelihood
from skcal.shift import PriorShiftAdapter

X, y = load_digits(return_X_y=True)
X_train, X_rest, y_train, y_rest = train_test_split(
    X, y, train_size=0.4, stratify=y, random_state=0
)
X_cal, X_test, y_cal, y_test = train_test_split(
    X_rest, y_rest, train_size=0.5, stratify=y_rest, random_state=0
)
model = LogisticRegression(C=0.01, max_iter=2000).fit(X_train, y_train)
logits_cal = model.predict_log_proba(X_cal)

rng = np.random.default_rng(0)
true_priors = np.full(10, 0.3 / 7)
true_priors[[1, 4, 7]] = [0.35, 0.2, 0.15]
counts = rng.multinomial(1000, true_priors)
rows = np.concatenate(
    [
        rng.choice(np.flatnonzero(y_test == k), size=c)
        for k, c in enumerate(counts)
    ]
)
X_target, y_target = X_test[rows], y_test[rows]
logits_target = model.predict_log_proba(X_target)
print("target class frequencies:")
print(np.round(counts / counts.sum(), 3))

# %%
# Calibrate, then adapt to the unlabeled target scores
# ----------------------------------------------------
# ``fit`` calibrates (bias-corrected temperature scaling by default) on the
# labeled calibration split and records the source priors (the mean calibrated
# probability of its rows, which for BCTS equals its class frequencies);
# ``adapt`` estimates the target priors by EM from the target scores alone,
# with a 90% bootstrap interval over the target rows, and keeps them only if
# the target rows show a shift (a BIC test against the source priors).
adapter = PriorShiftAdapter(n_resamples=200, random_state=0)
adapter.fit(logits_cal, y_cal)
before = adapter.predict_proba(logits_target)  # not adapted yet: source priors
adapter.adapt(logits_target)
after = adapter.predict_proba(logits_target)
est = adapter.prior_estimate_
print(f"EM converged: {est.converged} in {est.n_iter} iterations")
print(
    f"shift detected: {est.shift_detected} (2 log likelihood ratio "
    f"{est.statistic:.1f}, BIC threshold {est.threshold:.1f})"
)
print("estimated priors:")
print(np.round(adapter.priors_, 3))

truth = counts / counts.sum()
for name, proba in [("calibrated", before), ("calibrated + adapted", after)]:
    nll = negative_log_likelihood(y_target, proba)
    acc = np.mean(proba.argmax(axis=1) == y_target)
    print(f"{name:>21}: target NLL {nll:.4f}, accuracy {acc:.3f}")
print(
    f"prior MSE: {np.mean((adapter.source_priors_ - truth) ** 2):.2e} "
    f"(no adaptation) -> {np.mean((adapter.priors_ - truth) ** 2):.2e} (EM)"
)

# %%
# The estimated priors against the true ones
# ------------------------------------------
# Bars: the target set's class frequencies (unknown to the adapter) and the
# calibration set's; points: EM's estimate with its bootstrap interval.
classes = np.arange(10)
fig, (ax, ax_nll) = plt.subplots(
    1, 2, figsize=(10, 3.8), gridspec_kw={"width_ratios": [3, 1]}
)
ax.bar(
    classes - 0.2,
    truth,
    width=0.4,
    label="target (true)",
    color="C1",
    alpha=0.6,
)
ax.bar(
    classes + 0.2,
    adapter.source_priors_,
    width=0.4,
    label="calibration (source)",
    color="C0",
    alpha=0.6,
)
ax.errorbar(
    classes - 0.2,
    adapter.priors_,
    yerr=np.clip(
        [adapter.priors_ - est.low, est.high - adapter.priors_], 0, None
    ),
    fmt="o",
    color="k",
    capsize=3,
    label="EM estimate, 90% interval",
)
ax.set(xlabel="digit", ylabel="class prior", xticks=classes)
ax.legend(loc="upper right", fontsize="small")
nlls = [negative_log_likelihood(y_target, p) for p in (before, after)]
ax_nll.bar(["calibrated", "+ adapted"], nlls, color=["C0", "C1"])
ax_nll.set(ylabel="target NLL")
fig.tight_layout()
plt.show()
