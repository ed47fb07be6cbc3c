"""The calibrators by name: aliases, lookup, construction and help lists.

Every calibrator of :func:`skcal.discovery.all_estimators` has short
names (:func:`method_aliases`), which ``calibrate --method``, ``benchmark
--methods`` and ``select --candidates`` accept in any case.

The help texts list the calibrators without importing them (importing
one loads scikit-learn and torch, seconds): :func:`static_listing` reads
the names in ``skcal.calibrators.__all__`` and, from each class's bases
and ``__init__``, its kind and whether it takes a linear head, with
:mod:`ast` from the source. Nothing is listed by hand: a new calibrator
appears once ``skcal/calibrators/__init__.py`` exports it, and a test
checks that the static listing equals the live one.
"""

from __future__ import annotations

import ast
import functools
import re
import textwrap
from pathlib import Path
from typing import NamedTuple

from ._common import CLIError, did_you_mean

#: short names beyond the automatic ones (class name without
#: "Calibrator"/"Scaling", lower case)
_EXTRA_ALIASES = {
    "ts": "TemperatureScaling",
    "bcts": "BiasCorrectedTemperatureScaling",
    "vs": "VectorScaling",
    "ms": "MatrixScaling",
    "cts": "ClassTemperatureScaling",
    "pts": "ParameterizedTemperatureScaling",
    "ets": "EnsembleTemperatureScaling",
    "sms": "StructuredMatrixScaling",
    "svs": "StructuredVectorScaling",
    "histogram": "HistogramBinningCalibrator",
    "cir": "CenteredIsotonicCalibrator",
    "scalingbinning": "ScalingBinningCalibrator",
    "tva": "TopVersusAll",
    "vq": "VQLocalCalibrator",
}


def normalize(name: str) -> str:
    """``name`` in lower case without spaces, hyphens and underscores."""
    return re.sub(r"[\s_-]", "", name).lower()


def _aliases(name: str) -> list[str]:
    """The short names of the calibrator class ``name``."""
    extra = sorted(a for a, target in _EXTRA_ALIASES.items() if target == name)
    return [normalize(re.sub("Calibrator|Scaling", "", name)), *extra]


def method_aliases() -> dict[str, list[str]]:
    """Short names of every calibrator: ``{class name: [aliases]}``.

    Examples
    --------
    >>> from skcal.cli import method_aliases
    >>> method_aliases()["TemperatureScaling"]
    ['temperature', 'ts']
    """
    from ..discovery import all_estimators

    return {name: _aliases(name) for name, _ in all_estimators()}


def method_list(kind=None) -> str:
    """``"Name (alias, ...), ..."`` of every calibrator of ``kind`` (None: all).

    Read from the source (:func:`static_listing`): imports no calibrator.
    """
    return ", ".join(
        f"{c.name} ({', '.join(_aliases(c.name))})"
        for c in static_listing()
        if kind is None or c.kind == kind
    )


def alias_lookup(names=None) -> dict[str, str]:
    """``{normalized name or alias: class name}`` of the calibrators ``names``.

    Parameters
    ----------
    names : iterable of str, default=None
        Class names of calibrators (None: every calibrator).
    """
    aliases = method_aliases()
    return {
        normalize(alias): cls_name
        for cls_name in (aliases if names is None else names)
        for alias in (cls_name, *aliases.get(cls_name, []))
    }


def comma_names(texts, *, none: str) -> tuple[list[str], str | None]:
    """The comma-separated names of ``texts``, and what is wrong with them.

    Returns
    -------
    names : list of str
        Every name, stripped.
    problem : str or None
        ``none`` when no name is given, ``"an empty name"`` when one of
        them is empty (``"ts,,vs"``), else None.

    Examples
    --------
    >>> from skcal.cli._methods import comma_names
    >>> comma_names(["ts, vs", "dirichlet"], none="no method")
    (['ts', 'vs', 'dirichlet'], None)
    >>> comma_names([","], none="no method")
    (['', ''], 'no method')
    """
    names = [name.strip() for text in texts for name in text.split(",")]
    if not any(names):
        return names, none
    return names, None if all(names) else "an empty name"


def resolve_method(name: str) -> tuple[str, type]:
    """The calibrator class named by a class name or alias, any case.

    Raises
    ------
    CLIError
        If no calibrator has that name; the message lists the valid ones.
    """
    from ..discovery import all_estimators

    classes = dict(all_estimators())
    lookup = alias_lookup()
    key = normalize(name)
    if key in lookup:
        return lookup[key], classes[lookup[key]]
    raise CLIError(
        f"unknown method {name!r}{did_you_mean(key, lookup)}. Valid methods "
        f"(case-insensitive; aliases in parentheses): {method_list()}."
    )


