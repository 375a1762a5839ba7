"""Inferred types as facts about values, and onnx's per-node inference (serde layer).

Inferred types are facts for rewriting, not part of the model: they are stored on each
`Value` (`value.meta["inferred_type"]`), so lowering never adds value_info the input did not
have and a fact never passes from one value to another of the same name. `fact_type(value)`
combines the declared type with the inferred one; of a computed value, only the declared
element type is a fact. Whole-model inference is
`_shape_inference.infer_types`; `infer_node_types` types one node (the pass manager's
per-rewrite update).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Mapping

import onnx
import onnx.checker
import onnx.defs
import onnx.helper
import onnx.shape_inference

from ir import _schemas
from ir._contrib_ops import ContribOp, StandInput, find_contrib_op
from ir._core import (
    Dim,
    IRError,
    MapType,
    Node,
    OptionalType,
    SequenceType,
    SparseTensorType,
    Tensor,
    TensorType,
    Type,
    Value,
)
from ir._enums import AttrType
from ir._runtime_ops import find_runtime_op, runtime_op_types
from ir._serde import lift_type, lower_node, lower_type
from ir._serde_tensors import SparseProtoTensor, tensor_to_proto
from ir._shape_disputes import has_disputed_dims

logger = logging.getLogger(__name__)

INFERRED = "inferred_type"
# Constant inputs up to this many elements are handed to node inference as data, so that
# Reshape/Expand/Slice-style ops get static output shapes.
_DATA_ELEMENTS_LIMIT = 64
# What onnx's inference raises when it refuses a model or a node (besides the KeyError of an
# input it has no type for).
ONNX_INFERENCE_ERRORS = (
    onnx.shape_inference.InferenceError,
    onnx.checker.ValidationError,
    RuntimeError,
    ValueError,
    TypeError,
)


def fact_type(value: Value) -> Type | None:
    """The most specific type known for `value`: declared, inferred, or from its constant.

    Of a value no node computes (a graph input), the declared type is a fact: a caller must
    feed what it declares. A negative declared dim (exporters write -1 for "unknown") is no
    size: it is unknown here.

    Of a computed value (a node output, also when it is a graph output), only the declared
    element type is a fact: onnxruntime refuses a model whose value_info or graph output
    names another element type than the node computes, but it runs one that declares
    another shape, computing what the nodes compute (for a graph output it only warns). Its
    shape facts are the inferred ones, which inference finds from the inputs' declared
    shapes and the constants, never from the declarations of computed values
    (`_shape_inference`). The declaration stays in the model as it was.

    Rules ask this of the same values again and again: the combination of a declared and an
    inferred type is kept in the value's meta with the two objects it was made from, and
    made again only when either has been replaced.
    """
    declared = value.type
    meta = value._meta
    computed = value._producer is not None
    if not meta:
        return None if declared is None else _declared_fact(declared, computed=computed)
    inferred = _stored_inference(meta)
    if declared is None:
        return inferred
    if inferred is None:
        return _declared_fact(declared, computed=computed)
    known = meta.get(_COMBINED)
    if (
        isinstance(known, _Combined)
        and known.declared is declared
        and known.inferred is inferred
        and known.computed == computed
    ):
        return known.fact
    fact = _declared_fact(declared, computed=computed)
    combined = inferred if fact is None else merge_types(fact, inferred)
    meta[_COMBINED] = _Combined(declared, inferred, computed, combined)
    return combined


def _stored_inference(meta: dict[str, object]) -> Type | None:
    """The inferred type in a value's meta (lifted and stored back when not lifted yet)."""
    inferred = meta.get(INFERRED)
    if inferred is None:
        return None
    if isinstance(inferred, SharedInferredType):
        lifted = inferred.lifted()
        meta[INFERRED] = lifted
        return lifted
    return inferred  # type: ignore[return-value]  # only types and shared records are stored


class SharedInferredType:
    """onnx's inferred TypeProto for every value it describes alike, lifted once when asked.

    Whole-model inference records one for each distinct type it found (`infer_types`); a
    value's `fact_type` lifts it on first use, so types no rule asks about are never lifted,
    and the values of a repeated layer share one lifted type.
    """

    __slots__ = ("_lifted", "_proto")

    def __init__(self, proto: onnx.TypeProto) -> None:
        self._proto: onnx.TypeProto | None = proto
        self._lifted: Type | None = None

    def lifted(self) -> Type | None:
        """The type, lifted as `lift_inferred_type` does (None when it says nothing)."""
        proto = self._proto
        if proto is not None:
            self._lifted = lift_inferred_type(proto)
            self._proto = None
        return self._lifted


