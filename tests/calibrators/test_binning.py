"""Isotonic, centred isotonic, histogram-binning and scaling-binning calibrators
against independent references."""

import functools
import re
import warnings

import numpy as np
import pytest
from scipy.special import softmax
from sklearn.isotonic import IsotonicRegression

from skcal import (
    CenteredIsotonicCalibrator,
    HistogramBinningCalibrator,
    IsotonicCalibrator,
    ScalingBinningCalibrator,
)
from skcal.calibrators._one_vs_rest import renormalize_inplace
from skcal.exceptions import MissingClassWarning
from skcal.utils._testing import make_miscalibrated_logits
from skcal.utils._validation import check_probabilities


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


@pytest.mark.parametrize(
    "cls",
    [
        IsotonicCalibrator,
        HistogramBinningCalibrator,
        CenteredIsotonicCalibrator,
        ScalingBinningCalibrator,
    ],
)
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


@pytest.mark.parametrize("opposite", [True, False])
def test_binary_isotonic_maps_are_sklearn_with_one_shared_sort(opposite):
    # two columns that rank the rows oppositely (1 - p and p) share one sort,
    # reversed for the first; otherwise each column is sorted on its own:
    # either way each map is scikit-learn's, with ties and zero weights
    from skcal.calibrators._binning import _opposite_orders

    rng = np.random.default_rng(7)
    p = np.round(rng.beta(2.0, 0.7, size=4000), 3)  # many ties
    P = np.column_stack([1.0 - p, p])
    if not opposite:  # rows at p = 1 (tied) whose others' share still varies
        P[::7] = [0.0, 1.0]
        P[::7, 0] = np.geomspace(1e-30, 1e-18, P[::7].shape[0])
    y = (rng.random(p.size) < p**1.5).astype(int)
    w = rng.uniform(0.2, 3.0, size=p.size)
    w[::11] = 0.0
    Q = check_probabilities(P, floor=True)  # what the calibrator fits on
    assert (_opposite_orders(Q)[0] is not None) == opposite
    iso = IsotonicCalibrator(input="proba").fit(P, y, sample_weight=w)
    for k in range(2):
        ref = IsotonicRegression(y_min=0, y_max=1, out_of_bounds="clip").fit(
            Q[:, k], y == k, sample_weight=w
        )
        np.testing.assert_array_equal(iso.thresholds_[k], ref.X_thresholds_)
        np.testing.assert_allclose(
            iso.values_[k], ref.y_thresholds_, rtol=1e-12, atol=0
        )


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


# ------------------------------------------------- centred isotonic (CIR)
@functools.cache
def _cached_scores(name):
    from sklearn import datasets
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import train_test_split
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    X, y = getattr(datasets, f"load_{name}")(return_X_y=True)
    # weak models, so that no class's probability separates its labels on
    # wine and breast cancer (an unregularised sigmoid then has no optimum)
    model = {
        "digits": LogisticRegression(C=1e-4, max_iter=1000),
        "wine": make_pipeline(StandardScaler(), LogisticRegression()),
        "breast_cancer": make_pipeline(StandardScaler(), LogisticRegression(C=1e-2)),
    }[name]
    if name == "wine":
        X = X[:, :4]
    Xtr, Xr, ytr, yr = train_test_split(X, y, test_size=0.6, random_state=0)
    Xc, Xt, yc, yt = train_test_split(Xr, yr, test_size=0.5, random_state=0)
    model.fit(Xtr, ytr)
    return model.predict_proba(Xc), yc, model.predict_proba(Xt), yt


def _real_scores(name):
    """Held-out LogisticRegression probabilities of a bundled dataset:
    calibration and test halves ``(P, y, Pt, yt)`` (fresh copies)."""
    return tuple(a.copy() for a in _cached_scores(name))


def test_cir_hand_case():
    # p_1 = x, y as below: PAVA gives 0, .5, .5, 1, 1, 1; the blocks are
    # {.1} (value 0: its ends kept), {.2, .3} (collapsed at its mean .25)
    # and {.4, .5, .6} (value 1: its ends kept)
    x = np.array([0.1, 0.2, 0.3, 0.4, 0.5, 0.6])
    y = np.array([0, 1, 0, 1, 1, 1])
    cir = CenteredIsotonicCalibrator(input="proba").fit(np.column_stack([1 - x, x]), y)
    np.testing.assert_allclose(cir.thresholds_[1], [0.1, 0.25, 0.4, 0.6], rtol=1e-12)
    np.testing.assert_allclose(cir.values_[1], [0.0, 0.5, 1.0, 1.0])
    # class 0 on p_0 = 1 - x: targets 0, 0, 0, 1, 0, 1 sorted by p_0, PAVA
    # 0, 0, 0, .5, .5, 1: knots .4, .6 (value 0), .75 (.5), .9 (value 1)
    np.testing.assert_allclose(cir.thresholds_[0], [0.4, 0.6, 0.75, 0.9], rtol=1e-12)
    np.testing.assert_allclose(cir.values_[0], [0.0, 0.0, 0.5, 1.0])
    # at p_1 = .2: class 1 interpolates (.1, 0)-(.25, .5): 1/3; class 0 at
    # p_0 = .8 interpolates (.75, .5)-(.9, 1): 2/3; the row sums to 1
    proba = cir.predict_proba(np.array([[0.8, 0.2]]))
    np.testing.assert_allclose(proba, [[2 / 3, 1 / 3]], rtol=1e-12)
    # isotonic regression is flat there (.5 on [.2, .3]); CIR is not
    iso = IsotonicCalibrator(input="proba").fit(np.column_stack([1 - x, x]), y)
    assert iso.values_[1][1] == iso.values_[1][2] == 0.5


