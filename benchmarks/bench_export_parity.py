"""Parity of exported calibrators with ``predict_proba`` on real tasks.

Every exportable calibrator is fitted on a real task's calibration pool
(``_lib/datasets``: a trained network's logits, or its embeddings and
linear head for the local calibrators) with ``input="logits"`` and
``input="proba"`` (the softmax of the logits), exported with
``skcal.export``, and run on the task's **test** rows (never seen by the
fit): the eager torch module (float64 and float32), the module scripted by
``torch.jit.script``, the ``torch.export`` program (float64, exported on 3
rows with a dynamic batch), and the ONNX graph under onnxruntime (float64
and float32). Each cell is ``max |export(X) - predict_proba(X)|`` over the
tasks, ``predict_proba`` given the rows in the float type the export reads.
Targets: 1e-6 in float64, 1e-5 in float32.

Run (by hand, from the repository root)::

    python benchmarks/bench_export_parity.py [--tasks letter satimage pendigits]
        [--n-cal 2000] [--out FILE] [--only-top-versus-all]

``--only-top-versus-all`` measures only the rows of :class:`TopVersusAll`
(one per inner calibrator of each protocol).
"""

import argparse
import sys
import time
import warnings

import numpy as np

SCORE = [
    "TemperatureScaling", "VectorScaling", "MatrixScaling",
    "BiasCorrectedTemperatureScaling", "DirichletCalibrator",
    "DirichletCalibratorCV", "StructuredMatrixScaling",
    "StructuredVectorScaling", "EnsembleTemperatureScaling",
    "ClassTemperatureScaling", "ParameterizedTemperatureScaling",
    "SMARTCalibrator", "IdentityCalibrator",
]  # fmt: skip
LOCAL = ["LocalNetCalibrator", "VQLocalCalibrator"]
#: the inner calibrators of TopVersusAll's rows (each protocol: scaling,
#: one map, binary), as "TopVersusAll(<inner>)"
TVA = [
    f"TopVersusAll({inner})"
    for inner in (
        "TemperatureScaling", "VectorScaling", "IsotonicCalibrator",
        "CenteredIsotonicCalibrator", "HistogramBinningCalibrator",
        "PlattCalibrator", "BetaCalibrator", "BBQCalibrator", "ENIRCalibrator",
        "ScalingBinningCalibrator",
    )
]  # fmt: skip
FORMS = ["eager64", "eager32", "script64", "export64", "onnx64", "onnx32"]
# --- Venn-Abers and spline calibration: a row per variant (--calibrators
# VennAbers Spline runs only these); --sizes N... prints the Venn-Abers
# graph sizes at N calibration rows of each task
VARIANTS = {
    **{
        f"VennAbers-{s}-{m}": ("VennAbersCalibrator", {"strategy": s, "method": m})
        for s in ("ovr", "ovo")
        for m in ("inductive", "cross")
    },
    **{
        f"Spline-{r}": ("SplineCalibrator", {"redistribution": r})
        for r in ("temperature", "proportional")
    },
}


def _variant_graph_sizes(task_name, task, sizes):
    """Bytes of the float64 and float32 ONNX graphs of each Venn-Abers
    variant fitted on the first ``n`` calibration rows (logits)."""
    from skcal.export import to_onnx

    lines = []
    for n in sizes:
        X, y = task.cal_logits[:n], task.cal_labels[:n]
        for name in VARIANTS:
            if name.startswith("VennAbers"):
                cal = _calibrator(name, "logits", task).fit(X, y)
                b64 = len(to_onnx(cal, dtype=np.float64).SerializeToString())
                b32 = len(to_onnx(cal, dtype=np.float32).SerializeToString())
                lines.append(f"{task_name}  {len(X)}  {name}  {b64:,}  {b32:,}")
    return lines


# --- end of the Venn-Abers and spline block


def _parse():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--tasks", nargs="+", default=["letter", "satimage", "pendigits"]
    )
    parser.add_argument("--n-cal", type=int, default=2000)
    parser.add_argument("--out", help="also write the table to this file")
    parser.add_argument("--calibrators", nargs="+", help="only rows whose name "
                        "starts with one of these")  # fmt: skip
    parser.add_argument("--sizes", nargs="*", type=int, default=[])
    parser.add_argument("--only-top-versus-all", action="store_true")
    return parser.parse_args()


