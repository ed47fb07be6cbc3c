"""
Choosing a calibrator: cross-validated selection, and is the gain real?
=======================================================================

A practitioner with a trained classifier and a held-out calibration set asks
two questions: *which calibrator should I use?* and *is the improvement
real, or noise?* No single method wins on every data set, so the answer has
to come from the data:

1. :class:`~skcal.model_selection.CalibratorSearchCV` scores every candidate
   calibrator by cross-fitting on the calibration set, skips the candidates
   that have too many parameters for it, and keeps a simple one (no
   calibration, then temperature scaling) unless a richer one beats it by
   more than the noise;
2. :func:`~skcal.metrics.calibration_report` compares the uncalibrated and
   the calibrated probabilities on a test set, each metric with its
   bootstrap interval;
3. :func:`~skcal.metrics.confidence_interval` and
   :func:`~skcal.metrics.paired_comparison` say how sure we can be of each
   test score, and of the difference between two of them.

The data is scikit-learn's bundled digits set (1,797 images of 8 x 8
pixels, 10 classes; no download), cut into three parts: one to train the
classifier, one to choose and fit the calibrator, one to test.
"""

# %%
# An over-confident classifier
# ----------------------------
# A logistic regression with almost no penalty (``C=1e4``). With 64 pixels
# and 600 training images the ten digits are almost linearly separable, so
# maximising the training likelihood pushes the weights up until nearly
# every training image gets a probability close to 1 for its class. The
# model learns the classes well, but the size of its logits reflects how
# far the optimiser went, not how often it is right: on new images it
# is far more confident than its accuracy warrants. Its logits
# (``decision_function``) are what the calibrators take as input.
import textwrap
import warnings

import matplotlib.pyplot as plt
import numpy as np
from scipy.special import softmax
from sklearn.base import clone
from sklearn.datasets import load_digits
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from skcal import (
    BetaCalibrator,
    DirichletCalibrator,
    IdentityCalibrator,
    IsotonicCalibrator,
    SMARTCalibrator,
    SplineCalibrator,
    StructuredMatrixScaling,
    TemperatureScaling,
    VectorScaling,
)
from skcal.metrics import (
    calibration_report,
    confidence_interval,
    negative_log_likelihood,
    paired_comparison,
)
from skcal.model_selection import CalibratorSearchCV

X, y = load_digits(return_X_y=True)
X_train, X_rest, y_train, y_rest = train_test_split(
    X, y, train_size=600, stratify=y, random_state=0
)
X_cal, X_test, y_cal, y_test = train_test_split(
    X_rest, y_rest, train_size=600, stratify=y_rest, random_state=0
)
model = make_pipeline(
    StandardScaler(), LogisticRegression(C=1e4, max_iter=5000)
)
model.fit(X_train, y_train)

logits_train = model.decision_function(X_train)
logits_cal = model.decision_function(X_cal)
logits_test = model.decision_function(X_test)
proba_test = softmax(logits_test, axis=1)  # the uncalibrated probabilities

for part, logits, labels in [
    ("train", logits_train, y_train),
    ("test", logits_test, y_test),
]:
    proba = softmax(logits, axis=1)
    print(
        f"{part:>5} ({len(labels)} rows): accuracy "
        f"{np.mean(proba.argmax(axis=1) == labels):.3f}, mean confidence "
        f"{proba.max(axis=1).mean():.3f}, NLL "
        f"{negative_log_likelihood(labels, proba):.4f}"
    )
wrong = proba_test.argmax(axis=1) != y_test
print(
    f"{wrong.sum()} test mistakes, made with a mean confidence of "
    f"{proba_test.max(axis=1)[wrong].mean():.3f}"
)

# %%
# On the test part the mean confidence exceeds the accuracy, and the test
# log loss (NLL) is far above the training one: the model is wrong on new
# images with high confidence, and the log loss punishes exactly that.
#
# The candidates
# --------------
# One candidate per family, with its defaults: no calibration (the
# baseline), temperature scaling (one parameter), vector scaling and
# structured matrix scaling (penalised affine maps of the logits), the
# Dirichlet calibrator (a full matrix, penalised toward temperature
# scaling), SMART (a temperature per row, read from the gap between its two
# largest logits by a small network), two one-vs-rest maps (isotonic and
# beta calibration) and a spline map of the top-label confidence.
#
# ``CalibratorSearchCV()`` without a list uses a smaller default set: the
# first four, structured vector scaling and, from 5,000 rows and 20 classes,
# a cross-validated Dirichlet calibrator; SMART, isotonic, beta and spline
# calibration, never selected on the user guide's benchmark, are compared
# here to show what the guard does with them. This list adds an
# unpenalised full Dirichlet calibrator, 10 x 11 = 110 free parameters,
# which the small-data guard refuses to fit on 600 rows: it asks for 10
# *events* per parameter (rows the classifier gets wrong, or right if those
# are fewer), and this classifier is wrong on only a few dozen of them.
candidates = [
    IdentityCalibrator(),
    TemperatureScaling(device="cpu"),
    VectorScaling(device="cpu"),
    StructuredMatrixScaling(device="cpu"),
    DirichletCalibrator(device="cpu"),
    (
        "Dirichlet, no penalty",
        DirichletCalibrator(reg_lambda=0.0, device="cpu"),
    ),
    SMARTCalibrator(device="cpu"),
    IsotonicCalibrator(),
    BetaCalibrator(),
    SplineCalibrator(),
]

