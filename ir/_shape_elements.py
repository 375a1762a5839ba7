"""The elements of a shape value, followed through the ops that compute shapes.

Exporters compute Reshape targets from the model's own dims: `Concat(-1, Slice(Shape(k),
2, 3), 16)` is `[-1, seq, 16]` where k's third dim is `seq`. Type inference keeps the shapes
of values, not the elements of shape tensors; `shape_elements` recovers those elements on
demand from the recorded shapes of the values they are read from, with the same per-op rules
the symbolic inference walks with (Shape, Slice, Gather, Concat, Unsqueeze, Cast, arithmetic,
...). It looks back only through the producers of the value it is asked about.
"""

from __future__ import annotations

from ir._core import TensorType, Value
from ir._enums import DataType
from ir._infer import fact_type
from ir._shape_facts import Shape, ShapeData
from ir._shape_inference import RULES
from ir._shape_ops_tensor import tensor_data
from ir._symbolic_dims import DimExpr, from_dim

# Producers followed at most this deep: shape computations are short chains.
_MAX_DEPTH = 64
_DEFAULT_DOMAINS = ("", "ai.onnx")


def shape_elements(value: Value, opset: int) -> tuple[int | str | None, ...] | None:
    """The elements of `value`, an integer tensor of rank 0 or 1.

    Known ints, symbols (or the text of a symbolic expression, such as `2*seq`) and None where
    unknown; None when the value is not such a tensor or its elements cannot be followed.
    `opset` is the default domain's opset of the graph (some ops read axes from attributes
    before opset 13).
    """
    return ShapeElements(opset)(value)


class ShapeElements:
    """`shape_elements` for many values of a graph that does not change in the meantime.

    What was followed through a producer for one value is remembered for the next: asked
    about the values of a graph in topological order, each producer is looked at once.
    """

    def __init__(self, opset: int) -> None:
        self._follow = _Follow(opset)

    def __call__(self, value: Value) -> tuple[int | str | None, ...] | None:
        """The elements of `value` (see `shape_elements`)."""
        data = self._follow.data(value)
        if data is None:
            return None
        return tuple(_element(e) for e in data.elements)


def _element(expr: DimExpr | None) -> int | str | None:
    if expr is None:
        return None
    number = expr.as_int()
    if number is not None:
        return number
    name = expr.as_symbol()
    return name if name is not None else str(expr)


class _Follow:
    """`ShapeFacts` over the recorded types, elements followed through producers."""

    def __init__(self, opset: int) -> None:
        self._opset = opset
        self._data: dict[Value, ShapeData | None] = {}
        self._depth = 0
        self._cut_offs = 0  # walks stopped at _MAX_DEPTH (what they found is not kept)

    def shape(self, value: Value | None) -> Shape | None:
        if value is None:
            return None
        tensor = value.const_value
        if tensor is not None and not value.is_graph_input():
            return tuple(from_dim(d) for d in tensor.shape)
        found = fact_type(value)
        if not isinstance(found, TensorType) or found.shape is None:
            return None
        return tuple(from_dim(d) for d in found.shape)

    def data(self, value: Value | None) -> ShapeData | None:
        if value is None:
            return None
        if value in self._data:
            return self._data[value]
        self._data[value] = None  # a cycle (a damaged graph) finds nothing
        cut_offs = self._cut_offs
        found = self._compute(value)
        if found is None and self._cut_offs != cut_offs:
            # Stopped by the depth bound: asked again from nearer, it may be found.
            del self._data[value]
        else:
            self._data[value] = found
        return found

    def opset(self) -> int:
        return self._opset

    def dtype(self, value: Value | None) -> DataType:
        if value is None:
            return DataType.UNDEFINED
        tensor = value.const_value
        if tensor is not None and not value.is_graph_input():
            return tensor.dtype
        found = fact_type(value)
        if isinstance(found, TensorType):
            return found.dtype
        return value.dtype or DataType.UNDEFINED

    def _compute(self, value: Value) -> ShapeData | None:
        tensor = value.const_value
        if tensor is not None and not value.is_graph_input():
            return tensor_data(tensor)
        node = value.producer()
        if node is None or node.domain not in _DEFAULT_DOMAINS:
            return None
        if self._depth >= _MAX_DEPTH:
            self._cut_offs += 1
            return None
        rule = RULES.get(node.op_type)
        if rule is None:
            return None
        self._depth += 1
        try:
            found = rule(node, self) or ()
        finally:
            self._depth -= 1
        if value.index >= len(found):
            return None
        return found[value.index].data
