"""Rewrites of the rule IR: what replaces a match.

A `Rewrite` is a sequence of statements run in order: `Let` computes a value (a new
initializer when used as a node input), `NewNode` creates a node, `Alias` makes every use of
a matched value use another value. Every value that a node pattern defines and that is used
outside the match (or is a graph output) must be defined again here; the matched nodes left
without uses are removed. `RollLoop` instead rolls a matched repeated block into an ONNX Loop.
"""

# ruff: noqa: RUF009  (`span_field()` builds a fresh dataclasses.field for each class)

from __future__ import annotations

import dataclasses
from typing import TypeAlias

from rewriter._errors import Span
from rewriter.rules._expr import Expr, span_field
from rewriter.rules._pattern import OpId, OutputPattern


@dataclasses.dataclass(frozen=True, slots=True)
class Let:
    """`let name = expr`: a rewrite-time value."""

    name: str
    expr: Expr
    span: Span = span_field()


@dataclasses.dataclass(frozen=True, slots=True)
class SetAttr:
    """An attribute of a new node; a value of none leaves the attribute out."""

    name: str
    value: Expr
    span: Span = span_field()


@dataclasses.dataclass(frozen=True, slots=True)
class CopyAttrs:
    """`...conv`: every attribute of the matched node `node_var` (later entries override)."""

    node_var: str
    span: Span = span_field()


@dataclasses.dataclass(frozen=True, slots=True)
class MatchedOp:
    """The operator of the matched node `node_var`: a rewrite that keeps the op it matched."""

    node_var: str

    def __str__(self) -> str:
        return f"...{self.node_var}"


@dataclasses.dataclass(frozen=True, slots=True)
class NewNode:
    """A new node: `outputs = Op <attrs> (inputs) as node_var`.

    An input that evaluates to none is an omitted optional input. `attrs` apply in order.
    An output named like a matched value replaces that value.
    """

    outputs: tuple[OutputPattern, ...]
    op: OpId | MatchedOp
    attrs: tuple[SetAttr | CopyAttrs, ...] = ()
    inputs: tuple[Expr, ...] = ()
    node_var: str | None = None
    span: Span = span_field()


@dataclasses.dataclass(frozen=True, slots=True)
class Alias:
    """`y = x`: every use of `y` (and a graph output named `y`) becomes `x`."""

    target: str
    source: Expr
    span: Span = span_field()


RewriteStmt: TypeAlias = Let | NewNode | Alias


@dataclasses.dataclass(frozen=True, slots=True)
class Rewrite:
    """The statements that replace a match, in order."""

    stmts: tuple[RewriteStmt, ...]
    span: Span = span_field()


@dataclasses.dataclass(frozen=True, slots=True)
class RollLoop:
    """Roll the matched repeat chain into one ONNX Loop."""

    span: Span = span_field()
