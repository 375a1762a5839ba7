"""Built-ins that ask about matched values and the model: constness, shape, dtype, opsets.

Each returns `UNKNOWN` for a fact that is not known, so a `where` line never holds on a guess.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

import ir
from rewriter.engine import _facts
from rewriter.engine._builtins._registry import builtin
from rewriter.engine._values import UNKNOWN, EvalContext, EvalError, SymbolicDim


def _value_arg(value: Any, fn: str) -> ir.Value | None:
    if value is None or isinstance(value, ir.Value):
        return value
    raise EvalError(f"`{fn}` expects a value bound by the match, got {type(value).__name__}")


@builtin(
    "is_const",
    "every argument is a constant (none is not; a variadic binding `xs`: each of its items)",
)
def is_const(ctx: EvalContext, v: Any, *more: Any) -> bool:
    """True when every argument (every item of a variadic binding) is a constant."""
    items: list[Any] = []
    for arg in (v, *more):
        items.extend(arg if isinstance(arg, tuple) else (arg,))
    return all(isinstance(item, ir.Value) and _facts.is_const(item) for item in items)


@builtin("value", "a constant's contents as a tensor")
def value(ctx: EvalContext, v: Any) -> Any:
    """The constant's contents (unknown when not constant)."""
    if isinstance(v, ir.Value):
        array = _facts.const_array(v)
        return UNKNOWN if array is None else array
    return v


@builtin("is_scalar", "a constant with exactly one element, any rank")
def is_scalar(ctx: EvalContext, v: Any) -> bool:
    """A constant with one element."""
    if not isinstance(v, ir.Value):
        return isinstance(v, int | float) or (isinstance(v, np.ndarray) and v.size == 1)
    return _facts.const_size(v) == 1


@builtin("uses", "how many node inputs and graph outputs use a value")
def uses(ctx: EvalContext, v: Any) -> Any:
    """Node uses plus graph-output slots."""
    val = _value_arg(v, "uses")
    return 0 if val is None else _facts.count_uses(val)


@builtin("readers", "the op types of the nodes that read a value, sorted (a list)")
def readers(ctx: EvalContext, v: Any) -> Any:
    """`readers(y) == ["Relu"]`: what consumes a value (graph outputs are not nodes)."""
    val = _value_arg(v, "readers")
    if val is None:
        return []
    return sorted(use.node.op_type for use in val.uses)


@builtin(
    "leads_to",
    "a chain of at most `depth` nodes, each the only reader of the value before it, leads "
    "from v to a node of op type `op`",
)
def leads_to(ctx: EvalContext, v: Any, op: Any, depth: Any) -> Any:
    """`leads_to(m, "Softmax", 3)`: m -> Div -> Add -> Softmax, each the value's one reader."""
    val = _value_arg(v, "leads_to")
    if val is None or not isinstance(op, str) or depth is UNKNOWN:
        return False
    current = val
    for _ in range(int(depth)):
        if _facts.count_uses(current) != 1 or not current.uses:
            return False
        node = current.uses[0].node
        if node.op_type == op:
            return True
        if not node.outputs or node.outputs[0] is None:
            return False
        current = node.outputs[0]
    return False


@builtin(
    "repeats_halves",
    "v's last axis is two equal halves by construction: Concat(f, f) on that axis, then only "
    "elementwise ops, one-element constants and Unsqueeze elsewhere (rotary cos/sin tables)",
)
def repeats_halves(ctx: EvalContext, v: Any) -> Any:
    """True when the last axis of `v` repeats its first half (false when not shown)."""
    val = _value_arg(v, "repeats_halves")
    return False if val is None else _facts.repeats_halves(val)


@builtin("rank", "number of dimensions")
def rank(ctx: EvalContext, v: Any) -> Any:
    """Number of dimensions (unknown when the rank is unknown)."""
    if isinstance(v, np.ndarray):
        return v.ndim
    val = _value_arg(v, "rank")
    if val is None:
        return UNKNOWN
    dims = _facts.shape_of(val)
    return UNKNOWN if dims is None else len(dims)


