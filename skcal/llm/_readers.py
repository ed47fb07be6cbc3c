"""Readers: from top_logprobs records to scores over declared options, or to
TopKScores of the next token."""

from __future__ import annotations

import difflib
import math
import numbers
from array import array
from dataclasses import dataclass
from operator import itemgetter

import numpy as np

from ._records import (
    SENTINEL,
    generated,
    iter_records,
    logprobs_of,
    n_positions,
    normalize_token,
    top_at,
)
from ._topk import PAD, TopKScores

#: How far above 1 the reported probabilities of one position may sum
#: (APIs round their log-probabilities).
_MASS_TOL = 1e-5


@dataclass(frozen=True)
class OptionLogprobs:
    """What :func:`read_option_logprobs` read: one row per record.

    Attributes
    ----------
    options : tuple
        The options, in the order of the columns.
    logprobs : ndarray of shape (n_records, n_options), float64
        Each option's log-probability at the position read, not
        renormalised over the options (the raw values, with the absent
        rule applied). Valid logits: pass them to a calibrator with
        ``input="logits"``, whose softmax renormalises over the options.
    absent : ndarray of shape (n_records, n_options), bool
        Where an option (every surface form of it) was not in the top-k
        and got its value from the ``absent`` rule.
    rest_logmass : ndarray of shape (n_records,), float64
        ``log(1 - sum(exp(top-k)))`` at the position read: the mass the
        truncated distribution leaves to every unlisted token (``-inf``
        where the listed tokens hold it all).
    positions : ndarray of shape (n_records,), int64
        The generated position read in each record.
    unobserved : ndarray of shape (n_records, n_options), bool
        Multi-token options whose later tokens could not be read because the
        generation took another path (their value is then a bound, see
        :func:`read_option_logprobs`). All False for single-token options.
    """

    options: tuple
    logprobs: np.ndarray
    absent: np.ndarray
    rest_logmass: np.ndarray
    positions: np.ndarray
    unobserved: np.ndarray

    def __len__(self) -> int:
        return self.logprobs.shape[0]

    def proba(self) -> np.ndarray:
        """The options' probabilities renormalised over the options (a
        softmax of :attr:`logprobs` per row).

        Returns
        -------
        ndarray of shape (n_records, n_options)
        """
        shifted = self.logprobs - self.logprobs.max(axis=1, keepdims=True)
        p = np.exp(shifted)
        return p / p.sum(axis=1, keepdims=True)

    def to_frame(self):
        """A pandas DataFrame: a ``logprob_<option>`` and an ``absent_<option>``
        column per option, ``rest_logmass`` and ``position``.

        Returns
        -------
        pandas.DataFrame
        """
        import pandas as pd

        names = [_option_name(o) for o in self.options]
        columns = {f"logprob_{n}": self.logprobs[:, j] for j, n in enumerate(names)}
        columns.update({f"absent_{n}": self.absent[:, j] for j, n in enumerate(names)})
        columns["rest_logmass"] = self.rest_logmass
        columns["position"] = self.positions
        return pd.DataFrame(columns)


def _option_name(option) -> str:
    return option if isinstance(option, str) else "".join(option)


