"""Finding sizes of symbolic dims that the original model accepts.

Generated inputs draw every dim's size from 1 to 6. A model that needs more rejects all of
them: a stack of strided convolutions over audio needs hundreds of samples, a model with a
fixed position table needs exactly its length. When the original model fails on plain
values at the usual sizes, `find_sizes` tries, running only the original model:

1. every free dim at 8, 16, 32, ... up to `MAX_SEARCHED_SIZE` (while the inputs stay under
   `MAX_ELEMENTS` elements in all);
2. every free dim at each size the model's constants mention (`suggested_sizes`), the most
   frequent first;
3. one dim at a time at those sizes, the others at 2;

and shrinks each dim of the first assignment that runs, one at a time, to the smallest size
that still runs (by bisection: larger sizes are assumed to keep working). Each dim then
draws its sizes from `[found, found + max(5, found // 8)]`; dims the caller fixed stay fixed.
"""

from __future__ import annotations

import dataclasses
import logging
import math
from collections.abc import Callable, Iterator, Mapping, Sequence

from rewriter.verification._inputs import (
    DIM_MAX,
    DIM_MIN,
    MAX_SEARCHED_SIZE,
    DimKey,
    InputSpec,
    dim_keys,
)

logger = logging.getLogger(__name__)

MAX_ELEMENTS = 1 << 22
MAX_PROBES = 60
_GROWTH = tuple(1 << k for k in range(3, int(math.log2(MAX_SEARCHED_SIZE)) + 1))

Runs = Callable[[Mapping[DimKey, int]], bool]
"""Whether the original model runs with these sizes (plain values)."""


@dataclasses.dataclass(frozen=True, slots=True)
class FoundSizes:
    """The ranges the search settled on, and what it tried."""

    ranges: dict[DimKey, tuple[int, int]]
    probes: int

    def describe(self) -> str:
        """One line: the sizes found, e.g. "`samples` 400..450"."""
        parts = []
        for key, (lo, hi) in self.ranges.items():
            name = key[1] if key[0] == "sym" else f"axis {key[1]}"
            parts.append(f"`{name}` {lo}" if lo == hi else f"`{name}` {lo}..{hi}")
        return ", ".join(parts)


def _elements(specs: Sequence[InputSpec], sizes: Mapping[DimKey, int]) -> int:
    total = 0
    for spec in specs:
        count = 1
        for dim in spec.dims or ():
            count *= dim if isinstance(dim, int) else sizes[dim]
        total += count
    return total


class _Probe:
    """Runs the original on candidate sizes, counting and remembering the answers."""

    def __init__(self, specs: Sequence[InputSpec], runs: Runs) -> None:
        self.specs = specs
        self.runs = runs
        self.count = 0
        self.answers: dict[tuple[tuple[DimKey, int], ...], bool] = {}

    def __call__(self, sizes: Mapping[DimKey, int]) -> bool:
        key = tuple(sorted(sizes.items()))
        if key in self.answers:
            return self.answers[key]
        if self.count >= MAX_PROBES or _elements(self.specs, sizes) > MAX_ELEMENTS:
            return False
        self.count += 1
        self.answers[key] = self.runs(sizes)
        logger.debug("size probe %s: %s", dict(sizes), "runs" if self.answers[key] else "fails")
        return self.answers[key]


def _candidates(
    free: Sequence[DimKey], fixed: Mapping[DimKey, int], suggested: Sequence[int]
) -> Iterator[dict[DimKey, int]]:
    for size in _GROWTH:
        yield {**dict.fromkeys(free, size), **fixed}
    for size in suggested:
        yield {**dict.fromkeys(free, size), **fixed}
    for key in free:
        for size in (*_GROWTH, *suggested):
            yield {**dict.fromkeys(free, 2), key: size, **fixed}


def _shrink(probe: _Probe, sizes: dict[DimKey, int], free: Sequence[DimKey]) -> dict[DimKey, int]:
    """Each free dim made as small as it can be with the others kept (bisection)."""
    for key in free:
        works, fails = sizes[key], DIM_MIN - 1
        while works - fails > 1:
            middle = (works + fails) // 2
            if probe({**sizes, key: middle}):
                works = middle
            else:
                fails = middle
        sizes[key] = works
    return sizes


def find_sizes(
    specs: Sequence[InputSpec],
    fixed: Mapping[DimKey, int],
    suggested: Sequence[int],
    runs: Runs,
) -> FoundSizes | None:
    """Ranges of sizes the original runs with (see the module docstring); None: none found."""
    free = [key for key in dim_keys(specs) if key not in fixed]
    if not free:
        return None
    probe = _Probe(specs, runs)
    for sizes in _candidates(free, fixed, suggested):
        if probe(sizes):
            break
        if probe.count >= MAX_PROBES:
            return None
    else:
        return None
    smallest = _shrink(probe, dict(sizes), free)
    ranges: dict[DimKey, tuple[int, int]] = {}
    for key in free:
        lo = smallest[key]
        hi = DIM_MAX if lo <= DIM_MIN else lo + max(5, lo // 8)
        ranges[key] = (lo, hi)
    logger.info("sizes found for the symbolic dims after %d probes: %s", probe.count, ranges)
    return FoundSizes(ranges, probe.count)