@builtin("shape", "list of dims: ints, symbol strings, or none when unknown")
def shape(ctx: EvalContext, v: Any) -> Any:
    """List of ints, symbol strings, or unknown dims."""
    if isinstance(v, np.ndarray):
        return list(v.shape)
    val = _value_arg(v, "shape")
    if val is None:
        return UNKNOWN
    dims = _facts.shape_of(val)
    if dims is None:
        return UNKNOWN
    return [UNKNOWN if d is None else SymbolicDim(d) if isinstance(d, str) else d for d in dims]


@builtin(
    "shape_value",
    "the elements of a 1-D integer value as dims (ints, symbol strings, none when unknown), "
    "followed through the ops that compute shapes",
)
def shape_value(ctx: EvalContext, v: Any) -> Any:
    """`[-1, "seq", 16]` for `Concat(-1, Slice(Shape(k), 2, 3), 16)` where k's dim 2 is seq."""
    if isinstance(v, np.ndarray):
        return [int(x) for x in v.reshape(-1)] if v.dtype.kind in "iu" and v.ndim <= 1 else UNKNOWN
    val = _value_arg(v, "shape_value")
    if val is None:
        return UNKNOWN
    opset = ctx.opset_imports.get("", ctx.opset_imports.get("ai.onnx", 0))
    elements = ir.shape_elements(val, opset)
    if elements is None:
        return UNKNOWN
    return [UNKNOWN if e is None else SymbolicDim(e) if isinstance(e, str) else e for e in elements]


@builtin("has_static_shape", "every dim is a known int")
def has_static_shape(ctx: EvalContext, v: Any) -> Any:
    """Every dimension is a known int."""
    val = _value_arg(v, "has_static_shape")
    if val is None:
        return False
    dims = _facts.shape_of(val)
    return dims is not None and all(isinstance(d, int) for d in dims)


def _numel(ctx: EvalContext, v: Any) -> Any:
    if isinstance(v, np.ndarray):
        return int(v.size)
    val = _value_arg(v, "numel")
    if val is None:
        return UNKNOWN
    dims = _facts.shape_of(val)
    if dims is None or not all(isinstance(d, int) for d in dims):
        return UNKNOWN
    return math.prod(int(d) for d in dims if isinstance(d, int))


numel = builtin("numel", "number of elements (static shape or constant)")(_numel)
size = builtin("size", "the same as `numel`")(_numel)


@builtin("dtype", 'ONNX dtype name: "float", "float16", "int64", ...')
def dtype(ctx: EvalContext, v: Any) -> Any:
    """ONNX dtype name or unknown."""
    if isinstance(v, np.ndarray):
        return ir.DataType.from_numpy(v.dtype).onnx_name
    val = _value_arg(v, "dtype")
    if val is None:
        return UNKNOWN
    found = _facts.dtype_of(val)
    return UNKNOWN if found is None else found.onnx_name


def model_opset(ctx: EvalContext, domain: str) -> int:
    """The model's opset version for a domain (0 when not imported)."""
    key = ir.schemas.normalize_domain(domain)
    version = ctx.opset_imports.get(key)
    if version is None and key == "":
        version = ctx.opset_imports.get("ai.onnx")
    return 0 if version is None else version


@builtin(
    "opset", "the model's opset version for a domain (0 if not imported)", keywords=("domain",)
)
def opset(ctx: EvalContext, domain: str = "") -> Any:
    """The model's opset version for a domain."""
    return model_opset(ctx, domain)


@builtin(
    "target_opset",
    "the opset a --target-opset conversion heads for (the model's own without one)",
    keywords=("domain",),
)
def target_opset(ctx: EvalContext, domain: str = "") -> Any:
    """The opset a `--target-opset` conversion heads for.

    Without a conversion it is the model's own opset, so rules can say
    `where target_opset() < 17` to decompose only when converting down.
    """
    key = ir.schemas.normalize_domain(domain)
    if key in ctx.target_opsets:
        return ctx.target_opsets[key]
    return model_opset(ctx, domain)
