"""Code shared by the benchmark scripts (not part of the skcal package).

The scripts are run as ``python benchmarks/<script>.py``, so ``benchmarks/``
is the first entry of ``sys.path`` and ``import _lib`` works without any
path edit. Every module imports only the standard library and numpy at
import time (torch, scikit-learn, skcal and the peers inside functions), so
a script can import from here before it parses its arguments, except
``passthrough`` (scikit-learn classes), which ``peers`` imports lazily.

Modules
-------
common
    Timing, resident memory, child processes with JSON lines (stdlib only:
    the dirichletcal worker imports it under another interpreter).
datasets
    The real evaluation tasks and their cache (``benchmarks/.cache``).
synthetic
    ImageNet-like logits and embeddings of many classes.
calibrators
    Every skcal calibrator with its defaults, for the real tasks.
peers
    Other libraries' calibrators as ``(fit, predict)`` factories, and
    dirichletcal in a subprocess (``dirichletcal_worker``,
    ``peer_dirichletcal``, run with ``python -m`` from ``benchmarks/``).
"""
