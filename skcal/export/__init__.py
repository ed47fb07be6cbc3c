"""Fitted calibrators outside Python: torch modules and ONNX graphs.

:func:`to_torch` returns a calibrator's map from scores to calibrated
probabilities as a :class:`torch.nn.Module` (which
:func:`torch.jit.script` and :func:`torch.export.export` accept, and which a
saved script runs without skcal); :func:`to_onnx` writes the same
computation as an ONNX graph, op for op, for onnxruntime and other ONNX
runtimes; :func:`check_export` measures how far either is from the
calibrator's own ``predict_proba``. Calibrators that can be exported have a
``to_torch`` method; the others raise
:class:`~skcal.exceptions.NotExportableError` saying why.
"""

from __future__ import annotations

import numpy as np

from ..exceptions import NotExportableError
from ._compose import model_to_onnx

__all__ = ["check_export", "model_to_onnx", "to_onnx", "to_torch"]


def to_torch(estimator):
    """The fitted calibrator's prediction as a torch module.

    The module maps a batch of what the calibrator's ``predict_proba``
    takes (scores of shape ``(n_samples, n_classes)``, logits or
    probabilities as it was fitted; embeddings for a local calibrator) to
    calibrated probabilities, in the float dtype of its input. Its
    constants are float64 buffers: call ``.float()`` for a float32 module,
    ``.to(device)`` to move it.
    A per-group calibrator's module takes a second input,
    ``module(scores, group)``: each row's group as an int64 position in its
    ``groups_`` (its ``group_positions``; -1 for the pooled map).

    Parameters
    ----------
    estimator : fitted calibrator
        One with a ``to_torch`` method.

    Returns
    -------
    torch.nn.Module

    Raises
    ------
    NotExportableError
        If the estimator cannot be exported (the message says why).

    Examples
    --------
    >>> import numpy as np, torch
    >>> from skcal import TemperatureScaling
    >>> from skcal.export import to_torch
    >>> from skcal.utils._testing import make_miscalibrated_logits
    >>> X, y = make_miscalibrated_logits(n_samples=300, random_state=0)
    >>> module = to_torch(TemperatureScaling().fit(X, y))
    >>> tuple(module(torch.zeros(4, 3)).shape)
    (4, 3)
    """
    method = getattr(estimator, "to_torch", None)
    if method is None:
        raise NotExportableError(
            f"{type(estimator).__name__} cannot be exported: it has no to_torch "
            "method. The calibrators that can be exported are listed in the "
            "'Export' section of the API reference."
        )
    return method()


def _with_input(module, estimator, input):
    """``module`` with its input block replaced so that it reads ``input``."""
    from .._torch._export import Chain, LogSoftmax, ScoresToLogits

    fitted = getattr(estimator, "input", None)
    first = module.blocks[0] if isinstance(module, Chain) else None
    if input is None or input == fitted:
        return module
    if input not in ("logits", "proba"):
        raise ValueError(f"input must be None, 'logits' or 'proba'; got {input!r}.")
    if not isinstance(first, ScoresToLogits):
        raise NotExportableError(
            f"{type(estimator).__name__} reads no logits or probabilities "
            f"(input={fitted!r}); export it with input=None."
        )
    rest = list(module.blocks)[1:]
    if input == "logits":  # the logs of the probabilities it was fitted on
        return Chain(LogSoftmax(), *rest)
    if not first.shift:
        raise NotExportableError(
            f"{type(estimator).__name__} was fitted on logits and depends on "
            "their level, not only on their differences: the logs of "
            "probabilities are not the logits it maps. Export it with "
            "input='logits'."
        )
    floor = first.proba_floor
    return Chain(ScoresToLogits("proba", floor, shift=False), *rest)