# %%
# The search
# ----------
# Five stratified folds of the calibration part: each candidate is fitted
# on four fifths and scored (negative log loss, higher is better) on the
# fifth. (``verbose=1`` would print a long line per candidate as it
# finishes; the table below gives the same numbers.) Warnings raised by a
# candidate inside the folds are gathered and raised once per candidate,
# with the number of folds that raised them; they are printed here rather
# than left to the warnings machinery. (Beta calibration warns here: its
# unpenalised per-class fits meet scores that nearly separate the classes.)
search = CalibratorSearchCV(candidates, cv=5, random_state=0)
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    search.fit(logits_cal, y_cal)
for w in caught:
    print(textwrap.fill(f"{w.category.__name__}: {w.message}", 79))

# %%
# ``cv_results_`` holds the same keys as scikit-learn's ``GridSearchCV``
# (``pandas.DataFrame(search.cv_results_)`` makes a table of it), plus the
# parameter count of the guard and the reason a candidate was skipped.
# Here, compactly, with the score turned back into a log loss (lower is
# better):
results = search.cv_results_
rows = []
for k, name in enumerate(results["candidate"]):
    reason = results["skipped_reason"][k]
    rows.append(
        {
            "candidate": name,
            "params": (
                "-"
                if np.isnan(results["n_parameters"][k])
                else f"{results['n_parameters'][k]:.0f}"
            ),
            "CV NLL": -results["mean_test_score"][k],
            "std": results["std_test_score"][k],
            "rank": str(results["rank_test_score"][k]),
            "note": reason.split(":")[0] if reason else "",
        }
    )
print(
    f"{'candidate':<24} {'params':>6} {'CV NLL':>7} {'std':>6} "
    f"{'rank':>4}  note"
)
for r in rows:
    print(
        f"{r['candidate']:<24} {r['params']:>6} {r['CV NLL']:>7.4f} "
        f"{r['std']:>6.4f} {r['rank']:>4}  {r['note']}"
    )
print(f"\nselected: {search.selected_}")
print(textwrap.fill(search.selection_reason_, 79))

# %%
# How to read this. The best mean score is not automatically the choice: the
# guard compares the best candidate with the simple ones *row by row*, on
# the log loss of each calibration row when it was held out. A richer map is
# kept only if its mean gain exceeds one standard error of these paired
# differences (the one-standard-error rule, a lenient bar: about a one-sided
# test at 16%), otherwise the simpler candidate wins. The fold standard
# deviations (``std``) are much larger than these paired standard errors
# because they mostly measure how hard each fold's rows are, which is the
# same for every candidate; the paired differences cancel it. The
# non-parametric maps (isotonic, spline) do worse than no calibration at all on
# some folds: the classifier is wrong on only about 25 of the 480 rows of a
# training fold, too few to learn a shape from. This is the reason to
# search, rather than pick a method by its reputation.
#
# The selected calibrator on the test part
# ----------------------------------------
# The search is itself a calibrator: ``search.predict_proba`` is the
# selected candidate refitted on the whole calibration part. The report
# gives each metric with a 90% bootstrap interval over the test rows (NLL:
# log loss; ECE, cwECE, ECCE, smECE: calibration errors; lower is better
# for all but accuracy).
proba_selected = search.predict_proba(logits_test)
for title, proba in [
    ("uncalibrated", proba_test),
    (f"selected ({search.selected_})", proba_selected),
]:
    print(f"--- {title}")
    print(calibration_report(y_test, proba, random_state=0))
    print()

# %%
# Calibration lowers the test log loss and every calibration error, and the
# ECCE test no longer rejects perfect calibration. Accuracy may move a
# little: temperature scaling never changes the predicted class, but a
# matrix map such as structured matrix scaling can. As each report's note
# says, calibration errors grow on resampled rows, so their percentile
# intervals can sit above the estimate; ``calibration_report(...,
# method="bca")`` corrects this, at the cost of a jackknife (a few times
# slower).

# %%
# The candidates' cross-fitted scores and their test log losses
# --------------------------------------------------------------
# Left: what the search saw, the mean cross-fitted log loss of each
# candidate, with bars of one standard deviation over the five folds.
# Right: for teaching only (a test set must never be used to choose), each
# candidate refitted on the whole calibration part and scored on the test
# part, with a 90% bootstrap interval from
# :func:`~skcal.metrics.confidence_interval`. The skipped candidate has no
# score; the selected one is in colour.
names = list(results["candidate"])
scored = [
    k for k, reason in enumerate(results["skipped_reason"]) if not reason
]
estimators = [c[1] if isinstance(c, tuple) else c for c in candidates]
test_proba, test_ci = {}, {}
for k in scored:
    if names[k] == search.selected_:
        test_proba[names[k]] = proba_selected
    else:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # reported by the search already
            calibrator = clone(estimators[k]).fit(logits_cal, y_cal)
        test_proba[names[k]] = calibrator.predict_proba(logits_test)
    test_ci[names[k]] = confidence_interval(
        "negative_log_likelihood",
        y_test,
        test_proba[names[k]],
        n_resamples=1000,
        confidence_level=0.9,
        random_state=0,
    )

