"""The ``calibrate`` and ``apply`` commands.

``skcal calibrate`` fits a calibrator on one file (scores or embeddings,
and labels) and writes the calibrated probabilities of another;
``skcal apply`` does the same with a calibrator saved by ``calibrate
--save`` or ``select --save``. Both print the metrics of the output on its
labels, when the file has them.
"""

from __future__ import annotations

import argparse
import ast
import sys
import time
from dataclasses import dataclass

import numpy as np

from ._columns import Columns, named_columns
from ._common import CLIError, check_device, report_on_stderr, reporter
from ._format import evaluation_row, paragraph, print_json, print_metrics, wrap
from ._inputs import (
    align_scores,
    check_known_labels,
    file_classes,
    read_labels,
    read_model_scores,
    same_classes,
    score_key,
)
from ._io import ArrayFile, check_output_path, file_format, write_arrays
from ._methods import (
    make_estimator,
    methods_help,
    resolve_method,
    takes_head,
    uses_head,
)
from ._models import check_model_path, read_model, saved_note, write_model
from ._options import (
    FORMATS_HELP,
    HelpFormatter,
    add_column_options,
    add_common,
    add_fit,
    add_input,
    add_keep_cols,
    add_output_flags,
    add_save,
    add_trust_options,
)


def _parse_param(text: str) -> tuple[str, object]:
    """The argument type of ``--param KEY=VALUE``: VALUE a literal, else text."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    try:
        parsed = ast.literal_eval(value.strip())
    except (ValueError, SyntaxError):
        parsed = value.strip()
    return key.strip(), parsed


def _add_apply_and_out(parser) -> None:
    """``--apply`` and ``--out``, shared by calibrate and apply."""
    parser.add_argument(
        "--apply", required=True, metavar="FILE", help="data to calibrate"
    )
    parser.add_argument(
        "--out", required=True, metavar="FILE", help="output .npz, .csv or .parquet"
    )


def _score_inputs(args, fit: ArrayFile, apply: ArrayFile, report):
    """The score key and the fit/apply matrices of a score calibrator."""
    key = score_key(
        args,
        [("--fit", fit), ("--apply", apply)],
        report,
        needs="score calibrators need",
        local_hint=" (the files hold embeddings: choose a local method?)",
    )
    why = f"the scores to calibrate (--input {args.input})"
    X_fit, X_apply = fit.matrix(key, why), apply.matrix(key, why)
    same_classes(key, fit, X_fit, "--apply", apply, X_apply)
    return key, X_fit, X_apply


def _local_inputs(name: str, fit: ArrayFile, apply: ArrayFile):
    """The fit/apply embeddings of the local calibrator ``name``, checked."""
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
        if uses_head(cls):
            report(
                f"{fit.path} has no coef: {name} first fits a logistic-regression "
                "head on the calibration embeddings (pass your classifier's head "
                "as coef/intercept in the --fit file or with --head)"
            )
        return {}
    if not takes_head(cls):
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
    keep: dict  # the --apply file's columns copied to --out (--keep-cols)


def _read_calibration_data(args, name, cls, report) -> _CalibrationData:
    """The --fit and --apply files' inputs of ``cls``, checked and aligned."""
    from ..base import BaseLocalCalibrator

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
    why = "the true labels of the calibration samples"
    y_fit = read_labels(fit, why, len(X_fit), key)
    y_apply = None
    if "labels" in apply:
        y_apply = read_labels(apply, "", len(X_apply), key)
    if key == "embeddings":
        given = fit.vector("classes", "") if "classes" in fit else None
    else:
        classes_, given = file_classes(
            fit, key, y_fit, X_fit.shape[1], report, "--fit "
        )
        X_apply = align_scores(apply, key, X_apply, classes_, "--apply")
    if given is not None:
        params = {"classes": given, **params}
    keep = apply.passthrough(args.keep_cols, len(X_apply))
    return _CalibrationData(
        key, X_fit, y_fit, X_apply, y_apply, head, params, given, keep
    )


