"""The ``select`` command: choose a calibrator by cross-validation.

It runs :class:`~skcal.model_selection.CalibratorSearchCV` on one file of
scores and labels, prints the candidates' cross-fitted scores, the selected
calibrator and why; optionally its calibration report on a ``--test`` file,
and the fitted search (``--save``).
"""

from __future__ import annotations

import argparse
import math
import textwrap
import time
from dataclasses import dataclass

import numpy as np

from ._columns import Columns
from ._common import CLIError, check_device, report_on_stderr, reporter
from ._format import format_table, interval_report, paragraph, print_json, wrap
from ._inputs import (
    align_scores,
    check_known_labels,
    file_classes,
    read_labels,
    same_classes,
    score_key,
)
from ._io import ArrayFile
from ._methods import (
    candidate_list,
    comma_names,
    make_estimator,
    method_aliases,
    resolve_method,
)
from ._models import check_model_path, saved_note, write_model
from ._options import (
    FORMATS_HELP,
    HelpFormatter,
    add_column_options,
    add_common,
    add_fit,
    add_input,
    add_interval_options,
    add_n_bins,
    add_save,
    add_seed,
    int_type,
)


def _search_defaults() -> list:
    """Fresh instances of the default candidates of CalibratorSearchCV."""
    from ..model_selection._search import _default_candidates

    return _default_candidates()


def _candidate_list() -> str:
    """The default candidates with their aliases, for messages and help."""
    aliases = method_aliases()
    names = [type(est).__name__ for est in _search_defaults()]
    return ", ".join(
        f"{name} ({', '.join(aliases[name])})" if aliases.get(name) else name
        for name in names
    )


def _local_candidate(name: str, cls_name: str) -> CLIError:
    """The error of a --candidates name that is a local calibrator."""
    return CLIError(
        f"--candidates {name!r}: {cls_name} calibrates embeddings, and skcal "
        "select reads scores (logits or probabilities); give score calibrators "
        f"(the defaults: {_candidate_list()}), or run skcal calibrate --method "
        f"{name} on a file with embeddings."
    )


def _parse_candidates(tokens, *, device: str, seed=None) -> list:
    """The candidates named by ``--candidates`` (the defaults if None), on ``device``.

    Each token may hold comma-separated names (any score calibrator's class
    name or alias, any case); repeated names count once. A default
    candidate keeps the configuration of CalibratorSearchCV's default set;
    any other calibrator is its class with its defaults (``random_state``
    from ``seed``).

    Raises
    ------
    CLIError
        If a name is empty, unknown or a local calibrator; the message lists
        the valid ones.
    """
    from ..discovery import all_estimators

    defaults = {type(est).__name__: est for est in _search_defaults()}
    if tokens is None:
        candidates = list(defaults.values())
    else:
        names, what = comma_names(tokens, none="no name")
        if what:
            raise CLIError(
                f"--candidates {' '.join(tokens)!r} has {what}: give one or more "
                "calibrators, or leave out --candidates to compare the defaults: "
                f"{_candidate_list()}."
            )
        score = dict(all_estimators("score"))
        chosen = {}
        for name in names:
            cls_name, cls = resolve_method(name)  # unknown names: its error
            if cls_name not in score:
                raise _local_candidate(name, cls_name)
            chosen.setdefault(cls_name, cls)
        candidates = [
            defaults[n]
            if n in defaults
            else make_estimator(c, device=device, seed=seed)
            for n, c in chosen.items()
        ]
    for estimator in candidates:
        if "device" in estimator.get_params(deep=False):
            estimator.set_params(device=device)
    return candidates


