"""Constant tensors and attribute values drawn across magnitudes.

Constants are where a rule's arithmetic lives (folded weights, epsilons, scales), so they are
drawn from *kinds* that include the values where that arithmetic is most sensitive: zeros and
values near zero (a variance of 0 with a tiny epsilon), negative and zero scales, tiny and
large magnitudes. A kind plus a numpy seed expands into the array, so hypothesis draws two
small numbers however large the tensor is.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

import numpy as np

import ir
from rewriter.checkrules._choices import Choices

Array = np.ndarray[Any, Any]

FLOAT_KINDS = (
    "normal",
    "small_ints",
    "positive",
    "negative",
    "near_zero",
    "sensitive",
    "large",
    "zeros",
    "ones",
)
# Elements at which folded arithmetic is fragile: zero (and -0), tiny, unit, big.
_SENSITIVE = np.array([0.0, -0.0, 1e-12, 1e-6, 1e-3, -1.0, 1.0, 0.5, 1e3, -2.0], np.float64)
_SENSITIVE_NARROW = np.array([0.0, -0.0, 1e-3, 1e-2, -1.0, 1.0, 0.5, 30.0, -2.0], np.float64)
EPSILONS = (1e-5, 1e-12, 1e-9, 1e-6, 1e-3, 1e-1)


def float_array(kind: str, shape: tuple[int, ...], seed: int, *, narrow: bool = False) -> Array:
    """A float64 array of `kind` (see FLOAT_KINDS); the caller casts it.

    `narrow` (float16, bfloat16) keeps the extreme kinds inside the type's normal range, so a
    correct fold is not blamed for an overflow the original graph would not have (folded
    weights multiply magnitudes that the original applies one after the other).
    """
    rng = np.random.default_rng(seed)
    if narrow and kind == "near_zero":
        return np.abs(rng.normal(0.0, 1e-3, shape))
    if narrow and kind == "large":
        return rng.normal(0.0, 30.0, shape)
    if narrow and kind == "sensitive":
        return np.asarray(rng.choice(_SENSITIVE_NARROW, size=shape), np.float64)
    if kind == "small_ints":
        return rng.integers(-3, 4, shape).astype(np.float64)
    if kind == "positive":
        return rng.uniform(0.1, 2.0, shape)
    if kind == "negative":
        return -rng.uniform(0.1, 2.0, shape)
    if kind == "near_zero":
        return np.abs(rng.normal(0.0, 1e-6, shape))
    if kind == "sensitive":
        return np.asarray(rng.choice(_SENSITIVE, size=shape), np.float64)
    if kind == "large":
        return rng.normal(0.0, 1e3, shape)
    if kind == "zeros":
        return np.zeros(shape)
    if kind == "ones":
        return np.ones(shape)
    return rng.normal(0.0, 1.0, shape)


def int_array(dtype: np.dtype[Any], shape: tuple[int, ...], seed: int) -> Array:
    """Small integers that fit `dtype` (booleans for bool)."""
    rng = np.random.default_rng(seed)
    if dtype == np.bool_:
        return rng.integers(0, 2, shape).astype(np.bool_)
    low = 0 if dtype.kind == "u" else -3
    return rng.integers(low, 4, shape).astype(dtype)


def draw_constant(
    choices: Choices, key: Hashable, dtype: ir.DataType, shape: tuple[int, ...]
) -> Array:
    """A constant of `dtype` and `shape`, drawn under `key` (overridable as a whole)."""
    if ("value", key) in choices.overrides:
        forced = np.asarray(choices.overrides[("value", key)])
        with np.errstate(over="ignore", invalid="ignore"):  # a repair's value may not fit
            return np.broadcast_to(forced, shape).astype(ir.numpy_dtype(dtype)).copy()
    np_dtype = ir.numpy_dtype(dtype)
    seed = choices.integer(("seed", key), 0, 2**16)
    if np_dtype.kind in "fcV" or dtype in (ir.DataType.BFLOAT16, ir.DataType.FLOAT16):
        kind = choices.pick(("kind", key), FLOAT_KINDS)
        narrow = dtype in (ir.DataType.FLOAT16, ir.DataType.BFLOAT16)
        return float_array(kind, shape, seed, narrow=narrow).astype(np_dtype)
    return int_array(np_dtype, shape, seed)
