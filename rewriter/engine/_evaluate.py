"""Compiling rule expressions into closures, once, and evaluating them.

`compile_expr` turns an expression of the rule IR (a `where` condition, a `let` value, an
attribute or input value) into a Python closure over an `EvalContext`: the tree is walked
once, when a rule is compiled, and calls are resolved then (to a built-in, a permitted plugin
helper, or a named constraint's compiled conditions), so matching a rule at thousands of
nodes never interprets syntax again. The values and the three-valued logic are those of
`rewriter.engine._values`. `evaluate` compiles and runs in one step, for one-off use.

An error while evaluating names the innermost expression that failed (`EvalError` with its
span).
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

import ir
from rewriter import rules
from rewriter._errors import Span
from rewriter.engine._builtins import BUILTINS
from rewriter.engine._values import (
    UNKNOWN,
    EvalContext,
    EvalError,
    EvalValue,
    NodeRef,
    equal,
    exact_numpy,
    is_unknown,
    node_attribute,
    numeric,
    truth,
)

Evaluator = Callable[[EvalContext], EvalValue]
"""A compiled expression: its value in a context."""

Functions = Mapping[str, rules.Helper]
"""The plugin helpers calls may resolve to, by name."""


def evaluate(expr: rules.Expr, ctx: EvalContext) -> EvalValue:
    """Evaluate one expression (compiled for this one use)."""
    return compile_expr(expr, ctx.functions)(ctx)


def compile_expr(expr: rules.Expr, functions: Functions | None = None) -> Evaluator:
    """The closure that evaluates `expr`; calls resolve to `functions`, then built-ins.

    A call of an unknown function compiles to a closure that raises when it runs (the rule
    language refuses such calls at load time; a rule built in Python is told when it runs).
    """
    return _Compiler(functions or {}).compile(expr)


def compile_all(
    exprs: Sequence[rules.Expr], functions: Functions | None = None
) -> tuple[Evaluator, ...]:
    """`compile_expr` of each expression."""
    compiler = _Compiler(functions or {})
    return tuple(compiler.compile(expr) for expr in exprs)


def holds(conditions: Sequence[Evaluator], ctx: EvalContext) -> EvalValue:
    """Three-valued `and` of compiled conditions.

    False at the first false one, else UNKNOWN when one is unknown, else True. An evaluation
    error is raised, as in a `where` line.
    """
    result: EvalValue = True
    for condition in conditions:
        verdict = truth(condition(ctx))
        if verdict is False:
            return False
        if verdict is UNKNOWN:
            result = UNKNOWN
    return result


# Expressions whose own step raises no Python error (their operands' closures are guarded).
_CANNOT_FAIL = (
    rules.Name,
    rules.Const,
    rules.ListExpr,
    rules.BoolOp,
    rules.Coalesce,
    rules.Conditional,
    rules.ConstraintCall,
)


def _guarded(evaluator: Evaluator, expr: rules.Expr) -> Evaluator:
    """`evaluator`, with Python errors it raises reported as `EvalError`s at `expr`'s place."""
    where = expr.span

    def run(ctx: EvalContext) -> EvalValue:
        try:
            return evaluator(ctx)
        except EvalError:
            raise
        except (
            ValueError,
            TypeError,
            IndexError,
            KeyError,
            ZeroDivisionError,
            OverflowError,
        ) as exc:
            raise EvalError(str(exc), where) from exc

    return run


class _Compiler:
    """Compiles expressions; holds what calls resolve to."""

    def __init__(self, functions: Functions) -> None:
        self.functions = functions

    def compile(self, expr: rules.Expr) -> Evaluator:
        handler = _HANDLERS.get(type(expr))
        if handler is None:
            raise EvalError(f"cannot evaluate {type(expr).__name__}", getattr(expr, "span", None))
        evaluator = handler(self, expr)
        if isinstance(expr, _CANNOT_FAIL):
            return evaluator
        return _guarded(evaluator, expr)

    def optional(self, expr: rules.Expr | None) -> Evaluator | None:
        return None if expr is None else self.compile(expr)


# ---------------------------------------------------------------------------------------------
# Handlers: each returns the closure of one kind of expression.


def _name(compiler: _Compiler, expr: rules.Name) -> Evaluator:
    name = expr.name
    span = expr.span

    def run(ctx: EvalContext) -> EvalValue:
        try:
            return ctx.bindings[name]
        except KeyError:
            raise EvalError(f"`{name}` is not bound", span) from None

    return run


def _const(compiler: _Compiler, expr: rules.Const) -> Evaluator:
    value = expr.value
    return lambda ctx: value


def _list(compiler: _Compiler, expr: rules.ListExpr) -> Evaluator:
    items = tuple(compiler.compile(item) for item in expr.items)
    return lambda ctx: [item(ctx) for item in items]


