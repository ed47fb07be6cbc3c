"""Warnings and exceptions raised by skcal."""

from sklearn.exceptions import ConvergenceWarning, NotFittedError

__all__ = [
    "AccuracyDropWarning",
    "ApproximationWarning",
    "CodebookWarning",
    "ConvergenceWarning",
    "FlatKernelWarning",
    "GridEdgeWarning",
    "InputWarning",
    "MissingClassWarning",
    "NotExportableError",
    "NotFittedError",
    "UntrustedTypesError",
]


class InputWarning(UserWarning):
    """The scores look inconsistent with the declared ``input`` kind.

    Raised for instance when ``input="logits"`` but every row of ``X`` lies in
    [0, 1] and sums to one, which usually means probabilities were passed.
    Also raised by ``fit`` with ``input="proba"`` when calibration rows give
    their true class probability 0 (rounded or vote-count probabilities):
    it counts them and states the floor applied before their logs.
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


class GridEdgeWarning(UserWarning):
    """A cross-validated choice is the smallest or largest value it could take.

    Raised by :class:`~skcal.DirichletCalibratorCV` when the selected value
    of a parameter with more than one candidate is an end of its grid and
    scored better than its neighbour in the grid, and by
    :class:`~skcal.KCalCalibrator` when the cross-validated bandwidth is an
    end of its search range. The best value may lie beyond the range that
    was searched: extend the grid past that end (the message names the
    parameter, the value, the range and a value to add) or fix the
    parameter.
    """


class AccuracyDropWarning(UserWarning):
    """A calibrator predicts materially worse than its input.

    Local calibrators that retrain the head or change its predictions
    (:class:`~skcal.VQLocalCalibrator`, :class:`~skcal.LocalNetCalibrator`)
    compare, on their own internal validation split, the accuracy of their
    predictions with that of the backbone's head (``coef``, ``intercept``)
    on the same rows. The drop is *material* when it exceeds both one
    percentage point and two standard errors of the paired difference
    (the weighted mean of ``[head right] - [calibrator right]`` over the
    rows, its standard error from their spread and Kish's effective number
    of rows). The message names the settings to change.

    The one-vs-rest calibrators (binning, isotonic regression, Platt,
    beta) compare the accuracy of their calibrated probabilities with that
    of the input scores out of sample (three classes or more, same
    criterion): maps fitted on all but one of three stratified folds of the
    calibration rows (two beyond a million scores) are judged on the fold
    left out, for each fold, because maps judged on their own rows keep
    those rows' top class better than new rows' (histogram binning on 45
    classes: no loss there, 1.3 points on the test set). Their maps rank the
    classes of a row by their own calibrated values, which coarse maps of
    many classes can scramble (scaling-binning on 26 classes: accuracy 0.95
    -> 0.65). The message names the held-out accuracies before and after.
    """


class ApproximationWarning(UserWarning):
    """An approximate metric estimates its own error as large.

    Raised by the local metrics with ``method="rff"`` when more than a tenth
    of the anchors (by weight) have a kernel sum whose random-feature noise,
    about ``sqrt(sum_j w_j^2 / (2 D))`` over the anchor's bin, exceeds a
    tenth of the sum itself: their local errors are then inflated by noise
    and so is the metric (narrow kernels on few rows per bin). Raise
    ``n_components`` (the noise falls like ``1 / sqrt(D)``), widen the
    bandwidth, or compute the exact metric on a sample of rows.
    """


class FlatKernelWarning(UserWarning):
    """A local metric's kernel is so wide that the metric is no longer local.

    Raised by :func:`~skcal.metrics.local_calibration_error`,
    :func:`~skcal.metrics.max_local_calibration_error`,
    :func:`~skcal.metrics.local_calibration_errors` and
    :func:`~skcal.metrics.ess_profile` when the median anchor's effective
    sample size is more than half of the other samples of its confidence
    bin: every anchor then averages over most of its bin, and the local
    calibration error tends to the classwise ECE. Lower ``bandwidth``, or
    pass ``bandwidth="auto"`` (:func:`~skcal.metrics.local_bandwidth`).
    """


class UntrustedTypesError(ValueError):
    """A saved model holds types that :func:`skcal.utils.persistence.load`
    does not trust by itself.

    ``types`` lists their fully qualified names; pass those you trust to
    ``load(file, trusted=[...])`` (on the command line, ``--trust NAME``).
    """

    def __init__(self, message: str, types: list[str]):
        super().__init__(message)
        self.types = list(types)


class NotExportableError(ValueError):
    """A fitted estimator cannot be exported as a torch module or ONNX graph.

    Raised by :func:`skcal.export.to_torch` and :func:`skcal.export.to_onnx`
    (and an estimator's own ``to_torch``) before anything is built; the
    message says why, e.g. a calibrator whose state grows with its
    calibration set, or an estimator with no ``to_torch`` method.
    """
