"""The ``skcal`` command line.

``skcal calibrate``
    Fit a calibrator on one file (scores or embeddings, and labels) and
    write the calibrated probabilities of another.
``skcal evaluate``
    Calibration metrics of a file of probabilities (or logits) and labels,
    optionally a reliability diagram; several files of the same rows side
    by side in one table, optionally compared in pairs.
``skcal select``
    Choose a calibrator by cross-validation on one file
    (:class:`~skcal.model_selection.CalibratorSearchCV`): a table of the
    candidates' cross-fitted scores, the selected one and why; optionally
    its calibration report on a test file and the fitted search.
``skcal apply``
    Apply a calibrator saved by ``calibrate --save`` or ``select --save``
    (``.skops``, safe to load) to a file of scores or embeddings.
``skcal benchmark``
    Every calibrator (or a chosen few) on a bundled or generated dataset over
    several seeds: a table of test metrics, mean ± std.
``skcal demo``
    Calibrates a real classifier (an MLP on scikit-learn's bundled digits
    data, no download) with every calibrator skcal has and prints a table of
    test metrics.

File formats follow the extension. ``.npz``: arrays ``labels`` (n_samples,),
``logits`` or ``proba`` (n_samples, n_classes), ``embeddings`` (n_samples,
n_features); a calibration file may add the frozen head ``coef`` (n_classes,
n_features) and ``intercept`` (n_classes,), and ``classes`` (n_classes,).
``.csv`` / ``.parquet`` (pandas): one row per sample, columns ``label``,
``logit_0`` ... ``logit_{C-1}`` or ``proba_0`` ... ``proba_{C-1}``,
``emb_0`` ... ``emb_{D-1}``; other columns are ignored. ``--label-col``,
``--logit-cols``, ``--proba-cols`` and ``--emb-cols`` name other columns
(or npz arrays), the same way in every format (``skcal._cli_io``).
Outputs hold ``proba`` (columns ``proba_<class>`` for string or named
classes, else ``proba_j``), ``predict``, the ``labels`` when known and, in
npz, ``classes``. Errors in the input are one line on stderr and exit code
2.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import difflib
import itertools
import json
import linecache
import os
import re
import sys
import textwrap
import time
import warnings
from dataclasses import dataclass

import numpy as np

from . import __version__
from ._cli_io import (
    COLUMNS_HELP,
    ArrayFile,
    CLIError,
    Columns,
    align_columns,
    check_model_path,
    check_output_path,
    column_classes,
    file_format,
    named_columns,
    read_model,
    score_column_names,
    write_arrays,
    write_model,
)


def mlp_embeddings(mlp, X):
    """Last hidden layer of a fitted ``MLPClassifier``, and its output layer.

    :func:`skcal.wrappers.extract_embeddings` for an MLP (a binary MLP's
    single logistic output becomes two columns).

    Returns
    -------
    embeddings : ndarray of shape (n_samples, n_hidden)
        Activations of the last hidden layer.
    coef : ndarray of shape (n_classes, n_hidden)
        Output weights, so that the logits are ``embeddings @ coef.T +
        intercept``.
    intercept : ndarray of shape (n_classes,)
        Output bias.
    """
    from .wrappers import extract_embeddings

    return extract_embeddings(mlp, X)


def mlp_logits(mlp, X) -> np.ndarray:
    """Pre-softmax outputs of a fitted ``MLPClassifier``.

    Their softmax equals ``mlp.predict_proba(X)``.
    """
    embeddings, coef, intercept = mlp_embeddings(mlp, X)
    return embeddings @ coef.T + intercept


# ------------------------------------------------------------------ metrics
def _metrics_row(y, proba, predictions=None, *, labels=None, n_bins=15):
    """Accuracy, NLL, Brier, ECE, cwECE, MCE and SoftECE of ``proba``.

    ``labels`` lists the label of each column (default: the metrics' rule,
    integer labels ``0..C-1`` are their own column); accuracy uses
    ``predictions`` when given, else the most probable column.
    """
    from .metrics import (
        brier_score,
        classwise_calibration_error,
        expected_calibration_error,
        max_calibration_error,
        negative_log_likelihood,
        soft_expected_calibration_error,
    )

    if predictions is None:
        columns = np.arange(proba.shape[1]) if labels is None else np.asarray(labels)
        predictions = columns[np.argmax(proba, axis=1)]
    kw = {"labels": labels}
    return {
        "accuracy": float(np.mean(predictions == y)),
        "NLL": negative_log_likelihood(y, proba, **kw),
        "Brier": brier_score(y, proba, **kw),
        "ECE": expected_calibration_error(y, proba, n_bins=n_bins, **kw),
        "cwECE": classwise_calibration_error(y, proba, n_bins=n_bins, **kw),
        "MCE": max_calibration_error(y, proba, n_bins=n_bins, **kw),
        "SoftECE": soft_expected_calibration_error(y, proba, n_bins=n_bins, **kw),
    }


def _evaluation_row(y, proba, predictions=None, *, labels=None, n_bins=15):
    """:func:`_metrics_row` plus ECCE (cumulative, KS) and smECE."""
    from .metrics import (
        cumulative_calibration_error,
        smooth_expected_calibration_error,
    )

    return {
        **_metrics_row(y, proba, predictions, labels=labels, n_bins=n_bins),
        "ECCE": cumulative_calibration_error(y, proba, labels=labels),
        "smECE": smooth_expected_calibration_error(y, proba, labels=labels),
    }


_EVALUATION_COLUMNS = [
    "accuracy",
    "NLL",
    "Brier",
    "ECE",
    "cwECE",
    "MCE",
    "SoftECE",
    "ECCE",
    "smECE",
]
_METRICS_NOTE = (
    "Lower is better for every metric but accuracy. ECE: top-label, {n_bins} "
    "equal-width bins; cwECE: classwise; MCE: max bin gap; ECCE: cumulative "
    "(Kolmogorov-Smirnov); smECE: smooth ECE."
)


def format_table(rows: list[dict], columns: list[str], *, left=()) -> str:
    """Plain-text table: first column left-aligned, numbers right-aligned.

    Floats are written with 4 decimals, strings as they are; the columns
    named in ``left`` are left-aligned too (text such as reasons).
    """
    cells = [
        [str(r[c]) if isinstance(r[c], str) else f"{r[c]:.4f}" for c in columns]
        for r in rows
    ]
    widths = [
        max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(columns)
    ]
    flush_left = [i == 0 or c in left for i, c in enumerate(columns)]

    def line(values):
        padded = [
            v.ljust(w) if flush else v.rjust(w)
            for v, w, flush in zip(values, widths, flush_left)
        ]
        return "  ".join(padded).rstrip()

    sep = "  ".join("-" * w for w in widths)
    return "\n".join([line(columns), sep] + [line(r) for r in cells])


# ------------------------------------------------------------------ methods
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


def _normalize(name: str) -> str:
    return re.sub(r"[\s_-]", "", name).lower()


def method_aliases() -> dict[str, list[str]]:
    """Short names of every calibrator: ``{class name: [aliases]}``.

    Examples
    --------
    >>> from skcal.cli import method_aliases
    >>> method_aliases()["TemperatureScaling"]
    ['temperature', 'ts']
    """
    from .utils.discovery import all_estimators

    aliases = {}
    for name, _ in all_estimators():
        extra = sorted(a for a, target in _EXTRA_ALIASES.items() if target == name)
        aliases[name] = [_normalize(re.sub("Calibrator|Scaling", "", name)), *extra]
    return aliases


def _method_list(kind=None) -> str:
    from .utils.discovery import all_estimators

    aliases = method_aliases()
    return ", ".join(
        f"{name} ({', '.join(aliases[name])})" for name, _ in all_estimators(kind)
    )


def resolve_method(name: str) -> tuple[str, type]:
    """The calibrator class named by a class name or alias, any case.

    Raises
    ------
    CLIError
        If no calibrator has that name; the message lists the valid ones.
    """
    from .utils.discovery import all_estimators

    classes = dict(all_estimators())
    lookup = {}
    for cls_name, aliases in method_aliases().items():
        for alias in (cls_name, *aliases):
            lookup[_normalize(alias)] = cls_name
    key = _normalize(name)
    if key in lookup:
        return lookup[key], classes[lookup[key]]
    close = difflib.get_close_matches(key, list(lookup), n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    raise CLIError(
        f"unknown method {name!r}{hint}. Valid methods (case-insensitive; "
        f"aliases in parentheses): {_method_list()}."
    )


def _make_estimator(cls, *, device, seed, params=None, progress=False):
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


def _add_apply_and_out(parser) -> None:
    """``--apply`` and ``--out``, shared by calibrate and apply."""
    parser.add_argument(
        "--apply", required=True, metavar="FILE", help="data to calibrate"
    )
    parser.add_argument(
        "--out", required=True, metavar="FILE", help="output .npz, .csv or .parquet"
    )


def _parse_param(text: str) -> tuple[str, object]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    try:
        parsed = ast.literal_eval(value.strip())
    except (ValueError, SyntaxError):
        parsed = value.strip()
    return key.strip(), parsed


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


# ------------------------------------------------------------------ helpers
def _check_device(device: str) -> None:
    from ._torch import resolve_device

    resolve_device(device)  # fail fast on an unavailable device


def _reporter(args):
    """A function printing progress lines on stderr, silent with --quiet."""
    if args.quiet:
        return lambda message: None
    return lambda message: print(message, file=sys.stderr, flush=True)


def _warn_lines(prog: str, caught) -> None:
    for message in dict.fromkeys(" ".join(str(w.message).split()) for w in caught):
        print(f"{prog}: warning: {message}", file=sys.stderr)


def _jsonable(value):
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | np.ndarray):
        return [_jsonable(v) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not np.isfinite(value):
        return None
    if isinstance(value, bool | int | float | str) or value is None:
        return value
    return str(value)


def _print_json(obj) -> None:
    print(json.dumps(_jsonable(obj), indent=2))


def _same_length(file: ArrayFile, key: str, values, n_rows: int, of: str) -> None:
    if len(values) != n_rows:
        raise CLIError(
            f"{file.describe(key)} of {file.path} has {len(values)} rows but "
            f"{of} has {n_rows}; give one row per sample in both."
        )


def _plus_minus() -> str:
    try:
        "±".encode(getattr(sys.stdout, "encoding", None) or "utf-8")
    except (UnicodeEncodeError, LookupError):
        return "+-"
    return "±"


# ---------------------------------------------------------------- calibrate
def _score_key(args, files, report, *, needs: str, local_hint: str) -> str:
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


def _same_classes(key, fit: ArrayFile, X_fit, flag: str, other: ArrayFile, X_other):
    """A CLIError unless the --fit scores and ``flag``'s have as many columns."""
    if X_fit.shape[1] != X_other.shape[1]:
        raise CLIError(
            f"--fit {fit.path} has {X_fit.shape[1]} classes ({key} columns) but "
            f"{flag} {other.path} has {X_other.shape[1]}; both files must hold "
            "scores of the same classifier over the same classes."
        )


