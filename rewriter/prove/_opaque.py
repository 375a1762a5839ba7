"""Ops outside the exact fragment, as uninterpreted functions.

A rule that only moves such an op (`Exp(Transpose(x)) -> Transpose(Exp(x))`, `MatMul(x, w) + 0
-> MatMul(x, w)`) is proved without knowing what it computes:

* elementwise ops (Exp, Tanh, Erf, Sigmoid, Pow, ...) are functions of their operands'
  elements: `Exp(x)[i] = exp_float(x[i])`, one uninterpreted function per op, attributes and
  types, so equal elements give equal results wherever they are;
* other ops (reductions, MatMul, Softmax, normalizations) are functions of their inputs'
  structural keys and the output index: the same op on the same tensors is the same tensor,
  and nothing else is known about it. Their output shapes are computed (reduced axes, matrix
  products, the input's shape).

Function names are built from the op, its attributes and types (and the keys), so both sides
of a query share them without any state.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence

import z3

import ir
from rewriter.prove._broadcast import broadcast_shapes, elementwise
from rewriter.prove._common import Computed, OpError, Semantics, Values, key_of, present
from rewriter.prove._dtypes import sort_of
from rewriter.prove._indexing import constant_ints
from rewriter.prove._tensor import Dim, Element, Index, SymbolicTensor, all_of, same_dim

Attributes = Mapping[str, object]
Inputs = Sequence[SymbolicTensor | None]

UNARY = frozenset(
    {
        "Exp", "Log", "Tanh", "Erf", "Sigmoid", "Sin", "Cos", "Tan", "Asin", "Acos", "Atan",
        "Sinh", "Cosh", "Asinh", "Acosh", "Atanh", "Softplus", "Softsign", "Elu", "Selu",
        "Celu", "Gelu", "Mish", "ThresholdedRelu",
    }
)  # fmt: skip
BINARY = frozenset({"Pow", "Mod", "BitShift"})
REDUCTIONS = frozenset(
    {
        "ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1",
        "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare",
    }
)  # fmt: skip
SAME_SHAPE = frozenset(
    {"Softmax", "LogSoftmax", "Hardmax", "LpNormalization", "InstanceNormalization", "CumSum"}
)


def _digest(key: object) -> str:
    return hashlib.sha256(repr(key).encode()).hexdigest()[:16]


def _function_name(op: str, attributes: Attributes, dtypes: Sequence[ir.DataType]) -> str:
    written = ",".join(f"{k}={v!r}" for k, v in sorted(attributes.items()))
    types = ",".join(d.onnx_name for d in dtypes)
    return f"{op}<{written}>({types})"


def _unary(op: str) -> Semantics:
    def semantics(attributes: Attributes, inputs: Inputs) -> list[SymbolicTensor]:
        (x,) = present(op, inputs, 1)
        name = _function_name(op, attributes, [x.dtype])
        function = z3.Function(name, sort_of(x.dtype), sort_of(x.dtype))

        def compute(values: Values) -> Computed:
            return function(values[0]), None

        return [elementwise(x.dtype, [x], compute, key_of(op, attributes, inputs))]

    return semantics


def _binary(op: str) -> Semantics:
    def semantics(attributes: Attributes, inputs: Inputs) -> list[SymbolicTensor]:
        a, b = present(op, inputs, 2)
        name = _function_name(op, attributes, [a.dtype, b.dtype])
        function = z3.Function(name, sort_of(a.dtype), sort_of(b.dtype), sort_of(a.dtype))

        def compute(values: Values) -> Computed:
            found = function(values[0], values[1])
            if op == "Pow":
                found = _known_powers(values[0], values[1], found)
            return found, None

        return [elementwise(a.dtype, [a, b], compute, key_of(op, attributes, inputs))]

    return semantics


def _known_powers(base: z3.ExprRef, exponent: z3.ExprRef, other: z3.ExprRef) -> z3.ExprRef:
    """Pow where onnxruntime's is exact: x ** 1 is x, x ** 0 is 1 (NaN too).

    Not for 64-bit integer bases, which its kernel takes through double (`x ** 1` of the
    largest int64 is the smallest).
    """
    if not z3.is_fp(base) and base.size() > 32:
        return other
    if z3.is_fp(exponent):
        one_exponent = z3.fpEQ(exponent, z3.FPVal(1.0, exponent.sort()))
        zero_exponent = z3.fpIsZero(exponent)
    else:
        one_exponent = exponent == 1
        zero_exponent = exponent == 0
    one = z3.FPVal(1.0, base.sort()) if z3.is_fp(base) else z3.BitVecVal(1, base.size())
    return z3.If(one_exponent, base, z3.If(zero_exponent, one, other))


def _keyed(
    op: str,
    attributes: Attributes,
    inputs: Inputs,
    dtype: ir.DataType,
    shape: Sequence[Dim],
    valid: z3.BoolRef,
) -> SymbolicTensor:
    """An output that is an uninterpreted function of the inputs' keys and the index."""
    key = key_of(op, attributes, inputs)
    name = f"{op}#{_digest(key)}"
    if shape:
        function = z3.Function(name, *([z3.IntSort()] * len(shape)), sort_of(dtype))

        def at(index: Index) -> Element:
            return Element(function(*index))

    else:
        scalar = z3.Const(name, sort_of(dtype))

        def at(index: Index) -> Element:
            del index
            return Element(scalar)

    parts = [i.valid for i in inputs if i is not None]
    return SymbolicTensor(dtype, tuple(shape), at, key, z3.simplify(all_of([valid, *parts])))


