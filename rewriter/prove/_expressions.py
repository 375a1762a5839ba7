"""A rule's expressions evaluated over symbolic values: conditions become SMT assumptions.

The engine evaluates a rule's `where` lines and `let`s on one model's facts; the prover
evaluates the same expressions on an instance whose facts are symbolic: dims are z3 integers,
constants' contents are `Sym`s, `is_const(c)` and `uses(t)` are fresh variables (the prover
assumes nothing the engine would have to know). A condition evaluates to a Python bool (an
instance whose condition is false is no instance) or a z3 Bool, which the proof assumes.

Reading a fact at run time is *weaker* than the engine's reading of it: `shape(y) ==
shape(x)` holds on a model only when the engine knows the dims equal, and then they are equal
when it runs, so assuming the run-time equality covers every model the rule fires on (and
more). That is what makes a proof under these assumptions a proof for the rule.

Three-valued logic and errors: a fact is never unknown here, and a sub-expression that fails
to evaluate (an axis out of range) makes its line fail. Where the failure sits behind a
symbolic test (`a and f(b)` with `a` symbolic), the evaluator assumes the path to it is not
taken, which is what the engine's failing line means for the instances it fires on.
"""

from __future__ import annotations

import dataclasses
import operator
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

import numpy as np
import z3

import ir
from rewriter import rules
from rewriter.engine import UNKNOWN, EvalContext, EvalError, equal, truth
from rewriter.prove._dtypes import kind_of
from rewriter.prove._symbolic import (
    NotTranslatableError,
    Sym,
    Tracker,
    as_sym_array,
    is_python_number,
    is_symbolic,
    lift,
)
from rewriter.prove._tensor import SymbolicTensor


class EvaluationFailedError(ValueError):
    """An expression failed to evaluate on concrete values: the engine's line fails."""


class UnboundNameError(NotTranslatableError):
    """A name not bound (yet): while the match is being built, a condition that waits."""


@dataclasses.dataclass(eq=False)
class TensorRef:
    """A value of the instance (matched or built): its tensor and what rules ask of it.

    `const` is `is_const` of it (a fresh z3 Bool for a matched input: the prover assumes
    nothing); `contents` reads its elements as an object array of Syms (None when its shape
    is symbolic).
    """

    name: str
    tensor: SymbolicTensor
    const: z3.BoolRef | bool
    contents: Callable[[], np.ndarray[Any, Any]] | None = None


@dataclasses.dataclass(frozen=True, eq=False)
class MatchedNode:
    """A node bound with `as` (or built by the rewrite): op, domain and attributes.

    Attributes hold Python values, z3 floating-point terms, or `FreeAttribute` tokens for
    attributes the rule leaves open.
    """

    op_type: str
    domain: str
    attributes: Mapping[str, object]
    opset: int


@dataclasses.dataclass(frozen=True)
class FreeAttribute:
    """An attribute a match line leaves open: some value, the same wherever it is copied."""

    label: str

    def __repr__(self) -> str:
        return f"<free {self.label}>"


class Facts:
    """What an instance knows beyond its values: fresh facts, bounds, the opset, aliases.

    One per instance; the evaluator asks it for every fact that is not a value.
    """

    def __init__(self, opset: int, tracker: Tracker) -> None:
        self.opset = opset
        self.tracker = tracker
        self._fresh: dict[str, z3.ExprRef] = {}
        self.assumptions: list[z3.BoolRef] = []
        self.fresh_assumptions: list[z3.BoolRef] = []
        self.bounds: dict[tuple[str, str], object] = {}

    def fresh_bool(self, label: str) -> z3.BoolRef:
        """A Bool nothing is known about, the same for the same label."""
        found = self._fresh.get(label)
        if found is None:
            found = z3.Bool(f"?{label}")
            self._fresh[label] = found
        assert isinstance(found, z3.BoolRef), "labels name one sort each"
        return found

    def fresh_int(self, label: str, minimum: int | None = None) -> z3.ArithRef:
        """An integer nothing is known about (at least `minimum`), the same for one label."""
        found = self._fresh.get(label)
        if found is None:
            found = z3.Int(f"?{label}")
            self._fresh[label] = found
            if minimum is not None:
                self.fresh_assumptions.append(found >= minimum)
        assert isinstance(found, z3.ArithRef), "labels name one sort each"
        return found

    def is_static(self, dim: z3.ArithRef) -> z3.BoolRef:
        """Whether the engine knows this symbolic dim as a number: a fresh Bool per dim."""
        return self.fresh_bool(f"static({z3.simplify(dim).sexpr()})")


