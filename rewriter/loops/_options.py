"""Reading the loop passes' options and making sure type facts are available."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import ir
from rewriter.loops._chain import DEFAULT_MAX_CARRIED
from rewriter.loops._detect import DetectOptions


def count_option(options: Mapping[str, Any], name: str, default: int, minimum: int) -> int:
    """An integer option of at least `minimum`.

    Raises:
        ValueError: the option is not an integer or is too small.
    """
    value = options.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"option `{name}` takes an integer, not {value!r}")
    if value < minimum:
        raise ValueError(f"option `{name}` must be at least {minimum}, not {value}")
    return value


def detect_options(options: Mapping[str, Any]) -> DetectOptions:
    """`min_repeats` (>= 2, default 3), `min_block_nodes` (>= 1, default 2), `max_carried`."""
    return DetectOptions(
        min_repeats=count_option(options, "min_repeats", 3, 2),
        min_block_nodes=count_option(options, "min_block_nodes", 2, 1),
        max_carried=count_option(options, "max_carried", DEFAULT_MAX_CARRIED, 1),
    )


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
