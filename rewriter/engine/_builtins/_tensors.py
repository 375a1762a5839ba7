"""Built-ins that build tensors for rewrites: reshaping, stacking, filled tensors, casts.

A matched value stands for its constant contents; dtype arguments are ONNX names
("float16") or ONNX dtype numbers (as in Cast's `to`).
"""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np

import ir
from rewriter.engine._builtins._registry import builtin
from rewriter.engine._values import (
    UNKNOWN,
    EvalContext,
    EvalError,
    exact_numpy,
    numeric,
)


def _np_dtype(name: Any) -> np.dtype[Any]:
    if isinstance(name, ir.DataType):
        return ir.numpy_dtype(name)
    if isinstance(name, int | np.integer) and not isinstance(name, bool):
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


def _array(value: Any) -> Any:
    result = numeric(value)
    return UNKNOWN if result is UNKNOWN else np.asarray(result)


def _int_list(value: Any) -> list[int]:
    return [int(v) for v in np.asarray(numeric(value)).reshape(-1)]


def _axes(axis: Any) -> tuple[int, ...] | None:
    return None if axis is None else tuple(_int_list(axis))


@builtin("reshape", "reshape; -1 infers one dim")
def reshape(ctx: EvalContext, x: Any, shape: Any) -> Any:
    """`reshape(x, shape)`."""
    found = _array(x)
    return UNKNOWN if found is UNKNOWN else np.reshape(found, _int_list(shape))


@builtin("transpose", "permute axes; reverses them without perm", keywords=("perm",))
def transpose(ctx: EvalContext, x: Any, perm: Any = None) -> Any:
    """`transpose(x, perm)`."""
    found = _array(x)
    if found is UNKNOWN:
        return UNKNOWN
    return np.transpose(found, None if perm is None else _int_list(perm))


@builtin("concat", "concat([a, b, ...], axis = 0)", keywords=("axis",))
def concat(ctx: EvalContext, items: Any, axis: int = 0) -> Any:
    """`concat([a, b, ...], axis)`."""
    arrays = [_array(v) for v in items]
    if any(a is UNKNOWN for a in arrays):
        return UNKNOWN
    return np.concatenate(arrays, axis=int(axis))


@builtin("stack", "stack([a, b, ...], axis = 0) along a new axis", keywords=("axis",))
def stack(ctx: EvalContext, items: Any, axis: int = 0) -> Any:
    """`stack([a, b, ...], axis)`."""
    arrays = [_array(v) for v in items]
    if any(a is UNKNOWN for a in arrays):
        return UNKNOWN
    return np.stack(arrays, axis=int(axis))


@builtin("expand_dims", "insert size-1 axes; axis may be a list", keywords=("axis",))
def expand_dims(ctx: EvalContext, x: Any, axis: Any) -> Any:
    """`expand_dims(x, axis)`."""
    found = _array(x)
    return UNKNOWN if found is UNKNOWN else np.expand_dims(found, tuple(_int_list(axis)))


@builtin("squeeze", "drop size-1 axes (all of them without axis)", keywords=("axis",))
def squeeze(ctx: EvalContext, x: Any, axis: Any = None) -> Any:
    """`squeeze(x, axis)`."""
    found = _array(x)
    return UNKNOWN if found is UNKNOWN else np.squeeze(found, _axes(axis))


@builtin("zeros", 'zeros, dtype "float" unless given', keywords=("dtype",))
def zeros(ctx: EvalContext, shape: Any, dtype: Any = "float") -> Any:
    """`zeros(shape, dtype)`."""
    return np.zeros(_int_list(shape), dtype=_np_dtype(dtype))


@builtin("ones", 'ones, dtype "float" unless given', keywords=("dtype",))
def ones(ctx: EvalContext, shape: Any, dtype: Any = "float") -> Any:
    """`ones(shape, dtype)`."""
    return np.ones(_int_list(shape), dtype=_np_dtype(dtype))


@builtin("zeros_like", "zeros of x's shape and dtype")
def zeros_like(ctx: EvalContext, x: Any) -> Any:
    """`zeros_like(x)`."""
    found = _array(x)
    return UNKNOWN if found is UNKNOWN else np.zeros_like(found)


@builtin("ones_like", "ones of x's shape and dtype")
def ones_like(ctx: EvalContext, x: Any) -> Any:
    """`ones_like(x)`."""
    found = _array(x)
    return UNKNOWN if found is UNKNOWN else np.ones_like(found)


@builtin("eye", 'the n x n identity, "float" unless given', keywords=("dtype",))
def eye(ctx: EvalContext, n: Any, dtype: Any = "float") -> Any:
    """`eye(n, dtype)`."""
    return np.eye(int(n), dtype=_np_dtype(dtype))


@builtin("one_hot", "a new last axis of size depth", keywords=("dtype",))
def one_hot(ctx: EvalContext, indices: Any, depth: Any, dtype: Any = "float") -> Any:
    """`one_hot(indices, depth, dtype)`."""
    idx = np.asarray(numeric(indices)).astype(np.int64)
    return (idx[..., None] == np.arange(int(depth))).astype(_np_dtype(dtype))


@builtin("take", "numpy.take; take(p1, p2) composes permutations", keywords=("axis",))
def take(ctx: EvalContext, a: Any, indices: Any, axis: Any = None) -> Any:
    """`take(a, indices, axis)`; lists give a list back."""
    x = _array(a)
    idx = _array(indices)
    if x is UNKNOWN or idx is UNKNOWN:
        return UNKNOWN
    result = np.take(x, idx.astype(np.int64), axis=None if axis is None else int(axis))
    if isinstance(a, list) and isinstance(indices, list):
        return [int(i) for i in result.tolist()]
    return result


