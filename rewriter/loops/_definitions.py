"""The loop passes as `PassDefinition`s, for the pass manager and the rule checker.

Checking a rule file needs only the passes' options; the rolling, outlining and unrolling
machinery loads when a run first uses one of the passes (most runs use none).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import ir
from rewriter import rules
from rewriter.engine import Matcher, PassContext, PassDefinition, PassResult, pass_table
from rewriter.loops._options import (
    OutlineFunctionsOptions,
    RollLoopsOptions,
    UnrollLoopsOptions,
)

if TYPE_CHECKING:
    from rewriter.loops._repeat import Applicability, RepeatResult


def repeat_rule_applier(
    model: ir.Model,
    block_rules: Sequence[rules.Rule],
    matcher: Matcher,
    names: ir.NameAllocator | None = None,
    applicability: Applicability | None = None,
    record_subgraphs: bool = False,
) -> RepeatResult:
    """`apply_repeat_rules`, for a pass manager.

    The rolling machinery loads on the first call (a pass manager calls it only for a rule
    set with `match repeat` rules).
    """
    from rewriter.loops._repeat import apply_repeat_rules

    return apply_repeat_rules(model, block_rules, matcher, names, applicability, record_subgraphs)


def _roll_loops(model: ir.Model, options: RollLoopsOptions, context: PassContext) -> PassResult:
    """`rewriter.loops.roll_loops`."""
    from rewriter.loops._roll import roll_loops as run

    return run(model, options, context)


def _unroll_loops(model: ir.Model, options: UnrollLoopsOptions, context: PassContext) -> PassResult:
    """`rewriter.loops.unroll_loops`."""
    from rewriter.loops._unroll import unroll_loops as run

    return run(model, options, context)


def _outline_functions(
    model: ir.Model, options: OutlineFunctionsOptions, context: PassContext
) -> PassResult:
    """`rewriter.loops.outline_functions`."""
    from rewriter.loops._outline import outline_functions as run

    return run(model, options, context)


ROLL_LOOPS = PassDefinition(
    "roll_loops", "roll chains of equal blocks into one Loop", RollLoopsOptions, _roll_loops
)
UNROLL_LOOPS = PassDefinition(
    "unroll_loops",
    "replicate the body of small constant-trip-count Loops",
    UnrollLoopsOptions,
    _unroll_loops,
)
OUTLINE_FUNCTIONS = PassDefinition(
    "outline_functions",
    "turn chains of equal blocks into calls of one local function",
    OutlineFunctionsOptions,
    _outline_functions,
)

LOOP_PASSES = pass_table(ROLL_LOOPS, UNROLL_LOOPS, OUTLINE_FUNCTIONS)
"""The loop passes, by name."""
