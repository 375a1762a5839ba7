"""Evaluation of rule expressions (`where` conditions, `let` values, attribute and input values).

Three-valued logic: a fact that is not known evaluates to `UNKNOWN`; arithmetic and
comparisons with an unknown are unknown; `not` keeps unknown; `and`/`or` follow Kleene logic.
A `where` line holds only when it is definitely true, so no rule fires on a guess.

Values bound by a match (`ir.Value`) stand for themselves in fact built-ins (`rank(x)`) and
for their constant contents in arithmetic (`scale / sqrt(var + eps)`).
"""

from __future__ import annotations

import dataclasses
import operator
from collections.abc import Callable, Mapping
from typing import Any, Final

import numpy as np

import ir
from rewriter import _facts
from rewriter._errors import RewriteError, Span
from rewriter.dsl import _ast as ast


class _Unknown:
    """The unknown truth value / unknown fact (a singleton)."""

    _instance: _Unknown | None = None

    def __new__(cls) -> _Unknown:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "unknown"

    def __bool__(self) -> bool:
        raise TypeError("the unknown truth value has no Python bool; use is_true()")


UNKNOWN: Final[_Unknown] = _Unknown()


class EvalError(RewriteError):
    """An expression could not be evaluated (wrong types, non-constant operand, bad call)."""

    def __init__(self, message: str, span: Span | None = None) -> None:
        self.span = span
        self.bare_message = message
        super().__init__(f"{span}: {message}" if span is not None else message)


@dataclasses.dataclass(frozen=True, slots=True)
class NodeRef:
    """A node bound with `as name`, as seen by expressions (`conv.group`, `<...conv>`)."""

    node: ir.Node
    opset: int | None


@dataclasses.dataclass(slots=True)
class EvalContext:
    """What an expression can see: bindings, the model's opsets, plugin functions."""

    bindings: dict[str, Any]
    opset_imports: Mapping[str, int]
    functions: Mapping[str, Callable[..., Any]] = dataclasses.field(default_factory=dict)
    # The opsets a conversion is heading for (`--target-opset`); empty when not converting.
    target_opsets: Mapping[str, int] = dataclasses.field(default_factory=dict)


def is_true(value: Any) -> bool:
    """True only for a definitely true value."""
    return truth(value) is True


def truth(value: Any) -> bool | _Unknown:
    """Kleene truth of a value: True, False or UNKNOWN."""
    if value is UNKNOWN:
        return _Unknown()  # the singleton (spelled so for the type checker)
    if value is None:
        return False
    if isinstance(value, bool | np.bool_ | int | float | np.integer | np.floating):
        return bool(value)
    if isinstance(value, np.ndarray):
        if value.size == 1:
            return bool(value.reshape(-1)[0])
        raise EvalError(f"a tensor of {value.size} elements is not a truth value; use all()/any()")
    if isinstance(value, list | tuple | str):
        return bool(value)
    if isinstance(value, ir.Value | NodeRef):
        return True
    raise EvalError(f"{type(value).__name__} is not a truth value")


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
    with quiet_numpy():
        return _ARITH[expr.op](left, right)


def quiet_numpy() -> Any:
    """Silence numpy's floating-point warnings, except overflow where the caller raises it.

    The builder evaluates rewrites with overflow raising (an overflowing fold is declined);
    everywhere else nothing is printed (a `where` line over odd constants is not an error).
    """
    if np.geterr()["over"] == "raise":
        return np.errstate(divide="ignore", invalid="ignore", under="ignore", over="raise")
    return np.errstate(all="ignore")


def _is_zero_scalar(value: Any) -> bool:
    return isinstance(value, int | float) and value == 0


def numeric(value: Any, span: Span | None = None) -> Any:
    """An operand for arithmetic: constants become arrays, lists arrays, dims stay ints."""
    if value is UNKNOWN:
        return UNKNOWN
    if isinstance(value, bool | np.bool_):
        return value
    if isinstance(value, int | float | np.integer | np.floating | np.ndarray):
        return value
    if isinstance(value, str):
        return UNKNOWN  # a symbolic dimension: its value is not known
    if isinstance(value, ir.Value):
        array = _facts.const_array(value)
        if array is None:
            raise EvalError(f"`{value.name}` is not a constant", span)
        return array
    if isinstance(value, list | tuple):
        items = [numeric(v, span) for v in value]
        if any(v is UNKNOWN for v in items):
            return UNKNOWN
        return np.asarray(items)
    if value is None:
        raise EvalError("`none` used in arithmetic", span)
    raise EvalError(f"{type(value).__name__} used in arithmetic", span)


