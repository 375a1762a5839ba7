"""Shape rules of elementwise ops: unary ops keep the shape, n-ary ops broadcast.

On shape values the arithmetic is done element by element (`Add`, `Sub`, `Mul`, `Div`, `Mod`,
`Neg`, `Abs`, `Max`, `Min`, comparisons, `And`/`Or`/`Not`, `Where`), exactly as onnxruntime
computes it on int64: integer `Div` truncates toward zero, so it is followed only where that
equals floor division (a non-negative dividend) or the division is exact. A result that cannot
be stated for every value of the symbols is unknown, and so is a number the value's integer
type cannot hold (onnxruntime wraps it: 65536 * 65536 is 0 in int32, -1 cast to uint32 is
4294967295), or a symbolic element that may be negative in an unsigned type.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

from ir._core import Node, Tensor, Value
from ir._enums import DataType
from ir._shape_facts import (
    MAX_ELEMENTS,
    OutputFacts,
    Rule,
    ShapeData,
    ShapeFacts,
    attr_int,
    attr_tensor,
    broadcast,
    held_by,
    input_at,
    same_as_input,
)
from ir._symbolic_dims import DimExpr, const, exact_quotient, minimum

ElementFunction = Callable[..., DimExpr | None]

_UNARY = [
    "Abs",
    "Acos",
    "Acosh",
    "Asin",
    "Asinh",
    "Atan",
    "Atanh",
    "BitwiseNot",
    "Ceil",
    "Celu",
    "Clip",
    "Cos",
    "Cosh",
    "CumSum",
    "Elu",
    "Erf",
    "Exp",
    "Floor",
    "Gelu",
    "HardSigmoid",
    "HardSwish",
    "Hardmax",
    "IsInf",
    "IsNaN",
    "LeakyRelu",
    "Log",
    "LogSoftmax",
    "LpNormalization",
    "MeanVarianceNormalization",
    "Mish",
    "Neg",
    "Not",
    "PRelu",
    "Reciprocal",
    "Relu",
    "Round",
    "Selu",
    "Shrink",
    "Sigmoid",
    "Sign",
    "Sin",
    "Sinh",
    "Softmax",
    "Softplus",
    "Softsign",
    "Sqrt",
    "Tan",
    "Tanh",
    "ThresholdedRelu",
    "Trilu",
    "InstanceNormalization",
    "BatchNormalization",
    "LayerNormalization",
    "GroupNormalization",
    "RMSNormalization",
    # onnxruntime's elementwise ops in the default domain (see `_runtime_ops`).
    "SimplifiedLayerNormalization",
    "Affine",
    "ImageScaler",
    "ParametricSoftplus",
    "Scale",
    "ScaledTanh",
]
_BROADCASTING = [
    "Add",
    "Sub",
    "Mul",
    "Div",
    "Pow",
    "Mod",
    "Equal",
    "Less",
    "Greater",
    "LessOrEqual",
    "GreaterOrEqual",
    "And",
    "Or",
    "Xor",
    "Max",
    "Min",
    "Sum",
    "Mean",
    "BitShift",
    "BitwiseAnd",
    "BitwiseOr",
    "BitwiseXor",
    "Where",
]
# Integer types whose values hold any size a model can have (narrower ones could wrap).
_WIDE_INTEGERS = frozenset({DataType.INT32, DataType.INT64, DataType.UINT32, DataType.UINT64})


def _broadcasting(node: Node, facts: ShapeFacts) -> Sequence[OutputFacts]:
    shapes = [facts.shape(v) if v is not None else None for v in node.inputs]
    shape = broadcast(shapes) if node.inputs and None not in node.inputs else None
    function = _ELEMENT_FUNCTIONS.get(node.op_type)
    data = _elementwise_data(node, facts, function) if function is not None else None
    return [OutputFacts(shape, data)]


def _elementwise_data(node: Node, facts: ShapeFacts, function: ElementFunction) -> ShapeData | None:
    """`function` applied element by element to the inputs' shape values (broadcast)."""
    items: list[ShapeData] = []
    for value in node.inputs:
        data = facts.data(value) if value is not None else None
        if data is None:
            return None
        items.append(data)
    if not items:
        return None
    length = max(len(d.elements) for d in items)
    if any(len(d.elements) not in (1, length) for d in items):
        return None
    if node.op_type == "Mod" and attr_int(node, "fmod", 0) == 1:
        function = _fmod
    # The type the result is computed in: Where's values' (its condition is bool), else the
    # operands' (comparisons and logic give 0 and 1, which every type holds).
    dtype = facts.dtype(node.inputs[1] if node.op_type == "Where" else node.inputs[0])
    elements: list[DimExpr | None] = []
    for index in range(length):
        column = [d.elements[index if len(d.elements) > 1 else 0] for d in items]
        known = [e for e in column if e is not None]
        found = function(*column) if len(known) == len(column) else None
        elements.append(held_by(found, dtype))
    return ShapeData(tuple(elements), all(d.scalar for d in items))


