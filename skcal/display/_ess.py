"""ESS profile plot: mean ``|local error|`` against effective sample size."""

from __future__ import annotations

import numpy as np

from ..metrics import ess_profile


def _pyplot(caller: str):
    try:
        import matplotlib.pyplot as plt
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(
            f"{caller} requires matplotlib. Install it with "
            "`pip install matplotlib` or `pip install skcal[plot]`."
        ) from exc
    return plt


def _start_line(caller: str, ax, name, kwargs: dict):
    """The axes to draw on (a new one without ``ax``) and the line's kwargs:
    circle markers and ``name`` as the legend label unless overridden."""
    if ax is None:
        _, ax = _pyplot(caller).subplots()
    kwargs = {"marker": "o", **kwargs}
    if name is not None:
        kwargs.setdefault("label", name)
    return ax, kwargs


class ESSProfileDisplay:
    """Mean ``|LCE|`` per quantile bin of the effective sample size (ESS).

    Barbera et al.'s Figure 3: where anchors have few neighbours (low ESS),
    local errors are noisier and a calibrator that is only right where data
    are dense shows its errors. Build it with :meth:`from_predictions` or
    :meth:`from_estimator`; pass ``ax`` to draw several methods on one axis.
    The plotted numbers are those of :func:`skcal.metrics.ess_profile`.

    Parameters
    ----------
    ess : ndarray of shape (n_quantiles,)
        Mean ESS of each bin.
    lce : ndarray of shape (n_quantiles,)
        Mean ``|LCE|`` of each bin.
    count : ndarray of shape (n_quantiles,)
        Number of (anchor, class) pairs in each bin.
    name : str, default=None
        Legend label.

    Attributes
    ----------
    line_ : matplotlib Line2D
        The profile.
    ax_ : matplotlib Axes
        Axes of the plot.
    figure_ : matplotlib Figure
        Figure of the plot.

    Examples
    --------
    >>> import numpy as np
    >>> from skcal.display import ESSProfileDisplay
    >>> rng = np.random.default_rng(0)
    >>> features = rng.normal(size=(400, 3))
    >>> y = rng.integers(0, 2, 400)
    >>> proba = np.full((400, 2), 0.5)
    >>> disp = ESSProfileDisplay.from_predictions(
    ...     y, proba, features, space=None, bandwidth=1.0, name="constant"
    ... )
    >>> disp.line_.get_label()
    'constant'
    """

    def __init__(self, *, ess, lce, count, name=None):
        self.ess = np.asarray(ess)
        self.lce = np.asarray(lce)
        self.count = np.asarray(count)
        self.name = name

    def plot(self, ax=None, *, name=None, **kwargs):
        """Draw the profile.

        Parameters
        ----------
        ax : matplotlib Axes, default=None
            Axes to draw on; a new figure when None.
        name : str, default=None
            Legend label; overrides the one given at construction.
        **kwargs
            Passed to ``ax.plot``.

        Returns
        -------
        self : ESSProfileDisplay
        """
        name = self.name if name is None else name
        ax, kwargs = _start_line("ESSProfileDisplay.plot", ax, name, kwargs)
        keep = self.count > 0
        (self.line_,) = ax.plot(self.ess[keep], self.lce[keep], **kwargs)
        ax.set_xscale("log")
        ax.set_xlabel("effective sample size (ESS)")
        ax.set_ylabel("mean |local calibration error|")
        if name is not None:
            ax.legend(loc="best")
        self.ax_, self.figure_ = ax, ax.figure
        return self

    @classmethod
    def from_predictions(
        cls,
        y_true,
        y_proba,
        features,
        *,
        name=None,
        ax=None,
        plot_kwargs=None,
        **profile_kwargs,
    ):
        """Compute the profile of predicted probabilities and plot it.

        Parameters
        ----------
        y_true : array-like of shape (n_samples,)
            True labels.
        y_proba : array-like of shape (n_samples, n_classes)
            Predicted probabilities.
        features : array-like of shape (n_samples, n_features)
            Features of the local metric.
        name : str, default=None
            Legend label.
        ax : matplotlib Axes, default=None
            Axes to draw on.
        plot_kwargs : dict, default=None
            Passed to ``ax.plot``.
        **profile_kwargs
            Passed to :func:`skcal.metrics.ess_profile` (``space``,
            ``bandwidth``, ``n_quantiles``, ...).

        Returns
        -------
        ESSProfileDisplay
        """
        profile = ess_profile(y_true, y_proba, features, **profile_kwargs)
        display = cls(ess=profile.ess, lce=profile.lce, count=profile.count, name=name)
        return display.plot(ax=ax, **(plot_kwargs or {}))

    @classmethod
    def from_estimator(
        cls,
        estimator,
        X,
        y,
        *,
        features=None,
        name=None,
        ax=None,
        plot_kwargs=None,
        **profile_kwargs,
    ):
        """Plot the profile of ``estimator.predict_proba(X)``.

        Parameters
        ----------
        estimator : fitted estimator with ``predict_proba``
            The calibrated model.
        X : array-like
            Its input.
        y : array-like of shape (n_samples,)
            True labels.
        features : array-like of shape (n_samples, n_features), default=None
            Features of the local metric; ``X`` itself when None (local
            calibrators fitted on embeddings).
        name : str, default=None
            Legend label; the estimator's class name when None.
        ax : matplotlib Axes, default=None
            Axes to draw on.
        plot_kwargs : dict, default=None
            Passed to ``ax.plot``.
        **profile_kwargs
            Passed to :func:`skcal.metrics.ess_profile`.

        Returns
        -------
        ESSProfileDisplay
        """
        proba = estimator.predict_proba(X)
        profile_kwargs.setdefault("labels", getattr(estimator, "classes_", None))
        return cls.from_predictions(
            y,
            proba,
            X if features is None else features,
            name=type(estimator).__name__ if name is None else name,
            ax=ax,
            plot_kwargs=plot_kwargs,
            **profile_kwargs,
        )
