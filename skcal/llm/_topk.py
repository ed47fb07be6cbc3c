"""TopKScores: the k most probable classes of each row, never n x vocabulary.

A language model's next-token distribution has 32k to 256k classes; what is
kept of it (an API's ``top_logprobs``, or the top-k of a white-box model's
logits) is, per row, k class indices, their log-probabilities and, where
known, the log of the mass left over for the other classes.
"""

from __future__ import annotations

import numbers

import numpy as np

#: Rows of a dense logits block processed at once by ``from_logits``: about
#: 64 MiB of float64.
_CHUNK_BYTES = 64 * 2**20
#: How far above 0 (in log space) the mass of a row's listed entries may go:
#: APIs round their log-probabilities (to float32, about 1e-7 relative).
_MASS_TOL = 1e-5
#: The index of a padding entry (a row with fewer than k listed classes).
PAD = -1


def check_class_indices(y: np.ndarray, n_rows: int, n_classes: int) -> np.ndarray:
    """``y`` checked as ``n_rows`` integer class indices in ``[0, n_classes)``."""
    if y.shape != (n_rows,) or not (y.size == 0 or np.issubdtype(y.dtype, np.integer)):
        raise ValueError(
            f"With TopKScores scores, y must be {n_rows} integer class indices "
            f"in [0, {n_classes}) (the indices the top-k lists); got an array "
            f"of shape {y.shape} and dtype {y.dtype}."
        )
    if y.size and (y.min() < 0 or y.max() >= n_classes):
        raise ValueError(
            f"y holds class indices outside [0, {n_classes}) (n_classes): "
            f"{y.min()} .. {y.max()}."
        )
    return y


