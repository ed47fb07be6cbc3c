"""bandwidth="auto" of the local metrics: a quarter of the median distance."""

import numpy as np
import pytest
from scipy.spatial.distance import pdist
from sklearn.decomposition import PCA
from sklearn.preprocessing import StandardScaler

from skcal.metrics import (
    LocalSpace,
    effective_sample_size,
    ess_profile,
    local_bandwidth,
    local_calibration_error,
    local_calibration_errors,
    max_local_calibration_error,
)


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(3)
    n = 600
    features = rng.normal(size=(n, 12)) * rng.uniform(0.5, 4.0, 12)
    proba = rng.dirichlet(np.ones(3), size=n)
    y = rng.integers(0, 3, n)
    return y, proba, features


def test_rule_is_a_quarter_of_the_median_pairwise_distance(data):
    _, _, features = data
    expected = np.median(pdist(features)) / 4
    assert local_bandwidth(features, space=None) == pytest.approx(expected, rel=1e-9)
    # the default space: standardise, then PCA (all 12 components here)
    phi = PCA(50 if features.shape[1] > 50 else None).fit_transform(
        StandardScaler().fit_transform(features)
    )
    assert local_bandwidth(features) == pytest.approx(
        np.median(pdist(phi)) / 4, rel=1e-9
    )
    space = LocalSpace(n_components=3).fit(features[:300])
    assert local_bandwidth(features, space=space) == pytest.approx(
        np.median(pdist(space.transform(features))) / 4, rel=1e-9
    )


def test_rule_scales_with_the_features_and_ignores_zero_weights(data):
    _, _, features = data
    h = local_bandwidth(features, space=None)
    assert local_bandwidth(3.0 * features, space=None) == pytest.approx(3.0 * h)
    w = np.where(np.arange(len(features)) % 3 == 0, 0.0, 1.0)
    assert local_bandwidth(features, space=None, sample_weight=w) == pytest.approx(
        np.median(pdist(features[w > 0])) / 4, rel=1e-9
    )


def test_large_sets_use_1000_evenly_spaced_rows():
    rng = np.random.default_rng(0)
    features = rng.normal(size=(2500, 5))
    rows = np.unique(np.linspace(0, 2499, 1000).round().astype(int))
    assert local_bandwidth(features, space=None) == pytest.approx(
        np.median(pdist(features[rows])) / 4, rel=1e-9
    )


@pytest.mark.parametrize(
    "metric",
    [
        local_calibration_error,
        max_local_calibration_error,
        local_calibration_errors,
        effective_sample_size,
        ess_profile,
    ],
)
def test_auto_equals_the_number_it_stands_for(data, metric):
    y, proba, features = data
    h = local_bandwidth(features)
    auto = metric(y, proba, features, bandwidth="auto", min_bin_size=5)
    fixed = metric(y, proba, features, bandwidth=h, min_bin_size=5)
    if isinstance(auto, float):
        assert auto == fixed
    elif isinstance(auto, np.ndarray):
        np.testing.assert_array_equal(auto, fixed)
    else:  # a result object: compare its numbers
        for name, value in vars(auto).items():
            np.testing.assert_array_equal(value, vars(fixed)[name], err_msg=name)


def test_auto_is_the_same_for_every_calibrator_on_the_same_features(data):
    # the rule reads the features only: sharper probabilities, same kernel
    y, proba, features = data
    sharp = proba**4 / (proba**4).sum(axis=1, keepdims=True)
    h = local_bandwidth(features)
    for p in (proba, sharp):
        assert local_calibration_error(
            y, p, features, bandwidth="auto", min_bin_size=5
        ) == local_calibration_error(y, p, features, bandwidth=h, min_bin_size=5)


def test_auto_refuses_features_without_distances():
    features = np.ones((50, 4))
    features[0] += 1.0  # one distinct row: the median distance is 0
    with pytest.raises(ValueError, match="median distance between samples is 0"):
        local_bandwidth(features, space=None)
    with pytest.raises(ValueError, match="at least 2 samples"):
        local_bandwidth(np.eye(3), space=None, sample_weight=[1.0, 0.0, 0.0])
    with pytest.raises(ValueError, match="bandwidth"):
        local_calibration_error(
            np.zeros(3, int), np.full((3, 2), 0.5), np.eye(3), bandwidth="wide"
        )