def _file_classes(file: ArrayFile, key: str, y, n_columns: int, report, flag=""):
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


def _score_inputs(args, fit: ArrayFile, apply: ArrayFile, report):
    """The score key and the fit/apply matrices of a score calibrator."""
    key = _score_key(
        args,
        [("--fit", fit), ("--apply", apply)],
        report,
        needs="score calibrators need",
        local_hint=" (the files hold embeddings: choose a local method?)",
    )
    why = f"the scores to calibrate (--input {args.input})"
    X_fit, X_apply = fit.matrix(key, why), apply.matrix(key, why)
    _same_classes(key, fit, X_fit, "--apply", apply, X_apply)
    return key, X_fit, X_apply


def _local_inputs(name: str, fit: ArrayFile, apply: ArrayFile):
    why = (
        f"which {name} (a local calibrator) needs: the classifier's embeddings "
        "of shape (n_samples, n_features); methods such as 'temperature' "
        "calibrate logits or proba"
    )
    X_fit, X_apply = fit.matrix("embeddings", why), apply.matrix("embeddings", why)
    if X_fit.shape[1] != X_apply.shape[1]:
        raise CLIError(
            f"embeddings of --fit {fit.path} have {X_fit.shape[1]} features but "
            f"those of --apply {apply.path} have {X_apply.shape[1]}; both must "
            "come from the same layer of the same classifier."
        )
    return X_fit, X_apply


def _head(args, fit: ArrayFile, name: str, cls, report) -> dict:
    """coef/intercept from --head or the --fit file, for a method that takes them."""
    if args.head is not None and file_format(args.head) != "npz":
        raise CLIError(
            f"--head must be an .npz file with coef (and intercept): {args.head}"
        )
    source = ArrayFile(args.head) if args.head is not None else fit
    if "coef" not in source:
        if args.head is not None:
            source.require(
                "coef", "the head's weights of shape (n_classes, n_features)"
            )
        if _uses_head(cls):
            report(
                f"{fit.path} has no coef: {name} first fits a logistic-regression "
                "head on the calibration embeddings (pass your classifier's head "
                "as coef/intercept in the --fit file or with --head)"
            )
        return {}
    if not _takes_head(cls):
        report(f"{name} uses no linear head: ignoring coef/intercept of {source.path}")
        return {}
    coef = source.matrix("coef", "the head's weights")
    intercept = None
    if "intercept" in source:
        intercept = source.vector("intercept", "the head's bias").astype(np.float64)
    return {"coef": coef, "intercept": intercept}


def _uncalibrated(key, X_apply, head):
    """The classifier's own probabilities on the apply set, when known."""
    from scipy.special import softmax

    if key == "logits":
        return softmax(X_apply, axis=1)
    if key == "proba":
        return X_apply
    if head:
        intercept = 0.0 if head["intercept"] is None else head["intercept"]
        return softmax(X_apply @ head["coef"].T + intercept, axis=1)
    return None


@dataclass
class _CalibrationData:
    """What ``calibrate`` read: inputs of the calibrator and its parameters."""

    key: str  # "logits", "proba" or "embeddings"
    X_fit: np.ndarray
    y_fit: np.ndarray
    X_apply: np.ndarray
    y_apply: np.ndarray | None
    head: dict
    params: dict
    given: np.ndarray | None  # the classes, when the input named them


def _read_calibration_data(args, name, cls, report) -> _CalibrationData:
    from .base import BaseLocalCalibrator

    params = dict(args.param)
    columns = Columns.from_args(args)
    fit, apply = ArrayFile(args.fit, columns), ArrayFile(args.apply, columns)
    head, given = {}, None
    if issubclass(cls, BaseLocalCalibrator):
        key = "embeddings"
        X_fit, X_apply = _local_inputs(name, fit, apply)
        head = _head(args, fit, name, cls, report)
    else:
        if args.head is not None:
            report(f"{name} is a score calibrator: ignoring --head {args.head}")
        key, X_fit, X_apply = _score_inputs(args, fit, apply, report)
        if key == "proba":
            params = {"input": "proba", **params}
    y_fit = fit.vector("labels", "the true labels of the calibration samples")
    _same_length(fit, "labels", y_fit, len(X_fit), fit.describe(key))
    y_apply = None
    if "labels" in apply:
        y_apply = apply.vector("labels", "")
        _same_length(apply, "labels", y_apply, len(X_apply), apply.describe(key))
    if key == "embeddings":
        given = fit.vector("classes", "") if "classes" in fit else None
    else:
        classes_, given = _file_classes(
            fit, key, y_fit, X_fit.shape[1], report, "--fit "
        )
        where = f"--apply {apply.path}"
        names, strict = score_column_names(apply, key)
        X_apply = align_columns(X_apply, names, classes_, where, strict=strict)
    if given is not None:
        params = {"classes": given, **params}
    return _CalibrationData(key, X_fit, y_fit, X_apply, y_apply, head, params, given)


@contextlib.contextmanager
def _report_on_stderr(prog: str):
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


def _fit_and_apply(estimator, data: _CalibrationData, prog: str):
    """Fit time, probabilities and predictions; warnings become stderr lines."""
    start = time.perf_counter()
    with _report_on_stderr(prog):
        estimator.fit(data.X_fit, data.y_fit)
        elapsed = time.perf_counter() - start
        proba = estimator.predict_proba(data.X_apply)
        predict = estimator.predict(data.X_apply)
    return elapsed, proba, predict


