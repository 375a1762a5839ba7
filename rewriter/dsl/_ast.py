"""The AST of `.rw` rule files: frozen, slotted dataclasses, each carrying its source `Span`.

This module is the contract between the parser (which builds these nodes), the checker, the
formatter, and lowering (`_lower.py`, which turns each rule into the rule IR of
`rewriter.rules`, the only form the engine reads). Conventions:

* Tuples, never lists. `span` is always the last field and is excluded from equality, so two
  ASTs that differ only in layout compare equal (the formatter relies on that).
* Expressions are the same classes in `where`, `let`, attribute values and rewrite inputs.
* The one-line form `rule r: MATCH => REWRITE where EXPR` produces the same `Rule` as the
  block form, with `one_line=True` (the formatter keeps the form the user chose).
"""

# ruff: noqa: RUF009  (`_span_field()` builds a fresh dataclasses.field for each class)

from __future__ import annotations

import dataclasses
from typing import TypeAlias

from rewriter._errors import Span
from rewriter.rules import (
    APPROXIMATION_METRICS,
    Approximation,
    Attribute,
    Binary,
    BoolOp,
    Call,
    Coalesce,
    Compare,
    Conditional,
    Const,
    Expr,
    Index,
    ListExpr,
    Name,
    Requirement,
    Slice,
    Unary,
)
from rewriter.rules import NO_SPAN as _NO_SPAN


def _span_field() -> Span:
    return dataclasses.field(default=_NO_SPAN, compare=False, repr=False)


# The expression classes, `Requirement` and `Approximation` are the rule IR's own: the parser
# builds them directly (lowering a rule then only resolves its constraint calls). They are
# re-exported here so the language's modules read them as part of the syntax tree.
__all__ = [
    "APPROXIMATION_METRICS",
    "Approximation",
    "Attribute",
    "Binary",
    "BoolOp",
    "Call",
    "Coalesce",
    "Compare",
    "Conditional",
    "Const",
    "Expr",
    "Index",
    "ListExpr",
    "Name",
    "Requirement",
    "Slice",
    "Unary",
]


# ---------------------------------------------------------------------------------------------
# Node statements (shared by match and rewrite)


@dataclasses.dataclass(frozen=True, slots=True)
class OpRef:
    """One operator: `Conv`, or domain-qualified `com.microsoft.Gelu` (domain "" = ONNX)."""

    domain: str
    op_type: str
    span: Span = _span_field()


@dataclasses.dataclass(frozen=True, slots=True)
class OpPattern:
    """`A | B | ...`, or `_` (any op) when `alternatives` is empty."""

    alternatives: tuple[OpRef, ...]
    span: Span = _span_field()

    @property
    def is_wildcard(self) -> bool:
        """True for `_`."""
        return not self.alternatives


@dataclasses.dataclass(frozen=True, slots=True)
class AttrEntry:
    """`name = value` inside `<...>`.

    In `match`: a `Name` value binds (or, if already bound, must equal) the attribute's value,
    default-aware; a literal value requires that value. In `rewrite`: any expression.
    """

    name: str
    value: Expr
    span: Span = _span_field()


@dataclasses.dataclass(frozen=True, slots=True)
class AttrCopy:
    """`...` (match: other attributes unconstrained) or `...conv` (rewrite: copy conv's)."""

    source: str | None
    span: Span = _span_field()


@dataclasses.dataclass(frozen=True, slots=True)
class InputVar:
    """A variable input: `x`, optional `b?`, or variadic rest `xs...`."""

    name: str
    optional: bool = False
    variadic: bool = False
    span: Span = _span_field()


@dataclasses.dataclass(frozen=True, slots=True)
class Wildcard:
    """`_`: any value (an input or output that is not bound)."""

    span: Span = _span_field()


@dataclasses.dataclass(frozen=True, slots=True)
class InputLiteral:
    """A literal input in `match`: `0.5`, `-1`, `[-1]`: matches a constant with those values."""

    value: Expr
    span: Span = _span_field()


InputPattern: TypeAlias = InputVar | Wildcard | InputLiteral


@dataclasses.dataclass(frozen=True, slots=True)
class OutputVar:
    """A named output."""

    name: str
    span: Span = _span_field()


OutputPattern: TypeAlias = OutputVar | Wildcard


@dataclasses.dataclass(frozen=True, slots=True)
class NodePattern:
    """A `match` line: `outs = Op <attrs> (inputs) as name`.

    `outputs_open` is True when the output list ends in `...` (further outputs allowed).
    """

    outputs: tuple[OutputPattern, ...]
    op: OpPattern
    attrs: tuple[AttrEntry | AttrCopy, ...]
    inputs: tuple[InputPattern, ...]
    as_name: str | None = None
    outputs_open: bool = False
    span: Span = _span_field()


@dataclasses.dataclass(frozen=True, slots=True)
class RepeatPattern:
    """`repeat (n >= K) from h to out { node patterns }`: a chain of `n` copies of a block."""

    count_var: str
    count_op: str
    count: int
    from_var: str
    to_var: str
    body: tuple[NodePattern, ...]
    span: Span = _span_field()


@dataclasses.dataclass(frozen=True, slots=True)
class MatchBlock:
    """The `match` block: node patterns, or one repeat pattern."""

    patterns: tuple[NodePattern, ...]
    repeat: RepeatPattern | None = None
    span: Span = _span_field()


# ---------------------------------------------------------------------------------------------
# Rewrite statements


