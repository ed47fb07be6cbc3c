"""The ``adapt`` command: label-shift adaptation of a saved calibrator.

``skcal adapt --model cal.skops --fit cal.npz --target target.npz --out
adapted.npz`` wraps a calibrator saved by ``calibrate --save`` (or ``select
--save``) in :class:`skcal.shift.PriorShiftAdapter` without refitting it:
the labeled ``--fit`` file (the calibration data) gives the source class
priors (and, for BBSE and RLLS, the confusion matrix of the calibrated
predictions); the unlabeled ``--target`` file gives the new class priors,
estimated from its calibrated probabilities. It writes the re-weighted
probabilities of the target rows and prints the estimated priors, with
bootstrap intervals, and the metrics before and after adaptation when the
target file has labels.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

from ._calibrate import _check_model_predicts, _model_input
from ._columns import named_columns
from ._common import report_on_stderr, reporter
from ._format import (
    evaluation_row,
    format_table,
    paragraph,
    print_json,
    print_metrics,
    wrap,
)
from ._inputs import read_model_scores
from ._io import check_output_path, file_format, write_arrays
from ._models import read_model
from ._options import (
    FORMATS_HELP,
    HelpFormatter,
    _confidence_level,
    add_column_options,
    add_keep_cols,
    add_output_flags,
    add_seed,
    add_trust_options,
    int_type,
)

#: the estimators of the target priors, in ``--method``
METHODS = ("em", "bbse", "rlls")
#: the columns of the table of priors, those present
_PRIOR_COLUMNS = (
    "class",
    "source",
    "target",
    "estimated",
    "low",
    "high",
    "weight",
    "true",
)


def _adapter(args, model):
    """A PriorShiftAdapter around the fitted ``model``, which it does not refit."""
    from sklearn.frozen import FrozenEstimator

    from ..shift import PriorShiftAdapter

    return PriorShiftAdapter(
        FrozenEstimator(model),
        method=args.method,
        tol=args.tol,
        max_iter=args.max_iter,
        prior_strength=args.prior_strength,
        shift_test=None if args.no_shift_test else "bic",
        reliability_check=not args.no_reliability_check,
        n_resamples=args.n_resamples,
        confidence_level=args.confidence_level,
        random_state=args.seed,
        # the bootstrap's bar, on a terminal only (not in logs or pipes)
        verbose=int(not args.quiet and sys.stderr.isatty()),
    )


def _prior_rows(adapter, y_target) -> list[dict]:
    """One row per class: source prior, estimated target prior (interval),
    importance weight, and the target file's class frequency when labeled."""
    est = adapter.prior_estimate_
    classes = adapter.classes_
    freq = None
    if y_target is not None:
        freq = np.array([np.mean(y_target == c) for c in classes])
    rows = []
    for j, label in enumerate(classes):
        row = {
            "class": str(label),
            "source": float(adapter.source_priors_[j]),
            "target": float(adapter.priors_[j]),
        }
        if not est.shift_detected or est.reliable is False:  # set aside
            row["estimated"] = float(est.estimated[j])
        if est.low is not None:
            row["low"], row["high"] = float(est.low[j]), float(est.high[j])
        row["weight"] = float(est.weights[j])
        if freq is not None:
            row["true"] = float(freq[j])
        rows.append(row)
    return rows


def _write(args, adapter, proba, y_target, keep) -> None:
    """The output file: proba, predict, classes (and labels); in npz also
    the priors, their interval and the source priors. Columns are named as
    calibrate and apply name them (``proba_<class>``), after the target's
    columns of ``keep``."""
    classes = adapter.classes_
    arrays = {} if y_target is None else {"labels": y_target}
    arrays |= {
        "predict": classes[np.argmax(proba, axis=1)],
        "proba": proba,
        "classes": classes,
    }
    if file_format(args.out) == "npz":
        est = adapter.prior_estimate_
        arrays |= {"priors": adapter.priors_, "source_priors": adapter.source_priors_}
        if est.low is not None:
            arrays |= {"priors_low": est.low, "priors_high": est.high}
        arrays["method"] = np.array(f"PriorShiftAdapter({args.method})")
    write_arrays(
        args.out,
        arrays,
        class_names=named_columns(classes, None),
        label_name=getattr(args, "label_col", None),
        keep=keep,
    )


def _metric_rows(name, method, classes, y, before, after) -> list[dict]:
    """The metrics on the target labels before and after adaptation, if any."""
    if y is None:
        return []
    return [
        {
            "method": f"{name} (not adapted)",
            **evaluation_row(y, before, labels=classes),
        },
        {"method": f"adapted ({method})", **evaluation_row(y, after, labels=classes)},
    ]


