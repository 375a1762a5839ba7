"""The loop passes as `PassDefinition`s, for the pass manager and the rule checker."""

from __future__ import annotations

from rewriter.engine import PassDefinition, pass_table
from rewriter.loops._options import (
    OutlineFunctionsOptions,
    RollLoopsOptions,
    UnrollLoopsOptions,
)
from rewriter.loops._outline import outline_functions
from rewriter.loops._roll import roll_loops
from rewriter.loops._unroll import unroll_loops

ROLL_LOOPS = PassDefinition(
    "roll_loops", "roll chains of equal blocks into one Loop", RollLoopsOptions, roll_loops
)
UNROLL_LOOPS = PassDefinition(
    "unroll_loops",
    "replicate the body of small constant-trip-count Loops",
    UnrollLoopsOptions,
    unroll_loops,
)
OUTLINE_FUNCTIONS = PassDefinition(
    "outline_functions",
    "turn chains of equal blocks into calls of one local function",
    OutlineFunctionsOptions,
    outline_functions,
)

LOOP_PASSES = pass_table(ROLL_LOOPS, UNROLL_LOOPS, OUTLINE_FUNCTIONS)
"""The loop passes, by name."""
