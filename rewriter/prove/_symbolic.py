"""Symbolic numbers with numpy's arithmetic: what a rule's conditions and `let`s compute with.

A rule's expressions compute with the contents of constants (`value(c) * value(g)`,
`all(value(z) == 0)`, `float(a)`). The prover makes those contents symbolic, so the same
expressions must run on z3 terms. A `Sym` is one number of a numpy dtype held as a z3 term of
that dtype's sort, with Python's operators doing what numpy's scalars do: the result dtype
numpy's promotion gives (a Python number is weak, NEP 50), IEEE arithmetic rounded to
nearest-even, wrapping integers, comparisons giving a bool `Sym`. A numpy object array of
`Sym`s is a symbolic tensor for the rule's expressions; numpy's own reshaping, indexing,
transposing and concatenation work on it unchanged.

Dims and Python ints stay z3 integers (`z3.ArithRef`), with Python's unbounded arithmetic.

Where the engine builds a rewrite's constants it declines a rewrite whose arithmetic
overflows, divides by zero or makes a NaN from numbers (`exact_numpy`); a `Tracker` in exact
mode records, for each float operation, the assumption that it does none of that, so a proof
covers exactly the rewrites the engine makes.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import numpy as np
import z3

import ir
from rewriter.prove._dtypes import RNE, kind_of, sort_of, to_python
from rewriter.prove._dtypes import from_python as _from_python
from rewriter.prove._elementwise import cast_value, equal, less, less_equal


class NotTranslatableError(ValueError):
    """An expression the prover cannot state in SMT; the message names what (a built-in)."""


class Tracker:
    """Per instance: the assumptions that exact (rewrite-time) arithmetic records."""

    def __init__(self) -> None:
        self.exact = False
        self.assumptions: list[z3.BoolRef] = []

    def note_float(self, result: z3.ExprRef, operands: list[z3.ExprRef], division: bool) -> None:
        """In exact mode: assume `result` neither overflowed nor became NaN from numbers."""
        if not self.exact:
            return
        finite = [z3.Not(z3.Or(z3.fpIsInf(o), z3.fpIsNaN(o))) for o in operands]
        all_finite = z3.And(*finite) if finite else z3.BoolVal(True)
        no_nan_in = z3.And(*[z3.Not(z3.fpIsNaN(o)) for o in operands]) if operands else True
        self.assumptions.append(z3.Implies(all_finite, z3.Not(z3.fpIsInf(result))))
        self.assumptions.append(z3.Implies(no_nan_in, z3.Not(z3.fpIsNaN(result))))
        if division and len(operands) == 2:
            self.assumptions.append(z3.Not(z3.fpIsZero(operands[1])))


def _numpy(dtype: ir.DataType) -> np.dtype[Any]:
    return np.dtype(ir.numpy_dtype(dtype))


def _dtype_of_numpy(dtype: np.dtype[Any]) -> ir.DataType:
    return ir.DataType.from_numpy(dtype)


def is_python_number(value: object) -> bool:
    """A Python or numpy number (not a bool)."""
    return isinstance(value, int | float | np.integer | np.floating) and not isinstance(
        value, bool | np.bool_
    )


class Sym:
    """One symbolic number of an ONNX dtype (see the module docstring)."""

    __slots__ = ("dtype", "term", "tracker")

    def __init__(self, term: z3.ExprRef, dtype: ir.DataType, tracker: Tracker) -> None:
        self.term = term
        self.dtype = dtype
        self.tracker = tracker

    def __repr__(self) -> str:
        return f"Sym({self.term}, {self.dtype.onnx_name})"

    def __bool__(self) -> bool:
        raise NotTranslatableError("a symbolic number used where Python needs a plain bool")

    def __hash__(self) -> int:
        return hash((self.term.hash(), self.dtype))

    # conversions ---------------------------------------------------------------------------
    def to(self, dtype: ir.DataType) -> Sym:
        """This number converted as numpy's `astype` does (integer targets: exact values)."""
        if dtype == self.dtype:
            return self
        value, poison = cast_value(kind_of(self.dtype), kind_of(dtype), self.term)
        if poison is not None:
            raise NotTranslatableError("a float constant converted to an integer symbolically")
        return Sym(value, dtype, self.tracker)

    def as_int(self) -> z3.ArithRef:
        """The number as an unbounded integer (`int(x)`): integers and bools only."""
        kind = kind_of(self.dtype)
        if kind.is_bool:
            return z3.If(self.term, z3.IntVal(1), z3.IntVal(0))
        if kind.is_integer:
            return z3.BV2Int(self.term, is_signed=kind.signed)
        raise NotTranslatableError("`int` of a symbolic float")

    def as_double(self) -> Sym:
        """`float(x)`: the number as a Python float (a double)."""
        return self.to(ir.DataType.DOUBLE)

    # arithmetic ----------------------------------------------------------------------------
    def _binary(self, other: object, op: str, reverse: bool = False) -> Sym:
        left, right = (other, self) if reverse else (self, other)
        dtype = result_dtype(left, right, op)
        a = lift(left, dtype, self.tracker)
        b = lift(right, dtype, self.tracker)
        kind = kind_of(dtype)
        if kind.is_float:
            functions = {"+": z3.fpAdd, "-": z3.fpSub, "*": z3.fpMul, "/": z3.fpDiv}
            if op not in functions:
                raise NotTranslatableError(f"`{op}` on symbolic floats")
            result = functions[op](RNE, a.term, b.term)
            self.tracker.note_float(result, [a.term, b.term], division=op == "/")
            return Sym(result, dtype, self.tracker)
        if kind.is_bool:
            raise NotTranslatableError(f"`{op}` on symbolic bools")
        if op == "+":
            return Sym(a.term + b.term, dtype, self.tracker)
        if op == "-":
            return Sym(a.term - b.term, dtype, self.tracker)
        if op == "*":
            return Sym(a.term * b.term, dtype, self.tracker)
        raise NotTranslatableError(f"`{op}` on symbolic integers")

    def __add__(self, other: object) -> Sym:
        return self._binary(other, "+")

    def __radd__(self, other: object) -> Sym:
        return self._binary(other, "+", reverse=True)

    def __sub__(self, other: object) -> Sym:
        return self._binary(other, "-")

    def __rsub__(self, other: object) -> Sym:
        return self._binary(other, "-", reverse=True)

    def __mul__(self, other: object) -> Sym:
        return self._binary(other, "*")

    def __rmul__(self, other: object) -> Sym:
        return self._binary(other, "*", reverse=True)

    def __truediv__(self, other: object) -> Sym:
        return self._binary(other, "/")

    def __rtruediv__(self, other: object) -> Sym:
        return self._binary(other, "/", reverse=True)

    def __neg__(self) -> Sym:
        kind = kind_of(self.dtype)
        if kind.is_float:
            return Sym(z3.fpNeg(self.term), self.dtype, self.tracker)
        if kind.is_integer:
            return Sym(-self.term, self.dtype, self.tracker)
        raise NotTranslatableError("negating a symbolic bool")

    def __pos__(self) -> Sym:
        return self

    def __abs__(self) -> Sym:
        kind = kind_of(self.dtype)
        if kind.is_float:
            return Sym(z3.fpAbs(self.term), self.dtype, self.tracker)
        if kind.is_integer and kind.signed:
            return Sym(z3.If(self.term < 0, -self.term, self.term), self.dtype, self.tracker)
        return self

    # comparisons -----------------------------------------------------------------------------
    def _compare(self, other: object, op: str, reverse: bool = False) -> Sym:
        left, right = (other, self) if reverse else (self, other)
        dtype = result_dtype(left, right, "+") if op not in ("==", "!=") else None
        if dtype is None:
            dtype = _comparison_dtype(left, right)
        a = lift(left, dtype, self.tracker)
        b = lift(right, dtype, self.tracker)
        kind = kind_of(dtype)
        if kind.is_bool:
            if op == "==":
                return Sym(a.term == b.term, ir.DataType.BOOL, self.tracker)
            if op == "!=":
                return Sym(a.term != b.term, ir.DataType.BOOL, self.tracker)
            raise NotTranslatableError(f"`{op}` on symbolic bools")
        tests: dict[str, Callable[[], z3.BoolRef]] = {
            "==": lambda: equal(kind, a.term, b.term),
            "!=": lambda: z3.Not(equal(kind, a.term, b.term)),
            "<": lambda: less(kind, a.term, b.term),
            "<=": lambda: less_equal(kind, a.term, b.term),
            ">": lambda: less(kind, b.term, a.term),
            ">=": lambda: less_equal(kind, b.term, a.term),
        }
        return Sym(tests[op](), ir.DataType.BOOL, self.tracker)

    def __eq__(self, other: object) -> Sym:  # type: ignore[override]
        return self._compare(other, "==")

    def __ne__(self, other: object) -> Sym:  # type: ignore[override]
        return self._compare(other, "!=")

    def __lt__(self, other: object) -> Sym:
        return self._compare(other, "<")

    def __le__(self, other: object) -> Sym:
        return self._compare(other, "<=")

    def __gt__(self, other: object) -> Sym:
        return self._compare(other, ">")

    def __ge__(self, other: object) -> Sym:
        return self._compare(other, ">=")

    def __invert__(self) -> Sym:
        if self.dtype != ir.DataType.BOOL:
            raise NotTranslatableError("`~` of a symbolic number")
        return Sym(z3.Not(self.term), self.dtype, self.tracker)

    def __and__(self, other: object) -> Sym:
        return _logical(self, other, z3.And)

    def __rand__(self, other: object) -> Sym:
        return _logical(self, other, z3.And)

    def __or__(self, other: object) -> Sym:
        return _logical(self, other, z3.Or)

    def __ror__(self, other: object) -> Sym:
        return _logical(self, other, z3.Or)


