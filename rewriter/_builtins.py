"""The built-in functions of the rule language, evaluated with numpy.

Each takes the evaluation context first. Fact functions (`rank`, `shape`, `dtype`, ...)
return `UNKNOWN` for facts that are not known; numeric functions take constants (a matched
value stands for its constant contents) and return numpy arrays or Python numbers.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

import ir
from rewriter import _facts
from rewriter._eval import UNKNOWN, EvalContext, EvalError, equal, numeric, quiet_numpy


def _value_arg(value: Any, fn: str) -> ir.Value | None:
    if value is None or isinstance(value, ir.Value):
        return value
    raise EvalError(f"`{fn}` expects a value bound by the match, got {type(value).__name__}")


def _np_dtype(name: Any) -> np.dtype[Any]:
    if isinstance(name, ir.DataType):
        return ir.numpy_dtype(name)
    if isinstance(name, int | np.integer) and not isinstance(name, bool):
        # An ONNX dtype number, as in Cast's `to` attribute.
        try:
            return ir.numpy_dtype(ir.DataType(int(name)))
        except ValueError:
            raise EvalError(f"unknown ONNX dtype number {name}") from None
    if not isinstance(name, str):
        raise EvalError(f'a dtype name such as "float" is expected, got {name!r}')
    try:
        return ir.numpy_dtype(ir.DataType.from_name(name))
    except ValueError:
        raise EvalError(f"unknown dtype `{name}`") from None


def _array(value: Any, fn: str) -> Any:
    result = numeric(value)
    if result is UNKNOWN:
        return UNKNOWN
    return np.asarray(result)


def _int_list(value: Any, fn: str) -> list[int]:
    array = np.asarray(numeric(value)).reshape(-1)
    return [int(v) for v in array]


# facts ---------------------------------------------------------------------------------------


def is_const(ctx: EvalContext, *values: Any) -> bool:
    """`is_const(v, ...)`: every argument is a constant (none is not)."""
    return all(isinstance(v, ir.Value) and _facts.is_const(v) for v in values)


def value(ctx: EvalContext, v: Any) -> Any:
    """`value(v)`: the constant's contents (unknown when not constant)."""
    if isinstance(v, ir.Value):
        array = _facts.const_array(v)
        return UNKNOWN if array is None else array
    return v


def is_scalar(ctx: EvalContext, v: Any) -> bool:
    """`is_scalar(v)`: a constant with exactly one element, any rank."""
    if not isinstance(v, ir.Value):
        return isinstance(v, int | float) or (isinstance(v, np.ndarray) and v.size == 1)
    size = _facts.const_size(v)
    return size == 1


def uses(ctx: EvalContext, v: Any) -> Any:
    """`uses(v)`: node uses plus graph-output slots."""
    val = _value_arg(v, "uses")
    return 0 if val is None else _facts.count_uses(val)


def lower_bound(ctx: EvalContext, v: Any) -> Any:
    """`lower_bound(v)`: the smallest element v can hold, from its producers (or unknown)."""
    if isinstance(v, np.ndarray | list | int | float):
        array = np.asarray(v)
        return UNKNOWN if array.size == 0 else float(np.min(array))
    val = _value_arg(v, "lower_bound")
    if val is None:
        return UNKNOWN
    found = _facts.lower_bound(val)
    return UNKNOWN if found is None else found


def rank(ctx: EvalContext, v: Any) -> Any:
    """`rank(v)`: number of dimensions (unknown when the rank is unknown)."""
    if isinstance(v, np.ndarray):
        return v.ndim
    val = _value_arg(v, "rank")
    if val is None:
        return UNKNOWN
    shape = _facts.shape_of(val)
    return UNKNOWN if shape is None else len(shape)


