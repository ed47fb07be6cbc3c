"""Helpers of every command: the input error, close names, stderr reports.

:class:`CLIError` is an error of the input or of the usage, which
:func:`skcal.cli.main` prints as one line on stderr (exit code 2) instead
of a traceback. Progress lines and warnings go to stderr, so that stdout
holds only the report.
"""

from __future__ import annotations

import contextlib
import difflib
import re
import sys
import warnings


class CLIError(ValueError):
    """An input or usage error reported as one line, without a traceback."""


#: skcal's messages name Python keywords; the command line's options instead
_AS_FLAGS = (
    (re.compile(r" \(or the matching option\)"), ""),
    (re.compile(r"\binput=['\"](logits|proba)['\"]"), r"--input \1"),
    (
        re.compile(r"Renormalise with (\w+) / \1\.sum\(axis=1, keepdims=True\)"),
        "Add --renormalize (which divides each row by its sum)",
    ),
)


def in_flags(message: str) -> str:
    """``message`` with the Python keywords of skcal's checks as options.

    The library's messages say ``input='logits'`` or show the Python that
    renormalises rows; on the command line, ``--input logits`` and
    ``--renormalize`` do that.

    Examples
    --------
    >>> from skcal.cli._common import in_flags
    >>> in_flags("If these are scores, pass input='logits' instead.")
    'If these are scores, pass --input logits instead.'
    >>> in_flags("Renormalise with X / X.sum(axis=1, keepdims=True) if so.")
    'Add --renormalize (which divides each row by its sum) if so.'
    """
    for pattern, replacement in _AS_FLAGS:
        message = pattern.sub(replacement, message)
    return message


def did_you_mean(word: str, choices) -> str:
    """`` (did you mean 'x'?)`` with the choice closest to ``word``, or ``""``.

    Examples
    --------
    >>> from skcal.cli._common import did_you_mean
    >>> did_you_mean("temprature", ["temperature", "vector"])
    " (did you mean 'temperature'?)"
    >>> did_you_mean("xyz", ["temperature"])
    ''
    """
    close = difflib.get_close_matches(word, list(choices), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def listing(names, limit: int = 12) -> str:
    """The first ``limit`` names, comma-separated (``"none"`` if there are none)."""
    names = list(names)
    shown = ", ".join(names[:limit]) + (", ..." if len(names) > limit else "")
    return shown or "none"


def difference(given, wanted) -> str:
    """What ``given`` lacks and adds against ``wanted``, in full, for messages
    where two long lists differ in a few names (``"missing Z"``)."""
    have, want = set(given), set(wanted)
    missing = [w for w in wanted if w not in have]
    extra = [g for g in given if g not in want]
    parts = [f"missing {', '.join(missing)}"] if missing else []
    parts += [f"not a class: {', '.join(extra)}"] if extra else []
    return "; ".join(parts) or "the same names, one repeated"


def check_device(device: str) -> None:
    """A clear error now if ``device`` is unavailable (imports torch)."""
    from .._torch import resolve_device

    resolve_device(device)  # fail fast on an unavailable device


def reporter(args):
    """A function printing progress lines on stderr, silent with --quiet."""
    if args.quiet:
        return lambda message: None
    return lambda message: print(message, file=sys.stderr, flush=True)


def _warn_lines(prog: str, caught) -> None:
    """Print each distinct caught warning as a ``prog: warning:`` line."""
    for message in dict.fromkeys(
        in_flags(" ".join(str(w.message).split())) for w in caught
    ):
        print(f"{prog}: warning: {message}", file=sys.stderr)


@contextlib.contextmanager
def report_on_stderr(prog: str):
    """Warnings become ``prog: warning:`` lines; prints go to stderr.

    Anything an estimator prints (``verbose``) goes to stderr, so that
    stdout holds only the report. The warnings are printed, once each,
    when the block ends without an error.
    """
    with (
        warnings.catch_warnings(record=True) as caught,
        contextlib.redirect_stdout(sys.stderr),
    ):
        warnings.simplefilter("always")
        yield
    _warn_lines(prog, caught)
