"""Property suite: the guarantees of every skcal estimator and metric.

Hypothesis draws the inputs (sizes, classes, logits, embeddings, labels,
weights, shifts, scales, dtypes, permutations); nothing here is a fixed list
of cases. Every estimator returned by :func:`skcal.discovery.all_estimators`
(plus the variants whose guarantees differ: ``ClassTemperatureScaling(mode=
"predicted")`` and ``VQLocalCalibrator(head="frozen")``) and every public
metric function of :mod:`skcal.metrics` that takes ``(y_true, y_proba, ...)``
goes through the same properties. ``doc/guarantees.rst`` lists the promises
and names the test of each.

Cost is bounded by the hypothesis profile (tests/conftest.py): ``ci`` (the
default) is derandomised, without example database, with a small number of
examples and no shrinking (about 1.5 minutes for the module on two busy
cores); ``HYPOTHESIS_PROFILE=repro`` runs the same examples and shrinks a
failure to a minimal example; ``HYPOTHESIS_PROFILE=dev`` draws ten times
more, at random. Each test asks for a multiple of the profile's
``max_examples`` (:func:`_examples`).

The rule for extreme and degenerate input (logits up to +-1e300, exact 0
and 1, float16, one sample per class, an absent class, one sample): either a
clear error -- a ValueError or TypeError raised by skcal's own validation
(or scikit-learn's input validation that skcal calls), with a message, never
an exception escaping from numpy, scipy or torch -- or a correct result:
finite probabilities in [0, 1] whose rows sum to 1, finite fitted state,
and the argmax promise kept. numpy's RuntimeWarnings (overflow, invalid
value) are errors, as in the project's pytest configuration.
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import math
import os
import pickle
import traceback
import warnings
from dataclasses import dataclass

import numpy as np
import pytest
import torch
from hypothesis import event, given, note, reject, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from scipy.optimize import minimize_scalar
from scipy.special import log_softmax, softmax
from sklearn.base import clone

import skcal
import skcal.metrics
from skcal.base import BaseCalibrator, BaseLocalCalibrator
from skcal.discovery import all_estimators
from skcal.exceptions import MissingClassWarning
from skcal.utils._testing import make_estimator

CUDA = torch.cuda.is_available()

SKCAL_DIR = os.path.dirname(os.path.abspath(skcal.__file__))
#: scikit-learn's input-validation modules, whose messages are written for
#: users and which skcal calls on purpose (check_array, validate_data,
#: parameter constraints, label checks)
SKLEARN_VALIDATION = (
    os.path.join("sklearn", "utils", "validation.py"),
    os.path.join("sklearn", "utils", "_param_validation.py"),
    os.path.join("sklearn", "utils", "multiclass.py"),
)


@pytest.fixture(autouse=True, scope="module")
def _one_torch_thread():
    """One torch thread while this module runs, then the previous number.

    The problems here are tiny (at most 60 x 6): with several intra-op
    threads on a busy 2-core machine, thread hand-offs dominate and a fit
    of a few milliseconds takes seconds (measured 60x for
    DirichletCalibrator). Results do not depend on the number of threads
    beyond rounding, and every comparison below is within one process.
    """
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _examples(k: float) -> settings:
    """``k`` times the unit of the active profile (4 in ``ci``, 40 in ``dev``)."""
    unit = settings.default.max_examples
    return settings(max_examples=max(1, round(k * unit / 4)))


# ============================================================ clear errors
def assert_clear_error(exc: BaseException, match: str | None = None) -> None:
    """A ValueError/TypeError raised by skcal's validation, with a message.

    The innermost frame of the traceback must lie in skcal (or in
    scikit-learn's input validation): an exception escaping from numpy,
    scipy, torch or deep inside scikit-learn is not a clear error.
    """
    frames = traceback.extract_tb(exc.__traceback__)
    where = f"{frames[-1].filename}:{frames[-1].lineno}" if frames else "?"
    assert isinstance(exc, (ValueError, TypeError)), (
        f"not a clear error: {type(exc).__name__} raised at {where}: {exc}"
    )
    origin = frames[-1].filename if frames else ""
    assert origin.startswith(SKCAL_DIR) or origin.endswith(SKLEARN_VALIDATION), (
        f"{type(exc).__name__} escaped from {where}, not from skcal's validation: {exc}"
    )
    message = str(exc)
    assert len(message) >= 20, f"error message too terse: {message!r}"
    if match is not None:
        import re

        assert re.search(match, message, flags=re.IGNORECASE), (
            f"the message does not say what is wrong (expected /{match}/): {message!r}"
        )


@contextlib.contextmanager
def quiet():
    """Ignore skcal's user warnings; numpy's RuntimeWarnings are errors."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # Convergence, MissingClass...
        warnings.simplefilter("error", RuntimeWarning)
        yield


# ============================================================== estimators
#: Fewer iterations or epochs than make_estimator's defaults, to keep the
#: module at about two minutes; none of the properties below needs a
#: converged fit (except the bound of test_affine_fit_is_sane, which uses
#: the defaults).
SPEED = {
    "ClassTemperatureScaling": {"n_iter": 2},
    "DirichletCalibrator": {"max_iter": 30},
    "DirichletCalibratorCV": {"max_iter": 30},
    "MatrixScaling": {"max_iter": 50},
    "VectorScaling": {"max_iter": 50},
    "StructuredMatrixScaling": {"max_iter": 50},
    "ParameterizedTemperatureScaling": {"max_iter": 15},
    "SMARTCalibrator": {"max_iter": 30},
    "KCalCalibrator": {"max_iter": 2},
    "LocalNetCalibrator": {"max_iter": 2},
    "VQLocalCalibrator": {"max_iter": 3},
}
#: Trained in float32 (SMART's epochs): see test_weight_scale_invariance.
FLOAT32_TRAINED = {"SMARTCalibrator"}


@dataclass(frozen=True)
class Case:
    """One estimator configuration of the suite."""

    cls: type
    params: tuple = ()

    @property
    def name(self) -> str:
        extra = ",".join(f"{k}={v}" for k, v in self.params)
        return self.cls.__name__ + (f"[{extra}]" if extra else "")

    def make(self, problem=None, **params):
        merged = {**SPEED.get(self.cls.__name__, {}), **dict(self.params), **params}
        est = make_estimator(self.cls, device=merged.pop("device", "cpu"), **merged)
        if problem is not None and problem.coef is not None and self.uses_head:
            est.set_params(coef=problem.coef, intercept=problem.intercept)
        return est

    @property
    def probe(self):
        return make_estimator(self.cls, device="cpu", **dict(self.params))

    @property
    def local(self) -> bool:
        return issubclass(self.cls, BaseLocalCalibrator)

    @property
    def uses_head(self) -> bool:
        return self.local and bool(self.probe._uses_head)

    @property
    def shift_invariant(self) -> bool:
        return not self.local and bool(getattr(self.probe, "_shift_invariant", False))

    @property
    def keeps_argmax(self):
        if self.local:
            # ProCal's predict returns the head's argmax (its docstring)
            return "head" if self.cls.__name__ == "ProCalCalibrator" else None
        return getattr(self.probe, "_keeps_argmax", None)

    @property
    def stochastic(self) -> bool:
        return "random_state" in self.probe.get_params()

    @property
    def uses_torch(self) -> bool:
        return "device" in self.probe.get_params()


def _all_cases() -> list[Case]:
    cases = [Case(cls) for _, cls in all_estimators()]
    names = {c.cls.__name__: c.cls for c in cases}
    # variants whose promises differ from the default configuration
    if "ClassTemperatureScaling" in names:
        cases.append(Case(names["ClassTemperatureScaling"], (("mode", "predicted"),)))
    if "VQLocalCalibrator" in names:
        cases.append(Case(names["VQLocalCalibrator"], (("head", "frozen"),)))
    if "ScalingBinningCalibrator" in names:
        cases.append(Case(names["ScalingBinningCalibrator"], (("mode", "top_label"),)))
    if "EnsembleTemperatureScaling" in names:
        ets = names["EnsembleTemperatureScaling"]
        cases.append(Case(ets, (("loss", "log_loss"),)))
        cases.append(Case(ets, (("mixture", "uniform"),)))
    return cases


CASES = _all_cases()
SCORE = [c for c in CASES if not c.local]
SHIFT_INVARIANT = [c for c in SCORE if c.shift_invariant]
KEEPS_ARGMAX = [c for c in CASES if c.keeps_argmax]
#: Row order: deterministic estimators only. The others draw a random
#: train/validation split, folds or mini-batches from ``random_state`` by
#: *position*, so a permuted calibration set with the same seed is a
#: different (equally valid) fit; nothing promises equality for them:
#: DirichletCalibratorCV (shuffled KFold), ParameterizedTemperatureScaling,
#: KCalCalibrator, LocalNetCalibrator and VQLocalCalibrator (split and
#: mini-batches), SMARTCalibrator (float32 full-batch sums whose rounding
#: depends on the order, amplified by Adam; see tests/test_common.py's
#: FLOAT32_TRAINING).
DETERMINISTIC = [c for c in CASES if not c.stochastic]
TORCH = [c for c in CASES if c.uses_torch]


def _ids(cases):
    return [c.name for c in cases]


def test_every_estimator_is_covered():
    """The suite runs on every discovered estimator; its flags are coherent."""
    found = {name for name, _ in all_estimators()}
    assert len(found) >= 18
    assert found == {c.cls.__name__ for c in CASES}
    # the argmax promise and the shift invariance are declared where documented
    assert {c.name for c in KEEPS_ARGMAX} >= {
        "TemperatureScaling",
        "ParameterizedTemperatureScaling",
        "SMARTCalibrator",
        "SplineCalibrator",
        "ClassTemperatureScaling[mode=predicted]",
        "ProCalCalibrator",
    }
    assert "TemperatureScaling" in {c.name for c in SHIFT_INVARIANT}
    assert "ClassTemperatureScaling" not in {c.name for c in SHIFT_INVARIANT}


# ================================================================== data
@dataclass
class Problem:
    """A calibration set: logits (score) or embeddings and a head (local)."""

    X: np.ndarray
    y: np.ndarray
    n_classes: int
    w: np.ndarray | None = None
    coef: np.ndarray | None = None
    intercept: np.ndarray | None = None
    absent: int | None = None

    def __repr__(self) -> str:  # compact, for hypothesis' falsifying examples
        return _compact_repr(self)

    def raw_logits(self, X=None) -> np.ndarray:
        """The logits before calibration (the head's for embeddings)."""
        X = self.X if X is None else X
        X = np.asarray(X, dtype=np.float64)
        if self.coef is None:
            return X
        return X @ self.coef.T + self.intercept


def _compact_repr(obj) -> str:
    def fmt(value):
        if isinstance(value, np.ndarray):
            body = np.array2string(
                value, separator=",", max_line_width=120, threshold=10**6
            )
            return f"np.array({body}, dtype=np.{value.dtype})"
        return repr(value)

    fields = ", ".join(
        f"{f.name}={fmt(getattr(obj, f.name))}" for f in dataclasses.fields(obj)
    )
    return f"{type(obj).__name__}({fields})"


def _floats(lo, hi):
    return st.floats(lo, hi, allow_nan=False, allow_infinity=False)


@st.composite
def _labels(draw, n, n_classes, per_class, absent=None):
    """Labels in range(n_classes); every class but ``absent`` ``per_class`` times."""
    present = [k for k in range(n_classes) if k != absent]
    y = draw(hnp.arrays(np.int64, n, elements=st.sampled_from(present)))
    base = np.tile(present, per_class)
    y[: base.size] = base
    return y


@st.composite
def _weights(draw, n, n_fixed):
    """Non-negative weights (some exactly 0); the first rows keep w >= 0.5."""
    w = draw(
        hnp.arrays(np.float64, n, elements=st.one_of(st.just(0.0), _floats(1e-3, 2.0)))
    )
    w[:n_fixed] = np.maximum(w[:n_fixed], 0.5)
    return w


@st.composite
def problems(
    draw,
    case,
    *,
    n_min=20,
    n_max=40,
    max_classes=5,
    per_class=2,
    absent=False,
    weights=None,
):
    """A calibration set for ``case``: logits, or embeddings with a head.

    Logits are ``scale * (noise + signal * onehot(y))``: from pure noise
    (signal 0) to nearly separable. Embeddings are noise plus ``signal``
    times the head's row of the label, and the head is drawn too; two rows
    are classified correctly and two wrongly by the head (ProCal needs
    both). ``absent``: one class has a column (or a row of the head) but
    no sample.
    """
    min_classes = 3 if absent else 2
    n_classes = draw(st.integers(min_classes, max_classes))
    n_present = n_classes - 1 if absent else n_classes
    n_fixed = per_class * n_present + (4 if case.local else 0)
    n = draw(st.integers(max(n_min, n_fixed), max(n_max, n_fixed)))
    absent_class = draw(st.integers(0, n_classes - 1)) if absent else None
    y = draw(_labels(n, n_classes, per_class, absent_class))
    signal = draw(_floats(0.0, 6.0))
    use_weights = draw(st.booleans()) if weights is None else weights
    w = draw(_weights(n, n_fixed)) if use_weights else None
    if not case.local:
        noise = draw(hnp.arrays(np.float64, (n, n_classes), elements=_floats(-4, 4)))
        scale = draw(st.sampled_from([0.1, 1.0, 10.0]) | _floats(0.1, 10.0))
        X = scale * (noise + signal * np.eye(n_classes)[y])
        return Problem(X, y, n_classes, w, absent=absent_class)
    n_features = draw(st.integers(2, 6))
    E = draw(hnp.arrays(np.float64, (n, n_features), elements=_floats(-3, 3)))
    coef = draw(
        hnp.arrays(np.float64, (n_classes, n_features), elements=_floats(-2, 2))
    )
    intercept = draw(hnp.arrays(np.float64, n_classes, elements=_floats(-1, 1)))
    # np.eye: the embeddings are never all equal (test_degenerate_embeddings
    # covers that case on its own, so that it does not hide the others)
    X = E + signal * coef[y] / 4 + np.eye(n, n_features)
    head = np.argmax(X @ coef.T + intercept, axis=1)
    start = per_class * n_present
    present = np.array([k for k in range(n_classes) if k != absent_class])
    # two rows right and two wrong for the head, with present labels
    for i in range(start, start + 2):
        y[i] = head[i] if head[i] != absent_class else present[0]
    for i in range(start + 2, start + 4):
        wrong = present[present != head[i]]
        y[i] = wrong[0]
    return Problem(X, y, n_classes, w, coef, intercept, absent_class)


# ============================================================ fit helpers
def fit(case, problem, X=None, y=None, w=None, **params):
    """Fit ``case`` on the problem (or on the given X, y, w)."""
    X = problem.X if X is None else X
    y = problem.y if y is None else y
    w = problem.w if w is None else w
    est = case.make(problem, **params)
    with quiet():
        return est.fit(X, y, sample_weight=w)


def fit_or_clear_error(case, problem, **kw):
    """Fit, or None after checking that the error is clear."""
    try:
        return fit(case, problem, **kw)
    except Exception as exc:  # noqa: BLE001 - the error itself is checked
        assert_clear_error(exc)
        note(f"clear error: {exc}")
        event("fit refused with a clear error")
        return None


def fit_or_reject(case, problem, **kw):
    """Fit; a clear error discards the example (anything else fails)."""
    est = fit_or_clear_error(case, problem, **kw)
    if est is None:
        reject()
    return est


def proba(est, X):
    with quiet():
        return est.predict_proba(X)


def check_fitted_attributes(est, where=None) -> None:
    """Every fitted attribute is finite and plain numpy (no tensor)."""
    where = where or type(est).__name__
    for name, value in vars(est).items():
        if name.endswith("_") and not name.startswith("_"):
            _check_finite_value(value, f"{where}.{name}")


def _check_finite_value(value, where) -> None:
    module = type(value).__module__ or ""
    assert not module.startswith("torch"), f"{where} is a torch object"
    if module.startswith("skcal") and hasattr(value, "get_params"):
        check_fitted_attributes(value, where)  # a nested skcal estimator
    elif isinstance(value, dict):
        for key, item in value.items():
            _check_finite_value(item, f"{where}[{key!r}]")
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            _check_finite_value(item, f"{where}[{i}]")
    elif isinstance(value, np.ndarray) and value.dtype.kind in "fc":
        bad = ~np.isfinite(value)
        assert not bad.any(), f"{where} has {bad.sum()} non-finite entries: {value}"
    elif isinstance(value, (float, np.floating)):
        assert np.isfinite(value), f"{where} = {value}"


def check_predictions(est, X, problem=None) -> np.ndarray:
    """Valid probabilities, labels and (score calibrators) logits; argmax kept."""
    n = X.shape[0]
    with quiet():
        P = est.predict_proba(X)
        labels = est.predict(X)
    n_classes = len(est.classes_)
    assert P.shape == (n, n_classes)
    bad = ~np.isfinite(P)
    assert not bad.any(), (
        f"non-finite probabilities in rows {np.flatnonzero(bad.any(1))}"
    )
    assert P.min() >= 0.0 and P.max() <= 1.0, (P.min(), P.max())
    tol = 10 * n_classes * np.finfo(P.dtype).eps
    worst = np.max(np.abs(P.sum(axis=1) - 1.0))
    assert worst <= tol, f"a row sums to 1 +- {worst:.3g} (tolerance {tol:.3g})"
    assert labels.shape == (n,) and np.isin(labels, est.classes_).all()
    if isinstance(est, BaseCalibrator):
        with quiet():
            D = est.decision_function(X)
            log_P = est.predict_log_proba(X)
        assert np.isfinite(D).all(), "non-finite calibrated logits"
        assert np.isfinite(log_P).all() and log_P.max() <= 0.0
        np.testing.assert_allclose(np.exp(log_P), P, rtol=1e-9, atol=1e-300)
    _check_argmax(est, X, P, labels, problem)
    return P


def _check_argmax(est, X, P, labels, problem) -> None:
    promise = (
        "head"
        if type(est).__name__ == "ProCalCalibrator"
        else getattr(est, "_keeps_argmax", None)
        if isinstance(est, BaseCalibrator)
        else None
    )
    if promise is None:
        return
    if promise == "head":
        top = np.argmax(est.head_logits(X), axis=1)
    else:
        top = np.argmax(np.asarray(X), axis=1)
    rows = np.flatnonzero(labels != est.classes_[top])
    assert rows.size == 0, (
        f"predict changed the argmax of X in {rows.size} rows (first {rows[:5]})"
    )
    if promise == "proba":
        kept = P[np.arange(len(top)), top] == P.max(axis=1)
        rows = np.flatnonzero(~kept)
        assert rows.size == 0, (
            f"predict_proba ranks another class above the argmax of X in rows "
            f"{rows[:5]}: {P[rows[:2]]} for X = {np.asarray(X)[rows[:2]]}"
        )


# =================================================== estimator properties
@pytest.mark.parametrize("case", CASES, ids=_ids(CASES))
@_examples(4)
@given(data=st.data())
def test_predictions_and_fitted_state_are_valid(case, data):
    """Ordinary data in float16/32/64, with or without weights."""
    problem = data.draw(problems(case))
    dtype = data.draw(st.sampled_from([np.float16, np.float32, np.float64]))
    X = problem.X.astype(dtype)
    est = fit_or_reject(case, problem, X=X)
    check_fitted_attributes(est)
    check_predictions(est, X, problem)
    check_predictions(est, problem.X, problem)


def _dyadic(a, bits=24):
    """Round to multiples of 2**-bits: sums with shifts below 2**28 are exact."""
    return np.round(np.asarray(a, dtype=np.float64) * 2.0**bits) / 2.0**bits


@pytest.mark.parametrize("case", SHIFT_INVARIANT, ids=_ids(SHIFT_INVARIANT))
@_examples(3)
@given(data=st.data())
def test_shift_invariance(case, data):
    """Adding a constant (up to +-1e6) to each logit row changes nothing.

    Logits and shifts are drawn on a grid of 2**-24, so that ``X + c`` and
    ``(X + c) - max(X + c)`` are exact in float64: the calibrator then sees
    exactly the same differences, and any change larger than rounding
    (1e-9 in the probabilities, the issue's bound) is the calibrator's.
    """
    problem = data.draw(problems(case))
    problem.X = _dyadic(problem.X)
    n = problem.X.shape[0]
    shift = st.sampled_from([150.0, -150.0, 1e4, 1e6, -1e6]) | _floats(-1e6, 1e6)
    c = _dyadic(data.draw(hnp.arrays(np.float64, n, elements=shift)))[:, None]
    shifted = problem.X + c
    assert np.array_equal(shifted - c, problem.X)  # the grid makes it exact
    est = fit_or_reject(case, problem)
    est_shifted = fit(case, problem, X=shifted)
    P = check_predictions(est, problem.X, problem)
    # the same model applied to shifted rows
    np.testing.assert_allclose(proba(est, shifted), P, rtol=0, atol=1e-9)
    # a model fitted on shifted rows
    P_shifted = check_predictions(est_shifted, shifted, problem)
    np.testing.assert_allclose(P_shifted, P, rtol=0, atol=1e-9)


@pytest.mark.parametrize("case", SCORE, ids=_ids(SCORE))
@_examples(1)
@given(data=st.data())
def test_logits_of_any_scale_are_fitted_or_refused_clearly(case, data):
    """Logits scaled by 1e-160 to 1e3 (their differences below the
    resolution of log p at the small end, margins beyond float32's log floor
    at the large one): a valid fit, or a clear error; never garbage."""
    problem = data.draw(problems(case))
    factor = 10.0 ** data.draw(st.sampled_from([-160, -40, -17, -13, 2, 3]))
    est = fit_or_clear_error(case, problem, X=problem.X * factor)
    if est is not None:
        check_predictions(est, problem.X * factor, problem)


@pytest.mark.parametrize("case", DETERMINISTIC, ids=_ids(DETERMINISTIC))
@_examples(3)
@given(data=st.data())
def test_row_order_invariance(case, data):
    """A fit on permuted rows gives the same predictions (deterministic fits).

    Sums taken in another order differ by rounding (~1e-16 relative), which
    an iterative solver can carry into its solution only up to its stopping
    tolerance: 1e-9 in the probabilities, as for the weight scale.
    """
    problem = data.draw(problems(case))
    n = problem.X.shape[0]
    perm = np.array(data.draw(st.permutations(range(n))))
    est = fit_or_reject(case, problem)
    w = None if problem.w is None else problem.w[perm]
    est_perm = fit(case, problem, X=problem.X[perm], y=problem.y[perm], w=w)
    np.testing.assert_allclose(
        proba(est_perm, problem.X), proba(est, problem.X), rtol=0, atol=1e-9
    )
    # predictions are row-wise: predicting on permuted rows permutes them
    np.testing.assert_allclose(
        proba(est, problem.X[perm]), proba(est, problem.X)[perm], rtol=0, atol=1e-12
    )


_POWER_OF_TWO = st.integers(-990, 990).map(lambda k: ("2**k", 2.0**k))
_ANY_SCALE = _floats(-300, 300).map(lambda e: ("10**e", 10.0**e))


@pytest.mark.parametrize("case", CASES, ids=_ids(CASES))
@_examples(3)
@given(data=st.data())
def test_weight_scale_invariance(case, data):
    """Multiplying every sample weight by c in [1e-300, 1e300] changes nothing.

    Weights are relative (divided by their maximum). For c a power of two the
    normalised weights are bit-identical, so the fit must be too, for every
    estimator (this is where overflow and underflow show). For any other c
    the normalised weights differ by at most one ulp: deterministic float64
    fits then agree to 1e-9; SMART's float32 epochs round the ulp away
    unless a weight sits on a float32 rounding boundary, in which case Adam
    amplifies it (tests/test_common.py's FLOAT32_TRAINING: ~1e-4 over the
    few epochs used here), hence 1e-4 there.
    """
    problem = data.draw(problems(case, weights=True))
    kind, c = data.draw(_POWER_OF_TWO | _ANY_SCALE)
    note(f"c = {c!r} ({kind})")
    est = fit_or_reject(case, problem)
    est_scaled = fit(case, problem, w=problem.w * c)
    P, P_scaled = proba(est, problem.X), proba(est_scaled, problem.X)
    check_predictions(est_scaled, problem.X, problem)
    if kind == "2**k":
        np.testing.assert_array_equal(P_scaled, P)
    else:
        atol = 1e-4 if case.cls.__name__ in FLOAT32_TRAINED else 1e-9
        np.testing.assert_allclose(P_scaled, P, rtol=0, atol=atol)


@st.composite
def _extreme(draw, problem, case):
    """Rows scaled by 10**e, e up to 300 (row-wise), |values| <= 1e300.

    Some rows are instead scaled so that the gap between their two largest
    logits lies in [700, 760], where ``exp(-gap)`` is subnormal (the
    overflow of a top-label rescale); for embeddings, the gap of the head's
    logits (up to the intercept).
    """
    n = problem.X.shape[0]
    e_max = draw(st.sampled_from([300.0, 100.0, 30.0]) | _floats(0.0, 300.0))
    e = draw(hnp.arrays(np.float64, n, elements=_floats(0.0, e_max)))
    if case.local:  # keep the head's logits X @ coef.T finite
        e = np.minimum(e, 295.0)
    X = problem.X * 10.0 ** e[:, None]
    mode = draw(st.sampled_from(["gap", "scale", "mixed"]))
    if mode == "mixed":
        at_gap = draw(hnp.arrays(np.bool_, n, elements=st.booleans()))
    else:
        at_gap = np.full(n, mode == "gap")
    gaps = draw(hnp.arrays(np.float64, n, elements=_floats(700.0, 760.0)))
    if not case.local:  # the largest logit set to the second one + gap
        rows = np.flatnonzero(at_gap)
        top = np.argmax(problem.X[rows], axis=1)
        second = np.sort(problem.X[rows], axis=1)[:, -2]
        X[rows] = problem.X[rows]
        X[rows, top] = second + gaps[rows]
    else:  # embeddings scaled: the head's logits (less the intercept) scale
        top2 = np.sort(problem.raw_logits() - problem.intercept, axis=1)
        current = top2[:, -1] - top2[:, -2]
        rows = at_gap & (current > 0)
        X[rows] = problem.X[rows] * (gaps[rows] / current[rows])[:, None]
    return np.clip(X, -1e300, 1e300)


@pytest.mark.parametrize("case", CASES, ids=_ids(CASES))
@_examples(4)
@given(data=st.data())
def test_extreme_logits(case, data):
    """Logits (or embeddings) up to +-1e300: a clear error or a valid result.

    Fitted on extreme rows, and fitted on ordinary rows then applied to
    extreme ones.
    """
    problem = data.draw(problems(case))
    X_big = data.draw(_extreme(problem, case))
    est = fit_or_clear_error(case, problem, X=X_big)
    if est is not None:
        check_fitted_attributes(est)
        _predict_or_clear_error(est, X_big, problem)
        _predict_or_clear_error(est, problem.X, problem)
    est = fit_or_reject(case, problem)
    _predict_or_clear_error(est, X_big, problem)


def _predict_or_clear_error(est, X, problem):
    try:
        return check_predictions(est, X, problem)
    except AssertionError:
        raise
    except Exception as exc:  # noqa: BLE001 - the error itself is checked
        assert_clear_error(exc)
        return None


def _nll(log_proba, y):
    return float(-np.mean(log_proba[np.arange(len(y)), y]))


def _temperature_scaling_nll(X, y):
    """Reference: the NLL-optimal inverse temperature, by scipy (not skcal)."""
    Z = X - X.max(axis=1, keepdims=True)
    spread = np.median(-Z.min(axis=1))
    s = spread if spread > 0 else 1.0

    def nll(t):
        return _nll(log_softmax(math.exp(t) / s * Z, axis=1), y)

    grid = np.linspace(-40.0, 40.0, 161)
    values = [nll(t) for t in grid]
    best = int(np.argmin(values))
    lo, hi = grid[max(best - 1, 0)], grid[min(best + 1, grid.size - 1)]
    res = minimize_scalar(
        nll, bounds=(lo, hi), method="bounded", options={"xatol": 1e-10}
    )
    t = res.x if res.fun < values[best] else grid[best]
    return min(res.fun, values[best]), math.exp(t) / s


AFFINE = [
    c
    for c in SCORE
    if c.name in {"VectorScaling", "MatrixScaling", "DirichletCalibrator"}
]


@pytest.mark.parametrize("case", AFFINE, ids=_ids(AFFINE))
@_examples(3)
@given(data=st.data())
def test_affine_fit_is_sane(case, data):
    """Vector/matrix scaling and Dirichlet contain temperature scaling.

    Whatever the logits' units (1e-3 to 1e300), their training log loss is
    never above that of the best temperature (their docstrings: the ridge
    shrinks toward temperature scaling, whose penalty is 0; Dirichlet's
    default has no penalty), here computed independently with scipy. A NaN
    or sign-flipped fit fails this.
    """
    problem = data.draw(problems(case, weights=False))
    e = data.draw(
        st.sampled_from([-3.0, 30.0, 100.0, 200.0, 300.0]) | _floats(-3.0, 300.0)
    )
    X = np.clip(problem.X * 10.0**e / 10.0, -1e300, 1e300)
    note(f"logits scaled by 10**{e}")
    # the defaults of the estimator (converged), not the suite's SPEED
    est = fit_or_clear_error(case, problem, X=X, max_iter=1000)
    if est is None:
        return
    check_fitted_attributes(est)
    check_predictions(est, X, problem)
    with quiet():
        nll_fit = _nll(est.predict_log_proba(X), problem.y)
    nll_ts, beta = _temperature_scaling_nll(X, problem.y)
    if (np.argmax(X, axis=1) == problem.y).all():
        # separable: no optimal temperature (it is 0); skcal's keeps T = 1
        # (TemperatureScaling's docstring), which the maps then contain
        nll_ts, beta = _nll(log_softmax(X, axis=1), problem.y), 1.0
    note(f"temperature scaling: beta = {beta:.6g}, log loss {nll_ts:.12g}")
    assert nll_fit <= nll_ts + 1e-6 * (1.0 + nll_ts), (
        f"training log loss {nll_fit:.12g} > temperature scaling's {nll_ts:.12g}"
    )


#: Score calibrators not held to test_defaults_on_many_classes, and why.
MANY_CLASSES_EXEMPT = {
    "IdentityCalibrator": "the uncalibrated baseline itself",
    # one-vs-rest maps learn each class from its own few positives (25 rows
    # per class here) and renormalise; their docstrings say they can lose
    # to the uncalibrated scores on NLL at many classes (CalArena finds the
    # binning ones catastrophic there), and the search's guard keeps them out
    "IsotonicCalibrator": "one-vs-rest (documented)",
    "HistogramBinningCalibrator": "one-vs-rest (documented)",
    "BBQCalibrator": "one-vs-rest (documented)",
    "ENIRCalibrator": "one-vs-rest (documented)",
    "PlattCalibrator": "one-vs-rest (documented)",
    "BetaCalibrator": "one-vs-rest (documented)",
    # the paper's greedy search lowers the calibration set's top-label ECE
    # class by class (not the NLL) and moves the argmax: its docstring says
    # accuracy may fall on new data (-4.7 points on 25 rows per class)
    "ClassTemperatureScaling": "greedy ECE search per class (documented)",
}
MANY_CLASSES = [
    pytest.param(
        c,
        id=c.name,
        marks=pytest.mark.xfail(
            strict=True,
            run=True,
            reason="the paper's grid (strongest penalty 0.1, kept as published) "
            "is too weak at 20-26 classes with 40 rows per class (test NLL 0.77 "
            "against 0.72 uncalibrated, accuracy -4%); the grid-edge warning "
            "says so, and the default search compares it with the safe ones",
        ),
    )
    if c.name == "DirichletCalibratorCV"
    else pytest.param(c, id=c.name)
    for c in SCORE
    if not c.params and c.name not in MANY_CLASSES_EXEMPT
]


def _many_class_logits(rng, n, n_classes, signal, over, absent=None):
    """Over-confident logits ``over * (noise + signal * onehot(y))``."""
    y = rng.integers(0, n_classes, n)
    if absent is not None:
        y[y == absent] = (absent + 1) % n_classes
    return over * (rng.normal(size=(n, n_classes)) + signal * np.eye(n_classes)[y]), y


@pytest.mark.parametrize("case", MANY_CLASSES)
@_examples(1)
@given(data=st.data())
def test_defaults_on_many_classes(case, data):
    """No default is catastrophic: over-confident logits of 10-60 classes,
    25 calibration rows per class, one class absent from the calibration
    set (but not from the test set). The calibrated test NLL is never
    clearly above the uncalibrated one (temperature scaling lowers it), and
    the argmax of the probabilities loses at most 3 points of accuracy (a
    full map may move the argmax: 2.4 points for SMS on 250 rows of a hard
    10-class draw; methods that promise the argmax are held to it exactly
    by the argmax property above). The defaults themselves
    (no SPEED settings): top-label spline calibration gave NLL 2.84 against
    2.07 uncalibrated (confidences mapped to 1), Dirichlet calibration with
    a weak penalty 0.44 against 0.33 (the absent class's row diverged).
    """
    n_classes = data.draw(st.integers(10, 60), label="classes")
    signal = data.draw(_floats(1.0, 4.0), label="signal")
    over = data.draw(_floats(2.0, 4.0), label="over-confidence")
    absent = data.draw(st.integers(0, n_classes - 1), label="absent class")
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), label="seed"))
    X, y = _many_class_logits(rng, 25 * n_classes, n_classes, signal, over, absent)
    Xt, yt = _many_class_logits(rng, 1500, n_classes, signal, over)
    params = {"random_state": 0} if case.stochastic else {}
    est = case.cls(**params)
    if case.uses_torch:
        est.set_params(device="cpu")
    with quiet():
        est.fit(X, y)
        log_p = est.predict_log_proba(Xt)
    nll, nll_raw = _nll(log_p, yt), _nll(log_softmax(Xt, axis=1), yt)
    accuracy = np.mean(log_p.argmax(axis=1) == yt)
    raw = np.mean(Xt.argmax(axis=1) == yt)
    note(
        f"NLL {nll:.4f} (uncalibrated {nll_raw:.4f}), accuracy {accuracy:.4f} "
        f"(uncalibrated {raw:.4f})"
    )
    assert nll <= 1.1 * nll_raw + 0.01
    assert accuracy >= raw - 0.03


