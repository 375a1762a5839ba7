"""Equivalence queries: does the rewrite compute what the pattern computes, for every input?

`equivalent(lhs, rhs, inputs=..., assumptions=...)` asks, output by output, for an input
(dims and elements) satisfying the assumptions where the rewritten side (`rhs`) does not
*refine* the original (`lhs`), in the sense Alive2 gives the word:

* where the original's shape preconditions fail (onnxruntime refuses the model), anything
  goes; elsewhere the rewritten side's must hold and its shape must be the original's;
* at every index inside that shape where the original's element is not poison (unspecified:
  a float cast to an integer out of range, an integer division by zero, a gather out of
  bounds), the rewritten element is not poison and is the same value.

*The same value*: integers and booleans equal; floats equal as numbers, with NaN matching
NaN and +0 matching -0 (`signed_zeros=True` makes the sign of zero count too). z3 has one NaN,
so NaN payloads are not modelled; a NaN on the original side is matched by any NaN, as
Alive2's refinement allows. The equality is the one verification applies (a rewrite that
turns -0 into +0, `x + 0 -> x`, passes both), and `signed_zeros` is the bit-exact one short of
payloads.

`ulps=k` relaxes the equality of finite floats to *within k units in the last place* (the
distance between their positions in the dtype's ordered set of values), for rewrites that
round differently on purpose (`x * Reciprocal(d) -> x / d`, one rounding instead of two),
or within k units in the last place of the *rounding scale* of the two sides
(`rounding_scale`: the first-order bound numerical analysis puts on the rounding error of a
computation, |a| + |b| for a sum, |a| * |b| for a product, carried through the expression).
That is the error of a reassociation where terms cancel: `x * HardSigmoid(x)` and the fused
`HardSwish(x)` both compute `x / 6 + 0.5` near x = -3, close to 0, and differ there by dozens
of ulps of the tiny result but by a fraction of an ulp of 3, the size of what was summed. A
wrong rewrite (a swapped operand, a lost factor) differs by far more somewhere, and is still
found. It also accepts rounding at the edge of the range as
verification does: an infinity facing a finite value of the same sign at least half the
dtype's largest (a fused Gelu gives x where `x * (1 + erf(...))` overflows). NaN still
matches only NaN.

`finite_only=True` is a rule's `assumes finite` as the library means it (the rewrite is exact
away from the dtype's extremes): where the original's element is NaN or an infinity (an input
that is, or an overflow on the way), anything goes, and where the original is within
`EXTREME_ULPS` of the largest finite value, the rewrite may round to the infinity of its sign.

The answer is `Proved`, a `Counterexample` (dims, input arrays, the index and both values,
read from the solver's model, with dims kept at most `SMALL_DIM` when the solver finds one
there), or `Unknown` with the solver's reason (a timeout, nonlinear integer arithmetic).
Symbolic dims of the inputs are int64 sizes (0 to 2**63 - 1); `assumptions` add more
(non-empty tensors, finite inputs, a rule's where-conditions).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import z3

import ir
from rewriter.prove._dtypes import kind_of, sort_of, to_python
from rewriter.prove._evaluate import NotConcreteError, concrete
from rewriter.prove._tensor import SymbolicTensor, TooLargeError, all_of, as_int, term

SMALL_DIM = 16
LARGEST_DIM = 2**63 - 1
DEFAULT_TIMEOUT = 10.0


@dataclasses.dataclass(frozen=True, slots=True)
class Proved:
    """The rewrite refines the original on every input the assumptions allow."""

    seconds: float


@dataclasses.dataclass(frozen=True, slots=True)
class Counterexample:
    """An input on which the rewrite does not refine the original, and what differs.

    `inputs` holds the arrays it could read (inputs too large to read are left out and named
    in `reason`); `index`, `original` and `rewritten` are empty for a shape difference.
    `model` is the solver's model itself, for reading other terms of the query (a rule's
    symbolic attributes and computed constants) when the counterexample is replayed;
    `rounding_scale` what the two sides' rounding errors at the element are proportional to
    (float outputs; see `rounding_scale`).
    """

    output: int
    reason: str
    dims: Mapping[str, int]
    inputs: Mapping[str, np.ndarray[Any, Any]]
    index: tuple[int, ...] = ()
    original: object = None
    rewritten: object = None
    seconds: float = 0.0
    model: z3.ModelRef | None = dataclasses.field(default=None, compare=False, repr=False)
    rounding_scale: float | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class Unknown:
    """The solver could not decide (its reason: a timeout, an undecidable fragment)."""

    reason: str
    seconds: float = 0.0


Verdict = Proved | Counterexample | Unknown


def same_value(tensor: SymbolicTensor, a: z3.ExprRef, b: z3.ExprRef, signed_zeros: bool) -> Any:
    """The equality of two elements of `tensor`'s type (see the module docstring)."""
    kind = kind_of(tensor.dtype)
    if not kind.is_float:
        return a == b
    if signed_zeros:
        return a == b  # SMT equality: NaN = NaN, +0 != -0
    return z3.Or(z3.And(z3.fpIsNaN(a), z3.fpIsNaN(b)), z3.fpEQ(a, b))


