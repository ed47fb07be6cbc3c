"""BBQ and ENIR against netcal 1.4, the papers' formulas and a convex solver."""

import contextlib
import copy
import io

import numpy as np
import pytest
from scipy.special import softmax
from sklearn.datasets import load_digits, load_wine
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler

from skcal import BBQCalibrator, ENIRCalibrator
from skcal.calibrators._bayesian_binning import (
    _bbq_bin_counts,
    _nir_blocks,
    _nir_path,
)
from skcal.exceptions import MissingClassWarning

netcal = pytest.importorskip("netcal")
from netcal.binning import BBQ, ENIR  # noqa: E402
from netcal.binning.NearIsotonicRegression import NearIsotonicRegression  # noqa: E402

#: netcal scores its models in float32 (torch's binary cross entropy): the
#: model weights, hence the averaged probabilities, agree to about 1e-7
NETCAL_ATOL = 2e-6


def _quiet(fn, *args):
    """netcal prints and draws progress bars: keep them out of the log."""
    with contextlib.redirect_stdout(io.StringIO()):
        with contextlib.redirect_stderr(io.StringIO()):
            return fn(*args)


def _scores(loader, n=None):
    """Softmax scores of a quick LogisticRegression: calibration and test."""
    X, y = loader(return_X_y=True)
    X = StandardScaler().fit_transform(X)
    X_fit, X_rest, y_fit, y_rest = train_test_split(X, y, test_size=0.6, random_state=0)
    X_cal, X_test, y_cal, _ = train_test_split(
        X_rest, y_rest, test_size=0.5, random_state=0
    )
    clf = LogisticRegression(C=0.01, max_iter=1000).fit(X_fit, y_fit)
    P = softmax(clf.decision_function(X_cal), axis=1)
    Pt = softmax(clf.decision_function(X_test), axis=1)
    return P[:n], y_cal[:n], Pt


# ------------------------------------------------------------------- BBQ
@pytest.mark.parametrize("loader", [load_wine, load_digits], ids=["wine", "digits"])
def test_bbq_is_netcal_bbq(loader):
    P, y, Pt = _scores(loader, n=500)
    ref = _quiet(BBQ().fit, P, y)
    expected = _quiet(ref.transform, Pt)  # renormalised by netcal
    bbq = BBQCalibrator(input="proba").fit(P, y)
    np.testing.assert_allclose(bbq.predict_proba(Pt), expected, atol=NETCAL_ATOL)
    # the same bin counts kept, per class
    for k, (_, model) in enumerate(ref._multiclass_instances):
        kept = sorted(m._bins_internal[0] for m in model._binning_models)
        assert sorted(bbq.model_sizes_[k]) == kept


def test_bbq_hand_case():
    # 10 samples: bin counts from max(1, floor(10^(1/3) / 10)) = 1 to
    # min(ceil(10 / 5), ceil(10 * 10^(1/3))) = 2
    p1 = np.array([0.05, 0.1, 0.2, 0.3, 0.45, 0.55, 0.6, 0.7, 0.8, 0.95])
    y = np.array([0, 0, 1, 0, 0, 1, 1, 0, 1, 1])
    P = np.column_stack([1 - p1, p1])
    bbq = BBQCalibrator(input="proba").fit(P, y)

    def bernoulli(k, n):  # the log likelihood of k hits of n at frequency k / n
        f = k / n
        return k * np.log(f) + (n - k) * np.log(1 - f)

    # class 1: one bin (5 of 10), or [0, .5] (1 of 5) and (.5, 1] (4 of 5)
    loglik = np.array([bernoulli(5, 10), bernoulli(1, 5) + bernoulli(4, 5)])
    bic = -2 * loglik + np.array([1, 2]) * np.log(10)
    rel = np.exp((bic.min() - bic) / 2)
    w = rel / rel.sum()  # two models: the elbow keeps both
    low, high = w[0] * 0.5 + w[1] * 0.2, w[0] * 0.5 + w[1] * 0.8
    np.testing.assert_allclose(np.sort(bbq.model_weights_[1]), np.sort(w))
    # class 0 is the mirror image: 0.8 below p_0 = .5, 0.2 above
    q = np.array([[w[0] * 0.5 + w[1] * 0.8, low], [w[0] * 0.5 + w[1] * 0.2, high]])
    expected = q / q.sum(axis=1, keepdims=True)
    got = bbq.predict_proba(np.array([[0.7, 0.3], [0.1, 0.9]]))
    np.testing.assert_allclose(got, expected, rtol=1e-12)


