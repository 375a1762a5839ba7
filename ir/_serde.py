"""Lifting (ONNX protobuf -> IR) and lowering (IR -> ONNX protobuf).

This is the one module of the IR that reads and writes ONNX protobuf messages (with its
helpers `_serde_tensors` for tensor payloads and `_serde_origin` for what lowering keeps of
the messages a model came from). Lifting builds every object through the IR's constructors,
exactly as a pass would. Lowering is lossless: everything lifting did not interpret is copied
from the original messages, and every node, graph, attribute and value_info entry that was not
changed since lifting is emitted as the original message, so `lower(lift(m)) == m` field by
field.
"""

from __future__ import annotations

import functools
import logging
import math
import operator
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence, Set
from sys import intern
from typing import Any

import onnx

from ir import _core
from ir import _serde_origin as _origin
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
    embedded_proto,
    tensor_to_proto,
)

logger = logging.getLogger(__name__)

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
_UNSEEN = object()


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
    """Lifts one model through the IR's constructors, recording its origin for lowering.

    Holds the external-data folder for tensors, the types met so far (equal TypeProtos give
    one shared, immutable Type), which values took a value_info description (the first one
    that applies wins), and the origins of the graphs and functions built.
    """

    def __init__(self, base_dir: str | None) -> None:
        self.base_dir = base_dir
        self.external: list[ExternalTensor] = []
        self._types: dict[bytes, Type | None] = {}
        self._described: dict[Value, None] = {}
        self._unknown_element_types: dict[Value, int] = {}
        self._graphs: dict[Graph, _origin.GraphOrigin] = {}
        self._functions: dict[Function, _origin.FunctionOrigin] = {}

    # tensors ---------------------------------------------------------------------------------
    def tensor(self, proto: onnx.TensorProto) -> Tensor:
        if proto.data_location == onnx.TensorProto.EXTERNAL:
            check_external_location(proto)
            tensor = ExternalTensor(proto, self.base_dir)
            self.external.append(tensor)
            return tensor
        return ProtoTensor(proto)

    # attributes ------------------------------------------------------------------------------
    def attr(self, proto: onnx.AttributeProto, scope: _Scope) -> Attr:
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
        return Attr(proto.name, _ATTR_TYPES[kind], value, proto.ref_attr_name, proto.doc_string)

    def attributes(self, protos: Iterable[onnx.AttributeProto], scope: _Scope) -> dict[str, Attr]:
        """Attributes by name (a repeated name keeps its first place and its last value)."""
        attrs: dict[str, Attr] = {}
        for proto in protos:
            attr = self.attr(proto, scope)
            attrs[attr.name] = attr
        return attrs

    # values ----------------------------------------------------------------------------------
    def lifted_type(self, info: onnx.ValueInfoProto) -> Type | None:
        """The type a ValueInfoProto declares; equal messages give the same Type object."""
        type_proto = info.type
        key = type_proto.SerializeToString()
        found = self._types.get(key, _UNSEEN)
        if found is _UNSEEN:
            # An empty key is an absent `type` or a present but empty one: not shared.
            found = lift_type(type_proto) if info.HasField("type") else None
            if key:
                self._types[key] = found
        return found  # type: ignore[return-value]

    def describe(self, value: Value, info: onnx.ValueInfoProto) -> None:
        """Give `value` the type, doc string and metadata of `info`, unless one already did.

        For graph inputs and outputs: an element type onnx does not define is noted for
        `validate_model` (the type says UNDEFINED).
        """
        described = self._described
        if value in described:
            return
        described[value] = None
        lifted = self.lifted_type(info)
        value.type = lifted
        if isinstance(lifted, TensorType) and lifted.dtype is DataType.UNDEFINED:
            code = info.type.tensor_type.elem_type
            if code not in _DATA_TYPES:
                self._unknown_element_types[value] = code
        doc = info.doc_string
        if doc:
            value.doc_string = doc
        if info.metadata_props:
            value.metadata_props = {e.key: e.value for e in info.metadata_props}

    # graphs ----------------------------------------------------------------------------------
    def graph(self, proto: onnx.GraphProto, scope: _Scope) -> Graph:
        names = scope.names
        inputs: list[Value] = []
        for info in proto.input:
            value = Value(info.name)
            self.describe(value, info)
            names[info.name] = value
            inputs.append(value)
        initializers: dict[str, Value] = {}
        for tensor_proto in proto.initializer:
            name = tensor_proto.name
            tensor = self.tensor(tensor_proto)
            existing = names.get(name)
            if existing is not None and existing.const_value is None:
                existing.const_value = tensor  # an initializer that is also a graph input
                value = existing
            else:
                value = Value(name, const_value=tensor)
                names[name] = value
            initializers[name] = value  # a repeated name keeps its place, with the last one
        sparse: dict[str, Value] = {}
        for sparse_proto in proto.sparse_initializer:
            name = sparse_proto.values.name
            value = names.get(name) or Value(name)
            value.const_value = SparseProtoTensor(sparse_proto)
            names[name] = value
            sparse[name] = value
        nodes, deferred, with_subgraphs = self._nodes(proto.name, proto.node, scope)
        outputs: list[Value] = []
        for info in proto.output:
            found = scope.lookup(info.name)
            if found is None:
                raise GraphStructureError(
                    f"graph {proto.name!r}: output {info.name!r} is not defined by any node, "
                    "input or initializer"
                )
            self.describe(found, info)
            outputs.append(found)
        described = self._value_info(proto.value_info, scope)
        metadata = proto.metadata_props
        try:
            graph = Graph(
                inputs,
                outputs,
                nodes,
                initializers.values(),
                sparse_initializers=sparse.values(),
                name=proto.name,
                doc_string=proto.doc_string,
                metadata_props={e.key: e.value for e in metadata} if metadata else None,
            )
        except ValueError as exc:
            raise GraphStructureError(f"graph {proto.name!r}: {exc}") from exc
        origin = _origin.snapshot_graph(graph, proto, described, deferred, with_subgraphs)
        self._graphs[graph] = origin
        return graph

    def _value_info(
        self, infos: Iterable[onnx.ValueInfoProto], scope: _Scope
    ) -> list[Value | None]:
        """Describe the values value_info entries name; the value of each entry, in order.

        `describe` inlined: a graph has an entry for nearly every value.
        """
        entries: list[Value | None] = []
        described = self._described
        types = self._types
        local = scope.names.get
        for info in infos:
            name = info.name
            found = local(name) or scope.lookup(name)
            entries.append(found)
            if found is None or found in described:
                continue
            described[found] = None
            lifted = types.get(info.type.SerializeToString(), _UNSEEN)
            if lifted is _UNSEEN:
                lifted = self.lifted_type(info)
            found.type = lifted  # type: ignore[assignment]
            doc = info.doc_string
            if doc:
                found.doc_string = doc
            if info.metadata_props:
                found.metadata_props = {e.key: e.value for e in info.metadata_props}
        return entries

    def _nodes(
        self, graph_name: str, protos: Sequence[onnx.NodeProto], scope: _Scope
    ) -> tuple[list[Node], _origin.DeferredSource, list[int]]:
        """Build the nodes of a graph (or function body), in order, through `Node`.

        Attributes of standard ops that cannot hold graphs are left to a DeferredSource and
        lifted on first access; those of other nodes are lifted now, so that outer-scope
        references inside their subgraphs resolve in `scope`. Returns the nodes, the source
        and the positions of the nodes given graph attributes.
        """
        names = scope.names
        # Pass 1: the outputs of every node, so that inputs resolve in any node order.
        outputs: list[Value] = []
        ends: list[int] = []
        for proto in protos:
            for out_name in proto.output:
                value = Value(out_name)
                if out_name:
                    if out_name in names:
                        raise GraphStructureError(
                            f"graph {graph_name!r}: value {out_name!r} is defined twice "
                            f"(again by node {proto.name or proto.op_type!r})"
                        )
                    names[out_name] = value
                outputs.append(value)
            ends.append(len(outputs))
        # Pass 2: resolve inputs (local scope first, then enclosing graphs), build the nodes.
        deferred = _origin.DeferredSource(functools.partial(_lift_later, self.base_dir))
        local = names.get
        # An unnamed graph input is in `names` under "": then "" (an absent input) must not
        # be looked up there.
        unnamed = "" in names
        standard = _STANDARD_DOMAINS
        graph_ops = _GRAPH_OPS
        nodes: list[Node] = []
        with_subgraphs: list[int] = []
        start = 0
        for proto, end in zip(protos, ends, strict=True):
            # One shared str per op type instead of one per node (lifting is memory-bound).
            try:
                op_type = intern(proto.op_type)
            except TypeError:  # protobuf gives bytes for an op type that is not UTF-8
                raise GraphStructureError(
                    f"graph {graph_name!r}: node op_type {proto.op_type!r} is not UTF-8 text"
                ) from None
            input_names = proto.input
            inputs = list(map(local, input_names))
            if unnamed or None in inputs:
                inputs = self._outer_inputs(graph_name, proto, input_names, scope)
            domain = proto.domain
            attributes: dict[str, Attr] | _origin.DeferredSource
            if domain in standard and op_type not in graph_ops:
                attributes = deferred  # without even looking whether there are any
            else:
                attributes = self.attributes(proto.attribute, scope)
                if any(attr.is_graph for attr in attributes.values()):
                    with_subgraphs.append(len(nodes))
            metadata = proto.metadata_props
            nodes.append(
                Node._create(
                    op_type,
                    domain,
                    proto.overload,
                    proto.name,
                    proto.doc_string,
                    {e.key: e.value for e in metadata} if metadata else None,
                    tuple(inputs),
                    attributes,
                    tuple(outputs[start:end]),
                )
            )
            start = end
        return nodes, deferred, with_subgraphs

    @staticmethod
    def _outer_inputs(
        graph_name: str, proto: onnx.NodeProto, input_names: Iterable[str], scope: _Scope
    ) -> list[Value | None]:
        """A node's inputs when some are absent ("") or defined in an enclosing graph."""
        inputs: list[Value | None] = []
        for name in input_names:
            if not name:
                inputs.append(None)
                continue
            found = scope.lookup(name)
            if found is None:
                raise GraphStructureError(
                    f"graph {graph_name!r}: node {proto.name or proto.op_type!r} "
                    f"({proto.op_type}) reads {name!r}, which nothing defines"
                )
            inputs.append(found)
        return inputs

    # functions and models --------------------------------------------------------------------
    def function(self, proto: onnx.FunctionProto) -> Function:
        scope = _Scope(None)
        inputs = [Value(name) for name in proto.input]
        scope.names.update((value.name, value) for value in inputs)
        nodes, deferred, with_subgraphs = self._nodes(proto.name, proto.node, scope)
        outputs: list[Value] = []
        for name in proto.output:
            found = scope.lookup(name)
            if found is None:
                raise GraphStructureError(
                    f"function {proto.domain}.{proto.name}: output {name!r} is not defined"
                )
            outputs.append(found)
        described = self._value_info(proto.value_info, scope)
        try:
            graph = Graph(inputs, outputs, nodes, name=proto.name)
        except ValueError as exc:
            raise GraphStructureError(f"function {proto.domain}.{proto.name}: {exc}") from exc
        origin = _origin.snapshot_graph(graph, proto, described, deferred, with_subgraphs)
        self._graphs[graph] = origin
        defaults = [self.attr(a, scope) for a in proto.attribute_proto]
        metadata = proto.metadata_props
        fn = Function(
            proto.domain,
            proto.name,
            graph,
            overload=proto.overload,
            attributes=list(proto.attribute),
            attribute_defaults=defaults,
            opset_imports={o.domain: o.version for o in proto.opset_import},
            doc_string=proto.doc_string,
            metadata_props={e.key: e.value for e in metadata} if metadata else None,
        )
        self._functions[fn] = _origin.FunctionOrigin(proto, tuple(defaults))
        return fn

    def model(self, proto: onnx.ModelProto) -> Model:
        graph = self.graph(proto.graph, _Scope(None))
        metadata = proto.metadata_props
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
            metadata_props={e.key: e.value for e in metadata} if metadata else None,
            base_dir=self.base_dir,
        )
        origin = _origin.snapshot_model(
            proto, self._graphs, self._functions, self._unknown_element_types
        )
        _origin.remember(model, origin)
        return model