def _logical(a: Sym, other: object, combine: Callable[..., z3.BoolRef]) -> Sym:
    b = lift(other, ir.DataType.BOOL, a.tracker)
    if a.dtype != ir.DataType.BOOL:
        raise NotTranslatableError("`&`/`|` of symbolic numbers")
    return Sym(combine(a.term, b.term), ir.DataType.BOOL, a.tracker)


def _dummy(value: object) -> Any:
    """A concrete stand-in of `value` for asking numpy what dtype an operation gives."""
    if isinstance(value, Sym):
        return np.ones((), _numpy(value.dtype))[()]
    if isinstance(value, z3.ArithRef):
        return 1  # a Python int
    if isinstance(value, np.ndarray):
        return np.ones((), value.dtype)[()]
    if isinstance(value, bool | np.bool_):
        return value
    if is_python_number(value):
        return value if isinstance(value, np.generic) else (1.0 if isinstance(value, float) else 1)
    raise NotTranslatableError(f"arithmetic on {type(value).__name__}")


_OPERATORS = {
    "+": operator.add,
    "-": operator.sub,
    "*": operator.mul,
    "/": operator.truediv,
}


def result_dtype(left: object, right: object, op: str) -> ir.DataType:
    """The dtype numpy gives `left op right` (Python numbers are weak)."""
    with np.errstate(all="ignore"):
        result = _OPERATORS[op](_dummy(left), _dummy(right))
    return _dtype_of_numpy(np.asarray(result).dtype)


