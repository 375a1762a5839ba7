"""The rule language's built-in functions, translated for symbolic instances.

Each translation takes the evaluator and the arguments' values and returns what the engine's
built-in would, over symbolic values: facts about matched values read the instance (`rank`,
`shape`, `dtype` are the instance's own; `is_const`, `uses`, which dims are static are fresh
variables, the prover assuming nothing the engine would have to know), and number functions
work elementwise on Syms. A call whose arguments are all concrete runs the engine's own
built-in (`BUILTINS`), so the two agree by construction. A built-in with no translation for
symbolic arguments makes the rule `unsupported`, the reason naming it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import z3

import ir
from rewriter.engine import BUILTINS, EvalError
from rewriter.prove._dtypes import RNE, kind_of, sort_of
from rewriter.prove._expressions import (
    EvaluationFailedError,
    Evaluator,
    Function,
    MatchedNode,
    TensorRef,
    Value,
    choose,
    conjunction,
    disjunction,
    engine_context,
    sym_truth,
)
from rewriter.prove._indexing import integer_elements
from rewriter.prove._symbolic import (
    NotTranslatableError,
    Sym,
    as_sym_array,
    is_symbolic,
    lift,
)
from rewriter.prove._tensor import product, term

FACT_FUNCTIONS = frozenset(
    {
        "is_const",
        "is_scalar",
        "uses",
        "readers",
        "repeats_halves",
        "rank",
        "shape",
        "shape_value",
        "has_static_shape",
        "numel",
        "size",
        "dtype",
        "lower_bound",
        "upper_bound",
        "is_finite",
        "is_calibrated",
        "calibrated_range",
    }
)
"""Built-ins that read a matched value as a value (not its contents)."""


def run_engine_builtin(opset: int) -> Callable[[str, list[Value], dict[str, Value]], Value]:
    """The fallback: the engine's built-in on concrete arguments, else not translatable."""

    def run(name: str, args: list[Value], kwargs: dict[str, Value]) -> Value:
        entry = BUILTINS.get(name)
        if entry is None:
            raise NotTranslatableError(f"function `{name}` (a plugin helper)")
        if any(_is_instance_value(a) for a in [*args, *kwargs.values()]):
            raise NotTranslatableError(f"built-in `{name}` on symbolic arguments")
        try:
            with np.errstate(all="ignore"):
                return entry.implementation(engine_context(opset), *args, **kwargs)
        except (EvalError, ValueError, TypeError, IndexError, KeyError, ZeroDivisionError) as exc:
            raise EvaluationFailedError(f"`{name}`: {exc}") from exc
        except (OverflowError, FloatingPointError) as exc:
            raise EvaluationFailedError(f"`{name}`: {exc}") from exc

    return run


def _is_instance_value(value: Value) -> bool:
    if isinstance(value, TensorRef | MatchedNode):
        return True
    if isinstance(value, list | tuple):
        return any(_is_instance_value(v) for v in value)
    return is_symbolic(value)


def _concrete_or_translated(
    name: str, symbolic: Callable[[Evaluator, list[Value], dict[str, Value]], Value]
) -> Function:
    """The engine's built-in on concrete arguments, `symbolic` otherwise."""

    def translate(ev: Evaluator, args: list[Value], kwargs: dict[str, Value]) -> Value:
        if not any(_is_instance_value(a) for a in [*args, *kwargs.values()]):
            return ev.fallback(name, args, kwargs)
        return symbolic(ev, args, kwargs)

    return translate


def _untranslated(name: str) -> Function:
    def refuse(ev: Evaluator, args: list[Value], kwargs: dict[str, Value]) -> Value:
        raise NotTranslatableError(f"built-in `{name}` (about the model, not the values)")

    return refuse


# ---------------------------------------------------------------------------------------------
# Facts about matched values


def _ref(value: Value, name: str) -> TensorRef | None:
    if value is None or isinstance(value, TensorRef):
        return value
    raise EvaluationFailedError(f"`{name}` expects a value bound by the match")


def _is_const(ev: Evaluator, args: list[Value], kwargs: dict[str, Value]) -> Value:
    parts: list[z3.BoolRef | bool] = []
    for item in args:
        parts.append(item.const if isinstance(item, TensorRef) else False)
    return conjunction(parts)


