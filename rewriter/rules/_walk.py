"""Walking and rebuilding expression trees, and spelling out named constraints.

`walk` iterates without recursion (deep expressions must not overflow the stack). `rebuild`
applies a function to each direct sub-expression, the building block of substitutions.
`inline_constraints` replaces every `ConstraintCall` by its conditions, with the parameters
replaced by the call's arguments: tools that reason about conditions (rule checking, the
prover) read that form; the matcher evaluates the calls themselves, so `--why-not` can say
which constraint failed.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Sequence

from rewriter.rules._expr import (
    Attribute,
    Binary,
    BoolOp,
    Call,
    Coalesce,
    Compare,
    Conditional,
    Const,
    Constraint,
    ConstraintCall,
    Expr,
    Index,
    ListExpr,
    Name,
    Slice,
    Unary,
)

Node = Expr | Slice
"""An expression, or the slice inside an index."""


def children(node: Node) -> tuple[Node, ...]:
    """The direct sub-expressions of `node`, in source order."""
    if isinstance(node, Name | Const):
        return ()
    if isinstance(node, ListExpr):
        return node.items
    if isinstance(node, Unary):
        return (node.operand,)
    if isinstance(node, Binary | Compare | BoolOp | Coalesce):
        return (node.left, node.right)
    if isinstance(node, Conditional):
        return (node.then, node.cond, node.otherwise)
    if isinstance(node, Call):
        return (*node.args, *(value for _, value in node.kwargs))
    if isinstance(node, ConstraintCall):
        return node.args
    if isinstance(node, Attribute):
        return (node.obj,)
    if isinstance(node, Index):
        return (node.obj, node.index)
    if isinstance(node, Slice):
        return tuple(part for part in (node.start, node.stop, node.step) if part is not None)
    raise AssertionError(f"unknown expression node {type(node).__name__}")


def walk(expr: Node) -> Iterator[tuple[Node, Node | None]]:
    """Every node of `expr` with its parent (None for `expr` itself), in source order.

    The conditions of a called constraint are not part of the call's tree: walk them from
    `ConstraintCall.constraint` when needed.
    """
    stack: list[tuple[Node, Node | None]] = [(expr, None)]
    while stack:
        node, parent = stack.pop()
        yield node, parent
        stack.extend((child, node) for child in reversed(children(node)))


def names_in(expr: Node) -> dict[str, None]:
    """The variables `expr` reads, in order of first appearance."""
    return {node.name: None for node, _ in walk(expr) if isinstance(node, Name)}


def rebuild(node: Node, visit: Callable[[Node], Node]) -> Node:
    """`node` with `visit` applied to each direct sub-expression.

    `node` itself comes back when `visit` returns every sub-expression unchanged (the same
    object): rewriting a tree where little changes copies only the paths that did.
    """
    if isinstance(node, Name | Const):
        return node
    if isinstance(node, ListExpr):
        items = _visit_all(node.items, visit)
        return node if items is node.items else dataclasses.replace(node, items=items)
    if isinstance(node, Unary):
        operand = as_expr(visit(node.operand))
        return node if operand is node.operand else dataclasses.replace(node, operand=operand)
    if isinstance(node, Binary | Compare | BoolOp | Coalesce):
        left, right = as_expr(visit(node.left)), as_expr(visit(node.right))
        if left is node.left and right is node.right:
            return node
        return dataclasses.replace(node, left=left, right=right)
    if isinstance(node, Conditional):
        parts = (node.cond, node.then, node.otherwise)
        cond, then, otherwise = (as_expr(visit(part)) for part in parts)
        if cond is node.cond and then is node.then and otherwise is node.otherwise:
            return node
        return dataclasses.replace(node, cond=cond, then=then, otherwise=otherwise)
    if isinstance(node, Call):
        args = _visit_all(node.args, visit)
        kwargs = tuple((k, as_expr(visit(v))) for k, v in node.kwargs)
        if args is node.args and all(
            new is old for (_, new), (_, old) in zip(kwargs, node.kwargs, strict=True)
        ):
            return node
        return dataclasses.replace(node, args=args, kwargs=kwargs)
    if isinstance(node, ConstraintCall):
        args = _visit_all(node.args, visit)
        return node if args is node.args else dataclasses.replace(node, args=args)
    if isinstance(node, Attribute):
        obj = as_expr(visit(node.obj))
        return node if obj is node.obj else dataclasses.replace(node, obj=obj)
    if isinstance(node, Index):
        obj, index = as_expr(visit(node.obj)), visit(node.index)
        if obj is node.obj and index is node.index:
            return node
        return dataclasses.replace(node, obj=obj, index=index)
    start, stop, step = (
        None if part is None else as_expr(visit(part))
        for part in (node.start, node.stop, node.step)
    )
    if start is node.start and stop is node.stop and step is node.step:
        return node
    return dataclasses.replace(node, start=start, stop=stop, step=step)


def _visit_all(items: tuple[Expr, ...], visit: Callable[[Node], Node]) -> tuple[Expr, ...]:
    """`items` with `visit` applied to each: `items` itself when none changed."""
    visited = tuple(as_expr(visit(item)) for item in items)
    if all(new is old for new, old in zip(visited, items, strict=True)):
        return items
    return visited


def as_expr(node: Node) -> Expr:
    """`node`, which is known not to be a slice."""
    assert not isinstance(node, Slice), "a slice only appears inside an index"
    return node


def inline_constraints(conditions: Sequence[Expr]) -> tuple[Expr, ...]:
    """`conditions` with every constraint call spelled out.

    A condition that is one constraint call becomes that constraint's conditions, one line
    each, with the parameters replaced by the call's arguments (they must all hold, as the
    call's do). A call inside a larger expression (`not is_float(x)`) becomes the `and` of
    its conditions. Either way the meaning is the call's. Expressions keep their spans: a
    condition from a constraint points where the constraint is written.
    """
    lines: list[Expr] = []
    for condition in conditions:
        lines.extend(_lines(condition))
    return tuple(lines)


def _lines(expr: Expr) -> list[Expr]:
    """`expr` as lines that must all hold: a constraint call's conditions, else `expr`."""
    if isinstance(expr, ConstraintCall):
        lines: list[Expr] = []
        for condition in substituted(expr.constraint, expr.args):
            lines.extend(_lines(condition))
        return lines
    return [_expand(expr)]


def substituted(constraint: Constraint, args: Sequence[Expr]) -> list[Expr]:
    """The constraint's conditions with its parameters replaced by `args`."""
    arguments = dict(zip(constraint.params, args, strict=False))

    def substitute(node: Node) -> Node:
        if isinstance(node, Name) and node.name in arguments:
            return arguments[node.name]
        return rebuild(node, substitute)

    return [as_expr(substitute(condition)) for condition in constraint.conditions]


def _expand(expr: Expr) -> Expr:
    """`expr` with every constraint call in it replaced by the `and` of its conditions."""

    def replace(node: Node) -> Node:
        if isinstance(node, ConstraintCall):
            lines = _lines(node)
            if not lines:
                return Const(True, span=node.span)
            combined = lines[0]
            for line in lines[1:]:
                combined = BoolOp("and", combined, line, span=node.span)
            return combined
        return rebuild(node, replace)

    return as_expr(replace(expr))