Value = Any
"""What an expression evaluates to: concrete values (as the engine's), z3 terms, Syms,
object arrays of Syms, `TensorRef`s, `MatchedNode`s, `None`, lists and tuples of these."""

Function = Callable[["Evaluator", list[Value], dict[str, Value]], Value]
"""A built-in's translation: the evaluator, the arguments' values, the keyword arguments."""


def engine_context(opset: int) -> EvalContext:
    """An evaluation context for the engine's own built-ins on concrete values."""
    return EvalContext(bindings={}, opset_imports={"": opset})


class Evaluator:
    """Evaluates expressions of one instance (see the module docstring)."""

    def __init__(
        self,
        env: dict[str, Value],
        facts: Facts,
        functions: Mapping[str, Function],
        fallback: Callable[[str, list[Value], dict[str, Value]], Value],
    ) -> None:
        self.env = env
        self.facts = facts
        self.functions = functions
        self.fallback = fallback
        self.path: list[z3.BoolRef] = []

    # -- entry points ---------------------------------------------------------------------
    def condition(self, expr: rules.Expr) -> bool | z3.BoolRef:
        """A `where` line: a Python bool, or the z3 Bool the proof assumes."""
        return self.truth(self.evaluate(expr))

    def evaluate(self, expr: rules.Expr) -> Value:
        """The value of `expr` (see `Value`).

        Raises:
            EvaluationFailedError: it fails on concrete values (the engine's line fails).
            NotTranslatableError: it cannot be stated symbolically.
        """
        handler = _HANDLERS.get(type(expr))
        if handler is None:
            raise NotTranslatableError(f"expression {type(expr).__name__}")
        return handler(self, expr)

    # -- helpers --------------------------------------------------------------------------
    def truth(self, value: Value) -> bool | z3.BoolRef:
        """The truth of a value: Python's for concrete ones, a z3 Bool for symbolic ones."""
        if isinstance(value, z3.BoolRef):
            return value
        if isinstance(value, Sym):
            return sym_truth(value)
        if isinstance(value, z3.ArithRef):
            return value != 0
        if isinstance(value, TensorRef | MatchedNode):
            return True
        if isinstance(value, np.ndarray) and value.dtype == object:
            if value.size != 1:
                raise EvaluationFailedError("a tensor of several elements as a truth value")
            return self.truth(value.reshape(-1)[0])
        if isinstance(value, list | tuple) and is_symbolic(value):
            return bool(value)
        try:
            found = truth(value)
        except EvalError as exc:
            raise EvaluationFailedError(str(exc)) from exc
        if found is UNKNOWN:
            raise NotTranslatableError("a fact the prover does not know")
        return bool(found)

    def guarded(self, test: z3.BoolRef, run: Callable[[], Value]) -> Value | EvaluationFailedError:
        """`run()` on the path where `test` holds; a failure there is assumed away."""
        self.path.append(test)
        try:
            return run()
        except EvaluationFailedError as exc:
            self.facts.assumptions.append(z3.Not(z3.And(*self.path)))
            return exc
        finally:
            self.path.pop()

    def numeric(self, value: Value) -> Value:
        """An operand of arithmetic: a matched value's contents, a list as an array."""
        if isinstance(value, TensorRef):
            return self.contents(value)
        if isinstance(value, list | tuple):
            items = [self.numeric(v) for v in value]
            if is_symbolic(items):
                array = np.empty(len(items), dtype=object)
                for k, item in enumerate(items):
                    array[k] = item
                return array
            return np.asarray(items)
        if value is None:
            raise EvaluationFailedError("`none` used in arithmetic")
        if isinstance(value, str):
            raise EvaluationFailedError(f"the string {value!r} used in arithmetic")
        return value

    def contents(self, ref: TensorRef) -> np.ndarray[Any, Any]:
        """The elements of a matched or built value (concrete shape only)."""
        if ref.contents is None:
            raise NotTranslatableError(f"the contents of `{ref.name}`, of symbolic shape")
        return ref.contents()


