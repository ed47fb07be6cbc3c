"""Progress of long fits: a ``tqdm`` bar on stderr, and step lines.

``verbose=0`` prints nothing, ``verbose=1`` shows one bar per training phase
(its name, step k of the maximum, elapsed and remaining time, the monitored
loss), and ``verbose >= 2`` also writes one line per step above the bar.
A phase that ends before its maximum (early stopping, convergence) ends its
bar there, with a note saying why (:meth:`Progress.end`). Everything goes to
stderr, so that a program's stdout stays clean.
"""

from __future__ import annotations

import sys


class Progress:
    """One phase of a fit, as a context manager.

    Parameters
    ----------
    verbose : int or bool
        0: silent; 1: the bar; 2 or more: the bar and a line per step.
    total : int
        The maximum number of steps. A phase that stops before it calls
        :meth:`end` (or :meth:`stopped_early`): the total becomes the steps
        taken, and the note says why.
    desc : str
        The phase's name, written before the bar.
    unit : str, default="epoch"
        What a step is.

    Examples
    --------
    >>> from skcal._torch._progress import Progress
    >>> with Progress(0, total=3, desc="demo") as progress:
    ...     for step in range(3):
    ...         progress.step(f"step {step}", loss=0.5)
    ...     progress.stopped_early(epoch=3, patience=2)
    """

    def __init__(self, verbose, total: int, desc: str, unit: str = "epoch"):
        self.verbose = int(verbose) if verbose else 0
        self._bar = None
        if self.verbose >= 1:
            from tqdm import tqdm

            self._bar = tqdm(
                total=total,
                desc=desc,
                unit=unit,
                file=sys.stderr,
                dynamic_ncols=True,
                leave=True,
            )

    def step(self, line: str | None = None, **postfix) -> None:
        """Advance by one step; ``line`` is written at ``verbose >= 2``."""
        if self._bar is None:
            return
        if self.verbose >= 2 and line is not None:
            self._bar.write(line, file=sys.stderr)
        if postfix:
            shown = {
                k: f"{v:.4g}" if isinstance(v, float) else v for k, v in postfix.items()
            }
            self._bar.set_postfix(shown, refresh=False)
        self._bar.update(1)

    def end(self, note: str | None = None) -> None:
        """End the bar at the steps taken (its total adjusted), with ``note``.

        The note (why the phase ended before its maximum) is appended to the
        bar's postfix, so that the bar's last line says it.
        """
        bar = self._bar
        if bar is None:
            return
        if bar.total != bar.n:
            bar.total = bar.n
        if note:
            postfix = bar.postfix
            bar.set_postfix_str(
                f"{postfix}, {note}" if postfix else note, refresh=False
            )
        bar.refresh()

    def stopped_early(self, epoch: int, patience: int) -> None:
        """:meth:`end` with the note of early stopping."""
        self.end(f"stopped early at epoch {epoch} (no improvement for {patience})")

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
