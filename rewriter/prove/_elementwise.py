"""Elementwise ops, bit-precise: what onnxruntime's CPU kernels compute, element by element.

Floats follow IEEE-754 with round-to-nearest-even (z3's floating-point theory). Where ONNX
leaves a detail open, the semantics is onnxruntime's, checked bit for bit by the tests
(`tests/rewriter/prove`):

* `Max(a, b)` is NaN when either is NaN, else `a > b ? a : b`; `Min` likewise with `a < b`;
  more operands fold from the left. Between +0 and -0 onnxruntime returns either zero by code
  path (its vectorized and scalar kernels differ, float16 differs from float32): the
  semantics returns `b`, so a query with `signed_zeros=True` is exact for the scalar kernels
  only (the default equality, zeros equal, is exact for all);
* `Where` selects (IEEE: the chosen value's bits); onnxruntime's path for a broadcast scalar
  branch turns -0 into +0, the same zero-sign caveat;
* `Clip(x, lo, hi)` is `min(max(x, lo), hi)` with C++'s `std::max(a, b) = a < b ? b : a`
  and `std::min(a, b) = b < a ? b : a`: a NaN `x` stays NaN, a NaN bound is ignored;
* `Relu(x)` is `x < 0 ? +0 : x` (Relu(-0) is -0, Relu(NaN) is NaN); `LeakyRelu` is
  `x >= 0 ? x : alpha * x`; `PRelu` is `x < 0 ? slope * x : x`;
* `HardSigmoid` is `max(0, min(1, alpha * x + beta))` and `HardSwish` is
  `x * max(0, min(1, x / 6 + 1/2))`, with NaN propagated by both clamps; for float16 these
  activations (LeakyRelu too) compute in float32 and round back, as onnxruntime does;
* a float cast to an integer truncates toward zero; NaN, infinities and values outside the
  target type are poison (onnxruntime returns whatever the CPU's conversion gives);
* integer `Div` truncates toward zero; a division by zero, or the most negative value by
  -1, is poison (onnxruntime traps). Integer Add, Sub, Mul and Neg wrap.

Float attributes (alpha, beta) are float32 in ONNX and converted exactly to the op's type; a
z3 floating-point term is accepted in their place, so a rule can be proved for every alpha.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import z3

import ir
from rewriter.prove._broadcast import elementwise
from rewriter.prove._common import (
    Attributes,
    Computed,
    OpError,
    Semantics,
    Values,
    key_of,
    present,
    same_dtype,
)
from rewriter.prove._dtypes import RNE, Kind, from_python, kind_of, sort_of
from rewriter.prove._tensor import Element, SymbolicTensor, either


def float_attribute(value: object, dtype: ir.DataType) -> z3.ExprRef:
    """A float attribute as a term of `dtype`: a float32 number converted exactly, or a term."""
    if isinstance(value, z3.FPRef):
        if value.sort() == sort_of(dtype):
            return value
        return z3.fpFPToFP(RNE, value, sort_of(dtype))
    if not isinstance(value, int | float):
        raise OpError(f"a float attribute, got {value!r}")
    single = from_python(float(value), ir.DataType.FLOAT)
    if dtype == ir.DataType.FLOAT:
        return single
    return z3.simplify(z3.fpFPToFP(RNE, single, sort_of(dtype)))


def _zero(kind: Kind) -> z3.ExprRef:
    if kind.is_float:
        return z3.FPVal(0.0, sort_of(kind.dtype))
    return z3.BitVecVal(0, kind.width)


def _one(kind: Kind) -> z3.ExprRef:
    if kind.is_float:
        return z3.FPVal(1.0, sort_of(kind.dtype))
    return z3.BitVecVal(1, kind.width)


# ---------------------------------------------------------------------------------------------
# Comparisons as onnxruntime computes them


def less(kind: Kind, a: z3.ExprRef, b: z3.ExprRef) -> z3.BoolRef:
    """`a < b` (IEEE: false with a NaN; signed or unsigned for integers)."""
    if kind.is_float:
        return z3.fpLT(a, b)
    if kind.signed:
        return a < b
    return z3.ULT(a, b)


def less_equal(kind: Kind, a: z3.ExprRef, b: z3.ExprRef) -> z3.BoolRef:
    """`a <= b`."""
    if kind.is_float:
        return z3.fpLEQ(a, b)
    if kind.signed:
        return a <= b
    return z3.ULE(a, b)


def equal(kind: Kind, a: z3.ExprRef, b: z3.ExprRef) -> z3.BoolRef:
    """`a == b` (IEEE: +0 equals -0, NaN equals nothing)."""
    if kind.is_float:
        return z3.fpEQ(a, b)
    return a == b


def _is_nan(kind: Kind, a: z3.ExprRef) -> z3.BoolRef:
    return z3.fpIsNaN(a) if kind.is_float else z3.BoolVal(False)


def std_max(kind: Kind, a: z3.ExprRef, b: z3.ExprRef) -> z3.ExprRef:
    """C++'s `std::max(a, b)`: `a < b ? b : a`."""
    return z3.If(less(kind, a, b), b, a)


