"""Sequential, anytime-valid test that a deployed calibrator is still calibrated.

The null hypothesis is the calibration of the deployed probabilities: each
label is drawn from the row's predicted distribution ``p``. For any
distribution ``q`` chosen *before* a row's label is seen, the likelihood
ratio ``q(y) / p(y)`` has expectation ``sum_k p_k q_k / p_k = 1`` under the
null, so the running product of such ratios is a nonnegative martingale
that starts at 1 (testing by betting: the wealth of a gambler who bets on
``q`` against the odds ``p``). A mean of such martingales is one too, and by
Ville's inequality the probability that it *ever* reaches ``1 / alpha`` is
at most ``alpha``: the monitor may be looked at after every batch, forever,
with a false-alarm probability of at most ``alpha``.

The alternatives ``q`` are three families of recalibrations, each the shift
it detects, so that the family that gained the most says what changed:

``"temperature"``
    ``q = softmax(log(p) / T)`` for a fixed grid of temperatures (a uniform
    mixture over the grid): the model became over- or under-confident.
``"prior"``
    ``q`` proportional to ``p * w``, with the class weights ``w`` estimated
    from the earlier batches (label counts over summed probabilities,
    shrunk toward 1): the class priors shifted.
``"confidence"``
    the top label's probability replaced by its accuracy in its confidence
    bin, estimated from the earlier batches (shrunk toward the confidence),
    the other classes rescaled: the confidence stopped tracking accuracy in
    a way that neither one temperature nor new priors explain, i.e. the
    model's ranking changed (its errors moved).

With ``groups``, each group has its own three families and the monitor's
e-value is the mean over ``max_groups`` group slots (a group not seen yet
counts with wealth 1), so a drift confined to one group is detected and
named without a false-alarm cost for the others.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from numbers import Integral, Real

import numpy as np

from ..utils._constants import FLOOR_BEFORE_LOG
from ..utils._sklearn import Interval, validate_params
from ..utils._validation import (
    check_proba_targets,
    check_probabilities,
    sum_tolerance,
)

__all__ = ["CalibrationMonitor", "MonitorVerdict"]

#: The temperatures of the ``"temperature"`` family (1 itself is the null).
DEFAULT_TEMPERATURES = (0.5, 0.67, 0.8, 0.9, 1.1, 1.25, 1.5, 2.0)
#: Pseudo-rows of the plug-in estimates' shrinkage (class weights toward 1,
#: bin accuracies toward the bin's confidence).
_SHRINKAGE = 20.0
#: Most entries of one ``(temperatures, rows, classes)`` block of the
#: temperature family's logits (256 KiB of float64, to stay in cache); a
#: larger batch is split over the grid (one temperature at a time at most).
_GRID_BLOCK = 1 << 15
#: Looks after the alarm before the verdict's family is stated as settled.
_SETTLE_LOOKS = 3
_FAMILIES = ("temperature", "prior", "confidence")
_ADVICE = {
    "temperature": "recalibrate: refit the temperature (TemperatureScaling) on "
    "recent labelled rows",
    "prior": "the class priors shifted: re-estimate them (skcal.shift."
    "PriorShiftAdapter) or refit the calibrator on recent rows",
    "confidence": "the ranking changed: confidence no longer tracks accuracy in a "
    "way one temperature or new priors explain; check or retrain the model, or "
    "refit a flexible calibrator (isotonic, TopVersusAll)",
}


@dataclass(frozen=True)
class MonitorVerdict:
    """What :meth:`CalibrationMonitor.verdict` concludes.

    Attributes
    ----------
    alarm : bool
        Whether the e-value has reached ``1 / alpha`` at some look.
    e_value : float
        The current e-value (the mean wealth over families and groups).
    family : str or None
        The family of alternatives with the largest wealth at the alarm
        (``"temperature"``, ``"prior"`` or ``"confidence"``); None without
        an alarm.
    group : object or None
        The group whose wealth is largest (None without groups or alarm).
    temperature : float or None
        The grid temperature with the largest wealth (a first estimate of
        the new temperature), for ``family="temperature"``.
    alarm_look : int or None
        The look (1-based batch count) at which the alarm was first raised.
    message : str
        The verdict in words, with the advice; marked provisional in the
        first looks after the alarm, while the plug-in families (prior,
        confidence), which learn from the earlier batches, catch up with
        the fixed temperature grid.
    """

    alarm: bool
    e_value: float
    family: str | None
    group: object
    temperature: float | None
    alarm_look: int | None
    message: str


class _GroupState:
    """The three families' wealth and plug-in statistics of one group."""

    def __init__(self, n_classes: int, n_temperatures: int, n_bins: int):
        self.log_wealth_t = np.zeros(n_temperatures)
        self.log_wealth_prior = 0.0
        self.log_wealth_conf = 0.0
        self.label_counts = np.zeros(n_classes)
        self.proba_sums = np.zeros(n_classes)
        self.bin_correct = np.zeros(n_bins)
        self.bin_confidence = np.zeros(n_bins)

    def wealth(self) -> np.ndarray:
        """Each family's wealth (the temperature family: its grid's mean)."""
        with np.errstate(over="ignore"):  # an astronomical wealth is inf
            t = _mean_exp(self.log_wealth_t)
            return np.array(
                [t, np.exp(self.log_wealth_prior), np.exp(self.log_wealth_conf)]
            )

    def to_dict(self) -> dict:
        return {k: np.asarray(v).tolist() for k, v in vars(self).items()}

    @classmethod
    def from_dict(cls, d: dict) -> _GroupState:
        state = cls.__new__(cls)
        for key, value in d.items():
            value = np.asarray(value, dtype=np.float64)
            setattr(state, key, float(value) if value.ndim == 0 else value)
        return state


