"""The fixed-point driver's fingerprint: a digest of everything a round can change.

The pass manager stops with OSCILLATION when a round leaves the model in a state it was
already in, so the digest must tell apart every two models that differ in what they compute
or how (op types, domains, wiring, attributes, constants), and must not tell apart two
models that differ only in names the rewrite invents. Hence:

- Wiring is hashed by identity, not by name: each value is numbered in the order the walk
  first meets it, so two values that happen to share a name stay two, and a round that only
  renamed values is not progress. The names a caller can see (graph inputs and outputs) are
  hashed as well.
- Attributes are hashed by content, tensors included: a `Constant` whose value changed is a
  different model. A graph attribute is hashed where it occurs, with its body.
- Constants (initializers and tensor attributes) are hashed by dtype, shape and contents when
  they are small. A big or external one is hashed by dtype, shape and the name of what holds
  it: a pass never rewrites a big weight in place (it makes a new tensor under a fresh name),
  so reading gigabytes of weights each round would buy nothing.

Iteration follows the model's own order (node order, dict insertion order): the digest does
not depend on the hash seed of the process.
"""

from __future__ import annotations

import hashlib
import struct

import numpy as np

import ir

# Constants with more elements than this are hashed by dtype, shape and holder name only.
LARGE_TENSOR_ELEMENTS = 1 << 16


def fingerprint(model: ir.Model) -> str:
    """A hex digest of the model's computation (see the module docstring)."""
    walk = _Walk()
    walk.graph(model.graph)
    for function in model.functions.values():
        walk.text(f"function {function.domain}.{function.name}:{function.overload}")
        walk.graph(function.graph)
    return walk.digest.hexdigest()


class _Walk:
    """One digest over one model, with the identity numbering of its values."""

    def __init__(self) -> None:
        self.digest = hashlib.sha256()
        self.ids: dict[ir.Value, int] = {}

    def text(self, text: str) -> None:
        self.digest.update(text.encode())
        self.digest.update(b"\x00")

    def value(self, value: ir.Value | None) -> None:
        """The value's number (given when first met; None for an omitted optional input)."""
        if value is None:
            self.digest.update(b"-")
            return
        number = self.ids.setdefault(value, len(self.ids))
        self.digest.update(struct.pack("<q", number))

    def graph(self, graph: ir.Graph) -> None:
        self.text("graph(")
        for value in graph.inputs:
            self.value(value)
            self.text(value.name)
        for name, value in graph.initializers.items():
            self.value(value)
            self.text(f"init {name}")
            if value.const_value is not None:
                self.tensor(value.const_value, name)
        for name, value in graph.sparse_initializers.items():
            self.value(value)
            self.text(f"sparse {name}")
        for node in graph:
            self.node(node)
        self.text(")->")
        for value in graph.outputs:
            self.value(value)
            self.text(value.name)

    def node(self, node: ir.Node) -> None:
        self.text(f"{node.domain}.{node.op_type}:{node.overload}")
        for value in node.inputs:
            self.value(value)
        self.text("->")
        for value in node.outputs:
            self.value(value)
        holder = node.outputs[0].name if node.outputs else node.name
        for attr in node.attributes.values():
            self.attribute(attr, holder)

    def attribute(self, attr: ir.Attr, holder: str) -> None:
        self.text(f"@{attr.name}:{attr.type.name}:{attr.ref_attr_name}")
        if attr.ref_attr_name:
            return
        items = attr.value if isinstance(attr.value, tuple) else (attr.value,)
        for item in items:
            if isinstance(item, ir.Tensor):
                self.tensor(item, holder)
            elif isinstance(item, ir.Graph):
                self.graph(item)
            else:
                # int, float (repr is exact), str, bytes and types: their repr is their value.
                self.text(repr(item))

    def tensor(self, tensor: ir.Tensor, holder: str) -> None:
        """dtype, shape and contents; dtype, shape and holder of a big or external tensor."""
        self.text(f"{tensor.dtype.onnx_name}{tuple(tensor.shape)}")
        if tensor.is_external or tensor.size > LARGE_TENSOR_ELEMENTS:
            self.text(f"held by {holder}")
            return
        try:
            array = np.asarray(tensor.numpy())
        except ir.IRError:
            self.text(f"unreadable, held by {holder}")
            return
        if array.dtype == object:
            self.text(repr(array.reshape(-1).tolist()))
        else:
            self.digest.update(np.ascontiguousarray(array).tobytes())
