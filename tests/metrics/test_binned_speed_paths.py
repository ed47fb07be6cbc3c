"""The fast paths of the binned metrics against a plain numpy implementation.

The top-label ECE validates and takes each row's argmax in one pass without
copying the probabilities; the classwise ECE bins every column at once; the
equal-width bins are found by integer arithmetic instead of a search. The
reference below is written from the definitions (Guo et al. 2017 for the
ECE, Kull et al. 2019 for the classwise ECE, Nguyen & O'Connor 2015 for the
equal-mass bins; see the docstrings of :mod:`skcal.metrics`): edges
``b / n_bins`` or the AdaECE interpolation, ``np.digitize`` for the bins,
one ``np.bincount`` per class, and a loop over classes.
"""

import re

import numpy as np
import pytest

from skcal.metrics import (
    bin_edges,
    classwise_calibration_error,
    expected_calibration_error,
    max_calibration_error,
)
from skcal.metrics._binning import assign_bins
from skcal.utils._testing import sample_labels
from skcal.utils._validation import check_proba_targets, check_probabilities

DTYPES = [np.float64, np.float32, np.float16]


# ------------------------------------------------------------- the reference
def ref_edges(scores, n_bins, strategy, w):
    if strategy == "uniform":
        return np.array([b / n_bins for b in range(n_bins + 1)])
    order = np.argsort(scores, kind="stable")
    positions = len(scores) * (np.cumsum(w[order]) - w[order]) / w.sum()
    grid = np.linspace(0.0, len(scores), n_bins + 1)
    return np.interp(grid, positions, scores[order])


def ref_bins(scores, edges, closed):
    # digitize: right=False gives edges[i-1] <= x < edges[i], right=True
    # gives edges[i-1] < x <= edges[i]; the end bins are closed
    idx = np.digitize(scores, edges, right=closed == "right") - 1
    return np.clip(idx, 0, len(edges) - 2)


def ref_error(scores, targets, w, n_bins, strategy, closed, norm):
    edges = ref_edges(scores, n_bins, strategy, w)
    idx = ref_bins(scores, edges, closed)
    weight = np.bincount(idx, w, n_bins)
    keep = weight > 0
    conf = np.bincount(idx, w * scores, n_bins)[keep] / weight[keep]
    acc = np.bincount(idx, w * targets, n_bins)[keep] / weight[keep]
    frac, gaps = weight[keep] / weight[keep].sum(), np.abs(acc - conf)
    if norm == "l1":
        return np.sum(frac * gaps)
    if norm == "l2":
        return np.sqrt(np.sum(frac * gaps**2))
    return gaps.max()


def ref_proba(P):
    """The float64 probabilities a metric sees: 2-D, clipped to [0, 1]."""
    P = np.asarray(P, dtype=np.float64)
    if P.ndim == 1:
        P = np.column_stack([1.0 - P, P])
    return np.clip(P, 0.0, 1.0)


def ref_top_label(y, P, w, n_bins=15, strategy="uniform", closed="left", norm="l1"):
    P = ref_proba(P)
    w = np.ones(len(y)) if w is None else np.asarray(w, dtype=np.float64)
    pred = np.argmax(P, axis=1)
    conf = P[np.arange(len(y)), pred]
    return ref_error(conf, pred == y, w, n_bins, strategy, closed, norm)


def ref_classwise(y, P, w, n_bins=15, strategy="uniform", closed="left", norm="l1"):
    P = ref_proba(P)
    w = np.ones(len(y)) if w is None else np.asarray(w, dtype=np.float64)
    errors = [
        ref_error(P[:, k], y == k, w, n_bins, strategy, closed, norm)
        for k in range(P.shape[1])
    ]
    return np.mean(errors)


# ------------------------------------------------------------------ the data
def softmax_problem(n, c, seed, dtype=np.float64):
    rng = np.random.default_rng(seed)
    logits = 2.5 * rng.standard_normal((n, c))
    P = np.exp(logits - logits.max(axis=1, keepdims=True))
    P /= P.sum(axis=1, keepdims=True)
    y = sample_labels(P, rng)
    return y, P.astype(dtype), rng.uniform(0.0, 2.0, n)