def _lift_later(base_dir: str | None, protos: Iterable[onnx.AttributeProto]) -> dict[str, Attr]:
    """The attributes a node left for later (they hold no graphs, so they need no scope).

    A lifter of their own: the one that built the model (and all it keeps while lifting) is
    not kept alive for them.
    """
    return _Lifter(base_dir).attributes(protos, _Scope(None))


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


# onnxruntime's own domains, each at version 1 only. onnxruntime runs a model whose nodes use
# one of them without importing it (its transformer generators write such models).
RUNTIME_DOMAINS = ("com.microsoft", "com.microsoft.nchwc", "com.ms.internal.nhwc")


def import_runtime_domains(model: Model) -> tuple[str, ...]:
    """Import the domains `model`'s nodes use without an import, as onnxruntime reads them.

    onnxruntime's own domains are imported at version 1; onnx's default domain, used without
    an import by a model that imports another domain (onnxruntime's
    SimplifiedLayerNormalization fusion tests build such models), at the newest opset the
    installed onnx defines, as onnxruntime imports every domain it knows at its newest
    version (a model that imports no domain at all onnxruntime refuses, and so does
    `validate_model`). Lifting does this for every model, so what onnxruntime runs loads and
    converts. Returns the domains added ('' for the default domain; none for a model that
    imports what it uses). Other domains a node uses without an import stay refused by
    `validate_model`.
    """
    used = {
        node.domain
        for graph in (
            *model.graph.all_graphs(),
            *(g for fn in model.functions.values() for g in fn.graph.all_graphs()),
        )
        for node in graph
    }
    imports = model.opset_imports
    added = tuple(sorted((used & set(RUNTIME_DOMAINS)) - set(imports)))
    for domain in added:
        imports[domain] = 1
    # A model that imports nothing at all stays refused, as onnxruntime refuses it.
    if imports and used & {"", "ai.onnx"} and not {"", "ai.onnx"} & set(imports):
        imports[""] = onnx.defs.onnx_opset_version()
        added = ("", *added)
    return added


