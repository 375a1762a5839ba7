"""Built-ins over numbers, lists and dims: reductions, comparisons, elementwise math.

Numeric functions take constants (a matched value stands for its constant contents) and
return numpy arrays or Python numbers; an unknown argument gives an unknown result.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from rewriter.engine._builtins._registry import Builtin, builtin
from rewriter.engine._values import UNKNOWN, EvalContext, EvalError, numeric, quiet_numpy


def _array(value: Any) -> Any:
    result = numeric(value)
    return UNKNOWN if result is UNKNOWN else np.asarray(result)


def _is_int(value: Any) -> bool:
    return isinstance(value, int | np.integer) and not isinstance(value, bool)


@builtin("len", "length of a list, or the first dim of a tensor")
def length(ctx: EvalContext, x: Any) -> Any:
    """Length of a list or first dimension of a tensor."""
    if x is UNKNOWN:
        return UNKNOWN
    if isinstance(x, list | tuple | str):
        return len(x)
    return len(np.asarray(numeric(x)))


@builtin("abs", "absolute value, elementwise")
def absolute(ctx: EvalContext, x: Any) -> Any:
    """Absolute value."""
    found = numeric(x)
    if found is UNKNOWN:
        return UNKNOWN
    return np.abs(found) if isinstance(found, np.ndarray) else abs(found)


def _reduction(fn: Callable[..., Any], name: str, summary: str) -> Builtin:
    def reduce(ctx: EvalContext, x: Any, *more: Any) -> Any:
        args = (x, *more)
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
        items = x if len(args) == 1 else list(args)
        if isinstance(items, list) and not any(isinstance(i, np.ndarray) for i in items):
            # Plain numbers and lists (dims, literals) give a plain number back.
            return result.item() if isinstance(result, np.generic) else result
        return np.asarray(result, dtype=array.dtype)  # tensors keep their dtype

    reduce.__doc__ = f"`{name}(x)` or `{name}(a, b, ...)`."
    return builtin(name, summary)(reduce)


minimum = _reduction(np.min, "min", "smallest element of one list or tensor, or of several")
maximum = _reduction(np.max, "max", "largest element of one list or tensor, or of several")
product = _reduction(np.prod, "prod", "product of the elements (of one list, or of several)")
total = _reduction(np.sum, "sum", "sum of the elements (of one list, or of several)")


@builtin("all_close", "numpy.allclose with rtol 1e-5, atol 1e-8", keywords=("rtol", "atol"))
def all_close(ctx: EvalContext, a: Any, b: Any, rtol: float = 1e-5, atol: float = 1e-8) -> Any:
    """numpy.allclose over constants, computed in double.

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


@builtin("normalize_axis", "a negative axis counted from the end")
def normalize_axis(ctx: EvalContext, axis: Any, rank: Any) -> Any:
    """A negative axis counted from the end (each of a list of axes)."""
    if axis is UNKNOWN or rank is UNKNOWN:
        return UNKNOWN
    if isinstance(axis, list | tuple | np.ndarray):
        return [_normalized(a, int(rank)) for a in np.asarray(axis).reshape(-1).tolist()]
    return _normalized(int(axis), int(rank))


def _normalized(axis: int, rank: int) -> int:
    if not -rank <= axis < rank:
        raise EvalError(f"axis {axis} is out of range for rank {rank}")
    return axis + rank if axis < 0 else axis


def _one_number(x: Any) -> Any:
    found = numeric(x)
    if found is UNKNOWN:
        return UNKNOWN
    return np.asarray(found).reshape(-1)[0] if np.size(found) == 1 else found


@builtin("float", "a float (a one-element tensor too)")
def to_float(ctx: EvalContext, x: Any) -> Any:
    """`float(x)`."""
    found = _one_number(x)
    return UNKNOWN if found is UNKNOWN else float(found)


@builtin("int", "an int (a one-element tensor too)")
def to_int(ctx: EvalContext, x: Any) -> Any:
    """`int(x)`."""
    found = _one_number(x)
    return UNKNOWN if found is UNKNOWN else int(found)


@builtin("any", "some element is true")
def any_true(ctx: EvalContext, x: Any) -> Any:
    """Some element is true."""
    found = numeric(x)
    return UNKNOWN if found is UNKNOWN else bool(np.any(found))