# ------------------------------------------------------------ option table
class _Forms:
    """The surface forms of the options: each form is a tuple of compared
    tokens (one for a single-token form) belonging to one option."""

    def __init__(self, options, aliases, match):
        if match not in ("normalized", "exact"):
            raise ValueError(f"match must be 'normalized' or 'exact'; got {match!r}.")
        self.key = normalize_token if match == "normalized" else str
        self.options = tuple(_check_option(o) for o in options)
        if len(self.options) < 2 or len(set(self.options)) != len(self.options):
            raise ValueError(
                f"options must hold at least two distinct options; got {options!r}."
            )
        aliases = dict(aliases or {})
        unknown = [name for name in aliases if _check_option(name) not in self.options]
        if unknown:
            raise ValueError(f"aliases names {unknown}, which are not options.")
        self.forms, self.owner, first = [], [], {}
        for j, option in enumerate(self.options):
            for form in [option, *aliases.get(option, ())]:
                form = _check_option(form)
                tokens = (form,) if isinstance(form, str) else form
                keys = tuple(self.key(t) for t in tokens)
                if keys in self.forms:
                    if self.owner[self.forms.index(keys)] != j:
                        raise ValueError(f"{form!r} is a form of two options.")
                    continue
                if keys[0] in first:
                    other = self.options[self.owner[first[keys[0]]]]
                    raise ValueError(
                        f"{form!r} (of option {option!r}) and a form of option "
                        f"{other!r} start with the same token {keys[0]!r}; the "
                        f"first token must tell the options apart."
                    )
                first[keys[0]] = len(self.forms)
                self.forms.append(keys)
                self.owner.append(j)
        self.first = first
        self.multi = [f for f, keys in enumerate(self.forms) if len(keys) > 1]

    def ids(self):
        """A token -> form id (or -1) dict that fills itself on first sight."""
        key, first = self.key, self.first

        class _Ids(dict):
            def __missing__(self, token):
                value = self[token] = first.get(key(token), -1)
                return value

        return _Ids()


def _check_option(option):
    if isinstance(option, str) and option:
        return option
    if (
        isinstance(option, tuple)
        and option
        and all(isinstance(t, str) and t for t in option)
    ):
        return option if len(option) > 1 else option[0]
    raise ValueError(
        f"An option or alias is a non-empty string (one token) or a tuple of "
        f"non-empty strings (its tokens in order); got {option!r}."
    )