def equal(a: Any, b: Any) -> bool | _Unknown:
    """Three-valued equality (see module docstring)."""
    if a is UNKNOWN or b is UNKNOWN:
        return _Unknown()  # the singleton (spelled so for the type checker)
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, ir.Value) and isinstance(b, ir.Value):
        return a is b
    if isinstance(a, NodeRef) and isinstance(b, NodeRef):
        return a.node is b.node
    if isinstance(a, ir.Value):
        a = _facts.const_array(a)
        if a is None:
            return UNKNOWN
    if isinstance(b, ir.Value):
        b = _facts.const_array(b)
        if b is None:
            return UNKNOWN
    if isinstance(a, str) or isinstance(b, str):
        if isinstance(a, str) and isinstance(b, str):
            return a == b
        # A symbolic dimension against a number: could be equal at run time.
        if isinstance(a, str) and isinstance(b, int | np.integer):
            return UNKNOWN
        if isinstance(b, str) and isinstance(a, int | np.integer):
            return UNKNOWN
        return False
    if isinstance(a, list | tuple) != isinstance(b, list | tuple):
        # A list against a scalar compares every element (like a tensor against a scalar).
        items, scalar = (a, b) if isinstance(a, list | tuple) else (b, a)
        if isinstance(scalar, int | float | np.integer | np.floating | bool):
            result_all: bool | _Unknown = True
            for item in items:
                e = equal(item, scalar)
                if e is False:
                    return False
                if e is UNKNOWN:
                    result_all = UNKNOWN
            return result_all
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        if len(a) != len(b):
            return False
        result: bool | _Unknown = True
        for x, y in zip(a, b, strict=False):
            e = equal(x, y)
            if e is False:
                return False
            if e is UNKNOWN:
                result = UNKNOWN
        return result
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        x = np.asarray(a)
        y = np.asarray(b)
        if x.dtype == object or y.dtype == object:
            return bool(np.array_equal(x, y))
        if x.shape != y.shape and x.size != 1 and y.size != 1:
            return False
        return bool(np.all(x == y))
    return bool(a == b)


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
        found: bool | _Unknown = False
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


def _builtins() -> Mapping[str, Callable[..., Any]]:
    """The built-in functions (`rewriter._builtins` imports this module, so looked up late)."""
    if not _BUILTINS:
        from rewriter._builtins import BUILTINS

        _BUILTINS.update(BUILTINS)
    return _BUILTINS


_BUILTINS: dict[str, Callable[..., Any]] = {}


def _call(expr: ast.Call, ctx: EvalContext) -> Any:
    args = [evaluate(a, ctx) for a in expr.args]
    kwargs = {k: evaluate(v, ctx) for k, v in expr.kwargs}
    plugin = ctx.functions.get(expr.func)
    if plugin is not None:
        try:
            return plugin(*args, **kwargs)
        except Exception as exc:  # a plugin is user code: report, never crash
            raise EvalError(f"helper `{expr.func}` failed: {exc}", expr.span) from exc
    builtin = (_BUILTINS or _builtins()).get(expr.func)
    if builtin is None:
        raise EvalError(f"unknown function `{expr.func}`", expr.span)
    try:
        return builtin(ctx, *args, **kwargs)
    except EvalError as exc:
        if exc.span is None:
            raise EvalError(exc.bare_message, expr.span) from exc
        raise


def _attribute(expr: ast.Attribute, ctx: EvalContext) -> Any:
    obj = evaluate(expr.obj, ctx)
    if obj is UNKNOWN:
        return UNKNOWN
    if isinstance(obj, NodeRef):
        return node_attribute(obj, expr.name)
    raise EvalError(f"`.{expr.name}` needs a node bound with `as`", expr.span)


def node_attribute(ref: NodeRef, name: str) -> Any:
    """A matched node's attribute as a Python value, schema-default aware (None if absent)."""
    node = ref.node
    if name == "op":
        return node.op_type
    if name == "domain":
        return node.domain
    if name == "name":
        return node.name
    attr = node.attributes.get(name)
    if attr is None:
        attr = ir.schemas.attribute_default(node.op_type, name, node.domain, ref.opset)
    if attr is None:
        return None
    return attr_to_python(attr)


def attr_to_python(attr: ir.Attr) -> Any:
    """An attribute's value as the expression language sees it (lists, arrays, numbers)."""
    value = attr.value
    if isinstance(value, ir.Tensor):
        return np.asarray(value.numpy())
    if isinstance(value, tuple):
        return [np.asarray(v.numpy()) if isinstance(v, ir.Tensor) else v for v in value]
    return value


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
