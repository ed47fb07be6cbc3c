"""Reliability diagram: observed frequency against mean predicted probability."""

from __future__ import annotations

import warnings
import weakref

import numpy as np
from sklearn.utils import check_random_state

from ..metrics import binned_statistics
from ..metrics._binning import assign_bins
from ..metrics._ece import top_label
from ..metrics._groups import take_rows
from ..utils._groups import check_groups
from ..utils._validation import check_proba_targets
from ..utils._warnings import warn
from ._ess import _pyplot

#: The count panel of each diagram axis, so that every model drawn on one
#: axis shares one count axis: ``{diagram Axes: count Axes}``.
_COUNT_PANELS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
#: Marker area (points^2) of a bin holding every sample, and of an empty one.
_MAX_AREA, _MIN_AREA = 300.0, 6.0
#: Marker area of a bin of fewer than ``min_count`` samples (drawn hollow).
_HOLLOW_AREA = 30.0
#: The places the legend may take inside the diagram: the two corners the
#: diagonal leaves free first, then the other corners and the sides' middles.
_LEGEND_PLACES = (
    "upper left",
    "lower right",
    "upper right",
    "lower left",
    "upper center",
    "center left",
    "center right",
    "lower center",
)
#: Font sizes tried in turn: a legend that covers markers at one size is
#: shrunk before it may cover any (it never leaves the diagram, where it
#: would cover a title or a neighbouring panel).
_LEGEND_SIZES = ("medium", "small", "x-small")
#: Height of the counts drawn inside the diagram (a share of its height).
_INSET_HEIGHT = 0.25
#: Headroom above the largest count on the count axis.
_COUNT_MARGIN = 1.05


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
    class) average. Empty bins are not drawn.

    Each bin's marker has an area proportional to the share of the samples
    it holds, and bins of fewer than ``min_count`` samples are drawn hollow:
    a point resting on one sample does not look like one resting on a
    thousand. The legend gives each model's ECE over the plotted bins; it
    stays inside the diagram (never over a title or a neighbouring panel),
    in the first corner or side that covers no marker (upper left and lower
    right, which the diagonal leaves free, first), shrunk to a smaller font
    before it may cover one. The counts go to a panel below the diagram (a
    new figure), or, when you pass ``ax``, to the diagram's lower quarter,
    drawn behind the curves with their scale written inside (nothing spills
    onto a neighbouring panel; ``show_counts=False`` leaves them out, and
    ``count_ax`` puts them on an axis of yours). Several models drawn on the
    same ``ax`` share it, each as an outline of its own colour. The count
    axis runs to the largest count (plus 5%), on a linear or
    (``count_scale="log"``) logarithmic scale.

    Build it with :meth:`from_predictions` or :meth:`from_estimator`; pass
    ``ax`` to draw several calibrators on one axis.

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
    weight : ndarray of shape (n_bins,), default=None
        Sum of the sample weights per bin (the ECE's bin weights); ``count``
        when None.
    name : str, default=None
        Legend label.
    view : str, default="top_label"
        What the scores are: "top_label" for the top-label confidences
        (against accuracy), else a title for one class's probabilities, such
        as "class 3" (used in the axis labels). The spelling "top-label" is
        deprecated.

    Attributes
    ----------
    ece_ : float
        The calibration error of the plotted bins, ``sum_b w_b |fraction_b -
        mean_b| / sum_b w_b``: top-label ECE for the top-label view, the
        class's binned error for one class.
    line_ : matplotlib Line2D
        The reliability curve.
    markers_ : matplotlib PathCollection
        One marker per non-empty bin, its area proportional to the bin's
        share of the samples.
    band_ : matplotlib PolyCollection or None
        The bootstrap band.
    counts_ : matplotlib StepPatch or None
        The bin counts, an outline on ``count_ax_``.
    count_ax_ : matplotlib Axes or None
        The count panel, shared by every model drawn on ``ax_``.
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
    >>> disp.line_.get_label() == f"model (ECE {disp.ece_:.3f})"
    True
    """

    def __init__(
        self,
        *,
        mean_predicted,
        fraction_positive,
        count,
        edges,
        band=None,
        weight=None,
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
        self.weight = None if weight is None else np.asarray(weight)
        self.name = name
        self.view = view

    def plot(
        self,
        ax=None,
        *,
        name=None,
        show_counts=True,
        ref_line=True,
        show_ece=True,
        min_count=10,
        count_ax=None,
        count_scale="linear",
        **kwargs,
    ):
        """Draw the diagram.

        Parameters
        ----------
        ax : matplotlib Axes, default=None
            Axes to draw on. None: a new figure, with the counts in a panel
            below the diagram.
        name : str, default=None
            Legend label; overrides the one given at construction.
        show_counts : bool, default=True
            Draw the bin counts. On a given ``ax`` they go to one count axis
            (the lower quarter of ``ax``, its scale on the right) shared by
            every model drawn on that ``ax``.
        ref_line : bool, default=True
            Draw the diagonal of perfect calibration.
        show_ece : bool, default=True
            Append the ECE of the plotted bins to the legend label.
        min_count : int, default=10
            Bins with fewer samples are drawn with hollow markers.
        count_ax : matplotlib Axes, default=None
            Draw the counts on this axis (such as a panel below ``ax``)
            instead; later models drawn on ``ax`` reuse it.
        count_scale : {"linear", "log"}, default="linear"
            Scale of the count axis; "log" shows bins of a few samples next
            to bins of thousands.
        **kwargs
            Passed to ``ax.plot`` (the curve; markers are drawn separately).

        Returns
        -------
        self : ReliabilityDisplay
        """
        if count_scale not in ("linear", "log"):
            raise ValueError(
                f"count_scale must be 'linear' or 'log'; got {count_scale!r}. Use "
                "'log' when a few bins hold most of the samples."
            )
        name = self.name if name is None else name
        keep = self.count > 0
        self.ece_ = self._ece(keep)
        if ax is None:
            ax, count_ax = self._new_axes(show_counts, count_ax)
        label = kwargs.pop("label", name)
        if show_ece:
            ece = f"ECE {self.ece_:.3f}"
            label = ece if label is None else f"{label} ({ece})"
        if ref_line and not any(
            line.get_label() == "perfectly calibrated" for line in ax.get_lines()
        ):
            ax.plot([0, 1], [0, 1], ls=":", color="k", label="perfectly calibrated")
        self._draw_curve(ax, keep, label, min_count, kwargs)
        self.counts_, self.count_ax_ = None, None
        if show_counts:
            self._draw_counts(ax, count_ax, count_scale)
        self._label_axes(ax)
        _place_legend(ax)
        self.ax_, self.figure_ = ax, ax.figure
        return self

    def _ece(self, keep) -> float:
        """The weighted mean gap of the plotted bins."""
        weight = (self.count if self.weight is None else self.weight).astype(float)
        gaps = np.abs(self.fraction_positive - self.mean_predicted)
        total = weight[keep].sum()
        return float(weight[keep] @ gaps[keep] / total) if total > 0 else 0.0

    @staticmethod
    def _new_axes(show_counts, count_ax):
        """A new figure: the diagram, with a counts panel below when drawn."""
        plt = _pyplot("ReliabilityDisplay.plot")
        if show_counts and count_ax is None:
            _, (ax, count_ax) = plt.subplots(
                2,
                1,
                sharex=True,
                figsize=(5, 6),
                gridspec_kw={"height_ratios": (3, 1)},
                layout="constrained",
            )
            return ax, count_ax
        return plt.subplots()[1], count_ax

    def _draw_curve(self, ax, keep, label, min_count, kwargs) -> None:
        """The curve, its markers (sized by the bin's share, hollow below
        ``min_count``) and the band."""
        x, y = self.mean_predicted[keep], self.fraction_positive[keep]
        (self.line_,) = ax.plot(x, y, label=label, **kwargs)
        color = self.line_.get_color()
        share = self.count[keep] / max(self.count.sum(), 1)
        small = self.count[keep] < min_count
        self.markers_ = ax.scatter(
            x,
            y,
            # hollow markers stay large enough to be seen hollow
            s=np.where(
                small, _HOLLOW_AREA, _MIN_AREA + (_MAX_AREA - _MIN_AREA) * share
            ),
            facecolors=np.where(small[:, None], (0, 0, 0, 0), _rgba(color)),
            edgecolors=color,
            linewidths=1,
            zorder=self.line_.get_zorder() + 0.1,
        )
        self.band_ = None
        if self.band is not None:
            self.band_ = ax.fill_between(
                x, self.band[0, keep], self.band[1, keep], color=color, alpha=0.2,
                linewidth=0,
            )  # fmt: skip

    def _draw_counts(self, ax, count_ax, scale) -> None:
        """The counts as an outline on the count axis, scaled to the largest
        count of every model drawn on it (plus ``_COUNT_MARGIN``)."""
        panel = self.count_ax_ = self._count_panel(ax, count_ax)
        self.counts_ = panel.stairs(
            self.count, self.edges, color=self.line_.get_color(), linewidth=1.2
        )
        highest = max(
            float(np.max(p.get_data().values, initial=1))
            for p in panel.patches
            if hasattr(p, "get_data")  # the count outlines (StepPatch)
        )
        panel.set_yscale(scale)
        # log: a bin of one sample still shows as a step above the floor
        panel.set_ylim(0.5 if scale == "log" else 0, _COUNT_MARGIN * highest)
        if _COUNT_PANELS[ax][1]:  # inside the diagram: the scale in words
            panel.texts[0].set_text(
                f"samples per bin ({scale} scale; top: {highest:,.0f})"
            )

    def _label_axes(self, ax) -> None:
        """Limits and labels; with a counts panel below sharing x, the x
        label goes under it."""
        ax.set_xlim(0, 1)
        ax.set_ylim(0, 1)
        if self.view == "top_label":
            xlabel, ylabel = "mean confidence (top-label)", "accuracy"
        else:
            xlabel = f"mean predicted probability ({self.view})"
            ylabel = "observed frequency"
        ax.set_ylabel(ylabel)
        below = (
            self.count_ax_ is not None
            and not _COUNT_PANELS[ax][1]  # a panel, not inside the diagram
            and ax.get_shared_x_axes().joined(ax, self.count_ax_)
        )
        if below:
            self.count_ax_.set_xlabel(xlabel)
            ax.tick_params(labelbottom=False)
            ax.set_xlabel("")
        else:
            ax.set_xlabel(xlabel)

    @staticmethod
    def _count_panel(ax, count_ax):
        """The count axis of ``ax``: given, registered earlier, or a new one
        inside the lower quarter of ``ax`` (transparent, scale on the right)."""
        if count_ax is not None:
            _COUNT_PANELS[ax] = (count_ax, False)
        elif ax not in _COUNT_PANELS:
            # inside the diagram's lower part and behind its curves (zorder
            # below the lines'), with nothing outside the diagram: no tick
            # labels or axis label that could run into a neighbouring panel
            inset = ax.inset_axes([0, 0, 1, _INSET_HEIGHT], zorder=0.5)
            inset.patch.set_visible(False)
            inset.set_xlim(0, 1)
            inset.xaxis.set_visible(False)  # survives set_yscale, unlike ticks
            inset.yaxis.set_visible(False)
            for side in ("left", "top", "bottom", "right"):
                inset.spines[side].set_visible(False)
            inset.text(
                0.99, 0.97, "", transform=inset.transAxes, ha="right", va="top",
                fontsize="x-small", color="0.35",
            )  # fmt: skip
            _COUNT_PANELS[ax] = (inset, True)
        panel, inside = _COUNT_PANELS[ax]
        if not inside:
            panel.set_ylabel("samples per bin")
            panel.set_xlim(0, 1)
        return panel

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
        groups=None,
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
            Draw the bin counts (see :meth:`plot`).
        groups : array-like of shape (n_samples,), default=None
            A group label per row: one curve per group on the same axes
            (labelled by the group, with its ECE, and ``name`` before it
            when given), bins counted per group.
        **kwargs
            Passed to :meth:`plot` (``show_ece``, ``min_count``,
            ``count_ax``) and on to ``ax.plot``.

        Returns
        -------
        ReliabilityDisplay, or dict of group -> ReliabilityDisplay
            With ``groups``, one display per group (sorted), all on one axes.
        """
        if groups is not None:
            params = dict(
                view=view, n_bins=n_bins, strategy=strategy, closed=closed,
                n_bootstraps=n_bootstraps, confidence=confidence,
                random_state=random_state, show_counts=show_counts, **kwargs,
            )  # fmt: skip
            return _per_group(
                cls, y_true, y_proba, groups, sample_weight, labels, name, ax, params
            )
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
            weight=stats.weight,
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


def _per_group(cls, y_true, y_proba, groups, sample_weight, labels, name, ax, params):
    """One reliability curve per group on one axes (the counts shared)."""
    labels_, index = check_groups(groups, len(y_true))
    if labels is None:  # every group keeps the column order of all rows
        found = np.unique(np.asarray(y_true))
        n_columns = 2 if np.ndim(y_proba) == 1 else np.shape(y_proba)[1]
        labels = found if len(found) == n_columns else None
    displays, count_ax = {}, params.pop("count_ax", None)
    for k, group in enumerate(labels_.tolist()):
        rows = np.flatnonzero(index == k)
        display = cls.from_predictions(
            take_rows(y_true, rows),
            take_rows(y_proba, rows),
            sample_weight=take_rows(sample_weight, rows),
            labels=labels,
            name=str(group) if name is None else f"{name}: {group}",
            ax=ax,
            count_ax=count_ax,
            **params,
        )
        ax, count_ax = display.ax_, display.count_ax_
        displays[group] = display
    return displays


def _marker_boxes(ax) -> np.ndarray:
    """``(x0, y0, x1, y1)`` in display pixels of every marker drawn on ``ax``
    (the scatter points of each model), their line width included."""
    from matplotlib.collections import PathCollection

    boxes = [np.empty((0, 4))]
    points_to_px = ax.figure.dpi / 72
    for markers in ax.collections:
        offsets = np.asarray(markers.get_offsets(), dtype=float)
        if not isinstance(markers, PathCollection) or not len(offsets):
            continue
        centres = markers.get_offset_transform().transform(offsets)
        sizes = np.broadcast_to(markers.get_sizes(), len(offsets))
        widths = np.broadcast_to(markers.get_linewidths(), len(offsets))
        radius = (np.sqrt(sizes) / 2 + widths / 2) * points_to_px
        boxes.append(
            np.column_stack([centres - radius[:, None], centres + radius[:, None]])
        )
    return np.concatenate(boxes)


def _place_legend(ax) -> None:
    """The legend inside the diagram: in the first of ``_LEGEND_PLACES``
    where it covers no marker (measured in the figure's layout), shrunk
    through ``_LEGEND_SIZES`` before it may cover any; where every place
    covers some, the smallest legend where it covers the fewest.

    Lower places are skipped when the counts are drawn inside the diagram.
    """
    ax.legend(loc="upper left")
    # the layout (of the root figure, if ``ax`` is in a subfigure) gives the
    # legend its real size; a legend of the same entries keeps it
    ax.figure.figure.draw_without_rendering()
    boxes = _marker_boxes(ax)
    inside = ax in _COUNT_PANELS and _COUNT_PANELS[ax][1]
    places = [p for p in _LEGEND_PLACES if not (inside and p.startswith("lower"))]
    fewest = (np.inf, places[0])
    for size in _LEGEND_SIZES:
        for place in places:
            box = ax.legend(loc=place, fontsize=size).get_window_extent()
            covered = np.count_nonzero(
                (boxes[:, 0] < box.x1)
                & (boxes[:, 2] > box.x0)
                & (boxes[:, 1] < box.y1)
                & (boxes[:, 3] > box.y0)
            )
            if not covered:
                return
            fewest = min(fewest, (covered, place))
    ax.legend(loc=fewest[1], fontsize=_LEGEND_SIZES[-1], framealpha=0.6)


def _rgba(color):
    from matplotlib.colors import to_rgba

    return to_rgba(color)
