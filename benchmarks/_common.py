"""Helpers shared by the benchmark scripts (not part of the package)."""

import time


def _run(fn, repeat):
    """Wall times of ``repeat`` calls of ``fn()`` and its last result."""
    times, result = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return times, result


def best_time(fn, repeat=3):
    """Smallest wall time of ``repeat`` calls of ``fn()`` and its last result."""
    times, result = _run(fn, repeat)
    return min(times), result


def median_time(fn, repeat=5):
    """Median wall time of ``repeat`` calls of ``fn()`` and its last result."""
    times, result = _run(fn, repeat)
    return sorted(times)[len(times) // 2], result


def timed(fn, repeats, budget):
    """Best wall time of up to ``repeats`` calls, stopping after ``budget`` s.

    Returns ``(best_seconds, last_result, runs)``; at least one call runs.
    """
    best, result, spent, runs = float("inf"), None, 0.0, 0
    while runs < max(repeats, 1) and (runs == 0 or spent < budget):
        start = time.perf_counter()
        result = fn()
        elapsed = time.perf_counter() - start
        best, spent, runs = min(best, elapsed), spent + elapsed, runs + 1
    return best, result, runs


def current_rss_mb() -> float:
    """Resident set size of this process, in MB (Linux ``/proc``)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")
