"""A classifier and its calibrator as one ONNX graph.

:func:`model_to_onnx` writes a fitted :class:`~skcal.CalibratedClassifier`
as one ONNX model, from the raw features to the calibrated probabilities
and the label: the classifier is converted by skl2onnx (its
``decision_function`` or ``predict_proba``, whichever the wrapper fed the
calibrator; an ``MLPClassifier``'s logits are written from its public
weights), each fitted calibrator by :func:`skcal.export.to_onnx`, and the
fold pairs are averaged as :meth:`~skcal.CalibratedClassifier.predict_proba`
averages them.
"""

from __future__ import annotations

import numpy as np
from sklearn.frozen import FrozenEstimator
from sklearn.pipeline import Pipeline
from sklearn.utils.validation import check_is_fitted

from ..exceptions import NotExportableError

__all__ = ["model_to_onnx"]

#: the ONNX op of each hidden activation of an ``MLPClassifier``
_MLP_OPS = {
    "relu": "Relu",
    "tanh": "Tanh",
    "logistic": "Sigmoid",
    "identity": "Identity",
}


def _unfrozen(estimator):
    """``estimator`` without its ``FrozenEstimator`` wrappers (public ``estimator``)."""
    while isinstance(estimator, FrozenEstimator):
        estimator = estimator.estimator
    return estimator


def _final(estimator):
    """The model at the end of a ``Pipeline`` (itself otherwise)."""
    while isinstance(estimator, Pipeline):
        estimator = _unfrozen(estimator.steps[-1][1])
    return estimator


def _tensor_type(dtype, n_features):
    from skl2onnx.common.data_types import DoubleTensorType, FloatTensorType

    kind = DoubleTensorType if np.dtype(dtype) == np.float64 else FloatTensorType
    return kind([None, n_features])


def _convert(estimator, initial_types, options, opset):
    """skl2onnx's graph of ``estimator``; a failure becomes NotExportableError."""
    try:
        from skl2onnx import convert_sklearn
    except ImportError as exc:
        raise ImportError(
            "exporting a classifier with its calibrator needs the optional "
            "package skl2onnx (pip install skl2onnx), which converts the "
            "classifier."
        ) from exc
    try:
        return convert_sklearn(
            estimator,
            initial_types=initial_types,
            options=options,
            target_opset=opset,
        )
    except Exception as exc:  # skl2onnx raises many types; all mean "cannot"
        text = " ".join(str(exc).split())
        text = text if len(text) < 300 else text[:300] + "..."
        raise NotExportableError(
            f"skl2onnx cannot convert the classifier {type(estimator).__name__} "
            f"({type(exc).__name__}: {text}), so it cannot be composed with its "
            "calibrator in one graph. Export the calibrator alone "
            "(skcal.export.to_onnx(model.calibrator_)) and run the classifier "
            "as you do now, feeding its scores to the calibrator's graph."
        ) from exc


class _Nodes:
    """Nodes and constants appended to a composed graph, named uniquely."""

    def __init__(self, dtype):
        self.dtype = np.dtype(dtype).type
        self.nodes: list = []
        self.initializers: list = []
        self._count = 0

    def name(self, prefix: str) -> str:
        self._count += 1
        return f"skcal_{prefix}_{self._count}"

    def const(self, array) -> str:
        from onnx import TensorProto, helper, numpy_helper

        array = np.asarray(array)
        name = self.name("const")
        if array.dtype.kind in "USO":  # labels as strings
            values = [str(v).encode() for v in array.ravel()]
            tensor = helper.make_tensor(name, TensorProto.STRING, array.shape, values)
        else:
            kind = np.int64 if array.dtype.kind in "iub" else self.dtype
            tensor = numpy_helper.from_array(array.astype(kind), name)
        self.initializers.append(tensor)
        return name

    def op(self, op_type: str, *inputs: str, output: str | None = None, **attrs):
        from onnx import helper

        output = output or self.name(op_type.lower())
        self.nodes.append(
            helper.make_node(op_type, list(inputs), [output], name=output, **attrs)
        )
        return output

    def absorb(self, model, prefix: str, rename_inputs: bool = True):
        """Add the nodes and constants of ``model``, names prefixed; return
        its graph (prefixed) for the names of its inputs and outputs."""
        from onnx.compose import add_prefix_graph

        graph = add_prefix_graph(model.graph, prefix, rename_inputs=rename_inputs)
        self.nodes.extend(graph.node)
        self.initializers.extend(graph.initializer)
        return graph


