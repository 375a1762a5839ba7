"""Weights held aside while onnx's version converter works on the rest of a model.

The converter serializes, parses, infers shapes on, copies and re-serializes all it is given,
so a model handed over with its weights costs several copies of them at once (BERT-base: a
3.7 GB peak against 1.9 GB without conversion). It never needs their values: its adapters
read only small constants (axes, pads, scales, split sizes, Reshape shapes, Clip bounds), and
so does its shape inference. So every tensor of more than `STRUCTURE_ONLY_ELEMENTS` elements
(the initializers of every graph, the tensors of attributes such as a `Constant`'s value) goes
to the converter as a stand-in: a TensorProto with the tensor's name, element type and dims
whose data is an external-data reference to a location naming the held tensor. Nothing reads
such a reference: the converter copies it through, and lifting its result makes a lazy
`ExternalTensor` of it. Each stand-in is then replaced by the held tensor object itself, so no
weight is copied at any point and the converted model's weights are the original's.

A stand-in whose element type or shape the converter changed cannot be given its tensor back
(the converter could not have computed new contents for data it never saw): that is an error.
Smaller tensors keep their data, so everything an adapter may read is there.
"""

from __future__ import annotations

from collections.abc import Iterable

import onnx

from ir._core import Attr, Graph, IRError, Model, Node, Tensor
from ir._enums import AttrType
from ir._serde import STRUCTURE_ONLY_ELEMENTS, to_onnx
from ir._serde_tensors import ExternalTensor

# The external-data location of a stand-in: this prefix, then the held tensor's number. A
# relative path inside the model's folder, so lifting accepts it (and, being lazy, reads
# nothing there).
_LOCATION = "onnx-rewrite-held-weight/"


class HeldWeightsError(IRError):
    """The converter changed a weight it was given only as a stand-in."""


class HeldWeights:
    """The tensors taken out of a model for conversion, by stand-in number."""

    def __init__(self) -> None:
        self._tensors: list[Tensor] = []

    def __len__(self) -> int:
        return len(self._tensors)

    def stand_in(self, tensor: Tensor, name: str) -> onnx.TensorProto:
        """A data-less TensorProto standing for `tensor` (which is held until `restore`)."""
        proto = onnx.TensorProto(name=name, data_type=int(tensor.dtype), dims=tensor.shape)
        proto.data_location = onnx.TensorProto.EXTERNAL
        entry = proto.external_data.add()
        entry.key = "location"
        entry.value = f"{_LOCATION}{len(self._tensors)}"
        self._tensors.append(tensor)
        return proto

    def held(self, tensor: Tensor) -> Tensor | None:
        """The tensor `tensor` stands for, or None when it is not a stand-in.

        Raises:
            HeldWeightsError: the stand-in's element type or shape is not the tensor's.
        """
        if not isinstance(tensor, ExternalTensor) or not tensor.location.startswith(_LOCATION):
            return None
        original = self._tensors[int(tensor.location.removeprefix(_LOCATION))]
        if original.dtype != tensor.dtype or original.shape != tensor.shape:
            raise HeldWeightsError(
                f"weight {tensor.name!r} came back from the converter as "
                f"{tensor.dtype.onnx_name}{list(tensor.shape)}, not "
                f"{original.dtype.onnx_name}{list(original.shape)}: its values were not given"
            )
        return original

    def restore(self, model: Model) -> None:
        """Give every stand-in in `model` (a lifted conversion result) its tensor back.

        Raises:
            HeldWeightsError: a stand-in changed type or shape.
        """
        for graph in model.graphs():
            for value in graph.initializers.values():
                tensor = value.const_value
                original = self.held(tensor) if tensor is not None else None
                if original is not None:
                    value.const_value = original
            for node in graph:
                self._restore_attributes(node)

    def _restore_attributes(self, node: Node) -> None:
        for attr in tuple(node.attributes.values()):
            if attr.type == AttrType.TENSOR and isinstance(attr.value, Tensor):
                original = self.held(attr.value)
                if original is not None:
                    node.set_attribute(_with_value(attr, original))
            elif attr.type == AttrType.TENSORS and isinstance(attr.value, tuple):
                tensors = [t for t in attr.value if isinstance(t, Tensor)]
                restored = tuple(self.held(t) or t for t in tensors)
                if any(new is not old for new, old in zip(restored, tensors, strict=True)):
                    node.set_attribute(_with_value(attr, restored))


def _with_value(attr: Attr, value: Tensor | tuple[Tensor, ...]) -> Attr:
    return Attr(attr.name, attr.type, value, attr.ref_attr_name, attr.doc_string)


