"""The approximate local calibration error (random Fourier features)."""

import warnings

import numpy as np
import pytest

import skcal.metrics._local as local_module
from skcal._torch.kernels import rff_anchor_errors, rff_frequencies, rff_group_sums
from skcal.metrics import (
    LocalSpace,
    local_calibration_error,
    local_calibration_errors,
    max_local_calibration_error,
)
from skcal.metrics._local_rff import RFFLocalState


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # flat kernels are fine here
        yield


def _data(n=900, c=3, d=5, seed=0):
    rng = np.random.default_rng(seed)
    phi = rng.normal(size=(n, d))
    proba = rng.dirichlet(np.ones(c), size=n)
    y = rng.integers(0, c, n)
    w = rng.uniform(0.3, 2.0, n)
    return y, proba, phi, w


def test_features_estimate_the_gaussian_kernel_without_bias():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(6, 3))
    h, D = 1.3, 200_000
    omega = rff_frequencies(3, D, h, seed=0)
    proj = x @ omega
    z = np.hstack([np.cos(proj), np.sin(proj)]) / np.sqrt(D)
    exact = np.exp(-((x[:, None] - x[None]) ** 2).sum(-1) / (2 * h * h))
    np.testing.assert_allclose(z @ z.T, exact, atol=5 / np.sqrt(D))
    np.testing.assert_allclose(np.diag(z @ z.T), 1.0, rtol=1e-12)  # K_ii exact


def test_group_sums_and_anchor_errors_follow_the_formulas():
    y, proba, phi, w = _data(300)
    n_bins, D = 4, 64
    omega = rff_frequencies(phi.shape[1], D, 1.5, seed=3)
    bins = np.minimum((proba * n_bins).astype(int), n_bins - 1)
    resid = proba - (y[:, None] == np.arange(3))
    sums = rff_group_sums(phi, resid, w, bins, omega, n_bins)
    S, T = sums.S, sums.T
    proj = phi @ omega
    z = np.hstack([np.cos(proj), np.sin(proj)]) / np.sqrt(D)
    for k in range(3):
        for b in range(n_bins):
            rows = bins[:, k] == b
            # the features and products are float32 (float64 across blocks)
            np.testing.assert_allclose(
                S[k, b], (w * resid[:, k])[rows] @ z[rows], rtol=1e-4, atol=1e-5
            )
            np.testing.assert_allclose(T[k, b], w[rows] @ z[rows], rtol=1e-4, atol=1e-5)
    kept = np.ones((3, n_bins), bool)
    kept[1, 2] = False
    spread_sq = np.random.default_rng(0).uniform(0.5, 2.0, (3, n_bins))
    errors = rff_anchor_errors(phi, w, bins, kept, S, T, omega, spread_sq)
    lce, noise = errors.lce, errors.noise
    for k in range(3):
        num = np.einsum("ij,ij->i", z, S[k, bins[:, k]])
        den = np.maximum(np.einsum("ij,ij->i", z, T[k, bins[:, k]]), w)
        ref = np.clip(num / den, -1, 1)
        ref[~kept[k, bins[:, k]]] = np.nan
        np.testing.assert_allclose(lce[:, k], ref, rtol=1e-4, atol=1e-5)
        spread = np.sqrt(spread_sq[k, bins[:, k]] / (2 * D))
        np.testing.assert_allclose(noise[:, k], spread / den, rtol=1e-4)


def test_rff_converges_to_the_exact_metric():
    y, proba, phi, w = _data(900)
    kw = dict(bandwidth=2.0, space=None, sample_weight=w, device="cpu")
    exact = local_calibration_errors(y, proba, phi, **kw)
    rough = local_calibration_errors(y, proba, phi, method="rff", n_components=64, **kw)
    fine = local_calibration_errors(
        y, proba, phi, method="rff", n_components=16384, **kw
    )
    assert fine.lce == pytest.approx(exact.lce, rel=0.02)
    assert abs(fine.lce - exact.lce) < abs(rough.lce - exact.lce)
    keep = ~np.isnan(exact.anchor_errors)
    np.testing.assert_array_equal(keep, ~np.isnan(fine.anchor_errors))
    assert np.abs(fine.anchor_errors[keep] - exact.anchor_errors[keep]).mean() < 0.01


def test_rff_is_deterministic_and_chunks_merge():
    y, proba, phi, w = _data(1200)
    kw = dict(bandwidth=1.0, space=None, sample_weight=w, method="rff", device="cpu")
    a = local_calibration_error(y, proba, phi, **kw)
    assert a == local_calibration_error(y, proba, phi, **kw)
    assert a != local_calibration_error(y, proba, phi, random_state=1, **kw)
    # the state over chunks equals the state over all rows
    y_index = y

    def new_state():
        return RFFLocalState(
            3,
            5,
            bandwidth=1.0,
            n_bins=15,
            min_bin_size=20,
            n_components=256,
            random_state=0,
            device="cpu",
        )

    whole = new_state()
    whole.update(proba, y_index, phi, w)
    whole.next_pass().update(proba, y_index, phi, w)
    parts = np.array_split(np.arange(1200), 5)
    states = []
    for rows in parts:
        s = new_state()
        states.append(s.update(proba[rows], y_index[rows], phi[rows], w[rows]) or s)
    merged = states[0]
    for s in states[1:]:
        merged.merge(s)
    merged.next_pass()
    twins = [merged.empty() for _ in parts]
    for twin, rows in zip(twins, parts):
        twin.update(proba[rows], y_index[rows], phi[rows], w[rows])
    for twin in twins[1:]:
        twins[0].merge(twin)
    cw = np.full(3, 1 / 3)
    # float32 block products: chunk boundaries change the rounding only
    np.testing.assert_allclose(twins[0].compute(cw), whole.compute(cw), rtol=1e-5)


