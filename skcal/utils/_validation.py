"""Input validation shared by calibrators and metrics.

Every check here says what was expected, what was received and how to fix it.
Nothing the caller passed is modified in place.
"""

from __future__ import annotations

import warnings

import numpy as np
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_array, check_consistent_length, column_or_1d

from ..exceptions import InputWarning
from ._sklearn import _check_sample_weight

#: Probabilities are clipped to at least this value before taking their log.
PROBA_EPS = 1e-12
#: Tolerance on ``|row sum - 1|`` for an array to count as probabilities.
SUM_TOL = 1e-4


def check_finite(X: np.ndarray, name: str = "X") -> None:
    """Raise a ValueError naming the first non-finite entry of ``X``."""
    with np.errstate(over="ignore", invalid="ignore"):
        if np.isfinite(np.sum(X, dtype=np.float64)):  # one pass, no temporary
            return
    finite = np.isfinite(X)
    if finite.all():
        return
    bad_rows = np.flatnonzero(~finite.reshape(X.shape[0], -1).all(axis=1))
    first = bad_rows[0]
    kinds = []
    if np.isnan(X).any():
        kinds.append("NaN")
    if np.isinf(X).any():
        kinds.append("inf")
    raise ValueError(
        f"{name} contains {' and '.join(kinds)} values in {bad_rows.size} row(s) "
        f"(first: row {first}: {np.asarray(X[first]).ravel()[:6]}). Calibration "
        "needs finite scores: drop or repair those rows before calling skcal."
    )


def check_probabilities(
    P: np.ndarray, name: str = "X", *, tol: float = SUM_TOL, renormalize: bool = True
):
    """Validate that ``P`` holds probability rows; return a float64 copy.

    Rows must lie in [0, 1] and sum to one within ``tol``. With
    ``renormalize`` they are then divided by their sum in float64 (what a
    calibrator wants); metrics keep the values as given, so that a score on a
    bin edge stays on it.
    """
    P = np.array(P, dtype=np.float64)
    check_finite(P, name)
    low, high = P.min(initial=0.0), P.max(initial=0.0)
    if low < -tol or high > 1 + tol:
        raise ValueError(
            f"{name} should hold probabilities in [0, 1] but its values range over "
            f"[{low:.6g}, {high:.6g}]. If these are logits or decision scores, pass "
            "input='logits' (or the matching option) instead."
        )
    sums = P.sum(axis=1)
    worst = int(np.argmax(np.abs(sums - 1.0))) if sums.size else 0
    if sums.size and abs(sums[worst] - 1.0) > tol:
        raise ValueError(
            f"{name} should hold probabilities whose rows sum to 1 (tolerance "
            f"{tol:g}), but row {worst} sums to {sums[worst]:.6g}. Renormalise "
            f"with {name} / {name}.sum(axis=1, keepdims=True) if these are "
            "unnormalised probabilities, or pass input='logits' if they are scores."
        )
    np.clip(P, 0.0, 1.0, out=P)
    if renormalize:
        P /= P.sum(axis=1, keepdims=True)
    return P


def looks_like_probabilities(X: np.ndarray, tol: float = SUM_TOL) -> bool:
    """True if every entry is in [0, 1] and every row sums to one."""
    if X.ndim != 2 or X.shape[1] < 2 or X.size == 0:
        return False
    if X.min() < 0 or X.max() > 1:
        return False
    return bool(np.all(np.abs(X.sum(axis=1, dtype=np.float64) - 1.0) <= tol))


def scores_to_logits(X: np.ndarray, input: str, name: str = "X") -> np.ndarray:
    """Turn validated 2-D scores into logits (log-probabilities for probas).

    ``input="logits"`` returns ``X`` itself (never modified) and warns when it
    looks like probabilities; ``input="proba"`` returns
    ``log(max(p, PROBA_EPS))`` of the validated, renormalised rows in float64.
    """
    if X.ndim != 2 or X.shape[1] < 2:
        raise ValueError(
            f"{name} must have shape (n_samples, n_classes) with at least 2 columns, "
            f"one per class; got shape {X.shape}. For a binary decision function d, "
            "pass np.column_stack([-d, d]) (or use skcal.CalibratedClassifier)."
        )
    check_finite(X, name)
    if input == "proba":
        return np.log(np.maximum(check_probabilities(X, name), PROBA_EPS))
    if looks_like_probabilities(X):
        warnings.warn(
            f"input='logits' but every row of {name} lies in [0, 1] and sums to 1: "
            "these look like probabilities. Pass input='proba' if they are; the "
            "calibrator never guesses.",
            InputWarning,
            stacklevel=3,
        )
    return X


