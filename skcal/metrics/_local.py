"""Local calibration metrics of Barbera et al.: LCE, MLCE, ESS and its profile."""

from __future__ import annotations

from dataclasses import dataclass
from numbers import Integral, Real

import numpy as np
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.decomposition import PCA
from sklearn.preprocessing import StandardScaler
from sklearn.utils.validation import check_array, check_is_fitted, validate_data

from ..exceptions import FlatKernelWarning
from ..utils._docstrings import fill_doc
from ..utils._sklearn import Interval, StrOptions, _fit_context, validate_params
from ..utils._validation import (
    check_class_weight,
    check_embeddings,
    check_proba_targets,
)
from ..utils._warnings import warn
from ._binning import assign_bins, bin_edges
from ._dask import dask_dispatch
from ._ece import BINNED_METRIC_PARAMS
from ._groups import groupable
from ._local_rff import NO_KEPT_BIN, RFFLocalState

__all__ = [
    "ESSProfile",
    "LocalCalibrationErrors",
    "LocalSpace",
    "effective_sample_size",
    "ess_profile",
    "local_calibration_error",
    "local_bandwidth",
    "local_calibration_errors",
    "max_local_calibration_error",
]


#: The kernel is flat when the median anchor's ESS exceeds this fraction of
#: the (Kish) size of the rest of its bin.
FLAT_ESS_RATIO = 0.5
#: Anchors whose kernel the flatness check evaluates (evenly spaced over the
#: (class, anchor) pairs of the kept bins; all of them when fewer).
_FLAT_ANCHORS = 512
#: Kernel entries held at once by the flatness check.
_FLAT_CHUNK = 1 << 21
#: ``method="auto"`` computes the exact LCE up to this many kernel pairs
#: (the sum over the kept bins of their squared sizes: 50,000 rows of 10
#: classes, about a minute on two cores), random features above.
EXACT_PAIRS_LIMIT = 2.5e10
#: ``bandwidth="auto"`` is the median distance between samples divided by
#: this: on six real tasks it puts the median anchor's ESS at 7-17% of its bin.
AUTO_BANDWIDTH_DIVISOR = 4.0
#: Rows (evenly spaced) whose pairwise distances give that median.
_AUTO_ROWS = 1000


class LocalSpace(TransformerMixin, BaseEstimator):
    """The feature space of the local metrics: standardise, then PCA.

    ``transform(X) = PCA(StandardScaler(X))`` with both fitted on reference
    features (typically the calibration set's backbone features), as in
    Barbera et al.; the PCA is not whitened. Fit it once and pass it as
    ``space=`` to every local metric, so that all calibrators are scored in
    one fixed, method-independent space.

    Parameters
    ----------
    n_components : int, default=50
        Number of principal components (capped at the number of features and
        of samples).

    Attributes
    ----------
    scaler_ : StandardScaler
        Fitted standardisation.
    pca_ : PCA
        Fitted projection.
    n_components_ : int
        Number of components kept.
    n_features_in_ : int
        Number of input features.

    Examples
    --------
    >>> import numpy as np
    >>> from skcal.metrics import LocalSpace
    >>> X = np.random.default_rng(0).normal(size=(200, 80))
    >>> LocalSpace().fit(X).transform(X).shape
    (200, 50)
    """

    _parameter_constraints: dict = {
        "n_components": [Interval(Integral, 1, None, closed="left")],
    }

    def __init__(self, n_components=50):
        self.n_components = n_components

    # the scaler and the PCA are built here with valid parameters: no need to
    # validate them again
    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y=None):
        """Fit the scaler and the PCA on reference features ``X``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Reference features.
        y : None
            Ignored.

        Returns
        -------
        self : LocalSpace
        """
        X = validate_data(self, X, dtype=np.float64)
        check_embeddings(X, "features")
        if X.shape[0] < 2:
            raise ValueError(
                f"LocalSpace standardises and projects reference features, which "
                f"needs at least 2 samples; got n_samples={X.shape[0]}. Fit it on more "
                "samples, or pass space=None to use the features as given."
            )
        self.scaler_ = StandardScaler().fit(X)
        self.n_components_ = int(min(self.n_components, *X.shape))
        # the covariance eigensolver is exact and deterministic, and fast when
        # there are many more samples than features
        solver = "covariance_eigh" if X.shape[0] >= X.shape[1] else "full"
        self.pca_ = PCA(n_components=self.n_components_, svd_solver=solver)
        # constant features have no variance to explain (0 / 0 in the
        # explained-variance ratio): every reference point maps to the origin
        with np.errstate(invalid="ignore", divide="ignore"):
            self.pca_.fit(self.scaler_.transform(X))
        return self

    def transform(self, X):
        """Project ``X`` into the fitted space.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Features.

        Returns
        -------
        ndarray of shape (n_samples, n_components)
        """
        check_is_fitted(self)
        X = validate_data(self, X, dtype=np.float64, reset=False)
        return self.pca_.transform(self.scaler_.transform(X))