# ------------------------------------------------------------- the reader
def read_option_logprobs(
    records,
    options,
    *,
    aliases=None,
    position="first",
    absent="share",
    multi_token="sum",
    match="normalized",
    choice=0,
    min_logprob=-100.0,
):
    """Read the log-probabilities of declared options from top_logprobs records.

    Parameters
    ----------
    records : iterable of dict, dict, str or path
        Chat-completion or completion responses of an OpenAI-compatible API
        (OpenAI, vLLM, llama.cpp, MLX servers), one per prompt: dicts, the
        path of a JSON file (a list of records) or JSON Lines file (one per
        line), or such text. The chat shape
        ``choices[c].logprobs.content[i].top_logprobs`` (a list of
        ``{token, logprob, bytes}``) and the legacy shape
        ``choices[c].logprobs.top_logprobs[i]`` (a ``{token: logprob}``
        dict) are read; a record may also be a choice, its ``logprobs``
        object or a line of the batch API's output. Streamed: a JSON Lines
        file is never held in memory whole.
    options : sequence of str or tuple of str
        The answers, e.g. ``["A", "B", "C", "D"]`` or ``["Yes", "No"]``. A
        string is one token; a tuple is a multi-token option, its tokens in
        order (as the model's tokenizer splits it), e.g. ``("Bar", "cel",
        "ona")``.
    aliases : dict, default=None
        More surface forms per option, e.g. ``{"Yes": ["Y", "True"]}``:
        the probabilities of all forms of an option found in the top-k are
        summed (``logsumexp``). Under ``match="normalized"`` the case,
        space and marker variants of a form need no alias.
    position : "first", "first_match" or int, default="first"
        The generated position read: the first content token, the first
        position whose generated token is (the first token of) a form of an
        option (if none, the first whose top-k lists one; if none, the
        first), or a fixed index.
    absent : "share" or "floor", default="share"
        The log-probability given to an option none of whose forms is in
        the top-k at that position. With ``L`` the reported log-probabilities
        of the row (the ``-9999`` sentinel dropped: it is never a
        probability), ``R = 1 - sum(exp(L))`` the leftover mass and ``a``
        the number of absent options of the row:

        - ``"floor"``: ``min(L)``, the smallest reported value (an unlisted
          token is at most as likely as the least likely listed one);
        - ``"share"``: ``min(log(R / a), min(L))``, the leftover mass shared
          equally among the absent options, capped by the floor.

        Values are then clipped below at ``min_logprob``.
    multi_token : "sum", "mean" or "first", default="sum"
        A tuple option's value: the sequence log-probability (sum of its
        tokens' log-probabilities), their mean (per-token), or its first
        token's only. Token ``j + 1`` is read from the top-k of position
        ``p + j``, which is conditioned on the generated tokens: it is
        known only where the generation followed the option's first ``j``
        tokens. Where it did not, the tokens read so far stand for the
        option (their sum, an upper bound of the sequence probability,
        exact when the rest is certain; their mean) and ``unobserved``
        marks it. Absent rules apply to the first token.

        At the position read, a sampled token less probable than every
        listed one (so outside the top-k) counts as listed: its
        log-probability is reported with the record.
    match : "normalized" or "exact", default="normalized"
        How tokens are compared with forms: by :func:`normalize_token`
        (case-folded, markers ``Ġ``, ``▁``, ``Ċ`` read as whitespace,
        stripped) or as they are.
    choice : int, default=0
        Which of ``choices`` to read.
    min_logprob : float, default=-100.0
        Lower clip of the returned values, so that they stay finite logits
        (a leftover mass of 0 would give ``-inf``).

    Returns
    -------
    OptionLogprobs
        ``.logprobs`` (n_records, n_options) raw log-probabilities (usable
        as ``input="logits"``), ``.proba()`` renormalised over the options,
        ``.absent``, ``.rest_logmass``, ``.positions``, ``.unobserved``,
        ``.to_frame()``.

    Raises
    ------
    ValueError
        A record without log-probabilities (its index and the missing
        key), an empty top-k, a non-finite or positive log-probability
        other than the sentinel, a position past a record's end, or an
        option that is in no record's top-k (with the closest tokens seen).

    Examples
    --------
    >>> from skcal.llm import read_option_logprobs
    >>> record = {"choices": [{"logprobs": {"content": [{
    ...     "token": "B", "logprob": -0.3, "top_logprobs": [
    ...         {"token": "B", "logprob": -0.3},
    ...         {"token": " A", "logprob": -2.0},
    ...         {"token": "a", "logprob": -3.0},
    ...         {"token": "C", "logprob": -4.0}]}]}}]}
    >>> other = {"choices": [{"logprobs": {"content": [{
    ...     "token": "A", "logprob": -0.1, "top_logprobs": [
    ...         {"token": "A", "logprob": -0.1},
    ...         {"token": "B", "logprob": -2.5}]}]}}]}
    >>> read = read_option_logprobs([record, other], ["A", "B", "C"], absent="floor")
    >>> read.logprobs.round(4)
    array([[-1.6867, -0.3   , -4.    ],
           [-0.1   , -2.5   , -2.5   ]])
    >>> read.absent
    array([[False, False, False],
           [False, False,  True]])
    """
    if absent not in ("share", "floor"):
        raise ValueError(f"absent must be 'share' or 'floor'; got {absent!r}.")
    if multi_token not in ("sum", "mean", "first"):
        raise ValueError(
            f"multi_token must be 'sum', 'mean' or 'first'; got {multi_token!r}."
        )
    _check_position(position, allowed=("first", "first_match"))
    forms = _Forms(options, aliases, match)
    scan = _scan_options(records, forms, position, choice)
    rest, floor, per_form = _leftover(scan.mass), scan.floor, scan.per_form
    unobserved = _add_continuations(per_form, scan, forms, multi_token)
    owner = np.asarray(forms.owner)
    out = np.stack(
        [_logsumexp(per_form[:, owner == j]) for j in range(len(forms.options))],
        axis=1,
    )
    is_absent = ~np.isfinite(out)
    _check_every_option_seen(is_absent, forms, scan.ids)
    _apply_absent_rule(out, is_absent, rest, floor, absent)
    np.maximum(out, min_logprob, out=out)
    return OptionLogprobs(
        options=forms.options,
        logprobs=out,
        absent=is_absent,
        rest_logmass=rest,
        positions=scan.positions,
        unobserved=unobserved & ~is_absent,
    )