def _summary(args, name, adapter, n_fit, n_target) -> str:
    """The first line of the report."""
    est = adapter.prior_estimate_
    how = f"{args.method.upper()}"
    if args.method == "em":
        state = "converged" if est.converged else "did NOT converge"
        how += f", {state} in {est.n_iter} iterations"
    interval = ""
    if est.low is not None:
        level = round(100 * args.confidence_level)
        interval = f" ({level}% bootstrap intervals of {args.n_resamples} resamples)"
    return paragraph(
        f"{name} from {args.model}, source priors from {n_fit} labeled rows of "
        f"{args.fit}; target priors estimated by {how} from {n_target} rows of "
        f"{args.target}{interval}; {_shift_verdict(est)}; wrote the adapted "
        f"probabilities to {args.out}."
    )


def _shift_verdict(est) -> str:
    """What the shift test decided, with its numbers."""
    ratio = f"2 log likelihood ratio {est.statistic:.4g}"
    if est.threshold is None:
        return f"no shift test ({ratio})"
    if est.shift_detected and est.reliable is False:
        e = est.simulated_errors
        return (
            f"shift detected ({ratio} > BIC threshold {est.threshold:.4g}), but "
            "the estimate is unreliable here: kept the calibrated probabilities "
            "(on shifted target sets drawn from the --fit rows, adapting gave a "
            f"prior MSE of {e[0]:.3g} against {e[1]:.3g} without, a log loss of "
            f"{e[2]:.4g} against {e[3]:.4g}; --no-reliability-check adapts anyway)"
        )
    if est.shift_detected:
        return f"shift detected ({ratio} > BIC threshold {est.threshold:.4g})"
    return (
        f"no shift detected ({ratio} <= BIC threshold {est.threshold:.4g}): the "
        "target priors are the source ones and the probabilities the calibrated "
        "ones (--no-shift-test adapts anyway)"
    )


def _cmd_adapt(args) -> int:
    """Run ``skcal adapt``; returns the exit code."""
    prog, report = "skcal adapt", reporter(args)
    inputs = {"--fit": args.fit, "--target": args.target, "--model": args.model}
    check_output_path(args.out, inputs)  # fail before loading on a bad name
    model = read_model(args.model, trusted=args.trust, allow_pickle=args.allow_pickle)
    key = _model_input(model, args.model)
    _check_model_predicts(model, args.model)
    name = type(model).__name__
    X_fit, y_fit, _ = read_model_scores(
        args, model, key, "--fit", args.fit, labeled=True
    )
    X_target, y_target, target = read_model_scores(
        args, model, key, "--target", args.target, labeled=False
    )
    keep = target.passthrough(args.keep_cols, len(X_target))
    report(f"estimating the priors of {len(X_target)} rows of {args.target} ...")
    adapter = _adapter(args, model)
    with report_on_stderr(prog):
        adapter.fit(X_fit, y_fit).adapt(X_target)
        proba = adapter.predict_proba(X_target)
        before = model.predict_proba(X_target)
    _write(args, adapter, proba, y_target, keep)
    priors = _prior_rows(adapter, y_target)
    metrics = _metric_rows(name, args.method, adapter.classes_, y_target, before, proba)
    if args.json:
        est = adapter.prior_estimate_
        print_json(
            {
                "model": args.model,
                "estimator": name,
                "method": args.method,
                "n_fit": len(X_fit),
                "n_target": len(X_target),
                "n_iter": est.n_iter,
                "converged": est.converged,
                "shift_detected": est.shift_detected,
                "reliable": est.reliable,
                "p_value": est.p_value,
                "statistic": est.statistic,
                "threshold": est.threshold,
                "confidence_level": args.confidence_level,
                "n_resamples": args.n_resamples,
                "priors": priors,
                "out": args.out,
                "metrics": metrics,
            }
        )
        return 0
    print(_summary(args, name, adapter, len(X_fit), len(X_target)))
    columns = [c for c in _PRIOR_COLUMNS if c in priors[0]]
    print("\nClass priors (weight = target / source):")
    print(format_table(priors, columns))
    if metrics:
        print_metrics(metrics, args.target)
    return 0