def _value(ev: Evaluator, args: list[Value], kwargs: dict[str, Value]) -> Value:
    (v,) = args
    if isinstance(v, TensorRef):
        return ev.contents(v)
    return v


def _numel_of(ev: Evaluator, v: Value) -> Value:
    if isinstance(v, TensorRef):
        dims = v.tensor.shape
        found = product(dims)
        return found if isinstance(found, int) else z3.simplify(term(found))
    if isinstance(v, np.ndarray):
        return int(v.size)
    if isinstance(v, list | tuple):
        return len(v)
    if isinstance(v, Sym | int | float):
        return 1
    raise EvaluationFailedError(f"`numel` of {type(v).__name__}")


def _is_scalar(ev: Evaluator, args: list[Value], kwargs: dict[str, Value]) -> Value:
    (v,) = args
    if isinstance(v, TensorRef):
        count = _numel_of(ev, v)
        one = count == 1
        return conjunction([v.const, one])
    if isinstance(v, Sym):
        return True
    if isinstance(v, np.ndarray):
        return v.size == 1
    return ev.fallback("is_scalar", args, kwargs)


def _uses(ev: Evaluator, args: list[Value], kwargs: dict[str, Value]) -> Value:
    ref = _ref(args[0], "uses")
    if ref is None:
        return 0
    return ev.facts.fresh_int(f"uses({ref.name})", minimum=1)


def _rank(ev: Evaluator, args: list[Value], kwargs: dict[str, Value]) -> Value:
    (v,) = args
    if isinstance(v, TensorRef):
        return v.tensor.rank
    if isinstance(v, np.ndarray):
        return v.ndim
    if v is None:
        raise EvaluationFailedError("`rank` of none")
    return ev.fallback("rank", args, kwargs)


def _dim_value(dim: object) -> Value:
    if isinstance(dim, int):
        return dim
    assert isinstance(dim, z3.ArithRef), "a dim is an int or an integer term"
    simplified = z3.simplify(dim)
    return int(simplified.as_long()) if z3.is_int_value(simplified) else simplified


def _shape(ev: Evaluator, args: list[Value], kwargs: dict[str, Value]) -> Value:
    (v,) = args
    if isinstance(v, TensorRef):
        return [_dim_value(d) for d in v.tensor.shape]
    if isinstance(v, np.ndarray):
        return list(v.shape)
    if v is None:
        raise EvaluationFailedError("`shape` of none")
    return ev.fallback("shape", args, kwargs)


def _shape_value(ev: Evaluator, args: list[Value], kwargs: dict[str, Value]) -> Value:
    (v,) = args
    if isinstance(v, TensorRef):
        try:
            elements = integer_elements(v.tensor)
        except ValueError as exc:
            raise NotTranslatableError(f"`shape_value` of `{v.name}`: {exc}") from exc
        if v.tensor.rank != 1:
            raise EvaluationFailedError("`shape_value` of a value that is not 1-D")
        return [_dim_value(e) for e in elements]
    return ev.fallback("shape_value", args, kwargs)


def _has_static_shape(ev: Evaluator, args: list[Value], kwargs: dict[str, Value]) -> Value:
    ref = _ref(args[0], "has_static_shape")
    if ref is None:
        return False
    return conjunction([_static(ev, d) for d in ref.tensor.shape])


def _static(ev: Evaluator, dim: object) -> z3.BoolRef | bool:
    value = _dim_value(dim)
    if isinstance(value, int):
        return True
    return ev.facts.is_static(value)


def _numel(ev: Evaluator, args: list[Value], kwargs: dict[str, Value]) -> Value:
    (v,) = args
    if isinstance(v, TensorRef | np.ndarray):
        return _numel_of(ev, v)
    return ev.fallback("numel", args, kwargs)


def _dtype(ev: Evaluator, args: list[Value], kwargs: dict[str, Value]) -> Value:
    (v,) = args
    if isinstance(v, TensorRef):
        return v.tensor.dtype.onnx_name
    if isinstance(v, np.ndarray) and v.dtype == object:
        return _array_dtype(v).onnx_name
    if isinstance(v, Sym):
        return v.dtype.onnx_name
    return ev.fallback("dtype", args, kwargs)