def _fit_and_apply(estimator, data: _CalibrationData, prog: str):
    """Fit time, probabilities, predictions and intervals; warnings become
    stderr lines."""
    start = time.perf_counter()
    with report_on_stderr(prog):
        estimator.fit(data.X_fit, data.y_fit)
        elapsed = time.perf_counter() - start
        proba = estimator.predict_proba(data.X_apply)
        predict = estimator.predict(data.X_apply)
        intervals = _intervals(estimator, data.X_apply)
    return elapsed, proba, predict, intervals


def _intervals(estimator, X) -> dict:
    """``proba_lower`` and ``proba_upper`` of an estimator that reports an
    interval of each probability (``predict_interval``, as Venn-Abers does),
    else nothing."""
    if not callable(getattr(estimator, "predict_interval", None)):
        return {}
    lower, upper = estimator.predict_interval(X)
    return {"proba_lower": lower, "proba_upper": upper}


def _written(intervals: dict) -> str:
    """What the output holds, for the summary line."""
    if not intervals:
        return "calibrated probabilities"
    return "calibrated probabilities and their intervals (proba_lower, proba_upper)"


def _metric_rows(name, y, proba, predict, classes, *, key, X, head) -> list[dict]:
    """Metrics before and after calibration on the labels ``y``, if any.

    The classifier's own probabilities come from the scores ``X`` (``key``),
    or from embeddings through the linear ``head`` (:func:`_uncalibrated`).
    """
    if y is None:
        return []
    rows = []
    before = _uncalibrated(key, X, head)
    if before is not None:
        metrics = evaluation_row(y, before, labels=classes)
        rows.append({"method": "uncalibrated", **metrics})
    metrics = evaluation_row(y, proba, predict, labels=classes)
    return [*rows, {"method": name, **metrics}]


def _write_calibrated(
    path,
    name,
    y,
    predict,
    proba,
    classes,
    given,
    label=None,
    intervals=None,
    keep=None,
):
    """Write the output of calibrate and apply: the probabilities and more.

    ``given``: the classes when the input named them (headers ``proba_<class>``);
    ``label``: the input's ``--label-col``, the name of the labels (kept, so
    that the output reads back with the same options); ``intervals``: the
    ``proba_lower`` and ``proba_upper`` of :func:`_intervals`; ``keep``:
    the input's columns copied beside them (``--keep-cols``).
    """
    labels = {} if y is None else {"labels": y}
    arrays = {**labels, "predict": predict, "proba": proba, **(intervals or {})}
    arrays["classes"] = classes
    arrays["method"] = np.array(name)  # names the file in evaluate (npz only)
    write_arrays(
        path,
        arrays,
        class_names=named_columns(classes, given),
        label_name=label,
        keep=keep,
    )


def _calibrate_json(args, name, data: _CalibrationData, classes, n_apply, fit_s, rows):
    """What ``calibrate --json`` prints."""
    return {
        "method": name,
        "input": data.key,
        "n_classes": len(classes),
        "classes": classes,
        "n_fit": len(data.y_fit),
        "n_apply": n_apply,
        "fit_s": fit_s,
        "params": {k: v for k, v in data.params.items() if k != "classes"},
        "out": args.out,
        "save": args.save,
        "metrics": rows,
    }


