"""Build the frozen AST (`rewriter.dsl._ast`) from Lark's parse tree.

A separate, non-recursive `Transformer` (not `Lark(transformer=...)`, which would lose the
positions) turns each tree into AST nodes, each with the `Span` of the text it came from.
Constructs that the grammar accepts but the language does not (a `priority` given twice, a
keyword argument as a node input, an unknown string escape) raise `BuildError`, which the
parser turns into a located syntax diagnostic. Intermediate values that never reach the AST
(sections, argument lists) are private dataclasses of this module.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any, TypeVar

from lark import Token, Transformer_NonRecursive, v_args
from lark.tree import Meta

from rewriter._errors import Span
from rewriter.dsl import _ast as ast
from rewriter.dsl._postlex import token_span
from rewriter.dsl._walk import children as walk_children

MAX_EXPRESSION_DEPTH = 100
"""Deepest expression nesting accepted (evaluation and printing recurse over expressions)."""

_E = TypeVar("_E", bound=ast.Expr | ast.Slice)

_ESCAPES = {"\\": "\\", '"': '"', "n": "\n", "t": "\t", "r": "\r", "0": "\0"}
_REPEAT_OPS = frozenset({">=", ">", "==", "<=", "<"})
_REQUIRE_OPS = frozenset({">=", ">", "==", "<=", "<"})


class BuildError(Exception):
    """A construct the grammar accepts but the language rejects, with its location."""

    def __init__(self, span: Span, message: str) -> None:
        super().__init__(message)
        self.span = span
        self.message = message


@dataclasses.dataclass(frozen=True, slots=True)
class _Section:
    kind: str  # "match" | "where" | "rewrite"
    value: Any
    span: Span


@dataclasses.dataclass(frozen=True, slots=True)
class _Kwarg:
    name: str
    value: ast.Expr
    span: Span


@dataclasses.dataclass(frozen=True, slots=True)
class _Args:
    positional: tuple[ast.Expr, ...]
    keywords: tuple[_Kwarg, ...]


@dataclasses.dataclass(frozen=True, slots=True)
class _Outputs:
    items: tuple[ast.OutputPattern, ...]
    is_open: bool
    span: Span


@dataclasses.dataclass(frozen=True, slots=True)
class _AsName:
    name: str
    span: Span


@dataclasses.dataclass(frozen=True, slots=True)
class _RhsExpr:
    expr: ast.Expr
    as_name: _AsName | None


@dataclasses.dataclass(frozen=True, slots=True)
class _RhsNode:
    callee: ast.Expr
    attrs: tuple[ast.AttrEntry | ast.AttrCopy, ...]
    args: _Args
    as_name: _AsName | None


@dataclasses.dataclass(frozen=True, slots=True)
class _Option:
    name: str
    value: ast.Expr
    name_span: Span


@v_args(meta=True)
class AstBuilder(Transformer_NonRecursive[Token, tuple[ast.Item, ...]]):
    """Turns a parse tree of one file into an `ast.File`."""

    def __init__(self, path: str) -> None:
        super().__init__()
        self.path = path
        # Nesting depth of each expression built so far, by id (leaves are absent: depth 1).
        self._depths: dict[int, int] = {}

    # -- helpers -------------------------------------------------------------------------------

    def _span(self, meta: Meta) -> Span:
        if getattr(meta, "empty", True):
            return Span(self.path, 1, 1, 1, 1)
        return Span(self.path, meta.line, meta.column, meta.end_line, meta.end_column)

    def _tok(self, token: Token) -> Span:
        return token_span(self.path, token)

    def _nested(self, expr: _E) -> _E:
        """Record `expr`'s depth; refuse expressions nested deeper than MAX_EXPRESSION_DEPTH."""
        depth = 1 + max((self._depths.get(id(c), 1) for c in walk_children(expr)), default=0)
        if depth > MAX_EXPRESSION_DEPTH:
            raise BuildError(
                expr.span,
                f"this expression nests deeper than {MAX_EXPRESSION_DEPTH} levels; "
                "split it with `let`",
            )
        self._depths[id(expr)] = depth
        return expr

    # -- declarations --------------------------------------------------------------------------

    def start(self, meta: Meta, children: list[Any]) -> tuple[ast.Item, ...]:
        return tuple(children)

    def use_decl(self, meta: Meta, children: list[Token]) -> ast.UseDecl:
        return ast.UseDecl(self._string(children[0]), span=self._span(meta))

    def pass_decl(self, meta: Meta, children: list[Any]) -> ast.PassDecl:
        name = str(children[0])
        options: tuple[_Option, ...] = children[1] if len(children) > 1 else ()
        return ast.PassDecl(
            name,
            tuple((o.name, o.value) for o in options),
            option_spans=tuple(o.name_span for o in options),
            span=self._span(meta),
        )

    def pass_options(self, meta: Meta, children: list[Any]) -> tuple[_Option, ...]:
        return tuple(c for c in children if isinstance(c, _Option))

    def pass_option(self, meta: Meta, children: list[Any]) -> _Option:
        return _Option(str(children[0]), children[1], self._tok(children[0]))

    def rule(self, meta: Meta, children: list[Any]) -> ast.Rule:
        name_token: Token = children[0]
        options = children[1:-1]
        body: ast.Rule = children[-1]
        priority: int | None = None
        requires: list[ast.Requirement] = []
        for kind, value, span in options:
            if kind == "priority":
                if priority is not None:
                    raise BuildError(span, "`priority` is given twice")
                priority = value
            else:
                requires.extend(value)
        return dataclasses.replace(
            body,
            name=str(name_token),
            priority=priority or 0,
            requires=tuple(requires),
            name_span=self._tok(name_token),
            span=self._span(meta),
        )

    def priority(self, meta: Meta, children: list[Any]) -> tuple[str, int, Span]:
        return ("priority", children[0], self._span(meta))

    def signed_int(self, meta: Meta, children: list[Token]) -> int:
        value = int(children[-1])
        return -value if len(children) == 2 else value

    def requires(self, meta: Meta, children: list[Any]) -> tuple[str, tuple[Any, ...], Span]:
        return ("requires", tuple(children), self._span(meta))

    def requirement(self, meta: Meta, children: list[Any]) -> ast.Requirement:
        what: Token = children[0]
        if str(what) != "opset":
            raise BuildError(self._tok(what), f"expected `opset` in `requires`, found `{what}`")
        domain = children[1] if len(children) == 4 else ""
        op_span, op = children[-2]
        if op not in _REQUIRE_OPS:
            raise BuildError(op_span, f"`requires` compares with >=, >, <=, < or ==, not `{op}`")
        return ast.Requirement(domain, op, int(children[-1]), span=self._span(meta))

    def dotted_name(self, meta: Meta, children: list[Token]) -> str:
        return ".".join(str(c) for c in children)

    def comp_op(self, meta: Meta, children: list[Token]) -> tuple[Span, str]:
        return (self._span(meta), " ".join(str(c) for c in children))

    # -- rule bodies ---------------------------------------------------------------------------

    def line_body(self, meta: Meta, children: list[Any]) -> ast.Rule:
        pattern: ast.NodePattern = children[0]
        stmt: ast.RewriteStmt = children[1]
        rule = ast.Rule(
            name="",
            match=ast.MatchBlock((pattern,), span=pattern.span),
            where=(),
            rewrite=ast.RewriteBlock((stmt,), span=stmt.span),
            one_line=True,
        )
        if len(children) > 2:
            where: _Section = children[2]
            rule = dataclasses.replace(rule, where=where.value, where_span=where.span)
        return rule

    def where_clause(self, meta: Meta, children: list[Any]) -> _Section:
        return _Section("where", (children[0],), self._span(meta))

    def block_body(self, meta: Meta, children: list[_Section]) -> ast.Rule:
        found: dict[str, _Section] = {}
        for section in children:
            if section.kind in found:
                keyword = _keyword_span(section.span, section.kind)
                raise BuildError(
                    keyword, f"a rule has one `{section.kind}` section; this is a second"
                )
            found[section.kind] = section
        start = self._span(meta)
        brace = Span(start.path, start.line, start.col, start.line, start.col + 1)
        for required in ("match", "rewrite"):
            if required not in found:
                raise BuildError(brace, f"this rule has no `{required}` section")
        rule = ast.Rule(
            name="", match=found["match"].value, where=(), rewrite=found["rewrite"].value
        )
        where = found.get("where")
        if where is not None:
            rule = dataclasses.replace(rule, where=where.value, where_span=where.span)
        return rule

    def match_section(self, meta: Meta, children: list[Any]) -> _Section:
        span = self._span(meta)
        patterns: tuple[ast.NodePattern, ...] = children[0]
        return _Section("match", ast.MatchBlock(patterns, span=span), span)

    def repeat_section(self, meta: Meta, children: list[Any]) -> _Section:
        count_var, (op_span, count_op), count, from_var, to_var, body = children
        if count_op not in _REPEAT_OPS:
            raise BuildError(
                op_span, f"`repeat` compares with >=, >, ==, <= or <, not `{count_op}`"
            )
        span = self._span(meta)
        repeat = ast.RepeatPattern(
            str(count_var),
            count_op,
            int(count),
            str(from_var),
            str(to_var),
            body,
            span=span,
        )
        return _Section("match", ast.MatchBlock((), repeat=repeat, span=span), span)

    def match_block(
        self, meta: Meta, children: list[ast.NodePattern]
    ) -> tuple[ast.NodePattern, ...]:
        return tuple(children)

    def where_section(self, meta: Meta, children: list[ast.Expr]) -> _Section:
        return _Section("where", tuple(children), self._span(meta))

    def rewrite_section(self, meta: Meta, children: list[ast.RewriteStmt]) -> _Section:
        span = self._span(meta)
        return _Section("rewrite", ast.RewriteBlock(tuple(children), span=span), span)

    def rewrite_loop(self, meta: Meta, children: list[Any]) -> _Section:
        span = self._span(meta)
        return _Section("rewrite", ast.RewriteLoop(span=span), span)

    # -- match lines ---------------------------------------------------------------------------

    def match_line(self, meta: Meta, children: list[Any]) -> ast.NodePattern:
        outputs: _Outputs = children[0]
        op: ast.OpPattern = children[1]
        attrs: tuple[ast.AttrEntry | ast.AttrCopy, ...] = ()
        inputs: tuple[ast.InputPattern, ...] = ()
        as_name: str | None = None
        for child in children[2:]:
            if isinstance(child, _AsName):
                as_name = child.name
            elif isinstance(child, _InputList):
                inputs = child.items
            else:
                attrs = child
        return ast.NodePattern(
            outputs.items,
            op,
            attrs,
            inputs,
            as_name=as_name,
            outputs_open=outputs.is_open,
            span=self._span(meta),
        )

    def as_name(self, meta: Meta, children: list[Token]) -> _AsName:
        return _AsName(str(children[0]), self._tok(children[0]))

    def match_outputs(self, meta: Meta, children: list[Any]) -> _Outputs:
        items = tuple(c for c in children if not isinstance(c, Token))
        is_open = any(isinstance(c, Token) and c.type == "ELLIPSIS" for c in children)
        return _Outputs(items, is_open, self._span(meta))

    def rw_outputs(self, meta: Meta, children: list[ast.OutputPattern]) -> _Outputs:
        return _Outputs(tuple(children), False, self._span(meta))

    def out_name(self, meta: Meta, children: list[Token]) -> ast.OutputVar:
        return ast.OutputVar(str(children[0]), span=self._span(meta))

    def out_any(self, meta: Meta, children: list[Any]) -> ast.Wildcard:
        return ast.Wildcard(span=self._span(meta))

    def any_op(self, meta: Meta, children: list[Any]) -> ast.OpPattern:
        return ast.OpPattern((), span=self._span(meta))

    def op_pattern(self, meta: Meta, children: list[ast.OpRef]) -> ast.OpPattern:
        return ast.OpPattern(tuple(children), span=self._span(meta))

    def op_ref(self, meta: Meta, children: list[Token]) -> ast.OpRef:
        parts = [str(c) for c in children]
        return ast.OpRef(".".join(parts[:-1]), parts[-1], span=self._span(meta))

    def match_attrs(
        self, meta: Meta, children: list[Any]
    ) -> tuple[ast.AttrEntry | ast.AttrCopy, ...]:
        return tuple(c for c in children if not isinstance(c, Token))

    rw_attrs = match_attrs

    def attr_rest(self, meta: Meta, children: list[Any]) -> ast.AttrCopy:
        return ast.AttrCopy(None, span=self._span(meta))

    def attr_copy(self, meta: Meta, children: list[Token]) -> ast.AttrCopy:
        source = str(children[1]) if len(children) > 1 else None
        return ast.AttrCopy(source, span=self._span(meta))

    def attr_entry(self, meta: Meta, children: list[Any]) -> ast.AttrEntry:
        return ast.AttrEntry(str(children[0]), children[1], span=self._span(meta))

    def match_inputs(self, meta: Meta, children: list[ast.InputPattern]) -> _InputList:
        return _InputList(tuple(children))

    def in_var(self, meta: Meta, children: list[Token]) -> ast.InputVar:
        return ast.InputVar(str(children[0]), span=self._span(meta))

    def in_optional(self, meta: Meta, children: list[Token]) -> ast.InputVar:
        return ast.InputVar(str(children[0]), optional=True, span=self._span(meta))

    def in_variadic(self, meta: Meta, children: list[Token]) -> ast.InputVar:
        return ast.InputVar(str(children[0]), variadic=True, span=self._span(meta))

    def in_any(self, meta: Meta, children: list[Any]) -> ast.Wildcard:
        return ast.Wildcard(span=self._span(meta))

    def in_literal(self, meta: Meta, children: list[ast.Expr]) -> ast.InputLiteral:
        return ast.InputLiteral(children[0], span=self._span(meta))

    # -- rewrite lines -------------------------------------------------------------------------

    def let_stmt(self, meta: Meta, children: list[Any]) -> ast.LetStmt:
        return ast.LetStmt(str(children[0]), children[1], span=self._span(meta))

    def rw_assign(self, meta: Meta, children: list[Any]) -> ast.RewriteStmt:
        outputs: _Outputs = children[0]
        rhs: _RhsExpr | _RhsNode = children[1]
        span = self._span(meta)
        if isinstance(rhs, _RhsNode):
            op = _op_from_callee(rhs.callee)
            return self._node_stmt(outputs, op, rhs.attrs, rhs.args, rhs.as_name, span)
        if isinstance(rhs.expr, ast.Call) and is_op_name(rhs.expr.func):
            call = rhs.expr
            op = ast.OpRef(*_split_op(call.func), span=_name_span(call.span, call.func))
            args = _Args(call.args, tuple(_Kwarg(k, v, v.span) for k, v in call.kwargs))
            return self._node_stmt(outputs, op, (), args, rhs.as_name, span)
        return _alias(outputs, rhs, span)

    def _node_stmt(
        self,
        outputs: _Outputs,
        op: ast.OpRef,
        attrs: tuple[ast.AttrEntry | ast.AttrCopy, ...],
        args: _Args,
        as_name: _AsName | None,
        span: Span,
    ) -> ast.NodeStmt:
        if args.keywords:
            first = args.keywords[0]
            raise BuildError(
                first.span,
                f"node inputs are positional; `{first.name} = ...` looks like an attribute: "
                "put it in `<...>` after the op name",
            )
        return ast.NodeStmt(
            outputs.items,
            op,
            attrs,
            args.positional,
            as_name=as_name.name if as_name else None,
            span=span,
        )

    def rhs_expr(self, meta: Meta, children: list[Any]) -> _RhsExpr:
        as_name = children[1] if len(children) > 1 else None
        return _RhsExpr(children[0], as_name)

    def rhs_node(self, meta: Meta, children: list[Any]) -> _RhsNode:
        callee, attrs = children[0], children[1]
        args = _Args((), ())
        as_name = None
        for child in children[2:]:
            if isinstance(child, _Args):
                args = child
            else:
                as_name = child
        return _RhsNode(callee, attrs, args, as_name)

    # -- expressions ---------------------------------------------------------------------------

    def conditional(self, meta: Meta, children: list[ast.Expr]) -> ast.Conditional:
        then, cond, otherwise = children
        return self._nested(ast.Conditional(cond, then, otherwise, span=self._span(meta)))

    def or_op(self, meta: Meta, children: list[ast.Expr]) -> ast.BoolOp:
        return self._nested(ast.BoolOp("or", children[0], children[1], span=self._span(meta)))

    def and_op(self, meta: Meta, children: list[ast.Expr]) -> ast.BoolOp:
        return self._nested(ast.BoolOp("and", children[0], children[1], span=self._span(meta)))

    def not_op(self, meta: Meta, children: list[ast.Expr]) -> ast.Unary:
        return self._nested(ast.Unary("not", children[0], span=self._span(meta)))

    def compare(self, meta: Meta, children: list[Any]) -> ast.Compare:
        left, (_, op), right = children
        return self._nested(ast.Compare(op, left, right, span=self._span(meta)))

    def coalesce(self, meta: Meta, children: list[ast.Expr]) -> ast.Coalesce:
        return self._nested(ast.Coalesce(children[0], children[1], span=self._span(meta)))

    def binary(self, meta: Meta, children: list[Any]) -> ast.Binary:
        left, op, right = children
        return self._nested(ast.Binary(str(op), left, right, span=self._span(meta)))

    def unary(self, meta: Meta, children: list[Any]) -> ast.Expr:
        op, operand = str(children[0]), children[1]
        span = self._span(meta)
        if isinstance(operand, ast.Const) and _is_number(operand.value):
            number = operand.value
            assert isinstance(number, int | float), "checked by _is_number"
            return ast.Const(-number if op == "-" else number, span=span)
        return self._nested(ast.Unary(op, operand, span=span))

    def call(self, meta: Meta, children: list[Any]) -> ast.Call:
        callee: ast.Expr = children[0]
        args: _Args = children[1] if len(children) > 1 else _Args((), ())
        func = _dotted(callee)
        if func is None:
            raise BuildError(callee.span, "only a named function can be called")
        call = ast.Call(
            func,
            args.positional,
            tuple((k.name, k.value) for k in args.keywords),
            span=self._span(meta),
        )
        return self._nested(call)

    def call_args(self, meta: Meta, children: list[Any]) -> _Args:
        positional: list[ast.Expr] = []
        keywords: list[_Kwarg] = []
        for child in children:
            if isinstance(child, Token):
                continue
            if isinstance(child, _Kwarg):
                if any(k.name == child.name for k in keywords):
                    raise BuildError(child.span, f"keyword argument `{child.name}` is repeated")
                keywords.append(child)
            elif keywords:
                raise BuildError(child.span, "a positional argument follows a keyword argument")
            else:
                positional.append(child)
        return _Args(tuple(positional), tuple(keywords))

    def kwarg(self, meta: Meta, children: list[Any]) -> _Kwarg:
        return _Kwarg(str(children[0]), children[1], self._tok(children[0]))

    def getattr(self, meta: Meta, children: list[Any]) -> ast.Attribute:
        return self._nested(ast.Attribute(children[0], str(children[1]), span=self._span(meta)))

    def index(self, meta: Meta, children: list[Any]) -> ast.Index:
        return self._nested(ast.Index(children[0], children[1], span=self._span(meta)))

    def slice(self, meta: Meta, children: list[Any]) -> ast.Slice:
        parts: list[ast.Expr | None] = [None, None, None]
        position = 0
        for child in children:
            if isinstance(child, Token) and child.type == "COLON":
                position += 1
            else:
                parts[position] = child
        return self._nested(ast.Slice(parts[0], parts[1], parts[2], span=self._span(meta)))

    def name(self, meta: Meta, children: list[Token]) -> ast.Name:
        return ast.Name(str(children[0]), span=self._span(meta))

    def int(self, meta: Meta, children: list[Token]) -> ast.Const:
        return ast.Const(int(children[0]), span=self._span(meta))

    def float(self, meta: Meta, children: list[Token]) -> ast.Const:
        value = float(children[0])
        if math.isinf(value):
            raise BuildError(self._span(meta), f"number `{children[0]}` is too large")
        return ast.Const(value, span=self._span(meta))

    def string(self, meta: Meta, children: list[Token]) -> ast.Const:
        return ast.Const(self._string(children[0]), span=self._span(meta))

    def true(self, meta: Meta, children: list[Any]) -> ast.Const:
        return ast.Const(True, span=self._span(meta))

    def false(self, meta: Meta, children: list[Any]) -> ast.Const:
        return ast.Const(False, span=self._span(meta))

    def none(self, meta: Meta, children: list[Any]) -> ast.Const:
        return ast.Const(None, span=self._span(meta))

    def list(self, meta: Meta, children: list[Any]) -> ast.ListExpr:
        items = tuple(c for c in children if not isinstance(c, Token))
        return self._nested(ast.ListExpr(items, span=self._span(meta)))

    def _string(self, token: Token) -> str:
        return decode_string(str(token), self._tok(token))


