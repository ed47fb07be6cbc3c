"""Top-versus-all calibration (Le Coz et al. 2024) against its references.

References: the paper's reduction computed outside skcal (netcal's binary
calibrators, as in the authors' ``calibrators.py``, or scikit-learn's
isotonic regression, on the top-label confidence and whether the top label
is right; the paper's temperature loss minimised by scipy), the calibrated
confidence placed on the top class and the other classes rescaled in
proportion (with the argmax kept, as skcal does), the same with the top
label read from skcal's input checks ("+ input checks": the reduction
with the one read of the probabilities that skcal does not skip), and the
plain (one-versus-all or multiclass) skcal calibrators. skcal's binary rows use
``redistribution="proportional"`` so that they compute what the references
do; the temperature row is the default.
"""

import numpy as np

from ..peers import skcal_method
from . import Row


def _top(P):
    top = P.argmax(axis=1)
    return top, P[np.arange(len(P)), top]


def _replace_top(P, confidence):
    """``confidence`` on the top class; the others in proportion; the top
    class raised to the largest other share where it would fall below."""
    top, _ = _top(P)
    rows = np.arange(len(P))
    rest = P.copy()
    rest[rows, top] = 0.0
    total = rest.sum(axis=1)
    second = rest.max(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        least = np.where(total > 0, second / (total + second), 0.0)
        share = np.where(total[:, None] > 0, rest / total[:, None], 0.0)
    c = np.maximum(np.clip(confidence, 0.0, 1.0), least)
    out = share * (1.0 - c)[:, None]
    out[rows, top] = c
    return out


def _checked_top(P):
    """:func:`_top` from skcal's input checks of probabilities (one read of
    ``P``: finite, in [0, 1], rows summing to 1; no copy), which give each
    row's argmax and maximum."""
    from skcal.utils._validation import check_probabilities

    _, top, c = check_probabilities(P, copy=False, renormalize=False, top_label=True)
    return top, c


def _binary_reference(make, checked=False):
    """A 1-D binary calibrator ``make()`` (``fit(c, right)``, ``predict(c)``)
    on the top-label problem, the rest in proportion; with ``checked``, the
    top label from skcal's input checks (what skcal cannot skip)."""
    find_top = _checked_top if checked else _top

    def fit(P, y):
        top, c = find_top(P)
        return make().fit(c, (top == y).astype(int))

    def predict(model, P):
        return _replace_top(P, np.asarray(model.predict(find_top(P)[1])).ravel())

    return fit, predict


class _Netcal:
    """netcal's ``fit`` / ``transform`` as ``fit`` / ``predict``."""

    def __init__(self, model):
        self.model = model

    def fit(self, c, right):
        self.model.fit(c, right)
        return self

    def predict(self, c):
        return np.asarray(self.model.transform(c), dtype=np.float64)


def _netcal_hb(checked=False):
    from netcal.binning import HistogramBinning

    return _binary_reference(
        lambda: _Netcal(HistogramBinning(15, equal_intervals=True)), checked
    )


def _netcal_iso():
    from netcal.binning import IsotonicRegression

    return _binary_reference(lambda: _Netcal(IsotonicRegression()))


def _sklearn_iso(checked=False):
    from sklearn.isotonic import IsotonicRegression

    return _binary_reference(
        lambda: IsotonicRegression(y_min=0.0, y_max=1.0, out_of_bounds="clip"),
        checked,
    )


def _scipy_ts(checked=False):
    """The paper's TS with TvA: ``T`` minimising the binary cross-entropy of
    the top softmax probability of ``log P / T``, by scipy's bounded Brent;
    with ``checked``, ``P`` first read by skcal's input checks."""
    from scipy.optimize import minimize_scalar
    from scipy.special import log_softmax, logsumexp, softmax

    def loss(Z, top, right, log_t):
        log_p = log_softmax(Z / np.exp(log_t), axis=1)
        rows = np.arange(len(top))
        log_c = log_p[rows, top]
        log_p[rows, top] = -np.inf
        log_rest = logsumexp(log_p, axis=1)
        return -np.mean(np.where(right, log_c, log_rest))

    def fit(P, y):
        if checked:
            _checked_top(P)
        Z = np.log(np.maximum(P, 1e-300))
        top = Z.argmax(axis=1)
        result = minimize_scalar(
            lambda t: loss(Z, top, top == y, t),
            bounds=(-8.0, 8.0),
            method="bounded",
            options={"xatol": 1e-10},
        )
        return float(np.exp(result.x))

    def predict(T, P):
        if checked:
            _checked_top(P)
        return softmax(np.log(np.maximum(P, 1e-300)) / T, axis=1)

    return fit, predict


def _tva(inner=None, **params):
    def factory():
        from skcal import TopVersusAll

        calibrator = None if inner is None else inner()
        return skcal_method(TopVersusAll, calibrator=calibrator, **params)

    return factory


def _plain(name, **params):
    def factory():
        import skcal

        return skcal_method(getattr(skcal, name), **params)

    return factory


def _isotonic():
    from skcal import IsotonicCalibrator

    return IsotonicCalibrator()


def _histogram():
    from skcal import HistogramBinningCalibrator

    return HistogramBinningCalibrator(n_bins=15)


def rows() -> list[Row]:
    return [
        Row(
            method="TvA temperature scaling",
            skcal=_tva(),
            references=[
                ("scipy TvA-TS (paper's loss)", _scipy_ts),
                ("scipy TvA-TS + input checks", lambda: _scipy_ts(True)),
                (
                    "skcal TS (multiclass NLL)",
                    _plain("TemperatureScaling", device="cpu"),
                ),
            ],
        ),
        Row(
            method="TvA isotonic regression",
            skcal=_tva(_isotonic, redistribution="proportional"),
            references=[
                ("sklearn isotonic TvA", _sklearn_iso),
                ("sklearn isotonic TvA + input checks", lambda: _sklearn_iso(True)),
                ("netcal isotonic TvA", _netcal_iso),
                ("skcal isotonic (one-vs-rest)", _plain("IsotonicCalibrator")),
            ],
        ),
        Row(
            method="TvA histogram binning",
            skcal=_tva(_histogram, redistribution="proportional"),
            references=[
                ("netcal HB TvA (paper's code)", _netcal_hb),
                ("netcal HB TvA + input checks", lambda: _netcal_hb(True)),
                (
                    "skcal HB (one-vs-rest)",
                    _plain("HistogramBinningCalibrator", n_bins=15),
                ),
            ],
        ),
    ]