def std_min(kind: Kind, a: z3.ExprRef, b: z3.ExprRef) -> z3.ExprRef:
    """C++'s `std::min(a, b)`: `b < a ? b : a`."""
    return z3.If(less(kind, b, a), b, a)


def onnx_max(kind: Kind, a: z3.ExprRef, b: z3.ExprRef) -> z3.ExprRef:
    """Onnxruntime's Max of two: NaN if either is, else `a > b ? a : b`."""
    picked = z3.If(less(kind, b, a), a, b)
    if not kind.is_float:
        return picked
    return z3.If(z3.Or(z3.fpIsNaN(a), z3.fpIsNaN(b)), z3.fpNaN(a.sort()), picked)


def onnx_min(kind: Kind, a: z3.ExprRef, b: z3.ExprRef) -> z3.ExprRef:
    """Onnxruntime's Min of two: NaN if either is, else `a < b ? a : b`."""
    picked = z3.If(less(kind, a, b), a, b)
    if not kind.is_float:
        return picked
    return z3.If(z3.Or(z3.fpIsNaN(a), z3.fpIsNaN(b)), z3.fpNaN(a.sort()), picked)


# ---------------------------------------------------------------------------------------------
# Arithmetic


def _arith(op: str, kind: Kind, a: z3.ExprRef, b: z3.ExprRef) -> Computed:
    if kind.is_float:
        functions = {"Add": z3.fpAdd, "Sub": z3.fpSub, "Mul": z3.fpMul, "Div": z3.fpDiv}
        return functions[op](RNE, a, b), None
    if kind.is_bool:
        raise OpError(f"{op} does not take bool")
    if op == "Add":
        return a + b, None
    if op == "Sub":
        return a - b, None
    if op == "Mul":
        return a * b, None
    zero = z3.BitVecVal(0, kind.width)
    if kind.signed:
        smallest = z3.BitVecVal(1 << (kind.width - 1), kind.width)
        trap = z3.Or(b == zero, z3.And(a == smallest, b == z3.BitVecVal(-1, kind.width)))
        return a / b, trap
    return z3.UDiv(a, b), b == zero


def _binary(op: str) -> Semantics:
    def semantics(
        attributes: Attributes, inputs: Sequence[SymbolicTensor | None]
    ) -> list[SymbolicTensor]:
        a, b = present(op, inputs, 2)
        dtype = same_dtype(op, [a, b])
        kind = kind_of(dtype)

        def compute(values: Values) -> Computed:
            return _arith(op, kind, values[0], values[1])

        return [elementwise(dtype, [a, b], compute, key_of(op, attributes, inputs))]

    return semantics


def _comparison(op: str) -> Semantics:
    def semantics(
        attributes: Attributes, inputs: Sequence[SymbolicTensor | None]
    ) -> list[SymbolicTensor]:
        a, b = present(op, inputs, 2)
        kind = kind_of(same_dtype(op, [a, b]))

        def compute(values: Values) -> Computed:
            x, y = values
            if kind.is_bool:
                if op != "Equal":
                    raise OpError(f"{op} does not take bool")
                return x == y, None
            table = {
                "Equal": lambda: equal(kind, x, y),
                "Less": lambda: less(kind, x, y),
                "LessOrEqual": lambda: less_equal(kind, x, y),
                "Greater": lambda: less(kind, y, x),
                "GreaterOrEqual": lambda: less_equal(kind, y, x),
            }
            return table[op](), None

        key = key_of(op, attributes, inputs)
        return [elementwise(ir.DataType.BOOL, [a, b], compute, key)]

    return semantics


