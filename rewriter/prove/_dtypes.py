"""ONNX element types as SMT sorts, and element values between numpy and z3.

Floating-point types are z3 floating-point sorts of the same widths (IEEE-754 binary16,
binary32, binary64, and bfloat16 as an 8-bit-exponent, 8-bit-significand sort), so NaN, signed
zeros, infinities, subnormals and round-to-nearest-even are the theory's own. Integer types
are bit-vectors of their width (signedness is in the operations, as in hardware); bool is
z3's Bool. z3's floating-point sorts have one NaN: payloads are not modelled (see
`_query` for what equality means).
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import numpy as np
import z3

import ir

_FLOATS = {
    ir.DataType.FLOAT16: (5, 11),
    ir.DataType.BFLOAT16: (8, 8),
    ir.DataType.FLOAT: (8, 24),
    ir.DataType.DOUBLE: (11, 53),
}
_INTEGERS = {
    ir.DataType.INT8: (8, True),
    ir.DataType.INT16: (16, True),
    ir.DataType.INT32: (32, True),
    ir.DataType.INT64: (64, True),
    ir.DataType.UINT8: (8, False),
    ir.DataType.UINT16: (16, False),
    ir.DataType.UINT32: (32, False),
    ir.DataType.UINT64: (64, False),
}

RNE = z3.RNE()
"""Round to nearest, ties to even: the rounding of every ONNX float operation."""


class UnsupportedTypeError(ValueError):
    """An element type outside the prover's fragment (strings, complex, float8)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Kind:
    """What an element type is for the prover.

    A float (exponent and significand bits), an integer (width and signedness) or bool.
    """

    dtype: ir.DataType
    exponent_bits: int = 0
    significand_bits: int = 0
    width: int = 0
    signed: bool = False

    @property
    def is_float(self) -> bool:
        """A floating-point type."""
        return self.significand_bits > 0

    @property
    def is_integer(self) -> bool:
        """An integer type."""
        return self.width > 0

    @property
    def is_bool(self) -> bool:
        """The bool type."""
        return self.dtype == ir.DataType.BOOL


@functools.cache
def kind_of(dtype: ir.DataType) -> Kind:
    """The prover's view of `dtype`.

    Raises:
        UnsupportedTypeError: a type outside the fragment.
    """
    if dtype in _FLOATS:
        exponent, significand = _FLOATS[dtype]
        return Kind(dtype, exponent_bits=exponent, significand_bits=significand)
    if dtype in _INTEGERS:
        width, signed = _INTEGERS[dtype]
        return Kind(dtype, width=width, signed=signed)
    if dtype == ir.DataType.BOOL:
        return Kind(dtype)
    raise UnsupportedTypeError(f"element type {dtype.onnx_name or dtype.name} is not modelled")


@functools.cache
def sort_of(dtype: ir.DataType) -> z3.SortRef:
    """The z3 sort of one element of `dtype`."""
    kind = kind_of(dtype)
    if kind.is_float:
        return z3.FPSort(kind.exponent_bits, kind.significand_bits)
    if kind.is_integer:
        return z3.BitVecSort(kind.width)
    return z3.BoolSort()


def _bit_width(kind: Kind) -> int:
    return kind.exponent_bits + kind.significand_bits


def from_python(value: Any, dtype: ir.DataType) -> z3.ExprRef:
    """A z3 constant of `dtype` holding one numpy or Python scalar (exactly: by its bits)."""
    kind = kind_of(dtype)
    if kind.is_bool:
        return z3.BoolVal(bool(value))
    if kind.is_integer:
        return z3.BitVecVal(int(value) % (1 << kind.width), kind.width)
    array = np.asarray(value, dtype=ir.numpy_dtype(dtype)).reshape(())
    bits = int(array.view(f"u{array.itemsize}"))
    width = _bit_width(kind)
    return z3.simplify(z3.fpBVToFP(z3.BitVecVal(bits, width), sort_of(dtype)))


def to_python(value: z3.ExprRef, dtype: ir.DataType) -> Any:
    """A z3 numeral of `dtype` as a numpy scalar (a float NaN as the dtype's quiet NaN).

    Raises:
        ValueError: `value` is not a numeral (it still holds variables).
    """
    kind = kind_of(dtype)
    target = np.dtype(ir.numpy_dtype(dtype))
    if kind.is_bool:
        if not z3.is_true(value) and not z3.is_false(value):
            raise ValueError(f"not a bool numeral: {value}")
        return np.bool_(z3.is_true(value))
    if kind.is_integer:
        if not z3.is_bv_value(value):
            raise ValueError(f"not a bit-vector numeral: {value}")
        number = value.as_signed_long() if kind.signed else value.as_long()
        return target.type(number)
    if not isinstance(value, z3.FPNumRef):
        raise ValueError(f"not a floating-point numeral: {value}")
    if value.isNaN():
        return np.array(np.nan).astype(target)[()]
    if value.isInf():
        return np.array(-np.inf if value.isNegative() else np.inf).astype(target)[()]
    sign = 1 if value.sign() else 0
    exponent = value.exponent_as_long(True)
    significand = value.significand_as_long()
    bits = (sign << (_bit_width(kind) - 1)) | (exponent << (kind.significand_bits - 1))
    bits |= significand
    return np.array(bits, dtype=f"u{target.itemsize}").view(target)[()]
