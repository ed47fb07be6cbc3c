"""The floors of probabilities, of their logs and of their sums: one place.

Every module that floors a probability before taking its log, or a sum
before dividing by it, reads its constant here (see the user guide's input
contract and ``doc/guarantees.rst``).
"""

from __future__ import annotations

import numpy as np

#: The smallest floor of probabilities before their log: the smallest normal
#: float64 (log -708.4), so that on its own it changes only exact zeros and
#: subnormals. A fixed floor above it erases the information of confident
#: models: on real letter logits scaled by 10, temperature scaling fitted on
#: their float64 softmax reached a test ECE of 0.0135 with a floor at float32's
#: smallest normal and 0.0116 at 1e-12, against 0.0060 on the logits (a floor
#: of 1e-12 once gave a test NLL of 1.544 instead of 1.369).
PROBA_EPS = float(np.finfo(np.float64).tiny)
#: The fraction of the smallest positive calibration probability at which the
#: probabilities a calibrator reads with ``input="proba"`` are floored before
#: their log (never below :data:`PROBA_EPS`): an exact 0 counts as half the
#: smallest probability the model gave, so that a calibration row whose true
#: class has probability 0 weighs like the model's most confident mistake
#: instead of a loss of 708 (see :func:`~skcal.utils._validation.proba_floor`).
ZERO_FRACTION = 0.5