SMART = [c for c in SCORE if c.name == "SMARTCalibrator"]


@pytest.mark.parametrize("case", SMART, ids=_ids(SMART))
@_examples(3)
@given(data=st.data())
def test_smart_keeps_temperature_one_on_separable_sets(case, data):
    """Every calibration row's top class is its label: nothing says how
    confident to be, so SMART keeps T = 1 (its docstring, like
    TemperatureScaling): the probabilities are the softmax of the scores,
    whatever the logits, weights and classes drawn."""
    problem = data.draw(problems(case))
    y = np.argmax(problem.X, axis=1)
    est = fit_or_clear_error(case, problem, y=y)
    if est is None:
        return
    np.testing.assert_allclose(est.predict_temperature(problem.X), 1.0, rtol=1e-12)
    expected = np.exp(log_softmax(problem.X, axis=1))
    np.testing.assert_allclose(proba(est, problem.X), expected, rtol=1e-9, atol=1e-15)


@pytest.mark.parametrize("case", SCORE, ids=_ids(SCORE))
@_examples(3)
@given(data=st.data())
def test_probabilities_with_exact_zeros_and_ones(case, data):
    """input='proba': rows with exact 0 and 1, in float16/32/64.

    Valid probabilities renormalised in their own dtype (float16 row sums
    are off by up to ~1e-3) must be accepted and calibrated.
    """
    problem = data.draw(problems(case))
    n, n_classes = problem.X.shape
    Z = problem.X - problem.X.max(axis=1, keepdims=True)
    P = np.exp(Z) / np.exp(Z).sum(axis=1, keepdims=True)
    hard = data.draw(hnp.arrays(np.bool_, n, elements=st.booleans()))
    P[hard] = np.eye(n_classes)[np.argmax(P[hard], axis=1)]  # exact 0 and 1
    zero = data.draw(hnp.arrays(np.bool_, P.shape, elements=st.booleans()))
    zero[np.arange(n), np.argmax(P, axis=1)] = False
    P[zero] = 0.0
    dtype = data.draw(st.sampled_from([np.float16, np.float32, np.float64]))
    P = P.astype(dtype)
    P /= P.sum(axis=1, keepdims=True)  # renormalised in its own dtype
    off = np.abs(P.sum(axis=1, dtype=np.float64) - 1).max()
    note(f"dtype {np.dtype(dtype)}, max |row sum - 1| = {off:.3g}")
    est = fit(case, problem, X=P, input="proba")
    check_fitted_attributes(est)
    check_predictions(est, P, problem)