def to_onnx(estimator, path=None, *, input=None, dtype=np.float32, opset=None):
    """The fitted calibrator's prediction as an ONNX graph.

    The graph is written op by op from the blocks of :func:`to_torch`'s
    module, so it computes what the module computes. Its input ``scores``
    has shape ``(batch, n_features_in_)`` with a dynamic batch (the scores
    of a score calibrator, the embeddings of a local one), its output
    ``probabilities`` shape ``(batch, n_classes)``. A per-group calibrator
    (:class:`~skcal.GroupedTemperatureScaling`,
    :class:`~skcal.GroupedVectorScaling`) gives a graph of a second input,
    ``group``, int64 of shape ``(batch,)``: each row's position in the
    calibrator's ``groups_``, -1 for a group not seen in fit (its
    ``group_positions`` computes them from the labels).

    Parameters
    ----------
    estimator : fitted calibrator
        One with a ``to_torch`` method; or a fitted
        :class:`~skcal.CalibratedClassifier`, exported with its classifier
        as one graph by :func:`model_to_onnx`.
    path : str or path-like, default=None
        Where to write the model (``.onnx``), if given.
    input : {None, "logits", "proba"}, default=None
        What the graph reads. None: what the calibrator was fitted on.
        ``"logits"`` for a calibrator fitted on probabilities: the model's
        logits, whose log-softmax replaces the logs of the probabilities
        (without their floor). ``"proba"`` for a calibrator fitted on
        logits: probabilities, whose logs are logits up to a constant per
        row, which only shift-invariant calibrators accept.
    dtype : {np.float32, np.float64}, default=np.float32
        The float type of the graph's input, output and computation.
    opset : int, default=None
        The ONNX opset (17 if None, at least 13).

    Returns
    -------
    onnx.ModelProto

    Raises
    ------
    NotExportableError
        If the estimator cannot be exported, or not with this ``input``.

    Examples
    --------
    >>> import numpy as np
    >>> from skcal import TemperatureScaling
    >>> from skcal.export import to_onnx
    >>> from skcal.utils._testing import make_miscalibrated_logits
    >>> X, y = make_miscalibrated_logits(n_samples=300, random_state=0)
    >>> model = to_onnx(TemperatureScaling().fit(X, y), dtype=np.float64)
    >>> [node.op_type for node in model.graph.node]
    ['ReduceMax', 'Sub', 'Div', 'Softmax']
    """
    from ._graph import GraphBuilder

    if hasattr(estimator, "calibrated_classifiers_") and input is None:
        # a CalibratedClassifier: the classifier and its calibrator, one graph
        return model_to_onnx(estimator, path, dtype=dtype, opset=opset)
    module = to_torch(estimator)
    g = GraphBuilder(dtype, opset)
    n_outputs = len(estimator.classes_)  # local calibrators read embeddings
    n_columns = int(estimator.n_features_in_)
    if getattr(module, "takes_group", False):  # a per-group calibrator
        module.head = _with_input(module.head, estimator, input)
        output = module.onnx(g, "scores", "group")
        model = g.model("scores", output, n_columns, n_outputs, group_input="group")
    else:
        module = _with_input(module, estimator, input)
        output = module.onnx(g, "scores")
        model = g.model("scores", output, n_columns, n_outputs)
    _rename_output(model, "probabilities")
    if path is not None:
        import onnx

        onnx.save_model(model, path)
    return model


def _rename_output(model, new: str) -> None:
    """Rename the graph's output (the output of its last node) ``new``."""
    model.graph.node[-1].output[0] = new
    model.graph.output[0].name = new


def _run(exported, X: np.ndarray, group=None) -> np.ndarray:
    """The probabilities that ``exported`` gives for ``X`` (and ``group``,
    the group positions, for an export of two inputs; None: -1, the pooled
    map), as float64."""
    if type(exported).__name__ == "ModelProto" or isinstance(exported, (str, bytes)):
        import onnxruntime

        source = exported
        if not isinstance(exported, (str, bytes)):
            source = exported.SerializeToString()
        session = onnxruntime.InferenceSession(
            source, providers=["CPUExecutionProvider"]
        )
        first, *rest = session.get_inputs()
        dtype = np.float64 if first.type == "tensor(double)" else np.float32
        feed = {first.name: np.asarray(X, dtype=dtype)}
        if rest:
            group = np.full(len(X), -1) if group is None else group
            feed[rest[0].name] = np.asarray(group, dtype=np.int64)
        out = session.run(None, feed)[0]
        return np.asarray(out, dtype=np.float64)
    from .._torch._export import run_module

    return run_module(exported, X, group)


