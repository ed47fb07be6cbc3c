"""Isotonic and histogram-binning calibrators against independent references."""

import numpy as np
import pytest
from scipy.special import softmax
from sklearn.isotonic import IsotonicRegression

from skcal import HistogramBinningCalibrator, IsotonicCalibrator
from skcal.calibrators._one_vs_rest import renormalize_inplace
from skcal.exceptions import MissingClassWarning
from skcal.utils._testing import make_miscalibrated_logits


def _floor_renormalize(Q):
    Q = np.maximum(Q, 1e-12)
    return Q / Q.sum(axis=1, keepdims=True)


def _sklearn_isotonic_per_class(P, y, Pt):
    """scikit-learn's isotonic regression of each column, applied to Pt."""
    return np.column_stack(
        [
            IsotonicRegression(y_min=0, y_max=1, out_of_bounds="clip")
            .fit(P[:, k], y == k)
            .predict(Pt[:, k])
            for k in range(P.shape[1])
        ]
    )


def test_isotonic_is_sklearn_isotonic_per_class():
    X, y = make_miscalibrated_logits(1500, 4, temperature=2.0, random_state=0)
    Xt, _ = make_miscalibrated_logits(500, 4, temperature=2.0, random_state=1)
    P, Pt = softmax(X, axis=1), softmax(Xt, axis=1)
    Q = _sklearn_isotonic_per_class(P, y, Pt)
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
    out = renormalize_inplace(Q.copy(), np.log(P))  # softmax(log P) = P
    np.testing.assert_allclose(out[0], P[0])
    np.testing.assert_allclose(out[1], _floor_renormalize(Q[1:])[0])


# ------------------------------------- vectorised predict against per class
def _edge_points(edges, rng):
    """Random points, the edges themselves and their neighbouring floats."""
    inner = np.clip(edges, 0.0, 1.0)
    return np.concatenate(
        [
            rng.uniform(size=200),
            rng.uniform(size=50) ** 20,  # near 0, where probabilities crowd
            inner,
            np.nextafter(inner, -np.inf).clip(0.0, 1.0),
            np.nextafter(inner, np.inf).clip(0.0, 1.0),
            [0.0, 5e-324, 1e-300, 1.0, np.nextafter(1.0, 0.0)],
        ]
    )


@pytest.mark.parametrize("n_bins", [1, 2, 3, 5, 15, 64, 1000])
def test_step_map_is_searchsorted_per_column(n_bins):
    from skcal.calibrators._binning import _step_map_inplace

    rng = np.random.default_rng(n_bins)
    uniform = np.arange(n_bins + 1) / n_bins
    # quantile-like edges: ties, edges closer than any grid, tiny ones
    crowded = np.sort(
        np.concatenate([[0.0, 1e-9, 1e-9, 2e-9], rng.uniform(size=max(n_bins - 3, 0))])
    )[: n_bins + 1]
    for edges in (uniform, crowded) if n_bins >= 3 else (uniform,):
        points = _edge_points(edges, rng)
        n_columns = 3
        P = np.column_stack([rng.permutation(points) for _ in range(n_columns)])
        values = rng.uniform(size=(n_columns, len(edges) - 1))
        # bin = number of interior edges <= p (edges [l, u), clipped)
        expected = np.column_stack(
            [
                values[k][np.digitize(P[:, k], edges[1:-1], right=False)]
                for k in range(n_columns)
            ]
        )
        got = P.copy()
        _step_map_inplace(got, edges, values)
        np.testing.assert_array_equal(got, expected)


