"""A decaying tail for the unlisted classes of a TopKScores (``rest_model="tail"``).

The equal spread gives every unlisted class the same log-probability, so
under a temperature the leftover mass changes as ``m exp(u / T)``, flatter
than a real softmax tail, whose unlisted log-probabilities keep falling
below the k-th. The tail model continues the listed ones with a power law
in the rank (Zipf-like): the unlisted class of rank ``r > k`` (``k`` listed)
gets

``log p_r = v_k - s log(r / k)``

with ``v_k`` the row's smallest listed log-probability and ``s >= 0`` the
row's exponent chosen so that the unlisted classes hold the leftover mass
exactly (``s = 0``, a flat tail at ``v_k``, is the most mass they can hold
below the k-th; a leftover above that keeps the equal spread). On a small
language model's 12,263-token vocabulary the fitted exponents are about 1.5,
close to the decay of its real tails (``benchmarks/bench_llm_topk.py``).

The ``m`` unlisted ranks are summed by ``_TAIL_NODES`` nodes, each standing
for a log-spaced range of ranks (its count and its geometric-middle rank),
so that a row costs ``k + _TAIL_NODES`` numbers whatever the vocabulary;
the exponent is found on the nodes themselves (so that they hold the
leftover mass to rounding).

A label outside a row's top-k is known only to be unlisted, not which
unlisted class it is: its likelihood is the tail's whole mass (a censored
observation), whose derivative in ``1/T`` is ``E[z | unlisted] - E[z]``.
Under the equal spread that is the unlisted share's own term, so the two
rest models share one objective.
"""

from __future__ import annotations

import numpy as np

from ._topk import PAD, TopKScores
from ._topk_ops import _CHUNK_ROWS

#: Nodes that sum the unlisted ranks of a row.
_TAIL_NODES = 32
#: Bisection steps of each row's exponent, in [0, _MAX_EXPONENT].
_BISECTIONS = 60
_MAX_EXPONENT = 64.0


def tail_columns(top: TopKScores):
    """``(z, mult)`` of shape ``(n, k + _TAIL_NODES)``: each row's listed
    log-probabilities (weight 1, padding weight 0) then its tail nodes'
    per-class log-probabilities with their counts of classes. Entries of
    weight 0 hold 0."""
    v = top.values
    listed = top.indices != PAD
    n_listed = listed.sum(axis=1)
    m = (top.n_classes - n_listed).astype(np.float64)
    rest = top.leftover_logmass()
    k = np.maximum(n_listed, 1).astype(np.float64)
    v_k = np.where(n_listed > 0, np.where(listed, v, np.inf).min(axis=1), 0.0)
    g = np.arange(_TAIL_NODES + 1) / _TAIL_NODES
    with np.errstate(divide="ignore", invalid="ignore"):
        edges = np.where(g == 0, 0.0, np.maximum(m, 1.0)[:, None] ** g)
        edges[:, 0] = 0.0
        count = np.diff(edges, axis=1) * (m > 0)[:, None]
        rank = np.sqrt(np.maximum(edges[:, :-1], 0.5) * edges[:, 1:])
        decay = -np.log1p(rank / k[:, None])  # log(k / r) per unit exponent
        s = _exponents(count, decay, rest - v_k)
        z_tail = v_k[:, None] + s[:, None] * decay
        # exactly the leftover mass on the nodes
        mass = np.log((count * np.exp(z_tail - v_k[:, None])).sum(axis=1)) + v_k
        z_tail += (rest - mass)[:, None]
    has = (count > 0) & np.isfinite(z_tail)
    z = np.concatenate([np.where(listed, v, 0.0), np.where(has, z_tail, 0.0)], axis=1)
    mult = np.concatenate(
        [listed.astype(np.float64), np.where(has, count, 0.0)], axis=1
    )
    return z, mult