@dataclasses.dataclass(frozen=True, slots=True)
class _InputList:
    items: tuple[ast.InputPattern, ...]


def decode_string(literal: str, span: Span) -> str:
    """The value of a string literal `"..."` (with its quotes); raises on unknown escapes."""
    body = literal[1:-1]
    out: list[str] = []
    index = 0
    while index < len(body):
        char = body[index]
        if char != "\\":
            out.append(char)
            index += 1
            continue
        escaped = body[index + 1]
        if escaped not in _ESCAPES:
            col = span.col + 1 + index
            where = Span(span.path, span.line, col, span.line, col + 2)
            raise BuildError(
                where, f'unknown escape `\\{escaped}` in string; use \\\\ \\" \\n \\t \\r or \\0'
            )
        out.append(_ESCAPES[escaped])
        index += 2
    return "".join(out)


def is_op_name(callee: str) -> bool:
    """True when `y = callee(...)` in a rewrite creates a node rather than calling a function.

    ONNX op names start with a capital letter and custom-domain ops are written with their
    domain, while built-in and helper functions are lower case: `y = Relu(x)` and
    `y = com.microsoft.Gelu(x)` are nodes, `y = const(shape(x), "int64")` is an alias of a
    computed value.
    """
    return "." in callee or callee[:1].isupper()


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _dotted(expr: ast.Expr) -> str | None:
    """`a.b.c` for a Name or a chain of attribute accesses on a Name, else None."""
    if isinstance(expr, ast.Name):
        return expr.name
    if isinstance(expr, ast.Attribute):
        base = _dotted(expr.obj)
        return None if base is None else f"{base}.{expr.name}"
    return None


