"""``skcal export``: a saved calibrator (or calibrated classifier) as an
ONNX graph or a TorchScript module, optionally checked on a file of scores.

``skcal export --model model.skops --out model.onnx [--format
onnx|torchscript] [--dtype float32|float64] [--check scores.csv]``
"""

from __future__ import annotations

import os

import numpy as np

from ._common import CLIError, report_on_stderr, reporter
from ._format import print_json, wrap
from ._io import ArrayFile
from ._models import read_model
from ._options import HelpFormatter, add_output_flags, add_trust_options


def _is_wrapper(model) -> bool:
    """Whether ``model`` is a classifier with its calibrators (features in)."""
    return hasattr(model, "calibrated_classifiers_")


def _check_model(model, path: str) -> str:
    """What the model reads: "features" for a CalibratedClassifier, else
    the calibrator's "logits" or "proba"."""
    if _is_wrapper(model):
        from sklearn.utils.validation import check_is_fitted

        check_is_fitted(model)
        return "features"
    if not hasattr(model, "to_torch"):
        raise CLIError(
            f"--model {path} holds a {type(model).__name__}, which skcal cannot "
            "export: it has no to_torch method. Export a skcal calibrator, a "
            "search, a PriorShiftAdapter or a CalibratedClassifier."
        )
    from ._calibrate import _model_input

    key = _model_input(model, path)
    if key == "embeddings":
        raise CLIError(
            f"--model {path} is a local calibrator (it reads embeddings), which "
            "skcal does not export."
        )
    return key


def _export(model, args):
    """Write the model to ``args.out`` (ONNX or TorchScript)."""
    from ..exceptions import NotExportableError
    from ..export import to_onnx, to_torch

    dtype = np.float64 if args.dtype == "float64" else np.float32
    try:
        if args.format == "onnx":
            return to_onnx(model, args.out, dtype=dtype)
        if _is_wrapper(model):
            raise CLIError(
                f"--model {args.model} is a CalibratedClassifier, whose classifier "
                "is no torch module: export it with --format onnx (skl2onnx "
                "converts the classifier), or export its calibrator alone."
            )
        from .._torch._export_deploy import save_script

        save_script(to_torch(model), args.out, dtype)
        return None
    except NotExportableError as exc:
        raise CLIError(f"--model {args.model}: {exc}") from None


def _read_check(path: str, key: str, model) -> np.ndarray:
    """The rows of the --check file: the model's scores, or features."""
    if key != "features":
        X = ArrayFile(path).matrix(key, f"the {key} the model reads")
    elif path.endswith(".npz"):
        X = ArrayFile(path).matrix("X", "the features X of the classifier")
    else:
        X = _read_table(path)
    n = getattr(model, "n_features_in_", X.shape[1])
    if X.shape[1] != n:
        raise CLIError(
            f"--check {path} has {X.shape[1]} columns, but the model reads {n} "
            f"({key}); check it on rows like those it was fitted on."
        )
    return X


def _read_table(path: str) -> np.ndarray:
    """A CSV (header line optional) or .npy of numbers, as a float matrix."""
    if path.endswith(".npy"):
        X = np.load(path, allow_pickle=False)
    else:
        with open(path) as file:
            first = file.readline().split(",")
        try:
            [float(v) for v in first]
            skip = 0
        except ValueError:  # a header
            skip = 1
        X = np.loadtxt(path, delimiter=",", skiprows=skip, ndmin=2)
    X = np.asarray(X, dtype=np.float64)
    if X.ndim != 2 or not np.isfinite(X).all():
        raise CLIError(f"--check {path} must hold a finite 2-D table of numbers.")
    return X


