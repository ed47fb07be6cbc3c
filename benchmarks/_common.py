"""Helpers shared by the benchmark scripts (not part of the package)."""

import time


def best_time(fn, repeat=3):
    """Smallest wall time of ``repeat`` calls of ``fn()`` and its last result."""
    times, result = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return min(times), result
