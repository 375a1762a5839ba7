"""Value ranges: the interval every element of a value lies in, derived from its producers.

`value_range(v)` follows the graph upward from `v` and combines what each producer says:
a constant's smallest and largest element; an integer or bool type's own limits (a graph
input of type int64 holds nothing below int64's minimum); sizes (`Shape`, `Size`) are never
negative; ops that only move elements (Reshape, Unsqueeze, Transpose, Expand, Slice, Gather,
...) keep their input's range; `Concat` and `Where` take the hull of their inputs', `Min` and
`Max` the elementwise extremes; `Cast` converts the bounds into the new type (a float16 that
cannot hold int64's limits gets infinite ones: a Cast overflows to infinity); `Add`, `Sub`,
`Mul`, `Div` (by a divisor whose range excludes 0), `Neg`, `Relu`, `Abs`, `Sqrt`, `Exp`,
`Pow` by a constant 2 and the mean-like reductions apply interval arithmetic. Each range
also says whether an element may be NaN (`0 * inf`, `inf - inf`, a NaN constant, a float
nobody bounds).

So BERT's additive mask `(1 - Cast(mask)) * -10000` of an int64 `mask` is provably finite:
the Cast gives [-9.2e18, 9.2e18] in float32, the Sub and the Mul by a finite constant keep it
finite. Bounds are computed in float64 and rounded outward into the value's type, so a
range is never narrower than what the ops compute in IEEE arithmetic. Integer arithmetic
that may leave its type (and wrap) gives the type's whole range.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

import ir
from rewriter.engine import _facts


@dataclasses.dataclass(frozen=True, slots=True)
class ValueRange:
    """Every element lies in [low, high] (infinities allowed), or is NaN when `nan`."""

    low: float
    high: float
    nan: bool

    @property
    def finite(self) -> bool:
        """True when every element is a finite number (no NaN, no infinity)."""
        return not self.nan and math.isfinite(self.low) and math.isfinite(self.high)

    def hull(self, other: ValueRange) -> ValueRange:
        """The smallest range holding both."""
        return ValueRange(
            min(self.low, other.low), max(self.high, other.high), self.nan or other.nan
        )


UNBOUNDED = ValueRange(-math.inf, math.inf, True)
"""What is known of a float nobody bounds: anything, NaN included."""

# Ops whose every output element is one of their first input's elements.
_MOVING = frozenset(
    {
        "Identity",
        "Unsqueeze",
        "Squeeze",
        "Reshape",
        "Flatten",
        "Expand",
        "Transpose",
        "Slice",
        "Split",
        "Tile",
        "Gather",
        "GatherElements",
        "GatherND",
        "DepthToSpace",
        "SpaceToDepth",
    }
)
# Reductions whose result lies between their input's smallest and largest element.
_WITHIN = frozenset({"ReduceMean", "ReduceMax", "ReduceMin", "GlobalAveragePool"})
_AVERAGES = frozenset({"ReduceMean", "GlobalAveragePool"})
_DEPTH = 24
_ELEMENTS = 1 << 16  # larger constants (weights) are not read


def value_range(value: ir.Value) -> ValueRange:
    """The range of `value`'s elements (`type_range(dtype)` when nothing more is known)."""
    return _Ranges().of(value, 0)


def type_range(dtype: ir.DataType | None) -> ValueRange:
    """What any value of `dtype` holds: its limits, or anything for floats and unknowns."""
    if dtype == ir.DataType.BOOL:
        return ValueRange(0.0, 1.0, False)
    if dtype is not None and dtype.is_integer:
        try:
            info = np.iinfo(ir.numpy_dtype(dtype))
        except (ValueError, TypeError):  # 4-bit types numpy has no limits for
            return ValueRange(-math.inf, math.inf, False)
        return ValueRange(float(info.min), float(info.max), False)
    return UNBOUNDED