@dataclasses.dataclass(frozen=True, slots=True)
class _Combined:
    """What `fact_type` made of a declared and an inferred type, and from which objects."""

    declared: Type
    inferred: Type
    computed: bool  # whether a node computes the value (its declared shape is no fact)
    fact: Type


# Where `fact_type` keeps its last `_Combined` in a value's meta.
_COMBINED = "fact_type"


def _declared_fact(declared: Type, *, computed: bool) -> Type | None:
    """What a value's declared type states as fact (see `fact_type`)."""
    if computed:
        if isinstance(declared, TensorType) and not declared.dtype:
            return None
        return _without_shapes(declared)
    return _sizes_only(declared)


def _without_shapes(t: Type | None) -> Type | None:
    """`t` with every tensor shape in it left out (element types kept)."""
    if isinstance(t, TensorType):
        return TensorType(t.dtype)
    if isinstance(t, SparseTensorType):
        return SparseTensorType(t.dtype)
    if isinstance(t, SequenceType):
        return SequenceType(_without_shapes(t.elem), t.denotation)
    if isinstance(t, OptionalType):
        return OptionalType(_without_shapes(t.elem), t.denotation)
    if isinstance(t, MapType):
        return MapType(t.key, _without_shapes(t.value), t.denotation)
    return t


def inferred_type(value: Value) -> Type | None:
    """The type inference recorded for `value` (not merged with its declared type)."""
    return _stored_inference(value._meta) if value._meta else None


def _sizes_only(t: Type | None) -> Type | None:
    """`t` with its negative dims made unknown (a declared `float[3, -1]` is `[3, ?]`)."""
    if not isinstance(t, TensorType) or t.shape is None:
        return t
    if not any(isinstance(d, int) and d < 0 for d in t.shape):
        return t
    dims = tuple(None if isinstance(d, int) and d < 0 else d for d in t.shape)
    return dataclasses.replace(t, shape=dims)


def _without_dims(t: Type | None) -> Type | None:
    """`t` with every dim unknown (its rank kept)."""
    if not isinstance(t, TensorType) or t.shape is None:
        return t
    return dataclasses.replace(t, shape=(None,) * len(t.shape))


def lift_inferred_type(proto: onnx.TypeProto) -> Type | None:
    """Lift a type onnx's inference produced, with its negative dims made unknown.

    onnx's inference can compute a negative dim (a Slice whose `ends` is near INT64_MIN gives
    `[-3]` instead of `[0]`); no tensor has one, so it is no fact. A model's own value_info is
    lifted as it is (round trip), only inference results are cleaned.
    """
    return _sizes_only(lift_type(proto))


def take_declared_type(target: Value, source: Value) -> None:
    """Give `target` the declared type of `source` (a graph output passing to another value).

    The declaration goes with the output into the model as it was; of a computed value it
    states no shape fact (`fact_type`), so it cannot stand in for what `target`'s node
    computes.
    """
    target.type = source.type


def record_inferred_type(value: Value, t: Type) -> None:
    """Record an inferred type as a fact about `value` (never written to the model)."""
    value.meta[INFERRED] = t


def merge_types(a: Type, b: Type) -> Type:
    """Combine two descriptions of one tensor value, keeping every known dimension."""
    if not isinstance(a, TensorType) or not isinstance(b, TensorType):
        return a
    dtype = a.dtype if a.dtype else b.dtype
    if a.shape is None:
        return TensorType(dtype, b.shape, a.denotation)
    if b.shape is None or len(a.shape) != len(b.shape):
        return TensorType(dtype, a.shape, a.denotation, a.dim_denotations)
    dims: list[Dim] = []
    for da, db in zip(a.shape, b.shape, strict=False):
        if isinstance(da, int):
            dims.append(da)
        elif isinstance(db, int):
            dims.append(db)
        else:
            dims.append(da if da is not None else db)
    return TensorType(dtype, tuple(dims), a.denotation, a.dim_denotations)


