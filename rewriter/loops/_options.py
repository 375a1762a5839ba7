"""The loop passes' options, and making sure type facts are available."""

from __future__ import annotations

import dataclasses

import ir
from rewriter.engine import check_options, option

DEFAULT_MAX_TRIP_COUNT = 64
DEFAULT_MAX_CARRIED = 4


@dataclasses.dataclass(frozen=True, slots=True)
class DetectOptions:
    """Limits of the search (the pass options of `roll_loops` / `outline_functions`)."""

    min_repeats: int = 3
    min_block_nodes: int = 2
    max_carried: int = DEFAULT_MAX_CARRIED
    # Nodes of these domains never repeat (outlining must not outline its own calls).
    skip_domains: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True, slots=True)
class RollLoopsOptions:
    """Options of `pass roll_loops`."""

    min_repeats: int = option(3, "fewest identical blocks worth a Loop", minimum=2)
    min_block_nodes: int = option(2, "fewest nodes in one block", minimum=1)
    max_carried: int = option(
        DEFAULT_MAX_CARRIED, "most values one block passes to the next", minimum=1
    )

    def __post_init__(self) -> None:
        check_options(self)

    def detect(self) -> DetectOptions:
        """The chain search's limits."""
        return DetectOptions(self.min_repeats, self.min_block_nodes, self.max_carried)


@dataclasses.dataclass(frozen=True, slots=True)
class OutlineFunctionsOptions:
    """Options of `pass outline_functions`."""

    min_repeats: int = option(3, "fewest copies of a subgraph worth a function", minimum=2)
    min_block_nodes: int = option(2, "fewest nodes in one copy", minimum=1)
    max_carried: int = option(
        DEFAULT_MAX_CARRIED, "most values one copy passes to the next", minimum=1
    )

    def __post_init__(self) -> None:
        check_options(self)

    def detect(self) -> DetectOptions:
        """The chain search's limits."""
        return DetectOptions(self.min_repeats, self.min_block_nodes, self.max_carried)


@dataclasses.dataclass(frozen=True, slots=True)
class UnrollLoopsOptions:
    """Options of `pass unroll_loops`."""

    max_trip_count: int = option(
        DEFAULT_MAX_TRIP_COUNT, "largest constant trip count to unroll", minimum=1
    )

    def __post_init__(self) -> None:
        check_options(self)


def ensure_facts(model: ir.Model) -> None:
    """Run type inference when some node output of the main graph has no known type.

    Carried values need an element type and rank; facts may be missing when the pass runs
    outside the pass manager (which infers types once at the start).
    """
    for node in model.graph:
        for out in node.outputs:
            if out.name and ir.fact_type(out) is None:
                ir.infer_types(model)
                return