def _check_position(position, allowed):
    if isinstance(position, str) and position in allowed:
        return
    if isinstance(position, numbers.Integral) and position >= 0:
        return
    raise ValueError(
        f"position must be a non-negative int or one of {list(allowed)}; got "
        f"{position!r}."
    )


class _Scan:
    """What the records give, per row: the reported mass, the smallest
    reported value and each form's logsumexp at the position read. Entries
    are gathered in Python lists and reduced every ``_CHUNK`` records, so
    memory grows with the rows, not with their 20 entries."""

    _CHUNK = 8192

    def __init__(self, ids, n_forms):
        self.ids, self.n_forms, self.done = ids, n_forms, 0
        self.values, self.form_ids, self.lengths, self.positions = [], [], [], []
        self.parts, self.continuations = [], []

    def flush(self) -> None:
        if self.done == len(self.lengths):
            return
        try:
            values = np.array(self.values, dtype=np.float64)
        except (TypeError, ValueError):
            bad = next(v for v in self.values if not isinstance(v, (int, float)))
            raise ValueError(
                f"A top_logprobs entry has logprob {bad!r}; expected a number."
            ) from None
        ids = np.array(self.form_ids, dtype=np.int64)
        lengths = np.array(self.lengths[self.done :], dtype=np.int64)
        self.parts.append(_reduce_rows(values, ids, lengths, self.done, self.n_forms))
        self.done = len(self.lengths)
        self.values.clear()
        self.form_ids.clear()

    def finish(self) -> None:
        self.flush()
        if not self.lengths:
            raise ValueError("records holds no record.")
        self.mass, self.floor, self.per_form = (
            np.concatenate(part) for part in zip(*self.parts)
        )
        self.parts = None
        self.positions = np.array(self.positions, dtype=np.int64)


def _reduce_rows(values, ids, lengths, first, n_forms):
    """Check a chunk's entries (the sentinel becomes ``-inf``) and reduce them
    per row: the reported mass, the floor, each form's logsumexp."""
    rows = np.repeat(np.arange(len(lengths)), lengths)
    bad = np.isnan(values) | np.isinf(values) | (values > _MASS_TOL)
    if bad.any():
        at = int(np.argmax(bad))
        raise ValueError(
            f"Record {first + rows[at]}: a top_logprobs entry at the position read "
            f"has log-probability {values[at]}; expected a finite value <= 0 (or "
            f"the sentinel {SENTINEL})."
        )
    values[values <= SENTINEL] = -np.inf
    finite = np.isfinite(values)
    offsets = np.concatenate([[0], np.cumsum(lengths)[:-1]])  # no row is empty
    empty = np.add.reduceat(finite, offsets) == 0
    if empty.any():
        raise ValueError(
            f"Record {first + int(np.argmax(empty))}: every top_logprobs entry at "
            f"the position read is the {SENTINEL} sentinel; no probability is "
            f"reported."
        )
    mass = np.add.reduceat(np.exp(values), offsets)
    floor = np.minimum.reduceat(np.where(finite, values, np.inf), offsets)
    per_form = _logsumexp_by_cell(
        values, rows, ids, finite & (ids >= 0), (len(lengths), n_forms)
    )
    return mass, floor, per_form


def _scan_options(records, forms, position, choice):
    """One pass over the records. 1 M records hold 20 M top-k entries: the
    chat shape is read with C-level ``map`` over ``itemgetter`` and a
    self-filling token -> form dict, a loop per record, none per entry."""
    scan = _Scan(forms.ids(), len(forms.forms))
    lookup = scan.ids.__getitem__
    get_token, get_logprob = itemgetter("token"), itemgetter("logprob")
    values, form_ids = scan.values, scan.form_ids
    for index, record in enumerate(iter_records(records)):
        try:  # the usual chat record, without the general function's checks
            kind, lp = "chat", record["choices"][choice]["logprobs"]["content"]
            if lp is None:
                raise TypeError
        except (KeyError, TypeError, IndexError):
            kind, lp = logprobs_of(record, index, choice)
        if kind == "chat" and position == "first" and lp:
            q = 0
        else:
            q = _position(kind, lp, index, position, scan.ids)
        before = len(values)
        try:
            if kind != "chat":
                raise KeyError  # the legacy shape: read by top_at
            top = lp[q]["top_logprobs"]
            values.extend(map(get_logprob, top))
            form_ids.extend(map(lookup, map(get_token, top)))
            if not top:
                raise KeyError
        except (KeyError, TypeError):
            del values[before:], form_ids[before:]
            tokens, top = top_at(kind, lp, q, index)  # or its clear error
            values.extend(top)
            form_ids.extend(map(lookup, tokens))
        _add_sampled_token(kind, lp, q, values, form_ids, before, lookup)
        scan.lengths.append(len(values) - before)
        scan.positions.append(q)
        if forms.multi:
            scan.continuations.append(_continuations(kind, lp, q, forms, index))
        if len(scan.lengths) % scan._CHUNK == 0:
            scan.flush()
    scan.finish()
    return scan


