"""The ``select-threshold`` command: abstain unless confident enough.

``skcal select-threshold --fit cal.npz --method temperature`` fits a
:class:`skcal.decision.SelectiveClassifier` around the named calibrator on
the --fit file (scores and labels): the calibrator on part of the rows, a
confidence threshold on the others (the *threshold rows*) such that the
selective risk, the error rate among the rows predicted rather than
abstained on, is at most --target-risk with probability 1 - --delta. It
prints the threshold(s), the upper bound on the selective risk and the
coverage on the threshold rows; with --apply it writes each row's decision
(a class, or --abstain-label), its confidence and the calibrated
probabilities to --out, and on a labelled --apply file prints the selective
risk and coverage realised there.
"""

from __future__ import annotations

import sys
import warnings
from dataclasses import dataclass

import numpy as np

from ._calibrate import _head, add_head_and_param
from ._columns import Columns, named_columns
from ._common import CLIError, check_device, reporter
from ._format import paragraph, print_json, wrap
from ._inputs import (
    align_scores,
    check_known_labels,
    file_classes,
    read_labels,
    same_classes,
    score_key,
)
from ._io import ArrayFile, check_output_path, write_arrays
from ._methods import make_estimator, methods_help, resolve_method
from ._models import check_model_path, write_model
from ._options import (
    FORMATS_HELP,
    HelpFormatter,
    add_column_options,
    add_common,
    add_fit,
    add_input,
    add_keep_cols,
    fraction_type,
)


@dataclass
class _Data:
    """What select-threshold read from its files."""

    key: str  # "logits" or "proba"
    X_fit: np.ndarray
    y_fit: np.ndarray
    classes: np.ndarray
    given: np.ndarray | None  # the classes, when the input named them
    params: dict
    X_apply: np.ndarray | None = None
    y_apply: np.ndarray | None = None
    keep: dict | None = None


def _read_data(args, name, cls, report) -> _Data:
    """The scores (or embeddings) and labels of --fit (and --apply), checked
    and aligned."""
    from ..base import BaseLocalCalibrator

    columns = Columns.from_args(args)
    fit = ArrayFile(args.fit, columns)
    apply = None if args.apply is None else ArrayFile(args.apply, columns)
    if issubclass(cls, BaseLocalCalibrator):
        data, why = _read_embeddings(args, fit, name, cls, report), _emb_why(name)
    else:
        if args.head is not None:
            report(f"{name} is a score calibrator: ignoring --head {args.head}")
        data, why = _read_scores(args, fit, apply, report)
    if apply is not None:
        X_apply = apply.matrix(data.key, why)
        if data.key == "embeddings":
            _same_features(fit, data.X_fit, apply, X_apply)
        else:
            same_classes(data.key, fit, data.X_fit, "--apply", apply, X_apply)
            X_apply = align_scores(apply, data.key, X_apply, data.classes, "--apply")
        data.X_apply = X_apply
        if "labels" in apply:
            data.y_apply = read_labels(apply, "", len(X_apply), data.key)
            check_known_labels(
                data.y_apply, data.classes, "--apply", args.apply, args.fit
            )
        data.keep = apply.passthrough(args.keep_cols, len(X_apply))
    return data


_FIT_WHY = "the true labels of the calibration samples"


def _emb_why(name: str) -> str:
    """Why ``name`` reads the embeddings, for the error of a file without them."""
    return (
        f"which {name} (a local calibrator) needs: the classifier's embeddings "
        "of shape (n_samples, n_features); methods such as 'temperature' "
        "calibrate logits or proba"
    )


def _read_scores(args, fit: ArrayFile, apply, report):
    """The --fit scores of a score calibrator (:class:`_Data`) and what they are."""
    files = [("--fit", fit)] + ([] if apply is None else [("--apply", apply)])
    key = score_key(
        args,
        files,
        report,
        needs="score calibrators need",
        local_hint=" (the files hold embeddings: choose a local method?)",
    )
    why = f"the scores to calibrate (--input {args.input})"
    X_fit = fit.matrix(key, why)
    y_fit = read_labels(fit, _FIT_WHY, len(X_fit), key)
    classes, given = file_classes(fit, key, y_fit, X_fit.shape[1], report, "--fit ")
    params = dict(args.param)
    if key == "proba":
        params = {"input": "proba", **params}
    if given is not None:
        params = {"classes": given, **params}
    return _Data(key, X_fit, y_fit, np.asarray(classes), given, params), why