class _Ranges:
    """One query's walk up the graph, with the ranges found so far (a DAG is shared)."""

    def __init__(self) -> None:
        self.seen: dict[int, ValueRange] = {}

    def of(self, value: ir.Value | None, depth: int) -> ValueRange:
        if value is None:
            return UNBOUNDED
        key = id(value)
        if key not in self.seen:
            self.seen[key] = self._compute(value, depth)
        return self.seen[key]

    def _compute(self, value: ir.Value, depth: int) -> ValueRange:
        found = _constant_range(value)
        if found is not None:
            return found
        node = value.producer()
        dtype = _facts.dtype_of(value) or (_cast_target(node) if node is not None else None)
        limits = type_range(dtype)
        if node is None or depth > _DEPTH or node.domain not in ("", "ai.onnx"):
            return limits
        derived = self._derive(node, value, depth + 1)
        if derived is None:
            return limits
        return _fit(derived, dtype)

    def _derive(self, node: ir.Node, out: ir.Value, depth: int) -> ValueRange | None:
        op = node.op_type
        inputs = node.inputs
        if op in ("Shape", "Size"):
            return ValueRange(0.0, float(np.iinfo(np.int64).max), False)
        if op == "ConstantOfShape":
            fill = node.attribute("value")
            array = np.asarray(fill.numpy()) if isinstance(fill, ir.Tensor) else np.zeros(1)
            return _array_range(array)
        if not inputs or inputs[0] is None:
            return None
        if op in _MOVING or op in _WITHIN:
            within = self.of(inputs[0], depth)
            return _widen(within) if op in _AVERAGES else within
        if op == "Cast":
            return self._cast(node, out, depth)
        handler = _HANDLERS.get(op)
        if handler is None:
            return None
        return handler(self, node, depth)

    def _cast(self, node: ir.Node, out: ir.Value, depth: int) -> ValueRange | None:
        source = node.inputs[0]
        assert source is not None, "Cast without input"
        target = _facts.dtype_of(out) or _cast_target(node)
        if target is None:
            return None
        found = self.of(source, depth)
        if target == ir.DataType.BOOL:
            return ValueRange(0.0, 1.0, False)
        if target.is_integer:
            limits = type_range(target)
            if found.nan or found.low < limits.low or found.high > limits.high:
                return None  # out-of-range float-to-int casts are undefined
            return ValueRange(math.floor(found.low), math.ceil(found.high), False)
        return found  # `_fit` rounds the bounds into the target type

    def operands(self, node: ir.Node, depth: int) -> list[ValueRange] | None:
        if any(v is None for v in node.inputs):
            return None
        return [self.of(v, depth) for v in node.inputs]


def _cast_target(node: ir.Node) -> ir.DataType | None:
    """The type a Cast converts to (None for other ops or a broken `to`)."""
    if node.op_type != "Cast" or node.domain not in ("", "ai.onnx"):
        return None
    to = node.attribute("to")
    try:
        return ir.DataType(to) if isinstance(to, int) else None
    except ValueError:
        return None


def _constant_range(value: ir.Value) -> ValueRange | None:
    size = _facts.const_size(value)
    if size is None or size > _ELEMENTS:
        return None
    array = _facts.const_array(value)
    if array is None or array.dtype.kind not in "iufb":
        return None
    return _array_range(array)


def _array_range(array: np.ndarray[Any, Any]) -> ValueRange | None:
    if array.size == 0:
        return None
    values = array.astype(np.float64).ravel()
    nan = bool(np.isnan(values).any())
    finite_or_inf = values[~np.isnan(values)]
    if finite_or_inf.size == 0:
        return ValueRange(math.inf, -math.inf, True)  # only NaN
    return ValueRange(float(finite_or_inf.min()), float(finite_or_inf.max()), nan)


def _widen(found: ValueRange) -> ValueRange:
    """A mean computed in floating point may land an ulp outside its inputs' range.

    A bound of 0 stays: a sum of elements on one side of 0 stays there.
    """
    return ValueRange(_outward(found.low, -1), _outward(found.high, 1), found.nan)


def _outward(bound: float, direction: int) -> float:
    if bound == 0 or not math.isfinite(bound):
        return bound
    scaled = bound * (1 + 1e-6) if (bound > 0) == (direction > 0) else bound * (1 - 1e-6)
    return _next_up(scaled) if direction > 0 else _next_down(scaled)


def _next_down(x: float) -> float:
    return math.nextafter(x, -math.inf) if math.isfinite(x) else x


def _next_up(x: float) -> float:
    return math.nextafter(x, math.inf) if math.isfinite(x) else x