def infer_node_types(
    node: Node,
    opset_imports: Mapping[str, int],
    type_of: Callable[[Value], Type | None] = fact_type,
) -> list[Type | None] | None:
    """Output types of one node from its inputs' facts, via onnx's per-node inference.

    An op onnxruntime runs in the default domain where onnx has no schema (`_runtime_ops`) is
    typed from that table, and an op of onnxruntime's own domain that onnxruntime types as a
    standard op (`_contrib_ops`) by onnx's inference of that op. Returns None when none of
    them knows the op at that opset (custom domains), and raises `NodeInferenceError` when
    inference rejects the node (wrong input types, bad attributes) — a sign the node is
    ill-typed.
    """
    schema = _schema_of(node, opset_imports)
    if schema is None:
        return _runtime_op_types(node, opset_imports, type_of)
    inputs = _NodeInputs.of(node, type_of)
    return _infer_with_onnx(node, schema, inputs, opset_imports)


class NodeTypeInference:
    """`infer_node_types` that remembers its answers, for a caller that types many nodes.

    onnx's answer depends only on the op, its schema version, the attributes, the input types
    and the values of the small constant inputs its inference function may read (not on
    names): nodes alike in those (the layers of a model, the rewrites of one rule across them)
    are inferred once. An inference function reads the data of shape-like inputs (Reshape's
    `shape`, Slice's `starts`, Resize's `scales`), never of an input the schema marks
    differentiable (a Gemm's bias: its values flow into the output's values, not its shape),
    so those values are left out of the key. Nodes with subgraphs or large tensor attributes
    are not remembered (their key would cost what inference does). A rejection is not
    remembered either: it is raised again each time.
    """

    __slots__ = ("_known", "_reads_data")

    def __init__(self) -> None:
        self._known: dict[tuple[object, ...], tuple[Type | None, ...]] = {}
        self._reads_data: dict[tuple[str, str, int], tuple[bool, ...]] = {}

    def __call__(
        self,
        node: Node,
        opset_imports: Mapping[str, int],
        type_of: Callable[[Value], Type | None] = fact_type,
    ) -> list[Type | None] | None:
        """As `infer_node_types`."""
        schema = _schema_of(node, opset_imports)
        if schema is None:
            return _runtime_op_types(node, opset_imports, type_of)
        inputs = _NodeInputs.of(node, type_of)
        key = _inference_key(node, inputs, self._data_read_by(schema), opset_imports)
        if key is None:
            return _infer_with_onnx(node, schema, inputs, opset_imports)
        known = self._known.get(key)
        if known is None:
            types = _infer_with_onnx(node, schema, inputs, opset_imports)
            known = self._known[key] = tuple(types)
        return list(known)

    def _data_read_by(self, schema: onnx.defs.OpSchema) -> tuple[bool, ...]:
        """Per formal input of `schema`: whether inference may read its data (see above)."""
        key = (schema.domain, schema.name, schema.since_version)
        found = self._reads_data.get(key)
        if found is None:
            differentiable = onnx.defs.OpSchema.DifferentiationCategory.Differentiable
            found = tuple(
                param.differentiation_category != differentiable for param in schema.inputs
            )
            self._reads_data[key] = found
        return found


def _domain_version(node: Node, opset_imports: Mapping[str, int]) -> tuple[str, int | None]:
    """The node's normalized domain and the opset version the model imports it at."""
    domain = _schemas.normalize_domain(node.domain)
    return domain, opset_imports.get(domain, opset_imports.get("ai.onnx") if domain == "" else None)


def _schema_of(node: Node, opset_imports: Mapping[str, int]) -> onnx.defs.OpSchema | None:
    """The schema onnx defines for the node's op at the imported opset (None: it has none)."""
    domain, version = _domain_version(node, opset_imports)
    if version is None:
        return None
    return _schemas.find_schema(node.op_type, domain, version)


def _runtime_op_types(
    node: Node, opset_imports: Mapping[str, int], type_of: Callable[[Value], Type | None]
) -> list[Type | None] | None:
    """Output types of an op onnx has no schema for, from onnxruntime's table (`_runtime_ops`).

    None when the table does not know the op at the imported opset either (custom domains).
    """
    domain, version = _domain_version(node, opset_imports)
    if version is None:
        return None
    runtime = find_runtime_op(node.op_type, domain, version)
    if runtime is None:
        contrib = find_contrib_op(node.op_type, domain)
        return None if contrib is None else _contrib_op_types(node, contrib, type_of)
    inputs = [type_of(value) if value is not None else None for value in node.inputs]
    return runtime_op_types(runtime, node, inputs)