def _logical(op: str) -> Semantics:
    def semantics(
        attributes: Attributes, inputs: Sequence[SymbolicTensor | None]
    ) -> list[SymbolicTensor]:
        a, b = present(op, inputs, 2)
        if a.dtype != ir.DataType.BOOL or b.dtype != ir.DataType.BOOL:
            raise OpError(f"{op} takes bool")
        functions = {"And": z3.And, "Or": z3.Or, "Xor": z3.Xor}

        def compute(values: Values) -> Computed:
            return functions[op](values[0], values[1]), None

        return [elementwise(ir.DataType.BOOL, [a, b], compute, key_of(op, attributes, inputs))]

    return semantics


def _variadic(op: str, fold: Callable[[Kind, z3.ExprRef, z3.ExprRef], z3.ExprRef]) -> Semantics:
    def semantics(
        attributes: Attributes, inputs: Sequence[SymbolicTensor | None]
    ) -> list[SymbolicTensor]:
        operands = [i for i in inputs if i is not None]
        if not operands:
            raise OpError(f"{op} takes at least one input")
        kind = kind_of(same_dtype(op, operands))

        def compute(values: Values) -> Computed:
            result = values[0]
            for value in values[1:]:
                result = fold(kind, result, value)
            return result, None

        return [elementwise(kind.dtype, operands, compute, key_of(op, attributes, inputs))]

    return semantics


def _sum(kind: Kind, a: z3.ExprRef, b: z3.ExprRef) -> z3.ExprRef:
    return _arith("Add", kind, a, b)[0]


# ---------------------------------------------------------------------------------------------
# Unary ops and activations


def _unary(
    op: str, compute_for: Callable[[Kind, Attributes], Callable[[z3.ExprRef], Computed]]
) -> Semantics:
    def semantics(
        attributes: Attributes, inputs: Sequence[SymbolicTensor | None]
    ) -> list[SymbolicTensor]:
        (x,) = present(op, inputs, 1)
        kind = kind_of(x.dtype)
        single = compute_for(kind, attributes)

        def compute(values: Values) -> Computed:
            return single(values[0])

        return [elementwise(x.dtype, [x], compute, key_of(op, attributes, inputs))]

    return semantics


def _neg(kind: Kind, attributes: Attributes) -> Callable[[z3.ExprRef], Computed]:
    if kind.is_float:
        return lambda x: (z3.fpNeg(x), None)
    if kind.is_bool or not kind.signed:
        raise OpError("Neg takes signed numbers")
    return lambda x: (-x, None)


def _abs(kind: Kind, attributes: Attributes) -> Callable[[z3.ExprRef], Computed]:
    if kind.is_float:
        return lambda x: (z3.fpAbs(x), None)
    if kind.is_bool:
        raise OpError("Abs does not take bool")
    if not kind.signed:
        return lambda x: (x, None)
    return lambda x: (z3.If(x < 0, -x, x), None)


def _sign(kind: Kind, attributes: Attributes) -> Callable[[z3.ExprRef], Computed]:
    """-1, 0 or 1 as onnxruntime's kernels give it.

    Either zero gives +0; NaN stays NaN, except for float16, whose kernel compares and gives 0.
    """
    if kind.is_bool:
        raise OpError("Sign does not take bool")
    one, zero = _one(kind), _zero(kind)
    if kind.is_float:
        minus_one = z3.fpNeg(one)
        keeps_nan = kind.dtype != ir.DataType.FLOAT16

        def sign(x: z3.ExprRef) -> Computed:
            value = z3.If(z3.fpGT(x, zero), one, z3.If(z3.fpLT(x, zero), minus_one, zero))
            return (z3.If(z3.fpIsNaN(x), x, value) if keeps_nan else value), None

        return sign
    if not kind.signed:
        return lambda x: (z3.If(x == 0, zero, one), None)
    return lambda x: (z3.If(x > 0, one, z3.If(x < 0, -one, zero)), None)


def _float_only(op: str, kind: Kind) -> None:
    if not kind.is_float:
        raise OpError(f"{op} takes floats")


def _reciprocal(kind: Kind, attributes: Attributes) -> Callable[[z3.ExprRef], Computed]:
    _float_only("Reciprocal", kind)
    one = _one(kind)
    return lambda x: (z3.fpDiv(RNE, one, x), None)


def _sqrt(kind: Kind, attributes: Attributes) -> Callable[[z3.ExprRef], Computed]:
    _float_only("Sqrt", kind)
    return lambda x: (z3.fpSqrt(RNE, x), None)


def _rounding(mode: z3.FPRMRef) -> Callable[[Kind, Attributes], Callable[[z3.ExprRef], Computed]]:
    def compute_for(kind: Kind, attributes: Attributes) -> Callable[[z3.ExprRef], Computed]:
        _float_only("Floor/Ceil/Round", kind)
        return lambda x: (z3.fpRoundToIntegral(mode, x), None)

    return compute_for