def _unary(compiler: _Compiler, expr: rules.Unary) -> Evaluator:
    operand = compiler.compile(expr.operand)
    if expr.op == "not":

        def negation(ctx: EvalContext) -> EvalValue:
            t = truth(operand(ctx))
            return UNKNOWN if t is UNKNOWN else not t

        return negation
    span = expr.operand.span
    minus = expr.op == "-"

    def sign(ctx: EvalContext) -> EvalValue:
        value = numeric(operand(ctx), span)
        if is_unknown(value):
            return UNKNOWN
        result: EvalValue = -value if minus else +value
        return result

    return sign


_ARITH: dict[str, Callable[[Any, Any], Any]] = {
    "+": operator.add,
    "-": operator.sub,
    "*": operator.mul,
    "/": operator.truediv,
    "//": operator.floordiv,
    "%": operator.mod,
    "**": operator.pow,
}


def _binary(compiler: _Compiler, expr: rules.Binary) -> Evaluator:
    left_of = compiler.compile(expr.left)
    right_of = compiler.compile(expr.right)
    op = expr.op
    arith = _ARITH[op]
    left_span, right_span, span = expr.left.span, expr.right.span, expr.span

    def run(ctx: EvalContext) -> EvalValue:
        left = left_of(ctx)
        right = right_of(ctx)
        if isinstance(left, list) and isinstance(right, list) and op == "+":
            return left + right
        if isinstance(left, list) and isinstance(right, int) and op == "*":
            return left * right
        if isinstance(left, int) and isinstance(right, list) and op == "*":
            return left * right
        left = numeric(left, left_span)
        right = numeric(right, right_span)
        if is_unknown(left) or is_unknown(right):
            return UNKNOWN
        if op == "/" and _is_zero_scalar(right):
            raise EvalError("division by zero", span)
        with exact_numpy():
            result: EvalValue = arith(left, right)
        return result

    return run


def _is_zero_scalar(value: object) -> bool:
    return isinstance(value, int | float) and value == 0


_ORDER: dict[str, Callable[[Any, Any], Any]] = {
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}


def _compare(compiler: _Compiler, expr: rules.Compare) -> Evaluator:
    left_of = compiler.compile(expr.left)
    right_of = compiler.compile(expr.right)
    op = expr.op
    if op in ("==", "!="):
        negate = op == "!="

        def equality(ctx: EvalContext) -> EvalValue:
            e = equal(left_of(ctx), right_of(ctx))
            if e is UNKNOWN or not negate:
                return e
            return not e

        return equality
    right_span = expr.right.span
    if op in ("in", "not in"):
        negate = op == "not in"

        def membership(ctx: EvalContext) -> EvalValue:
            found = _contains(right_of(ctx), left_of(ctx), right_span)
            if found is UNKNOWN or not negate:
                return found
            return not found

        return membership
    left_span = expr.left.span
    order = _ORDER[op]

    def ordering(ctx: EvalContext) -> EvalValue:
        left = numeric(left_of(ctx), left_span)
        right = numeric(right_of(ctx), right_span)
        if is_unknown(left) or is_unknown(right):
            return UNKNOWN
        result = order(left, right)
        if isinstance(result, np.ndarray):
            return bool(np.all(result))
        return bool(result)

    return ordering


def _contains(container: EvalValue, item: EvalValue, span: Span) -> EvalValue:
    """Three-valued `item in container` (a tensor counts as the list of its elements)."""
    if container is UNKNOWN:
        return UNKNOWN
    if not isinstance(container, list | tuple):
        container = list(np.asarray(numeric(container, span)).reshape(-1))
    found: EvalValue = False
    for candidate in container:
        e = equal(item, candidate)
        if e is True:
            return True
        if e is UNKNOWN:
            found = UNKNOWN
    return found


def _boolop(compiler: _Compiler, expr: rules.BoolOp) -> Evaluator:
    left_of = compiler.compile(expr.left)
    right_of = compiler.compile(expr.right)
    if expr.op == "and":

        def conjunction(ctx: EvalContext) -> EvalValue:
            left = truth(left_of(ctx))
            if left is False:
                return False
            right = truth(right_of(ctx))
            if right is False:
                return False
            return True if left is True and right is True else UNKNOWN

        return conjunction

    def disjunction(ctx: EvalContext) -> EvalValue:
        left = truth(left_of(ctx))
        if left is True:
            return True
        right = truth(right_of(ctx))
        if right is True:
            return True
        return False if left is False and right is False else UNKNOWN

    return disjunction


def _coalesce(compiler: _Compiler, expr: rules.Coalesce) -> Evaluator:
    left_of = compiler.compile(expr.left)
    right_of = compiler.compile(expr.right)

    def run(ctx: EvalContext) -> EvalValue:
        left = left_of(ctx)
        return right_of(ctx) if left is None else left

    return run


def _conditional(compiler: _Compiler, expr: rules.Conditional) -> Evaluator:
    cond_of = compiler.compile(expr.cond)
    then_of = compiler.compile(expr.then)
    otherwise_of = compiler.compile(expr.otherwise)

    def run(ctx: EvalContext) -> EvalValue:
        cond = truth(cond_of(ctx))
        if cond is UNKNOWN:
            return UNKNOWN
        return then_of(ctx) if cond else otherwise_of(ctx)

    return run


