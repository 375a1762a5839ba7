"""`validate_model`: the checks a lifted model needs beyond what lifting itself refuses.

Lifting already refuses values read but never defined and values defined twice. This module
checks the rest of what makes a model unusable: cycles among nodes, nodes in a domain the
model (or its function) does not import, nodes whose op a standard domain does not define in
any opset (custom domains and model-local functions are not checked), nodes without an
attribute their op requires (a Loop without `body`), a model of IR version 3 or later that
imports no opset, names and
model fields that are not UTF-8 text (protobuf hands those out as bytes), graph inputs and
outputs of an unknown element type, and tensors whose data disagrees with their declared type
and shape (raw byte count, count of typed values, external-data length and file size).

Invariants: no external-data byte is ever read (only file sizes); an embedded tensor's
`raw_data` is measured one tensor at a time, so at most one tensor's bytes are copied at once;
the graph is not changed. Part of the serde layer: tensor checks read the original
TensorProtos that `ProtoTensor` wraps, and the attributes lifting left for later are checked
in their original messages (see `_serde_origin.DeferredSource`).
"""

from __future__ import annotations

import itertools
import math
import operator
from collections.abc import Mapping
from typing import Any

import onnx

from ir._core import (
    Graph,
    GraphStructureError,
    IRError,
    Model,
    ModelLoadError,
    Node,
    Tensor,
    TensorType,
    Type,
    Value,
    _outer_values,
    topological_order,
)
from ir._enums import DataType
from ir._runtime_ops import find_runtime_op
from ir._schemas import find_schema, is_known_domain, normalize_domain, since_version
from ir._serde_origin import DeferredSource, origin_of
from ir._serde_tensors import (
    ExternalTensor,
    ProtoTensor,
    SparseProtoTensor,
    TensorDataError,
    check_external_location,
)

_DEFAULT_DOMAINS = ("", "ai.onnx")
# Ops of the standard domains whose attributes may hold tensors (from onnx's schemas; a test
# keeps this in step). Attributes of other standard ops are left unlifted by `ir.load` and
# cannot hold tensors; those of custom-domain ops are lifted eagerly and checked as they are.
TENSOR_ATTRIBUTE_OPS = frozenset(
    {
        ("", "Constant"),
        ("", "ConstantOfShape"),
        ("ai.onnx.ml", "LabelEncoder"),
        ("ai.onnx.ml", "TreeEnsemble"),
        ("ai.onnx.ml", "TreeEnsembleClassifier"),
        ("ai.onnx.ml", "TreeEnsembleRegressor"),
    }
)
# The same, keyed by the domain as a node spells it ("" or "ai.onnx").
_TENSOR_ATTRIBUTE_NODES = TENSOR_ATTRIBUTE_OPS | {
    ("ai.onnx", op) for domain, op in TENSOR_ATTRIBUTE_OPS if not domain
}
_KNOWN_TYPES = {int(t): t for t in DataType}
# TensorProto's typed value fields and the element types that use each (onnx.proto).
_FIELD_TYPES: dict[str, frozenset[DataType]] = {
    "float_data": frozenset({DataType.FLOAT, DataType.COMPLEX64}),
    "double_data": frozenset({DataType.DOUBLE, DataType.COMPLEX128}),
    "int64_data": frozenset({DataType.INT64}),
    "uint64_data": frozenset({DataType.UINT32, DataType.UINT64}),
    "string_data": frozenset({DataType.STRING}),
}
_TYPED_FIELDS = ("int32_data", *_FIELD_TYPES)
# Keyed by the int code of the element type, so the per-tensor checks hash plain ints.
_FIELD_FOR: dict[int, str] = {
    int(dtype): next((f for f, types in _FIELD_TYPES.items() if dtype in types), "int32_data")
    for dtype in DataType
    if dtype != DataType.UNDEFINED
}
_BITS = {int(dtype): dtype.bitwidth for dtype in DataType}
_STRING = int(DataType.STRING)
_UNDEFINED = int(DataType.UNDEFINED)
_COMPLEX = (int(DataType.COMPLEX64), int(DataType.COMPLEX128))


