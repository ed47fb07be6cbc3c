"""Options and argument types that the commands' parsers share.

The help of the options that list every calibrator is built only when it is
printed (:class:`HelpFormatter`), so that ``skcal --help`` and parsing
import no calibrator.
"""

from __future__ import annotations

import argparse

from ._columns import COLUMNS_HELP
from ._records import RECORDS_HELP, add_record_options


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Raw description and epilog; an epilog may be a callable, called only
    when the help is printed: the lists of methods import every calibrator
    (and torch), which ``skcal --help`` and parsing need not wait for."""

    def add_text(self, text):
        super().add_text(text() if callable(text) else text)


#: the file formats and column options, in the epilogs of the commands
FORMATS_HELP = f"""\
file formats (by extension):
  .npz             arrays labels (n,), logits or proba (n, C), embeddings
                   (n, D); a --fit file may add coef (C, D), intercept (C,)
                   and classes (C,), the label of each column.
  .csv, .parquet   (pandas; Parquet also pyarrow) one row per sample,
                   columns label, logit_0..logit_{{C-1}} or proba_0..proba_{{C-1}},
                   emb_0..emb_{{D-1}}; other columns are ignored.
  .jsonl, .json    (inputs only) language-model API records, see below.

{COLUMNS_HELP}

{RECORDS_HELP}"""


def int_type(accepts, expected: str):
    """An argument type: the integer ``accepts(value)`` is true of, else an error.

    The error reads ``expected {expected}, got '<text>'``.

    Examples
    --------
    >>> from skcal.cli._options import int_type
    >>> even = int_type(lambda value: value % 2 == 0, "an even integer")
    >>> even("4")
    4
    >>> even("x")
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: expected an even integer, got 'x'
    """

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = None
        if value is None or not accepts(value):
            raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}")
        return value

    return parse


positive_int = int_type(lambda value: value >= 1, "a positive integer")


def fraction_type(example: str):
    """An argument type: a number in (0, 1), such as ``example``."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = -1.0
        if not 0 < value < 1:
            raise argparse.ArgumentTypeError(
                f"expected a number in (0, 1) such as {example}, got {text!r}"
            )
        return value

    return parse


#: The argument type of ``--confidence-level``.
_confidence_level = fraction_type("0.9")


def add_device(parser, use: str = "") -> None:
    """``--device`` (default auto); ``use`` ends its help (what it is for)."""
    parser.add_argument(
        "--device",
        default="auto",
        help=f"'auto', 'cpu', 'cuda' or 'cuda:N' (default auto: a CUDA device "
        f"when one is available){use}",
    )


def add_seed(parser, about: str = "random seed") -> None:
    """``--seed`` (default 0); ``about`` says what it seeds."""
    parser.add_argument("--seed", type=int, default=0, help=f"{about} (default 0)")


def add_output_flags(parser) -> None:
    """``--json`` and ``--quiet``."""
    parser.add_argument(
        "--json", action="store_true", help="print machine-readable JSON instead"
    )
    parser.add_argument(
        "--quiet",
        action="store_true",
        help="no progress lines or notes on stderr (warnings and errors still show)",
    )


def add_common(parser, *, device_use="", seed=True) -> None:
    """``--device``, ``--seed`` (unless ``seed`` is false), ``--json``, ``--quiet``."""
    add_device(parser, device_use)
    if seed:
        add_seed(parser)
    add_output_flags(parser)


def add_fit(parser) -> None:
    """``--fit``, the calibration file of calibrate and select."""
    parser.add_argument(
        "--fit", required=True, metavar="FILE", help="calibration data, with labels"
    )


def add_input(parser, text: str) -> None:
    """``--input auto|logits|proba``: which scores of the files to read."""
    parser.add_argument(
        "--input", choices=["auto", "logits", "proba"], default="auto", help=text
    )