@builtin("all", "every element is true")
def all_true(ctx: EvalContext, x: Any) -> Any:
    """Every element is true."""
    found = numeric(x)
    return UNKNOWN if found is UNKNOWN else bool(np.all(found))


@builtin("range", "range(stop) or range(start, stop[, step]): int list")
def int_range(ctx: EvalContext, start: Any, stop: Any = None, step: Any = None) -> Any:
    """A list of ints, as Python's `range` (one argument is the stop)."""
    bounds = [b for b in (start, stop, step) if b is not None]
    if any(b is UNKNOWN for b in bounds):
        return UNKNOWN
    return list(range(*[int(b) for b in bounds]))


@builtin("sort", "the elements of a list or 1-D tensor, ascending, as a list")
def sort(ctx: EvalContext, x: Any) -> Any:
    """The elements ascending, as a list (ints stay ints)."""
    if x is UNKNOWN:
        return UNKNOWN
    return _plain_list(np.sort(np.asarray(numeric(x)).reshape(-1)))


@builtin("setdiff", "the elements of a not in b, ascending, as a list")
def setdiff(ctx: EvalContext, a: Any, b: Any) -> Any:
    """The elements of a that are not in b, ascending, as a list."""
    if a is UNKNOWN or b is UNKNOWN:
        return UNKNOWN
    left = np.asarray(numeric(a)).reshape(-1)
    right = np.asarray(numeric(b)).reshape(-1)
    # Sets of Python numbers, not np.setdiff1d: the lists are a few axes long, and numpy's
    # set routines import numpy.ma (tens of milliseconds) on first use.
    kept = sorted(set(left.tolist()).difference(right.tolist()))
    return _plain_list(np.asarray(kept, dtype=left.dtype))


@builtin(
    "fused_matmul_perm",
    "the permutation onnxruntime's FusedMatMul applies to an operand of rank r for its "
    "flags transBatch and trans",
)
def fused_matmul_perm(ctx: EvalContext, rank: Any, batch: Any, trans: Any) -> Any:
    """The permutation of one of FusedMatMul's operands for its flags.

    `[0, ..., r-1]`, the last two swapped (trans), the first moved before the last (batch),
    or the first moved last (both), as onnxruntime's com.microsoft.FusedMatMul defines them.
    """
    if any(v is UNKNOWN or v is None for v in (rank, batch, trans)):
        return UNKNOWN
    r = int(rank)
    if r < 2:
        raise EvalError(f"`fused_matmul_perm`: rank {r} has no matrix dims")
    if int(batch):
        return [*range(1, r), 0] if int(trans) else [*range(1, r - 1), 0, r - 1]
    return [*range(r - 2), r - 1, r - 2] if int(trans) else list(range(r))


def _plain_list(array: np.ndarray[Any, Any]) -> list[Any]:
    return [int(v) if array.dtype.kind in "iub" else float(v) for v in array.tolist()]


# dims -------------------------------------------------------------------------------------------
# General helpers over `shape(v)` lists, for rules that rebuild a shape input.


@builtin("static_or", "a shape with every unknown or symbolic dim replaced by fill")
def static_or(ctx: EvalContext, dims: Any, fill: Any) -> Any:
    """`static_or(shape(y), -1)`: the shape with unknown and symbolic dims replaced by fill."""
    if dims is UNKNOWN:
        return UNKNOWN
    return [dim if _is_int(dim) else fill for dim in dims]


@builtin("count_unknown", "how many dims of a shape are unknown or symbolic")
def count_unknown(ctx: EvalContext, dims: Any) -> Any:
    """How many dims are unknown or symbolic."""
    if dims is UNKNOWN:
        return UNKNOWN
    return sum(1 for dim in dims if not _is_int(dim))


