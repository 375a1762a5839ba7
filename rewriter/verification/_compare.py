"""Comparing one output of two models: by accuracy against a float64 oracle, or directly.

**Accuracy** (the default for float32, float16 and bfloat16 outputs). The oracle `o` is the
original model evaluated in float64 (`_oracle`); `e` is the original's output, `y` the
rewritten model's. Each element's error is measured against the oracle and scaled by the
element's magnitude, floored at the output's root-mean-square magnitude `M` (so elements
that cancel to about zero are measured against the scale their rounding comes from):

    err_i(y) = |y_i - o_i| / (|o_i| + M),        E(y) = max_i err_i(y)

and the rewritten model passes when it is at most `factor` times less accurate than the
original, whose error is floored at `FLOOR_ULPS` units in the last place (ULPs) of the dtype:

    E(y) <= factor * max(E(e), FLOOR_ULPS * eps)

that is, per element: `|y_i - o_i| <= factor * max(E(e), FLOOR_ULPS * eps) * (|o_i| + M)`.

Ill-conditioned examples: when the rewritten output fails that test, the floor is raised to
the output's *sensitivity* `S`, float64's own change when every float input element is
rounded once more (multiplied by `1 + r * eps` with `r` in [-1, 1], from a fixed seed),
measured like `E`: `E(y) <= factor * max(E(e), FLOOR_ULPS * eps, S)`. A textbook float
computation of an ill-conditioned function (a LayerNorm over 1e4 beside 0.1, whose mean
cancels) errs by about that much even when the original's fused kernel does better; a bug
changes the function and stays far above it. This costs one more oracle run, on failing
examples only.
`eps` is the dtype's machine epsilon (2^-23 for float32), the spacing of numbers near 1. The
floor keeps outputs that the original computes exactly (a copy, small integers) from
demanding exactness of a rewrite that rounds once. Defaults: `factor` 8 (`DEFAULT_FACTOR`),
floor 4 ULPs; see the README for how they were measured.

When the rewritten output is within `(factor - 1) / 2` floors of the original's (scaled the
same way, by the original's magnitudes) the criterion holds whatever the oracle says, by the
triangle inequality (`E(y) <= E(e) + |y - e|`), so the oracle is not run at all.

Not-a-number and infinities: where the original's output is NaN or infinite and so is the
oracle's, the rewritten output must be NaN (or the same infinity) there too, as the original or
as float64 has it: NaN positions are compared, not values. A NaN or infinity that only the
rewritten model makes is a mismatch, unless the original has no correct digit at that element
either (its error against float64 is at least half of `|o_i| + M`, as where float32
overflowed and float64 did not); elements where the original has no correct digit are not
judged at all (their error still counts in `E(e)`, so an example on which the original is
that wrong judges nothing). When an input holds a value within a factor 16 of the dtype's
largest magnitude, any product of it overflows, and a rewrite that reorders arithmetic moves
where: on such an example, elements where either model is not finite are not judged (the
verifier draws such values apart from NaN and infinity, see `_inputs`, so a rewrite that
drops a NaN still fails).
Elements where only the oracle is not finite are compared directly with the original.

**Direct** (`compare="direct"`, and float64 and complex outputs, which have no wider type,
and float8 ones): an element passes when
`|actual - expected| <= atol * max(1, scale) + rtol * |expected|`, where `scale` is the
largest finite `|expected|` of that output in that example. Scaling `atol` by the output's
magnitude (only when it exceeds 1) absorbs the rounding noise of large outputs at elements
that happen to be near zero (cancellation), while keeping an error proportional to the
values themselves visible. Default `(rtol, atol)` per dtype: float32 and complex64
`(1e-4, 1e-5)`; float64 and complex128 `(1e-7, 1e-9)`; float16 `(1e-2, 1e-3)`; bfloat16
`(5e-2, 1e-2)`; float8 types `(0.25, 0.1)`. A user's `rtol`/`atol` replace the defaults of
every floating output. Relative error is `|actual - expected| / max(|expected|, atol_used)`.
NaN and infinity positions must match, except on examples with extreme inputs, where they
are not judged (as above).

Integers, booleans and strings are equal, exactly, in both modes; shapes and dtypes too.
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


ACCURACY = "accuracy"
DIRECT = "direct"
COMPARE_MODES = (ACCURACY, DIRECT)
DEFAULT_FACTOR = 8.0
FLOOR_ULPS = 4.0
ORACLE_DTYPES = ("float32", "float16", "bfloat16")
"""Output dtypes judged against the float64 oracle in accuracy mode."""


@dataclasses.dataclass(frozen=True, slots=True)
class Criterion:
    """How float outputs are judged (see the module docstring).

    `compare` is "accuracy" (against the float64 oracle, `factor` times the original's error)
    or "direct" (against the original, with `rtol`/`atol`; None: the dtype's default).
    `rtol`/`atol` also apply in accuracy mode to the outputs compared directly (float64).
    """

    compare: str = ACCURACY
    factor: float = DEFAULT_FACTOR
    rtol: float | None = None
    atol: float | None = None

    def __post_init__(self) -> None:
        if self.compare not in COMPARE_MODES:
            raise ValueError(f"compare must be one of {COMPARE_MODES}, got {self.compare!r}")
        if not (math.isfinite(self.factor) and self.factor >= 1):
            raise ValueError(f"factor must be a finite number >= 1, got {self.factor!r}")
        for label, value in (("rtol", self.rtol), ("atol", self.atol)):
            if value is not None and not (math.isfinite(value) and value >= 0):
                raise ValueError(f"{label} must be a finite number >= 0, got {value!r}")

    def uses_oracle(self, dtype: np.dtype[np.generic]) -> bool:
        """True when outputs of `dtype` are judged against the oracle."""
        return self.compare == ACCURACY and dtype.name in ORACLE_DTYPES

    def tolerance(self, dtype: np.dtype[np.generic]) -> Tolerance:
        """The direct tolerance for outputs of `dtype`."""
        return tolerance_for(dtype, self.rtol, self.atol)

    def describe(self, dtype: np.dtype[np.generic]) -> str:
        """The criterion for outputs of `dtype`, in a few words (a table cell)."""
        if self.uses_oracle(dtype):
            return f"<= {_compact(self.factor)}x original"
        return str(self.tolerance(dtype))


def accuracy_floor(dtype: np.dtype[np.generic]) -> float:
    """`FLOOR_ULPS` machine epsilons of `dtype`: the least error the original is credited."""
    import ml_dtypes

    eps = float(ml_dtypes.finfo(dtype).eps)  # type: ignore[no-untyped-call]
    return FLOOR_ULPS * eps


@dataclasses.dataclass(frozen=True, slots=True)
class Comparison:
    """How one output of one example compares; `reason` is empty when it passes.

    `max_abs_err`/`max_rel_err` are the direct differences from the original's output (None
    when they have no meaning: strings, a shape or dtype mismatch; `inf` when NaN or
    infinity positions differ). `basis` says how the output was judged: "exact", "direct"
    (`max_rel_err` against the tolerance), "oracle" (`original_err` and `rewritten_err` are
    `E(e)` and `E(y)` of the module docstring, `floor` the original's floor) or "close"
    (within `close_ulps` floors of the original: no oracle needed).
    """

    shape: tuple[int, ...]
    max_abs_err: float | None
    max_rel_err: float | None
    mismatched: int
    reason: str
    basis: str = "direct"
    original_err: float | None = None
    rewritten_err: float | None = None
    floor: float | None = None
    factor: float | None = None

    @property
    def ok(self) -> bool:
        """True when the output passes."""
        return not self.reason

    @property
    def ratio(self) -> float | None:
        """`E(y) / max(E(e), floor)` for an oracle comparison (None otherwise)."""
        if self.basis != "oracle" or self.rewritten_err is None or self.floor is None:
            return None
        reference = max(self.original_err or 0.0, self.floor)
        return self.rewritten_err / reference if reference > 0 else math.inf


def _as_float(array: npt.NDArray[np.generic]) -> npt.NDArray[Any]:
    if array.dtype.kind == "c":
        return array.astype(np.complex128)
    return array.astype(np.float64)


def _compare_inexact(
    expected: npt.NDArray[np.generic],
    actual: npt.NDArray[np.generic],
    tol: Tolerance,
    extreme_inputs: bool,
) -> Comparison:
    with np.errstate(invalid="ignore", over="ignore"):  # inf - inf is masked out below
        return _inexact_comparison(expected, actual, tol, extreme_inputs)


def _inexact_comparison(
    expected: npt.NDArray[np.generic],
    actual: npt.NDArray[np.generic],
    tol: Tolerance,
    extreme_inputs: bool,
) -> Comparison:
    e = _as_float(expected)
    a = _as_float(actual)
    e_nan = np.isnan(e)
    a_nan = np.isnan(a)
    e_inf = np.isinf(e)
    a_inf = np.isinf(a)
    # An array even for 0-d outputs (numpy gives a scalar there, which cannot be assigned to).
    nonfinite_bad = np.asarray((e_nan != a_nan) | ((e_inf | a_inf) & ~(e_nan | a_nan) & (e != a)))
    if extreme_inputs:
        # Inputs near the largest magnitude: reordered arithmetic overflows elsewhere, as in
        # the accuracy comparison (see the module docstring).
        nonfinite_bad[...] = False
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


def compare_arrays(
    expected: object, actual: object, tol: Tolerance, *, extreme_inputs: bool = False
) -> Comparison:
    """Compare one output of the rewritten model (`actual`) with the original's (`expected`).

    `extreme_inputs`: the inputs hold values near the dtype's largest magnitude, so NaN and
    infinity positions are not judged (see the module docstring).
    """
    if isinstance(expected, list) or isinstance(actual, list):
        return _compare_sequences(expected, actual, tol)
    e = np.asarray(expected)
    a = np.asarray(actual)
    if e.dtype != a.dtype:
        return Comparison(a.shape, None, None, max(a.size, e.size), f"dtype {a.dtype} != {e.dtype}")
    if e.shape != a.shape:
        return Comparison(a.shape, None, None, max(a.size, e.size), f"shape {a.shape} != {e.shape}")
    if is_inexact(e.dtype) and not tol.exact:
        return _compare_inexact(e, a, tol, extreme_inputs)
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


# ---------------------------------------------------------------------------------------------
# Accuracy against the float64 oracle


def _nonfinite_mismatch(e: npt.NDArray[Any], a: npt.NDArray[Any]) -> npt.NDArray[np.bool_]:
    """Elements whose NaN or infinity does not match: NaN by position, infinities by value."""
    e_nan = np.isnan(e)
    a_nan = np.isnan(a)
    infinite = (np.isinf(e) | np.isinf(a)) & ~(e_nan | a_nan)
    return (e_nan != a_nan) | (infinite & (e != a))  # type: ignore[no-any-return]


def _magnitude(values: npt.NDArray[Any]) -> float:
    """Root-mean-square of the values (the floor of each element's magnitude)."""
    if not values.size:
        return 0.0
    return float(np.sqrt(np.mean(np.square(values))))


def _direct_figures(
    e: npt.NDArray[Any], a: npt.NDArray[Any], finite: npt.NDArray[Any]
) -> tuple[float, float]:
    diff = np.where(finite, np.abs(a - e), 0.0)
    denominator = np.maximum(np.abs(np.where(finite, e, 0.0)), 1e-30)
    max_abs = float(diff.max()) if diff.size else 0.0
    max_rel = float((diff / denominator).max()) if diff.size else 0.0
    return max_abs, max_rel


def compare_close(expected: object, actual: object, criterion: Criterion) -> Comparison | None:
    """The verdict without the oracle when one is certain (see the module docstring).

    A passing comparison when the rewritten output is within `(factor - 1) / 2` floors of
    the original's, with NaN and infinities where the original has them; a failing one when
    the shapes or dtypes differ; None when only the oracle can tell (also when NaN or
    infinity positions differ: the original may have overflowed where float64 does not).
    """
    e = np.asarray(expected)
    a = np.asarray(actual)
    if e.dtype != a.dtype or e.shape != a.shape or isinstance(expected, list):
        return compare_arrays(expected, actual, criterion.tolerance(e.dtype))
    with np.errstate(invalid="ignore", over="ignore"):
        e64 = e.astype(np.float64)
        a64 = a.astype(np.float64)
        if np.any(_nonfinite_mismatch(e64, a64)):
            return None
        finite = np.isfinite(e64) & np.isfinite(a64)
        max_abs, max_rel = _direct_figures(e64, a64, finite)
        scale = _magnitude(e64[finite])
        floor = accuracy_floor(e.dtype)
        if scale == 0.0 and not np.any(a64[finite] != e64[finite]):
            return Comparison(
                e.shape, 0.0, 0.0, 0, "", basis="close", floor=floor, rewritten_err=0.0
            )
        if scale == 0.0:
            return None
        scaled = np.abs(a64 - e64)[finite] / (np.abs(e64[finite]) + scale)
    distance = float(scaled.max()) if scaled.size else 0.0
    if distance <= (criterion.factor - 1.0) / 2.0 * floor:
        return Comparison(
            e.shape,
            max_abs,
            max_rel,
            0,
            "",
            basis="close",
            rewritten_err=distance,
            floor=floor,
            factor=criterion.factor,
        )
    return None


def compare_accuracy(
    oracle: object,
    expected: object,
    actual: object,
    criterion: Criterion,
    *,
    extreme_inputs: bool = False,
    sensitivity: float = 0.0,
) -> Comparison:
    """Judge `actual` (rewritten) against the float64 `oracle`, relative to `expected`'s error.

    `expected` and `actual` have the same dtype and shape (`compare_close` checked), and
    `oracle` has that shape. `extreme_inputs`: the inputs hold values near the dtype's
    largest magnitude (see the module docstring). `sensitivity`: how far float64's result
    moves, measured like an error, when every input is rounded once more (see the module
    docstring); it raises the original's floor.
    """
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        return _accuracy(
            np.asarray(oracle),
            np.asarray(expected),
            np.asarray(actual),
            criterion,
            extreme_inputs,
            sensitivity,
        )


def _accuracy(
    oracle: npt.NDArray[Any],
    expected: npt.NDArray[Any],
    actual: npt.NDArray[Any],
    criterion: Criterion,
    extreme_inputs: bool,
    sensitivity: float,
) -> Comparison:
    o = oracle.astype(np.float64)
    e = expected.astype(np.float64)
    a = actual.astype(np.float64)
    e_finite, a_finite, o_finite = np.isfinite(e), np.isfinite(a), np.isfinite(o)
    scale = max(_magnitude(o[o_finite]), float(np.finfo(np.float64).tiny))
    denominator = np.abs(o) + scale
    # Elements where the original has no correct digit (its own error is half the magnitude).
    lost = ~e_finite | (np.abs(e - o) >= 0.5 * denominator)
    like_e = ~_nonfinite_mismatch(e, a)
    like_o = ~_nonfinite_mismatch(o, a)
    # Where float64 is not finite either, NaN or infinity is the answer: the rewritten model
    # makes the original's or float64's.
    bad = ~o_finite & ~e_finite & ~(like_e | like_o)
    # A NaN or infinity only the rewritten model makes, where the original had digits.
    bad |= ~a_finite & e_finite & ((o_finite & ~lost) | (~o_finite & ~like_o))
    if extreme_inputs:
        # Inputs near the largest magnitude: reordered arithmetic overflows elsewhere.
        bad[:] = False
        lost |= ~a_finite
    judged_e = e_finite & o_finite
    judged_a = a_finite & o_finite & e_finite & ~lost
    max_abs, max_rel = _direct_figures(e, a, e_finite & a_finite)
    err_e = np.where(judged_e, np.abs(e - o) / denominator, 0.0)
    err_a = np.where(judged_a, np.abs(a - o) / denominator, 0.0)
    original_err = float(err_e.max()) if err_e.size else 0.0
    rewritten_err = float(err_a.max()) if err_a.size else 0.0
    floor = max(accuracy_floor(expected.dtype), sensitivity)
    allowed = criterion.factor * max(original_err, floor)
    inaccurate = judged_a & (err_a > allowed)
    # Where only the oracle overflowed, the original is the reference.
    unjudged = e_finite & a_finite & ~o_finite
    direct = np.zeros_like(bad)
    tolerance = criterion.tolerance(expected.dtype)
    if np.any(unjudged):
        direct = unjudged & (np.abs(a - e) > tolerance.atol + tolerance.rtol * np.abs(e))
    mismatched = int(np.count_nonzero(bad | inaccurate | direct))
    reason = ""
    if mismatched:
        parts = []
        if np.any(bad):
            parts.append(f"{int(np.count_nonzero(bad))} NaN/inf positions differ")
        if np.any(inaccurate):
            ratio = rewritten_err / max(original_err, floor)
            credited = ""
            if sensitivity > max(original_err, accuracy_floor(expected.dtype)):
                credited = f", credited {_compact(sensitivity)} for the inputs' rounding"
            parts.append(
                f"{int(np.count_nonzero(inaccurate))} less accurate than allowed: error "
                f"{_compact(rewritten_err)} against float64 where the original's is "
                f"{_compact(original_err)}{credited} ({_ratio_text(ratio)}, allowed "
                f"{_compact(criterion.factor)}x)"
            )
        if np.any(direct):
            parts.append(
                f"{int(np.count_nonzero(direct))} outside {tolerance} where float64 overflowed"
            )
        reason = f"{mismatched} of {expected.size} elements differ ({'; '.join(parts)})"
    if np.any(bad):
        max_abs = max_rel = math.inf
    return Comparison(
        expected.shape,
        max_abs,
        max_rel,
        mismatched,
        reason,
        basis="oracle",
        original_err=original_err,
        rewritten_err=rewritten_err,
        floor=floor,
        factor=criterion.factor,
    )


def _ratio_text(ratio: float) -> str:
    if not math.isfinite(ratio) or ratio > 1e6:
        return "over 1e6x"
    if ratio >= 10:
        return f"{ratio:.0f}x"
    return f"{ratio:.2g}x"