def shape(ctx: EvalContext, v: Any) -> Any:
    """`shape(v)`: list of ints, symbol strings, or unknown dims."""
    if isinstance(v, np.ndarray):
        return list(v.shape)
    val = _value_arg(v, "shape")
    if val is None:
        return UNKNOWN
    dims = _facts.shape_of(val)
    return UNKNOWN if dims is None else [UNKNOWN if d is None else d for d in dims]


def has_static_shape(ctx: EvalContext, v: Any) -> Any:
    """`has_static_shape(v)`: every dimension is a known int."""
    val = _value_arg(v, "has_static_shape")
    if val is None:
        return False
    dims = _facts.shape_of(val)
    if dims is None:
        return False
    return all(isinstance(d, int) for d in dims)


def numel(ctx: EvalContext, v: Any) -> Any:
    """`numel(v)`: static element count (unknown when a dim is not static)."""
    if isinstance(v, np.ndarray):
        return int(v.size)
    val = _value_arg(v, "numel")
    if val is None:
        return UNKNOWN
    dims = _facts.shape_of(val)
    if dims is None or not all(isinstance(d, int) for d in dims):
        return UNKNOWN
    return math.prod(int(d) for d in dims if isinstance(d, int))


def dtype(ctx: EvalContext, v: Any) -> Any:
    """`dtype(v)`: ONNX dtype name ("float", "int64", ...) or unknown."""
    if isinstance(v, np.ndarray):
        return ir.DataType.from_numpy(v.dtype).onnx_name
    val = _value_arg(v, "dtype")
    if val is None:
        return UNKNOWN
    found = _facts.dtype_of(val)
    return UNKNOWN if found is None else found.onnx_name


def opset(ctx: EvalContext, domain: str = "") -> Any:
    """`opset(domain = "")`: the model's opset version for a domain (0 when not imported)."""
    key = ir.schemas.normalize_domain(domain)
    version = ctx.opset_imports.get(key)
    if version is None and key == "":
        version = ctx.opset_imports.get("ai.onnx")
    return 0 if version is None else version


def target_opset(ctx: EvalContext, domain: str = "") -> Any:
    """`target_opset(domain = "")`: the opset a `--target-opset` conversion heads for.

    Without a conversion it is the model's own opset, so rules can say
    `where target_opset() < 17` to decompose only when converting down.
    """
    key = ir.schemas.normalize_domain(domain)
    if key in ctx.target_opsets:
        return ctx.target_opsets[key]
    return opset(ctx, domain)


# generic -------------------------------------------------------------------------------------


def length(ctx: EvalContext, v: Any) -> Any:
    """`len(x)`: length of a list or first dimension of a tensor."""
    if v is UNKNOWN:
        return UNKNOWN
    if isinstance(v, list | tuple | str):
        return len(v)
    return len(np.asarray(numeric(v)))


def absolute(ctx: EvalContext, v: Any) -> Any:
    """`abs(x)`."""
    x = numeric(v)
    return UNKNOWN if x is UNKNOWN else np.abs(x) if isinstance(x, np.ndarray) else abs(x)


def _reduce(fn: Callable[..., Any], name: str) -> Callable[..., Any]:
    def reducer(ctx: EvalContext, *args: Any) -> Any:
        items = args[0] if len(args) == 1 else list(args)
        # Several arguments reduce over all their elements: tensors of different shapes (a
        # [1] and a scalar constant) are not one array.
        parts = [numeric(item) for item in args]
        if any(part is UNKNOWN for part in parts):
            return UNKNOWN
        if len(parts) == 1:
            array = np.asarray(parts[0])
        else:
            array = np.concatenate([np.asarray(part).reshape(-1) for part in parts])
        result = fn(array)
        if isinstance(items, list) and not any(isinstance(i, np.ndarray) for i in items):
            # Plain numbers and lists (dims, literals) give a plain number back.
            return result.item() if isinstance(result, np.generic) else result
        return np.asarray(result, dtype=array.dtype)  # tensors keep their dtype

    reducer.__name__ = name
    reducer.__doc__ = f"`{name}(x)` or `{name}(a, b, ...)`."
    return reducer


