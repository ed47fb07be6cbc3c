"""The calibrators by name: aliases, lookup, construction and help lists.

Every calibrator of :func:`skcal.discovery.all_estimators` has short
names (:func:`method_aliases`), which ``calibrate --method``, ``benchmark
--methods`` and ``select --candidates`` accept in any case. Listing them
imports every calibrator, so the help texts that do are built only when
shown.
"""

from __future__ import annotations

import re
import textwrap

from ._common import CLIError, did_you_mean

#: short names beyond the automatic ones (class name without
#: "Calibrator"/"Scaling", lower case)
_EXTRA_ALIASES = {
    "ts": "TemperatureScaling",
    "vs": "VectorScaling",
    "ms": "MatrixScaling",
    "cts": "ClassTemperatureScaling",
    "pts": "ParameterizedTemperatureScaling",
    "sms": "StructuredMatrixScaling",
    "histogram": "HistogramBinningCalibrator",
    "vq": "VQLocalCalibrator",
}


def normalize(name: str) -> str:
    """``name`` in lower case without spaces, hyphens and underscores."""
    return re.sub(r"[\s_-]", "", name).lower()


def method_aliases() -> dict[str, list[str]]:
    """Short names of every calibrator: ``{class name: [aliases]}``.

    Examples
    --------
    >>> from skcal.cli import method_aliases
    >>> method_aliases()["TemperatureScaling"]
    ['temperature', 'ts']
    """
    from ..discovery import all_estimators

    aliases = {}
    for name, _ in all_estimators():
        extra = sorted(a for a, target in _EXTRA_ALIASES.items() if target == name)
        aliases[name] = [normalize(re.sub("Calibrator|Scaling", "", name)), *extra]
    return aliases


def method_list(kind=None) -> str:
    """``"Name (alias, ...), ..."`` of every calibrator of ``kind`` (None: all)."""
    from ..discovery import all_estimators

    aliases = method_aliases()
    return ", ".join(
        f"{name} ({', '.join(aliases[name])})" for name, _ in all_estimators(kind)
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


def methods_help(head_note: bool = False) -> str:
    """The calibrators by kind, with their aliases, for the epilogs of --help.

    ``head_note`` adds which local calibrators use a linear head (calibrate).
    """
    from ..discovery import all_estimators

    def wrap(title, text):
        return textwrap.fill(text, 79, initial_indent=title, subsequent_indent="    ")

    lines = [
        "methods (case-insensitive; aliases in parentheses):",
        wrap("  score (logits or proba): ", method_list("score")),
        wrap("  local (embeddings): ", method_list("local")),
    ]
    local = [(n, c) for n, c in all_estimators("local") if takes_head(c)]
    uses = [n for n, c in local if uses_head(c)]
    other = [n for n, c in local if n not in uses]
    if head_note and uses:
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
        lines.append(wrap("  ", note))
    return "\n".join(lines)


def takes_head(cls) -> bool:
    """Whether the calibrator takes a frozen linear head (``coef``, ``intercept``)."""
    from ..base import BaseLocalCalibrator

    return issubclass(cls, BaseLocalCalibrator) and cls._takes_head()


def uses_head(cls) -> bool:
    """Whether the calibrator with default parameters uses the linear head."""
    return bool(getattr(cls(), "_uses_head", False))