def _read_embeddings(args, fit: ArrayFile, name, cls, report) -> _Data:
    """The --fit embeddings of a local calibrator, and its linear head."""
    X_fit = fit.matrix("embeddings", _emb_why(name))
    y_fit = read_labels(fit, _FIT_WHY, len(X_fit), "embeddings")
    given = fit.vector("classes", "") if "classes" in fit else None
    params = {**_head(args, fit, name, cls, report), **dict(args.param)}
    if given is not None:
        params = {"classes": given, **params}
    classes = np.unique(y_fit) if given is None else np.asarray(given)
    return _Data("embeddings", X_fit, y_fit, classes, given, params)


def _same_features(fit: ArrayFile, X_fit, apply: ArrayFile, X_apply) -> None:
    """A CLIError unless the --fit and --apply embeddings have as many features."""
    if X_fit.shape[1] != X_apply.shape[1]:
        raise CLIError(
            f"embeddings of --fit {fit.path} have {X_fit.shape[1]} features but "
            f"those of --apply {apply.path} have {X_apply.shape[1]}; both must "
            "come from the same layer of the same classifier."
        )


def _abstain_label(text, classes):
    """The --abstain-label of the classes' kind (default -1, or "abstain" for
    string classes), checked to be no class before anything is fitted."""
    known = np.asarray(classes).tolist()
    numeric = np.asarray(classes).dtype.kind in "biuf"
    if text is None:
        return -1 if numeric else "abstain"
    value = _number(text) if numeric else text
    if value is None:
        raise CLIError(
            f"--abstain-label {text!r} is not a number but the classes are "
            f"numbers {known[:8]}: decisions would mix strings and numbers. "
            "Give a number that is not a class, such as -1."
        )
    if value in known:
        raise CLIError(
            f"--abstain-label {text} is one of the classes {known[:8]}: an "
            "abstention would read as that class. Give a label that is not a "
            f"class, such as {-1 if numeric else 'abstain'}."
        )
    return value


def _number(text: str):
    """``text`` as an int, else a float, else None."""
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return None


def _fit(clf, data: _Data, prog: str) -> list[str]:
    """Fit ``clf``; the texts of its NoValidThresholdWarning (other warnings
    become ``prog: warning:`` lines)."""
    from ..decision import NoValidThresholdWarning

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        clf.fit(data.X_fit, data.y_fit)
    failed = []
    for w in caught:
        text = " ".join(str(w.message).split())
        if issubclass(w.category, NoValidThresholdWarning):
            failed.append(text)
        print(f"{prog}: warning: {text}", file=sys.stderr)
    return list(dict.fromkeys(failed))


def _realised(decisions, y, abstain) -> dict:
    """Selective risk and coverage of ``decisions`` on the labels ``y``."""
    selected = decisions != abstain
    n = int(selected.sum())
    risk = float(np.mean(decisions[selected] != y[selected])) if n else None
    return {"n_rows": len(y), "n_predicted": n, "coverage": n / len(y), "risk": risk}


def _apply(clf, data: _Data, args) -> dict | None:
    """Write the --apply decisions; their realised risk and coverage, if labelled."""
    if data.X_apply is None:
        return None
    proba = clf.predict_proba(data.X_apply)
    decisions = clf.predict(data.X_apply)
    arrays = {} if data.y_apply is None else {"labels": data.y_apply}
    arrays.update(
        decision=decisions,
        confidence=np.max(proba, axis=1),
        proba=proba,
        classes=clf.classes_,
        method=np.array("SelectiveClassifier"),
    )
    write_arrays(
        args.out,
        arrays,
        class_names=named_columns(clf.classes_, data.given),
        label_name=args.label_col,
        keep=data.keep,
    )
    if data.y_apply is None:
        return {"n_rows": len(decisions)}
    return _realised(decisions, data.y_apply, clf.abstain_label)