def _relu(kind: Kind, attributes: Attributes) -> Callable[[z3.ExprRef], Computed]:
    zero = _zero(kind)
    if kind.is_bool:
        raise OpError("Relu does not take bool")
    return lambda x: (z3.If(less(kind, x, zero), zero, x), None)


_WIDENED = frozenset({ir.DataType.FLOAT16, ir.DataType.BFLOAT16})
_SINGLE = kind_of(ir.DataType.FLOAT)


def _computed_in_float32(
    kind: Kind, compute: Callable[[Kind, z3.ExprRef], z3.ExprRef]
) -> Callable[[z3.ExprRef], Computed]:
    """`compute` in the element's own type, or in float32 and rounded back for 16-bit floats.

    onnxruntime's CPU kernels for the activations compute float16 in float32 (the constants
    too), which rounds differently from float16 arithmetic.
    """
    if kind.dtype not in _WIDENED:
        return lambda x: (compute(kind, x), None)
    narrow = sort_of(kind.dtype)

    def widened(x: z3.ExprRef) -> Computed:
        wide = z3.fpFPToFP(RNE, x, sort_of(ir.DataType.FLOAT))
        return z3.fpFPToFP(RNE, compute(_SINGLE, wide), narrow), None

    return widened


def _leaky_relu(kind: Kind, attributes: Attributes) -> Callable[[z3.ExprRef], Computed]:
    _float_only("LeakyRelu", kind)
    given = attributes.get("alpha", 0.01)

    def compute(inner: Kind, x: z3.ExprRef) -> z3.ExprRef:
        alpha = float_attribute(given, inner.dtype)
        return z3.If(z3.fpGEQ(x, _zero(inner)), x, z3.fpMul(RNE, alpha, x))

    return _computed_in_float32(kind, compute)


def _clamp01(kind: Kind, value: z3.ExprRef) -> z3.ExprRef:
    """`max(0, min(1, value))` with NaN propagated (Eigen's cwiseMin/cwiseMax)."""
    return std_max(kind, std_min(kind, value, _one(kind)), _zero(kind))


def _hard_sigmoid(kind: Kind, attributes: Attributes) -> Callable[[z3.ExprRef], Computed]:
    _float_only("HardSigmoid", kind)
    given_alpha = attributes.get("alpha", 0.2)
    given_beta = attributes.get("beta", 0.5)

    def compute(inner: Kind, x: z3.ExprRef) -> z3.ExprRef:
        alpha = float_attribute(given_alpha, inner.dtype)
        beta = float_attribute(given_beta, inner.dtype)
        return _clamp01(inner, z3.fpAdd(RNE, z3.fpMul(RNE, alpha, x), beta))

    return _computed_in_float32(kind, compute)


def _hard_swish(kind: Kind, attributes: Attributes) -> Callable[[z3.ExprRef], Computed]:
    _float_only("HardSwish", kind)

    def compute(inner: Kind, x: z3.ExprRef) -> z3.ExprRef:
        alpha = float_attribute(1.0 / 6.0, inner.dtype)
        beta = float_attribute(0.5, inner.dtype)
        gate = _clamp01(inner, z3.fpAdd(RNE, z3.fpMul(RNE, alpha, x), beta))
        return z3.fpMul(RNE, x, gate)

    return _computed_in_float32(kind, compute)


def _not(kind: Kind, attributes: Attributes) -> Callable[[z3.ExprRef], Computed]:
    if not kind.is_bool:
        raise OpError("Not takes bool")
    return lambda x: (z3.Not(x), None)


def _identity(kind: Kind, attributes: Attributes) -> Callable[[z3.ExprRef], Computed]:
    return lambda x: (x, None)


# ---------------------------------------------------------------------------------------------
# Ops with extra operands: PRelu, Clip, Where


def _prelu(attributes: Attributes, inputs: Sequence[SymbolicTensor | None]) -> list[SymbolicTensor]:
    x, slope = present("PRelu", inputs, 2)
    kind = kind_of(same_dtype("PRelu", [x, slope]))
    zero = _zero(kind)

    def compute(values: Values) -> Computed:
        value, factor = values
        if kind.is_float:
            return z3.If(z3.fpLT(value, zero), z3.fpMul(RNE, factor, value), value), None
        return z3.If(less(kind, value, zero), _arith("Mul", kind, factor, value)[0], value), None

    return [elementwise(x.dtype, [x, slope], compute, key_of("PRelu", attributes, inputs))]


