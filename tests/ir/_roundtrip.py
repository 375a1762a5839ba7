"""Round-trip helpers shared by the IR tests.

`force_rebuild` makes lowering build every node, graph, attribute, value_info and function
from the IR instead of returning the protobuf messages kept from lifting, so a test can
check that the rebuilt path is exact too. It keeps each node's and function's original
message, because lowering copies the fields the IR does not model (device configurations)
from it.
"""

from __future__ import annotations

import difflib

import onnx

import ir
from ir import _serde


def _touch_value(value: ir.Value) -> None:
    _ = value.type  # materialize a lazily kept TypeProto before dropping the cached entry
    value._vi_proto = None


def force_rebuild(model: ir.Model) -> None:
    """Mark every part of `model` changed, so lowering rebuilds it from the IR."""
    for graph in model.graphs():
        for value in graph.values():
            _touch_value(value)
        for value in graph.outputs:
            _touch_value(value)
        for described, _ in graph._value_info:
            if described is not None:
                _touch_value(described)
        for node in graph:
            attrs = node._attrs()
            node._metadata()
            for attr in attrs.values():
                object.__setattr__(attr, "_proto", None)
            for read in node.inputs:
                if read is not None:
                    _touch_value(read)
            node._dirty = True
        graph._dirty = True
    for fn in model.functions.values():
        for attr in fn.attribute_defaults:
            object.__setattr__(attr, "_proto", None)
        fn._dirty = True


def assert_rebuilt(model: ir.Model) -> None:
    """Check that `force_rebuild` took effect: no node or graph lowers to its cached message."""
    for graph in model.graphs():
        assert graph._proto is None or _serde.lower_graph(graph) is not graph._proto, graph
        for node in graph:
            assert node._proto is None or _serde.lower_node(node) is not node._proto, node


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
    force_rebuild(model)
    assert_rebuilt(model)
    return ir.to_onnx(model)


def assert_roundtrip_exact(proto: onnx.ModelProto) -> None:
    """Both lowering paths give back exactly `proto`."""
    assert_same_proto(proto, roundtrip(proto))
    assert_same_proto(proto, roundtrip_rebuilt(proto))