def make_estimator(cls, *, device, seed, params=None, progress=False):
    """``cls()`` with ``device``/``random_state`` (if it has them), then params.

    ``progress`` sets ``verbose=1`` (a progress bar on stderr) where the
    calibrator has it; a ``verbose`` in ``params`` wins.
    """
    estimator = cls()
    own = estimator.get_params()
    if "device" in own:
        estimator.set_params(device=device)
    if "random_state" in own:
        estimator.set_params(random_state=seed)
    if progress and "verbose" in own:
        estimator.set_params(verbose=1)
    unknown = sorted(set(params or {}) - set(own))
    if unknown:
        raise CLIError(
            f"{cls.__name__} has no parameter {unknown[0]!r} (--param); its "
            f"parameters: {', '.join(sorted(own))}."
        )
    return estimator.set_params(**(params or {}))


def _head_note() -> str | None:
    """Which local calibrators use a linear head, for ``calibrate --help``."""
    local = [c for c in static_listing() if c.takes_head]
    uses = [c.name for c in local if c.uses_head is True]
    other = [c.name for c in local if c.uses_head is not True]
    if not uses:
        return None
    note = (
        f"{', '.join(uses)} calibrate the classifier's linear head (coef, "
        "intercept), read from --head or the --fit file; without one they "
        "first fit a logistic-regression head on the calibration "
        "embeddings (a new classifier, not post-hoc calibration of yours)."
    )
    if other:
        note += (
            " Also taking coef/intercept, used only in some settings (see "
            f"the documentation): {', '.join(other)}."
        )
    return note


def methods_help(head_note: bool = False) -> str:
    """The calibrators by kind, with their aliases, for the epilogs of --help.

    ``head_note`` adds which local calibrators use a linear head (calibrate).
    Imports no calibrator (:func:`static_listing`).
    """

    def wrap(title, text):
        return textwrap.fill(text, 79, initial_indent=title, subsequent_indent="    ")

    lines = [
        "methods (case-insensitive; aliases in parentheses):",
        wrap("  score (logits or proba): ", method_list("score")),
        wrap("  local (embeddings): ", method_list("local")),
    ]
    note = _head_note() if head_note else None
    if note:
        lines.append(wrap("  ", note))
    return "\n".join(lines)


def takes_head(cls) -> bool:
    """Whether the calibrator takes a frozen linear head (``coef``, ``intercept``)."""
    from ..base import BaseLocalCalibrator

    return issubclass(cls, BaseLocalCalibrator) and cls._takes_head()


def uses_head(cls) -> bool:
    """Whether the calibrator with default parameters uses the linear head."""
    return bool(getattr(cls(), "_uses_head", False))


# ------------------------------------------------ the listing, read statically
#: the bases that make a class a calibrator, and its kind
_KINDS = {"BaseLocalCalibrator": "local", "BaseCalibrator": "score"}
#: ``_uses_head`` that a method or an expression computes (depends on settings)
_DEPENDS = "depends"
_SKCAL = Path(__file__).resolve().parents[1]


class Listed(NamedTuple):
    """One calibrator of :func:`static_listing`."""

    name: str
    #: "score" or "local"
    kind: str
    #: whether its ``__init__`` takes a linear head (``coef``, ``intercept``)
    takes_head: bool
    #: its ``_uses_head``: True, False or ``"depends"`` (a property, whose
    #: value depends on the parameters)
    uses_head: bool | str


def _class_facts(node: ast.ClassDef) -> dict:
    """The bases, ``__init__`` parameters and ``_uses_head`` of a class."""
    bases = [
        b.id if isinstance(b, ast.Name) else getattr(b, "attr", "") for b in node.bases
    ]
    facts = {"bases": bases, "init": None, "uses_head": None}
    for item in node.body:
        if isinstance(item, ast.FunctionDef) and item.name == "__init__":
            args = item.args
            facts["init"] = {a.arg for a in [*args.args, *args.kwonlyargs]}
        elif isinstance(item, ast.FunctionDef) and item.name == "_uses_head":
            facts["uses_head"] = _DEPENDS
        elif isinstance(item, (ast.Assign, ast.AnnAssign)):
            targets = item.targets if isinstance(item, ast.Assign) else [item.target]
            if any(getattr(t, "id", None) == "_uses_head" for t in targets):
                value = item.value
                literal = isinstance(value, ast.Constant) and isinstance(
                    value.value, bool
                )
                facts["uses_head"] = value.value if literal else _DEPENDS
    return facts


