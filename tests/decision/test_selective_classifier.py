"""SelectiveClassifier: hand-computed SGR and learn-then-test thresholds,
references written independently from the papers, and the guarantee on
data from a known calibrated model."""

import math
import warnings

import numpy as np
import pytest
from scipy.optimize import brentq
from scipy.stats import binom
from sklearn.frozen import FrozenEstimator

from skcal import IdentityCalibrator, TemperatureScaling
from skcal.decision import NoValidThresholdWarning, SelectiveClassifier


def _frozen_identity(n_classes=2):
    """A calibrator that returns its input probabilities, fitted elsewhere."""
    P = np.full((n_classes, n_classes), 0.1 / (n_classes - 1))
    np.fill_diagonal(P, 0.9)
    fitted = IdentityCalibrator(input="proba").fit(P, np.arange(n_classes))
    return FrozenEstimator(fitted)


def _binary_rows(confidence, wrong):
    """Probability rows predicting class 1 with ``confidence``, labels 0
    where ``wrong``."""
    confidence = np.asarray(confidence, float)
    X = np.column_stack([1 - confidence, confidence])
    return X, np.where(wrong, 0, 1)


def _selector(**params):
    return SelectiveClassifier(_frozen_identity(), threshold_fraction=1.0, **params)


def _upper_bound(errors, n, level):
    """Geifman & El-Yaniv's B*: the b with P(Bin(n, b) <= errors) = level,
    by root finding on scipy's binomial CDF."""
    if errors >= n:
        return 1.0
    return brentq(lambda b: binom.cdf(errors, n, b) - level, 1e-12, 1 - 1e-12)


def test_sgr_hand_computed_case():
    """m = 8 rows, k = ceil(log2 8) = 3 steps at level 0.3 / 3 = 0.1.

    Ascending confidences c0..c7, wrong rows c0, c1, c3. Step 1: z = 4,
    rows c4..c7, 0 errors, B* = 1 - 0.1 ** (1/4) = 0.4377 < 0.5: go lower.
    Step 2: z = 2, 6 rows, 1 error, B* > 0.5 (P(Bin(6, .5) <= 1) = 7/64 >
    0.1): go higher. Step 3: z = 3, 5 rows, 1 error, B* > 0.5 (6/32 > 0.1).
    The threshold is c4 with bound 1 - 0.1 ** 0.25.
    """
    conf = np.array([0.55, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9])
    X, y = _binary_rows(conf, [1, 1, 0, 1, 0, 0, 0, 0])
    clf = _selector(target_risk=0.5, delta=0.3, method="sgr").fit(X, y)
    assert clf.threshold_ == pytest.approx(0.75)
    assert clf.risk_upper_bound_ == pytest.approx(1 - 0.1**0.25)
    assert clf.coverage_ == pytest.approx(4 / 8)
    assert clf.predict(X).tolist() == [-1, -1, -1, -1, 1, 1, 1, 1]


def _sgr_reference(conf, wrong, target, delta):
    """Algorithm 1 of Geifman & El-Yaniv (2017) as printed, with the lowest
    passing threshold kept."""
    order = np.argsort(conf)
    conf, wrong = conf[order], wrong[order]
    m = len(conf)
    k = math.ceil(math.log2(m))
    z_min, z_max, best = 0, m - 1, (np.inf, None)
    for _ in range(k):
        z = math.ceil((z_min + z_max) / 2)
        keep = conf >= conf[z]
        b = _upper_bound(int(wrong[keep].sum()), int(keep.sum()), delta / k)
        if b < target:
            z_max = z
            best = min(best, (conf[z], b), key=lambda t: t[0])
        else:
            z_min = z
    return best


