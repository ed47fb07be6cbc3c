"""Model selection: a cross-validated choice among calibrators."""

from ._search import CalibratorSearchCV

__all__ = ["CalibratorSearchCV"]