def _mean_exp(log_values: np.ndarray) -> float:
    """``mean(exp(log_values))`` without overflow for large values."""
    top = float(log_values.max())
    # the mean as np.mean computes it (the sum, divided), without its wrapper
    return float(np.exp(top) * (np.exp(log_values - top).sum() / log_values.size))


class CalibrationMonitor:
    """Anytime-valid sequential test that deployed probabilities stay calibrated.

    Feed labelled batches as they arrive with :meth:`update`; look at
    :attr:`e_value_`, :attr:`alarm_` or :meth:`verdict` after any batch, as
    often as wanted. Under the null (the labels follow the predicted
    probabilities) the probability that an alarm is *ever* raised is at
    most ``alpha``, whatever the number of looks (Ville's inequality for a
    mixture of likelihood-ratio test martingales: testing by betting, see
    the module docstring for the three families of alternatives and the
    shift each detects). The state is small (a few numbers per class, bin
    and group), mergeable across processes with :meth:`merge`, and persisted
    as JSON with :meth:`save` / :meth:`load`.

    Parameters
    ----------
    alpha : float, default=0.05
        False-alarm probability over unlimited looks; the alarm threshold
        on the e-value is ``1 / alpha``.
    classes : array-like or None, default=None
        The labels of the probability columns, in column order; None: the
        integers ``0 .. n_classes - 1`` (fixed at the first update).
    temperatures : tuple of float, default=(0.5, 0.67, 0.8, 0.9, 1.1, 1.25, 1.5, 2.0)
        The grid of the ``"temperature"`` family (positive, 1 excluded).
    n_bins : int, default=10
        Equal-width confidence bins of the ``"confidence"`` family.
    max_groups : int, default=100
        The number of group slots: the e-value is the mean over them, so a
        larger number costs power per group; more distinct groups than this
        are refused.

    Attributes
    ----------
    e_value_ : float
        The current e-value (1 before any data).
    alarm_ : bool
        Whether the e-value reached ``1 / alpha`` at some look (it stays
        raised).
    alarm_look_ : int or None
    n_looks_ : int
        Batches seen.
    n_rows_ : int
        Rows seen.

    Examples
    --------
    >>> import numpy as np
    >>> from skcal.monitor import CalibrationMonitor
    >>> rng = np.random.default_rng(0)
    >>> monitor = CalibrationMonitor(alpha=0.01)
    >>> for look in range(30):
    ...     p = rng.dirichlet(np.ones(3) * 0.5, size=200)
    ...     sharper = p**2 / (p**2).sum(axis=1, keepdims=True)  # the truth: T = 0.5
    ...     y = (rng.random((200, 1)) > sharper.cumsum(axis=1)).sum(axis=1)
    ...     _ = monitor.update(y, p)
    >>> monitor.alarm_, monitor.verdict().family
    (True, 'temperature')
    """

    @validate_params(
        {
            "alpha": [Interval(Real, 0, 1, closed="neither")],
            "classes": ["array-like", None],
            "temperatures": ["array-like"],
            "n_bins": [Interval(Integral, 1, None, closed="left")],
            "max_groups": [Interval(Integral, 1, None, closed="left")],
        },
        prefer_skip_nested_validation=True,
    )
    def __init__(
        self,
        alpha=0.05,
        *,
        classes=None,
        temperatures=DEFAULT_TEMPERATURES,
        n_bins=10,
        max_groups=100,
    ):
        temperatures = np.asarray(temperatures, dtype=np.float64).ravel()
        if (
            temperatures.size == 0
            or not np.all(np.isfinite(temperatures))
            or np.any(temperatures <= 0)
        ):
            raise ValueError(
                "temperatures must be a non-empty list of positive finite numbers; "
                f"got {temperatures.tolist()}."
            )
        self.alpha = float(alpha)
        self.classes = None if classes is None else np.asarray(classes)
        self.temperatures = temperatures
        self.n_bins = int(n_bins)
        self.max_groups = int(max_groups)
        self.n_looks_ = 0
        self.n_rows_ = 0
        self.alarm_look_ = None
        self._groups: dict = {}
        self._grouped = None  # fixed by the first update: groups given or not
        self._n_classes = None if classes is None else len(self.classes)
        # integer labels that are their own column: the fast path of update
        self._labels_are_columns = self.classes is None or (
            self.classes.dtype.kind in "iu"
            and np.array_equal(self.classes, np.arange(len(self.classes)))
        )

    # ----------------------------------------------------------------- results
    @property
    def e_value_(self) -> float:
        """The mean wealth over families and the ``max_groups`` group slots."""
        slots = self.max_groups if self._grouped else 1
        total = sum(
            float(g.wealth().sum() / len(_FAMILIES)) for g in self._groups.values()
        )
        return (total + (slots - len(self._groups))) / slots

    @property
    def alarm_(self) -> bool:
        return self.alarm_look_ is not None

    def verdict(self) -> MonitorVerdict:
        """The current conclusion: alarm or not, which shift, the advice."""
        e_value = self.e_value_
        if not self.alarm_:
            message = (
                f"no evidence of miscalibration: e-value {e_value:.3g} < "
                f"{1 / self.alpha:.3g} = 1/alpha after {self.n_looks_} looks "
                f"({self.n_rows_} rows)."
            )
            return MonitorVerdict(False, e_value, None, None, None, None, message)
        group, state = max(self._groups.items(), key=lambda kv: kv[1].wealth().mean())
        family = _FAMILIES[int(np.argmax(state.wealth()))]
        temperature = None
        if family == "temperature":
            temperature = float(self.temperatures[np.argmax(state.log_wealth_t)])
        where = f" (group {group!r})" if self._grouped else ""
        message = (
            f"calibration drifted{where}: e-value reached 1/alpha = "
            f"{1 / self.alpha:.3g} at look {self.alarm_look_} (now {e_value:.3g}); "
            f"{_ADVICE[family]}"
            + (
                f"; the grid's best temperature is {temperature:g}"
                if temperature
                else ""
            )
            + "."
        )
        if self.n_looks_ - self.alarm_look_ < _SETTLE_LOOKS:
            message += (
                " (provisional: the prior and confidence families learn from earlier "
                "batches; feed a few more batches to confirm which shift it is)"
            )
        return MonitorVerdict(
            True, e_value, family, group, temperature, self.alarm_look_, message
        )

    # ------------------------------------------------------------------ update
    def update(self, y_true, y_proba, *, groups=None) -> CalibrationMonitor:
        """Add one labelled batch (one look) and test.

        Parameters
        ----------
        y_true : array-like of shape (n_samples,)
        y_proba : array-like of shape (n_samples, n_classes)
            The deployed calibrator's probabilities for these rows.
        groups : array-like of shape (n_samples,) or None
            Each row's group (segment, task, site).

        Returns
        -------
        self
        """
        proba, y_index = self._check_batch(y_true, y_proba)
        self._check_classes(proba.shape[1])
        keys = self._group_keys(groups, len(y_index))
        if keys is None:
            _bet(self._group_state(None), proba, y_index, self)
        for key in dict.fromkeys(keys.tolist() if keys is not None else []):
            rows = keys == key
            _bet(self._group_state(key), proba[rows], y_index[rows], self)
        self.n_looks_ += 1
        self.n_rows_ += len(y_index)
        if self.alarm_look_ is None and self.e_value_ >= 1 / self.alpha:
            self.alarm_look_ = self.n_looks_
        return self

    def _check_batch(self, y_true, y_proba):
        """``(proba, y_index)`` of one batch, as :func:`check_proba_targets`
        gives them.

        A batch of integer labels that are their own columns (no
        ``classes``, or ``classes`` ``0..K-1``) and a float array of the
        monitor's ``K`` columns skips the general label resolution (whose
        per-call cost dominates small batches, and whose scikit-learn check
        warns about a regression target when a batch holds few rows per
        class); the probabilities are checked as always.
        """
        n_classes = self._n_classes
        if n_classes is None and getattr(y_proba, "ndim", 0) == 2:
            n_classes = max(y_proba.shape[1], 2)  # 1 column: the general path
        if not (
            self._labels_are_columns
            and n_classes is not None
            and type(y_true) is np.ndarray
            and type(y_proba) is np.ndarray
            and y_true.ndim == 1
            and y_true.dtype.kind in "iu"
            and 0 < y_true.size
            and y_proba.shape == (y_true.size, n_classes)
            and y_proba.dtype in (np.float64, np.float32)
            and 0 <= y_true.min()
            and y_true.max() < n_classes
        ):
            proba, y_index, _ = check_proba_targets(
                y_true, y_proba, labels=self.classes, copy=True
            )
            return proba, y_index
        proba = check_probabilities(
            y_proba,
            "y_proba",
            tol=sum_tolerance(y_proba.dtype),
            renormalize=False,
            copy=y_proba.dtype != np.float64,  # float32: a float64 copy
        )
        return proba, y_true.astype(np.int64)

    def _check_classes(self, n_classes: int) -> None:
        if self._n_classes is None:
            self._n_classes = n_classes
        elif n_classes != self._n_classes:
            raise ValueError(
                f"y_proba has {n_classes} columns, but the monitor has seen "
                f"{self._n_classes} classes: every batch must give the probabilities "
                "of the same classes, in the same column order."
            )

    def _group_keys(self, groups, n_rows: int):
        if self._grouped is not None and self._grouped != (groups is not None):
            raise ValueError(
                "groups must be given at every update or at none: this monitor "
                + ("was fed groups" if self._grouped else "was fed rows without groups")
                + " before. Use one monitor per setting."
            )
        self._grouped = groups is not None
        if groups is None:
            return None
        keys = np.asarray(groups)
        if keys.shape != (n_rows,):
            raise ValueError(
                f"groups must have one entry per row, shape ({n_rows},); got shape "
                f"{keys.shape}."
            )
        new = set(np.unique(keys).tolist()) - set(self._groups)
        if len(self._groups) + len(new) > self.max_groups:
            raise ValueError(
                f"{len(self._groups) + len(new)} distinct groups exceed "
                f"max_groups={self.max_groups}. Create the monitor with a larger "
                "max_groups (each slot dilutes the e-value) or merge small groups."
            )
        return keys

    def _group_state(self, key) -> _GroupState:
        if key not in self._groups:
            self._groups[key] = _GroupState(
                self._n_classes, len(self.temperatures), self.n_bins
            )
        return self._groups[key]

    # ------------------------------------------------------- merge and persist
    def merge(self, other: CalibrationMonitor) -> CalibrationMonitor:
        """Add the evidence of a monitor fed with *other* rows (disjoint data).

        The wealths multiply and the plug-in statistics add: each row's bet
        was fixed before its label was seen, so the product is still a test
        martingale. Both monitors must have the same settings and classes.
        """
        if not isinstance(other, CalibrationMonitor):
            raise TypeError(
                f"merge takes a CalibrationMonitor; got {type(other).__name__}."
            )
        mine, theirs = self._settings(), other._settings()
        if mine != theirs:
            raise ValueError(
                f"cannot merge monitors with different settings: {mine} and {theirs}."
            )
        if other._n_classes is not None:
            self._check_classes(other._n_classes)
        if other._grouped is not None:
            self._group_keys(np.array([]) if other._grouped else None, 0)
        for key, state in other._groups.items():
            mine_state = self._group_state(key)
            for name, value in vars(state).items():
                setattr(mine_state, name, getattr(mine_state, name) + value)
        if len(self._groups) > self.max_groups:
            raise ValueError(
                f"the merged monitors see more than {self.max_groups} groups."
            )
        self.n_looks_ += other.n_looks_
        self.n_rows_ += other.n_rows_
        looks = [x for x in (self.alarm_look_, other.alarm_look_) if x is not None]
        if looks or self.e_value_ >= 1 / self.alpha:
            self.alarm_look_ = min(looks) if looks else self.n_looks_
        return self

    def _settings(self) -> dict:
        return {
            "alpha": self.alpha,
            "classes": None if self.classes is None else self.classes.tolist(),
            "temperatures": self.temperatures.tolist(),
            "n_bins": self.n_bins,
            "max_groups": self.max_groups,
        }

    def to_dict(self) -> dict:
        """The whole state as JSON-compatible Python objects."""
        groups = [[_json_key(k), s.to_dict()] for k, s in self._groups.items()]
        return {
            "settings": self._settings(),
            "n_classes": self._n_classes,
            "grouped": self._grouped,
            "n_looks": self.n_looks_,
            "n_rows": self.n_rows_,
            "alarm_look": self.alarm_look_,
            "groups": groups,
        }

    @classmethod
    def from_dict(cls, d: dict) -> CalibrationMonitor:
        """The monitor saved by :meth:`to_dict`."""
        monitor = cls(**d["settings"])
        monitor._n_classes = d["n_classes"]
        monitor._grouped = d["grouped"]
        monitor.n_looks_, monitor.n_rows_ = d["n_looks"], d["n_rows"]
        monitor.alarm_look_ = d["alarm_look"]
        monitor._groups = {k: _GroupState.from_dict(s) for k, s in d["groups"]}
        return monitor

    def save(self, path) -> None:
        """Write the state as JSON to ``path``."""
        with open(path, "w", encoding="utf-8") as f:
            json.dump(self.to_dict(), f)

    @classmethod
    def load(cls, path) -> CalibrationMonitor:
        """The monitor saved by :meth:`save`."""
        with open(path, encoding="utf-8") as f:
            return cls.from_dict(json.load(f))

    def __repr__(self) -> str:
        return (
            f"CalibrationMonitor(alpha={self.alpha}, looks={self.n_looks_}, "
            f"rows={self.n_rows_}, e_value={self.e_value_:.3g}, alarm={self.alarm_})"
        )


