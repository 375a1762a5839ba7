"""Lifting (ONNX protobuf -> IR) and lowering (IR -> ONNX protobuf).

This is the one module of the IR that reads and writes ONNX protobuf messages (with its
helper `_serde_tensors` for tensor payloads). Lowering is lossless: everything lifting did
not interpret is copied from the original messages, and every node, graph, attribute and
value_info entry that was not changed since lifting is emitted as the original message, so
`lower(lift(m)) == m` field by field.
"""

from __future__ import annotations

import contextlib
import gc
import math
import os
from collections.abc import Iterable, Iterator, Sequence
from sys import intern
from typing import Any

import onnx

from ir import _core
from ir._core import (
    Attr,
    Function,
    Graph,
    GraphStructureError,
    MapType,
    Model,
    ModelLoadError,
    Node,
    OpaqueType,
    OptionalType,
    SequenceType,
    SparseTensorType,
    Tensor,
    TensorType,
    Type,
    UnsetType,
    Value,
)
from ir._enums import AttrType, DataType
from ir._serde_tensors import (
    ExternalTensor,
    ProtoTensor,
    SparseProtoTensor,
    check_external_location,
    tensor_to_proto,
)

# ---------------------------------------------------------------------------------------------
# Types


def lift_type(proto: onnx.TypeProto) -> Type | None:
    """Turn a TypeProto into an IR type (None when the message is entirely empty)."""
    which = proto.WhichOneof("value")
    denotation = proto.denotation
    if which == "tensor_type":
        dtype, shape, dims_den = _lift_tensor_type(proto.tensor_type)
        return TensorType(dtype, shape, denotation, dims_den)
    if which == "sparse_tensor_type":
        dtype, shape, dims_den = _lift_tensor_type(proto.sparse_tensor_type)
        return SparseTensorType(dtype, shape, denotation, dims_den)
    if which == "sequence_type":
        elem = proto.sequence_type
        inner = lift_type(elem.elem_type) if elem.HasField("elem_type") else None
        return SequenceType(inner, denotation)
    if which == "map_type":
        mt = proto.map_type
        value = lift_type(mt.value_type) if mt.HasField("value_type") else None
        return MapType(_DATA_TYPES.get(mt.key_type, DataType.UNDEFINED), value, denotation)
    if which == "optional_type":
        ot = proto.optional_type
        inner = lift_type(ot.elem_type) if ot.HasField("elem_type") else None
        return OptionalType(inner, denotation)
    if which == "opaque_type":
        return OpaqueType(proto.opaque_type.domain, proto.opaque_type.name, denotation)
    return UnsetType(denotation)


def _lift_tensor_type(
    tt: Any,
) -> tuple[DataType, tuple[_core.Dim, ...] | None, tuple[str, ...] | None]:
    # An element type onnx does not define is an unknown type here (`validate_model` refuses
    # it on graph inputs and outputs; elsewhere it only makes facts unknown).
    dtype = _DATA_TYPES.get(tt.elem_type, DataType.UNDEFINED)
    if not tt.HasField("shape"):
        return dtype, None, None
    dims: list[_core.Dim] = []
    denotations: list[str] = []
    for d in tt.shape.dim:
        which = d.WhichOneof("value")
        if which == "dim_value":
            dims.append(d.dim_value)
        elif which == "dim_param":
            dims.append(d.dim_param)
        else:
            dims.append(None)
        denotations.append(d.denotation)
    dims_den = tuple(denotations) if any(denotations) else None
    return dtype, tuple(dims), dims_den


def _lift_info_type(info: onnx.ValueInfoProto) -> Type | None:
    """The type of a ValueInfoProto (what `Value._type_proto` holds until first read)."""
    return lift_type(info.type)


_core._type_lifter.append(_lift_info_type)


def lower_type(t: Type, proto: onnx.TypeProto) -> None:
    """Fill an empty TypeProto from an IR type."""
    if isinstance(t, TensorType | SparseTensorType):
        tt = proto.tensor_type if isinstance(t, TensorType) else proto.sparse_tensor_type
        tt.elem_type = int(t.dtype)
        if t.shape is not None:
            shape = tt.shape
            shape.SetInParent()
            for i, d in enumerate(t.shape):
                dim = shape.dim.add()
                if isinstance(d, int):
                    dim.dim_value = d
                elif isinstance(d, str):
                    dim.dim_param = d
                if t.dim_denotations is not None and t.dim_denotations[i]:
                    dim.denotation = t.dim_denotations[i]
    elif isinstance(t, SequenceType):
        st = proto.sequence_type
        st.SetInParent()
        if t.elem is not None:
            lower_type(t.elem, st.elem_type)
    elif isinstance(t, MapType):
        mt = proto.map_type
        mt.key_type = int(t.key)
        if t.value is not None:
            lower_type(t.value, mt.value_type)
    elif isinstance(t, OptionalType):
        ot = proto.optional_type
        ot.SetInParent()
        if t.elem is not None:
            lower_type(t.elem, ot.elem_type)
    elif isinstance(t, OpaqueType):
        op = proto.opaque_type
        op.SetInParent()
        if t.domain:
            op.domain = t.domain
        if t.name:
            op.name = t.name
    if t.denotation:
        proto.denotation = t.denotation