def _opset(ev: Evaluator, args: list[Value], kwargs: dict[str, Value]) -> Value:
    domain = kwargs.get("domain", args[0] if args else "")
    if domain in ("", "ai.onnx"):
        return ev.facts.opset
    if not isinstance(domain, str):
        raise EvaluationFailedError("`opset` takes a domain name")
    return ev.facts.fresh_int(f"opset({domain})", minimum=0)


def _target_opset(ev: Evaluator, args: list[Value], kwargs: dict[str, Value]) -> Value:
    domain = kwargs.get("domain", args[0] if args else "")
    return ev.facts.fresh_int(f"target_opset({domain})", minimum=1)


def _bound(which: str) -> Function:
    def read(ev: Evaluator, args: list[Value], kwargs: dict[str, Value]) -> Value:
        ref = _ref(args[0], which)
        if ref is None:
            raise EvaluationFailedError(f"`{which}` of none")
        found = ev.facts.bounds.get((ref.name, which))
        if found is None:
            raise NotTranslatableError(f"built-in `{which}` of `{ref.name}`, a value it computes")
        return found

    return read


# ---------------------------------------------------------------------------------------------
# Numbers and lists


def _array_dtype(array: np.ndarray[Any, Any]) -> ir.DataType:
    for item in array.reshape(-1):
        if isinstance(item, Sym):
            return item.dtype
    raise NotTranslatableError("a symbolic list without a number type")


def _elements(ev: Evaluator, value: Value) -> list[Value]:
    """The elements of a tensor or a (flat) list, for reductions."""
    if isinstance(value, TensorRef):
        value = ev.contents(value)
    if isinstance(value, np.ndarray):
        return list(value.reshape(-1))
    if isinstance(value, list | tuple):
        found: list[Value] = []
        for item in value:
            found.extend(_elements(ev, item) if isinstance(item, list | np.ndarray) else [item])
        return found
    return [value]


def _len(ev: Evaluator, args: list[Value], kwargs: dict[str, Value]) -> Value:
    (x,) = args
    if isinstance(x, list | tuple):
        return len(x)
    if isinstance(x, TensorRef):
        if x.tensor.rank == 0:
            raise EvaluationFailedError("`len` of a scalar")
        return _dim_value(x.tensor.shape[0])
    if isinstance(x, np.ndarray):
        if x.ndim == 0:
            raise EvaluationFailedError("`len` of a scalar")
        return len(x)
    raise EvaluationFailedError(f"`len` of {type(x).__name__}")


def _truths(ev: Evaluator, value: Value) -> list[z3.BoolRef | bool]:
    return [ev.truth(item) for item in _elements(ev, value)]


def _all(ev: Evaluator, args: list[Value], kwargs: dict[str, Value]) -> Value:
    return conjunction(_truths(ev, args[0]))


def _any(ev: Evaluator, args: list[Value], kwargs: dict[str, Value]) -> Value:
    return disjunction(_truths(ev, args[0]))


def _fold_extreme(ev: Evaluator, items: list[Value], largest: bool) -> Value:
    result = items[0]
    for item in items[1:]:
        if isinstance(result, Sym) or isinstance(item, Sym):
            a = result if isinstance(result, Sym) else None
            b = item if isinstance(item, Sym) else None
            dtype = a.dtype if a is not None else b.dtype  # type: ignore[union-attr]
            left = lift(result, dtype, ev.facts.tracker)
            right = lift(item, dtype, ev.facts.tracker)
            kind = kind_of(dtype)
            better = right > left if largest else right < left
            picked = z3.If(sym_truth(better), right.term, left.term)
            if kind.is_float:
                nan = z3.Or(z3.fpIsNaN(left.term), z3.fpIsNaN(right.term))
                picked = z3.If(nan, z3.fpNaN(sort_of(dtype)), picked)
            result = Sym(picked, dtype, ev.facts.tracker)
            continue
        a, b = _as_int_term(result), _as_int_term(item)
        result = z3.If(b > a, b, a) if largest else z3.If(b < a, b, a)
    return result


