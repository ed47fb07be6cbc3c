"""The ``monitor`` command: a sequential calibration test over labelled files.

``skcal monitor --state monitor.json batches/`` feeds each file (one
labelled batch of the deployed calibrator's predictions, in name order for
a folder) to a :class:`skcal.monitor.CalibrationMonitor`, saves its state
(a small JSON file) and prints the e-value after each batch and the
verdict. Run it again with new files and the same ``--state``: the test
goes on where it stopped, and stays valid however often it is looked at.
"""

from __future__ import annotations

import os

import numpy as np

from ._columns import Columns
from ._common import CLIError, reporter
from ._format import format_table, print_json
from ._inputs import read_labels
from ._io import ArrayFile, file_format
from ._options import (
    FORMATS_HELP,
    HelpFormatter,
    add_column_options,
    add_input,
    add_output_flags,
)


def _batch_files(paths: list[str]) -> list[str]:
    """The files of ``paths``, a folder's readable files in name order."""
    files = []
    for path in paths:
        if os.path.isdir(path):
            inside = sorted(
                os.path.join(path, name)
                for name in os.listdir(path)
                if not name.startswith(".") and _readable(os.path.join(path, name))
            )
            if not inside:
                raise CLIError(
                    f"the folder {path} holds no file skcal reads (.npz, .csv, "
                    ".parquet, ...): put one file per labelled batch in it."
                )
            files.extend(inside)
        elif os.path.isfile(path):
            files.append(path)
        else:
            raise CLIError(f"{path} is neither a file nor a folder.")
    return files


def _readable(path: str) -> bool:
    if not os.path.isfile(path):
        return False
    try:
        file_format(path)
    except CLIError:
        return False
    return True


def _load_monitor(args, report):
    """The monitor of ``--state`` (continued) or a new one."""
    from ..monitor import CalibrationMonitor

    if args.state is not None and os.path.exists(args.state):
        try:
            monitor = CalibrationMonitor.load(args.state)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise CLIError(
                f"--state {args.state} is not a monitor state written by skcal "
                f"monitor ({exc}); give a new path to start a new test."
            ) from None
        if args.alpha is not None and args.alpha != monitor.alpha:
            raise CLIError(
                f"--alpha {args.alpha} differs from the alpha {monitor.alpha} of "
                f"--state {args.state}: a running test keeps its alpha (its "
                "guarantee depends on it); start a new state for a new alpha."
            )
        report(
            f"continuing {args.state}: {monitor.n_looks_} looks, {monitor.n_rows_} rows"
        )
        return monitor
    alpha = 0.05 if args.alpha is None else args.alpha
    return CalibrationMonitor(alpha=alpha, max_groups=args.max_groups)


def _read_batch(args, path: str, columns: Columns):
    """The probabilities, labels and groups of one batch file."""
    from scipy.special import softmax

    data = ArrayFile(path, columns)
    key = args.input
    if key == "auto":
        key = "proba" if "proba" in data or "logits" not in data else "logits"
    scores = data.matrix(key, "the deployed calibrator's predictions (proba or logits)")
    y = read_labels(data, "the true labels of the batch", len(scores), key)
    groups = None
    if args.group_col is not None:
        groups = data.vector(args.group_col, "the group of each row (--group-col)")
    return (softmax(scores, axis=1) if key == "logits" else scores), y, groups


def _run_monitor(args) -> int:
    report = reporter(args)
    monitor = _load_monitor(args, report)
    columns = Columns.from_args(args)
    rows = []
    for path in _batch_files(args.paths):
        proba, y, groups = _read_batch(args, path, columns)
        monitor.update(y, proba, groups=groups)
        rows.append(
            {
                "look": monitor.n_looks_,
                "file": path,
                "rows": len(y),
                "e_value": monitor.e_value_,
                "alarm": monitor.alarm_,
            }
        )
    if args.state is not None:
        monitor.save(args.state)
    verdict = monitor.verdict()
    if args.json:
        out = {"looks": rows, "verdict": _verdict_dict(verdict)}
        print_json(out)
    else:
        table = [_table_row(r) for r in rows]
        names = ["look", "file", "rows", "e_value", "alarm"]
        print(format_table(table, names, left=("file",)))
        print(verdict.message)
    return 1 if (verdict.alarm and args.fail_on_alarm) else 0


def _table_row(row: dict) -> dict:
    """A look's row as text (the table would print counts as floats)."""
    return {
        key: value
        if key == "file"
        else (f"{value:.4g}" if key == "e_value" else str(value))
        for key, value in row.items()
    }


def _verdict_dict(verdict) -> dict:
    from dataclasses import asdict

    out = asdict(verdict)
    group = out.get("group")
    if isinstance(group, np.generic):
        out["group"] = group.item()
    return out


def add_monitor(sub) -> None:
    """The ``monitor`` subcommand."""
    parser = sub.add_parser(
        "monitor",
        help="sequential test that deployed probabilities stay calibrated",
        description=__doc__.split("\n\n", 1)[1] + "\n\n" + FORMATS_HELP,
        formatter_class=HelpFormatter,
    )
    parser.add_argument(
        "paths",
        nargs="+",
        metavar="FILE_OR_FOLDER",
        help="labelled batches, one per file (a folder: its files in name order)",
    )
    parser.add_argument(
        "--state",
        metavar="FILE",
        help="the monitor's JSON state: read if it exists (the test goes on), "
        "then written",
    )
    parser.add_argument(
        "--alpha",
        type=float,
        default=None,
        help="false-alarm probability over unlimited looks (default 0.05)",
    )
    parser.add_argument(
        "--group-col", metavar="NAME", help="column of each row's group (segment)"
    )
    parser.add_argument(
        "--max-groups",
        type=int,
        default=100,
        help="group slots of a new state (default 100)",
    )
    parser.add_argument(
        "--fail-on-alarm",
        action="store_true",
        help="exit with code 1 when the monitor has raised an alarm",
    )
    add_input(parser, "which predictions of the files to read (default auto)")
    add_column_options(parser)
    add_output_flags(parser)
    parser.set_defaults(handler=_run_monitor)
