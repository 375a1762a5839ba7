"""New constants of rewrites, shared: an equal constant is made once per graph.

A rewrite that needs a constant (a `let` value or a literal input) gets an existing equal
constant of the same graph when there is one (small initializers of the input included),
else a new initializer, or a `Constant` node where a graph cannot hold initializers (a
function body; a model before IR version 4, where every initializer is also an input).
"""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np

import ir
from rewriter.engine import _facts
from rewriter.engine._pending import RULE_TAG, SOURCE_TAG, Pending

# Constants up to this many elements are keyed by their bytes, larger ones by a digest.
_KEY_BYTES_ELEMENTS = 4096
# Initializers of the input up to this many elements are offered for sharing.
_SHARED_INPUT_ELEMENTS = 64

_Key = tuple[str, tuple[int, ...], bytes]


class ConstantPool:
    """The constants of one model that rewrites may share, by graph."""

    def __init__(self, model: ir.Model, names: ir.NameAllocator) -> None:
        self.model = model
        self.names = names
        self._tables: dict[ir.Graph, dict[_Key, ir.Value]] = {}

    def constant(
        self, graph: ir.Graph, array: np.ndarray[Any, Any], stem: str, pending: Pending
    ) -> ir.Value:
        """A value of `graph` holding `array`: shared, or new (added to `pending`)."""
        dtype = ir.DataType.from_numpy(array.dtype)
        data = np.ascontiguousarray(array).tobytes()
        if array.size > _KEY_BYTES_ELEMENTS or array.dtype == object:
            data = hashlib.sha256(data).digest()
        key = (dtype.onnx_name, tuple(array.shape), data)
        table = self._table(graph)
        found = table.get(key)
        # A value made for a rewrite that was not applied (or was undone) is not in the graph.
        if found is not None and (found.graph is graph or pending.made(found)):
            return found
        name = self.names.fresh(stem)
        tensor = ir.NumpyTensor(array, name, dtype)
        if _facts.can_hold_initializers(graph, self.model):
            value = ir.Value(name, const_value=tensor)
            pending.initializers.append(value)
        else:
            value = self._constant_node(name, tensor, pending)
        table[key] = value
        return value

    def _constant_node(self, name: str, tensor: ir.Tensor, pending: Pending) -> ir.Value:
        """A `Constant` node computing `tensor` (where initializers are not allowed)."""
        value = ir.Value(name)
        node = ir.Node(
            "Constant",
            [],
            [ir.attr_tensor("value", tensor)],
            outputs=[value],
            name=self.names.fresh(f"{name}/Constant"),
        )
        node.set_metadata(RULE_TAG, pending.rule.name)
        node.set_metadata(SOURCE_TAG, pending.rule.location)
        ir.record_inferred_type(value, ir.TensorType(tensor.dtype, tuple(tensor.shape)))
        pending.nodes.append(node)
        return value

    def _table(self, graph: ir.Graph) -> dict[_Key, ir.Value]:
        table = self._tables.get(graph)
        if table is None:
            table = {}
            for value in graph.initializers.values():
                key = _input_key(value)
                if key is not None:
                    table.setdefault(key, value)
            self._tables[graph] = table
        return table


def _input_key(value: ir.Value) -> _Key | None:
    """The key of a small initializer of the input that rewrites may share, else None."""
    tensor = value.const_value
    if (
        tensor is None
        or not value.name  # a node reads the empty name as an absent input
        or tensor.size > _SHARED_INPUT_ELEMENTS
        or tensor.is_external
        or value.is_graph_input()
    ):
        return None
    try:
        array = np.asarray(tensor.numpy())
    except ir.IRError:
        return None
    if array.dtype == object:
        return None
    return (tensor.dtype.onnx_name, tuple(array.shape), np.ascontiguousarray(array).tobytes())