def _check_features_ndim(features) -> None:
    """Raise a clear error unless ``features`` (numpy, list or Dask) is 2-D.

    The same error for every input type, before anything is computed: a
    1-D array is refused rather than guessed to be one feature (or one
    sample), as scikit-learn does.
    """
    try:
        ndim = np.ndim(features)  # a Dask array's own ndim: nothing computed
    except ValueError:
        return  # a ragged list: check_array says so
    if ndim != 2:
        raise ValueError(
            f"features must be a 2-D array of shape (n_samples, n_features); got "
            f"a {ndim}-D array of shape {np.shape(features)}. For one feature per "
            "sample pass features.reshape(-1, 1)."
        )


def _features_in_space(features, space, n_samples: int) -> np.ndarray:
    _check_features_ndim(features)
    features = check_array(
        features, dtype=np.float64, ensure_all_finite=False, input_name="features"
    )
    if features.shape[0] != n_samples:
        raise ValueError(
            f"features must have one row per sample: y_proba has {n_samples} "
            f"rows, features has {features.shape[0]}."
        )
    check_embeddings(features, "features")
    if space is None:
        return features
    if isinstance(space, str):
        return LocalSpace().fit_transform(features)
    return space.transform(features)


def _median_distance_bandwidth(phi: np.ndarray, weight: np.ndarray) -> float:
    """``bandwidth="auto"``: the median pairwise distance / ``AUTO_BANDWIDTH_DIVISOR``.

    The median runs over the pairs of up to ``_AUTO_ROWS`` rows of positive
    weight, evenly spaced (no randomness), so it depends on the features
    and the weights only: every calibrator scored on the same features gets
    the same bandwidth.
    """
    rows = np.flatnonzero(weight > 0)
    if len(rows) < 2:
        raise ValueError(
            'bandwidth="auto" needs at least 2 samples with a positive weight '
            f"to measure distances; got {len(rows)}."
        )
    picks = np.linspace(0, len(rows) - 1, min(len(rows), _AUTO_ROWS))
    rows = rows[np.unique(picks.round().astype(np.int64))]
    x = phi[rows]
    sq = np.einsum("ij,ij->i", x, x)
    d2 = np.maximum(sq[:, None] + sq[None, :] - 2.0 * x @ x.T, 0.0)
    distance = float(np.sqrt(np.median(d2[np.triu_indices(len(rows), k=1)])))
    if not distance > 0:
        raise ValueError(
            'bandwidth="auto" cannot scale the kernel: the median distance '
            "between samples is 0 (most feature rows are equal). Pass a "
            "numeric bandwidth."
        )
    return distance / AUTO_BANDWIDTH_DIVISOR


@validate_params(
    {
        "features": ["array-like"],
        "space": [StrOptions({"pca"}), LocalSpace, None],
        "sample_weight": ["array-like", None],
    },
    prefer_skip_nested_validation=True,
)
def local_bandwidth(features, *, space="pca", sample_weight=None) -> float:
    """The kernel bandwidth that ``bandwidth="auto"`` gives the local metrics.

    The median Euclidean distance between samples in the metric's space,
    divided by 4 (``AUTO_BANDWIDTH_DIVISOR``); the median runs over the
    pairs of up to 1,000 evenly spaced rows of positive weight. It depends
    on the features only, not on the probabilities, so every calibrator
    scored on the same features gets the same kernel.

    Why a quarter of the median distance: the local metrics average each
    anchor's residuals over its neighbours in its confidence bin, and they
    are local only when those neighbours are a small part of the bin. On
    six real tasks (64- and 128-d network embeddings of letter, pendigits,
    portal_rodents, optdigits, fashion_mnist and kjv_books, 3,000 test rows
    each) this rule put the median anchor's effective sample size at 7% to
    17% of its bin, where the paper's fixed 10 on those embeddings gave 84%
    to 94% (a nearly flat kernel: the local error is then the classwise
    ECE). The paper's 10 on 50 components of 2,048 standardised ResNet
    features is this rule when their median distance is 40, i.e. when the
    components keep about 40% of the features' variance (its features are
    not available to check).

    Parameters
    ----------
    features : array-like of shape (n_samples, n_features)
        Features of each sample (e.g. backbone embeddings).
    space : "pca", LocalSpace or None, default="pca"
        As in :func:`local_calibration_error`.
    sample_weight : array-like of shape (n_samples,), default=None
        Rows of zero weight are left out of the median.

    Returns
    -------
    float
        The bandwidth.

    Examples
    --------
    >>> import numpy as np
    >>> from skcal.metrics import local_bandwidth
    >>> features = np.random.default_rng(0).normal(size=(500, 8))
    >>> h = local_bandwidth(features, space=None)  # median distance ~4 / 4
    >>> bool(0.8 < h < 1.2)
    True
    """
    _check_features_ndim(features)
    features = check_array(features, dtype=np.float64, input_name="features")
    n = features.shape[0]
    weight = (
        np.ones(n)
        if sample_weight is None
        else np.asarray(sample_weight, dtype=np.float64).ravel()
    )
    if weight.shape != (n,):
        raise ValueError(
            f"sample_weight must have one entry per row of features ({n}); got "
            f"shape {weight.shape}."
        )
    return _median_distance_bandwidth(_features_in_space(features, space, n), weight)