def from_onnx(proto: onnx.ModelProto, base_dir: str | None = None) -> Model:
    """Lift a ModelProto into the IR (see `lift_model`)."""
    return lift_model(proto, base_dir)[0]


def lift_model(
    proto: onnx.ModelProto, base_dir: str | None = None
) -> tuple[Model, list[ExternalTensor]]:
    """Lift a ModelProto into the IR; also returns the external tensors met while lifting.

    Lowering reuses the messages of `proto` for the parts of the model that do not change,
    so the caller should not mutate `proto` afterwards.

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
    try:
        model = lifter.model(proto)
    except GraphStructureError as exc:
        raise ModelLoadError(str(exc)) from exc
    for domain in import_runtime_domains(model):
        if domain:
            logger.warning(
                "nodes use onnxruntime's domain %r, which the model does not import; imported "
                "at version 1, as onnxruntime reads it",
                domain,
            )
        else:
            logger.warning(
                "nodes use onnx's default domain, which the model does not import; imported at "
                "opset %d (the newest onnx defines), as onnxruntime reads it",
                model.opset_imports[""],
            )
    return model, lifter.external


# ---------------------------------------------------------------------------------------------
# Lowering


def _assign(message: Any, field: str, value: object) -> None:
    """Set a scalar field only when it differs, so unchanged fields keep their presence."""
    if getattr(message, field) != value:
        setattr(message, field, value)


def _lower_string(value: str | bytes) -> bytes:
    return value.encode("utf-8") if isinstance(value, str) else value


class _Lowering:
    """One lowering of IR objects to messages.

    With the origin of a lifted model and `reuse` set, every part that did not change since
    lifting (see `_serde_origin.Changes`) is emitted as the message it was lifted from, and a
    changed node, graph or function starts from its original message to keep the fields the
    IR does not model. Without an origin (or with `reuse` off) everything is built from the
    IR; the original messages still provide the fields the IR does not model.
    """

    __slots__ = ("_changes", "_origin")

    def __init__(self, origin: _origin.ModelOrigin | None, *, reuse: bool = True) -> None:
        self._origin = origin
        self._changes = _origin.Changes(origin) if reuse and origin is not None else None

    def _graph_origin(self, graph: Graph) -> _origin.GraphOrigin | None:
        return self._origin.graphs.get(graph) if self._origin is not None else None

    # attributes ------------------------------------------------------------------------------
    def attr(self, attr: Attr, original: Any = None) -> onnx.AttributeProto:
        """An AttributeProto for `attr`; `original` is the message it was lifted from."""
        changes = self._changes
        subgraphs = attr.graphs()
        if original is not None and changes is not None:
            if all(changes.graph_unchanged(g) for g in subgraphs):
                return original  # type: ignore[no-any-return]
            proto = onnx.AttributeProto()
            proto.CopyFrom(original)
            # Only graph contents can differ from the original: rebuild those fields.
            if attr.type == AttrType.GRAPH:
                proto.g.Clear()
                self.graph_into(proto.g, subgraphs[0])
            else:
                del proto.graphs[:]
                for g in subgraphs:
                    self.graph_into(proto.graphs.add(), g)
            return proto
        return self._new_attr(attr)

    def _new_attr(self, attr: Attr) -> onnx.AttributeProto:
        proto = onnx.AttributeProto()
        proto.name = _text(attr.name, "attribute name")
        proto.type = int(attr.type)  # type: ignore[assignment]
        if attr.ref_attr_name:
            proto.ref_attr_name = _text(attr.ref_attr_name, "attribute reference")
        if attr.doc_string:
            proto.doc_string = _text(attr.doc_string, "attribute doc string")
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
            self.graph_into(proto.g, value)
        elif kind == AttrType.GRAPHS:
            for g in value:
                self.graph_into(proto.graphs.add(), g)
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

    # nodes -----------------------------------------------------------------------------------
    def node(
        self, node: Node, origin: _origin.GraphOrigin | None = None, position: int | None = None
    ) -> onnx.NodeProto:
        """A NodeProto for `node`, built from `origin.proto.node[position]` when given."""
        original: Any = None
        lifted: dict[str, Attr] | None = None
        if origin is not None and position is not None:
            original = origin.proto.node[position]
            changes = self._changes
            if changes is not None and changes.node_unchanged(node, origin, position):
                return original  # type: ignore[no-any-return]
            lifted = origin.lifted_attributes(position)
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
        proto.attribute.extend(self._node_attributes(node, original, lifted))
        metadata = node._metadata_props or {}
        if metadata or (original is not None and original.metadata_props):
            _lower_metadata(proto, metadata, original)
        return proto

    def _node_attributes(
        self, node: Node, original: Any, lifted: dict[str, Attr] | None
    ) -> list[onnx.AttributeProto]:
        """The node's AttributeProtos: the original message for each attribute still lifted."""
        reuse = self._changes is not None
        if reuse and original is not None and not isinstance(node._attributes, dict):
            return list(original.attribute)  # never loaded, so never changed
        protos = []
        for attr in node._attrs().values():
            source = None
            if reuse and lifted is not None and lifted.get(attr.name) is attr:
                source = _last_named(original.attribute, attr.name)
            protos.append(self.attr(attr, source))
        return protos

    # values ----------------------------------------------------------------------------------
    def value_info(self, value: Value) -> onnx.ValueInfoProto:
        """A ValueInfoProto built from `value`."""
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

    def _io_info(
        self, value: Value, lifted: tuple[Value, ...], originals: Any, index: int
    ) -> onnx.ValueInfoProto:
        """Graph input/output `index`: the original entry when it still describes `value`."""
        changes = self._changes
        if (
            changes is not None
            and index < len(lifted)
            and lifted[index] is value
            and changes.value_unchanged(value)
        ):
            return originals[index]  # type: ignore[no-any-return]
        return self.value_info(value)

    def _value_info_entries(
        self, graph: Graph, origin: _origin.GraphOrigin | None, order: Iterable[Node]
    ) -> Iterator[onnx.ValueInfoProto]:
        """value_info: the original entries still meaningful, then newly typed values.

        A generator, so that the messages are copied into the graph one at a time (a list of
        them all would be many objects alive at once, for the cyclic collector to walk).
        """
        listed: dict[Value, None] = {}
        changes = self._changes
        if origin is not None:
            for value, original in zip(origin.value_info, origin.proto.value_info, strict=True):
                if value is None:
                    yield original  # names nothing; kept as written
                    continue
                producer = value._producer
                if (producer._graph if producer is not None else value._graph) is None:
                    continue  # its definition was removed
                listed[value] = None
                if changes is not None and changes.value_unchanged(value):
                    yield original
                else:
                    yield self.value_info(value)
        outputs = dict.fromkeys(graph._outputs)
        for node in order:
            for value in node._outputs:
                if value in listed or value in outputs or not value._name:
                    continue
                if value._type is not None:
                    yield self.value_info(value)

    # graphs ----------------------------------------------------------------------------------
    def graph(self, graph: Graph, left_out: Set[str] = frozenset()) -> onnx.GraphProto:
        """A GraphProto for `graph`: the original message itself when nothing in it changed."""
        origin = self._graph_origin(graph)
        changes = self._changes
        if (
            origin is not None
            and changes is not None
            and not left_out
            and changes.graph_unchanged(graph)
        ):
            return origin.proto  # type: ignore[no-any-return]
        proto = onnx.GraphProto()
        self.graph_into(proto, graph, left_out)
        return proto

    def graph_into(
        self, target: onnx.GraphProto, graph: Graph, left_out: Set[str] = frozenset()
    ) -> None:
        """Lower `graph` into the empty message `target`, without the initializers `left_out`.

        An unchanged graph is copied from its original message; one whose nodes are still the
        lifted ones in the lifted order is copied and patched where it changed; any other is
        built node by node (each unchanged node still copied from its original message).
        """
        origin = self._graph_origin(graph)
        changes = self._changes
        if origin is not None and changes is not None and not left_out:
            if changes.graph_unchanged(graph):
                target.CopyFrom(origin.proto)
                return
            if self._patch(target, graph, origin, changes):
                return
        self._build(target, graph, origin, left_out)

    def _patch(
        self,
        target: onnx.GraphProto,
        graph: Graph,
        origin: _origin.GraphOrigin,
        changes: _origin.Changes,
    ) -> bool:
        """Copy the original message and rebuild what changed (False: the nodes moved)."""
        changed = changes.changed_positions(graph, origin)
        if changed is None:
            return False
        nodes = origin.nodes
        order = _emission_order(graph)
        if len(order) != len(nodes) or not all(map(operator.is_, order, nodes)):
            return False  # lowering would sort them
        original: Any = origin.proto
        target.CopyFrom(original)
        for position in changed:
            target.node[position].CopyFrom(self.node(nodes[position], origin, position))
        _assign(target, "name", graph.name)
        _assign(target, "doc_string", graph.doc_string)
        if graph.metadata_props != origin.metadata:
            _lower_metadata(target, graph.metadata_props, original)
        values_changed = changes.values_changed_in(graph, origin)
        inputs_changed = tuple(graph._inputs) != origin.inputs
        outputs_changed = tuple(graph._outputs) != origin.outputs
        initializers_changed = not changes.initializers_unchanged(graph, origin)
        if values_changed or inputs_changed:
            del target.input[:]
            target.input.extend(self._io_infos(graph._inputs, origin.inputs, original.input))
        if values_changed or outputs_changed:
            _refuse_unnamed_outputs(graph)
            del target.output[:]
            target.output.extend(self._io_infos(graph._outputs, origin.outputs, original.output))
        if initializers_changed:
            del target.initializer[:]
            del target.sparse_initializer[:]
            self._initializers_into(target, graph, frozenset())
        # value_info lists typed values that are not graph outputs, and drops the entries of
        # values no longer defined: only changed nodes alone leave it as it was.
        if values_changed or inputs_changed or outputs_changed or initializers_changed:
            del target.value_info[:]
            target.value_info.extend(self._value_info_entries(graph, origin, order))
        return True

    def _build(
        self,
        target: onnx.GraphProto,
        graph: Graph,
        origin: _origin.GraphOrigin | None,
        left_out: Set[str],
    ) -> None:
        """Build `graph` into `target` node by node."""
        original: Any = origin.proto if origin is not None else None
        if original is not None:
            _assign(target, "name", original.name)
            _assign(target, "doc_string", original.doc_string)
            target.quantization_annotation.extend(original.quantization_annotation)
        _assign(target, "name", graph.name)
        _assign(target, "doc_string", graph.doc_string)
        order = _emission_order(graph)
        if origin is not None:
            target.node.extend(self.node(n, origin, origin.position(n)) for n in order)
        else:
            target.node.extend(self.node(n) for n in order)
        self._initializers_into(target, graph, left_out)
        lifted_inputs = origin.inputs if origin is not None else ()
        lifted_outputs = origin.outputs if origin is not None else ()
        orig_inputs = original.input if original is not None else None
        orig_outputs = original.output if original is not None else None
        target.input.extend(self._io_infos(graph._inputs, lifted_inputs, orig_inputs))
        _refuse_unnamed_outputs(graph)
        target.output.extend(self._io_infos(graph._outputs, lifted_outputs, orig_outputs))
        target.value_info.extend(self._value_info_entries(graph, origin, order))
        if graph.metadata_props or (original is not None and original.metadata_props):
            _lower_metadata(target, graph.metadata_props, original)

    @staticmethod
    def _initializers_into(target: onnx.GraphProto, graph: Graph, left_out: Set[str]) -> None:
        target.initializer.extend(
            _initializer_proto(value)
            for name, value in graph._initializers.items()
            if name not in left_out
        )
        target.sparse_initializer.extend(
            _sparse_initializer_proto(v) for v in graph._sparse_initializers.values()
        )

    def _io_infos(
        self, values: Sequence[Value], lifted: tuple[Value, ...], originals: Any
    ) -> list[onnx.ValueInfoProto]:
        """Graph inputs or outputs: each the original entry when it still describes it."""
        return [self._io_info(value, lifted, originals, i) for i, value in enumerate(values)]

    def structure(self, target: onnx.GraphProto, graph: Graph) -> None:
        """`graph` into `target` with large initializers as typed inputs (see to_onnx).

        An unchanged graph copies its original message field by field, leaving out the large
        initializers, so their bytes are never copied.
        """
        origin = self._graph_origin(graph)
        changes = self._changes
        if origin is None or changes is None or not changes.graph_unchanged(graph):
            # Build it with every initializer but the large ones (their protos are not made).
            large = {
                name
                for name, value in graph._initializers.items()
                if value.const_value is not None
                and value.const_value.size > STRUCTURE_ONLY_ELEMENTS
            }
            self.graph_into(target, graph, large)
            declared = {info.name for info in target.input}
            for name in sorted(large, key=list(graph._initializers).index):
                tensor = graph._initializers[name].const_value
                assert tensor is not None, f"initializer {name!r} lost its tensor"
                _add_typed_input(target, declared, name, int(tensor.dtype), list(tensor.shape))
            _embed_external(target, graph)
            return
        source: Any = origin.proto
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
        declared = {info.name for info in target.input}
        for tensor in source.initializer:
            if math.prod(tensor.dims) <= STRUCTURE_ONLY_ELEMENTS:
                target.initializer.append(tensor)
            else:
                _add_typed_input(target, declared, tensor.name, tensor.data_type, list(tensor.dims))
        _embed_external(target, graph)

    # functions and models --------------------------------------------------------------------
    def function(self, fn: Function) -> onnx.FunctionProto:
        """A FunctionProto for `fn` (the original message if nothing in it changed)."""
        origin = self._origin.functions.get(fn) if self._origin is not None else None
        original: Any = origin.proto if origin is not None else None
        changes = self._changes
        if (
            origin is not None
            and changes is not None
            and changes.graph_unchanged(fn.graph)
            and _function_fields_unchanged(fn, origin)
        ):
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
        body = self._graph_origin(graph)
        proto.input.extend([v.name for v in graph._inputs])
        proto.output.extend([v.name for v in graph._outputs])
        order = _emission_order(graph)
        if body is not None:
            proto.node.extend(self.node(n, body, body.position(n)) for n in order)
        else:
            proto.node.extend(self.node(n) for n in order)
        proto.attribute.extend(fn.attributes)
        lifted = origin.attribute_defaults if origin is not None else ()
        proto.attribute_proto.extend(
            [self.attr(a, _lifted_default(a, lifted, original)) for a in fn.attribute_defaults]
        )
        _lower_opsets(proto, fn.opset_imports, original)
        proto.value_info.extend(self._value_info_entries(graph, body, order))
        if fn.metadata_props or (original is not None and original.metadata_props):
            _lower_metadata(proto, fn.metadata_props, original)
        return proto

    def model(self, model: Model, *, weights: bool = True) -> onnx.ModelProto:
        """A new ModelProto for `model` (see `to_onnx`)."""
        proto = onnx.ModelProto()
        original: Any = self._origin.proto if self._origin is not None else None
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
            self.graph_into(proto.graph, model.graph)
        else:
            self.structure(proto.graph, model.graph)
        if model.metadata_props or (original is not None and original.metadata_props):
            _lower_metadata(proto, model.metadata_props, original)
        proto.functions.extend([self.function(f) for f in model.functions.values()])
        return proto