def test_cir_keeps_a_tied_group_at_its_block_value():
    """Scores within 1e-15 of their group's first are one point (as in
    scikit-learn); a tied group of negatives ends the block of value 0,
    whose ends CIR keeps at 0 (the paper's map, computed by hand here).

    cir_model (probmetrics' ``cir``) departs here: it builds the centred
    points from ``transform`` of each training score, which interpolates
    the pooled scores 1.4e-15, 1.7e-15 and 2.0e-15 towards the next
    group's value (2/7, 4/7, 6/7 of the way to .5: 1/7, 2/7, 3/7), then
    pools those points again into a knot of (0 + 1/7 + 2/7 + 3/7) / 4 =
    3/14 at 1.1e-15: a lift of the block's value 0 that the data do not show
    (seen on wordnet_supersenses, where it gave probabilities of 1e-13 to
    1e-6 about 2e-4)."""
    x = np.array([1e-20, 1.1e-15, 1.4e-15, 1.7e-15, 2.0e-15, 2.15e-15, 0.3, 0.9])
    y = np.array([0, 0, 0, 0, 0, 1, 0, 1])
    cir = CenteredIsotonicCalibrator(input="proba").fit(np.column_stack([1 - x, x]), y)
    # PAVA on the groups: 0 (1e-20), 0 (1.1e-15, four scores), then 1 and 0
    # pooled at .5 (collapsed at (2.15e-15 + .3) / 2), 1 (.9)
    np.testing.assert_allclose(cir.thresholds_[1], [1e-20, 1.1e-15, 0.15, 0.9])
    np.testing.assert_array_equal(cir.values_[1], [0.0, 0.0, 0.5, 1.0])
    cir_model = pytest.importorskip("cir_model")
    ref = cir_model.CenteredIsotonicRegression().fit(x, y.astype(np.float64))
    np.testing.assert_allclose(ref.transform(np.array([1.1e-15])), [3 / 14])


@pytest.mark.parametrize("weighted", [False, True])
def test_cir_is_cir_model_per_class_on_digits(weighted):
    cir_model = pytest.importorskip("cir_model")

    P, y, Pt, _ = _real_scores("digits")
    w = np.random.default_rng(0).uniform(0.5, 2.0, len(y)) if weighted else None
    cir = CenteredIsotonicCalibrator(input="proba").fit(P, y, sample_weight=w)
    for k in range(P.shape[1]):
        ref = cir_model.CenteredIsotonicRegression().fit(
            P[:, k], (y == k).astype(np.float64), sample_weight=w
        )
        # cir_model refuses to extrapolate: probmetrics clips to the range
        x = np.clip(Pt[:, k], P[:, k].min(), P[:, k].max())
        mine = np.interp(Pt[:, k], cir.thresholds_[k], cir.values_[k])
        np.testing.assert_allclose(mine, ref.transform(x), rtol=0, atol=1e-12)


def _dyadic_rows(P):
    """``P`` rounded to multiples of 2^-20 (exact in float32), each row's
    largest entry set to 1 minus the others (an exact sum of 1)."""
    Q = np.round(P * 2.0**20) / 2.0**20
    rows, top = np.arange(len(Q)), Q.argmax(axis=1)
    Q[rows, top] = 0.0
    Q[rows, top] = 1.0 - Q.sum(axis=1)
    assert (Q >= 0).all() and (Q.sum(axis=1) == 1.0).all()
    return Q