def _clip(attributes: Attributes, inputs: Sequence[SymbolicTensor | None]) -> list[SymbolicTensor]:
    (x,) = present("Clip", inputs, 1)
    kind = kind_of(x.dtype)
    operands = [x]
    positions: dict[str, int] = {}
    for name, position in (("min", 1), ("max", 2)):
        bound = inputs[position] if len(inputs) > position else None
        if bound is not None:
            if bound.rank != 0:
                raise OpError("Clip's bounds are scalars")
            positions[name] = len(operands)
            operands.append(bound)
    attribute_bounds = {
        name: float_attribute(attributes[name], x.dtype)
        for name in ("min", "max")
        if name in attributes and name not in positions
    }
    # an absent bound is the type's extreme (onnxruntime clips -inf to the lowest float, even
    # with no bound at all)
    for name, lowest in (("min", True), ("max", False)):
        if name not in positions and name not in attribute_bounds:
            attribute_bounds[name] = _extreme(kind, lowest=lowest)

    def compute(values: Values) -> Computed:
        result = values[0]
        low = values[positions["min"]] if "min" in positions else attribute_bounds.get("min")
        high = values[positions["max"]] if "max" in positions else attribute_bounds.get("max")
        if low is not None:
            result = std_max(kind, result, low)
        if high is not None:
            result = std_min(kind, result, high)
        return result, None

    return [elementwise(x.dtype, operands, compute, key_of("Clip", attributes, inputs))]


def _extreme(kind: Kind, *, lowest: bool) -> z3.ExprRef:
    """The type's lowest or largest finite value."""
    if kind.is_float:
        # the largest finite float: the largest biased exponent below infinity's, all ones
        exponent = (1 << kind.exponent_bits) - 2
        significand = (1 << (kind.significand_bits - 1)) - 1
        bits = (exponent << (kind.significand_bits - 1)) | significand
        width = kind.exponent_bits + kind.significand_bits
        largest = z3.simplify(z3.fpBVToFP(z3.BitVecVal(bits, width), sort_of(kind.dtype)))
        return z3.simplify(z3.fpNeg(largest)) if lowest else largest
    if kind.signed:
        edge = -(1 << (kind.width - 1)) if lowest else (1 << (kind.width - 1)) - 1
    else:
        edge = 0 if lowest else (1 << kind.width) - 1
    return z3.BitVecVal(edge % (1 << kind.width), kind.width)


def _where(attributes: Attributes, inputs: Sequence[SymbolicTensor | None]) -> list[SymbolicTensor]:
    condition, a, b = present("Where", inputs, 3)
    if condition.dtype != ir.DataType.BOOL:
        raise OpError("Where's condition is bool")
    dtype = same_dtype("Where", [a, b])

    def compute(values: Values) -> Computed:
        return z3.If(values[0], values[1], values[2]), None

    def poison_of(elements: Sequence[Element]) -> z3.BoolRef | None:
        # only the branch taken passes its poison on (and the condition's own)
        chosen = elements[1].poison, elements[2].poison
        branch: z3.BoolRef | None = None
        if chosen[0] is not None or chosen[1] is not None:
            branch = z3.If(
                elements[0].value,
                chosen[0] if chosen[0] is not None else z3.BoolVal(False),
                chosen[1] if chosen[1] is not None else z3.BoolVal(False),
            )
        return either(elements[0].poison, branch)

    key = key_of("Where", attributes, inputs)
    return [elementwise(dtype, [condition, a, b], compute, key, poison_of=poison_of)]


# ---------------------------------------------------------------------------------------------
# Cast


def cast_value(source: Kind, target: Kind, value: z3.ExprRef) -> Computed:
    """One element cast from `source` to `target` (see the module docstring for poison)."""
    if source.dtype == target.dtype:
        return value, None
    sort = sort_of(target.dtype)
    if source.is_bool:
        return z3.If(value, _one(target), _zero(target)) if not target.is_bool else value, None
    if target.is_bool:
        if source.is_float:
            return z3.Not(z3.fpIsZero(value)), None
        return value != z3.BitVecVal(0, source.width), None
    if source.is_float and target.is_float:
        return z3.fpFPToFP(RNE, value, sort), None
    if source.is_float:
        return _float_to_integer(source, target, value)
    if target.is_float:
        if source.signed:
            return z3.fpSignedToFP(RNE, value, sort), None
        return z3.fpUnsignedToFP(RNE, value, sort), None
    return _resize(source, target, value), None