def _reduction_axes(op: str, attributes: Attributes, inputs: Inputs) -> list[int] | None:
    given = inputs[1] if len(inputs) > 1 else None
    if given is not None:
        return constant_ints(op, "axes", given)
    listed = attributes.get("axes")
    if listed is None:
        return None
    if not isinstance(listed, Sequence) or not all(isinstance(a, int) for a in listed):
        raise OpError(f"{op}: `axes` is a list of ints")
    return [int(a) for a in listed]


def _reduction(op: str) -> Semantics:
    def semantics(attributes: Attributes, inputs: Inputs) -> list[SymbolicTensor]:
        (x,) = present(op, inputs, 1)
        axes = _reduction_axes(op, attributes, inputs)
        if not axes:
            if attributes.get("noop_with_empty_axes", 0) == 1:
                return [x]
            axes = list(range(x.rank))
        reduced = {a % x.rank for a in axes} if x.rank else set()
        keep = attributes.get("keepdims", 1) == 1
        shape: list[Dim] = []
        kept: list[int] = []  # the output positions of the axes not reduced
        for k, dim in enumerate(x.shape):
            if k not in reduced:
                kept.append(len(shape))
                shape.append(dim)
            elif keep:
                shape.append(1)
        return [_reduced(op, x, tuple(sorted(reduced)), tuple(shape), tuple(kept))]

    return semantics


def _reduced(
    op: str, x: SymbolicTensor, axes: tuple[int, ...], shape: tuple[Dim, ...], kept: tuple[int, ...]
) -> SymbolicTensor:
    """A reduction of `x` over `axes`: a function of the kept axes' indices only.

    How the axes were spelled (an attribute or an input, negative or not) and whether the
    reduced axes are kept as 1s do not change the values, so a rule that only toggles
    `keepdims` or moves the axes between attribute and input is proved.
    """
    identity = (op, x.key, axes, x.dtype.onnx_name)
    name = f"{op}#{_digest(identity)}"
    if kept:
        function = z3.Function(name, *([z3.IntSort()] * len(kept)), sort_of(x.dtype))

        def at(index: Index) -> Element:
            return Element(function(*(index[k] for k in kept)))

    else:
        scalar = z3.Const(name, sort_of(x.dtype))

        def at(index: Index) -> Element:
            del index
            return Element(scalar)

    return SymbolicTensor(x.dtype, shape, at, (*identity, len(shape)), x.valid)


def matmul(attributes: Attributes, inputs: Inputs) -> list[SymbolicTensor]:
    """MatMul: an uninterpreted function of its inputs' keys, of the product's shape."""
    a, b = present("MatMul", inputs, 2)
    if a.rank == 0 or b.rank == 0 or a.dtype != b.dtype:
        raise OpError("MatMul takes tensors of rank >= 1 of one type")
    left = a.shape if a.rank > 1 else (1, a.shape[0])
    right = b.shape if b.rank > 1 else (b.shape[0], 1)
    batch, valid = broadcast_shapes([left[:-2], right[:-2]])
    shape: list[Dim] = list(batch)
    if a.rank > 1:
        shape.append(left[-2])
    if b.rank > 1:
        shape.append(right[-1])
    valid = z3.And(valid, same_dim(left[-1], right[-2]))
    return [_keyed("MatMul", attributes, inputs, a.dtype, shape, valid)]


def _same_shape(op: str) -> Semantics:
    def semantics(attributes: Attributes, inputs: Inputs) -> list[SymbolicTensor]:
        x = next((i for i in inputs if i is not None), None)
        if x is None:
            raise OpError(f"{op} takes an input")
        return [_keyed(op, attributes, inputs, x.dtype, x.shape, z3.BoolVal(True))]

    return semantics


def _is_nan(attributes: Attributes, inputs: Inputs) -> list[SymbolicTensor]:
    (x,) = present("IsNaN", inputs, 1)

    def compute(values: Values) -> Computed:
        return z3.fpIsNaN(values[0]), None

    return [elementwise(ir.DataType.BOOL, [x], compute, key_of("IsNaN", attributes, inputs))]


def _is_inf(attributes: Attributes, inputs: Inputs) -> list[SymbolicTensor]:
    (x,) = present("IsInf", inputs, 1)
    negative = attributes.get("detect_negative", 1) == 1
    positive = attributes.get("detect_positive", 1) == 1

    def compute(values: Values) -> Computed:
        value = values[0]
        found = z3.BoolVal(False)
        if negative:
            found = z3.Or(found, z3.And(z3.fpIsInf(value), z3.fpIsNegative(value)))
        if positive:
            found = z3.Or(found, z3.And(z3.fpIsInf(value), z3.fpIsPositive(value)))
        return found, None

    return [elementwise(ir.DataType.BOOL, [x], compute, key_of("IsInf", attributes, inputs))]


def opaque_table() -> dict[str, Semantics]:
    """The ops modelled as uninterpreted functions (and IsNaN / IsInf, exact), by op type."""
    table: dict[str, Semantics] = {op: _unary(op) for op in UNARY}
    table.update({op: _binary(op) for op in BINARY})
    table.update({op: _reduction(op) for op in REDUCTIONS})
    table.update({op: _same_shape(op) for op in SAME_SHAPE})
    table["MatMul"] = matmul
    table["IsNaN"] = _is_nan
    table["IsInf"] = _is_inf
    return table