def _check_known_labels(
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


def _calibrate_rows(name, data: _CalibrationData, proba, predict, classes):
    """Metrics before and after calibration on the --apply labels, if any."""
    if data.y_apply is None:
        return []
    rows = []
    before = _uncalibrated(data.key, data.X_apply, data.head)
    if before is not None:
        metrics = _evaluation_row(data.y_apply, before, labels=classes)
        rows.append({"method": "uncalibrated", **metrics})
    metrics = _evaluation_row(data.y_apply, proba, predict, labels=classes)
    return [*rows, {"method": name, **metrics}]


def _cmd_calibrate(args) -> int:
    prog, report = "skcal calibrate", _reporter(args)
    name, cls = resolve_method(args.method)
    _check_device(args.device)
    # fail before fitting on a bad output name
    check_output_path(args.out, {"--fit": args.fit, "--apply": args.apply})
    if args.save is not None:
        check_model_path(args.save, "--save")
    data = _read_calibration_data(args, name, cls, report)
    estimator = _make_estimator(
        cls,
        device=args.device,
        seed=args.seed,
        params={**data.head, **data.params},
        # the bar of long fits, on a terminal only (not in logs or pipes)
        progress=not args.quiet and sys.stderr.isatty(),
    )
    report(f"fitting {name} on {len(data.y_fit)} samples ({data.key}) ...")
    elapsed, proba, predict = _fit_and_apply(estimator, data, prog)
    classes = estimator.classes_
    if data.y_apply is not None:
        _check_known_labels(data.y_apply, classes, "--apply", args.apply, args.fit)
    rows = _calibrate_rows(name, data, proba, predict, classes)
    labels = {} if data.y_apply is None else {"labels": data.y_apply}
    arrays = {**labels, "predict": predict, "proba": proba, "classes": classes}
    arrays["method"] = np.array(name)  # names the file in evaluate (npz only)
    write_arrays(args.out, arrays, class_names=named_columns(classes, data.given))
    if args.save is not None:
        write_model(args.save, estimator)
    if args.json:
        _print_json(
            {
                "method": name,
                "input": data.key,
                "n_classes": len(classes),
                "classes": classes,
                "n_fit": len(data.y_fit),
                "n_apply": len(proba),
                "fit_s": elapsed,
                "params": {k: v for k, v in data.params.items() if k != "classes"},
                "out": args.out,
                "save": args.save,
                "metrics": rows,
            }
        )
        return 0
    print(
        f"{name} ({data.key}, {len(classes)} classes): fitted on "
        f"{len(data.y_fit)} samples in {elapsed:.2f} s; wrote the calibrated "
        f"probabilities of {len(proba)} samples to {args.out}."
    )
    if args.save is not None:
        print(f"Wrote the fitted calibrator to {args.save}.")
        print(_paragraph(_saved_note(args.save, "calibrator")))
    if rows:
        print(f"\nMetrics on the labels of {args.apply}:")
        print(format_table(rows, ["method", *_EVALUATION_COLUMNS]))
        print("\n" + _METRICS_NOTE.format(n_bins=15))
    return 0


def _saved_note(path: str, what: str) -> str:
    """How to use a model file ``calibrate``/``select --save`` wrote."""
    again = f"skcal apply --model {path} --apply FILE --out FILE"
    if os.path.splitext(path)[1].lower() == ".skops":
        return (
            f"Reapply the {what} with {again}, or load it in Python with "
            "skcal.utils.persistence.load (safe: it rebuilds only skcal's types "
            "and those skops trusts)."
        )
    return (
        f"It is a pickle: load it in Python with pickle.load or joblib.load, from "
        f"a trusted file only, or reapply the {what} with {again} --allow-pickle. "
        "A *.skops name writes a file that is safe to load."
    )


# -------------------------------------------------------------------- apply
def _unusable_model(model, path: str, exc: BaseException) -> CLIError:
    return CLIError(
        f"--model {path} holds a {type(model).__name__} that does not work "
        f"({type(exc).__name__}: {exc}): the file was written by another "
        "version of skcal, or edited. Fit and save the model again "
        "(calibrate/select --save)."
    )


def _check_model_predicts(model, path: str) -> None:
    """Predict one row, so that a broken model (a pickle: load checks a
    .skops file) fails here with a clear error (a missing or edited fitted
    attribute) instead of with a traceback."""
    from .utils.persistence import _check_complete

    try:
        _check_complete(model, f"--model {path}")
    except ValueError as exc:
        raise CLIError(str(exc)) from None


def _model_input(model, path: str) -> str:
    """What a saved model reads: "logits", "proba" or "embeddings"."""
    from sklearn.exceptions import NotFittedError
    from sklearn.utils.validation import check_is_fitted

    from .base import BaseCalibrator, BaseLocalCalibrator
    from .model_selection import CalibratorSearchCV

    if isinstance(model, BaseLocalCalibrator):
        key = "embeddings"
    elif isinstance(model, BaseCalibrator | CalibratorSearchCV):
        try:
            key = model.get_params()["input"]
        except Exception as exc:  # noqa: BLE001 - any failure means the same
            raise _unusable_model(model, path, exc) from None
    else:
        raise CLIError(
            f"--model {path} holds a {type(model).__name__}, not a calibrator "
            "or search saved by skcal calibrate/select --save: skcal apply reads "
            "scores or embeddings, not a classifier's features (call the model's "
            "predict_proba in Python)."
        )
    try:
        check_is_fitted(model)
    except NotFittedError:
        raise CLIError(
            f"--model {path} holds an unfitted {type(model).__name__}; save it "
            "after fitting (calibrate --save or select --save)."
        ) from None
    return key


def _cmd_apply(args) -> int:
    prog, report = "skcal apply", _reporter(args)
    # fail before loading on a bad output name
    check_output_path(args.out, {"--apply": args.apply, "--model": args.model})
    model = read_model(args.model, trusted=args.trust, allow_pickle=args.allow_pickle)
    key = _model_input(model, args.model)
    if args.device is not None and "device" in model.get_params():
        model.set_params(device=args.device)
    _check_model_predicts(model, args.model)
    name = type(model).__name__
    apply = ArrayFile(args.apply, Columns.from_args(args))
    classes = model.classes_
    what = (
        f"the {key} {name} was fitted on ({model.n_features_in_} columns)"
        if key != "embeddings"
        else f"the embeddings {name} reads ({model.n_features_in_} features)"
    )
    X = apply.matrix(key, what)
    if key != "embeddings":
        names, strict = score_column_names(apply, key)
        X = align_columns(X, names, classes, f"--apply {args.apply}", strict=strict)
    if X.shape[1] != model.n_features_in_:
        raise CLIError(
            f"--apply {args.apply} has {X.shape[1]} {key} columns but the model "
            f"--model {args.model} was fitted on {model.n_features_in_}; apply it to "
            "scores (or embeddings) of the same classifier over the same classes."
        )
    y = None
    if "labels" in apply:
        y = apply.vector("labels", "")
        _same_length(apply, "labels", y, len(X), apply.describe(key))
        _check_known_labels(y, classes, "--apply", args.apply, args.model, "--model")
    with _report_on_stderr(prog):
        proba = model.predict_proba(X)
        predict = model.predict(X)
    report(f"applied {name} ({key}) to {len(proba)} samples of {args.apply}")
    rows = []
    if y is not None:
        head = {}
        coef = model.get_params().get("coef")
        if key == "embeddings" and coef is not None:
            head = {
                "coef": np.asarray(coef),
                "intercept": model.get_params()["intercept"],
            }
            if head["intercept"] is not None:
                head["intercept"] = np.asarray(head["intercept"], dtype=np.float64)
        before = _uncalibrated(key, X, head)
        if before is not None:
            rows.append(
                {"method": "uncalibrated", **_evaluation_row(y, before, labels=classes)}
            )
        rows.append(
            {"method": name, **_evaluation_row(y, proba, predict, labels=classes)}
        )
    labels = {} if y is None else {"labels": y}
    arrays = {**labels, "predict": predict, "proba": proba, "classes": classes}
    arrays["method"] = np.array(name)  # names the file in evaluate (npz only)
    write_arrays(args.out, arrays, class_names=named_columns(classes, None))
    if args.json:
        _print_json(
            {
                "model": args.model,
                "estimator": name,
                "input": key,
                "n_classes": len(classes),
                "classes": classes,
                "n_apply": len(proba),
                "out": args.out,
                "metrics": rows,
            }
        )
        return 0
    print(
        f"{name} ({key}, {len(classes)} classes) from {args.model}: wrote the "
        f"calibrated probabilities of {len(proba)} samples to {args.out}."
    )
    if rows:
        print(f"\nMetrics on the labels of {args.apply}:")
        print(format_table(rows, ["method", *_EVALUATION_COLUMNS]))
        print("\n" + _METRICS_NOTE.format(n_bins=15))
    return 0


# ----------------------------------------------------------------- evaluate
def _evaluate_scores(args, data: ArrayFile, report):
    from scipy.special import softmax

    key = args.input
    named = [k for k in ("logits", "proba") if data.columns.spec(k) is not None]
    if key == "auto" and len(named) == 1:  # --logit-cols or --proba-cols alone
        key = named[0]
    elif key == "auto":
        key = "proba" if "proba" in data or "logits" not in data else "logits"
        if key == "proba" and "logits" in data:
            report("evaluating proba (the file also holds logits; --input logits)")
    scores = data.matrix(key, "the predictions to evaluate (proba, or logits)")
    return key, softmax(scores, axis=1) if key == "logits" else scores


def _plot_reliability(path, y, probas: dict, classes, n_bins) -> None:
    """One reliability diagram of the ``{name: proba}`` of the same rows.

    The bin counts of every prediction share one panel below the diagram.
    """
    try:
        from matplotlib.figure import Figure
    except ImportError:
        raise CLIError("--plot needs matplotlib: pip install matplotlib.") from None
    from .display import ReliabilityDisplay

    figure = Figure(figsize=(5.5, 6.5), layout="constrained")
    ax, count_ax = figure.subplots(
        2, 1, sharex=True, gridspec_kw={"height_ratios": (3, 1)}
    )
    for name, proba in probas.items():
        ReliabilityDisplay.from_predictions(
            y,
            proba,
            n_bins=n_bins,
            labels=classes,
            name=name,
            ax=ax,
            count_ax=count_ax,
        )
    try:
        figure.savefig(path)
    except (OSError, ValueError) as exc:
        raise CLIError(f"cannot write the plot {path}: {exc}") from None


def _interval_report(args, y, proba, classes, report):
    """The calibration report with bootstrap intervals of ``proba``.

    Shared by ``evaluate --ci`` and ``select --test``: the options of
    :func:`_add_interval_options`, ``--n-bins`` and ``--seed``.
    """
    from .metrics import calibration_report

    report(f"computing bootstrap intervals ({args.n_resamples} resamples) ...")
    return calibration_report(
        y,
        proba,
        n_resamples=args.n_resamples,
        confidence_level=args.confidence_level,
        n_bins=args.n_bins,
        labels=classes,
        random_state=args.seed,
    )


@dataclass
class _Evaluated:
    """One file of ``evaluate``: what it holds, and its metrics."""

    path: str
    name: str  # its column in the table (--names, its method, or the file stem)
    key: str  # "logits" or "proba"
    y: np.ndarray
    proba: np.ndarray
    classes: np.ndarray
    predictions: np.ndarray | None
    embeddings: np.ndarray | None
    method: str | None = None  # the calibrator that wrote it (npz "method")
    metrics: dict | None = None
    intervals: object = None  # CalibrationReport with --ci


def _file_names(args) -> list[str]:
    """The name of each file: ``--names``, else its stem (else its path)."""
    files = args.files
    if args.names is not None:
        names = [name.strip() for name in args.names.split(",")]
        if len(names) != len(files) or not all(names):
            raise CLIError(
                f"--names {args.names!r} gives {len(names)} name(s) for "
                f"{len(files)} file(s): give one non-empty name per file, "
                "comma-separated, in the order of the files."
            )
        if len(set(names)) < len(names):
            repeated = next(name for name in names if names.count(name) > 1)
            raise CLIError(
                f"--names {args.names!r} gives {repeated!r} twice: the names "
                "head the columns of the table, give each file its own."
            )
        return names
    stems = [os.path.splitext(os.path.basename(path))[0] for path in files]
    if len(set(stems)) == len(stems):
        return stems
    if len(set(files)) == len(files):
        return list(files)
    return [f"{path} ({i + 1})" for i, path in enumerate(files)]


def _read_evaluated(args, path, name, columns, report) -> _Evaluated:
    data = ArrayFile(path, columns)
    key, proba = _evaluate_scores(args, data, report)
    y = data.vector(
        "labels", "the true labels (calibrate copies them from its --apply file)"
    )
    _same_length(data, "labels", y, len(proba), data.describe(key))
    classes, _ = _file_classes(data, key, y, proba.shape[1], report)
    predictions = embeddings = None
    if "predict" in data:
        predictions = data.vector("predict", "")
        _same_length(data, "predict", predictions, len(y), data.describe("labels"))
    if args.local:
        embeddings = data.matrix("embeddings", "which --local needs")
        _same_length(data, "embeddings", embeddings, len(y), data.describe("labels"))
    return _Evaluated(
        path, name, key, y, proba, classes, predictions, embeddings, data.text("method")
    )


def _method_names(files: list[_Evaluated]) -> None:
    """Without --names, files written by calibrate/apply are named by their
    method, when no two files share it (else they keep their stems)."""
    methods = [file.method for file in files]
    for file in files:
        if file.method is not None and methods.count(file.method) == 1:
            file.name = file.method


def _same_labels(a, b) -> np.ndarray:
    """Whether each label of ``a`` equals that of ``b`` (numbers as numbers)."""
    if a.dtype.kind in "biuf" and b.dtype.kind in "biuf":
        return a == b
    return a.astype(str) == b.astype(str)


def _same_rows(first: _Evaluated, other: _Evaluated) -> None:
    """A CLIError unless ``other`` holds the labels of ``first``, row by row;
    then ``other``'s columns are put in the order of ``first``'s classes."""
    same = "the files must hold predictions of the same rows, in the same order"
    if len(other.y) != len(first.y):
        raise CLIError(
            f"{other.path} has {len(other.y)} rows but {first.path} has "
            f"{len(first.y)}; {same} (such as calibrate --out files of one "
            "--apply file)."
        )
    differ = np.flatnonzero(~_same_labels(other.y, first.y))
    if differ.size:
        i = differ[0]
        raise CLIError(
            f"the labels of {other.path} differ from those of {first.path} in "
            f"{differ.size} of {len(first.y)} rows (first: row {i}, "
            f"{other.y[i].item()!r} against {first.y[i].item()!r}); {same}."
        )
    mine, theirs = [str(c) for c in other.classes], [str(c) for c in first.classes]
    if mine != theirs:
        if sorted(mine) != sorted(theirs):
            raise CLIError(
                f"the columns of {other.path} are the classes {mine[:10]} but "
                f"those of {first.path} are {theirs[:10]}; the files must hold "
                "predictions of the same classes."
            )
        other.proba = other.proba[:, [mine.index(c) for c in theirs]]
        other.classes = first.classes


_PAIRED_METRICS = {
    "NLL": "negative_log_likelihood",
    "ECE": "expected_calibration_error",
}


def _paired(args, files: list[_Evaluated], report) -> dict:
    """``{name: {"NLL": PairedComparison, "ECE": ...}}`` of each file but the
    first against the first (the file's metric minus the first's)."""
    from .metrics import paired_comparison

    first = files[0]
    report(
        f"comparing {len(files) - 1} file(s) with {first.name} "
        f"({args.n_resamples} resamples) ..."
    )
    common = {
        "n_resamples": args.n_resamples,
        "confidence_level": args.confidence_level,
        "random_state": args.seed,
        "labels": first.classes,
    }
    return {
        other.name: {
            label: paired_comparison(
                metric,
                first.y,
                other.proba,
                first.proba,
                **common,
                **({"n_bins": args.n_bins} if label == "ECE" else {}),
            )
            for label, metric in _PAIRED_METRICS.items()
        }
        for other in files[1:]
    }


def _file_json(args, file: _Evaluated) -> dict:
    return {
        "file": file.path,
        "input": file.key,
        "n_samples": len(file.y),
        "n_classes": len(file.classes),
        "n_bins": args.n_bins,
        "accuracy_from": "argmax" if file.predictions is None else "predict",
        "metrics": file.metrics,
        **({"intervals": file.intervals.to_dict()} if args.ci else {}),
    }


def _print_one(args, file: _Evaluated) -> None:
    """The report of ``evaluate FILE``: one metric per row."""
    print(
        f"{file.path}: {len(file.y)} samples, {len(file.classes)} classes "
        f"({file.key}).\n"
    )
    rows = [{"metric": k, "value": v} for k, v in file.metrics.items()]
    print(format_table(rows, ["metric", "value"]))
    print("\n" + _METRICS_NOTE.format(n_bins=args.n_bins))
    if args.local:
        print("LCE / MLCE: local calibration error (mean / max), Barbera et al.")
    if args.ci:
        print(f"\n{file.intervals}")
        if file.predictions is not None:
            print("The report's accuracy is that of the most probable class.")


def _side_by_side_rows(args, files: list[_Evaluated]) -> list[dict]:
    """One row per metric, one cell per file (with --ci: estimate [low, high])."""
    rows = []
    for metric in files[0].metrics:
        row = {"metric": metric}
        for file in files:
            report = file.intervals
            if report is not None and metric in report.metrics:
                ci = report[metric]
                row[file.name] = f"{ci.estimate:.4f} [{ci.low:.4f}, {ci.high:.4f}]"
            else:
                row[file.name] = f"{file.metrics[metric]:.4f}"
        rows.append(row)
    if args.ci:
        rows.append(
            {"metric": "ECCE p-value"}
            | {file.name: f"{file.intervals.ecce_pvalue:.3g}" for file in files}
        )
    return rows


def _print_side_by_side(args, files: list[_Evaluated], paired) -> None:
    first = files[0]
    print(
        f"{len(files)} files of the same {len(first.y)} samples and "
        f"{len(first.classes)} classes:"
    )
    width = max(len(file.name) for file in files)
    for file in files:
        print(f"  {file.name:<{width}}  {file.path} ({file.key})")
    print()
    print(
        format_table(
            _side_by_side_rows(args, files), ["metric", *(file.name for file in files)]
        )
    )
    print("\n" + _paragraph(_METRICS_NOTE.format(n_bins=args.n_bins)))
    if args.local:
        print("LCE / MLCE: local calibration error (mean / max), Barbera et al.")
    level = f"{100 * args.confidence_level:g}%"
    if args.ci:
        note = (
            f"[low, high]: {level} percentile bootstrap intervals of "
            f"skcal.metrics.calibration_report ({args.n_resamples} resamples, "
            f"at most 200 for cwECE, ECCE and smECE; seed {args.seed}); ECCE "
            "p-value: its test of perfect calibration. Calibration errors grow on "
            "resampled rows, so their intervals may lie above the estimate."
        )
        if any(file.predictions is not None for file in files):
            note += " With intervals, accuracy is that of the most probable class."
        print(_paragraph(note))
    if paired:
        _print_paired(args, first, paired, level)


def _print_paired(args, first: _Evaluated, paired: dict, level: str) -> None:
    rows = [
        {
            "file": name,
            "metric": metric,
            "difference": result.difference,
            f"{level} CI": f"[{result.low:.4f}, {result.high:.4f}]",
            "p-value": f"{result.p_value:.3g}",
        }
        for name, results in paired.items()
        for metric, result in results.items()
    ]
    print(
        "\n"
        + _paragraph(
            f"Paired bootstrap comparison with {first.name}: each file's metric "
            f"minus that of {first.name} on the same resampled rows "
            f"(skcal.metrics.paired_comparison; {args.n_resamples} resamples, "
            f"seed {args.seed}); a negative difference is a lower, better NLL "
            "or ECE."
        )
        + "\n"
    )
    columns = ["file", "metric", "difference", f"{level} CI", "p-value"]
    print(format_table(rows, columns, left=("metric",)))


def _paired_json(args, first: _Evaluated, paired: dict) -> dict:
    return {
        "reference": first.name,
        "difference": "file minus reference",
        "confidence_level": args.confidence_level,
        "n_resamples": args.n_resamples,
        "seed": args.seed,
        "n_bins": args.n_bins,
        "comparisons": {
            name: {
                metric: {
                    "difference": result.difference,
                    "low": result.low,
                    "high": result.high,
                    "p_value": result.p_value,
                    "value": result.estimate_a,
                    "reference_value": result.estimate_b,
                }
                for metric, result in results.items()
            }
            for name, results in paired.items()
        },
    }


def _cmd_evaluate(args) -> int:
    from .metrics import local_calibration_errors

    report = _reporter(args)
    if args.paired and len(args.files) < 2:
        raise CLIError(
            "--paired compares each file with the first: give two or more "
            "files (skcal evaluate a.npz b.npz --paired)."
        )
    names = _file_names(args)
    columns = Columns.from_args(args)
    if args.local:
        _check_device(args.device)
    files = [
        _read_evaluated(args, path, name, columns, report)
        for path, name in zip(args.files, names)
    ]
    if args.names is None:
        _method_names(files)
    for other in files[1:]:  # before any metric, which can take a while
        _same_rows(files[0], other)
    for file in files:
        file.metrics = _evaluation_row(
            file.y,
            file.proba,
            file.predictions,
            labels=file.classes,
            n_bins=args.n_bins,
        )
        if args.local:
            report(f"computing the local calibration error of {file.path} ...")
            local = local_calibration_errors(
                file.y,
                file.proba,
                file.embeddings,
                n_bins=args.n_bins,
                labels=file.classes,
                device=args.device,
            )
            file.metrics.update(LCE=local.lce, MLCE=local.mlce)
        if args.ci:
            file.intervals = _interval_report(
                args, file.y, file.proba, file.classes, report
            )
    paired = _paired(args, files, report) if args.paired else None
    if args.plot:
        probas = {file.name: file.proba for file in files}
        if args.names is None and len(files) == 1 and files[0].method is None:
            probas = {os.path.basename(files[0].path): files[0].proba}
        _plot_reliability(args.plot, files[0].y, probas, files[0].classes, args.n_bins)
    if args.json:
        if len(files) == 1:
            _print_json({**_file_json(args, files[0]), "plot": args.plot})
            return 0
        first = files[0]
        _print_json(
            {
                "files": {file.name: _file_json(args, file) for file in files},
                "n_samples": len(first.y),
                "n_classes": len(first.classes),
                "classes": first.classes,
                "plot": args.plot,
                **({"paired": _paired_json(args, first, paired)} if paired else {}),
            }
        )
        return 0
    if len(files) == 1:
        _print_one(args, files[0])
    else:
        _print_side_by_side(args, files, paired)
    if args.plot and len(files) == 1:
        print(f"Reliability diagram written to {args.plot}.")
    elif args.plot:
        print(
            f"\nReliability diagram of the {len(files)} files written to {args.plot}."
        )
    return 0


# ------------------------------------------------------------------- select
def _search_defaults() -> list:
    """Fresh instances of the default candidates of CalibratorSearchCV."""
    from .model_selection._search import _default_candidates

    return _default_candidates()


def _candidate_list() -> str:
    """The default candidates with their aliases, for messages and help."""
    aliases = method_aliases()
    names = [type(est).__name__ for est in _search_defaults()]
    return ", ".join(
        f"{name} ({', '.join(aliases[name])})" if aliases.get(name) else name
        for name in names
    )


def _unknown_candidate(name: str, lookup: dict) -> CLIError:
    close = difflib.get_close_matches(_normalize(name), list(lookup), n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    try:
        other = resolve_method(name)[0]
    except CLIError:
        what = f"unknown candidate {name!r}{hint}"
    else:
        what = f"--candidates {name!r}: {other} is not a candidate of the search{hint}"
    return CLIError(
        f"{what}. --candidates takes the default candidates of "
        "skcal.model_selection.CalibratorSearchCV (case-insensitive; aliases in "
        f"parentheses): {_candidate_list()}."
    )


def _parse_candidates(tokens, *, device: str) -> list:
    """The default candidates named by ``--candidates`` (all if None), on ``device``.

    Each token may hold comma-separated names; repeated names count once.

    Raises
    ------
    CLIError
        If a name is empty or names no default candidate; the message lists
        the valid ones.
    """
    defaults = {type(est).__name__: est for est in _search_defaults()}
    if tokens is None:
        chosen = list(defaults)
    else:
        names = [name.strip() for token in tokens for name in token.split(",")]
        if not any(names) or not all(names):
            what = "no name" if not any(names) else "an empty name"
            raise CLIError(
                f"--candidates {' '.join(tokens)!r} has {what}: give one or more "
                "candidates, or leave out --candidates to compare them all: "
                f"{_candidate_list()}."
            )
        aliases = method_aliases()
        lookup = {
            _normalize(alias): cls_name
            for cls_name in defaults
            for alias in (cls_name, *aliases.get(cls_name, []))
        }
        unknown = [name for name in names if _normalize(name) not in lookup]
        if unknown:
            raise _unknown_candidate(unknown[0], lookup)
        chosen = list(dict.fromkeys(lookup[_normalize(name)] for name in names))
    candidates = [defaults[name] for name in chosen]
    for estimator in candidates:
        if "device" in estimator.get_params(deep=False):
            estimator.set_params(device=device)
    return candidates


def _check_scoring(name: str) -> str:
    """``name`` if it is a scorer of skcal or scikit-learn, else a CLIError."""
    from sklearn.metrics import get_scorer_names as sklearn_scorer_names

    from .metrics import get_scorer_names

    names = get_scorer_names()
    if name in names:
        return name
    close = difflib.get_close_matches(name, names, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    own = sorted(set(names) - set(sklearn_scorer_names()))
    raise CLIError(
        f"unknown --scoring {name!r}{hint}; higher must be better: neg_log_loss "
        f"(the default), one of skcal's calibration scorers ({', '.join(own)}) "
        "or another scikit-learn scorer (sklearn.metrics.get_scorer_names())."
    )


@dataclass
class _SelectionData:
    """What ``select`` read: the calibration scores, and the --test file's."""

    key: str  # "logits" or "proba"
    X: np.ndarray
    y: np.ndarray
    classes: np.ndarray | None  # when the --fit file names them (array, columns)
    classes_: np.ndarray  # the label of each column
    X_test: np.ndarray | None
    y_test: np.ndarray | None


def _read_selection_data(args, report) -> _SelectionData:
    columns = Columns.from_args(args)
    fit = ArrayFile(args.fit, columns)
    test = None if args.test is None else ArrayFile(args.test, columns)
    files = [("--fit", fit)] + ([] if test is None else [("--test", test)])
    key = _score_key(
        args,
        files,
        report,
        needs="the search compares score calibrators, which need",
        local_hint=" (it holds embeddings, but the candidates calibrate scores: "
        "add the classifier's logits)",
    )
    why = f"the scores to calibrate (--input {args.input})"
    X = fit.matrix(key, why)
    y = fit.vector("labels", "the true labels of the calibration samples")
    _same_length(fit, "labels", y, len(X), fit.describe(key))
    classes_, classes = _file_classes(fit, key, y, X.shape[1], report, "--fit ")
    X_test = y_test = None
    if test is not None:
        X_test = test.matrix(key, why)
        _same_classes(key, fit, X, "--test", test, X_test)
        names, strict = score_column_names(test, key)
        X_test = align_columns(
            X_test, names, classes_, f"--test {test.path}", strict=strict
        )
        y_test = test.vector("labels", "the true labels, which --test reports on")
        _same_length(test, "labels", y_test, len(X_test), test.describe(key))
        # before the search, which can take minutes
        _check_known_labels(y_test, classes_, "--test", args.test, args.fit)
    return _SelectionData(key, X, y, classes, classes_, X_test, y_test)


def _selection_rows(search) -> list[dict]:
    """One row of strings per candidate of ``search.cv_results_``."""
    res = search.cv_results_

    def number(value, digits):
        return f"{value:.{digits}f}" if np.isfinite(value) else "-"

    rows = []
    for c, name in enumerate(res["candidate"]):
        n_params = res["n_parameters"][c]
        note = res["skipped_reason"][c] or ("selected" * (c == search.best_index_))
        rows.append(
            {
                "candidate": str(name),
                "mean_score": number(res["mean_test_score"][c], 4),
                "std_score": number(res["std_test_score"][c], 4),
                "rank": str(int(res["rank_test_score"][c])),
                "fit_s": number(res["mean_fit_time"][c], 3),
                "n_params": "-" if np.isnan(n_params) else str(int(n_params)),
                "note": note,
            }
        )
    return rows


_SELECTION_COLUMNS = [
    "candidate",
    "mean_score",
    "std_score",
    "rank",
    "fit_s",
    "n_params",
    "note",
]


def _cmd_select(args) -> int:
    from .model_selection import CalibratorSearchCV

    prog, report = "skcal select", _reporter(args)
    candidates = _parse_candidates(args.candidates, device=args.device)
    scoring = _check_scoring(args.scoring)
    _check_device(args.device)
    if args.save is not None:
        check_model_path(args.save, "--save")  # fail before the search
    data = _read_selection_data(args, report)
    search = CalibratorSearchCV(
        candidates,
        scoring=scoring,
        cv=args.cv,
        guard=None if args.no_guard else "one_se",
        n_jobs=args.n_jobs,
        random_state=args.seed,
        verbose=0 if args.quiet else 1,
        input=data.key,
        classes=data.classes,
    )
    report(
        f"scoring {len(candidates)} candidate(s) by {args.cv}-fold cross-fitting "
        f"on {len(data.y)} samples ({data.key}) ..."
    )
    start = time.perf_counter()
    with _report_on_stderr(prog):
        search.fit(data.X, data.y)
        elapsed = time.perf_counter() - start
        proba = None
        if data.X_test is not None:
            proba = search.predict_proba(data.X_test)
    intervals = None
    if proba is not None:
        intervals = _interval_report(args, data.y_test, proba, search.classes_, report)
    if args.save is not None:
        write_model(args.save, search)
    n_samples, n_classes = len(data.y), len(search.classes_)
    if args.json:
        test = {}
        if intervals is not None:
            test = {
                "test": {
                    "file": args.test,
                    "n_samples": len(data.y_test),
                    "intervals": intervals.to_dict(),
                }
            }
        _print_json(
            {
                "fit": args.fit,
                "input": data.key,
                "n_samples": n_samples,
                "n_classes": n_classes,
                "classes": search.classes_,
                "scoring": scoring,
                "cv": search.n_splits_,
                "guard": search.guard,
                "seed": args.seed,
                "fit_s": elapsed,
                "cv_results": search.cv_results_,
                "selected": search.selected_,
                "best_index": search.best_index_,
                "best_score": search.best_score_,
                "selection_reason": search.selection_reason_,
                "refit_s": search.refit_time_,
                "save": args.save,
                **test,
            }
        )
        return 0
    guard = "off (--no-guard)" if args.no_guard else "one standard error"
    print(
        f"CalibratorSearchCV on {args.fit}: {n_samples} samples, {n_classes} "
        f"classes ({data.key})."
    )
    print(
        _paragraph(
            f"{search.n_splits_}-fold stratified cross-fitting, shuffled with "
            f"seed {args.seed}; scoring {scoring} (higher is better); small-data "
            f"guard {guard}; {elapsed:.2f} s."
        )
        + "\n"
    )
    print(format_table(_selection_rows(search), _SELECTION_COLUMNS, left=("note",)))
    note = (
        f"mean_score, std_score: {scoring} of the held-out rows, mean and std "
        f"(numpy, ddof=0) over the {search.n_splits_} folds; rank 1 is the best "
        "mean score (skipped and failed candidates share the last); fit_s: mean "
        "fit time per fold in seconds; n_params: free parameters counted by the "
        "guard (-: not counted)."
    )
    if not args.no_guard:
        note += (
            " The guard skips a candidate with more than one free parameter per "
            "10 rows, and keeps IdentityCalibrator, then TemperatureScaling, "
            "unless the best candidate lowers their per-row out-of-fold log "
            "loss by more than one standard error."
        )
    print("\n" + _paragraph(note))
    print("\n" + _paragraph(f"Selected {search.selected_}: {search.selection_reason_}"))
    if intervals is not None:
        print(
            f"\n{search.selected_} (refitted on all {n_samples} samples) on the "
            f"labels of --test {args.test}:\n{intervals}"
        )
    if args.save is not None:
        print(f"\nWrote the fitted search to {args.save}.")
        print(_paragraph(_saved_note(args.save, "search")))
    return 0


# ------------------------------------------------- demo and benchmark data
_DATASETS = {
    "digits": "scikit-learn's bundled digits (1797 samples, 10 classes)",
    "synthetic": "make_classification (1500 samples, 20 features, 5 classes)",
}


def _load_dataset(name: str):
    if name == "digits":
        from sklearn.datasets import load_digits

        return load_digits(return_X_y=True)
    from sklearn.datasets import make_classification

    return make_classification(
        n_samples=1500,
        n_features=20,
        n_informative=10,
        n_redundant=4,
        n_classes=5,
        n_clusters_per_class=2,
        random_state=0,
    )


@dataclass
class _Backbone:
    """An MLP's last hidden layer on calibration and test data, and its head."""

    n_train: int
    h_cal: np.ndarray
    y_cal: np.ndarray
    h_test: np.ndarray
    y_test: np.ndarray
    coef: np.ndarray
    intercept: np.ndarray

    def logits(self, h):
        return h @ self.coef.T + self.intercept


def _train_backbone(dataset: str, seed: int) -> _Backbone:
    """Split 50/25/25 (stratified) and train an MLP on the first half."""
    from sklearn.model_selection import train_test_split
    from sklearn.neural_network import MLPClassifier
    from sklearn.preprocessing import StandardScaler

    X, y = _load_dataset(dataset)
    X_train, X_rest, y_train, y_rest = train_test_split(
        X, y, train_size=0.5, stratify=y, random_state=seed
    )
    X_cal, X_test, y_cal, y_test = train_test_split(
        X_rest, y_rest, train_size=0.5, stratify=y_rest, random_state=seed
    )
    scaler = StandardScaler().fit(X_train)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # MLP convergence chatter
        mlp = MLPClassifier(
            hidden_layer_sizes=(64,), alpha=1e-5, max_iter=400, random_state=seed
        ).fit(scaler.transform(X_train), y_train)
    h_cal, coef, intercept = mlp_embeddings(mlp, scaler.transform(X_cal))
    h_test = mlp_embeddings(mlp, scaler.transform(X_test))[0]
    return _Backbone(len(y_train), h_cal, y_cal, h_test, y_test, coef, intercept)


def _calibrate_backbone(backbone: _Backbone, methods, *, device, seed):
    """Fit each calibrator on the backbone's calibration data.

    Score calibrators see the logits; local calibrators the embeddings of the
    last hidden layer, with the output layer as the frozen head.

    Yields
    ------
    name, proba, predictions, fit_s, messages
        Test probabilities and predicted labels, fit time and the messages
        of the warnings raised while fitting.
    """
    from .base import BaseLocalCalibrator

    z_cal, z_test = backbone.logits(backbone.h_cal), backbone.logits(backbone.h_test)
    for name, cls in methods:
        estimator = _make_estimator(cls, device=device, seed=seed)
        local = isinstance(estimator, BaseLocalCalibrator)
        if local and "coef" in estimator.get_params():
            estimator.set_params(coef=backbone.coef, intercept=backbone.intercept)
        X_fit, X_eval = (backbone.h_cal, backbone.h_test) if local else (z_cal, z_test)
        start = time.perf_counter()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            estimator.fit(X_fit, backbone.y_cal)
        elapsed = time.perf_counter() - start
        messages = [str(w.message) for w in caught]
        proba = estimator.predict_proba(X_eval)
        yield name, proba, estimator.predict(X_eval), elapsed, messages


def _first_sentences(name, messages) -> list[str]:
    """The first sentence of each distinct warning, prefixed by the method."""
    firsts = sorted({m.split(". ")[0].rstrip(".") for m in messages})
    return [f"  {m}." if m.startswith(name) else f"  {name}: {m}." for m in firsts]


def run_demo(seed: int = 0, device: str = "auto", out=sys.stdout) -> list[dict]:
    """Train an MLP on digits, calibrate it with every calibrator, report."""
    from scipy.special import softmax

    from .utils.discovery import all_estimators

    _check_device(device)
    backbone = _train_backbone("digits", seed)
    y_test = backbone.y_test
    print(
        f"skcal {__version__} demo: MLP on scikit-learn's digits (10 classes); "
        f"{backbone.n_train} train / {len(backbone.y_cal)} calibration / "
        f"{len(y_test)} test samples, seed {seed}, device {device}.\n",
        file=out,
    )
    proba = softmax(backbone.logits(backbone.h_test), axis=1)
    rows = [{"method": "uncalibrated", **_metrics_row(y_test, proba), "fit_s": 0.0}]
    notes = []
    for name, proba, predictions, elapsed, messages in _calibrate_backbone(
        backbone, all_estimators(), device=device, seed=seed
    ):
        notes.extend(_first_sentences(name, messages))
        rows.append(
            {
                "method": name,
                **_metrics_row(y_test, proba, predictions),
                "fit_s": elapsed,
            }
        )
    columns = [
        "method",
        "accuracy",
        "NLL",
        "Brier",
        "ECE",
        "cwECE",
        "MCE",
        "SoftECE",
        "fit_s",
    ]
    print(format_table(rows, columns), file=out)
    print(
        "\nLower is better for every column but accuracy. ECE: top-label, 15 "
        "equal-width bins; cwECE: classwise; MCE: max bin gap.",
        file=out,
    )
    if notes:
        print("\nWarnings raised while fitting:", *sorted(notes), sep="\n", file=out)
    return rows


# ---------------------------------------------------------------- benchmark
_BENCHMARK_COLUMNS = ["accuracy", "NLL", "ECE", "cwECE", "ECCE", "LCE", "MLCE"]


def _benchmark_scorer(backbone: _Backbone, device: str):
    """Test metrics of the benchmark; LCE/MLCE in one PCA space per seed."""
    from .metrics import (
        LocalSpace,
        classwise_calibration_error,
        cumulative_calibration_error,
        expected_calibration_error,
        local_calibration_errors,
        negative_log_likelihood,
    )

    y, h = backbone.y_test, backbone.h_test
    space = LocalSpace().fit(backbone.h_cal)

    def score(proba, predictions):
        local = local_calibration_errors(y, proba, h, space=space, device=device)
        return {
            "accuracy": float(np.mean(predictions == y)),
            "NLL": negative_log_likelihood(y, proba),
            "ECE": expected_calibration_error(y, proba),
            "cwECE": classwise_calibration_error(y, proba),
            "ECCE": cumulative_calibration_error(y, proba),
            "LCE": local.lce,
            "MLCE": local.mlce,
        }

    return score


def _benchmark_seed(dataset, methods, *, seed, device, tag, report):
    """Test metrics (with ``fit_s``) of each method on one seed's MLP.

    Returns the backbone, ``[(name, metrics), ...]`` starting with the
    uncalibrated MLP, and the first sentence of every fit warning.
    """
    from scipy.special import softmax

    start = time.perf_counter()
    backbone = _train_backbone(dataset, seed)
    report(f"{tag} MLP on {dataset} (seed {seed}) {time.perf_counter() - start:.2f} s")
    score = _benchmark_scorer(backbone, device)
    proba = softmax(backbone.logits(backbone.h_test), axis=1)
    uncalibrated = ("uncalibrated", proba, proba.argmax(axis=1), 0.0, [])
    fitted = _calibrate_backbone(backbone, methods, device=device, seed=seed)
    results, notes = [], []
    for name, proba, predictions, elapsed, messages in itertools.chain(
        [uncalibrated], fitted
    ):
        if name != "uncalibrated":
            report(f"{tag} {name} {elapsed:.2f} s")
        notes.extend(_first_sentences(name, messages))
        results.append((name, {**score(proba, predictions), "fit_s": elapsed}))
    return backbone, results, notes


def run_benchmark(
    dataset="digits", methods=None, *, seeds=3, seed=0, device="auto", report=None
) -> dict:
    """Every calibrator in ``methods`` on ``dataset`` over ``seeds`` seeds.

    Seed ``i`` (from 0) uses ``seed + i`` for the split, the MLP and the
    calibrators. Returns a dict with the per-seed ``values`` and their
    ``mean`` and ``std`` (numpy's, ddof=0) for each method.
    """
    from .utils.discovery import all_estimators

    report = report or (lambda message: None)
    methods = list(all_estimators() if methods is None else methods)
    if not methods:
        raise ValueError(
            "methods is empty: pass None to run every calibrator, or a list of "
            "(name, class) pairs."
        )
    values, notes = {}, set()
    for i in range(seeds):
        backbone, results, seed_notes = _benchmark_seed(
            dataset,
            methods,
            seed=seed + i,
            device=device,
            tag=f"[seed {i + 1}/{seeds}]",
            report=report,
        )
        notes.update(seed_notes)
        for name, metrics in results:
            for column, value in metrics.items():
                values.setdefault(name, {}).setdefault(column, []).append(value)
    return {
        "dataset": dataset,
        "description": _DATASETS[dataset],
        "seeds": [seed + i for i in range(seeds)],
        "device": device,
        "n_classes": backbone.coef.shape[0],
        "n_train": backbone.n_train,
        "n_calibration": len(backbone.y_cal),
        "n_test": len(backbone.y_test),
        "metrics": [*_BENCHMARK_COLUMNS, "fit_s"],
        "rows": [
            {
                "method": name,
                "mean": {c: float(np.mean(v)) for c, v in columns.items()},
                "std": {c: float(np.std(v)) for c, v in columns.items()},
                "values": columns,
            }
            for name, columns in values.items()
        ],
        "warnings": sorted(notes),
    }


def format_benchmark(result: dict) -> str:
    """The table of :func:`run_benchmark`: one ``mean ± std`` cell per metric."""
    pm = _plus_minus()
    rows = []
    for row in result["rows"]:
        cells = {"method": row["method"]}
        for column in result["metrics"]:
            digits = 2 if column == "fit_s" else 4
            mean, std = row["mean"][column], row["std"][column]
            cells[column] = f"{mean:.{digits}f} {pm} {std:.{digits}f}"
        rows.append(cells)
    return format_table(rows, ["method", *result["metrics"]])


def _parse_methods(text: str | None):
    """``[(name, class), ...]`` of ``--methods A,B,...``; None (all) if not given.

    Raises
    ------
    CLIError
        If the list is empty or has an empty name (``""``, ``","``,
        ``"ts,,vs"``); the message lists the valid methods.
    """
    if text is None:
        return None
    names = [m.strip() for m in text.split(",")]
    if not any(names) or not all(names):
        what = "no method" if not any(names) else "an empty name"
        raise CLIError(
            f"--methods {text!r} has {what}: give one or more comma-separated "
            "calibrators, or leave out --methods to run them all. Valid methods "
            f"(case-insensitive; aliases in parentheses): {_method_list()}."
        )
    return list(dict(resolve_method(m) for m in names).items())


def _cmd_benchmark(args) -> int:
    methods = _parse_methods(args.methods)
    _check_device(args.device)
    result = run_benchmark(
        args.dataset,
        methods,
        seeds=args.seeds,
        seed=args.seed,
        device=args.device,
        report=_reporter(args),
    )
    if args.json:
        _print_json(result)
        return 0
    seeds = result["seeds"]
    print(
        f"skcal {__version__} benchmark: MLP on {result['description']}; "
        f"{result['n_train']} train / {result['n_calibration']} calibration / "
        f"{result['n_test']} test samples; seeds {seeds[0]}..{seeds[-1]}; "
        f"device {args.device}. Mean {_plus_minus()} std over {len(seeds)} "
        "seed(s) (numpy std, ddof=0).\n"
    )
    print(format_benchmark(result))
    print(
        "\nLower is better for every column but accuracy. ECE: top-label, 15 "
        "bins; cwECE: classwise; ECCE: cumulative (Kolmogorov-Smirnov); LCE / "
        "MLCE: local calibration error (mean / max) in a PCA space of the "
        "calibration embeddings; fit_s: fit time in seconds."
    )
    if result["warnings"]:
        print("\nWarnings raised while fitting:", *result["warnings"], sep="\n")
    return 0


def _cmd_demo(args) -> int:
    run_demo(seed=args.seed, device=args.device)
    return 0


# ------------------------------------------------------------------- parser
class _HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Raw description and epilog; an epilog may be a callable, called only
    when the help is printed: the lists of methods import every calibrator
    (and torch), which ``skcal --help`` and parsing need not wait for."""

    def add_text(self, text):
        super().add_text(text() if callable(text) else text)


_FORMATS_HELP = f"""\
file formats (by extension):
  .npz             arrays labels (n,), logits or proba (n, C), embeddings
                   (n, D); a --fit file may add coef (C, D), intercept (C,)
                   and classes (C,), the label of each column.
  .csv, .parquet   (pandas; Parquet also pyarrow) one row per sample,
                   columns label, logit_0..logit_{{C-1}} or proba_0..proba_{{C-1}},
                   emb_0..emb_{{D-1}}; other columns are ignored.

{COLUMNS_HELP}"""


def _methods_help(head_note: bool = False) -> str:
    from .utils.discovery import all_estimators

    def wrap(title, text):
        return textwrap.fill(text, 79, initial_indent=title, subsequent_indent="    ")

    lines = [
        "methods (case-insensitive; aliases in parentheses):",
        wrap("  score (logits or proba): ", _method_list("score")),
        wrap("  local (embeddings): ", _method_list("local")),
    ]
    local = [(n, c) for n, c in all_estimators("local") if _takes_head(c)]
    uses = [n for n, c in local if _uses_head(c)]
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


def _takes_head(cls) -> bool:
    """Whether the calibrator takes a frozen linear head (``coef``, ``intercept``)."""
    from .base import BaseLocalCalibrator

    return issubclass(cls, BaseLocalCalibrator) and cls._takes_head()


def _uses_head(cls) -> bool:
    """Whether the calibrator with default parameters uses the linear head."""
    return bool(getattr(cls(), "_uses_head", False))


def _wrap(text: str) -> str:
    return textwrap.fill(text, 79)


def _paragraph(text: str) -> str:
    """``text`` wrapped at 79 columns, never inside a word (names, numbers)."""
    return textwrap.fill(text, 79, break_on_hyphens=False, break_long_words=False)


def _add_common(parser, *, device_use="", seed=True) -> None:
    parser.add_argument(
        "--device",
        default="auto",
        help=f"'auto', 'cpu', 'cuda' or 'cuda:N' (default auto: a CUDA device "
        f"when one is available){device_use}",
    )
    if seed:
        parser.add_argument(
            "--seed", type=int, default=0, help="random seed (default 0)"
        )
    parser.add_argument(
        "--json", action="store_true", help="print machine-readable JSON instead"
    )
    parser.add_argument(
        "--quiet",
        action="store_true",
        help="no progress lines or notes on stderr (warnings and errors still show)",
    )


def _confidence_level(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(
            f"expected a number in (0, 1) such as 0.9, got {text!r}"
        )
    return value


def _add_interval_options(parser, flag: str) -> None:
    """``--n-resamples`` and ``--confidence-level`` of the report of ``flag``."""
    parser.add_argument(
        "--n-resamples",
        type=_positive_int,
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


def _add_column_options(parser) -> None:
    """``--label-col``, ``--logit-cols``, ``--proba-cols`` and ``--emb-cols``."""
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


def _add_calibrate(sub) -> None:
    parser = sub.add_parser(
        "calibrate",
        help="fit a calibrator on one file and calibrate another",
        description=_wrap(
            "Fit a calibrator on the --fit file (scores or embeddings, "
            "and labels) and write the calibrated probabilities of the --apply file "
            "to --out (proba, predict, classes in npz, and the --apply labels when "
            "it has them). With labels in the --apply file, prints their metrics. "
            "The column options apply to every file read."
        ),
        epilog=lambda: (
            f"{_FORMATS_HELP}\n\n{_methods_help(head_note=True)}\n\n"
            "example:\n  skcal calibrate --method temperature --fit cal.npz "
            "--apply test.npz --out calibrated.npz"
        ),
        formatter_class=_HelpFormatter,
    )
    parser.add_argument("--method", required=True, help="calibrator (see below)")
    parser.add_argument(
        "--fit", required=True, metavar="FILE", help="calibration data, with labels"
    )
    _add_apply_and_out(parser)
    parser.add_argument(
        "--input",
        choices=["auto", "logits", "proba"],
        default="auto",
        help="scores of score calibrators: auto (default) uses logits when both "
        "files have them, else proba",
    )
    parser.add_argument(
        "--head",
        metavar="FILE",
        help=".npz with coef (and intercept), the linear head of local "
        "calibrators (default: the --fit file's, if any)",
    )
    parser.add_argument(
        "--param",
        action="append",
        type=_parse_param,
        default=[],
        metavar="KEY=VALUE",
        help="set a calibrator parameter (repeatable); VALUE is a Python literal "
        "(0.1, 200, None, True, (64, 32)) or else a string; applied after "
        "--device and --seed; on a terminal the calibrators that train show a "
        "progress bar on stderr (verbose=1) unless --quiet; verbose=2 adds a "
        "line per epoch, verbose=0 hides the bar",
    )
    parser.add_argument(
        "--save",
        metavar="FILE",
        help="also write the fitted calibrator: model.skops (safe to load, needs "
        "skops; reapply it with skcal apply) or model.pkl (a pickle)",
    )
    _add_column_options(parser)
    _add_common(parser)
    parser.set_defaults(handler=_cmd_calibrate)


def _add_apply(sub) -> None:
    parser = sub.add_parser(
        "apply",
        help="apply a saved calibrator to a file of scores or embeddings",
        description=_wrap(
            "Load a calibrator (or search) saved by skcal calibrate --save or "
            "skcal select --save and write the calibrated probabilities of the "
            "--apply file to --out (proba, predict, classes in npz, and the "
            "labels when the file has them, with their metrics). A .skops model "
            "is loaded safely: only skcal's types and those skops trusts are "
            "rebuilt (--trust adds others); any other file is a pickle, read "
            "only with --allow-pickle. The model says what it reads: logits, "
            "proba or embeddings."
        ),
        epilog=lambda: (
            f"{_FORMATS_HELP}\n\nexample:\n  skcal calibrate --method temperature "
            "--fit cal.npz --apply val.npz --out val_cal.npz --save ts.skops\n"
            "  skcal apply --model ts.skops --apply test.npz --out test_cal.npz"
        ),
        formatter_class=_HelpFormatter,
    )
    parser.add_argument(
        "--model",
        required=True,
        metavar="FILE",
        help="the fitted calibrator: model.skops (or a pickle, with --allow-pickle)",
    )
    _add_apply_and_out(parser)
    parser.add_argument(
        "--trust",
        action="append",
        default=[],
        metavar="TYPE",
        help="also trust this fully qualified type in a .skops model (repeatable; "
        "the error names the types the file needs)",
    )
    parser.add_argument(
        "--allow-pickle",
        action="store_true",
        help="read a model that is not .skops as a pickle (runs its author's code: "
        "trusted files only)",
    )
    _add_column_options(parser)
    parser.add_argument(
        "--device",
        default=None,
        help="'cpu', 'cuda', 'cuda:N' or 'auto' (default: the model's own)",
    )
    parser.add_argument(
        "--json", action="store_true", help="print machine-readable JSON instead"
    )
    parser.add_argument(
        "--quiet",
        action="store_true",
        help="no progress lines or notes on stderr (warnings and errors still show)",
    )
    parser.set_defaults(handler=_cmd_apply)


def _add_evaluate(sub) -> None:
    parser = sub.add_parser(
        "evaluate",
        help="calibration metrics of files of probabilities and labels",
        description=_wrap(
            "Print the metrics of the predictions in FILE against its "
            "labels: accuracy, NLL, Brier, ECE, cwECE, MCE, SoftECE, ECCE, smECE; "
            "--local adds LCE and MLCE; --ci adds bootstrap confidence intervals. "
            "Accuracy uses the file's predict array "
            "when it has one (calibrate writes it), else the most probable class. "
            "Several files (such as calibrate --out files of one --apply file) "
            "must hold the same rows, with the same labels in the same order: "
            "their metrics are printed side by side, one column per file, and "
            "--paired compares each file with the first."
        ),
        epilog=lambda: (
            f"{_FORMATS_HELP}\n\nexamples:\n  skcal evaluate out.npz --ci --plot "
            "diagram.png\n  skcal evaluate ts.npz vs.npz dirichlet.npz --paired"
        ),
        formatter_class=_HelpFormatter,
    )
    parser.add_argument(
        "files",
        nargs="+",
        metavar="FILE",
        help=".npz, .csv or .parquet; several: side by side",
    )
    parser.add_argument(
        "--names",
        metavar="A,B,...",
        help="comma-separated names of the files' columns (default: file stems)",
    )
    parser.add_argument(
        "--paired",
        action="store_true",
        help="also a paired bootstrap comparison of each file with the first: "
        "difference of NLL and ECE, interval and p-value "
        "(skcal.metrics.paired_comparison)",
    )
    parser.add_argument(
        "--input",
        choices=["auto", "logits", "proba"],
        default="auto",
        help="what to evaluate: auto (default) uses proba when present, else "
        "the softmax of logits",
    )
    parser.add_argument(
        "--n-bins",
        type=_positive_int,
        default=15,
        help="bins of the binned metrics and the diagram (default 15)",
    )
    parser.add_argument(
        "--plot", metavar="PNG", help="write a reliability diagram (matplotlib)"
    )
    parser.add_argument(
        "--local",
        action="store_true",
        help="also the local calibration errors LCE and MLCE on the file's "
        "embeddings (slower)",
    )

    parser.add_argument(
        "--ci",
        action="store_true",
        help="also a calibration report: accuracy, NLL, Brier, ECE, cwECE, ECCE "
        "(with its p-value) and smECE with bootstrap confidence intervals "
        "(skcal.metrics.calibration_report; a few seconds)",
    )
    _add_interval_options(parser, "--ci and --paired")
    parser.add_argument(
        "--seed",
        type=int,
        default=0,
        help="seed of the --ci and --paired resampling (default 0)",
    )
    _add_column_options(parser)
    _add_common(parser, device_use=", for --local", seed=False)
    parser.set_defaults(handler=_cmd_evaluate)


def _add_benchmark(sub) -> None:
    parser = sub.add_parser(
        "benchmark",
        help="every calibrator on a dataset over several seeds",
        description=_wrap(
            "For each seed: split the dataset 50/25/25 into train / "
            "calibration / test, train an MLP (64 hidden units) on the train part, "
            "calibrate it with each method (score methods on its logits, local "
            "methods on its hidden layer with the output layer as head) and score "
            "the test part. Prints mean ± std over the seeds. No download."
        ),
        epilog=lambda: (
            "datasets:\n"
            + "\n".join(f"  {k:<10} {v}" for k, v in _DATASETS.items())
            + f"\n\n{_methods_help()}"
        ),
        formatter_class=_HelpFormatter,
    )
    parser.add_argument(
        "--dataset", choices=list(_DATASETS), default="digits", help="default digits"
    )
    parser.add_argument(
        "--methods",
        metavar="A,B,...",
        help="comma-separated calibrators (default: all; see below)",
    )
    parser.add_argument(
        "--seeds",
        type=_positive_int,
        default=3,
        help="number of seeds (default 3); seed i uses --seed + i",
    )
    _add_common(parser)
    parser.set_defaults(handler=_cmd_benchmark)


def _at_least_two(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 2:
        raise argparse.ArgumentTypeError(
            f"expected an integer of at least 2 (folds), got {text!r}"
        )
    return value


def _n_jobs(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value == 0:
        raise argparse.ArgumentTypeError(
            f"expected a non-zero integer (-1: every CPU), got {text!r}"
        )
    return value


def _select_epilog() -> str:
    candidates = textwrap.fill(
        _candidate_list(), 79, initial_indent="  ", subsequent_indent="  "
    )
    return (
        f"{_FORMATS_HELP}\n\ncandidates (case-insensitive; aliases in "
        f"parentheses):\n{candidates}\n\nexample:\n  skcal select --fit cal.npz "
        "--test test.npz --save search.pkl"
    )


def _add_select(sub) -> None:
    parser = sub.add_parser(
        "select",
        help="choose a calibrator by cross-validation on one file",
        description=_wrap(
            "Score candidate calibrators by K-fold cross-fitting on the --fit "
            "file (scores and labels) with skcal.model_selection."
            "CalibratorSearchCV, print its cv_results_ (one row per candidate) "
            "and the selected calibrator with the reason of the choice. The "
            "small-data guard skips candidates with more than one free "
            "parameter per 10 events (calibration rows the classifier gets wrong, "
            "or right if fewer; temperature scaling needs 5), and keeps identity "
            "or temperature scaling "
            "unless the best candidate beats them by more than one standard "
            "error of the per-row log losses. --test adds a calibration report "
            "of the selected calibrator with bootstrap intervals; --save "
            "writes the fitted search (.skops or .pkl). Progress goes to stderr."
        ),
        epilog=_select_epilog,
        formatter_class=_HelpFormatter,
    )
    parser.add_argument(
        "--fit", required=True, metavar="FILE", help="calibration data, with labels"
    )
    parser.add_argument(
        "--input",
        choices=["auto", "logits", "proba"],
        default="auto",
        help="scores of the candidates: auto (default) uses logits when every "
        "file has them, else proba",
    )
    parser.add_argument(
        "--candidates",
        nargs="+",
        metavar="NAME",
        help="compare only these default candidates, separated by spaces or "
        "commas (see below; default: all)",
    )
    parser.add_argument(
        "--cv",
        type=_at_least_two,
        default=5,
        metavar="K",
        help="stratified folds of the cross-fitting (default 5)",
    )
    parser.add_argument(
        "--scoring",
        default="neg_log_loss",
        help="score of the held-out rows, higher is better: neg_log_loss "
        "(default), a skcal or scikit-learn scorer name",
    )
    parser.add_argument(
        "--no-guard",
        action="store_true",
        help="keep the best mean score, skip nothing (guard=None)",
    )
    parser.add_argument(
        "--n-jobs",
        type=_n_jobs,
        default=None,
        metavar="N",
        help="candidate x fold fits in parallel (joblib; -1: every CPU; default 1)",
    )
    parser.add_argument(
        "--test",
        metavar="FILE",
        help="also a calibration report of the selected calibrator on this "
        "file's scores and labels, with bootstrap intervals",
    )
    parser.add_argument(
        "--n-bins",
        type=_positive_int,
        default=15,
        help="bins of the binned metrics of the --test report (default 15)",
    )
    _add_interval_options(parser, "--test")
    parser.add_argument(
        "--save",
        metavar="FILE",
        help="write the fitted search (it predicts with the selected "
        "calibrator, refitted on all rows): search.skops (safe to load, needs "
        "skops; reapply it with skcal apply) or search.pkl (a pickle)",
    )
    parser.add_argument(
        "--seed",
        type=int,
        default=0,
        help="seed of the folds, of the candidates and of the --test "
        "resampling (default 0)",
    )
    _add_column_options(parser)
    _add_common(parser, device_use=", for the candidates that use torch", seed=False)
    parser.set_defaults(handler=_cmd_select)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="skcal", description="Post-hoc calibration of multiclass classifiers."
    )
    parser.add_argument("--version", action="version", version=f"skcal {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    _add_calibrate(sub)
    _add_apply(sub)
    _add_evaluate(sub)
    _add_select(sub)
    _add_benchmark(sub)
    demo = sub.add_parser(
        "demo", help="calibrate an MLP on bundled digits with every calibrator"
    )
    demo.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    demo.add_argument(
        "--device",
        default="auto",
        help="'auto', 'cpu', 'cuda' or 'cuda:N' (default auto: a CUDA device "
        "when one is available)",
    )
    demo.set_defaults(handler=_cmd_demo)
    return parser


#: Modules whose ``raise`` statements report bad input: skcal's checks, and
#: scikit-learn's validation of parameters, arrays and labels.
_INPUT_CHECKS = re.compile(
    r"skcal(\..+)?|sklearn\.utils\.(validation|_param_validation|multiclass)"
)


def _is_input_error(exc: ValueError) -> bool:
    """Whether ``exc`` reports bad input (one line) rather than a bug.

    A :class:`~skcal._cli_io.CLIError` is one of the command's own checks.
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
        message = " ".join(str(exc).split())
        print(f"skcal {args.command}: error: {message}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"skcal {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
