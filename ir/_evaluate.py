"""Evaluate one node on constant inputs with onnx's reference implementation (serde layer)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import onnx
import onnx.helper

from ir._core import IRError, Node
from ir._serde import lower_node


class EvaluationError(IRError):
    """The reference implementation could not evaluate a node."""


def evaluate_node(
    node: Node,
    inputs: Sequence[np.ndarray[Any, Any] | None],
    opset_imports: Mapping[str, int],
) -> list[np.ndarray[Any, Any]]:
    """Run `node` on `inputs` (None for absent inputs) and return its outputs as arrays.

    Raises:
        EvaluationError: the op is unknown to the reference runtime or fails on these inputs.
    """
    proto = onnx.NodeProto()
    proto.CopyFrom(lower_node(node))
    feeds: dict[str, np.ndarray[Any, Any]] = {}
    names = []
    for i, array in enumerate(inputs):
        if array is None:
            names.append("")
            continue
        name = f"in{i}"
        names.append(name)
        feeds[name] = array
    del proto.input[:]
    proto.input.extend(names)
    outputs = [f"out{i}" if v.name else "" for i, v in enumerate(node.outputs)]
    del proto.output[:]
    proto.output.extend(outputs)
    graph = onnx.helper.make_graph(
        [proto],
        "fold",
        [
            onnx.helper.make_tensor_value_info(n, _elem_type(feeds[n]), feeds[n].shape)
            for n in feeds
        ],
        [onnx.helper.make_empty_tensor_value_info(o) for o in outputs if o],
    )
    model = onnx.helper.make_model(
        graph,
        opset_imports=[onnx.helper.make_opsetid(d, v) for d, v in opset_imports.items()],
    )
    # Imported here: tens of milliseconds, and most runs evaluate nothing.
    from onnx.reference import ReferenceEvaluator

    try:
        session = ReferenceEvaluator(model)
        results = session.run(None, feeds)
    except Exception as exc:  # the reference runtime raises many kinds of errors
        raise EvaluationError(f"cannot evaluate {node.op_type}: {exc}") from exc
    return [np.asarray(r) for r in results]


def _elem_type(array: np.ndarray[Any, Any]) -> int:
    return int(onnx.helper.np_dtype_to_tensor_dtype(array.dtype))


def evaluation_model(
    nodes: Sequence[Node],
    inputs: Mapping[str, np.ndarray[Any, Any]],
    outputs: Sequence[str],
    opset_imports: Mapping[str, int],
) -> onnx.ModelProto:
    """A model that runs `nodes` (in order) from `inputs` to `outputs`, for a runtime.

    The nodes are lowered as they are, so they read and write their values' names; each
    name in `inputs` becomes a graph input of its array's dtype and shape. Lets a caller run
    part of a graph on constants (constant folding) without building protobuf itself.
    """
    graph = onnx.helper.make_graph(
        [lower_node(node) for node in nodes],
        "evaluate",
        [
            onnx.helper.make_tensor_value_info(name, _elem_type(array), array.shape)
            for name, array in inputs.items()
        ],
        [onnx.helper.make_empty_tensor_value_info(name) for name in outputs],
    )
    return onnx.helper.make_model(
        graph,
        opset_imports=[onnx.helper.make_opsetid(d, v) for d, v in opset_imports.items()],
    )