def _class_weights(class_weight, proba, y_index, w) -> np.ndarray:
    """:func:`check_class_weight`, with the weighted class counts for
    ``"frequency"``."""
    n_classes = proba.shape[1]
    frequencies = None
    if isinstance(class_weight, str):
        frequencies = np.bincount(y_index, weights=w, minlength=n_classes)
    return check_class_weight(class_weight, n_classes, frequencies=frequencies)


@dataclass(frozen=True)
class _AnchorErrors:
    """Per-anchor errors with the checked inputs they were computed from.

    Attributes
    ----------
    lce : ndarray of shape (n_samples, n_classes)
        Signed ``LCE_k(i)``; NaN outside the kept bins.
    ess : ndarray of shape (n_samples, n_classes) or None
        ``ESS_k(i)``, NaN likewise; None unless asked for.
    proba : ndarray of shape (n_samples, n_classes)
        Checked probabilities.
    y_index : ndarray of shape (n_samples,)
        Column index of each sample's label.
    sample_weight : ndarray of shape (n_samples,)
        Checked sample weights (ones when none were given).
    """

    lce: np.ndarray
    ess: np.ndarray | None
    proba: np.ndarray
    y_index: np.ndarray
    sample_weight: np.ndarray


def _kept_groups(proba, w, n_bins, min_bin_size) -> list:
    """``(class, members)`` of every kept confidence bin of every class."""
    edges = bin_edges(proba[:, 0], n_bins)
    groups = []
    for k in range(proba.shape[1]):
        bins = assign_bins(proba[:, k], edges, closed="left")
        # a bin's support is its effective number of samples (Kish): the
        # count for equal weights, unchanged when every weight is scaled
        w_sum = np.bincount(bins, weights=w, minlength=n_bins)
        w_sq = np.bincount(bins, weights=w * w, minlength=n_bins)
        with np.errstate(invalid="ignore", divide="ignore"):
            support = np.where(w_sq > 0, w_sum**2 / w_sq, 0.0)
        # a bin at the threshold up to rounding is dropped, whatever the
        # weights' scale or the order of the sums
        threshold = min_bin_size + 1e-9 * max(1.0, min_bin_size)
        groups += [
            (k, np.flatnonzero(bins == b)) for b in np.flatnonzero(support > threshold)
        ]
    return groups