def _cmd_calibrate(args) -> int:
    """Run ``skcal calibrate``; returns the exit code."""
    prog, report = "skcal calibrate", reporter(args)
    name, cls = resolve_method(args.method)
    check_device(args.device)
    # fail before fitting on a bad output name
    check_output_path(args.out, {"--fit": args.fit, "--apply": args.apply})
    if args.save is not None:
        check_model_path(args.save, "--save")
    data = _read_calibration_data(args, name, cls, report)
    estimator = make_estimator(
        cls,
        device=args.device,
        seed=args.seed,
        params={**data.head, **data.params},
        # the bar of long fits, on a terminal only (not in logs or pipes)
        progress=not args.quiet and sys.stderr.isatty(),
    )
    report(f"fitting {name} on {len(data.y_fit)} samples ({data.key}) ...")
    elapsed, proba, predict, intervals = _fit_and_apply(estimator, data, prog)
    classes = estimator.classes_
    if data.y_apply is not None:
        check_known_labels(data.y_apply, classes, "--apply", args.apply, args.fit)
    rows = _metric_rows(
        name,
        data.y_apply,
        proba,
        predict,
        classes,
        key=data.key,
        X=data.X_apply,
        head=data.head,
    )
    _write_calibrated(
        args.out,
        name,
        data.y_apply,
        predict,
        proba,
        classes,
        data.given,
        args.label_col,
        intervals,
        data.keep,
    )
    if args.save is not None:
        write_model(args.save, estimator)
    if args.json:
        print_json(
            _calibrate_json(args, name, data, classes, len(proba), elapsed, rows)
        )
        return 0
    print(
        f"{name} ({data.key}, {len(classes)} classes): fitted on "
        f"{len(data.y_fit)} samples in {elapsed:.2f} s; wrote the "
        f"{_written(intervals)} of {len(proba)} samples to {args.out}."
    )
    if args.save is not None:
        print(f"Wrote the fitted calibrator to {args.save}.")
        print(paragraph(saved_note(args.save, "calibrator")))
    if rows:
        print_metrics(rows, args.apply)
    return 0


def _unusable_model(model, path: str, exc: BaseException) -> CLIError:
    """The error of a loaded model that fails when used."""
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
    from ..utils.persistence import _check_complete

    try:
        _check_complete(model, f"--model {path}")
    except ValueError as exc:
        raise CLIError(str(exc)) from None


def _model_input(model, path: str) -> str:
    """What a saved model reads: "logits", "proba" or "embeddings"."""
    from sklearn.exceptions import NotFittedError
    from sklearn.utils.validation import check_is_fitted

    from ..base import BaseCalibrator, BaseLocalCalibrator
    from ..model_selection import CalibratorSearchCV

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


def _model_head(model, key: str) -> dict:
    """The linear head (coef, intercept) a saved local calibrator holds, or {}."""
    coef = model.get_params().get("coef")
    if key != "embeddings" or coef is None:
        return {}
    intercept = model.get_params()["intercept"]
    if intercept is not None:
        intercept = np.asarray(intercept, dtype=np.float64)
    return {"coef": np.asarray(coef), "intercept": intercept}


def _model_name(model) -> str:
    """The name of a model's rows: a saved search is named by its choice."""
    name = type(model).__name__
    selected = getattr(model, "selected_", None)
    return f"{selected} (selected by {name})" if selected else name


def _cmd_apply(args) -> int:
    """Run ``skcal apply``; returns the exit code."""
    prog, report = "skcal apply", reporter(args)
    # fail before loading on a bad output name
    check_output_path(args.out, {"--apply": args.apply, "--model": args.model})
    model = read_model(args.model, trusted=args.trust, allow_pickle=args.allow_pickle)
    key = _model_input(model, args.model)
    if args.device is not None and "device" in model.get_params():
        model.set_params(device=args.device)
    _check_model_predicts(model, args.model)
    name = _model_name(model)
    X, y, apply = read_model_scores(
        args, model, key, "--apply", args.apply, verb="apply it to"
    )
    keep = apply.passthrough(args.keep_cols, len(X))
    classes = model.classes_
    with report_on_stderr(prog):
        proba = model.predict_proba(X)
        predict = model.predict(X)
        intervals = _intervals(model, X)
    report(f"applied {name} ({key}) to {len(proba)} samples of {args.apply}")
    head = {} if y is None else _model_head(model, key)
    rows = _metric_rows(name, y, proba, predict, classes, key=key, X=X, head=head)
    label = getattr(args, "label_col", None)
    _write_calibrated(
        args.out, name, y, predict, proba, classes, None, label, intervals, keep
    )
    if args.json:
        print_json(
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
        f"{_written(intervals)} of {len(proba)} samples to {args.out}."
    )
    if rows:
        print_metrics(rows, args.apply)
    return 0


def add_head_and_param(parser, param_help: str) -> None:
    """``--head`` (a linear head's file) and ``--param`` (repeatable)."""
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
        help=param_help,
    )


