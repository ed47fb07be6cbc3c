"""ImageNet-like synthetic data of many classes (``bench_many_classes.py``).

* :func:`score_data`: Gaussian logits (sd 2) plus a margin of 10 on a latent
  class, labels drawn from their softmax, logits multiplied by 1.5
  (over-confident); top-1 accuracy about 0.67 at 1,000 classes;
* :func:`local_data`: 64-d embeddings (class means plus unit noise) for a
  linear head, labels drawn from the softmax of the head's logits divided
  by 1.5 (the head is over-confident).
"""

import numpy as np

LOGIT_MARGIN, LOGIT_SD, OVERCONFIDENCE = 10.0, 2.0, 1.5
EMBED_DIM = 64


def score_data(n, n_classes, rng):
    """ImageNet-like logits and labels (see the module docstring)."""
    from skcal.utils._testing import sample_labels, softmax_rows

    true = LOGIT_SD * rng.standard_normal((n, n_classes))
    true[np.arange(n), rng.integers(n_classes, size=n)] += LOGIT_MARGIN
    y = sample_labels(softmax_rows(true), rng)
    return OVERCONFIDENCE * true, y


def local_data(n, n_classes, rng, head):
    """64-d embeddings and labels for the linear ``head = (coef, intercept)``."""
    from skcal.utils._testing import sample_labels, softmax_rows

    coef, intercept = head
    means = coef / 2.0  # the head is the LDA rule of these class means
    X = means[rng.integers(n_classes, size=n)] + rng.standard_normal((n, EMBED_DIM))
    y = sample_labels(softmax_rows((X @ coef.T + intercept) / OVERCONFIDENCE), rng)
    return X, y
