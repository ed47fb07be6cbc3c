"""Dask: metrics over dask arrays, lazy predictions, a LocalCluster run."""

import numpy as np
import pytest

da = pytest.importorskip("dask.array")

import dask  # noqa: E402
from sklearn.datasets import load_digits  # noqa: E402
from sklearn.frozen import FrozenEstimator  # noqa: E402
from sklearn.linear_model import LogisticRegression  # noqa: E402

import skcal.metrics._dask as metric_dask  # noqa: E402
import skcal.utils._dask as skdask  # noqa: E402
from skcal import (  # noqa: E402
    CalibratedClassifier,
    ProCalCalibrator,
    TemperatureScaling,
    VectorScaling,
)
from skcal.metrics import (  # noqa: E402
    brier_score,
    classwise_calibration_error,
    cumulative_calibration_error,
    ecce_binned_mean,
    expected_calibration_error,
    local_calibration_error,
    max_calibration_error,
    negative_log_likelihood,
    smooth_expected_calibration_error,
    soft_binned_calibration_error,
    soft_expected_calibration_error,
)

METRICS = [
    (expected_calibration_error, {}),
    (expected_calibration_error, {"norm": "l2", "closed": "right"}),
    (max_calibration_error, {}),
    (classwise_calibration_error, {"n_bins": 10}),
    (ecce_binned_mean, {"class_weight": "frequency"}),
    (negative_log_likelihood, {}),
    (brier_score, {}),
    (soft_expected_calibration_error, {}),
    (soft_binned_calibration_error, {}),
]


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    n, c = 5000, 6
    logits = 2.5 * rng.normal(size=(n, c))
    proba = np.exp(logits - logits.max(1, keepdims=True))
    proba /= proba.sum(1, keepdims=True)
    y = rng.integers(0, c, n)
    y[: n // 2] = proba[: n // 2].argmax(1)
    return y, proba, rng.uniform(0.2, 2.0, n)


@pytest.fixture
def no_gathering(monkeypatch):
    """Fail if a whole dask array is turned into numpy, and record the rows
    of every chunk state."""
    seen = []

    def refuse(self, *args, **kwargs):
        raise AssertionError("the whole dask array was materialised")

    monkeypatch.setattr(da.Array, "__array__", refuse)
    original = metric_dask._chunk_state

    def record(template, y_true, y_proba, sample_weight):
        seen.append(len(y_true))
        return original(template, y_true, y_proba, sample_weight)

    monkeypatch.setattr(metric_dask, "_chunk_state", record)
    return seen


@pytest.mark.parametrize(
    "metric, params", METRICS, ids=[m.__name__ for m, _ in METRICS]
)
def test_metrics_of_dask_arrays_equal_numpy(data, metric, params, no_gathering):
    y, proba, w = data
    dy = da.from_array(y, chunks=700)
    dp = da.from_array(proba, chunks=(700, 6))
    dw = da.from_array(w, chunks=1100)  # other chunks: rechunked to the rows
    expected = metric(y, proba, sample_weight=w, **params)
    got = metric(dy, dp, sample_weight=dw, **params)
    assert got == pytest.approx(expected, rel=1e-12, abs=1e-12)
    assert max(no_gathering) <= 700 and sum(no_gathering) == len(y)
    # numpy labels with dask probabilities, ragged chunks
    dp = da.from_array(proba, chunks=((1, 999, 0, 2500, 1500), (2, 4)))
    assert metric(y, dp, **params) == pytest.approx(
        metric(y, proba, **params), rel=1e-12, abs=1e-12
    )
    # a chunk whose weights are all 0 (the total is what must be positive)
    w_zero = w.copy()
    w_zero[:700] = 0.0
    dw = da.from_array(w_zero, chunks=700)
    assert metric(
        dy, da.from_array(proba, chunks=(700, 6)), sample_weight=dw, **params
    ) == (
        pytest.approx(
            metric(y, proba, sample_weight=w_zero, **params), rel=1e-12, abs=1e-12
        )
    )


@pytest.mark.parametrize(
    "metric", [expected_calibration_error, classwise_calibration_error]
)
def test_quantile_bins_take_two_passes_over_a_dask_array(data, metric, no_gathering):
    y, proba, w = data
    dp = da.from_array(proba, chunks=(512, 6))
    got = metric(y, dp, strategy="quantile", sample_weight=w)
    assert sum(no_gathering) == 2 * len(y)  # two passes, chunk by chunk
    batch = metric(y, proba, strategy="quantile", sample_weight=w)
    assert got == pytest.approx(batch, abs=2e-3)  # sketched edges (see states)


def test_unknown_chunk_sizes_and_length_mismatch(data):
    y, proba, _ = data
    dp = da.from_array(proba, chunks=(1000, 6))
    dp = dp[dp[:, 0] >= 0]  # unknown chunk sizes, all rows kept
    assert np.isnan(dp.shape[0])
    assert expected_calibration_error(y, dp) == pytest.approx(
        expected_calibration_error(y, proba), rel=1e-12
    )
    with pytest.raises(ValueError, match="different lengths"):
        expected_calibration_error(y[:-1], da.from_array(proba, chunks=500))


def test_metrics_without_a_mergeable_state_refuse_dask_inputs(data):
    y, proba, _ = data
    dp = da.from_array(proba, chunks=1000)
    for metric in (cumulative_calibration_error, smooth_expected_calibration_error):
        with pytest.raises(ValueError, match="no mergeable state"):
            metric(y, dp)
    with pytest.raises(ValueError, match="every pair of rows"):
        local_calibration_error(y, dp, np.zeros((len(y), 3)))


# ------------------------------------------------------------- predictions
@pytest.fixture(scope="module")
def digits():
    X, y = load_digits(return_X_y=True)
    model = LogisticRegression(C=10, max_iter=5000).fit(X[:900], y[:900])
    return X, y, model


def test_calibrator_predictions_on_dask_are_lazy_and_equal(digits):
    X, y, model = digits
    Z = model.decision_function(X)
    vs = VectorScaling(device="cpu").fit(Z[900:1400], y[900:1400])
    dz = da.from_array(Z[1400:], chunks=(100, 4))
    calls = []
    original = VectorScaling.predict_proba.__wrapped__

    for name in ("predict_proba", "predict_log_proba", "decision_function", "predict"):
        out = getattr(vs, name)(dz)
        assert isinstance(out, da.Array), name
        np.testing.assert_array_equal(out.compute(), getattr(vs, name)(Z[1400:]))

    # nothing runs until compute: count the block calls
    def counting(self, X):
        calls.append(len(X))
        return original(self, X)

    lazy = skdask.lazy_on_dask("proba")(counting)
    result = lazy(vs, dz)
    assert calls == []
    result.compute()
    assert sorted(calls) == sorted(c for c in dz.chunks[0])


def test_calibrated_classifier_and_local_calibrator_on_dask(digits):
    X, y, model = digits
    cc = CalibratedClassifier(
        FrozenEstimator(model), calibrator=TemperatureScaling(device="cpu")
    ).fit(X[900:1400], y[900:1400])
    dX = da.from_array(X[1400:], chunks=(128, 16))
    np.testing.assert_array_equal(
        cc.predict_proba(dX).compute(), cc.predict_proba(X[1400:])
    )
    np.testing.assert_array_equal(cc.predict(dX).compute(), cc.predict(X[1400:]))
    procal = ProCalCalibrator(
        coef=model.coef_, intercept=model.intercept_, device="cpu"
    ).fit(X[900:1400], y[900:1400])
    np.testing.assert_array_equal(
        procal.predict_proba(dX).compute(), procal.predict_proba(X[1400:])
    )
    np.testing.assert_array_equal(
        procal.predict(dX).compute(), procal.predict(X[1400:])
    )
    # an unfitted estimator fails at once, not at compute time
    with pytest.raises(Exception, match="not fitted"):
        TemperatureScaling().predict_proba(da.zeros((10, 3), chunks=5))


def test_lazy_predictions_of_ragged_chunks_with_an_empty_one(digits):
    """An empty row chunk (after a filter) gives an empty block of the right
    columns and dtype. Was: ValueError 'Found array with 0 sample(s)'."""
    X, y, model = digits
    Z = model.decision_function(X)
    vs = VectorScaling(device="cpu").fit(Z[900:1400], y[900:1400])
    procal = ProCalCalibrator(
        coef=model.coef_, intercept=model.intercept_, device="cpu"
    ).fit(X[900:1400], y[900:1400])
    cases = [
        (vs, Z[1400:], ("predict_proba", "predict_log_proba", "decision_function")),
        (procal, X[1400:], ("predict_proba", "predict_log_proba")),
    ]
    for est, A, names in cases:
        dA = da.from_array(A, chunks=((100, 0, len(A) - 100), (A.shape[1],)))
        for name in (*names, "predict"):
            expected = getattr(est, name)(A)
            out = getattr(est, name)(dA)
            empty = out.blocks[1].compute()
            assert empty.shape == (0, *expected.shape[1:]), name
            assert empty.dtype == expected.dtype, name
            np.testing.assert_array_equal(out.compute(), expected)
    # a filter that empties a whole chunk, then a metric of the predictions
    cc = CalibratedClassifier(
        FrozenEstimator(model), calibrator=TemperatureScaling(device="cpu")
    ).fit(X[900:1400], y[900:1400])
    keep = (np.arange(len(X)) < 1400) | (np.arange(len(X)) >= 1500)
    dX = da.from_array(X, chunks=(100, 64))[da.from_array(keep, chunks=100)]
    dX = dX.compute_chunk_sizes()
    assert 0 in dX.chunks[0]
    np.testing.assert_array_equal(cc.predict(dX).compute(), cc.predict(X[keep]))
    with dask.config.set(scheduler="sync"):
        got = negative_log_likelihood(y[keep], cc.predict_proba(dX))
    assert got == pytest.approx(
        negative_log_likelihood(y[keep], cc.predict_proba(X[keep])), rel=1e-12
    )


def test_metric_of_lazy_predictions(digits):
    X, y, model = digits
    cc = CalibratedClassifier(
        FrozenEstimator(model), calibrator=TemperatureScaling(device="cpu")
    ).fit(X[900:1400], y[900:1400])
    dX = da.from_array(X[1400:], chunks=(100, 64))
    with dask.config.set(scheduler="sync"):
        got = negative_log_likelihood(y[1400:], cc.predict_proba(dX))
    assert got == pytest.approx(
        negative_log_likelihood(y[1400:], cc.predict_proba(X[1400:])), rel=1e-12
    )


# ----------------------------------------------------------------- cluster
@pytest.fixture(scope="module")
def cluster_client():
    distributed = pytest.importorskip("distributed")
    with (
        distributed.LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            processes=True,
            dashboard_address=None,
            worker_dashboard_address=None,
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        yield client


@pytest.mark.filterwarnings("ignore::skcal.exceptions.GridEdgeWarning")
def test_searches_on_a_local_cluster_equal_the_local_run(digits, cluster_client):
    from joblib import parallel_config
    from sklearn.model_selection import GridSearchCV

    from skcal import CalibratorSearchCV, DirichletCalibratorCV, IdentityCalibrator

    X, y, model = digits
    Z, yc = model.decision_function(X[900:1500]), y[900:1500]

    def searches():
        grid = GridSearchCV(
            VectorScaling(device="cpu"),
            {"reg_lambda": [0.0, 0.01, 1.0]},
            cv=3,
            n_jobs=2,
        ).fit(Z, yc)
        search = CalibratorSearchCV(
            [
                IdentityCalibrator(),
                TemperatureScaling(device="cpu"),
                grid.best_estimator_,
            ],
            cv=3,
            n_jobs=2,
            random_state=0,
        ).fit(Z, yc)
        dirichlet = DirichletCalibratorCV(
            reg_lambdas=(1e-1, 1e-3),
            reg_mus=None,
            cv=3,
            n_jobs=2,
            random_state=0,
            device="cpu",
        ).fit(Z, yc)
        crossfit = CalibratedClassifier(
            LogisticRegression(C=10, max_iter=2000),
            calibrator=TemperatureScaling(device="cpu"),
            cv=3,
            n_jobs=2,
        ).fit(X[:900], y[:900])
        return grid, search, dirichlet, crossfit

    from distributed import get_task_stream

    local = searches()
    with get_task_stream(cluster_client) as stream, parallel_config(backend="dask"):
        remote = searches()
    # the fits ran as tasks on the two worker processes
    assert len({task["worker"] for task in stream.data}) == 2
    np.testing.assert_allclose(
        remote[0].cv_results_["mean_test_score"],
        local[0].cv_results_["mean_test_score"],
        rtol=1e-12,
    )
    np.testing.assert_allclose(
        remote[1].cv_results_["mean_test_score"],
        local[1].cv_results_["mean_test_score"],
        rtol=1e-12,
    )
    assert remote[1].selected_ == local[1].selected_
    np.testing.assert_allclose(
        remote[3].predict_proba(X[900:]), local[3].predict_proba(X[900:]), rtol=1e-12
    )
    np.testing.assert_allclose(
        remote[2].cv_results_["mean_test_nll"],
        local[2].cv_results_["mean_test_nll"],
        rtol=1e-12,
    )
    # a metric of a dask array is reduced on the cluster (the active client)
    rng = np.random.default_rng(0)
    proba = rng.dirichlet(np.ones(4), size=4000)
    labels = rng.integers(0, 4, 4000)
    got = expected_calibration_error(labels, da.from_array(proba, chunks=(500, 4)))
    assert got == pytest.approx(expected_calibration_error(labels, proba), rel=1e-12)
