"""The one-vs-rest calibrators' AccuracyDropWarning, judged out of sample
(issue 49, item 2).

Maps judged on the rows they were fitted on keep (here: raise) those rows'
accuracy while losing it on new rows: histogram binning on 45 classes
(wordnet_supersenses) lost 1.3 points of test accuracy without a warning.
The drop is now cross-fitted on three stratified folds of the calibration
rows (two beyond a million scores).
"""

import re
import warnings

import numpy as np
import pytest

from skcal import (
    BBQCalibrator,
    BetaCalibrator,
    CenteredIsotonicCalibrator,
    ENIRCalibrator,
    HistogramBinningCalibrator,
    IsotonicCalibrator,
    PlattCalibrator,
    ScalingBinningCalibrator,
)
from skcal.calibrators._one_vs_rest import held_out_folds, stratified_folds
from skcal.exceptions import AccuracyDropWarning
from skcal.utils._testing import make_miscalibrated_logits


def _fit_recording(make, X, y, **fit_params):
    """The fitted calibrator and the messages of its AccuracyDropWarnings."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        cal = make().fit(X, y, **fit_params)
    messages = [
        str(w.message) for w in caught if issubclass(w.category, AccuracyDropWarning)
    ]
    return cal, messages


def _held_out(message):
    """The held-out accuracies named in a warning, as two strings."""
    found = re.search(r"held-out accuracy (\d\.\d{4}) -> (\d\.\d{4})", message)
    assert found, message
    return found.group(1), found.group(2)


def test_warns_when_held_out_accuracy_drops_though_in_sample_rises():
    """Histogram binning of 30 classes on 1,000 rows (15 bins per class, a
    few dozen positives each): on its own calibration rows its top class
    is right more often than the input's (0.37 -> 0.47), on 20,000 new rows
    of the same distribution less often (0.38 -> 0.32). The in-sample check
    said nothing; the held-out one warns, and its estimate is on the side of
    the new rows."""
    X, y = make_miscalibrated_logits(21000, 30, random_state=1)
    X_cal, y_cal, X_new, y_new = X[:1000], y[:1000], X[1000:], y[1000:]
    cal, messages = _fit_recording(HistogramBinningCalibrator, X_cal, y_cal)
    in_before = np.mean(X_cal.argmax(axis=1) == y_cal)
    in_after = np.mean(cal.predict(X_cal) == y_cal)
    assert in_after > in_before  # in sample: no loss at all
    new_before = np.mean(X_new.argmax(axis=1) == y_new)
    new_after = np.mean(cal.predict(X_new) == y_new)
    assert new_after < new_before - 0.03  # on new rows: a material loss
    assert len(messages) == 1
    before, after = _held_out(messages[0])
    assert before == f"{in_before:.4f}"
    assert float(after) < float(before) - 0.01
    # both the held-out and the in-sample accuracies are named
    assert f"accuracy there {in_before:.4f} -> {in_after:.4f}" in messages[0]
    assert "TopVersusAll" in messages[0]


def test_warns_with_probabilities_as_input():
    """The same problem given as probabilities: the same warning, with the
    accuracy of the calibration rows computed by hand; the caller's array
    is not modified."""
    X, y = make_miscalibrated_logits(1000, 30, random_state=1)
    P = np.exp(X - X.max(axis=1, keepdims=True))
    P /= P.sum(axis=1, keepdims=True)
    given = P.copy()
    cal, messages = _fit_recording(
        lambda: HistogramBinningCalibrator(input="proba"), P, y
    )
    np.testing.assert_array_equal(P, given)
    assert len(messages) == 1
    before, after = _held_out(messages[0])
    assert float(after) < float(before) - 0.01
    in_before = np.mean(P.argmax(axis=1) == y)
    in_after = np.mean(cal.predict(P) == y)
    assert f"accuracy there {in_before:.4f} -> {in_after:.4f}" in messages[0]


def test_held_out_accuracy_is_the_cross_fitted_argmax_accuracy():
    """By hand, through the public API: each fold's rows predicted by a
    calibrator fitted (``fit``) on the other folds' rows only; the message
    names that accuracy and the input's."""
    n, n_classes = 300, 12
    X, y = make_miscalibrated_logits(n, n_classes, random_state=0)
    _, messages = _fit_recording(HistogramBinningCalibrator, X, y)
    assert len(messages) == 1
    n_folds = held_out_folds(X.shape)
    assert n_folds == 3  # a small problem: three folds
    folds = stratified_folds(y, n_folds)
    predicted = np.empty(n, dtype=np.int64)
    for fold in range(n_folds):
        train, test = folds != fold, folds == fold
        other = HistogramBinningCalibrator(classes=np.arange(n_classes))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            other.fit(X[train], y[train])
        predicted[test] = other.predict(X[test])
    expected = (
        f"{np.mean(X.argmax(axis=1) == y):.4f}",
        f"{np.mean(predicted == y):.4f}",
    )
    assert _held_out(messages[0]) == expected


