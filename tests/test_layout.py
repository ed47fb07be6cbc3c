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
    assert {"skcal/_torch/kernels", "skcal/cli", "benchmarks"} <= set(tree)
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


# ------------------------------------------------------------ import rules
#: Where each part of the package may import from, lowest first: a part
#: sees the ones below it, never the ones above (CONTRIBUTING.md, "Import
#: directions").
ALLOWED = {
    "skcal.utils": {"skcal.utils", "skcal._torch", "skcal.exceptions"},
    "skcal.metrics": {
        "skcal.metrics",
        "skcal.utils",
        "skcal._torch",
        "skcal.exceptions",
        "skcal.llm",
    },
    "skcal.llm": {"skcal.llm", "skcal.utils", "skcal._torch", "skcal.exceptions"},
    "skcal.monitor": {"skcal.monitor", "skcal.utils", "skcal.exceptions"},
}
#: What no module of a part may import.
FORBIDDEN = {
    "skcal.calibrators": (
        "skcal.model_selection",
        "skcal.wrappers",
        "skcal.cli",
        "skcal.display",
    ),
    "skcal.metrics": ("skcal.calibrators", "skcal.base"),
    "skcal.decision": (
        "skcal.model_selection",
        "skcal.wrappers",
        "skcal.cli",
        "skcal.display",
    ),
    "skcal.shift": (
        "skcal.model_selection",
        "skcal.wrappers",
        "skcal.cli",
        "skcal.display",
    ),
}
#: What the calibrators take from the metrics (CONTRIBUTING.md): the shared
#: bins and the package's public names (LocalSpace), no metric internals.
CALIBRATORS_FROM_METRICS = {"skcal.metrics", "skcal.metrics._binning"}


def _skcal_imports(path):
    """``(module, imported)`` for every skcal module that ``path`` imports."""
    parts = path.relative_to(ROOT).with_suffix("").parts
    package = ".".join(parts[:-1])  # where its relative imports start
    source = path.read_text(encoding="utf-8")
    return [
        name
        for name in _imported_modules(source, package)
        if name.split(".")[0] == "skcal"
    ]


def _part_files(part):
    return _python_files(ROOT / Path(*part.split(".")))


def _within(name, parts) -> bool:
    return any(name == part or name.startswith(part + ".") for part in parts)


@pytest.mark.parametrize("part", sorted(ALLOWED))
def test_the_ground_imports_nothing_above_it(part):
    above = [
        f"{path.relative_to(ROOT)}: {name}"
        for path in _part_files(part)
        for name in _skcal_imports(path)
        if not _within(name, ALLOWED[part]) and name != "skcal"
    ]
    assert not above, f"{part} imports from above it:\n" + "\n".join(above)


@pytest.mark.parametrize("part", sorted(FORBIDDEN))
def test_no_import_runs_back_up(part):
    found = [
        f"{path.relative_to(ROOT)}: {name}"
        for path in _part_files(part)
        for name in _skcal_imports(path)
        if _within(name, FORBIDDEN[part])
    ]
    assert not found, f"{part} imports what sits on top of it:\n" + "\n".join(found)


def test_calibrators_take_from_the_metrics_only_what_the_map_says():
    found = [
        f"{path.relative_to(ROOT)}: {name}"
        for path in _part_files("skcal.calibrators")
        for name in _skcal_imports(path)
        if _within(name, ("skcal.metrics",)) and name not in CALIBRATORS_FROM_METRICS
    ]
    assert not found, "calibrators import metric internals:\n" + "\n".join(found)


