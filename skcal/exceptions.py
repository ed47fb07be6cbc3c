"""Warnings and exceptions raised by skcal."""

from sklearn.exceptions import ConvergenceWarning, NotFittedError

__all__ = [
    "CodebookWarning",
    "ConvergenceWarning",
    "InputWarning",
    "MissingClassWarning",
    "NotFittedError",
]


class InputWarning(UserWarning):
    """The scores look inconsistent with the declared ``input`` kind.

    Raised for instance when ``input="logits"`` but every row of ``X`` lies in
    [0, 1] and sums to one, which usually means probabilities were passed.
    """


class MissingClassWarning(UserWarning):
    """A class that has a column in ``X`` has no sample in the calibration ``y``.

    The column is kept (the calibrator still returns a probability for it),
    but nothing was learned about that class from the data.
    """


class CodebookWarning(UserWarning):
    """A vector-quantization codebook has codewords that no sample uses.

    Dead codewords carry parameters that nothing trains; lower the codebook
    size or keep the robust EMA initialisation.
    """