def sym_truth(value: Sym) -> z3.BoolRef:
    """A number's truth as numpy has it: not zero (a bool: itself)."""
    term = value.term
    if value.dtype == ir.DataType.BOOL:
        assert isinstance(term, z3.BoolRef), "a bool Sym holds a Bool"
        return term
    if isinstance(term, z3.FPRef):
        return z3.Not(z3.fpIsZero(term))
    return term != 0


# ---------------------------------------------------------------------------------------------
# Arithmetic and comparisons on mixed values


def _floor_div(a: z3.ArithRef, b: z3.ArithRef) -> z3.ArithRef:
    # z3's integer division is Euclidean; Python's floors toward -inf
    return z3.If(b > 0, a / b, (-a) / (-b))


def _int_term(value: Value) -> z3.ArithRef | None:
    if isinstance(value, z3.ArithRef) and value.is_int():
        return value
    if isinstance(value, int | np.integer) and not isinstance(value, bool | np.bool_):
        return z3.IntVal(int(value))
    return None


def _scalar_arith(op: str, a: Value, b: Value) -> Value:
    """`a op b` for one pair of numbers, one of them symbolic."""
    if isinstance(a, Sym) or isinstance(b, Sym):
        sym, other, reverse = (a, b, False) if isinstance(a, Sym) else (b, a, True)
        assert isinstance(sym, Sym), "one side is a Sym"
        if op in ("+", "-", "*", "/"):
            return sym._binary(other, op, reverse)
        raise NotTranslatableError(f"`{op}` on symbolic tensor elements")
    left, right = _int_term(a), _int_term(b)
    if left is None or right is None:
        raise NotTranslatableError(f"`{op}` between {type(a).__name__} and {type(b).__name__}")
    if op == "+":
        return left + right
    if op == "-":
        return left - right
    if op == "*":
        return left * right
    if op == "//":
        return _floor_div(left, right)
    if op == "%":
        return left - right * _floor_div(left, right)
    if op == "**" and isinstance(b, int) and b >= 0:
        result: z3.ArithRef = z3.IntVal(1)
        for _ in range(b):
            result = result * left
        return result
    raise NotTranslatableError(f"`{op}` on symbolic integers")


