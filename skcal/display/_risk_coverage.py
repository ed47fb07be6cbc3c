"""Risk-coverage curve: selective risk against the share of rows accepted."""

from __future__ import annotations

import numpy as np

from ..metrics import risk_coverage_curve
from ..metrics._selective import (
    SELECTIVE_ROWS_DOC,
    SELECTIVE_TARGETS_DOC,
    aurc_of_rows,
    selective_losses,
)
from ..utils._docstrings import fill_doc
from ._ess import _pyplot


class RiskCoverageDisplay:
    """Risk-coverage curve of a selective classifier, in scikit-learn's
    Display style.

    A model that abstains on its least confident rows accepts a share of the
    rows (the coverage) and errs on a share of the accepted ones (the
    selective risk); the curve gives the risk at every confidence threshold,
    from the most confident row (left) to accepting every row (right, the
    plain error rate). Lower is better; the legend gives each model's
    :func:`~skcal.metrics.aurc`. A chosen operating point (a coverage or a
    confidence threshold) can be marked. Several models drawn on the same
    ``ax`` share it.

    Build it with :meth:`from_predictions` or :meth:`from_estimator`.

    Parameters
    ----------
    coverage : ndarray
        Coverages of the curve's points, increasing to 1
        (:func:`~skcal.metrics.risk_coverage_curve`).
    risk : ndarray
        Selective risk at each point.
    thresholds : ndarray
        Confidence threshold of each point (rows at or above it accepted).
    aurc : float, default=None
        The model's AURC, shown in the legend.
    name : str, default=None
        Legend label.

    Attributes
    ----------
    line_ : matplotlib Line2D
        The curve.
    marker_ : matplotlib Line2D or None
        The marked operating point.
    operating_point_ : tuple of float or None
        ``(threshold, coverage, risk)`` of the marked point.
    ax_ : matplotlib Axes
        Axes of the plot.
    figure_ : matplotlib Figure
        Figure of the plot.

    Examples
    --------
    >>> import numpy as np
    >>> from skcal.display import RiskCoverageDisplay
    >>> rng = np.random.default_rng(0)
    >>> proba = rng.dirichlet(np.ones(3), size=500)
    >>> y = rng.integers(0, 3, 500)
    >>> disp = RiskCoverageDisplay.from_predictions(
    ...     y, proba, name="model", mark_coverage=0.5
    ... )
    >>> float(disp.coverage[-1])
    1.0
    >>> disp.line_.get_label() == f"model (AURC {disp.aurc:.3f})"
    True
    """

    def __init__(self, *, coverage, risk, thresholds, aurc=None, name=None):
        self.coverage = np.asarray(coverage)
        self.risk = np.asarray(risk)
        self.thresholds = np.asarray(thresholds)
        self.aurc = aurc
        self.name = name

    def plot(
        self,
        ax=None,
        *,
        name=None,
        show_aurc=True,
        mark_coverage=None,
        mark_threshold=None,
        **kwargs,
    ):
        """Draw the curve.

        Parameters
        ----------
        ax : matplotlib Axes, default=None
            Axes to draw on; a new figure when None.
        name : str, default=None
            Legend label; overrides the one given at construction.
        show_aurc : bool, default=True
            Append the AURC to the legend label.
        mark_coverage : float in (0, 1], default=None
            Mark the first point whose coverage reaches it (the highest
            threshold that accepts that share of the rows).
        mark_threshold : float, default=None
            Mark the point of this confidence threshold (rows whose
            confidence is at least it are accepted).
        **kwargs
            Passed to ``ax.plot``.

        Returns
        -------
        self : RiskCoverageDisplay
        """
        if ax is None:
            _, ax = _pyplot("RiskCoverageDisplay").subplots()
        label = kwargs.pop("label", self.name if name is None else name)
        if show_aurc and self.aurc is not None:
            text = f"AURC {self.aurc:.3f}"
            label = text if label is None else f"{label} ({text})"
        (self.line_,) = ax.plot(self.coverage, self.risk, label=label, **kwargs)
        self.marker_, self.operating_point_ = None, None
        index = self._chosen(mark_coverage, mark_threshold)
        if index is not None:
            self._mark(ax, index)
        ax.set_xlabel("Coverage (share of rows accepted)")
        ax.set_ylabel("Selective risk (error rate of accepted rows)")
        ax.set_xlim(0.0, 1.02)
        ax.set_ylim(bottom=0.0)
        ax.legend(loc="upper left")
        self.ax_, self.figure_ = ax, ax.figure
        return self

    def _chosen(self, coverage, threshold):
        """Index of the marked point, or None."""
        if coverage is not None and threshold is not None:
            raise ValueError(
                "Pass mark_coverage or mark_threshold, not both: each names one "
                "operating point."
            )
        if coverage is not None:
            if not 0.0 < coverage <= 1.0:
                raise ValueError(f"mark_coverage must be in (0, 1]; got {coverage!r}.")
            return int(np.searchsorted(self.coverage, coverage, side="left"))
        if threshold is not None:
            above = np.flatnonzero(self.thresholds >= threshold)
            if above.size == 0:
                raise ValueError(
                    f"No row has a confidence of at least mark_threshold="
                    f"{threshold!r} (the highest is {self.thresholds[0]:.6g}): "
                    "that threshold accepts nothing."
                )
            return int(above[-1])
        return None

    def _mark(self, ax, index) -> None:
        point = tuple(
            float(a[index]) for a in (self.thresholds, self.coverage, self.risk)
        )
        self.operating_point_ = point
        (self.marker_,) = ax.plot(
            [point[1]],
            [point[2]],
            marker="*",
            markersize=14,
            linestyle="none",
            color=self.line_.get_color(),
            label=(
                f"threshold {point[0]:.3g}: coverage {point[1]:.2f}, "
                f"risk {point[2]:.3f}"
            ),
        )

    @classmethod
    @fill_doc(targets=SELECTIVE_TARGETS_DOC, rows=SELECTIVE_ROWS_DOC)
    def from_predictions(
        cls,
        y_true,
        y_proba,
        *,
        confidence=None,
        sample_weight=None,
        labels=None,
        name=None,
        ax=None,
        **kwargs,
    ):
        """Compute the curve of the predictions and plot it.

        Parameters
        ----------
        {targets}
        {rows}
        name : str, default=None
            Legend label.
        ax : matplotlib Axes, default=None
            Axes to draw on.
        **kwargs
            Passed to :meth:`plot` (``mark_coverage``, ``mark_threshold``,
            ``show_aurc``) and on to ``ax.plot``.

        Returns
        -------
        RiskCoverageDisplay
        """
        args = {
            "confidence": confidence,
            "sample_weight": sample_weight,
            "labels": labels,
        }
        coverage, risk, thresholds = risk_coverage_curve(y_true, y_proba, **args)
        area = aurc_of_rows(*selective_losses(y_true, y_proba, **args))
        display = cls(
            coverage=coverage, risk=risk, thresholds=thresholds, aurc=area, name=name
        )
        return display.plot(ax=ax, **kwargs)

    @classmethod
    def from_estimator(cls, estimator, X, y, *, name=None, **kwargs):
        """Plot the curve of ``estimator.predict_proba(X)``.

        Parameters
        ----------
        estimator : fitted classifier or calibrator
            Anything with ``predict_proba``; its ``classes_`` label the
            columns.
        X : array-like
            Input of ``predict_proba``.
        y : array-like of shape (n_samples,)
            True labels.
        name : str, default=None
            Legend label; the estimator's class name by default.
        **kwargs
            Passed to :meth:`from_predictions`.

        Returns
        -------
        RiskCoverageDisplay
        """
        proba = estimator.predict_proba(X)
        kwargs.setdefault("labels", getattr(estimator, "classes_", None))
        name = type(estimator).__name__ if name is None else name
        return cls.from_predictions(y, proba, name=name, **kwargs)
