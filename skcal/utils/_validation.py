"""Input validation shared by calibrators and metrics.

Every check here says what was expected, what was received and how to fix it.
Nothing the caller passed is modified in place.
"""

from __future__ import annotations

import inspect
import math

import numpy as np
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_array, check_consistent_length, column_or_1d

from ..exceptions import InputWarning
from ._constants import PROBA_EPS, ZERO_FRACTION
from ._sklearn import _check_sample_weight
from ._warnings import warn

#: Whether scikit-learn's weight check takes ``allow_all_zero_weights``
#: (the versions that refuse weights that are all 0).
_ALL_ZERO = (
    "allow_all_zero_weights" in inspect.signature(_check_sample_weight).parameters
)

#: Tolerance on ``|row sum - 1|`` for an array to count as probabilities.
SUM_TOL = 1e-4
#: Largest absolute logit accepted: beyond it, differences of logits overflow.
MAX_LOGIT = 1e300
#: Largest absolute embedding entry accepted: squared distances and variances
#: of larger values overflow.
MAX_EMBEDDING = 1e100


def as_numpy(x):
    """A torch tensor (on any device) as a numpy array; anything else as is.

    Recognised by its type's module, so that nothing here imports torch: a
    network's logits can be passed as they come, and every result is numpy.
    Dtypes numpy lacks (bfloat16) become float32.
    """
    if type(x).__module__.partition(".")[0] != "torch" or not hasattr(x, "detach"):
        return x
    x = x.detach().cpu()
    try:
        return x.numpy()
    except TypeError:  # bfloat16 and other dtypes without a numpy twin
        return x.float().numpy()


def sum_tolerance(dtype) -> float:
    """Tolerance on ``|row sum - 1|`` for probabilities stored in ``dtype``.

    ``SUM_TOL``, or four units in the last place of 1 for coarser floats
    (float16: 3.9e-3), whose rounding alone moves a renormalised row's sum by
    more than ``SUM_TOL``.
    """
    dtype = np.dtype(dtype) if dtype is not None else np.dtype(np.float64)
    if not np.issubdtype(dtype, np.floating):
        return SUM_TOL
    return max(SUM_TOL, 4.0 * float(np.finfo(dtype).eps))


# values of a bad row shown in full by check_finite's message, up to this many
ROW_TEXT_CAP = 20


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
        f"(first: row {first}: {_row_text(X[first])}). Calibration "
        "needs finite scores: drop or repair those rows before calling skcal."
    )


def _row_text(row, cap: int = ROW_TEXT_CAP) -> str:
    """One row's values for a message: all of them, or the first ``cap``.

    A cut row says how many values it leaves out and at which columns the
    non-finite ones it leaves out are, so the message always locates them.
    """
    row = np.asarray(row).ravel()
    if row.size <= cap:
        return np.array2string(row, threshold=cap + 1, max_line_width=10**6)
    shown = np.array2string(row[:cap], threshold=cap + 1, max_line_width=10**6)
    hidden = cap + np.flatnonzero(~np.isfinite(row[cap:]))
    where = f"; non-finite at columns {hidden.tolist()}" if hidden.size else ""
    return f"{shown[:-1]} ...] ({row.size - cap} more values omitted{where})"


def check_probabilities(
    P: np.ndarray,
    name: str = "X",
    *,
    tol: float = SUM_TOL,
    renormalize: bool = True,
    copy: bool = True,
    top_label: bool = False,
    log: bool = False,
    floor: bool = False,
    eps: float = PROBA_EPS,
):
    """Validate that ``P`` holds probability rows.

    Rows must lie in [0, 1] and sum to one within ``tol``. The checks read
    ``P`` once: in row blocks small enough to stay in cache, the row sums,
    the minimum and the maximum (and with ``top_label`` each row's argmax);
    a NaN or inf anywhere shows in them, so the entries themselves are only
    inspected (by :func:`check_finite`) to name a bad row. float32 rows are
    summed in float32 pieces of 1024 entries; when a sum is within its
    rounding bound of the tolerance, or an entry is negative, every row is
    summed again in float64, so the verdict is that of float64 sums. The
    copy (``copy=True``) is written block by block in the same pass, while
    the block is in cache: clipped, divided by its float64 row sums and
    (``log``) turned into logs, each block in place in the new array.

    Parameters
    ----------
    P : array-like of shape (n_samples, n_classes)
        Candidate probabilities.
    name : str, default="X"
        Name of ``P`` in error messages.
    tol : float, default=SUM_TOL
        Tolerance on the range and on ``|row sum - 1|``, see
        :func:`sum_tolerance`.
    renormalize : bool, default=True
        Divide the rows by their sum in float64 (what a calibrator wants),
        except rows whose sum is within ``n_classes`` units in the last
        place of 1, which are used as given (dividing them would break ties
        between rows without making their sums any closer to 1);
        metrics keep the values as given, so that a score on a bin edge
        stays on it. Needs ``copy=True``.
    copy : bool, default=True
        Return a float64 copy, clipped to [0, 1]. With False, float32 and
        float64 input is returned as it is when every entry lies in [0, 1]
        (no copy) and as a clipped copy of the same dtype otherwise; other
        input is converted to float64 first.
    top_label : bool, default=False
        Also return the argmax (the first on ties) and the maximum of each
        row of the returned array.
    log : bool, default=False
        Return ``log(max(p, eps))`` of the (renormalised) float64 copy
        instead of the copy: the logits of probabilities (the log of
        :func:`log_probabilities_inplace`).
        Needs ``copy=True`` and ``top_label=False``.
    floor : bool, default=False
        Floor the (renormalised) float64 copy at ``eps`` (above
        ``PROBA_EPS``, the rows where it raised an entry divided by their new
        sums): the softmax of
        the ``log=True`` result, to a few units in the last place, without
        the logarithm. Needs ``copy=True`` and ``top_label=False``.
    eps : float, default=PROBA_EPS
        The floor of ``log`` and ``floor`` (a calibrator's
        :func:`proba_floor`), at least ``PROBA_EPS``.

    Returns
    -------
    P : ndarray of shape (n_samples, n_classes)
        The validated probabilities, or their logs with ``log`` (never the
        caller's array modified).
    pred : ndarray of shape (n_samples,) of intp
        Only with ``top_label``: each row's argmax.
    conf : ndarray of shape (n_samples,)
        Only with ``top_label``: each row's maximum (dtype of ``P``).
    """
    if renormalize and not copy:
        raise ValueError("renormalize=True needs copy=True.")
    if (log or floor) and (not copy or top_label):
        option = "log" if log else "floor"
        raise ValueError(f"{option}=True needs copy=True and top_label=False.")
    P = np.asarray(P)
    if P.dtype != np.float32 and P.dtype != np.float64:
        P = np.asarray(P, dtype=np.float64)
    scan = _Scan(P, top_label, copy)
    level = max(eps, PROBA_EPS) if log or floor else None
    _scan_and_check(P, scan, tol, name, renormalize=renormalize, log=log, floor=level)
    clip = scan.low < 0 or scan.high > 1
    if copy:
        P = scan.out
    elif clip:
        P = np.clip(P, 0.0, 1.0)
    if not top_label:
        return P
    pred, conf = scan.pred, scan.conf
    if clip or renormalize:  # the values changed: rank the new ones
        pred = np.argmax(P, axis=1)
        conf = np.take_along_axis(P, pred[:, None], axis=1)[:, 0]
    return P, pred, conf.astype(P.dtype, copy=False)


