"""skcal's global configuration: the torch threads of its calls.

In the style of :func:`sklearn.set_config` and
:func:`sklearn.config_context`, and separate from them (scikit-learn's
configuration has no place for torch's threads).
"""

from __future__ import annotations

from contextlib import contextmanager
from numbers import Integral

__all__ = ["config_context", "get_config", "set_config"]


def _check(n_threads):
    if n_threads is not None and (
        isinstance(n_threads, bool)
        or not isinstance(n_threads, Integral)
        or n_threads < 1
    ):
        raise ValueError(
            f"n_threads must be a positive integer or None (automatic); got "
            f"{n_threads!r}. Use n_threads=1 on a busy machine or inside "
            "parallel workers."
        )


def get_config() -> dict:
    """skcal's configuration in force in this thread.

    Returns
    -------
    dict
        ``{"n_threads": ...}``: the torch threads of skcal's calls, or None
        for the automatic choice (see :func:`set_config`).

    Examples
    --------
    >>> import skcal
    >>> skcal.get_config()
    {'n_threads': None}
    """
    from ._torch._threads import config_n_threads

    return {"n_threads": config_n_threads()}


def set_config(n_threads=None) -> None:
    """Set skcal's configuration for the whole process.

    Parameters
    ----------
    n_threads : int or None, default=None
        The torch threads every fit, prediction and metric of skcal runs on.
        None (the default) chooses for each call: one thread for small work,
        and for large work no more than the cores the process may use,
        torch's own limit (``OMP_NUM_THREADS``, ``torch.set_num_threads``),
        ``threadpoolctl``'s limits in force, the cores other processes leave
        idle, and one in a thread of a thread pool. The user guide's
        "Threads" section gives the measurements.

    Examples
    --------
    >>> import skcal
    >>> skcal.set_config(n_threads=1)  # a shared server: never more
    >>> skcal.get_config()["n_threads"]
    1
    >>> skcal.set_config(n_threads=None)  # back to the automatic choice
    """
    from ._torch._threads import set_n_threads

    _check(n_threads)
    set_n_threads(n_threads)


@contextmanager
def config_context(*, n_threads=None):
    """Set skcal's configuration within a block (in the calling thread).

    Parameters
    ----------
    n_threads : int or None, default=None
        As for :func:`set_config`; None restores the automatic choice
        within the block.

    Examples
    --------
    >>> import numpy as np
    >>> import skcal
    >>> from skcal.utils._testing import make_miscalibrated_logits
    >>> X, y = make_miscalibrated_logits(500, 3, random_state=0)
    >>> with skcal.config_context(n_threads=1):
    ...     ts = skcal.TemperatureScaling().fit(X, y)
    """
    from ._torch import _threads

    _check(n_threads)
    missing = object()
    before = getattr(_threads._LOCAL, "n_threads", missing)
    _threads.set_n_threads(n_threads, local=True)
    try:
        yield
    finally:
        if before is missing:
            del _threads._LOCAL.n_threads
        else:
            _threads._LOCAL.n_threads = before
