"""Isotonic and histogram-binning calibrators against independent references."""

import numpy as np
import pytest
from scipy.special import softmax
from sklearn.isotonic import IsotonicRegression

from skcal import HistogramBinningCalibrator, IsotonicCalibrator
from skcal.calibrators._binning import _renormalize
from skcal.utils._testing import make_miscalibrated_logits


def _floor_renormalize(Q):
    Q = np.maximum(Q, 1e-12)
    return Q / Q.sum(axis=1, keepdims=True)


def test_isotonic_is_sklearn_isotonic_per_class():
    X, y = make_miscalibrated_logits(1500, 4, temperature=2.0, random_state=0)
    Xt, _ = make_miscalibrated_logits(500, 4, temperature=2.0, random_state=1)
    P, Pt = softmax(X, axis=1), softmax(Xt, axis=1)
    Q = np.column_stack(
        [
            IsotonicRegression(y_min=0, y_max=1, out_of_bounds="clip")
            .fit(P[:, k], y == k)
            .predict(Pt[:, k])
            for k in range(4)
        ]
    )
    iso = IsotonicCalibrator().fit(X, y)
    np.testing.assert_allclose(iso.predict_proba(Xt), _floor_renormalize(Q), atol=1e-12)
    # probabilities in, the same map
    iso_p = IsotonicCalibrator(input="proba").fit(P, y)
    np.testing.assert_allclose(
        iso_p.predict_proba(Pt), iso.predict_proba(Xt), atol=1e-9
    )


def test_histogram_binning_hand_case():
    # two classes, 2 bins [0, .5) and [.5, 1] on p_1
    P = np.array([[0.9, 0.1], [0.8, 0.2], [0.4, 0.6], [0.3, 0.7], [0.2, 0.8]])
    y = np.array([0, 1, 1, 1, 0])
    hb = HistogramBinningCalibrator(input="proba", n_bins=2).fit(P, y)
    # class 1: bin [0, .5) holds rows 0, 1 (1 positive of 2): 0.5; bin
    # [.5, 1] rows 2-4 (2 of 3): 2/3. Class 0: bin [0, .5) rows 2-4 (y=0
    # once): 1/3; bin [.5, 1] rows 0, 1: 1/2.
    np.testing.assert_allclose(hb.bin_values_[1], [0.5, 2 / 3])
    np.testing.assert_allclose(hb.bin_values_[0], [1 / 3, 0.5])
    q = np.array([[0.5, 0.5], [1 / 3, 2 / 3]])  # rows with p_1 = 0.1 and 0.7
    expected = q / q.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(
        hb.predict_proba(np.array([[0.9, 0.1], [0.3, 0.7]])), expected
    )


def test_quantile_bins_and_empty_bins():
    X, y = make_miscalibrated_logits(2000, 3, temperature=2.0, random_state=2)
    hb = HistogramBinningCalibrator(n_bins=10, strategy="quantile").fit(X, y)
    P = softmax(X, axis=1)
    counts = np.histogram(P[:, 0], bins=hb.bin_edges_[0])[0]
    assert counts.max() - counts.min() <= 2
    # an empty uniform bin keeps the mean of its edges
    P2 = np.array([[0.95, 0.05], [0.9, 0.1], [0.15, 0.85], [0.1, 0.9]])
    hb2 = HistogramBinningCalibrator(input="proba", n_bins=4).fit(P2, [0, 0, 1, 1])
    assert hb2.bin_values_[1][1] == pytest.approx(0.375)


@pytest.mark.parametrize("cls", [IsotonicCalibrator, HistogramBinningCalibrator])
def test_weights_are_repetitions(cls):
    X, y = make_miscalibrated_logits(600, 3, temperature=2.0, random_state=3)
    w = np.random.default_rng(0).integers(0, 4, size=600)
    weighted = cls().fit(X, y, sample_weight=w).predict_proba(X)
    repeated = cls().fit(np.repeat(X, w, 0), np.repeat(y, w)).predict_proba(X)
    np.testing.assert_allclose(weighted, repeated, atol=1e-12)


def test_all_zero_rows_keep_their_probabilities():
    Q = np.array([[0.0, 0.0, 0.0], [0.2, 0.0, 0.6]])
    P = np.array([[0.5, 0.3, 0.2], [0.1, 0.1, 0.8]])
    out = _renormalize(Q.copy(), P)
    np.testing.assert_allclose(out[0], P[0])
    np.testing.assert_allclose(out[1], _floor_renormalize(Q[1:])[0])
