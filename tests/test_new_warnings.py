"""GridEdgeWarning, AccuracyDropWarning and FlatKernelWarning (issue 20, item 2).

Each warning is raised by a constructed case, names what to change, points
at the user's line, and is absent from a healthy case.
"""

import warnings

import numpy as np
import pytest

from skcal import (
    DirichletCalibratorCV,
    KCalCalibrator,
    LocalNetCalibrator,
    VQLocalCalibrator,
)
from skcal.calibrators._vq_local import warn_accuracy_drop
from skcal.exceptions import (
    AccuracyDropWarning,
    FlatKernelWarning,
    GridEdgeWarning,
)
from skcal.metrics import (
    effective_sample_size,
    ess_profile,
    local_calibration_error,
    local_calibration_errors,
    max_local_calibration_error,
)
from skcal.metrics._local import FLAT_ESS_RATIO, _kernel_flatness
from skcal.utils._testing import (
    make_miscalibrated_logits,
    make_region_miscalibrated_embeddings,
)


def _caught(fn, category):
    """The warnings of ``category`` that ``fn()`` raises, and its result."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = fn()
    return [w for w in caught if issubclass(w.category, category)], result


def test_the_classes_are_documented_user_warnings():
    import skcal.exceptions as ex

    for cls in (GridEdgeWarning, AccuracyDropWarning, FlatKernelWarning):
        assert issubclass(cls, UserWarning)
        assert cls.__name__ in ex.__all__
        assert len(cls.__doc__.split()) > 20


# ---------------------------------------------------------------- grid edge
def _dirichlet_cv(X, y, **params):
    # the grid as given: not grown past its edges, without the "auto" point
    params = {
        "reg_mus": None, "cv": 3, "random_state": 0, "device": "cpu",
        "include_auto": False, "grid_extensions": 0, **params,
    }  # fmt: skip
    return DirichletCalibratorCV(**params).fit(X, y)


def test_dirichlet_cv_warns_when_the_best_value_is_the_largest_of_its_grid():
    # 300 rows: strong regularisation wins (0.01 beat 0.001 and 0.1 on a
    # wider grid, see the test below), so the grid (0.001, 0.01) stops short
    X, y = make_miscalibrated_logits(300, 3, temperature=2.0, random_state=0)
    caught, cal = _caught(
        lambda: _dirichlet_cv(X, y, reg_lambdas=(1e-2, 1e-3)), GridEdgeWarning
    )
    assert cal.reg_lambda_ == 1e-2
    assert len(caught) == 1
    message = str(caught[0].message)
    assert "reg_lambda=0.01, the largest value of reg_lambdas" in message
    assert "from 0.001 to 0.01" in message
    assert "Extend reg_lambdas beyond 0.01 (e.g. add 0.1)" in message
    assert caught[0].filename == __file__  # the user's line


def test_dirichlet_cv_warns_when_the_best_value_is_the_smallest_of_its_grid():
    # shifted logits on 2,000 rows: the intercept must be learned, and an
    # L2 penalty toward zero only hurts
    X, y = make_miscalibrated_logits(2000, 3, temperature=1.0, random_state=0)
    X = X + np.array([4.0, 0.0, -4.0])
    caught, cal = _caught(
        lambda: _dirichlet_cv(X, y, reg_lambdas=(1e-2, 1e-3)), GridEdgeWarning
    )
    assert cal.reg_lambda_ == 1e-3
    assert len(caught) == 1
    message = str(caught[0].message)
    assert "reg_lambda=0.001, the smallest value of reg_lambdas" in message
    assert "may be smaller" in message and "add 0.0001" in message


def test_dirichlet_cv_inside_its_grid_does_not_warn():
    X, y = make_miscalibrated_logits(300, 3, temperature=2.0, random_state=0)
    caught, cal = _caught(
        lambda: _dirichlet_cv(X, y, reg_lambdas=(1e-1, 1e-2, 1e-3)), GridEdgeWarning
    )
    scores = cal.cv_results_["mean_test_nll"]
    assert cal.reg_lambda_ == 1e-2 and scores[1] < min(scores[0], scores[2])
    assert caught == []


def test_dirichlet_cv_single_candidates_and_inert_parameters_do_not_warn():
    X, y = make_miscalibrated_logits(300, 3, temperature=2.0, random_state=0)
    # one candidate: no grid to extend
    caught, _ = _caught(lambda: _dirichlet_cv(X, y, reg_lambdas=[1.0]), GridEdgeWarning)
    assert caught == []
    # a scalar map has no off-diagonal entry nor intercept for ODIR's
    # reg_lambda and reg_mu: every grid point ties, the strongest is chosen
    caught, cal = _caught(
        lambda: _dirichlet_cv(
            X,
            y,
            matrix="fixed_diagonal",
            reg_lambdas=(1e-1, 1e-2),
            reg_mus=(1e-1, 1e-2),
        ),
        GridEdgeWarning,
    )
    assert (cal.reg_lambda_, cal.reg_mu_) == (1e-1, 1e-1)
    assert caught == []


def test_kcal_bandwidth_at_the_end_of_its_search_range_warns():
    X, y, *_ = make_region_miscalibrated_embeddings(800, 3, random_state=0)
    # labels independent of the embeddings: the widest kernel (the class
    # frequencies) has the lowest held-out log loss
    noise = np.random.default_rng(0).permutation(y)
    params = dict(max_iter=3, cv=5, random_state=0, device="cpu")
    caught, est = _caught(
        lambda: KCalCalibrator(**params).fit(X, noise), GridEdgeWarning
    )
    assert est.bandwidth_ == pytest.approx(10 * est.bandwidth_init_, rel=1e-3)
    assert len(caught) == 1
    message = str(caught[0].message)
    assert "upper end of its search range" in message
    h = est.bandwidth_
    assert f"bandwidth={h * np.sqrt(2):.3g}, then {2 * h:.3g}" in message
    assert caught[0].filename == __file__


def test_kcal_bandwidth_inside_its_search_range_does_not_warn():
    X, y, *_ = make_region_miscalibrated_embeddings(800, 3, random_state=0)
    params = dict(max_iter=3, cv=5, random_state=0, device="cpu")
    caught, est = _caught(lambda: KCalCalibrator(**params).fit(X, y), GridEdgeWarning)
    low, high = est.bandwidth_init_ / 10, est.bandwidth_init_ * 10
    assert 1.01 * low < est.bandwidth_ < high / 1.01
    assert caught == []


# ------------------------------------------------------------ accuracy drop
def _drop_case(n, n_wrong):
    """Head right on every row; the calibrator wrong on ``n_wrong`` of them."""
    y = np.zeros(n, dtype=np.int64)
    head = np.tile([1.0, 0.0], (n, 1))
    proba = np.tile([0.9, 0.1], (n, 1))
    proba[:n_wrong] = [0.1, 0.9]
    return y, proba, head


@pytest.mark.parametrize(
    "n, n_wrong, warns",
    [
        # drop 0.015 > 1 point; se = sqrt(0.015 * 0.985 / 999) = 0.0038
        (1000, 15, True),
        # drop 0.009: below one point, however significant
        (1000, 9, False),
        # drop 0.02 > 1 point, but 2 se = 2 sqrt(0.02 * 0.98 / 99) = 0.028
        (100, 2, False),
        # drop 0.05, 2 se = 2 sqrt(0.05 * 0.95 / 99) = 0.044
        (100, 5, True),
    ],
)
def test_accuracy_drop_threshold(n, n_wrong, warns):
    y, proba, head = _drop_case(n, n_wrong)
    caught, _ = _caught(
        lambda: warn_accuracy_drop("X", y, proba, head, np.ones(n), "Do Y."),
        AccuracyDropWarning,
    )
    assert bool(caught) is warns
    if warns:
        drop = n_wrong / n
        se = np.sqrt(drop * (1 - drop) / (n - 1))
        assert f"a drop of {drop:.3f} (standard error {se:.3f})" in str(
            caught[0].message
        )
        assert str(caught[0].message).endswith("Do Y.")


def test_accuracy_drop_uses_the_weights():
    # the wrong rows weigh nothing: no drop
    y, proba, head = _drop_case(1000, 50)
    weights = np.ones(1000)
    weights[:50] = 0.0
    caught, _ = _caught(
        lambda: warn_accuracy_drop("X", y, proba, head, weights, ""),
        AccuracyDropWarning,
    )
    assert caught == []


@pytest.fixture(scope="module")
def narrow():
    """64-d embeddings, 10 classes, a head of accuracy about 0.73."""
    X, y, coef, intercept, _ = make_region_miscalibrated_embeddings(
        1000, 10, n_features=64, logit_scale=6.0, random_state=0
    )
    return X, y, coef, intercept


def test_vq_coarse_quantization_warns(narrow):
    # the setting: 8 slots of 8 dimensions, 16 codewords; the
    # backbone's head reads the quantized embeddings, so only quantization
    # can lose accuracy
    X, y, coef, intercept = narrow
    vq = VQLocalCalibrator(
        n_slots=8,
        n_codewords=16,
        head="frozen",
        coef=coef,
        intercept=intercept,
        max_iter=3,
        random_state=0,
        device="cpu",
    )
    caught, vq = _caught(lambda: vq.fit(X, y), AccuracyDropWarning)
    head_accuracy = np.mean(np.argmax(X @ coef.T + intercept, axis=1) == y)
    assert np.mean(vq.predict(X) == y) < head_accuracy - 0.1  # the premise
    assert len(caught) == 1
    message = str(caught[0].message)
    assert "VQLocalCalibrator: on its internal validation split (100 rows)" in message
    assert "n_slots=8" in message and "n_codewords=16" in message
    assert caught[0].filename == __file__


def test_vq_fine_quantization_does_not_warn(narrow):
    X, y, coef, intercept = narrow
    vq = VQLocalCalibrator(
        n_slots=64,
        n_codewords=64,
        head="frozen",
        coef=coef,
        intercept=intercept,
        max_iter=3,
        random_state=0,
        device="cpu",
    )
    caught, _ = _caught(lambda: vq.fit(X, y), AccuracyDropWarning)
    assert caught == []


@pytest.fixture(scope="module")
def regions():
    X, y, coef, intercept, _ = make_region_miscalibrated_embeddings(
        800, 3, random_state=0
    )
    return X, y, coef, intercept


def test_local_net_pulled_to_the_class_frequencies_warns(regions):
    # a kernel far wider than the data: the kernel estimate is the class
    # frequencies, and a heavy JS term pulls the logits toward them
    X, y, coef, intercept = regions
    net = LocalNetCalibrator(
        coef=coef,
        intercept=intercept,
        bandwidth=1e3,
        lambda_js=10.0,
        alpha_ce=0.0,
        learning_rate=1e-2,
        max_iter=30,
        random_state=0,
        device="cpu",
    )
    caught, _ = _caught(lambda: net.fit(X, y), AccuracyDropWarning)
    assert len(caught) == 1
    message = str(caught[0].message)
    assert "LocalNetCalibrator" in message and "lower bandwidth" in message
    assert caught[0].filename == __file__


def test_local_net_healthy_fit_does_not_warn(regions):
    X, y, coef, intercept = regions
    net = LocalNetCalibrator(
        coef=coef,
        intercept=intercept,
        bandwidth=2.0,
        max_iter=5,
        random_state=0,
        device="cpu",
    )
    caught, _ = _caught(lambda: net.fit(X, y), AccuracyDropWarning)
    assert caught == []


# -------------------------------------------------------------- flat kernel
def test_kernel_flatness_matches_the_exact_effective_sample_size():
    # 2 classes x 150 rows in one bin each: 300 anchors, all evaluated, so
    # the median ratio is exact; the reference ESS is the torch kernel's
    rng = np.random.default_rng(0)
    n = 150
    phi = rng.normal(size=(n, 4))
    w = rng.uniform(0.5, 2.0, n)
    proba = np.full((n, 2), 0.5)
    y = np.arange(n) % 2
    for bandwidth in (0.7, 3.0):
        ess = effective_sample_size(
            y, proba, phi, bandwidth=bandwidth, space=None, sample_weight=w
        )
        rest = (w.sum() - w) ** 2 / (np.dot(w, w) - w**2)
        expected = np.median(np.concatenate([ess[:, 0] / rest, ess[:, 1] / rest]))
        groups = [(k, np.arange(n)) for k in range(2)]
        ratio, distance = _kernel_flatness(phi, w, groups, bandwidth)
        assert ratio == pytest.approx(expected, rel=1e-9)
        d = np.sqrt(((phi[:, None] - phi[None]) ** 2).sum(axis=2))
        np.fill_diagonal(d, np.nan)
        assert distance == pytest.approx(np.median(np.nanmedian(d, axis=1)))


@pytest.fixture(scope="module")
def wide():
    """400 rows of 64 standard normal features (the issue's 64-d embeddings)."""
    rng = np.random.default_rng(0)
    features = rng.normal(size=(400, 64))
    proba = rng.dirichlet(np.ones(3), size=400)
    y = rng.integers(0, 3, 400)
    return y, proba, features


@pytest.mark.parametrize(
    "metric",
    [
        local_calibration_error,
        max_local_calibration_error,
        local_calibration_errors,
        ess_profile,
    ],
)
def test_default_bandwidth_on_64_features_warns_and_the_advice_works(wide, metric):
    y, proba, features = wide
    caught, _ = _caught(lambda: metric(y, proba, features), FlatKernelWarning)
    assert len(caught) == 1
    message = str(caught[0].message)
    assert message.startswith(f"{metric.__name__}: the kernel is nearly flat")
    assert caught[0].filename == __file__
    assert 'bandwidth="auto"' in message
    caught, _ = _caught(
        lambda: metric(y, proba, features, bandwidth="auto"), FlatKernelWarning
    )
    assert caught == []


def test_flat_kernel_threshold_is_the_median_ratio(wide):
    y, proba, features = wide
    phi = (features - features.mean(0)) / features.std(0)
    groups = [(0, np.arange(400))]
    # the ratio grows with the bandwidth; find bandwidths on either side
    ratios = {
        h: _kernel_flatness(phi, np.ones(400), groups, h)[0] for h in (2.0, 3.0, 5.0)
    }
    assert ratios[2.0] < FLAT_ESS_RATIO < ratios[5.0]
    proba = np.full((400, 2), 0.5)  # one bin per class
    yb = y % 2
    for h, ratio in ratios.items():
        caught, _ = _caught(
            lambda h=h: local_calibration_error(
                yb, proba, phi, bandwidth=h, space=None
            ),
            FlatKernelWarning,
        )
        assert bool(caught) is (ratio > FLAT_ESS_RATIO)


def test_effective_sample_size_itself_does_not_warn(wide):
    y, proba, features = wide
    caught, _ = _caught(
        lambda: effective_sample_size(y, proba, features), FlatKernelWarning
    )
    assert caught == []


def test_the_default_search_does_not_pass_on_grid_edge_warnings():
    import warnings

    from skcal.exceptions import GridEdgeWarning
    from skcal.model_selection import CalibratorSearchCV

    X, y = make_miscalibrated_logits(600, 4, temperature=2.0, random_state=0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        CalibratorSearchCV(cv=2, random_state=0).fit(X, y)
    assert not [w for w in caught if issubclass(w.category, GridEdgeWarning)]
    # a user's own grid is the user's: its edge is reported
    X, y = make_miscalibrated_logits(300, 3, temperature=2.0, random_state=0)
    dirichlet = DirichletCalibratorCV(
        reg_lambdas=(1e-2, 1e-3), reg_mus=None, include_auto=False, cv=3, device="cpu"
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        CalibratorSearchCV([dirichlet], cv=3, random_state=0, guard=None).fit(X, y)
    edge = [str(w.message) for w in caught if issubclass(w.category, GridEdgeWarning)]
    assert edge and edge[0].startswith("candidate 'DirichletCalibratorCV' ("), edge