def _as_int_term(value: Value) -> z3.ArithRef:
    if isinstance(value, z3.ArithRef):
        return value
    if isinstance(value, int | np.integer) and not isinstance(value, bool):
        return z3.IntVal(int(value))
    raise NotTranslatableError(f"`min`/`max` of {type(value).__name__}")


def _extreme(largest: bool) -> Function:
    def reduce(ev: Evaluator, args: list[Value], kwargs: dict[str, Value]) -> Value:
        items = [e for a in args for e in _elements(ev, a)]
        if not items:
            raise EvaluationFailedError("`min`/`max` of nothing")
        return _fold_extreme(ev, items, largest)

    return reduce


def _sum_or_product(multiply: bool) -> Function:
    def reduce(ev: Evaluator, args: list[Value], kwargs: dict[str, Value]) -> Value:
        items = [e for a in args for e in _elements(ev, a)]
        if any(isinstance(i, Sym) for i in items):
            raise NotTranslatableError("`sum`/`prod` of symbolic tensor elements")
        result: Value = 1 if multiply else 0
        for item in items:
            value = _as_int_term(item) if not isinstance(item, z3.BoolRef) else z3.If(item, 1, 0)
            result = result * value if multiply else result + value
        return z3.simplify(result) if isinstance(result, z3.ExprRef) else result

    return reduce


def _one_element(ev: Evaluator, value: Value, name: str) -> Value:
    if isinstance(value, TensorRef):
        value = ev.contents(value)
    if isinstance(value, np.ndarray):
        if value.size != 1:
            raise EvaluationFailedError(f"`{name}` of a tensor of {value.size} elements")
        return value.reshape(-1)[0]
    if isinstance(value, list | tuple):
        if len(value) != 1:
            raise EvaluationFailedError(f"`{name}` of a list")
        return value[0]
    return value


def _float(ev: Evaluator, args: list[Value], kwargs: dict[str, Value]) -> Value:
    item = _one_element(ev, args[0], "float")
    if isinstance(item, Sym):
        return item.as_double()
    if isinstance(item, z3.ArithRef):
        return lift(item, ir.DataType.DOUBLE, ev.facts.tracker)
    return float(item)


def _int(ev: Evaluator, args: list[Value], kwargs: dict[str, Value]) -> Value:
    item = _one_element(ev, args[0], "int")
    if isinstance(item, Sym):
        return item.as_int()
    if isinstance(item, z3.ArithRef):
        return item
    return int(item)


def _normalize_axis(ev: Evaluator, args: list[Value], kwargs: dict[str, Value]) -> Value:
    axis, rank = args
    if is_symbolic(rank):
        raise NotTranslatableError("`normalize_axis` with a symbolic rank")
    count = int(rank)

    def one(value: Value) -> Value:
        position = value.as_int() if isinstance(value, Sym) else _as_int_term(value)
        inside = z3.And(position >= -count, position < count)
        ev.facts.assumptions.append(z3.Implies(z3.And(*ev.path), inside) if ev.path else inside)
        return z3.simplify(z3.If(position < 0, position + count, position))

    if isinstance(axis, TensorRef):
        axis = ev.contents(axis)
    if isinstance(axis, list | tuple | np.ndarray):
        return [one(a) for a in _elements(ev, axis)]
    return one(axis)


def _static_or(ev: Evaluator, args: list[Value], kwargs: dict[str, Value]) -> Value:
    dims, fill = args
    if not isinstance(dims, list | tuple):
        raise EvaluationFailedError("`static_or` takes a shape")
    return [d if isinstance(d, int) else choose(ev, ev.facts.is_static(d), d, fill) for d in dims]


def _count_unknown(ev: Evaluator, args: list[Value], kwargs: dict[str, Value]) -> Value:
    (dims,) = args
    if not isinstance(dims, list | tuple):
        raise EvaluationFailedError("`count_unknown` takes a shape")
    count: Value = 0
    for d in dims:
        if not isinstance(d, int):
            count = count + z3.If(ev.facts.is_static(d), 0, 1)
    return z3.simplify(count) if isinstance(count, z3.ExprRef) else count


