"""When a literal in a pattern matches a constant or an attribute: exactly, in its dtype.

A literal `1.0` in `Mul (x, 1.0)` matches a constant only when every element equals the
literal after the literal is cast to the constant's dtype: a float16 `0.1` matches the literal
`0.1` (both are the float16 nearest to 0.1), a float32 `1.0000008` does not match `1.0` (a
rule that removes `Mul(x, 1.0000008)` would change the output by 26 at x = 3e7). An integer
constant matches only an integral literal; a bool constant only `0`/`1`/`true`/`false`. A
FLOAT attribute is a float32 in ONNX, so a float literal is compared with it in float32.
Approximate comparison is for rules that say so, with `all_close` in `where`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rewriter.engine._values import equal


def literal_in_dtype(literal: Any, dtype: np.dtype[Any]) -> np.ndarray[Any, Any] | None:
    """The literal (a number or a list of numbers) cast to `dtype`.

    None when no value of that dtype equals it: a fraction, or a number out of range, for an
    integer dtype.
    """
    source = np.asarray(literal)
    if source.dtype == object or source.dtype.kind not in "biuf":
        return None
    if dtype.kind == "b":
        if not np.all((source == 0) | (source == 1)):
            return None
        return source.astype(np.bool_)
    if dtype.kind in "iu":
        if source.dtype.kind == "f" and not np.all(
            np.isfinite(source) & (source == np.round(source))
        ):
            return None
        info = np.iinfo(dtype)
        as_int = source.astype(object)
        if any(not info.min <= int(v) <= info.max for v in np.ravel(as_int)):
            return None
        return source.astype(dtype)
    with np.errstate(over="ignore", invalid="ignore"):
        return np.asarray(source, dtype=np.float64).astype(dtype)


def constant_matches(array: np.ndarray[Any, Any], literal: Any) -> bool:
    """True when the constant `array` is the literal.

    A scalar literal must equal every element of a non-empty constant of any shape; a list
    literal must equal a 1-D constant element by element.
    """
    if array.dtype == object or array.dtype.kind in "SUc":
        return False
    expected = literal_in_dtype(literal, array.dtype)
    if expected is None:
        return False
    if isinstance(literal, list):
        if array.ndim != 1 or array.shape != expected.shape:
            return False
    elif array.size == 0:
        return False
    return bool(np.all(array == expected))


def attribute_matches(actual: Any, literal: Any) -> bool:
    """True when an attribute's value is the literal (float32 for FLOAT(S), exact otherwise)."""
    if _has_float(actual) or _has_float(literal):
        try:
            left = np.asarray(actual, dtype=np.float64)
            right = np.asarray(literal, dtype=np.float64)
        except (TypeError, ValueError):
            return False
        if left.shape != right.shape:
            return False
        if _has_float(actual):
            # ONNX stores float attributes as float32: compare there.
            return bool(np.all(left.astype(np.float32) == right.astype(np.float32)))
        return bool(np.all(left == right))
    return equal(actual, literal) is True


def _has_float(value: Any) -> bool:
    if isinstance(value, float):
        return True
    if isinstance(value, list | tuple):
        return any(isinstance(v, float) for v in value)
    return False
