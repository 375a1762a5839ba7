"""Where-hints: from a `where` line that does not hold, overrides that should make it hold.

The rule's conditions are evaluated on the built instance with the rule's own evaluator.
For a line that is false, a few shapes of condition name a choice directly:

* `v == E`, `shape(v) == E`, `rank(v) == E`, `dtype(v) == E`, `shape_value(v) == E` (v free
  or an attribute variable): the choice becomes the value of `E` on this instance;
* `shape(v) in E`, `dtype(v) in E`, `[dtype(a), dtype(b)] in E`: one element of `E`;
* `v == u` for a free `v` and a defined `u`: `v` becomes the same value (non-linear use);
* `v == none` for an optional input `v?`: `v` is left out;
* `normalize_axis(a, r) == [k, ...]` (axes the rule lists): `a` becomes that list;
* `f(a) == f(b)` with one choosable variable on each side: `b` takes `a`'s value;
* `all(value(v) == E)`, `not any(value(v))`, `all_close(value(v), E)`: `v` is filled;
  `all(value(v) > k)` (or `>=`, `<`, `<=`) fills it with a value on that side of `k`;
  `all(signbit(value(v)))` fills it with -0.0, `not any(signbit(value(v)))` with +0.0;
* `is_scalar(v)`: `v` gets shape `[]`; `is_const(v)`: `v` becomes a constant;
* `uses(v) > k` (or `>=`): `v` also becomes a graph output (through as many Identity
  readers as needed), so something outside the match reads it;
* `lower_bound(v) >= k` (or `>`): `v` becomes a constant filled with k, k + 1 or k + 3
  (a computed bound, `lowest(dtype(v))`: filled with 0 where that holds);
* `repeats_halves(v)`: `v` becomes a constant filled with one value (its halves are equal).

`and` repairs each false operand; `or` repairs one drawn operand. Repairs only set choices;
the instance is then rebuilt from the same draws, so the search stays deterministic.
"""

from __future__ import annotations

from typing import Any

import numpy as np

import ir
from rewriter import rules
from rewriter.checkrules._analysis import RulePlan, names_in, walk
from rewriter.checkrules._choices import Choices
from rewriter.checkrules._dynamic import SYMBOLIC
from rewriter.engine import UNKNOWN, EvalContext, EvalError, evaluate, truth

_DTYPES_BY_NAME = {dtype.onnx_name: dtype for dtype in ir.DataType if dtype.onnx_name}
# Built-ins that read a value's contents: `value(v) == E` and `shape_value(v) == E` (a shape
# tensor's elements) make `v` a constant holding E.
_CONTENTS = frozenset({"value", "shape_value"})
# Built-ins that only convert their argument: `int(value(k)) == 3` sets `k`.
_CONVERSIONS = frozenset({"int", "float"})