def test_step_map_outside_the_unit_interval_is_searchsorted_per_block():
    # the grid holds [0, 1]: a block of rows with a value outside it is
    # searched instead (the other blocks keep the grid)
    from skcal.calibrators._binning import _BLOCK, _step_map_inplace

    rng = np.random.default_rng(0)
    edges = np.arange(16) / 15
    n_columns = 4
    n_rows = 3 * _BLOCK // n_columns + 5  # 4 blocks of rows
    P = rng.uniform(size=(n_rows, n_columns))
    P[_BLOCK // n_columns + 7, 1] = -0.25  # in the second block
    P[-1, 3] = 1.5  # in the last
    values = rng.uniform(size=(n_columns, 15))
    expected = np.column_stack(
        [values[k][np.clip(np.digitize(P[:, k], edges), 1, 15) - 1] for k in range(4)]
    )
    got = P.copy()
    _step_map_inplace(got, edges, values)
    np.testing.assert_array_equal(got, expected)
    assert got[_BLOCK // n_columns + 7, 1] == values[1][0]
    assert got[-1, 3] == values[3][-1]


def test_histogram_predict_is_the_per_class_step_map():
    # uniform bins (the vectorised path) with a class absent from calibration
    # and extreme scores, against the fitted steps applied column by column
    X, y = make_miscalibrated_logits(2000, 5, temperature=2.0, random_state=4)
    rng = np.random.default_rng(5)
    Xt = rng.normal(size=(500, 5)) * rng.choice([0.1, 3.0, 300.0], size=(500, 1))
    keep = y != 2
    with pytest.warns(MissingClassWarning):
        hb = HistogramBinningCalibrator(n_bins=15, classes=np.arange(5)).fit(
            X[keep], y[keep]
        )
    Pt = softmax(Xt, axis=1)
    Q = np.column_stack(
        [
            hb.bin_values_[k][np.digitize(Pt[:, k], hb.bin_edges_[k][1:-1])]
            for k in range(5)
        ]
    )
    np.testing.assert_allclose(hb.predict_proba(Xt), _floor_renormalize(Q), atol=1e-12)


@pytest.mark.parametrize("cls", [IsotonicCalibrator, HistogramBinningCalibrator])
def test_rows_whose_values_are_all_zero_keep_the_softmax(cls):
    X, y = make_miscalibrated_logits(600, 3, temperature=2.0, random_state=6)
    est = cls().fit(X, y)
    Xt, _ = make_miscalibrated_logits(100, 3, temperature=2.0, random_state=7)
    values = est.values_ if cls is IsotonicCalibrator else est.bin_values_
    kept = [v.copy() for v in values]
    for v in values:
        v[:] = 0.0  # every class calibrated to 0 everywhere
    np.testing.assert_allclose(est.predict_proba(Xt), softmax(Xt, axis=1), rtol=1e-12)
    values[1][:] = kept[1]  # one class left: the floored renormalisation
    P = softmax(Xt, axis=1)
    if cls is IsotonicCalibrator:
        q1 = np.interp(P[:, 1], est.thresholds_[1], kept[1])
    else:
        q1 = kept[1][np.digitize(P[:, 1], est.bin_edges_[1][1:-1])]
    Q = np.column_stack([np.zeros(100), q1, np.zeros(100)])
    expected = np.where((Q.sum(axis=1) > 0)[:, None], _floor_renormalize(Q), P)
    np.testing.assert_allclose(est.predict_proba(Xt), expected, rtol=1e-12)


def test_isotonic_predict_on_extreme_scores_is_sklearn_per_class():
    X, y = make_miscalibrated_logits(1500, 4, temperature=2.0, random_state=8)
    rng = np.random.default_rng(9)
    Xt = rng.normal(size=(400, 4)) * rng.choice([0.1, 3.0, 1e3], size=(400, 1))
    Xt[0] = 0.0
    P, Pt = softmax(X, axis=1), softmax(Xt, axis=1)
    Q = _sklearn_isotonic_per_class(P, y, Pt)
    iso = IsotonicCalibrator().fit(X, y)
    expected = np.where((Q.sum(axis=1) > 0)[:, None], _floor_renormalize(Q), Pt)
    np.testing.assert_allclose(iso.predict_proba(Xt), expected, atol=1e-12)


def test_isotonic_knots_are_sklearn_with_weights_ties_and_zero_weights():
    # skcal fits the isotonic maps with scipy's PAVA: the knots and values
    # of scikit-learn's IsotonicRegression, including tied scores (merged
    # into weighted means) and zero weights (dropped)
    from skcal.calibrators._binning import _isotonic_knots

    rng = np.random.default_rng(5)
    for n, weighted in [(3000, True), (3000, False), (2, True), (1, False)]:
        x = np.round(rng.beta(0.5, 2.0, size=n), 2)  # many ties
        target = (rng.random(n) < x).astype(np.float64)
        w = rng.uniform(0.2, 3.0, size=n) if weighted else None
        if weighted and n > 10:  # zero weights, at scores seen only there
            w[::10] = 0.0
            x[::10] = rng.uniform(size=x[::10].size)
        knots, values = _isotonic_knots(x, target, w)
        ref = IsotonicRegression(y_min=0, y_max=1, out_of_bounds="clip").fit(
            x, target, sample_weight=w
        )
        np.testing.assert_array_equal(knots, ref.X_thresholds_)
        np.testing.assert_allclose(values, ref.y_thresholds_, rtol=1e-12, atol=0)


def test_isotonic_knots_closer_than_the_smallest_normal_stay_finite():
    """Was: NaN rows from predict_proba on real wordnet logits times 100.
    Probabilities ~1e-320 make knots whose gap is subnormal; np.interp's
    slope (a value step over that gap) overflows, and it returns inf."""
    from skcal.utils._proba import interp

    xp = np.array([0.0, 1e-320, 2e-320, 0.5, 1.0])
    fp = np.array([0.0, 0.5, 0.25, 0.6, 1.0])
    x = np.array([0.5e-320, 1.5e-320, 1e-320, 0.3, 0.75, 2.0, np.nan])
    with np.errstate(all="ignore"):
        assert not np.isfinite(np.interp(x[:2], xp, fp)).all()  # the defect
    got = interp(x, xp, fp)
    # the fraction of each segment, by hand; elsewhere np.interp's own values
    np.testing.assert_allclose(got[:2], [0.25, 0.375], rtol=1e-12)
    np.testing.assert_array_equal(got[2:6], np.interp(x[2:6], xp, fp))
    assert np.isnan(got[6])
    # through the calibrator, on its fitted map
    X, y = make_miscalibrated_logits(300, 3, temperature=2.0, random_state=0)
    iso = IsotonicCalibrator().fit(X, y)
    iso.thresholds_[1], iso.values_[1] = xp, fp
    X_test = np.array([[0.0, -736.0, 5.0], [0.0, -740.0, 1.0]])
    proba = iso.predict_proba(X_test)
    assert np.isfinite(proba).all()
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, rtol=1e-12)