# ------------------------------------------------------------------- ENIR
def _fixed_merge(self, t_values, next_lambda):
    """netcal's merge, for chains of collisions too: groups ``i``, ``i + 1``
    and ``i + 2`` colliding at once become one group (netcal's own merge
    drops the range of ``i + 2``, whose scores then map to 0)."""
    keep = np.concatenate([[True], t_values != next_lambda])
    first = np.flatnonzero(keep)
    last = np.append(first[1:], keep.size) - 1
    items = self._group_items
    self._group_items = [np.concatenate(items[a : b + 1]) for a, b in zip(first, last)]
    bounds = self._group_bounds.copy()
    bounds[first, 1] = bounds[last, 1]
    self._group_bounds = bounds[first]
    self._group_values = self._group_values[first]
    self._num_groups = first.size


def _fixed_next_model(self):
    """netcal's next model, from copies: its in-place update otherwise moves
    each model of the path to the next one's values."""
    source = copy.copy(self)
    source._group_values = self._group_values.copy()
    source._group_bounds = self._group_bounds.copy()
    source._group_items = list(self._group_items)
    following = NearIsotonicRegression(self.quick_init)
    return None if following.fit(last_model=source) is None else following


@pytest.fixture
def netcal_nir_fixed(monkeypatch):
    monkeypatch.setattr(NearIsotonicRegression, "get_next_model", _fixed_next_model)
    monkeypatch.setattr(
        NearIsotonicRegression, "_NearIsotonicRegression__merge_groups", _fixed_merge
    )


@pytest.mark.parametrize("loader", [load_wine, load_digits], ids=["wine", "digits"])
def test_enir_is_netcal_enir(loader, netcal_nir_fixed):
    P, y, Pt = _scores(loader, n=500)
    enir = ENIRCalibrator(input="proba").fit(P, y)
    compared = 0
    for k in range(P.shape[1]):
        positive = (y == k).astype(np.int64)
        try:
            ref = _quiet(ENIR().fit, P[:, k], positive)
        except ValueError:  # netcal fails on a class isotonic from the start
            continue
        expected = _quiet(ref.transform, Pt[:, k])
        np.testing.assert_allclose(
            enir._map_column(k, Pt[:, k].copy()), expected, atol=NETCAL_ATOL
        )
        compared += 1
    assert compared >= P.shape[1] // 2


def _is_near_isotonic_solution(beta, y, w, lam, tol=1e-9):
    """The optimality conditions of ``min 1/2 sum w (y - b)^2 + lam sum (b_i -
    b_(i+1))_+``: zero is in the subgradient iff ``g_i = sum_(j <= i) w_j (y_j
    - b_j) / lam`` (the subgradient of the pair ``i, i + 1``) is 1 where
    ``b_i > b_(i+1)``, 0 where ``b_i < b_(i+1)``, in [0, 1] where they tie,
    and the sum over all samples is 0."""
    g = np.cumsum(w * (y - beta)) / lam
    pair, total = g[:-1], g[-1]
    down, up = beta[:-1] > beta[1:] + tol, beta[:-1] < beta[1:] - tol
    tie = ~(down | up)
    return (
        abs(total) < tol
        and np.all(np.abs(pair[down] - 1) < tol)
        and np.all(np.abs(pair[up]) < tol)
        and np.all((pair[tie] > -tol) & (pair[tie] < 1 + tol))
    )