def _check_scoring(name: str) -> str:
    """The canonical scorer name of ``name`` (a scorer of skcal or
    scikit-learn, or a metric name or alias of skcal's shared table, any
    case: ``ece``, ``NLL``), else a CLIError."""
    from ..metrics._scorer import scorer_name

    try:
        return scorer_name(name)
    except ValueError as exc:
        raise CLIError(
            f"--scoring: {exc} Higher is better; neg_log_loss is the default."
        ) from None


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
    """The --fit file's scores and labels, and the --test file's, checked."""
    columns = Columns.from_args(args)
    fit = ArrayFile(args.fit, columns)
    test = None if args.test is None else ArrayFile(args.test, columns)
    files = [("--fit", fit)] + ([] if test is None else [("--test", test)])
    key = score_key(
        args,
        files,
        report,
        needs="the search compares score calibrators, which need",
        local_hint=" (it holds embeddings, but the candidates calibrate scores: "
        "add the classifier's logits)",
    )
    why = f"the scores to calibrate (--input {args.input})"
    X = fit.matrix(key, why)
    y = read_labels(fit, "the true labels of the calibration samples", len(X), key)
    classes_, classes = file_classes(fit, key, y, X.shape[1], report, "--fit ")
    X_test = y_test = None
    if test is not None:
        X_test = test.matrix(key, why)
        same_classes(key, fit, X, "--test", test, X_test)
        X_test = align_scores(test, key, X_test, classes_, "--test")
        why_test = "the true labels, which --test reports on"
        y_test = read_labels(test, why_test, len(X_test), key)
        # before the search, which can take minutes
        check_known_labels(y_test, classes_, "--test", args.test, args.fit)
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


def _fit_search(search, data: _SelectionData, prog: str):
    """Fit time of the search and, with --test, its probabilities there."""
    start = time.perf_counter()
    with report_on_stderr(prog):
        search.fit(data.X, data.y)
        elapsed = time.perf_counter() - start
        proba = None
        if data.X_test is not None:
            proba = search.predict_proba(data.X_test)
    return elapsed, proba


def _selection_json(args, data, search, scoring, elapsed, intervals) -> dict:
    """What ``select --json`` prints."""
    test = {}
    if intervals is not None:
        test = {
            "test": {
                "file": args.test,
                "n_samples": len(data.y_test),
                "intervals": intervals.to_dict(),
            }
        }
    return {
        "fit": args.fit,
        "input": data.key,
        "n_samples": len(data.y),
        "n_classes": len(search.classes_),
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


def _selection_note(args, search, scoring) -> str:
    """What the columns of the table of ``select`` are, and what the guard did."""
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
            "10 events (rows the classifier gets wrong, or right if fewer; "
            "temperature scaling needs 5), and keeps IdentityCalibrator, then "
            "TemperatureScaling, "
            "unless the best candidate lowers their per-row out-of-fold log "
            "loss by more than one standard error."
        )
    return note


def _print_selection(args, data, search, scoring, elapsed, intervals) -> None:
    """The report of ``select``: the candidates, the selected one and why."""
    n_samples, n_classes = len(data.y), len(search.classes_)
    guard = "off (--no-guard)" if args.no_guard else "one standard error"
    print(
        f"CalibratorSearchCV on {args.fit}: {n_samples} samples, {n_classes} "
        f"classes ({data.key})."
    )
    print(
        paragraph(
            f"{search.n_splits_}-fold stratified cross-fitting, shuffled with "
            f"seed {args.seed}; scoring {scoring} (higher is better); small-data "
            f"guard {guard}; {elapsed:.2f} s."
        )
        + "\n"
    )
    print(format_table(_selection_rows(search), _SELECTION_COLUMNS, left=("note",)))
    print("\n" + paragraph(_selection_note(args, search, scoring)))
    print("\n" + paragraph(f"Selected {search.selected_}: {search.selection_reason_}"))
    if intervals is not None:
        print(
            f"\n{search.selected_} (refitted on all {n_samples} samples) on the "
            f"labels of --test {args.test}:\n{intervals}"
        )
    if args.save is not None:
        print(f"\nWrote the fitted search to {args.save}.")
        print(paragraph(saved_note(args.save, "search")))


