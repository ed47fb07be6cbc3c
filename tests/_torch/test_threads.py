"""The torch threads of skcal's calls: chosen per call, set by the user, and
without effect on deterministic results."""

import os
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import torch
from threadpoolctl import threadpool_limits

import skcal
from skcal._torch import _threads
from skcal._torch._threads import WORK_PER_THREAD, n_threads_for, torch_threads
from skcal.discovery import all_estimators
from skcal.utils._testing import make_estimator, make_miscalibrated_logits

BIG = 64 * WORK_PER_THREAD


@pytest.fixture
def two_idle_cores(monkeypatch):
    """A machine with two cores and nothing else running, whatever this one is."""
    monkeypatch.setattr(_threads, "_cores", lambda: 2)
    monkeypatch.setattr(_threads, "_idle_cores", lambda cores: cores)
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(before)


def test_small_work_runs_on_one_thread(two_idle_cores):
    assert n_threads_for(0) == 1
    assert n_threads_for(WORK_PER_THREAD) == 1
    assert n_threads_for(BIG) == 2


def test_large_work_respects_every_limit(two_idle_cores, monkeypatch):
    # torch's own limit (OMP_NUM_THREADS, torch.set_num_threads, joblib's share)
    torch.set_num_threads(1)
    assert n_threads_for(BIG) == 1
    torch.set_num_threads(2)
    # threadpoolctl's limits in force (scikit-learn's threadpool_limits)
    with threadpool_limits(limits=1):
        assert n_threads_for(BIG) == 1
    # the cores other processes leave
    monkeypatch.setattr(_threads, "_idle_cores", lambda cores: 1)
    assert n_threads_for(BIG) == 1


def test_a_thread_of_a_pool_runs_on_one_thread(two_idle_cores):
    with ThreadPoolExecutor(1) as pool:
        assert pool.submit(n_threads_for, BIG).result() == 1
    assert n_threads_for(BIG) == 2


def test_the_load_leaves_the_idle_cores(monkeypatch):
    monkeypatch.setattr(_threads, "_others_running", lambda: 2)
    assert _threads._idle_cores(2) == 1  # two other busy processes
    assert _threads._idle_cores(4) == 2
    monkeypatch.setattr(_threads, "_others_running", lambda: 0)
    assert _threads._idle_cores(2) == 2  # this process alone


@pytest.mark.skipif(not os.path.exists("/proc/loadavg"), reason="Linux only")
def test_other_busy_processes_are_counted_and_this_one_is_not():
    code = "while True: pass"
    busy = [subprocess.Popen([sys.executable, "-c", code]) for _ in range(2)]
    try:
        time.sleep(0.5)
        assert _threads._others_running() >= 2
    finally:
        for p in busy:
            p.kill()
            p.wait()
    assert _threads._own_running() >= 1  # the thread asking, at least


def test_without_proc_the_load_average_counts(monkeypatch):
    def no_proc(*args, **kwargs):
        raise OSError("no /proc here")

    monkeypatch.setattr(_threads, "open", no_proc, raising=False)
    monkeypatch.setattr(_threads.os, "getloadavg", lambda: (3.2, 0.0, 0.0))
    assert _threads._others_running() == pytest.approx(2.2)
    assert _threads._cores() >= 1  # no quota file: the affinity alone


def test_the_block_sets_and_restores_torchs_threads(two_idle_cores):
    torch.set_num_threads(2)
    with torch_threads(0) as n:
        assert n == 1 and torch.get_num_threads() == 1
        with torch_threads(BIG) as inner:  # nested: the outer choice
            assert inner == 1 and torch.get_num_threads() == 1
    assert torch.get_num_threads() == 2
    with pytest.raises(RuntimeError), torch_threads(0):
        raise RuntimeError
    assert torch.get_num_threads() == 2


def test_the_users_setting_wins_and_is_restored():
    assert skcal.get_config() == {"n_threads": None}
    skcal.set_config(n_threads=3)
    try:
        assert n_threads_for(0) == 3
        with skcal.config_context(n_threads=1):
            assert n_threads_for(BIG) == 1
            # another thread sees the process-wide setting, not this block's
            with ThreadPoolExecutor(1) as pool:
                assert pool.submit(skcal.get_config).result()["n_threads"] == 3
        assert skcal.get_config()["n_threads"] == 3
    finally:
        skcal.set_config(n_threads=None)
    assert skcal.get_config()["n_threads"] is None


