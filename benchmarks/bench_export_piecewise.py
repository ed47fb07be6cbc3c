"""Parity of the exported one-vs-rest calibrators, and skl2onnx's isotonic.

Two tables, on scikit-learn's digits (data shipped in the package; a
logistic regression on the first part, calibration on the second, test on
the rest):

1. scikit-learn's ``CalibratedClassifierCV(method="isotonic")`` converted
   by skl2onnx (float64 graph, so that float32 rounding plays no part) and
   run by onnxruntime, against its own ``predict_proba``: the largest
   absolute difference and the fraction of test rows off by more than
   1e-6; next to it skcal's ``IsotonicCalibrator`` exported by
   ``skcal.export.to_onnx`` against its ``predict_proba``.
2. Every exported skcal calibrator x form (torch eager, torch.jit.script,
   torch.export, ONNX under onnxruntime) x dtype (float64, float32) x input
   (logits, proba): ``max |exported(X) - predict_proba(X)|`` on the test
   rows.

Usage::

    python benchmarks/bench_export_piecewise.py
"""

import argparse
import warnings

CALIBRATORS = [
    ("IsotonicCalibrator", {}),
    ("CenteredIsotonicCalibrator", {}),
    ("HistogramBinningCalibrator", {}),
    ("HistogramBinningCalibrator", {"strategy": "quantile"}),
    ("ScalingBinningCalibrator", {}),
    ("ScalingBinningCalibrator", {"mode": "top_label"}),
    ("BBQCalibrator", {}),
    ("ENIRCalibrator", {}),
    ("PlattCalibrator", {}),
    ("BetaCalibrator", {}),
]


def _digits():
    import numpy as np
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    X, y = load_digits(return_X_y=True)
    X = X / 16.0
    X_fit, X_rest, y_fit, y_rest = train_test_split(
        X, y, test_size=0.6, random_state=0, stratify=y
    )
    X_cal, X_test, y_cal, y_test = train_test_split(
        X_rest, y_rest, test_size=0.5, random_state=0, stratify=y_rest
    )
    return (X_fit, y_fit), (X_cal, y_cal), (np.ascontiguousarray(X_test), y_test)


def _onnx_run(model, X):
    import onnxruntime as ort

    session = ort.InferenceSession(
        model.SerializeToString(), providers=["CPUExecutionProvider"]
    )
    return session.run(None, {session.get_inputs()[0].name: X})


def skl2onnx_table():
    import numpy as np
    from scipy.special import softmax
    from skl2onnx import __version__ as skl2onnx_version
    from skl2onnx import to_onnx as skl_to_onnx
    from sklearn.calibration import CalibratedClassifierCV
    from sklearn.linear_model import LogisticRegression

    import skcal
    from skcal.export import to_onnx

    (X_fit, y_fit), (X_cal, y_cal), (X_test, _) = _digits()
    X_train = np.vstack([X_fit, X_cal])
    y_train = np.concatenate([y_fit, y_cal])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sk = CalibratedClassifierCV(
            LogisticRegression(max_iter=300), method="isotonic", cv=3
        ).fit(X_train, y_train)
    model = skl_to_onnx(
        sk,
        X_test[:1].astype(np.float64),
        target_opset=17,
        options={id(sk): {"zipmap": False}},
    )
    outputs = _onnx_run(model, X_test)
    proba = outputs[1]
    if isinstance(proba, list):  # a ZipMap output: one dict per row
        proba = np.array([[row[k] for k in sorted(row)] for row in proba])
    ref = sk.predict_proba(X_test)
    diff = np.abs(np.asarray(proba, dtype=np.float64) - ref).max(axis=1)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        clf = LogisticRegression(max_iter=300).fit(X_fit, y_fit)
    P_cal = softmax(clf.decision_function(X_cal), axis=1)
    P_test = softmax(clf.decision_function(X_test), axis=1)
    iso = skcal.IsotonicCalibrator(input="proba").fit(P_cal, y_cal)
    rows = [("skl2onnx " + skl2onnx_version, "CalibratedClassifierCV isotonic",
             "float64", diff.max(), np.mean(diff > 1e-6))]  # fmt: skip
    for dtype in (np.float64, np.float32):
        got = _onnx_run(to_onnx(iso, dtype=dtype), P_test.astype(dtype))[0]
        d = np.abs(got - iso.predict_proba(P_test.astype(dtype))).max(axis=1)
        rows.append(("skcal.export.to_onnx", "IsotonicCalibrator(input='proba')",
                     np.dtype(dtype).name, d.max(), np.mean(d > 1e-6)))  # fmt: skip
    print(f"\n{len(X_test)} test rows of digits (10 classes); onnxruntime\n")
    print("| converter | model | graph dtype | max abs diff | rows off > 1e-6 |")
    print("|---|---|---|---|---|")
    for name, model_name, dtype, worst, frac in rows:
        print(f"| {name} | {model_name} | {dtype} | {worst:.3g} | {frac:.1%} |")


def parity_table():
    import numpy as np
    import torch
    from scipy.special import softmax
    from sklearn.linear_model import LogisticRegression

    import skcal
    from skcal.export import to_onnx, to_torch

    (X_fit, y_fit), (X_cal, y_cal), (X_test, _) = _digits()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        clf = LogisticRegression(max_iter=300).fit(X_fit, y_fit)
    Z_cal, Z_test = clf.decision_function(X_cal), clf.decision_function(X_test)
    print("\nmax |exported(X) - predict_proba(X)| on the digits test rows\n")
    print("| calibrator | input | dtype | eager | script | torch.export | onnx |")
    print("|---|---|---|---|---|---|---|")
    for name, params in CALIBRATORS:
        label = name + "".join(f" {k}={v}" for k, v in params.items())
        for input in ("logits", "proba"):
            A, T = (Z_cal, Z_test) if input == "logits" else (
                softmax(Z_cal, axis=1), softmax(Z_test, axis=1))  # fmt: skip
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                cal = getattr(skcal, name)(input=input, **params).fit(A, y_cal)
            for dtype in (np.float64, np.float32):
                Td = np.ascontiguousarray(T, dtype=dtype)
                ref = cal.predict_proba(Td)
                module = to_torch(cal)
                module = module.double() if dtype == np.float64 else module.float()
                x = torch.from_numpy(Td)
                batch = torch.export.Dim("batch")
                program = torch.export.export(
                    module, (x[:3],), dynamic_shapes={"x": {0: batch}}
                ).module()
                cells = []
                with torch.no_grad():
                    for run in (module, torch.jit.script(module), program):
                        cells.append(np.abs(run(x).double().numpy() - ref).max())
                got = _onnx_run(to_onnx(cal, dtype=dtype), Td)[0]
                cells.append(np.abs(got - ref).max())
                row = " | ".join(f"{c:.1e}" for c in cells)
                print(f"| {label} | {input} | {np.dtype(dtype).name} | {row} |")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.parse_args()
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    skl2onnx_table()
    parity_table()


if __name__ == "__main__":
    main()