def _elem_type(dtype) -> int:
    from onnx import TensorProto

    return TensorProto.DOUBLE if np.dtype(dtype) == np.float64 else TensorProto.FLOAT


def _two_columns(nodes: _Nodes, d: str) -> str:
    """A binary decision ``d`` of shape (n, 1) as ``(-d/2, d/2)``, as the
    wrapper turns a 1-D ``decision_function`` into two columns."""
    half = nodes.op("Mul", d, nodes.const(np.array(0.5)))
    return nodes.op("Concat", nodes.op("Neg", half), half, axis=1)


def _classifier_scores(nodes, estimator, response, n_classes, spec, prefix):
    """Append the classifier's scores as the wrapper computes them; return
    their name: ``decision_function`` (raw scores) or ``predict_proba``."""
    estimator = _unfrozen(estimator)
    if response == "mlp_logits":
        return _mlp_logits(nodes, estimator, spec, prefix)
    options = {"zipmap": False}
    if response == "decision_function":
        options["raw_scores"] = True
    final = _final(estimator)
    onnx_model = _convert(estimator, spec["types"], {id(final): options}, spec["opset"])
    spec["ml_opsets"].append(onnx_model.opset_import)
    graph = nodes.absorb(onnx_model, prefix, rename_inputs=False)
    outputs = [o for o in graph.output if o.type.tensor_type.elem_type != 7]  # int64
    scores = outputs[-1].name  # skl2onnx's "probabilities" (raw with raw_scores)
    if outputs[-1].type.tensor_type.elem_type != _elem_type(nodes.dtype):
        scores = nodes.op("Cast", scores, to=_elem_type(nodes.dtype))
    if response == "decision_function" and n_classes == 2:
        start, end, axes = (nodes.const(np.array([v])) for v in (1, 2, 1))
        scores = _two_columns(nodes, nodes.op("Slice", scores, start, end, axes))
    return scores


def _mlp_logits(nodes, estimator, spec, prefix):
    """An ``MLPClassifier``'s logits from its public weights (``coefs_``,
    ``intercepts_``), after the Pipeline steps before it (by skl2onnx)."""
    mlp = _final(estimator)
    check_is_fitted(mlp)
    if isinstance(estimator, Pipeline) and len(estimator.steps) > 1:
        onnx_model = _convert(estimator[:-1], spec["types"], {}, spec["opset"])
        spec["ml_opsets"].append(onnx_model.opset_import)
        graph = nodes.absorb(onnx_model, prefix, rename_inputs=False)
        a = graph.output[0].name
        if graph.output[0].type.tensor_type.elem_type != _elem_type(nodes.dtype):
            a = nodes.op("Cast", a, to=_elem_type(nodes.dtype))
    else:
        a = spec["types"][0][0]
    activation = _MLP_OPS[mlp.activation]
    for W, b in zip(mlp.coefs_[:-1], mlp.intercepts_[:-1]):
        a = nodes.op(
            activation,
            nodes.op("Add", nodes.op("MatMul", a, nodes.const(W)), nodes.const(b)),
        )
    W, b = np.asarray(mlp.coefs_[-1], float), np.asarray(mlp.intercepts_[-1], float)
    if mlp.out_activation_ == "logistic":  # one logit d: (-d/2, d/2)
        W, b = np.hstack([-W / 2, W / 2]), np.concatenate([-b / 2, b / 2])
    return nodes.op("Add", nodes.op("MatMul", a, nodes.const(W)), nodes.const(b))