def all_close(ctx: EvalContext, a: Any, b: Any, rtol: float = 1e-5, atol: float = 1e-8) -> Any:
    """`all_close(a, b, rtol, atol)`: numpy.allclose over constants, computed in double.

    In the constants' own dtype, comparing a float16 value with a large float would overflow
    to infinity on both sides of numpy's test and hold (`all_close(k, 3.4e38)` for k = -1).
    """
    x = numeric(a)
    y = numeric(b)
    if x is UNKNOWN or y is UNKNOWN:
        return UNKNOWN
    return bool(np.allclose(_as_double(x), _as_double(y), rtol=rtol, atol=atol))


def _as_double(x: Any) -> Any:
    array = np.asarray(x)
    return array.astype(np.float64) if array.dtype.kind in "fiub" else array


def normalize_axis(ctx: EvalContext, axis: Any, rank_: Any) -> Any:
    """`normalize_axis(axis, rank)`: a negative axis counted from the end."""
    if axis is UNKNOWN or rank_ is UNKNOWN:
        return UNKNOWN
    if isinstance(axis, list | tuple | np.ndarray):
        return [normalize_axis(ctx, a, rank_) for a in np.asarray(axis).reshape(-1).tolist()]
    a = int(axis)
    r = int(rank_)
    if not -r <= a < r:
        raise EvalError(f"axis {a} is out of range for rank {r}")
    return a + r if a < 0 else a


def to_float(ctx: EvalContext, v: Any) -> Any:
    """`float(x)`."""
    x = numeric(v)
    return (
        UNKNOWN
        if x is UNKNOWN
        else float(np.asarray(x).reshape(-1)[0])
        if np.size(x) == 1
        else float(x)
    )


def to_int(ctx: EvalContext, v: Any) -> Any:
    """`int(x)`."""
    x = numeric(v)
    return (
        UNKNOWN
        if x is UNKNOWN
        else int(np.asarray(x).reshape(-1)[0])
        if np.size(x) == 1
        else int(x)
    )


def any_(ctx: EvalContext, v: Any) -> Any:
    """`any(x)`: some element is true."""
    x = numeric(v)
    return UNKNOWN if x is UNKNOWN else bool(np.any(x))


def all_(ctx: EvalContext, v: Any) -> Any:
    """`all(x)`: every element is true."""
    x = numeric(v)
    return UNKNOWN if x is UNKNOWN else bool(np.all(x))


def sort(ctx: EvalContext, x: Any) -> Any:
    """`sort(x)`: the elements ascending, as a list (ints stay ints)."""
    if x is UNKNOWN:
        return UNKNOWN
    return _plain_list(np.sort(np.asarray(numeric(x)).reshape(-1)))


def setdiff(ctx: EvalContext, a: Any, b: Any) -> Any:
    """`setdiff(a, b)`: the elements of a that are not in b, ascending, as a list."""
    if a is UNKNOWN or b is UNKNOWN:
        return UNKNOWN
    left = np.asarray(numeric(a)).reshape(-1)
    right = np.asarray(numeric(b)).reshape(-1)
    return _plain_list(np.setdiff1d(left, right))


def _plain_list(array: np.ndarray[Any, Any]) -> list[Any]:
    return [int(v) if array.dtype.kind in "iub" else float(v) for v in array.tolist()]


def range_(ctx: EvalContext, *args: Any) -> Any:
    """`range(stop)` / `range(start, stop[, step])`: a list of ints."""
    if any(a is UNKNOWN for a in args):
        return UNKNOWN
    return list(range(*[int(a) for a in args]))


# tensors -------------------------------------------------------------------------------------


def _unary_np(fn: Callable[[Any], Any], name: str) -> Callable[..., Any]:
    def apply(ctx: EvalContext, v: Any) -> Any:
        x = _array(v, name)
        if x is UNKNOWN:
            return UNKNOWN
        with quiet_numpy():
            return fn(x)

    apply.__name__ = name
    apply.__doc__ = f"`{name}(x)`, elementwise."
    return apply


