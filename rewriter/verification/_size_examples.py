"""Examples at the sizes a model mentions, and twice the largest of them.

Generated examples draw dims from a small range, where a rewrite that holds only up to some
size agrees with the original (`Slice(x, 0, 8) -> x` on a sequence of at most 6 positions).
After them, each free dim in turn takes the sizes the model mentions for it
(`_model_sizes`: its two largest, and twice the largest, the others at a small size), on
ordinary values. An original that refuses a size (a position table of 128 entries refuses a
sequence of 256) is outside its domain, not a failure. When the two models disagree at a
size, the smallest disagreeing size between the largest that agreed and that one is found by
bisection, so the counterexample is as small as the disagreement allows.

Runs are bounded: sizes above `MAX_TRIED_SIZE` are not tried (a 32k-position table would
make attention matrices of gigabytes), nor a plan whose inputs would hold more than
`MAX_ELEMENTS` elements; the trials stop once they took longer than their time budget (the
caller gives half the drawn examples' time, at least `MIN_SECONDS`), and the sizes the caller
fixed are never changed. What was not tried is reported with the reason.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable, Mapping, Sequence

from rewriter.verification._inputs import DimKey, Example, InputSpec, dim_keys, sized_example
from rewriter.verification._model_sizes import ModelSizes, symbol_of

logger = logging.getLogger(__name__)

MAX_ELEMENTS = 1 << 22
MAX_TRIED_SIZE = 2048
MIN_SECONDS = 2.0
# How many of a dim's mentioned sizes are tried (the largest ones), besides twice the largest.
SIZES_PER_DIM = 2
AGREES = "agrees"
REFUSED = "refused by the original"
DISAGREES = "disagrees"
TOO_LARGE = "not tried: too large"
OUT_OF_TIME = "not tried: time budget spent"

Judge = Callable[[Example], "bool | None"]
"""Runs both models on an example: True (they agree), False (they do not), None (refused)."""


@dataclasses.dataclass(frozen=True, slots=True)
class SizeTrial:
    """One dim at one size: what the two models did there."""

    key: DimKey
    size: int
    verdict: str


@dataclasses.dataclass(frozen=True, slots=True)
class SizeReport:
    """The trials made, and the smallest disagreeing example (None when all agreed)."""

    trials: tuple[SizeTrial, ...]
    failing: Example | None = None

    def describe(self) -> str:
        """One line, e.g. "`sequence` 128, 256 (refused by the original)"."""
        by_key: dict[DimKey, list[str]] = {}
        for trial in self.trials:
            text = str(trial.size)
            if trial.verdict != AGREES:
                text += f" ({trial.verdict})"
            by_key.setdefault(trial.key, []).append(text)
        parts = [f"`{_label(key)}` {', '.join(sizes)}" for key, sizes in by_key.items()]
        return "; ".join(parts)


def _label(key: DimKey) -> str:
    return key[1] if key[0] == "sym" else f"axis {key[1]}"


def _elements(specs: Sequence[InputSpec], sizes: Mapping[DimKey, int]) -> int:
    total = 0
    for spec in specs:
        count = 1
        for dim in spec.dims or ():
            count *= dim if isinstance(dim, int) else sizes[dim]
        total += count
    return total


def _resting_size(low: int, high: int) -> int:
    """The size the other dims keep while one dim takes a mentioned size (2 when allowed)."""
    return min(max(2, low), high)


def plan_sizes(
    specs: Sequence[InputSpec],
    sizes: ModelSizes,
    ranges: Mapping[DimKey, tuple[int, int]],
    default: tuple[int, int],
) -> list[tuple[DimKey, int]]:
    """The (dim, size) trials, dim by dim: its largest mentioned sizes, then twice the largest.

    `ranges` are the dims' size ranges (a dim whose range is one size is fixed and never
    tried); `default` the range of the others. Sizes the range already covers are skipped.
    """
    trials: list[tuple[DimKey, int]] = []
    for key in dim_keys(specs):
        low, high = ranges.get(key, default)
        if low == high:
            continue
        mentioned = sizes.for_symbol(symbol_of(key))
        if not mentioned:
            continue
        chosen = [*mentioned[-SIZES_PER_DIM:], 2 * mentioned[-1]]
        for size in dict.fromkeys(chosen):
            if size > high:
                trials.append((key, size))
    return trials


def _dims_for(
    specs: Sequence[InputSpec],
    key: DimKey,
    size: int,
    ranges: Mapping[DimKey, tuple[int, int]],
    default: tuple[int, int],
) -> dict[DimKey, int]:
    dims = {other: _resting_size(*ranges.get(other, default)) for other in dim_keys(specs)}
    dims[key] = size
    return dims


def try_sizes(
    specs: Sequence[InputSpec],
    sizes: ModelSizes,
    ranges: Mapping[DimKey, tuple[int, int]],
    default: tuple[int, int],
    judge: Judge,
    budget: float = MIN_SECONDS,
) -> SizeReport:
    """Run the planned trials (see the module docstring); stops at the first disagreement.

    `budget`: seconds the trials may take (past it, the rest are reported as not tried).
    """
    trials: list[SizeTrial] = []
    agreed: dict[DimKey, int] = {}
    start = time.perf_counter()
    for key, size in plan_sizes(specs, sizes, ranges, default):
        dims = _dims_for(specs, key, size, ranges, default)
        if size > MAX_TRIED_SIZE or _elements(specs, dims) > MAX_ELEMENTS:
            trials.append(SizeTrial(key, size, TOO_LARGE))
            continue
        if time.perf_counter() - start > budget:
            trials.append(SizeTrial(key, size, OUT_OF_TIME))
            continue
        verdict = judge(sized_example(specs, dims))
        if verdict is None:
            trials.append(SizeTrial(key, size, REFUSED))
            continue
        if verdict:
            trials.append(SizeTrial(key, size, AGREES))
            agreed[key] = max(agreed.get(key, 0), size)
            continue
        below = agreed.get(key, ranges.get(key, default)[1])
        smallest = _smallest_failing(specs, key, below, size, ranges, default, judge)
        trials.append(SizeTrial(key, smallest, DISAGREES))
        return SizeReport(tuple(trials), sized_example(specs, {**dims, key: smallest}))
    return SizeReport(tuple(trials))


def _smallest_failing(
    specs: Sequence[InputSpec],
    key: DimKey,
    agrees: int,
    fails: int,
    ranges: Mapping[DimKey, tuple[int, int]],
    default: tuple[int, int],
    judge: Judge,
) -> int:
    """The smallest size in (agrees, fails] found to disagree, by bisection."""
    while fails - agrees > 1:
        middle = (agrees + fails) // 2
        verdict = judge(sized_example(specs, _dims_for(specs, key, middle, ranges, default)))
        if verdict is False:
            fails = middle
        else:
            agrees = middle  # agreeing or refused: look above
    return fails
