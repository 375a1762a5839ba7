"""The values rule expressions compute with, and three-valued logic over them.

A fact that is not known is `UNKNOWN`; arithmetic and comparisons with an unknown are unknown;
`not` keeps unknown; `and`/`or` follow Kleene logic. A `where` line holds only when it is
definitely true, so no rule fires on a guess. Values bound by a match (`ir.Value`) stand for
themselves in fact built-ins (`rank(x)`) and for their constant contents in arithmetic.
This module is shared by the evaluator and the built-in functions.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, Final, TypeAlias

import numpy as np
import numpy.typing as npt

import ir
from rewriter import rules
from rewriter._errors import RewriteError, Span
from rewriter.engine import _facts
from rewriter.engine._calibration import Calibration


class _Unknown:
    """The unknown truth value / unknown fact (a singleton)."""

    _instance: _Unknown | None = None

    def __new__(cls) -> _Unknown:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "unknown"

    def __bool__(self) -> bool:
        raise TypeError("the unknown truth value has no Python bool; use is_true()")


UNKNOWN: Final[_Unknown] = _Unknown()


class SymbolicDim(str):
    """A dimension known by name only (`"batch"`, `"batch*seq"`), as `shape(v)` gives it.

    The same name is the same size; different names may still be equal at run time, so
    comparing them is unknown (a plain string, such as a dtype name, compares as a string).
    """

    __slots__ = ()


class EvalError(RewriteError):
    """An expression could not be evaluated (wrong types, non-constant operand, bad call)."""

    def __init__(self, message: str, span: Span | None = None) -> None:
        self.span = span
        self.bare_message = message
        super().__init__(f"{span}: {message}" if span is not None else message)


@dataclasses.dataclass(frozen=True, slots=True)
class NodeRef:
    """A node bound with `as name`, as seen by expressions (`conv.group`, `<...conv>`)."""

    node: ir.Node
    opset: int | None


Array: TypeAlias = npt.NDArray[Any]
"""A tensor value computed by an expression (a constant's contents, a `let` result)."""

EvalValue: TypeAlias = (
    "ir.Value | NodeRef | Array | np.generic | int | float | bool | str | bytes | _Unknown"
    " | list[EvalValue] | tuple[EvalValue, ...] | ir.Tensor | ir.Graph | ir.Type | None"
)
"""What an expression evaluates to.

A matched value (`ir.Value`, standing for itself in fact built-ins and for its constant
contents in arithmetic), a node bound with `as` (`NodeRef`), a tensor or numpy scalar, a
Python number, bool or string (a symbolic dim is a `SymbolicDim` string), none, `UNKNOWN`,
a list (`[1, 2]`, a shape) or a tuple (the values a variadic input `xs...` bound), or what
an attribute holds (a tensor, a graph, a type).
"""

Bindings: TypeAlias = dict[str, EvalValue]
"""Variable name -> value: what a match bound, then what a rewrite's statements add."""


@dataclasses.dataclass(slots=True)
class EvalContext:
    """What an expression can see: bindings, the model's opsets and calibration, helpers."""

    bindings: Bindings
    opset_imports: Mapping[str, int]
    # The helper functions permitted `use` declarations registered, by name.
    functions: Mapping[str, rules.Helper] = dataclasses.field(default_factory=dict)
    # The opsets a conversion is heading for (`--target-opset`); empty when not converting.
    target_opsets: Mapping[str, int] = dataclasses.field(default_factory=dict)
    # What the model's values held on calibration samples (`--calibration`), if given.
    calibration: Calibration | None = None

    def inside(self, bindings: Bindings) -> EvalContext:
        """The context of a constraint's conditions: its parameters, and everything else."""
        return EvalContext(
            bindings, self.opset_imports, self.functions, self.target_opsets, self.calibration
        )


def is_unknown(value: object) -> bool:
    """True for `UNKNOWN` (a function, so that comparing an untyped value keeps its type)."""
    return value is UNKNOWN


def is_true(value: object) -> bool:
    """True only for a definitely true value."""
    return truth(value) is True


def truth(value: object) -> bool | _Unknown:
    """Kleene truth of a value: True, False or UNKNOWN."""
    if value is UNKNOWN:
        return _Unknown()  # the singleton (spelled so for the type checker)
    if value is None:
        return False
    if isinstance(value, bool | np.bool_ | int | float | np.integer | np.floating):
        return bool(value)
    if isinstance(value, np.ndarray):
        if value.size == 1:
            return bool(value.reshape(-1)[0])
        raise EvalError(f"a tensor of {value.size} elements is not a truth value; use all()/any()")
    if isinstance(value, list | tuple | str):
        return bool(value)
    if isinstance(value, ir.Value | NodeRef):
        return True
    raise EvalError(f"{type(value).__name__} is not a truth value")


def quiet_numpy() -> Any:
    """For built-in functions: numpy's floating-point warnings silenced, except overflow.

    Overflow still raises where the caller makes it raise.
    The builder evaluates rewrites with every floating-point exception raising (see
    `exact_numpy`); a function of a constant may still give an infinity or a NaN on purpose
    (`log(0.0)` for a -inf mask, `sqrt` of a negative variance as the op computes it), so
    only overflow raises in functions. Everywhere else nothing is printed (a `where` line
    over odd constants is not an error).
    """
    if np.geterr()["over"] == "raise":
        return np.errstate(divide="ignore", invalid="ignore", under="ignore", over="raise")
    return np.errstate(all="ignore")


def exact_numpy() -> Any:
    """For arithmetic and casts: in the builder, every floating-point exception raises.

    A rewrite's constant that overflows, underflows (to a subnormal or to zero: a float16
    weight product of 1e-4 and 1e-4), turns numbers into NaN (0 * inf, inf - inf) or
    divides by zero is not what the unfused graph computes at run time, so the builder
    declines such a rewrite. Everywhere else nothing is printed.
    """
    if np.geterr()["over"] == "raise":
        return np.errstate(all="raise")
    return np.errstate(all="ignore")


def numeric(value: EvalValue, span: Span | None = None) -> Any:
    """An operand for arithmetic: constants become arrays, lists arrays, dims stay ints."""
    if value is UNKNOWN:
        return UNKNOWN
    if isinstance(value, bool | np.bool_):
        return value
    if isinstance(value, int | float | np.integer | np.floating | np.ndarray):
        return value
    if isinstance(value, str):
        return UNKNOWN  # a symbolic dimension: its value is not known
    if isinstance(value, ir.Value):
        array = _facts.const_array(value)
        if array is None:
            raise EvalError(f"`{value.name}` is not a constant", span)
        return array
    if isinstance(value, list | tuple):
        items = [numeric(v, span) for v in value]
        if any(v is UNKNOWN for v in items):
            return UNKNOWN
        return np.asarray(items)
    if value is None:
        raise EvalError("`none` used in arithmetic", span)
    raise EvalError(f"{type(value).__name__} used in arithmetic", span)


def equal(a: object, b: object) -> bool | _Unknown:
    """Three-valued equality (see module docstring)."""
    if a is UNKNOWN or b is UNKNOWN:
        return _Unknown()  # the singleton (spelled so for the type checker)
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, ir.Value) and isinstance(b, ir.Value):
        return a is b
    if isinstance(a, NodeRef) and isinstance(b, NodeRef):
        return a.node is b.node
    if isinstance(a, ir.Value):
        a = _facts.const_array(a)
        if a is None:
            return UNKNOWN
    if isinstance(b, ir.Value):
        b = _facts.const_array(b)
        if b is None:
            return UNKNOWN
    if isinstance(a, str) or isinstance(b, str):
        if isinstance(a, str) and isinstance(b, str):
            if a == b:
                return True
            # Two dims known by different names may still be equal at run time.
            symbolic = isinstance(a, SymbolicDim) or isinstance(b, SymbolicDim)
            return _Unknown() if symbolic else False
        # A symbolic dimension against a number: could be equal at run time.
        if isinstance(a, str) and isinstance(b, int | np.integer):
            return UNKNOWN
        if isinstance(b, str) and isinstance(a, int | np.integer):
            return UNKNOWN
        return False
    if isinstance(a, list | tuple) != isinstance(b, list | tuple):
        # A list against a scalar compares every element (like a tensor against a scalar).
        items, scalar = (a, b) if isinstance(a, list | tuple) else (b, a)
        assert isinstance(items, list | tuple), "one side is a list here"
        if isinstance(scalar, int | float | np.integer | np.floating | bool):
            result_all: bool | _Unknown = True
            for item in items:
                e = equal(item, scalar)
                if e is False:
                    return False
                if e is UNKNOWN:
                    result_all = UNKNOWN
            return result_all
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        if len(a) != len(b):
            return False
        result: bool | _Unknown = True
        for x, y in zip(a, b, strict=False):
            e = equal(x, y)
            if e is False:
                return False
            if e is UNKNOWN:
                result = UNKNOWN
        return result
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        x = np.asarray(a)
        y = np.asarray(b)
        if x.dtype == object or y.dtype == object:
            return bool(np.array_equal(x, y))
        if x.shape != y.shape and x.size != 1 and y.size != 1:
            return False
        return bool(np.all(x == y))
    return bool(a == b)


def node_attribute(ref: NodeRef, name: str) -> EvalValue:
    """A matched node's attribute as a Python value, schema-default aware (None if absent)."""
    node = ref.node
    if name == "op":
        return node.op_type
    if name == "domain":
        return node.domain
    if name == "name":
        return node.name
    attr = node.attributes.get(name)
    if attr is None:
        attr = ir.schemas.attribute_default(node.op_type, name, node.domain, ref.opset)
    if attr is None:
        return None
    return attr_to_python(attr)


def attr_to_python(attr: ir.Attr) -> EvalValue:
    """An attribute's value as the expression language sees it (lists, arrays, numbers)."""
    value = attr.value
    if isinstance(value, ir.Tensor):
        return np.asarray(value.numpy())
    if isinstance(value, tuple):
        items: list[EvalValue] = []
        for item in value:
            items.append(np.asarray(item.numpy()) if isinstance(item, ir.Tensor) else item)
        return items
    return value