def test_no_calibrator_module_imports_a_private_name_of_a_sibling():
    found = []
    for path in _part_files("skcal.calibrators"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module:
                private = [a.name for a in node.names if a.name.startswith("_")]
                if private:
                    found.append(f"{path.relative_to(ROOT)}: {node.module} {private}")
    assert not found, (
        "calibrator modules import private names of their siblings (move the "
        "shared piece to a module of its own, or to skcal/utils/):\n" + "\n".join(found)
    )


def test_the_top_level_exports_the_subpackages_names():
    """One export list: ``skcal.__all__`` takes the calibrators' from
    ``skcal.calibrators.__all__`` (read without importing it)."""
    import skcal
    import skcal.calibrators

    assert set(skcal.calibrators.__all__) <= set(skcal.__all__)
    for name in skcal.__all__:
        if name != "__version__":
            assert getattr(skcal, name) is not None
    for name in skcal.calibrators.__all__:
        assert getattr(skcal, name) is getattr(skcal.calibrators, name)


# --------------------------------------------- the "add a calibrator" recipe
def _calibrator_classes():
    """Every concrete, public calibrator class defined in skcal/calibrators/,
    with the stem of its module (found by import, not by the export list)."""
    import importlib
    import inspect

    from skcal.base import BaseCalibrator, BaseLocalCalibrator

    found = []
    for path in sorted((PACKAGE / "calibrators").glob("_*.py")):
        module = importlib.import_module(f"skcal.calibrators.{path.stem}")
        for name, obj in vars(module).items():
            if (
                inspect.isclass(obj)
                and obj.__module__ == module.__name__
                and issubclass(obj, (BaseCalibrator, BaseLocalCalibrator))
                and not inspect.isabstract(obj)
                and not name.startswith("_")
            ):
                found.append((name, path.stem))
    return found


def test_the_recipe_finds_the_calibrators():
    names = {name for name, _ in _calibrator_classes()}
    assert {"PlattCalibrator", "IsotonicCalibrator", "VQLocalCalibrator"} <= names
    assert "OneVsRestCalibrator" not in names  # an abstract base


def test_every_calibrator_class_is_exported():
    import skcal.calibrators

    missing = [
        n for n, _ in _calibrator_classes() if n not in skcal.calibrators.__all__
    ]
    assert not missing, (
        f"{missing} are not in skcal/calibrators/__init__.py's __all__ (step 3 "
        "of CONTRIBUTING.md's recipe)"
    )


def test_every_calibrator_module_has_its_test_module():
    missing = sorted(
        {
            f"tests/calibrators/test{stem}.py"
            for _, stem in _calibrator_classes()
            if not (ROOT / "tests" / "calibrators" / f"test{stem}.py").exists()
        }
    )
    assert not missing, f"calibrator modules without their tests: {missing}"


def test_every_public_calibrator_is_in_the_api_reference():
    import skcal.calibrators

    api = (ROOT / "doc" / "api.rst").read_text(encoding="utf-8")
    listed = set(re.findall(r"^\s+(\w+)\s*$", api, re.M))
    missing = [n for n in skcal.calibrators.__all__ if n not in listed]
    assert not missing, f"doc/api.rst does not list {missing}"


def test_every_warning_and_error_is_documented():
    """Every public class of ``skcal.exceptions`` is in the API reference, and
    every warning in the user guide's list of warnings (issue 37)."""
    import inspect

    import skcal.exceptions

    api = (ROOT / "doc" / "api.rst").read_text(encoding="utf-8")
    guide = (ROOT / "doc" / "user_guide.rst").read_text(encoding="utf-8")
    listed = set(re.findall(r"^\s+(\w+)\s*$", api, re.M))
    public = [
        name
        for name, obj in vars(skcal.exceptions).items()
        if inspect.isclass(obj)
        and issubclass(obj, Exception)
        and obj.__module__ == "skcal.exceptions"
        and not name.startswith("_")
    ]
    assert public and not [n for n in public if n not in listed]
    warnings_ = [n for n in public if n.endswith("Warning")]
    unlisted = [n for n in warnings_ if f"skcal.exceptions.{n}`" not in guide]
    assert not unlisted, f"doc/user_guide.rst's warnings list lacks {unlisted}"


def test_every_calibrator_is_in_the_changelog():
    import skcal.calibrators

    notes = (ROOT / "doc" / "whats_new.rst").read_text(encoding="utf-8")
    missing = [n for n in skcal.calibrators.__all__ if f"skcal.{n}`" not in notes]
    assert not missing, f"doc/whats_new.rst has no entry for {missing}"


def test_the_recipe_names_files_that_exist():
    """The recipe's fixed files, and the checks its table names."""
    text = _text()
    recipe = text[text.index("## Recipe: add a calibrator") :]
    recipe = recipe[: recipe.index("\n## ", 1)]
    for path in (
        "skcal/calibrators/__init__.py",
        "skcal/calibrators/_one_vs_rest.py",
        "skcal/utils/_constraints.py",
        "skcal/discovery.py",
        "doc/api.rst",
        "doc/whats_new.rst",
    ):
        assert f"`{path}`" in recipe and (ROOT / path).exists(), path
    tests = "\n".join(p.read_text() for p in (ROOT / "tests").rglob("test_*.py"))
    for name in re.findall(r"`(test_\w+)`", recipe):
        assert f"def {name}(" in tests, f"the recipe names a missing test {name}"


# ------------------------------------- private members stay with their class
#: Reads of another class's private members across modules that remain, each
#: with its reason: (module, the expression read) -> why. Nothing else may be
#: read: a meta-estimator talks to the estimators it is given through their
#: public protocols (``fit`` / ``predict_proba``, ``fit_confidence`` /
#: ``predict_confidence``, ``fit_top_label``: see CONTRIBUTING.md).
PRIVATE_READS_ALLOWED = {
    **{
        (module, 'getattr(_, "_wrapper_params")'): (
            "the wrapper protocol that BaseCalibrator documents (its class "
            "docstring, 'Wrapper protocol'): a wrapper tells the clone it fits "
            "the classifier's classes and input through it"
        )
        for module in (
            "skcal.model_selection._search",
            "skcal.shift._adapter",
            "skcal.utils.persistence",
            "skcal.wrappers._calibrated",
        )
    },
    **{
        ("skcal.calibrators._dirichlet", expr): (
            "DirichletCalibratorCV fits and maps DirichletCalibrator, the class "
            "of its own module and family (a cross-validated variant of one "
            "method, not a meta-estimator over classes defined elsewhere)"
        )
        for expr in (
            "final._fit",
            "est._fit",
            "est._calibrated_logits",
            "self.calibrator_._calibrated_logits",
            "self.calibrator_._calibrated_proba",
        )
    },
    **{
        key: (
            "the head flags of the local calibrators' wrapper protocol "
            "(BaseLocalCalibrator: whether a calibrator takes the classifier's "
            "linear head), read by the tools that build and save them"
        )
        for key in (
            ("skcal.cli._methods", 'getattr(_, "_uses_head")'),
            ("skcal.model_selection._search", 'getattr(_, "_uses_head")'),
            ("skcal.utils.persistence", 'hasattr(_, "_takes_head")'),
            ("skcal.wrappers._calibrated", 'getattr(_, "_reads_embeddings")'),
        )
    },
    **{
        ("skcal.model_selection._search", expr): (
            "CalibratorSearchCV validates the embeddings and head of the local "
            "calibrators it searches with their own static checks, so that its "
            "messages are theirs"
        )
        for expr in (
            "BaseLocalCalibrator._validate_embeddings",
            "BaseLocalCalibrator._head_columns",
        )
    },
}


def _is_private(name):
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _private_member_owners():
    """Each private member name of a class that skcal defines or inherits ->
    the modules that define it first (the most basic class of an MRO whose
    namespace holds it, scikit-learn's included), and the modules whose
    methods set it on ``self`` (instance attributes)."""
    import importlib
    import inspect
    import pkgutil

    import skcal

    owners = {}
    for info in pkgutil.walk_packages(skcal.__path__, "skcal."):
        if ".cli" in info.name or info.name.endswith("__main__"):
            continue
        module = importlib.import_module(info.name)
        for cls in vars(module).values():
            if not inspect.isclass(cls) or cls.__module__ != module.__name__:
                continue
            for name in dir(cls):
                if _is_private(name):
                    definer = next(k for k in reversed(cls.__mro__) if name in vars(k))
                    owners.setdefault(name, set()).add(definer.__module__)
    for path in sorted(PACKAGE.rglob("*.py")):
        module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.ctx, ast.Store)
                and isinstance(node.value, ast.Name)
                and node.value.id == "self"
                and _is_private(node.attr)
            ):
                owners.setdefault(node.attr, set()).add(module)
    return owners