def _json_key(key):
    """A group key as a JSON value (numpy scalars as Python ones)."""
    return key.item() if isinstance(key, np.generic) else key


def _bet(state: _GroupState, proba, y_index, monitor) -> None:
    """One batch of one group: the bets fixed by the earlier batches, then
    the plug-in statistics updated with this batch."""
    n = len(y_index)
    if n == 0:
        return
    rows = np.arange(n)
    log_p = np.log(np.maximum(proba, FLOOR_BEFORE_LOG))
    log_py = log_p[rows, y_index]
    state.log_wealth_t += _temperature_log_ratios(log_p, log_py, monitor.temperatures)
    # prior family: q proportional to p * w, w from earlier batches
    w = (state.label_counts + _SHRINKAGE) / (state.proba_sums + _SHRINKAGE)
    state.log_wealth_prior += float(np.sum(np.log(w[y_index]) - np.log(proba @ w)))
    # confidence family: the top label's probability -> its bin's accuracy
    top = proba.argmax(axis=1)
    conf = proba[rows, top]
    bins = np.minimum((conf * monitor.n_bins).astype(np.intp), monitor.n_bins - 1)
    ratio = (state.bin_correct + _SHRINKAGE) / (state.bin_confidence + _SHRINKAGE)
    q_top = np.clip(conf * ratio[bins], conf / 2, (1 + conf) / 2)
    hit = y_index == top
    with np.errstate(divide="ignore", invalid="ignore"):
        miss = np.where(conf < 1, (1 - q_top) / (1 - conf), 1.0)
    state.log_wealth_conf += float(np.sum(np.log(np.where(hit, q_top / conf, miss))))
    # plug-in statistics for the next batches
    np.add.at(state.label_counts, y_index, 1.0)
    state.proba_sums += proba.sum(axis=0)
    np.add.at(state.bin_correct, bins, hit.astype(np.float64))
    np.add.at(state.bin_confidence, bins, conf)


def _temperature_log_ratios(log_p, log_py, temperatures) -> np.ndarray:
    """``sum_rows log q_T(y) - log p(y)`` for each grid temperature ``T``,
    ``q_T = softmax(log p / T)``: the grid at once, in blocks of at most
    ``_GRID_BLOCK`` logits."""
    n, k = log_p.shape
    step = max(1, _GRID_BLOCK // (n * k))
    out = np.empty(len(temperatures))
    for start in range(0, len(temperatures), step):
        t = temperatures[start : start + step, None, None]
        z = log_p / t
        z_max = z.max(axis=2, keepdims=True)
        np.exp(np.subtract(z, z_max, out=z), out=z)
        lse = z_max[:, :, 0] + np.log(z.sum(axis=2))
        # log q_T(y) = log p(y) / T - lse: the same division as z's entry
        out[start : start + step] = np.sum(log_py / t[:, :, 0] - lse - log_py, axis=1)
    return out