def _elementwise(name: str, compute: Callable[[Sym], Sym]) -> Function:
    def apply(ev: Evaluator, args: list[Value], kwargs: dict[str, Value]) -> Value:
        (x,) = args
        if isinstance(x, TensorRef):
            x = ev.contents(x)
        if isinstance(x, Sym):
            return compute(x)
        if isinstance(x, np.ndarray):
            items = as_sym_array(x, ev.facts.tracker)
            return np.frompyfunc(compute, 1, 1)(items)
        raise NotTranslatableError(f"built-in `{name}` of {type(x).__name__}")

    return _concrete_or_translated(name, apply)


def _float_kind(x: Sym, name: str) -> None:
    if not kind_of(x.dtype).is_float:
        raise NotTranslatableError(f"built-in `{name}` of a symbolic integer")


def _sqrt(x: Sym) -> Sym:
    _float_kind(x, "sqrt")
    return Sym(z3.fpSqrt(RNE, x.term), x.dtype, x.tracker)


def _signbit(x: Sym) -> Sym:
    kind = kind_of(x.dtype)
    if kind.is_float:
        return Sym(z3.fpIsNegative(x.term), ir.DataType.BOOL, x.tracker)
    if kind.is_integer and kind.signed:
        return Sym(x.term < 0, ir.DataType.BOOL, x.tracker)
    return Sym(z3.BoolVal(False), ir.DataType.BOOL, x.tracker)


def _isfinite(x: Sym) -> Sym:
    if not kind_of(x.dtype).is_float:
        return Sym(z3.BoolVal(True), ir.DataType.BOOL, x.tracker)
    finite = z3.Not(z3.Or(z3.fpIsInf(x.term), z3.fpIsNaN(x.term)))
    return Sym(finite, ir.DataType.BOOL, x.tracker)


def _isnan(x: Sym) -> Sym:
    if not kind_of(x.dtype).is_float:
        return Sym(z3.BoolVal(False), ir.DataType.BOOL, x.tracker)
    return Sym(z3.fpIsNaN(x.term), ir.DataType.BOOL, x.tracker)


def _dtype_argument(value: Value) -> ir.DataType:
    if isinstance(value, str):
        return ir.DataType.from_name(value)
    if isinstance(value, int | np.integer) and not isinstance(value, bool):
        return ir.DataType(int(value))
    raise NotTranslatableError("a dtype that is not a name")


def _cast(ev: Evaluator, args: list[Value], kwargs: dict[str, Value]) -> Value:
    x, dtype = args[0], kwargs.get("dtype", args[1] if len(args) > 1 else None)
    target = _dtype_argument(dtype)
    if isinstance(x, TensorRef):
        x = ev.contents(x)
    if isinstance(x, Sym):
        return x.to(target)
    if isinstance(x, np.ndarray):
        items = as_sym_array(x, ev.facts.tracker)
        return np.frompyfunc(lambda s: s.to(target), 1, 1)(items)
    if isinstance(x, z3.ArithRef):
        return lift(x, target, ev.facts.tracker)
    raise NotTranslatableError(f"`cast` of {type(x).__name__}")


def _const(ev: Evaluator, args: list[Value], kwargs: dict[str, Value]) -> Value:
    x, dtype = args[0], kwargs.get("dtype", args[1] if len(args) > 1 else None)
    target = _dtype_argument(dtype)
    if isinstance(x, TensorRef):
        x = ev.contents(x)
    tracker = ev.facts.tracker
    if isinstance(x, list | tuple):
        items = np.empty(len(x), dtype=object)
        for k, item in enumerate(x):
            if isinstance(item, list | tuple):
                raise NotTranslatableError("`const` of nested symbolic lists")
            items[k] = lift(item, target, tracker)
        return items
    if isinstance(x, np.ndarray):
        return np.frompyfunc(lambda s: lift(s, target, tracker), 1, 1)(
            as_sym_array(x, tracker) if x.dtype != object else x
        )
    return lift(x, target, tracker)


def _like(fill: int) -> Function:
    def make(ev: Evaluator, args: list[Value], kwargs: dict[str, Value]) -> Value:
        (x,) = args
        if isinstance(x, TensorRef):
            x = ev.contents(x)
        if isinstance(x, np.ndarray) and x.dtype == object:
            dtype = _array_dtype(x)
            return np.full(x.shape, fill, dtype=ir.numpy_dtype(dtype))
        if isinstance(x, Sym):
            return np.full((), fill, dtype=ir.numpy_dtype(x.dtype))
        raise NotTranslatableError("`zeros_like` of a symbolic value")

    return make