def _private_reads(path):
    """``(expression, member)`` of every read of a private member on an
    object other than ``self``, ``cls``, ``super()`` or a base class of the
    enclosing class (``Base._parameter_constraints`` extends its parent's):
    ``obj._name``, and ``getattr`` / ``hasattr`` / ``setattr`` of a literal
    private name."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    bases = {}  # node -> names of the bases of its enclosing class
    for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)):
        names = {ast.unparse(b) for b in cls.bases}
        for node in ast.walk(cls):
            bases.setdefault(node, set()).update(names)

    def own(value, node):
        if name_of(node) == "_parameter_constraints":
            return True  # scikit-learn's convention: a class extends its parent's
        if isinstance(value, ast.Name) and value.id in (
            {"self", "cls"} | bases.get(node, set())
        ):
            return True
        return isinstance(value, ast.Call) and ast.unparse(value.func) == "super"

    def name_of(node):
        return node.attr if isinstance(node, ast.Attribute) else None

    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _is_private(node.attr):
            if not own(node.value, node):
                yield ast.unparse(node), node.attr
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("getattr", "hasattr", "setattr")
            and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant)
            and isinstance(node.args[1].value, str)
            and _is_private(node.args[1].value)
            and not own(node.args[0], node)
        ):
            name = node.args[1].value
            yield f'{node.func.id}(_, "{name}")', name


def _foreign_private_reads():
    owners = _private_member_owners()
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        if module.endswith(".__init__"):
            module = module[: -len(".__init__")]
        for expr, name in _private_reads(path):
            foreign = owners.get(name, set()) - {module}
            if foreign:
                found.setdefault((module, expr), sorted(foreign))
    return found


def test_no_module_reads_another_class_private_members():
    """Issue 50: TopVersusAll read 15 private members of its inner calibrator
    (its fit and prediction paths, class flags, a ridge constant) and wrote
    its fitted attributes, so that a change of isotonic regression's
    internals silently changed it. A private member is read only by its own
    class, its subclasses (through ``self``) and its own module; the
    remaining exceptions are listed with their reasons."""
    found = _foreign_private_reads()
    unexpected = {
        key: owners for key, owners in found.items() if key not in PRIVATE_READS_ALLOWED
    }
    assert not unexpected, (
        "private members of classes of other modules are read (use or add a "
        "public protocol method; CONTRIBUTING.md, 'Where new work goes'):\n"
        + "\n".join(f"{m}: {e} (defined in {o})" for (m, e), o in unexpected.items())
    )
    stale = sorted(set(PRIVATE_READS_ALLOWED) - set(found))
    assert not stale, f"allowed reads that no longer occur (remove them): {stale}"


def test_the_private_member_check_catches_a_foreign_read(tmp_path):
    """The check sees ``inner._fit``, ``hasattr(inner, "_fit_mirrored")``
    and not ``self._fit``, ``super()._fit`` or a base's constraints."""
    path = tmp_path / "meta.py"
    path.write_text(
        "class Meta(Base):\n"
        "    c = {**Base._parameter_constraints}\n"
        "    def fit(self, inner):\n"
        "        self._fit(); super()._fit()\n"
        "        inner._fit(); hasattr(inner, '_fit_mirrored')\n",
        encoding="utf-8",
    )
    reads = sorted(_private_reads(path))
    assert reads == [
        ('hasattr(_, "_fit_mirrored")', "_fit_mirrored"),
        ("inner._fit", "_fit"),
    ]


