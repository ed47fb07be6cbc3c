"""The numeric floors of the torch kernels.

``skcal/_torch/`` imports nothing from the rest of skcal (CONTRIBUTING.md),
so the floors that its kernels share with the numpy code are repeated here
from ``skcal/utils/_constants.py``, with the same names and values;
``tests/_torch/test_numpy_softmax.py`` checks that the two agree.
"""

#: The floor of a divisor (a sum of weights, a norm) that may be 0: it only
#: keeps the division finite.
DIVISOR_FLOOR = 1e-300
#: The floor of a weight or probability before its log.
FLOOR_BEFORE_LOG = 1e-300