def add_adapt(sub) -> None:
    """The parser of ``skcal adapt``, a subparser of ``sub``."""
    parser = sub.add_parser(
        "adapt",
        help="re-weight a saved calibrator's probabilities to new class priors",
        description=wrap(
            "Label-shift adaptation: load a calibrator saved by skcal calibrate "
            "--save (or select --save), take the source class priors from the "
            "labeled --fit file (its calibration data), estimate the class priors "
            "of the unlabeled --target file from its calibrated probabilities "
            "(EM of Saerens et al. 2002, BBSE of Lipton et al. 2018 or RLLS of "
            "Azizzadenesheli et al. 2019), and write the re-weighted probabilities "
            "of the --target rows to --out (proba, predict, classes; in npz also "
            "priors, priors_low, priors_high and source_priors). Prints the "
            "estimated priors with bootstrap intervals, and the metrics before and "
            "after adaptation when the --target file has labels. The calibrator "
            "is not refitted."
        ),
        epilog=(
            f"{FORMATS_HELP}\n\nexample:\n  skcal calibrate --method bcts "
            "--fit cal.npz --apply val.npz --out val_cal.npz --save bcts.skops\n"
            "  skcal adapt --model bcts.skops --fit cal.npz --target new.npz "
            "--out new_adapted.npz"
        ),
        formatter_class=HelpFormatter,
    )
    _add_model_options(parser)
    parser.add_argument(
        "--fit",
        required=True,
        metavar="FILE",
        help="the calibration data the model was fitted on (scores and labels): "
        "the source priors",
    )
    parser.add_argument(
        "--target",
        required=True,
        metavar="FILE",
        help="unlabeled scores of the new data (labels, if any, are only used "
        "for the metrics)",
    )
    parser.add_argument(
        "--out", required=True, metavar="FILE", help="output .npz, .csv or .parquet"
    )
    _add_estimation_options(parser)
    add_column_options(parser)
    add_keep_cols(parser, "--target")
    add_seed(parser, "seed of the bootstrap")
    add_output_flags(parser)
    parser.set_defaults(handler=_cmd_adapt)


def _add_model_options(parser) -> None:
    """``--model``, ``--trust`` and ``--allow-pickle``."""
    parser.add_argument(
        "--model",
        required=True,
        metavar="FILE",
        help="the fitted calibrator: model.skops (or a pickle, with --allow-pickle)",
    )
    add_trust_options(parser)


def _add_estimation_options(parser) -> None:
    """``--method``, ``--n-resamples``, ``--confidence-level``, ``--tol``,
    ``--max-iter``, ``--prior-strength``, ``--no-shift-test``."""
    parser.add_argument(
        "--method",
        choices=METHODS,
        default="em",
        help="estimator of the target priors: em (EM on the calibrated "
        "probabilities, the default and usually the most accurate), "
        "bbse or rlls (from the confusion matrix of the --fit rows)",
    )
    parser.add_argument(
        "--n-resamples",
        type=int_type(lambda value: value >= 0, "a non-negative integer"),
        default=200,
        help="bootstrap resamples of the target rows for the intervals (default "
        "200; 0: no interval); each is one more estimate, so the intervals "
        "cost about n-resamples times the point estimate (many classes: lower "
        "it, or 0)",
    )
    parser.add_argument(
        "--confidence-level",
        type=_confidence_level,
        default=0.9,
        help="nominal coverage of the intervals (default 0.9)",
    )
    parser.add_argument(
        "--tol", type=float, default=1e-8, help="EM's convergence tolerance"
    )
    parser.add_argument(
        "--max-iter",
        type=int_type(lambda value: value >= 1, "a positive integer"),
        default=1000,
        help="EM's iteration cap (default 1000)",
    )
    parser.add_argument(
        "--prior-strength",
        type=_prior_strength,
        default="auto",
        help="EM's pseudo-rows toward the source priors (default auto: one per "
        "class; 0: plain maximum likelihood, which can drive a class's prior "
        "to 0)",
    )
    parser.add_argument(
        "--no-shift-test",
        action="store_true",
        help="adapt even when the target rows show no shift (by default the "
        "source priors are kept unless the estimate passes a BIC test and a "
        "test against shift-free target sets simulated from the --fit rows)",
    )
    parser.add_argument(
        "--no-reliability-check",
        action="store_true",
        help="adapt even when the estimator, run on shifted target sets drawn "
        "from the --fit rows, was less accurate than not adapting (by default "
        "the calibrated probabilities are then kept, with a warning)",
    )


def _prior_strength(text: str):
    """``auto`` or a non-negative number."""
    if text == "auto":
        return text
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value >= 0:
        raise argparse.ArgumentTypeError(
            f"expected 'auto' or a non-negative number, got {text!r}"
        )
    return value
