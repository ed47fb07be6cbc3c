"""The benchmark scripts stay runnable: ``--help`` works, their shared code imports.

Every ``benchmarks/*.py`` is an entry point, run as ``python
benchmarks/<script>.py`` from the repository root (the shared code, and the
workers that run in a subprocess, live in ``benchmarks/_lib``), so a new
script is covered by its file alone. ``--help`` must answer without the
benchmark data, the optional peers or the heavy libraries: a script imports
those after parsing its arguments. None of this runs a benchmark.
"""

import ast
import importlib
import pkgutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCHMARKS = ROOT / "benchmarks"
SCRIPTS = sorted(path.name for path in BENCHMARKS.glob("*.py"))
#: Not imported by ``--help`` (numpy and scipy are allowed): the heavy
#: dependencies, the data packages and the optional peers.
HEAVY = {
    "torch",
    "sklearn",
    "skcal",
    "pandas",
    "dask",
    "distributed",
    "sentence_transformers",
    "netcal",
    "probmetrics",
    "torchmetrics",
    "betacal",
    "dirichletcal",
}


def _help(script):
    """``python -X importtime benchmarks/<script> --help`` from the root."""
    return subprocess.run(
        [sys.executable, "-X", "importtime", f"benchmarks/{script}", "--help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.fixture(scope="module")
def help_runs():
    """Every script's ``--help``, run four at a time (about 1 s each)."""
    with ThreadPoolExecutor(max_workers=4) as pool:
        return dict(zip(SCRIPTS, pool.map(_help, SCRIPTS)))


def _imported(stderr):
    """Top-level names of the modules in ``-X importtime``'s report."""
    return {
        line.rsplit("|", 1)[1].strip().split(".")[0]
        for line in stderr.splitlines()
        if line.startswith("import time:") and line.count("|") == 2
    }


def test_scripts_found():
    assert "compare_peers.py" in SCRIPTS and "_datasets.py" in SCRIPTS
    assert len(SCRIPTS) >= 18


@pytest.mark.parametrize("script", SCRIPTS)
def test_script_help(script, help_runs):
    run = help_runs[script]
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.startswith("usage: "), run.stdout[:500]
    heavy = sorted(_imported(run.stderr) & HEAVY)
    assert not heavy, f"{script} --help imports {heavy}: import them after parsing"


@pytest.fixture
def benchmarks_on_path(monkeypatch):
    """``benchmarks/`` first on ``sys.path``, as for a script; ``_lib`` unloaded."""
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    yield
    for name in [m for m in sys.modules if m == "_lib" or m.startswith("_lib.")]:
        del sys.modules[name]


def test_lib_modules_import(benchmarks_on_path):
    lib = importlib.import_module("_lib")
    names = sorted(m.name for m in pkgutil.walk_packages(lib.__path__, "_lib."))
    for name in names:
        importlib.import_module(name)
    assert {"_lib.common", "_lib.datasets.cache", "_lib.peers"} <= set(names)
    datasets = importlib.import_module("_lib.datasets")
    assert datasets.CACHE_DIR == BENCHMARKS / ".cache"  # where the cache was built
    assert len(datasets.TASK_NAMES) == 8


def _skcal_names():
    """``(module, name)`` of every skcal import and ``skcal.<name>`` use."""
    found = set()
    for path in BENCHMARKS.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and not node.level and node.module:
                if node.module.split(".")[0] == "skcal":
                    found.update((node.module, a.name) for a in node.names)
            elif isinstance(node, ast.Import):
                found.update(
                    (a.name, None) for a in node.names if a.name.startswith("skcal")
                )
            elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
                if node.value.id == "skcal":
                    found.add(("skcal", node.attr))
    return sorted(found, key=str)


def test_skcal_names_exist():
    """The benchmarks import skcal inside functions: check every name they use."""
    names = _skcal_names()
    assert ("skcal.utils._testing", "make_miscalibrated_logits") in names
    missing = []
    for module_name, name in names:
        try:
            module = importlib.import_module(module_name)
        except ImportError as exc:
            missing.append(f"{module_name}: {exc}")
            continue
        if name is not None and not hasattr(module, name):
            try:
                importlib.import_module(f"{module_name}.{name}")
            except ImportError:
                missing.append(f"{module_name}.{name}")
    assert not missing, f"names the benchmarks use are gone from skcal: {missing}"
