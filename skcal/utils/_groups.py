"""Group labels: one check for grouped metrics, states and calibrators."""

from __future__ import annotations

import numpy as np

__all__ = ["MAX_GROUPS", "check_groups"]

#: The most groups a grouped metric or a grouped state accepts: a grouped
#: result holds one metric result per group and a state one sub-state per
#: group, and tens of thousands of groups are more likely a row identifier
#: passed by mistake than groups to compare.
MAX_GROUPS = 10_000


def check_groups(groups, n_samples: int):
    """``(labels, index)``: the sorted group labels and each row's position."""
    groups = np.asarray(groups)
    if groups.ndim != 1 or len(groups) != n_samples:
        raise ValueError(
            f"groups must give one group label per row: expected shape "
            f"({n_samples},), got {groups.shape}. Pass a 1-D array of labels "
            "aligned with y_true."
        )
    try:
        labels, index = np.unique(groups, return_inverse=True)
    except TypeError as exc:
        raise TypeError(
            "groups must hold labels of one sortable type (all strings or all "
            f"numbers); got mixed types ({exc}). Convert them, e.g. with "
            "np.asarray(groups, dtype=str)."
        ) from None
    if len(labels) > MAX_GROUPS:
        raise ValueError(
            f"groups has {len(labels)} distinct labels, more than the "
            f"{MAX_GROUPS} that grouped metrics accept (skcal.metrics.MAX_GROUPS). "
            "Is a row identifier passed as groups? Merge rare groups into one "
            "(e.g. 'other') before calling."
        )
    return labels, index.reshape(-1)
