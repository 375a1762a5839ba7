"""Type and shape inference through onnx's own inference engine (serde layer).

Inferred types are facts for rewriting, not part of the model: they are stored in
`value.meta["inferred_type"]` so lowering never adds value_info the input did not have.
`fact_type(value)` combines the declared type with the inferred one.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import onnx
import onnx.checker
import onnx.helper
import onnx.shape_inference

from ir import _schemas
from ir._core import (
    Dim,
    IRError,
    MapType,
    Model,
    Node,
    OpaqueType,
    OptionalType,
    SequenceType,
    SparseTensorType,
    TensorType,
    Type,
    UnsetType,
    Value,
)
from ir._serde import lift_type, lower_node, lower_type, to_onnx
from ir._serde_tensors import tensor_to_proto

logger = logging.getLogger(__name__)

INFERRED = "inferred_type"
_GRAPH_OPS = frozenset({"If", "Loop", "Scan", "SequenceMap"})
# Constant inputs up to this many elements are handed to node inference as data, so that
# Reshape/Expand/Slice-style ops get static output shapes.
_DATA_ELEMENTS_LIMIT = 64


def fact_type(value: Value) -> Type | None:
    """The most specific type known for `value`: declared, inferred, or from its constant."""
    declared = value.type
    inferred = value.meta.get(INFERRED) if value._meta else None
    if inferred is None:
        return declared
    if not isinstance(inferred, _TYPES):
        # Stored as onnx's TypeProto by `infer_types`; lifted on first use.
        inferred = lift_inferred_type(inferred)  # type: ignore[arg-type]
        value.meta[INFERRED] = inferred
        if inferred is None:
            return declared
    if declared is None:
        return inferred
    return merge_types(declared, inferred)


def lift_inferred_type(proto: onnx.TypeProto) -> Type | None:
    """Lift a type onnx's inference produced, with its negative dims made unknown.

    onnx's inference can compute a negative dim (a Slice whose `ends` is near INT64_MIN gives
    `[-3]` instead of `[0]`); no tensor has one, so it is no fact. A model's own value_info is
    lifted as it is (round trip), only inference results are cleaned.
    """
    lifted = lift_type(proto)
    if not isinstance(lifted, TensorType) or lifted.shape is None:
        return lifted
    if not any(isinstance(d, int) and d < 0 for d in lifted.shape):
        return lifted
    dims = tuple(None if isinstance(d, int) and d < 0 else d for d in lifted.shape)
    return dataclasses.replace(lifted, shape=dims)


_TYPES = (TensorType, SparseTensorType, SequenceType, MapType, OptionalType, OpaqueType, UnsetType)


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


InferenceEngine = Callable[[Any], Any]
"""Takes a ModelProto and returns it with inferred value_info (or raises)."""


def onnx_inference(proto: Any) -> Any:
    """Shape inference by onnx itself, with data propagation."""
    return onnx.shape_inference.infer_shapes(proto, data_prop=True)


def infer_types(model: Model, engines: Sequence[InferenceEngine] = (onnx_inference,)) -> int:
    """Run shape inference over the whole model and record the results as facts.

    `engines` are tried in order; the first that succeeds is used (a caller may put a
    stronger symbolic engine before onnx's). Returns the number of values that gained a fact.
    When every engine fails, facts stay unknown (a rule never fires on an unknown fact).
    """
    # Weights as typed inputs: inference needs their shapes, not their bytes.
    proto = to_onnx(model, weights=False)
    _hide_overridable_values(proto.graph)
    declared_outputs = _open_output_symbols(proto)
    try:
        inferred = _run_engines(proto, engines)
    finally:
        _restore_outputs(proto, declared_outputs)
    if inferred is None:
        logger.warning("shape inference failed; continuing with declared types only")
        return 0
    found: dict[str, Any] = {}
    _collect(inferred.graph, found)
    for fn in inferred.functions:
        for vi in fn.value_info:
            found.setdefault(vi.name, vi.type)
    aliases = _output_symbol_aliases(declared_outputs, inferred.graph, _declared_symbols(proto))
    gained = 0
    for graph in model.graphs():
        for value in graph.values():
            type_proto = found.get(value.name)
            if type_proto is None or value.type is not None:
                continue  # declared types are kept as they are
            if aliases:
                type_proto = _renamed(type_proto, aliases)
            # Kept as a TypeProto; `fact_type` lifts it when a rule first asks.
            value.meta[INFERRED] = type_proto
            gained += 1
    return gained


def _hide_overridable_values(graph: Any) -> None:
    """Leave out the data of initializers that are also graph inputs (IR 3 lists every one).

    Such an initializer is only a default a caller may override, so a fact must hold for
    whatever is fed there: inference gets its type, not its value (a Reshape whose shape is
    such an input has an output shape of unknown dims, not the default's).
    """
    inputs = {info.name for info in graph.input}
    kept = [t for t in graph.initializer if t.name not in inputs]
    if len(kept) != len(graph.initializer):
        del graph.initializer[:]
        graph.initializer.extend(kept)


def _run_engines(proto: Any, engines: Sequence[InferenceEngine]) -> Any:
    for engine in engines:
        try:
            inferred = engine(proto)
        except Exception as exc:  # engines are third-party code with many failure modes
            logger.info(
                "shape inference engine %s failed: %s", getattr(engine, "__name__", engine), exc
            )
            continue
        if inferred is not None:
            return inferred
    return None


# Symbolic dims of the main graph's outputs. An exporter names them itself ("time_out"), and
# onnx's inference keeps a declared output type as it is, so the output's dims never meet the
# symbols inference gives the values that compute it ("unk__5"): `shape(y) == shape(x)` would
# be unknown for the last node of every model. So inference runs with those dims open, and
# where it invents a symbol for one (a name no declared type uses), the facts use the
# declared name instead.


def _open_output_symbols(proto: Any) -> dict[int, onnx.TypeProto]:
    """Clear the symbolic dims of `proto`'s graph outputs; returns the declared types."""
    saved: dict[int, onnx.TypeProto] = {}
    for index, output in enumerate(proto.graph.output):
        if not output.type.HasField("tensor_type"):
            continue
        dims = output.type.tensor_type.shape.dim
        if not any(d.HasField("dim_param") for d in dims):
            continue
        saved[index] = onnx.TypeProto()
        saved[index].CopyFrom(output.type)
        for d in dims:
            if d.HasField("dim_param"):
                d.ClearField("dim_param")
    return saved


def _restore_outputs(proto: Any, saved: Mapping[int, onnx.TypeProto]) -> None:
    for index, type_proto in saved.items():
        proto.graph.output[index].type.CopyFrom(type_proto)


def _declared_symbols(proto: Any) -> set[str]:
    symbols: set[str] = set()
    graph = proto.graph
    for info in (*graph.input, *graph.output, *graph.value_info):
        if info.type.HasField("tensor_type"):
            symbols.update(d.dim_param for d in info.type.tensor_type.shape.dim if d.dim_param)
    return symbols


def _output_symbol_aliases(
    declared: Mapping[int, onnx.TypeProto], inferred_graph: Any, taken: set[str]
) -> dict[str, str]:
    """Invented symbol -> declared output symbol, where inference met a declared output dim."""
    aliases: dict[str, str] = {}
    for index, declared_type in declared.items():
        if index >= len(inferred_graph.output):
            continue
        found = inferred_graph.output[index].type
        if not found.HasField("tensor_type"):
            continue
        mine = declared_type.tensor_type.shape.dim
        theirs = found.tensor_type.shape.dim
        if len(mine) != len(theirs):
            continue
        for d_mine, d_theirs in zip(mine, theirs, strict=True):
            invented = d_theirs.dim_param
            if d_mine.dim_param and invented and invented not in taken:
                aliases.setdefault(invented, d_mine.dim_param)
    return aliases


def _renamed(type_proto: onnx.TypeProto, aliases: Mapping[str, str]) -> onnx.TypeProto:
    """`type_proto` with its invented symbols renamed (a copy when anything changes)."""
    if not type_proto.HasField("tensor_type"):
        return type_proto
    dims = type_proto.tensor_type.shape.dim
    if not any(d.dim_param in aliases for d in dims):
        return type_proto
    renamed = onnx.TypeProto()
    renamed.CopyFrom(type_proto)
    for d in renamed.tensor_type.shape.dim:
        if d.dim_param in aliases:
            d.dim_param = aliases[d.dim_param]
    return renamed


def _collect(graph: Any, found: dict[str, Any]) -> None:
    for vi in graph.input:
        found.setdefault(vi.name, vi.type)
    for vi in graph.value_info:
        found.setdefault(vi.name, vi.type)
    for vi in graph.output:
        found.setdefault(vi.name, vi.type)
    for node in graph.node:
        # Only these ops (and custom ones) can hold subgraphs; skip reading other attributes.
        if node.op_type not in _GRAPH_OPS and node.domain not in ("", "ai.onnx", "ai.onnx.ml"):
            pass
        elif node.op_type not in _GRAPH_OPS:
            continue
        for attr in node.attribute:
            if attr.HasField("g"):
                _collect(attr.g, found)
            for sub in attr.graphs:
                _collect(sub, found)


def infer_node_types(
    node: Node,
    opset_imports: Mapping[str, int],
    type_of: Callable[[Value], Type | None] = fact_type,
) -> list[Type | None] | None:
    """Output types of one node from its inputs' facts, via onnx's per-node inference.

    Returns None when onnx has no schema for the op at that opset (custom domains), and
    raises `NodeInferenceError` when inference rejects the node (wrong input types, bad
    attributes) — a sign the node is ill-typed.
    """
    domain = _schemas.normalize_domain(node.domain)
    version = opset_imports.get(domain, opset_imports.get("ai.onnx") if domain == "" else None)
    if version is None:
        return None
    schema = _schemas.find_schema(node.op_type, domain, version)
    if schema is None:
        return None
    node_proto = lower_node(node)
    input_types: dict[str, onnx.TypeProto] = {}
    input_data: dict[str, onnx.TensorProto] = {}
    for value in node.inputs:
        if value is None or not value.name:
            continue
        t = type_of(value)
        const = value.const_value
        if t is None and const is not None:
            t = TensorType(const.dtype, const.shape)
        if t is not None and not isinstance(t, SparseTensorType):
            tp = onnx.TypeProto()
            lower_type(t, tp)
            input_types[value.name] = tp
        if const is not None and const.size <= _DATA_ELEMENTS_LIMIT:
            input_data[value.name] = tensor_to_proto(const, value.name)
    opsets = [onnx.helper.make_opsetid(d, v) for d, v in opset_imports.items()]
    try:
        result = onnx.shape_inference.infer_node_outputs(
            schema, node_proto, input_types, input_data, opset_imports=opsets
        )
    except KeyError as exc:  # onnx needs the type of every input; one is unknown
        raise NodeInferenceError(f"{node.op_type}: the type of input {exc} is unknown") from exc
    except (
        onnx.shape_inference.InferenceError,
        onnx.checker.ValidationError,
        RuntimeError,
        ValueError,
        TypeError,
    ) as exc:
        raise NodeInferenceError(f"{node.op_type}: {exc}") from exc
    return [lift_inferred_type(result[v.name]) if v.name in result else None for v in node.outputs]


class NodeInferenceError(IRError):
    """onnx's inference rejected a node (its inputs or attributes do not type-check)."""
