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
#: The floor of a predicted probability before its log, where a prediction
#: must have a finite log: the top label's ``c`` and ``1 - c`` (spline,
#: top-versus-all, :func:`~skcal.utils._proba.replace_top_label`) and the
#: ``predict_log_proba`` of the one-vs-rest maps, Venn-Abers, the wrapper and
#: the search (log -690.8). Above :data:`PROBA_EPS` on purpose: it is the
#: floor these predictions have always had, and changing it changes them.
FLOOR_BEFORE_LOG = 1e-300
#: A sum of exponentials or of probabilities below this may hold subnormal
#: terms (rounded to an absolute 5e-324): the others' shares of a row are then
#: recomputed from the logits instead of divided by it. Above
#: :data:`DIVISOR_FLOOR` on purpose: it flags sums whose terms have lost
#: relative precision, not only sums that would divide by zero.
SUM_FLOOR = 1e-290
#: The floor of a divisor (a sum of weights, a norm, an eigenvalue) that
#: may be 0: it only keeps the division finite.
DIVISOR_FLOOR = 1e-300
#: The floor of a log-likelihood term (a log, not a probability): torch's
#: binary cross entropy clamps its logs here, and netcal scores the BBQ and
#: ENIR models with it.
BCE_LOG_FLOOR = -100.0
#: The floor of the log-probabilities that structured matrix scaling reads
#: with ``input="proba"`` (a log): that of the smallest normal float32, the
#: precision of most models' probabilities.
FLOAT32_LOG_FLOOR = float(np.log(np.finfo(np.float32).tiny))
