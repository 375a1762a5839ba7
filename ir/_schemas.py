"""Operator-schema helpers over onnx.defs: which ops exist, their inputs, attributes, defaults.

Domains are normalized: "ai.onnx" and "" are the same default domain.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import onnx.defs

from ir._core import Attr
from ir._enums import AttrType
from ir._runtime_ops import OutputTypes, RuntimeOp, find_runtime_op, runtime_op_names
from ir._serde import lift_type
from ir._serde_tensors import ProtoTensor

_DEFAULT_DOMAINS = ("", "ai.onnx")


def normalize_domain(domain: str) -> str:
    """'' for the default ONNX domain, the domain itself otherwise."""
    return "" if domain in _DEFAULT_DOMAINS else domain


def source_version() -> str:
    """Where the schemas come from: onnx's version (what depends on them is stale without it)."""
    return f"onnx {onnx.__version__}"


@functools.cache
def known_domains() -> frozenset[str]:
    """Domains that onnx's schema registry knows (default, ai.onnx.ml, ...)."""
    return frozenset(_ops_by_domain())


def is_known_domain(domain: str) -> bool:
    """True when onnx has schemas for `domain` (custom domains are unchecked)."""
    return normalize_domain(domain) in known_domains()


@functools.cache
def _schema_index() -> dict[tuple[str, str], tuple[onnx.defs.OpSchema, ...]]:
    """Every schema version by (op type, domain), oldest first.

    Built in one pass: `get_all_schemas_with_history` makes ~2,000 Python objects per call.
    """
    table: dict[tuple[str, str], list[onnx.defs.OpSchema]] = {}
    for schema in onnx.defs.get_all_schemas_with_history():
        table.setdefault((schema.name, normalize_domain(schema.domain)), []).append(schema)
    return {
        key: tuple(sorted(found, key=lambda s: s.since_version)) for key, found in table.items()
    }


def _all_versions(op_type: str, domain: str) -> tuple[onnx.defs.OpSchema, ...]:
    return _schema_index().get((op_type, normalize_domain(domain)), ())


@functools.cache
def _ops_by_domain() -> dict[str, frozenset[str]]:
    """Op names by normalized domain (from the one pass over the registry `_schema_index` makes)."""
    table: dict[str, set[str]] = {}
    for name, domain in _schema_index():
        table.setdefault(domain, set()).add(name)
    return {k: frozenset(v) for k, v in table.items()}


def op_names(domain: str = "") -> frozenset[str]:
    """All op names onnx knows in `domain`, in any version."""
    return _ops_by_domain().get(normalize_domain(domain), frozenset())


def schema_versions(op_type: str, domain: str = "") -> tuple[onnx.defs.OpSchema, ...]:
    """Every version of an op's schema, oldest first (empty when unknown)."""
    return _all_versions(op_type, domain)


def find_schema(
    op_type: str, domain: str = "", opset: int | None = None, *, runtime: bool = False
) -> onnx.defs.OpSchema | None:
    """The schema in force at `opset` (latest when None); None if the op does not exist then.

    With `runtime`, an op that onnx does not define in any version but onnxruntime runs in
    the default domain (`find_runtime_op`: `SimplifiedLayerNormalization`, the old
    experimental ops) gets a schema written from onnxruntime's, for code that builds models
    onnxruntime runs, such as rule checking; rewriting itself only writes onnx's ops. An op
    onnx defines from a later opset (`LayerNormalization` before 17) gets none: code that
    builds it uses onnx's own version.
    """
    versions = _all_versions(op_type, domain)
    if runtime and not versions:
        op = find_runtime_op(op_type, domain, opset)
        return _runtime_schema(op) if op is not None else None
    if not versions:
        return None
    if opset is None:
        return versions[-1]
    chosen = None
    for schema in versions:
        if schema.since_version <= opset:
            chosen = schema
    if chosen is not None and chosen.deprecated:
        return None
    return chosen


_FLOAT_TYPES = ("tensor(float16)", "tensor(float)", "tensor(double)", "tensor(bfloat16)")
_STATISTICS_TYPES = ("tensor(float)", "tensor(double)", "tensor(bfloat16)")


@functools.cache
def _runtime_schema(op: RuntimeOp) -> onnx.defs.OpSchema:
    """An OpSchema (not registered anywhere) saying what onnxruntime's schema of `op` says."""
    schema_class = onnx.defs.OpSchema
    optional = schema_class.FormalParameterOption.Optional
    single = schema_class.FormalParameterOption.Single
    inputs = [
        schema_class.FormalParameter(
            name, "T", param_option=single if index < op.required_inputs else optional
        )
        for index, name in enumerate(op.inputs)
    ]
    statistics = op.output_types is OutputTypes.NORMALIZATION
    outputs = [
        schema_class.FormalParameter(
            name, "U" if index and statistics else "T", param_option=optional if index else single
        )
        for index, name in enumerate(op.outputs)
    ]
    constraints = [("T", list(_FLOAT_TYPES), "")]
    if statistics:
        constraints.append(("U", list(_STATISTICS_TYPES), ""))
    attributes = [
        schema_class.Attribute(name, getattr(schema_class.AttrType, kind.name), "")
        for name, kind in op.attributes
    ]
    return schema_class(
        op.op_type,
        "",
        op.first_opset,
        doc="onnxruntime's op in the default domain",
        inputs=inputs,
        outputs=outputs,
        type_constraints=constraints,
        attributes=attributes,
    )