def _is_integral(y: np.ndarray) -> bool:
    if y.dtype.kind in "iu":
        return True
    if y.dtype.kind == "f":
        return bool(np.all(np.mod(y, 1) == 0))
    return False


def resolve_classes(y, n_columns: int, classes=None, *, name: str = "classes"):
    """Map labels to score columns.

    Parameters
    ----------
    y : array-like of shape (n_samples,)
        Labels (any sklearn-valid classification labels).
    n_columns : int
        Number of score columns, one per class.
    classes : array-like of shape (n_columns,), default=None
        The full label set in column order. Without it, integer labels all in
        ``range(n_columns)`` map to their own column (classes ``0..n-1``);
        otherwise the sorted distinct labels must be exactly ``n_columns``.

    Returns
    -------
    classes_ : ndarray of shape (n_columns,)
    y_index : ndarray of shape (n_samples,) of int64
        Column index of each label.
    """
    y = column_or_1d(y, warn=True)
    if y.dtype.kind == "f" and not np.isfinite(y).all():
        raise ValueError(
            "y contains NaN or infinite labels; labels must be finite class "
            "identifiers. Drop the rows whose label is missing."
        )
    if y.size:
        check_classification_targets(y)
    present = np.unique(y)
    if classes is not None:
        classes_ = np.asarray(classes)
        if classes_.ndim != 1 or len(classes_) != n_columns:
            raise ValueError(
                f"{name} must list one label per column: expected {n_columns} "
                f"labels, got {len(np.atleast_1d(classes_))}."
            )
        if len(np.unique(classes_)) != len(classes_):
            raise ValueError(f"{name} contains duplicate labels: {list(classes_)}.")
        order = np.argsort(classes_, kind="stable")
        sorted_classes = classes_[order]
        pos = np.clip(np.searchsorted(sorted_classes, y), 0, len(classes_) - 1)
        unseen = y != sorted_classes[pos]
        if unseen.any():
            raise ValueError(
                f"y contains labels that are not in {name}: "
                f"{sorted(set(np.unique(y[unseen]).tolist()))[:10]}; {name} = "
                f"{classes_.tolist()}. Add them to {name}, in the column order of X."
            )
        return classes_, order[pos].astype(np.int64)
    if _is_integral(present) and (
        present.size == 0 or (present.min() >= 0 and present.max() < n_columns)
    ):
        classes_ = np.arange(n_columns).astype(
            y.dtype if y.dtype.kind in "iuf" else int
        )
        return classes_, y.astype(np.int64)
    if present.size == n_columns:
        return present, np.searchsorted(present, y).astype(np.int64)
    raise ValueError(
        f"Cannot tell which column of the scores belongs to which label: y has "
        f"{present.size} distinct label(s) {present.tolist()[:10]} but the scores "
        f"have {n_columns} columns. Pass {name}=[...] listing every label in column "
        f"order (integer labels 0..{n_columns - 1} map to their own column "
        "without it)."
    )


def check_sample_weight(sample_weight, n_samples: int) -> np.ndarray:
    """Non-negative float64 weights of length ``n_samples``, ones if None."""
    return _check_sample_weight(
        sample_weight,
        np.empty((n_samples, 0)),
        dtype=np.float64,
        ensure_non_negative=True,
    )


def check_proba_targets(y_true, y_proba, *, labels=None, sample_weight=None):
    """Validate the inputs of a probability metric.

    Accepts 2-D ``(n_samples, n_classes)`` probabilities or 1-D probabilities
    of the positive class (the second label) for binary problems.

    Returns
    -------
    proba : ndarray of shape (n_samples, n_classes), float64, rows sum to 1
    y_index : ndarray of shape (n_samples,), column of each label
    sample_weight : ndarray of shape (n_samples,)
    """
    y_proba = check_array(
        y_proba,
        ensure_2d=False,
        dtype=[np.float64, np.float32],
        ensure_all_finite=False,
        input_name="y_proba",
    )
    if y_proba.ndim == 1 or (y_proba.ndim == 2 and y_proba.shape[1] == 1):
        p = y_proba.reshape(-1).astype(np.float64)
        y_proba = np.column_stack([1.0 - p, p])
    if y_proba.ndim != 2:
        raise ValueError(
            f"y_proba must be 1-D (binary) or 2-D (n_samples, n_classes); got "
            f"{y_proba.ndim} dimensions."
        )
    y_true = column_or_1d(y_true)
    check_consistent_length(y_true, y_proba)
    proba = check_probabilities(y_proba, "y_proba", renormalize=False)
    _, y_index = resolve_classes(y_true, proba.shape[1], labels, name="labels")
    sample_weight = check_sample_weight(sample_weight, proba.shape[0])
    if proba.shape[0] == 0:
        raise ValueError("Found 0 samples; metrics need at least one.")
    return proba, y_index, sample_weight
