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


def current_rss_mb() -> float:
    """Resident set size of this process, in MB (Linux ``/proc``)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")
