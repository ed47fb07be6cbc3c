"""Metrics of issue 36 against their reference implementations.

``metric_rows()`` returns ``[(name, skcal_fn, [(label, ref_fn), ...])]``,
each function ``f(y, P) -> float`` on softmax probabilities ``P`` and
integer labels ``y`` in ``0..C-1``. A reference imports its package when
called (ImportError when it is missing) and refuses, with a ValueError,
sizes it cannot handle in reasonable time or memory: netcal's MMCE forms
``n x n`` arrays, uncertainty-calibration loops over Python tuples.
"""

import numpy as np

#: netcal's MMCE holds several n x n float64 arrays (3.2 GB each at 20,000).
_MMCE_MAX_ROWS = 10_000
#: uncertainty-calibration builds a list of (score, label) tuples per class.
_UC_MAX_ENTRIES = 5_000_000


def _l2(mode):
    def skcal_fn(y, P):
        from skcal.metrics import l2_calibration_error

        return l2_calibration_error(y, P, mode=mode)

    def ref_fn(y, P):
        import calibration

        entries = P.size if mode == "classwise" else len(y)
        if entries > _UC_MAX_ENTRIES:
            raise ValueError(f"uncertainty-calibration skipped at {entries} entries")
        ref_mode = "marginal" if mode == "classwise" else "top-label"
        return calibration.lower_bound_scaling_ce(P, y, p=2, mode=ref_mode)

    return skcal_fn, [("uncertainty-calibration 0.1.4", ref_fn)]


def _spiegelhalter(field):
    def skcal_fn(y, P):
        from skcal.metrics import spiegelhalter_test

        return getattr(spiegelhalter_test(y, P, alternative="greater"), field)

    def reference(checked):
        def ref_fn(y, P):
            from mapie.metrics import calibration

            # MAPIE is binary: the top-label event (for C = 2, the positive
            # class); "checked": read from skcal's input checks of P (what
            # skcal does not skip), else from numpy directly
            if checked:
                from skcal.utils._validation import check_probabilities

                _, top, score = check_probabilities(
                    P, copy=False, renormalize=False, top_label=True
                )
            else:
                top, score = np.argmax(P, axis=1), P.max(axis=1)
            event = (top == y).astype(int)
            if field == "normalized":
                return calibration.spiegelhalter_statistic(event, score)
            return calibration.spiegelhalter_p_value(event, score)

        return ref_fn

    return skcal_fn, [
        ("MAPIE 1.6", reference(False)),
        ("MAPIE 1.6 + input checks", reference(True)),
    ]


def _mmce():
    def skcal_fn(y, P):
        from skcal.metrics import maximum_mean_calibration_error

        return maximum_mean_calibration_error(y, P)

    def ref_fn(y, P):
        from netcal.metrics import MMCE

        if len(y) > _MMCE_MAX_ROWS:
            raise ValueError(f"netcal MMCE skipped at {len(y)} rows (n x n memory)")
        return float(MMCE().measure(np.asarray(P), np.asarray(y)))

    return skcal_fn, [("netcal 1.4", ref_fn)]


def metric_rows():
    """``[(name, skcal_fn(y, P), [(label, ref_fn(y, P)), ...]), ...]``."""
    rows = [
        ("debiased L2 CE, classwise", *_l2("classwise")),
        ("debiased L2 CE, top-label", *_l2("top_label")),
        ("Spiegelhalter Z (top-label)", *_spiegelhalter("normalized")),
        ("Spiegelhalter p-value, one-sided", *_spiegelhalter("pvalue")),
        ("MMCE", *_mmce()),
    ]
    return [(name, skcal_fn, refs) for name, skcal_fn, refs in rows]


def rows():
    """No calibrators here: the metrics are in :func:`metric_rows`."""
    return []