@functools.cache
def is_composite(op_type: str, domain: str = "") -> bool:
    """True when onnx defines the op (latest version) by a function of other ops.

    LayerNormalization, Attention, RotaryEmbedding and Gelu are; Mul, Slice and Pad are not.
    """
    schema = find_schema(op_type, domain)
    if schema is None:
        return False
    # Public OpSchema properties that onnx's type stubs do not list.
    return bool(
        getattr(schema, "has_function", False)
        or getattr(schema, "has_context_dependent_function", False)
    )


def op_exists(op_type: str, domain: str = "", opset: int | None = None) -> bool:
    """True when the op is defined in `domain` at `opset` (any version when None)."""
    return find_schema(op_type, domain, opset) is not None


def since_version(op_type: str, domain: str = "") -> int | None:
    """The first opset version that defines the op, or None when unknown."""
    versions = _all_versions(op_type, domain)
    return versions[0].since_version if versions else None


@dataclasses.dataclass(frozen=True, slots=True)
class InputArity:
    """How many inputs an op accepts: `max_inputs` None means unbounded (variadic)."""

    min_inputs: int
    max_inputs: int | None


def input_arity(schema: onnx.defs.OpSchema) -> InputArity:
    """Input count bounds of one schema version."""
    max_inputs = None if schema.max_input > 2**20 else int(schema.max_input)
    return InputArity(int(schema.min_input), max_inputs)


def output_arity(schema: onnx.defs.OpSchema) -> InputArity:
    """Output count bounds of one schema version."""
    max_outputs = None if schema.max_output > 2**20 else int(schema.max_output)
    return InputArity(int(schema.min_output), max_outputs)


def attribute_names(op_type: str, domain: str = "", opset: int | None = None) -> frozenset[str]:
    """Attribute names of the op at `opset` (union over all versions when None)."""
    if opset is not None:
        schema = find_schema(op_type, domain, opset)
        return frozenset(schema.attributes) if schema is not None else frozenset()
    names: set[str] = set()
    for schema in _all_versions(op_type, domain):
        names.update(schema.attributes)
    return frozenset(names)


def attribute_default(
    op_type: str, name: str, domain: str = "", opset: int | None = None
) -> Attr | None:
    """The schema's default for an attribute, as an Attr; None when it has no default."""
    schema = find_schema(op_type, domain, opset)
    if schema is None or name not in schema.attributes:
        return None
    return _default_of(schema, name)


def _default_of(schema: onnx.defs.OpSchema, name: str) -> Attr | None:
    proto = schema.attributes[name].default_value
    if proto is None or proto.type == 0:
        return None
    return lift_attribute_value(proto)


def lift_attribute_value(proto: onnx.AttributeProto) -> Attr:
    """An Attr for a schema default (scalars, lists, tensors and types only)."""
    kind = AttrType(proto.type)
    value: Any
    if kind == AttrType.FLOAT:
        value = proto.f
    elif kind == AttrType.INT:
        value = proto.i
    elif kind == AttrType.STRING:
        value = proto.s.decode("utf-8", errors="replace")
    elif kind == AttrType.INTS:
        value = tuple(proto.ints)
    elif kind == AttrType.FLOATS:
        value = tuple(proto.floats)
    elif kind == AttrType.STRINGS:
        value = tuple(s.decode("utf-8", errors="replace") for s in proto.strings)
    elif kind == AttrType.TENSOR:
        value = ProtoTensor(proto.t)
    elif kind == AttrType.TYPE_PROTO:
        value = lift_type(proto.tp)
    else:
        value = None
    return Attr(proto.name, kind, value)


def attribute_type(
    op_type: str, name: str, domain: str = "", opset: int | None = None
) -> AttrType | None:
    """The declared kind of an attribute (latest schema when `opset` is None)."""
    schema = find_schema(op_type, domain, opset)
    if schema is None:
        for candidate in reversed(_all_versions(op_type, domain)):
            if name in candidate.attributes:
                schema = candidate
                break
    if schema is None or name not in schema.attributes:
        return None
    kind: Any = schema.attributes[name].type
    return AttrType(int(kind.value))


def input_names(schema: onnx.defs.OpSchema) -> tuple[str, ...]:
    """Formal input names of one schema version."""
    return tuple(p.name for p in schema.inputs)


def is_commutative(op_type: str, domain: str = "") -> bool:
    """True for binary ops whose two operands can be swapped (Add, Mul, Max, And, ...)."""
    return normalize_domain(domain) == "" and op_type in _COMMUTATIVE


_COMMUTATIVE = frozenset(
    {
        "Add",
        "Mul",
        "Sum",
        "Max",
        "Min",
        "Mean",
        "And",
        "Or",
        "Xor",
        "Equal",
        "BitwiseAnd",
        "BitwiseOr",
        "BitwiseXor",
    }
)


def latest_opset(domain: str = "") -> int:
    """The newest opset version onnx defines for `domain`."""
    domain = normalize_domain(domain)
    if domain == "":
        return int(onnx.defs.onnx_opset_version())
    versions = [found[-1].since_version for (_, d), found in _schema_index().items() if d == domain]
    return max(versions) if versions else 1


__all__ = [
    "InputArity",
    "RuntimeOp",
    "attribute_default",
    "attribute_names",
    "attribute_type",
    "find_runtime_op",
    "find_schema",
    "input_arity",
    "input_names",
    "is_commutative",
    "is_known_domain",
    "known_domains",
    "latest_opset",
    "normalize_domain",
    "op_exists",
    "op_names",
    "output_arity",
    "runtime_op_names",
    "schema_versions",
    "since_version",
]