def _embed_external(target: onnx.GraphProto, graph: Graph) -> None:
    """Give the small initializers that live in external files their bytes in `target`.

    A structure-only model is read in memory (shape inference, onnx's checker), where
    external locations do not resolve; the few small tensors it keeps are read instead.
    """
    for index, proto in enumerate(target.initializer):
        if proto.data_location != onnx.TensorProto.EXTERNAL:
            continue
        value = graph._initializers.get(proto.name)
        tensor = value.const_value if value is not None else None
        if isinstance(tensor, ExternalTensor):
            target.initializer[index].CopyFrom(embedded_proto(tensor))


def _refuse_unnamed_outputs(graph: Graph) -> None:
    if any(not v.name for v in graph._outputs):
        raise ValueError(f"graph {graph.name!r} has an unnamed output: name it first")


def _last_named(protos: Any, name: str) -> Any:
    """The last of `protos` called `name` (the one lifting kept for a repeated name)."""
    found = None
    for proto in protos:
        if proto.name == name:
            found = proto
    return found


def _lifted_default(attr: Attr, lifted: tuple[Attr, ...], original: Any) -> Any:
    """The AttributeProto a function's attribute default was lifted from, if it was."""
    for index, candidate in enumerate(lifted):
        if candidate is attr:
            return original.attribute_proto[index]
    return None