# ---------------------------------------------------------------------------------------------
# Lifting


_ATTR_TYPES = {int(k): k for k in AttrType}
# Default-domain ops whose attributes may hold graphs: their attributes are lifted eagerly so
# that outer-scope references inside the subgraphs resolve during lifting.
_GRAPH_OPS = frozenset({"If", "Loop", "Scan", "SequenceMap"})
_STANDARD_DOMAINS = frozenset({"", "ai.onnx", "ai.onnx.ml", "ai.onnx.preview.training"})
_DATA_TYPES = {int(k): k for k in DataType}


class _Scope:
    """Name -> Value for one graph, chained to the enclosing graph's scope."""

    __slots__ = ("names", "parent")

    def __init__(self, parent: _Scope | None) -> None:
        self.names: dict[str, Value] = {}
        self.parent = parent

    def lookup(self, name: str) -> Value | None:
        scope: _Scope | None = self
        while scope is not None:
            found = scope.names.get(name)
            if found is not None:
                return found
            scope = scope.parent
        return None


class _Lifter:
    """Lifts one model; holds the external-data folder for tensors."""

    def __init__(self, base_dir: str | None) -> None:
        self.base_dir = base_dir
        self.external: list[ExternalTensor] = []

    # tensors ---------------------------------------------------------------------------------
    def tensor(self, proto: onnx.TensorProto) -> Tensor:
        if proto.data_location == onnx.TensorProto.EXTERNAL:
            check_external_location(proto)
            tensor = ExternalTensor(proto, self.base_dir)
            self.external.append(tensor)
            return tensor
        return ProtoTensor(proto)

    # attributes ------------------------------------------------------------------------------
    def attr(self, proto: onnx.AttributeProto, scope: _Scope, owner: Node | None) -> Attr:
        kind = proto.type or _guess_attr_type(proto)
        value: _core.AttrValue
        if proto.ref_attr_name:
            value = None
        elif kind == AttrType.FLOAT:
            value = proto.f
        elif kind == AttrType.INT:
            value = proto.i
        elif kind == AttrType.STRING:
            value = _decode(proto.s)
        elif kind == AttrType.INTS:
            value = tuple(proto.ints)
        elif kind == AttrType.FLOATS:
            value = tuple(proto.floats)
        elif kind == AttrType.STRINGS:
            value = tuple(_decode(s) for s in proto.strings)
        elif kind == AttrType.TENSOR:
            value = self.tensor(proto.t)
        elif kind == AttrType.TENSORS:
            value = tuple(self.tensor(t) for t in proto.tensors)
        elif kind == AttrType.GRAPH:
            value = self.graph(proto.g, _Scope(scope))
        elif kind == AttrType.GRAPHS:
            value = tuple(self.graph(g, _Scope(scope)) for g in proto.graphs)
        elif kind == AttrType.SPARSE_TENSOR:
            value = SparseProtoTensor(proto.sparse_tensor)
        elif kind == AttrType.SPARSE_TENSORS:
            value = tuple(SparseProtoTensor(t) for t in proto.sparse_tensors)
        elif kind == AttrType.TYPE_PROTO:
            value = lift_type(proto.tp)
        elif kind == AttrType.TYPE_PROTOS:
            value = tuple(t for t in (lift_type(t) for t in proto.type_protos) if t is not None)
        else:
            value = None
        attr = Attr(proto.name, _ATTR_TYPES[kind], value, proto.ref_attr_name, proto.doc_string)
        object.__setattr__(attr, "_proto", proto)
        return attr

    # graphs ----------------------------------------------------------------------------------
    def graph(self, proto: onnx.GraphProto, scope: _Scope) -> Graph:
        graph = Graph(name=proto.name, doc_string=proto.doc_string)
        names = scope.names
        for vi in proto.input:
            value = self._value_from_info(vi)
            names[vi.name] = value
            value._graph = graph
            graph._inputs.append(value)
        for tp in proto.initializer:
            existing = names.get(tp.name)
            if existing is not None and existing._const_value is None:
                value = existing  # an initializer that is also a graph input
            else:
                value = Value(tp.name)
                value._graph = graph
                names[tp.name] = value
            value._const_value = self.tensor(tp)
            graph._initializers[tp.name] = value
        for sp in proto.sparse_initializer:
            name = sp.values.name
            value = names.get(name) or Value(name)
            value._graph = graph
            value._const_value = SparseProtoTensor(sp)
            names[name] = value
            graph._sparse_initializers[name] = value
        self._lift_nodes(graph, proto.node, scope)
        for vi in proto.output:
            found = scope.lookup(vi.name)
            if found is None:
                raise GraphStructureError(
                    f"graph {proto.name!r}: output {vi.name!r} is not defined by any node, "
                    "input or initializer"
                )
            _adopt_info(found, vi)
            graph._outputs.append(found)
        for vi in proto.value_info:
            found = scope.lookup(vi.name)
            if found is not None:
                _adopt_info(found, vi)
            graph._value_info.append((found, vi))
        if proto.metadata_props:
            graph.metadata_props = {e.key: e.value for e in proto.metadata_props}
        graph._proto = proto
        graph._dirty = False
        return graph

    def _lift_nodes(self, graph: Graph, protos: Sequence[onnx.NodeProto], scope: _Scope) -> None:
        names = scope.names
        nodes: list[Node] = []
        new_node = Node.__new__
        new_value = Value.__new__
        eager_ops = _GRAPH_OPS
        # Pass 1: create every node and its outputs, so inputs resolve in any node order.
        for proto in protos:
            node = new_node(Node)
            # One shared str per op type instead of one per node (lifting is memory-bound).
            try:
                op_type = intern(proto.op_type)
            except TypeError:  # protobuf gives bytes for an op type that is not UTF-8
                raise GraphStructureError(
                    f"graph {graph.name!r}: node op_type {proto.op_type!r} is not UTF-8 text"
                ) from None
            domain = proto.domain
            node._op_type = op_type
            node._domain = domain
            node._overload = proto.overload
            node._name = proto.name
            node._doc_string = proto.doc_string
            node._metadata_props = None  # read from the proto on first access
            node._graph = graph
            node._proto = proto
            node._dirty = False
            node._lazy = self
            node._meta = None
            # Attributes of ops that cannot hold subgraphs are lifted on first access.
            node._attributes = (
                None if domain in _STANDARD_DOMAINS and op_type not in eager_ops else {}
            )
            outputs = []
            for i, out_name in enumerate(proto.output):
                value = new_value(Value)
                value._name = out_name
                value._type = None
                value._type_proto = None
                value._const_value = None
                value._producer = node
                value._index = i
                value._graph = None
                value._uses = {}
                value._vi_proto = None
                value._doc_string = ""
                value._metadata_props = None
                value._meta = None
                if out_name:
                    if out_name in names:
                        raise GraphStructureError(
                            f"graph {graph.name!r}: value {out_name!r} is defined twice "
                            f"(again by node {proto.name or op_type!r})"
                        )
                    names[out_name] = value
                outputs.append(value)
            node._outputs = tuple(outputs)
            nodes.append(node)
        # Pass 2: resolve inputs (local scope first, then enclosing graphs) and attributes.
        lookup = names.get
        for node, proto in zip(nodes, protos, strict=False):
            inputs: list[Value | None] = []
            i = 0
            for in_name in proto.input:
                if not in_name:
                    inputs.append(None)
                    i += 1
                    continue
                found = lookup(in_name)
                if found is None:
                    found = scope.lookup(in_name)
                    if found is None:
                        raise GraphStructureError(
                            f"graph {graph.name!r}: node {proto.name or proto.op_type!r} "
                            f"({proto.op_type}) reads {in_name!r}, which nothing defines"
                        )
                found._uses[(node, i)] = None
                inputs.append(found)
                i += 1
            node._inputs = tuple(inputs)
            if node._attributes is not None:
                attrs = node._attributes
                for ap in proto.attribute:
                    attr = self.attr(ap, scope, node)
                    attrs[attr.name] = attr
                    for sub in attr.graphs():
                        sub._owner = node
        graph._nodes = dict.fromkeys(nodes)

    def node_attributes(self, node: Node) -> dict[str, Attr]:
        """Lift the attributes of a node whose attributes were left for later."""
        proto: Any = node._proto
        attrs: dict[str, Attr] = {}
        for ap in proto.attribute:
            attr = self.attr(ap, _Scope(None), node)
            attrs[attr.name] = attr
        return attrs

    def node_metadata(self, node: Node) -> dict[str, str]:
        """Lift the metadata of a node on first access."""
        proto: Any = node._proto
        return {e.key: e.value for e in proto.metadata_props}

    def _value_from_info(self, vi: onnx.ValueInfoProto) -> Value:
        value = Value(vi.name)
        _adopt_info(value, vi)
        return value

    # functions and models --------------------------------------------------------------------
    def function(self, proto: onnx.FunctionProto) -> Function:
        graph = Graph(name=proto.name)
        scope = _Scope(None)
        for name in proto.input:
            value = Value(name)
            value._graph = graph
            scope.names[name] = value
            graph._inputs.append(value)
        self._lift_nodes(graph, proto.node, scope)
        for name in proto.output:
            found = scope.lookup(name)
            if found is None:
                raise GraphStructureError(
                    f"function {proto.domain}.{proto.name}: output {name!r} is not defined"
                )
            graph._outputs.append(found)
        for vi in proto.value_info:
            found = scope.lookup(vi.name)
            if found is not None:
                _adopt_info(found, vi)
            graph._value_info.append((found, vi))
        graph._dirty = False
        fn = Function(
            proto.domain,
            proto.name,
            graph,
            overload=proto.overload,
            attributes=list(proto.attribute),
            attribute_defaults=[self.attr(a, scope, None) for a in proto.attribute_proto],
            opset_imports={o.domain: o.version for o in proto.opset_import},
            doc_string=proto.doc_string,
        )
        if proto.metadata_props:
            fn.metadata_props = {e.key: e.value for e in proto.metadata_props}
        fn._proto = proto
        fn._dirty = False
        return fn

    def model(self, proto: onnx.ModelProto) -> Model:
        graph = self.graph(proto.graph, _Scope(None))
        model = Model(
            graph,
            ir_version=proto.ir_version,
            opset_imports={o.domain: o.version for o in proto.opset_import},
            producer_name=proto.producer_name,
            producer_version=proto.producer_version,
            domain=proto.domain,
            model_version=proto.model_version,
            doc_string=proto.doc_string,
            functions=[self.function(f) for f in proto.functions],
        )
        if proto.metadata_props:
            model.metadata_props = {e.key: e.value for e in proto.metadata_props}
        model.base_dir = self.base_dir
        model._proto = proto
        return model