def _run_file(args, X: np.ndarray) -> np.ndarray:
    """The probabilities that the written file gives for ``X``."""
    dtype = np.float64 if args.dtype == "float64" else np.float32
    X = np.ascontiguousarray(X, dtype=dtype)
    if args.format == "onnx":
        import onnxruntime

        session = onnxruntime.InferenceSession(
            args.out, providers=["CPUExecutionProvider"]
        )
        outputs = [o.name for o in session.get_outputs()]
        name = "probabilities" if "probabilities" in outputs else outputs[0]
        out = session.run([name], {session.get_inputs()[0].name: X})[0]
    else:
        from .._torch._export_deploy import run_script

        out = run_script(args.out, X)
    return np.asarray(out, dtype=np.float64)


def _cmd_export(args) -> int:
    """Run ``skcal export``; returns the exit code."""
    report = reporter(args)
    folder = os.path.dirname(os.path.abspath(args.out))
    if not os.path.isdir(folder):
        raise CLIError(f"cannot write {args.out}: folder {folder} does not exist.")
    model = read_model(args.model, trusted=args.trust, allow_pickle=args.allow_pickle)
    key = _check_model(model, args.model)
    X = None if args.check is None else _read_check(args.check, key, model)
    with report_on_stderr("skcal export"):
        _export(model, args)
        report(f"wrote {args.out} ({args.format}, {args.dtype})")
        difference = None
        if X is not None:
            dtype = np.float64 if args.dtype == "float64" else np.float32
            reference = model.predict_proba(X.astype(dtype))
            difference = float(np.abs(_run_file(args, X) - reference).max())
    result = {
        "model": args.model,
        "estimator": type(model).__name__,
        "input": key,
        "out": args.out,
        "format": args.format,
        "dtype": args.dtype,
        "bytes": os.path.getsize(args.out),
        "n_check": None if X is None else len(X),
        "max_abs_difference": difference,
    }
    if args.json:
        print_json(result)
        return 0
    print(
        f"{result['estimator']} ({key}) from {args.model}: wrote {args.out} "
        f"({args.format}, {args.dtype}, {result['bytes']} bytes)."
    )
    if difference is not None:
        print(
            f"largest difference from skcal's predict_proba on the {len(X)} rows "
            f"of {args.check}: {difference:.3g}"
        )
    return 0


def add_export(sub) -> None:
    """The parser of ``skcal export``, a subparser of ``sub``."""
    parser = sub.add_parser(
        "export",
        help="write a saved calibrator as an ONNX graph or a TorchScript module",
        description=wrap(
            "Load a calibrator, search or adapter saved by skcal calibrate/select "
            "--save (or a CalibratedClassifier saved from Python) and write it to "
            "--out as an ONNX graph (run by onnxruntime; a CalibratedClassifier "
            "becomes one graph from the features to the calibrated probabilities "
            "and the label) or a TorchScript module (torch.jit.load runs it "
            "without skcal). With --check, runs the written file on the rows of "
            "a file (scores for a calibrator, features for a "
            "CalibratedClassifier) and prints its largest difference from "
            "skcal's predict_proba."
        ),
        epilog=(
            "example:\n  skcal calibrate --method temperature --fit cal.npz "
            "--apply test.npz --out test_cal.npz --save ts.skops\n"
            "  skcal export --model ts.skops --out ts.onnx --check test.npz"
        ),
        formatter_class=HelpFormatter,
    )
    parser.add_argument(
        "--model",
        required=True,
        metavar="FILE",
        help="the fitted model: model.skops (or a pickle, with --allow-pickle)",
    )
    parser.add_argument("--out", required=True, metavar="FILE", help="file to write")
    parser.add_argument(
        "--format",
        choices=["onnx", "torchscript"],
        default="onnx",
        help="(default onnx)",
    )
    parser.add_argument(
        "--dtype",
        choices=["float32", "float64"],
        default="float32",
        help="float type of the graph or module (default float32)",
    )
    parser.add_argument(
        "--check",
        metavar="FILE",
        help="rows to run the written file on (the scores the model reads, as in "
        "skcal apply; features for a CalibratedClassifier: npz array X, CSV or .npy)",
    )
    add_trust_options(parser)
    add_output_flags(parser)
    parser.set_defaults(handler=_cmd_export)