def _where(ev: Evaluator, args: list[Value], kwargs: dict[str, Value]) -> Value:
    cond, a, b = (ev.numeric(x) for x in args)

    def pick(c: Value, x: Value, y: Value) -> Value:
        test = ev.truth(c)
        if isinstance(test, bool):
            return x if test else y
        return choose(ev, test, x, y)

    return np.frompyfunc(pick, 3, 1)(cond, a, b)


def _as_object_array(value: Value) -> Value:
    """A lone Sym as a 0-d object array: the engine's tensor built-ins take arrays."""
    if isinstance(value, Sym):
        array = np.empty((), dtype=object)
        array[()] = value
        return array
    return value


def _shape_function(name: str) -> Function:
    """A built-in that only moves elements: the engine's own code runs on object arrays."""

    def run(ev: Evaluator, args: list[Value], kwargs: dict[str, Value]) -> Value:
        values = [_as_object_array(ev.contents(a) if isinstance(a, TensorRef) else a) for a in args]
        entry = BUILTINS[name]
        try:
            result = entry.implementation(engine_context(ev.facts.opset), *values, **kwargs)
        except (EvalError, ValueError, TypeError, IndexError) as exc:
            raise NotTranslatableError(f"built-in `{name}` on symbolic arguments: {exc}") from exc
        return result

    return run


FUNCTIONS: dict[str, Function] = {
    "is_const": _is_const,
    "value": _value,
    "is_scalar": _is_scalar,
    "uses": _uses,
    "readers": _untranslated("readers"),
    "repeats_halves": _untranslated("repeats_halves"),
    "rank": _rank,
    "shape": _shape,
    "shape_value": _shape_value,
    "has_static_shape": _has_static_shape,
    "numel": _numel,
    "size": _numel,
    "dtype": _dtype,
    "opset": _opset,
    "target_opset": _target_opset,
    "lower_bound": _bound("lower_bound"),
    "upper_bound": _bound("upper_bound"),
    "is_finite": _bound("is_finite"),
    "is_calibrated": _untranslated("is_calibrated"),
    "calibrated_range": _untranslated("calibrated_range"),
    "len": _len,
    "all": _concrete_or_translated("all", _all),
    "any": _concrete_or_translated("any", _any),
    "min": _concrete_or_translated("min", _extreme(largest=False)),
    "max": _concrete_or_translated("max", _extreme(largest=True)),
    "sum": _concrete_or_translated("sum", _sum_or_product(multiply=False)),
    "prod": _concrete_or_translated("prod", _sum_or_product(multiply=True)),
    "float": _concrete_or_translated("float", _float),
    "int": _concrete_or_translated("int", _int),
    "normalize_axis": _concrete_or_translated("normalize_axis", _normalize_axis),
    "static_or": _concrete_or_translated("static_or", _static_or),
    "count_unknown": _concrete_or_translated("count_unknown", _count_unknown),
    "sqrt": _elementwise("sqrt", _sqrt),
    "abs": _elementwise("abs", abs),
    "signbit": _elementwise("signbit", _signbit),
    "isfinite": _elementwise("isfinite", _isfinite),
    "isnan": _elementwise("isnan", _isnan),
    "cast": _concrete_or_translated("cast", _cast),
    "const": _concrete_or_translated("const", _const),
    "zeros_like": _concrete_or_translated("zeros_like", _like(0)),
    "ones_like": _concrete_or_translated("ones_like", _like(1)),
    "where": _concrete_or_translated("where", _where),
    "reshape": _concrete_or_translated("reshape", _shape_function("reshape")),
    "transpose": _concrete_or_translated("transpose", _shape_function("transpose")),
    "concat": _concrete_or_translated("concat", _shape_function("concat")),
    "stack": _concrete_or_translated("stack", _shape_function("stack")),
    "expand_dims": _concrete_or_translated("expand_dims", _shape_function("expand_dims")),
    "squeeze": _concrete_or_translated("squeeze", _shape_function("squeeze")),
}
"""Translations by built-in name; every other built-in runs only on concrete arguments."""