def validate_model(model: Model) -> None:
    """Check that `model` can be used: acyclic, domains imported, tensor data consistent.

    Reads no external data (only the sizes of data files) and decodes no tensor.

    Raises:
        ModelLoadError: a cycle (naming a node on it), a node whose domain is not imported
            (naming the node and the domain), a node whose op its standard domain does not
            define at the imported opset (naming the node and the op), a node without an
            attribute its schema requires, no opset import at all (IR version 3 or later),
            text that is not UTF-8, or a graph input or output of an unknown element type.
        TensorDataError: a tensor's data disagrees with its type and shape (naming the
            tensor, and the node when it is an attribute).
        ExternalDataError: external data is unsafe, missing or shorter than declared.
    """
    for field in ("producer_name", "producer_version", "domain", "doc_string"):
        text = getattr(model, field)
        if not isinstance(text, str):
            raise ModelLoadError(f"model {field} {text!r} is not UTF-8 text")
    for opsets in (model.opset_imports, *(fn.opset_imports for fn in model.functions.values())):
        for domain in opsets:
            if not isinstance(domain, str):
                # Checked here, a node domain that is not text is then never "imported".
                raise ModelLoadError(f"opset_import domain {domain!r} is not UTF-8 text")
    if model.ir_version >= 3 and not model.opset_imports:
        # onnx's checker and onnxruntime refuse it too: with no import the opset of every
        # node is unknown (writing one out would invent a version).
        raise ModelLoadError(
            f"the model (IR version {model.ir_version}) imports no opset: opset_import is empty"
        )
    imports = _domains(model.opset_imports)
    ops = _OpCheck(model.opset_imports, model)
    origin = origin_of(model)
    unknown = origin.unknown_element_types if origin is not None else {}
    for graph in model.graph.all_graphs():
        _check_graph(graph, imports, model.opset_imports, model.base_dir, unknown)
        ops.check(graph)
    for fn in model.functions.values():
        fn_imports = imports | _domains(fn.opset_imports)
        declared = {**model.opset_imports, **fn.opset_imports}
        fn_ops = _OpCheck(declared, model)
        for graph in fn.graph.all_graphs():
            _check_graph(graph, fn_imports, declared, model.base_dir, unknown)
            fn_ops.check(graph)


def _domains(opset_imports: dict[str, int]) -> frozenset[str]:
    domains = set(opset_imports)
    if domains & set(_DEFAULT_DOMAINS) or not domains:
        # "ai.onnx" is the default domain's other name; a model importing nothing at all is
        # an old one (IR version < 3) whose default opset is implied.
        domains.update(_DEFAULT_DOMAINS)
    return frozenset(domains)


class _OpCheck:
    """Refuses nodes of ops their domain does not define, or without a required attribute.

    An op is refused when no version of its standard domain defines it; a node when it lacks
    an attribute its op's schema requires at the imported opset (a Loop without `body`).
    Answers are kept per (domain, op type), so each distinct op is looked up once per model.
    """

    __slots__ = ("_answers", "_functions", "_opsets", "_required")

    def __init__(self, declared: dict[str, int], model: Model) -> None:
        self._opsets = {normalize_domain(domain): version for domain, version in declared.items()}
        self._functions = {(domain, name) for domain, name, _ in model.functions}
        self._answers: dict[tuple[str, str], str | None] = {}
        self._required: dict[tuple[str, str], tuple[str, ...]] = {}

    def check(self, graph: Graph) -> None:
        """Raise for the first node of `graph` (not its subgraphs) whose op does not exist."""
        answers = self._answers
        required = self._required
        for node in graph._nodes:
            key = (node._domain, node._op_type)
            if key in answers:
                problem = answers[key]
            else:
                problem = answers[key] = self._problem(*key)
                required[key] = self._required_attributes(*key)
            if problem is not None:
                raise ModelLoadError(f"graph {graph.name!r}: node {_node_label(node)}: {problem}")
            if required[key]:
                present = _attribute_names(node)
                missing = [name for name in required[key] if name not in present]
                if missing:
                    raise ModelLoadError(
                        f"graph {graph.name!r}: node {_node_label(node)}: required attribute "
                        f"{missing[0]!r} is missing"
                    )

    def _required_attributes(self, domain: str, op_type: str) -> tuple[str, ...]:
        """Attributes the op's schema at the imported opset marks required."""
        if (domain, op_type) in self._functions or not is_known_domain(domain):
            return ()
        version = self._opsets.get(normalize_domain(domain))
        schema = find_schema(op_type, domain, version) if version is not None else None
        if schema is None:
            return ()
        return tuple(name for name, attr in schema.attributes.items() if attr.required)

    def _problem(self, domain: str, op_type: str) -> str | None:
        """Why `op_type` cannot be used in `domain`, or None when it can (or is unchecked).

        Only ops that no version of the standard domain defines, and that onnxruntime does not
        run in that domain at the imported opset either (`_runtime_ops`), are refused. An op
        of a newer opset than the imported one is allowed: onnxruntime's own optimizer writes
        `LayerNormalization` into opset-14 models (its kernel is registered from opset 1),
        and such models run.
        """
        if (domain, op_type) in self._functions or not is_known_domain(domain):
            return None
        version = self._opsets.get(normalize_domain(domain))
        if version is None:
            return None  # no import (an old model): the implied opset is unknown
        if find_schema(op_type, domain, version) is not None:
            return None
        if find_runtime_op(op_type, domain, version) is not None:
            return None
        if since_version(op_type, domain) is None:
            opset = f"{normalize_domain(domain) or 'ai.onnx'} opset {version}"
            return f"op {op_type!r} does not exist in {opset}" + _runtime_note(op_type, domain)
        return None