def _exponents(count, decay, log_ratio):
    """Each row's ``s`` in ``[0, _MAX_EXPONENT]`` with
    ``sum(count * exp(s * decay)) = exp(log_ratio)``, by bisection (the sum
    falls as ``s`` grows); 0 where even the flat tail holds too little."""
    lo = np.zeros(len(count))
    hi = np.full(len(count), _MAX_EXPONENT)
    for _ in range(_BISECTIONS):
        s = 0.5 * (lo + hi)
        total = np.log((count * np.exp(s[:, None] * decay)).sum(axis=1))
        above = total > log_ratio
        lo = np.where(above, s, lo)
        hi = np.where(above, hi, s)
    return np.where(np.isfinite(log_ratio), 0.5 * (lo + hi), 0.0)


class TopKTailTemperatureObjective:
    """The weighted mean NLL of temperature-scaled top-k scores under the
    tail model, as a function of ``beta`` (``1 / T`` times ``scale``), like
    :class:`~skcal.llm._topk_ops.TopKTemperatureObjective`; an unlisted
    label counts as a censored observation (the tail's mass)."""

    def __init__(self, top: TopKScores, y_index, sample_weight, scale: float):
        z, self.mult = tail_columns(top)
        alive = self.mult > 0
        shift = np.where(alive, z, -np.inf).max(axis=1)
        self.z = np.where(alive, z - shift[:, None], 0.0) / scale
        hit = top.indices == y_index[:, None]
        self.listed = hit.any(axis=1)
        self.col = np.where(self.listed, np.argmax(hit, axis=1), 0)
        tail = np.zeros_like(alive)
        tail[:, top.k :] = True
        self.tail = tail & alive
        empty = ~self.listed & ~self.tail.any(axis=1) & (sample_weight > 0)
        if empty.any():
            row = int(np.nonzero(empty)[0][0])
            raise ValueError(
                f"Row {row}'s label {y_index[row]} has probability 0: it is not "
                f"listed and the row leaves no mass to its unlisted classes. "
                f"Give the rows' rest_logmass, or drop such rows."
            )
        self.weights = sample_weight / sample_weight.sum()

    def derivatives(self, beta: float) -> tuple[float, float]:
        """First and second derivative of the NLL at ``beta``."""
        grad = hess = 0.0
        for start in range(0, len(self.weights), _CHUNK_ROWS):
            rows = slice(start, start + _CHUNK_ROWS)
            z, mult = self.z[rows], self.mult[rows]
            e = mult * np.exp(beta * z)
            m1, var = _moments(e, z)
            t1, t_var = _moments(e * self.tail[rows], z)
            listed = self.listed[rows]
            z_y = z[np.arange(len(z)), self.col[rows]]
            g = m1 - np.where(listed, z_y, t1)
            h = var - np.where(listed, 0.0, t_var)
            w = self.weights[rows]
            grad += float(w @ g)
            hess += float(w @ h)  # a censored row's may be negative
        return grad, hess


def _moments(e, z):
    """Mean and variance of ``z`` under the weights ``e`` of each row (0, 0
    where a row has none)."""
    total = e.sum(axis=1)
    safe = np.where(total > 0, total, 1.0)
    m1 = np.einsum("ij,ij->i", e, z) / safe
    m2 = np.einsum("ij,ij,ij->i", e, z, z) / safe
    return m1, np.maximum(m2 - m1 * m1, 0.0)


def scale_topk_tail(top: TopKScores, beta: float) -> TopKScores:
    """The top-k of ``softmax(beta * z)`` of the tail model: listed
    ``beta v - L``, leftover the tail nodes' scaled mass ``- L``."""
    z, mult = tail_columns(top)
    k = top.k
    with np.errstate(divide="ignore"):
        logs = np.where(
            mult > 0, beta * z + np.log(np.where(mult > 0, mult, 1.0)), -np.inf
        )
    high = logs.max(axis=1)
    lse = high + np.log(np.exp(logs - high[:, None]).sum(axis=1))
    tail = logs[:, k:]
    tail_high = tail.max(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        tail_lse = tail_high + np.log(np.exp(tail - tail_high[:, None]).sum(axis=1))
    rest = np.where(np.isfinite(tail_high), tail_lse, -np.inf) - lse
    values = np.where(top.indices != PAD, logs[:, :k] - lse[:, None], -np.inf)
    return TopKScores(
        top.indices, np.minimum(values, 0.0), top.n_classes, np.minimum(rest, 0.0),
        tokens=top.tokens,
    )  # fmt: skip
