"""
Large data: metric states, Dask arrays and a local cluster
==========================================================

A calibrator is fitted on a few thousand rows and then applied to, and
judged on, everything the model predicts. This example builds a lazy
"production log" of 400,000 predictions of an over-confident 10-class
model as a Dask array (never held in memory at once), then:

1. computes the ECE chunk by chunk with a mergeable metric state;
2. calibrates the whole array lazily with temperature scaling fitted on
   5,000 rows, and scores it on a local Dask cluster;
3. runs a cross-validated choice of calibrator on that cluster through
   joblib's Dask backend.

It needs ``pip install -e ".[dask]"``.
"""

# %%
# A lazy log of predictions
# -------------------------
# Each block of 40,000 rows is generated from its own seed when Dask asks
# for it: logits of 10 classes, labels drawn from the softmax of the logits
# at temperature 2.5, so the logits themselves are over-confident.
import dask
import dask.array as da
import matplotlib.pyplot as plt
import numpy as np
from distributed import Client, LocalCluster
from joblib import parallel_config
from scipy.special import softmax

from skcal import CalibratorSearchCV, IdentityCalibrator, TemperatureScaling
from skcal.display import ReliabilityDisplay
from skcal.metrics import (
    binned_statistics,
    expected_calibration_error,
    metric_state,
    negative_log_likelihood,
)

N_ROWS, BLOCK, N_CLASSES = 400_000, 40_000, 10


def logits_block(block_id):
    rng = np.random.default_rng(block_id)
    return 4.0 * rng.normal(size=(BLOCK, N_CLASSES))


def labels_block(block_id):
    rng = np.random.default_rng(10_000 + block_id)
    proba = softmax(logits_block(block_id) / 2.5, axis=1)
    return (proba.cumsum(axis=1) > rng.random((BLOCK, 1))).argmax(axis=1)


n_blocks = N_ROWS // BLOCK
logits = da.concatenate(
    [
        da.from_delayed(
            dask.delayed(logits_block)(b),
            shape=(BLOCK, N_CLASSES),
            dtype=float,
        )
        for b in range(n_blocks)
    ]
)
labels = da.concatenate(
    [
        da.from_delayed(
            dask.delayed(labels_block)(b), shape=(BLOCK,), dtype=int
        )
        for b in range(n_blocks)
    ]
)
print(f"lazy logits: shape {logits.shape}, {logits.numblocks[0]} blocks")

# %%
# A metric state, chunk by chunk
# ------------------------------
# ``metric_state`` keeps the per-bin sums of the ECE: its size depends on
# the bins, not on the rows. Each block is computed, added and dropped.
state = metric_state(expected_calibration_error)
reliability = metric_state(binned_statistics)  # the diagram's statistics
for b in range(n_blocks):
    proba_b, y_b = softmax(logits_block(b), axis=1), labels_block(b)
    state.update(y_b, proba_b)
    reliability.update(y_b, proba_b)
print(
    f"uncalibrated ECE over {state.n_samples_:,} rows: {state.compute():.4f}"
)

# %%
# Calibrate lazily and score on a local cluster
# ---------------------------------------------
# Temperature scaling is fitted on the first 5,000 rows. ``predict_proba``
# of a Dask array is itself a lazy Dask array (block by block), and the
# metric functions reduce chunk states on the active cluster: only the
# states travel. ``processes=False`` keeps this example's workers in its own
# process; a real cluster has one process (or machine) per worker.
cluster = LocalCluster(
    n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None
)
client = Client(cluster)

calibration = slice(0, 5_000)
ts = TemperatureScaling(device="cpu").fit(
    logits[calibration].compute(), labels[calibration].compute()
)
print(f"temperature: {ts.temperature_:.3f}")
proba_ts = ts.predict_proba(logits)  # lazy
print(
    "calibrated ECE, NLL:",
    round(expected_calibration_error(labels, proba_ts), 4),
    round(negative_log_likelihood(labels, proba_ts), 4),
)
after = metric_state(binned_statistics)
for b in range(n_blocks):  # the calibrated diagram, block by block
    rows = slice(b * BLOCK, (b + 1) * BLOCK)
    after.update(labels_block(b), proba_ts[rows].compute())

# %%
# Choose a calibrator on the cluster
# ----------------------------------
# joblib's Dask backend sends the candidates x folds fits to the workers;
# the result equals a local run's.
with parallel_config(backend="dask"):
    search = CalibratorSearchCV(
        [IdentityCalibrator(), TemperatureScaling(device="cpu")],
        cv=5,
        n_jobs=-1,
        random_state=0,
    ).fit(logits[calibration].compute(), labels[calibration].compute())
print(f"selected: {search.selected_}")
client.close()
cluster.close()

# %%
# The reliability diagrams from the merged states
# -----------------------------------------------
fig, ax = plt.subplots(figsize=(5, 4.5))
states = [("uncalibrated", reliability), ("temperature scaling", after)]
for name, st in states:
    stats = st.compute()
    ReliabilityDisplay(
        mean_predicted=stats.mean_score,
        fraction_positive=stats.mean_target,
        count=stats.count,
        edges=stats.edges,
        name=name,
    ).plot(ax=ax, show_counts=False)
ax.set_title(f"{N_ROWS:,} rows, from two merged states")
fig.tight_layout()
plt.show()
