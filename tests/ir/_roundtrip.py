"""Round-trip helpers shared by the IR tests.

`roundtrip_rebuilt` lowers with reuse off, so that every node, graph, attribute, value_info
and function is built from the IR instead of being the message kept from lifting, and a test
can check that the rebuilt path is exact too. Lowering still copies, from each node's and
function's original message, the fields the IR does not model (device configurations).
"""

from __future__ import annotations

import difflib

import onnx

import ir
from ir import _serde, _serde_origin


def assert_rebuilt(model: ir.Model) -> None:
    """Check that lowering without reuse emits no graph or node as its original message."""
    origin = _serde_origin.origin_of(model)
    assert origin is not None, "the model was not lifted"
    lowering = _serde._Lowering(origin, reuse=False)
    for graph in model.graphs():
        graph_origin = origin.graphs.get(graph)
        if graph_origin is None:
            continue
        if isinstance(graph_origin.proto, onnx.GraphProto):
            assert lowering.graph(graph) is not graph_origin.proto, graph
        for node in graph:
            position = graph_origin.position(node)
            if position is not None:
                lowered = lowering.node(node, graph_origin, position)
                assert lowered is not graph_origin.proto.node[position], node


def proto_diff(expected: onnx.ModelProto, actual: onnx.ModelProto, limit: int = 40) -> str:
    """A short unified diff of the text forms of two models."""
    lines = difflib.unified_diff(
        str(expected).splitlines(), str(actual).splitlines(), "expected", "actual", lineterm=""
    )
    return "\n".join(list(lines)[:limit])


def assert_same_proto(expected: onnx.ModelProto, actual: onnx.ModelProto) -> None:
    """Byte-for-byte and field-by-field equality, with a diff on failure."""
    assert actual.SerializeToString() == expected.SerializeToString(), proto_diff(expected, actual)
    assert actual == expected, proto_diff(expected, actual)


def roundtrip(proto: onnx.ModelProto) -> onnx.ModelProto:
    """lower(lift(proto)), reusing cached messages wherever lowering can."""
    return ir.to_onnx(ir.from_onnx(proto))


def roundtrip_rebuilt(proto: onnx.ModelProto) -> onnx.ModelProto:
    """lower(lift(proto)) with every node, graph and function rebuilt from the IR."""
    model = ir.from_onnx(proto)
    assert_rebuilt(model)
    return _serde.lower_model(model, reuse=False)


def assert_roundtrip_exact(proto: onnx.ModelProto) -> None:
    """Both lowering paths give back exactly `proto`."""
    assert_same_proto(proto, roundtrip(proto))
    assert_same_proto(proto, roundtrip_rebuilt(proto))