@builtin(
    "reshape_dims",
    "a Reshape shape input giving `target` from `source`: static dims, 0 where a symbolic "
    "dim equals source's at the same index, one -1; none when that cannot express it",
)
def reshape_dims(ctx: EvalContext, target: Any, source: Any) -> Any:
    """The shape input of a Reshape from `source`'s shape to `target`.

    Static dims are kept; a symbolic dim equal to the source's dim at the same index becomes
    0 (copy, with allowzero 0); at most one remaining dim becomes -1. None when the target has
    a 0 dim, more than one dim is left unknown, or a -1 would stand beside a copied dim: the
    copied dim may be 0 at run time, and -1 (the size divided by the other dims) is undefined
    then, where the computed shape it replaces was not (onnxruntime rejects [0, -1] on an
    empty batch).
    """
    if target is UNKNOWN or source is UNKNOWN:
        return UNKNOWN
    dims: list[int] = []
    inferred = 0
    for i, dim in enumerate(target):
        if _is_int(dim):
            if dim == 0:
                return None  # 0 would mean "copy" without allowzero
            dims.append(int(dim))
        elif isinstance(dim, str) and i < len(source) and source[i] == dim:
            dims.append(0)
        else:
            inferred += 1
            dims.append(-1)
    if inferred > 1 or (inferred == 1 and 0 in dims):
        return None
    return dims


@builtin(
    "broadcast_shape",
    "the shape numpy broadcasting gives two shapes (ints and symbols); unknown when a pair "
    "of dims cannot be decided",
)
def broadcast_shape(ctx: EvalContext, a: Any, b: Any) -> Any:
    """Multidirectional broadcasting of two shapes, dim by dim from the right.

    A pair of dims gives the other one when one is 1, the dim when both are equal (ints or
    the same symbol); anything else (an unknown dim, two different symbols, a symbol beside
    an int other than 1) is not decided here, and the result is unknown.
    """
    if a is UNKNOWN or b is UNKNOWN or a is None or b is None:
        return UNKNOWN
    left, right = list(a), list(b)
    width = max(len(left), len(right))
    left = [1] * (width - len(left)) + left
    right = [1] * (width - len(right)) + right
    out: list[Any] = []
    for x, y in zip(left, right, strict=True):
        if x is None or y is None or x is UNKNOWN or y is UNKNOWN:
            return UNKNOWN
        if _is_int(x) and x == 1:
            out.append(y)
        elif (_is_int(y) and y == 1) or x == y:
            out.append(x)
        elif _is_int(x) and _is_int(y):
            raise EvalError(f"`broadcast_shape`: dims {x} and {y} do not broadcast")
        else:
            return UNKNOWN
    return out