def _contrib_op_types(
    node: Node, op: ContribOp, type_of: Callable[[Value], Type | None]
) -> list[Type | None] | None:
    """Output types of an onnxruntime op by onnx's inference of the standard op it mirrors.

    The standard node gets the inputs and attributes `op` maps; an input bound to the type
    parameter of the standard op's output is told the element type of input `op.dtype_from`
    (onnx's schema would refuse the quantized weights the contrib op takes). None when onnx
    declines: the contrib op's own checks are onnxruntime's, so that is no sign of an
    ill-typed node, only of no facts.
    """
    schema = _schemas.find_schema(op.standard_op, "", op.standard_version)
    if schema is None or op.dtype_from >= len(node.inputs):
        return None
    dtype_value = node.inputs[op.dtype_from]
    dtype_type = type_of(dtype_value) if dtype_value is not None else None
    if not isinstance(dtype_type, TensorType) or not dtype_type.dtype:
        return None
    output_param = schema.outputs[0].type_str if schema.outputs else None
    names: list[str] = []
    input_types: dict[str, onnx.TypeProto] = {}
    for index, stand in enumerate(op.inputs):
        value = _stand_in_value(node, stand)
        if value is None:
            names.append("")
            continue
        t = type_of(value)
        param = schema.inputs[min(index, len(schema.inputs) - 1)].type_str
        if param == output_param:
            keep = isinstance(t, TensorType) and stand is not None and stand.same_dims
            shape = t.shape if keep and isinstance(t, TensorType) else None
            t = TensorType(dtype_type.dtype, shape)
        elif not isinstance(t, TensorType):
            return None
        elif stand is not None and not stand.same_dims:
            t = TensorType(t.dtype)
        tp = onnx.TypeProto()
        lower_type(t, tp)
        input_types[value.name] = tp
        names.append(value.name)
    while names and not names[-1]:
        names.pop()
    try:
        lowered = lower_node(node)
    except IRError:
        return None
    standard = onnx.helper.make_node(
        op.standard_op, names, [v.name for v in node.outputs[: len(schema.outputs)]]
    )
    standard.attribute.extend(a for a in lowered.attribute if a.name in op.attributes)
    try:
        result = onnx.shape_inference.infer_node_outputs(schema, standard, input_types)
    except (KeyError, *ONNX_INFERENCE_ERRORS) as exc:
        logger.debug("no facts for %s from %s's inference: %s", node.op_type, op.standard_op, exc)
        return None
    return [
        lift_inferred_type(result[v.name]) if v.name and v.name in result else None
        for v in node.outputs
    ]


def _stand_in_value(node: Node, stand: StandInput | None) -> Value | None:
    """The node's input that `stand` names (None when not given)."""
    if stand is None or stand.source >= len(node.inputs):
        return None
    value = node.inputs[stand.source]
    return value if value is not None and value.name else None


@dataclasses.dataclass(frozen=True, slots=True)
class _NodeInputs:
    """What per-node inference is told of a node's inputs: types, and small constants' data."""

    types: tuple[Type | None, ...]
    data: tuple[Tensor | None, ...]

    @staticmethod
    def of(node: Node, type_of: Callable[[Value], Type | None]) -> _NodeInputs:
        types: list[Type | None] = []
        data: list[Tensor | None] = []
        for value in node.inputs:
            if value is None or not value.name:
                types.append(None)
                data.append(None)
                continue
            t = type_of(value)
            const = _constant_input(value)
            if t is None and const is not None:
                t = TensorType(const.dtype, const.shape)
            types.append(None if isinstance(t, SparseTensorType) else t)
            data.append(const if const is not None and const.size <= _DATA_ELEMENTS_LIMIT else None)
        return _NodeInputs(tuple(types), tuple(data))