def _runtime_note(op_type: str, domain: str) -> str:
    """Where onnxruntime runs an op onnx does not define (it refuses the node elsewhere)."""
    op = find_runtime_op(op_type, domain, None)
    if op is None or op.end_opset is None:
        return ""
    return (
        f", and onnxruntime runs its own {op_type!r} in that domain only from opset "
        f"{op.first_opset} to {op.end_opset - 1}"
    )


def _attribute_names(node: Node) -> frozenset[str]:
    """The node's attribute names, without lifting attributes lifting left for later."""
    attrs = node._attributes
    if isinstance(attrs, DeferredSource):
        return frozenset(a.name for a in attrs.attribute_protos(node))
    return frozenset(node.attributes)


def _check_graph(
    graph: Graph,
    imports: frozenset[str],
    declared: dict[str, int],
    base_dir: str | None,
    unknown_element_types: Mapping[Value, int],
) -> None:
    """One pass over the nodes (order, domains, attribute tensors), then the initializers.

    The full sort runs only for a graph out of order, to name a node on a cycle if any.
    """
    _check_text(graph)
    _check_signature(graph, unknown_element_types)
    nodes = graph._nodes
    seen: set[Node] = set()
    add = seen.add
    in_order = True
    tensor_ops = _TENSOR_ATTRIBUTE_NODES
    for node in nodes:
        if in_order:
            for value in node._inputs:
                if value is not None:
                    producer = value._producer
                    if producer is not None and producer not in seen and producer in nodes:
                        in_order = False
        domain = node._domain
        if domain not in imports:
            raise ModelLoadError(
                f"graph {graph.name!r}: node {_node_label(node)} uses domain {domain!r}, "
                f"which the model does not import (opset_import: {_list_imports(declared)})"
            )
        attrs = node._attributes
        deferred = isinstance(attrs, DeferredSource)
        if (attrs and not deferred) or (deferred and (domain, node._op_type) in tensor_ops):
            if in_order and not _subgraphs_in_order(node, seen, nodes):
                in_order = False
            _check_attribute_tensors(node, base_dir)
        add(node)
    if not in_order:
        try:
            topological_order(graph)
        except GraphStructureError as exc:
            raise ModelLoadError(str(exc)) from exc
    for value in (*graph._initializers.values(), *graph._sparse_initializers.values()):
        tensor = value._const_value
        if tensor is not None:
            _check_tensor(tensor, value.name)


_NAME = operator.attrgetter("_name")
_OUTPUTS = operator.attrgetter("_outputs")


