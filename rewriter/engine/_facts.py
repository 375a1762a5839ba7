"""Facts about values that rules may ask for: constness, constant values, rank, shape, dtype.

A value is constant when it is an initializer that is not also a graph input (a graph input
with a default can be overridden at run time), or the output of a `Constant` node. Shapes come
from declared types, inferred facts (`ir.fact_type`) or the constant itself.
"""

from __future__ import annotations

from typing import Any

import numpy as np

import ir

_CONSTANT_VALUE_ATTRS = (
    "value",
    "value_float",
    "value_floats",
    "value_int",
    "value_ints",
    "value_string",
    "value_strings",
)
_CONSTANT_VALUE_TYPES = dict(
    zip(
        _CONSTANT_VALUE_ATTRS,
        (
            ir.AttrType.TENSOR,
            ir.AttrType.FLOAT,
            ir.AttrType.FLOATS,
            ir.AttrType.INT,
            ir.AttrType.INTS,
            ir.AttrType.STRING,
            ir.AttrType.STRINGS,
        ),
        strict=True,
    )
)


def constant_tensor_of(value: ir.Value) -> ir.Tensor | np.ndarray[Any, Any] | None:
    """The constant behind `value` (a Tensor, or an array for Constant's scalar forms)."""
    const = value.const_value
    if const is not None:
        return None if value.is_graph_input() else const
    node = value.producer()
    if node is None or node.op_type != "Constant" or node.domain not in ("", "ai.onnx"):
        return None
    for name in _CONSTANT_VALUE_ATTRS:
        attr = node.attributes.get(name)
        if attr is None:
            continue
        if attr.type != _CONSTANT_VALUE_TYPES[name]:
            return None  # a broken Constant (say, `value` holding a float): not a constant
        payload = attr.value
        if isinstance(payload, ir.Tensor):
            return payload
        if name == "value_float":
            return np.array(payload, dtype=np.float32)
        if name == "value_floats":
            return np.array(payload, dtype=np.float32)
        if name in ("value_int", "value_ints"):
            return np.array(payload, dtype=np.int64)
        return np.array(payload, dtype=object)
    return None


def is_const(value: ir.Value | None) -> bool:
    """True when `value` is a constant (initializer that is not an input, or Constant output)."""
    return value is not None and constant_tensor_of(value) is not None


def const_array(value: ir.Value) -> np.ndarray[Any, Any] | None:
    """The constant's values as a numpy array, or None when `value` is not constant."""
    found = constant_tensor_of(value)
    if found is None:
        return None
    if isinstance(found, ir.Tensor):
        return np.asarray(found.numpy())
    return found


def const_size(value: ir.Value) -> int | None:
    """Element count of a constant without reading its data (None when not constant)."""
    found = constant_tensor_of(value)
    if found is None:
        return None
    if isinstance(found, ir.Tensor):
        return found.size
    return int(found.size)


def value_type(value: ir.Value) -> ir.Type | None:
    """Declared or inferred type; for constants, the constant's own type."""
    t = ir.fact_type(value)
    if t is not None:
        return t
    found = constant_tensor_of(value)
    if isinstance(found, ir.Tensor):
        return ir.TensorType(found.dtype, found.shape)
    if found is not None:
        return ir.TensorType(ir.DataType.from_numpy(found.dtype), tuple(found.shape))
    return None


def shape_of(value: ir.Value) -> tuple[ir.Dim, ...] | None:
    """Shape (ints, symbol strings, None for unknown dims); None when the rank is unknown."""
    t = value_type(value)
    if isinstance(t, ir.TensorType | ir.SparseTensorType):
        return t.shape
    return None


def dtype_of(value: ir.Value) -> ir.DataType | None:
    """Element type, None when unknown."""
    t = value_type(value)
    if isinstance(t, ir.TensorType | ir.SparseTensorType) and t.dtype != ir.DataType.UNDEFINED:
        return t.dtype
    return None


def count_uses(value: ir.Value) -> int:
    """Node uses plus one per graph-output slot holding the value."""
    graph = value.graph
    outputs = 0
    if graph is not None:
        outputs = sum(1 for v in graph.outputs if v is value)
    return value.num_uses() + outputs


