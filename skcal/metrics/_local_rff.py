"""Approximate local calibration error: random Fourier features, mergeable.

The exact LCE (:mod:`skcal.metrics._local`) sums the Gaussian kernel over
every pair of rows of a (class, confidence bin) group: ``O(n^2 d)``. With
``D`` random Fourier features the two kernel sums of an anchor become dot
products with two per-group vectors (:mod:`skcal._torch.kernels._rff`), so
the LCE takes two passes of ``O(n D d)`` over the rows, each mergeable
across chunks:

1. per group, the feature sums ``S`` and ``T``, the weight and squared
   weight (the support filter) and, per class, the weight of its labels;
2. per anchor, ``LCE_k(i) ~ z_i . S / z_i . T``; per class, the weighted sum
   and the maximum of ``|LCE_k(i)|``.

Why random features and not Nystrom: the local metrics use a kernel much
narrower than the spread of the data (a few neighbours' worth of a bin), and
in 50 dimensions no affordable set of landmarks lies near every anchor, so a
Nystrom approximation sets most kernel values to 0 and turns every anchor
into an isolated one (its error becomes its own residual). Random features
are unbiased for every pair; their noise on an anchor's kernel sum grows
like ``sqrt(sum_j w_j^2 / (2 D))`` and is small next to the sum itself when
the neighbourhood holds many rows, which is the regime the metric is
meaningful in. The measured errors are in the user guide.
"""

from __future__ import annotations

import numpy as np

from ..exceptions import ApproximationWarning
from ..utils._warnings import warn
from ._binning import assign_bins, uniform_edges

#: Raised when no class keeps a bin (here and by the exact metric).
NO_KEPT_BIN = (
    "No class has a confidence bin with more than min_bin_size samples (total "
    "sample_weight when weights are given), so the local calibration error is "
    "undefined; lower min_bin_size or pass more samples."
)
#: Warn when the anchors' mean estimated noise exceeds this share of the LCE.
NOISE_RATIO = 0.1

__all__ = ["RFFLocalState"]