def _anchor_errors(
    y_true,
    y_proba,
    features,
    *,
    bandwidth,
    n_bins,
    min_bin_size,
    space,
    sample_weight,
    labels,
    device,
    with_ess,
    class_weight=None,
    name=None,
    method="exact",
    n_components=1024,
    random_state=0,
):
    """Per-anchor LCE (and ESS) of the kept confidence bins.

    ``method="rff"`` approximates the kernel sums with random Fourier
    features (:class:`~skcal.metrics._local_rff.RFFLocalState`); ``"auto"``
    takes it when the exact pairs would number more than
    ``EXACT_PAIRS_LIMIT``.

    Binning and the support filter are done here, in numpy; the kernel sums
    run in :func:`skcal._torch.kernels.local_anchor_errors`.
    ``class_weight`` is only checked, before the kernel runs. With a
    ``name`` (the public function's), a :class:`FlatKernelWarning` is
    raised when :func:`_kernel_flatness` exceeds ``FLAT_ESS_RATIO``.
    """
    proba, y_index, w = check_proba_targets(
        y_true, y_proba, labels=labels, sample_weight=sample_weight
    )
    _class_weights(class_weight, proba, y_index, w)  # fail fast
    n, n_classes = proba.shape
    phi = _features_in_space(features, space, n)
    if isinstance(bandwidth, str):  # "auto"
        bandwidth = _median_distance_bandwidth(phi, w)
    groups = _kept_groups(proba, w, n_bins, min_bin_size)
    if name is not None:
        _warn_flat_kernel(name, phi, w, groups, bandwidth)
    if method == "auto":
        pairs = sum(float(len(members)) ** 2 for _, members in groups)
        method = "exact" if pairs <= EXACT_PAIRS_LIMIT else "rff"
    if method == "rff":
        state = RFFLocalState(
            n_classes,
            phi.shape[1],
            bandwidth=bandwidth,
            n_bins=n_bins,
            min_bin_size=min_bin_size,
            n_components=n_components,
            random_state=random_state,
            device=device,
        )
        state.update(proba, y_index, phi, w)
        lce = state.next_pass().update(proba, y_index, phi, w)
        if state.anchor_weight.sum() > 0:  # its noise check (and warning)
            state.compute(_class_weights(class_weight, proba, y_index, w))
        return _AnchorErrors(
            lce=lce, ess=None, proba=proba, y_index=y_index, sample_weight=w
        )
    resid = proba - (y_index[:, None] == np.arange(n_classes))
    from .._torch.kernels import (
        local_anchor_errors,  # torch: imported by the metrics that need it only
    )

    errors = local_anchor_errors(
        phi, resid, w, groups, bandwidth, device=device, with_ess=with_ess
    )
    return _AnchorErrors(
        lce=errors.lce, ess=errors.ess, proba=proba, y_index=y_index, sample_weight=w
    )


