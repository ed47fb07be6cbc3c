"""
Deploying a classifier and its calibrator as one ONNX file
==========================================================

A scikit-learn classifier and a skcal calibrator are written as **one** ONNX
graph, from the raw features to the calibrated probabilities and the label,
and run by onnxruntime, which needs neither scikit-learn nor skcal nor
torch. The classifier is converted by skl2onnx, the calibrator by skcal
(:func:`skcal.export.to_onnx`), and the two are joined in one graph. We then
measure how far the runtime's probabilities are from skcal's
``predict_proba``.
"""

# %%
# A classifier and its calibration
# --------------------------------
# A scaled logistic regression on scikit-learn's bundled digits, fitted on
# one half; vector scaling fitted on a quarter of held-out rows.
import os
import tempfile

import matplotlib.pyplot as plt
import numpy as np
import onnxruntime
from sklearn.datasets import load_digits
from sklearn.frozen import FrozenEstimator
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from skcal import CalibratedClassifier, VectorScaling
from skcal.export import to_onnx

X, y = load_digits(return_X_y=True)
X = X.astype(np.float32)  # the graph reads float32 rows
X_train, y_train = X[::2], y[::2]
X_cal, y_cal = X[1::4], y[1::4]
X_test, y_test = X[3::4], y[3::4]

classifier = make_pipeline(StandardScaler(), LogisticRegression(C=10))
classifier.fit(X_train, y_train)
model = CalibratedClassifier(
    FrozenEstimator(classifier), calibrator=VectorScaling(device="cpu")
).fit(X_cal, y_cal)
print("the calibrator reads the classifier's", model.response_)

# %%
# One ONNX file
# -------------
# ``to_onnx`` of a :class:`~skcal.CalibratedClassifier` converts the
# classifier's ``decision_function`` with skl2onnx and appends the
# calibrator's graph. The file has one input, ``X``, and two outputs,
# ``probabilities`` and ``label``.
path = os.path.join(tempfile.mkdtemp(), "digits_calibrated.onnx")
onnx_model = to_onnx(model, path)
print(f"{path}: {os.path.getsize(path)} bytes")
print("inputs:", [i.name for i in onnx_model.graph.input])
print("outputs:", [o.name for o in onnx_model.graph.output])

# %%
# Run it with onnxruntime
# -----------------------
# Where the model is served, only onnxruntime is needed. The runtime's
# probabilities differ from skcal's by float32 rounding, and every label is
# the same.
session = onnxruntime.InferenceSession(
    path, providers=["CPUExecutionProvider"]
)
proba, label = session.run(None, {"X": X_test})
reference = model.predict_proba(X_test)
difference = np.abs(proba - reference).max()
print(f"largest difference from predict_proba: {difference:.2g}")
print("same labels:", bool(np.array_equal(label, model.predict(X_test))))

# %%
# The differences, row by row
# ---------------------------
# The largest absolute difference of each test row, on a log scale: all far
# below anything a decision could notice.
per_row = np.abs(proba - reference).max(axis=1)
fig, ax = plt.subplots(figsize=(6, 3))
ax.hist(np.log10(np.maximum(per_row, 1e-12)), bins=30)
ax.set_xlabel("log10 of the largest difference in a row")
ax.set_ylabel("test rows")
ax.set_title("onnxruntime (float32) against skcal's predict_proba")
fig.tight_layout()
plt.show()
