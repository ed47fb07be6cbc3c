"""The ``evaluate`` command: calibration metrics of files of predictions.

One file: its metrics against its labels, one per row. Several files of
the same rows: their metrics side by side, one column per file, and with
``--paired`` a paired bootstrap comparison of each file with the first.
``--ci`` adds bootstrap intervals, ``--local`` the local calibration
errors, ``--plot`` a reliability diagram.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from ._columns import Columns
from ._common import CLIError, check_device, reporter
from ._format import (
    METRICS_NOTE,
    evaluation_row,
    format_table,
    interval_report,
    paragraph,
    print_json,
    wrap,
)
from ._inputs import file_classes, read_labels, same_length
from ._io import ArrayFile
from ._options import (
    FORMATS_HELP,
    HelpFormatter,
    add_column_options,
    add_common,
    add_input,
    add_interval_options,
    add_n_bins,
    add_seed,
)

#: what the columns LCE and MLCE of ``evaluate --local`` are
_LOCAL_NOTE = "LCE / MLCE: local calibration error (mean / max), Barbera et al."
#: what the selective-prediction rows are
_SELECTIVE_NOTE = (
    "AURC / E-AURC / AUGRC: area under the risk-coverage curve (Geifman et "
    "al.), its excess over the best ranking, and the area under the "
    "generalized risk-coverage curve (Traub et al.), of the most probable "
    "class ranked by its probability; lower is better."
)
_RISK_NOTE = (
    " Coverage at risk {risk:g}: the largest share of the rows, most confident "
    "first, whose error rate is at most {risk:g}; higher is better."
)


def _selective_rows(args, file) -> dict:
    """AURC, E-AURC, AUGRC and, with --risk, the coverage at that risk."""
    from ..metrics import augrc, aurc, coverage_at_risk, eaurc

    kw = {"labels": file.classes}
    rows = {
        "AURC": aurc(file.y, file.proba, **kw),
        "E-AURC": eaurc(file.y, file.proba, **kw),
        "AUGRC": augrc(file.y, file.proba, **kw),
    }
    if args.risk is not None:
        rows[_risk_row(args.risk)] = coverage_at_risk(
            file.y, file.proba, risk=args.risk, **kw
        )
    return rows


def _risk_row(risk: float) -> str:
    return f"coverage at risk {risk:g}"


def _selective_note(args) -> str:
    risk = "" if args.risk is None else _RISK_NOTE.format(risk=args.risk)
    return paragraph(_SELECTIVE_NOTE + risk)


def _risk(text: str) -> float:
    """The value of ``--risk``: an error rate in [0, 1]."""
    import argparse

    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(
            f"--risk takes an error rate between 0 and 1 (such as 0.05); got {text!r}."
        )
    return value


def _evaluate_scores(args, data: ArrayFile, report):
    """Which scores of ``data`` to evaluate (``--input``), and their
    probabilities; the file they were read from.

    Column options name the columns of the user's own files. A file that
    lacks them but holds skcal's own ``proba_<class>`` columns (the --out
    of calibrate, apply or adapt) is read by those, with a note.
    """
    from dataclasses import replace

    from scipy.special import softmax

    key = args.input
    named = [k for k in ("logits", "proba") if data.columns.spec(k) is not None]
    if key == "auto" and len(named) == 1:  # --logit-cols or --proba-cols alone
        key = named[0]
    elif key == "auto":
        key = "proba" if "proba" in data or "logits" not in data else "logits"
        if key == "proba" and "logits" in data:
            report("evaluating proba (the file also holds logits; --input logits)")
    if named and key not in data:
        own = ArrayFile(data.path, replace(data.columns, logits=None, proba=None))
        if "proba" in own:
            report(
                f"{data.path} has no {data.describe(key)}: reading its "
                f"{own.describe('proba')}, skcal's own names"
            )
            data, key = own, "proba"
    scores = data.matrix(key, "the predictions to evaluate (proba, or logits)")
    return data, key, softmax(scores, axis=1) if key == "logits" else scores


def _plot_reliability(path, y, probas: dict, classes, n_bins) -> None:
    """One reliability diagram of the ``{name: proba}`` of the same rows.

    The bin counts of every prediction share one panel below the diagram.
    """
    try:
        from matplotlib.figure import Figure
    except ImportError:
        raise CLIError("--plot needs matplotlib: pip install matplotlib.") from None
    from ..display import ReliabilityDisplay

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
    """One FILE of ``evaluate``, read and checked (no metric yet)."""
    data, key, proba = _evaluate_scores(args, ArrayFile(path, columns), report)
    why = "the true labels (calibrate copies them from its --apply file)"
    y = read_labels(data, why, len(proba), key)
    classes, _ = file_classes(data, key, y, proba.shape[1], report)
    predictions = embeddings = None
    if "predict" in data:
        predictions = data.vector("predict", "")
        same_length(data, "predict", predictions, len(y), data.describe("labels"))
    if args.local:
        embeddings = data.matrix("embeddings", "which --local needs")
        same_length(data, "embeddings", embeddings, len(y), data.describe("labels"))
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
    from ..metrics import paired_comparison

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
    """What ``evaluate --json`` says of one file."""
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
    print("\n" + METRICS_NOTE.format(n_bins=args.n_bins))
    print(_selective_note(args))
    if args.local:
        print(_LOCAL_NOTE)
    if args.ci:
        print(f"\n{file.intervals}")
        if file.predictions is not None:
            print("The report's accuracy is that of the most probable class.")


def _side_by_side_rows(args, files: list[_Evaluated]) -> list[dict]:
    """One row per metric, one cell per file (with --ci: estimate [low, high])."""
    from ..metrics._report import format_p_value

    rows = []
    for metric in files[0].metrics:
        row = {"metric": metric}
        for file in files:
            report = file.intervals
            if report is not None and metric in report.metrics:
                ci = report[metric]
                star = "" if ci.covers_estimate else "*"
                row[file.name] = (
                    f"{ci.estimate:.4f}{star} [{ci.low:.4f}, {ci.high:.4f}]"
                )
            else:
                row[file.name] = f"{file.metrics[metric]:.4f}"
        rows.append(row)
    if args.ci:
        rows.append(
            {"metric": "ECCE p-value"}
            | {file.name: format_p_value(file.intervals.ecce_pvalue) for file in files}
        )
    return rows


def _print_side_by_side(args, files: list[_Evaluated], paired) -> None:
    """The report of ``evaluate FILE FILE ...``: one column per file."""
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
    print("\n" + paragraph(METRICS_NOTE.format(n_bins=args.n_bins)))
    print(_selective_note(args))
    if args.local:
        print(_LOCAL_NOTE)
    level = f"{100 * args.confidence_level:g}%"
    if args.ci:
        note = (
            f"[low, high]: {level} percentile bootstrap intervals of "
            f"skcal.metrics.calibration_report ({args.n_resamples} resamples, "
            f"at most 200 for cwECE, ECCE and smECE; seed {args.seed}); ECCE "
            "p-value: its test of perfect calibration. Calibration errors grow on "
            "resampled rows, so their intervals may lie above the estimate: a * "
            "marks an interval that excludes its estimate (--ci-method bca "
            "corrects this)."
        )
        if any(file.predictions is not None for file in files):
            note += " With intervals, accuracy is that of the most probable class."
        print(paragraph(note))
    if paired:
        _print_paired(args, first, paired, level)


def _print_paired(args, first: _Evaluated, paired: dict, level: str) -> None:
    """The table of ``--paired``: each file against the first."""
    from ..metrics._report import format_p_value

    rows = [
        {
            "file": name,
            "metric": metric,
            "difference": result.difference,
            f"{level} CI": f"[{result.low:.4f}, {result.high:.4f}]",
            "p-value": format_p_value(result.p_value),
        }
        for name, results in paired.items()
        for metric, result in results.items()
    ]
    print(
        "\n"
        + paragraph(
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
    """What ``evaluate --paired --json`` says of the comparisons."""
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


def _score_file(args, file: _Evaluated, report) -> None:
    """Set the metrics of ``file`` (with --local, LCE and MLCE) and, with
    --ci, its calibration report with bootstrap intervals."""
    from ..metrics import local_calibration_errors

    file.metrics = evaluation_row(
        file.y,
        file.proba,
        file.predictions,
        labels=file.classes,
        n_bins=args.n_bins,
    )
    file.metrics.update(_selective_rows(args, file))
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
        file.intervals = interval_report(args, file.y, file.proba, file.classes, report)


def _plot(args, files: list[_Evaluated]) -> None:
    """The reliability diagram of --plot, one curve per file."""
    probas = {file.name: file.proba for file in files}
    if args.names is None and len(files) == 1 and files[0].method is None:
        probas = {os.path.basename(files[0].path): files[0].proba}
    _plot_reliability(args.plot, files[0].y, probas, files[0].classes, args.n_bins)


def _evaluate_json(args, files: list[_Evaluated], paired) -> dict:
    """The output of ``evaluate --json``: one file, or every file by name."""
    if len(files) == 1:
        return {**_file_json(args, files[0]), "plot": args.plot}
    first = files[0]
    return {
        "files": {file.name: _file_json(args, file) for file in files},
        "n_samples": len(first.y),
        "n_classes": len(first.classes),
        "classes": first.classes,
        "plot": args.plot,
        **({"paired": _paired_json(args, first, paired)} if paired else {}),
    }


def _cmd_evaluate(args) -> int:
    """Run ``skcal evaluate``; returns the exit code."""
    report = reporter(args)
    if args.paired and len(args.files) < 2:
        raise CLIError(
            "--paired compares each file with the first: give two or more "
            "files (skcal evaluate a.npz b.npz --paired)."
        )
    names = _file_names(args)
    columns = Columns.from_args(args)
    if args.local:
        check_device(args.device)
    files = [
        _read_evaluated(args, path, name, columns, report)
        for path, name in zip(args.files, names)
    ]
    if args.names is None:
        _method_names(files)
    for other in files[1:]:  # before any metric, which can take a while
        _same_rows(files[0], other)
    for file in files:
        _score_file(args, file, report)
    paired = _paired(args, files, report) if args.paired else None
    if args.plot:
        _plot(args, files)
    if args.json:
        print_json(_evaluate_json(args, files, paired))
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


def add_evaluate(sub) -> None:
    """The parser of ``skcal evaluate``, a subparser of ``sub``."""
    parser = sub.add_parser(
        "evaluate",
        help="calibration metrics of files of probabilities and labels",
        description=wrap(
            "Print the metrics of the predictions in FILE against its "
            "labels: accuracy, NLL, Brier, ECE, cwECE, MCE, SoftECE, ECCE, smECE, "
            "and the selective-prediction areas AURC, E-AURC and AUGRC; --risk R "
            "adds the coverage at selective risk R; "
            "--local adds LCE and MLCE; --ci adds bootstrap confidence intervals. "
            "Accuracy uses the file's predict array "
            "when it has one (calibrate writes it), else the most probable class. "
            "Several files (such as calibrate --out files of one --apply file) "
            "must hold the same rows, with the same labels in the same order: "
            "their metrics are printed side by side, one column per file, and "
            "--paired compares each file with the first."
        ),
        epilog=lambda: (
            f"{FORMATS_HELP}\n\nexamples:\n  skcal evaluate out.npz --ci --plot "
            "diagram.png\n  skcal evaluate ts.npz vs.npz dirichlet.npz --paired"
        ),
        formatter_class=HelpFormatter,
    )
    _add_file_options(parser)
    _add_metric_options(parser)
    parser.add_argument(
        "--ci",
        action="store_true",
        help="also a calibration report: accuracy, NLL, Brier, ECE, cwECE, ECCE "
        "(with its p-value) and smECE with bootstrap confidence intervals "
        "(skcal.metrics.calibration_report; a few seconds)",
    )
    add_interval_options(parser, "--ci and --paired")
    add_seed(parser, "seed of the --ci and --paired resampling")
    add_column_options(parser)
    add_common(parser, device_use=", for --local", seed=False)
    parser.set_defaults(handler=_cmd_evaluate)


def _add_file_options(parser) -> None:
    """The files of ``evaluate``, their names and ``--paired``."""
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


def _add_metric_options(parser) -> None:
    """What ``evaluate`` reads and computes: --input, --n-bins, --plot, --local."""
    add_input(
        parser,
        "what to evaluate: auto (default) uses proba when present, else "
        "the softmax of logits",
    )
    add_n_bins(parser, " and the diagram")
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
        "--risk",
        type=_risk,
        metavar="R",
        help="also the coverage at selective risk R: the largest share of the "
        "rows, most confident first, whose error rate is at most R "
        "(skcal.metrics.coverage_at_risk)",
    )
