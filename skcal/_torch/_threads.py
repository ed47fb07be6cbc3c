"""How many torch threads a call of skcal runs on.

torch runs its CPU kernels on a pool of OpenMP threads (as many as the
machine's cores by default) whose threads spin while they wait for each
other. On an idle machine that costs nothing; on a busy one (other
processes, the workers of ``GridSearchCV(n_jobs=-1)``, joblib or Dask) a
spinning pool competes for the cores with the work it waits for, and a fit
of a few milliseconds took 0.6-3.4 s on 2 cores with two busy processes
(``benchmarks/bench_threads.py``). skcal therefore chooses the threads of
each call (:func:`torch_threads`), from:

* the user's setting: ``skcal.set_config(n_threads=k)`` or ``with
  skcal.config_context(n_threads=k):`` (``None``, the default: automatic);
* the work of the call: one thread below twice :data:`WORK_PER_THREAD`
  entries (where a second thread saves nothing), then one per that many;
* the cores the process may use (its CPU affinity and its container's CPU
  quota) and torch's own limit (``OMP_NUM_THREADS``,
  ``torch.set_num_threads``; joblib's process workers set it to their
  share of the cores, and ``threadpoolctl.threadpool_limits``, which
  scikit-learn applies around its parallel work, sets it for OpenMP);
* the load: no more threads than the cores that the running threads of
  other processes leave (counted when the call starts);
* a call from a thread other than the main one (joblib's threading
  backend, Dask's threaded workers, a web server's pool) runs on one
  thread: its caller is the parallelism.

The thread count is set for the call and restored after it. A call nested
in another (a search fitting its candidates) runs on the outer call's
choice. Deterministic fits give the same model to the last bit on any
number of threads (tested; the affine fits sum over rows on one thread);
predictions of matrix maps may differ by a unit in the last place (the
matrix product's kernel depends on the split of the rows).
"""

from __future__ import annotations

import functools
import math
import os
import threading
from contextlib import contextmanager

import torch

__all__ = [
    "WORK_PER_THREAD",
    "config_n_threads",
    "n_threads_for",
    "set_n_threads",
    "threaded",
    "torch_threads",
]

#: Entries (rows x columns) of work per thread. Below two of these a second
#: thread saves nothing even on an idle machine (1.0x at 5,000 entries, 2
#: cores; torch itself splits no operation under 32,768 elements), and on a
#: busy one it costs.
WORK_PER_THREAD = 1 << 14

_GLOBAL = {"n_threads": None}
_LOCAL = threading.local()


def set_n_threads(n_threads, *, local: bool = False) -> None:
    """Set the user's thread count (None: automatic), for the process or,
    with ``local``, for the calling thread only (a context's override)."""
    if local:
        _LOCAL.n_threads = n_threads
    else:
        _GLOBAL["n_threads"] = n_threads


def config_n_threads():
    """The user's thread count in force in this thread (None: automatic)."""
    return getattr(_LOCAL, "n_threads", _GLOBAL["n_threads"])


def _cores() -> int:
    """The cores this process may run on: its CPU affinity, and its
    container's CPU quota (cgroup v2 ``cpu.max``) where one is set."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cores = os.cpu_count() or 1
    try:
        with open("/sys/fs/cgroup/cpu.max") as f:
            quota, period = f.read().split()[:2]
        if quota != "max":
            cores = min(cores, max(1, math.ceil(int(quota) / int(period))))
    except (OSError, ValueError):  # no cgroup v2 quota here
        pass
    return cores


def _own_running() -> int:
    """This process's threads that are running now (Linux)."""
    running = 0
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/stat") as f:
                stat = f.read()
        except OSError:  # the thread ended meanwhile
            continue
        running += stat[stat.rindex(")") + 2] == "R"
    return running


def _others_running() -> float:
    """Threads of other processes that are running now: the kernel's count
    of runnable threads (``/proc/loadavg``) less this process's; elsewhere
    the 1-minute load average less one. A snapshot errs toward busy, the
    cheap side (a thread too few costs at most its share of the speed; a
    spinning thread too many cost 20-100x in the measurements)."""
    try:
        with open("/proc/loadavg") as f:
            total = int(f.read().split()[3].split("/")[0])
        return max(0, total - _own_running())
    except (OSError, ValueError, IndexError):
        pass
    try:
        return max(0.0, os.getloadavg()[0] - 1.0)
    except (AttributeError, OSError):  # no load figures on this system
        return 0.0


def _idle_cores(cores: int) -> int:
    """The cores that other running threads leave to this process."""
    return max(1, cores - math.ceil(_others_running() - 0.25))


def n_threads_for(work: float) -> int:
    """The torch threads of a call of ``work`` entries (see the module notes)."""
    setting = config_n_threads()
    if setting is not None:
        return max(1, int(setting))
    if work < 2 * WORK_PER_THREAD:
        return 1
    if threading.current_thread() is not threading.main_thread():
        return 1
    cap = torch.get_num_threads()
    if cap <= 1:  # the user's torch.set_num_threads(1): no core count needed
        return 1
    cores = _cores()
    cap = min(cap, cores)
    if cap <= 1:
        return 1
    cap = min(cap, _idle_cores(cores))
    return max(1, min(cap, int(work // WORK_PER_THREAD)))


@contextmanager
def torch_threads(work: float):
    """Run the block on :func:`n_threads_for` ``(work)`` torch threads.

    Nested blocks run on the outermost block's choice. Yields the number
    of threads.
    """
    if getattr(_LOCAL, "depth", 0):
        _LOCAL.depth += 1
        try:
            yield torch.get_num_threads()
        finally:
            _LOCAL.depth -= 1
        return
    n = n_threads_for(work)
    before = torch.get_num_threads()
    if n != before:
        torch.set_num_threads(n)
    _LOCAL.depth = 1
    try:
        yield n
    finally:
        _LOCAL.depth = 0
        if n != before:
            torch.set_num_threads(before)


def threaded(work):
    """Decorate a method or function to run under :func:`torch_threads`.

    ``work(*args, **kwargs)`` gives the work of the call from its arguments
    (the same arguments as the decorated function).
    """

    def decorate(func):
        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            with torch_threads(work(*args, **kwargs)):
                return func(*args, **kwargs)

        return wrapper

    return decorate