def _add_sampled_token(kind, lp, q, values, form_ids, before, lookup) -> None:
    """A sampled token below every listed one is not in the top-k, but its
    log-probability is reported with it: it joins the row's entries."""
    try:
        token, value = (
            (lp[q]["token"], lp[q]["logprob"])
            if kind == "chat"
            else generated(kind, lp, q)
        )
    except (KeyError, TypeError, IndexError):
        return
    if isinstance(value, float) and SENTINEL < value < min(values[before:]):
        values.append(value)
        form_ids.append(lookup(token))


def _position(kind, lp, index, position, ids) -> int:
    n = n_positions(kind, lp)
    if position == "first_match":
        return _first_match(kind, lp, n, ids, index)
    q = 0 if position == "first" else int(position)
    if q >= n:
        raise ValueError(
            f"Record {index} has {n} generated tokens; position {q} was asked "
            f"for{' (the completion is empty)' if n == 0 else ''}."
        )
    return q


def _first_match(kind, lp, n, ids, index) -> int:
    for q in range(n):
        if ids[generated(kind, lp, q)[0]] >= 0:
            return q
    for q in range(n):
        tokens = top_at(kind, lp, q, index)[0] if _has_top(kind, lp, q) else ()
        if any(ids[t] >= 0 for t in tokens):
            return q
    return 0


def _has_top(kind, lp, q) -> bool:
    top = lp[q].get("top_logprobs") if kind == "chat" else lp["top_logprobs"][q]
    return bool(top)


def _leftover(mass):
    """``log(1 - mass)`` per row, the mass checked to be at most 1."""
    if (mass > 1 + _MASS_TOL).any():
        row = int(np.argmax(mass))
        raise ValueError(
            f"Record {row}: the top_logprobs probabilities sum to "
            f"{mass[row]:.6g} > 1; they are not log-probabilities."
        )
    with np.errstate(divide="ignore"):
        return np.where(mass < 1, np.log1p(-np.minimum(mass, 1)), -np.inf)


def _logsumexp_by_cell(values, rows, cols, keep, shape):
    """logsumexp of the kept entries that fall in each cell (row, col) of an
    array of ``shape``; ``-inf`` for a cell none falls in."""
    rows, cols, values = rows[keep], cols[keep], values[keep]
    peak = np.full(shape, -np.inf)
    np.maximum.at(peak, (rows, cols), values)
    total = np.zeros(shape)
    np.add.at(total, (rows, cols), np.exp(values - peak[rows, cols]))
    with np.errstate(divide="ignore"):
        return np.where(total > 0, peak + np.log(total), -np.inf)


def _logsumexp(a):
    """logsumexp along axis 1, ``-inf`` for an all ``-inf`` row."""
    top = a.max(axis=1, initial=-np.inf)
    safe = np.where(np.isfinite(top), top, 0.0)
    with np.errstate(divide="ignore"):
        return safe + np.log(np.exp(a - safe[:, None]).sum(axis=1))