def within_ulps(a: z3.ExprRef, b: z3.ExprRef, ulps: int) -> Any:
    """Finite floats at most `ulps` apart in their dtype's ordered set of values."""
    bits_a, bits_b = z3.fpToIEEEBV(a), z3.fpToIEEEBV(b)
    width = bits_a.size()

    # The position of a float among all floats: magnitude bits, negated for a negative sign;
    # two's complement with two spare bits holds every difference.
    def position(bits: z3.BitVecRef) -> z3.BitVecRef:
        magnitude = z3.ZeroExt(3, z3.Extract(width - 2, 0, bits))
        return z3.If(z3.Extract(width - 1, width - 1, bits) == 1, -magnitude, magnitude)

    distance = position(bits_a) - position(bits_b)
    bound = z3.BitVecVal(ulps, width + 2)
    finite = z3.And(z3.Not(z3.fpIsNaN(a)), z3.Not(z3.fpIsInf(a)))
    finite = z3.And(finite, z3.Not(z3.fpIsNaN(b)), z3.Not(z3.fpIsInf(b)))
    return z3.And(finite, distance <= bound, distance >= -bound)


def rounding_scale(value: z3.ExprRef) -> z3.FPRef:
    """What the rounding error of computing `value` is proportional to, as a double.

    The first-order bound of numerical analysis: each operation's rounding error is at most
    an ulp of its result, and the errors already made travel on by the operation's absolute
    counterpart, so the sum is `eps * S` up to a small factor, with S computed from the
    expression by |a| + |b| for `a + b` and `a - b`, |a| * |b| for `a * b`, |a| / |b| for
    `a / b` (only the dividend's error travels), the larger of the two for Min and Max,
    the chosen branch for a conditional, and |v| for an input, a constant or an op the
    solver treats as unknown (NaN and infinities count as 0 there).
    """
    return _scale(value, {})


_SUMS = (z3.Z3_OP_FPA_ADD, z3.Z3_OP_FPA_SUB)
_KEPT = (z3.Z3_OP_FPA_NEG, z3.Z3_OP_FPA_ABS)


def _scale(value: z3.ExprRef, known: dict[int, z3.FPRef]) -> z3.FPRef:
    found = known.get(value.get_id())
    if found is not None:
        return found
    wide, rounding = z3.Float64(), z3.RNE()
    kind = value.decl().kind() if z3.is_app(value) else None
    parts = value.children()
    if kind in _SUMS:
        scale = z3.fpAdd(rounding, _scale(parts[1], known), _scale(parts[2], known))
    elif kind == z3.Z3_OP_FPA_MUL:
        scale = z3.fpMul(rounding, _scale(parts[1], known), _scale(parts[2], known))
    elif kind == z3.Z3_OP_FPA_DIV:
        divisor = z3.fpAbs(z3.fpFPToFP(rounding, parts[2], wide))
        scale = z3.fpDiv(rounding, _scale(parts[1], known), divisor)
    elif kind == z3.Z3_OP_FPA_FMA:
        product = z3.fpMul(rounding, _scale(parts[1], known), _scale(parts[2], known))
        scale = z3.fpAdd(rounding, product, _scale(parts[3], known))
    elif kind in _KEPT:
        scale = _scale(parts[0], known)
    elif kind in (z3.Z3_OP_FPA_MIN, z3.Z3_OP_FPA_MAX):
        scale = z3.fpMax(_scale(parts[0], known), _scale(parts[1], known))
    elif kind == z3.Z3_OP_ITE and isinstance(value, z3.FPRef):
        scale = z3.If(parts[0], _scale(parts[1], known), _scale(parts[2], known))
    elif kind == z3.Z3_OP_FPA_TO_FP and len(parts) == 2 and isinstance(parts[1], z3.FPRef):
        scale = _scale(parts[1], known)
    else:
        size = z3.fpAbs(z3.fpFPToFP(rounding, value, wide))
        special = z3.Or(z3.fpIsNaN(value), z3.fpIsInf(value))
        scale = z3.If(special, z3.FPVal(0.0, wide), size)
    known[value.get_id()] = scale
    return scale