def _resize(source: Kind, target: Kind, value: z3.ExprRef) -> z3.ExprRef:
    if target.width == source.width:
        return value
    if target.width < source.width:
        return z3.Extract(target.width - 1, 0, value)
    extra = target.width - source.width
    return z3.SignExt(extra, value) if source.signed else z3.ZeroExt(extra, value)


def _float_to_integer(source: Kind, target: Kind, value: z3.ExprRef) -> Computed:
    truncated = z3.fpRoundToIntegral(z3.RTZ(), value)
    if target.signed:
        low, high = -(1 << (target.width - 1)), (1 << (target.width - 1)) - 1
        converted = z3.fpToSBV(z3.RTZ(), value, z3.BitVecSort(target.width))
    else:
        low, high = 0, (1 << target.width) - 1
        converted = z3.fpToUBV(z3.RTZ(), value, z3.BitVecSort(target.width))
    # bounds compared exactly: in the float's own sort when they fit, which the fragment's
    # dtypes' extremes do after rounding toward zero (an out-of-range value stays out)
    sort = sort_of(source.dtype)
    lowest = z3.fpRoundToIntegral(z3.RTZ(), z3.fpRealToFP(z3.RTP(), z3.RealVal(low), sort))
    highest = z3.fpRoundToIntegral(z3.RTZ(), z3.fpRealToFP(z3.RTN(), z3.RealVal(high), sort))
    outside = z3.Or(
        z3.fpIsNaN(value),
        z3.fpIsInf(value),
        z3.fpLT(truncated, lowest),
        z3.fpGT(truncated, highest),
    )
    return converted, outside


def _cast(attributes: Attributes, inputs: Sequence[SymbolicTensor | None]) -> list[SymbolicTensor]:
    (x,) = present("Cast", inputs, 1)
    to = attributes.get("to")
    if not isinstance(to, int):
        raise OpError("Cast needs its `to` attribute")
    target = kind_of(ir.DataType(to))
    source = kind_of(x.dtype)

    def compute(values: Values) -> Computed:
        return cast_value(source, target, values[0])

    return [elementwise(target.dtype, [x], compute, key_of("Cast", attributes, inputs))]


def _cast_like(
    attributes: Attributes, inputs: Sequence[SymbolicTensor | None]
) -> list[SymbolicTensor]:
    """CastLike(x, like): Cast of x to like's dtype (like's values and shape do not matter)."""
    x, like = present("CastLike", inputs, 2)
    target = kind_of(like.dtype)
    source = kind_of(x.dtype)

    def compute(values: Values) -> Computed:
        return cast_value(source, target, values[0])

    return [elementwise(target.dtype, [x], compute, key_of("CastLike", attributes, inputs))]


ELEMENTWISE: dict[str, Semantics] = {
    "Add": _binary("Add"),
    "Sub": _binary("Sub"),
    "Mul": _binary("Mul"),
    "Div": _binary("Div"),
    "Equal": _comparison("Equal"),
    "Less": _comparison("Less"),
    "LessOrEqual": _comparison("LessOrEqual"),
    "Greater": _comparison("Greater"),
    "GreaterOrEqual": _comparison("GreaterOrEqual"),
    "And": _logical("And"),
    "Or": _logical("Or"),
    "Xor": _logical("Xor"),
    "Max": _variadic("Max", onnx_max),
    "Min": _variadic("Min", onnx_min),
    "Sum": _variadic("Sum", _sum),
    "Neg": _unary("Neg", _neg),
    "Abs": _unary("Abs", _abs),
    "Sign": _unary("Sign", _sign),
    "Reciprocal": _unary("Reciprocal", _reciprocal),
    "Sqrt": _unary("Sqrt", _sqrt),
    "Floor": _unary("Floor", _rounding(z3.RTN())),
    "Ceil": _unary("Ceil", _rounding(z3.RTP())),
    "Round": _unary("Round", _rounding(z3.RNE())),
    "Relu": _unary("Relu", _relu),
    "LeakyRelu": _unary("LeakyRelu", _leaky_relu),
    "HardSigmoid": _unary("HardSigmoid", _hard_sigmoid),
    "HardSwish": _unary("HardSwish", _hard_swish),
    "Not": _unary("Not", _not),
    "Identity": _unary("Identity", _identity),
    "PRelu": _prelu,
    "Clip": _clip,
    "Where": _where,
    "Cast": _cast,
    "CastLike": _cast_like,
}
"""The elementwise ops the prover models exactly, by op type (default domain)."""