def _adopt_info(value: Value, vi: onnx.ValueInfoProto) -> None:
    """Take the type (lazily) and docs of a ValueInfoProto, unless the value has them."""
    if value._vi_proto is None and value._type is None and value._type_proto is None:
        if vi.HasField("type"):
            # Keep the ValueInfoProto, not a wrapper of its `type` (one object less per value).
            value._type_proto = vi
        value._doc_string = vi.doc_string
        if vi.metadata_props:
            value._metadata_props = {e.key: e.value for e in vi.metadata_props}
        value._vi_proto = vi


def _decode(data: bytes) -> str | bytes:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return data


def _guess_attr_type(proto: onnx.AttributeProto) -> int:
    """Attribute kind of an old model that left `type` unset, from the field that is set."""
    for field, kind in (
        ("f", AttrType.FLOAT),
        ("i", AttrType.INT),
        ("s", AttrType.STRING),
        ("t", AttrType.TENSOR),
        ("g", AttrType.GRAPH),
        ("sparse_tensor", AttrType.SPARSE_TENSOR),
        ("tp", AttrType.TYPE_PROTO),
    ):
        if proto.HasField(field):
            return kind
    for field, kind in (
        ("floats", AttrType.FLOATS),
        ("ints", AttrType.INTS),
        ("strings", AttrType.STRINGS),
        ("tensors", AttrType.TENSORS),
        ("graphs", AttrType.GRAPHS),
        ("sparse_tensors", AttrType.SPARSE_TENSORS),
        ("type_protos", AttrType.TYPE_PROTOS),
    ):
        if len(getattr(proto, field)):
            return kind
    return AttrType.UNDEFINED