def _both_scales(left: z3.ExprRef, right: z3.ExprRef) -> z3.FPRef:
    """The rounding scale of the two sides together (`rounding_scale` of each, summed)."""
    return z3.fpAdd(z3.RNE(), rounding_scale(left), rounding_scale(right))


def within_rounding_scale(
    a: z3.ExprRef, b: z3.ExprRef, scale: z3.FPRef, ulps: int, dtype: ir.DataType
) -> Any:
    """Finite floats at most `ulps * eps * scale` apart, `scale` finite (`rounding_scale`)."""
    wide = z3.Float64()
    # ulps * eps is a power of two for the ulps used, so the bound is exact in doubles
    step = z3.FPVal(ulps * float(np.finfo(ir.numpy_dtype(dtype)).eps), wide)
    apart = z3.fpAbs(
        z3.fpSub(z3.RNE(), z3.fpFPToFP(z3.RNE(), a, wide), z3.fpFPToFP(z3.RNE(), b, wide))
    )
    finite = z3.And(z3.Not(z3.fpIsNaN(a)), z3.Not(z3.fpIsInf(a)))
    finite = z3.And(finite, z3.Not(z3.fpIsNaN(b)), z3.Not(z3.fpIsInf(b)))
    finite = z3.And(finite, z3.Not(z3.fpIsNaN(scale)), z3.Not(z3.fpIsInf(scale)))
    return z3.And(finite, z3.fpLEQ(apart, z3.fpMul(z3.RNE(), step, scale)))


EXTREME_ULPS = 4
"""How close to the largest finite value a result is at the dtype's extreme (`finite_only`)."""


def at_range_edge(a: z3.ExprRef, b: z3.ExprRef, dtype: ir.DataType) -> Any:
    """One side infinite, the other finite, of the same sign and at least half the largest."""
    half = z3.FPVal(float(np.finfo(ir.numpy_dtype(dtype)).max) / 2, sort_of(dtype))
    same_sign = z3.fpIsNegative(a) == z3.fpIsNegative(b)

    def edge(infinite: z3.ExprRef, finite: z3.ExprRef) -> Any:
        return z3.And(
            z3.fpIsInf(infinite),
            z3.Not(z3.fpIsInf(finite)),
            z3.Not(z3.fpIsNaN(finite)),
            z3.fpGEQ(z3.fpAbs(finite), half),
        )

    return z3.And(same_sign, z3.Or(edge(a, b), edge(b, a)))


def rounded_to_infinity(original: z3.ExprRef, rewritten: z3.ExprRef, dtype: ir.DataType) -> Any:
    """`rewritten` is the infinity `original` rounds to at the dtype's extreme."""
    threshold = np.finfo(ir.numpy_dtype(dtype)).max
    for _ in range(EXTREME_ULPS):
        threshold = np.nextafter(threshold, threshold.dtype.type(0))
    bound = z3.FPVal(float(threshold), sort_of(dtype))
    same_sign = z3.fpIsNegative(original) == z3.fpIsNegative(rewritten)
    return z3.And(z3.fpIsInf(rewritten), z3.fpGEQ(z3.fpAbs(original), bound), same_sign)


def _symbolic_dims(inputs: Mapping[str, SymbolicTensor]) -> dict[str, z3.ArithRef]:
    found: dict[str, z3.ArithRef] = {}
    for tensor in inputs.values():
        for dim in tensor.shape:
            if not isinstance(dim, int) and as_int(dim) is None:
                for symbol in _constants_in(dim):
                    found[str(symbol)] = symbol
    return found


def _constants_in(expression: z3.ExprRef) -> list[z3.ArithRef]:
    if z3.is_const(expression) and expression.decl().kind() == z3.Z3_OP_UNINTERPRETED:
        return [expression]
    found: list[z3.ArithRef] = []
    for child in expression.children():
        found.extend(_constants_in(child))
    return found