def _function_fields_unchanged(fn: Function, origin: _origin.FunctionOrigin) -> bool:
    """Whether a function's own fields still match the message it was lifted from.

    Function fields are plain attributes: functions are few, so they are compared with the
    message itself.
    """
    original = origin.proto
    return (
        fn.name == original.name
        and fn.domain == original.domain
        and fn.overload == original.overload
        and fn.doc_string == original.doc_string
        and fn.attributes == list(original.attribute)
        and len(fn.attribute_defaults) == len(origin.attribute_defaults)
        and all(map(operator.is_, fn.attribute_defaults, origin.attribute_defaults))
        and list(fn.opset_imports.items()) == [(o.domain, o.version) for o in original.opset_import]
        and fn.metadata_props == {e.key: e.value for e in original.metadata_props}
    )


def _lower_metadata(target: Any, metadata: Mapping[str, str], original: Any) -> None:
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


def _add_typed_input(
    target: onnx.GraphProto, declared: set[str], name: str, dtype: int, dims: list[int]
) -> None:
    if name in declared:
        return  # an IR-3 initializer is already an input
    declared.add(name)
    target.input.append(onnx.helper.make_tensor_value_info(name, dtype, dims))


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
        if type(node._attributes) is not dict or not node._attributes:
            continue  # no subgraphs
        for sub in node.subgraphs():
            for value in _core._outer_values(sub):
                producer = value._producer
                if producer is not None and position.get(producer, -1) > i:
                    return _core.topological_order(graph)
    return list(nodes)


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