@pytest.mark.parametrize("case", CASES, ids=_ids(CASES))
@_examples(2)
@given(data=st.data())
def test_one_sample_per_class(case, data):
    """One calibration sample per class: a clear error or a valid result."""
    problem = data.draw(problems(case, n_min=1, n_max=1, per_class=1))
    keep = np.arange(problem.n_classes)  # the first rows list each class once
    w = None if problem.w is None else problem.w[keep]
    est = fit_or_clear_error(case, problem, X=problem.X[keep], y=problem.y[keep], w=w)
    if est is not None:
        check_fitted_attributes(est)
        check_predictions(est, problem.X, problem)


@pytest.mark.parametrize("case", CASES, ids=_ids(CASES))
@_examples(3)
@given(data=st.data())
def test_absent_class(case, data):
    """A class with a column (or head row) but no calibration sample.

    A clear error, or: a MissingClassWarning, the class kept in ``classes_``
    and in the columns, valid predictions (argmax promise included) and
    finite state, on the calibration rows and on new rows. What the absent
    class's own probabilities become is each method's documented choice
    (the mean of the other classes' maps for one-vs-rest methods, 0 for
    KCal, whatever the fitted map extrapolates to for matrix scaling), so
    it is not asserted here. Labels are integers in range(C), mapped to
    their own column; local calibrators without a head get
    ``classes=range(C)`` (VQ with ``head="train"``: or the head's ``coef``,
    which fixes the columns too).
    """
    problem = data.draw(problems(case, absent=True))
    new = data.draw(problems(case, absent=False, n_min=20, n_max=40))
    C = problem.n_classes
    params = {}
    if case.local and not case.uses_head:
        # the class layout from classes=range(C), or from a head's coef
        # (VQ with head="train" takes only the layout from it)
        if "coef" in case.probe.get_params() and data.draw(st.booleans()):
            params = {"coef": problem.coef, "intercept": problem.intercept}
        else:
            params = {"classes": np.arange(C)}
    est = case.make(problem, **params)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            warnings.simplefilter("error", RuntimeWarning)
            est.fit(problem.X, problem.y, sample_weight=problem.w)
    except Exception as exc:  # noqa: BLE001 - the error itself is checked
        assert_clear_error(exc)
        return
    assert any(issubclass(w.category, MissingClassWarning) for w in caught), (
        "no MissingClassWarning for the absent class"
    )
    np.testing.assert_array_equal(est.classes_, np.arange(C))
    check_fitted_attributes(est)
    check_predictions(est, problem.X, problem)
    if new.n_classes == C and new.X.shape[1] == problem.X.shape[1]:
        check_predictions(est, new.X, problem)


