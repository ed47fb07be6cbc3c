"""KCalCalibrator and its kernels (Lin, Trivedi, Sun, ICLR 2023)."""

import re
import warnings

import numpy as np
import pytest
import torch
from _local_data import absent_region_data, region_data
from sklearn.model_selection import KFold

from skcal import KCalCalibrator
from skcal._torch.kernels import golden_section_min, kcal_cv_log_loss
from skcal._torch.kernels._kcal import _stratified_background
from skcal.exceptions import GridEdgeWarning
from skcal.utils._testing import make_region_miscalibrated_embeddings


@pytest.fixture(scope="module")
def data():
    return region_data()


@pytest.fixture(scope="module")
def absent_data():
    return absent_region_data()


def test_kcal_single_sample_classes_stay_in_the_memory(absent_data):
    X, y, *_ = absent_data
    rows = np.concatenate([np.flatnonzero(y != 3), np.flatnonzero(y == 3)[:1]])
    est = KCalCalibrator(max_iter=2, random_state=0, device="cpu")
    est.fit(X[rows], y[rows])
    assert 3 in est.memory_labels_
    assert np.all(est.predict_proba(X)[:, 3] >= 0)
    assert np.any(est.predict_proba(X)[:, 3] > 0)


def _skip_elu(est, X):
    W1, b1, W2 = est.projection_
    v = ((X - est.mean_) / est.scale_) @ W1 + b1
    return v + np.where(v > 0, v, np.expm1(np.minimum(v, 0))) @ W2


def test_kcal_predictions_are_the_kernel_classifier(data):
    X, y, _, _ = data
    est = KCalCalibrator(max_iter=3, random_state=0, device="cpu").fit(X, y)
    X_new, _, _, _, _ = make_region_miscalibrated_embeddings(50, 3, random_state=5)
    queries = np.vstack([X_new, X[:5]])
    G = _skip_elu(est, queries)
    d2 = ((G[:, None, :] - est.memory_[None, :, :]) ** 2).mean(axis=2)
    K = np.exp(-d2 / est.bandwidth_)
    K[K >= 1 - 1e-10] = 0.0  # a memory sample never predicts itself
    onehot = np.eye(3)[est.memory_labels_] * est.memory_weights_[:, None]
    expected = K @ onehot / (K @ onehot).sum(axis=1, keepdims=True)
    np.testing.assert_allclose(est.predict_proba(queries), expected, rtol=1e-9)


def _numpy_cv(est, n_splits, random_state):
    """The cross-validated log loss of ``est``'s memory at ``h``, in numpy."""
    G, labels = est.memory_, est.memory_labels_
    # the folds come from the third seed drawn from random_state
    fold_seed = np.random.RandomState(random_state).randint(
        np.iinfo(np.int32).max, size=3
    )[2]
    folds = np.empty(len(G), dtype=int)
    kfold = KFold(n_splits, shuffle=True, random_state=int(fold_seed))
    for k, (_, test) in enumerate(kfold.split(G)):
        folds[test] = k
    d2 = ((G[:, None, :] - G[None, :, :]) ** 2).mean(axis=2)
    onehot = np.eye(len(est.classes_))[labels]

    def numpy_cv(h):
        K = np.exp(-d2 / h) * (folds[:, None] != folds[None, :])
        p = K @ onehot / (K @ onehot).sum(axis=1, keepdims=True)
        return -np.mean(np.log(np.maximum(p[np.arange(len(G)), labels], 1e-12)))

    return numpy_cv, folds


