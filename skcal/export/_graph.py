"""A small builder of ONNX graphs, written op by op.

The exported torch blocks (:mod:`skcal._torch._export`) append their own ONNX
nodes here through their ``onnx`` method, so that a graph computes exactly
what its module computes. onnx is imported lazily, when a model is built.
"""

from __future__ import annotations

import contextlib

import numpy as np

__all__ = ["DEFAULT_OPSET", "GraphBuilder"]

#: The default opset of exported graphs: one that onnxruntime 1.16 and later
#: run, with ``ReduceMax``'s axes still an attribute (an input from 18 on).
DEFAULT_OPSET = 17


class GraphBuilder:
    """Nodes and constants of one ONNX graph, named uniquely.

    Parameters
    ----------
    dtype : {np.float32, np.float64}, default=np.float32
        The float type of the graph: its input, output and float constants.
    opset : int, default=None
        The ONNX opset of the default domain (:data:`DEFAULT_OPSET` if None,
        at least 13).

    Examples
    --------
    >>> import numpy as np
    >>> from skcal.export._graph import GraphBuilder
    >>> g = GraphBuilder(np.float64)
    >>> y = g.op("Mul", "x", g.const(np.array([2.0, 3.0])))
    >>> model = g.model("x", y, 2)
    >>> [node.op_type for node in model.graph.node]
    ['Mul']
    """

    def __init__(self, dtype=np.float32, opset: int | None = None):
        dtype = np.dtype(dtype)
        if dtype not in (np.float32, np.float64):
            raise ValueError(
                f"dtype must be np.float32 or np.float64, got {dtype}; ONNX graphs "
                "of skcal calibrators are built in one of these two float types."
            )
        opset = DEFAULT_OPSET if opset is None else int(opset)
        if opset < 13:
            raise ValueError(
                f"opset must be at least 13 (Softmax over the last axis, ReduceSum "
                f"with axes as an input), got {opset}."
            )
        self.dtype = dtype.type
        self.opset = opset
        self._nodes: list = []
        self._constants: dict[str, np.ndarray] = {}
        self._count = 0

    def _name(self, prefix: str) -> str:
        self._count += 1
        return f"{prefix}_{self._count}"

    @contextlib.contextmanager
    def precision(self, dtype):
        """Within the block, :attr:`dtype` is ``dtype``: the float type of
        the constants of a part of the graph computed in another precision
        (which casts its input and output itself)."""
        saved, self.dtype = self.dtype, np.dtype(dtype).type
        try:
            yield self
        finally:
            self.dtype = saved

    def const(self, array, name: str | None = None) -> str:
        """Add a constant; return its name.

        Float arrays are cast to :attr:`dtype`, integer arrays kept as int64.
        """
        array = np.asarray(array)
        if np.issubdtype(array.dtype, np.integer) or array.dtype == bool:
            array = array.astype(np.int64)
        else:
            array = array.astype(self.dtype)
        name = self._name(name or "const")
        self._constants[name] = np.ascontiguousarray(array)
        return name

    def op(self, op_type: str, *inputs: str, **attrs) -> str:
        """Add a node of one output; return the output's name."""
        return self.op_multi(op_type, list(inputs), 1, **attrs)[0]

    def op_multi(self, op_type: str, inputs, n_outputs: int, **attrs) -> list[str]:
        """Add a node of ``n_outputs`` outputs; return their names."""
        outputs = [self._name(op_type.lower()) for _ in range(n_outputs)]
        self._nodes.append((op_type, list(inputs), outputs, attrs))
        return outputs

    def reduce(self, op_type: str, x: str, axis: int = -1, keepdims: int = 1) -> str:
        """``ReduceMax``/``ReduceSum``/... over one axis, whatever the opset
        (axes an attribute or an input)."""
        takes_input = op_type == "ReduceSum" or self.opset >= 18
        if takes_input:
            axes = self.const(np.array([axis], dtype=np.int64), "axes")
            return self.op(op_type, x, axes, keepdims=keepdims)
        return self.op(op_type, x, axes=[axis], keepdims=keepdims)

    def model(
        self,
        input_name: str,
        output_name: str,
        n_columns: int,
        n_outputs: int | None = None,
        group_input: str | None = None,
    ):
        """The ONNX model of the graph, of input ``(batch, n_columns)`` and
        output ``(batch, n_outputs)`` (``n_columns`` if None); with
        ``group_input``, a second input of that name, int64 of shape
        ``(batch,)`` (each row's group, for a per-group calibrator).

        Returns
        -------
        onnx.ModelProto
            Checked by :func:`onnx.checker.check_model`; the batch dimension
            is dynamic.
        """
        import onnx
        from onnx import TensorProto, helper, numpy_helper

        from .. import __version__

        elem = TensorProto.DOUBLE if self.dtype == np.float64 else TensorProto.FLOAT
        if output_name == input_name:  # an output needs a node of its own
            output_name = self.op("Identity", input_name)
        nodes = [
            helper.make_node(op_type, inputs, outputs, name=outputs[0], **attrs)
            for op_type, inputs, outputs, attrs in self._nodes
        ]
        graph = helper.make_graph(
            nodes,
            "skcal",
            [helper.make_tensor_value_info(input_name, elem, ["batch", n_columns])]
            + (
                []
                if group_input is None
                else [
                    helper.make_tensor_value_info(
                        group_input, TensorProto.INT64, ["batch"]
                    )
                ]
            ),
            [
                helper.make_tensor_value_info(
                    output_name,
                    elem,
                    ["batch", n_columns if n_outputs is None else n_outputs],
                )
            ],
            initializer=[
                numpy_helper.from_array(value, name)
                for name, value in self._constants.items()
            ],
        )
        model = helper.make_model(
            graph,
            opset_imports=[helper.make_opsetid("", self.opset)],
            producer_name="skcal",
            producer_version=__version__,
        )
        if self.opset <= 17:  # the IR version of opset 17: older runtimes read it
            model.ir_version = 8
        onnx.checker.check_model(model)
        return model