def add_calibrate(sub) -> None:
    """The parser of ``skcal calibrate``, a subparser of ``sub``."""
    parser = sub.add_parser(
        "calibrate",
        help="fit a calibrator on one file and calibrate another",
        description=wrap(
            "Fit a calibrator on the --fit file (scores or embeddings, "
            "and labels) and write the calibrated probabilities of the --apply file "
            "to --out (proba, predict, classes in npz, and the --apply labels when "
            "it has them). A calibrator that reports an interval of each "
            "probability (vennabers) also writes proba_lower and proba_upper "
            "(columns lower_<class> and upper_<class> in CSV and Parquet): "
            "lower <= proba <= upper. With labels in the --apply file, prints "
            "their metrics. The column options apply to every file read."
        ),
        epilog=lambda: (
            f"{FORMATS_HELP}\n\n{methods_help(head_note=True)}\n\n"
            "example:\n  skcal calibrate --method temperature --fit cal.npz "
            "--apply test.npz --out calibrated.npz"
        ),
        formatter_class=HelpFormatter,
    )
    parser.add_argument("--method", required=True, help="calibrator (see below)")
    add_fit(parser)
    _add_apply_and_out(parser)
    add_input(
        parser,
        "scores of score calibrators: auto (default) uses logits when both "
        "files have them, else proba",
    )
    add_head_and_param(
        parser,
        "set a calibrator parameter (repeatable); VALUE is a Python literal "
        "(0.1, 200, None, True, (64, 32)) or else a string; applied after "
        "--device and --seed; on a terminal the calibrators that train show a "
        "progress bar on stderr (verbose=1) unless --quiet; verbose=2 adds a "
        "line per epoch, verbose=0 hides the bar",
    )
    add_save(parser, "also write the fitted calibrator", "model")
    add_column_options(parser)
    add_keep_cols(parser, "--apply")
    add_common(parser)
    parser.set_defaults(handler=_cmd_calibrate)


def add_apply(sub) -> None:
    """The parser of ``skcal apply``, a subparser of ``sub``."""
    parser = sub.add_parser(
        "apply",
        help="apply a saved calibrator to a file of scores or embeddings",
        description=wrap(
            "Load a calibrator (or search) saved by skcal calibrate --save or "
            "skcal select --save and write the calibrated probabilities of the "
            "--apply file to --out (proba, predict, classes in npz, and the "
            "labels when the file has them, with their metrics; for a "
            "Venn-Abers model also proba_lower and proba_upper, columns "
            "lower_<class> and upper_<class> in CSV and Parquet). A .skops model "
            "is loaded safely: only skcal's types and those skops trusts are "
            "rebuilt (--trust adds others); any other file is a pickle, read "
            "only with --allow-pickle. The model says what it reads: logits, "
            "proba or embeddings."
        ),
        epilog=lambda: (
            f"{FORMATS_HELP}\n\nexample:\n  skcal calibrate --method temperature "
            "--fit cal.npz --apply val.npz --out val_cal.npz --save ts.skops\n"
            "  skcal apply --model ts.skops --apply test.npz --out test_cal.npz"
        ),
        formatter_class=HelpFormatter,
    )
    parser.add_argument(
        "--model",
        required=True,
        metavar="FILE",
        help="the fitted calibrator: model.skops (or a pickle, with --allow-pickle)",
    )
    _add_apply_and_out(parser)
    add_trust_options(
        parser,
        "also trust this fully qualified type in a .skops model (repeatable; "
        "the error names the types the file needs); a class of your own must be "
        "importable: install its package or set PYTHONPATH to its folder",
        "read a model that is not .skops as a pickle (runs its author's code: "
        "trusted files only)",
    )
    add_column_options(parser)
    add_keep_cols(parser, "--apply")
    parser.add_argument(
        "--device",
        default=None,
        help="'cpu', 'cuda', 'cuda:N' or 'auto' (default: the model's own)",
    )
    add_output_flags(parser)
    parser.set_defaults(handler=_cmd_apply)