def _apply_absent_rule(out, is_absent, rest, floor, rule) -> None:
    if rule == "floor":
        fill = np.broadcast_to(floor[:, None], out.shape)
    else:
        count = is_absent.sum(axis=1)
        with np.errstate(divide="ignore"):
            share = rest - np.log(np.maximum(count, 1))
        fill = np.broadcast_to(np.minimum(share, floor)[:, None], out.shape)
    out[is_absent] = fill[is_absent]


def _check_every_option_seen(is_absent, forms, ids) -> None:
    never = [j for j in range(len(forms.options)) if is_absent[:, j].all()]
    if not never:
        return
    seen = sorted({forms.key(t) for t in ids})
    lines = []
    for j in never:
        target = forms.forms[forms.owner.index(j)][0]
        close = difflib.get_close_matches(target, seen, n=5, cutoff=0.3)
        lines.append(f"{forms.options[j]!r} (closest tokens seen: {close})")
    raise ValueError(
        f"No record lists {', '.join(lines)} in its top-k at the position read. "
        f"Check the option's spelling, add the model's form with aliases=, or "
        f"read another position (position='first_match')."
    )


# ------------------------------------------------------- multi-token forms
def _continuations(kind, lp, q, forms, index):
    """For each multi-token form: (summed log-probability of its tokens after
    the first, number of its tokens read, whether all were read)."""
    n = n_positions(kind, lp)
    out = []
    for f in forms.multi:
        keys, total, read = forms.forms[f], 0.0, 1
        for j in range(1, len(keys)):
            at = q + j
            if at >= n or forms.key(generated(kind, lp, at - 1)[0]) != keys[j - 1]:
                break
            value = _token_logprob(kind, lp, at, keys[j], forms.key, index)
            if value is None:
                break
            total, read = total + value, read + 1
        out.append((total, read, read == len(keys)))
    return out


def _token_logprob(kind, lp, at, key, normalize, index):
    """logsumexp of the entries at ``at`` (top-k and generated token) whose
    compared form is ``key``; None when none is."""
    token, value = generated(kind, lp, at)
    top = top_at(kind, lp, at, index) if _has_top(kind, lp, at) else ((), ())
    entries = dict(zip(*top))
    entries.setdefault(token, value)
    found = [v for t, v in entries.items() if v > SENTINEL and normalize(t) == key]
    if not found:
        return None
    top = max(found)
    return top + math.log(sum(math.exp(v - top) for v in found))


def _add_continuations(per_form, scan, forms, rule):
    """Add the later tokens of multi-token forms to their first token's
    value; return which options could not be read whole."""
    n = per_form.shape[0]
    unobserved = np.zeros((n, len(forms.options)), dtype=bool)
    if not forms.multi or rule == "first":
        return unobserved
    for i, row in enumerate(scan.continuations):
        for f, (total, read, whole) in zip(forms.multi, row):
            value = per_form[i, f] + total
            per_form[i, f] = value / read if rule == "mean" else value
            unobserved[i, forms.owner[f]] |= not whole
    return unobserved


