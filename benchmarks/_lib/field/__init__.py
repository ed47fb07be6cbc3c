"""The methods of issue 36 and their references, for ``compare_field.py``.

One module per method family (``svs.py``, ``ensemble.py``, ...), each with
``rows()`` returning a list of :class:`Row`. A factory is a zero-argument
callable returning ``(fit(P, y) -> model, predict(model, P) -> proba)`` on
softmax probabilities ``P`` (float64, rows summing to one) and integer labels
``y`` in ``0..C-1``, as the factories of ``_lib/peers.py``; it imports its
library when called and raises (ImportError) when the peer is missing.
"""

from collections.abc import Callable
from typing import NamedTuple


class Row(NamedTuple):
    #: the method, e.g. "structured vector scaling"
    method: str
    #: skcal's factory
    skcal: Callable
    #: ``[(label, factory), ...]``: the references, e.g. ("probmetrics svs", f)
    references: list
    #: a peer above this many classes is not run (unbounded, e.g. one-vs-one)
    max_peer_classes: int | None = None
    #: skcal refuses above this many classes (``None``: it must fit 1,000)
    max_skcal_classes: int | None = None
