"""Comparing one output of two models: dtype-aware tolerances and per-output error figures.

Tolerance policy (an element passes when all of these hold):

* shapes and dtypes are equal, exactly;
* integers, booleans and strings are equal, exactly;
* floating point: NaN where the expected value is NaN and nowhere else; infinities equal
  (same sign); every finite element satisfies
  `|actual - expected| <= atol * max(1, scale) + rtol * |expected|`, where `scale` is the
  largest finite `|expected|` of that output in that example. Scaling `atol` by the output's
  magnitude (only when it exceeds 1) absorbs the rounding noise of large outputs at elements
  that happen to be near zero (cancellation), while keeping an error proportional to the
  values themselves visible: `x * 2` instead of `x` misses by `|x|`, which exceeds the bound
  at the largest element (`|x| > 1e-5 * |x| + 1e-4 * |x|`), and `Abs` instead of `Relu`
  misses by `2|x|` at every negative element.

Default `(rtol, atol)` per dtype: float32 and complex64 `(1e-4, 1e-5)`; float64 and
complex128 `(1e-7, 1e-9)`; float16 `(1e-2, 1e-3)`; bfloat16 `(5e-2, 1e-2)`; float8 types
`(0.25, 0.1)`. A user's `rtol`/`atol` replace the defaults of every floating output.

Relative error is `|actual - expected| / max(|expected|, atol_used)`: floored at the
absolute tolerance so that expected zeros do not turn rounding noise into huge figures.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np
import numpy.typing as npt


@dataclasses.dataclass(frozen=True, slots=True)
class Tolerance:
    """`|a - e| <= atol * max(1, scale) + rtol * |e|`; `rtol == atol == 0` means exact."""

    rtol: float
    atol: float

    @property
    def exact(self) -> bool:
        """True when no difference at all is allowed."""
        return self.rtol == 0.0 and self.atol == 0.0

    def __str__(self) -> str:
        if self.exact:
            return "exact"
        return f"rtol={_compact(self.rtol)} atol={_compact(self.atol)}"


def _compact(value: float) -> str:
    """`1e-4` rather than `0.0001` or `1e-04`."""
    if value == 0 or 1e-2 <= abs(value) < 1e4 or not math.isfinite(value):
        return f"{value:g}"
    mantissa, exponent = f"{value:.2e}".split("e")
    mantissa = mantissa.rstrip("0").rstrip(".")
    return f"{mantissa}e{int(exponent)}"


EXACT = Tolerance(0.0, 0.0)

_FLOAT_DEFAULTS: dict[str, Tolerance] = {
    "float16": Tolerance(1e-2, 1e-3),
    "bfloat16": Tolerance(5e-2, 1e-2),
    "float32": Tolerance(1e-4, 1e-5),
    "complex64": Tolerance(1e-4, 1e-5),
    "float64": Tolerance(1e-7, 1e-9),
    "complex128": Tolerance(1e-7, 1e-9),
}
_FLOAT8_DEFAULT = Tolerance(0.25, 0.1)


def is_inexact(dtype: np.dtype[np.generic]) -> bool:
    """True for floating and complex dtypes, including ml_dtypes' bfloat16 and float8."""
    if dtype.kind in "fc":
        return True
    return dtype.kind == "V" and dtype.name.startswith(("bfloat", "float"))


def default_tolerance(dtype: np.dtype[np.generic]) -> Tolerance:
    """The default tolerance for an output of this numpy dtype (see the module docstring)."""
    if not is_inexact(dtype):
        return EXACT
    if dtype.name in _FLOAT_DEFAULTS:
        return _FLOAT_DEFAULTS[dtype.name]
    if dtype.name.startswith("float8") or dtype.name.startswith("float4"):
        return _FLOAT8_DEFAULT
    return _FLOAT_DEFAULTS["float32"]


def tolerance_for(dtype: np.dtype[np.generic], rtol: float | None, atol: float | None) -> Tolerance:
    """The default tolerance of `dtype` with the user's overrides (floating dtypes only)."""
    base = default_tolerance(dtype)
    if base.exact:
        return base
    return Tolerance(
        rtol=base.rtol if rtol is None else rtol,
        atol=base.atol if atol is None else atol,
    )


@dataclasses.dataclass(frozen=True, slots=True)
class Comparison:
    """How one output of one example compares; `reason` is empty when it is within tolerance.

    `max_abs_err`/`max_rel_err` are None when they have no meaning (strings, or a shape or
    dtype mismatch); they are `inf` when NaN or infinity positions differ.
    """

    shape: tuple[int, ...]
    max_abs_err: float | None
    max_rel_err: float | None
    mismatched: int
    reason: str

    @property
    def ok(self) -> bool:
        """True when the output is within tolerance."""
        return not self.reason


def _as_float(array: npt.NDArray[np.generic]) -> npt.NDArray[Any]:
    if array.dtype.kind == "c":
        return array.astype(np.complex128)
    return array.astype(np.float64)


