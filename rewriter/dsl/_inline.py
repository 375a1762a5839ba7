"""Spell out named constraints: `where` lines with every constraint call replaced by its body.

A `where` line that is one constraint call becomes that constraint's conditions, one line
each, with the parameters replaced by the call's arguments (they must all hold, as the
call's do). A call inside a larger expression (`not is_float(x)`) becomes the `and` of its
conditions. Either way the meaning is the call's: three-valued `and` of the conditions.

Tools that reason about conditions use this (check-rules builds instances from them); the
matcher evaluates the calls themselves, so `--why-not` can say which constraint failed.
The expressions keep their spans: a condition from a constraint points into its file.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence

from rewriter.dsl import _ast as ast

_Node = ast.Expr | ast.Slice


def inline_constraints(
    conditions: Sequence[ast.Expr], constraints: Mapping[str, ast.Constraint]
) -> tuple[ast.Expr, ...]:
    """`conditions` (a rule's `where` lines) with the calls of `constraints` spelled out.

    The constraints must have passed the load-time checks (in particular, none is
    recursive).
    """
    if not constraints:
        return tuple(conditions)
    lines: list[ast.Expr] = []
    for condition in conditions:
        lines.extend(_lines(condition, constraints))
    return tuple(lines)


def _lines(expr: ast.Expr, constraints: Mapping[str, ast.Constraint]) -> list[ast.Expr]:
    """`expr` as lines that must all hold: a constraint call's conditions, else `expr`."""
    if isinstance(expr, ast.Call) and expr.func in constraints and not expr.kwargs:
        lines: list[ast.Expr] = []
        for condition in _body(expr, constraints[expr.func]):
            lines.extend(_lines(condition, constraints))
        return lines
    return [_expand(expr, constraints)]


def _body(call: ast.Call, constraint: ast.Constraint) -> list[ast.Expr]:
    """The constraint's conditions with its parameters replaced by the call's arguments."""
    arguments = dict(zip(constraint.param_names, call.args, strict=False))

    def substitute(node: _Node) -> _Node:
        if isinstance(node, ast.Name) and node.name in arguments:
            return arguments[node.name]
        return _rebuild(node, substitute)

    return [_as_expr(substitute(condition)) for condition in constraint.conditions]


def _expand(expr: ast.Expr, constraints: Mapping[str, ast.Constraint]) -> ast.Expr:
    """`expr` with every constraint call in it replaced by the `and` of its conditions."""

    def replace(node: _Node) -> _Node:
        if isinstance(node, ast.Call) and node.func in constraints and not node.kwargs:
            lines = _lines(node, constraints)
            if not lines:
                return ast.Const(True, span=node.span)
            combined = lines[0]
            for line in lines[1:]:
                combined = ast.BoolOp("and", combined, line, span=node.span)
            return combined
        return _rebuild(node, replace)

    return _as_expr(replace(expr))


def _rebuild(node: _Node, visit: Callable[[_Node], _Node]) -> _Node:
    """`node` with `visit` applied to each direct sub-expression."""
    if isinstance(node, ast.Name | ast.Const):
        return node
    if isinstance(node, ast.ListExpr):
        return dataclasses.replace(node, items=tuple(_as_expr(visit(i)) for i in node.items))
    if isinstance(node, ast.Unary):
        return dataclasses.replace(node, operand=_as_expr(visit(node.operand)))
    if isinstance(node, ast.Binary | ast.Compare | ast.BoolOp | ast.Coalesce):
        left, right = _as_expr(visit(node.left)), _as_expr(visit(node.right))
        return dataclasses.replace(node, left=left, right=right)
    if isinstance(node, ast.Conditional):
        return dataclasses.replace(
            node,
            cond=_as_expr(visit(node.cond)),
            then=_as_expr(visit(node.then)),
            otherwise=_as_expr(visit(node.otherwise)),
        )
    if isinstance(node, ast.Call):
        args = tuple(_as_expr(visit(a)) for a in node.args)
        kwargs = tuple((k, _as_expr(visit(v))) for k, v in node.kwargs)
        return dataclasses.replace(node, args=args, kwargs=kwargs)
    if isinstance(node, ast.Attribute):
        return dataclasses.replace(node, obj=_as_expr(visit(node.obj)))
    if isinstance(node, ast.Index):
        return dataclasses.replace(node, obj=_as_expr(visit(node.obj)), index=visit(node.index))
    parts = (node.start, node.stop, node.step)
    start, stop, step = (None if p is None else _as_expr(visit(p)) for p in parts)
    return dataclasses.replace(node, start=start, stop=stop, step=step)


def _as_expr(node: _Node) -> ast.Expr:
    assert not isinstance(node, ast.Slice), "a slice only appears inside an index"
    return node
