"""The prediction of a fitted affine map of the logits, shared by families.

Vector and matrix scaling (:mod:`skcal.calibrators._scaling`) and Dirichlet
calibration (:mod:`skcal.calibrators._dirichlet`) fit ``coef_`` and
``intercept_`` their own way and predict alike.
"""

from __future__ import annotations

from .._torch.kernels import affine_rows

__all__ = ["AffineMap"]


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