def can_hold_initializers(graph: ir.Graph, model: ir.Model) -> bool:
    """False for a function body: a FunctionProto has no initializers, only `Constant` nodes.

    Subgraphs nested in a function body (If/Loop branches) are GraphProtos and may hold them.
    Nor before IR version 4, where every initializer must also be a graph input: a new
    constant there would change the model's inputs, so it becomes a `Constant` node.
    """
    return not isinstance(graph.owner, ir.Function) and not 0 < model.ir_version < 4


def same_constant(a: ir.Value, b: ir.Value) -> bool:
    """True when both values are constants with the same dtype, shape and elements."""
    left = const_array(a)
    right = const_array(b)
    if left is None or right is None:
        return False
    return (
        left.dtype == right.dtype
        and left.shape == right.shape
        and bool(np.array_equal(left, right, equal_nan=left.dtype.kind in "fc"))
    )


# Ops that compute each element from the element at the same place alone: a value whose last
# axis is two equal halves keeps that through them.
_ELEMENTWISE_UNARY = frozenset(
    {"Cast", "Cos", "Sin", "Exp", "Identity", "Neg", "Sqrt", "Reciprocal", "Tanh", "Sigmoid"}
)
_SCALAR_BINARY = frozenset({"Add", "Sub", "Mul", "Div"})
_HALVES_DEPTH = 8


def repeats_halves(value: ir.Value) -> bool:
    """True when `value`'s last axis is two equal halves by construction.

    That is `Concat(f, f)` on the last axis (one value twice), followed only by ops that
    compute each element alone (Cos, Sin, Cast, ...), by arithmetic with a one-element
    constant, and by Unsqueeze at axes other than the last: how rotary embeddings write
    their cos and sin tables (`emb = cat(freqs, freqs)`). A constant is read: its halves
    must be equal bit for bit.
    """
    for _ in range(_HALVES_DEPTH):
        if const_size(value) is not None:
            return _constant_repeats_halves(value)
        node = value.producer()
        if node is None or node.domain not in ("", "ai.onnx") or not node.inputs:
            return False
        op, first = node.op_type, node.inputs[0]
        if op == "Concat":
            rank = _rank_of(value)
            axis = node.attribute("axis")
            return (
                len(node.inputs) == 2
                and first is not None
                and node.inputs[1] is first
                and rank is not None
                and isinstance(axis, int)
                and axis % rank == rank - 1
            )
        if op in _ELEMENTWISE_UNARY and first is not None:
            value = first
        elif op in _SCALAR_BINARY and len(node.inputs) == 2:
            left, right = node.inputs
            if right is not None and const_size(right) == 1 and left is not None:
                value = left
            elif left is not None and const_size(left) == 1 and right is not None:
                value = right
            else:
                return False
        elif op == "Unsqueeze" and first is not None and not _unsqueezes_last(node, value):
            value = first
        else:
            return False
    return False


def _rank_of(value: ir.Value) -> int | None:
    dims = shape_of(value)
    return None if dims is None else len(dims)


def _unsqueezes_last(node: ir.Node, out: ir.Value) -> bool:
    """True unless the Unsqueeze's axes are known and leave the last axis where it was."""
    rank = _rank_of(out)
    given = node.inputs[1] if len(node.inputs) > 1 else None
    axes = const_array(given) if given is not None else None
    if axes is None:
        attribute = node.attribute("axes")
        axes = np.asarray(attribute) if isinstance(attribute, list | tuple) else None
    if rank is None or axes is None:
        return True
    return any(int(a) % rank == rank - 1 for a in np.asarray(axes).ravel())


def _constant_repeats_halves(value: ir.Value) -> bool:
    size = const_size(value)
    array = const_array(value) if size is not None and size <= _HALVES_ELEMENTS else None
    if array is None or array.ndim == 0 or array.shape[-1] % 2:
        return False
    half = array.shape[-1] // 2
    return array[..., :half].tobytes() == array[..., half:].tobytes()


# Constants up to this many elements are read to see whether their halves repeat.
_HALVES_ELEMENTS = 1 << 20