def test_cir_is_probmetrics_cir_on_wine_and_digits():
    pytest.importorskip("cir_model")
    from probmetrics.calibrators import get_calibrator

    for name in ["wine", "digits"]:
        P, y, Pt, _ = _real_scores(name)
        # probmetrics rounds each class's probabilities to float32: give
        # both probabilities that float32 holds exactly and whose rows sum
        # to 1 exactly (multiples of 2^-20)
        P32, P32t = _dyadic_rows(P), _dyadic_rows(Pt)
        ref = get_calibrator("cir").fit(P32, y)
        cir = CenteredIsotonicCalibrator(input="proba").fit(P32, y)
        for k in range(P.shape[1]):
            binary = np.column_stack([1 - P32t[:, k], P32t[:, k]])
            r = ref.bin_calibs_[k].predict_proba(binary)[:, 1]
            mine = np.interp(P32t[:, k], cir.thresholds_[k], cir.values_[k])
            np.testing.assert_allclose(mine, r, rtol=0, atol=1e-12)
        # the renormalised rows: floors of 1e-12 (skcal) and 1e-30 (probmetrics)
        np.testing.assert_allclose(
            cir.predict_proba(P32t), ref.predict_proba(P32t), rtol=0, atol=1e-9
        )


# -------------------------------------------------------- scaling-binning
def _tight_reference(monkeypatch):
    """uncertainty-calibration, its Platt step solved to convergence.

    Its ``get_platt_scaler`` fits ``LogisticRegression(C=1e10)`` with
    lbfgs' default tolerance (1e-4), which leaves the slope 1e-4 off the
    optimum; the same model with ``tol=1e-12`` is the optimum both fit.
    """
    import calibration
    import calibration.utils as cu
    from sklearn.linear_model import LogisticRegression

    def tight(**params):
        return LogisticRegression(**{**params, "tol": 1e-12, "max_iter": 100000})

    monkeypatch.setattr(cu, "LogisticRegression", tight)
    return calibration