def _summary(args, name, data: _Data, clf, failed, applied) -> dict:
    """What the command reports (printed as JSON with --json)."""
    thresholds = {
        str(c): (None if np.isinf(t) else float(t))
        for c, t in zip(clf.classes_.tolist(), clf.thresholds_)
    }
    return {
        "method": name,
        "input": data.key,
        "bound": clf.method,
        "target_risk": clf.target_risk,
        "delta": clf.delta,
        "per_class": clf.per_class,
        "abstain_label": clf.abstain_label,
        "n_fit": len(data.y_fit),
        "n_threshold_rows": clf.n_threshold_rows_,
        "threshold": None if clf.per_class else thresholds[str(clf.classes_[0])],
        "thresholds": thresholds,
        "risk_upper_bound": float(clf.risk_upper_bound_),
        "coverage": clf.coverage_,
        "met": not failed,
        "warning": " ".join(failed) or None,
        "apply": applied,
        "out": args.out,
        "save": args.save,
    }


def _print_report(args, summary: dict, failed) -> None:
    """The plain-text report of select-threshold."""
    s = summary
    print(
        paragraph(
            f"{s['method']} ({s['input']}) with an {s['bound'].upper()} "
            f"threshold: calibrator fitted on {s['n_fit'] - s['n_threshold_rows']} "
            f"rows, threshold chosen on {s['n_threshold_rows']} rows (target "
            f"selective risk {s['target_risk']:g}, delta {s['delta']:g})."
        )
    )
    shown = {
        c: ("inf (abstain)" if t is None else f"{t:.6g}")
        for c, t in s["thresholds"].items()
    }
    if s["per_class"]:
        print("thresholds: " + ", ".join(f"{c}: {t}" for c, t in shown.items()))
    else:
        print(f"threshold: {next(iter(shown.values()))}")
    print(
        f"selective risk upper bound: {s['risk_upper_bound']:.4g} (holds with "
        f"probability {1 - s['delta']:.3g})"
    )
    print(f"coverage on the threshold rows: {s['coverage']:.4f}")
    if failed:
        where = "the rows predicted as those classes" if s["per_class"] else "every row"
        print(paragraph(f"No threshold meets the target: {' '.join(failed)}"))
        print(f"Decision: abstain ({s['abstain_label']!r}) on {where}.")
    applied = s["apply"]
    if applied is not None:
        print(f"Wrote the decisions of {applied['n_rows']} rows to {args.out}.")
        if "coverage" in applied:
            risk = applied["risk"]
            risk = "undefined (no row predicted)" if risk is None else f"{risk:.4f}"
            print(
                f"on {args.apply}: selective risk {risk}, coverage "
                f"{applied['coverage']:.4f} ({applied['n_predicted']} of "
                f"{applied['n_rows']} rows predicted)"
            )
    if args.save is not None:
        print(
            f"Wrote the fitted SelectiveClassifier to {args.save} (load it in "
            "Python with skcal.utils.persistence.load)."
        )


def _cmd_select_threshold(args) -> int:
    """Run ``skcal select-threshold``; returns the exit code."""
    prog, report = "skcal select-threshold", reporter(args)
    from ..decision import SelectiveClassifier

    name, cls = resolve_method(args.method)
    check_device(args.device)
    if (args.apply is None) != (args.out is None):
        raise CLIError(
            "--apply and --out go together: --apply FILE writes the decisions "
            "of FILE to --out; give both, or neither."
        )
    if args.out is not None:
        check_output_path(args.out, {"--fit": args.fit, "--apply": args.apply})
    if args.save is not None:
        check_model_path(args.save, "--save")
    data = _read_data(args, name, cls, report)
    calibrator = make_estimator(
        cls, device=args.device, seed=args.seed, params=data.params
    )
    clf = SelectiveClassifier(
        calibrator,
        target_risk=args.target_risk,
        delta=args.delta,
        method=args.bound,
        per_class=args.per_class,
        abstain_label=_abstain_label(args.abstain_label, data.classes),
        threshold_fraction=args.threshold_fraction,
        random_state=args.seed,
    )
    report(f"fitting {name} and a {args.bound} threshold on {len(data.y_fit)} rows ...")
    failed = _fit(clf, data, prog)
    applied = _apply(clf, data, args)
    if args.save is not None:
        write_model(args.save, clf)
    summary = _summary(args, name, data, clf, failed, applied)
    if args.json:
        print_json(summary)
    else:
        _print_report(args, summary, failed)
    return 0


