"""Short builders for rules written in Python: the same IR a `.rw` file lowers to.

    from rewriter import rules

    mul_by_one = rules.rule(
        "mul_by_one",  # x * 1 -> x
        match=[rules.node("Mul", "x", 1.0, out="y")],
        where=[rules.eq(rules.call("dtype", "x"), rules.lit("float"))],
        rewrite=[rules.alias("y", "x")],
    )

Strings stand for variables (in a match line `"b?"` is an optional input, `"xs..."` the rest,
`"_"` anything), numbers and lists for literals, wherever an expression or input is
expected; `lit("float")` is a string literal. A rule records
where the Python code that built it is (file and line), so traces, `--why-not` and reports
point at it as they point into a `.rw` file. `rule` checks what a rule file's loader checks of
the rule's own structure (variables bound before use, a connected pattern is checked when the
engine compiles it) and raises `ValueError` naming the problem.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterable, Mapping, Sequence

from rewriter._errors import Span
from rewriter.rules._expr import (
    NO_SPAN,
    BoolOp,
    Call,
    Compare,
    Const,
    Expr,
    ListExpr,
    Name,
    Unary,
)
from rewriter.rules._pattern import (
    AnyValue,
    AttrBind,
    AttrEquals,
    AttrPattern,
    InputConst,
    InputPattern,
    InputVar,
    LiteralValue,
    NodePattern,
    OpId,
    OutputPattern,
    OutputVar,
    Pattern,
)
from rewriter.rules._rewrite import (
    Alias,
    CopyAttrs,
    Let,
    MatchedOp,
    NewNode,
    Rewrite,
    RewriteStmt,
    SetAttr,
)
from rewriter.rules._rule import Approximation, Assumption, Requirement, Rule
from rewriter.rules._scope import unbound_names

ExprLike = Expr | str | int | float | bool | None | Sequence["ExprLike"]
"""An expression, or a shorthand: a string is a variable, a number or list a literal."""


def expr(value: ExprLike) -> Expr:
    """`value` as an expression (see `ExprLike`)."""
    if isinstance(value, str):
        return Name(value)
    if value is None or isinstance(value, bool | int | float):
        return Const(value)
    if isinstance(value, Sequence):
        return ListExpr(tuple(expr(item) for item in value))
    return value


def lit(value: LiteralValue) -> Const | ListExpr:
    """A literal: a number, string, bool, none, or a list of them (`lit(["float", "double"])`)."""
    if isinstance(value, list):
        return ListExpr(tuple(lit(item) for item in value))
    return Const(value)


def var(name: str) -> Name:
    """A variable (in `node(..., attrs=...)`, binds the attribute's value to it)."""
    return Name(name)


def call(func: str, *args: ExprLike, **kwargs: ExprLike) -> Call:
    """A call of a built-in function: `call("shape", "x")`."""
    return Call(
        func,
        tuple(expr(a) for a in args),
        tuple((key, expr(value)) for key, value in kwargs.items()),
    )


def eq(left: ExprLike, right: ExprLike) -> Compare:
    """`left == right` (three-valued: unknown when a fact is not known)."""
    return Compare("==", expr(left), expr(right))


def ne(left: ExprLike, right: ExprLike) -> Compare:
    """`left != right`."""
    return Compare("!=", expr(left), expr(right))


def lt(left: ExprLike, right: ExprLike) -> Compare:
    """`left < right`."""
    return Compare("<", expr(left), expr(right))


def le(left: ExprLike, right: ExprLike) -> Compare:
    """`left <= right`."""
    return Compare("<=", expr(left), expr(right))


def is_in(item: ExprLike, container: ExprLike) -> Compare:
    """`item in container`."""
    return Compare("in", expr(item), expr(container))


def all_of(*conditions: ExprLike) -> Expr:
    """`a and b and ...` (Kleene logic)."""
    found = [expr(c) for c in conditions]
    if not found:
        return Const(True)
    combined = found[0]
    for condition in found[1:]:
        combined = BoolOp("and", combined, condition)
    return combined


def any_of(*conditions: ExprLike) -> Expr:
    """`a or b or ...` (Kleene logic)."""
    found = [expr(c) for c in conditions]
    if not found:
        return Const(False)
    combined = found[0]
    for condition in found[1:]:
        combined = BoolOp("or", combined, condition)
    return combined


def not_(condition: ExprLike) -> Unary:
    """`not condition` (not unknown is unknown)."""
    return Unary("not", expr(condition))


def _op(op: str | OpId) -> OpId:
    """`"Conv"` or `"com.microsoft.Gelu"` (the last dot splits domain and op type)."""
    if isinstance(op, OpId):
        return op
    domain, _, op_type = op.rpartition(".")
    return OpId("" if domain == "ai.onnx" else domain, op_type)


def _outputs(out: str | Sequence[str]) -> tuple[OutputPattern, ...]:
    names = [out] if isinstance(out, str) else list(out)
    return tuple(AnyValue() if name == "_" else OutputVar(name) for name in names)


def _input_pattern(item: str | LiteralValue) -> InputPattern:
    if isinstance(item, str):
        if item == "_":
            return AnyValue()
        if item.endswith("?"):
            return InputVar(item[:-1], optional=True)
        if item.endswith("..."):
            return InputVar(item[:-3], variadic=True)
        return InputVar(item)
    return InputConst(item)


def _attr_pattern(name: str, value: Name | LiteralValue) -> AttrPattern:
    if isinstance(value, Name):
        return AttrBind(name, value.name)
    return AttrEquals(name, value)


def node(
    op: str | OpId | Sequence[str | OpId],
    *inputs: str | LiteralValue,
    out: str | Sequence[str],
    attrs: Mapping[str, Name | LiteralValue] | None = None,
    name: str | None = None,
    more_outputs: bool = False,
) -> NodePattern:
    """A match line: `node("Conv", "x", "w", "b?", out="y", name="conv")`.

    `op` may list alternatives (`["Relu", "LeakyRelu"]`) or be `"_"` for any op. An
    attribute given as `var("eps")` binds that variable; any other value must be equal.
    """
    if isinstance(op, str | OpId):
        ops: tuple[OpId, ...] = () if op == "_" else (_op(op),)
    else:
        ops = tuple(_op(o) for o in op)
    return NodePattern(
        outputs=_outputs(out),
        ops=ops,
        attrs=tuple(_attr_pattern(k, v) for k, v in (attrs or {}).items()),
        inputs=tuple(_input_pattern(i) for i in inputs),
        node_var=name,
        more_outputs=more_outputs,
    )


def new_node(
    op: str | OpId | MatchedOp,
    *inputs: ExprLike,
    out: str | Sequence[str],
    attrs: Mapping[str, ExprLike] | None = None,
    copy_attrs: str | None = None,
    name: str | None = None,
) -> NewNode:
    """A rewrite line: `new_node("Conv", "x", "w2", out="y", copy_attrs="conv")`.

    `copy_attrs` copies every attribute of a matched node first; `attrs` then set or
    override (a value of None leaves an attribute out). `MatchedOp("n")` as `op` keeps the
    op the node matched as `n` had.
    """
    entries: list[SetAttr | CopyAttrs] = []
    if copy_attrs is not None:
        entries.append(CopyAttrs(copy_attrs))
    entries.extend(SetAttr(key, expr(value)) for key, value in (attrs or {}).items())
    return NewNode(
        outputs=_outputs(out),
        op=op if isinstance(op, MatchedOp) else _op(op),
        attrs=tuple(entries),
        inputs=tuple(expr(i) for i in inputs),
        node_var=name,
    )


def let(name: str, value: ExprLike) -> Let:
    """`let name = value`: a rewrite-time value."""
    return Let(name, expr(value))


def alias(target: str, source: ExprLike) -> Alias:
    """`target = source`: every use of the matched value `target` becomes `source`."""
    return Alias(target, expr(source))


def rule(
    name: str,
    *,
    match: Iterable[NodePattern],
    rewrite: Iterable[RewriteStmt],
    where: Iterable[ExprLike] = (),
    priority: int = 0,
    requires: Iterable[Requirement] = (),
    assumes: Iterable[Assumption] = (),
    approximate: Approximation | None = None,
    span: Span | None = None,
) -> Rule:
    """A rule, located at the Python line that calls this (unless `span` is given).

    Raises:
        ValueError: a variable is read before anything binds it, or a rewrite redefines a
            value the match does not define; the message names the rule and its location.
    """
    built = Rule(
        name=name,
        pattern=Pattern(tuple(match)),
        conditions=tuple(expr(condition) for condition in where),
        rewrite=Rewrite(tuple(rewrite)),
        priority=priority,
        requires=tuple(requires),
        assumes=tuple(assumes),
        approximate=approximate,
        span=span or _caller_span(),
    )
    problems = unbound_names(built)
    if problems:
        raise ValueError(f"rule `{name}` ({built.location}): {'; '.join(problems)}")
    return built


def _caller_span() -> Span:
    """The file and line of the code that called `rule` (two frames up)."""
    frame = inspect.currentframe()
    caller = frame.f_back.f_back if frame is not None and frame.f_back is not None else None
    if caller is None:
        return NO_SPAN
    line = caller.f_lineno
    return Span(caller.f_code.co_filename, line, 1, line, 1)