@pytest.mark.parametrize("bad", [0, -1, 1.5, "2", True])
def test_bad_settings_are_clear_errors(bad):
    with pytest.raises(ValueError, match="positive integer or None"):
        skcal.set_config(n_threads=bad)
    with pytest.raises(ValueError, match="positive integer or None"):
        with skcal.config_context(n_threads=bad):
            pass


def test_calls_run_on_the_chosen_threads(monkeypatch):
    """Fits, predictions and metrics run under the choice for their work."""
    seen = []
    original = _threads.n_threads_for

    def record(work):
        seen.append(work)
        return original(work)

    monkeypatch.setattr(_threads, "n_threads_for", record)
    X, y = make_miscalibrated_logits(300, 7, random_state=0)
    model = skcal.MatrixScaling(device="cpu").fit(X, y)
    model.predict_proba(X)
    skcal.metrics.expected_calibration_error(y, model.predict_proba(X))
    assert seen[:2] == [300 * 7] * 2  # the entries of X
    assert seen[-1] == 300 * 7  # the metric's outer call
    assert threading.current_thread() is threading.main_thread()


#: calibrators whose fit and prediction are deterministic
DETERMINISTIC = [
    cls
    for name, cls in all_estimators("score")
    if "random_state" not in cls().get_params()
]


@pytest.mark.parametrize("cls", DETERMINISTIC, ids=lambda c: c.__name__)
def test_results_do_not_depend_on_the_thread_count(cls):
    """The same fit and probabilities on 1 and on 2 threads, up to rounding
    (forced: the automatic choice would take one thread for this size).

    Not to the last bit: on some CPUs (a Xeon with AVX-512 FP16, for one)
    MKL's matrix product of half the rows takes another kernel than of all
    of them, and the optimiser then follows a path a few units in the last
    place away (measured: probabilities 3e-11 apart, a fitted parameter
    3e-9 of its size). A thread count that changed the model would move it
    by far more."""
    X, y = make_miscalibrated_logits(3000, 12, temperature=2.0, random_state=0)
    results = []
    for n in (1, 2):
        with skcal.config_context(n_threads=n):
            est = make_estimator(cls, device="cpu").fit(X, y)
            results.append((est.predict_proba(X), _fitted(est)))
    np.testing.assert_allclose(results[0][0], results[1][0], rtol=1e-8, atol=1e-15)
    for a, b in zip(results[0][1], results[1][1]):
        scale = np.max(np.abs(b), initial=0.0)
        np.testing.assert_allclose(a, b, rtol=1e-7, atol=1e-9 * scale)


def _fitted(est):
    """The fitted numeric attributes of ``est``, as arrays."""
    out = []
    for name, value in sorted(vars(est).items()):
        if name.endswith("_") and not name.startswith("_"):
            try:
                out.append(np.asarray(value, dtype=float))
            except (TypeError, ValueError):
                continue
    return out


@pytest.mark.parametrize(
    "name",
    [
        "StructuredVectorScaling",
        "StructuredMatrixScaling",
        "BiasCorrectedTemperatureScaling",
        "DirichletCalibrator",
    ],
)
def test_affine_fits_are_bit_identical_on_1_and_2_threads(name):
    """The L-BFGS fits of affine maps sum their loss and gradient over rows
    on one thread, in one order: the fitted maps on 1 and 2 threads are the
    same to the last bit (split over two threads, the partial sums were
    added in another order and the fits 4e-16 to 1e-13 apart at this size,
    up to 6e-12 at 20,000 rows)."""
    X, y = make_miscalibrated_logits(8000, 10, temperature=2.0, random_state=0)
    fitted = []
    for n in (1, 2):
        with skcal.config_context(n_threads=n):
            fitted.append(
                _fitted(make_estimator(getattr(skcal, name), device="cpu").fit(X, y))
            )
    assert len(fitted[0]) > 0
    for a, b in zip(*fitted):
        np.testing.assert_array_equal(a, b)
