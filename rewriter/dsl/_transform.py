"""Build the frozen AST (`rewriter.dsl._ast`) from Lark's parse tree.

A separate, non-recursive `Transformer` (not `Lark(transformer=...)`, which would lose the
positions) turns each tree into AST nodes, each with the `Span` of the text it came from.
Constructs that the grammar accepts but the language does not (a `priority` given twice, a
keyword argument as a node input, an unknown string escape) raise `LocatedError`, which the
parser turns into a located syntax diagnostic. Intermediate values that never reach the AST
(sections, argument lists) are private dataclasses of this module.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from lark import Token, Transformer_NonRecursive, Tree
from lark.tree import Meta

from rewriter._errors import Span
from rewriter.dsl import _ast as ast
from rewriter.dsl._located import LocatedError
from rewriter.dsl._postlex import token_span
from rewriter.dsl._precedence import build_chain
from rewriter.rules import children as walk_children

MAX_EXPRESSION_DEPTH = 100
"""Deepest expression nesting accepted (evaluation and printing recurse over expressions)."""

INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1
"""Integer literals must fit in int64: ONNX stores integers (attributes, tensors) that way."""

_E = TypeVar("_E", bound=ast.Expr | ast.Slice)

_ESCAPES = {"\\": "\\", '"': '"', "n": "\n", "t": "\t", "r": "\r", "0": "\0"}
_REPEAT_OPS = frozenset({">=", ">", "==", "<=", "<"})
_REQUIRE_OPS = frozenset({">=", ">", "==", "<=", "<"})


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
class _Outputs:
    items: tuple[ast.OutputPattern, ...]
    is_open: bool


@dataclasses.dataclass(frozen=True, slots=True)
class _Attrs:
    items: tuple[ast.AttrEntry | ast.AttrCopy, ...]


@dataclasses.dataclass(frozen=True, slots=True)
class _Inputs:
    items: tuple[ast.InputPattern, ...]


@dataclasses.dataclass(frozen=True, slots=True)
class _Option:
    name: str
    value: ast.Expr
    name_span: Span


class AstBuilder(Transformer_NonRecursive[Token, tuple[ast.Item, ...]]):
    """Turns a parse tree of one file into an `ast.File`."""

    def __init__(self, path: str, line_offset: int = 0) -> None:
        """A builder for a file at `path`, whose parsed text starts `line_offset` lines in."""
        super().__init__(visit_tokens=False)
        self.path = path
        self.line_offset = line_offset
        # Handlers by rule (or alias) name, called directly by `transform`.
        self._handlers: dict[str, Callable[[Meta, list[Any]], Any]] = {
            name.removeprefix("on_"): getattr(self, name)
            for name in dir(self)
            if name.startswith("on_")
        }
        # Nesting depth of each expression built so far, by id (leaves are absent: depth 1).
        self._depths: dict[int, int] = {}
        # Set when an unsigned literal is 2**63, which fits in int64 only after a `-`.
        self._saw_int64_limit = False

    def transform(self, tree: Tree[Token]) -> tuple[ast.Item, ...]:
        """Build the AST bottom-up, without recursion (parse trees can be deep).

        The same walk as lark's `Transformer_NonRecursive.transform`, but each tree goes
        straight to its handler with its `meta` (lark's per-call lookup and `v_args`
        wrappers cost a fifth of the build).
        """
        order: list[Tree[Token] | Token] = []
        pending: list[Tree[Token] | Token] = [tree]
        while pending:
            node = pending.pop()
            order.append(node)
            if isinstance(node, Tree):
                pending.extend(node.children)
        handlers = self._handlers
        built: list[Any] = []
        for node in reversed(order):
            if not isinstance(node, Tree):
                built.append(node)
                continue
            size = len(node.children)
            children = built[-size:] if size else []
            if size:
                del built[-size:]
            built.append(handlers[node.data](node.meta, children))
        (items,) = built
        assert isinstance(items, tuple), "the start rule builds a tuple of items"
        if self._saw_int64_limit:
            _check_int64_range(items)
        return items

    # -- helpers -------------------------------------------------------------------------------

    def _span(self, meta: Meta) -> Span:
        offset = self.line_offset
        if getattr(meta, "empty", True):
            return Span(self.path, 1 + offset, 1, 1 + offset, 1)
        return Span(
            self.path, meta.line + offset, meta.column, meta.end_line + offset, meta.end_column
        )

    def _tok(self, token: Token) -> Span:
        return token_span(self.path, token, self.line_offset)

    def _nested(self, expr: _E) -> _E:
        """Record `expr`'s depth; refuse expressions nested deeper than MAX_EXPRESSION_DEPTH."""
        depth = 1 + max((self._depths.get(id(c), 1) for c in walk_children(expr)), default=0)
        if depth > MAX_EXPRESSION_DEPTH:
            raise LocatedError(
                expr.span,
                f"this expression nests deeper than {MAX_EXPRESSION_DEPTH} levels; "
                "split it with `let`",
            )
        self._depths[id(expr)] = depth
        return expr

    # -- declarations --------------------------------------------------------------------------

    def on_start(self, meta: Meta, children: list[Any]) -> tuple[ast.Item, ...]:
        return tuple(children)

    def on_use_decl(self, meta: Meta, children: list[Token]) -> ast.UseDecl:
        return ast.UseDecl(self._string(children[0]), span=self._span(meta))

    def on_include_decl(self, meta: Meta, children: list[Token]) -> ast.IncludeDecl:
        string = children[0]
        return ast.IncludeDecl(
            self._string(string), path_span=self._tok(string), span=self._span(meta)
        )

    def on_param_value(self, meta: Meta, children: list[Any]) -> tuple[ast.Expr]:
        return (self._expr(children[0]),)

    def on_param_decl(self, meta: Meta, children: list[Any]) -> ast.ParamDecl:
        name: Token = children[0]
        value = self._expr(children[1])
        return ast.ParamDecl(str(name), value, name_span=self._tok(name), span=self._span(meta))

    def on_constraint_decl(self, meta: Meta, children: list[Any]) -> ast.Constraint:
        name: Token = children[0]
        params: tuple[ast.Param, ...] = children[1]
        conditions: tuple[ast.Expr, ...] = children[2]
        return ast.Constraint(
            str(name), params, conditions, name_span=self._tok(name), span=self._span(meta)
        )

    def on_constraint_params(self, meta: Meta, children: list[Token]) -> tuple[ast.Param, ...]:
        return tuple(
            ast.Param(str(token), span=self._tok(token))
            for token in children
            if token.type == "NAME"
        )

    def on_constraint_body(self, meta: Meta, children: list[Any]) -> tuple[ast.Expr, ...]:
        return tuple(self._expr(child) for child in children)

    def on_pass_decl(self, meta: Meta, children: list[Any]) -> ast.PassDecl:
        name = str(children[0])
        options: tuple[_Option, ...] = children[1] if len(children) > 1 else ()
        return ast.PassDecl(
            name,
            tuple((o.name, o.value) for o in options),
            option_spans=tuple(o.name_span for o in options),
            span=self._span(meta),
        )

    def on_pass_options(self, meta: Meta, children: list[Any]) -> tuple[_Option, ...]:
        return tuple(c for c in children if isinstance(c, _Option))

    def on_pass_option(self, meta: Meta, children: list[Any]) -> _Option:
        return _Option(str(children[0]), self._expr(children[1]), self._tok(children[0]))

    def on_rule(self, meta: Meta, children: list[Any]) -> ast.Rule:
        name_token: Token = children[0]
        options = children[1:-1]
        body: ast.Rule = children[-1]
        priority: int | None = None
        requires: list[ast.Requirement] = []
        assumed: set[str] = set()
        approximate: ast.Approximation | None = None
        for kind, value, span in options:
            if kind == "priority":
                if priority is not None:
                    raise LocatedError(span, "`priority` is given twice")
                priority = value
            elif kind == "assumes":
                for assumption, assumption_span in value:
                    if assumption in assumed:
                        raise LocatedError(
                            assumption_span, f"`assumes {assumption}` is given twice"
                        )
                    assumed.add(assumption)
            elif kind == "approximate":
                if approximate is not None:
                    raise LocatedError(span, "`approximate` is given twice")
                approximate = value
            else:
                requires.extend(value)
        return dataclasses.replace(
            body,
            name=str(name_token),
            priority=priority or 0,
            requires=tuple(requires),
            assumes_finite="finite" in assumed,
            assumes_nonempty="nonempty" in assumed,
            approximate=approximate,
            name_span=self._tok(name_token),
            span=self._span(meta),
        )

    def on_priority(self, meta: Meta, children: list[Any]) -> tuple[str, int, Span]:
        return ("priority", children[0], self._span(meta))

    def on_signed_int(self, meta: Meta, children: list[Token]) -> int:
        if len(children) == 2:
            return -self._integer(children[-1], self._span(meta), sign="-", limit=-INT64_MIN)
        return self._integer(children[-1], self._span(meta))

    def on_assumes(
        self, meta: Meta, children: list[Token]
    ) -> tuple[str, tuple[tuple[str, Span], ...], Span]:
        assumptions = []
        for what in children:
            if str(what) not in ("finite", "nonempty"):
                raise LocatedError(
                    self._tok(what),
                    f"expected `finite` or `nonempty` after `assumes`, found `{what}`",
                )
            assumptions.append((str(what), self._tok(what)))
        return ("assumes", tuple(assumptions), self._span(meta))

    def on_approximate(
        self, meta: Meta, children: list[Any]
    ) -> tuple[str, ast.Approximation, Span]:
        metric, (comparison_span, comparison), number = children
        span = self._span(meta)
        expected = ast.APPROXIMATION_METRICS.get(str(metric))
        if expected is None:
            known = ", ".join(ast.APPROXIMATION_METRICS)
            raise LocatedError(
                self._tok(metric), f"unknown accuracy metric `{metric}` (known: {known})"
            )
        if comparison != expected:
            raise LocatedError(
                comparison_span,
                f"`approximate {metric}` takes `{expected}` (a bound the result must meet)",
            )
        approximation = ast.Approximation(
            str(metric), comparison, float(str(number)), str(number), span
        )
        return ("approximate", approximation, span)

    def on_requires(self, meta: Meta, children: list[Any]) -> tuple[str, tuple[Any, ...], Span]:
        return ("requires", tuple(children), self._span(meta))

    def on_requirement(self, meta: Meta, children: list[Any]) -> ast.Requirement:
        what: Token = children[0]
        if str(what) != "opset":
            raise LocatedError(self._tok(what), f"expected `opset` in `requires`, found `{what}`")
        domain = children[1] if len(children) == 4 else ""
        op_span, op = children[-2]
        if op not in _REQUIRE_OPS:
            raise LocatedError(op_span, f"`requires` compares with >=, >, <=, < or ==, not `{op}`")
        version = self._integer(children[-1], self._tok(children[-1]))
        return ast.Requirement(domain, op, version, span=self._span(meta))

    def on_dotted_name(self, meta: Meta, children: list[Token]) -> str:
        return ".".join(str(c) for c in children)

    def on_comp_op(self, meta: Meta, children: list[Token]) -> tuple[Span, str]:
        return (self._span(meta), " ".join(str(c) for c in children))

    # -- rule bodies ---------------------------------------------------------------------------

    def on_line_body(self, meta: Meta, children: list[Any]) -> ast.Rule:
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

    def on_query(self, meta: Meta, children: list[Any]) -> tuple[ast.Item, ...]:
        patterns = tuple(c for c in children if isinstance(c, ast.NodePattern))
        wheres = [c for c in children if isinstance(c, _Section)]
        span = self._span(meta)
        empty = Span(span.path, span.end_line, span.end_col, span.end_line, span.end_col)
        rule = ast.Rule(
            name="",
            match=ast.MatchBlock(patterns, span=span),
            where=tuple(expr for section in wheres for expr in section.value),
            rewrite=ast.RewriteBlock((), span=empty),
            query=True,
            span=span,
        )
        if wheres:
            first, last = wheres[0].span, wheres[-1].span
            where_span = Span(first.path, first.line, first.col, last.end_line, last.end_col)
            rule = dataclasses.replace(rule, where_span=where_span)
        return (rule,)

    def on_where_clause(self, meta: Meta, children: list[Any]) -> _Section:
        return _Section("where", (self._expr(children[0]),), self._span(meta))

    def on_block_body(self, meta: Meta, children: list[_Section]) -> ast.Rule:
        found: dict[str, _Section] = {}
        for section in children:
            if section.kind in found:
                keyword = _name_span(section.span, section.kind)
                raise LocatedError(
                    keyword, f"a rule has one `{section.kind}` section; this is a second"
                )
            found[section.kind] = section
        start = self._span(meta)
        brace = Span(start.path, start.line, start.col, start.line, start.col + 1)
        for required in ("match", "rewrite"):
            if required not in found:
                raise LocatedError(brace, f"this rule has no `{required}` section")
        rule = ast.Rule(
            name="", match=found["match"].value, where=(), rewrite=found["rewrite"].value
        )
        where = found.get("where")
        if where is not None:
            rule = dataclasses.replace(rule, where=where.value, where_span=where.span)
        return rule

    def on_match_section(self, meta: Meta, children: list[Any]) -> _Section:
        span = self._span(meta)
        patterns: tuple[ast.NodePattern, ...] = children[0]
        return _Section("match", ast.MatchBlock(patterns, span=span), span)

    def on_repeat_section(self, meta: Meta, children: list[Any]) -> _Section:
        count_var, (op_span, count_op), count, from_var, to_var, body = children
        if count_op not in _REPEAT_OPS:
            raise LocatedError(
                op_span, f"`repeat` compares with >=, >, ==, <= or <, not `{count_op}`"
            )
        span = self._span(meta)
        repeat = ast.RepeatPattern(
            str(count_var),
            count_op,
            self._integer(count, self._tok(count)),
            str(from_var),
            str(to_var),
            body,
            span=span,
        )
        return _Section("match", ast.MatchBlock((), repeat=repeat, span=span), span)

    def on_match_block(
        self, meta: Meta, children: list[ast.NodePattern]
    ) -> tuple[ast.NodePattern, ...]:
        return tuple(children)

    def on_where_section(self, meta: Meta, children: list[ast.Expr]) -> _Section:
        return _Section("where", tuple(self._expr(c) for c in children), self._span(meta))

    def on_rewrite_section(self, meta: Meta, children: list[ast.RewriteStmt]) -> _Section:
        span = self._span(meta)
        return _Section("rewrite", ast.RewriteBlock(tuple(children), span=span), span)

    def on_rewrite_loop(self, meta: Meta, children: list[Any]) -> _Section:
        span = self._span(meta)
        return _Section("rewrite", ast.RewriteLoop(span=span), span)

    # -- match lines ---------------------------------------------------------------------------

    def on_match_line(self, meta: Meta, children: list[Any]) -> ast.NodePattern:
        outputs: _Outputs = children[0]
        op: ast.OpPattern = children[1]
        attrs: tuple[ast.AttrEntry | ast.AttrCopy, ...] = ()
        inputs: tuple[ast.InputPattern, ...] = ()
        for child in children[2:]:
            if isinstance(child, _Attrs):
                attrs = child.items
            elif isinstance(child, _Inputs):
                inputs = child.items
        return ast.NodePattern(
            outputs.items,
            op,
            attrs,
            inputs,
            as_name=_as_name(children),
            outputs_open=outputs.is_open,
            span=self._span(meta),
        )

    def on_match_outputs(self, meta: Meta, children: list[Token]) -> _Outputs:
        is_open = children[-1].type == "ELLIPSIS"
        return _Outputs(self._outputs(children), is_open)

    def on_rw_outputs(self, meta: Meta, children: list[Token]) -> _Outputs:
        return _Outputs(self._outputs(children), False)

    def _outputs(self, tokens: list[Token]) -> tuple[ast.OutputPattern, ...]:
        outputs: list[ast.OutputPattern] = []
        for token in tokens:
            if token.type == "NAME":
                outputs.append(ast.OutputVar(str(token), span=self._tok(token)))
            elif token.type == "UNDERSCORE":
                outputs.append(ast.Wildcard(span=self._tok(token)))
        return tuple(outputs)

    def on_op_pattern(self, meta: Meta, children: list[Token]) -> ast.OpPattern:
        refs: list[ast.OpRef] = []
        group: list[Token] = []
        for token in [*children, None]:
            if token is not None and token.type in ("NAME", "DOT"):
                group.append(token)
                continue
            if group:
                refs.append(self._op_ref(group))
                group = []
        return ast.OpPattern(tuple(refs), span=self._span(meta))

    def _op_ref(self, tokens: list[Token]) -> ast.OpRef:
        parts = [str(t) for t in tokens if t.type == "NAME"]
        first, last = self._tok(tokens[0]), self._tok(tokens[-1])
        span = Span(self.path, first.line, first.col, last.end_line, last.end_col)
        return ast.OpRef(".".join(parts[:-1]), parts[-1], span=span)

    def on_match_attrs(self, meta: Meta, children: list[Any]) -> _Attrs:
        return _Attrs(tuple(c for c in children if not isinstance(c, Token)))

    on_rw_attrs = on_match_attrs

    def on_attr_rest(self, meta: Meta, children: list[Any]) -> ast.AttrCopy:
        return ast.AttrCopy(None, span=self._span(meta))

    def on_attr_copy(self, meta: Meta, children: list[Token]) -> ast.AttrCopy:
        source = str(children[1]) if len(children) > 1 else None
        return ast.AttrCopy(source, span=self._span(meta))

    def on_attr_entry(self, meta: Meta, children: list[Any]) -> ast.AttrEntry:
        value = children[1]
        if isinstance(value, Token):
            span = self._tok(value)
            is_none = value.type == "NONE"
            value = ast.Const(None, span=span) if is_none else ast.Name(str(value), span=span)
        return ast.AttrEntry(str(children[0]), value, span=self._span(meta))

    def on_match_inputs(self, meta: Meta, children: list[Any]) -> _Inputs:
        inputs: list[ast.InputPattern] = []
        for child in children:
            if not isinstance(child, Token):
                inputs.append(ast.InputLiteral(child, span=child.span))
            elif child.type == "NAME":
                inputs.append(ast.InputVar(str(child), span=self._tok(child)))
            elif child.type == "UNDERSCORE":
                inputs.append(ast.Wildcard(span=self._tok(child)))
            elif child.type in ("QMARK", "ELLIPSIS"):
                inputs[-1] = self._suffixed(inputs[-1], child)
        return _Inputs(tuple(inputs))

    def _suffixed(self, item: ast.InputPattern, suffix: Token) -> ast.InputVar:
        assert isinstance(item, ast.InputVar), "the grammar puts `?` and `...` after a name"
        end = self._tok(suffix)
        span = Span(self.path, item.span.line, item.span.col, end.end_line, end.end_col)
        if suffix.type == "QMARK":
            return ast.InputVar(item.name, optional=True, span=span)
        return ast.InputVar(item.name, variadic=True, span=span)

    def on_signed(self, meta: Meta, children: list[Token]) -> ast.Const:
        sign, digits = children
        negative = str(sign) == "-"
        value: int | float
        if digits.type == "INT":
            limit = -INT64_MIN if negative else INT64_MAX
            value = self._integer(digits, self._span(meta), sign=str(sign), limit=limit)
        else:
            value = self._float(digits, meta)
        return ast.Const(-value if negative else value, str(digits), span=self._span(meta))

    # -- rewrite lines -------------------------------------------------------------------------

    def on_let_stmt(self, meta: Meta, children: list[Any]) -> ast.LetStmt:
        return ast.LetStmt(str(children[0]), self._expr(children[1]), span=self._span(meta))

    def on_rw_assign(self, meta: Meta, children: list[Any]) -> ast.RewriteStmt:
        outputs: _Outputs = children[0]
        span = self._span(meta)
        as_name = _as_name(children)
        as_token = _as_token(children)
        end = len(children) - 2 if as_token is not None else len(children)
        first = children[1]
        if isinstance(first, Token) and first.type == "ELLIPSIS":
            copied = children[2]
            start, end_at = self._tok(first), self._tok(copied)
            copy_span = Span(self.path, start.line, start.col, end_at.end_line, end_at.end_col)
            rest = [self._expr(c) for c in children[3:end]]
            attrs = rest.pop(0).items if rest and isinstance(rest[0], _Attrs) else ()
            copy = ast.NodeCopy(str(copied), span=copy_span)
            return self._node_stmt(outputs, copy, attrs, rest, as_name, span)
        body = [self._expr(c) for c in children[1:end]]
        if len(body) > 1 and isinstance(body[1], _Attrs):
            op = _op_from_callee(body[0])
            return self._node_stmt(outputs, op, body[1].items, body[2:], as_name, span)
        expr: ast.Expr = body[0]
        if isinstance(expr, ast.Call) and is_op_name(expr.func):
            op = ast.OpRef(*_split_op(expr.func), span=_name_span(expr.span, expr.func))
            args = [*expr.args, *(_Kwarg(k, v, v.span) for k, v in expr.kwargs)]
            return self._node_stmt(outputs, op, (), args, as_name, span)
        if as_token is not None:
            message = "`as` names a node, but this line creates none (it is an alias)"
            raise LocatedError(self._tok(children[-1]), message)
        return _alias(outputs, expr, span)

    def _node_stmt(
        self,
        outputs: _Outputs,
        op: ast.OpRef | ast.NodeCopy,
        attrs: tuple[ast.AttrEntry | ast.AttrCopy, ...],
        args: Sequence[ast.Expr | _Kwarg],
        as_name: str | None,
        span: Span,
    ) -> ast.NodeStmt:
        inputs: list[ast.Expr] = []
        for arg in args:
            if isinstance(arg, _Kwarg):
                raise LocatedError(
                    arg.span,
                    f"node inputs are positional; `{arg.name} = ...` looks like an attribute: "
                    "put it in `<...>` after the op name",
                )
            inputs.append(arg)
        return ast.NodeStmt(outputs.items, op, attrs, tuple(inputs), as_name=as_name, span=span)

    # -- expressions ---------------------------------------------------------------------------

    def on_expr(self, meta: Meta, children: list[Any]) -> ast.Expr:
        """A chain, maybe followed by `if COND else OTHERWISE`."""
        for position, child in enumerate(children):
            if isinstance(child, Token) and child.type == "IF":
                then = self._chain(children[:position])
                cond = self._expr(children[position + 1])
                otherwise = self._expr(children[position + 3])
                return self._nested(ast.Conditional(cond, then, otherwise, span=self._span(meta)))
        return self._chain(children)

    def on_chain(self, meta: Meta, children: list[Token | ast.Expr]) -> ast.Expr:
        return self._chain(children)

    on_arith_chain = on_chain

    def _chain(self, items: list[Token | ast.Expr]) -> ast.Expr:
        operands: list[Token | ast.Expr] = [self._expr(item) for item in items]
        if len(operands) == 1:
            only = operands[0]
            assert not isinstance(only, Token), "a one-item chain is an operand"
            return only
        return build_chain(operands, self._tok, self._nested, MAX_EXPRESSION_DEPTH)

    def _expr(self, item: Any) -> Any:
        """`item`, with a bare NAME token (a variable, left without a tree) made a Name."""
        if isinstance(item, Token) and item.type == "NAME":
            return ast.Name(str(item), span=self._tok(item))
        return item

    def on_call(self, meta: Meta, children: list[Any]) -> ast.Call:
        callee: ast.Expr = self._expr(children[0])
        func = _dotted(callee)
        if func is None:
            raise LocatedError(callee.span, "only a named function can be called")
        positional: list[ast.Expr] = []
        keywords: list[_Kwarg] = []
        for child in map(self._expr, children[1:]):
            if isinstance(child, Token):
                continue
            if isinstance(child, _Kwarg):
                if any(k.name == child.name for k in keywords):
                    raise LocatedError(child.span, f"keyword argument `{child.name}` is repeated")
                keywords.append(child)
            elif keywords:
                raise LocatedError(child.span, "a positional argument follows a keyword argument")
            else:
                positional.append(child)
        call = ast.Call(
            func,
            tuple(positional),
            tuple((k.name, k.value) for k in keywords),
            span=self._span(meta),
        )
        return self._nested(call)

    def on_kwarg(self, meta: Meta, children: list[Any]) -> _Kwarg:
        return _Kwarg(str(children[0]), self._expr(children[1]), self._tok(children[0]))

    def on_getattr(self, meta: Meta, children: list[Any]) -> ast.Attribute:
        obj = self._expr(children[0])
        return self._nested(ast.Attribute(obj, str(children[1]), span=self._span(meta)))

    def on_index(self, meta: Meta, children: list[Any]) -> ast.Index:
        obj, index = self._expr(children[0]), self._expr(children[1])
        return self._nested(ast.Index(obj, index, span=self._span(meta)))

    def on_slice(self, meta: Meta, children: list[Any]) -> ast.Slice:
        parts: list[ast.Expr | None] = [None, None, None]
        position = 0
        for child in children:
            if isinstance(child, Token) and child.type == "COLON":
                position += 1
            else:
                parts[position] = self._expr(child)
        return self._nested(ast.Slice(parts[0], parts[1], parts[2], span=self._span(meta)))

    def on_int(self, meta: Meta, children: list[Token]) -> ast.Const:
        # A `-` in front may still make 2**63 fit (folded in `build_chain`); `transform`
        # checks what is left of such literals once the whole file is built.
        token = children[0]
        value = self._integer(token, self._span(meta), limit=-INT64_MIN)
        if value > INT64_MAX:
            self._saw_int64_limit = True
        return ast.Const(value, str(token), span=self._span(meta))

    def on_float(self, meta: Meta, children: list[Token]) -> ast.Const:
        token = children[0]
        return ast.Const(self._float(token, meta), str(token), span=self._span(meta))

    def _integer(self, token: Token, span: Span, *, sign: str = "", limit: int = INT64_MAX) -> int:
        """The value of the INT `token`, refused (at `span`) when it is above `limit`.

        `sign` is the sign written in front, for the message. The digits are counted before
        converting, so a huge literal costs nothing (and never meets Python's limit on
        int-from-string conversion).
        """
        digits = str(token).lstrip("0") or "0"
        if len(digits) > len(str(limit)) or int(digits) > limit:
            raise LocatedError(span, _int64_message(sign + digits))
        return int(digits)

    def _float(self, token: Token, meta: Meta) -> float:
        value = float(token)
        if math.isinf(value):
            raise LocatedError(self._span(meta), f"number `{token}` is too large")
        return value

    def on_string(self, meta: Meta, children: list[Token]) -> ast.Const:
        return ast.Const(self._string(children[0]), span=self._span(meta))

    def on_true(self, meta: Meta, children: list[Any]) -> ast.Const:
        return ast.Const(True, span=self._span(meta))

    def on_false(self, meta: Meta, children: list[Any]) -> ast.Const:
        return ast.Const(False, span=self._span(meta))

    def on_none(self, meta: Meta, children: list[Any]) -> ast.Const:
        return ast.Const(None, span=self._span(meta))

    def on_list(self, meta: Meta, children: list[Any]) -> ast.ListExpr:
        items = tuple(self._expr(c) for c in children if not _is_punctuation(c))
        return self._nested(ast.ListExpr(items, span=self._span(meta)))

    def _string(self, token: Token) -> str:
        return decode_string(str(token), self._tok(token))