def _fit(found: ValueRange, dtype: ir.DataType | None) -> ValueRange:
    """`found` as values of `dtype` hold it: rounded outward, clipped or widened to the type."""
    if dtype is None:
        return ValueRange(_next_down(found.low), _next_up(found.high), found.nan)
    limits = type_range(dtype)
    if dtype.is_integer or dtype == ir.DataType.BOOL:
        if found.nan or found.low < limits.low or found.high > limits.high:
            return limits  # integer arithmetic that may leave the type wraps around
        return ValueRange(found.low, found.high, False)
    if not dtype.is_floating:
        return UNBOUNDED
    return ValueRange(
        _round(found.low, dtype, down=True), _round(found.high, dtype, down=False), found.nan
    )


def _round(x: float, dtype: ir.DataType, *, down: bool) -> float:
    """The representable value of `dtype` at or beyond `x` (infinity past the type's max)."""
    if not math.isfinite(x):
        return x
    try:
        kind = ir.numpy_dtype(dtype)
    except (ValueError, TypeError):
        return -math.inf if down else math.inf
    with np.errstate(all="ignore"):
        rounded = float(np.asarray(x, dtype=np.float64).astype(kind))
        if (down and rounded > x) or (not down and rounded < x):
            rounded = _step(rounded, kind, down=down)
    return rounded


def _step(x: float, kind: np.dtype[Any], *, down: bool) -> float:
    """The neighbour of `x` in `kind` (numpy's nextafter does not know every ml_dtypes type)."""
    try:
        step = np.asarray(x, dtype=kind)
        toward = np.asarray(-np.inf if down else np.inf, dtype=kind)
        return float(np.nextafter(step, toward))
    except TypeError:
        return -math.inf if down else math.inf


def _sum(a: ValueRange, b: ValueRange) -> ValueRange:
    nan = a.nan or b.nan
    nan = nan or (a.high == math.inf and b.low == -math.inf)
    nan = nan or (a.low == -math.inf and b.high == math.inf)
    return ValueRange(a.low + b.low, a.high + b.high, nan)


def _negated(a: ValueRange) -> ValueRange:
    return ValueRange(-a.high, -a.low, a.nan)


def _product(a: ValueRange, b: ValueRange) -> ValueRange:
    corners = [_times(x, y) for x in (a.low, a.high) for y in (b.low, b.high)]
    zero_times_inf = (_holds_zero(a) and _unbounded(b)) or (_holds_zero(b) and _unbounded(a))
    return ValueRange(min(corners), max(corners), a.nan or b.nan or zero_times_inf)


def _times(x: float, y: float) -> float:
    if (x == 0 and math.isinf(y)) or (y == 0 and math.isinf(x)):
        return 0.0  # the NaN it gives is recorded apart
    return x * y


def _holds_zero(a: ValueRange) -> bool:
    return a.low <= 0 <= a.high


def _unbounded(a: ValueRange) -> bool:
    return math.isinf(a.low) or math.isinf(a.high)


def _add(ranges: _Ranges, node: ir.Node, depth: int) -> ValueRange | None:
    found = ranges.operands(node, depth)
    if found is None or len(found) != 2:
        return None
    return _sum(found[0], found[1])


def _sub(ranges: _Ranges, node: ir.Node, depth: int) -> ValueRange | None:
    found = ranges.operands(node, depth)
    if found is None or len(found) != 2:
        return None
    return _sum(found[0], _negated(found[1]))


def _mul(ranges: _Ranges, node: ir.Node, depth: int) -> ValueRange | None:
    found = ranges.operands(node, depth)
    if found is None or len(found) != 2:
        return None
    return _product(found[0], found[1])


def _div(ranges: _Ranges, node: ir.Node, depth: int) -> ValueRange | None:
    found = ranges.operands(node, depth)
    if found is None or len(found) != 2:
        return None
    a, b = found
    if _holds_zero(b):
        return None
    inverse = ValueRange(1.0 / b.high, 1.0 / b.low, False)
    quotient = _product(a, inverse)
    both_infinite = _unbounded(a) and _unbounded(b)
    return ValueRange(quotient.low, quotient.high, quotient.nan or b.nan or both_infinite)


def _neg(ranges: _Ranges, node: ir.Node, depth: int) -> ValueRange | None:
    return _negated(ranges.of(node.inputs[0], depth))


