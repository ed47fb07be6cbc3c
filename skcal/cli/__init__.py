"""The ``skcal`` command line.

``skcal calibrate``
    Fit a calibrator on one file (scores or embeddings, and labels) and
    write the calibrated probabilities of another.
``skcal evaluate``
    Calibration metrics of a file of probabilities (or logits) and labels,
    optionally a reliability diagram; several files of the same rows side
    by side in one table, optionally compared in pairs.
``skcal select``
    Choose a calibrator by cross-validation on one file
    (:class:`~skcal.model_selection.CalibratorSearchCV`): a table of the
    candidates' cross-fitted scores, the selected one and why; optionally
    its calibration report on a test file and the fitted search.
``skcal apply``
    Apply a calibrator saved by ``calibrate --save`` or ``select --save``
    (``.skops``, safe to load) to a file of scores or embeddings.
``skcal export``
    Write a saved calibrator, search or calibrated classifier as an ONNX
    graph or a TorchScript module; ``--check`` runs the file on given rows
    and prints its largest difference from ``predict_proba``.
``skcal benchmark``
    Every calibrator (or a chosen few) on a bundled or generated dataset over
    several seeds: a table of test metrics, mean ± std.
``skcal demo``
    Calibrates a real classifier (an MLP on scikit-learn's bundled digits
    data, no download) with every calibrator skcal has and prints a table of
    test metrics.

File formats follow the extension. ``.npz``: arrays ``labels`` (n_samples,),
``logits`` or ``proba`` (n_samples, n_classes), ``embeddings`` (n_samples,
n_features); a calibration file may add the frozen head ``coef`` (n_classes,
n_features) and ``intercept`` (n_classes,), and ``classes`` (n_classes,).
``.csv`` / ``.parquet`` (pandas): one row per sample, columns ``label``,
``logit_0`` ... ``logit_{C-1}`` or ``proba_0`` ... ``proba_{C-1}``,
``emb_0`` ... ``emb_{D-1}``; other columns are ignored. ``--label-col``,
``--logit-cols``, ``--proba-cols`` and ``--emb-cols`` name other columns
(or npz arrays), the same way in every format
(:mod:`skcal.cli._columns`).
Outputs hold ``proba`` (columns ``proba_<class>`` for string or named
classes, else ``proba_j``), ``predict``, the ``labels`` when known and, in
npz, ``classes``. Errors in the input are one line on stderr and exit code
2.

One module per command family: ``_calibrate`` (calibrate, apply),
``_evaluate``, ``_select``, ``_benchmark`` (benchmark, demo); ``_parser``
gathers their parsers and holds :func:`main`. The files are read and
written by ``_io``, ``_columns`` and ``_models``; ``_inputs``, ``_options``,
``_methods``, ``_format`` and ``_common`` hold what several commands share.
Each command imports scikit-learn, torch and the calibrators only when it
runs, so that ``skcal --help`` stays fast.
"""

from ._benchmark import (
    format_benchmark,
    mlp_embeddings,
    mlp_logits,
    run_benchmark,
    run_demo,
)
from ._common import CLIError
from ._format import format_table
from ._methods import method_aliases, resolve_method
from ._parser import build_parser, main

__all__ = [
    "CLIError",
    "build_parser",
    "format_benchmark",
    "format_table",
    "main",
    "method_aliases",
    "mlp_embeddings",
    "mlp_logits",
    "resolve_method",
    "run_benchmark",
    "run_demo",
]