def _calibrated(nodes, pair, response, scores, dtype, opset, prefix):
    """Append a pair's calibrator after ``scores``; return its probabilities."""
    calibrator = pair.calibrator
    if calibrator is None:  # "passthrough": the probabilities, or a softmax
        if response == "predict_proba":
            return scores
        return nodes.op("Softmax", scores, axis=1)
    from . import to_onnx

    onnx_model = to_onnx(calibrator, dtype=dtype, opset=opset)
    nodes.op("Identity", scores, output=prefix + onnx_model.graph.input[0].name)
    return nodes.absorb(onnx_model, prefix).output[0].name


def _check_model(model):
    """Refuse what is not a fitted CalibratedClassifier on scores."""
    pairs = getattr(model, "calibrated_classifiers_", None)
    if not hasattr(model, "response_") or pairs is None:
        raise NotExportableError(
            f"model_to_onnx composes a fitted skcal.CalibratedClassifier (a "
            f"classifier and its calibrator); got {type(model).__name__}. Export "
            "a calibrator alone with skcal.export.to_onnx."
        )
    check_is_fitted(model)
    if model.response_ == "embeddings":
        raise NotExportableError(
            f"{type(model.calibrated_classifiers_[0].calibrator).__name__} is a "
            "local calibrator, fitted on the classifier's embeddings: composing "
            "it with the classifier in one graph is not supported. Export the "
            "calibrator alone (skcal.export.to_onnx) and feed it the embeddings."
        )
    return pairs


def _input_types(model, n_features, initial_types, dtype):
    if initial_types is not None:
        return list(initial_types)
    n_features = (
        getattr(model, "n_features_in_", None) if n_features is None else n_features
    )
    if n_features is None:
        raise ValueError(
            f"the classifier of this {type(model).__name__} records no "
            "n_features_in_, so the graph's input width is unknown: pass "
            "n_features=<number of columns of X>, or initial_types as skl2onnx "
            "takes them."
        )
    return [("X", _tensor_type(dtype, int(n_features)))]


def _label_dtype_ok(classes) -> None:
    if np.asarray(classes).dtype.kind not in "iubUSO":
        raise NotExportableError(
            f"the class labels {np.asarray(classes).tolist()[:5]} are of dtype "
            f"{np.asarray(classes).dtype}; the graph's label output holds integer "
            "or string labels only. Encode the labels as integers or strings."
        )