def _forms(cal, X):
    import torch

    from skcal.export import to_onnx, to_torch

    program = torch.export.export(
        to_torch(cal),
        (torch.from_numpy(np.ascontiguousarray(X[:3], dtype=np.float64)),),
        dynamic_shapes={"x": {0: torch.export.Dim("batch")}},
    )
    return {
        "eager64": to_torch(cal).double(),
        "eager32": to_torch(cal).float(),
        "script64": torch.jit.script(to_torch(cal).double()),
        "export64": program.module(),
        "onnx64": to_onnx(cal, dtype=np.float64),
        "onnx32": to_onnx(cal, dtype=np.float32),
    }


def _calibrator(name, input, task):
    import skcal
    from skcal.utils._testing import make_estimator

    if name.startswith("TopVersusAll("):
        inner = make_estimator(getattr(skcal, name[len("TopVersusAll(") : -1]))
        return skcal.TopVersusAll(inner, input=input)
    name, extra = VARIANTS.get(name, (name, {}))
    params = (
        {"random_state": 0}
        if "random_state" in getattr(skcal, name)().get_params()
        else {}
    )
    params.update(extra)
    if name in LOCAL:
        if name == "LocalNetCalibrator":
            params.update(coef=task.coef, intercept=task.intercept)
        else:
            params.update(n_slots=8, n_codewords=32)
        return make_estimator(getattr(skcal, name), **params)
    if name == "DirichletCalibratorCV":
        params.update(reg_lambdas=[1e-2, 1e-3], reg_mus=[1e-2], cv=3)
    return make_estimator(getattr(skcal, name), input=input, device="cpu", **params)


def _rows(task, n_cal):
    from scipy.special import softmax

    cal = slice(0, n_cal)
    return {
        "logits": (task.cal_logits[cal], task.test_logits),
        "proba": (
            softmax(task.cal_logits[cal], axis=1),
            softmax(task.test_logits, axis=1),
        ),
        "embeddings": (
            task.cal_embeddings[cal].astype(np.float64),
            task.test_embeddings.astype(np.float64),
        ),
    }


def main():
    args = _parse()
    from _lib.datasets import load_task

    from skcal.export import check_export

    table, sizes = {}, []
    for task_name in args.tasks:
        task = load_task(task_name)
        rows = _rows(task, args.n_cal)
        y = task.cal_labels[: args.n_cal]
        score = TVA if args.only_top_versus_all else SCORE + TVA
        cases = [(n, i) for n in score for i in ("logits", "proba")]
        if not args.only_top_versus_all:
            cases += [(n, "embeddings") for n in LOCAL]
        cases += [(n, i) for n in VARIANTS for i in ("logits", "proba")]
        if args.calibrators:
            cases = [c for c in cases if c[0].startswith(tuple(args.calibrators))]
        sizes += _variant_graph_sizes(task_name, task, args.sizes)
        for name, input in cases:
            X_cal, X_test = rows[input]
            start = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                cal = _calibrator(name, input, task).fit(X_cal, y)
                forms = _forms(cal, X_test)
                diffs = {
                    form: max(
                        check_export(cal, X_test, e), check_export(cal, X_test[:1], e)
                    )
                    for form, e in forms.items()
                }
            row = table.setdefault((name, input), {f: 0.0 for f in FORMS})
            for form, diff in diffs.items():
                row[form] = max(row[form], diff)
            print(f"{task_name} {name} {input}: {time.perf_counter() - start:.1f} s",
                  file=sys.stderr)  # fmt: skip
    lines = _format(table, args)
    if sizes:
        lines += ["", "ONNX graph bytes (task, calibration rows, variant, "
                  "float64, float32):", *sizes]  # fmt: skip
    print("\n".join(lines))
    if args.out:
        with open(args.out, "w") as f:
            f.write("\n".join(lines) + "\n")


def _format(table, args):
    import torch

    import skcal

    head = ["calibrator", "input", *FORMS]
    body = [[name, input, *(f"{row[f]:.1e}" for f in FORMS)]
            for (name, input), row in table.items()]  # fmt: skip
    widths = [max(len(r[i]) for r in [head, *body]) for i in range(len(head))]
    rule = "  ".join("=" * w for w in widths)
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    return [
        f"skcal {skcal.__version__}, torch {torch.__version__}; tasks "
        f"{', '.join(args.tasks)} (fit on {args.n_cal} calibration rows, "
        "max |diff| over each task's test rows and its first row)",
        "",
        rule, fmt.format(*head), rule, *(fmt.format(*r) for r in body), rule,
    ]  # fmt: skip


if __name__ == "__main__":
    main()
