"""Shared parameter descriptions, put into docstrings once for many functions."""

from __future__ import annotations

import re
import textwrap

#: The L-BFGS parameters of the calibrators fitted by ``lbfgs_minimize``
#: (a ``{lbfgs}`` line of a class docstring under :func:`fill_doc`).
LBFGS_DOC = """\
    max_iter : int, default=1000
        Maximum number of L-BFGS iterations.
    verbose : int, default=0
        0: silent. 1: a progress bar on stderr for the L-BFGS solve
        (iteration k of ``max_iter``, elapsed time, loss and largest
        gradient entry; it ends early when the solve converges). 2: also one
        line per iteration.
"""


def fill_doc(**texts):
    """Decorator: replace each line ``{key}`` of a docstring with ``texts[key]``.

    Each text is a block of numpydoc lines indented by four spaces (ending
    with a newline) that several public functions describe alike; it is
    indented further where the ``{key}`` line is (a method's docstring). The
    rendered docstring is complete, as if written out in each.
    """

    def put(match):
        return textwrap.indent(texts[match[2]], match[1][4:])

    pattern = re.compile(r"^( *)\{(" + "|".join(texts) + r")\}\n", re.MULTILINE)

    def decorate(obj):
        if obj.__doc__ is not None:  # python -OO strips docstrings
            obj.__doc__ = pattern.sub(put, obj.__doc__)
        return obj

    return decorate