# ------------------------------------------ the calibrators that need no torch
#: The modules of skcal/_torch/ that import no torch when imported: the bar
#: of a fit and the thread setting, which calibrators that need no torch
#: use (skcal/_torch/__init__.py imports its own names on first use).
TORCH_FREE = {"skcal._torch", "skcal._torch._progress", "skcal._torch._threads"}
#: torch imported at module level (not indented: not inside a function).
TOP_TORCH_IMPORT = re.compile(r"^(import\s+torch\b|from\s+torch(\.\w+)*\s+import\b)")


def _module_file(name):
    """The file of the skcal module ``name``, or None (a name, not a module)."""
    path = ROOT / Path(*name.split("."))
    if (path / "__init__.py").exists():
        return path / "__init__.py"
    return path.with_suffix(".py") if path.with_suffix(".py").exists() else None


def _top_level_statements(body):
    """The statements that run on import: the module's, and those inside
    its top-level ``if``, ``try`` and ``with`` blocks (not in functions)."""
    for node in body:
        yield node
        for field in ("body", "orelse", "finalbody", "handlers"):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                inner = getattr(node, field, None)
                if isinstance(inner, list) and not isinstance(node, ast.ClassDef):
                    yield from _top_level_statements(inner)


def _loaded_on_import(module):
    """The skcal modules that importing ``module`` imports: its module-level
    imports, transitively, with the packages above each."""
    seen, todo = set(), [module]
    while todo:
        name = todo.pop()
        parts = name.split(".")
        for k in range(1, len(parts) + 1):  # a module's packages run first
            prefix = ".".join(parts[:k])
            path = _module_file(prefix)
            if prefix in seen or path is None:
                continue
            seen.add(prefix)
            package = prefix if path.name == "__init__.py" else ".".join(parts[: k - 1])
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for node in _top_level_statements(tree.body):
                if isinstance(node, (ast.Import, ast.ImportFrom)):
                    source = ast.unparse(node)
                    todo += [
                        n
                        for n in _imported_modules(source, package)
                        if n.split(".")[0] == "skcal"
                    ]
    return seen


def _numpy_only_calibrator_modules():
    """The calibrator modules whose every calibrator says it needs no torch
    (``_needs_torch = False``), with the modules they import on import."""
    import importlib

    by_module = {}
    for name, stem in _calibrator_classes():
        cls = getattr(importlib.import_module(f"skcal.calibrators.{stem}"), name)
        by_module.setdefault(stem, []).append(cls._needs_torch)
    return sorted(stem for stem, flags in by_module.items() if not any(flags))