@functools.cache
def _module_classes(path: Path) -> dict:
    """``{class name: facts}`` of the top-level classes of the module at ``path``
    (none if it is missing or does not parse: a module being written)."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    except (OSError, SyntaxError, ValueError):
        return {}
    return {
        node.name: _class_facts(node)
        for node in tree.body
        if isinstance(node, ast.ClassDef)
    }


def _exports() -> dict[str, Path]:
    """``{name in skcal.calibrators.__all__: path of the module defining it}``."""
    init = _SKCAL / "calibrators" / "__init__.py"
    tree = ast.parse(init.read_text(encoding="utf-8"), str(init))
    where, names = {}, []
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module:
            for alias in node.names:
                where[alias.asname or alias.name] = node.module
            continue
        if isinstance(node, ast.AnnAssign):
            targets, value = [node.target], node.value
        elif isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        else:
            continue
        ids = {getattr(t, "id", None) for t in targets}
        if "__all__" in ids:
            names = list(ast.literal_eval(value))
        elif "_MODULES" in ids:  # the lazy exports: class name -> ".module"
            for name, module in ast.literal_eval(value).items():
                where[name] = module.lstrip(".")
    return {n: _SKCAL / "calibrators" / f"{where[n]}.py" for n in names if n in where}


def _lineage(name: str, path: Path) -> list[dict]:
    """The facts of class ``name`` (defined in ``path``) and of its ancestors
    in skcal, depth first (Python's order for skcal's single-line hierarchies)."""
    pool = [*sorted((_SKCAL / "calibrators").glob("_*.py")), _SKCAL / "base.py"]
    found, todo, seen = [], [(name, path)], set()
    while todo:
        name, path = todo.pop(0)  # path: where the name is used
        if name in seen:
            continue
        seen.add(name)
        # its own module first, as Python looks a name up
        homes = [p for p in dict.fromkeys([path, *pool]) if name in _module_classes(p)]
        if not homes:
            continue
        facts = _module_classes(homes[0])[name]
        found.append({"name": name, **facts})
        todo[:0] = [(base, homes[0]) for base in facts["bases"]]
    return found


@functools.cache
def static_listing() -> tuple[Listed, ...]:
    """Every calibrator of ``skcal.calibrators.__all__``, read from the source.

    The same names and kinds as :func:`skcal.discovery.all_estimators`
    without importing any calibrator (nor scikit-learn or torch), for the
    help texts. A class is a calibrator when an ancestor is
    ``BaseCalibrator`` (kind ``"score"``) or ``BaseLocalCalibrator``
    (``"local"``); it takes a head when its ``__init__`` (or an ancestor's)
    has ``coef`` and ``intercept``.

    Returns
    -------
    tuple of Listed
        ``(name, kind, takes_head, uses_head)``, sorted by name.

    Examples
    --------
    >>> from skcal.cli._methods import static_listing
    >>> [c.kind for c in static_listing() if c.name == "TemperatureScaling"]
    ['score']
    """
    listed = []
    for name, path in _exports().items():
        lineage = _lineage(name, path)
        names = [c["name"] for c in lineage]
        kind = next((_KINDS[n] for n in names if n in _KINDS), None)
        if kind is None:
            continue
        init = next((c["init"] for c in lineage if c["init"] is not None), set())
        uses = next(
            (c["uses_head"] for c in lineage if c["uses_head"] is not None), False
        )
        takes = kind == "local" and {"coef", "intercept"} <= init
        listed.append(Listed(name, kind, takes, uses))
    return tuple(sorted(listed))


@functools.cache
def static_candidates() -> tuple[str, ...]:
    """The class names of ``CalibratorSearchCV``'s default candidates, in order,
    read from the source (the list ``_default_candidates`` of
    :mod:`skcal.model_selection._search` returns), for ``select --help``.

    Examples
    --------
    >>> from skcal.cli._methods import static_candidates
    >>> static_candidates()[:2]
    ('IdentityCalibrator', 'TemperatureScaling')
    """
    path = _SKCAL / "model_selection" / "_search.py"
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    function = next(
        node
        for node in tree.body
        if isinstance(node, ast.FunctionDef) and node.name == "_default_candidates"
    )
    returned = next(n for n in ast.walk(function) if isinstance(n, ast.Return))
    return tuple(
        call.func.id
        for call in returned.value.elts
        if isinstance(call, ast.Call) and isinstance(call.func, ast.Name)
    )


def candidate_list(names=None) -> str:
    """``"Name (alias, ...), ..."`` of ``names`` (None: the default candidates,
    :func:`static_candidates`); imports no calibrator."""
    return ", ".join(
        f"{name} ({', '.join(_aliases(name))})"
        for name in (static_candidates() if names is None else names)
    )