def lower_holding_weights(model: Model) -> tuple[onnx.ModelProto, HeldWeights]:
    """`model` as a ModelProto whose large tensors are stand-ins, and the tensors held.

    The main graph is lowered without its large initializers (their bytes are never copied)
    and gets stand-ins in their places; the large tensors of nested graphs and attributes are
    replaced by stand-ins in the lowered message.
    """
    proto = to_onnx(model, weights=False)
    held = HeldWeights()
    _hold_main_initializers(proto.graph, model.graph, held)
    _hold_graph_tensors(proto.graph, model.graph, held, nested=False)
    return proto, held


def _is_large(proto: onnx.TensorProto) -> bool:
    elements = 1
    for dim in proto.dims:
        elements *= dim
    return elements > STRUCTURE_ONLY_ELEMENTS


def _hold_main_initializers(target: onnx.GraphProto, graph: Graph, held: HeldWeights) -> None:
    """Stand-ins for the initializers a structure-only lowering turned into typed inputs.

    The initializers come back in the graph's order, and the typed inputs that stood for the
    large ones go (an initializer that is also a declared graph input stays one).
    """
    kept: dict[str, onnx.TensorProto] = {}
    for proto in target.initializer:
        copy = onnx.TensorProto()
        copy.CopyFrom(proto)  # small: at most STRUCTURE_ONLY_ELEMENTS elements
        kept[proto.name] = copy
    initializers = []
    for name, value in graph.initializers.items():
        tensor = value.const_value
        assert tensor is not None, f"initializer {name!r} has no tensor"
        initializers.append(kept[name] if name in kept else held.stand_in(tensor, name))
    declared = {value.name for value in graph.inputs}
    inputs = [
        info
        for info in target.input
        if info.name in declared or info.name not in graph.initializers
    ]
    del target.initializer[:]
    target.initializer.extend(initializers)
    if len(inputs) != len(target.input):
        del target.input[:]
        target.input.extend(inputs)


def _hold_graph_tensors(
    target: onnx.GraphProto, graph: Graph, held: HeldWeights, *, nested: bool
) -> None:
    """Stand-ins for the large tensors of `target` (lowered from `graph`) and of its subgraphs.

    Nodes are paired by their first named output (lowering may reorder nodes, never rename
    values); a node with no named output keeps its tensors.
    """
    if nested:
        for proto in target.initializer:
            value = graph.initializers.get(proto.name)
            tensor = value.const_value if value is not None else None
            if tensor is not None and _is_large(proto):
                proto.CopyFrom(held.stand_in(tensor, proto.name))
    by_output = {_first_named(out.name for out in node.outputs): node for node in graph}
    for node_proto in target.node:
        if not any(_holds_tensors(attr) for attr in node_proto.attribute):
            continue
        named = _first_named(node_proto.output)
        node = by_output.get(named) if named else None
        if node is None:
            continue
        for attr_proto in node_proto.attribute:
            _hold_attribute(attr_proto, node.attributes.get(attr_proto.name), held)


def _first_named(names: Iterable[str]) -> str:
    """The first non-empty output name ("" when there is none)."""
    return next((name for name in names if name), "")


def _holds_tensors(attr: onnx.AttributeProto) -> bool:
    return attr.type in (
        onnx.AttributeProto.TENSOR,
        onnx.AttributeProto.TENSORS,
        onnx.AttributeProto.GRAPH,
        onnx.AttributeProto.GRAPHS,
    )


def _hold_attribute(target: onnx.AttributeProto, attr: Attr | None, held: HeldWeights) -> None:
    if attr is None or attr.ref_attr_name:
        return
    value = attr.value
    if target.type == onnx.AttributeProto.TENSOR and isinstance(value, Tensor):
        if _is_large(target.t):
            target.t.CopyFrom(held.stand_in(value, target.t.name))
    elif target.type == onnx.AttributeProto.TENSORS and isinstance(value, tuple):
        for proto, tensor in zip(target.tensors, value, strict=True):
            if isinstance(tensor, Tensor) and _is_large(proto):
                proto.CopyFrom(held.stand_in(tensor, proto.name))
    elif target.type == onnx.AttributeProto.GRAPH and isinstance(value, Graph):
        _hold_graph_tensors(target.g, value, held, nested=True)
    elif target.type == onnx.AttributeProto.GRAPHS and isinstance(value, tuple):
        for proto, graph in zip(target.graphs, value, strict=True):
            if isinstance(graph, Graph):
                _hold_graph_tensors(proto, graph, held, nested=True)