def _erf(x: Any) -> Any:
    flat = np.asarray(x, dtype=np.float64).reshape(-1)
    out = np.array([math.erf(float(v)) for v in flat]).reshape(np.shape(x))
    return out.astype(np.asarray(x).dtype if np.asarray(x).dtype.kind == "f" else np.float64)


def reciprocal(x: Any) -> Any:
    """1 / x, keeping the dtype."""
    return np.asarray(1, dtype=x.dtype if x.dtype.kind == "f" else np.float64) / x


def reshape(ctx: EvalContext, v: Any, new_shape: Any) -> Any:
    """`reshape(x, shape)`."""
    x = _array(v, "reshape")
    return UNKNOWN if x is UNKNOWN else np.reshape(x, _int_list(new_shape, "reshape"))


def transpose(ctx: EvalContext, v: Any, perm: Any = None) -> Any:
    """`transpose(x, perm)` (reverses axes when perm is omitted)."""
    x = _array(v, "transpose")
    if x is UNKNOWN:
        return UNKNOWN
    return np.transpose(x, None if perm is None else _int_list(perm, "transpose"))


def concat(ctx: EvalContext, items: Any, axis: int = 0) -> Any:
    """`concat([a, b, ...], axis)`."""
    arrays = [_array(v, "concat") for v in items]
    if any(a is UNKNOWN for a in arrays):
        return UNKNOWN
    return np.concatenate(arrays, axis=int(axis))


def stack(ctx: EvalContext, items: Any, axis: int = 0) -> Any:
    """`stack([a, b, ...], axis)`."""
    arrays = [_array(v, "stack") for v in items]
    if any(a is UNKNOWN for a in arrays):
        return UNKNOWN
    return np.stack(arrays, axis=int(axis))


def expand_dims(ctx: EvalContext, v: Any, axis: Any) -> Any:
    """`expand_dims(x, axis)` (axis may be a list)."""
    x = _array(v, "expand_dims")
    if x is UNKNOWN:
        return UNKNOWN
    return np.expand_dims(x, tuple(_int_list(axis, "expand_dims")))


def squeeze(ctx: EvalContext, v: Any, axis: Any = None) -> Any:
    """`squeeze(x, axis)`."""
    x = _array(v, "squeeze")
    if x is UNKNOWN:
        return UNKNOWN
    return np.squeeze(x, None if axis is None else tuple(_int_list(axis, "squeeze")))


def zeros(ctx: EvalContext, new_shape: Any, dtype_: str = "float") -> Any:
    """`zeros(shape, dtype = "float")`."""
    return np.zeros(_int_list(new_shape, "zeros"), dtype=_np_dtype(dtype_))


def ones(ctx: EvalContext, new_shape: Any, dtype_: str = "float") -> Any:
    """`ones(shape, dtype = "float")`."""
    return np.ones(_int_list(new_shape, "ones"), dtype=_np_dtype(dtype_))


def full(ctx: EvalContext, new_shape: Any, fill: Any, dtype_: str = "float") -> Any:
    """`full(shape, value, dtype = "float")`."""
    return np.full(_int_list(new_shape, "full"), fill, dtype=_np_dtype(dtype_))


def zeros_like(ctx: EvalContext, v: Any) -> Any:
    """`zeros_like(x)`."""
    x = _array(v, "zeros_like")
    return UNKNOWN if x is UNKNOWN else np.zeros_like(x)


def ones_like(ctx: EvalContext, v: Any) -> Any:
    """`ones_like(x)`."""
    x = _array(v, "ones_like")
    return UNKNOWN if x is UNKNOWN else np.ones_like(x)


def eye(ctx: EvalContext, n: Any, dtype_: str = "float") -> Any:
    """`eye(n, dtype = "float")`."""
    return np.eye(int(n), dtype=_np_dtype(dtype_))