class RFFLocalState:
    """Two-pass mergeable state of the approximate LCE and MLCE.

    Parameters
    ----------
    n_classes, n_features : int
        Columns of the probabilities and of the features (in the space).
    bandwidth : float
    n_bins : int
    min_bin_size : float
    n_components : int
        ``D``, the number of random frequencies (``2 D`` features).
    random_state : int
        Seed of the frequencies.
    device : {"auto", "cpu", "cuda", "cuda:N"}
        Checked here (an unavailable device is a ``ValueError`` before any
        work) and resolved by the kernels, where each chunk is summed.
    """

    def __init__(
        self,
        n_classes,
        n_features,
        *,
        bandwidth,
        n_bins,
        min_bin_size,
        n_components,
        random_state,
        device,
    ):
        from .._torch import check_device
        from .._torch.kernels import (
            rff_frequencies,  # torch: imported by the metrics that need it only
        )

        self.n_bins, self.min_bin_size = int(n_bins), float(min_bin_size)
        check_device(device)
        self.device = device
        self.omega = rff_frequencies(
            n_features, int(n_components), float(bandwidth), int(random_state)
        )
        self.edges = uniform_edges(self.n_bins)
        shape = (n_classes, self.n_bins, 2 * int(n_components))
        self.S, self.T = np.zeros(shape), np.zeros(shape)
        self.weight = np.zeros(shape[:2])
        self.weight_sq = np.zeros(shape[:2])
        # sum of w^2 r and w^2 r^2 per group: the spread of the residuals
        self.resid_sq = np.zeros((2,) + shape[:2])
        self.resid_w = np.zeros(shape[:2])
        self.class_weight = np.zeros(n_classes)
        self.kept = None
        self.abs_sum = np.zeros(n_classes)
        self.anchor_weight = np.zeros(n_classes)
        self.abs_max = np.full(n_classes, -np.inf)
        self.noise_sum = np.zeros(n_classes)
        self.pass_ = 1

    def _bins(self, proba):
        return np.stack(
            [assign_bins(proba[:, k], self.edges) for k in range(proba.shape[1])],
            axis=1,
        )

    def update(self, proba, y_index, phi, w):
        """Add a chunk (checked arrays); in pass 2 return its anchor errors."""
        from .._torch.kernels import rff_anchor_errors, rff_group_sums

        bins = self._bins(proba)
        if self.pass_ == 1:
            resid = proba - (y_index[:, None] == np.arange(proba.shape[1]))
            sums = rff_group_sums(
                phi, resid, w, bins, self.omega, self.n_bins, device=self.device
            )
            self.S += sums.S
            self.T += sums.T
            for k in range(proba.shape[1]):
                b, wr = bins[:, k], w * w * resid[:, k]
                self.weight[k] += np.bincount(b, w, self.n_bins)
                self.weight_sq[k] += np.bincount(b, w * w, self.n_bins)
                self.resid_sq[0, k] += np.bincount(b, wr, self.n_bins)
                self.resid_sq[1, k] += np.bincount(b, wr * resid[:, k], self.n_bins)
                self.resid_w[k] += np.bincount(b, w * resid[:, k], self.n_bins)
            self.class_weight += np.bincount(y_index, w, proba.shape[1])
            return None
        errors = rff_anchor_errors(
            phi,
            w,
            bins,
            self.kept,
            self.S,
            self.T,
            self.omega,
            self.spread_sq,
            device=self.device,
        )
        lce, noise = errors.lce, errors.noise
        valid = ~np.isnan(lce)
        a = np.where(valid, np.abs(lce), 0.0)
        self.abs_sum += w @ a
        self.anchor_weight += w @ valid
        self.noise_sum += w @ np.where(valid, noise, 0.0)
        chunk_max = np.where(valid & (w[:, None] > 0), a, -np.inf).max(axis=0)
        self.abs_max = np.maximum(self.abs_max, chunk_max)
        return lce

    #: the sums of each pass (pass 2 also keeps the maximum ``abs_max``)
    _SUMS = {
        1: ("S", "T", "weight", "weight_sq", "resid_sq", "resid_w", "class_weight"),
        2: ("abs_sum", "anchor_weight", "noise_sum"),
    }

    def merge(self, other: RFFLocalState) -> RFFLocalState:
        for name in self._SUMS[self.pass_]:
            getattr(self, name).__iadd__(getattr(other, name))
        if self.pass_ == 2:
            self.abs_max = np.maximum(self.abs_max, other.abs_max)
        return self

    def next_pass(self) -> RFFLocalState:
        """Apply the support filter (Kish size of each group, as the exact
        metric) and switch to the anchors' pass."""
        with np.errstate(invalid="ignore", divide="ignore"):
            support = np.where(self.weight_sq > 0, self.weight**2 / self.weight_sq, 0.0)
        threshold = self.min_bin_size + 1e-9 * max(1.0, self.min_bin_size)
        self.kept = support > threshold
        # sum_j w_j^2 (r_j - mean r)^2 per group: the numerator's noise scale
        with np.errstate(invalid="ignore", divide="ignore"):
            mean = np.where(self.weight > 0, self.resid_w / self.weight, 0.0)
        self.spread_sq = np.maximum(
            self.resid_sq[1] - 2 * mean * self.resid_sq[0] + mean**2 * self.weight_sq,
            0.0,
        )
        self.pass_ = 2
        return self

    def empty(self) -> RFFLocalState:
        """A state of the same pass, frequencies and (in pass 2) group sums,
        with its own zeroed sums: what one chunk starts from."""
        twin = object.__new__(RFFLocalState)
        twin.__dict__.update(self.__dict__)
        for name in self._SUMS[self.pass_]:
            setattr(twin, name, np.zeros_like(getattr(self, name)))
        twin.abs_max = np.full_like(self.abs_max, -np.inf)
        return twin

    def compute(self, class_weights: np.ndarray) -> tuple[float, float]:
        """(LCE, MLCE): class-weighted means of per-class means and maxima."""
        has = (self.anchor_weight > 0) & (class_weights > 0)
        if not has.any():
            raise ValueError(NO_KEPT_BIN)
        cw = class_weights[has] / class_weights[has].sum()
        means = self.abs_sum[has] / self.anchor_weight[has]
        lce = float(cw @ means)
        self.noise_ = float(cw @ (self.noise_sum[has] / self.anchor_weight[has]))
        if self.noise_ > NOISE_RATIO * lce:
            warn(
                f"The random-feature LCE is noisy here: the anchors' local "
                f"errors carry an estimated noise of {self.noise_:.2g} each, "
                f"against an LCE of {lce:.2g} (more than {NOISE_RATIO:.0%} of "
                f"it), and noise inflates a mean of absolute values (a narrow "
                f"kernel, few rows per bin). Raise n_components (now "
                f"{self.omega.shape[1]}; the noise falls like "
                f"1/sqrt(n_components)), widen the bandwidth, or use "
                f"method='exact' on a sample of rows.",
                ApproximationWarning,
            )
        return lce, float(cw @ self.abs_max[has])