def _cmd_select(args) -> int:
    """Run ``skcal select``; returns the exit code."""
    from ..model_selection import CalibratorSearchCV

    prog, report = "skcal select", reporter(args)
    candidates = _parse_candidates(args.candidates, device=args.device, seed=args.seed)
    scoring = _check_scoring(args.scoring)
    check_device(args.device)
    if args.save is not None:
        check_model_path(args.save, "--save")  # fail before the search
    data = _read_selection_data(args, report)
    search = CalibratorSearchCV(
        candidates,
        scoring=scoring,
        cv=args.cv,
        guard=None if args.no_guard else "one_se",
        n_jobs=args.n_jobs,
        max_time=args.max_time,
        random_state=args.seed,
        verbose=0 if args.quiet else 1,
        input=data.key,
        classes=data.classes,
    )
    report(
        f"scoring {len(candidates)} candidate(s) by {args.cv}-fold cross-fitting "
        f"on {len(data.y)} samples ({data.key}) ..."
    )
    elapsed, proba = _fit_search(search, data, prog)
    intervals = None
    if proba is not None:
        intervals = interval_report(args, data.y_test, proba, search.classes_, report)
    if args.save is not None:
        write_model(args.save, search)
    if args.json:
        print_json(_selection_json(args, data, search, scoring, elapsed, intervals))
        return 0
    _print_selection(args, data, search, scoring, elapsed, intervals)
    return 0


_at_least_two = int_type(lambda value: value >= 2, "an integer of at least 2 (folds)")
_n_jobs = int_type(lambda value: value != 0, "a non-zero integer (-1: every CPU)")


def _seconds(text: str) -> float:
    """``--max-time``: a number of seconds, 0 or more."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not value >= 0:  # NaN too
        raise argparse.ArgumentTypeError(
            f"expected a number of seconds, 0 or more, got {text!r}"
        )
    return value


def _select_epilog() -> str:
    """The epilog of ``select --help``: formats and the default candidates."""
    # read from the source: importing the candidates takes seconds (issue 37)
    candidates = textwrap.fill(
        candidate_list(), 79, initial_indent="  ", subsequent_indent="  "
    )
    return (
        f"{FORMATS_HELP}\n\ndefault candidates (case-insensitive; aliases in "
        "parentheses; --candidates takes any score calibrator):\n"
        f"{candidates}\n\nexample:\n  skcal select --fit cal.npz "
        "--test test.npz --save search.pkl"
    )


def add_select(sub) -> None:
    """The parser of ``skcal select``, a subparser of ``sub``."""
    parser = sub.add_parser(
        "select",
        help="choose a calibrator by cross-validation on one file",
        description=wrap(
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
        formatter_class=HelpFormatter,
    )
    add_fit(parser)
    add_input(
        parser,
        "scores of the candidates: auto (default) uses logits when every "
        "file has them, else proba",
    )
    _add_search_options(parser)
    _add_test_options(parser)
    add_save(
        parser,
        "write the fitted search (it predicts with the selected calibrator, "
        "refitted on all rows)",
        "search",
    )
    add_seed(
        parser, "seed of the folds, of the candidates and of the --test resampling"
    )
    add_column_options(parser)
    add_common(parser, device_use=", for the candidates that use torch", seed=False)
    parser.set_defaults(handler=_cmd_select)


def _add_search_options(parser) -> None:
    """The options of the search: candidates, folds, scoring, guard, jobs."""
    parser.add_argument(
        "--candidates",
        nargs="+",
        metavar="NAME",
        help="compare these calibrators (any score calibrator's name or alias, "
        "as for calibrate --method), separated by spaces or commas (default: "
        "the default candidates below)",
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
        "(default), a skcal or scikit-learn scorer name, or a metric name or "
        "alias, any case (ece, cwece, nll, brier: its negated error)",
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
        "--max-time",
        type=_seconds,
        default=None,
        metavar="SECONDS",
        help="time budget of the cross-fitting: the candidates not started "
        "after it are skipped (identity, temperature scaling and the first "
        "always run; default: no limit)",
    )


def _add_test_options(parser) -> None:
    """``--test`` and the options of its calibration report."""
    parser.add_argument(
        "--test",
        metavar="FILE",
        help="also a calibration report of the selected calibrator on this "
        "file's scores and labels, with bootstrap intervals",
    )
    add_n_bins(parser, " of the --test report")
    add_interval_options(parser, "--test")