def _int64_message(literal: str) -> str:
    shown = literal if len(literal) <= 40 else literal[:20] + "..." + literal[-4:]
    return f"integer `{shown}` is outside the int64 range [{INT64_MIN}, {INT64_MAX}]"


def _check_int64_range(items: tuple[ast.Item, ...]) -> None:
    """Refuse the first (in source order) integer constant outside int64.

    Only 2**63 written without a sign (or with two) gets this far: every other literal out
    of range is refused as it is read.
    """
    stack: list[object] = list(items)
    bad: list[ast.Const] = []
    while stack:
        node = stack.pop()
        if isinstance(node, tuple):
            stack.extend(node)
        elif isinstance(node, ast.Const):
            value = node.value
            if isinstance(value, int) and not isinstance(value, bool) and value > INT64_MAX:
                bad.append(node)
        elif dataclasses.is_dataclass(node) and not isinstance(node, Span):
            stack.extend(getattr(node, field.name) for field in dataclasses.fields(node))
    if bad:
        first = min(bad, key=lambda const: (const.span.line, const.span.col))
        raise LocatedError(first.span, _int64_message(str(first.value)))


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
            raise LocatedError(
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


def _op_from_callee(callee: ast.Expr) -> ast.OpRef:
    dotted = _dotted(callee)
    if dotted is None:
        raise LocatedError(callee.span, "expected an op name before `<`")
    return ast.OpRef(*_split_op(dotted), span=callee.span)


def _is_punctuation(item: Any) -> bool:
    return isinstance(item, Token) and item.type != "NAME"


def _as_name(children: list[Any]) -> str | None:
    """The name after `as` at the end of a node line's children, if any."""
    token = _as_token(children)
    return str(children[-1]) if token is not None else None


def _as_token(children: list[Any]) -> Token | None:
    if len(children) >= 2 and isinstance(children[-2], Token) and children[-2].type == "AS":
        token: Token = children[-2]
        return token
    return None


def _alias(outputs: _Outputs, source: ast.Expr, span: Span) -> ast.AliasStmt:
    targets: Sequence[ast.OutputPattern] = outputs.items
    if len(targets) != 1:
        raise LocatedError(
            targets[1].span, "an alias `y = x` has one target; a node line has an op and `(...)`"
        )
    target = targets[0]
    if not isinstance(target, ast.OutputVar):
        raise LocatedError(target.span, "an alias needs a name on the left, not `_`")
    return ast.AliasStmt(target.name, source, span=span)
