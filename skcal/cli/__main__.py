"""``python -m skcal.cli``: the ``skcal`` console script."""

import sys

from . import main

if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