def test_kcal_cross_validated_bandwidth(data):
    X, y, _, _ = data
    est = KCalCalibrator(max_iter=3, cv=5, random_state=0, device="cpu")
    est.fit(X, y)
    G, labels = est.memory_, est.memory_labels_
    numpy_cv, folds = _numpy_cv(est, 5, 0)

    def kernel_cv(h):
        weights = np.ones(len(G))
        return kcal_cv_log_loss(G, labels, weights, folds, h, n_classes=3)

    for h in [0.3 * est.bandwidth_, est.bandwidth_, 3 * est.bandwidth_]:
        assert kernel_cv(h) == pytest.approx(numpy_cv(h), rel=1e-10)
    assert est.cv_log_loss_ == pytest.approx(numpy_cv(est.bandwidth_), rel=1e-10)
    # golden section over [h0 / 10, 10 h0]: the chosen h is the minimum
    grid = est.bandwidth_init_ * np.geomspace(0.1, 10, 41)
    assert est.cv_log_loss_ <= min(numpy_cv(h) for h in grid) + 1e-9
    for factor in (0.98, 1.02):
        assert est.cv_log_loss_ <= numpy_cv(factor * est.bandwidth_) + 1e-12


def test_kcal_verbose_shows_the_bandwidth_search(data, capsys):
    """A bar over the bandwidths tried, ending complete; at verbose=2 a line
    per bandwidth with its cross-validated log loss (checked in numpy)."""
    X, y, _, _ = data
    est = KCalCalibrator(max_iter=3, cv=5, random_state=0, device="cpu", verbose=2)
    est.fit(X, y)
    err = capsys.readouterr().err.replace("\r", "\n")
    tried = re.findall(
        r"^KCal: bandwidth: h (\S+): cross-validated log loss (\S+)$", err, re.M
    )
    assert len(tried) > 10
    assert f"{len(tried)}/{len(tried)} [" in err  # the bar ends complete
    numpy_cv, _ = _numpy_cv(est, 5, 0)
    h0 = est.bandwidth_init_
    for h, loss in tried:
        assert h0 / 10 * (1 - 1e-5) <= float(h) <= 10 * h0 * (1 + 1e-5)
        assert float(loss) == pytest.approx(numpy_cv(float(h)), rel=1e-5)
    assert float(tried[-1][0]) == pytest.approx(est.bandwidth_, rel=1e-5)
    # a fixed bandwidth: no search, no bar
    est.set_params(bandwidth=0.5, verbose=1).fit(X, y)
    assert "KCal: bandwidth" not in capsys.readouterr().err


def test_golden_section_min():
    calls = []

    def f(x):
        calls.append(x)
        return (x - 0.7) ** 2

    x = golden_section_min(f, -3.0, 5.0, xtol=1e-6)
    assert x == pytest.approx(0.7, abs=1e-6)
    assert all(-3.0 <= c <= 5.0 for c in calls)
    assert golden_section_min(lambda x: x, 1.0, 2.0, xtol=1e-6) == pytest.approx(1.0)


def test_kcal_background_is_stratified_and_disjoint():
    labels = torch.as_tensor(np.repeat([0, 1, 2], [50, 5, 30]))
    exclude = torch.zeros(85, dtype=torch.bool)
    exclude[:10] = True
    gen = torch.Generator().manual_seed(0)
    idx = _stratified_background(labels, exclude, 20, 3, gen).numpy()
    assert len(np.unique(idx)) == len(idx)
    assert not np.isin(idx, np.arange(10)).any()
    np.testing.assert_array_equal(np.bincount(labels.numpy()[idx]), [20, 5, 20])


def test_kcal_warns_when_its_memory_has_few_samples_per_class():
    """At 1,000 classes and 5,000 rows KCal's accuracy fell to 0.02, silently."""
    rng = np.random.default_rng(0)
    y = np.repeat(np.arange(40), 6)  # 6 per class, half of them in the memory
    X = rng.normal(size=(len(y), 5)) + 3 * np.eye(40, 5)[y]
    with pytest.warns(UserWarning, match="per class on average"):
        KCalCalibrator(max_iter=1, random_state=0, device="cpu").fit(X, y)
    many = np.repeat(np.arange(3), 60)
    X = rng.normal(size=(len(many), 5)) + 3 * np.eye(3, 5)[many]
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        # one epoch leaves the bandwidth at an end of its search range: a
        # GridEdgeWarning (tested in test_new_warnings.py), not this one
        warnings.simplefilter("ignore", GridEdgeWarning)
        KCalCalibrator(max_iter=1, random_state=0, device="cpu").fit(X, many)
