"""Numpy broadcasting over symbolic shapes, and elementwise maps built on it.

Shapes align at their last axis; a dim of 1 stretches to the other operand's. With symbolic
dims that is a condition, not a fact: the output dim is `If(a == 1, b, a)` and the operands
broadcast only when each pair is equal or one of them is 1 (`valid`). An operand read at an
output index reads index 0 along an axis where its dim is 1.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import z3

import ir
from rewriter.prove._tensor import (
    Dim,
    Element,
    Index,
    SymbolicTensor,
    all_of,
    as_int,
    either,
    term,
    tidy,
)


def broadcast_dims(a: Dim, b: Dim) -> tuple[Dim, z3.BoolRef]:
    """The broadcast of two dims and the condition under which they broadcast."""
    small_a, small_b = as_int(a), as_int(b)
    if small_a is not None and small_b is not None:
        if small_a == small_b or small_b == 1:
            return small_a, z3.BoolVal(True)
        if small_a == 1:
            return small_b, z3.BoolVal(True)
        return small_a, z3.BoolVal(False)
    if small_a == 1:
        return b, z3.BoolVal(True)
    if small_b == 1:
        return a, z3.BoolVal(True)
    ta, tb = term(a), term(b)
    merged = tidy(z3.If(ta == 1, tb, ta))
    return merged, z3.Or(ta == tb, ta == 1, tb == 1)


def broadcast_shapes(shapes: Sequence[Sequence[Dim]]) -> tuple[tuple[Dim, ...], z3.BoolRef]:
    """The broadcast shape of several shapes, and when they broadcast."""
    rank = max((len(s) for s in shapes), default=0)
    out: list[Dim] = []
    conditions: list[z3.BoolRef] = []
    for axis in range(rank):
        dim: Dim = 1
        for shape in shapes:
            offset = axis - (rank - len(shape))
            if offset < 0:
                continue
            dim, condition = broadcast_dims(dim, shape[offset])
            conditions.append(condition)
        out.append(dim)
    return tuple(out), all_of(conditions)


def operand_index(operand: SymbolicTensor, index: Index) -> Index:
    """Where `operand` is read for output `index` of a broadcast (trailing axes aligned)."""
    skip = len(index) - operand.rank
    mapped: list[z3.ArithRef] = []
    for axis, dim in enumerate(operand.shape):
        position = index[axis + skip]
        number = as_int(dim)
        if number == 1:
            mapped.append(z3.IntVal(0))
        elif number is not None:
            mapped.append(position)
        else:
            mapped.append(z3.If(term(dim) == 1, z3.IntVal(0), position))
    return tuple(mapped)


ValueMap = Callable[[Sequence[z3.ExprRef]], "tuple[z3.ExprRef, z3.BoolRef | None]"]
"""Elements' values to the result's value and its own poison condition (None: never)."""


def elementwise(
    dtype: ir.DataType,
    operands: Sequence[SymbolicTensor],
    compute: ValueMap,
    key: object,
    *,
    poison_of: Callable[[Sequence[Element]], z3.BoolRef | None] | None = None,
) -> SymbolicTensor:
    """The tensor whose element at each index is `compute` of the operands' (broadcast) ones.

    The result is poison where `compute` says so or any operand is (`poison_of` replaces the
    latter rule: Where is not poison where the branch it does not take is).
    """
    shape, valid = broadcast_shapes([o.shape for o in operands])
    valid = all_of([valid, *(o.valid for o in operands)])

    def at(index: Index) -> Element:
        elements = [o.at(operand_index(o, index)) for o in operands]
        value, own = compute([e.value for e in elements])
        if poison_of is not None:
            inherited = poison_of(elements)
        else:
            inherited = None
            for element in elements:
                inherited = either(inherited, element.poison)
        return Element(value, either(own, inherited))

    return SymbolicTensor(dtype, shape, at, key, z3.simplify(valid))