def one_hot(ctx: EvalContext, indices: Any, depth: Any, dtype_: str = "float") -> Any:
    """`one_hot(indices, depth, dtype = "float")`: a new last axis of size depth."""
    idx = np.asarray(numeric(indices)).astype(np.int64)
    return (idx[..., None] == np.arange(int(depth))).astype(_np_dtype(dtype_))


def take(ctx: EvalContext, v: Any, indices: Any, axis: Any = None) -> Any:
    """`take(a, indices, axis)`; `take(p1, p2)` composes two permutations."""
    x = _array(v, "take")
    idx = _array(indices, "take")
    if x is UNKNOWN or idx is UNKNOWN:
        return UNKNOWN
    result = np.take(x, idx.astype(np.int64), axis=None if axis is None else int(axis))
    if isinstance(v, list) and isinstance(indices, list):
        return [int(i) for i in result.tolist()]
    return result


def cast(ctx: EvalContext, v: Any, dtype_: Any) -> Any:
    """`cast(x, "float16")`."""
    x = _array(v, "cast")
    if x is UNKNOWN:
        return UNKNOWN
    with quiet_numpy():
        return x.astype(_np_dtype(dtype_))


def const(ctx: EvalContext, v: Any, dtype_: Any) -> Any:
    """`const(v, dtype)`: a tensor of exactly that dtype (for literal node inputs)."""
    x = _array(v, "const")
    return UNKNOWN if x is UNKNOWN else np.asarray(x, dtype=_np_dtype(dtype_))


def arange(ctx: EvalContext, *args: Any, dtype_: str = "int64") -> Any:
    """`arange(stop)` / `arange(start, stop, step)`."""
    return np.arange(*[numeric(a) for a in args], dtype=_np_dtype(dtype_))


def flip(ctx: EvalContext, v: Any, axis: Any = None) -> Any:
    """`flip(x, axis)`."""
    x = _array(v, "flip")
    if x is UNKNOWN:
        return UNKNOWN
    return np.flip(x, None if axis is None else tuple(_int_list(axis, "flip")))


def pad(ctx: EvalContext, v: Any, pads: Any, fill: Any = 0) -> Any:
    """`pad(x, pads, value)` with ONNX-style pads [b1, b2, ..., e1, e2, ...]."""
    x = _array(v, "pad")
    if x is UNKNOWN:
        return UNKNOWN
    p = _int_list(pads, "pad")
    half = len(p) // 2
    widths = list(zip(p[:half], p[half:], strict=False))
    return np.pad(x, widths, constant_values=fill)


def clip(ctx: EvalContext, v: Any, lo: Any = None, hi: Any = None) -> Any:
    """`clip(x, lo, hi)`."""
    x = _array(v, "clip")
    return UNKNOWN if x is UNKNOWN else np.clip(x, lo, hi)


def where(ctx: EvalContext, cond: Any, a: Any, b: Any) -> Any:
    """`where(cond, a, b)`, elementwise."""
    c = _array(cond, "where")
    x = _array(a, "where")
    y = _array(b, "where")
    if c is UNKNOWN or x is UNKNOWN or y is UNKNOWN:
        return UNKNOWN
    return np.where(c, x, y)


def same(ctx: EvalContext, a: Any, b: Any) -> Any:
    """`same(a, b)`: three-valued equality as a function (handy in list comprehensions)."""
    return equal(a, b)


def static_or(ctx: EvalContext, dims: Any, fill: Any) -> Any:
    """`static_or(shape(y), -1)`: the shape with unknown and symbolic dims replaced by fill."""
    if dims is UNKNOWN:
        return UNKNOWN
    return [_static_dim(d, fill) for d in dims]


def _static_dim(dim: Any, fill: Any) -> Any:
    return dim if isinstance(dim, int | np.integer) and not isinstance(dim, bool) else fill