def _check_text(graph: Graph) -> None:
    """Names must be text: protobuf gives bytes for a string field that is not UTF-8.

    Joined at C speed; only a graph that fails is searched for the culprit.
    """
    nodes = graph._nodes
    try:
        "".join(map(_NAME, nodes))
        "".join(map(_NAME, itertools.chain.from_iterable(map(_OUTPUTS, nodes))))
        "".join(map(_NAME, graph._inputs))
        "".join(graph._initializers)
        "".join((graph.name, graph.doc_string))
    except TypeError:
        raise ModelLoadError(_describe_non_text(graph)) from None


def _describe_non_text(graph: Graph) -> str:
    if not isinstance(graph.name, str):
        return f"graph name {graph.name!r} is not UTF-8 text"
    if not isinstance(graph.doc_string, str):
        return f"graph {graph.name!r}: doc_string {graph.doc_string!r} is not UTF-8 text"
    for value in (*graph._inputs, *graph._initializers.values()):
        if not isinstance(value._name, str):
            return f"graph {graph.name!r}: value name {value._name!r} is not UTF-8 text"
    for node in graph._nodes:
        for what, text in (("name", node._name), ("domain", node._domain)):
            if not isinstance(text, str):
                return f"graph {graph.name!r}: node {what} {text!r} is not UTF-8 text"
        for value in node._outputs:
            if not isinstance(value._name, str):
                return (
                    f"graph {graph.name!r}: node {_node_label(node)} output name "
                    f"{value._name!r} is not UTF-8 text"
                )
    return f"graph {graph.name!r}: a name is not UTF-8 text"


def _check_signature(graph: Graph, unknown_element_types: Mapping[Value, int]) -> None:
    """Graph inputs and outputs must be named and have element types that onnx defines."""
    for role, values in (("input", graph._inputs), ("output", graph._outputs)):
        for index, value in enumerate(values):
            if not value._name:
                # ONNX reads an empty name as "absent": the graph would lose the value.
                raise ModelLoadError(f"graph {graph.name!r}: {role} {index} has no name")
            code = unknown_element_types.get(value)
            if code is not None and _still_undefined(value.type):
                raise ModelLoadError(
                    f"graph {graph.name!r}: {role} {value.name!r} has unknown element type {code}"
                )


def _still_undefined(declared: Type | None) -> bool:
    """Whether a type lifted with an element type onnx does not define still says so."""
    return isinstance(declared, TensorType) and declared.dtype == DataType.UNDEFINED


def _list_imports(opset_imports: dict[str, int]) -> str:
    return ", ".join(
        f"{domain or 'ai.onnx'} {version}" for domain, version in opset_imports.items()
    )


def _node_label(node: Node) -> str:
    op = node._op_type if node._domain in _DEFAULT_DOMAINS else f"{node._domain}.{node._op_type}"
    return f"{node._name or node._op_type!r} ({op})"


def _subgraphs_in_order(node: Node, seen: set[Node], nodes: dict[Node, None]) -> bool:
    """Whether the outer values the node's subgraphs read come from nodes before it."""
    for sub in node.subgraphs():
        for value in _outer_values(sub):
            producer = value._producer
            if producer is not None and producer not in seen and producer in nodes:
                return False
    return True


def _check_attribute_tensors(node: Node, base_dir: str | None) -> None:
    """Check the tensors a node's attributes hold, without lifting attributes left unread."""
    try:
        attrs = node._attributes
        if isinstance(attrs, DeferredSource):
            for proto in attrs.attribute_protos(node):
                if proto.HasField("t"):
                    _check_attribute_proto(proto.t, base_dir)
                for tensor in proto.tensors:
                    _check_attribute_proto(tensor, base_dir)
            return
        for attr in node.attributes.values():
            value = attr.value
            for tensor in value if isinstance(value, tuple) else (value,):
                if isinstance(tensor, Tensor):
                    _check_tensor(tensor, tensor.name)
    except IRError as exc:
        raise type(exc)(f"node {_node_label(node)}: {exc}") from exc


def _check_attribute_proto(proto: Any, base_dir: str | None) -> None:
    if proto.data_location == onnx.TensorProto.EXTERNAL:
        check_external_location(proto)
        _check_tensor(ExternalTensor(proto, base_dir), proto.name)
    else:
        check_tensor_proto(proto, proto.name)