def _infer_with_onnx(
    node: Node,
    schema: onnx.defs.OpSchema,
    inputs: _NodeInputs,
    opset_imports: Mapping[str, int],
) -> list[Type | None]:
    try:
        node_proto = lower_node(node)
    except IRError as exc:  # a field the file held that a new message cannot carry
        raise NodeInferenceError(f"{node.op_type}: {exc}") from exc
    input_types: dict[str, onnx.TypeProto] = {}
    input_data: dict[str, onnx.TensorProto] = {}
    for value, t, const in zip(node.inputs, inputs.types, inputs.data, strict=True):
        if value is None:
            continue
        if t is not None:
            tp = onnx.TypeProto()
            lower_type(t, tp)
            input_types[value.name] = tp
        if const is not None and not isinstance(const, SparseProtoTensor):
            # A sparse constant's data is not a TensorProto: its type is told, its data not.
            input_data[value.name] = tensor_to_proto(const, value.name)
    opsets = [onnx.helper.make_opsetid(d, v) for d, v in opset_imports.items()]
    try:
        result = onnx.shape_inference.infer_node_outputs(
            schema, node_proto, input_types, input_data, opset_imports=opsets
        )
    except KeyError as exc:  # onnx needs the type of every input; one is unknown
        raise NodeInferenceError(f"{node.op_type}: the type of input {exc} is unknown") from exc
    except ONNX_INFERENCE_ERRORS as exc:
        raise NodeInferenceError(f"{node.op_type}: {exc}") from exc
    types = [lift_inferred_type(result[v.name]) if v.name in result else None for v in node.outputs]
    if has_disputed_dims(node):
        # onnx's dims for this node may not be what onnxruntime computes: no facts.
        return [_without_dims(t) for t in types]
    return types


def _inference_key(
    node: Node,
    inputs: _NodeInputs,
    reads_data: tuple[bool, ...],
    opset_imports: Mapping[str, int],
) -> tuple[object, ...] | None:
    """What onnx's answer for `node` depends on, or None when that is too costly to tell.

    `reads_data` tells per formal input whether inference may read its values (the last
    one stands for the rest of a variadic list). Output names matter only as the slots they
    fill: a node whose outputs are not all named (an omitted optional output) is told apart
    by which are.
    """
    attributes: list[object] = []
    for attr in node.attributes.values():
        kind = attr.type
        if kind in _UNKEYED_ATTRIBUTES:
            return None
        value = attr.value
        if kind == AttrType.TENSOR and isinstance(value, Tensor):
            if value.size > _DATA_ELEMENTS_LIMIT:
                return None
            attributes.append((attr.name, kind, _tensor_key(value)))
            continue
        attributes.append((attr.name, kind, attr.ref_attr_name, value))
    last = len(reads_data) - 1
    data = tuple(
        None if tensor is None or not reads_data[min(index, last)] else _tensor_key(tensor)
        for index, tensor in enumerate(inputs.data)
    )
    present = tuple(v is not None and bool(v.name) for v in node.inputs)
    outputs = tuple(bool(v.name) for v in node.outputs)
    return (
        node.domain,
        node.op_type,
        tuple(opset_imports.items()),
        tuple(attributes),
        inputs.types,
        data,
        present,
        outputs,
    )


# Attribute kinds a key leaves to inference itself: graphs, lists of tensors, sparse tensors.
_UNKEYED_ATTRIBUTES = frozenset(
    {
        AttrType.GRAPH,
        AttrType.GRAPHS,
        AttrType.TENSORS,
        AttrType.SPARSE_TENSOR,
        AttrType.SPARSE_TENSORS,
    }
)


def _tensor_key(tensor: Tensor) -> tuple[object, ...]:
    """A small tensor by dtype, shape and contents."""
    array = tensor.numpy()
    contents = tuple(array.reshape(-1).tolist()) if array.dtype == object else array.tobytes()
    return (tensor.dtype, tensor.shape, contents)


def _constant_input(value: Value) -> Tensor | None:
    """The tensor an initializer or a `Constant` node's `value` holds (None otherwise).

    onnx's per-node inference reads such data for shape inputs (Expand, Reshape,
    ConstantOfShape): a node built next to a Constant gets its output shape at once.
    """
    if value.const_value is not None:
        return value.const_value
    producer = value.producer()
    if producer is None or producer.op_type != "Constant" or producer.domain not in ("", "ai.onnx"):
        return None
    held = producer.attribute("value")
    return held if isinstance(held, Tensor) else None


class NodeInferenceError(IRError):
    """onnx's inference rejected a node (its inputs or attributes do not type-check)."""