LOCAL = [c for c in CASES if c.local]


@pytest.mark.parametrize("case", LOCAL, ids=_ids(LOCAL))
@_examples(2)
@given(data=st.data())
def test_degenerate_embeddings(case, data):
    """Embeddings all equal (or all equal in every column but one): a clear
    error or a valid result."""
    problem = data.draw(problems(case))
    X = np.tile(problem.X[:1], (problem.X.shape[0], 1))
    if data.draw(st.booleans()):
        X[:, 0] = problem.X[:, 0]  # one informative column
    est = fit_or_clear_error(case, problem, X=X)
    if est is not None:
        check_fitted_attributes(est)
        check_predictions(est, X, problem)
        check_predictions(est, problem.X, problem)


@pytest.mark.parametrize("case", CASES, ids=_ids(CASES))
@_examples(2)
@given(data=st.data())
def test_pickle_and_same_seed_refit_are_bit_identical(case, data):
    problem = data.draw(problems(case))
    est = fit_or_reject(case, problem)
    P = proba(est, problem.X)
    restored = pickle.loads(pickle.dumps(est))
    np.testing.assert_array_equal(proba(restored, problem.X), P)
    again = clone(est)
    with quiet():
        again.fit(problem.X, problem.y, sample_weight=problem.w)
    np.testing.assert_array_equal(proba(again, problem.X), P)


