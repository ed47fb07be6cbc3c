"""What ``calibrate``, ``apply``, ``evaluate`` and ``select`` read from their
files: which scores, the labels, and the class of each score column."""

from __future__ import annotations

import numpy as np

from ._columns import Columns, align_columns, column_classes, score_column_names
from ._common import CLIError
from ._io import ArrayFile


def score_key(args, files, report, *, needs: str, local_hint: str) -> str:
    """The score array to read from every file: ``--input``, or with ``auto``
    logits when every file has them, else proba.

    ``files`` lists ``(flag, ArrayFile)`` pairs, the --fit file first.
    """
    if args.input != "auto":
        return args.input
    named = [k for k in ("logits", "proba") if files[0][1].columns.spec(k) is not None]
    if len(named) == 1:  # --logit-cols or --proba-cols alone says which
        return named[0]
    key = next((k for k in ("logits", "proba") if all(k in f for _, f in files)), None)
    if key is None:

        def has(f):
            kinds = [k for k in ("logits", "proba") if k in f]
            return " and ".join(kinds) or "neither logits nor proba"

        held = ", ".join(f"{flag} {f.path} has {has(f)}" for flag, f in files)
        where = "both files" if len(files) == 2 else "the file"
        local = local_hint if "embeddings" in files[0][1] else ""
        raise CLIError(
            f"{needs} logits or proba in {where}: {held}{local}; --logit-cols or "
            "--proba-cols name other columns."
        )
    if key == "logits" and all("proba" in f for _, f in files):
        also = (
            "the files also hold proba; --input proba uses them"
            if len(files) > 1
            else "the file also holds proba; --input proba uses it"
        )
        report(f"using logits ({also})")
    return key


def same_classes(key, fit: ArrayFile, X_fit, flag: str, other: ArrayFile, X_other):
    """A CLIError unless the --fit scores and ``flag``'s have as many columns."""
    if X_fit.shape[1] != X_other.shape[1]:
        raise CLIError(
            f"--fit {fit.path} has {X_fit.shape[1]} classes ({key} columns) but "
            f"{flag} {other.path} has {X_other.shape[1]}; both files must hold "
            "scores of the same classifier over the same classes."
        )


def file_classes(file: ArrayFile, key: str, y, n_columns: int, report, flag=""):
    """``classes_, given`` of the scores ``key`` of ``file`` (column_classes).

    ``flag`` (such as ``"--fit "``) precedes the file's name in messages.
    """
    explicit = file.vector("classes", "") if "classes" in file else None
    try:
        classes_, given, note = column_classes(
            y, file.column_names(key), n_columns, explicit
        )
    except CLIError as exc:
        raise CLIError(f"{flag}{file.path}: {exc}") from None
    except ValueError as exc:
        raise CLIError(
            f"labels of {flag}{file.path} do not match the {n_columns} columns of "
            f"{key}: {exc} (in an .npz file, an array 'classes' gives the label "
            "of each column; in a table, name the columns after the classes)"
        ) from None
    if note:
        report(f"{flag}{file.path}: {note}")
    return classes_, given


def same_length(file: ArrayFile, key: str, values, n_rows: int, of: str) -> None:
    """A CLIError unless ``key`` of ``file`` has ``n_rows`` rows, as ``of`` has."""
    if len(values) != n_rows:
        raise CLIError(
            f"{file.describe(key)} of {file.path} has {len(values)} rows but "
            f"{of} has {n_rows}; give one row per sample in both."
        )


def read_labels(file: ArrayFile, why: str, n_rows: int, of: str) -> np.ndarray:
    """The labels of ``file``, one per row of its array ``of`` (``n_rows``)."""
    y = file.vector("labels", why)
    same_length(file, "labels", y, n_rows, file.describe(of))
    return y


def align_scores(file: ArrayFile, key: str, X, classes, flag: str) -> np.ndarray:
    """The score columns ``X`` of ``file`` in the order of ``classes``.

    :func:`~skcal.cli._columns.align_columns` by the names of the columns
    (or the file's ``classes`` array); ``flag`` names the file in messages.
    """
    names, strict = score_column_names(file, key)
    return align_columns(X, names, classes, f"{flag} {file.path}", strict=strict)


def check_known_labels(
    y, classes, flag: str, path, fit_path, fit_flag: str = "--fit"
) -> None:
    """A CLIError naming the ``flag`` file if it has labels the fit never saw."""
    known = set(np.asarray(classes).tolist())
    unseen = {label for label in np.unique(y).tolist() if label not in known}
    if unseen:
        shown = sorted(unseen, key=str)
        raise CLIError(
            f"labels of {flag} {path} include {len(unseen)} label(s) that "
            f"are not among the classes of {fit_flag} {fit_path}: {shown[:10]}"
            f"{' ...' if len(shown) > 10 else ''}; the calibrator's classes: "
            f"{np.asarray(classes).tolist()[:20]}. Drop those rows from {flag}, or "
            "fix their labels (in an .npz --fit file, an array 'classes' gives "
            "the label of each column)."
        )


def read_model_scores(
    args, model, key: str, flag: str, path: str, *, labeled=False, verb="give"
):
    """The scores (or embeddings) ``key`` of file ``path`` for ``model``, in
    the order of its classes, the file's labels (None when it has none
    and ``labeled`` is false), and the file (for ``--keep-cols``). ``verb``
    starts the advice when the columns do not match the model."""
    name = type(model).__name__
    file = ArrayFile(path, Columns.from_args(args))
    what = (
        f"the {key} {name} was fitted on ({model.n_features_in_} columns)"
        if key != "embeddings"
        else f"the embeddings {name} reads ({model.n_features_in_} features)"
    )
    X = file.matrix(key, what)
    if key != "embeddings":
        X = align_scores(file, key, X, model.classes_, flag)
    if X.shape[1] != model.n_features_in_:
        raise CLIError(
            f"{flag} {path} has {X.shape[1]} {key} columns but the model "
            f"--model {args.model} was fitted on {model.n_features_in_}; {verb} "
            "scores (or embeddings) of the same classifier over the same classes."
        )
    y = None
    if labeled or "labels" in file:
        why = "the true labels of the calibration samples" if labeled else ""
        y = read_labels(file, why, len(X), key)
        check_known_labels(y, model.classes_, flag, path, args.model, "--model")
    return X, y, file