def test_equal_mass_bins_are_get_equal_bins():
    cu = pytest.importorskip("calibration.utils")
    from skcal.calibrators._binning import _equal_mass_edges

    rng = np.random.default_rng(0)
    for n, n_bins in [(5, 2), (7, 10), (100, 10), (101, 15), (50, 3)]:
        q = rng.uniform(size=n)
        q[: n // 5] = q[0]  # ties: duplicated edges merge
        ref = cu.get_equal_bins(q, num_bins=n_bins)
        edges = _equal_mass_edges(q, np.ones(n), n_bins)
        np.testing.assert_array_equal(edges, ref)
        # integer weights (the smallest 1) are repetitions, any scale
        w = rng.integers(1, 4, size=n)
        w[0] = 1
        rep = cu.get_equal_bins(np.repeat(q, w), num_bins=n_bins)
        np.testing.assert_array_equal(_equal_mass_edges(q, w * 1.0, n_bins), rep)
        np.testing.assert_array_equal(_equal_mass_edges(q, w * 0.25, n_bins), rep)
    # hand case: .1 .2 .3 | .4 .5 -> an edge halfway between .3 and .4
    q = np.array([0.5, 0.1, 0.4, 0.3, 0.2])
    np.testing.assert_allclose(_equal_mass_edges(q, np.ones(5), 2), [0.35, 1.0])


@pytest.mark.parametrize("dataset", ["wine", "breast_cancer"])
def test_scaling_binning_marginal_is_uncertainty_calibration(monkeypatch, dataset):
    pytest.importorskip("calibration")
    calibration = _tight_reference(monkeypatch)
    P, y, Pt, _ = _real_scores(dataset)
    ref = calibration.PlattBinnerMarginalCalibrator(len(P), 10)
    ref.train_calibration(P, y)
    R = ref.calibrate(Pt)
    sb = ScalingBinningCalibrator(input="proba").fit(P, y)
    assert [v.size for v in sb.bin_values_] == [10] * P.shape[1]
    # the bins are the reference's; their values are means of the sigmoid
    # of one and the same optimum (to the tight lbfgs' precision)
    for k in range(P.shape[1]):
        platt, lr = calibration.utils.get_platt_scaler(P[:, k], y == k, get_clf=True)
        np.testing.assert_allclose(
            [sb.coef_[k], sb.intercept_[k]],
            [lr.coef_[0, 0], lr.intercept_[0]],
            rtol=1e-6,
        )
        ref_edges = calibration.utils.get_equal_bins(platt(P[:, k]), num_bins=10)
        np.testing.assert_allclose(sb.bin_edges_[k][1:], ref_edges, rtol=0, atol=1e-8)
    Q = np.maximum(R, 1e-12)
    np.testing.assert_allclose(
        sb.predict_proba(Pt), Q / Q.sum(axis=1, keepdims=True), rtol=0, atol=1e-7
    )


@pytest.mark.parametrize("dataset", ["wine", "digits"])
def test_scaling_binning_top_label_is_uncertainty_calibration(monkeypatch, dataset):
    pytest.importorskip("calibration")
    calibration = _tight_reference(monkeypatch)
    P, y, Pt, _ = _real_scores(dataset)
    ref = calibration.PlattBinnerTopCalibrator(len(P), 10)
    ref.train_calibration(P, y)
    conf = ref.calibrate(Pt)
    sb = ScalingBinningCalibrator(input="proba", mode="top_label").fit(P, y)
    assert sb.coef_.shape == (1,) and sb.bin_values_[0].size == 10
    proba = sb.predict_proba(Pt)
    rows, top = np.arange(len(Pt)), Pt.argmax(axis=1)
    np.testing.assert_allclose(proba[rows, top], conf, rtol=0, atol=1e-6)
    # the other classes share 1 - c in proportion to their probabilities
    rest = Pt.copy()
    rest[rows, top] = 0.0
    expected = rest * ((1 - conf) / rest.sum(axis=1))[:, None]
    expected[rows, top] = conf
    np.testing.assert_allclose(proba, expected, rtol=0, atol=1e-6)


def test_scaling_binning_stock_reference_agrees_to_its_tolerance():
    calibration = pytest.importorskip("calibration")

    P, y, Pt, _ = _real_scores("breast_cancer")
    ref = calibration.PlattBinnerMarginalCalibrator(len(P), 10)
    ref.train_calibration(P, y)
    R = ref.calibrate(Pt)
    sb = ScalingBinningCalibrator(input="proba").fit(P, y)
    # lbfgs stops at a gradient of 1e-4: the maps differ by about that
    np.testing.assert_allclose(
        sb.predict_proba(Pt), R / R.sum(1, keepdims=True), atol=1e-3
    )


def test_scaling_binning_hand_case():
    # two classes; p_1 below, labels alternate so that the sigmoid of the
    # class-1 log-odds is the identity (a = 1, b = 0 is not optimal in
    # general, so the test reads the fitted sigmoid and checks the rest)
    x = np.array([0.1, 0.2, 0.3, 0.6, 0.7, 0.8])
    y = np.array([0, 1, 0, 1, 0, 1])
    sb = ScalingBinningCalibrator(input="proba", n_bins=2).fit(
        np.column_stack([1 - x, x]), y
    )
    a, b = sb.coef_[1], sb.intercept_[1]
    q = 1 / (1 + np.exp(-(a * np.log(x / (1 - x)) + b)))
    # equal-mass bins of the six q: edge halfway between the 3rd and 4th
    np.testing.assert_allclose(sb.bin_edges_[1], [0, (q[2] + q[3]) / 2, 1])
    np.testing.assert_allclose(sb.bin_values_[1], [q[:3].mean(), q[3:].mean()])
    # the fitted sigmoid is the logistic regression's optimum: zero gradient
    s = np.log(x / (1 - x))
    np.testing.assert_allclose([np.sum(q - y), np.sum((q - y) * s)], 0, atol=1e-10)


def test_scaling_binning_absent_class_gets_the_mean_map():
    X, y = make_miscalibrated_logits(600, 3, temperature=2.0, random_state=11)
    y[y == 2] = 0
    with pytest.warns(MissingClassWarning):
        sb = ScalingBinningCalibrator().fit(X, y)
    assert sb.coef_[2] == pytest.approx(sb.coef_[:2].mean())
    assert sb.intercept_[2] == pytest.approx(sb.intercept_[:2].mean())
    # the mean of the two step maps, on the union of their edges
    grid = np.linspace(0, 1, 1001)
    mean = np.mean(
        [
            sb.bin_values_[k][np.searchsorted(sb.bin_edges_[k][1:], grid)]
            for k in (0, 1)
        ],
        axis=0,
    )
    got = sb.bin_values_[2][np.searchsorted(sb.bin_edges_[2][1:], grid)]
    np.testing.assert_allclose(got, mean, rtol=1e-12)


def test_isotonic_pools_scores_within_sklearns_tie_tolerance():
    """scikit-learn's IsotonicRegression treats sorted scores less than
    ``finfo(float64).resolution`` (1e-15) above their group's first as ties;
    so does skcal, so that softmax probabilities below ~1e-15 (which a
    confident network gives most classes) pool into one point. On fashion-
    like data (many tiny probabilities, weights) the fits agree."""
    from sklearn.isotonic import IsotonicRegression

    from skcal.calibrators._binning import _pava

    rng = np.random.default_rng(0)
    for _ in range(200):
        n = int(rng.integers(2, 60))
        x = np.concatenate(
            [
                rng.uniform(0, 3e-15, size=n // 2),
                rng.choice([0.1, 0.2, 0.3], size=n - n // 2),
                rng.uniform(size=3),
            ]
        )
        rng.shuffle(x)
        target = rng.integers(0, 2, size=x.size).astype(float)
        weight = rng.uniform(0.1, 2.0, size=x.size)
        knots, _, values = _pava(x, target, weight)
        reference = IsotonicRegression(y_min=0, y_max=1).fit(x, target, weight)
        np.testing.assert_allclose(values, reference.predict(knots), atol=1e-12)
    # the calibrator's fitted maps: sklearn's, class by class
    logits = rng.normal(size=(400, 3)) * 30.0  # many probabilities below 1e-15
    y = rng.integers(0, 3, size=400)
    P = softmax(logits, axis=1)
    fitted = IsotonicCalibrator(input="proba").fit(P, y)
    # the maps are fitted on the validated rows (renormalised: a unit in the
    # last place moves a score across a step), so the reference is too
    Q = check_probabilities(P, floor=True)
    for k in range(3):
        reference = IsotonicRegression(y_min=0, y_max=1, out_of_bounds="clip")
        reference.fit(Q[:, k], y == k)
        ours = np.interp(Q[:, k], fitted.thresholds_[k], fitted.values_[k])
        np.testing.assert_allclose(ours, reference.predict(Q[:, k]), atol=1e-12)


def _reference_scaling_binning(p, a, b, edges, values):
    """uncertainty-calibration's map (``get_platt_scaler``'s calibrator, then
    ``get_discrete_calibrator``'s bin look-up) with the fitted parameters:
    the sigmoid of the clipped log-odds, its bin ``(l, u]``, the bin's value."""
    from scipy.special import expit

    x = np.clip(p, 1e-12, 1 - 1e-12)
    q = expit(a * (np.log(x) - np.log1p(-x)) + b)
    return values[np.minimum(np.searchsorted(edges[1:], q), values.size - 1)]


@pytest.mark.parametrize("n_bins", [1, 3, 10, 40])
def test_scaling_binning_map_is_the_reference_map_entry_by_entry(n_bins):
    """The cut look-up on ``p`` gives the reference formula's bin for every
    entry: probabilities on and next to the calibration ones (edges halfway
    between two tied scores are the scores themselves), 0, 1, below and
    above the clip, and steep, flat and decreasing sigmoids."""
    from skcal.calibrators._binning import _scaling_binning_map

    rng = np.random.default_rng(n_bins)
    p = np.concatenate(
        [rng.choice(rng.uniform(size=30), 300), 10.0 ** rng.uniform(-15, 0, 300)]
    )
    y = rng.uniform(size=p.size) < p
    sb = ScalingBinningCalibrator(input="proba", n_bins=n_bins)
    sb.fit(np.column_stack([1 - p, p]), y.astype(int))
    edges, values = sb.bin_edges_[1], sb.bin_values_[1]
    near = np.concatenate([p, np.nextafter(p, 0), np.nextafter(p, 1)])
    tails = 1.0 - 10.0 ** rng.uniform(-16, 0, 300)
    test = np.concatenate([near, tails, [0.0, 1.0, 1e-13, 1e-12, 1 - 1e-12, 0.5]])
    a0, b0 = sb.coef_[1], sb.intercept_[1]
    for a, b in [(a0, b0), (50 * a0, b0), (1e-9, b0), (-a0, b0), (0.0, -3.0)]:
        expected = _reference_scaling_binning(test, a, b, edges, values)
        got = _scaling_binning_map(test, a, b, edges, values)
        np.testing.assert_array_equal(got, expected)
    proba = sb.predict_proba(np.column_stack([1 - test, test]))
    Q = np.column_stack(
        [
            _reference_scaling_binning(1 - test, *(sb.coef_[0], sb.intercept_[0]),
                                       sb.bin_edges_[0], sb.bin_values_[0]),
            _reference_scaling_binning(test, a0, b0, edges, values),
        ]
    )  # fmt: skip
    Q = np.maximum(Q, 1e-12)
    np.testing.assert_allclose(proba, Q / Q.sum(axis=1, keepdims=True), rtol=1e-15)


def test_scaling_binning_map_follows_edited_parameters():
    """A map whose parameters are set by hand after the fit is the formula's
    (the cuts stored at fit are not reused for other parameters)."""
    X, y = make_miscalibrated_logits(500, 3, temperature=2.0, random_state=3)
    sb = ScalingBinningCalibrator().fit(X, y)
    sb.coef_ = sb.coef_ * 3.0
    sb.bin_edges_ = [e.copy() for e in sb.bin_edges_]
    P = softmax(X, axis=1)
    for k in range(3):
        expected = _reference_scaling_binning(
            P[:, k], sb.coef_[k], sb.intercept_[k], sb.bin_edges_[k], sb.bin_values_[k]
        )
        np.testing.assert_array_equal(sb._map_column(k, P[:, k].copy()), expected)


def test_scaling_binning_map_follows_edges_edited_in_place():
    """Fitted edges overwritten in place (same array objects) are read: the
    stored cuts are compared with the current edges by value."""
    X, y = make_miscalibrated_logits(3000, 4, temperature=2.0, random_state=3)
    sb = ScalingBinningCalibrator().fit(X, y)
    rng = np.random.default_rng(0)
    edges = sb.bin_edges_[0]
    edges[1:-1] = np.sort(rng.uniform(size=edges.size - 2))
    P = softmax(X, axis=1)
    expected = _reference_scaling_binning(
        P[:, 0], sb.coef_[0], sb.intercept_[0], edges, sb.bin_values_[0]
    )
    np.testing.assert_array_equal(sb._map_column(0, P[:, 0].copy()), expected)


@pytest.mark.parametrize("verbose", [0, 1, 2])
def test_cir_verbose_shows_a_bar_over_the_classes(verbose, capsys):
    X, y = make_miscalibrated_logits(300, 3, random_state=0)
    quiet = CenteredIsotonicCalibrator().fit(X, y)
    capsys.readouterr()
    cir = CenteredIsotonicCalibrator(verbose=verbose).fit(X, y)
    captured = capsys.readouterr()
    assert captured.out == ""
    if verbose == 0:
        assert captured.err == ""
    else:
        assert "CenteredIsotonicCalibrator:" in captured.err
        assert "3/3" in captured.err
    lines = re.findall(r"class (\d+): (\d+) knots", captured.err)
    expected = [(str(k), str(len(v))) for k, v in enumerate(quiet.values_)]
    assert lines == (expected if verbose == 2 else [])
    for a, b in zip(cir.values_, quiet.values_):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("mode", ["marginal", "top_label"])
def test_probabilities_are_fitted_as_validated_without_their_logs(mode):
    """With ``input="proba"``, one-vs-rest maps are fitted on the validated
    probabilities themselves (renormalised rows, not the softmax of their
    logs, which differs in the last bits): isotonic knots are among them,
    exactly; scaling-binning fits the same Platt map as on their logs."""
    rng = np.random.default_rng(3)
    P = softmax(rng.normal(size=(600, 5)) * 4.0, axis=1)
    y = rng.integers(0, 5, size=600)
    Q = check_probabilities(P, floor=True)
    iso = IsotonicCalibrator(input="proba").fit(P, y)
    for k in range(5):
        assert np.isin(iso.thresholds_[k], Q[:, k]).all()
    sb = ScalingBinningCalibrator(input="proba", mode=mode).fit(P, y)
    ref = ScalingBinningCalibrator(input="logits", mode=mode).fit(np.log(Q), y)
    np.testing.assert_allclose(sb.coef_, ref.coef_, rtol=1e-9)
    np.testing.assert_allclose(sb.intercept_, ref.intercept_, rtol=1e-9, atol=1e-12)


def _exact_cir(x, target, weight):
    """Centred isotonic regression by hand, in exact fractions: PAVA (pool
    while the left value is at least the right one) on the distinct scores,
    its constant stretches collapsed at their weighted mean score (ends kept
    for values 0 and 1 and at the two outer ends), as in Oron & Flournoy."""
    from fractions import Fraction

    order = np.argsort(x, kind="stable")
    blocks = []  # [sum of w * t, sum of w, sum of w * x, first x, last x]
    for i in order:
        w = Fraction(int(weight[i]))
        blocks.append([w * int(target[i]), w, w * Fraction(x[i]), x[i], x[i]])
        while len(blocks) > 1 and (
            blocks[-2][0] / blocks[-2][1] >= blocks[-1][0] / blocks[-1][1]
        ):
            s, w, sx, _, last = blocks.pop()
            blocks[-1][0] += s
            blocks[-1][1] += w
            blocks[-1][2] += sx
            blocks[-1][4] = last
    knots, values = [], []
    for b, (s, w, sx, first, last) in enumerate(blocks):
        v = s / w
        points = [float(sx / w)]
        if v in (0, 1) or b == 0:
            points.insert(0, first)
        if v in (0, 1):
            points[-1] = last
        elif b == len(blocks) - 1:
            points.append(last)
        knots += points
        values += [float(v)] * len(points)
    return np.array(knots), np.array(values)


def test_cir_integer_weights_are_repeated_rows_and_the_exact_fit():
    """Rows of weight 2 to 5: scipy's running weighted means left one
    constant stretch (4/10) of class 1 as two blocks a unit in the last
    place apart (0.4 and 0.4000000000000001), and the centred knots, found
    by exact equality, collapsed each at its own mean: maps 0.044 apart
    from the fit on the repeated rows (probabilities 0.026). The exact fit
    (fractions) is the reference; the repeated rows and cir_model (on the
    weighted rows) give it too."""
    rng = np.random.default_rng(28)
    n, n_classes = int(rng.integers(20, 80)), int(rng.integers(2, 4))
    P = softmax(rng.normal(size=(n, n_classes)) * 2, axis=1)
    y = rng.integers(0, n_classes, n)
    y[:n_classes] = np.arange(n_classes)
    w = rng.integers(1, 6, n)
    weighted = CenteredIsotonicCalibrator(input="proba").fit(P, y, sample_weight=w)
    repeated = CenteredIsotonicCalibrator(input="proba").fit(
        np.repeat(P, w, axis=0), np.repeat(y, w)
    )
    grid = np.linspace(0, 1, 20001)
    for k in range(n_classes):
        knots, values = _exact_cir(P[:, k], y == k, w)
        exact = np.interp(grid, knots, values)
        for fitted in (weighted, repeated):
            mine = np.interp(grid, fitted.thresholds_[k], fitted.values_[k])
            np.testing.assert_allclose(mine, exact, rtol=0, atol=1e-12)
    Pt = softmax(rng.normal(size=(300, n_classes)) * 2, axis=1)
    np.testing.assert_allclose(
        weighted.predict_proba(Pt), repeated.predict_proba(Pt), rtol=0, atol=1e-12
    )
    cir_model = pytest.importorskip("cir_model")
    for k in range(n_classes):
        ref = cir_model.CenteredIsotonicRegression(out_of_bounds="clip")
        ref.fit(P[:, k], (y == k).astype(np.float64), sample_weight=w.astype(float))
        inside = grid[(grid >= P[:, k].min()) & (grid <= P[:, k].max())]
        mine = np.interp(inside, weighted.thresholds_[k], weighted.values_[k])
        np.testing.assert_allclose(mine, ref.predict(inside), rtol=0, atol=1e-12)


def test_scaling_binning_ties_go_to_the_class_ranked_first_by_the_input():
    """Issue 49: scaling-binning's step maps give classes whose scores share
    a bin exactly equal values, and predict gave the tie to the first
    column. The tie rule: among classes tied at the maximum of
    predict_proba, the one with the larger input score. Hand-constructed:
    class 1 is given class 0's map, and two rows put classes 0 and 1 in
    that map's top bin (computed here from the map's formula) in either
    order."""
    n_classes = 12
    logits, y = make_miscalibrated_logits(3000, n_classes, random_state=0)
    sb = ScalingBinningCalibrator(input="proba").fit(softmax(logits, axis=1), y)
    for name in ("bin_edges_", "bin_values_"):
        getattr(sb, name)[1] = getattr(sb, name)[0].copy()
    sb.coef_[1], sb.intercept_[1] = sb.coef_[0], sb.intercept_[0]
    a, b, upper = sb.coef_[0], sb.intercept_[0], sb.bin_edges_[0][1:]

    def bin_of(p):  # the reference's map: the bin of expit(a logit(p) + b)
        q = 1.0 / (1.0 + np.exp(-(a * np.log(p / (1 - p)) + b)))
        return np.searchsorted(upper, q, side="left")

    p_lo, p_hi = 0.3, 0.45
    assert bin_of(p_lo) == bin_of(p_hi) == len(upper) - 1  # the top bin
    rest = (1.0 - p_lo - p_hi) / (n_classes - 2)
    X = np.full((2, n_classes), rest)
    X[0, :2], X[1, :2] = (p_lo, p_hi), (p_hi, p_lo)
    P = sb.predict_proba(X)
    assert (P[:, 0] == P[:, 1]).all() and (P[:, 0] == P.max(axis=1)).all()
    np.testing.assert_array_equal(sb.predict(X), [1, 0])


def test_scaling_binning_warns_when_it_moves_the_top_class_on_many_classes():
    """Issue 49: marginal scaling-binning on many classes (10 equal-mass
    bins per class, under 4% positives each) gives unrelated classes
    similar values and moved the top class of many rows, silently (letter:
    accuracy 0.948 -> 0.652). The fit now says so, with the accuracy of
    the calibration rows before and after (computed here by hand); on few
    classes, where it keeps the accuracy, it says nothing."""
    from skcal.exceptions import AccuracyDropWarning

    X, y = make_miscalibrated_logits(4000, 26, random_state=0)
    with pytest.warns(AccuracyDropWarning, match="changes the top class") as caught:
        sb = ScalingBinningCalibrator().fit(X, y)
    before = np.mean(X.argmax(axis=1) == y)
    after = np.mean(sb.predict(X) == y)
    assert after < before - 0.02
    message = str(caught[0].message)
    assert f"{before:.4f} -> {after:.4f}" in message and "mode='top_label'" in message
    X, y = make_miscalibrated_logits(4000, 4, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", AccuracyDropWarning)
        ScalingBinningCalibrator().fit(X, y)


def _ties_one_ulp_off(n=600, seed=0):
    """Probabilities with two decimals (ties across rows), a third of the
    rows moved to sum to 1 + 1 ulp and a third to 1 - 1 ulp by their last
    entry; column 0 as given in every row."""
    rng = np.random.default_rng(seed)
    a = rng.integers(1, 50, n)
    b = rng.integers(1, 50, n)
    P = np.column_stack([a, b, 100 - a - b]) / 100.0
    P[:, 2] = 1.0 - P[:, 0] - P[:, 1]
    for rows, target in (
        (slice(0, n // 3), 1.0 + 2.0**-52),
        (slice(n // 3, 2 * n // 3), 1.0 - 2.0**-53),
    ):
        for i in range(n)[rows]:
            for _ in range(8):  # nudge the last entry until the sum is off
                s = P[i].sum()
                if s == target:
                    break
                P[i, 2] = np.nextafter(P[i, 2], np.inf if s < target else -np.inf)
    y = np.where(rng.random(n) < 1.5 * P[:, 0], 0, 1 + (rng.random(n) < 0.5))
    return P, y


@pytest.mark.parametrize("cls", [IsotonicCalibrator, CenteredIsotonicCalibrator])
def test_rows_one_ulp_off_one_are_read_as_given(cls):
    # rows that sum to 1 within rounding are not divided by their sums:
    # dividing by 1 +- 1 ulp moved their entries by an ulp and split the
    # ties of the two-decimal scores (more knots than scikit-learn's)
    P, y = _ties_one_ulp_off()
    sums = P.sum(axis=1)
    assert (sums != 1.0).sum() > 300 and np.abs(sums - 1.0).max() <= 2.0**-52
    np.testing.assert_array_equal(check_probabilities(P), P)
    est = cls(input="proba").fit(P, y)
    target = (y == 0).astype(np.float64)
    ref = IsotonicRegression(y_min=0, y_max=1, out_of_bounds="clip").fit(
        P[:, 0], target
    )
    if cls is IsotonicCalibrator:
        assert len(ref.X_thresholds_) > 5
        np.testing.assert_array_equal(est.thresholds_[0], ref.X_thresholds_)
        np.testing.assert_allclose(est.values_[0], ref.y_thresholds_, rtol=1e-12)
    else:
        cir_model = pytest.importorskip("cir_model")
        ref = cir_model.CenteredIsotonicRegression().fit(P[:, 0], target)
        mine = np.interp(P[:, 0], est.thresholds_[0], est.values_[0])
        np.testing.assert_allclose(mine, ref.transform(P[:, 0]), rtol=0, atol=1e-12)


@pytest.mark.parametrize("weighted", [False, True])
def test_fit_confidence_is_sklearn_isotonic_of_the_confidence(weighted):
    """The one-map protocol (what TopVersusAll calls): ``fit_confidence``
    fits scikit-learn's isotonic regression of ``correct`` on the
    confidence (weights included), ``predict_confidence`` is its map, and
    the map of class 0 is the mirror image, ``1 - f(1 - q)``."""
    rng = np.random.default_rng(3)
    c = rng.uniform(0.2, 1.0, 2000)
    correct = (rng.random(2000) < c**2).astype(float)
    w = rng.uniform(0.5, 2.0, 2000) if weighted else None
    iso = IsotonicCalibrator().fit_confidence(c, correct, w)
    ref = IsotonicRegression(y_min=0.0, y_max=1.0, out_of_bounds="clip")
    ref.fit(c, correct, sample_weight=w)
    grid = np.linspace(0.0, 1.0, 301)
    np.testing.assert_allclose(
        iso.predict_confidence(grid), ref.predict(grid), atol=1e-12
    )
    assert iso.classes_.tolist() == [0, 1] and iso.n_features_in_ == 2
    # the fitted binary calibrator maps the columns [1 - p, p] (its mirror)
    logits = np.log(np.column_stack([1.0 - grid[1:-1], grid[1:-1]]))
    P = IsotonicCalibrator().set_params(classes=[0, 1]).fit_confidence(c, correct, w)
    Q = P.predict_proba(logits)
    expected1 = ref.predict(grid[1:-1])
    expected0 = 1.0 - ref.predict(grid[1:-1])  # mirror: 1 - f(1 - (1 - p))
    expected = np.column_stack([expected0, expected1])
    expected = np.maximum(expected, 1e-12)
    np.testing.assert_allclose(
        Q, expected / expected.sum(axis=1, keepdims=True), atol=1e-9
    )


def test_fit_confidence_refuses_what_is_not_a_confidence():
    """The declared input: probabilities in [0, 1], one ``correct`` in {0, 1}
    per row, non-negative weights; each refused with what was expected."""
    iso = HistogramBinningCalibrator()
    c, correct = np.array([0.3, 0.8, 0.9]), np.array([0.0, 1.0, 1.0])
    with pytest.raises(ValueError, match=r"probabilities in \[0, 1\].*not logits"):
        iso.fit_confidence(np.array([-2.0, 0.5, 3.0]), correct)
    with pytest.raises(ValueError, match=r"correct as 3 values in \{0, 1\}"):
        iso.fit_confidence(c, np.array([0.0, 2.0, 1.0]))
    with pytest.raises(ValueError, match="non-negative, finite"):
        iso.fit_confidence(c, correct, np.array([1.0, -1.0, 1.0]))
    iso.fit_confidence(c, correct)
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        iso.predict_confidence(np.array([np.nan, 0.5]))
