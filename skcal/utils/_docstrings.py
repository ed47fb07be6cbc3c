"""Shared parameter descriptions, put into docstrings once for many functions."""

from __future__ import annotations

import re
import textwrap


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