# Initializers up to this many elements keep their data in a structure-only lowering: shape
# inference reads such constants as values (Reshape shapes, axes, Slice bounds).
STRUCTURE_ONLY_ELEMENTS = 64


def to_onnx(model: Model, *, weights: bool = True) -> onnx.ModelProto:
    """Lower an IR model to a new ModelProto (the IR model is not changed).

    Every part of a lifted model that did not change since lifting is emitted as the message
    it was read from.

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
    return lower_model(model, weights=weights)


def lower_model(model: Model, *, weights: bool = True, reuse: bool = True) -> onnx.ModelProto:
    """`to_onnx`; with `reuse` off every node, graph and function is built from the IR.

    Without reuse, the original messages of a lifted model still provide what the IR does
    not model (device configurations, quantization annotations); tests use it to check that
    building from the IR is as exact as reusing.
    """
    return _Lowering(_origin.origin_of(model), reuse=reuse).model(model, weights=weights)


def _text(value: str | bytes, what: str) -> str:
    """`value` for a string field of a new message.

    Raises:
        GraphStructureError: `value` is bytes that are not UTF-8 text, as lifting keeps such
            a field of the file; a message the file did not hold cannot carry it.
    """
    if isinstance(value, bytes):
        raise GraphStructureError(
            f"{what} {value!r} is not UTF-8 text: onnx cannot write it into a new message"
        )
    return value


def lower_node(node: Node) -> onnx.NodeProto:
    """A NodeProto built from `node` alone (what per-node inference and evaluation run)."""
    return _Lowering(None).node(node)


def model_dir(path: str | os.PathLike[str]) -> str:
    """The folder external data of a model file is relative to."""
    return os.path.dirname(os.path.abspath(os.fspath(path)))