X_MAX = 1.0  # log losses beyond it are written at the right edge
split_keys = [key for key in results if key.startswith("split")]
positions = np.arange(len(names))[::-1]
fig, (ax_cv, ax_test) = plt.subplots(
    1, 2, figsize=(11, 5), sharex=True, sharey=True
)
for k, name in enumerate(names):
    color = "C3" if name == search.selected_ else "0.3"
    if results["skipped_reason"][k]:
        for ax in (ax_cv, ax_test):
            ax.text(
                0.01,
                positions[k],
                "skipped by the guard",
                va="center",
                color="0.4",
                fontstyle="italic",
            )
        continue
    # left: mean +- std over the folds, and each fold's log loss (ticks)
    mean, std = -results["mean_test_score"][k], results["std_test_score"][k]
    folds = [-results[key][k] for key in split_keys]
    ax_cv.plot(folds, [positions[k]] * len(folds), "|", color=color, alpha=0.6)
    ax_cv.errorbar(
        mean, positions[k], xerr=std, fmt="o", color=color, capsize=3
    )
    if mean > X_MAX:
        ax_cv.text(
            X_MAX,
            positions[k],
            f"{mean:.2f} +- {std:.2f} >",
            ha="right",
            va="bottom",
            color=color,
        )
    # right: the test log loss and its 90% bootstrap interval
    ci = test_ci[name]
    ax_test.errorbar(
        ci.estimate,
        positions[k],
        xerr=[[ci.estimate - ci.low], [ci.high - ci.estimate]],
        fmt="o",
        color=color,
        capsize=3,
    )
    if ci.estimate > X_MAX:
        ax_test.text(
            X_MAX,
            positions[k],
            f"{ci.estimate:.2f} >",
            ha="right",
            va="bottom",
            color=color,
        )
ax_cv.set_yticks(positions, names)
ax_cv.set_xlim(0, X_MAX)
ax_cv.set_xlabel("cross-fitted log loss: mean +- 1 std, ticks: the 5 folds")
ax_cv.set_title("What the search saw (calibration part)")
ax_test.set_xlabel("test log loss, with its 90% bootstrap interval")
ax_test.set_title("How it held up (test part)")
for ax in (ax_cv, ax_test):
    ax.grid(axis="x", alpha=0.3)
fig.tight_layout()
plt.show()

# %%
# The intervals on the right are *marginal*: each says how much that
# candidate's test log loss would move with another draw of test rows.
# Marginal intervals of two candidates often overlap even when one is
# better on nearly every row, because both move together with the rows'
# difficulty. To compare two calibrations, compare them on the same
# resampled rows.
#
# Is the improvement real? A paired comparison
# --------------------------------------------
# :func:`~skcal.metrics.paired_comparison` resamples the test rows and
# computes, on each resample, the log loss of ``A`` (the selected
# calibrator) minus that of ``B``. Against no calibration
# (``IdentityCalibrator``), and against temperature scaling, the simplest
# real calibrator:
for baseline in ["IdentityCalibrator", "TemperatureScaling"]:
    if baseline == search.selected_:
        print(f"{baseline} is the selected calibrator itself.")
        continue
    comparison = paired_comparison(
        "negative_log_likelihood",
        y_test,
        proba_selected,
        test_proba[baseline],
        n_resamples=1000,
        confidence_level=0.9,
        random_state=0,
    )
    verdict = (
        "A is better: the interval lies below 0"
        if comparison.high < 0
        else "B is better: the interval lies above 0"
        if comparison.low > 0
        else "no clear difference: the interval contains 0"
    )
    print(f"A = {search.selected_}, B = {baseline}")
    print(
        textwrap.fill(
            str(comparison), 77, initial_indent="  ", subsequent_indent="  "
        )
    )
    print(f"  -> {verdict}")

# %%
# How to read it: a negative difference means the selected calibrator has
# the lower (better) test log loss. If the whole 90% interval lies below 0
# and the p-value is small, the gain is unlikely to be an accident of which
# rows landed in the test part; an interval that straddles 0 means this
# test set cannot tell the two apart, whatever the two point estimates say.
# The gain over no calibration is usually clear; the gain of a richer map
# over temperature scaling is usually small, often within the noise of a
# few hundred test rows, which is why the search asks a richer map to beat
# the simple ones by more than the noise before choosing it. The interval
# covers the randomness of the test rows only: the calibration part, and so
# the fitted calibrators, are held fixed.