def _split_op(dotted: str) -> tuple[str, str]:
    domain, _, op_type = dotted.rpartition(".")
    return domain, op_type


def _name_span(start: Span, name: str) -> Span:
    return Span(start.path, start.line, start.col, start.line, start.col + len(name))


def _keyword_span(start: Span, keyword: str) -> Span:
    return _name_span(start, keyword)


def _op_from_callee(callee: ast.Expr) -> ast.OpRef:
    dotted = _dotted(callee)
    if dotted is None:
        raise BuildError(callee.span, "expected an op name before `<`")
    return ast.OpRef(*_split_op(dotted), span=callee.span)


def _alias(outputs: _Outputs, rhs: _RhsExpr, span: Span) -> ast.AliasStmt:
    if rhs.as_name is not None:
        raise BuildError(
            rhs.as_name.span, "`as` names a node, but this line creates none (it is an alias)"
        )
    targets: Sequence[ast.OutputPattern] = outputs.items
    if len(targets) != 1:
        raise BuildError(
            targets[1].span, "an alias `y = x` has one target; a node line has an op and `(...)`"
        )
    target = targets[0]
    if not isinstance(target, ast.OutputVar):
        raise BuildError(target.span, "an alias needs a name on the left, not `_`")
    return ast.AliasStmt(target.name, rhs.expr, span=span)