def from_onnx(proto: onnx.ModelProto, base_dir: str | None = None) -> Model:
    """Lift a ModelProto into the IR (see `lift_model`)."""
    return lift_model(proto, base_dir)[0]


def lift_model(
    proto: onnx.ModelProto, base_dir: str | None = None
) -> tuple[Model, list[ExternalTensor]]:
    """Lift a ModelProto into the IR; also returns the external tensors met while lifting.

    The IR keeps references into `proto` (to reuse unchanged messages when lowering), so the
    caller should not mutate `proto` afterwards.

    Args:
        proto: the model.
        base_dir: folder that external-data locations are relative to (None: the
            current directory at the time a tensor's data is read).

    Raises:
        ModelLoadError: the model's structure is broken (names the graph, node or value).
        ExternalDataError: an external-data location is absolute or escapes the folder.
    """
    if not isinstance(proto, onnx.ModelProto):
        raise TypeError(f"from_onnx expects an onnx.ModelProto, got {type(proto).__name__}")
    lifter = _Lifter(base_dir)
    with paused_gc():
        try:
            return lifter.model(proto), lifter.external
        except GraphStructureError as exc:
            raise ModelLoadError(str(exc)) from exc


@contextlib.contextmanager
def paused_gc() -> Iterator[None]:
    """The cyclic garbage collector paused while a model is lifted, validated or lowered.

    These allocate many small objects that form no garbage cycles while they run; the
    collector's passes over them would cost as much as the work itself.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


# ---------------------------------------------------------------------------------------------
# Lowering


def _assign(message: Any, field: str, value: object) -> None:
    """Set a scalar field only when it differs, so unchanged fields keep their presence."""
    if getattr(message, field) != value:
        setattr(message, field, value)


def _lower_string(value: str | bytes) -> bytes:
    return value.encode("utf-8") if isinstance(value, str) else value


def lower_attr(attr: Attr) -> onnx.AttributeProto:
    """An AttributeProto for `attr` (the original message when nothing in it changed)."""
    original = attr._proto
    subgraphs = attr.graphs()
    if original is not None and not any(g._dirty for g in subgraphs):
        return original  # type: ignore[return-value]
    proto = onnx.AttributeProto()
    if original is not None:
        proto.CopyFrom(original)
        # Only graph contents can differ from the original: rebuild those fields.
        if attr.type == AttrType.GRAPH:
            proto.g.CopyFrom(lower_graph(subgraphs[0]))
        else:
            del proto.graphs[:]
            proto.graphs.extend(lower_graph(g) for g in subgraphs)
        return proto
    proto.name = attr.name
    proto.type = int(attr.type)  # type: ignore[assignment]
    if attr.ref_attr_name:
        proto.ref_attr_name = attr.ref_attr_name
    if attr.doc_string:
        proto.doc_string = attr.doc_string
    if attr.ref_attr_name:
        return proto
    kind = attr.type
    value: Any = attr.value  # its member is given by `kind`
    if kind == AttrType.FLOAT:
        proto.f = float(value)
    elif kind == AttrType.INT:
        proto.i = int(value)
    elif kind == AttrType.STRING:
        proto.s = _lower_string(value)
    elif kind == AttrType.INTS:
        proto.ints.extend(int(v) for v in value)
    elif kind == AttrType.FLOATS:
        proto.floats.extend(float(v) for v in value)
    elif kind == AttrType.STRINGS:
        proto.strings.extend(_lower_string(v) for v in value)
    elif kind == AttrType.TENSOR:
        proto.t.CopyFrom(tensor_to_proto(value))
    elif kind == AttrType.TENSORS:
        proto.tensors.extend(tensor_to_proto(t) for t in value)
    elif kind == AttrType.GRAPH:
        proto.g.CopyFrom(lower_graph(value))
    elif kind == AttrType.GRAPHS:
        proto.graphs.extend(lower_graph(g) for g in value)
    elif kind == AttrType.SPARSE_TENSOR:
        proto.sparse_tensor.CopyFrom(value._proto)
    elif kind == AttrType.SPARSE_TENSORS:
        proto.sparse_tensors.extend(t._proto for t in value)
    elif kind == AttrType.TYPE_PROTO:
        lower_type(value, proto.tp)
    elif kind == AttrType.TYPE_PROTOS:
        for t in value:
            lower_type(t, proto.type_protos.add())
    return proto


def _lower_metadata(target: Any, metadata: dict[str, str], original: Any) -> None:
    """Write metadata_props, reusing the original entries when the content is unchanged."""
    if original is not None:
        before = {e.key: e.value for e in original.metadata_props}
        if before == metadata and len(original.metadata_props) == len(before):
            if target is not original:
                del target.metadata_props[:]
                target.metadata_props.extend(original.metadata_props)
            return
    del target.metadata_props[:]
    for key, value in metadata.items():
        entry = target.metadata_props.add()
        entry.key = key
        entry.value = value


def lower_node(node: Node) -> onnx.NodeProto:
    """A NodeProto for `node` (the original message when the node is unchanged)."""
    original = node._proto
    if original is not None and not node._dirty:
        return original  # type: ignore[return-value]
    proto = onnx.NodeProto()
    if original is not None:
        # Start from the original to keep fields the IR does not model (device configs).
        proto.CopyFrom(original)
        del proto.input[:]
        del proto.output[:]
        del proto.attribute[:]
    for index, value in enumerate(node._inputs):
        if value is not None and not value.name:
            # ONNX reads an empty input name as an absent input: lowering it would silently
            # disconnect the node.
            raise ValueError(f"{node!r} reads an unnamed value (input {index}): name it first")
    proto.input.extend([v.name if v is not None else "" for v in node._inputs])
    proto.output.extend([v.name for v in node._outputs])
    _assign(proto, "name", node._name)
    _assign(proto, "op_type", node._op_type)
    _assign(proto, "domain", node._domain)
    _assign(proto, "overload", node._overload)
    _assign(proto, "doc_string", node._doc_string)
    proto.attribute.extend([lower_attr(a) for a in node._attrs().values()])
    metadata = node._metadata()
    if metadata or (original is not None and original.metadata_props):  # type: ignore[attr-defined]
        _lower_metadata(proto, metadata, original)
    return proto


def lower_value_info(value: Value, original: Any = None) -> onnx.ValueInfoProto:
    """A ValueInfoProto for `value`, reusing `original` when the value did not change."""
    if (
        original is not None
        and value._vi_proto is not None
        and original.name == value.name
        and original.doc_string == value.doc_string
    ):
        return original  # type: ignore[no-any-return]
    proto = onnx.ValueInfoProto()
    proto.name = value.name
    t = value.type
    if t is not None:
        lower_type(t, proto.type)
    if value.doc_string:
        proto.doc_string = value.doc_string
    if value._metadata_props:
        _lower_metadata(proto, value._metadata_props, None)
    return proto


def _io_info(value: Value, original_list: Any, index: int) -> onnx.ValueInfoProto:
    """The graph input/output entry at `index`, reusing the original when still accurate."""
    if original_list is not None and index < len(original_list):
        original = original_list[index]
        if original.name == value.name and value._vi_proto is not None:
            return original  # type: ignore[no-any-return]
    return lower_value_info(value)


def lower_graph(graph: Graph) -> onnx.GraphProto:
    """A GraphProto for `graph`, nodes in topological order (original message if unchanged)."""
    original: Any = graph._proto
    if original is not None and not graph._dirty:
        return original  # type: ignore[no-any-return]
    proto = onnx.GraphProto()
    if original is not None:
        _assign(proto, "name", original.name)
        _assign(proto, "doc_string", original.doc_string)
        proto.quantization_annotation.extend(original.quantization_annotation)
    _assign(proto, "name", graph.name)
    _assign(proto, "doc_string", graph.doc_string)
    order = _emission_order(graph)
    proto.node.extend([lower_node(n) for n in order])
    proto.initializer.extend([_initializer_proto(v) for v in graph._initializers.values()])
    proto.sparse_initializer.extend(
        [_sparse_initializer_proto(v) for v in graph._sparse_initializers.values()]
    )
    orig_inputs = original.input if original is not None else None
    orig_outputs = original.output if original is not None else None
    proto.input.extend([_io_info(v, orig_inputs, i) for i, v in enumerate(graph._inputs)])
    if any(not v.name for v in graph._outputs):
        raise ValueError(f"graph {graph.name!r} has an unnamed output: name it first")
    proto.output.extend([_io_info(v, orig_outputs, i) for i, v in enumerate(graph._outputs)])
    proto.value_info.extend(_value_info_entries(graph, order))
    if graph.metadata_props or (original is not None and original.metadata_props):
        _lower_metadata(proto, graph.metadata_props, original)
    return proto


def _lower_structure(target: onnx.GraphProto, graph: Graph) -> None:
    """`lower_graph(graph)` into `target` with large initializers as typed inputs (see to_onnx).

    An unchanged graph copies its original message field by field, leaving out the large
    initializers, so their bytes are never copied.
    """
    original: Any = graph._proto
    if original is not None and not graph._dirty:
        source = original
        for field in ("name", "doc_string"):
            if source.HasField(field):
                setattr(target, field, getattr(source, field))
        for field in (
            "node",
            "input",
            "output",
            "value_info",
            "sparse_initializer",
            "quantization_annotation",
            "metadata_props",
        ):
            getattr(target, field).extend(getattr(source, field))
        tensors = list(source.initializer)
    else:
        # Build it with every initializer but the large ones (their protos are not made).
        large = {
            name
            for name, value in graph._initializers.items()
            if value.const_value is not None and value.const_value.size > STRUCTURE_ONLY_ELEMENTS
        }
        target.CopyFrom(_lower_graph_without(graph, large))
        declared = {info.name for info in target.input}
        for name in sorted(large, key=list(graph._initializers).index):
            tensor = graph._initializers[name].const_value
            assert tensor is not None, f"initializer {name!r} lost its tensor"
            _add_typed_input(target, declared, name, int(tensor.dtype), list(tensor.shape))
        return
    declared = {info.name for info in target.input}
    for tensor in tensors:
        if math.prod(tensor.dims) <= STRUCTURE_ONLY_ELEMENTS:
            target.initializer.append(tensor)
        else:
            _add_typed_input(target, declared, tensor.name, tensor.data_type, list(tensor.dims))


def _add_typed_input(
    target: onnx.GraphProto, declared: set[str], name: str, dtype: int, dims: list[int]
) -> None:
    if name in declared:
        return  # an IR-3 initializer is already an input
    declared.add(name)
    target.input.append(onnx.helper.make_tensor_value_info(name, dtype, dims))


def _lower_graph_without(graph: Graph, left_out: set[str]) -> onnx.GraphProto:
    """`lower_graph` of a changed graph, leaving out the initializers named in `left_out`."""
    if not left_out:
        return lower_graph(graph)
    kept = {n: v for n, v in graph._initializers.items() if n not in left_out}
    everything = graph._initializers
    graph._initializers = kept
    try:
        return lower_graph(graph)
    finally:
        graph._initializers = everything


def _emission_order(graph: Graph) -> list[Node]:
    """The current node order when it is topological, else a minimally changed valid one."""
    nodes = graph._nodes
    position = {node: i for i, node in enumerate(nodes)}
    for i, node in enumerate(nodes):
        for value in node._inputs:
            if value is not None:
                producer = value._producer
                if producer is not None and position.get(producer, -1) > i:
                    return _core.topological_order(graph)
        if node._attributes:
            for sub in node.subgraphs():
                for value in _core._outer_values(sub):
                    producer = value._producer
                    if producer is not None and position.get(producer, -1) > i:
                        return _core.topological_order(graph)
    return list(nodes)


def _value_info_entries(graph: Graph, order: Iterable[Node]) -> list[onnx.ValueInfoProto]:
    """value_info: the original entries still meaningful, then newly typed values."""
    entries: list[onnx.ValueInfoProto] = []
    listed: dict[Value, None] = {}
    for value, original in graph._value_info:
        if value is None:
            entries.append(original)  # type: ignore[arg-type]  # names nothing; kept as written
            continue
        if value.graph is None:
            continue  # its definition was removed
        listed[value] = None
        if value._vi_proto is not None:
            entries.append(original)  # type: ignore[arg-type]  # unchanged since lifting
        else:
            entries.append(lower_value_info(value))
    outputs = dict.fromkeys(graph._outputs)
    for node in order:
        for value in node._outputs:
            if value in listed or value in outputs or not value.name:
                continue
            if value.type is not None:
                entries.append(lower_value_info(value))
    return entries


def _initializer_proto(value: Value) -> onnx.TensorProto:
    tensor = value.const_value
    assert tensor is not None, f"initializer {value.name!r} lost its tensor"
    return tensor_to_proto(tensor, value.name)


def _sparse_initializer_proto(value: Value) -> onnx.SparseTensorProto:
    """The original SparseTensorProto, renamed (as a copy) if the value was renamed."""
    tensor = value.const_value
    assert isinstance(tensor, SparseProtoTensor), f"sparse initializer {value.name!r} lost its data"
    original: onnx.SparseTensorProto = tensor._proto
    if original.values.name == value.name:
        return original
    renamed = onnx.SparseTensorProto()
    renamed.CopyFrom(original)
    renamed.values.name = value.name
    return renamed


def lower_function(fn: Function) -> onnx.FunctionProto:
    """A FunctionProto for `fn` (the original message if unchanged)."""
    original: Any = fn._proto
    unchanged = original is not None and not fn._dirty and not fn.graph._dirty
    if unchanged and _function_fields_unchanged(fn, original):
        return original  # type: ignore[no-any-return]
    proto = onnx.FunctionProto()
    if original is not None:
        proto.CopyFrom(original)
        del proto.input[:]
        del proto.output[:]
        del proto.node[:]
        del proto.attribute[:]
        del proto.attribute_proto[:]
        del proto.opset_import[:]
        del proto.value_info[:]
    _assign(proto, "name", fn.name)
    _assign(proto, "domain", fn.domain)
    _assign(proto, "overload", fn.overload)
    _assign(proto, "doc_string", fn.doc_string)
    graph = fn.graph
    proto.input.extend([v.name for v in graph._inputs])
    proto.output.extend([v.name for v in graph._outputs])
    order = _emission_order(graph)
    proto.node.extend([lower_node(n) for n in order])
    proto.attribute.extend(fn.attributes)
    proto.attribute_proto.extend([lower_attr(a) for a in fn.attribute_defaults])
    _lower_opsets(proto, fn.opset_imports, original)
    proto.value_info.extend(_value_info_entries(graph, order))
    if fn.metadata_props or (original is not None and original.metadata_props):
        _lower_metadata(proto, fn.metadata_props, original)
    return proto


def _function_fields_unchanged(fn: Function, original: Any) -> bool:
    """Whether a function's plain fields still match the message it was lifted from.

    Function fields are plain attributes, so their changes are detected here (functions
    are few) rather than tracked when they happen.
    """
    defaults = original.attribute_proto
    return (
        fn.name == original.name
        and fn.domain == original.domain
        and fn.overload == original.overload
        and fn.doc_string == original.doc_string
        and fn.attributes == list(original.attribute)
        and len(fn.attribute_defaults) == len(defaults)
        and all(a._proto is d for a, d in zip(fn.attribute_defaults, defaults, strict=True))
        and list(fn.opset_imports.items()) == [(o.domain, o.version) for o in original.opset_import]
        and fn.metadata_props == {e.key: e.value for e in original.metadata_props}
    )


def _lower_opsets(proto: Any, opsets: dict[str, int], original: Any) -> None:
    if original is not None:
        before = [(o.domain, o.version) for o in original.opset_import]
        if before == list(opsets.items()):
            proto.opset_import.extend(original.opset_import)
            return
    for domain, version in opsets.items():
        entry = proto.opset_import.add()
        entry.domain = domain
        entry.version = version


def to_onnx(model: Model, *, weights: bool = True) -> onnx.ModelProto:
    """Lower an IR model to a new ModelProto (the IR model is not changed).

    Args:
        model: the model.
        weights: False to leave out the bytes of the main graph's initializers of more than
            `STRUCTURE_ONLY_ELEMENTS` elements: they become graph inputs of their type and
            shape (nothing of theirs is read or copied). What shape inference and onnx's
            checker need; such a model is not meant to be saved.

    Raises:
        ValueError: a node reads, or a graph outputs, a value without a name (ONNX would
            read the empty name as an absent value).
    """
    with paused_gc():
        return _lower_model(model, weights=weights)


# Initializers up to this many elements keep their data in a structure-only lowering: shape
# inference reads such constants as values (Reshape shapes, axes, Slice bounds).
STRUCTURE_ONLY_ELEMENTS = 64


def _lower_model(model: Model, *, weights: bool = True) -> onnx.ModelProto:
    proto = onnx.ModelProto()
    original: Any = model._proto
    if original is not None:
        # Scalars: copy the originals (keeping their presence), then apply changes.
        for field in (
            "ir_version",
            "producer_name",
            "producer_version",
            "domain",
            "model_version",
            "doc_string",
        ):
            if original.HasField(field):
                setattr(proto, field, getattr(original, field))
        proto.training_info.extend(original.training_info)
        proto.configuration.extend(original.configuration)
    _assign(proto, "ir_version", model.ir_version)
    _assign(proto, "producer_name", model.producer_name)
    _assign(proto, "producer_version", model.producer_version)
    _assign(proto, "domain", model.domain)
    _assign(proto, "model_version", model.model_version)
    _assign(proto, "doc_string", model.doc_string)
    _lower_opsets(proto, model.opset_imports, original)
    if weights:
        proto.graph.CopyFrom(lower_graph(model.graph))
    else:
        _lower_structure(proto.graph, model.graph)
    if model.metadata_props or (original is not None and original.metadata_props):
        _lower_metadata(proto, model.metadata_props, original)
    proto.functions.extend([lower_function(f) for f in model.functions.values()])
    return proto


def model_dir(path: str | os.PathLike[str]) -> str:
    """The folder external data of a model file is relative to."""
    return os.path.dirname(os.path.abspath(os.fspath(path)))