def test_the_loaded_modules_are_followed():
    loaded = _loaded_on_import("skcal.calibrators._binning")
    assert {"skcal.base", "skcal.utils._validation", "skcal._torch"} <= loaded
    assert "skcal.calibrators._one_vs_rest" in loaded


def test_a_calibrator_that_needs_no_torch_imports_none_on_import():
    stems = _numpy_only_calibrator_modules()
    assert {"_binning", "_platt", "_identity", "_venn_abers"} <= set(stems)
    found = []
    for stem in stems:
        for name in sorted(_loaded_on_import(f"skcal.calibrators.{stem}")):
            path = _module_file(name)
            torch_module = name.startswith("skcal._torch") and name not in TORCH_FREE
            if torch_module or _matching_lines([path], TOP_TORCH_IMPORT):
                found.append(f"skcal/calibrators/{stem}.py loads {name}")
    assert not found, (
        "a calibrator module with _needs_torch = False loads torch on import "
        "(import the kernel inside the function that needs it, or set "
        "_needs_torch = True and say so in its docstring):\n" + "\n".join(found)
    )


def test_the_torch_free_modules_of_skcal_torch_import_no_torch():
    for name in sorted(TORCH_FREE):
        loaded = _loaded_on_import(name)
        assert loaded <= TORCH_FREE | {"skcal"}, (name, loaded - TORCH_FREE)
        assert not _matching_lines([_module_file(name)], TOP_TORCH_IMPORT), name


# --------------------------------------------------------- numeric constants
#: The one module of numeric floors, and its copy for skcal/_torch/ (which
#: imports nothing from the rest of skcal).
CONSTANTS = PACKAGE / "utils" / "_constants.py"
TORCH_CONSTANTS = TORCH / "_constants.py"
#: A local definition of a floor that belongs in the constants module.
LOCAL_FLOOR = re.compile(r"^\s*_?(LOG|SUM)_FLOOR\s*(:[^=]*)?=")


def _number_lines(source, value):
    """Lines of the number literals of ``source`` equal to ``value`` (not
    the words of its strings and comments)."""
    import io
    import tokenize

    lines = []
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.NUMBER:
            try:
                equal = float(token.string) == value
            except ValueError:  # an imaginary literal
                equal = False
            if equal:
                lines.append(token.start[0])
    return lines


def _number_literals(path, value):
    """``path:line`` of every number literal of ``path`` equal to ``value``."""
    source = path.read_text(encoding="utf-8")
    return [f"{path.relative_to(ROOT)}:{n}" for n in _number_lines(source, value)]


def test_the_literal_finder_finds_literals_not_words():
    source = '"""floored at 1e-300"""\nx = 1.0e-300  # 1e-300\ny = 1e-30\n'
    assert _number_lines(source, 1e-300) == [2]
    assert _number_literals(CONSTANTS, 1e-300)  # FLOOR_BEFORE_LOG = 1e-300
    assert LOCAL_FLOOR.search("_SUM_FLOOR = 1e-290")
    assert LOCAL_FLOOR.search("    _LOG_FLOOR: float = -100.0")
    assert not LOCAL_FLOOR.search("x = _LOG_FLOOR")


def test_no_floor_literal_outside_the_constants_modules():
    others = [
        path
        for path in _python_files(PACKAGE)
        if path not in (CONSTANTS, TORCH_CONSTANTS)
    ]
    found = [hit for path in others for hit in _number_literals(path, 1e-300)]
    found += _matching_lines(others, LOCAL_FLOOR)
    assert not found, (
        "a numeric floor is written outside skcal/utils/_constants.py (import "
        "FLOOR_BEFORE_LOG, SUM_FLOOR, DIVISOR_FLOOR, ... from there; in "
        "skcal/_torch/, from skcal/_torch/_constants.py):\n" + "\n".join(found)
    )


def test_the_torch_constants_agree_with_the_constants_module():
    from skcal._torch import _constants as torch_constants
    from skcal.utils import _constants

    shared = [name for name in vars(torch_constants) if name.isupper()]
    assert shared, "skcal/_torch/_constants.py defines no constant"
    for name in shared:
        assert getattr(torch_constants, name) == getattr(_constants, name), name


def test_test_modules_have_unique_names():
    # without __init__.py files pytest imports a test module by its basename:
    # two test_x.py in different folders stop the collection of the suite
    names = [path.name for path in (ROOT / "tests").rglob("test_*.py")]
    assert sorted({n for n in names if names.count(n) > 1}) == []