class Repairer:
    """Turns false `where` lines into choice overrides for one instance."""

    def __init__(
        self, plan: RulePlan, choices: Choices, ctx: EvalContext, const_vars: frozenset[str]
    ) -> None:
        self.plan = plan
        self.choices = choices
        self.ctx = ctx
        self.const_vars = const_vars
        self.optional = frozenset(
            p.name
            for line in plan.lines
            for p in line.inputs
            if isinstance(p, rules.InputVar) and p.optional
        )
        self.changed = False

    def value(self, expr: rules.Expr) -> Any:
        """The expression's value on the instance (UNKNOWN when it cannot be evaluated)."""
        try:
            return evaluate(expr, self.ctx)
        except EvalError:
            return UNKNOWN

    def holds(self, expr: rules.Expr) -> bool:
        """True when the condition definitely holds."""
        try:
            return truth(evaluate(expr, self.ctx)) is True
        except EvalError:
            return False

    def _free(self, name: str) -> bool:
        return name in self.plan.free

    def _choosable(self, name: str) -> bool:
        return name in self.plan.attr_vars or name in self.const_vars

    # entry point -----------------------------------------------------------------------------
    def repair(self, condition: rules.Expr, tag: object) -> None:
        """Set overrides that should make `condition` hold."""
        if self.holds(condition):
            return
        if isinstance(condition, rules.BoolOp):
            if condition.op == "and":
                self.repair(condition.left, (tag, "l"))
                self.repair(condition.right, (tag, "r"))
            else:
                side = self.choices.pick(("repair", tag), ("l", "r"))
                branch = condition.left if side == "l" else condition.right
                self.repair(branch, (tag, side))
            return
        if isinstance(condition, rules.Compare):
            self._compare(condition, tag)
        elif isinstance(condition, rules.Call):
            self._call(condition)
        elif isinstance(condition, rules.Unary) and condition.op == "not":
            self._negation(condition.operand)

    # comparisons -----------------------------------------------------------------------------
    def _compare(self, expr: rules.Compare, tag: object) -> None:
        absent = absent_input(expr, self.optional)
        if absent is not None:
            self._set(("present", absent), False)
            return
        readers = _wants_more_uses(expr)
        bound = _wants_lower_bound(expr) or self._computed_lower_bound(expr)
        if _asks_unknown_dims(expr):
            self._set(SYMBOLIC, True)
        elif readers is not None:
            self._set(("extra_uses", readers[0]), readers[1])
        elif bound is not None and self._free(bound[0]):
            name, low = bound
            self._set(("const", name), True)
            self._set(
                ("value", name), self.choices.pick(("bound", name, tag), (low, low + 1, low + 3))
            )
        elif expr.op == "==":
            if self._assign_axes(expr.left, expr.right):
                return
            if self._assign(expr.left, expr.right) or self._assign(expr.right, expr.left):
                return
            self._copy(expr.left, expr.right)
        elif expr.op == "in":
            target = self.value(expr.right)
            if isinstance(target, list) and target:
                choice = self.choices.pick(("repair_in", tag), target)
                self._assign_value(expr.left, choice)

    def _assign(self, target: rules.Expr, source: rules.Expr) -> bool:
        if (
            isinstance(target, rules.Name)
            and isinstance(source, rules.Name)
            and self._free(target.name)
            and source.name in self.plan.defined
        ):
            self._set(("alias", target.name), source.name)
            return True
        value = self.value(source)
        if value is None and isinstance(target, rules.Name) and target.name in self.plan.attr_vars:
            self._set(("attr", target.name), None)
            return True
        if value is UNKNOWN or value is None:
            return False
        return self._assign_value(target, value)

    def _assign_value(self, target: rules.Expr, value: Any) -> bool:
        if isinstance(target, rules.Coalesce):
            first = self.value(target.left)
            return self._assign_value(target.left if first is not None else target.right, value)
        if isinstance(target, rules.ListExpr) and isinstance(value, list | tuple):
            done = False
            for item, part in zip(target.items, value, strict=False):
                done = self._assign_value(item, part) or done
            return done
        if isinstance(target, rules.Name):
            return self._set_variable(target.name, value)
        if isinstance(target, rules.Call) and target.func in _CONVERSIONS and len(target.args) == 1:
            return self._assign_value(target.args[0], value)
        if isinstance(target, rules.Call) and target.func == "normalize_axis":
            return self._assign_axis(target, value)
        if isinstance(target, rules.Index):
            return self._assign_dim(target, value)
        if isinstance(target, rules.Call) and len(target.args) == 1:
            arg = target.args[0]
            if not isinstance(arg, rules.Name) or not self._free(arg.name):
                if target.func in _CONTENTS and isinstance(arg, rules.Name):
                    return self._set_variable(arg.name, value)
                return False
            name = arg.name
            if (
                target.func == "shape"
                and isinstance(value, list)
                and all(isinstance(d, int) for d in value)
            ):
                self._set(("shape", name), tuple(value))
                return True
            if target.func == "rank" and isinstance(value, int):
                self._set(("rank", name), value)
                return True
            if target.func == "dtype" and value in _DTYPES_BY_NAME:
                self._set(("dtype", name), _DTYPES_BY_NAME[value])
                return True
            if target.func in _CONTENTS:
                return self._set_variable(name, value)
        return False

    def _assign_axis(self, target: rules.Call, value: Any) -> bool:
        """`normalize_axis(a, r) == v`: `a` becomes `v` (or `v - r`, the same axis)."""
        rank = self.value(target.args[1]) if len(target.args) == 2 else None
        if isinstance(rank, bool) or not isinstance(rank, int) or not _is_axis(value, rank):
            return False
        negative = self.choices.chance(("repair_axis", _expr_key(target.args[0])), 30)
        return self._assign_value(target.args[0], value - rank if negative else value)

    def _assign_axes(self, target: rules.Expr, source: rules.Expr) -> bool:
        """`normalize_axis(a, r) == [k, ...]` with listed axes: `a` becomes that list.

        (Only a list the rule writes: one computed from another value's axes is left to
        `_copy`, which keeps the value's own form.)
        """
        if not (
            isinstance(target, rules.Call)
            and target.func == "normalize_axis"
            and len(target.args) == 2
            and isinstance(source, rules.ListExpr)
        ):
            return False
        rank, axes = self.value(target.args[1]), self.value(source)
        if isinstance(rank, bool) or not isinstance(rank, int) or not isinstance(axes, list):
            return False
        if not axes or not all(_is_axis(a, rank) for a in axes):
            return False
        return self._assign_value(target.args[0], axes)

    def _assign_dim(self, target: rules.Index, value: Any) -> bool:
        """`shape(v)[i] == n` for a free `v` of known shape: that dim of `v` becomes n."""
        if isinstance(target.index, rules.Slice) or not _is_axis(value, 2**31) or value < 1:
            return False
        call, index = target.obj, self.value(target.index)
        if not (
            isinstance(call, rules.Call)
            and call.func == "shape"
            and len(call.args) == 1
            and isinstance(call.args[0], rules.Name)
            and self._free(call.args[0].name)
        ):
            return False
        shape = self.value(call)
        if not isinstance(shape, list) or not all(isinstance(d, int) for d in shape):
            return False
        if not _is_axis(index, len(shape)):
            return False
        dims = list(shape)
        dims[index] = value
        self._set(("shape", call.args[0].name), tuple(dims))
        return True

    def _set_variable(self, name: str, value: Any) -> bool:
        if not _is_data(value) or not _fits_int64(value):
            return False
        if name in self.plan.attr_vars:
            if isinstance(value, np.ndarray):
                value = value.tolist()
            self._set(("attr", name), value)
            return True
        if name in self.plan.free:
            self._set(("const", name), True)
            self._set(("value", name), np.asarray(value))
            return True
        return False

    def _copy(self, left: rules.Expr, right: rules.Expr) -> None:
        """`f(a) == f(b)`: give `b` the value `a` has (attributes or constants alike).

        Not across arithmetic (`int(value(e)) == 2 * int(value(s))`: `s` is not `e`).
        """
        if any(isinstance(e, rules.Binary) for side in (left, right) for e in walk(side)):
            return
        sources = [n for n in dict.fromkeys(names_in(left)) if self._choosable(n)]
        targets = [n for n in dict.fromkeys(names_in(right)) if self._choosable(n)]
        sources = [n for n in sources if self.ctx.bindings.get(n) is not None]
        targets = [n for n in targets if self.ctx.bindings.get(n) is not None]
        if len(sources) != 1 or len(targets) != 1 or sources == targets:
            return
        current = self.value(rules.Call("value", (rules.Name(sources[0]),)))
        if sources[0] in self.plan.attr_vars:
            current = self.ctx.bindings[sources[0]]
        if current is UNKNOWN or current is None:
            return
        self._set_variable(targets[0], current)

    def _computed_lower_bound(self, expr: rules.Compare) -> tuple[str, float] | None:
        """`lower_bound(v) >= E` with E computed (`lowest(dtype(mask))`): (v, a value that holds).

        The value is 0 when that holds (a zero mask, say), else E itself (or above it for `>`).
        """
        left = expr.left
        if not (
            isinstance(left, rules.Call) and left.func == "lower_bound" and len(left.args) == 1
        ):
            return None
        target = left.args[0]
        if not isinstance(target, rules.Name) or expr.op not in (">=", ">"):
            return None
        low = self.value(expr.right)
        if isinstance(low, np.ndarray) and low.size == 1:
            low = low.item()
        if not isinstance(low, int | float) or isinstance(low, bool):
            return None
        zero_holds = low < 0 if expr.op == ">" else low <= 0
        return target.name, 0.0 if zero_holds else float(low) + (1.0 if expr.op == ">" else 0.0)

    # calls -----------------------------------------------------------------------------------
    def _call(self, expr: rules.Call) -> None:
        func, args = expr.func, expr.args
        if func == "is_const":
            for arg in args:
                if isinstance(arg, rules.Name) and self._free(arg.name):
                    self._set(("const", arg.name), True)
        elif func == "is_scalar" and args and isinstance(args[0], rules.Name):
            if self._free(args[0].name):
                self._set(("const", args[0].name), True)
                self._set(("shape", args[0].name), ())
        elif func == "repeats_halves" and args and isinstance(args[0], rules.Name):
            # A constant filled with one value repeats its halves.
            name = args[0].name
            if self._free(name):
                self._set(("const", name), True)
                fill = self.choices.pick(("halves", name), (0.5, -1.25, 2.0))
                self._set(("value", name), np.asarray(fill))
        elif func == "all_close" and len(args) >= 2:
            self._fill(args[0], self.value(args[1]))
        elif func == "all" and len(args) == 1 and isinstance(args[0], rules.Compare):
            inner = args[0]
            if inner.op == "==":
                self._fill(inner.left, self.value(inner.right))
            elif inner.op in (">", ">=", "<", "<="):
                # all(value(v) > k): v filled with a value on the right side of k
                bound = self.value(inner.right)
                if isinstance(bound, int | float) and not isinstance(bound, bool):
                    step = 0 if inner.op in (">=", "<=") else 1
                    side = 1 if inner.op in (">", ">=") else -1
                    self._fill(inner.left, bound + side * (step + abs(bound) * 0.5))
        elif func == "all" and len(args) == 1 and _is_signbit(args[0]):
            self._fill(args[0], True)

    def _negation(self, operand: rules.Expr) -> None:
        if not isinstance(operand, rules.Call):
            return
        if operand.func == "any" and operand.args:
            self._fill(operand.args[0], 0)
        elif operand.func == "is_const":
            for arg in operand.args:
                if isinstance(arg, rules.Name) and self._free(arg.name):
                    self._set(("const", arg.name), False)
        elif operand.func == "has_static_shape":
            self._set(SYMBOLIC, True)

    def _fill(self, target: rules.Expr, fill: Any) -> None:
        if fill is UNKNOWN or fill is None:
            return
        if isinstance(target, rules.Call) and _is_signbit(target):
            # all(signbit(value(v))) wants -0.0, not any(signbit(value(v))) wants +0.0
            target, fill = target.args[0], (-0.0 if fill else 0.0)
        if isinstance(target, rules.Coalesce):
            first = self.value(target.left)
            target = target.left if first is not None else target.right
        name = _value_target(target)
        if name is None:
            return
        current = self.ctx.bindings.get(name)
        if name in self.plan.attr_vars:
            if isinstance(current, list):
                self._set(("attr", name), np.full(len(current), fill).tolist())
            elif _is_data(fill) and np.ndim(fill) == 0:
                self._set(("attr", name), float(fill) if isinstance(current, float) else fill)
            return
        if name in self.plan.free:
            self._set(("const", name), True)
            self._set(("value", name), np.asarray(fill))

    def _set(self, key: object, value: Any) -> None:
        previous = self.choices.overrides.get(key, _MISSING)
        if previous is _MISSING or not _equal(previous, value):
            self.choices.override(key, value)
            self.changed = True