@pytest.mark.parametrize("seed", range(5))
def test_sgr_matches_the_reference_on_random_rows(seed):
    rng = np.random.default_rng(seed)
    conf = rng.uniform(0.5, 1.0, 1000)
    wrong = rng.random(1000) < (1 - conf)
    X, y = _binary_rows(conf, wrong)
    clf = _selector(target_risk=0.15, method="sgr").fit(X, y)
    threshold, bound = _sgr_reference(conf, wrong, 0.15, 0.1)
    assert np.isfinite(threshold)
    assert clf.threshold_ == pytest.approx(threshold)
    assert clf.risk_upper_bound_ == pytest.approx(bound, rel=1e-6)


def _p_value(errors, n, alpha):
    """P(Binomial(n, alpha) <= errors), summed term by term."""
    return sum(
        math.comb(n, j) * alpha**j * (1 - alpha) ** (n - j) for j in range(errors + 1)
    )


def test_ltt_hand_computed_case():
    """100 rows at 0.999 all right, 100 at 0.89 with 10 wrong, 100 at 0.6
    with 40 wrong; target 0.05, delta 0.1. Down the grid 1 - 10 ** -x:
    thresholds above 0.999 select no row (passed over), those in
    (0.89, 0.999] select the 100 right rows, p = 0.95 ** 100 = 0.006:
    rejected; at the first grid value <= 0.89, 10 errors in 200 rows,
    p = P(Bin(200, .05) <= 10) = 0.58: the sequence stops. The threshold is
    the lowest grid value above 0.89."""
    conf = np.repeat([0.999, 0.89, 0.6], 100)
    wrong = np.zeros(300, bool)
    wrong[100:110] = True
    wrong[200:240] = True
    X, y = _binary_rows(conf, wrong)
    clf = _selector(target_risk=0.05, delta=0.1, method="ltt").fit(X, y)
    grid = 1 - 10 ** -np.linspace(8, 0, 801)
    assert clf.threshold_ == pytest.approx(grid[grid > 0.89].min())
    assert _p_value(0, 100, 0.05) <= 0.1 < _p_value(10, 200, 0.05)
    assert clf.coverage_ == pytest.approx(1 / 3)
    assert clf.risk_upper_bound_ == pytest.approx(_upper_bound(0, 100, 0.1))


def _ltt_reference(conf, wrong, target, delta):
    """Fixed-sequence testing down the grid, binomial p-values term by term,
    thresholds too populous-poor to ever reject passed over."""
    chosen = np.inf
    for t in 1 - 10 ** -np.linspace(8, 0, 801):
        keep = conf >= t
        n, e = int(keep.sum()), int(wrong[keep].sum())
        if (1 - target) ** n > delta:
            continue
        if _p_value(e, n, target) > delta:
            break
        chosen = t
    return chosen


@pytest.mark.parametrize("seed", range(3))
def test_ltt_matches_the_reference_on_random_rows(seed):
    rng = np.random.default_rng(seed)
    conf = rng.uniform(0.5, 1.0, 1000)
    wrong = rng.random(1000) < (1 - conf)
    X, y = _binary_rows(conf, wrong)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NoValidThresholdWarning)
        clf = _selector(target_risk=0.1, method="ltt").fit(X, y)
    assert clf.threshold_ == pytest.approx(_ltt_reference(conf, wrong, 0.1, 0.1))


@pytest.mark.parametrize("method", ["sgr", "ltt"])
def test_guarantee_on_a_known_calibrated_model(method):
    """Confidences uniform on [0.5, 1] and errors with probability
    1 - confidence: a calibrated binary model whose selective risk at
    threshold t is exactly (1 - t) / 2. Over 300 draws of 1000 threshold
    rows, the risk exceeds the target in at most delta = 10% of the draws
    (plus three Monte-Carlo standard errors, 0.052)."""
    rng = np.random.default_rng(0)
    target, n_draws, exceeded, coverage = 0.1, 300, 0, []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NoValidThresholdWarning)
        for _ in range(n_draws):
            conf = rng.uniform(0.5, 1.0, 1000)
            X, y = _binary_rows(conf, rng.random(1000) < (1 - conf))
            clf = _selector(target_risk=target, method=method).fit(X, y)
            exceeded += (1 - clf.threshold_) / 2 > target
            coverage.append(clf.coverage_)
    assert exceeded / n_draws <= 0.1 + 3 * math.sqrt(0.09 / n_draws)
    # not vacuous: the oracle threshold 0.8 covers 40%
    assert np.mean(coverage) > 0.1


