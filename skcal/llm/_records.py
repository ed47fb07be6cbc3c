"""Records of an OpenAI-compatible API: loading them and reading a position.

Two shapes are read (OpenAI, vLLM, llama.cpp and MLX servers answer in
them):

* chat completions: ``choices[c].logprobs.content[i]`` is
  ``{"token", "logprob", "bytes", "top_logprobs": [{"token", "logprob",
  "bytes"}, ...]}``;
* legacy completions: ``choices[c].logprobs`` is ``{"tokens": [...],
  "token_logprobs": [...], "top_logprobs": [{token: logprob, ...}, ...]}``.

A record may also be a choice (a dict with ``logprobs``), the ``logprobs``
object itself, or a line of the batch API's output (``{"response": {"body":
{...}}}``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping

#: An API's value for a token outside the reported top-k: never a probability.
SENTINEL = -9999.0

#: Tokenizer markers and what they stand for: GPT-2 byte-level BPE (Ġ space,
#: Ċ newline, ĉ tab) and SentencePiece (▁ space).
MARKERS = {"Ġ": " ", "▁": " ", "Ċ": "\n", "ĉ": "\t"}


def normalize_token(token: str) -> str:
    """The form under which tokens and options are compared by default.

    The rule: tokenizer markers are replaced by what they stand for (``Ġ``
    and ``▁`` by a space, ``Ċ`` by a newline, ``ĉ`` by a tab), surrounding
    whitespace is stripped and the text is case-folded. ``" Yes"``,
    ``"yes"``, ``"YES"``, ``"ĠYes"`` and ``"▁yes"`` all become ``"yes"``.

    Parameters
    ----------
    token : str

    Returns
    -------
    str

    Examples
    --------
    >>> from skcal.llm import normalize_token
    >>> [normalize_token(t) for t in [" Yes", "YES", "ĠYes", "▁yes", "B\\n"]]
    ['yes', 'yes', 'yes', 'yes', 'b']
    """
    for marker, text in MARKERS.items():
        if marker in token:
            token = token.replace(marker, text)
    return token.strip().casefold()


def _json_loads():
    """orjson's ``loads`` when installed (several times faster), else the
    standard library's."""
    try:
        import orjson
    except ImportError:
        import json

        return json.loads
    return orjson.loads


def iter_records(records):
    """Yield the records (dicts) of ``records``: an iterable of dicts, a dict,
    a path to a JSON or JSONL file, or JSON / JSONL text."""
    if isinstance(records, Mapping):
        yield records
        return
    if isinstance(records, (str, bytes)) and records.lstrip()[:1] in (
        "{",
        "[",
        b"{",
        b"[",
    ):
        yield from _parse_text(records)
        return
    if isinstance(records, (str, bytes, os.PathLike)):
        yield from _read_file(os.fspath(records))
        return
    yield from records


def _parse_text(text):
    loads = _json_loads()
    try:
        value = loads(text)
    except ValueError:  # several JSON values: JSON Lines
        lines = text.splitlines()
        for number, line in enumerate(lines):
            if line.strip():
                yield _parse_line(loads, line, number, "the JSON text")
        return
    yield from value if isinstance(value, list) else [value]


def _parse_line(loads, line, number, where):
    try:
        return loads(line)
    except ValueError as exc:
        raise ValueError(
            f"Line {number + 1} of {where} is not valid JSON ({exc}); a JSON "
            f"Lines file holds one record per line."
        ) from None


def _read_file(path):
    if not os.path.isfile(path):
        raise FileNotFoundError(
            f"records must be dicts, JSON text or the path of a JSON / JSONL "
            f"file; {path!r} is not a file (JSON text starts with '{{' or '[')."
        )
    loads = _json_loads()
    with open(path, "rb") as f:
        first = f.read(1024).lstrip()[:1]
        f.seek(0)
        if first == b"[" or path.endswith(".json"):
            value = loads(f.read())
            yield from value if isinstance(value, list) else [value]
            return
        for number, line in enumerate(f):
            if line.strip():
                yield _parse_line(loads, line, number, path)


# ------------------------------------------------------------------ shapes
def logprobs_of(record, index: int, choice: int):
    """``(kind, logprobs)`` of a record: ``"chat"`` and the list
    ``logprobs.content``, or ``"legacy"`` and the ``logprobs`` dict."""
    if not isinstance(record, Mapping):
        raise TypeError(
            f"Record {index} is a {type(record).__name__}; expected a dict (a "
            f"chat-completion or completion response, or one of its choices)."
        )
    if "choices" not in record and isinstance(record.get("response"), Mapping):
        response = record["response"]  # a line of the batch API's output
        record = response.get("body", response)
    if "choices" in record:
        choices = record["choices"]
        if not choices or len(choices) <= choice:
            raise ValueError(
                f"Record {index} has {len(choices or [])} choices; choice={choice} "
                f"was asked for."
            )
        where, lp = f"choices[{choice}].logprobs", choices[choice].get("logprobs")
    elif "logprobs" in record:
        where, lp = "logprobs", record["logprobs"]
    elif "content" in record or "top_logprobs" in record:
        where, lp = "the record", record
    else:
        raise ValueError(_missing(index, "choices[].logprobs", record))
    if lp is None:
        raise ValueError(_missing(index, where, record, null=True))
    if lp.get("content") is not None:
        return "chat", lp["content"]
    if lp.get("top_logprobs") is not None:
        return "legacy", lp
    raise ValueError(_missing(index, f"{where}.content", record, null=True))


def _missing(index, key, record, *, null=False) -> str:
    state = "is null" if null else "is missing"
    return (
        f"Record {index} has no log-probabilities: {key} {state} (keys: "
        f"{sorted(record)[:8]}). Request them with logprobs=True and "
        f"top_logprobs=20 (chat completions) or logprobs=20 (completions)."
    )


def n_positions(kind, lp) -> int:
    return len(lp) if kind == "chat" else len(lp["top_logprobs"])


def generated(kind, lp, q):
    """The generated token at position ``q`` and its log-probability."""
    if kind == "chat":
        item = lp[q]
        return item["token"], item["logprob"]
    return lp["tokens"][q], lp["token_logprobs"][q]


def top_at(kind, lp, q, index):
    """The tokens and log-probabilities of the top-k at position ``q``."""
    try:
        if kind == "chat":
            top = lp[q]["top_logprobs"]
            tokens = [entry["token"] for entry in top]
            values = [entry["logprob"] for entry in top]
        else:
            top = lp["top_logprobs"][q] or {}
            tokens, values = list(top), list(top.values())
    except (KeyError, TypeError) as exc:
        raise ValueError(
            f"Record {index}, position {q}: the top_logprobs entries are not "
            f"{{token, logprob}} pairs (missing {exc})."
        ) from None
    if not tokens:
        raise ValueError(
            f"Record {index}, position {q}: top_logprobs is empty. Request the "
            f"completion with top_logprobs > 0 (up to 20)."
        )
    return tokens, values