def _unary(node: Node, facts: ShapeFacts) -> Sequence[OutputFacts]:
    (found,) = same_as_input(node, facts)
    function = _ELEMENT_FUNCTIONS.get(node.op_type)
    data = _elementwise_data(node, facts, function) if function is not None else None
    return [OutputFacts(found.shape, data)]


def _identity(node: Node, facts: ShapeFacts) -> Sequence[OutputFacts]:
    source = input_at(node, 0)
    return [OutputFacts(facts.shape(source), facts.data(source))]


def _dropout(node: Node, facts: ShapeFacts) -> Sequence[OutputFacts]:
    """Dropout: the output and the mask have the input's shape."""
    shape = facts.shape(input_at(node, 0))
    return [OutputFacts(shape), OutputFacts(shape)]


def _cast(node: Node, facts: ShapeFacts) -> Sequence[OutputFacts]:
    """Cast keeps the shape; a shape value stays one when cast to a wide integer type."""
    source = input_at(node, 0)
    return [OutputFacts(facts.shape(source), _cast_data(facts, source, attr_int(node, "to", 0)))]


def _cast_like(node: Node, facts: ShapeFacts) -> Sequence[OutputFacts]:
    """CastLike: Cast to the element type of its second input."""
    source = input_at(node, 0)
    target = facts.dtype(input_at(node, 1))
    return [OutputFacts(facts.shape(source), _cast_data(facts, source, int(target)))]


def _cast_data(facts: ShapeFacts, source: Value | None, target: int) -> ShapeData | None:
    """The elements of `source` cast to `target`, when they are known and it holds them.

    A shape value stays one in a wide integer type; so does a small float constant of whole
    numbers (exporters write `CastLike(0.0, n)` for the start of a Range to `n`), which such
    a cast keeps exactly. An element the target type cannot hold is unknown (onnxruntime
    wraps it).
    """
    data = facts.data(source)
    if data is not None and target == DataType.BOOL:
        return ShapeData(tuple(_truth(e) for e in data.elements), data.scalar)
    if target not in _WIDE_INTEGERS:
        return None
    if data is None:
        data = _whole_float_constant(source)
    if data is None:
        return None
    wide = DataType(target)
    return ShapeData(tuple(held_by(e, wide) for e in data.elements), data.scalar)


def _whole_float_constant(value: Value | None) -> ShapeData | None:
    """The elements of a small float constant of rank 0 or 1 when each is a whole number."""
    tensor = _constant_tensor(value)
    if tensor is None or not tensor.dtype.is_floating:
        return None
    if len(tensor.shape) > 1 or tensor.size > MAX_ELEMENTS:
        return None
    numbers = np.asarray(tensor.numpy(), dtype=np.float64).reshape(-1).tolist()
    if not all(math.isfinite(n) and n.is_integer() and abs(n) < 2**53 for n in numbers):
        return None
    return ShapeData(tuple(const(int(n)) for n in numbers), scalar=len(tensor.shape) == 0)


def _constant_tensor(value: Value | None) -> Tensor | None:
    """The tensor of an initializer no caller can override, or of a Constant's `value`."""
    if value is None:
        return None
    if value.const_value is not None:
        return None if value.is_graph_input() else value.const_value
    node = value.producer()
    if node is None or node.op_type != "Constant" or node.domain not in ("", "ai.onnx"):
        return None
    return attr_tensor(node, "value")


# element functions -----------------------------------------------------------------------------


def _truncating_div(a: DimExpr, b: DimExpr) -> DimExpr | None:
    """int64 `a / b` as onnxruntime computes it (toward zero)."""
    divisor = b.as_int()
    if divisor is None:
        return exact_quotient(a, b)
    if divisor == 0:
        return None
    dividend = a.as_int()
    if dividend is not None:
        quotient = abs(dividend) // abs(divisor)
        return const(quotient if (dividend < 0) == (divisor < 0) else -quotient)
    if a.is_nonnegative():
        return a // divisor if divisor > 0 else -(a // -divisor)
    return exact_quotient(a, b)


def _mod(a: DimExpr, b: DimExpr) -> DimExpr | None:
    """Integer Mod with fmod=0: the sign of the divisor, as Python's `%`."""
    divisor = b.as_int()
    if divisor is None or divisor == 0:
        return None
    return a % divisor


