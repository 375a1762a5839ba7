"""Expressions of the rule IR: `where` conditions, `let` values, attribute and input values.

The same classes serve every place a rule computes something: the conditions under which a
match holds, the values a rewrite builds, and the arguments of named constraints. They are
frozen, slotted dataclasses holding tuples; each carries the `Span` it was written at (a rule
built in Python has the span of the code that built it, or none), which is excluded from
equality, so two expressions that say the same thing compare equal wherever they come from.

The rule language's parser builds these classes directly; lowering a rule only replaces calls
of named constraints by `ConstraintCall`s that hold the constraint itself, so an expression
tree in a lowered rule is self-contained.
"""

# ruff: noqa: RUF009  (`span_field()` builds a fresh dataclasses.field for each class)

from __future__ import annotations

import dataclasses
from typing import TypeAlias

from rewriter._errors import Span

NO_SPAN = Span("<none>", 0, 0, 0, 0)
"""The span of something not written anywhere (built in code without a location)."""


def span_field() -> Span:
    """A `span` field: last in its class, not compared, not shown in `repr`."""
    return dataclasses.field(default=NO_SPAN, compare=False, repr=False)


@dataclasses.dataclass(frozen=True, slots=True)
class Name:
    """A variable: a match binding, a `let` name, or a matched node's name (`conv`)."""

    name: str
    span: Span = span_field()


@dataclasses.dataclass(frozen=True, slots=True)
class Const:
    """A literal: int, float, string, `true`/`false` (bool) or `none` (None).

    `spelling` is a number's digits as the source wrote them, without a sign (`1e-5`, `3.`),
    so printing keeps them; None for other literals and for numbers built in code. Like
    `span`, it is not compared.
    """

    value: int | float | str | bool | None
    spelling: str | None = dataclasses.field(default=None, compare=False, repr=False)
    span: Span = span_field()


@dataclasses.dataclass(frozen=True, slots=True)
class ListExpr:
    """`[a, b, ...]`."""

    items: tuple[Expr, ...]
    span: Span = span_field()


@dataclasses.dataclass(frozen=True, slots=True)
class Unary:
    """`-x`, `+x` or `not x`."""

    op: str
    operand: Expr
    span: Span = span_field()


@dataclasses.dataclass(frozen=True, slots=True)
class Binary:
    """Arithmetic: `+ - * / // % **`."""

    op: str
    left: Expr
    right: Expr
    span: Span = span_field()


@dataclasses.dataclass(frozen=True, slots=True)
class Compare:
    """`== != < <= > >= in` and `not in` (one comparison; chains nest on the left)."""

    op: str
    left: Expr
    right: Expr
    span: Span = span_field()


@dataclasses.dataclass(frozen=True, slots=True)
class BoolOp:
    """`and` / `or` (Kleene three-valued logic at evaluation time)."""

    op: str
    left: Expr
    right: Expr
    span: Span = span_field()


@dataclasses.dataclass(frozen=True, slots=True)
class Coalesce:
    """`a ?? b`: `a` unless it is none, else `b`."""

    left: Expr
    right: Expr
    span: Span = span_field()


@dataclasses.dataclass(frozen=True, slots=True)
class Conditional:
    """`a if cond else b`."""

    cond: Expr
    then: Expr
    otherwise: Expr
    span: Span = span_field()


@dataclasses.dataclass(frozen=True, slots=True)
class Call:
    """A call of a built-in function (or of a permitted plugin helper): `f(a, b, key = c)`."""

    func: str
    args: tuple[Expr, ...]
    kwargs: tuple[tuple[str, Expr], ...] = ()
    span: Span = span_field()


@dataclasses.dataclass(frozen=True, slots=True)
class Constraint:
    """A named predicate: it holds when every condition holds (three-valued `and`).

    The conditions see only the parameters. A constraint may call others (`ConstraintCall`);
    the rule language refuses recursion, so the tree is finite.
    """

    name: str
    params: tuple[str, ...]
    conditions: tuple[Expr, ...]
    span: Span = span_field()


@dataclasses.dataclass(frozen=True, slots=True)
class ConstraintCall:
    """A call of a named constraint, holding the constraint itself."""

    constraint: Constraint
    args: tuple[Expr, ...]
    span: Span = span_field()

    @property
    def func(self) -> str:
        """The constraint's name, as the call is written."""
        return self.constraint.name


@dataclasses.dataclass(frozen=True, slots=True)
class Attribute:
    """`node.attr`: a matched node's attribute (default-aware), or `.op` / `.domain`."""

    obj: Expr
    name: str
    span: Span = span_field()


@dataclasses.dataclass(frozen=True, slots=True)
class Slice:
    """`start:stop:step` inside an index (each part optional)."""

    start: Expr | None
    stop: Expr | None
    step: Expr | None = None
    span: Span = span_field()


@dataclasses.dataclass(frozen=True, slots=True)
class Index:
    """`x[i]` or `x[a:b]`."""

    obj: Expr
    index: Expr | Slice
    span: Span = span_field()


Expr: TypeAlias = (
    Name
    | Const
    | ListExpr
    | Unary
    | Binary
    | Compare
    | BoolOp
    | Coalesce
    | Conditional
    | Call
    | ConstraintCall
    | Attribute
    | Index
)
"""Any expression."""
