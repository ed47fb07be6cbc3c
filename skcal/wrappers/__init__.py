"""Wrappers: calibrate any scikit-learn classifier, read embeddings and heads."""

from ._calibrated import CalibratedClassifier
from ._embeddings import extract_embeddings, supports_embeddings

__all__ = ["CalibratedClassifier", "extract_embeddings", "supports_embeddings"]
