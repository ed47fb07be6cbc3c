"""The prediction of a fitted affine map of the logits, shared by families.

Vector and matrix scaling (:mod:`skcal.calibrators._scaling`) and Dirichlet
calibration (:mod:`skcal.calibrators._dirichlet`) fit ``coef_`` and
``intercept_`` their own way and predict alike.
"""

from __future__ import annotations

from .._torch.kernels import affine_rows
from ..base import export_input

__all__ = ["AffineMap", "affine_module"]


def affine_module(scores, coef, intercept, *, log_softmax: bool):
    """The torch module of a fitted affine map ``coef``, ``intercept`` of
    the logits (of their log-softmax with ``log_softmax``): the input block
    ``scores`` (a calibrator's input handling), the map, a softmax."""
    from .._torch._export import Affine, Chain, LogSoftmax, Softmax

    blocks = [scores, LogSoftmax()] if log_softmax else [scores]
    return Chain(*blocks, Affine(coef, intercept), Softmax())


class AffineMap:
    """Predictions of a fitted affine map ``coef_``, ``intercept_`` of the
    logits (of their log-softmax with ``_log_softmax_first``), by
    :func:`affine_rows`: a mixin placed before :class:`BaseCalibrator`."""

    _log_softmax_first = False

    def _calibrated_logits(self, logits):
        return self._map(logits)

    def _calibrated_proba(self, logits):
        return self._map(logits, softmax=True)

    def _map(self, logits, **kwargs):
        return affine_rows(
            logits,
            self.coef_,
            self.intercept_,
            log_softmax=self._log_softmax_first,
            **kwargs,
        )

    def to_torch(self):
        """The fitted map as a torch module: scores to calibrated probabilities.

        The input handling, the log-softmax for Dirichlet calibration, the
        affine map ``coef_``, ``intercept_`` (a diagonal one for a 1-D
        ``coef_``), a softmax. See :func:`skcal.export.to_torch`.

        Returns
        -------
        torch.nn.Module

        Examples
        --------
        >>> from skcal import MatrixScaling
        >>> from skcal.export import check_export
        >>> from skcal.utils._testing import make_miscalibrated_logits
        >>> X, y = make_miscalibrated_logits(n_samples=200, random_state=0)
        >>> cal = MatrixScaling().fit(X, y)
        >>> bool(check_export(cal, X, cal.to_torch()) < 1e-12)
        True
        """
        return affine_module(
            export_input(self),
            self.coef_,
            self.intercept_,
            log_softmax=self._log_softmax_first,
        )
