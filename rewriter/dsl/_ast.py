"""The AST of `.rw` rule files: frozen, slotted dataclasses, each carrying its source `Span`.

This module is the contract between the parser (which builds these nodes) and the rule
compiler (which turns them into matchers and builders). Conventions:

* Tuples, never lists. `span` is always the last field and is excluded from equality, so two
  ASTs that differ only in layout compare equal (the formatter relies on that).
* Expressions are the same classes in `where`, `let`, attribute values and rewrite inputs.
* The one-line form `rule r: MATCH => REWRITE where EXPR` produces the same `Rule` as the
  block form, with `one_line=True` (the formatter keeps the form the user chose).
"""

# ruff: noqa: RUF009  (`_span_field()` builds a fresh dataclasses.field for each class)

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import TypeAlias

from rewriter._errors import Diagnostic, Span

_NO_SPAN = Span("<none>", 0, 0, 0, 0)


def _span_field() -> Span:
    return dataclasses.field(default=_NO_SPAN, compare=False, repr=False)


# ---------------------------------------------------------------------------------------------
# Expressions


@dataclasses.dataclass(frozen=True, slots=True)
class Name:
    """A variable: a pattern binding, a `let` name, or a node name (`conv`)."""

    name: str
    span: Span = _span_field()


@dataclasses.dataclass(frozen=True, slots=True)
class Const:
    """A literal: int, float, string, `true`/`false` (bool) or `none` (None).

    `spelling` is a number's digits as the source wrote them, without a sign (`1e-5`, `3.`),
    so the formatter can keep them; None for other literals and for numbers built in code.
    Like `span`, it is not compared.
    """

    value: int | float | str | bool | None
    spelling: str | None = dataclasses.field(default=None, compare=False, repr=False)
    span: Span = _span_field()


@dataclasses.dataclass(frozen=True, slots=True)
class ListExpr:
    """`[a, b, ...]`."""

    items: tuple[Expr, ...]
    span: Span = _span_field()


@dataclasses.dataclass(frozen=True, slots=True)
class Unary:
    """`-x`, `+x` or `not x`."""

    op: str
    operand: Expr
    span: Span = _span_field()


@dataclasses.dataclass(frozen=True, slots=True)
class Binary:
    """Arithmetic: `+ - * / // % **`."""

    op: str
    left: Expr
    right: Expr
    span: Span = _span_field()


@dataclasses.dataclass(frozen=True, slots=True)
class Compare:
    """`== != < <= > >= in` and `not in` (one comparison; chains nest on the left)."""

    op: str
    left: Expr
    right: Expr
    span: Span = _span_field()


@dataclasses.dataclass(frozen=True, slots=True)
class BoolOp:
    """`and` / `or` (Kleene three-valued logic at evaluation time)."""

    op: str
    left: Expr
    right: Expr
    span: Span = _span_field()


@dataclasses.dataclass(frozen=True, slots=True)
class Coalesce:
    """`a ?? b`: `a` unless it is none, else `b`."""

    left: Expr
    right: Expr
    span: Span = _span_field()


@dataclasses.dataclass(frozen=True, slots=True)
class Conditional:
    """`a if cond else b`."""

    cond: Expr
    then: Expr
    otherwise: Expr
    span: Span = _span_field()


@dataclasses.dataclass(frozen=True, slots=True)
class Call:
    """A built-in (or plugin) function call: `f(a, b, key = c)`."""

    func: str
    args: tuple[Expr, ...]
    kwargs: tuple[tuple[str, Expr], ...] = ()
    span: Span = _span_field()


@dataclasses.dataclass(frozen=True, slots=True)
class Attribute:
    """`node.attr` (a matched node's attribute, or `.op` / `.domain`)."""

    obj: Expr
    name: str
    span: Span = _span_field()


@dataclasses.dataclass(frozen=True, slots=True)
class Slice:
    """`start:stop:step` inside an index (each part optional)."""

    start: Expr | None
    stop: Expr | None
    step: Expr | None = None
    span: Span = _span_field()


@dataclasses.dataclass(frozen=True, slots=True)
class Index:
    """`x[i]` or `x[a:b]`."""

    obj: Expr
    index: Expr | Slice
    span: Span = _span_field()


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
    | Attribute
    | Index
)

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
class NodeStmt:
    """A rewrite line creating a node: `outs = Op <attrs, ...copy> (input exprs) as name`.

    An input that evaluates to `none` is an omitted optional input. `attrs` keeps source order:
    later entries override earlier ones (and copies).
    """

    outputs: tuple[OutputPattern, ...]
    op: OpRef
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
class Requirement:
    """`opset >= 17` or `opset com.microsoft >= 1` in a `requires` clause."""

    domain: str
    op: str
    version: int
    span: Span = _span_field()


@dataclasses.dataclass(frozen=True, slots=True)
class Approximation:
    """`approximate snr >= 30`: the numeric change a rule declares it may make.

    `metric` is one of APPROXIMATION_METRICS; the rewritten graph's outputs, compared with the
    matched subgraph's, must satisfy `metric comparison bound`.
    """

    metric: str
    comparison: str
    bound: float
    # The bound as the source wrote it (the formatter keeps the digits).
    bound_text: str = dataclasses.field(default="", compare=False)
    span: Span = _span_field()

    def __str__(self) -> str:
        return f"{self.metric} {self.comparison} {self.bound_text or repr(self.bound)}"


# Metric -> the comparison that states "at least this good" for it.
APPROXIMATION_METRICS = {"snr": ">=", "cosine": ">=", "max_rel": "<=", "max_abs": "<="}


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


Item: TypeAlias = Rule | Constraint | PassDecl | UseDecl | IncludeDecl


@dataclasses.dataclass(frozen=True, slots=True)
class File:
    """One parsed `.rw` file."""

    path: str
    items: tuple[Item, ...]
    comments: tuple[Comment, ...] = ()
    # The text the file was parsed from, for diagnostics' source lines (not compared).
    source: str = dataclasses.field(default="", compare=False, repr=False)
    span: Span = _span_field()


@dataclasses.dataclass(frozen=True, slots=True)
class RuleSet:
    """Rules, passes, constraints and helper functions loaded from files, in load order.

    `rules` are in file order (sorted path, then position). `constraints` are the named
    constraints of every loaded file, by name. `functions` holds the helpers that permitted
    `use` declarations registered. `warnings` are the loader's non-fatal diagnostics.
    `sources` maps each file path to its text (for error messages and reports).
    """

    rules: tuple[Rule, ...]
    passes: tuple[PassDecl, ...] = ()
    files: tuple[File, ...] = ()
    functions: Mapping[str, Callable[..., object]] = dataclasses.field(default_factory=dict)
    constraints: Mapping[str, Constraint] = dataclasses.field(default_factory=dict)
    warnings: tuple[Diagnostic, ...] = ()
    sources: Mapping[str, str] = dataclasses.field(default_factory=dict)

    def rule(self, name: str) -> Rule | None:
        """The rule called `name`, if loaded."""
        for rule in self.rules:
            if rule.name == name:
                return rule
        return None