def arithmetic(op: str, a: Value, b: Value, tracker: Tracker) -> Value:
    """`a op b` with numpy's broadcasting, for operands one of which is symbolic."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        left = _object_operand(a, tracker)
        right = _object_operand(b, tracker)
        result = np.frompyfunc(lambda x, y: _scalar_arith(op, x, y), 2, 1)(left, right)
        return result if isinstance(result, np.ndarray) else _wrap0(result)
    return _scalar_arith(op, a, b)


def _wrap0(value: Value) -> np.ndarray[Any, Any]:
    array = np.empty((), dtype=object)
    array[()] = value
    return array


def _same_kind(value: Value, other: Value = None) -> Value:
    """`value` as a Sym of `other`'s dtype when it is an integer beside an integer Sym.

    An integer is a Python or numpy int or a z3 integer (a dim); numpy's promotion lets the
    array's dtype win. Anything else is returned as it is.
    """
    if not isinstance(other, Sym) or isinstance(value, Sym | bool | np.bool_):
        return value
    if kind_of(other.dtype).is_integer and isinstance(value, int | np.integer | z3.ArithRef):
        return lift(value, other.dtype, other.tracker)
    return value


def _object_operand(value: Value, tracker: Tracker) -> Value:
    """A concrete array beside a symbolic one, as Syms; numbers stay as they are.

    The array keeps its dtype for numpy's promotion; Python numbers are weak.
    """
    if isinstance(value, np.ndarray) and value.dtype != object:
        return as_sym_array(value, tracker)
    return value


def compare_scalars(op: str, a: Value, b: Value) -> Value:
    """`a op b` for numbers, one of them symbolic: a Sym bool or a z3 Bool."""
    if isinstance(a, Sym) or isinstance(b, Sym):
        sym, other, reverse = (a, b, False) if isinstance(a, Sym) else (b, a, True)
        assert isinstance(sym, Sym), "one side is a Sym"
        if isinstance(other, Sym | bool | np.bool_) or is_python_number(other):
            return sym._compare(other, op, reverse)
        if isinstance(other, z3.ArithRef):
            return sym._compare(other, op, reverse)
        raise NotTranslatableError(f"comparing a symbolic number with {type(other).__name__}")
    if isinstance(a, z3.BoolRef) or isinstance(b, z3.BoolRef):
        if op in ("==", "!="):
            left = a if isinstance(a, z3.BoolRef) else z3.BoolVal(bool(a))
            right = b if isinstance(b, z3.BoolRef) else z3.BoolVal(bool(b))
            return left == right if op == "==" else left != right
        raise NotTranslatableError(f"`{op}` between truth values")
    left, right = _numeric_term(a), _numeric_term(b)
    tests: dict[str, Callable[[Any, Any], Any]] = {
        "==": operator.eq,
        "!=": operator.ne,
        "<": operator.lt,
        "<=": operator.le,
        ">": operator.gt,
        ">=": operator.ge,
    }
    return tests[op](left, right)


def _numeric_term(value: Value) -> z3.ArithRef:
    if isinstance(value, z3.ArithRef):
        return value
    if isinstance(value, bool | np.bool_):
        return z3.IntVal(int(value))
    if isinstance(value, int | np.integer):
        return z3.IntVal(int(value))
    if isinstance(value, float | np.floating):
        if not np.isfinite(value):
            raise NotTranslatableError("an infinite bound compared with an integer term")
        return z3.RealVal(float(value))
    raise NotTranslatableError(f"comparing an integer term with {type(value).__name__}")


def _as_condition(value: Value) -> z3.BoolRef | bool:
    if isinstance(value, Sym):
        return sym_truth(value)
    if isinstance(value, z3.BoolRef):
        return value
    if isinstance(value, bool | np.bool_):
        return bool(value)
    raise NotTranslatableError(f"{type(value).__name__} as a comparison's result")


def conjunction(parts: Sequence[z3.BoolRef | bool]) -> z3.BoolRef | bool:
    """`and` of conditions, staying a Python bool when every part is one."""
    symbolic: list[z3.BoolRef] = []
    for part in parts:
        if part is False:
            return False
        if part is not True:
            assert isinstance(part, z3.BoolRef), "a condition is a bool or a z3 Bool"
            symbolic.append(part)
    if not symbolic:
        return True
    return symbolic[0] if len(symbolic) == 1 else z3.And(*symbolic)


def disjunction(parts: Sequence[z3.BoolRef | bool]) -> z3.BoolRef | bool:
    """`or` of conditions, staying a Python bool when every part is one."""
    symbolic: list[z3.BoolRef] = []
    for part in parts:
        if part is True:
            return True
        if part is not False:
            assert isinstance(part, z3.BoolRef), "a condition is a bool or a z3 Bool"
            symbolic.append(part)
    if not symbolic:
        return False
    return symbolic[0] if len(symbolic) == 1 else z3.Or(*symbolic)


def negation(value: z3.BoolRef | bool) -> z3.BoolRef | bool:
    """`not`, staying a Python bool for a bool."""
    if isinstance(value, bool):
        return not value
    return z3.Not(value)


def elementwise_compare(op: str, a: Value, b: Value, tracker: Tracker) -> Value:
    """`a op b` elementwise (numpy broadcasting): an object array of conditions."""
    left = _object_operand(a, tracker)
    right = _object_operand(b, tracker)
    return np.frompyfunc(lambda x, y: compare_scalars(op, x, y), 2, 1)(left, right)


def all_of_array(values: Value) -> z3.BoolRef | bool:
    """Every element (of an array of conditions) holds."""
    flat = list(np.asarray(values, dtype=object).reshape(-1))
    return conjunction([_as_condition(v) for v in flat])


def sym_equal(ev: Evaluator, a: Value, b: Value) -> z3.BoolRef | bool:
    """`a == b` as the engine's `equal` has it, for values that may be symbolic."""
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, TensorRef) and isinstance(b, TensorRef):
        return a is b
    if isinstance(a, MatchedNode) or isinstance(b, MatchedNode):
        return a is b
    if isinstance(a, FreeAttribute) or isinstance(b, FreeAttribute):
        raise NotTranslatableError("an attribute the match leaves open, compared")
    if isinstance(a, TensorRef):
        a = ev.contents(a)
    if isinstance(b, TensorRef):
        b = ev.contents(b)
    if isinstance(a, str) or isinstance(b, str):
        return isinstance(a, str) and isinstance(b, str) and a == b
    if not is_symbolic(a) and not is_symbolic(b):
        found = equal(a, b)
        if found is UNKNOWN:
            raise NotTranslatableError("an equality the engine leaves unknown")
        return bool(found)
    a_list, b_list = isinstance(a, list | tuple), isinstance(b, list | tuple)
    if a_list != b_list:
        items, scalar = (a, b) if a_list else (b, a)
        if isinstance(scalar, np.ndarray):
            return _array_equal(ev, np.asarray(ev.numeric(items), dtype=object), scalar)
        return conjunction([sym_equal(ev, item, scalar) for item in items])
    if a_list and b_list:
        if len(a) != len(b):
            return False
        return conjunction([sym_equal(ev, x, y) for x, y in zip(a, b, strict=True)])
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return _array_equal(ev, a, b)
    return _as_condition(compare_scalars("==", a, b))


