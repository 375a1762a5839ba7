"""Canonical structural keys of nodes and constants, shared by detection and validation.

A node's *structure key* is what must be equal for two nodes to be copies of one another
inside repeated blocks: domain, op type, overload, every attribute (canonically: sorted by
name, tensors by dtype, shape and a digest of their bytes), and the number of inputs and
outputs. Nodes holding subgraphs have no structure key: copying them would also mean
remapping what their subgraphs read from outside, which the loop passes do not do.

`Constant` nodes are not part of blocks: their outputs are treated like initializers
("constants"), so an exporter that writes a scale as a `Constant` node in one layer and as an
initializer in another still gives equal blocks.
"""

from __future__ import annotations

import hashlib
from collections.abc import Hashable
from typing import Any

import numpy as np

import ir
from rewriter.engine import constant_tensor_of, is_const

_STANDARD_DOMAINS = ("", "ai.onnx")


def is_constant_node(node: ir.Node) -> bool:
    """True for an ONNX `Constant` node (its output is a constant, not block structure)."""
    return node.op_type == "Constant" and node.domain in _STANDARD_DOMAINS and not node.inputs


def is_constant(value: ir.Value) -> bool:
    """True when `value` is an initializer (not a graph input) or a `Constant` node output."""
    return is_const(value)


def constant_kind(value: ir.Value) -> tuple[str, tuple[int, ...]] | None:
    """(dtype name, shape) of a constant without reading its data; None if not constant."""
    found = constant_tensor_of(value)
    if found is None:
        return None
    if isinstance(found, ir.Tensor):
        return (found.dtype.onnx_name, tuple(found.shape))
    dtype = ir.DataType.from_numpy(found.dtype).onnx_name
    return (dtype, tuple(int(d) for d in found.shape))


def tensor_digest(tensor: ir.Tensor) -> str:
    """A digest of a tensor's dtype, shape and bytes (reads the data)."""
    array = np.asarray(tensor.numpy())
    digest = hashlib.sha256()
    digest.update(f"{tensor.dtype.onnx_name}{tuple(tensor.shape)}".encode())
    if array.dtype == object:
        digest.update(repr(array.reshape(-1).tolist()).encode())
    else:
        digest.update(array.tobytes())
    return digest.hexdigest()


def _attr_value_key(value: ir.AttrValue) -> Hashable:
    if isinstance(value, ir.Tensor):
        return ("tensor", tensor_digest(value))
    if isinstance(value, tuple):
        return tuple(_attr_value_key(item) for item in value)
    if isinstance(value, float):
        return ("float", value.hex())
    if isinstance(value, ir.Graph):
        raise AssertionError("graph attributes have no structure key (callers check first)")
    return (type(value).__name__, value)


def attributes_key(node: ir.Node) -> tuple[Hashable, ...]:
    """The node's attributes in canonical form (sorted by name)."""
    items = []
    for name in sorted(node.attributes):
        attr = node.attributes[name]
        items.append((name, int(attr.type), attr.ref_attr_name, _attr_value_key(attr.value)))
    return tuple(items)


def has_subgraph(node: ir.Node) -> bool:
    """True when an attribute of `node` holds a graph."""
    return any(True for _ in node.subgraphs())


def structure_key(node: ir.Node) -> tuple[Hashable, ...] | None:
    """What two corresponding block nodes must share; None for nodes holding subgraphs."""
    if has_subgraph(node):
        return None
    present = tuple(bool(out.name) for out in node.outputs)
    return (
        ir.schemas.normalize_domain(node.domain),
        node.op_type,
        node.overload,
        attributes_key(node),
        len(node.inputs),
        present,
    )


class StructureCache:
    """Memoized structure keys and constant kinds, valid while the graph is unchanged."""

    def __init__(self) -> None:
        self._keys: dict[ir.Node, tuple[Hashable, ...] | None] = {}
        self._kinds: dict[ir.Value, tuple[str, tuple[int, ...]] | None] = {}

    def structure_key(self, node: ir.Node) -> tuple[Hashable, ...] | None:
        """`structure_key(node)`, computed once."""
        if node in self._keys:
            return self._keys[node]
        key = structure_key(node)
        self._keys[node] = key
        return key

    def constant_kind(self, value: ir.Value) -> tuple[str, tuple[int, ...]] | None:
        """`constant_kind(value)`, computed once."""
        if value in self._kinds:
            return self._kinds[value]
        kind = constant_kind(value)
        self._kinds[value] = kind
        return kind

    def input_kind(self, value: ir.Value | None) -> Hashable:
        """A position-free description of one input, for the local signature."""
        if value is None:
            return ("absent",)
        kind = self.constant_kind(value)
        if kind is not None:
            return ("const", *kind)
        producer = value.producer()
        if producer is None:
            return ("outer",)
        return ("computed", producer.op_type, value.index)


class SignatureTable:
    """Interns local node signatures to small integers (equal signatures, equal ints).

    A local signature is the structure key plus the kind of every input (absent, constant of
    a dtype and shape, or computed by an op at an output index). Nodes holding subgraphs get a
    signature of their own, so they never repeat.
    """

    def __init__(self, cache: StructureCache) -> None:
        self._cache = cache
        self._ids: dict[Hashable, int] = {}

    def signature(self, node: ir.Node) -> int:
        """The interned local signature of `node`."""
        key = self._cache.structure_key(node)
        full: Any
        if key is None:
            full = ("unique", len(self._ids))
        else:
            full = (key, tuple(self._cache.input_kind(v) for v in node.inputs))
        found = self._ids.get(full)
        if found is None:
            found = len(self._ids)
            self._ids[full] = found
        return found


def node_label(node: ir.Node) -> str:
    """`name (Op)` for messages."""
    return f"{node.name or '<unnamed>'} ({node.op_type})"