#: Rows (evenly spaced) that fit space="pca" for Dask inputs.
_SPACE_ROWS = 50_000


def _dask_sample(x, n, size):
    """Up to ``size`` of the ``n`` rows of a Dask array, evenly spaced (numpy),
    and their indices."""
    idx = np.unique(np.linspace(0, n - 1, min(n, size)).round().astype(np.int64))
    return np.asarray(x[idx].compute()), idx


def _dask_space(features, sample_weight, space, bandwidth):
    """``(transform, bandwidth)`` of Dask inputs: ``space="pca"`` fitted on
    up to ``_SPACE_ROWS`` evenly spaced rows, ``bandwidth="auto"`` measured
    on 1,000."""
    from ._local import LocalSpace, _median_distance_bandwidth

    n = features.shape[0]
    if isinstance(space, str):  # "pca", fitted on a sample of rows
        space = LocalSpace().fit(_dask_sample(features, n, _SPACE_ROWS)[0])
    transform = (
        (lambda x: np.asarray(x, dtype=np.float64))
        if space is None
        else (space.transform)
    )
    if isinstance(bandwidth, str):  # "auto"
        rows, idx = _dask_sample(features, n, 1000)
        w = (
            np.ones(len(idx))
            if sample_weight is None
            else _dask_sample(sample_weight, n, 1000)[0]
        )
        bandwidth = _median_distance_bandwidth(transform(rows), w)
    return transform, bandwidth


def _two_passes(template, blocks, transform, labels) -> RFFLocalState:
    """The summed state of both passes of ``template`` over the Dask
    ``blocks`` (``(proba, features, y, weight)`` each), one tree reduction
    each, every chunk projected by ``transform`` on its worker."""
    from dask import delayed

    from ..utils._dask import tree_reduce
    from ..utils._validation import check_proba_targets, check_sample_weight

    def chunk(template, p, x, y, w):
        state = template.empty()
        if len(y) == 0:
            return state
        proba, y_index, _ = check_proba_targets(y, p, labels=labels, copy=False)
        w = check_sample_weight(w, len(y_index))
        state.update(proba, y_index, transform(x), w)
        return state

    def run(template):
        shared = delayed(template, pure=True)  # one key, not one per chunk
        return tree_reduce(delayed(chunk)(shared, *b) for b in blocks)

    return run(run(template).next_pass())


def dask_local_errors(
    y_true,
    y_proba,
    features,
    *,
    bandwidth=10.0,
    n_bins=15,
    min_bin_size=20,
    space="pca",
    class_weight=None,
    sample_weight=None,
    labels=None,
    device="auto",
    method="exact",
    n_components=1024,
    random_state=0,
):
    """LCE and MLCE of Dask inputs by random features, in two tree reductions.

    ``space="pca"`` is fitted on up to 50,000 evenly spaced rows, and
    ``bandwidth="auto"`` measured on 1,000 (:func:`local_bandwidth`); each
    chunk is then projected, binned and summed on its worker, and only the
    states travel. Returns ``(lce, mlce)``.
    """
    from ..utils._dask import aligned_rows
    from ..utils._validation import check_class_weight
    from ._local import _check_features_ndim

    if method == "exact":
        raise ValueError(
            "The exact local calibration error compares every pair of rows of "
            "a bin, so it needs all rows in one process; for Dask inputs pass "
            "method='rff' (or 'auto'), which sums random Fourier features "
            "chunk by chunk."
        )
    _check_features_ndim(features)  # as the numpy path, before any work
    (y_proba, features, y_true, sample_weight), blocks = aligned_rows(
        y_proba, features, y_true, sample_weight
    )
    transform, bandwidth = _dask_space(features, sample_weight, space, bandwidth)
    n_classes = len(labels) if labels is not None else int(y_proba.shape[1])
    n_space = transform(_dask_sample(features, features.shape[0], 2)[0]).shape[1]
    template = RFFLocalState(
        n_classes,
        n_space,
        bandwidth=bandwidth,
        n_bins=n_bins,
        min_bin_size=min_bin_size,
        n_components=n_components,
        random_state=random_state,
        device=device,
    )
    summaries = _two_passes(template, blocks, transform, labels)
    frequencies = summaries.class_weight if isinstance(class_weight, str) else None
    cw = check_class_weight(class_weight, n_classes, frequencies=frequencies)
    return summaries.compute(cw)