def test_auto_is_exact_below_the_limit_and_rff_above(monkeypatch):
    y, proba, phi, w = _data(600)
    kw = dict(bandwidth=1.5, space=None, device="cpu")
    exact = max_local_calibration_error(y, proba, phi, **kw)
    assert max_local_calibration_error(y, proba, phi, method="auto", **kw) == exact
    monkeypatch.setattr(local_module, "EXACT_PAIRS_LIMIT", 0)
    assert max_local_calibration_error(
        y, proba, phi, method="auto", **kw
    ) == max_local_calibration_error(y, proba, phi, method="rff", **kw)


def test_dask_inputs_use_random_features_chunk_by_chunk():
    da = pytest.importorskip("dask.array")
    y, proba, phi, w = _data(3000, d=6)
    space = LocalSpace(n_components=4).fit(phi)
    kw = dict(bandwidth=2.0, space=space, method="rff", device="cpu")
    ref = local_calibration_errors(y, proba, phi, sample_weight=w, **kw)
    got = local_calibration_errors(
        da.from_array(y, chunks=800),
        da.from_array(proba, chunks=(450, 3)),
        da.from_array(phi, chunks=(1000, 6)),
        sample_weight=da.from_array(w, chunks=300),
        **kw,
    )
    assert got.anchor_errors is None  # only the summaries travel
    assert got.lce == pytest.approx(ref.lce, rel=1e-5)  # float32 features
    assert got.mlce == pytest.approx(ref.mlce, rel=1e-5)
    with pytest.raises(ValueError, match="method='rff'"):
        local_calibration_error(y, da.from_array(proba, chunks=(450, 3)), phi)
    # space="pca" and bandwidth="auto" from samples of rows (all of them here)
    auto = dict(method="rff", bandwidth="auto", device="cpu")
    assert local_calibration_error(
        y, da.from_array(proba, chunks=(500, 3)), phi, **auto
    ) == pytest.approx(local_calibration_error(y, proba, phi, **auto), rel=1e-5)


def test_the_noise_check_warns_for_a_narrow_kernel_only():
    from skcal.exceptions import ApproximationWarning

    y, proba, phi, _ = _data(3000, d=8)
    kw = dict(space=None, method="rff", n_components=256, device="cpu")
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        local_calibration_error(y, proba, phi, bandwidth=0.3, **kw)
        narrow = [r for r in rec if r.category is ApproximationWarning]
    assert narrow and "n_components" in str(narrow[0].message)
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        local_calibration_error(y, proba, phi, bandwidth=4.0, **kw)
    assert not [r for r in rec if r.category is ApproximationWarning]


def test_clear_errors():
    y, proba, phi, _ = _data(200)
    with pytest.raises(ValueError, match="method"):
        local_calibration_error(y, proba, phi, method="fast")
    with pytest.raises(ValueError, match="n_components"):
        local_calibration_error(y, proba, phi, method="rff", n_components=0)


def test_dask_and_numpy_estimate_the_same_noise(monkeypatch):
    # every chunk starts from its own zeroed sums (the spread of the
    # residuals included), so the noise check sees what one process sees
    da = pytest.importorskip("dask.array")
    seen = []
    original = RFFLocalState.compute

    def spy(self, class_weights):
        out = original(self, class_weights)
        seen.append(self.noise_)
        return out

    monkeypatch.setattr(RFFLocalState, "compute", spy)
    y, proba, phi, w = _data(2000, d=6)
    kw = dict(bandwidth=1.0, space=None, method="rff", device="cpu")
    local_calibration_error(y, proba, phi, sample_weight=w, **kw)
    local_calibration_error(
        da.from_array(y, chunks=300),
        da.from_array(proba, chunks=(300, 3)),
        da.from_array(phi, chunks=(300, 6)),
        sample_weight=da.from_array(w, chunks=300),
        **kw,
    )
    assert seen[1] == pytest.approx(seen[0], rel=1e-5)


@pytest.mark.parametrize("space", [None, "pca"])
def test_one_dimensional_features_are_refused_alike_with_dask(space):
    """The numpy path's clear error for Dask inputs too. Was: IndexError
    'tuple index out of range' for 1-D Dask features and space=None."""
    da = pytest.importorskip("dask.array")
    y, proba, phi, _ = _data(600)
    column = phi[:, 0]
    kw = dict(bandwidth=1.0, space=space, method="rff", device="cpu")
    dask_proba = da.from_array(proba, chunks=(200, 3))
    message = r"2-D array .* got a 1-D array of shape \(600,\).*reshape\(-1, 1\)"
    for p, features in [
        (proba, column),
        (dask_proba, da.from_array(column, chunks=200)),
        (proba, da.from_array(column, chunks=200)),
    ]:
        with pytest.raises(ValueError, match=message):
            local_calibration_error(y, p, features, **kw)
    # the fix the message gives works on both paths, with the same result
    expected = local_calibration_error(y, proba, column.reshape(-1, 1), **kw)
    got = local_calibration_error(
        y, dask_proba, da.from_array(column, chunks=200).reshape(-1, 1), **kw
    )
    assert got == pytest.approx(expected, rel=1e-5)