def add_trust_options(
    parser,
    trust="also trust this fully qualified type in a .skops model (repeatable)",
    pickle="read a model that is not .skops as a pickle (trusted files only)",
) -> None:
    """``--trust TYPE`` (repeatable) and ``--allow-pickle``, of reading a model."""
    parser.add_argument(
        "--trust", action="append", default=[], metavar="TYPE", help=trust
    )
    parser.add_argument("--allow-pickle", action="store_true", help=pickle)


def add_n_bins(parser, of: str) -> None:
    """``--n-bins`` (default 15): the bins of the binned metrics ``of`` ..."""
    parser.add_argument(
        "--n-bins",
        type=positive_int,
        default=15,
        help=f"bins of the binned metrics{of} (default 15)",
    )


def add_save(parser, what: str, stem: str) -> None:
    """``--save FILE``: write the fitted model, ``<stem>.skops`` or ``.pkl``."""
    parser.add_argument(
        "--save",
        metavar="FILE",
        help=f"{what}: {stem}.skops (safe to load, needs skops; reapply it with "
        f"skcal apply) or {stem}.pkl (a pickle)",
    )


def add_interval_options(parser, flag: str) -> None:
    """``--n-resamples`` and ``--confidence-level`` of the report of ``flag``."""
    parser.add_argument(
        "--n-resamples",
        type=positive_int,
        default=1000,
        help=f"bootstrap resamples of {flag} (default 1000; at most 200 for "
        "cwECE, ECCE and smECE)",
    )
    parser.add_argument(
        "--confidence-level",
        type=_confidence_level,
        default=0.9,
        help=f"nominal coverage of the {flag} intervals (default 0.9)",
    )
    parser.add_argument(
        "--ci-method",
        choices=("percentile", "bca"),
        default="percentile",
        help=f"how the {flag} intervals are read from the bootstrap: percentile "
        "(default) or bca (bias-corrected and accelerated: slower, and an "
        "interval that holds its estimate where the percentile one may not)",
    )


def keep_cols_type(value: str):
    """``--keep-cols``: comma-separated names, or ``none``."""
    if value.strip().lower() == "none":
        return ()
    names = tuple(name.strip() for name in value.split(","))
    if not all(names):
        raise argparse.ArgumentTypeError(
            f"{value!r} has an empty name: give comma-separated column names, or none"
        )
    return names


def add_keep_cols(parser, source: str) -> None:
    """``--keep-cols``: the input columns copied to the output."""
    parser.add_argument(
        "--keep-cols",
        type=keep_cols_type,
        metavar="NAMES",
        help=f"columns of {source} copied to --out beside the results, so that "
        "they join back by id: comma-separated names, or none (default: every "
        "column of a CSV or Parquet table that is not a score or the label, "
        "such as an id; nothing from an npz file)",
    )


def add_column_options(parser) -> None:
    """``--label-col``, ``--logit-cols``, ``--proba-cols``, ``--emb-cols`` and
    ``--renormalize`` (how the files' arrays are read)."""
    group = parser.add_argument_group(
        "columns and keys",
        "where the files hold their arrays, the same in every format (see below)",
    )
    group.add_argument(
        "--label-col",
        metavar="NAME",
        help="column or npz array of the labels (default: label, else labels)",
    )
    group.add_argument(
        "--logit-cols",
        metavar="SPEC",
        help="the logits: an npz array, or a column prefix (p_ matches p_0, p_1, "
        "... or p_cat, p_dog), or comma-separated column names (default: "
        "logits, else logit_)",
    )
    group.add_argument(
        "--proba-cols",
        metavar="SPEC",
        help="the probabilities, likewise (default: proba, else proba_)",
    )
    group.add_argument(
        "--emb-cols",
        metavar="SPEC",
        help="the embeddings, likewise (default: embeddings, else emb_)",
    )
    group.add_argument(
        "--renormalize",
        action="store_true",
        help="divide each row of proba by its sum, for rounded probabilities "
        "(a table written with 3 decimals: row sums 0.997-1.001), which are "
        "refused without it; negative entries and rows summing to 0 are "
        "still refused",
    )
    add_record_options(parser)
