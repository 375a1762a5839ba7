"""Lowering: each checked rule of the syntax tree becomes a rule of the rule IR, once.

What changes on the way: literals in patterns (`Mul (x, 1.0)`, `<axis = -1>`) become Python
values; an attribute entry becomes a binding or a required value; ops get their normalized
domain; a call of a named constraint becomes a `ConstraintCall` that holds the (lowered)
constraint, so a rule needs nothing else to be evaluated; a rule parameter read by name
becomes its value for this load (`param`); pass options become integers.
Formatting details (comments, the one-line form, the spelling of keywords) stay behind.
Lowering runs after the checks, so what it reads is known to be well formed.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

import ir
from rewriter import rules
from rewriter._errors import Span
from rewriter.dsl import _ast as ast


class Lowering:
    """Lowers the rules of checked files; named constraints are lowered once each."""

    def __init__(
        self,
        constraints: Mapping[str, ast.Constraint],
        params: Mapping[str, rules.LiteralValue] | None = None,
    ) -> None:
        self._syntax = dict(constraints)
        self._lowered: dict[str, rules.Constraint] = {}
        self._params = {name: _literal_expr(value) for name, value in (params or {}).items()}

    def rule(self, rule: ast.Rule) -> rules.Rule:
        """The rule IR of one checked rule."""
        repeat = rule.match.repeat
        pattern = rules.Pattern(
            tuple(self._node_pattern(line) for line in rule.match.patterns),
            None if repeat is None else self._repeat(repeat),
            span=rule.match.span,
        )
        assumes: list[rules.Assumption] = []
        if rule.assumes_finite:
            assumes.append("finite")
        if rule.assumes_nonempty:
            assumes.append("nonempty")
        return rules.Rule(
            name=rule.name,
            pattern=pattern,
            conditions=tuple(self._rule_expr(condition) for condition in rule.where),
            rewrite=None if rule.query else self._rewrite(rule.rewrite),
            priority=rule.priority,
            requires=rule.requires,
            assumes=tuple(assumes),
            approximate=rule.approximate,
            span=rule.span,
        )

    def expr(self, expr: rules.Expr, params: Mapping[str, rules.Expr] | None = None) -> rules.Expr:
        """`expr` with every call of a named constraint resolved to the constraint.

        With `params`, a variable named like a rule parameter becomes its value.
        """
        values = params or {}

        def resolve(node: rules.Expr | rules.Slice) -> rules.Expr | rules.Slice:
            if isinstance(node, rules.Name) and node.name in values:
                return _spanned(values[node.name], node.span)
            node = rules.rebuild(node, resolve)
            if isinstance(node, rules.Call) and node.func in self._syntax and not node.kwargs:
                return rules.ConstraintCall(self.constraint(node.func), node.args, span=node.span)
            return node

        lowered = resolve(expr)
        assert not isinstance(lowered, rules.Slice), "a slice only appears inside an index"
        return lowered

    def _rule_expr(self, expr: rules.Expr) -> rules.Expr:
        """An expression of a rule: constraint calls resolved, rule parameters substituted."""
        return self.expr(expr, self._params)

    def constraint(self, name: str) -> rules.Constraint:
        """The lowered named constraint `name` (the checks refused recursive ones)."""
        found = self._lowered.get(name)
        if found is None:
            syntax = self._syntax[name]
            found = rules.Constraint(
                syntax.name,
                syntax.param_names,
                tuple(self.expr(condition) for condition in syntax.conditions),
                span=syntax.span,
            )
            self._lowered[name] = found
        return found

    # patterns --------------------------------------------------------------------------------
    def _node_pattern(self, line: ast.NodePattern) -> rules.NodePattern:
        return rules.NodePattern(
            outputs=tuple(_output(o) for o in line.outputs),
            ops=tuple(_op(ref) for ref in line.op.alternatives),
            attrs=tuple(_attr_pattern(a) for a in line.attrs if isinstance(a, ast.AttrEntry)),
            inputs=tuple(_input(i) for i in line.inputs),
            node_var=line.as_name,
            more_outputs=line.outputs_open,
            span=line.span,
        )

    def _repeat(self, repeat: ast.RepeatPattern) -> rules.RepeatPattern:
        return rules.RepeatPattern(
            repeat.count_var,
            repeat.count_op,
            repeat.count,
            repeat.from_var,
            repeat.to_var,
            tuple(self._node_pattern(line) for line in repeat.body),
            span=repeat.span,
        )

    # rewrites --------------------------------------------------------------------------------
    def _rewrite(
        self, rewrite: ast.RewriteBlock | ast.RewriteLoop
    ) -> rules.Rewrite | rules.RollLoop:
        if isinstance(rewrite, ast.RewriteLoop):
            return rules.RollLoop(span=rewrite.span)
        return rules.Rewrite(tuple(self._stmt(s) for s in rewrite.stmts), span=rewrite.span)

    def _stmt(self, stmt: ast.RewriteStmt) -> rules.RewriteStmt:
        if isinstance(stmt, ast.LetStmt):
            return rules.Let(stmt.name, self._rule_expr(stmt.expr), span=stmt.span)
        if isinstance(stmt, ast.AliasStmt):
            return rules.Alias(stmt.target, self._rule_expr(stmt.source), span=stmt.span)
        attrs: list[rules.SetAttr | rules.CopyAttrs] = []
        op: rules.OpId | rules.MatchedOp
        if isinstance(stmt.op, ast.NodeCopy):
            op = rules.MatchedOp(stmt.op.node)
            attrs.append(rules.CopyAttrs(stmt.op.node, span=stmt.op.span))
        else:
            op = _op(stmt.op)
        for entry in stmt.attrs:
            if isinstance(entry, ast.AttrCopy):
                if entry.source is not None:
                    attrs.append(rules.CopyAttrs(entry.source, span=entry.span))
            else:
                value = self._rule_expr(entry.value)
                attrs.append(rules.SetAttr(entry.name, value, span=entry.span))
        return rules.NewNode(
            outputs=tuple(_output(o) for o in stmt.outputs),
            op=op,
            attrs=tuple(attrs),
            inputs=tuple(self._rule_expr(i) for i in stmt.inputs),
            node_var=stmt.as_name,
            span=stmt.span,
        )


def lower_passes(decls: Sequence[ast.PassDecl]) -> tuple[rules.PassUse, ...]:
    """The passes declared, with their (checked, integer) option values."""
    uses = []
    for decl in decls:
        options = []
        for key, expr in decl.options:
            value = literal_value(expr)
            assert isinstance(value, int), "the checker accepts integer pass options only"
            options.append((key, value))
        uses.append(rules.PassUse(decl.name, tuple(options), span=decl.span))
    return tuple(uses)


def literal_value(expr: rules.Expr) -> rules.LiteralValue:
    """The value of a literal written in a pattern: a number, string, bool, none or list.

    The grammar allows only these forms (a sign before a number included) where a pattern
    or a pass option takes a literal.
    """
    if isinstance(expr, rules.Const):
        return expr.value
    if isinstance(expr, rules.ListExpr):
        return [literal_value(item) for item in expr.items]
    if isinstance(expr, rules.Unary) and expr.op in "+-":
        inner = literal_value(expr.operand)
        assert isinstance(inner, int | float), "a sign applies to a number"
        assert not isinstance(inner, bool), "a sign applies to a number"
        return -inner if expr.op == "-" else inner
    raise AssertionError(f"not a literal: {type(expr).__name__}")


def _literal_expr(value: rules.LiteralValue) -> rules.Expr:
    """A literal value as an expression."""
    if isinstance(value, list):
        return rules.ListExpr(tuple(_literal_expr(item) for item in value))
    return rules.Const(value)


def _spanned(expr: rules.Expr, span: Span) -> rules.Expr:
    """`expr` placed where the parameter it stands for was written (for messages)."""
    return dataclasses.replace(expr, span=span)


def _op(ref: ast.OpRef) -> rules.OpId:
    return rules.OpId(ir.schemas.normalize_domain(ref.domain), ref.op_type)


def _output(output: ast.OutputPattern) -> rules.OutputPattern:
    if isinstance(output, ast.OutputVar):
        return rules.OutputVar(output.name, span=output.span)
    return rules.AnyValue(span=output.span)


def _input(pattern: ast.InputPattern) -> rules.InputPattern:
    if isinstance(pattern, ast.InputVar):
        return rules.InputVar(pattern.name, pattern.optional, pattern.variadic, span=pattern.span)
    if isinstance(pattern, ast.InputLiteral):
        return rules.InputConst(literal_value(pattern.value), span=pattern.span)
    return rules.AnyValue(span=pattern.span)


def _attr_pattern(entry: ast.AttrEntry) -> rules.AttrPattern:
    if isinstance(entry.value, rules.Name):
        return rules.AttrBind(entry.name, entry.value.name, span=entry.span)
    return rules.AttrEquals(entry.name, literal_value(entry.value), span=entry.span)