def test_near_isotonic_path_solves_the_penalised_problem():
    # Tibshirani, Hoefling & Tibshirani (2011): each model of the path is the
    # nearly-isotonic regression at its lambda; blocks of unequal weights
    rng = np.random.default_rng(0)
    total = rng.integers(1, 4, 40).astype(np.float64)
    pos = np.floor(total * rng.uniform(size=40) * 1.6).clip(0, total)
    mean = pos / total
    n_models = 0
    for values, starts, lam in _nir_path(total, pos):
        fitted = np.repeat(values, np.diff(np.append(starts, total.size)))
        assert _is_near_isotonic_solution(fitted, mean, total, lam)
        if np.any(np.diff(fitted) < 0):  # not yet isotonic: lambda is its own
            assert not _is_near_isotonic_solution(fitted, mean, total, 1.5 * lam)
        n_models += 1
    assert n_models >= 5
    assert np.all(np.diff(fitted) >= -1e-12)  # the path ends isotonic


def test_enir_pools_tied_scores():
    p = np.array([0.1, 0.2, 0.2, 0.2, 0.6, 0.9])
    x, total, pos = _nir_blocks(p, np.array([0, 1, 0, 1, 1, 1.0]), np.ones(6))
    np.testing.assert_array_equal(x, [0.1, 0.2, 0.6, 0.9])
    np.testing.assert_array_equal(total, [1, 3, 1, 1])
    np.testing.assert_array_equal(pos, [0, 2, 1, 1])


# ------------------------------------------------------------------- both
@pytest.mark.parametrize("cls", [BBQCalibrator, ENIRCalibrator])
def test_weights_are_relative(cls):
    # zero weights drop rows, a common factor changes nothing, unit weights
    # are no weights
    P, y, Pt = _scores(load_wine)
    w = np.random.default_rng(0).integers(0, 3, y.size).astype(np.float64)
    weighted = cls(input="proba").fit(P, y, sample_weight=w).predict_proba(Pt)
    scaled = cls(input="proba").fit(P, y, sample_weight=1e3 * w).predict_proba(Pt)
    np.testing.assert_allclose(weighted, scaled, rtol=1e-12)
    keep = w > 0
    dropped = cls(input="proba").fit(P[keep], y[keep], sample_weight=w[keep])
    np.testing.assert_allclose(dropped.predict_proba(Pt), weighted, rtol=1e-12)
    ones = cls(input="proba").fit(P, y, sample_weight=np.ones(y.size))
    np.testing.assert_array_equal(
        ones.predict_proba(Pt), cls(input="proba").fit(P, y).predict_proba(Pt)
    )


@pytest.mark.parametrize(
    "n, low, high", [(10, 1, 2), (64, 1, 13), (1000, 1, 100), (50_000, 3, 369)]
)
def test_bbq_bin_counts_are_the_papers(n, low, high):
    # from max(1, floor(N^(1/3) / 10)) to min(ceil(N / 5), ceil(10 N^(1/3)))
    np.testing.assert_array_equal(_bbq_bin_counts(n), np.arange(low, high + 1))


@pytest.mark.parametrize("cls", [BBQCalibrator, ENIRCalibrator])
def test_absent_class_gets_the_mean_map(cls):
    P, y, Pt = _scores(load_wine)
    keep = y != 2
    with pytest.warns(MissingClassWarning):
        cal = cls(input="proba", classes=[0, 1, 2]).fit(P[keep], y[keep])
    assert cal.model_sizes_[2].size == 0
    grid = np.linspace(0, 1, 101)
    mean = (cal._map_column(0, grid) + cal._map_column(1, grid)) / 2
    np.testing.assert_allclose(cal._map_column(2, grid), mean, atol=1e-12)
    proba = cal.predict_proba(Pt)
    assert proba.shape == Pt.shape and np.allclose(proba.sum(axis=1), 1)


@pytest.mark.parametrize("cls", [BBQCalibrator, ENIRCalibrator])
def test_verbose_reports_progress_on_stderr(cls, capsys):
    P, y, _ = _scores(load_wine)
    cls(input="proba", verbose=2).fit(P, y)
    captured = capsys.readouterr()
    assert captured.out == ""
    assert cls.__name__ in captured.err and "class 2" in captured.err
