"""Loop rolling, function outlining and loop unrolling (built-in passes and repeat rules).

`roll_loops` finds chains of blocks that are the same up to their weights and replaces each
chain by one ONNX `Loop`; `outline_functions` turns the same chains into calls of one local
function; `unroll_loops` replicates the body of small constant-trip-count Loops (the inverse
of rolling). `apply_repeat_rules` applies `.rw` rules of the form
`match repeat (n >= K) from h to out { ... } rewrite loop`. `detect_chain` and
`analyze_chain` expose the search and the validation (with refusal reasons) on their own.
"""

from __future__ import annotations

from rewriter.loops._chain import ChainPlan, Refusal, analyze_chain
from rewriter.loops._definitions import LOOP_PASSES
from rewriter.loops._detect import Detection, DetectOptions, detect_chain
from rewriter.loops._options import (
    OutlineFunctionsOptions,
    RollLoopsOptions,
    UnrollLoopsOptions,
)
from rewriter.loops._outline import OUTLINE_DOMAIN, outline_chain, outline_functions
from rewriter.loops._repeat import RepeatResult, apply_repeat_rules
from rewriter.loops._roll import ITERATION0_KEY, UNSTACK_KEY, roll_chain, roll_loops
from rewriter.loops._unroll import plan_unroll, unroll_loops

__all__ = [
    "ITERATION0_KEY",
    "LOOP_PASSES",
    "OUTLINE_DOMAIN",
    "UNSTACK_KEY",
    "ChainPlan",
    "DetectOptions",
    "Detection",
    "OutlineFunctionsOptions",
    "Refusal",
    "RepeatResult",
    "RollLoopsOptions",
    "UnrollLoopsOptions",
    "analyze_chain",
    "apply_repeat_rules",
    "detect_chain",
    "outline_chain",
    "outline_functions",
    "plan_unroll",
    "roll_chain",
    "roll_loops",
    "unroll_loops",
]
