"""Symbolic tensors: a shape of SMT integers and a function from indices to elements.

A `SymbolicTensor` of rank r is `shape` (r dims, each a Python int or a z3 integer term:
concrete or symbolic sizes alike) and `at`, a function from an index (r z3 integer terms,
numerals or variables) to an `Element`: the value (a z3 term of the dtype's sort) and when
it is *poison* (unspecified: a float cast to an integer out of range, an integer division by
zero, a gather out of bounds). Ops compose these functions, so an index can stay symbolic: a
query asks about the element at a fresh index `i` within the shape, for every shape the dims
can take, which proves a rewrite for all sizes at once. `valid` says when the op's shape
preconditions hold (operands broadcast, a reshape keeps the element count); where they do not,
onnxruntime refuses the model and any rewrite is acceptable.

The rank is concrete: a rule is proved one rank at a time (see the package docstring).

`key` names the tensor structurally (an input by name, a constant by its contents, an op by
its type, attributes and inputs' keys): an op outside the modelled fragment is an
uninterpreted function of its inputs' keys (`_opaque`), so the same op on the same tensors is
the same tensor on both sides of a rule.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Callable, Hashable, Sequence
from typing import Any, TypeAlias

import numpy as np
import z3

import ir
from rewriter.prove._dtypes import from_python, sort_of

Dim: TypeAlias = int | z3.ArithRef
"""A dim: a Python int, or a z3 integer term."""
Index: TypeAlias = tuple[z3.ArithRef, ...]
"""An index: one z3 integer term per axis."""

# A constant read at a symbolic index becomes a z3 array of its elements: at most this many.
MAX_CONSTANT_ELEMENTS = 1 << 16


class TooLargeError(ValueError):
    """A query would need a formula too large to build (a big constant read symbolically)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Element:
    """One element: its value, and when it is poison (None: never)."""

    value: z3.ExprRef
    poison: z3.BoolRef | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class SymbolicTensor:
    """A tensor as a shape and a function from indices to elements (see the module docstring)."""

    dtype: ir.DataType
    shape: tuple[Dim, ...]
    at: Callable[[Index], Element] = dataclasses.field(compare=False)
    key: Hashable
    valid: z3.BoolRef = dataclasses.field(default_factory=lambda: z3.BoolVal(True))

    @property
    def rank(self) -> int:
        """The number of axes."""
        return len(self.shape)

    def value(self, index: Sequence[z3.ArithRef]) -> z3.ExprRef:
        """The value at `index` (whether or not it is poison)."""
        return self.at(tuple(index)).value


# ---------------------------------------------------------------------------------------------
# Dims


def as_int(dim: Dim | z3.ExprRef) -> int | None:
    """The dim as a Python int when it is one (or a numeral), else None."""
    if isinstance(dim, int):
        return dim
    simplified = z3.simplify(dim)
    if z3.is_int_value(simplified):
        return int(simplified.as_long())
    return None


def term(dim: Dim) -> z3.ArithRef:
    """The dim as a z3 integer term."""
    return z3.IntVal(dim) if isinstance(dim, int) else dim


def tidy(dim: Dim) -> Dim:
    """A Python int where the dim simplifies to a numeral; the term itself otherwise."""
    number = as_int(dim)
    return number if number is not None else dim


def same_dim(a: Dim, b: Dim) -> z3.BoolRef:
    """`a == b` as a z3 condition (a numeral when both are ints)."""
    if isinstance(a, int) and isinstance(b, int):
        return z3.BoolVal(a == b)
    return term(a) == term(b)


def product(dims: Sequence[Dim]) -> Dim:
    """The product of dims (1 for none), an int when every dim is one."""
    result: Dim = 1
    for dim in dims:
        if isinstance(result, int) and isinstance(dim, int):
            result *= dim
        else:
            result = tidy(term(result) * term(dim))
    return result


def all_of(conditions: Sequence[z3.BoolRef | bool]) -> z3.BoolRef:
    """The conjunction of conditions (True for none)."""
    terms = [z3.BoolVal(c) if isinstance(c, bool) else c for c in conditions]
    if not terms:
        return z3.BoolVal(True)
    return terms[0] if len(terms) == 1 else z3.And(*terms)


def either(a: z3.BoolRef | None, b: z3.BoolRef | None) -> z3.BoolRef | None:
    """The disjunction of two poison conditions (None is never)."""
    if a is None:
        return b
    if b is None:
        return a
    return z3.Or(a, b)


# ---------------------------------------------------------------------------------------------
# Leaves: inputs and constants