def test_stratified_folds_are_balanced_per_class_and_reproducible():
    y = np.repeat(np.arange(5), [1, 2, 7, 10, 31])
    np.random.default_rng(3).shuffle(y)
    folds = stratified_folds(y, 2)
    assert set(np.unique(folds)) == {0, 1}
    for k in range(5):
        counts = np.bincount(folds[y == k], minlength=2)
        assert abs(counts[0] - counts[1]) <= 1
    assert abs(np.sum(folds == 0) - np.sum(folds == 1)) <= 1
    np.testing.assert_array_equal(folds, stratified_folds(y.copy(), 2))
    folds = stratified_folds(y, 3)
    for k in range(5):
        counts = np.bincount(folds[y == k], minlength=3)
        assert counts.max() - counts.min() <= 1
    assert held_out_folds((10_000, 100)) == 3
    assert held_out_folds((10_000, 1_000)) == 2


@pytest.mark.parametrize(
    "make",
    [
        HistogramBinningCalibrator,
        IsotonicCalibrator,
        CenteredIsotonicCalibrator,
        ScalingBinningCalibrator,
        BBQCalibrator,
        ENIRCalibrator,
        PlattCalibrator,
        BetaCalibrator,
    ],
)
def test_no_warning_without_a_loss(make):
    """Four classes, 3,000 rows: the maps keep the top class out of sample
    too (checked here on 20,000 new rows), and nothing is said."""
    X, y = make_miscalibrated_logits(23000, 4, random_state=0)
    X_cal, y_cal, X_new, y_new = X[:3000], y[:3000], X[3000:], y[3000:]
    cal, messages = _fit_recording(make, X_cal, y_cal)
    new_before = np.mean(X_new.argmax(axis=1) == y_new)
    assert np.mean(cal.predict(X_new) == y_new) > new_before - 0.01
    assert messages == []


def test_zero_weight_rows_and_a_class_in_one_fold_only():
    """A class with one row (absent from one fold's fit: the mean map there)
    and rows of weight 0 are handled: the fit equals one without those rows
    (the check changes no map), and three rows fit without a warning."""
    X, y = make_miscalibrated_logits(600, 5, random_state=0)
    y = y.copy()
    y[0] = 5  # a sixth class, one row
    X = np.column_stack([X, np.zeros(len(X))])
    weight = np.ones(len(X))
    weight[1::3] = 0.0
    cal, _ = _fit_recording(IsotonicCalibrator, X, y, sample_weight=weight)
    kept, _ = _fit_recording(IsotonicCalibrator, X[weight > 0], y[weight > 0])
    np.testing.assert_allclose(cal.predict_proba(X), kept.predict_proba(X), atol=1e-12)
    X3, y3 = make_miscalibrated_logits(3, 3, random_state=0)
    cal, messages = _fit_recording(IsotonicCalibrator, X3, y3)
    assert messages == [] and cal.predict(X3).shape == (3,)


def test_beyond_a_million_scores_two_folds_and_no_in_sample_pass():
    """8,400 rows of 120 classes (1,008,000 scores): the check is bounded to
    two folds, and the message leaves out the calibration rows' own
    accuracy (one prediction less)."""
    X, y = make_miscalibrated_logits(8400, 120, random_state=0)
    assert held_out_folds(X.shape) == 2
    _, messages = _fit_recording(HistogramBinningCalibrator, X, y)
    assert len(messages) == 1
    assert "all but one of 2 stratified folds" in messages[0]
    assert "accuracy there" not in messages[0]
    before, after = _held_out(messages[0])
    assert before == f"{np.mean(X.argmax(axis=1) == y):.4f}"
    assert float(after) < float(before) - 0.01


def test_without_a_fold_to_hold_out_the_message_names_in_sample_accuracies():
    """Rows of positive weight in one fold only: no fold can be held out, so
    the maps are judged on the rows they were fitted on, and the message
    says so instead of calling those accuracies held out (computed here by
    hand on the weighted rows)."""
    X, y = make_miscalibrated_logits(4000, 26, random_state=0)
    weight = (stratified_folds(y, held_out_folds(X.shape)) == 0).astype(float)
    cal, messages = _fit_recording(ScalingBinningCalibrator, X, y, sample_weight=weight)
    assert len(messages) == 1
    kept = weight > 0
    before = np.mean(X[kept].argmax(axis=1) == y[kept])
    after = np.mean(cal.predict(X[kept]) == y[kept])
    assert after < before - 0.01
    named = f"accuracy on the calibration rows {before:.4f} -> {after:.4f}"
    assert named in messages[0]
    assert "held-out" not in messages[0] and "accuracy there" not in messages[0]
    assert "too few rows of positive weight to hold a fold out" in messages[0]
