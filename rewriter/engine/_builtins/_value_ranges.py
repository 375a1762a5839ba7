"""Built-ins that ask what a matched value's elements can be: bounds and finiteness.

They read `rewriter.engine._ranges` (interval arithmetic from the value's producers). A bound
that is not known is `UNKNOWN`, so a `where` line that needs it does not hold.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

import ir
from rewriter.engine import _ranges
from rewriter.engine._builtins._registry import builtin
from rewriter.engine._values import UNKNOWN, EvalContext, EvalError


def _range_of(v: Any, fn: str) -> _ranges.ValueRange | None:
    """The range of a matched value or of a literal (None for an empty or absent one)."""
    if v is None:
        return None
    if isinstance(v, ir.Value):
        return _ranges.value_range(v)
    if isinstance(v, np.ndarray | list | int | float):
        array = np.asarray(v, dtype=np.float64)
        if array.size == 0:
            return None
        nan = bool(np.isnan(array).any())
        numbers = array[~np.isnan(array)]
        if numbers.size == 0:
            return _ranges.ValueRange(math.inf, -math.inf, True)
        return _ranges.ValueRange(float(numbers.min()), float(numbers.max()), nan)
    raise EvalError(f"`{fn}` expects a value bound by the match, got {type(v).__name__}")


@builtin(
    "lower_bound",
    "the smallest number v can hold, from its producers (interval arithmetic through Cast, "
    "Add, Sub, Mul, Div, the ops that move elements, Concat, Where, Min, Max, ...); NaN "
    "elements are no numbers (is_finite rules them out)",
)
def lower_bound(ctx: EvalContext, v: Any) -> Any:
    """The smallest non-NaN element `v` can hold (-inf when unbounded below)."""
    found = _range_of(v, "lower_bound")
    return UNKNOWN if found is None else found.low


@builtin(
    "upper_bound",
    "the largest number v can hold, from its producers (as lower_bound; NaN elements aside)",
)
def upper_bound(ctx: EvalContext, v: Any) -> Any:
    """The largest non-NaN element `v` can hold (+inf when unbounded above)."""
    found = _range_of(v, "upper_bound")
    return UNKNOWN if found is None else found.high


@builtin(
    "is_finite",
    "every element of v is provably a finite number (no NaN, no infinity), from its producers",
)
def is_finite(ctx: EvalContext, v: Any) -> bool:
    """True when `v`'s range is finite and holds no NaN (false when not shown)."""
    found = _range_of(v, "is_finite")
    return found is not None and found.finite