def _top_offsets(P: np.ndarray, top: np.ndarray) -> np.ndarray:
    """The flat indices of the entries ``P[i, top[i]]`` (C order)."""
    return np.arange(len(top)) * P.shape[1] + top


def top_entries(P: np.ndarray, top: np.ndarray, c=None) -> np.ndarray:
    """Each row's entry at ``top`` (C-contiguous ``P``), into ``c`` if given."""
    return P.reshape(-1).take(_top_offsets(P, top), out=c)


def top_and_rest(P: np.ndarray, top: np.ndarray, c=None, rest=None):
    """Each row's entry at ``top`` and the sum of its others (never ``1 -
    c``, which rounds to 0 for confident rows), into ``c`` and ``rest`` if
    given; ``P`` (float64) is left as it was (its top entries are zeroed
    for the sum and put back)."""
    P = np.ascontiguousarray(P)  # ours are: then P itself
    flat = P.reshape(-1)  # a view
    at = _top_offsets(P, top)
    c = flat.take(at, out=c)
    flat[at] = 0.0
    rest = np.einsum("ij->i", P, out=rest)  # SIMD sums in this thread
    flat[at] = c
    return c, rest


def _scan_and_check(P, scan, tol, name, *, renormalize, log, floor) -> None:
    """Run ``scan`` over ``P`` and raise unless its rows are probabilities."""
    if P.shape[0] and P.shape[1]:
        scan.run(P, renormalize=renormalize, log=log, floor=floor)
        if not all(np.isfinite(v) for v in (scan.low, scan.high, scan.far)):
            check_finite(P, name)  # raises unless only a sum overflowed
    else:
        scan.far = 0.0 if P.shape[1] or not P.shape[0] else 1.0
    _check_range(scan, tol, name)
    _check_row_sums(P, scan, tol, name)


