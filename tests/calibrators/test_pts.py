"""Parameterized temperature scaling (PTS; Tomani et al., ECCV 2022)."""

import numpy as np
import pytest

from skcal import ParameterizedTemperatureScaling, TemperatureScaling
from skcal.metrics import negative_log_likelihood
from skcal.utils._testing import make_miscalibrated_logits, sample_labels


def gap_dependent(n, seed):
    """Over-confident at small logit gaps, under-confident at large ones."""
    rng = np.random.default_rng(seed)
    true = 2 * rng.standard_normal((n, 10))
    p = np.exp(true - true.max(1, keepdims=True))
    y = sample_labels(p / p.sum(1, keepdims=True), rng)
    top2 = np.sort(true, axis=1)[:, -2:]
    T = np.where(top2[:, 1] - top2[:, 0] < 1.0, 3.0, 0.7)
    return true * T[:, None], y


def test_pts_keeps_every_prediction_including_ties(device):
    X, y = gap_dependent(3000, 0)
    pts = ParameterizedTemperatureScaling(random_state=0, device=device).fit(X, y)
    rng = np.random.default_rng(1)
    Z = rng.normal(size=(5000, 10)) * rng.uniform(0.1, 20, size=(5000, 1))
    Z[:500, 3] = Z[:500].max(1)  # ties with the maximum
    pred = pts.predict(Z)
    np.testing.assert_array_equal(pred, Z.argmax(1))
    assert np.isfinite(pts.predict_proba(Z)).all()


def test_pts_beats_temperature_scaling_on_gap_dependent_miscalibration(device):
    X, y = gap_dependent(5000, 2)
    Xt, yt = gap_dependent(5000, 3)
    pts = ParameterizedTemperatureScaling(random_state=0, device=device).fit(X, y)
    ts = TemperatureScaling(device=device).fit(X, y)
    assert negative_log_likelihood(yt, pts.predict_proba(Xt)) < (
        negative_log_likelihood(yt, ts.predict_proba(Xt)) - 0.05
    )
    assert pts.n_top_ == 10 and pts.best_iter_ >= 1


def test_pts_is_reproducible_and_small_inputs_work():
    X, y = gap_dependent(600, 4)
    a = ParameterizedTemperatureScaling(random_state=3, device="cpu").fit(X, y)
    b = ParameterizedTemperatureScaling(random_state=3, device="cpu").fit(X, y)
    for wa, wb in zip(a.coefs_, b.coefs_):
        np.testing.assert_array_equal(wa, wb)
    small = ParameterizedTemperatureScaling(random_state=0, device="cpu")
    X3, y3 = make_miscalibrated_logits(60, 3, random_state=5)
    assert small.fit(X3, y3).n_top_ == 3
    with pytest.raises(ValueError, match="at least 4"):
        small.fit(X3[:3], y3[:3] * 0 + np.array([0, 1, 2]))


@pytest.mark.parametrize("shift", [150.0, -1e4, 1e6])
def test_pts_ignores_a_constant_added_to_every_logit(shift):
    """Was: logits + 150 clipped to +-100 gave uniform probabilities and
    changed 78% of the predictions."""
    X, y = make_miscalibrated_logits(600, 5, temperature=2.0, random_state=30)
    params = dict(random_state=0, max_iter=30, device="cpu")
    ref = ParameterizedTemperatureScaling(**params).fit(X, y)
    est = ParameterizedTemperatureScaling(**params).fit(X + shift, y)
    np.testing.assert_allclose(
        est.predict_proba(X + shift), ref.predict_proba(X), atol=1e-9
    )
    np.testing.assert_array_equal(est.predict(X + shift), X.argmax(axis=1))


def test_pts_does_not_depend_on_the_logits_units():
    """Was: logits of size ~1e4 changed 51% of the predicted classes."""
    X, y = make_miscalibrated_logits(600, 5, temperature=2.0, random_state=31)
    params = dict(random_state=0, max_iter=30, device="cpu")
    ref = ParameterizedTemperatureScaling(**params).fit(X, y)
    est = ParameterizedTemperatureScaling(**params).fit(X * 5e3, y)
    assert est.temperature_init_ == pytest.approx(5e3 * ref.temperature_init_)
    np.testing.assert_allclose(
        est.predict_proba(X * 5e3), ref.predict_proba(X), atol=1e-9
    )
    np.testing.assert_array_equal(est.predict(X * 5e3), X.argmax(axis=1))


@pytest.mark.parametrize(
    "n, n_classes, validation_fraction",
    [
        (20, 5, 0.9),  # stratified: 18 validation rows, a training part of 2 < 5
        (4, 2, 0.9),  # round(0.9 * 4) = 4 validation rows: no training part
    ],
)
def test_pts_large_validation_fraction_still_leaves_a_training_part(
    n, n_classes, validation_fraction
):
    """Was: sklearn's train_test_split raised (a training part smaller than the
    number of classes cannot be stratified; an empty one is no split)."""
    X, _ = make_miscalibrated_logits(n, n_classes, random_state=0)
    y = np.arange(n) % n_classes  # every class at least twice
    pts = ParameterizedTemperatureScaling(
        validation_fraction=validation_fraction,
        max_iter=5,
        random_state=0,
        device="cpu",
    ).fit(X, y)
    proba = pts.predict_proba(X)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, rtol=1e-12)
    np.testing.assert_array_equal(proba.argmax(axis=1), X.argmax(axis=1))


def test_pts_validation_part_is_stratified_on_the_labels_not_the_columns():
    """The held-out rows follow the label proportions (Tomani et al. 2022 hold
    out a random part; stratifying keeps every class in both parts), and
    listing the classes in another column order, with X's columns reordered
    to match, selects the same rows and gives the same model."""
    X, y = make_miscalibrated_logits(400, 4, temperature=2.0, random_state=7)
    y = np.where(np.arange(400) < 40, 3, y)  # class 3: 40 rows of 400 at least
    labels = np.array([10, 20, 30, 40])
    order = np.array([2, 0, 3, 1])
    params = dict(validation_fraction=0.25, max_iter=20, random_state=1, device="cpu")
    ref = ParameterizedTemperatureScaling(**params).fit(X, labels[y])
    perm = ParameterizedTemperatureScaling(classes=labels[order], **params).fit(
        X[:, order], labels[y]
    )
    train, val = ref._train_validation_split(y, 5)
    assert len(val) == 100 and len(train) == 300
    np.testing.assert_array_equal(np.sort(np.concatenate([train, val])), np.arange(400))
    expected = 0.25 * np.bincount(y, minlength=4)
    assert np.all(np.abs(np.bincount(y[val], minlength=4) - expected) <= 1)
    # perm's y_index is y re-coded to the column order `order`
    y_perm = np.argsort(order)[y]
    for a, b in zip(perm._train_validation_split(y_perm, 5), (train, val)):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_allclose(
        perm.predict_proba(X[:, order]), ref.predict_proba(X)[:, order], rtol=1e-9
    )