def _check_tensor(tensor: Tensor, name: str) -> None:
    if isinstance(tensor, ProtoTensor):
        check_tensor_proto(tensor._proto, name)
    elif isinstance(tensor, ExternalTensor):
        _known_type(tensor._proto, name)
        tensor.check()
    elif isinstance(tensor, SparseProtoTensor):
        check_tensor_proto(tensor._proto.values, name, " (values)")
        check_tensor_proto(tensor._proto.indices, name, " (indices)")


def _known_type(proto: Any, name: str, part: str = "") -> DataType:
    dtype = _KNOWN_TYPES.get(proto.data_type)
    if dtype is None:
        raise TensorDataError(f"tensor {name!r}{part}: unknown data type {proto.data_type}")
    return dtype


def check_tensor_proto(proto: Any, name: str, part: str = "") -> None:
    """Check an embedded TensorProto's data against its type and shape (no decoding).

    Runs for every tensor of every loaded model, so the usual case is kept to a few field
    reads; messages are built only for a tensor that fails.

    Raises:
        TensorDataError: naming the tensor (`name`, then `part` such as " (values)"), the
            field in use, what it holds and what the declared type and shape need.
    """
    code = proto.data_type
    bits = _BITS.get(code)
    if bits is None or code == _UNDEFINED:
        what = "no data type (UNDEFINED)" if code == _UNDEFINED else f"unknown data type {code}"
        raise TensorDataError(f"tensor {name!r}{part}: {what}")
    dims = proto.dims
    if dims and min(dims) < 0:
        raise TensorDataError(f"tensor {name!r}{part}: negative dimension in shape {list(dims)}")
    count = math.prod(dims)
    if proto.HasField("raw_data"):
        # One copy of this tensor's bytes, dropped at once (protobuf has no length accessor).
        size = len(proto.raw_data)
        if size != (count * bits + 7) // 8 or code == _STRING:
            _raise_raw_data(proto, f"tensor {name!r}{part}", size, count)
        return
    field = _FIELD_FOR.get(code)
    if field is not None and len(getattr(proto, field)) == _typed_count(code, count):
        return  # the usual case (readers ignore any other field)
    _raise_typed_data(proto, f"tensor {name!r}{part}", count)


def _raise_raw_data(proto: Any, label: str, size: int, count: int) -> None:
    dtype = DataType(proto.data_type)
    if dtype == DataType.STRING:
        raise TensorDataError(f"{label}: a string tensor cannot hold raw_data")
    needed = (count * dtype.bitwidth + 7) // 8
    raise TensorDataError(
        f"{label}: raw_data holds {size} bytes but {_declared(proto)} needs {needed}"
    )


def _raise_typed_data(proto: Any, label: str, count: int) -> None:
    """Report what is wrong with a tensor whose typed value field does not fit (if anything)."""
    code = proto.data_type
    dtype = DataType(code)
    expected_field = _FIELD_FOR.get(code)
    used = [(field, len(getattr(proto, field))) for field in _TYPED_FIELDS]
    used = [(field, n) for field, n in used if n]
    if not used:
        if count:
            raise TensorDataError(
                f"{label}: holds no data but {_declared(proto)} needs {count} values"
            )
        return
    field, n = used[0]
    if len(used) > 1 or field != expected_field:
        held = ", ".join(f"{f} ({k})" for f, k in used)
        raise TensorDataError(
            f"{label}: a {dtype.onnx_name} tensor keeps its values in "
            f"{expected_field or 'raw_data'}, but it holds {held}"
        )
    noun = "value" if n == 1 else "values"
    raise TensorDataError(
        f"{label}: {field} holds {n} {noun} but {_declared(proto)} needs "
        f"{_typed_count(code, count)}"
    )


def _declared(proto: Any) -> str:
    return f"{DataType(proto.data_type).onnx_name}{list(proto.dims)}"


def _typed_count(code: int, count: int) -> int:
    """How many entries of its typed field a tensor of `count` elements needs."""
    if code in _COMPLEX:
        return 2 * count
    bits = _BITS[code]
    if 0 < bits < 8:
        return (count * bits + 7) // 8  # sub-byte values packed into bytes
    return count