class _Scan:
    """One read of probability rows by cache-sized blocks: the row sums,
    the minimum and maximum, each row's argmax and maximum (``top_label``)
    and the float64 copy (``copy``), each written while the block is in
    cache (see :func:`check_probabilities`).

    Row sums: float64 rows at once, float32 rows in float32 pieces of at
    most 1024 entries added in float64. Any order of adding ``k`` terms
    errs by at most ``(k - 1) u sum|p|`` (``u`` the unit roundoff), and
    ``sum|p|`` is the row sum when no entry is negative: ``slack`` bounds
    the error of a sum that passes the test (6e-5 for float32, 1e-13 for
    float64).
    """

    def __init__(self, P: np.ndarray, top_label: bool, copy: bool):
        n, n_cols = P.shape
        self.piece = 1024 if P.dtype == np.float32 else max(n_cols, 1)
        self.terms = max(min(n_cols, self.piece) - 1, 0)
        self.step = max(1, (1 << 20) // (max(n_cols, 1) * P.itemsize))
        self.sums = np.empty(n)
        self.pred = np.zeros(n, dtype=np.intp) if top_label else None
        self.conf = np.zeros(n, dtype=P.dtype) if top_label else None
        self.out = np.empty((n, n_cols)) if copy else None
        self.low = self.high = 0.0  # the range always includes 0, as in messages
        self.far = 0.0

    def slack(self, dtype, tol: float) -> float:
        return 1.01 * self.terms * np.finfo(dtype).eps / 2 * (1 + tol)

    def run(self, P, *, renormalize, log, floor) -> None:
        # blocks of ~1 MiB stay in cache between the reductions; einsum sums
        # rows with SIMD in one thread (np.dot would start BLAS threads)
        n, n_cols = P.shape
        step = self.step
        starts = range(0, n, step)
        lows, highs = np.empty(len(starts)), np.empty(len(starts))
        offsets = np.arange(min(step, n)) * n_cols if P.flags.c_contiguous else None
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            for b, start in enumerate(starts):
                block = P[start : start + step]
                rows = slice(start, start + len(block))
                self._sum_rows(block, rows)
                lows[b] = block.min()
                highs[b] = self._top(block, rows, offsets)
                self._emit(
                    block, rows, lows[b], bool(lows[b] < 0 or highs[b] > 1), offsets,
                    renormalize=renormalize, log=log, floor=floor,
                )  # fmt: skip
            # np.minimum / np.maximum keep a NaN (Python's min and max drop it)
            self.low = float(np.minimum(self.low, lows.min()))
            self.high = float(np.maximum(self.high, highs.max()))
            self.far = float(np.maximum(1.0 - self.sums.min(), self.sums.max() - 1.0))

    def _emit(self, block, rows, low, clip, offsets, **options) -> None:
        """Write the block's copy (with ``copy``), while it is in cache;
        ``clip``: whether the block has entries outside [0, 1]."""
        if self.out is not None:
            _copy_block(
                block, self.out[rows], self.sums[rows], clip=clip, low=low, **options
            )

    def _sum_rows(self, block, rows) -> None:
        if block.dtype == np.float64:
            np.einsum("ij->i", block, out=self.sums[rows])
        elif block.shape[1] <= self.piece:
            self.sums[rows] = np.einsum("ij->i", block)
        else:
            self.sums[rows] = 0.0
            for j in range(0, block.shape[1], self.piece):
                self.sums[rows] += np.einsum("ij->i", block[:, j : j + self.piece])

    def _top(self, block, rows, offsets) -> float:
        """The block's maximum; with ``top_label``, from each row's argmax."""
        if self.pred is None:
            return block.max()
        top = block.argmax(axis=1, out=self.pred[rows])
        if offsets is not None:
            block.ravel().take(offsets[: len(top)] + top, out=self.conf[rows])
        else:
            self.conf[rows] = block[np.arange(len(top)), top]
        return self.conf[rows].max()


def _check_range(scan: _Scan, tol: float, name: str) -> None:
    if scan.low < -tol or scan.high > 1 + tol:
        raise ValueError(
            f"{name} should hold probabilities in [0, 1] but its values range over "
            f"[{scan.low:.6g}, {scan.high:.6g}]. If these are logits or decision "
            "scores, pass input='logits' (or the matching option) instead."
        )


def _check_row_sums(P, scan: _Scan, tol: float, name: str) -> None:
    """Raise unless every row sums to 1 within ``tol``; decided by float64
    sums when the scan's are not conclusive."""
    if scan.low >= 0 and scan.far + scan.slack(P.dtype, tol) <= tol:
        return
    sums = np.asarray(P, dtype=np.float64).sum(axis=1)
    worst = int(np.argmax(np.abs(sums - 1.0)))
    if abs(sums[worst] - 1.0) > tol:
        raise ValueError(
            f"{name} should hold probabilities whose rows sum to 1 (tolerance "
            f"{tol:g}), but row {worst} sums to {sums[worst]:.6g}. Renormalise "
            f"with {name} / {name}.sum(axis=1, keepdims=True) if these are "
            "unnormalised probabilities, or pass input='logits' if they are "
            "scores."
        )


def _copy_block(block, out, sums, *, clip, low, renormalize, log, floor):
    """Write the float64 copy of one validated block into ``out``.

    Clipped to [0, 1] when ``clip``; with ``renormalize`` multiplied by the
    reciprocals of the row sums (within a unit in the last place of the
    division), which are ``sums`` (computed in float64 by the validation)
    for float64 rows that need no clipping, and are summed again from the
    float64 copy otherwise; with ``floor`` (a float, or None: no floor)
    ``max(p, floor)`` (see :func:`_floor_rows`), and with ``log`` its log.
    The floor is skipped when the
    block's smallest entry ``low`` shows that no entry of the copy can be
    below it. ``out`` is a block of the new float64 array (writeable,
    C-contiguous rows).
    """
    if renormalize and not clip and block.dtype == np.float64:
        np.multiply(block, _reciprocals(sums, block.shape[1])[:, None], out=out)
    else:
        out[...] = block
        if clip:
            np.clip(out, 0.0, 1.0, out=out)
        if renormalize:
            out *= _reciprocals(np.einsum("ij->i", out), out.shape[1])[:, None]
    if floor is not None and not _above_floor(low, sums, floor, clip=clip):
        _floor_rows(out, floor)
    if log:
        log_probabilities_inplace(out)


def _floor_rows(out: np.ndarray, floor: float) -> None:
    """``max(p, floor)`` in place; above ``PROBA_EPS`` (a calibrator's
    ``proba_floor_``), the rows where the floor raised an entry are divided
    by their new sums, so that they stay probabilities (and their logs the
    log-softmax of ``log(max(p, floor))``)."""
    raised = (out < floor).any(axis=1) if floor > PROBA_EPS else None
    np.maximum(out, floor, out=out)
    if raised is not None and raised.any():
        rows = out[raised]
        out[raised] = rows / rows.sum(axis=1, keepdims=True)


def _reciprocals(sums: np.ndarray, n_cols: int) -> np.ndarray:
    """``1 / sums``, but 1 for the rows whose float64 sum is within ``n_cols``
    units in the last place of 1 (``n_cols * eps``): the rounding of the sum
    (and of the entries) of a row that sums to 1. Such rows are used as given:
    dividing them by a sum a unit off 1 would move every entry by a unit and
    break the ties and the order of equal entries of different rows (which a
    one-vs-rest binning reads)."""
    out = 1.0 / sums
    out[np.abs(sums - 1.0) <= n_cols * np.finfo(np.float64).eps] = 1.0
    return out


def _above_floor(low, sums, floor: float, *, clip: bool) -> bool:
    """Whether every entry of a block's copy exceeds ``floor``: its
    entries were at least ``low`` (NaN: unknown) before being divided by row
    sums of at most ``sums.max()``, with a margin of 2 for the rounding."""
    if clip or not low > 0:
        return False
    return bool(low > 2.0 * floor * max(1.0, float(sums.max())))


def _numpy_log_is_vectorised() -> bool:
    """Whether numpy's float64 ``log`` runs its AVX-512 kernel on this CPU
    (numpy's other float64 logs are scalar)."""
    try:
        from numpy._core._multiarray_umath import __cpu_features__
    except ImportError:  # pragma: no cover - numpy < 2
        return False
    return bool(__cpu_features__.get("AVX512_SKX"))


#: numpy's AVX-512 float64 log is about 2.5x torch's on the same CPU (1.1
#: against 2.9 ns per entry); without it, torch's vectorised log is faster.
_NUMPY_LOG = _numpy_log_is_vectorised()


def log_probabilities_inplace(a: np.ndarray) -> np.ndarray:
    """``a = log(a)`` for a writeable, C-contiguous float64 array ``a``.

    The logarithm that :func:`check_probabilities` (``log=True``) takes of
    the validated probabilities: numpy's (never torch's, so that the
    calibrators that need no torch import none). A calibrator that takes
    these logs itself, as a shortcut of the validation's, calls this so that
    both agree bit for bit.

    Returns
    -------
    a : ndarray
        The same array, holding the logs.
    """
    if _NUMPY_LOG:
        return np.log(a, out=a)
    from ._softmax import log_inplace

    return log_inplace(a)


def check_scores_shape(X, name: str = "X") -> None:
    """Raise skcal's advice for scores that are not 2-D with >= 2 columns.

    Called before scikit-learn's own validation, whose advice for 1-D input
    (``reshape(-1, 1)``) would lead a binary user to a second error.
    """
    shape = np.shape(X)
    if len(shape) != 2 or shape[1] < 2:
        raise ValueError(
            f"{name} must have shape (n_samples, n_classes) with at least 2 columns, "
            f"one per class; got shape {shape}. For a binary decision function d, "
            "pass np.column_stack([-d, d]); for probabilities p of the positive "
            "class, np.column_stack([1 - p, p]) (or use skcal.CalibratedClassifier)."
        )


def proba_floor(P: np.ndarray) -> float:
    """The floor of probabilities before their log, from calibration data.

    ``ZERO_FRACTION`` (one half) of the smallest positive entry of ``P``,
    and at least ``PROBA_EPS``: no positive entry (after renormalisation,
    which moves a row by at most its tolerance) is changed, and an exact 0
    counts as half the smallest probability the model gave instead of
    ``PROBA_EPS`` (a log of -708.4, which let one calibration row whose true
    class had probability 0 drive temperature scaling's temperature from
    1.07 to 2.13 on a random forest's probabilities rounded to 3 decimals).
    Models whose probabilities reach the subnormals (confident float64
    softmax outputs) keep ``PROBA_EPS``. ``P`` is the validated (finite)
    score array of ``fit``; NaN or negative entries are left to the checks.
    """
    P = np.asarray(P)
    with np.errstate(invalid="ignore"):
        smallest = float(np.min(P, where=P > 0, initial=np.inf))
    if not np.isfinite(smallest):
        return PROBA_EPS
    return max(PROBA_EPS, ZERO_FRACTION * min(smallest, 1.0))


def scores_to_logits(
    X: np.ndarray,
    input: str,
    name: str = "X",
    *,
    tol: float = SUM_TOL,
    shift: bool = False,
    eps: float = PROBA_EPS,
) -> np.ndarray:
    """Turn validated 2-D scores into logits (log-probabilities for probas).

    ``input="logits"`` returns ``X`` itself (never modified; float32 scores
    as a float64 copy, so that every computation, the shift included, is in
    float64), or with ``shift`` a new array ``X - X.max(axis=1)``; it warns
    when ``X`` looks like probabilities, and refuses logits beyond
    ``MAX_LOGIT`` in absolute value. ``input="proba"`` returns
    ``log(max(p, eps))`` of the validated, renormalised rows in float64
    (``tol``: the row-sum tolerance, see :func:`sum_tolerance`; ``eps``: a
    calibrator's :func:`proba_floor`). Logits are checked by the largest and
    the smallest entry of the whole array (two vectorised passes, no temporary),
    which also tell whether every entry is finite (NaN and inf propagate to
    them); the row sums are only computed when every entry lies in [0, 1].
    """
    check_scores_shape(X, name)
    if X.shape[0] == 0:
        return X
    if input == "proba":
        # check_probabilities validates finiteness (with the same message)
        # and takes the logs of its new array in the same pass (see
        # log_probabilities_inplace)
        return check_probabilities(X, name, tol=tol, log=True, eps=eps)
    if X.dtype != np.float64:  # every computation in float64, the shift too
        X = X.astype(np.float64)
    if shift:  # the row maxima are needed anyway: their maximum is X's
        from ._softmax import minus_rows, row_max

        maxima = row_max(X)
        high = float(maxima.max())
    else:
        high = float(X.max())
    low = float(X.min())
    if not (np.isfinite(high) and np.isfinite(low)):
        check_finite(X, name)  # raises, naming the first bad row
    largest = max(abs(high), abs(low))
    if largest > MAX_LOGIT:
        raise ValueError(
            f"{name} holds logits as large as {largest:.3g} in absolute value; "
            f"skcal accepts up to {MAX_LOGIT:g}, beyond which differences of "
            "logits overflow. Logits this large carry no more information than "
            f"their ranking: rescale them (e.g. {name} / np.abs({name}).max() * "
            "100) before calibrating."
        )
    if (
        X.shape[1] >= 2
        and low >= 0
        and high <= 1
        and np.all(np.abs(X.sum(axis=1, dtype=np.float64) - 1.0) <= tol)
    ):
        warn(
            f"input='logits' but every row of {name} lies in [0, 1] and sums to 1: "
            "these look like probabilities. Pass input='proba' if they are; the "
            "calibrator never guesses.",
            InputWarning,
        )
    if shift:
        return minus_rows(X, maxima)
    return X


def _is_integral(y: np.ndarray) -> bool:
    if y.dtype.kind in "iu":
        return True
    if y.dtype.kind == "f":
        return bool(np.all(np.mod(y, 1) == 0))
    return False


def _label_kind(value) -> str:
    if isinstance(value, (str, bytes)):
        return "str"
    if isinstance(value, (bool, np.bool_)):
        return "bool"
    if isinstance(value, (int, float, np.number)):
        return "number"
    return type(value).__name__


def _is_missing(value) -> bool:
    """Whether a label is a missing value: None, NaN, ``pd.NA`` or ``pd.NaT``."""
    if value is None or type(value).__name__ in ("NAType", "NaTType"):
        return True
    return isinstance(value, (float, np.floating)) and value != value


def _rows_text(rows: np.ndarray) -> str:
    shown = ", ".join(str(int(r)) for r in rows[:8])
    return f"[{shown}{', ...' if rows.size > 8 else ''}]"


def check_missing_labels(y: np.ndarray, name: str = "y") -> None:
    """Refuse missing labels (None, NaN, ``pd.NA``), saying at which rows.

    A missing label is no class: the rows are to be dropped, not turned
    into a class called ``'nan'`` (which ``astype(str)`` would do).
    """
    if y.dtype.kind == "f":
        flat = y.ravel()
        if np.isfinite(flat).all():
            return
        rows = np.flatnonzero(np.isnan(flat))
        if rows.size == 0:
            rows = np.flatnonzero(~np.isfinite(flat))
            raise ValueError(
                f"{name} has {rows.size} infinite label(s) at rows "
                f"{_rows_text(rows)}; labels are class identifiers. Drop those "
                "rows or fix their labels."
            )
    elif y.dtype == object and y.size:
        flat = y.ravel()
        rows = np.flatnonzero([_is_missing(value) for value in flat])
    else:
        return
    if rows.size:
        raise ValueError(
            f"{name} has {rows.size} missing label(s) at rows {_rows_text(rows)}: "
            "drop those rows first (a missing label is no class)."
        )


def check_label_types(y: np.ndarray, name: str = "y") -> None:
    """Refuse missing labels and labels that mix types (numbers and strings).

    numpy cannot sort mixed labels (``'<' not supported``), so no column
    order exists; a plain list is turned into strings by numpy before this
    check, an object array or a pandas column is not. Missing labels
    (:func:`check_missing_labels`) are refused first, with their rows.
    """
    if y.dtype.kind == "f":
        check_missing_labels(y, name)
    if y.dtype != object or y.size == 0:
        return
    kinds: dict[str, object] = {}
    for value in y.ravel():
        kinds.setdefault(_label_kind(value), value)
    if kinds.keys() - {"str", "bool"}:  # None, NaN, pd.NA are not strings
        check_missing_labels(y, name)
    if len(kinds) > 1:
        examples = ", ".join(f"{v!r} ({k})" for k, v in kinds.items())
        raise ValueError(
            f"{name} mixes labels of different types: {examples}. Labels must "
            "be all numbers or all strings to have an order; convert them "
            f"first, e.g. {name} = np.asarray({name}).astype(str)."
        )


def _kind_of_labels(a: np.ndarray):
    """``"str"``, ``"number"`` (booleans included) or None (empty, other)."""
    if a.dtype.kind in "US":
        return "str"
    if a.dtype.kind in "biuf":
        return "number"
    if a.dtype == object and a.size:
        kind = _label_kind(a.flat[0])
        return "number" if kind == "bool" else kind
    return None


def _labels_text(a, limit: int = 4) -> str:
    """The first labels of an array or list, for a message."""
    values = a.tolist() if isinstance(a, np.ndarray) else list(a)
    shown = ", ".join(repr(v) for v in values[:limit])
    return f"[{shown}{', ...' if len(values) > limit else ''}]"


def check_label_kinds(y: np.ndarray, classes: np.ndarray, name: str, y_name: str):
    """Refuse number labels against string classes, and the reverse.

    Integer-coded labels with string ``classes`` (or string labels with
    number classes) match no class; numpy cannot even compare them.
    """
    y_kind, c_kind = _kind_of_labels(y), _kind_of_labels(classes)
    if {y_kind, c_kind} != {"str", "number"}:
        return
    if c_kind == "str":
        present = np.unique(y).astype(np.float64)
        if _is_integral(present) and present.size:
            what = f"integers {int(present.min())}..{int(present.max())}"
            fix = f"map them with {name}[{y_name}]"
            if present.min() < 0 or present.max() >= len(classes):
                fix = f"encode them as the labels of {name}"
        else:
            what, fix = f"numbers {_labels_text(present)}", "encode them as strings"
        raise ValueError(
            f"{y_name} holds {what} but {name} are strings "
            f"{_labels_text(classes)}: {fix}."
        )
    raise ValueError(
        f"{y_name} holds strings {_labels_text(np.unique(y))} but {name} are "
        f"numbers {_labels_text(classes)}: pass the string labels as {name} (in "
        f"column order), or encode {y_name} as the numbers of {name}."
    )


def check_labels(y) -> np.ndarray:
    """Labels as a numpy array (tensors converted), refusing mixed types."""
    y = np.asarray(as_numpy(y))
    check_label_types(y)
    return y


def _labels_as_columns(y: np.ndarray, n_columns: int, classes):
    """``(classes_, y_index)`` of :func:`resolve_classes` for 1-D integer
    labels that are already column indices, or None for any other labels.

    Without ``classes``, labels all in ``range(n_columns)``; with it, a
    ``classes`` of integers equal to ``0..n_columns-1`` (after which the
    labels must lie in that range), and at least two labels per column (with
    fewer, more than half the labels can be distinct, and scikit-learn's
    check warns). This is what the general path returns for them, without
    its sort (``np.unique``) or scikit-learn's ``type_of_target`` (which
    accepts every 1-D integer array).
    """
    if y.ndim != 1 or y.dtype.kind not in "iu":
        return None
    if y.size < 2 * n_columns:  # scikit-learn's many-classes warning can apply
        return None
    if y.min() < 0 or y.max() >= n_columns:
        return None
    if classes is None:
        # y's own kind of number, widened until it holds every column's label
        # (int8 labels with 200 columns: int16, not a wrap-around to -128)
        dtype = np.result_type(y.dtype, np.min_scalar_type(max(n_columns - 1, 0)))
        return np.arange(n_columns).astype(dtype), y.astype(np.int64)
    classes_ = np.asarray(classes)
    if (
        classes_.dtype.kind not in "iu"
        or classes_.shape != (n_columns,)
        or not np.array_equal(classes_, np.arange(n_columns))
    ):
        return None
    return classes_, y.astype(np.int64)


def resolve_classes(
    y, n_columns: int, classes=None, *, name: str = "classes", y_name: str = "y"
):
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
    if not (type(y) is np.ndarray and y.ndim == 1 and y.dtype.kind != "c"):
        y = column_or_1d(y, warn=True)  # (a 1-D array: itself)
    check_label_types(y, y_name)
    direct = _labels_as_columns(y, n_columns, classes)
    if direct is not None:
        return direct
    if y.size:
        check_classification_targets(y)
    present = np.unique(y)
    if classes is not None:
        classes_ = np.asarray(classes)
        check_label_types(classes_, name)
        if classes_.ndim != 1 or len(classes_) != n_columns:
            raise ValueError(
                f"{name} must list one label per column: expected {n_columns} "
                f"labels, got {len(np.atleast_1d(classes_))}."
            )
        check_label_kinds(y, classes_, name, y_name)
        if len(np.unique(classes_)) != len(classes_):
            raise ValueError(f"{name} contains duplicate labels: {list(classes_)}.")
        order = np.argsort(classes_, kind="stable")
        sorted_classes = classes_[order]
        pos = np.clip(np.searchsorted(sorted_classes, y), 0, len(classes_) - 1)
        unseen = y != sorted_classes[pos]
        if unseen.any():
            raise ValueError(
                f"{y_name} contains labels that are not in {name}: "
                f"{sorted(set(np.unique(y[unseen]).tolist()))[:10]}; {name} = "
                f"{classes_.tolist()}. Add them to {name}, in the column order of X."
            )
        return classes_, order[pos].astype(np.int64)
    if _is_integral(present) and (
        present.size == 0 or (present.min() >= 0 and present.max() < n_columns)
    ):
        # y's own kind of number, widened until it holds every column's label
        # (int8 labels with 200 columns: int16, not a wrap-around to -128)
        dtype = int
        if y.dtype.kind in "iuf":
            dtype = np.result_type(y.dtype, np.min_scalar_type(max(n_columns - 1, 0)))
        classes_ = np.arange(n_columns).astype(dtype)
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


def frame_column_names(X):
    """The column names of a dataframe (pandas, polars), else None.

    Read before the data become an array, for :func:`class_column_order`;
    None at once for a numpy array.
    """
    if isinstance(X, np.ndarray) or not hasattr(X, "shape"):
        return None
    columns = getattr(X, "columns", None)
    return None if columns is None else list(columns)


def _column_positions(names: list, classes: np.ndarray) -> list:
    """The class index of each name (-1: none), by value, else by text."""
    values = classes.tolist()
    exact = {value: j for j, value in enumerate(values)}
    text = {str(value): j for j, value in enumerate(values)}

    def lookup(name):
        try:
            j = exact.get(name, -1)
        except TypeError:  # an unhashable name
            j = -1
        return j if j >= 0 else text.get(str(name), -1)

    return [lookup(name) for name in names]


def _numbered(names: list) -> bool:
    """Whether the names are the positions ``0..n-1`` (or their text)."""
    return [str(name) for name in names] == [str(j) for j in range(len(names))]


def class_column_order(names, classes, *, what: str = "X", name: str = "classes_"):
    """Which column of a dataframe holds each class, read from its names.

    The input contract's rule for the columns of a dataframe of scores
    (names compared with the classes by value, or by their text, so that
    ``"7"`` names class 7):

    - integer names ``0..K-1`` in order (pandas' default ``RangeIndex``) are
      positions: column ``j`` is ``classes[j]``;
    - names that are exactly the classes, in any order, put each class's
      column in its place;
    - names numbered ``"0".."K-1"`` in order, and names of which none is a
      class (``"logit_0"``, ``"f1"``), are positions too;
    - names of which some, but not all, are the classes are refused.

    Parameters
    ----------
    names : list or None
        :func:`frame_column_names` of the input.
    classes : ndarray of shape (n_classes,)
        The label of each column, in column order.
    what, name : str
        The input's and the classes' names in the messages.

    Returns
    -------
    ndarray of shape (n_classes,) or None
        ``order`` with ``X[:, order]`` in the order of ``classes``; None
        when ``X`` is read as it is (positions, or names already in order).

    Raises
    ------
    ValueError
        If some names are classes but the names are not exactly the classes
        (one missing, one more, one repeated).
    """
    if names is None:
        return None
    if all(isinstance(n, (int, np.integer)) for n in names) and _numbered(names):
        return None
    classes = np.asarray(classes)
    positions = _column_positions(names, classes)
    if len(names) == len(classes) and sorted(positions) == list(range(len(names))):
        order = np.argsort(positions)
        return None if (order == np.arange(len(order))).all() else order
    if _numbered(names) or max(positions, default=-1) < 0:
        return None
    raise _column_mismatch(names, classes, positions, what, name)


def _column_mismatch(names, classes, positions, what, name) -> ValueError:
    """The error of :func:`class_column_order` for names of some classes."""
    found = [j for j in positions if j >= 0]
    seen = set(found)
    missing = [c for j, c in enumerate(classes.tolist()) if j not in seen]
    other = [n for n, j in zip(names, positions) if j < 0]
    repeated = sorted(
        {str(names[i]) for i, j in enumerate(positions) if found.count(j) > 1}
    )
    parts = [
        f"{label} {_labels_text(items, 10)}"
        for label, items in (
            ("no column for", missing),
            ("columns naming no class", other),
            ("repeated", repeated),
        )
        if items
    ]
    return ValueError(
        f"{what}'s columns are named after classes but not after exactly the "
        f"{len(classes)} classes {_labels_text(classes, 10)} ({name}): "
        f"{'; '.join(parts)}; received the {len(names)} columns "
        f"{_labels_text(names, 10)}. Name one column after each class (in any "
        f"order), or pass an array whose column j is {name}[j]."
    )


def check_sample_weight(
    sample_weight, n_samples: int, *, relative: bool = False, allow_zero: bool = False
) -> np.ndarray:
    """Non-negative float64 weights of length ``n_samples``, ones if None.

    With ``relative`` the weights are returned divided by their maximum (a new
    array): calibrators and metrics only use weights relative to each other,
    so multiplying them all by a positive constant, from 1e-300 to 1e300,
    changes nothing and no sum or product of weights can overflow or
    underflow. With ``allow_zero`` weights that are all 0 are accepted (one
    chunk of a larger set, whose total is checked when it is complete).
    """
    if sample_weight is None:  # what scikit-learn returns, without its checks
        return np.ones(n_samples)
    # scikit-learn refuses all-zero weights only where it offers the option
    options = {"allow_all_zero_weights": True} if allow_zero and _ALL_ZERO else {}
    weights = _check_sample_weight(
        sample_weight,
        np.empty((n_samples, 0)),
        dtype=np.float64,
        ensure_non_negative=True,
        **options,
    )
    if not (allow_zero or _ALL_ZERO) and not weights.any():
        # scikit-learn < 1.9 accepts them: refuse them as later versions do
        raise ValueError("Sample weights must contain at least one non-zero number.")
    if relative:
        top = weights.max(initial=0.0)
        if top > 0:
            weights = weights / top
    return weights


def effective_sample_size(sample_weight: np.ndarray) -> float:
    """Kish's effective number of samples, ``(sum w)^2 / sum w^2``.

    Equal to the number of rows for equal weights, unchanged when every weight
    is multiplied by the same constant, and not counting zero-weight rows:
    the ``n`` of every sample-size-dependent default (a ridge ``C / n``, a
    small-data warning).
    """
    w = np.asarray(sample_weight, dtype=np.float64)
    top = w.max(initial=0.0)
    if top <= 0:
        return 0.0
    w = w / top
    return float(w.sum() ** 2 / np.dot(w, w))


def count_events(scores, labels, classes, sample_weight) -> float:
    """Events of a calibration set: the rows whose top class (the first
    largest score) is not the label, or those where it is if they are
    fewer, each counted as Kish's effective number of rows."""
    wrong = classes[np.argmax(scores, axis=1)] != labels
    return min(
        effective_sample_size(sample_weight[wrong]),
        effective_sample_size(sample_weight[~wrong]),
    )


def check_proba_targets(
    y_true, y_proba, *, labels=None, sample_weight=None, copy=True, top_label=False
):
    """Validate the inputs of a probability metric.

    Accepts 2-D ``(n_samples, n_classes)`` probabilities or 1-D probabilities
    of the positive class (the second label) for binary problems. The
    probabilities are checked in one pass, see :func:`check_probabilities`
    (``copy`` and ``top_label`` are passed on); the labels are mapped to
    columns by :func:`resolve_classes`.
    A dataframe whose columns are named after the classes is read by name
    (:func:`proba_in_class_order`).

    Returns
    -------
    proba : ndarray of shape (n_samples, n_classes), rows sum to 1
        A float64 copy clipped to [0, 1]; with ``copy=False``, float32 and
        float64 input itself when it lies in [0, 1].
    y_index : ndarray of shape (n_samples,), column of each label
    sample_weight : ndarray of shape (n_samples,)
    pred, conf : ndarray of shape (n_samples,)
        Only with ``top_label``: each row's argmax and maximum.
    """
    y_true, y_proba, sample_weight = map(as_numpy, (y_true, y_proba, sample_weight))
    tol = sum_tolerance(getattr(y_proba, "dtype", None))
    y_proba = proba_in_class_order(y_true, y_proba, labels)
    if y_proba.ndim == 1 or (y_proba.ndim == 2 and y_proba.shape[1] == 1):
        p = y_proba.reshape(-1).astype(np.float64)
        y_proba = np.column_stack([1.0 - p, p])
    if y_proba.ndim != 2:
        raise ValueError(
            f"y_proba must be 1-D (binary) or 2-D (n_samples, n_classes); got "
            f"{y_proba.ndim} dimensions."
        )
    if not (type(y_true) is np.ndarray and y_true.ndim == 1):
        y_true = column_or_1d(y_true)
    check_consistent_length(y_true, y_proba)
    checked = check_probabilities(
        y_proba,
        "y_proba",
        tol=tol,
        renormalize=False,
        copy=copy,
        top_label=top_label,
    )
    proba = checked[0] if top_label else checked
    n_samples, n_classes = proba.shape
    _, y_index = resolve_classes(
        y_true, n_classes, labels, name="labels", y_name="y_true"
    )
    if sample_weight is None:
        sample_weight = np.ones(n_samples)
    else:
        sample_weight = check_sample_weight(sample_weight, n_samples, relative=True)
    if n_samples == 0:
        raise ValueError("Found 0 samples; metrics need at least one.")
    if top_label:
        return proba, y_index, sample_weight, checked[1], checked[2]
    return proba, y_index, sample_weight


def proba_in_class_order(y_true, y_proba, labels=None):
    """``y_proba`` checked by :func:`check_proba_array`, its columns in the
    order of the classes when it is a dataframe whose columns name them.

    The classes are ``labels``, or those of ``y_true`` (see
    :func:`resolve_classes`); the rule is that of :func:`class_column_order`.
    A dataframe of one column (the positive class's probabilities) is read
    as it is.
    """
    names = frame_column_names(y_proba)
    y_proba = check_proba_array(y_proba)
    if names is None or y_proba.ndim != 2 or y_proba.shape[1] < 2:
        return y_proba
    classes, _ = resolve_classes(
        column_or_1d(as_numpy(y_true)),
        y_proba.shape[1],
        labels,
        name="labels",
        y_name="y_true",
    )
    order = class_column_order(names, classes, what="y_proba", name="labels")
    return y_proba if order is None else y_proba[:, order]


def check_proba_array(y_proba) -> np.ndarray:
    """``y_proba`` as a float32/float64 array of any dimension checked by
    scikit-learn's ``check_array`` (not for finiteness)."""
    return check_array(
        y_proba,
        ensure_2d=False,
        dtype=[np.float64, np.float32],
        ensure_all_finite=False,
        input_name="y_proba",
    )


def check_class_weight(class_weight, n_classes: int, *, frequencies=None):
    """Validated class weights of shape ``(n_classes,)``, normalised to sum 1.

    ``None`` gives uniform weights; ``"frequency"`` gives ``frequencies``
    (the weighted class counts, which the caller passes); otherwise one
    finite, non-negative number per class with a positive sum. Multiplying
    every weight by a constant changes nothing (they are divided by their
    maximum before summing, so nothing overflows).
    """
    if class_weight is None:
        return np.full(n_classes, 1.0 / n_classes)
    if isinstance(class_weight, str):
        if class_weight != "frequency" or frequencies is None:
            raise ValueError(
                f"class_weight must be None, 'frequency' or one weight per class; "
                f"got {class_weight!r}."
            )
        cw = np.asarray(frequencies, dtype=np.float64)
    else:
        try:
            cw = np.asarray(class_weight, dtype=np.float64)
        except (TypeError, ValueError):
            cw = np.full(n_classes + 1, np.nan)  # reported below
        if cw.shape != (n_classes,) or not np.all(np.isfinite(cw)) or np.any(cw < 0):
            raise ValueError(
                f"class_weight must hold {n_classes} finite, non-negative numbers "
                f"(one per column of y_proba); got {class_weight!r}."
            )
    top = cw.max(initial=0.0)
    if top <= 0:
        raise ValueError("class_weight sums to 0; give some class a positive weight.")
    cw = cw / top
    return cw / cw.sum()


def check_embeddings(X: np.ndarray, name: str = "X") -> None:
    """Raise a clear error for non-finite or overflowing embeddings."""
    check_finite(X, name)
    largest = float(np.abs(X).max(initial=0.0))
    if largest > MAX_EMBEDDING:
        raise ValueError(
            f"{name} holds embeddings as large as {largest:.3g} in absolute "
            f"value; skcal accepts up to {MAX_EMBEDDING:g}, beyond which "
            "squared distances overflow. Rescale them (e.g. divide by "
            f"np.abs({name}).max()) and the head's coef accordingly."
        )


def paired_mean_difference(diff: np.ndarray, weights: np.ndarray):
    """Weighted mean of per-row differences and its standard error.

    The standard error uses Kish's effective sample size ``n_eff``; with
    equal weights it is the sample standard deviation over ``sqrt(n)``.
    """
    total = weights.sum()
    mean = float(np.dot(weights, diff) / total)
    n_eff = total**2 / np.dot(weights, weights)
    if n_eff <= 1.0:
        return mean, math.inf
    var = float(np.dot(weights, (diff - mean) ** 2) / total)
    return mean, math.sqrt(var / (n_eff - 1.0))


def check_hidden_layer_sizes(value, *, allow_empty: bool = True) -> tuple:
    """``hidden_layer_sizes`` as a tuple of positive ints, or a clear error.

    Accepts an int (one layer) or a sequence of ints, as scikit-learn's
    ``MLPClassifier`` does.
    """
    sizes = np.atleast_1d(np.asarray(value))
    if sizes.ndim != 1 or (sizes.size and not _is_integral(sizes)):
        raise ValueError(
            f"hidden_layer_sizes must be an int or a sequence of ints (layer "
            f"widths), got {value!r}."
        )
    hidden = tuple(int(s) for s in sizes)
    if any(h < 1 for h in hidden) or (not hidden and not allow_empty):
        raise ValueError(
            f"hidden_layer_sizes must hold positive layer widths, got {value!r}"
            + ("; use () for no hidden layer." if allow_empty else ".")
        )
    return hidden