def _compare_inexact(
    expected: npt.NDArray[np.generic], actual: npt.NDArray[np.generic], tol: Tolerance
) -> Comparison:
    with np.errstate(invalid="ignore", over="ignore"):  # inf - inf is masked out below
        return _inexact_comparison(expected, actual, tol)


def _inexact_comparison(
    expected: npt.NDArray[np.generic], actual: npt.NDArray[np.generic], tol: Tolerance
) -> Comparison:
    e = _as_float(expected)
    a = _as_float(actual)
    e_nan = np.isnan(e)
    a_nan = np.isnan(a)
    e_inf = np.isinf(e)
    a_inf = np.isinf(a)
    nonfinite_bad = (e_nan != a_nan) | ((e_inf | a_inf) & ~(e_nan | a_nan) & (e != a))
    finite = np.isfinite(e) & np.isfinite(a)
    magnitude = np.abs(e[np.isfinite(e)])
    scale = float(magnitude.max()) if magnitude.size else 0.0
    atol = tol.atol * max(1.0, scale)
    err = np.where(finite, np.abs(a - e), 0.0)
    bound = atol + tol.rtol * np.abs(np.where(finite, e, 0.0))
    bad = nonfinite_bad | (finite & (err > bound))
    mismatched = int(np.count_nonzero(bad))
    denominator = np.maximum(np.abs(np.where(finite, e, 0.0)), max(atol, 1e-300))
    max_abs = float(err.max()) if err.size else 0.0
    max_rel = float((err / denominator).max()) if err.size else 0.0
    if np.any(nonfinite_bad):
        max_abs = max_rel = math.inf
    reason = ""
    if mismatched:
        kinds = []
        if np.any(nonfinite_bad):
            kinds.append(f"{int(np.count_nonzero(nonfinite_bad))} NaN/inf positions differ")
        outside = mismatched - int(np.count_nonzero(nonfinite_bad))
        if outside:
            kinds.append(f"{outside} outside {tol}")
        reason = f"{mismatched} of {e.size} elements differ ({'; '.join(kinds)})"
    return Comparison(expected.shape, max_abs, max_rel, mismatched, reason)


def _compare_exact(
    expected: npt.NDArray[np.generic], actual: npt.NDArray[np.generic]
) -> Comparison:
    if expected.dtype.kind in "OUS":
        bad = expected.astype(object) != actual.astype(object)
        mismatched = int(np.count_nonzero(bad))
        max_abs: float | None = None
        max_rel: float | None = None
    else:
        bad = expected != actual
        mismatched = int(np.count_nonzero(bad))
        diff = np.abs(expected.astype(np.float64) - actual.astype(np.float64))
        max_abs = float(diff.max()) if diff.size else 0.0
        rel = diff / np.maximum(np.abs(expected.astype(np.float64)), 1.0)
        max_rel = float(rel.max()) if rel.size else 0.0
    reason = f"{mismatched} of {expected.size} elements differ (exact)" if mismatched else ""
    return Comparison(expected.shape, max_abs, max_rel, mismatched, reason)


def compare_arrays(expected: object, actual: object, tol: Tolerance) -> Comparison:
    """Compare one output of the rewritten model (`actual`) with the original's (`expected`)."""
    if isinstance(expected, list) or isinstance(actual, list):
        return _compare_sequences(expected, actual, tol)
    e = np.asarray(expected)
    a = np.asarray(actual)
    if e.dtype != a.dtype:
        return Comparison(a.shape, None, None, max(a.size, e.size), f"dtype {a.dtype} != {e.dtype}")
    if e.shape != a.shape:
        return Comparison(a.shape, None, None, max(a.size, e.size), f"shape {a.shape} != {e.shape}")
    if is_inexact(e.dtype) and not tol.exact:
        return _compare_inexact(e, a, tol)
    return _compare_exact(e, a)


def _compare_sequences(expected: object, actual: object, tol: Tolerance) -> Comparison:
    if not (isinstance(expected, list) and isinstance(actual, list)):
        return Comparison((), None, None, 1, "one output is a sequence, the other is not")
    if len(expected) != len(actual):
        return Comparison(
            (len(actual),), None, None, 1, f"sequence length {len(actual)} != {len(expected)}"
        )
    parts = [compare_arrays(e, a, tol) for e, a in zip(expected, actual, strict=True)]
    bad = [f"[{i}] {p.reason}" for i, p in enumerate(parts) if p.reason]
    abs_errs = [p.max_abs_err for p in parts if p.max_abs_err is not None]
    rel_errs = [p.max_rel_err for p in parts if p.max_rel_err is not None]
    return Comparison(
        shape=(len(actual),),
        max_abs_err=max(abs_errs, default=None),
        max_rel_err=max(rel_errs, default=None),
        mismatched=sum(p.mismatched for p in parts),
        reason="; ".join(bad),
    )
