"""Language-model API records (``.jsonl``, ``.json``) as input files.

A chat-completion or completion response with ``top_logprobs`` (OpenAI,
vLLM, llama.cpp, MLX servers), one per prompt, is read by
:func:`skcal.llm.read_option_logprobs` over the options of ``--options``:
the option log-probabilities are the file's ``logits`` (one column per
option, in the order given), the options its ``classes``, and the record
key ``id``, when every record has one, a column copied to the outputs.
The labels come from ``--label-key`` (a dotted key path in each record) or
``--labels`` (a text file, one label per line). :mod:`skcal.llm` (which
imports scikit-learn) is imported only when such a file is read.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from ._common import CLIError

#: the reader's keywords in its messages -> the options that set them
_AS_FLAGS = (
    ("with aliases=", "with --alias OPTION=FORM"),
    ("position='first_match'", "--position first_match"),
)

#: extensions of the record files
RECORD_EXTENSIONS = (".jsonl", ".json")

RECORDS_HELP = """\
language-model records (.jsonl, .json input files):
  API responses with top_logprobs, one per prompt (chat or legacy
  completions, batch-API lines), read by skcal.llm.read_option_logprobs:
  --options A B C D (required) declares the answers; the option
  log-probabilities are the logits (one column per option), the outputs
  hold proba_<option>. --alias Yes=Y,True adds surface forms (summed);
  --position, --absent, --multi-token as in read_option_logprobs (an option
  of several tokens: its tokens joined by +, such as Bar+cel+ona). Labels:
  --label-key metadata.answer (a dotted key path in each record) or --labels
  FILE (one label per line). A record key id is copied to the outputs."""


@dataclass(frozen=True)
class RecordOptions:
    """The options of :func:`~skcal.llm.read_option_logprobs` and where the
    labels are, from the command line."""

    options: tuple | None = None
    aliases: tuple = ()
    position: str | int = "first"
    absent: str = "share"
    multi_token: str = "sum"
    label_key: str | None = None
    labels_file: str | None = None

    @classmethod
    def from_args(cls, args) -> RecordOptions:
        aliases = {}
        for option, forms in getattr(args, "alias", None) or ():
            aliases.setdefault(option, []).extend(forms)
        position = getattr(args, "position", "first")
        return cls(
            options=None if not getattr(args, "options", None) else tuple(args.options),
            aliases=tuple((k, tuple(v)) for k, v in aliases.items()),
            position=int(position) if str(position).isdigit() else position,
            absent=getattr(args, "absent", "share"),
            multi_token=getattr(args, "multi_token", "sum"),
            label_key=getattr(args, "label_key", None),
            labels_file=getattr(args, "labels", None),
        )


def _token_form(text: str):
    """An option or form: one token, or with ``+`` a tuple of tokens."""
    return tuple(text.split("+")) if "+" in text.strip("+") else text


def alias_type(text: str):
    """The argument type of ``--alias OPTION=FORM[,FORM...]``."""
    import argparse

    option, sep, forms = text.partition("=")
    names = [f for f in forms.split(",") if f]
    if not sep or not option or not names:
        raise argparse.ArgumentTypeError(
            f"expected OPTION=FORM[,FORM...] such as Yes=Y,True; got {text!r}"
        )
    return option, names


def position_type(text: str):
    """The argument type of ``--position``: first, first_match or an index."""
    import argparse

    if text in ("first", "first_match") or text.isdigit():
        return text
    raise argparse.ArgumentTypeError(
        f"expected first, first_match or a non-negative index; got {text!r}"
    )


def add_record_options(parser) -> None:
    """``--options``, ``--alias``, ``--position``, ``--absent``,
    ``--multi-token``, ``--label-key`` and ``--labels``."""
    group = parser.add_argument_group(
        "language-model records",
        "for .jsonl / .json files of API responses with top_logprobs (see below)",
    )
    group.add_argument(
        "--options",
        nargs="+",
        metavar="OPTION",
        help="the answers whose log-probabilities are read, such as A B C D "
        "(required with a .jsonl or .json file)",
    )
    group.add_argument(
        "--alias",
        action="append",
        type=alias_type,
        metavar="OPTION=FORM[,FORM...]",
        help="more surface forms of an option, summed (repeatable)",
    )
    group.add_argument(
        "--position",
        type=position_type,
        default="first",
        help="the generated position read: first (default), first_match or an index",
    )
    group.add_argument(
        "--absent",
        choices=("share", "floor"),
        default="share",
        help="the value of an option not in the top-k (default share)",
    )
    group.add_argument(
        "--multi-token",
        choices=("sum", "mean", "first"),
        default="sum",
        help="the value of a multi-token option (default sum)",
    )
    group.add_argument(
        "--label-key",
        metavar="KEY.PATH",
        help="the label in each record, a dotted key path such as metadata.answer",
    )
    group.add_argument(
        "--labels",
        metavar="FILE",
        help="a text file of the labels, one per line, one line per record",
    )


def is_records(path: str) -> bool:
    """Whether ``path`` names a file of language-model records."""
    return os.path.splitext(path)[1].lower() in RECORD_EXTENSIONS


def _dig(record, keys, index: int, label_key: str):
    value = record
    for key in keys:
        if not isinstance(value, dict) or key not in value:
            raise CLIError(
                f"record {index} has no {label_key!r} (no key {key!r}); every "
                "record needs its label there, or give the labels with --labels."
            )
        value = value[key]
    if isinstance(value, (dict, list)) or value is None:
        raise CLIError(
            f"record {index}: {label_key!r} is {value!r}, not a label (a string "
            "or a number)."
        )
    return value


def _labels_file(path: str, n: int) -> np.ndarray:
    try:
        with open(path, encoding="utf-8") as f:
            labels = [line.strip() for line in f if line.strip()]
    except OSError as exc:
        raise CLIError(f"cannot read --labels {path}: {exc}") from None
    if len(labels) != n:
        raise CLIError(
            f"--labels {path} has {len(labels)} labels but the records are {n}; "
            "give one label per line, one line per record."
        )
    return np.asarray(labels)


def read_records(path: str, spec: RecordOptions | None) -> dict:
    """The arrays of a record file: ``logits``, ``classes``, and ``labels``
    and ``id`` when known."""
    from ..llm import read_option_logprobs

    if spec is None or not spec.options:
        raise CLIError(
            f"{path} holds language-model records: name the answers whose "
            "log-probabilities to read with --options, such as --options A B C D."
        )
    keys = spec.label_key.split(".") if spec.label_key else None
    labels, ids = [], []

    def records():
        from ..llm._records import iter_records

        for index, record in enumerate(iter_records(path)):
            if keys is not None:
                labels.append(_dig(record, keys, index, spec.label_key))
            rid = record.get("id") if isinstance(record, dict) else None
            ids.append(rid if isinstance(rid, (str, int)) else None)
            yield record

    options = [_token_form(o) for o in spec.options]
    aliases = {_token_form(k): [_token_form(f) for f in v] for k, v in spec.aliases}
    try:
        read = read_option_logprobs(
            records(),
            options,
            aliases=aliases or None,
            position=spec.position,
            absent=spec.absent,
            multi_token=spec.multi_token,
        )
    except ValueError as exc:  # CLIError included: the labels' checks
        message = " ".join(str(exc).split())
        for python, flag in _AS_FLAGS:
            message = message.replace(python, flag)
        raise CLIError(f"{path}: {message}") from None
    names = ["".join(o) if isinstance(o, tuple) else o for o in options]
    arrays = {"logits": read.logprobs, "classes": np.asarray(names)}
    if keys is not None:
        arrays["labels"] = np.asarray([str(v) for v in labels])
    elif spec.labels_file is not None:
        arrays["labels"] = _labels_file(spec.labels_file, len(read))
    if ids and all(i is not None for i in ids):
        arrays["id"] = np.asarray([str(i) for i in ids])
    return arrays
