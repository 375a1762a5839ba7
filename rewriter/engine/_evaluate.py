"""Evaluation of rule expressions (`where` conditions, `let` values, attribute and input values).

Each expression type has a handler; calls go to the built-in registry or to permitted plugin
functions. The values and the three-valued logic are those of `rewriter.engine._values`.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import numpy as np

import ir
from rewriter.dsl import _ast as ast
from rewriter.engine._builtins import BUILTINS
from rewriter.engine._values import (
    UNKNOWN,
    EvalContext,
    EvalError,
    NodeRef,
    equal,
    exact_numpy,
    node_attribute,
    numeric,
    truth,
)


def evaluate(expr: ast.Expr, ctx: EvalContext) -> Any:
    """Evaluate one expression."""
    handler = _HANDLERS.get(type(expr))
    if handler is None:
        raise EvalError(f"cannot evaluate {type(expr).__name__}", getattr(expr, "span", None))
    try:
        return handler(expr, ctx)
    except EvalError:
        raise
    except (ValueError, TypeError, IndexError, KeyError, ZeroDivisionError, OverflowError) as exc:
        raise EvalError(str(exc), expr.span) from exc


# ---------------------------------------------------------------------------------------------
# Handlers


def _name(expr: ast.Name, ctx: EvalContext) -> Any:
    try:
        return ctx.bindings[expr.name]
    except KeyError:
        raise EvalError(f"`{expr.name}` is not bound", expr.span) from None


def _const(expr: ast.Const, ctx: EvalContext) -> Any:
    return expr.value


def _list(expr: ast.ListExpr, ctx: EvalContext) -> Any:
    return [evaluate(item, ctx) for item in expr.items]


def _unary(expr: ast.Unary, ctx: EvalContext) -> Any:
    operand = evaluate(expr.operand, ctx)
    if expr.op == "not":
        t = truth(operand)
        return UNKNOWN if t is UNKNOWN else not t
    operand = numeric(operand, expr.operand.span)
    if operand is UNKNOWN:
        return UNKNOWN
    return -operand if expr.op == "-" else +operand


_ARITH: dict[str, Callable[[Any, Any], Any]] = {
    "+": operator.add,
    "-": operator.sub,
    "*": operator.mul,
    "/": operator.truediv,
    "//": operator.floordiv,
    "%": operator.mod,
    "**": operator.pow,
}


def _binary(expr: ast.Binary, ctx: EvalContext) -> Any:
    left = evaluate(expr.left, ctx)
    right = evaluate(expr.right, ctx)
    if isinstance(left, list) and isinstance(right, list) and expr.op == "+":
        return left + right
    if isinstance(left, list) and isinstance(right, int) and expr.op == "*":
        return left * right
    if isinstance(left, int) and isinstance(right, list) and expr.op == "*":
        return left * right
    left = numeric(left, expr.left.span)
    right = numeric(right, expr.right.span)
    if left is UNKNOWN or right is UNKNOWN:
        return UNKNOWN
    if expr.op == "/" and _is_zero_scalar(right):
        raise EvalError("division by zero", expr.span)
    with exact_numpy():
        return _ARITH[expr.op](left, right)


def _is_zero_scalar(value: Any) -> bool:
    return isinstance(value, int | float) and value == 0


_ORDER: dict[str, Callable[[Any, Any], Any]] = {
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}


def _compare(expr: ast.Compare, ctx: EvalContext) -> Any:
    left = evaluate(expr.left, ctx)
    right = evaluate(expr.right, ctx)
    op = expr.op
    if op in ("==", "!="):
        e = equal(left, right)
        if e is UNKNOWN or op == "==":
            return e
        return not e
    if op in ("in", "not in"):
        if right is UNKNOWN:
            return UNKNOWN
        if not isinstance(right, list | tuple):
            right = list(np.asarray(numeric(right, expr.right.span)).reshape(-1))
        found: Any = False
        for item in right:
            e = equal(left, item)
            if e is True:
                found = True
                break
            if e is UNKNOWN:
                found = UNKNOWN
        if found is UNKNOWN or op == "in":
            return found
        return not found
    left = numeric(left, expr.left.span)
    right = numeric(right, expr.right.span)
    if left is UNKNOWN or right is UNKNOWN:
        return UNKNOWN
    result = _ORDER[op](left, right)
    if isinstance(result, np.ndarray):
        return bool(np.all(result))
    return bool(result)


def _boolop(expr: ast.BoolOp, ctx: EvalContext) -> Any:
    left = truth(evaluate(expr.left, ctx))
    if expr.op == "and":
        if left is False:
            return False
        right = truth(evaluate(expr.right, ctx))
        if right is False:
            return False
        return True if left is True and right is True else UNKNOWN
    if left is True:
        return True
    right = truth(evaluate(expr.right, ctx))
    if right is True:
        return True
    return False if left is False and right is False else UNKNOWN


def _coalesce(expr: ast.Coalesce, ctx: EvalContext) -> Any:
    left = evaluate(expr.left, ctx)
    if left is None:
        return evaluate(expr.right, ctx)
    return left


def _conditional(expr: ast.Conditional, ctx: EvalContext) -> Any:
    cond = truth(evaluate(expr.cond, ctx))
    if cond is UNKNOWN:
        return UNKNOWN
    return evaluate(expr.then if cond else expr.otherwise, ctx)


def _call(expr: ast.Call, ctx: EvalContext) -> Any:
    args = [evaluate(a, ctx) for a in expr.args]
    kwargs = {k: evaluate(v, ctx) for k, v in expr.kwargs}
    constraint = ctx.constraints.get(expr.func)
    if constraint is not None:
        return holds(constraint, args, ctx)
    plugin = ctx.functions.get(expr.func)
    if plugin is not None:
        try:
            return plugin(*args, **kwargs)
        except Exception as exc:  # a plugin is user code: report, never crash
            raise EvalError(f"helper `{expr.func}` failed: {exc}", expr.span) from exc
    builtin = BUILTINS.get(expr.func)
    if builtin is None:
        raise EvalError(f"unknown function `{expr.func}`", expr.span)
    try:
        return builtin.implementation(ctx, *args, **kwargs)
    except EvalError as exc:
        if exc.span is None:
            raise EvalError(exc.bare_message, expr.span) from exc
        raise


def holds(constraint: ast.Constraint, args: list[Any], ctx: EvalContext) -> Any:
    """Whether `constraint` holds for `args`: True, False or UNKNOWN.

    Its conditions are evaluated in order with the parameters bound to `args`, and combined
    as `and` combines them (Kleene): false as soon as one is false, else unknown when one is
    unknown. An evaluation error in a condition is raised, as in a `where` line.
    """
    inner = ctx.inside(dict(zip(constraint.param_names, args, strict=True)))
    result: Any = True
    for condition in constraint.conditions:
        verdict = truth(evaluate(condition, inner))
        if verdict is False:
            return False
        if verdict is UNKNOWN:
            result = UNKNOWN
    return result


def _attribute(expr: ast.Attribute, ctx: EvalContext) -> Any:
    obj = evaluate(expr.obj, ctx)
    if obj is UNKNOWN:
        return UNKNOWN
    if isinstance(obj, NodeRef):
        return node_attribute(obj, expr.name)
    raise EvalError(f"`.{expr.name}` needs a node bound with `as`", expr.span)


def _index(expr: ast.Index, ctx: EvalContext) -> Any:
    obj = evaluate(expr.obj, ctx)
    if obj is UNKNOWN:
        return UNKNOWN
    if isinstance(obj, ir.Value):
        obj = numeric(obj, expr.obj.span)
    if isinstance(expr.index, ast.Slice):
        parts = []
        for part in (expr.index.start, expr.index.stop, expr.index.step):
            item = None if part is None else evaluate(part, ctx)
            if item is UNKNOWN:
                return UNKNOWN
            parts.append(item)
        result = obj[slice(*parts)]
        return list(result) if isinstance(obj, list | tuple) else result
    index = evaluate(expr.index, ctx)
    if index is UNKNOWN:
        return UNKNOWN
    if isinstance(index, np.integer):
        index = int(index)
    try:
        item = obj[index]
    except IndexError:
        raise EvalError(
            f"index {index} out of range for a sequence of {len(obj)}", expr.span
        ) from None
    return UNKNOWN if item is None and isinstance(obj, list | tuple) else item


_HANDLERS: dict[type, Callable[[Any, EvalContext], Any]] = {
    ast.Name: _name,
    ast.Const: _const,
    ast.ListExpr: _list,
    ast.Unary: _unary,
    ast.Binary: _binary,
    ast.Compare: _compare,
    ast.BoolOp: _boolop,
    ast.Coalesce: _coalesce,
    ast.Conditional: _conditional,
    ast.Call: _call,
    ast.Attribute: _attribute,
    ast.Index: _index,
}
