"""Where the arrays of an input file are, and the class of each score column.

The same names work in every format (:data:`COLUMNS_HELP`, shown by
``skcal <command> --help``):

labels
    The column or array ``label`` or ``labels`` (``--label-col NAME``).
logits, proba, embeddings
    A matrix, read from a 2-D npz array (``logits``, ``proba``,
    ``embeddings``), or from the columns (or 1-D npz arrays) whose names
    start with a prefix (``logit_``, ``proba_``, ``emb_``): in file order,
    or by number when every suffix is a number. ``--logit-cols``,
    ``--proba-cols`` and ``--emb-cols`` give another array name or prefix
    (``p_`` matches ``p_0 ... p_9`` or ``p_cat, p_dog``), or, with a comma,
    the exact column names in column order (``p_cat,p_dog``).
classes
    The label of each score column: an npz array ``classes``; else, when
    the columns' suffixes (after a prefix, or after the common prefix of a
    list) name every label, these names (``proba_cat`` is class ``cat``);
    else integer labels ``0..C-1`` are their own column and other labels
    go in sorted order (:func:`column_classes`).
coef, intercept
    The frozen linear head of local calibrators, npz only.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

import numpy as np

from ._common import CLIError, difference, listing, reporter
from ._records import RecordOptions

#: option naming where each per-sample array is read from
FLAGS = {
    "labels": "--label-col",
    "logits": "--logit-cols",
    "proba": "--proba-cols",
    "embeddings": "--emb-cols",
}


#: characters that end the common prefix of a list of column names
SEPARATORS = "_-.: "


#: the column options and names, printed by every command's --help
COLUMNS_HELP = """\
columns and keys (the same names in .npz, .csv and .parquet files):
  labels           --label-col NAME: the column or npz array NAME (default:
                   label, else labels).
  logits, proba,   --logit-cols, --proba-cols, --emb-cols SPEC, one of:
  embeddings       - NAME: the 2-D npz array NAME (defaults: logits, proba,
                     embeddings), else the columns (or 1-D npz arrays) whose
                     names start with the prefix NAME (defaults: logit_,
                     proba_, emb_), in file order, or by number when every
                     suffix is a number: p_ matches p_0 ... p_9 or p_cat,
                     p_dog;
                   - A,B,...: exactly these columns, in this order.
  classes          the label of each score column: an npz array classes;
                   else the columns' suffixes (after the prefix, or after
                   the common prefix of a list ending in _ - . : or a
                   space) when they name every label (proba_cat: class
                   cat); else integer labels 0..C-1 are their own column,
                   and other labels go in sorted order.
  outputs          proba, predict, labels (when known) and, in npz,
                   classes; in a table the columns label, predict and
                   proba_<class> when the classes are strings or named by
                   the input, else proba_0 ... proba_{C-1}."""


def parse_columns(text: str | None, flag: str):
    """The value of ``--logit-cols``/``--proba-cols``/``--emb-cols``.

    Returns None (the defaults) for None, the name or prefix for a text
    without a comma, else the tuple of the comma-separated names.

    Raises
    ------
    CLIError
        If the text or one of its names is empty, or a name repeats.
    """
    if text is None:
        return None
    if "," not in text:
        if not text.strip():
            raise CLIError(
                f"{flag} is empty: give an array name or column prefix such as "
                "p_, or comma-separated column names such as p_cat,p_dog."
            )
        return text.strip()
    names = tuple(name.strip() for name in text.split(","))
    if not all(names):
        raise CLIError(
            f"{flag} {text!r} has an empty name: give comma-separated column "
            "names such as p_cat,p_dog (or, without a comma, a prefix such as p_)."
        )
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise CLIError(
            f"{flag} {text!r} names {repeated[0]!r} more than once: give each "
            "column once, in column order."
        )
    return names


@dataclass(frozen=True)
class Columns:
    """Where the per-sample arrays of a file are read from.

    Each attribute is None for the defaults of :data:`COLUMNS_HELP`;
    ``labels`` is a column or npz array name, the matrices a name or prefix
    (str) or a tuple of exact column names.
    """

    labels: str | None = None
    logits: str | tuple | None = None
    proba: str | tuple | None = None
    embeddings: str | tuple | None = None
    #: ``--renormalize``: divide each row of proba by its sum
    renormalize: bool = False
    #: prints a note on stderr (what --renormalize did); None: silent
    report: object = field(default=None, compare=False, repr=False)
    #: how a .jsonl / .json file of language-model records is read
    records: object = None

    @classmethod
    def from_args(cls, args) -> Columns:
        """From the options ``--label-col``, ``--logit-cols``, ``--proba-cols``,
        ``--emb-cols`` and ``--renormalize`` of ``args`` (absent options: the
        defaults; ``--quiet`` silences the note of ``--renormalize``)."""
        label = getattr(args, "label_col", None)
        if label is not None and not label.strip():
            raise CLIError(
                "--label-col is empty: give the name of the column (or npz "
                "array) of the labels."
            )
        return cls(
            labels=None if label is None else label.strip(),
            logits=parse_columns(getattr(args, "logit_cols", None), FLAGS["logits"]),
            proba=parse_columns(getattr(args, "proba_cols", None), FLAGS["proba"]),
            embeddings=parse_columns(
                getattr(args, "emb_cols", None), FLAGS["embeddings"]
            ),
            renormalize=bool(getattr(args, "renormalize", False)),
            report=None if getattr(args, "quiet", True) else reporter(args),
            records=RecordOptions.from_args(args),
        )

    def spec(self, key: str):
        """The option's value for ``key`` (None: the defaults)."""
        return getattr(self, key, None) if key in FLAGS else None

    def option(self, key: str) -> str:
        """``key``'s option as given, such as ``--proba-cols p_``."""
        spec = self.spec(key)
        value = ",".join(spec) if isinstance(spec, tuple) else spec
        return f"{FLAGS[key]} {value}"