def _array_equal(ev: Evaluator, a: Value, b: Value) -> z3.BoolRef | bool:
    x = a if isinstance(a, np.ndarray) else np.asarray(a, dtype=object)
    y = b if isinstance(b, np.ndarray) else np.asarray(b, dtype=object)
    if x.shape != y.shape and x.size != 1 and y.size != 1:
        return False
    try:
        compared = elementwise_compare("==", x, y, ev.facts.tracker)
    except ValueError as exc:  # shapes that do not broadcast: numpy's == is False
        del exc
        return False
    return all_of_array(compared)


# ---------------------------------------------------------------------------------------------
# Handlers


def _name(ev: Evaluator, expr: rules.Name) -> Value:
    if expr.name not in ev.env:
        raise UnboundNameError(f"`{expr.name}` is not bound")
    return ev.env[expr.name]


def _const(ev: Evaluator, expr: rules.Const) -> Value:
    return expr.value


def _list(ev: Evaluator, expr: rules.ListExpr) -> Value:
    return [ev.evaluate(item) for item in expr.items]


def _unary(ev: Evaluator, expr: rules.Unary) -> Value:
    operand = ev.evaluate(expr.operand)
    if expr.op == "not":
        return negation(ev.truth(operand))
    value = ev.numeric(operand)
    if not is_symbolic(value):
        return -value if expr.op == "-" else +value
    if expr.op == "+":
        return value
    if isinstance(value, np.ndarray):
        return np.frompyfunc(operator.neg, 1, 1)(value)
    return -value


def _binary(ev: Evaluator, expr: rules.Binary) -> Value:
    left = ev.evaluate(expr.left)
    right = ev.evaluate(expr.right)
    op = expr.op
    if isinstance(left, list) and isinstance(right, list) and op == "+":
        return left + right
    if isinstance(left, list) and op == "*":
        return left * _concrete_count(right)
    if isinstance(right, list) and op == "*":
        return _concrete_count(left) * right
    a, b = ev.numeric(left), ev.numeric(right)
    if not is_symbolic(a) and not is_symbolic(b):
        return _concrete_arith(ev, op, a, b)
    return arithmetic(op, a, b, ev.facts.tracker)


def _concrete_count(value: Value) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    raise NotTranslatableError("a list repeated a symbolic number of times")


_ARITH: dict[str, Callable[[Any, Any], Any]] = {
    "+": operator.add,
    "-": operator.sub,
    "*": operator.mul,
    "/": operator.truediv,
    "//": operator.floordiv,
    "%": operator.mod,
    "**": operator.pow,
}


def _concrete_arith(ev: Evaluator, op: str, a: Value, b: Value) -> Value:
    if op == "/" and isinstance(b, int | float) and b == 0:
        raise EvaluationFailedError("division by zero")
    mode: Literal["raise", "ignore"] = "raise" if ev.facts.tracker.exact else "ignore"
    try:
        with np.errstate(all=mode):
            return _ARITH[op](a, b)
    except FloatingPointError as exc:
        raise EvaluationFailedError(f"not exact: {exc}") from exc
    except (ValueError, TypeError, ZeroDivisionError, OverflowError) as exc:
        raise EvaluationFailedError(str(exc)) from exc


