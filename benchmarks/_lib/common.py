"""Timing, memory and child-process helpers of the benchmark scripts.

Standard library only (torch and torchmetrics inside ``torchmetrics_ece``):
``peer_dirichletcal`` imports it under another interpreter.
"""

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


def spawn_json_lines(cmd, env):
    """Start ``cmd`` in its own session; its stdout lines arrive in a queue.

    Returns ``(proc, lines, errors)``: the process, a ``queue.Queue`` of its
    stdout lines (a reader thread fills it, so a full pipe never blocks the
    child) and a temporary file holding its stderr. Kill the whole group
    with ``os.killpg(proc.pid, signal.SIGKILL)``.
    """
    import queue
    import subprocess
    import tempfile
    import threading

    errors = tempfile.TemporaryFile(mode="w+")  # a pipe could fill up and block
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=errors,
        text=True,
        env=env,
        start_new_session=True,
    )
    lines = queue.Queue()
    threading.Thread(
        target=lambda: [lines.put(x) for x in proc.stdout], daemon=True
    ).start()
    return proc, lines, errors


def torchmetrics_ece(n_bins):
    """``f(y, P)``: torchmetrics' top-label ECE (L1, ``n_bins`` bins)."""
    import torch
    from torchmetrics.classification import MulticlassCalibrationError

    def f(y, P):
        metric = MulticlassCalibrationError(
            num_classes=P.shape[1], n_bins=n_bins, norm="l1"
        )
        return float(metric(torch.from_numpy(P), torch.from_numpy(y)))

    return f


def next_record(lines, timeout=0.2):
    """The next JSON record a child printed, or None if none came in time.

    Lines that are not JSON (a library's own output) are skipped.
    """
    import json
    import queue

    while True:
        try:
            return json.loads(lines.get(timeout=timeout))
        except queue.Empty:
            return None
        except json.JSONDecodeError:
            continue


def select_methods(parser, names, wanted):
    """``names`` restricted to ``wanted`` (all when empty), in their order.

    Unknown names are a command-line error that lists the known ones.
    """
    if not wanted:
        return list(names)
    unknown = set(wanted) - set(names)
    if unknown:
        parser.error(f"unknown methods {sorted(unknown)}; known: {list(names)}")
    return [name for name in names if name in wanted]
