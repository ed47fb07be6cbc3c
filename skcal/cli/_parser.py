"""The ``skcal`` parser and entry point.

:func:`build_parser` gathers the subcommands, each built by the module of
its family; :func:`main` runs the chosen one and reports an error of the
input as one line on stderr (exit code 2), with no traceback.
"""

from __future__ import annotations

import argparse
import linecache
import re
import sys

from .. import __version__
from ._adapt import add_adapt
from ._benchmark import add_benchmark, add_demo
from ._calibrate import add_apply, add_calibrate
from ._common import CLIError, in_flags
from ._decision import add_select_threshold
from ._evaluate import add_evaluate
from ._export import add_export
from ._monitor import add_monitor
from ._select import add_select


def build_parser() -> argparse.ArgumentParser:
    """The parser of ``skcal`` and of each of its subcommands."""
    parser = argparse.ArgumentParser(
        prog="skcal", description="Post-hoc calibration of multiclass classifiers."
    )
    parser.add_argument("--version", action="version", version=f"skcal {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    add_calibrate(sub)
    add_apply(sub)
    add_adapt(sub)
    add_evaluate(sub)
    add_select(sub)
    add_select_threshold(sub)
    add_monitor(sub)
    add_benchmark(sub)
    add_demo(sub)
    add_export(sub)
    return parser


#: Modules whose ``raise`` statements report bad input: skcal's checks, and
#: scikit-learn's validation of parameters, arrays and labels.
_INPUT_CHECKS = re.compile(
    r"skcal(\..+)?|sklearn\.utils\.(validation|_param_validation|multiclass)"
)


def _is_input_error(exc: ValueError) -> bool:
    """Whether ``exc`` reports bad input (one line) rather than a bug.

    A :class:`~skcal.cli._common.CLIError` is one of the command's own checks.
    Another ``ValueError`` is the input's fault when a ``raise`` statement of
    skcal or of scikit-learn's validation raised it: skcal checks what it is
    given and says what is wrong. A ``ValueError`` from anywhere else (numpy,
    scipy, torch, or Python itself, such as a failed unpacking) means that a
    check is missing or that skcal has a bug: its traceback is shown.
    """
    if isinstance(exc, CLIError):
        return True
    tb = exc.__traceback__
    if tb is None:
        return False
    while tb.tb_next is not None:
        tb = tb.tb_next
    module = tb.tb_frame.f_globals.get("__name__", "")
    if not _INPUT_CHECKS.fullmatch(module):
        return False
    line = linecache.getline(tb.tb_frame.f_code.co_filename, tb.tb_lineno)
    return line.lstrip().startswith("raise ")


def main(argv=None) -> int:
    """Entry point of the ``skcal`` console script; returns the exit code.

    Errors in the input are one line on stderr and exit code 2; anything
    else, internal errors included, propagates with its traceback.
    """
    args = build_parser().parse_args(argv)
    try:
        return args.handler(args)
    except ValueError as exc:
        if not _is_input_error(exc):
            raise
        message = in_flags(" ".join(str(exc).split()))
        print(f"skcal {args.command}: error: {message}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"skcal {args.command}: interrupted", file=sys.stderr)
        return 130
