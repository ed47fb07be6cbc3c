"""The numpy row kernels of skcal/utils/_softmax.py (the calibrators that need
no torch) agree with torch's of skcal/_torch/kernels/_softmax.py, and both
with scipy's softmax."""

import numpy as np
import pytest
from scipy.special import log_softmax, softmax

from skcal._torch.kernels import _softmax as torch_rows
from skcal.utils import _softmax as numpy_rows

SHAPES = [((1000, 3), 1.0), ((500, 10), 30.0), ((300, 100), 300.0), ((20, 2), 700.0)]


def _logits(shape, scale, seed=0):
    return np.random.default_rng(seed).normal(size=shape) * scale


@pytest.mark.parametrize("shape, scale", SHAPES)
@pytest.mark.parametrize("log", [False, True])
def test_softmax_agrees_with_torch_and_scipy(shape, scale, log):
    a = _logits(shape, scale)
    got = numpy_rows.softmax_inplace(a.copy(), log=log)
    torch_got = torch_rows.softmax_inplace(a.copy(), log=log)
    reference = (log_softmax if log else softmax)(a, axis=1)
    np.testing.assert_allclose(got, torch_got, rtol=0, atol=1e-12)
    np.testing.assert_allclose(got, reference, rtol=0, atol=1e-12)
    assert np.isfinite(got).all()


@pytest.mark.parametrize("shape, scale", SHAPES)
def test_softmax_into_leaves_its_input(shape, scale):
    a = _logits(shape, scale)
    before = a.copy()
    got = numpy_rows.softmax_into(a, np.empty(a.shape))
    np.testing.assert_array_equal(a, before)
    np.testing.assert_allclose(got, softmax(a, axis=1), rtol=0, atol=1e-12)
    torch_got = torch_rows.softmax_into(a, np.empty(a.shape))
    np.testing.assert_allclose(got, torch_got, rtol=0, atol=1e-12)


def test_blocks_cover_every_row():
    # more rows than one block holds: every block is normalised
    a = _logits((numpy_rows._BLOCK_ENTRIES // 3 + 7, 3), 5.0)
    got = numpy_rows.softmax_inplace(a.copy())
    np.testing.assert_allclose(got.sum(axis=1), 1.0, rtol=0, atol=1e-15)


def test_elementwise_maps_agree_with_torch():
    rng = np.random.default_rng(1)
    a, b = rng.normal(size=(50, 4)), rng.normal(size=(50, 4))
    p = rng.uniform(1e-9, 1.0, size=(50, 4))
    v, scale, shift = rng.normal(size=50), rng.normal(size=4), rng.normal(size=4)
    for name, args in [
        ("row_max", (a,)),
        ("row_min", (a,)),
        ("row_sum", (a,)),
        ("minus_rows", (a, v)),
    ]:
        np.testing.assert_allclose(
            getattr(numpy_rows, name)(*args),
            getattr(torch_rows, name)(*args),
            rtol=0,
            atol=1e-12,
        )
    for name, make in [
        ("log_inplace", lambda: (p.copy(),)),
        ("sigmoid_inplace", lambda: (a.copy(),)),
        ("clip_inplace", lambda: (a.copy(), -0.5, 0.5)),
        ("normalize_rows_inplace", lambda: (p.copy(), 1e-3)),
        ("scale_rows_inplace", lambda: (a.copy(), v)),
        ("rows_minus", lambda: (v, a.copy())),
        ("exp_into", lambda: (a, np.empty(a.shape), v)),
        ("one_minus_into", lambda: (p, np.empty(p.shape))),
        ("minus_into", lambda: (a, b.copy(), np.empty(a.shape))),
        ("affine_columns", lambda: (a, scale, shift, np.empty(a.shape))),
    ]:
        np.testing.assert_allclose(
            getattr(numpy_rows, name)(*make()),
            getattr(torch_rows, name)(*make()),
            rtol=0,
            atol=1e-12,
            err_msg=name,
        )
    # affine_columns with out=shift (Platt's second pass writes over it)
    s = rng.normal(size=a.shape)
    expected = a * scale + s
    np.testing.assert_allclose(
        numpy_rows.affine_columns(a, scale, s, s), expected, rtol=0, atol=1e-12
    )