def strip_common_prefix(names) -> list[str]:
    """The names without their longest common prefix that ends in a separator."""
    prefix = os.path.commonprefix(list(names))
    cut = max((i + 1 for i, ch in enumerate(prefix) if ch in SEPARATORS), default=0)
    if any(len(name) == cut for name in names):
        cut = 0
    return [name[cut:] for name in names]


def number_names(names: list[str]) -> list[str] | None:
    """``names`` as canonical integers (``"07"`` -> ``"7"``) if all are, else None."""
    if all(re.fullmatch(r"\d+", name) for name in names):
        return [str(int(name)) for name in names]
    return None


def column_classes(y, names, n_columns: int, classes=None):
    """The label of each score column, and whether the input named them.

    Parameters
    ----------
    y : ndarray of shape (n_samples,) or None
        The file's labels (None: a file without labels).
    names : list of str or None
        :meth:`~skcal.cli._io.ArrayFile.column_names` of the scores (None: a
        2-D array).
    n_columns : int
        Number of score columns.
    classes : ndarray of shape (n_columns,), default=None
        An npz array ``classes``, which wins.

    Returns
    -------
    classes_ : ndarray of shape (n_columns,) or None
        The label of each column (None without labels and names).
    given : ndarray of shape (n_columns,) or None
        ``classes_`` when the input named the classes (``classes``, or
        column names that name every label), to pass to the calibrators as
        ``classes``; None when the default rule applies (integer labels
        ``0..C-1`` are their own column, other labels in sorted order).
    note : str or None
        Why the default rule applies although the columns have names (none
        of them is a label), for the user; None otherwise.

    Raises
    ------
    ValueError
        If the labels do not fit the columns; a :class:`CLIError` if the
        column names name some labels but not all, or are numbered neither
        ``0..C-1`` nor after the labels.
    """
    from ..utils._validation import resolve_classes

    if classes is not None:
        if y is not None:
            resolve_classes(y, n_columns, classes)  # the labels fit the columns
        return np.asarray(classes), np.asarray(classes), None
    numbers = None if names is None else number_names(names)
    if names is None or numbers == [str(j) for j in range(n_columns)]:
        if y is None:
            return None, None, None
        return resolve_classes(y, n_columns)[0], None, None
    labels = [] if y is None else [str(label) for label in np.unique(y)]
    unnamed = sorted(set(labels) - set(names))
    if not unnamed and len(set(names)) == len(names):
        integral = y is None or y.dtype.kind in "iu"
        if numbers is not None and integral:
            named = np.array([int(name) for name in names])
        else:
            named = np.array(names)
        if y is not None and y.dtype.kind in "US":
            named = named.astype(str)
        return named, named, None
    if numbers is not None:
        raise CLIError(
            f"the score columns are numbered {listing(names, 6)}, neither 0..."
            f"{n_columns - 1} nor after every label (no column for "
            f"{listing(unnamed, 6)}); number them 0..{n_columns - 1} (column j: "
            "the j-th label in sorted order) or after the labels."
        )
    if set(labels) & set(names):
        raise CLIError(
            f"the score columns name the classes {listing(names, 6)}, but the "
            f"labels also include {listing(unnamed, 6)}; name one column after "
            "each class."
        )
    if y is None:
        return None, None, None
    classes_ = resolve_classes(y, n_columns)[0]
    note = (
        f"the score columns' names ({listing(names, 6)}) name no label: column "
        f"j is class j of {listing(map(str, classes_), 10)}"
    )
    return classes_, None, note


