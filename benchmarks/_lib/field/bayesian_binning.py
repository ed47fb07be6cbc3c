"""BBQ and ENIR (Naeini's Bayesian binning family) against netcal 1.4.

* BBQ (Naeini, Cooper & Hauskrecht 2015): netcal's ``BBQ`` (BIC-weighted
  equal-width histogram binnings, one-vs-rest). It scores its models in
  float32, so the probabilities agree to about 1e-6.
* ENIR (Naeini & Cooper 2016): netcal's ``ENIR`` as it is, and with the two
  bugs of its near-isotonic path fixed while it fits (each model of the
  path is updated in place to the next one's values, and a chain of
  simultaneous collisions loses a group's range, whose scores then map to
  0): skcal agrees with the fixed path to about 1e-7 (float32 scoring
  again), with netcal as it is only to about 0.7. netcal raises on a class
  whose scores already sort its labels (isotonic from the start); the fixed
  reference fits one class at a time and, as probmetrics' ``"enir"`` does,
  falls back to isotonic regression there.

netcal loops over the classes and fits every model of a class separately
(ENIR in pure Python per group), so neither runs above 100 classes.
"""

import contextlib
import copy
import io

import numpy as np

from ..peers import skcal_method
from . import Row


def _skcal(cls_name, **params):
    def make():
        import skcal

        return skcal_method(getattr(skcal, cls_name), **params)

    return make


@contextlib.contextmanager
def _quiet():
    """netcal prints and draws progress bars on every fit."""
    with contextlib.redirect_stdout(io.StringIO()):
        with contextlib.redirect_stderr(io.StringIO()):
            yield


def _netcal(name):
    def make():
        from netcal import binning

        cls = getattr(binning, name)

        def fit(P, y):
            with _quiet():
                return cls().fit(P, y)

        def predict(model, P):
            with _quiet():
                return np.asarray(model.transform(P), dtype=np.float64)

        return fit, predict

    return make


def _fixed_merge(self, t_values, next_lambda):
    """netcal's merge, for chains of collisions too."""
    keep = np.concatenate([[True], t_values != next_lambda])
    first = np.flatnonzero(keep)
    last = np.append(first[1:], keep.size) - 1
    items = self._group_items
    self._group_items = [np.concatenate(items[a : b + 1]) for a, b in zip(first, last)]
    bounds = self._group_bounds.copy()
    bounds[first, 1] = bounds[last, 1]
    self._group_bounds = bounds[first]
    self._group_values = self._group_values[first]
    self._num_groups = first.size


def _fixed_next_model(self):
    """netcal's next model of the path, from copies of this one's state."""
    from netcal.binning.NearIsotonicRegression import NearIsotonicRegression

    source = copy.copy(self)
    source._group_values = self._group_values.copy()
    source._group_bounds = self._group_bounds.copy()
    source._group_items = list(self._group_items)
    following = NearIsotonicRegression(self.quick_init)
    return None if following.fit(last_model=source) is None else following


@contextlib.contextmanager
def _fixed_path():
    from netcal.binning.NearIsotonicRegression import NearIsotonicRegression as NIR

    saved = NIR.get_next_model, NIR._NearIsotonicRegression__merge_groups
    NIR.get_next_model = _fixed_next_model
    NIR._NearIsotonicRegression__merge_groups = _fixed_merge
    try:
        yield
    finally:
        NIR.get_next_model, NIR._NearIsotonicRegression__merge_groups = saved


def _netcal_enir_fixed():
    from netcal.binning import ENIR
    from sklearn.isotonic import IsotonicRegression

    def fit(P, y):
        models = []
        with _quiet(), _fixed_path():
            for k in range(P.shape[1]):
                positive = (y == k).astype(np.int64)
                try:
                    models.append(ENIR().fit(P[:, k], positive))
                except ValueError:  # isotonic from the start
                    iso = IsotonicRegression(y_min=0, y_max=1, out_of_bounds="clip")
                    models.append(iso.fit(P[:, k], positive))
        return models

    def predict(models, P):
        with _quiet():
            Q = np.column_stack(
                [
                    m.transform(P[:, k])
                    if hasattr(m, "_multiclass_instances")
                    else m.predict(P[:, k])
                    for k, m in enumerate(models)
                ]
            )
        Q = np.maximum(Q, 1e-12)  # skcal's floor before renormalising
        return Q / Q.sum(axis=1, keepdims=True)

    return fit, predict


def rows() -> list[Row]:
    return [
        Row(
            method="Bayesian binning into quantiles (BBQ)",
            skcal=_skcal("BBQCalibrator"),
            references=[("netcal BBQ", _netcal("BBQ"))],
            max_peer_classes=100,
        ),
        Row(
            method="ensemble of near-isotonic regressions (ENIR)",
            skcal=_skcal("ENIRCalibrator"),
            references=[
                ("netcal ENIR", _netcal("ENIR")),
                ("netcal ENIR, path fixed, per class", _netcal_enir_fixed),
            ],
            max_peer_classes=100,
        ),
    ]