@builtin("cast", 'convert to an ONNX dtype: cast(x, "float16")')
def cast(ctx: EvalContext, x: Any, dtype: Any) -> Any:
    """`cast(x, dtype)`."""
    found = _array(x)
    if found is UNKNOWN:
        return UNKNOWN
    with exact_numpy():
        return found.astype(_np_dtype(dtype))


@builtin("const", 'a tensor of exactly that dtype: const(0, "int64")', let_only=True)
def const(ctx: EvalContext, v: Any, dtype: Any) -> Any:
    """`const(v, dtype)`: a tensor of exactly that dtype (for literal node inputs)."""
    found = _array(v)
    return UNKNOWN if found is UNKNOWN else np.asarray(found, dtype=_np_dtype(dtype))


@builtin("lowest", "the most negative finite value of a dtype (torch.finfo(dtype).min)")
def lowest(ctx: EvalContext, dtype: Any) -> Any:
    """`lowest(dtype)`: the most negative finite number the dtype holds (an int or a float)."""
    found = _np_dtype(dtype)
    if found.kind in "iu":
        return int(np.iinfo(found).min)
    if found.kind != "f" and found.name not in _ML_FLOATS:
        raise EvalError(f"`lowest` takes a number dtype, not {dtype!r}")
    return float(ml_dtypes.finfo(found).min)  # type: ignore[no-untyped-call]


@builtin("next_after", "the next value of dtype after x toward `toward` (numpy.nextafter)")
def next_after(ctx: EvalContext, x: Any, toward: Any, dtype: Any) -> Any:
    """`next_after(x, toward, dtype)`: x rounded to the dtype, moved by one step toward `toward`.

    Computed in the dtype itself (`next_after(-65504.0, 0, "float16")` is -65472.0), for
    float dtypes; elementwise for a tensor, a float for a number.
    """
    found = _np_dtype(dtype)
    if found.kind != "f" and found.name not in _ML_FLOATS:
        raise EvalError(f"`next_after` takes a float dtype, not {dtype!r}")
    start, target = numeric(x), numeric(toward)
    if start is UNKNOWN or target is UNKNOWN:
        return UNKNOWN
    result = np.nextafter(np.asarray(start, found), np.asarray(target, found))
    return float(result) if result.ndim == 0 else result


# Float dtypes that numpy does not count as kind "f" (ml_dtypes' extension types).
_ML_FLOATS = frozenset({"bfloat16", "float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2"})
_ML_FLOATS |= {"float8_e5m2fnuz", "float8_e8m0fnu", "float4_e2m1fn"}


@builtin("arange", "numpy.arange, int64 unless dtype given", keywords=("dtype",))
def arange(
    ctx: EvalContext, start: Any, stop: Any = None, step: Any = None, *, dtype: Any = "int64"
) -> Any:
    """`arange(stop)` / `arange(start, stop, step)`."""
    bounds = [numeric(b) for b in (start, stop, step) if b is not None]
    return np.arange(*bounds, dtype=_np_dtype(dtype))


@builtin("pad", "constant padding with ONNX pads [b1, ..., e1, ...]")
def pad(ctx: EvalContext, x: Any, pads: Any, value: Any = 0) -> Any:
    """`pad(x, pads, value)` with ONNX-style pads."""
    found = _array(x)
    if found is UNKNOWN:
        return UNKNOWN
    p = _int_list(pads)
    half = len(p) // 2
    widths = list(zip(p[:half], p[half:], strict=False))
    return np.pad(found, widths, constant_values=value)


@builtin(
    "spread_pads",
    "Pad's pads for `axes` as pads of every axis of a rank-r input (the others 0)",
)
def spread_pads(ctx: EvalContext, pads: Any, axes: Any, rank: Any) -> Any:
    """`[b1, ..., bn, e1, ..., en]` for axes `a1..an` -> `[B1, ..., Br, E1, ..., Er]`."""
    found = _array(pads)
    listed = _array(axes)
    if found is UNKNOWN or listed is UNKNOWN or rank is UNKNOWN:
        return UNKNOWN
    r = int(rank)
    p = [int(v) for v in found.reshape(-1)]
    a = [int(v) for v in listed.reshape(-1)]
    if len(p) != 2 * len(a):
        raise EvalError(f"`spread_pads`: {len(p)} pads for {len(a)} axes")
    full = [0] * (2 * r)
    for i, axis in enumerate(a):
        if not -r <= axis < r:
            raise EvalError(f"`spread_pads`: axis {axis} out of range for rank {r}")
        full[axis % r] = p[i]
        full[axis % r + r] = p[i + len(a)]
    return np.asarray(full, dtype=np.int64)


@builtin(
    "reduce_sum",
    "the sum of a constant over `axes` (all of them without), those axes dropped",
    keywords=("axes",),
)
def reduce_sum(ctx: EvalContext, x: Any, axes: Any = None) -> Any:
    """`reduce_sum(w, [1, 2, 3])`: numpy.sum in the constant's own dtype."""
    found = _array(x)
    if found is UNKNOWN:
        return UNKNOWN
    return np.asarray(np.sum(found, axis=_axes(axes)), dtype=found.dtype)