def score_column_names(file, key: str):
    """The names of the score columns of ``file`` and whether they are binding.

    Named columns (:meth:`~skcal.cli._io.ArrayFile.column_names`), or else
    the file's ``classes`` array, which names the columns of its 2-D arrays
    and so must name the model's classes (``strict``).
    """
    names = file.column_names(key)
    if names is not None or "classes" not in file:
        return names, False
    return [str(c) for c in file.vector("classes", "")], True


def align_columns(X, names, classes, what: str, *, strict: bool = False) -> np.ndarray:
    """The columns of ``X`` in the order of ``classes``, by their names.

    ``names`` (:meth:`~skcal.cli._io.ArrayFile.column_names`) that name
    exactly the ``classes`` put the columns in their order; numbered names
    ``0..C-1``,
    names that name no class and a 2-D array (None) keep their order,
    unless ``strict`` (names from an npz ``classes`` array), where they must
    name the classes.

    Raises
    ------
    CLIError
        If the names name some of the classes but not all (or, ``strict``,
        not exactly them); ``what`` names the file in the message.
    """
    if names is None:
        return X
    wanted = [str(c) for c in classes]
    if strict and (len(names) != X.shape[1] or sorted(names) != sorted(wanted)):
        raise CLIError(
            f"{what} names the classes of its score columns "
            f"({difference(names, wanted)}): {len(names)} names "
            f"{listing(names, 10)} (its classes array), but {len(wanted)} "
            f"classes {listing(wanted, 10)}; "
            "give one column per class and list them in its classes array, or "
            "leave the array out for columns in the classes' order."
        )
    if number_names(names) == [str(j) for j in range(len(names))]:
        return X
    if sorted(names) == sorted(wanted) and len(set(names)) == len(names):
        return X[:, [names.index(c) for c in wanted]]
    if set(names) & set(wanted):
        raise CLIError(
            f"the score columns of {what} do not name the classes "
            f"({difference(names, wanted)}): {len(names)} columns "
            f"{listing(names, 10)}, {len(wanted)} classes {listing(wanted, 10)}; "
            "give one column per class, named after it."
        )
    return X


def named_columns(classes, given) -> list[str] | None:
    """The class part of the output's ``proba_*`` headers, or None for ``0..C-1``.

    Class names when the classes are strings or were named by the input
    (``given``, from :func:`column_classes`); numeric labels keep the
    column numbers.
    """
    classes = np.asarray(classes)
    if given is None and classes.dtype.kind in "biuf":
        return None
    return [str(c) for c in classes]