def _abs(ranges: _Ranges, node: ir.Node, depth: int) -> ValueRange | None:
    a = ranges.of(node.inputs[0], depth)
    low = 0.0 if _holds_zero(a) else min(abs(a.low), abs(a.high))
    return ValueRange(low, max(abs(a.low), abs(a.high)), a.nan)


def _relu(ranges: _Ranges, node: ir.Node, depth: int) -> ValueRange | None:
    a = ranges.of(node.inputs[0], depth)
    return ValueRange(max(a.low, 0.0), max(a.high, 0.0), a.nan)


def _sqrt(ranges: _Ranges, node: ir.Node, depth: int) -> ValueRange | None:
    a = ranges.of(node.inputs[0], depth)
    negative = a.low < 0
    return ValueRange(math.sqrt(max(a.low, 0.0)), math.sqrt(max(a.high, 0.0)), a.nan or negative)


def _exp(ranges: _Ranges, node: ir.Node, depth: int) -> ValueRange | None:
    a = ranges.of(node.inputs[0], depth)
    return ValueRange(_safe_exp(a.low), _safe_exp(a.high), a.nan)


def _safe_exp(x: float) -> float:
    try:
        return math.exp(x)
    except OverflowError:
        return math.inf


def _pow(ranges: _Ranges, node: ir.Node, depth: int) -> ValueRange | None:
    exponent = node.inputs[1] if len(node.inputs) > 1 else None
    array = _facts.const_array(exponent) if exponent is not None else None
    if array is None or array.size != 1 or float(array.reshape(-1)[0]) != 2.0:
        return None
    a = ranges.of(node.inputs[0], depth)
    squares = (a.low * a.low, a.high * a.high)
    low = 0.0 if _holds_zero(a) else min(squares)
    return ValueRange(low, max(squares), a.nan)


def _hull_of(ranges: _Ranges, values: Sequence[ir.Value | None], depth: int) -> ValueRange | None:
    if not values or any(v is None for v in values):
        return None
    found = [ranges.of(v, depth) for v in values]
    result = found[0]
    for other in found[1:]:
        result = result.hull(other)
    return result


def _concat(ranges: _Ranges, node: ir.Node, depth: int) -> ValueRange | None:
    return _hull_of(ranges, node.inputs, depth)


def _where(ranges: _Ranges, node: ir.Node, depth: int) -> ValueRange | None:
    return _hull_of(ranges, node.inputs[1:3], depth) if len(node.inputs) == 3 else None


def _softmax(ranges: _Ranges, node: ir.Node, depth: int) -> ValueRange | None:
    a = ranges.of(node.inputs[0], depth)
    # exp(x - max) over a row: NaN when the row holds NaN, +inf, or only -inf
    return ValueRange(0.0, 1.0, a.nan or _unbounded(a))


def _extreme(pick: Callable[..., float]) -> Callable[[_Ranges, ir.Node, int], ValueRange | None]:
    def combine(ranges: _Ranges, node: ir.Node, depth: int) -> ValueRange | None:
        found = ranges.operands(node, depth)
        if not found:
            return None
        return ValueRange(
            pick(r.low for r in found), pick(r.high for r in found), any(r.nan for r in found)
        )

    return combine


def _bounded_by(low: float, high: float) -> Callable[[_Ranges, ir.Node, int], ValueRange | None]:
    def bounded(ranges: _Ranges, node: ir.Node, depth: int) -> ValueRange | None:
        return ValueRange(low, high, ranges.of(node.inputs[0], depth).nan)

    return bounded


_HANDLERS: dict[str, Callable[[_Ranges, ir.Node, int], ValueRange | None]] = {
    "Add": _add,
    "Sub": _sub,
    "Mul": _mul,
    "Div": _div,
    "Neg": _neg,
    "Abs": _abs,
    "Relu": _relu,
    "Sqrt": _sqrt,
    "Exp": _exp,
    "Pow": _pow,
    "Concat": _concat,
    "Where": _where,
    "Min": _extreme(min),
    "Max": _extreme(max),
    "Sigmoid": _bounded_by(0.0, 1.0),
    "Softmax": _softmax,
    "Tanh": _bounded_by(-1.0, 1.0),
    "Erf": _bounded_by(-1.0, 1.0),
}
