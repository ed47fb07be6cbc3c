"""TopKScores against scipy's log_softmax and direct sums, and its rest model
on hand-written rows."""

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from scipy.special import log_softmax, logsumexp

from skcal.llm import TopKScores


@pytest.mark.parametrize("chunk_size", [None, 1, 7])
def test_from_logits_against_scipy(chunk_size):
    rng = np.random.default_rng(0)
    logits = rng.normal(0, 3, size=(50, 37))
    before = logits.copy()
    k = 5
    top = TopKScores.from_logits(logits, k, chunk_size=chunk_size)
    assert_array_equal(logits, before)  # not modified
    reference = log_softmax(logits, axis=1)
    order = np.argsort(-reference, axis=1)[:, :k]
    assert_array_equal(top.indices, order)
    assert_allclose(top.values, np.take_along_axis(reference, order, axis=1))
    rest = np.ones_like(logits, dtype=bool)
    np.put_along_axis(rest, order, False, axis=1)
    expected = logsumexp(np.where(rest, reference, -np.inf), axis=1)
    assert_allclose(top.rest_logmass, expected, rtol=1e-12)
    assert top.n_classes == 37 and top.k == 5 and len(top) == 50


def test_k_equal_to_the_vocabulary_is_the_dense_distribution():
    rng = np.random.default_rng(1)
    logits = rng.normal(0, 2, size=(20, 9))
    top = TopKScores.from_logits(logits, 9)
    assert_allclose(top.to_dense(), log_softmax(logits, axis=1), rtol=0, atol=1e-14)
    assert np.all(top.rest_logmass == -np.inf)
    assert_allclose(
        top.label_logproba(np.arange(20) % 9),
        log_softmax(logits, axis=1)[np.arange(20), np.arange(20) % 9],
        atol=1e-14,
    )


def test_rest_logmass_is_stable_when_the_top_holds_almost_everything():
    # one logit of 50 and 999 of 0: the rest holds 999 / (e^50 + 999)
    logits = np.zeros((1, 1000))
    logits[0, 3] = 50.0
    top = TopKScores.from_logits(logits, 1)
    assert_array_equal(top.indices, [[3]])
    exact = np.log(999) - np.logaddexp(50, np.log(999))
    assert_allclose(top.rest_logmass, [exact], rtol=1e-14)
    # what log(1 - sum(exp(top))) gives: 1 - (1 - 1.9e-19) cancels to 0
    with np.errstate(divide="ignore"):
        assert np.log1p(-np.exp(top.values[0, 0])) == -np.inf


def test_a_memmap_is_read_by_chunks(tmp_path):
    rng = np.random.default_rng(2)
    data = rng.normal(size=(30, 11))
    path = tmp_path / "logits.npy"
    np.save(path, data)
    mapped = np.load(path, mmap_mode="r")
    top = TopKScores.from_logits(mapped, 3, chunk_size=4)
    assert_array_equal(top.indices, TopKScores.from_logits(data, 3).indices)


def test_the_rest_model_on_a_hand_written_row():
    # 10 classes; row 0 lists 0.5 and 0.25 and leaves 0.2 (known) to 8 classes;
    # row 1 lists 0.5 (padding after) with the rest implied: 0.5 over 9 classes
    top = TopKScores(
        indices=[[4, 1], [2, -1]],
        values=np.log([[0.5, 0.25], [0.5, 1.0]]),
        n_classes=10,
        rest_logmass=None,
    )
    assert_array_equal(top.n_listed, [2, 1])
    assert top.values[1, 1] == -np.inf  # padding stored as -inf
    assert_allclose(np.exp(top.leftover_logmass()), [0.25, 0.5])
    assert_allclose(np.exp(top.label_logproba([4, 0])), [0.5, 0.5 / 9])
    dense = np.exp(top.to_dense())
    assert_allclose(
        dense[0], [0.25 / 8] + [0.25] + [0.25 / 8] * 2 + [0.5] + [0.03125] * 5
    )
    assert_allclose(dense.sum(axis=1), 1.0)
    known = TopKScores([[4, 1]], np.log([[0.5, 0.25]]), 10, np.log([0.2]))
    assert_allclose(np.exp(known.label_logproba([0])), [0.2 / 8])


def test_rows_slicing_and_refusing_a_dense_array_too_big():
    top = TopKScores.from_logits(np.random.default_rng(3).normal(size=(6, 5)), 2)
    part = top[1:3]
    assert len(part) == 2 and part.n_classes == 5
    assert_array_equal(part.indices, top.indices[1:3])
    assert_array_equal(top[4].values, top.values[[4]])
    assert_array_equal(
        top[np.array([True, False] * 3)].rest_logmass, top.rest_logmass[::2]
    )
    big = TopKScores(np.zeros((100_000, 1), dtype=int), np.zeros((100_000, 1)), 256_000)
    with pytest.raises(
        ValueError, match=r"\(100000, 256000\) float64 array takes 191 GiB"
    ):
        big.to_dense()


@pytest.mark.parametrize(
    "indices, values, n_classes, message",
    [
        ([[0, 0]], [[-1.0, -2.0]], 3, "lists class 0 more than once"),
        ([[0, 3]], [[-1.0, -2.0]], 3, r"must lie in \[0, n_classes=3\)"),
        ([[0, -2]], [[-1.0, -2.0]], 3, r"must lie in \[0, n_classes=3\)"),
        ([[0, 1]], [[0.5, -2.0]], 3, "must be log-probabilities"),
        ([[0, 1]], [[np.nan, -2.0]], 3, "must be log-probabilities"),
        ([[0, 1]], [[-0.1, -0.2]], 3, "sum to 1.72"),
        ([[0, 1]], [[-0.1]], 3, "the same shape"),
        ([[0.0, 1.0]], [[-1.0, -2.0]], 3, "must be integers"),
        ([[0, 1]], [[-1.0, -2.0]], 0, "positive integer"),
    ],
)
def test_validation(indices, values, n_classes, message):
    with pytest.raises(ValueError, match=message):
        TopKScores(indices, values, n_classes)


def test_the_inputs_are_copied_and_labels_checked():
    indices = np.array([[0, 1]])
    values = np.log([[0.5, 0.25]])
    top = TopKScores(indices, values, 4)
    top.values[0, 0] = -3.0
    assert values[0, 0] == np.log(0.5)
    with pytest.raises(ValueError, match=r"outside \[0, 4\)"):
        top.label_logproba([4])
    with pytest.raises(ValueError, match="rest_logmass must have shape"):
        TopKScores(indices, values, 4, rest_logmass=[0.0, 0.0])
    with pytest.raises(ValueError, match="k must be an integer"):
        TopKScores.from_logits(np.zeros((2, 3)), 4)