def _fmod(a: DimExpr, b: DimExpr) -> DimExpr | None:
    """Integer Mod with fmod=1: the sign of the dividend, as C's `fmod`."""
    divisor = b.as_int()
    if divisor is None or divisor == 0:
        return None
    dividend = a.as_int()
    if dividend is not None:
        remainder = abs(dividend) % abs(divisor)
        return const(-remainder if dividend < 0 else remainder)
    return a % abs(divisor) if a.is_nonnegative() else None


def _maximum(*items: DimExpr) -> DimExpr | None:
    """The largest item, when one is provably at least every other."""
    for candidate in items:
        if all((candidate - other).is_nonnegative() for other in items):
            return candidate
    return None


def _minimum(*items: DimExpr) -> DimExpr | None:
    """The smallest item: one provably at most every other, or a minimum of sizes."""
    for candidate in items:
        if all((other - candidate).is_nonnegative() for other in items):
            return candidate
    return minimum(*items)


def _abs(a: DimExpr) -> DimExpr | None:
    if a.is_nonnegative():
        return a
    if (-a).is_nonnegative():
        return -a
    return None


def _equal(a: DimExpr, b: DimExpr) -> DimExpr | None:
    if a == b:
        return const(1)
    if (a - b - 1).is_nonnegative() or (b - a - 1).is_nonnegative():
        return const(0)
    return const(0) if (a - b).as_int() is not None else None


def _less(a: DimExpr, b: DimExpr) -> DimExpr | None:
    if (b - a - 1).is_nonnegative():
        return const(1)
    if (a - b).is_nonnegative():
        return const(0)
    return None


def _less_or_equal(a: DimExpr, b: DimExpr) -> DimExpr | None:
    if (b - a).is_nonnegative():
        return const(1)
    if (a - b - 1).is_nonnegative():
        return const(0)
    return None


def _truth(a: DimExpr | None) -> DimExpr | None:
    """A bool from an integer: 1 for non-zero, 0 for zero."""
    value = a.as_int() if a is not None else None
    return None if value is None else const(int(value != 0))


def _and(a: DimExpr, b: DimExpr) -> DimExpr | None:
    left, right = a.as_int(), b.as_int()
    if left == 0 or right == 0:
        return const(0)
    return const(1) if left is not None and right is not None else None


def _or(a: DimExpr, b: DimExpr) -> DimExpr | None:
    left, right = a.as_int(), b.as_int()
    if left == 1 or right == 1:
        return const(1)
    return const(0) if left is not None and right is not None else None


def _not(a: DimExpr) -> DimExpr | None:
    value = a.as_int()
    return None if value is None else const(1 - value)


def _where(condition: DimExpr, x: DimExpr, y: DimExpr) -> DimExpr | None:
    value = condition.as_int()
    if value is not None:
        return x if value else y
    return x if x == y else None


def _sum(*items: DimExpr) -> DimExpr:
    total = const(0)
    for item in items:
        total = total + item
    return total


def _add(a: DimExpr, b: DimExpr) -> DimExpr:
    return a + b


def _sub(a: DimExpr, b: DimExpr) -> DimExpr:
    return a - b


def _mul(a: DimExpr, b: DimExpr) -> DimExpr:
    return a * b


def _neg(a: DimExpr) -> DimExpr:
    return -a


def _greater(a: DimExpr, b: DimExpr) -> DimExpr | None:
    return _less(b, a)


def _greater_or_equal(a: DimExpr, b: DimExpr) -> DimExpr | None:
    return _less_or_equal(b, a)


_ELEMENT_FUNCTIONS: dict[str, ElementFunction] = {
    "Add": _add,
    "Sub": _sub,
    "Mul": _mul,
    "Div": _truncating_div,
    "Mod": _mod,
    "Max": _maximum,
    "Min": _minimum,
    "Sum": _sum,
    "Neg": _neg,
    "Abs": _abs,
    "Equal": _equal,
    "Less": _less,
    "Greater": _greater,
    "LessOrEqual": _less_or_equal,
    "GreaterOrEqual": _greater_or_equal,
    "And": _and,
    "Or": _or,
    "Not": _not,
    "Where": _where,
}

RULES: dict[str, Rule] = {
    **dict.fromkeys(_UNARY, _unary),
    **dict.fromkeys(_BROADCASTING, _broadcasting),
    "Identity": _identity,
    "Dropout": _dropout,
    "Cast": _cast,
    "CastLike": _cast_like,
}

# The ops whose inputs broadcast against one another (numpy's rules).
BROADCASTING_OPS = frozenset(_BROADCASTING)