def symbolic_input(
    name: str, dtype: ir.DataType, shape: Sequence[int | str | z3.ArithRef]
) -> SymbolicTensor:
    """A tensor nothing is known about: an uninterpreted function from indices to elements.

    `shape` items are ints, names of symbolic dims (the z3 integer of that name: equal names
    are one dim) or z3 integer terms.
    """
    dims: tuple[Dim, ...] = tuple(z3.Int(d) if isinstance(d, str) else d for d in shape)
    sort = sort_of(dtype)
    if not dims:
        scalar = z3.Const(name, sort)

        def at_scalar(index: Index) -> Element:
            del index
            return Element(scalar)

        return SymbolicTensor(dtype, (), at_scalar, ("input", name))
    function = z3.Function(name, *([z3.IntSort()] * len(dims)), sort)

    def at(index: Index) -> Element:
        return Element(function(*index))

    return SymbolicTensor(dtype, dims, at, ("input", name))


def constant(array: np.ndarray[Any, Any], dtype: ir.DataType | None = None) -> SymbolicTensor:
    """A tensor holding `array` (its dtype, or `dtype` when given; values cast to it)."""
    if dtype is None:
        dtype = _dtype_of(array)
    values = np.asarray(array, dtype=ir.numpy_dtype(dtype))
    flat = [from_python(v, dtype) for v in values.reshape(-1)]
    shape = tuple(int(d) for d in values.shape)
    digest = hashlib.sha256(np.ascontiguousarray(values).tobytes()).hexdigest()
    table = _Table(flat, shape, dtype)
    return SymbolicTensor(dtype, shape, table.at, ("const", dtype.onnx_name, shape, digest))


def tensor_of_terms(
    terms: Sequence[z3.ExprRef], shape: Sequence[int], dtype: ir.DataType, key: Hashable
) -> SymbolicTensor:
    """A tensor of a concrete shape whose elements are the given z3 terms (row-major).

    The terms may hold variables: a constant a rule computes from other constants' symbolic
    contents (`value(s) * value(g)`).
    """
    dims = tuple(int(d) for d in shape)
    table = _Table(list(terms), dims, dtype)
    return SymbolicTensor(dtype, dims, table.at, key)


def _dtype_of(array: np.ndarray[Any, Any]) -> ir.DataType:
    for dtype in ir.DataType:
        if dtype.onnx_name and dtype != ir.DataType.UNDEFINED:
            try:
                if np.dtype(ir.numpy_dtype(dtype)) == array.dtype:
                    return dtype
            except (TypeError, ValueError, KeyError):
                continue
    raise ValueError(f"no ONNX type for numpy dtype {array.dtype}")


class _Table:
    """The elements of a constant: looked up directly at numeral indices, else in an array."""

    def __init__(self, flat: list[z3.ExprRef], shape: tuple[int, ...], dtype: ir.DataType) -> None:
        self.flat = flat
        self.shape = shape
        self.dtype = dtype
        self._array: z3.ArrayRef | None = None

    def _offset(self, index: Index) -> int | None:
        offset = 0
        for position, dim in zip(index, self.shape, strict=True):
            number = as_int(position)
            if number is None:
                return None
            if not 0 <= number < dim:
                return -1
            offset = offset * dim + number
        return offset

    def at(self, index: Index) -> Element:
        offset = self._offset(index)
        if offset is not None and offset >= 0:
            return Element(self.flat[offset])
        if offset == -1:
            # outside the shape: a value no query reads (queries stay inside shapes)
            return Element(self.flat[0] if self.flat else from_python(0, self.dtype))
        return Element(z3.Select(self._lookup(), *index))

    def _lookup(self) -> z3.ArrayRef:
        if self._array is None:
            if len(self.flat) > MAX_CONSTANT_ELEMENTS:
                raise TooLargeError(
                    f"a constant of {len(self.flat)} elements read at a symbolic index "
                    f"(at most {MAX_CONSTANT_ELEMENTS})"
                )
            domains = [z3.IntSort()] * len(self.shape)
            default = self.flat[0] if self.flat else from_python(0, self.dtype)
            array = z3.K(domains[0], default) if len(domains) == 1 else None
            if array is None:
                array = z3.Lambda([z3.Int(f"_k{i}") for i in range(len(domains))], default)
            for offset, value in enumerate(self.flat):
                position = np.unravel_index(offset, self.shape)
                array = z3.Store(array, *(int(p) for p in position), value)
            self._array = array
        return self._array


def scalar_constant(value: Any, dtype: ir.DataType) -> SymbolicTensor:
    """A rank-0 tensor holding `value` (a Python number or a z3 term of the dtype's sort)."""
    if isinstance(value, z3.ExprRef):
        fixed = value

        def at(index: Index) -> Element:
            del index
            return Element(fixed)

        return SymbolicTensor(dtype, (), at, ("scalar", str(value)))
    return constant(np.asarray(value), dtype)