def _compare(ev: Evaluator, expr: rules.Compare) -> Value:
    left = ev.evaluate(expr.left)
    right = ev.evaluate(expr.right)
    op = expr.op
    if op in ("==", "!="):
        found = sym_equal(ev, left, right)
        return found if op == "==" else negation(found)
    if op in ("in", "not in"):
        found = _contains(ev, right, left)
        return found if op == "in" else negation(found)
    a, b = ev.numeric(left), ev.numeric(right)
    if not is_symbolic(a) and not is_symbolic(b):
        try:
            with np.errstate(all="ignore"):
                result = {
                    "<": operator.lt,
                    "<=": operator.le,
                    ">": operator.gt,
                    ">=": operator.ge,
                }[op](a, b)
        except (TypeError, ValueError) as exc:
            raise EvaluationFailedError(str(exc)) from exc
        return bool(np.all(result))
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return all_of_array(elementwise_compare(op, a, b, ev.facts.tracker))
    return _as_condition(compare_scalars(op, a, b))


def _contains(ev: Evaluator, container: Value, item: Value) -> z3.BoolRef | bool:
    if isinstance(container, TensorRef):
        container = ev.contents(container)
    if isinstance(container, np.ndarray):
        container = list(container.reshape(-1))
    if not isinstance(container, list | tuple):
        raise EvaluationFailedError(f"`in` a {type(container).__name__}")
    return disjunction([sym_equal(ev, item, candidate) for candidate in container])


def _boolop(ev: Evaluator, expr: rules.BoolOp) -> Value:
    left = ev.truth(ev.evaluate(expr.left))
    if expr.op == "and":
        if left is False:
            return False
        if left is True:
            return ev.truth(ev.evaluate(expr.right))
        right = ev.guarded(left, lambda: ev.truth(ev.evaluate(expr.right)))
        if isinstance(right, EvaluationFailedError):
            return False
        return conjunction([left, right])
    if left is True:
        return True
    if left is False:
        return ev.truth(ev.evaluate(expr.right))
    right = ev.guarded(z3.Not(left), lambda: ev.truth(ev.evaluate(expr.right)))
    if isinstance(right, EvaluationFailedError):
        return left
    return disjunction([left, right])


def _coalesce(ev: Evaluator, expr: rules.Coalesce) -> Value:
    left = ev.evaluate(expr.left)
    return ev.evaluate(expr.right) if left is None else left


def _conditional(ev: Evaluator, expr: rules.Conditional) -> Value:
    cond = ev.truth(ev.evaluate(expr.cond))
    if cond is True:
        return ev.evaluate(expr.then)
    if cond is False:
        return ev.evaluate(expr.otherwise)
    then = ev.guarded(cond, lambda: ev.evaluate(expr.then))
    otherwise = ev.guarded(z3.Not(cond), lambda: ev.evaluate(expr.otherwise))
    if isinstance(then, EvaluationFailedError):
        return otherwise
    if isinstance(otherwise, EvaluationFailedError):
        return then
    return choose(ev, cond, then, otherwise)


def choose(ev: Evaluator, cond: z3.BoolRef, then: Value, otherwise: Value) -> Value:
    """`then if cond else otherwise` for a symbolic `cond`: numbers, truth values, lists."""
    if isinstance(then, list | tuple) and isinstance(otherwise, list | tuple):
        if len(then) != len(otherwise):
            raise NotTranslatableError("a choice between lists of different lengths")
        return [choose(ev, cond, a, b) for a, b in zip(then, otherwise, strict=True)]
    if isinstance(then, Sym) or isinstance(otherwise, Sym):
        otherwise = _same_kind(otherwise, then)
        then = _same_kind(then, otherwise)
        if isinstance(then, Sym) and isinstance(otherwise, Sym) and then.dtype == otherwise.dtype:
            return Sym(z3.If(cond, then.term, otherwise.term), then.dtype, then.tracker)
        raise NotTranslatableError("a choice between numbers of different types")
    if isinstance(then, z3.BoolRef | bool) and isinstance(otherwise, z3.BoolRef | bool):
        return z3.If(cond, then, otherwise)
    a, b = _int_term(then), _int_term(otherwise)
    if a is not None and b is not None:
        return z3.If(cond, a, b)
    if then is otherwise or (not is_symbolic(then) and equal(then, otherwise) is True):
        return then
    raise NotTranslatableError("a choice between values on a symbolic condition")


