"""The layout that CONTRIBUTING.md draws is the layout of the repository."""

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CONTRIBUTING = ROOT / "CONTRIBUTING.md"
PACKAGE = ROOT / "skcal"
TORCH = PACKAGE / "_torch"

#: An import of torch (``import torch``, ``import torch.nn as nn``,
#: ``from torch import ...``, ``from torch.nn import ...``), also indented.
TORCH_IMPORT = re.compile(r"^\s*(import\s+torch\b|from\s+torch(\.\w+)*\s+import\b)")
#: A path in backquotes: a top-level folder of the repository, then names
#: (placeholders such as ``_<family>.py`` are not paths).
PATH = re.compile(r"`((?:skcal|tests|doc|benchmarks|examples|\.ci)(?:/[\w.-]+)*/?)`")


def _text():
    return CONTRIBUTING.read_text(encoding="utf-8")


def _tree_paths(text):
    """The paths of the fenced layout tree, from the indentation of its lines."""
    block = re.search(r"^## Layout\n+```\n(.*?)^```", text, re.M | re.S).group(1)
    paths, stack = [], []  # stack: (indent, folder)
    for line in block.splitlines():
        name = line.split()[0] if line.strip() else ""
        if not re.fullmatch(r"[\w.-]+/|[\w-]+\.\w+", name):
            continue  # a description continued from the line above
        indent = len(line) - len(line.lstrip())
        while stack and stack[-1][0] >= indent:
            stack.pop()
        path = "/".join([folder for _, folder in stack] + [name.rstrip("/")])
        paths.append(path)
        if name.endswith("/"):
            stack.append((indent, name.rstrip("/")))
    return paths


def test_every_path_contributing_names_exists():
    text = _text()
    inline = PATH.findall(text)
    tree = _tree_paths(text)
    # the parsers found what the page draws (a broken regex would pass
    # vacuously)
    assert {"skcal/base.py", "skcal/_torch/kernels/_affine.py"} <= set(inline)
    assert {"skcal/_torch/kernels", "skcal/cli.py", "benchmarks"} <= set(tree)
    missing = sorted(
        {path for path in inline + tree if not (ROOT / path.rstrip("/")).exists()}
    )
    assert not missing, f"CONTRIBUTING.md names paths that do not exist: {missing}"


def _python_files(folder, *, exclude=None):
    for path in sorted(folder.rglob("*.py")):
        if exclude is None or exclude not in path.parents:
            yield path


def _matching_lines(paths, pattern):
    found = []
    for path in paths:
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines()):
            if pattern.search(line):
                found.append(f"{path.relative_to(ROOT)}:{number + 1}: {line.strip()}")
    return found


@pytest.mark.parametrize(
    "line, imports",
    [
        ("import torch", True),
        ("    import torch.nn.functional as F", True),
        ("from torch import nn", True),
        ("        from torch.nn import Linear", True),
        ("import torchvision", False),
        ("from torchmetrics import Metric", False),
        ("# the kernels import torch, not this module", False),
    ],
)
def test_the_torch_import_pattern(line, imports):
    assert bool(TORCH_IMPORT.search(line)) is imports


def test_torch_is_imported_only_under_skcal_torch():
    found = _matching_lines(_python_files(PACKAGE, exclude=TORCH), TORCH_IMPORT)
    assert not found, (
        "torch is imported outside skcal/_torch/ (call a kernel of "
        "skcal._torch.kernels with numpy arrays instead):\n" + "\n".join(found)
    )


def _imported_modules(source, package):
    """Absolute names of the modules that ``source``, in ``package``, imports."""
    names = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            parts = package.split(".")
            base = parts[: len(parts) - node.level + 1] if node.level else []
            module = ".".join(base + ([node.module] if node.module else []))
            if node.module is None:  # from .. import x: x may be a module
                names += [f"{module}.{alias.name}" for alias in node.names]
            else:
                names.append(module)
    return names


@pytest.mark.parametrize(
    "source, expected",
    [
        ("from ..utils._split import stratified_split", "skcal.utils._split"),
        ("from .. import exceptions", "skcal.exceptions"),
        ("from ._convert import to_tensor", "skcal._torch._convert"),
        ("def f():\n    import skcal.metrics", "skcal.metrics"),
    ],
)
def test_relative_imports_are_resolved(source, expected):
    assert _imported_modules(source, "skcal._torch") == [expected]


def test_skcal_torch_imports_nothing_from_the_rest_of_skcal():
    outside = set()
    for path in _python_files(TORCH):
        parts = path.relative_to(ROOT).with_suffix("").parts
        package = ".".join(parts[:-1])  # where its relative imports start
        for name in _imported_modules(path.read_text(encoding="utf-8"), package):
            if name.split(".")[0] == "skcal" and not name.startswith("skcal._torch"):
                outside.add(f"{path.relative_to(ROOT)}: {name}")
    assert not outside, (
        "skcal/_torch/ imports from the rest of skcal; kernels take and "
        "return plain arrays:\n" + "\n".join(sorted(outside))
    )