# ----------------------------------------------------------- next token
def read_top_logprobs(
    records, *, vocabulary=None, n_classes=None, position=0, choice=0
):
    """Read the top-k of one generated position as a :class:`TopKScores`.

    Tokens are taken as they are (no normalisation: distinct tokens stay
    distinct classes); two entries of one row with the same token string
    (distinct byte-level tokens that decode alike) are merged by summing
    their probabilities. The ``-9999`` sentinel marks padding.

    Parameters
    ----------
    records : iterable of dict, dict, str or path
        As in :func:`read_option_logprobs`.
    vocabulary : sequence of str or dict of str to int, default=None
        The class of each token: a sequence (a token's index is its
        position) or a token -> index dict. ``None``: the tokens seen, in
        order of first sight (their names in ``TopKScores.tokens``).
    n_classes : int, default=None
        The vocabulary size that the leftover mass is spread over (the rest
        model of :class:`TopKScores`). Give the tokenizer's size (e.g.
        ``200_019``) for an API model; default: the size of ``vocabulary``,
        or the number of distinct tokens seen.
    position : int, default=0
        The generated position read.
    choice : int, default=0
        Which of ``choices`` to read.

    Returns
    -------
    TopKScores
        ``rest_logmass`` is ``log(1 - sum(exp(top-k)))`` of each row.

    Examples
    --------
    >>> from skcal.llm import read_top_logprobs
    >>> record = {"choices": [{"logprobs": {"content": [{
    ...     "token": "Yes", "logprob": -0.1, "top_logprobs": [
    ...         {"token": "Yes", "logprob": -0.1},
    ...         {"token": "No", "logprob": -2.5},
    ...         {"token": "Maybe", "logprob": -9999.0}]}]}}]}
    >>> top = read_top_logprobs([record], vocabulary=["No", "Yes", "Maybe"])
    >>> top.indices, top.n_listed
    (array([[ 1,  0, -1]]), array([2]))
    """
    _check_position(position, allowed=())
    table, names = _vocabulary_table(vocabulary)
    lookup = table.__getitem__
    values, indices, lengths = array("d"), array("q"), array("q")
    for i, record in enumerate(iter_records(records)):
        kind, lp = logprobs_of(record, i, choice)
        q = _position(kind, lp, i, position, None)
        tokens, row = top_at(kind, lp, q, i)
        tokens, row = _merge_same_tokens(tokens, row)
        values.extend(row)
        try:
            indices.extend(map(lookup, tokens))
        except KeyError as exc:
            raise _not_in_vocabulary(exc.args[0], i, table) from None
        lengths.append(len(row))
    if not lengths:
        raise ValueError("records holds no record.")
    return _as_topk(values, indices, lengths, names, vocabulary, n_classes)


class _Seen(dict):
    """token -> index in order of first sight, filled on lookup."""

    def __missing__(self, token):
        value = self[token] = len(self)
        return value


def _vocabulary_table(vocabulary):
    """A token -> index dict and, without a vocabulary, the tokens seen."""
    if vocabulary is None:
        seen = _Seen()
        return seen, seen
    if isinstance(vocabulary, dict):
        return dict(vocabulary), None
    return {t: j for j, t in enumerate(vocabulary)}, None


def _not_in_vocabulary(token, i, table):
    close = difflib.get_close_matches(token, list(table), n=3)
    return ValueError(
        f"Record {i} lists the token {token!r}, which is not in vocabulary "
        f"(closest: {close}); pass the full vocabulary or vocabulary=None."
    )


def _merge_same_tokens(tokens, values):
    if len(set(tokens)) == len(tokens):
        return tokens, values
    merged = {}
    for t, v in zip(tokens, values):
        merged[t] = v if t not in merged else np.logaddexp(merged[t], v)
    return list(merged), [float(v) for v in merged.values()]


def _as_topk(values, indices, lengths, names, vocabulary, n_classes):
    values = np.frombuffer(values, dtype=np.float64).copy()
    indices = np.frombuffer(indices, dtype=np.int64)
    lengths = np.frombuffer(lengths, dtype=np.int64)
    rows = np.repeat(np.arange(len(lengths)), lengths)
    cols = np.arange(len(values)) - np.repeat(
        np.concatenate([[0], np.cumsum(lengths)[:-1]]), lengths
    )
    bad = ~np.isfinite(values) | (values > _MASS_TOL)
    if bad.any():
        at = int(np.argmax(bad))
        raise ValueError(
            f"Record {rows[at]}: a top_logprobs entry has log-probability "
            f"{values[at]}; expected a finite value <= 0 (or the sentinel)."
        )
    keep = values > SENTINEL
    n, k = len(lengths), int(lengths.max())
    top_indices = np.full((n, k), PAD, dtype=np.int64)
    top_values = np.full((n, k), -np.inf)
    top_indices[rows[keep], cols[keep]] = indices[keep]
    top_values[rows[keep], cols[keep]] = values[keep]
    if n_classes is None:
        n_classes = len(vocabulary) if vocabulary is not None else len(names)
    rest = _leftover(np.exp(top_values).sum(axis=1))
    tokens = list(names) if names is not None else None
    return TopKScores(top_indices, top_values, n_classes, rest, tokens=tokens)
