"""Local random generators: never touch torch's or numpy's global state."""

from __future__ import annotations

import torch


def make_generator(seed: int, device: torch.device | str = "cpu") -> torch.Generator:
    """Return a ``torch.Generator`` on ``device`` seeded with ``seed``.

    Estimators derive ``seed`` from ``check_random_state(random_state)`` so that
    the same ``random_state`` gives the same result on the same device.
    """
    generator = torch.Generator(device=device)
    generator.manual_seed(int(seed))
    return generator