def test_per_class_thresholds_split_delta():
    """One threshold per predicted class, each SGR at level delta / 3."""
    rng = np.random.default_rng(3)
    n = 1500
    proba = rng.dirichlet(np.ones(3) * 0.5, size=n)
    y = np.array([rng.choice(3, p=p) for p in proba])
    clf = SelectiveClassifier(
        _frozen_identity(3), threshold_fraction=1.0, target_risk=0.2, per_class=True
    ).fit(proba, y)
    predicted = proba.argmax(1)
    for k in range(3):
        rows = predicted == k
        conf, wrong = proba[rows].max(1), y[rows] != k
        threshold, _ = _sgr_reference(conf, wrong, 0.2, 0.1 / 3)
        assert clf.thresholds_[k] == pytest.approx(threshold)
    assert not hasattr(clf, "threshold_")
    selected = proba.max(1) >= clf.thresholds_[predicted]
    assert clf.coverage_ == pytest.approx(selected.mean())


def test_unreachable_target_warns_and_abstains_on_everything():
    rng = np.random.default_rng(0)
    conf = rng.uniform(0.5, 1.0, 200)
    X, y = _binary_rows(conf, rng.random(200) < (1 - conf))
    with pytest.warns(NoValidThresholdWarning, match="best bound reached is 0"):
        clf = _selector(target_risk=0.001).fit(X, y)
    assert clf.threshold_ == np.inf and clf.coverage_ == 0.0
    assert 0.001 < clf.risk_upper_bound_ < 1
    assert (clf.predict(X) == -1).all()


def test_split_fit_and_string_labels():
    rng = np.random.default_rng(0)
    y = rng.integers(0, 3, 3000)
    X = 3.0 * np.eye(3)[y] + rng.normal(size=(3000, 3))
    names = np.array(["ant", "bee", "cat"])[y]
    clf = SelectiveClassifier(
        TemperatureScaling(device="cpu"), abstain_label="?", random_state=0
    ).fit(X, names)
    assert clf.n_threshold_rows_ == 1500
    pred = clf.predict(X)
    assert set(pred) == {"?", "ant", "bee", "cat"}
    assert np.array_equal(clf.confidence(X), clf.predict_proba(X).max(1))
    with pytest.raises(ValueError, match="not of the kind"):
        SelectiveClassifier(TemperatureScaling(device="cpu")).fit(X, names)
    with pytest.raises(ValueError, match="one of the classes"):
        SelectiveClassifier(TemperatureScaling(device="cpu"), abstain_label=2).fit(X, y)


def test_threshold_fraction_one_needs_a_frozen_calibrator():
    X, y = _binary_rows([0.6, 0.7, 0.8, 0.9], [0, 1, 0, 0])
    with pytest.raises(ValueError, match="FrozenEstimator"):
        SelectiveClassifier(
            IdentityCalibrator(input="proba"), threshold_fraction=1.0
        ).fit(X, y)


def test_zero_weight_rows_do_not_count():
    rng = np.random.default_rng(0)
    conf = rng.uniform(0.5, 1.0, 400)
    wrong = rng.random(400) < (1 - conf)
    X, y = _binary_rows(conf, wrong)
    weights = np.r_[np.ones(300), np.zeros(100)]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        weighted = _selector(target_risk=0.1).fit(X, y, sample_weight=weights)
    plain = _selector(target_risk=0.1).fit(X[:300], y[:300])
    assert weighted.threshold_ == plain.threshold_
    assert weighted.n_threshold_rows_ == 300