def _solver() -> z3.Solver:
    """A solver that bit-blasts floating point (z3's `qffp` tactic), else z3's SMT core.

    z3's default solver gives up on floating-point formulas that also hold integers (the
    index and the dims): x * 1 == x in float64 times out after minutes there, and takes half
    a second once the floats are bit-blasted. The tactic handles the integers and the
    uninterpreted functions too; formulas it cannot handle go to the SMT core.
    """
    return z3.OrElse(z3.Tactic("qffp"), z3.Tactic("smt")).solver()


class _Query:
    """One query's solver, assumptions and the inputs to read a counterexample from."""

    def __init__(
        self,
        inputs: Mapping[str, SymbolicTensor],
        assumptions: Sequence[z3.BoolRef],
        timeout: float,
    ) -> None:
        self.inputs = inputs
        self.dims = _symbolic_dims(inputs)
        # a dim is an int64 of ONNX's: from 0 to 2**63 - 1 (INT64_MAX ends mean "to the end")
        bounds = [z3.And(d >= 0, d <= LARGEST_DIM) for d in self.dims.values()]
        self.base = all_of([*assumptions, *bounds])
        self.timeout = timeout
        self.start = time.perf_counter()

    def elapsed(self) -> float:
        return time.perf_counter() - self.start

    def solve(self, condition: z3.BoolRef) -> z3.ModelRef | str | None:
        """A model of `base and condition` (small dims first), None if none, or why unknown."""
        if self.dims:
            small = self._check(condition, bounded=True)
            if isinstance(small, z3.ModelRef):
                return small
        return self._check(condition, bounded=False)

    def _check(self, condition: z3.BoolRef, *, bounded: bool) -> z3.ModelRef | str | None:
        solver = _solver()
        remaining = max(self.timeout - self.elapsed(), 0.1)
        solver.set("timeout", int(remaining * 1000))
        solver.add(self.base, condition)
        if bounded:
            solver.add(*(d <= SMALL_DIM for d in self.dims.values()))
        answer = solver.check()
        if answer == z3.sat:
            return solver.model()
        if answer == z3.unknown:
            return solver.reason_unknown() or "unknown"
        return None

    def counterexample(
        self, output: int, model: z3.ModelRef, reason: str, **found: Any
    ) -> Counterexample:
        dims = {
            name: int(model.eval(d, model_completion=True).as_long())
            for name, d in self.dims.items()
        }
        arrays: dict[str, np.ndarray[Any, Any]] = {}
        unread: list[str] = []
        for name, tensor in self.inputs.items():
            try:
                arrays[name] = concrete(tensor, model).values
            except NotConcreteError:
                unread.append(name)
        if unread:
            reason += f" (inputs not read: {', '.join(unread)})"
        return Counterexample(
            output, reason, dims, arrays, seconds=self.elapsed(), model=model, **found
        )