def _call(compiler: _Compiler, expr: rules.Call) -> Evaluator:
    args = tuple(compiler.compile(a) for a in expr.args)
    kwargs = tuple((key, compiler.compile(value)) for key, value in expr.kwargs)
    func, span = expr.func, expr.span
    plugin = compiler.functions.get(func)
    if plugin is not None:
        helper = plugin

        def call_plugin(ctx: EvalContext) -> EvalValue:
            values = [arg(ctx) for arg in args]
            named = {key: value(ctx) for key, value in kwargs}
            try:
                result: EvalValue = helper(*values, **named)  # type: ignore[assignment]
            except Exception as exc:  # a plugin is user code: report, never crash
                raise EvalError(f"helper `{func}` failed: {exc}", span) from exc
            return result

        return call_plugin
    builtin = BUILTINS.get(func)
    if builtin is None:

        def unknown(ctx: EvalContext) -> EvalValue:
            raise EvalError(f"unknown function `{func}`", span)

        return unknown
    implementation = builtin.implementation

    def call_builtin(ctx: EvalContext) -> EvalValue:
        values = [arg(ctx) for arg in args]
        named = {key: value(ctx) for key, value in kwargs}
        try:
            result: EvalValue = implementation(ctx, *values, **named)
        except EvalError as exc:
            if exc.span is None:
                raise EvalError(exc.bare_message, span) from exc
            raise
        return result

    return call_builtin


def _constraint_call(compiler: _Compiler, expr: rules.ConstraintCall) -> Evaluator:
    """A named constraint holds when its conditions do, with its parameters bound to the args."""
    args = tuple(compiler.compile(a) for a in expr.args)
    params = expr.constraint.params
    conditions = tuple(compiler.compile(c) for c in expr.constraint.conditions)

    def run(ctx: EvalContext) -> EvalValue:
        inner = ctx.inside(dict(zip(params, (arg(ctx) for arg in args), strict=True)))
        return holds(conditions, inner)

    return run


def _attribute(compiler: _Compiler, expr: rules.Attribute) -> Evaluator:
    obj_of = compiler.compile(expr.obj)
    name, span = expr.name, expr.span

    def run(ctx: EvalContext) -> EvalValue:
        obj = obj_of(ctx)
        if obj is UNKNOWN:
            return UNKNOWN
        if isinstance(obj, NodeRef):
            return node_attribute(obj, name)
        raise EvalError(f"`.{name}` needs a node bound with `as`", span)

    return run


def _index(compiler: _Compiler, expr: rules.Index) -> Evaluator:
    obj_of = compiler.compile(expr.obj)
    obj_span, span = expr.obj.span, expr.span
    if isinstance(expr.index, rules.Slice):
        parts = tuple(
            compiler.optional(p) for p in (expr.index.start, expr.index.stop, expr.index.step)
        )

        def slicing(ctx: EvalContext) -> EvalValue:
            obj = _indexable(obj_of(ctx), obj_span)
            if obj is UNKNOWN:
                return UNKNOWN
            bounds: list[Any] = []
            for part in parts:
                item = None if part is None else part(ctx)
                if item is UNKNOWN:
                    return UNKNOWN
                bounds.append(item)
            result: EvalValue = obj[slice(*bounds)]  # type: ignore[index]
            return list(result) if isinstance(obj, list | tuple) else result  # type: ignore[arg-type]

        return slicing
    index_of = compiler.compile(expr.index)

    def indexing(ctx: EvalContext) -> EvalValue:
        obj = _indexable(obj_of(ctx), obj_span)
        if obj is UNKNOWN:
            return UNKNOWN
        index = index_of(ctx)
        if index is UNKNOWN:
            return UNKNOWN
        if isinstance(index, np.integer):
            index = int(index)
        try:
            item: EvalValue = obj[index]  # type: ignore[index]
        except IndexError:
            raise EvalError(
                f"index {index!r} out of range for a sequence of {len(obj)}",  # type: ignore[arg-type]
                span,
            ) from None
        return UNKNOWN if item is None and isinstance(obj, list | tuple) else item

    return indexing


def _indexable(obj: EvalValue, span: Span) -> EvalValue:
    """What `obj[...]` indexes: a matched constant's contents, or `obj` itself."""
    if isinstance(obj, ir.Value):
        return numeric(obj, span)  # type: ignore[no-any-return]
    return obj


_HANDLERS: dict[type, Callable[[_Compiler, Any], Evaluator]] = {
    rules.Name: _name,
    rules.Const: _const,
    rules.ListExpr: _list,
    rules.Unary: _unary,
    rules.Binary: _binary,
    rules.Compare: _compare,
    rules.BoolOp: _boolop,
    rules.Coalesce: _coalesce,
    rules.Conditional: _conditional,
    rules.Call: _call,
    rules.ConstraintCall: _constraint_call,
    rules.Attribute: _attribute,
    rules.Index: _index,
}