def _takes_group(exported) -> bool:
    """Whether the export reads a second input, each row's group."""
    if type(exported).__name__ == "ModelProto":
        return len(exported.graph.input) == 2
    if isinstance(exported, (str, bytes)):
        import onnx

        if isinstance(exported, str):
            return _takes_group(onnx.load(exported))
        return _takes_group(onnx.load_from_string(exported))
    from .._torch._export import takes_group

    return takes_group(exported)


def check_export(estimator, X, exported, *, groups=None) -> float:
    """Largest absolute difference between an export and ``predict_proba``.

    Parameters
    ----------
    estimator : fitted calibrator
        The calibrator that was exported.
    X : array-like of shape (n_samples, n_classes)
        Scores, as ``estimator.predict_proba`` takes them.
    exported : torch module, scripted module, ``torch.export`` program, \
onnx.ModelProto, serialized model (bytes) or path to an ``.onnx`` file
        The export. ``X`` is passed to it in the float type of its
        constants (torch) or of its input (ONNX).
    groups : array-like of shape (n_samples,), default=None
        Each row's group label, for the export of a per-group calibrator
        (of inputs scores and group): given to it as the positions of
        ``estimator.group_positions(groups)`` and to ``predict_proba`` as
        ``groups=groups``. None: every row gets the pooled map (positions
        -1).

    Returns
    -------
    float
        ``max |exported(X) - estimator.predict_proba(X)|``, where
        ``predict_proba`` is given ``X`` in the float type the export
        reads (so that both see the same numbers).

    Examples
    --------
    >>> import numpy as np
    >>> from skcal import TemperatureScaling
    >>> from skcal.export import check_export, to_onnx
    >>> from skcal.utils._testing import make_miscalibrated_logits
    >>> X, y = make_miscalibrated_logits(n_samples=300, random_state=0)
    >>> ts = TemperatureScaling().fit(X, y)
    >>> check_export(ts, X, to_onnx(ts)) < 1e-5
    True
    """
    X = np.asarray(X)
    if X.ndim != 2:
        raise ValueError(
            f"X must be 2-D scores of shape (n_samples, n_classes); got shape "
            f"{X.shape}."
        )
    if isinstance(exported, str) or hasattr(exported, "__fspath__"):
        exported = str(exported)
    group = None
    if _takes_group(exported):
        group = np.full(len(X), -1, dtype=np.int64)
        if groups is not None:
            group = estimator.group_positions(groups)
    elif groups is not None:
        raise ValueError(
            "groups was given, but the export reads no group (it has one input, "
            "the scores); pass groups only for the export of a per-group "
            "calibrator."
        )
    out = _run(exported, X, group)
    X = np.asarray(X, dtype=_input_dtype(exported))
    kwargs = {} if groups is None else {"groups": groups}
    reference = estimator.predict_proba(X, **kwargs)
    return float(np.abs(out - reference).max()) if out.size else 0.0


def _input_dtype(exported):
    """The numpy float type an export reads."""
    if type(exported).__name__ == "ModelProto":
        elem = exported.graph.input[0].type.tensor_type.elem_type
        return np.float64 if elem == 11 else np.float32  # 11: DOUBLE
    if isinstance(exported, (str, bytes)):
        import onnx

        model = onnx.load(exported) if isinstance(exported, str) else None
        if model is None:
            model = onnx.load_from_string(exported)
        return _input_dtype(model)
    from .._torch._export import module_dtype

    return module_dtype(exported)