def on_edges_problem(n, c, n_bins, seed, dtype=np.float64):
    """A third of the rows with entries on multiples of 1 / n_bins (each row
    is ``n_bins`` units spread over the columns), a third one-hot (exact 0
    and 1), a third softmax rows (scores between the edges)."""
    rng = np.random.default_rng(seed)
    units = rng.multinomial(n_bins, rng.dirichlet(np.full(c, 0.5), size=n))
    P = units / n_bins
    third = n // 3
    P[:third] = np.eye(c)[rng.integers(0, c, third)]
    P[third : 2 * third] = softmax_problem(third, c, seed)[1]
    y = sample_labels(np.clip(P + 0.05, 0, 1), rng)
    return y, P.astype(dtype), rng.uniform(0.0, 2.0, n)


def rel(dtype):
    """Tolerance on a metric computed from ``dtype`` probabilities."""
    return 1e-12 if dtype == np.float64 else 1e-9


# -------------------------------------------------------------- bin indices
@pytest.mark.parametrize("closed", ["left", "right"])
@pytest.mark.parametrize("n_bins", [1, 2, 3, 7, 10, 15, 49, 100, 1000])
def test_uniform_bins_equal_digitize_next_to_every_edge(n_bins, closed):
    edges = np.array([b / n_bins for b in range(n_bins + 1)])
    k = np.arange(n_bins + 1)
    base = np.concatenate(
        [edges, k * (1 / n_bins), np.linspace(0, 1, 5 * n_bins + 3), [0.0, 1.0]]
    )
    scores = np.concatenate(
        [base]
        + [np.nextafter(base, d) for d in (-np.inf, np.inf)]
        + [np.nextafter(np.nextafter(base, d), d) for d in (-np.inf, np.inf)]
        + [[-0.5, 1.5, np.nan, np.inf, -np.inf]]
    )
    scores = np.tile(scores, 1 + 70_000 // len(scores))  # several blocks
    expected = ref_bins(scores, edges, closed)
    np.testing.assert_array_equal(assign_bins(scores, edges, closed), expected)
    np.testing.assert_array_equal(
        assign_bins(scores.astype(np.float32), edges, closed),
        ref_bins(scores.astype(np.float32), edges, closed),
    )


# ------------------------------------------------------------ top-label ECE
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("strategy", ["uniform", "quantile"])
@pytest.mark.parametrize("closed", ["left", "right"])
@pytest.mark.parametrize("weighted", [False, True])
def test_top_label_matches_plain_numpy(dtype, strategy, closed, weighted):
    for y, P, w in (
        softmax_problem(3000, 6, seed=1, dtype=dtype),
        on_edges_problem(3000, 4, 8, seed=2, dtype=dtype),  # dyadic: exact in f16
        on_edges_problem(3000, 5, 15, seed=3, dtype=dtype),
    ):
        weights = w if weighted else None
        for norm in ("l1", "l2", "max"):
            expected = ref_top_label(y, P, weights, 15, strategy, closed, norm)
            got = expected_calibration_error(
                y, P, strategy=strategy, closed=closed, norm=norm, sample_weight=weights
            )
            assert got == pytest.approx(expected, rel=rel(dtype), abs=1e-15)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n_bins", [8, 10, 16])
def test_scores_exactly_on_edges_top_label(dtype, n_bins):
    y, P, w = on_edges_problem(2000, 3, n_bins, seed=n_bins, dtype=dtype)
    for closed in ("left", "right"):
        expected = ref_top_label(y, P, w, n_bins, "uniform", closed, "l1")
        got = expected_calibration_error(
            y, P, n_bins=n_bins, closed=closed, sample_weight=w
        )
        assert got == pytest.approx(expected, rel=rel(dtype), abs=1e-15)
    if dtype == np.float64 or n_bins in (8, 16):  # edges exact in dtype
        # the conventions differ on such data: the test tells them apart
        left = expected_calibration_error(y, P, n_bins=n_bins)
        right = expected_calibration_error(y, P, n_bins=n_bins, closed="right")
        assert left != pytest.approx(right, rel=1e-6)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_top_label_one_dimensional_binary(dtype):
    y, P, w = softmax_problem(2000, 2, seed=4, dtype=dtype)
    for strategy in ("uniform", "quantile"):
        expected = ref_top_label(y, P[:, 1], w, 15, strategy, "left", "l1")
        got = expected_calibration_error(y, P[:, 1], strategy=strategy, sample_weight=w)
        assert got == pytest.approx(expected, rel=rel(dtype))


def test_top_label_over_several_validation_blocks():
    # 60,000 x 10 float64 rows span several ~1 MiB blocks of the fused pass
    y, P, w = softmax_problem(60_000, 10, seed=5)
    P[12_345] = np.full(10, 0.1)  # a tie: the first column is the prediction
    for weights in (None, w):
        expected = ref_top_label(y, P, weights)
        got = expected_calibration_error(y, P, sample_weight=weights)
        assert got == pytest.approx(expected, rel=1e-12)
    mce = max_calibration_error(y, P.astype(np.float32), n_bins=20)
    assert mce == pytest.approx(
        ref_top_label(y, P.astype(np.float32), None, 20, norm="max"), rel=1e-9
    )


# ------------------------------------------------------------ classwise ECE
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("strategy", ["uniform", "quantile"])
@pytest.mark.parametrize("closed", ["left", "right"])
@pytest.mark.parametrize("weighted", [False, True])
def test_classwise_matches_plain_numpy(dtype, strategy, closed, weighted):
    for y, P, w in (
        softmax_problem(1500, 7, seed=6, dtype=dtype),
        on_edges_problem(1500, 4, 8, seed=7, dtype=dtype),
        on_edges_problem(1500, 3, 10, seed=8, dtype=dtype),
    ):
        weights = w if weighted else None
        for norm in ("l1", "l2", "max"):
            expected = ref_classwise(y, P, weights, 15, strategy, closed, norm)
            got = classwise_calibration_error(
                y, P, strategy=strategy, closed=closed, norm=norm, sample_weight=weights
            )
            assert got == pytest.approx(expected, rel=rel(dtype), abs=1e-15)


@pytest.mark.parametrize("n_bins", [1, 2, 8, 10, 15, 40])
@pytest.mark.parametrize("closed", ["left", "right"])
def test_classwise_on_edges_any_number_of_bins(n_bins, closed):
    y, P, w = on_edges_problem(1000, 4, 8, seed=9)
    for weights in (None, w):
        for norm in ("l1", "max"):
            expected = ref_classwise(y, P, weights, n_bins, "uniform", closed, norm)
            got = classwise_calibration_error(
                y, P, n_bins=n_bins, closed=closed, norm=norm, sample_weight=weights
            )
            assert got == pytest.approx(expected, rel=1e-12, abs=1e-15)


def test_classwise_over_several_blocks_with_absent_class_and_zero_weights():
    # 70,000 x 4 rows: more than one row block of the classwise tables
    y, P, w = softmax_problem(70_000, 4, seed=10, dtype=np.float32)
    y[y == 2] = 0  # class 2 never occurs
    w[::7] = 0.0  # zero-weight rows count in no bin's weight
    for weights in (None, w):
        for norm in ("l1", "max"):
            expected = ref_classwise(y, P, weights, 15, "uniform", "left", norm)
            got = classwise_calibration_error(y, P, norm=norm, sample_weight=weights)
            assert got == pytest.approx(expected, rel=1e-9)


def test_classwise_one_dimensional_binary():
    y, P, w = softmax_problem(2000, 2, seed=11)
    expected = ref_classwise(y, P[:, 1], w)
    assert classwise_calibration_error(y, P[:, 1], sample_weight=w) == pytest.approx(
        expected, rel=1e-12
    )


def test_quantile_edges_without_weights_equal_unit_weights():
    scores = np.random.default_rng(12).choice([0.1, 0.25, 0.5, 0.9], size=501)
    expected = ref_edges(scores, 15, "quantile", np.ones(501))
    np.testing.assert_array_equal(bin_edges(scores, 15, "quantile"), expected)


# ----------------------------------------------------- the fused validation
def test_metrics_read_float_input_without_copying_it():
    y, P, _ = softmax_problem(500, 5, seed=13, dtype=np.float32)
    checked = check_probabilities(P, "y_proba", renormalize=False, copy=False)
    assert checked is P
    proba, _, _, pred, conf = check_proba_targets(y, P, copy=False, top_label=True)
    assert proba is P
    np.testing.assert_array_equal(pred, np.argmax(P, axis=1))
    np.testing.assert_array_equal(conf, P.max(axis=1))
    # the default still hands calibrators a float64 copy
    copied = check_probabilities(P, "y_proba", renormalize=False)
    assert copied.dtype == np.float64 and not np.shares_memory(copied, P)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_entries_just_outside_the_range_are_clipped_in_a_copy(dtype):
    y, P, w = softmax_problem(3000, 5, seed=14, dtype=np.float64)
    # rows with an entry 5e-5 below 0 or above 1 (the tolerance is 1e-4)
    P[::3, 0] = -5e-5
    P[::3, 1] = 1.0 - P[::3, 0] - P[::3, 2:].sum(axis=1)
    P[1::3] = [1 + 5e-5, -5e-5, 0.0, 0.0, 0.0]
    P = P.astype(dtype)
    original = P.copy()
    assert P.min() < 0 and P.max() > 1
    for fn, ref in (
        (expected_calibration_error, ref_top_label),
        (classwise_calibration_error, ref_classwise),
    ):
        for weights in (None, w):
            assert fn(y, P, sample_weight=weights) == pytest.approx(
                ref(y, P, weights), rel=1e-12
            )
    np.testing.assert_array_equal(P, original)  # never modified in place


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
@pytest.mark.parametrize("row", [0, 13_000, 39_999])
def test_one_non_finite_entry_anywhere_is_named(dtype, bad, row):
    y, P, _ = softmax_problem(40_000, 10, seed=15, dtype=dtype)
    P[row, 7] = bad
    kind = "NaN" if np.isnan(bad) else "inf"
    for fn in (expected_calibration_error, classwise_calibration_error):
        with pytest.raises(
            ValueError, match=rf"{kind} values in 1 row\(s\) \(first: row {row}"
        ):
            fn(y, P)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_row_sum_verdict_is_that_of_float64_sums(dtype):
    tol = 1e-4  # the tolerance of float32 and float64 input
    y, P, _ = softmax_problem(5000, 1000, seed=16)
    for excess, accepted in ((0.0, True), (0.99 * tol, True), (1.01 * tol, False)):
        Q = P.copy()
        Q[4321] *= 1 + excess  # one row a little under or over the tolerance
        Q = Q.astype(dtype)
        exact = Q.astype(np.float64).sum(axis=1)
        assert (abs(exact[4321] - 1) <= tol) == accepted
        if accepted:
            expected = ref_top_label(y, Q, None)
            assert expected_calibration_error(y, Q) == pytest.approx(
                expected, rel=1e-12
            )
            continue
        message = (
            f"rows sum to 1 (tolerance {tol:g}), but row 4321 sums to "
            f"{exact[4321]:.6g}."
        )
        for fn in (expected_calibration_error, classwise_calibration_error):
            with pytest.raises(ValueError, match=re.escape(message)):
                fn(y, Q)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("row", [25_000, 39_999])
@pytest.mark.parametrize("pair", [(1.2, -0.2), (1.01, -0.01), (-0.01, 1.01)])
def test_out_of_range_entries_are_refused_in_any_block(dtype, row, pair):
    y, P, _ = softmax_problem(40_000, 10, seed=17, dtype=dtype)
    P[row] = [*pair] + [0.0] * 8
    for fn in (expected_calibration_error, classwise_calibration_error):
        with pytest.raises(ValueError, match=r"probabilities in \[0, 1\]"):
            fn(y, P)


def test_integer_labels_need_no_labels_argument_but_others_do():
    y, P, _ = softmax_problem(300, 4, seed=18)
    ece = expected_calibration_error(y, P)
    assert expected_calibration_error(y.astype(np.uint8), P) == ece
    assert expected_calibration_error(y.astype(float), P) == ece
    names = np.array(["a", "b", "c", "d"])[y]
    assert expected_calibration_error(names, P) == pytest.approx(ece, rel=1e-15)
    # labels 1..4: four distinct labels for four columns, in sorted order
    assert expected_calibration_error(y + 1, P) == ece
    y[0] = 4  # five distinct labels for four columns
    with pytest.raises(ValueError, match="Pass labels="):
        expected_calibration_error(y, P)


@pytest.mark.parametrize("layout", ["fortran", "row-strided", "list"])
def test_any_memory_layout_gives_the_same_values(layout):
    y, P, w = softmax_problem(30_000, 6, seed=19)
    if layout == "fortran":
        Q = np.asfortranarray(P)
    elif layout == "row-strided":
        Q = np.repeat(P, 2, axis=0)[::2]  # a view whose rows are not adjacent
        assert not Q.flags.c_contiguous
    else:
        Q = P[:500].tolist()
        y, P, w = y[:500], P[:500], w[:500]
    for fn, ref in (
        (expected_calibration_error, ref_top_label),
        (classwise_calibration_error, ref_classwise),
    ):
        assert fn(y, Q, sample_weight=w) == pytest.approx(ref(y, P, w), rel=1e-12)