def _comparison_dtype(left: object, right: object) -> ir.DataType:
    if isinstance(left, Sym) and isinstance(right, Sym) and left.dtype == right.dtype:
        return left.dtype
    for side in (left, right):
        if isinstance(side, Sym) and side.dtype == ir.DataType.BOOL:
            other = right if side is left else left
            if isinstance(other, bool | np.bool_) or (
                isinstance(other, Sym) and other.dtype == ir.DataType.BOOL
            ):
                return ir.DataType.BOOL
    return result_dtype(left, right, "+")


def lift(value: object, dtype: ir.DataType, tracker: Tracker) -> Sym:
    """`value` (a Sym, a z3 integer, a Python or numpy number) as a Sym of `dtype`."""
    if isinstance(value, Sym):
        return value.to(dtype)
    kind = kind_of(dtype)
    if isinstance(value, z3.ArithRef):
        if kind.is_integer:
            return Sym(z3.Int2BV(value, kind.width), dtype, tracker)
        if kind.is_float:
            return Sym(z3.fpRealToFP(RNE, z3.ToReal(value), sort_of(dtype)), dtype, tracker)
        raise NotTranslatableError("an integer term used as a bool")
    if isinstance(value, bool | np.bool_ | int | float | np.integer | np.floating):
        return Sym(_from_python(value, dtype), dtype, tracker)
    raise NotTranslatableError(f"{type(value).__name__} used as a number")


def from_python(value: Any, dtype: ir.DataType, tracker: Tracker) -> Sym:
    """A Sym holding one concrete number of `dtype`."""
    return Sym(_from_python(value, dtype), dtype, tracker)


# ---------------------------------------------------------------------------------------------
# Object arrays of Syms


def is_symbolic(value: object) -> bool:
    """True when `value` holds a z3 term anywhere (a Sym, a z3 term, or a container of them)."""
    if isinstance(value, Sym | z3.ExprRef):
        return True
    if isinstance(value, np.ndarray):
        return value.dtype == object and any(is_symbolic(v) for v in value.reshape(-1))
    if isinstance(value, list | tuple):
        return any(is_symbolic(v) for v in value)
    return False


def symbolic_array(items: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """An object array of Syms, or a concrete numpy array when every element is a numeral."""
    flat = list(items.reshape(-1))
    if flat and all(isinstance(v, Sym) for v in flat):
        dtype = flat[0].dtype
        values = []
        for item in flat:
            simplified = z3.simplify(item.term)
            try:
                values.append(to_python(simplified, dtype))
            except ValueError:
                return items
        return np.array(values, dtype=_numpy(dtype)).reshape(items.shape)
    return items


def array_dtype(array: np.ndarray[Any, Any]) -> ir.DataType:
    """The ONNX dtype of a concrete array or of an object array of Syms.

    Raises:
        NotTranslatableError: an empty object array, or one mixing dtypes.
    """
    if array.dtype != object:
        return _dtype_of_numpy(array.dtype)
    dtypes = {v.dtype for v in array.reshape(-1) if isinstance(v, Sym)}
    if len(dtypes) != 1 or any(not isinstance(v, Sym) for v in array.reshape(-1)):
        raise NotTranslatableError("a symbolic tensor of mixed or unknown element types")
    return next(iter(dtypes))


def as_sym_array(value: np.ndarray[Any, Any], tracker: Tracker) -> np.ndarray[Any, Any]:
    """`value` as an object array of Syms (a concrete array's elements become numerals)."""
    if value.dtype == object:
        return value
    dtype = _dtype_of_numpy(value.dtype)
    items = np.empty(value.shape, dtype=object)
    for position in np.ndindex(*value.shape):
        items[position] = from_python(value[position], dtype, tracker)
    return items