_MISSING = object()


def _equal(a: Any, b: Any) -> bool:
    try:
        return bool(np.array_equal(np.asarray(a, dtype=object), np.asarray(b, dtype=object)))
    except (TypeError, ValueError):
        return False


def absent_input(expr: rules.Expr, optional: frozenset[str]) -> str | None:
    """The optional input `v` of `v == none` (either side), else None."""
    if not isinstance(expr, rules.Compare) or expr.op != "==":
        return None
    for name, other in ((expr.left, expr.right), (expr.right, expr.left)):
        if (
            isinstance(name, rules.Name)
            and name.name in optional
            and isinstance(other, rules.Const)
            and other.value is None
        ):
            return name.name
    return None


def _is_axis(value: Any, rank: int) -> bool:
    """True for an int in `[0, rank)`."""
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < rank


def _fits_int64(value: Any) -> bool:
    """False for an int (or ints) no int64 holds (twice a slice's `-INT64_MAX` end, say)."""
    ints = [v for v in np.ravel(np.asarray(value, dtype=object)) if isinstance(v, int)]
    return all(-(2**63) <= v < 2**63 for v in ints)


def _is_data(value: Any) -> bool:
    """True for numbers, strings and (nested) lists or arrays of them."""
    if isinstance(value, str | bool | int | float | np.generic):
        return True
    try:
        return np.asarray(value).dtype.kind in "biufcU"
    except (TypeError, ValueError):
        return False