class TopKScores:
    """The top-k log-probabilities of each row of a many-class distribution.

    Parameters
    ----------
    indices : array-like of shape (n_samples, k), int
        The class indices listed for each row, in ``[0, n_classes)``, or
        ``-1`` for a padding entry: a row may list fewer than ``k`` classes
        (an API's ``-9999`` sentinel is read as padding). No class twice in
        a row.
    values : array-like of shape (n_samples, k), float
        The log-probabilities of those classes, ``<= 0``, with
        ``logsumexp`` of each row's listed values ``<= 0`` (within
        ``1e-5``). Padding entries are ignored and stored as ``-inf``.
    n_classes : int
        The size of the vocabulary (the number of classes).
    rest_logmass : array-like of shape (n_samples,), default=None
        The log of the probability mass of the classes not listed, where
        it is known (``from_logits`` computes it exactly). ``None``: taken
        as ``log(1 - sum(exp(values)))`` of each row when needed (see
        :meth:`leftover_logmass`).
    tokens : sequence of str, default=None
        Names of the first ``len(tokens)`` class indices (the tokens seen
        by :func:`read_top_logprobs`), for display only.

    Attributes
    ----------
    indices : ndarray of shape (n_samples, k), int64
        A copy of ``indices``, padding ``-1``.
    values : ndarray of shape (n_samples, k), float64
        A copy of ``values``, padding ``-inf``.
    rest_logmass : ndarray of shape (n_samples,) or None
    n_classes : int
    tokens : tuple of str or None

    Notes
    -----
    **The rest model.** A row lists ``k_i <= k`` classes with probabilities
    ``p_j = exp(values[i, j])`` and leaves ``r_i`` (``exp(rest_logmass)``,
    or ``1 - sum_j p_j``) to the ``n_classes - k_i`` unlisted classes. Each
    unlisted class gets an equal share,
    ``log p = rest_logmass_i - log(n_classes - k_i)``, which defines the dense
    equivalent (:meth:`to_dense`) and the log-probability of any label
    (:meth:`label_logproba`). Nothing of size ``n_samples x n_classes`` is
    built except by :meth:`to_dense`.

    Examples
    --------
    >>> import numpy as np
    >>> from skcal.llm import TopKScores
    >>> logits = np.log([[0.5, 0.3, 0.1, 0.1], [0.1, 0.1, 0.2, 0.6]])
    >>> top = TopKScores.from_logits(logits, k=2)
    >>> top.indices
    array([[0, 1],
           [3, 2]])
    >>> np.exp(top.rest_logmass).round(6)
    array([0.2, 0.2])
    >>> np.exp(top.label_logproba([2, 0])).round(6)
    array([0.1, 0.1])
    >>> np.exp(top.to_dense()).round(6)
    array([[0.5, 0.3, 0.1, 0.1],
           [0.1, 0.1, 0.2, 0.6]])
    """

    def __init__(self, indices, values, n_classes, rest_logmass=None, *, tokens=None):
        if not isinstance(n_classes, numbers.Integral) or n_classes < 1:
            raise ValueError(
                f"n_classes must be a positive integer (the vocabulary size); "
                f"got {n_classes!r}."
            )
        self.n_classes = int(n_classes)
        self.indices, self.values = _check_entries(indices, values, self.n_classes)
        self.rest_logmass = _check_rest(rest_logmass, self.values)
        self.tokens = None if tokens is None else tuple(tokens)
        if self.tokens is not None and len(self.tokens) > self.n_classes:
            raise ValueError(
                f"tokens names {len(self.tokens)} classes, more than "
                f"n_classes={self.n_classes}."
            )

    # ------------------------------------------------------------ building
    @classmethod
    def from_logits(cls, logits, k, *, chunk_size=None):
        """The top-k of dense logits, computed by chunks of rows.

        Each chunk is turned into log-probabilities (``log_softmax`` over
        the classes, in float64), its ``k`` largest are kept (sorted, most
        probable first), and the leftover is computed stably as
        ``logsumexp(logits[rest]) - logsumexp(logits)`` (not as
        ``log(1 - sum)``, which cancels when the top-k hold almost all the
        mass). Only ``chunk_size x n_classes`` floats are held at a time;
        ``logits`` may be a ``numpy.memmap``. It is not modified.

        Parameters
        ----------
        logits : array-like of shape (n_samples, n_classes)
            Finite logits (or log-probabilities).
        k : int
            How many classes to keep per row, ``1 <= k <= n_classes``.
        chunk_size : int, default=None
            Rows per chunk; ``None``: about 64 MiB of float64 per chunk.

        Returns
        -------
        TopKScores

        Examples
        --------
        >>> import numpy as np
        >>> from skcal.llm import TopKScores
        >>> top = TopKScores.from_logits(np.array([[2.0, 0.0, 1.0]]), k=1)
        >>> top.indices, top.values.round(4), top.rest_logmass.round(4)
        (array([[0]]), array([[-0.4076]]), array([-1.0943]))
        """
        logits = np.asarray(logits)  # no copy: a memmap stays on disk
        if logits.ndim != 2 or logits.shape[1] < 1:
            raise ValueError(
                f"logits must be a 2-D array (n_samples, n_classes); got shape "
                f"{logits.shape}."
            )
        n, n_classes = logits.shape
        if not isinstance(k, numbers.Integral) or not 1 <= k <= n_classes:
            raise ValueError(f"k must be an integer in [1, {n_classes}]; got {k!r}.")
        if chunk_size is None:
            chunk_size = max(1, _CHUNK_BYTES // (8 * n_classes))
        indices = np.empty((n, k), dtype=np.int64)
        values = np.empty((n, k), dtype=np.float64)
        rest = np.empty(n, dtype=np.float64)
        for start in range(0, n, int(chunk_size)):
            stop = min(start + int(chunk_size), n)
            _top_of_chunk(logits[start:stop], k, start, indices, values, rest)
        return cls(indices, values, n_classes, rest)

    # ----------------------------------------------------------- reading
    @property
    def k(self) -> int:
        """The number of entries per row (listed or padding)."""
        return self.indices.shape[1]

    @property
    def n_listed(self) -> np.ndarray:
        """The number of classes listed in each row (padding excluded)."""
        return (self.indices != PAD).sum(axis=1)

    def __len__(self) -> int:
        return self.indices.shape[0]

    def __getitem__(self, rows):
        """The rows ``rows`` (an int, a slice, an index or boolean array) as a
        new TopKScores; an int keeps one row."""
        if isinstance(rows, numbers.Integral):
            rows = [rows]
        rest = None if self.rest_logmass is None else self.rest_logmass[rows]
        return TopKScores(
            self.indices[rows],
            self.values[rows],
            self.n_classes,
            rest,
            tokens=self.tokens,
        )

    def __repr__(self) -> str:
        rest = "known" if self.rest_logmass is not None else "implied"
        return (
            f"TopKScores(n_samples={len(self)}, k={self.k}, "
            f"n_classes={self.n_classes}, rest_logmass={rest})"
        )

    def leftover_logmass(self) -> np.ndarray:
        """Each row's log-mass of the unlisted classes.

        ``rest_logmass`` where known; otherwise ``log(1 - sum(exp(values)))``
        of the row (``-inf`` where the listed mass reaches 1 within rounding).

        Returns
        -------
        ndarray of shape (n_samples,)
        """
        if self.rest_logmass is not None:
            return self.rest_logmass.copy()
        return _implied_rest(self.values)

    def _unlisted_logproba(self) -> np.ndarray:
        """The rest model: each unlisted class's log-probability, per row
        (``-inf`` where no class is unlisted)."""
        n_unlisted = self.n_classes - self.n_listed
        with np.errstate(divide="ignore", invalid="ignore"):
            share = self.leftover_logmass() - np.log(n_unlisted)
        return np.where(n_unlisted > 0, share, -np.inf)

    def label_logproba(self, y) -> np.ndarray:
        """The log-probability of label ``y[i]`` in row ``i``: its listed value,
        or the rest model's share of the leftover mass when unlisted.

        Parameters
        ----------
        y : array-like of shape (n_samples,), int
            Class indices in ``[0, n_classes)``.

        Returns
        -------
        ndarray of shape (n_samples,)
        """
        y = check_class_indices(np.asarray(y), len(self), self.n_classes)
        hit = self.indices == y[:, None]
        listed = hit.any(axis=1)
        out = self._unlisted_logproba()
        out[listed] = self.values[hit]  # one hit per listed row (no duplicates)
        return out

    def to_dense(self, max_bytes=2**30) -> np.ndarray:
        """The dense (n_samples, n_classes) log-probabilities of the rest model.

        Parameters
        ----------
        max_bytes : int, default=2**30
            Refuse (``ValueError``, with the size) above this many bytes.

        Returns
        -------
        ndarray of shape (n_samples, n_classes), float64
        """
        size = len(self) * self.n_classes * 8
        if size > max_bytes:
            raise ValueError(
                f"A dense ({len(self)}, {self.n_classes}) float64 array takes "
                f"{size / 2**30:.3g} GiB, above max_bytes={max_bytes} "
                f"({max_bytes / 2**30:.3g} GiB). Read single labels with "
                f"label_logproba, take rows by slicing, or raise max_bytes."
            )
        dense = np.repeat(self._unlisted_logproba()[:, None], self.n_classes, axis=1)
        rows, cols = np.nonzero(self.indices != PAD)
        dense[rows, self.indices[rows, cols]] = self.values[rows, cols]
        return dense


def _top_of_chunk(block, k, start, indices, values, rest) -> None:
    """Fill rows ``start:start + len(block)`` of the outputs from a block of
    dense logits."""
    block = np.array(block, dtype=np.float64)  # a copy: the caller's stays
    if not np.isfinite(block).all():
        row = start + int(np.nonzero(~np.isfinite(block).all(axis=1))[0][0])
        raise ValueError(f"logits has a non-finite value in row {row}.")
    shift = block.max(axis=1, keepdims=True)
    block -= shift
    total = np.log(np.exp(block).sum(axis=1))
    n_classes = block.shape[1]
    top = np.argpartition(-block, k - 1, axis=1)[:, :k] if k < n_classes else None
    if top is None:
        top = np.broadcast_to(np.arange(n_classes), block.shape)
    top_values = np.take_along_axis(block, top, axis=1)
    order = np.argsort(-top_values, axis=1, kind="stable")
    top = np.take_along_axis(top, order, axis=1)
    top_values = np.take_along_axis(top_values, order, axis=1)
    stop = start + block.shape[0]
    indices[start:stop] = top
    values[start:stop] = top_values - total[:, None]
    if k == n_classes:
        rest[start:stop] = -np.inf
        return
    np.put_along_axis(block, top, -np.inf, axis=1)
    rest_max = block.max(axis=1)
    rest_sum = np.exp(block - rest_max[:, None]).sum(axis=1)
    rest[start:stop] = rest_max + np.log(rest_sum) - total


def _implied_rest(values: np.ndarray) -> np.ndarray:
    """``log(1 - sum(exp(values)))`` per row, ``-inf`` where the mass is 1."""
    mass = np.exp(values).sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(mass < 1.0, np.log1p(-np.minimum(mass, 1.0)), -np.inf)


def _check_entries(indices, values, n_classes):
    indices = np.array(indices, copy=True)
    values = np.array(values, dtype=np.float64, copy=True)
    if indices.ndim != 2 or values.shape != indices.shape:
        raise ValueError(
            f"indices and values must be 2-D arrays of the same shape "
            f"(n_samples, k); got {indices.shape} and {values.shape}."
        )
    if indices.size and not np.issubdtype(indices.dtype, np.integer):
        raise ValueError(f"indices must be integers; got dtype {indices.dtype}.")
    indices = indices.astype(np.int64, copy=False)
    pad = indices == PAD
    bad = (indices < PAD) | (indices >= n_classes)
    if bad.any():
        row = int(np.nonzero(bad.any(axis=1))[0][0])
        raise ValueError(
            f"indices must lie in [0, n_classes={n_classes}) (or be -1 for "
            f"padding); row {row} holds {indices[row][bad[row]].tolist()}."
        )
    values[pad] = -np.inf
    listed = values[~pad]
    if np.isnan(listed).any() or np.isposinf(listed).any() or (listed > 0).any():
        row = int(np.nonzero(~(values <= 0).all(axis=1))[0][0])
        raise ValueError(
            f"values must be log-probabilities (<= 0, not NaN); row {row} holds "
            f"{values[row][~pad[row]].tolist()}."
        )
    _check_duplicates(indices, pad)
    _check_mass(values)
    return indices, values


def _check_duplicates(indices, pad) -> None:
    if indices.shape[1] < 2:
        return
    ordered = np.sort(np.where(pad, PAD, indices), axis=1)
    same = (ordered[:, 1:] == ordered[:, :-1]) & (ordered[:, 1:] != PAD)
    if same.any():
        row = int(np.nonzero(same.any(axis=1))[0][0])
        twice = ordered[row, 1:][same[row]].tolist()
        raise ValueError(
            f"Row {row} lists class {twice[0]} more than once; a top-k lists "
            f"each class at most once."
        )


def _check_mass(values) -> None:
    top = values.max(axis=1, initial=-np.inf)
    finite = np.isfinite(top)
    with np.errstate(invalid="ignore"):
        mass = np.log(np.exp(values - np.where(finite, top, 0)[:, None]).sum(axis=1))
    lse = np.where(finite, top + mass, -np.inf)
    if (lse > _MASS_TOL).any():
        row = int(np.argmax(lse))
        raise ValueError(
            f"The listed probabilities of row {row} sum to {np.exp(lse[row]):.6g} "
            f"> 1: values must be log-probabilities (apply log_softmax to "
            f"logits, or use TopKScores.from_logits)."
        )


def _check_rest(rest, values):
    if rest is None:
        return None
    rest = np.array(rest, dtype=np.float64, copy=True)
    if rest.shape != (values.shape[0],):
        raise ValueError(
            f"rest_logmass must have shape ({values.shape[0]},); got {rest.shape}."
        )
    if np.isnan(rest).any() or (rest > _MASS_TOL).any():
        row = int(np.nonzero(~(rest <= _MASS_TOL))[0][0])
        raise ValueError(
            f"rest_logmass must be a log-mass (<= 0, not NaN); row {row} holds "
            f"{rest[row]}."
        )
    return np.minimum(rest, 0.0)