def add_select_threshold(sub) -> None:
    """The parser of ``skcal select-threshold``, a subparser of ``sub``."""
    parser = sub.add_parser(
        "select-threshold",
        help="abstain unless confident, with a selective risk guarantee",
        description=wrap(
            "Fit a SelectiveClassifier (skcal.decision) around the calibrator "
            "--method on the --fit file (scores, or embeddings for a local "
            "calibrator, and labels): the calibrator on "
            "part of the rows, a confidence threshold on the others (the "
            "threshold rows) such that the selective risk, the error rate "
            "among the rows predicted rather than abstained on, is at most "
            "--target-risk with probability 1 - delta. Prints the threshold(s), "
            "the upper bound on the selective risk and the coverage on the "
            "threshold rows. With --apply, writes each row's decision (a class, "
            "or --abstain-label), confidence (its largest probability) and "
            "calibrated probabilities to --out, and on a labelled --apply file "
            "prints the selective risk and coverage realised there. When no "
            "threshold meets the target, it says so and abstains on every row "
            "(exit code 0)."
        ),
        epilog=lambda: (
            f"{FORMATS_HELP}\n\n{methods_help(head_note=True)}\n\nexample:\n  skcal "
            "select-threshold --method temperature --fit cal.npz --target-risk "
            "0.05 --apply test.npz --out decisions.csv"
        ),
        formatter_class=HelpFormatter,
    )
    parser.add_argument("--method", required=True, help="calibrator (see below)")
    add_fit(parser)
    _add_threshold_options(parser)
    _add_file_options(parser)
    add_common(parser)
    parser.set_defaults(handler=_cmd_select_threshold)


def _add_threshold_options(parser) -> None:
    """--target-risk, --delta, --bound, --per-class, --threshold-fraction and
    --abstain-label."""
    parser.add_argument(
        "--target-risk",
        type=fraction_type("0.05"),
        metavar="R",
        default=0.05,
        help="largest acceptable selective risk, the error rate among the "
        "predicted rows (default 0.05)",
    )
    parser.add_argument(
        "--delta",
        metavar="D",
        type=fraction_type("0.1"),
        default=0.1,
        help="probability that the guarantee fails (default 0.1)",
    )
    parser.add_argument(
        "--bound",
        choices=["sgr", "ltt"],
        default="sgr",
        help="sgr (default): selection with guaranteed risk, a binary search "
        "with binomial bounds; ltt: learn then test, fixed-sequence tests",
    )
    parser.add_argument(
        "--per-class",
        action="store_true",
        help="one threshold per predicted class (each at delta / n_classes)",
    )
    parser.add_argument(
        "--threshold-fraction",
        metavar="F",
        type=fraction_type("0.5"),
        default=0.5,
        help="share of the --fit rows that choose the threshold; the calibrator "
        "is fitted on the others (default 0.5)",
    )
    parser.add_argument(
        "--abstain-label",
        default=None,
        metavar="LABEL",
        help="the decision of an abstention, not a class (default -1, or "
        "'abstain' for string classes)",
    )


def _add_file_options(parser) -> None:
    """--apply, --out, --input, --head, --param, --save and the column options."""
    parser.add_argument(
        "--apply", metavar="FILE", help="data to decide on (needs --out)"
    )
    parser.add_argument(
        "--out",
        metavar="FILE",
        help="output .npz, .csv or .parquet: decision, confidence and the "
        "calibrated probabilities (proba_<class>) of each --apply row",
    )
    add_input(
        parser, "scores to read: auto (default) uses logits when the files have them"
    )
    add_head_and_param(
        parser, "set a calibrator parameter (repeatable), as in skcal calibrate"
    )
    parser.add_argument(
        "--save",
        metavar="FILE",
        help="also write the fitted SelectiveClassifier: model.skops (safe to "
        "load with skcal.utils.persistence.load, needs skops) or model.pkl "
        "(a pickle)",
    )
    add_column_options(parser)
    add_keep_cols(parser, "--apply")