def model_to_onnx(
    model,
    path=None,
    *,
    n_features=None,
    initial_types=None,
    dtype=np.float32,
    opset=None,
):
    """A calibrated classifier as one ONNX graph, from raw features to labels.

    The classifier of each pair of ``model.calibrated_classifiers_`` is
    converted by skl2onnx (the output that fed its calibrator: the raw
    ``decision_function``, a binary one as the two columns ``(-d/2, d/2)``,
    or ``predict_proba``; an ``MLPClassifier``'s logits are written from its
    weights), its calibrator appended as :func:`~skcal.export.to_onnx`
    writes it, and the pairs' probabilities averaged as
    :meth:`~skcal.CalibratedClassifier.predict_proba` averages them. The
    label is ``classes_`` at the first largest probability.

    Parameters
    ----------
    model : fitted CalibratedClassifier
        A classifier that skl2onnx converts (linear models, MLPs, gradient
        boosting, Pipelines of its transformers...) with a score calibrator
        that can be exported.
    path : str or path-like, default=None
        Where to write the model (``.onnx``), if given.
    n_features : int, default=None
        The number of columns of ``X``; ``model.n_features_in_`` if None.
    initial_types : list of (name, skl2onnx type), default=None
        The graph's inputs as skl2onnx takes them, for a classifier whose
        input is not one float matrix; one input ``X`` of ``n_features``
        columns of ``dtype`` if None.
    dtype : {np.float32, np.float64}, default=np.float32
        The float type of the graph (skl2onnx converts some classifiers in
        float32 only).
    opset : int, default=None
        The ONNX opset of the default domain (17 if None).

    Returns
    -------
    onnx.ModelProto
        Outputs ``probabilities`` (shape ``(batch, n_classes)``, column
        ``j`` for ``classes_[j]``) and ``label`` (shape ``(batch,)``).

    Raises
    ------
    NotExportableError
        If skl2onnx cannot convert the classifier or the calibrator cannot
        be exported (the message says why).

    Examples
    --------
    >>> import numpy as np, onnxruntime
    >>> from sklearn.datasets import load_iris
    >>> from sklearn.frozen import FrozenEstimator
    >>> from sklearn.linear_model import LogisticRegression
    >>> from skcal import CalibratedClassifier, TemperatureScaling
    >>> from skcal.export import model_to_onnx
    >>> X, y = load_iris(return_X_y=True)
    >>> clf = LogisticRegression(max_iter=500).fit(X[::2], y[::2])
    >>> model = CalibratedClassifier(
    ...     FrozenEstimator(clf), calibrator=TemperatureScaling()
    ... ).fit(X[1::2], y[1::2])
    >>> onx = model_to_onnx(model)
    >>> session = onnxruntime.InferenceSession(onx.SerializeToString())
    >>> proba, label = session.run(None, {"X": X.astype(np.float32)})
    >>> bool(np.abs(proba - model.predict_proba(X.astype(np.float32))).max() < 1e-5)
    True
    """
    import onnx

    from ._graph import DEFAULT_OPSET

    pairs = _check_model(model)
    _label_dtype_ok(model.classes_)
    opset = DEFAULT_OPSET if opset is None else int(opset)
    spec = {
        "types": _input_types(model, n_features, initial_types, dtype),
        "opset": opset,
        "ml_opsets": [],
    }
    nodes, n_classes = _Nodes(dtype), len(model.classes_)
    probas = []
    for i, pair in enumerate(pairs):
        scores = _classifier_scores(
            nodes, pair.estimator, model.response_, n_classes, spec, f"model{i}_"
        )
        probas.append(
            _calibrated(nodes, pair, model.response_, scores, dtype, opset, f"cal{i}_")
        )
    return _finish(nodes, model.classes_, probas, spec, path, onnx)


def _finish(nodes, classes, probas, spec, path, onnx):
    """Average the pairs, add the label; build, check and save the model."""
    from onnx import TensorProto, helper

    from .. import __version__

    if len(probas) == 1:
        proba = nodes.op("Identity", probas[0], output="probabilities")
    else:  # as predict_proba: the sum of the pairs over their number
        total = nodes.op("Sum", *probas)
        n = nodes.const(np.array(float(len(probas))))
        proba = nodes.op("Div", total, n, output="probabilities")
    index = nodes.op("ArgMax", proba, axis=1, keepdims=0)  # the first largest
    classes = np.asarray(classes)
    nodes.op("Gather", nodes.const(classes), index, axis=0, output="label")
    label_type = (
        TensorProto.STRING if classes.dtype.kind in "USO" else TensorProto.INT64
    )
    inputs = [
        helper.make_tensor_value_info(
            name, _onnx_elem(kind), [None if d is None else d for d in kind.shape]
        )
        for name, kind in spec["types"]
    ]
    graph = helper.make_graph(
        nodes.nodes,
        "skcal_calibrated_classifier",
        inputs,
        [
            helper.make_tensor_value_info(
                "probabilities", _elem_type(nodes.dtype), [None, len(classes)]
            ),
            helper.make_tensor_value_info("label", label_type, [None]),
        ],
        initializer=nodes.initializers,
    )
    opsets = {"": spec["opset"]}
    for imports in spec["ml_opsets"]:
        for entry in imports:
            if entry.domain not in ("", "ai.onnx"):
                opsets[entry.domain] = max(opsets.get(entry.domain, 1), entry.version)
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid(d, v) for d, v in opsets.items()],
        producer_name="skcal",
        producer_version=__version__,
    )
    if spec["opset"] <= 17:  # the IR version of opset 17: older runtimes read it
        model.ir_version = 8
    onnx.checker.check_model(model)
    if path is not None:
        onnx.save_model(model, path)
    return model


def _onnx_elem(kind) -> int:
    """The ONNX element type of an skl2onnx input type."""
    return kind.to_onnx_type().tensor_type.elem_type