def _kernel_flatness(phi, weight, groups, bandwidth) -> tuple[float, float]:
    """How flat the kernel of the local metrics is, on a sample of anchors.

    For up to ``_FLAT_ANCHORS`` (class, anchor) pairs of positive weight,
    evenly spaced over the kept bins of every class, the ratio of the
    anchor's effective sample size (Kish's ``(sum_j w_j K_ij)^2 / sum_j
    (w_j K_ij)^2`` over the other members ``j`` of its bin, as
    :func:`effective_sample_size`) to the Kish size ``(sum_j w_j)^2 / sum_j
    w_j^2`` of those members: 1 when the kernel weighs them all alike, near
    0 when it is local. Computed in numpy on the sample, so the cost is
    about ``_FLAT_ANCHORS`` rows of the kernel.

    Parameters
    ----------
    phi : ndarray of shape (n_samples, n_features)
        Features in the metric's space.
    weight : ndarray of shape (n_samples,)
        Sample weights.
    groups : list of (int, ndarray of int)
        ``(k, members)`` of every kept confidence bin.
    bandwidth : float
        Standard deviation of the Gaussian kernel.

    Returns
    -------
    ratio : float
        Median ratio over the sampled anchors (NaN without one).
    distance : float
        Median over the sampled anchors of the median distance to the
        other members of their bin (NaN without one).
    """
    members = [idx for _, idx in groups]
    anchors = [np.flatnonzero(weight[idx] > 0) for idx in members]  # positions
    sizes = np.array([len(a) for a in anchors], dtype=np.int64)
    total = int(sizes.sum())
    if total == 0:
        return np.nan, np.nan
    picks = np.unique(np.linspace(0, total - 1, min(total, _FLAT_ANCHORS)).round())
    starts = np.concatenate([[0], np.cumsum(sizes)])
    owner = np.searchsorted(starts, picks, side="right") - 1
    ratios, distances = [], []
    for g in np.unique(owner):
        idx = members[g]
        local = anchors[g][picks[owner == g].astype(np.int64) - starts[g]]
        x, w = phi[idx], weight[idx]
        sq = np.einsum("ij,ij->i", x, x)
        w_sum, w_sq = w.sum(), np.dot(w, w)
        step = max(1, _FLAT_CHUNK // len(idx))
        for lo in range(0, len(local), step):
            rows = local[lo : lo + step]
            d2 = np.maximum(sq[rows, None] + sq[None, :] - 2.0 * x[rows] @ x.T, 0.0)
            wk = np.exp(-d2 / (2.0 * bandwidth**2)) * w
            others = (w > 0) & np.ones((len(rows), 1), bool)
            others[np.arange(len(rows)), rows] = False  # self excluded
            wk[~others] = 0.0
            s1, s2 = wk.sum(axis=1), np.einsum("ij,ij->i", wk, wk)
            with np.errstate(invalid="ignore", divide="ignore"):
                ess = np.where(s1 > 1e-12, s1**2 / s2, 0.0)
                rest = (w_sum - w[rows]) ** 2 / (w_sq - w[rows] ** 2)
            keep = np.isfinite(rest) & (rest > 0) & others.any(axis=1)
            ratios.append(ess[keep] / rest[keep])
            d2[~others] = np.nan
            distances.append(np.sqrt(np.nanmedian(d2[keep], axis=1)))
    ratios, distances = np.concatenate(ratios), np.concatenate(distances)
    if ratios.size == 0:
        return np.nan, np.nan
    return float(np.median(ratios)), float(np.median(distances))


def _warn_flat_kernel(name, phi, weight, groups, bandwidth) -> None:
    """:class:`FlatKernelWarning` when :func:`_kernel_flatness` exceeds the limit."""
    ratio, distance = _kernel_flatness(phi, weight, groups, bandwidth)
    if not ratio > FLAT_ESS_RATIO:
        return
    warn(
        f"{name}: the kernel is nearly flat. The median anchor's effective "
        f"sample size is {ratio:.0%} of the other samples of its confidence "
        f"bin (more than {FLAT_ESS_RATIO:.0%}): with bandwidth={bandwidth:.3g} "
        f"and a median distance of {distance:.2g} between samples of a bin in "
        f"this space, each anchor averages over most of its bin and the "
        f"local error tends to the classwise ECE. Lower bandwidth, or pass "
        f'bandwidth="auto" (a quarter of the median distance between '
        f"samples; see skcal.metrics.local_bandwidth).",
        FlatKernelWarning,
    )


def _summarise(anchors: _AnchorErrors, class_weight, reduce: str) -> float:
    """Class-weighted mean of the per-class mean (or max) of ``|LCE_k(i)|``."""
    lce, w = anchors.lce, anchors.sample_weight
    cw = _class_weights(class_weight, anchors.proba, anchors.y_index, w)
    values, weights = [], []
    for k in range(lce.shape[1]):
        keep = ~np.isnan(lce[:, k]) & (w > 0)
        if not keep.any() or cw[k] == 0:
            continue
        a = np.abs(lce[keep, k])
        values.append(np.average(a, weights=w[keep]) if reduce == "mean" else a.max())
        weights.append(cw[k])
    if not values:
        raise ValueError(NO_KEPT_BIN)
    weights = np.asarray(weights)
    return float(np.dot(values, weights / weights.sum()))


_PARAMS_DOC = """    y_true : array-like of shape (n_samples,)
        True labels.
    y_proba : array-like of shape (n_samples, n_classes)
        Predicted probabilities.
    features : array-like of shape (n_samples, n_features)
        Features of each sample (e.g. backbone embeddings).
    bandwidth : float or "auto", default=10.0
        Standard deviation of the Gaussian kernel, in the units of the space.
        A number is an absolute scale: the paper used 10 on 50 principal
        components of 768 to 2048 standardised features; on a few dozen
        features it is nearly flat. ``"auto"`` scales it to the data: a
        quarter of the median distance between samples in the space (see
        :func:`local_bandwidth`, which returns it), the same for every
        calibrator scored on the same features. The error metrics and the
        ESS profile raise a :class:`~skcal.exceptions.FlatKernelWarning`
        when the median anchor's effective sample size (estimated on up to
        512 anchors) is more than half of the other samples of its bin: the
        local error then tends to the classwise ECE.
    n_bins : int, default=15
        Equal-width bins of each class's probability; neighbours are taken
        within the same bin.
    min_bin_size : float, default=20
        Only bins with more than this many samples are used (with sample
        weights: Kish's effective number ``(sum w)^2 / sum w^2`` of the bin).
    space : "pca", LocalSpace or None, default="pca"
        ``"pca"``: standardise ``features`` and project them on their first
        50 principal components, fitted on ``features``; a fitted
        :class:`LocalSpace`: its transform (use one fitted on reference
        features to compare methods in one space); None: ``features`` as
        given.
"""


_CLASS_WEIGHT_DOC = """\
    class_weight : array-like of shape (n_classes,), "frequency" or None, \
default=None
        Weights ``w_k`` of the classes: uniform (None), the empirical class
        frequencies, or given (normalised to sum to 1).
"""

_TAIL_DOC = """    sample_weight : array-like of shape (n_samples,), default=None
        Sample weights, as frequencies: in the kernel sums, the bin sizes
        (total weight) and the averages over anchors.
    labels : array-like of shape (n_classes,), default=None
        Label of each column of ``y_proba``.
    device : {"auto", "cpu", "cuda"} or "cuda:N", default="auto"
        Torch device of the kernel computation; "auto" is a CUDA device when
        one is available, else the CPU.
"""


_APPROX_DOC = """\
    method : {"exact", "rff", "auto"}, default="exact"
        ``"exact"``: every kernel pair, ``O(n^2 d)`` per bin. ``"rff"``: the
        kernel sums from ``n_components`` random Fourier features, ``O(n D
        d)`` and mergeable across chunks (the only method for Dask arrays);
        unbiased for each pair, its error shrinks as neighbourhoods hold more
        rows, and MLCE (a maximum) is inflated by its noise: see "Large data
        and clusters" in the user guide for the measured errors.
        ``"auto"``: exact up to 2.5e10 kernel pairs (50,000 rows of 10
        classes), random features above.
    n_components : int, default=1024
        ``D``, random frequencies of ``method="rff"`` (``2 D`` features).
    random_state : int, default=0
        Seed of the random frequencies: fixed, so the approximate metric is a
        deterministic function of its inputs.
"""


_fill_doc = fill_doc(
    local_params=_PARAMS_DOC,
    class_weight=_CLASS_WEIGHT_DOC,
    local_tail=_TAIL_DOC,
    approx=_APPROX_DOC,
)


_LOCAL_PARAMS = {
    **BINNED_METRIC_PARAMS,
    "features": ["array-like"],
    "bandwidth": [Interval(Real, 0, None, closed="neither"), StrOptions({"auto"})],
    "min_bin_size": [Interval(Real, 0, None, closed="left")],
    "space": [StrOptions({"pca"}), LocalSpace, None],
    "class_weight": ["array-like", StrOptions({"frequency"}), None],
    "device": [str],
}
_APPROX_PARAMS = {
    **_LOCAL_PARAMS,
    "method": [StrOptions({"exact", "rff", "auto"})],
    "n_components": [Interval(Integral, 1, None, closed="left")],
    "random_state": [Interval(Integral, 0, None, closed="left")],
}


#: The per-row arguments of the local metrics, split by ``groups``.
_LOCAL_ROWS = ("y_true", "y_proba", "features", "sample_weight")


@groupable(rows=_LOCAL_ROWS)
@validate_params(_APPROX_PARAMS, prefer_skip_nested_validation=True)
@_fill_doc
@dask_dispatch("local_calibration_error")
def local_calibration_error(
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
    """Local calibration error (LCE) of Barbera et al.

    For each class ``k``, samples are binned by ``p_k`` (``n_bins``
    equal-width bins); in each bin with more than ``min_bin_size`` samples,
    every sample ``i`` is an anchor with error

    ``LCE_k(i) = sum_j K_ij (p_jk - y_jk) / sum_j K_ij``,
    ``K_ij = exp(-|phi_i - phi_j|^2 / (2 bandwidth^2))``

    over the samples ``j`` of the same bin (``i`` included). ``LCE_k`` is the
    mean of ``|LCE_k(i)|`` over the anchors of the kept bins, and the result
    is ``sum_k w_k LCE_k`` with class weights ``w_k`` summing to 1 (classes
    without a kept bin are left out and the weights renormalised). The
    kernel runs in torch in row chunks with float64 sums, on ``device``;
    memory is ``O(chunk x bin size)``.

    Parameters
    ----------
    {local_params}
    {class_weight}
    {local_tail}
    {approx}

    Returns
    -------
    float
        The local calibration error; lower is better.

    See Also
    --------
    max_local_calibration_error : The class-weighted mean of the per-class
        maxima.
    LocalSpace : A fixed feature space for comparing methods.

    References
    ----------
    C. Barbera, L. Perini, G. De Toni, A. Passerini, A. Pugnana. "Multiclass
    Local Calibration With the Jensen-Shannon Distance". AISTATS 2026,
    arXiv:2510.26566.

    Examples
    --------
    >>> import numpy as np
    >>> from skcal.metrics import local_calibration_error
    >>> rng = np.random.default_rng(0)
    >>> features = rng.normal(size=(300, 5))
    >>> proba = np.full((300, 2), 0.5)
    >>> y = rng.integers(0, 2, 300)
    >>> lce = local_calibration_error(y, proba, features, space=None, bandwidth=1.0)
    >>> bool(0 <= lce < 0.1)
    True
    """
    # locals(): this function's arguments, named as _anchor_errors' own
    anchors = _anchor_errors(**locals(), with_ess=False, name="local_calibration_error")
    return _summarise(anchors, class_weight, "mean")


@groupable(rows=_LOCAL_ROWS)
@validate_params(_APPROX_PARAMS, prefer_skip_nested_validation=True)
@_fill_doc
@dask_dispatch("max_local_calibration_error")
def max_local_calibration_error(
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
    """Maximum local calibration error (MLCE) of Barbera et al.

    ``MLCE = sum_k w_k max_i |LCE_k(i)|``: the class-weighted mean of the
    per-class maxima over the anchors of the kept bins (not a global
    maximum), with the anchors and kernel of
    :func:`local_calibration_error`. Isolated confident errors dominate it,
    so values of 0.5 and more are common.

    Parameters
    ----------
    {local_params}
    {class_weight}
    {local_tail}
    {approx}

    Returns
    -------
    float
        The maximum local calibration error; lower is better.

    Examples
    --------
    >>> import numpy as np
    >>> from skcal.metrics import max_local_calibration_error
    >>> rng = np.random.default_rng(0)
    >>> features = rng.normal(size=(300, 5))
    >>> y = rng.integers(0, 2, 300)
    >>> proba = np.full((300, 2), 0.5)
    >>> mlce = max_local_calibration_error(
    ...     y, proba, features, space=None, bandwidth=1.0)
    >>> bool(mlce < 0.5)
    True
    """
    # locals(): this function's arguments, named as _anchor_errors' own
    anchors = _anchor_errors(
        **locals(), with_ess=False, name="max_local_calibration_error"
    )
    return _summarise(anchors, class_weight, "max")


@dataclass
class LocalCalibrationErrors:
    """LCE and MLCE of one kernel computation.

    Attributes
    ----------
    lce : float
        :func:`local_calibration_error`.
    mlce : float
        :func:`max_local_calibration_error`.
    anchor_errors : ndarray of shape (n_samples, n_classes)
        Signed ``LCE_k(i)`` of every anchor; NaN where its bin was dropped.
    """

    lce: float
    mlce: float
    anchor_errors: np.ndarray


@groupable(rows=_LOCAL_ROWS, value=lambda r: r.lce)
@validate_params(_APPROX_PARAMS, prefer_skip_nested_validation=True)
@_fill_doc
@dask_dispatch("local_calibration_errors")
def local_calibration_errors(
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
    """LCE, MLCE and the anchor errors from one kernel computation.

    :func:`local_calibration_error` and :func:`max_local_calibration_error`
    each run the kernel; this runs it once for both, which halves the cost
    of reporting the pair.

    Parameters
    ----------
    {local_params}
    {class_weight}
    {local_tail}
    {approx}

    Returns
    -------
    LocalCalibrationErrors
        ``lce``, ``mlce`` and ``anchor_errors``.

    Examples
    --------
    >>> import numpy as np
    >>> from skcal.metrics import local_calibration_errors
    >>> rng = np.random.default_rng(0)
    >>> features = rng.normal(size=(300, 5))
    >>> y = rng.integers(0, 2, 300)
    >>> result = local_calibration_errors(
    ...     y, np.full((300, 2), 0.5), features, bandwidth=1.0)
    >>> result.anchor_errors.shape, bool(result.lce <= result.mlce)
    ((300, 2), True)
    """
    # locals(): this function's arguments, named as _anchor_errors' own
    anchors = _anchor_errors(
        **locals(), with_ess=False, name="local_calibration_errors"
    )
    return LocalCalibrationErrors(
        lce=_summarise(anchors, class_weight, "mean"),
        mlce=_summarise(anchors, class_weight, "max"),
        anchor_errors=anchors.lce,
    )


@validate_params(
    {k: v for k, v in _LOCAL_PARAMS.items() if k != "class_weight"},
    prefer_skip_nested_validation=True,
)
@_fill_doc
@dask_dispatch("effective_sample_size")
def effective_sample_size(
    y_true,
    y_proba,
    features,
    *,
    bandwidth=10.0,
    n_bins=15,
    min_bin_size=20,
    space="pca",
    sample_weight=None,
    labels=None,
    device="auto",
):
    """Effective sample size of each anchor's neighbourhood, per class.

    Kish's ``ESS_k(i) = (sum_{j != i} K_ij)^2 / sum_{j != i} K_ij^2`` over
    the other samples of ``i``'s class-``k`` confidence bin, with the kernel
    of :func:`local_calibration_error`; with weights, Kish's
    ``(sum w_j K_ij)^2 / sum (w_j K_ij)^2``, unchanged when every weight is
    multiplied by a constant. 0 when the neighbourhood weight is at most
    1e-12.

    Parameters
    ----------
    {local_params}
    {local_tail}

    Returns
    -------
    ndarray of shape (n_samples, n_classes)
        ESS of sample ``i`` as an anchor of class ``k``; NaN where its bin
        has too few samples.

    Examples
    --------
    >>> import numpy as np
    >>> from skcal.metrics import effective_sample_size
    >>> features = np.zeros((30, 2))  # all neighbours at distance 0
    >>> proba = np.full((30, 2), 0.5)
    >>> effective_sample_size(np.arange(30) % 2, proba, features, space=None)[0]
    array([29., 29.])
    """
    return _anchor_errors(**locals(), with_ess=True).ess  # the arguments, by name


@dataclass
class ESSProfile:
    """Mean ``|LCE|`` against effective sample size (Barbera et al., Fig. 3).

    Attributes
    ----------
    ess : ndarray of shape (n_quantiles,)
        Mean ESS of each ESS bin (count-weighted over classes).
    lce : ndarray of shape (n_quantiles,)
        Mean absolute anchor error of each ESS bin.
    count : ndarray of shape (n_quantiles,)
        Number of (anchor, class) pairs in each ESS bin, over classes.
    """

    ess: np.ndarray
    lce: np.ndarray
    count: np.ndarray


@validate_params(
    {
        **{k: v for k, v in _LOCAL_PARAMS.items() if k != "class_weight"},
        "n_quantiles": [Interval(Integral, 1, None, closed="left")],
    },
    prefer_skip_nested_validation=True,
)
@dask_dispatch("ess_profile")
def ess_profile(
    y_true,
    y_proba,
    features,
    *,
    n_quantiles=15,
    bandwidth=10.0,
    n_bins=15,
    min_bin_size=20,
    space="pca",
    sample_weight=None,
    labels=None,
    device="auto",
):
    """Mean ``|LCE|`` per quantile bin of the effective sample size.

    Per class, the anchors with ESS > 0 (and positive weight) are split
    into ``n_quantiles`` quantile bins of their ESS (edges from ``min - 1e-12`` to
    ``max + 1e-12``); the mean ``|LCE|`` and mean ESS of each bin are then
    averaged over classes, weighted by the bin counts. A calibrator that is
    only right where data are dense shows errors rising at low ESS.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        True labels.
    y_proba : array-like of shape (n_samples, n_classes)
        Predicted probabilities.
    features : array-like of shape (n_samples, n_features)
        Features of each sample.
    n_quantiles : int, default=15
        Number of ESS bins per class.
    bandwidth, n_bins, min_bin_size, space, sample_weight, labels, device
        As in :func:`local_calibration_error`.

    Returns
    -------
    ESSProfile
        ``ess``, ``lce`` and ``count`` per ESS bin.

    Examples
    --------
    >>> import numpy as np
    >>> from skcal.metrics import ess_profile
    >>> rng = np.random.default_rng(0)
    >>> features = rng.normal(size=(400, 3))
    >>> proba = np.full((400, 2), 0.5)
    >>> y = rng.integers(0, 2, 400)
    >>> profile = ess_profile(y, proba, features, space=None, bandwidth=1.0)
    >>> profile.lce.shape, int(profile.count.sum())
    ((15,), 800)
    """
    anchors = _anchor_errors(
        y_true,
        y_proba,
        features,
        bandwidth=bandwidth,
        n_bins=n_bins,
        min_bin_size=min_bin_size,
        space=space,
        sample_weight=sample_weight,
        labels=labels,
        device=device,
        with_ess=True,
        name="ess_profile",
    )
    lce, ess, w = anchors.lce, anchors.ess, anchors.sample_weight
    count = np.zeros(n_quantiles)
    ess_sum = np.zeros(n_quantiles)
    lce_sum = np.zeros(n_quantiles)
    for k in range(lce.shape[1]):
        keep = ~np.isnan(ess[:, k]) & (ess[:, k] > 0) & (w > 0)
        if not keep.any():
            continue
        e, a = ess[keep, k], np.abs(lce[keep, k])
        # bin on the ESS rounded to 1e-9 relative: values equal up to the
        # rounding of the kernel sums (which depends on the row order) tie
        unit = 10.0 ** (np.floor(np.log10(e.max())) - 9)
        e_bin = np.round(e / unit) * unit
        edges = np.quantile(e_bin, np.linspace(0.0, 1.0, n_quantiles + 1))
        edges[0], edges[-1] = e_bin.min() - 1e-12, e_bin.max() + 1e-12
        edges = np.maximum.accumulate(edges)
        idx = assign_bins(e_bin, edges, closed="left")
        count += np.bincount(idx, minlength=n_quantiles)
        ess_sum += np.bincount(idx, weights=e, minlength=n_quantiles)
        lce_sum += np.bincount(idx, weights=a, minlength=n_quantiles)
    with np.errstate(invalid="ignore", divide="ignore"):
        return ESSProfile(
            ess=ess_sum / count, lce=lce_sum / count, count=count.astype(np.int64)
        )