def _is_signbit(expr: rules.Expr) -> bool:
    return isinstance(expr, rules.Call) and expr.func == "signbit" and len(expr.args) == 1


def _value_target(expr: rules.Expr) -> str | None:
    if isinstance(expr, rules.Name):
        return expr.name
    if isinstance(expr, rules.Call) and expr.func == "value" and expr.args:
        arg = expr.args[0]
        if isinstance(arg, rules.Name):
            return arg.name
    return None


def _expr_key(expr: rules.Expr) -> tuple[str, ...]:
    """A choice key for an expression: the names it reads."""
    return tuple(names_in(expr))


def _wants_lower_bound(expr: rules.Compare) -> tuple[str, int] | None:
    """`lower_bound(v) >= k` (or `> k`): (v, the smallest value that holds), else None."""
    left, right = expr.left, expr.right
    if not (isinstance(left, rules.Call) and left.func == "lower_bound" and len(left.args) == 1):
        return None
    target = left.args[0]
    low = _int_literal(right)
    if not isinstance(target, rules.Name) or low is None or expr.op not in (">=", ">"):
        return None
    return target.name, low + (1 if expr.op == ">" else 0)


def _int_literal(expr: rules.Expr) -> int | None:
    if (
        isinstance(expr, rules.Const)
        and isinstance(expr.value, int)
        and not isinstance(expr.value, bool)
    ):
        return expr.value
    if isinstance(expr, rules.Unary) and expr.op == "-":
        inner = _int_literal(expr.operand)
        return None if inner is None else -inner
    return None


def _wants_more_uses(expr: rules.Compare) -> tuple[str, int] | None:
    """`uses(v) > k` or `uses(v) >= k`: (v, readers the instance must add), else None."""
    left, right = expr.left, expr.right
    if not (isinstance(left, rules.Call) and left.func == "uses" and len(left.args) == 1):
        return None
    target = left.args[0]
    if not isinstance(target, rules.Name) or not isinstance(right, rules.Const):
        return None
    if not isinstance(right.value, int) or isinstance(right.value, bool):
        return None
    wanted = {">": right.value + 1, ">=": right.value}.get(expr.op)
    return None if wanted is None else (target.name, max(wanted - 1, 1))


def _asks_unknown_dims(expr: rules.Compare) -> bool:
    """`count_unknown(...) > n` (or `>=`, or `n < count_unknown(...)`): symbolic dims wanted."""

    def counts(side: rules.Expr) -> bool:
        return isinstance(side, rules.Call) and side.func == "count_unknown"

    if expr.op in (">", ">="):
        return counts(expr.left)
    if expr.op in ("<", "<="):
        return counts(expr.right)
    return False
