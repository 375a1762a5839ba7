"""Iterate over expression trees without recursion (deep expressions must not overflow)."""

from __future__ import annotations

from collections.abc import Iterator

from rewriter.dsl import _ast as ast

Node = ast.Expr | ast.Slice


def children(node: Node) -> tuple[Node, ...]:
    """The direct sub-expressions of `node`, in source order."""
    if isinstance(node, ast.Name | ast.Const):
        return ()
    if isinstance(node, ast.ListExpr):
        return node.items
    if isinstance(node, ast.Unary):
        return (node.operand,)
    if isinstance(node, ast.Binary | ast.Compare | ast.BoolOp | ast.Coalesce):
        return (node.left, node.right)
    if isinstance(node, ast.Conditional):
        return (node.then, node.cond, node.otherwise)
    if isinstance(node, ast.Call):
        return (*node.args, *(value for _, value in node.kwargs))
    if isinstance(node, ast.Attribute):
        return (node.obj,)
    if isinstance(node, ast.Index):
        return (node.obj, node.index)
    if isinstance(node, ast.Slice):
        return tuple(part for part in (node.start, node.stop, node.step) if part is not None)
    raise AssertionError(f"unknown expression node {type(node).__name__}")


def walk(expr: Node) -> Iterator[tuple[Node, Node | None]]:
    """Every node of `expr` with its parent (None for `expr` itself), in source order."""
    stack: list[tuple[Node, Node | None]] = [(expr, None)]
    while stack:
        node, parent = stack.pop()
        yield node, parent
        stack.extend((child, node) for child in reversed(children(node)))