def _check_output(
    query: _Query,
    output: int,
    lhs: SymbolicTensor,
    rhs: SymbolicTensor,
    signed_zeros: bool,
    ulps: int,
    finite_only: bool,
) -> Counterexample | Unknown | None:
    """None when `rhs` refines `lhs`; else what the solver found."""
    if lhs.rank != rhs.rank or lhs.dtype != rhs.dtype:
        model = query.solve(lhs.valid)
        if isinstance(model, z3.ModelRef):
            reason = (
                f"the rewrite gives {rhs.dtype.onnx_name} of rank {rhs.rank} where the original "
                f"gives {lhs.dtype.onnx_name} of rank {lhs.rank}"
            )
            return query.counterexample(output, model, reason)
        return Unknown(model, query.elapsed()) if isinstance(model, str) else None
    shapes = all_of([term(a) == term(b) for a, b in zip(lhs.shape, rhs.shape, strict=True)])
    found = query.solve(z3.And(lhs.valid, z3.Not(z3.And(rhs.valid, shapes))))
    if isinstance(found, str):
        return Unknown(found, query.elapsed())
    if found is not None:
        return query.counterexample(output, found, _shape_reason(lhs, rhs, found))
    index = tuple(z3.Int(f"_index{k}") for k in range(lhs.rank))
    inside = all_of([z3.And(i >= 0, i < term(d)) for i, d in zip(index, lhs.shape, strict=True)])
    left, right = lhs.at(index), rhs.at(index)
    premise = [lhs.valid, inside]
    if left.poison is not None:
        premise.append(z3.Not(left.poison))
    same = same_value(lhs, left.value, right.value, signed_zeros)
    is_float = kind_of(lhs.dtype).is_float
    # either side's rounding: both compute one real number, each with its own error; built
    # only where the query or a counterexample needs it
    scale = _both_scales(left.value, right.value) if ulps and is_float else None
    if ulps and scale is not None:
        same = z3.Or(same, within_ulps(left.value, right.value, ulps))
        same = z3.Or(same, within_rounding_scale(left.value, right.value, scale, ulps, lhs.dtype))
        same = z3.Or(same, at_range_edge(left.value, right.value, lhs.dtype))
    if finite_only and kind_of(lhs.dtype).is_float:
        premise.append(z3.Not(z3.Or(z3.fpIsNaN(left.value), z3.fpIsInf(left.value))))
        same = z3.Or(same, rounded_to_infinity(left.value, right.value, lhs.dtype))
    agreed = [same]
    if right.poison is not None:
        agreed.append(z3.Not(right.poison))
    found = query.solve(z3.And(*premise, z3.Not(all_of(agreed))))
    if isinstance(found, str):
        return Unknown(found, query.elapsed())
    if found is None:
        return None
    position = tuple(int(found.eval(i, model_completion=True).as_long()) for i in index)
    original = _read(lhs, left.value, found)
    rewritten = _read(rhs, right.value, found)
    poisoned = right.poison is not None and z3.is_true(
        found.eval(right.poison, model_completion=True)
    )
    what = "is unspecified (poison)" if poisoned else f"is {rewritten!r}"
    reason = f"at {list(position)} the original gives {original!r}, the rewrite {what}"
    size = None
    if is_float:
        scale = scale if scale is not None else _both_scales(left.value, right.value)
        size = float(to_python(found.eval(scale, model_completion=True), ir.DataType.DOUBLE))
    return query.counterexample(
        output,
        found,
        reason,
        index=position,
        original=original,
        rewritten=rewritten,
        rounding_scale=size,
    )


def _read(tensor: SymbolicTensor, value: z3.ExprRef, model: z3.ModelRef) -> object:
    try:
        return to_python(model.eval(value, model_completion=True), tensor.dtype)
    except ValueError:
        return str(model.eval(value, model_completion=True))


def _shape_reason(lhs: SymbolicTensor, rhs: SymbolicTensor, model: z3.ModelRef) -> str:
    if not z3.is_true(model.eval(rhs.valid, model_completion=True)):
        return "onnxruntime would refuse the rewrite where it runs the original (shapes)"
    left = [model.eval(term(d), model_completion=True) for d in lhs.shape]
    right = [model.eval(term(d), model_completion=True) for d in rhs.shape]
    return f"the rewrite's shape {right} differs from the original's {left}"


def equivalent(
    lhs: Sequence[SymbolicTensor],
    rhs: Sequence[SymbolicTensor],
    *,
    inputs: Mapping[str, SymbolicTensor],
    assumptions: Sequence[z3.BoolRef] = (),
    timeout: float = DEFAULT_TIMEOUT,
    signed_zeros: bool = False,
    ulps: int = 0,
    finite_only: bool = False,
) -> Verdict:
    """Whether each of `rhs` refines the `lhs` output at its position (module docstring).

    `inputs` are the symbolic inputs both sides read (their dims are the query's symbols,
    their elements are read back into a counterexample); `timeout` bounds the whole query in
    seconds; `ulps` allows finite floats that far apart, `finite_only` differences at the
    dtype's extremes (module docstring).

    Raises:
        ValueError: `lhs` and `rhs` have different numbers of outputs.
    """
    if len(lhs) != len(rhs):
        raise ValueError(f"{len(lhs)} original outputs against {len(rhs)} rewritten ones")
    query = _Query(inputs, assumptions, timeout)
    for output, (left, right) in enumerate(zip(lhs, rhs, strict=True)):
        try:
            verdict = _check_output(query, output, left, right, signed_zeros, ulps, finite_only)
        except TooLargeError as exc:
            return Unknown(str(exc), query.elapsed())
        if verdict is not None:
            return verdict
    return Proved(query.elapsed())
