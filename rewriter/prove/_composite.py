"""Ops that onnx defines as compositions of modelled ones, built from those.

`Gemm(A, B, C; alpha, beta, transA, transB) = alpha * (A' B') + beta * C`, the product the
uninterpreted MatMul of `_opaque` (so `MatMul(a, w) + c -> Gemm(a, w, c)` is proved without
knowing what a matrix product computes), a factor of 1 left out (1 * x is x, bit for bit),
C broadcast one way into the [M, N] result (onnxruntime refuses a C that would grow it).
"""

from __future__ import annotations

import z3

from rewriter.prove._common import (
    Attributes,
    Inputs,
    NotModelledError,
    OpError,
    present,
    same_dtype,
)
from rewriter.prove._dtypes import kind_of
from rewriter.prove._elementwise import ELEMENTWISE, float_attribute
from rewriter.prove._indexing import INDEXING
from rewriter.prove._opaque import matmul
from rewriter.prove._tensor import SymbolicTensor, all_of, same_dim, scalar_constant, term


def _scaled(factor: object, x: SymbolicTensor) -> SymbolicTensor:
    """`factor * x`, or `x` itself for a factor of exactly 1."""
    if isinstance(factor, int | float) and float(factor) == 1.0:
        return x
    if not kind_of(x.dtype).is_float:
        raise NotModelledError("alpha or beta other than 1 on an integer Gemm")
    scale = scalar_constant(float_attribute(factor, x.dtype), x.dtype)
    (product,) = ELEMENTWISE["Mul"]({}, [scale, x])
    return product


def _flag(attributes: Attributes, name: str) -> bool:
    value = attributes.get(name, 0)
    if value not in (0, 1):
        raise OpError(f"`{name}` is 0 or 1")
    return value == 1


def gemm(attributes: Attributes, inputs: Inputs) -> list[SymbolicTensor]:
    """Gemm as the module docstring composes it."""
    a, b = present("Gemm", inputs, 2)
    c = inputs[2] if len(inputs) > 2 else None
    if a.rank != 2 or b.rank != 2:
        raise OpError("Gemm takes 2-D A and B")
    same_dtype("Gemm", [a, b] if c is None else [a, b, c])
    if _flag(attributes, "transA"):
        (a,) = INDEXING["Transpose"]({"perm": [1, 0]}, [a])
    if _flag(attributes, "transB"):
        (b,) = INDEXING["Transpose"]({"perm": [1, 0]}, [b])
    (product,) = matmul({}, [a, b])
    result = _scaled(attributes.get("alpha", 1.0), product)
    if c is None:
        return [result]
    if c.rank > 2:
        raise OpError("Gemm's C has rank 2 or less")
    # one-way broadcast: each of C's dims (from the right) is 1 or the result's
    fits = [
        z3.Or(term(dim) == 1, same_dim(dim, out))
        for dim, out in zip(reversed(c.shape), reversed(result.shape), strict=False)
    ]
    (total,) = ELEMENTWISE["Add"]({}, [result, _scaled(attributes.get("beta", 1.0), c)])
    return [
        SymbolicTensor(
            total.dtype,
            result.shape,
            total.at,
            ("Gemm", total.key),
            z3.simplify(all_of([total.valid, *fits])),
        )
    ]


COMPOSITE = {"Gemm": gemm}
"""The composed ops, by op type."""
