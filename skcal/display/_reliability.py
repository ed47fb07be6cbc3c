"""Reliability diagram: observed frequency against mean predicted probability."""

from __future__ import annotations

import warnings

import numpy as np
from sklearn.utils import check_random_state

from ..metrics import binned_statistics
from ..metrics._binning import assign_bins
from ..metrics._ece import top_label
from ..utils._validation import check_proba_targets
from ..utils._warnings import warn
from ._ess import _start_line


def _scores_and_targets(proba, y_index, view, labels_):
    """(scores, targets, title) of the top-label or one class's view."""
    if isinstance(view, str) and view == "top_label":
        conf, correct = top_label(proba, y_index)
        return conf, correct, "top_label"
    matches = np.flatnonzero(labels_ == view) if labels_ is not None else []
    if len(matches):
        k = int(matches[0])
    elif isinstance(view, (int, np.integer)) and 0 <= view < proba.shape[1]:
        k = int(view)
    else:
        raise ValueError(
            f"view must be 'top_label', a label of the classes or a column index "
            f"in [0, {proba.shape[1]}); got {view!r}."
        )
    name = labels_[k] if labels_ is not None else k
    return proba[:, k], (y_index == k).astype(np.float64), f"class {name}"


class ReliabilityDisplay:
    """Reliability diagram, in scikit-learn's Display style.

    For each bin of the scores (top-label confidences, or one class's
    probabilities), the observed frequency (accuracy, or frequency of the
    class) is plotted against the mean score; a calibrated model lies on the
    diagonal. The bins are those of :func:`skcal.metrics.binned_statistics`,
    the binning of every binned metric of skcal, so the plotted points are
    exactly the bins that :func:`~skcal.metrics.expected_calibration_error`
    (top-label) or :func:`~skcal.metrics.classwise_calibration_error` (one
    class) average. Empty bins are not drawn. Build it with
    :meth:`from_predictions` or :meth:`from_estimator`; pass ``ax`` to draw
    several calibrators on one axis.

    Parameters
    ----------
    mean_predicted : ndarray of shape (n_bins,)
        Weighted mean score per bin (NaN when empty).
    fraction_positive : ndarray of shape (n_bins,)
        Weighted observed frequency per bin (NaN when empty).
    count : ndarray of shape (n_bins,)
        Number of samples per bin.
    edges : ndarray of shape (n_bins + 1,)
        Bin edges.
    band : ndarray of shape (2, n_bins), default=None
        Lower and upper bootstrap quantiles of the frequency per bin.
    name : str, default=None
        Legend label.
    view : str, default="top_label"
        What the scores are: "top_label" for the top-label confidences
        (against accuracy), else a title for one class's probabilities, such
        as "class 3" (used in the axis labels). The spelling "top-label" is
        deprecated.

    Attributes
    ----------
    line_ : matplotlib Line2D
        The reliability curve.
    band_ : matplotlib PolyCollection or None
        The bootstrap band.
    bars_ : matplotlib BarContainer or None
        The bin counts (on ``count_ax_``).
    count_ax_ : matplotlib Axes or None
        Secondary axis of the counts.
    ax_ : matplotlib Axes
        Axes of the plot.
    figure_ : matplotlib Figure
        Figure of the plot.

    Examples
    --------
    >>> import numpy as np
    >>> from skcal.display import ReliabilityDisplay
    >>> rng = np.random.default_rng(0)
    >>> p = rng.uniform(size=1000)
    >>> y = (rng.uniform(size=1000) < p).astype(int)
    >>> disp = ReliabilityDisplay.from_predictions(y, p, n_bins=10, name="model")
    >>> disp.count.sum()
    np.int64(1000)
    >>> disp.line_.get_label()
    'model'
    """

    def __init__(
        self,
        *,
        mean_predicted,
        fraction_positive,
        count,
        edges,
        band=None,
        name=None,
        view="top_label",
    ):
        if view == "top-label":
            warn(
                'view="top-label" is deprecated and will not be accepted in a '
                'future version: use view="top_label", the spelling of '
                "from_predictions and of the metrics.",
                FutureWarning,
            )
            view = "top_label"
        self.mean_predicted = np.asarray(mean_predicted)
        self.fraction_positive = np.asarray(fraction_positive)
        self.count = np.asarray(count)
        self.edges = np.asarray(edges)
        self.band = None if band is None else np.asarray(band)
        self.name = name
        self.view = view

    def plot(self, ax=None, *, name=None, show_counts=True, ref_line=True, **kwargs):
        """Draw the diagram.

        Parameters
        ----------
        ax : matplotlib Axes, default=None
            Axes to draw on; a new figure when None.
        name : str, default=None
            Legend label; overrides the one given at construction.
        show_counts : bool, default=True
            Draw the bin counts as bars on a secondary axis.
        ref_line : bool, default=True
            Draw the diagonal of perfect calibration.
        **kwargs
            Passed to ``ax.plot``.

        Returns
        -------
        self : ReliabilityDisplay
        """
        name = self.name if name is None else name
        ax, kwargs = _start_line("ReliabilityDisplay.plot", ax, name, kwargs)
        keep = self.count > 0
        if ref_line and not any(
            line.get_label() == "perfectly calibrated" for line in ax.get_lines()
        ):
            ax.plot([0, 1], [0, 1], ls=":", color="k", label="perfectly calibrated")
        (self.line_,) = ax.plot(
            self.mean_predicted[keep], self.fraction_positive[keep], **kwargs
        )
        self.band_ = None
        if self.band is not None:
            self.band_ = ax.fill_between(
                self.mean_predicted[keep],
                self.band[0, keep],
                self.band[1, keep],
                color=self.line_.get_color(),
                alpha=0.2,
                linewidth=0,
            )
        self.bars_ = self.count_ax_ = None
        if show_counts:
            self.count_ax_ = ax.twinx()
            widths = np.diff(self.edges)
            self.bars_ = self.count_ax_.bar(
                self.edges[:-1],
                self.count,
                width=widths,
                align="edge",
                alpha=0.15,
                color=self.line_.get_color(),
            )
            self.count_ax_.set_ylabel("samples per bin")
            self.count_ax_.set_ylim(0, 4 * max(self.count.max(), 1))
        ax.set_xlim(0, 1)
        ax.set_ylim(0, 1)
        if self.view == "top_label":
            ax.set_xlabel("mean confidence (top-label)")
            ax.set_ylabel("accuracy")
        else:
            ax.set_xlabel(f"mean predicted probability ({self.view})")
            ax.set_ylabel("observed frequency")
        ax.legend(loc="upper left")
        self.ax_, self.figure_ = ax, ax.figure
        return self

    @classmethod
    def from_predictions(
        cls,
        y_true,
        y_proba,
        *,
        view="top_label",
        n_bins=15,
        strategy="uniform",
        closed="left",
        sample_weight=None,
        labels=None,
        n_bootstraps=0,
        confidence=0.9,
        random_state=None,
        name=None,
        ax=None,
        show_counts=True,
        **kwargs,
    ):
        """Bin the predictions and plot the diagram.

        Parameters
        ----------
        y_true : array-like of shape (n_samples,)
            True labels.
        y_proba : array-like of shape (n_samples, n_classes) or (n_samples,)
            Predicted probabilities (1-D: positive class of a binary problem).
        view : "top_label", a label or a column index, default="top_label"
            Top-label confidence against accuracy, or one class's
            probability against its frequency.
        n_bins : int, default=15
            Number of bins.
        strategy : {"uniform", "quantile"}, default="uniform"
            Equal-width or equal-mass bins.
        closed : {"left", "right"}, default="left"
            Bin-edge convention, as in the metrics.
        sample_weight : array-like of shape (n_samples,), default=None
            Sample weights.
        labels : array-like of shape (n_classes,), default=None
            Label of each column of ``y_proba``.
        n_bootstraps : int, default=0
            Bootstrap resamples of the rows for a band of the observed
            frequency per bin (same bin edges); 0 draws no band.
        confidence : float, default=0.9
            Coverage of the bootstrap band.
        random_state : int, RandomState instance or None, default=None
            Seeds the bootstrap.
        name : str, default=None
            Legend label.
        ax : matplotlib Axes, default=None
            Axes to draw on.
        show_counts : bool, default=True
            Draw the bin counts.
        **kwargs
            Passed to ``ax.plot``.

        Returns
        -------
        ReliabilityDisplay
        """
        proba, y_index, w = check_proba_targets(
            y_true, y_proba, labels=labels, sample_weight=sample_weight
        )
        labels_ = None if labels is None else np.asarray(labels)
        scores, targets, title = _scores_and_targets(proba, y_index, view, labels_)
        stats = binned_statistics(
            scores, targets, w, n_bins=n_bins, strategy=strategy, closed=closed
        )
        band = None
        if n_bootstraps > 0:
            # resample rows, keep the diagram's edges
            rng = check_random_state(random_state)
            idx = assign_bins(scores, stats.edges, closed)
            freqs = np.empty((n_bootstraps, n_bins))
            for b in range(n_bootstraps):
                rows = rng.randint(len(scores), size=len(scores))
                total = np.bincount(idx[rows], weights=w[rows], minlength=n_bins)
                hits = np.bincount(
                    idx[rows], weights=w[rows] * targets[rows], minlength=n_bins
                )
                with np.errstate(invalid="ignore", divide="ignore"):
                    freqs[b] = np.where(total > 0, hits / total, np.nan)
            alpha = (1 - confidence) / 2
            with warnings.catch_warnings():  # all-NaN bins stay NaN
                warnings.simplefilter("ignore", RuntimeWarning)
                band = np.nanquantile(freqs, [alpha, 1 - alpha], axis=0)
        display = cls(
            mean_predicted=stats.mean_score,
            fraction_positive=stats.mean_target,
            count=stats.count,
            edges=stats.edges,
            band=band,
            name=name,
            view=title,
        )
        return display.plot(ax=ax, show_counts=show_counts, **kwargs)

    @classmethod
    def from_estimator(cls, estimator, X, y, *, name=None, **kwargs):
        """Plot the diagram of ``estimator.predict_proba(X)``.

        Parameters
        ----------
        estimator : fitted classifier or calibrator
            Anything with ``predict_proba``; its ``classes_`` label the
            columns.
        X : array-like
            Input of ``predict_proba`` (scores for a score calibrator,
            embeddings for a local one).
        y : array-like of shape (n_samples,)
            True labels.
        name : str, default=None
            Legend label; the estimator's class name by default.
        **kwargs
            Passed to :meth:`from_predictions`.

        Returns
        -------
        ReliabilityDisplay
        """
        proba = estimator.predict_proba(X)
        kwargs.setdefault("labels", getattr(estimator, "classes_", None))
        name = type(estimator).__name__ if name is None else name
        return cls.from_predictions(y, proba, name=name, **kwargs)