@pytest.mark.skipif(not CUDA, reason="needs CUDA")
@pytest.mark.parametrize("case", TORCH, ids=_ids(TORCH))
@_examples(1)
@given(data=st.data())
def test_fitted_on_cuda_predicts_on_cpu(case, data):
    """A model fitted on CUDA predicts on the CPU (also after pickling)."""
    problem = data.draw(problems(case))
    est = fit_or_reject(case, problem, device="cuda")
    check_fitted_attributes(est)
    P_cuda = proba(est, problem.X)
    est.set_params(device="cpu")
    P_cpu = check_predictions(est, problem.X, problem)
    restored = pickle.loads(pickle.dumps(est))
    np.testing.assert_array_equal(proba(restored, problem.X), P_cpu)
    # the same fitted state on two devices: float64 kernels, so rounding only
    np.testing.assert_allclose(P_cpu, P_cuda, rtol=0, atol=1e-6)


# ================================================================ metrics
def _metric_functions():
    """Public metric functions of the form f(y_true, y_proba[, features], ...)."""
    found = []
    for name in skcal.metrics.__all__:
        obj = getattr(skcal.metrics, name)
        # calibration_report returns a table of bootstrap intervals, not a
        # number (tested in tests/metrics/test_report.py)
        if not inspect.isfunction(obj) or obj is skcal.metrics.calibration_report:
            continue
        params = list(inspect.signature(obj).parameters)
        if params[:2] == ["y_true", "y_proba"]:
            found.append(obj)
    return sorted(found, key=lambda f: f.__name__)


METRICS = _metric_functions()


def _is_local(metric) -> bool:
    return list(inspect.signature(metric).parameters)[2:3] == ["features"]


def _accepts(metric, name) -> bool:
    return name in inspect.signature(metric).parameters


WITH_CLASS_WEIGHT = [m for m in METRICS if _accepts(m, "class_weight")]
#: Keyword arguments that give the local metrics non-empty bins on the
#: 20-60 rows drawn here (the defaults, 15 bins of at least 20 samples, are
#: meant for thousands of rows).
LOCAL_KW = {"n_bins": 3, "min_bin_size": 3}


def _mids(metrics):
    return [m.__name__ for m in metrics]


def test_every_metric_is_covered():
    names = set(_mids(METRICS))
    assert names >= {
        "brier_score",
        "classwise_calibration_error",
        "cumulative_calibration_error",
        "cumulative_calibration_test",
        "ecce_binned_mean",
        "expected_calibration_error",
        "max_calibration_error",
        "negative_log_likelihood",
        "smooth_expected_calibration_error",
        "soft_binned_calibration_error",
        "soft_expected_calibration_error",
        "local_calibration_error",
        "local_calibration_errors",
        "max_local_calibration_error",
        "effective_sample_size",
        "ess_profile",
    }