@builtin(
    "conv_pads",
    "the explicit pads [b1, ..., e1, ...] of a Conv-like node: its `pads` for NOTSET, 0 for "
    "VALID, what SAME_UPPER / SAME_LOWER pad for input and weight shapes with static spatial "
    "dims; unknown where those are not static",
)
def conv_pads(
    ctx: EvalContext,
    x_shape: Any,
    w_shape: Any,
    auto_pad: Any,
    pads: Any = None,
    strides: Any = None,
    dilations: Any = None,
) -> Any:
    """The padding ONNX's Conv applies, for every value of `auto_pad`."""
    if x_shape is UNKNOWN or w_shape is UNKNOWN:
        return UNKNOWN
    spatial = len(list(x_shape)) - 2
    if spatial < 1:
        raise EvalError("`conv_pads`: the input has no spatial dims")
    mode = auto_pad or "NOTSET"
    if mode == "NOTSET":
        return [int(p) for p in pads] if pads is not None else [0] * (2 * spatial)
    if mode == "VALID":
        return [0] * (2 * spatial)
    sizes = list(x_shape)[2:]
    kernel = list(w_shape)[2:]
    if not all(_is_int(d) for d in [*sizes, *kernel]):
        return UNKNOWN
    stride = [int(v) for v in strides] if strides is not None else [1] * spatial
    dilation = [int(v) for v in dilations] if dilations is not None else [1] * spatial
    begins, ends = [], []
    for size, k, st, dil in zip(sizes, kernel, stride, dilation, strict=True):
        out = -(-int(size) // st)
        total = max((out - 1) * st + (int(k) - 1) * dil + 1 - int(size), 0)
        small = total // 2
        begin, end = (small, total - small) if mode == "SAME_UPPER" else (total - small, small)
        begins.append(begin)
        ends.append(end)
    return begins + ends


# elementwise math ----------------------------------------------------------------------------


def _elementwise(fn: Callable[[Any], Any], name: str, summary: str) -> Builtin:
    def apply(ctx: EvalContext, x: Any) -> Any:
        found = _array(x)
        if found is UNKNOWN:
            return UNKNOWN
        with quiet_numpy():
            return fn(found)

    apply.__doc__ = f"`{name}(x)`, elementwise."
    return builtin(name, summary)(apply)


def _erf(x: Any) -> Any:
    flat = np.asarray(x, dtype=np.float64).reshape(-1)
    out = np.array([math.erf(float(v)) for v in flat]).reshape(np.shape(x))
    return out.astype(np.asarray(x).dtype if np.asarray(x).dtype.kind == "f" else np.float64)


def _reciprocal(x: Any) -> Any:
    """1 / x, keeping a float dtype (integers give float64)."""
    return np.asarray(1, dtype=x.dtype if x.dtype.kind == "f" else np.float64) / x


sqrt = _elementwise(np.sqrt, "sqrt", "square root, elementwise")
exp = _elementwise(np.exp, "exp", "e ** x, elementwise")
log = _elementwise(np.log, "log", "natural logarithm, elementwise")
sign = _elementwise(np.sign, "sign", "-1, 0 or 1, elementwise")
signbit = _elementwise(
    np.signbit, "signbit", "true where the sign bit is set (negatives and -0.0), elementwise"
)
isfinite = _elementwise(
    np.isfinite, "isfinite", "true where an element is neither infinite nor NaN, elementwise"
)
isnan = _elementwise(np.isnan, "isnan", "true where an element is NaN, elementwise")
tanh = _elementwise(np.tanh, "tanh", "hyperbolic tangent, elementwise")
erf = _elementwise(_erf, "erf", "error function, elementwise")
reciprocal = _elementwise(
    _reciprocal, "reciprocal", "1 / x, elementwise; floats keep their dtype, integers give double"
)


@builtin("clip", "clip to [lo, hi]; a missing bound is open", keywords=("lo", "hi"))
def clip(ctx: EvalContext, x: Any, lo: Any = None, hi: Any = None) -> Any:
    """Clip to [lo, hi]."""
    found = _array(x)
    return UNKNOWN if found is UNKNOWN else np.clip(found, lo, hi)


@builtin("where", "elementwise choice")
def where(ctx: EvalContext, cond: Any, a: Any, b: Any) -> Any:
    """Elementwise choice."""
    c = _array(cond)
    x = _array(a)
    y = _array(b)
    if c is UNKNOWN or x is UNKNOWN or y is UNKNOWN:
        return UNKNOWN
    return np.where(c, x, y)


def _operands(args: tuple[Any, ...]) -> list[Any]:
    """The arrays of `args`, a variadic binding (`xs...`, a tuple) counting as its items."""
    items: list[Any] = []
    for arg in args:
        if isinstance(arg, tuple):
            items.extend(arg)
        else:
            items.append(arg)
    return [_array(item) for item in items]


def _elementwise_fold(fn: Callable[[Any, Any], Any], name: str, summary: str) -> Builtin:
    def fold(ctx: EvalContext, x: Any, *more: Any) -> Any:
        arrays = _operands((x, *more))
        if not arrays or any(a is UNKNOWN for a in arrays):
            return UNKNOWN
        result = arrays[0]
        for array in arrays[1:]:
            try:
                result = fn(result, array)
            except ValueError as exc:  # shapes that do not broadcast
                raise EvalError(f"`{name}`: {exc}") from exc
        return result

    fold.__doc__ = f"`{name}(a, b, ...)`, elementwise with broadcasting, as ONNX's op does."
    return builtin(name, summary)(fold)


# ONNX's Min and Max propagate NaN, as numpy's minimum and maximum do.
elementwise_minimum = _elementwise_fold(
    np.minimum,
    "minimum",
    "elementwise smallest of the arguments, broadcast as ONNX's Min (a variadic binding `xs` "
    "counts as its items)",
)
elementwise_maximum = _elementwise_fold(
    np.maximum,
    "maximum",
    "elementwise largest of the arguments, broadcast as ONNX's Max (a variadic binding `xs` "
    "counts as its items)",
)