def count_unknown(ctx: EvalContext, dims: Any) -> Any:
    """`count_unknown(shape(y))`: how many dims are unknown or symbolic."""
    if dims is UNKNOWN:
        return UNKNOWN
    return sum(1 for d in dims if not (isinstance(d, int | np.integer) and not isinstance(d, bool)))


def reshape_dims(ctx: EvalContext, target: Any, source: Any) -> Any:
    """`reshape_dims(shape(y), shape(x))`: the shape input of a Reshape from x to y.

    Static dims are kept; a symbolic dim equal to x's dim at the same index becomes 0 (copy,
    with allowzero 0); at most one remaining dim becomes -1. None when the target has a 0 dim
    or more than one dim is left unknown.
    """
    if target is UNKNOWN or source is UNKNOWN:
        return UNKNOWN
    dims: list[int] = []
    inferred = 0
    for i, dim in enumerate(target):
        if isinstance(dim, int | np.integer) and not isinstance(dim, bool):
            if dim == 0:
                return None  # 0 would mean "copy" without allowzero
            dims.append(int(dim))
        elif isinstance(dim, str) and i < len(source) and source[i] == dim:
            dims.append(0)
        else:
            inferred += 1
            dims.append(-1)
    return dims if inferred <= 1 else None


def _adapt_dtype_kw(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Accept `dtype = ...` from rules for functions whose parameter is `dtype_`."""

    def call(ctx: EvalContext, *args: Any, **kwargs: Any) -> Any:
        if "dtype" in kwargs:
            kwargs["dtype_"] = kwargs.pop("dtype")
        return fn(ctx, *args, **kwargs)

    call.__name__ = fn.__name__
    call.__doc__ = fn.__doc__
    return call


BUILTINS: dict[str, Callable[..., Any]] = {
    # facts
    "is_const": is_const,
    "value": value,
    "is_scalar": is_scalar,
    "uses": uses,
    "lower_bound": lower_bound,
    "rank": rank,
    "shape": shape,
    "has_static_shape": has_static_shape,
    "numel": numel,
    "size": numel,
    "dtype": dtype,
    "opset": opset,
    "target_opset": target_opset,
    # generic
    "len": length,
    "abs": absolute,
    "min": _reduce(np.min, "min"),
    "max": _reduce(np.max, "max"),
    "prod": _reduce(np.prod, "prod"),
    "sum": _reduce(np.sum, "sum"),
    "all_close": all_close,
    "normalize_axis": normalize_axis,
    "float": to_float,
    "int": to_int,
    "any": any_,
    "all": all_,
    "range": range_,
    "sort": sort,
    "setdiff": setdiff,
    "same": same,
    "static_or": static_or,
    "count_unknown": count_unknown,
    "reshape_dims": reshape_dims,
    # elementwise math
    "sqrt": _unary_np(np.sqrt, "sqrt"),
    "exp": _unary_np(np.exp, "exp"),
    "log": _unary_np(np.log, "log"),
    "sign": _unary_np(np.sign, "sign"),
    "signbit": _unary_np(np.signbit, "signbit"),
    "tanh": _unary_np(np.tanh, "tanh"),
    "erf": _unary_np(_erf, "erf"),
    "reciprocal": _unary_np(reciprocal, "reciprocal"),
    "clip": clip,
    "where": where,
    # tensors
    "reshape": reshape,
    "transpose": transpose,
    "concat": concat,
    "stack": stack,
    "expand_dims": expand_dims,
    "squeeze": squeeze,
    "zeros": _adapt_dtype_kw(zeros),
    "ones": _adapt_dtype_kw(ones),
    "full": _adapt_dtype_kw(full),
    "zeros_like": zeros_like,
    "ones_like": ones_like,
    "eye": _adapt_dtype_kw(eye),
    "one_hot": _adapt_dtype_kw(one_hot),
    "take": take,
    "cast": cast,
    "const": const,
    "arange": _adapt_dtype_kw(arange),
    "flip": flip,
    "pad": pad,
}