@dataclass
class MetricInput:
    y: np.ndarray
    P: np.ndarray
    F: np.ndarray
    n_classes: int
    w: np.ndarray | None = None

    def __repr__(self) -> str:
        return _compact_repr(self)


@st.composite
def metric_inputs(draw, *, n_min=20, n_max=60, edge=False, weights=None):
    """Labels, probabilities and features.

    ``edge`` adds what is valid but unusual: exact 0 and 1, float16/32
    (renormalised in their dtype), one sample, classes never seen.
    """
    n_classes = draw(st.integers(2, 5))
    n = (
        draw(st.integers(1, 3) | st.integers(n_min, n_max))
        if edge
        else draw(st.integers(n_min, n_max))
    )
    if edge:
        y = draw(hnp.arrays(np.int64, n, elements=st.integers(0, n_classes - 1)))
    else:
        y = draw(_labels(n, n_classes, min(2, max(1, n // n_classes))))
    logits = draw(hnp.arrays(np.float64, (n, n_classes), elements=_floats(-5, 5)))
    signal = draw(_floats(0.0, 6.0))
    Z = logits + signal * np.eye(n_classes)[y]
    P = np.exp(Z - Z.max(axis=1, keepdims=True))
    P /= P.sum(axis=1, keepdims=True)
    if edge:
        hard = draw(hnp.arrays(np.bool_, n, elements=st.booleans()))
        P[hard] = np.eye(n_classes)[np.argmax(P[hard], axis=1)]
        dtype = draw(st.sampled_from([np.float16, np.float32, np.float64]))
        P = P.astype(dtype)
        P /= P.sum(axis=1, keepdims=True)
    n_features = draw(st.integers(2, 5))
    F = draw(hnp.arrays(np.float64, (n, n_features), elements=_floats(-3, 3)))
    # never all equal: test_local_metric_degenerate_features covers that
    F += np.eye(n, n_features)
    use_weights = draw(st.booleans()) if weights is None else weights
    w = draw(_weights(n, n)) if use_weights else None
    if w is not None and not edge:
        w[: min(n, 2 * n_classes)] = np.maximum(w[: min(n, 2 * n_classes)], 0.5)
    return MetricInput(y, P, F, n_classes, w)


#: The operating point of the metrics that need one (no default: the user
#: states the coverage or the risk).
REQUIRED_KW = {"selective_risk": {"coverage": 0.8}, "coverage_at_risk": {"risk": 0.1}}


def call_metric(metric, inp, **kw):
    args = (inp.y, inp.P, inp.F) if _is_local(metric) else (inp.y, inp.P)
    kw = {**REQUIRED_KW.get(metric.__name__, {}), **kw}
    if _is_local(metric):
        kw = {**LOCAL_KW, **kw}
    with quiet():
        return metric(*args, sample_weight=inp.w, **kw)


def _leaves(result, where="result"):
    """(where, value, nan_allowed) of every number a metric returns.

    NaN is documented for the per-anchor arrays of the local metrics (a bin
    that was dropped) and for empty bins of the ESS profile; scalars never.
    """
    if dataclasses.is_dataclass(result):
        out = []
        count = getattr(result, "count", None)
        for field in dataclasses.fields(result):
            value = getattr(result, field.name)
            if count is not None and field.name in ("ess", "lce"):
                value = np.asarray(value)[np.asarray(count) > 0]
            out += _leaves(value, f"{where}.{field.name}")
            if field.name == "anchor_errors":
                out[-1] = (out[-1][0], out[-1][1], True)
        return out
    if isinstance(result, np.ndarray) and result.ndim > 0:
        return [(where, result.astype(np.float64), True)]
    return [(where, np.float64(result), False)]


def check_metric_result(result) -> None:
    for where, value, nan_allowed in _leaves(result):
        value = np.asarray(value, dtype=np.float64)
        assert not np.isinf(value).any(), f"{where} is infinite: {value}"
        if not nan_allowed:
            assert not np.isnan(value).any(), f"{where} is NaN"
        finite = value[np.isfinite(value)]
        if where.endswith(("pvalue",)):
            assert ((finite >= 0) & (finite <= 1)).all(), f"{where} = {value}"
        elif not where.endswith(("anchor_errors", "normalized")):
            assert (finite >= 0).all(), f"{where} < 0: {value}"


def assert_same_result(a, b, *, rtol, atol=0.0, exact=False):
    for (where, va, _), (_, vb, _) in zip(_leaves(a), _leaves(b)):
        if exact:
            np.testing.assert_array_equal(vb, va, err_msg=where)
        else:
            np.testing.assert_allclose(vb, va, rtol=rtol, atol=atol, err_msg=where)


@pytest.mark.parametrize("metric", METRICS, ids=_mids(METRICS))
@_examples(4)
@given(inp=metric_inputs())
def test_metric_ordinary_inputs_give_finite_values(metric, inp):
    check_metric_result(call_metric(metric, inp))


@pytest.mark.parametrize("metric", METRICS, ids=_mids(METRICS))
@_examples(6)
@given(inp=metric_inputs(edge=True))
def test_metric_edge_inputs(metric, inp):
    """Exact 0/1, float16/32/64, one sample, unseen classes.

    A finite result or a clear error; a float16 or float32 array of valid
    probabilities renormalised in its own dtype is never rejected for its
    row sums.
    """
    note(f"dtype {inp.P.dtype}, n = {len(inp.y)}")
    try:
        result = call_metric(metric, inp)
    except Exception as exc:  # noqa: BLE001 - the error itself is checked
        assert_clear_error(exc)
        assert not (inp.P.dtype != np.float64 and "sum to 1" in str(exc)), (
            f"valid {inp.P.dtype} probabilities rejected: {exc}"
        )
        return
    check_metric_result(result)


LOCAL_METRICS = [m for m in METRICS if _is_local(m)]


@pytest.mark.parametrize("metric", LOCAL_METRICS, ids=_mids(LOCAL_METRICS))
@_examples(2)
@given(inp=metric_inputs(), one_column=st.booleans())
def test_local_metric_degenerate_features(metric, inp, one_column):
    """Features all equal (or in all columns but one): finite or a clear error."""
    F = np.tile(inp.F[:1], (len(inp.y), 1))
    if one_column:
        F[:, 0] = inp.F[:, 0]
    try:
        result = call_metric(metric, dataclasses.replace(inp, F=F))
    except Exception as exc:  # noqa: BLE001 - the error itself is checked
        assert_clear_error(exc)
        return
    check_metric_result(result)


@pytest.mark.parametrize("metric", METRICS, ids=_mids(METRICS))
@_examples(4)
@given(inp=metric_inputs(weights=True), scale=_POWER_OF_TWO | _ANY_SCALE)
def test_metric_weight_scale_invariance(metric, inp, scale):
    """Sample weights times c in [1e-300, 1e300]: the same value.

    Bit-identical for c a power of two (the normalised weights are); to
    1e-9 relative otherwise (the normalised weights differ by an ulp).
    """
    kind, c = scale
    ref = call_metric(metric, inp)
    scaled = call_metric(metric, dataclasses.replace(inp, w=inp.w * c))
    check_metric_result(scaled)
    assert_same_result(ref, scaled, rtol=1e-9, atol=1e-12, exact=kind == "2**k")


@pytest.mark.parametrize("metric", WITH_CLASS_WEIGHT, ids=_mids(WITH_CLASS_WEIGHT))
@_examples(3)
@given(data=st.data())
def test_metric_class_weight_scale_invariance(metric, data):
    inp = data.draw(metric_inputs())
    cw = data.draw(hnp.arrays(np.float64, inp.n_classes, elements=_floats(1e-3, 1.0)))
    kind, c = data.draw(_POWER_OF_TWO | _ANY_SCALE)
    ref = call_metric(metric, inp, class_weight=cw)
    scaled = call_metric(metric, inp, class_weight=cw * c)
    check_metric_result(scaled)
    assert_same_result(ref, scaled, rtol=1e-9, atol=1e-12, exact=kind == "2**k")


@pytest.mark.parametrize("metric", METRICS, ids=_mids(METRICS))
@_examples(4)
@given(data=st.data())
def test_metric_row_order_invariance(metric, data):
    """Permuting the rows (labels, probabilities, features, weights together)
    changes the value by rounding only (1e-9 relative)."""
    inp = data.draw(metric_inputs())
    perm = np.array(data.draw(st.permutations(range(len(inp.y)))))
    permuted = MetricInput(
        inp.y[perm],
        inp.P[perm],
        inp.F[perm],
        inp.n_classes,
        None if inp.w is None else inp.w[perm],
    )
    ref = call_metric(metric, inp)
    result = call_metric(metric, permuted)
    if dataclasses.is_dataclass(ref) and hasattr(ref, "anchor_errors"):
        ref = dataclasses.replace(ref, anchor_errors=ref.anchor_errors[perm])
    elif isinstance(ref, np.ndarray) and ref.ndim == 2:  # per-anchor ESS
        ref = ref[perm]
    assert_same_result(ref, result, rtol=1e-9, atol=1e-12)


def _bad_inputs():
    """(name, mutation, regex of what the message must say, applies-to)."""

    def nan_proba(inp):
        P = inp.P.copy()
        P[0, 0] = np.nan
        return dataclasses.replace(inp, P=P), {}

    def inf_proba(inp):
        P = inp.P.copy()
        P[-1, 0] = np.inf
        return dataclasses.replace(inp, P=P), {}

    def rows_not_summing_to_one(inp):
        return dataclasses.replace(inp, P=inp.P * 0.5), {}  # still in [0, 1]

    def negative_proba(inp):
        P = inp.P.copy()
        P[0] = 0.0
        P[0, 0], P[0, 1] = -0.5, 1.5
        return dataclasses.replace(inp, P=P), {}

    def proba_3d(inp):
        return dataclasses.replace(inp, P=inp.P[:, :, None]), {}

    def fewer_labels(inp):
        return dataclasses.replace(inp, y=inp.y[:-1]), {}

    def unseen_label(inp):
        y = inp.y.copy()
        y[0] = inp.n_classes  # not in labels
        return dataclasses.replace(inp, y=y), {"labels": np.arange(inp.n_classes)}

    def too_many_labels(inp):
        y = np.arange(len(inp.y)) % (inp.n_classes + 1) + 100  # C + 1 distinct
        return dataclasses.replace(inp, y=y), {}

    def nan_label(inp):
        y = inp.y.astype(np.float64)
        y[0] = np.nan
        return dataclasses.replace(inp, y=y), {}

    def negative_weight(inp):
        w = np.ones(len(inp.y))
        w[0] = -1.0
        return dataclasses.replace(inp, w=w), {}

    def nan_weight(inp):
        w = np.ones(len(inp.y))
        w[0] = np.nan
        return dataclasses.replace(inp, w=w), {}

    def zero_weights(inp):
        return dataclasses.replace(inp, w=np.zeros(len(inp.y))), {}

    def short_weights(inp):
        return dataclasses.replace(inp, w=np.ones(len(inp.y) - 1)), {}

    def nan_class_weight(inp):
        cw = np.ones(inp.n_classes)
        cw[0] = np.nan
        return inp, {"class_weight": cw}

    def inf_class_weight(inp):
        cw = np.ones(inp.n_classes)
        cw[-1] = np.inf
        return inp, {"class_weight": cw}

    def negative_class_weight(inp):
        cw = np.ones(inp.n_classes)
        cw[0] = -1.0
        return inp, {"class_weight": cw}

    def short_class_weight(inp):
        return inp, {"class_weight": np.ones(inp.n_classes - 1)}

    def nan_features(inp):
        F = inp.F.copy()
        F[0, 0] = np.nan
        return dataclasses.replace(inp, F=F), {}

    def short_features(inp):
        return dataclasses.replace(inp, F=inp.F[:-1]), {}

    every = lambda m: True  # noqa: E731
    cw = lambda m: _accepts(m, "class_weight")  # noqa: E731
    local = _is_local
    return [
        (nan_proba, r"nan", every),
        (inf_proba, r"inf", every),
        (rows_not_summing_to_one, r"sum", every),
        (negative_proba, r"\[0, 1\]|probabilit", every),
        (proba_3d, r"dim|shape|2-?d", every),
        (fewer_labels, r"inconsistent|samples|length", every),
        (unseen_label, r"label", every),
        (too_many_labels, r"label|column", every),
        (nan_label, r"nan|label", every),
        (negative_weight, r"negative|weight", every),
        (nan_weight, r"nan|weight|finite", every),
        (zero_weights, r"weight", every),
        (short_weights, r"weight|sample|shape", every),
        (nan_class_weight, r"class_weight", cw),
        (inf_class_weight, r"class_weight", cw),
        (negative_class_weight, r"class_weight", cw),
        (short_class_weight, r"class_weight", cw),
        (nan_features, r"features|nan", local),
        (short_features, r"features|samples|inconsistent", local),
    ]


BAD = [
    pytest.param(metric, mutate, match, id=f"{metric.__name__}-{mutate.__name__}")
    for metric in METRICS
    for mutate, match, applies in _bad_inputs()
    if applies(metric)
]


@pytest.mark.parametrize("metric, mutate, match", BAD)
@_examples(1)
@given(inp=metric_inputs(n_min=20, n_max=30, weights=False))
def test_metric_bad_input_gives_a_clear_error(metric, mutate, match, inp):
    bad, kw = mutate(inp)
    with pytest.raises(Exception) as info:  # noqa: PT011 - checked below
        call_metric(metric, bad, **kw)
    assert_clear_error(info.value, match)


# ======================================================= mergeable states
@_examples(4)
@given(data=st.data())
def test_metric_states_equal_the_batch_metrics_for_any_chunking(data):
    """Every mergeable metric: drawn probabilities, label sets (integers
    0..C-1, shifted integers, strings; some classes absent), weights, bin
    strategies and cut points (empty chunks included) give the batch value;
    without ``labels``, labels other than 0..C-1 are refused, never mapped
    differently from the batch function."""
    import skcal.metrics as metrics
    from skcal.metrics import mergeable_metrics, metric_state

    n = data.draw(st.integers(1, 60), label="rows")
    n_classes = data.draw(st.integers(2, 5), label="classes")
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), label="seed"))
    proba = rng.dirichlet(
        np.full(n_classes, data.draw(st.sampled_from([0.2, 1, 5]))), n
    )
    index = rng.integers(0, data.draw(st.integers(1, n_classes), label="drawn"), n)
    kind = data.draw(st.sampled_from(["range", "shifted", "strings"]), label="labels")
    names = {
        "range": np.arange(n_classes),
        "shifted": np.arange(n_classes) * 3 + 1,
        "strings": np.array([f"c{k}" for k in range(n_classes)]),
    }[kind]
    y = names[index]
    w = None if data.draw(st.booleans()) else rng.uniform(0.1, 3.0, n)
    strategy = data.draw(st.sampled_from(["uniform", "quantile"]), label="strategy")
    cuts = np.sort(data.draw(st.lists(st.integers(0, n), max_size=6)))
    chunks = np.split(np.arange(n), cuts)
    for name in mergeable_metrics():
        if name == "binned_statistics":
            continue  # returns statistics, checked in tests/metrics/test_state.py
        if name == "spiegelhalter_test":
            continue  # returns a test result, checked in test_spiegelhalter.py
        metric = getattr(metrics, name)
        params = {"labels": names}
        if "strategy" in inspect.signature(metric).parameters:
            params["strategy"] = strategy
        state = _streamed(metric_state, name, params, y, proba, w, chunks)
        batch = metric(y, proba, sample_weight=w, **params)
        note(f"{name}: state {state.compute()!r}, batch {batch!r}")
        assert state.compute() == pytest.approx(batch, rel=1e-9, abs=1e-12), name
        # without labels: label k is column k, or the state refuses
        del params["labels"]
        if kind != "strings" and y.min() >= 0 and y.max() < n_classes:
            state = _streamed(metric_state, name, params, y, proba, w, chunks)
            batch = metric(y, proba, sample_weight=w, **params)
            assert state.compute() == pytest.approx(batch, rel=1e-9, abs=1e-12)
        else:
            with pytest.raises(ValueError, match="Pass labels="):
                _streamed(metric_state, name, params, y, proba, w, chunks)


def _streamed(metric_state, name, params, y, proba, w, chunks):
    """The merged state of ``name`` over ``chunks`` (both passes if needed)."""
    states = [metric_state(name, **params) for _ in chunks]
    for state, rows in zip(states, chunks):
        state.update(y[rows], proba[rows], None if w is None else w[rows])
    merged = states[0]
    for state in states[1:]:
        merged.merge(state)
    if merged.n_passes == 2:
        merged.next_pass()
        for rows in chunks[::-1]:
            merged.update(y[rows], proba[rows], None if w is None else w[rows])
    return merged


# ============================================== class-named dataframe columns
@pytest.mark.parametrize("case", CASES, ids=_ids(CASES))
@_examples(2)
@given(data=st.data())
def test_class_named_dataframe_columns_are_honoured(case, data):
    """Scores in a dataframe whose columns are named after the classes, in a
    drawn order, are read by name: the fit and the predictions are those of
    the array whose column j is ``classes_[j]`` (the reference), whatever
    order the dataframe's columns come in (issue 49). A fit gets the same
    numbers in both (only their memory layout differs), so the probabilities
    agree to the solvers' tolerance (1e-9, as for the order of the rows).
    Local calibrators read embeddings, whose columns are features: columns
    named after some of the classes are still read by position there.
    """
    pd = pytest.importorskip("pandas")
    problem = data.draw(problems(case))
    names = np.array([f"class {k}" for k in range(problem.n_classes)])
    labels = names[problem.y]
    if case.local:
        n_features = problem.X.shape[1]
        columns = [
            str(names[k]) if k < len(names) else f"f{k}" for k in range(n_features)
        ]
        frame = pd.DataFrame(problem.X, columns=columns)
        est = fit_or_reject(case, problem, y=labels)
        np.testing.assert_allclose(
            proba(fit(case, problem, X=frame, y=labels), frame),
            proba(est, problem.X),
            rtol=0,
            atol=1e-9,
        )
        return
    perm = np.array(data.draw(st.permutations(range(problem.n_classes))))
    frame = pd.DataFrame(problem.X[:, perm], columns=names[perm])
    before = frame.copy()
    est = fit_or_reject(case, problem, y=labels)
    named = fit(case, problem, X=frame, y=labels)
    pd.testing.assert_frame_equal(frame, before)  # the user's frame is untouched
    assert list(named.feature_names_in_) == list(names[perm])
    expected = proba(est, problem.X)
    np.testing.assert_allclose(proba(named, frame), expected, rtol=0, atol=1e-9)
    # predictions read the columns by name, in any order
    other = np.array(data.draw(st.permutations(range(problem.n_classes))))
    shuffled = pd.DataFrame(problem.X[:, other], columns=names[other])
    np.testing.assert_allclose(proba(named, shuffled), expected, rtol=0, atol=1e-9)


# ============================================ intervals of reported values
INTERVALS = [c for c in CASES if callable(getattr(c.cls, "predict_interval", None))]


def _string_options(case) -> dict:
    """Every parameter of ``case`` whose values are a set of strings (the
    variants of the method: strategy, method, input) and those values."""
    from skcal.utils._sklearn import StrOptions

    found = {}
    for name, constraints in case.probe._parameter_constraints.items():
        for constraint in constraints:
            if isinstance(constraint, StrOptions):
                found[name] = sorted(constraint.options)
    return found


def test_every_estimator_with_intervals_is_covered():
    assert {c.name for c in INTERVALS} >= {"VennAbersCalibrator"}


@pytest.mark.parametrize("case", INTERVALS, ids=_ids(INTERVALS))
@_examples(4)
@given(data=st.data())
def test_reported_probabilities_lie_in_their_intervals(case, data):
    """Every estimator that reports an interval of its probabilities
    (``predict_interval``), in each of its variants (every parameter with a
    set of string values drawn, ``input="proba"`` on the softmax of the
    drawn logits): ``lower <= predict_proba(X) <= upper`` for every entry,
    finite and in [0, 1], also with weights and an absent class."""
    problem = data.draw(problems(case, absent=data.draw(st.booleans())), label="data")
    params = {
        name: data.draw(st.sampled_from(options), label=name)
        for name, options in _string_options(case).items()
    }
    X = problem.X
    if params.get("input") == "proba":
        X = np.exp(log_softmax(X, axis=1))
    est = fit_or_reject(case, problem, X=X, **params)
    rows = np.concatenate([X, X[::-1][:5]])  # calibration rows and others
    P = proba(est, rows)
    with quiet():
        lower, upper = est.predict_interval(rows)
    assert lower.shape == upper.shape == P.shape
    assert np.isfinite(lower).all() and np.isfinite(upper).all()
    assert lower.min() >= 0.0 and upper.max() <= 1.0
    outside = (lower > P) | (P > upper)
    assert not outside.any(), (
        f"{outside.sum()} of {outside.size} probabilities outside their "
        f"intervals, first at {np.argwhere(outside)[0]}"
    )


# ===================================================== predict and ties (49)
def _inner_cases() -> list[Case]:
    """TopVersusAll with the step maps whose confidences tie many rows (its
    default, temperature scaling, is in CASES): the promises hold whatever
    its inner calibrator."""
    inner = [skcal.IsotonicCalibrator, skcal.CenteredIsotonicCalibrator]
    inner.append(skcal.HistogramBinningCalibrator)
    return [Case(skcal.TopVersusAll, (("calibrator", cls()),)) for cls in inner]


TIE_CASES = CASES + _inner_cases()
#: ProCal's predict is documented as the head's argmax (checked by
#: check_predictions), not a maximiser of its probabilities
TIE_PREDICT = [c for c in TIE_CASES if c.keeps_argmax != "head"]
TIE_SCORE = [c for c in TIE_CASES if not c.local]
TIE_KEEPS_ARGMAX = [c for c in TIE_CASES if c.keeps_argmax == "proba"]


@st.composite
def _tied_scores(draw, problem, case):
    """The problem's scores with exact ties: logits on a grid (ties, exact
    zeros, gaps of at least one step), or (``input="proba"``) their softmax
    rounded to 0.05 and renormalised (tied entries, exact zeros). Returns
    ``(X, input)``."""
    X = problem.X
    if case.local or draw(st.booleans()):
        step = draw(st.sampled_from([0.5, 1.0, 2.0])) * (np.abs(X).max() or 1.0) / 4
        return np.round(X / step) * step, "logits"
    P = np.round(softmax(X - X.max(axis=1, keepdims=True), axis=1) * 20) / 20
    return P / P.sum(axis=1, keepdims=True), "proba"


def _fit_tied(case, problem, data):
    """A fit on tied scores (a clear error discards the example)."""
    X, kind = data.draw(_tied_scores(problem, case), label="scores")
    params = {} if case.local else {"input": kind}
    est = fit_or_reject(case, problem, X=X, **params)
    note(f"input={kind}: {np.asarray(X)[:3]}")
    return est, X


@pytest.mark.parametrize("case", TIE_PREDICT, ids=_ids(TIE_PREDICT))
@_examples(6)
@given(data=st.data())
def test_predict_is_a_maximiser_with_ties_broken_by_x(case, data):
    """``predict`` returns a class of maximal ``predict_proba``; among
    classes tied there, the one with the largest score in ``X`` and then
    the first column (local calibrators: the first column), on scores with
    exact ties and zeros (issue 49)."""
    problem = data.draw(problems(case))
    est, X = _fit_tied(case, problem, data)
    P = proba(est, X)
    with quiet():
        index = np.searchsorted(est.classes_, est.predict(X))
    rows = np.arange(len(P))
    best = P == P.max(axis=1, keepdims=True)
    assert best[rows, index].all(), "predict chose a class below the row maximum"
    scores = np.zeros(P.shape) if case.local else np.asarray(X, dtype=np.float64)
    ranked = np.where(best, scores, -np.inf)
    expected = np.argmax(ranked, axis=1)  # the largest score, then the first
    np.testing.assert_array_equal(index, expected)


@pytest.mark.parametrize("case", TIE_SCORE, ids=_ids(TIE_SCORE))
@_examples(2)
@given(data=st.data())
def test_log_proba_is_the_finite_log_of_predict_proba(case, data):
    """``predict_log_proba`` and ``decision_function`` are finite,
    ``predict_log_proba`` is the log of ``predict_proba`` and the softmax of
    ``decision_function`` is ``predict_proba``, on scores with exact ties
    and zeros, for TopVersusAll with step maps inside too (issue 49: -inf
    with isotonic regression inside; spline's logs of other
    probabilities)."""
    problem = data.draw(problems(case))
    est, X = _fit_tied(case, problem, data)
    check_predictions(est, X, problem)  # finite, exp(log_P) == P
    with quiet():
        D = est.decision_function(X)
    np.testing.assert_allclose(
        softmax(D, axis=1), proba(est, X), rtol=1e-9, atol=1e-300
    )


@pytest.mark.parametrize("case", TIE_KEEPS_ARGMAX, ids=_ids(TIE_KEEPS_ARGMAX))
@_examples(6)
@given(data=st.data())
def test_argmax_promise_holds_on_ties_and_zeros(case, data):
    """Where a class promises to keep the argmax, ``np.argmax`` of
    ``predict_proba`` (not only ``predict``) is the argmax of ``X``, the
    first column among tied maxima, on scores with exact ties and zeros
    whose other gaps are far above rounding (issue 49: TopVersusAll with
    isotonic regression tied its top class with the runner-up)."""
    problem = data.draw(problems(case))
    est, X = _fit_tied(case, problem, data)
    top = np.argmax(np.asarray(X), axis=1)
    with quiet():
        np.testing.assert_array_equal(est.predict(X), est.classes_[top])
    weights = getattr(est, "weights_", None)  # EnsembleTemperatureScaling's
    if weights is not None and weights[-1] == 1.0:
        # all the weight on the uniform member (scores that carry nothing):
        # every class gets 1 / C, a tie that only predict breaks (documented)
        event("EnsembleTemperatureScaling: the uniform member alone")
        return
    np.testing.assert_array_equal(np.argmax(proba(est, X), axis=1), top)