def _call(ev: Evaluator, expr: rules.Call) -> Value:
    args = [ev.evaluate(a) for a in expr.args]
    kwargs = {key: ev.evaluate(value) for key, value in expr.kwargs}
    translation = ev.functions.get(expr.func)
    if translation is not None:
        return translation(ev, args, kwargs)
    return ev.fallback(expr.func, args, kwargs)


def _constraint_call(ev: Evaluator, expr: rules.ConstraintCall) -> Value:
    args = [ev.evaluate(a) for a in expr.args]
    inner = Evaluator(
        dict(zip(expr.constraint.params, args, strict=True)),
        ev.facts,
        ev.functions,
        ev.fallback,
    )
    inner.path = ev.path
    parts: list[z3.BoolRef | bool] = []
    for condition in expr.constraint.conditions:
        found = inner.condition(condition)
        if found is False:
            return False
        parts.append(found)
    return conjunction(parts)


def _attribute(ev: Evaluator, expr: rules.Attribute) -> Value:
    obj = ev.evaluate(expr.obj)
    if not isinstance(obj, MatchedNode):
        raise EvaluationFailedError(f"`.{expr.name}` needs a node bound with `as`")
    if expr.name == "op":
        return obj.op_type
    if expr.name == "domain":
        return obj.domain
    if expr.name == "name":
        raise NotTranslatableError("a node's name")
    if expr.name in obj.attributes:
        return obj.attributes[expr.name]
    default = ir.schemas.attribute_default(obj.op_type, expr.name, obj.domain, obj.opset)
    if default is None:
        return None
    value = default.value
    if isinstance(value, tuple):
        return list(value)
    if isinstance(value, ir.Tensor):
        return np.asarray(value.numpy())
    return value


def _index(ev: Evaluator, expr: rules.Index) -> Value:
    obj = ev.evaluate(expr.obj)
    if isinstance(obj, TensorRef):
        obj = ev.contents(obj)
    if isinstance(expr.index, rules.Slice):
        bounds = []
        for part in (expr.index.start, expr.index.stop, expr.index.step):
            value = None if part is None else ev.evaluate(part)
            if is_symbolic(value):
                raise NotTranslatableError("a slice with symbolic bounds")
            bounds.append(value)
        try:
            result = obj[slice(*bounds)]
        except (TypeError, ValueError, IndexError) as exc:
            raise EvaluationFailedError(str(exc)) from exc
        return list(result) if isinstance(obj, list | tuple) else result
    index = ev.evaluate(expr.index)
    if isinstance(index, np.integer):
        index = int(index)
    if is_symbolic(index):
        return _symbolic_index(ev, obj, index)
    try:
        return obj[index]
    except IndexError:
        raise EvaluationFailedError(f"index {index!r} out of range") from None
    except (TypeError, ValueError, KeyError) as exc:
        raise EvaluationFailedError(str(exc)) from exc


def _symbolic_index(ev: Evaluator, obj: Value, index: Value) -> Value:
    position = index.as_int() if isinstance(index, Sym) else _int_term(index)
    if position is None or not isinstance(obj, list | tuple | np.ndarray):
        raise NotTranslatableError("indexing with a symbolic index")
    items = list(obj)
    if not items:
        raise EvaluationFailedError("index into an empty list")
    size = len(items)
    inside = z3.And(position >= -size, position < size)
    ev.facts.assumptions.append(z3.Implies(z3.And(*ev.path), inside) if ev.path else inside)
    result = items[-1]
    for k in reversed(range(size - 1)):
        hit = z3.Or(position == k, position == k - size)
        result = choose(ev, hit, items[k], result)
    return result


_HANDLERS: dict[type, Callable[[Evaluator, Any], Value]] = {
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