@dataclasses.dataclass(frozen=True, slots=True)
class LetStmt:
    """`let name = expr`: a rewrite-time value (a new initializer when used as an input)."""

    name: str
    expr: Expr
    span: Span = _span_field()


@dataclasses.dataclass(frozen=True, slots=True)
class NodeCopy:
    """`...n` in place of an op: the op of the node matched as `n`, with its attributes."""

    node: str
    span: Span = _span_field()


@dataclasses.dataclass(frozen=True, slots=True)
class NodeStmt:
    """A rewrite line creating a node: `outs = Op <attrs, ...copy> (input exprs) as name`.

    An input that evaluates to `none` is an omitted optional input. `attrs` keeps source order:
    later entries override earlier ones (and copies). With `op` a `NodeCopy` (`y = ...n (x)`)
    the node takes a matched node's op and attributes, then `attrs`.
    """

    outputs: tuple[OutputPattern, ...]
    op: OpRef | NodeCopy
    attrs: tuple[AttrEntry | AttrCopy, ...]
    inputs: tuple[Expr, ...]
    as_name: str | None = None
    span: Span = _span_field()


@dataclasses.dataclass(frozen=True, slots=True)
class AliasStmt:
    """`y = x`: every use of `y` (and a graph output named `y`) becomes `x`."""

    target: str
    source: Expr
    span: Span = _span_field()


RewriteStmt: TypeAlias = LetStmt | NodeStmt | AliasStmt


@dataclasses.dataclass(frozen=True, slots=True)
class RewriteBlock:
    """The `rewrite` block (or the right side of `=>`)."""

    stmts: tuple[RewriteStmt, ...]
    span: Span = _span_field()


@dataclasses.dataclass(frozen=True, slots=True)
class RewriteLoop:
    """`rewrite loop`: roll the matched repeat chain into one ONNX Loop."""

    span: Span = _span_field()


# ---------------------------------------------------------------------------------------------
# Declarations


@dataclasses.dataclass(frozen=True, slots=True)
class Rule:
    """A named rule."""

    name: str
    match: MatchBlock
    where: tuple[Expr, ...]
    rewrite: RewriteBlock | RewriteLoop
    priority: int = 0
    requires: tuple[Requirement, ...] = ()
    # `assumes finite`: exact for finite inputs only; NaN and infinities may come out otherwise.
    assumes_finite: bool = False
    # `assumes nonempty`: exact where no tensor the match reads has a zero-size dim (a runtime
    # kernel the rewrite introduces rejects empty inputs the matched ops accept).
    assumes_nonempty: bool = False
    # `approximate METRIC CMP BOUND`: the rule changes numerics within the declared bound.
    approximate: Approximation | None = None
    one_line: bool = False
    # A query (`rewrite find -e`): match lines and `where` only, never rewritten.
    query: bool = False
    name_span: Span = _span_field()
    # The `where` section (block form) or clause (one-line form); not compared.
    where_span: Span = _span_field()
    span: Span = _span_field()


@dataclasses.dataclass(frozen=True, slots=True)
class PassDecl:
    """`pass NAME { key = value, ... }`: configure a built-in pass."""

    name: str
    options: tuple[tuple[str, Expr], ...] = ()
    # Where each option's name is written (parallel to `options`; not compared).
    option_spans: tuple[Span, ...] = dataclasses.field(default=(), compare=False, repr=False)
    span: Span = _span_field()


@dataclasses.dataclass(frozen=True, slots=True)
class UseDecl:
    """`use "module"`: opt-in Python helper functions."""

    module: str
    span: Span = _span_field()


@dataclasses.dataclass(frozen=True, slots=True)
class IncludeDecl:
    """`include "path"`: load another rule file too (its path relative to this file's folder)."""

    path: str
    # Where the path's string is written (not compared).
    path_span: Span = _span_field()
    span: Span = _span_field()


@dataclasses.dataclass(frozen=True, slots=True)
class ParamDecl:
    """`param NAME = literal`: a rule parameter, its default value (a run may set another)."""

    name: str
    value: Expr
    name_span: Span = _span_field()
    span: Span = _span_field()


@dataclasses.dataclass(frozen=True, slots=True)
class Param:
    """A parameter of a constraint."""

    name: str
    span: Span = _span_field()


@dataclasses.dataclass(frozen=True, slots=True)
class Constraint:
    """`constraint NAME(params) { conditions }`: a named predicate, called in `where` lines.

    A call holds when every condition holds (three-valued: false when one is false, unknown
    when none is false and one is unknown). The conditions see only the parameters.
    """

    name: str
    params: tuple[Param, ...]
    conditions: tuple[Expr, ...]
    name_span: Span = _span_field()
    span: Span = _span_field()

    @property
    def param_names(self) -> tuple[str, ...]:
        """The parameters' names, in order."""
        return tuple(param.name for param in self.params)


@dataclasses.dataclass(frozen=True, slots=True)
class Comment:
    """A `#` comment (kept for the formatter)."""

    text: str
    span: Span = _span_field()


Item: TypeAlias = Rule | Constraint | PassDecl | UseDecl | IncludeDecl | ParamDecl


@dataclasses.dataclass(frozen=True, slots=True)
class File:
    """One parsed `.rw` file."""

    path: str
    items: tuple[Item, ...]
    comments: tuple[Comment, ...] = ()
    # The text the file was parsed from, for diagnostics' source lines (not compared).
    source: str = dataclasses.field(default="", compare=False, repr=False)
    span: Span = _span_field()
