"""Loop rolling, function outlining and loop unrolling (built-in passes and repeat rules).

`roll_loops` finds chains of blocks that are the same up to their weights and replaces each
chain by one ONNX `Loop`; `outline_functions` turns the same chains into calls of one local
function; `unroll_loops` replicates the body of small constant-trip-count Loops (the inverse
of rolling). `apply_repeat_rules` applies `.rw` rules of the form
`match repeat (n >= K) from h to out { ... } rewrite loop`. `detect_chain` and
`analyze_chain` expose the search and the validation (with refusal reasons) on their own.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rewriter._lazy import LazyNames
from rewriter.loops._definitions import LOOP_PASSES, repeat_rule_applier
from rewriter.loops._options import (
    DetectOptions,
    OutlineFunctionsOptions,
    RollLoopsOptions,
    UnrollLoopsOptions,
)

if TYPE_CHECKING:
    from rewriter.loops._chain import ChainPlan, Refusal, analyze_chain
    from rewriter.loops._detect import Detection, detect_chain
    from rewriter.loops._outline import OUTLINE_DOMAIN, outline_chain, outline_functions
    from rewriter.loops._repeat import RepeatResult, apply_repeat_rules
    from rewriter.loops._roll import ITERATION0_KEY, UNSTACK_KEY, roll_chain, roll_loops
    from rewriter.loops._unroll import plan_unroll, unroll_loops

# The machinery loads on first use (PEP 562): checking rule files and rewriting without loop
# rules need only the pass table and the options above.
_LAZY = {
    "ChainPlan": "rewriter.loops._chain",
    "Refusal": "rewriter.loops._chain",
    "analyze_chain": "rewriter.loops._chain",
    "Detection": "rewriter.loops._detect",
    "detect_chain": "rewriter.loops._detect",
    "OUTLINE_DOMAIN": "rewriter.loops._outline",
    "outline_chain": "rewriter.loops._outline",
    "outline_functions": "rewriter.loops._outline",
    "RepeatResult": "rewriter.loops._repeat",
    "apply_repeat_rules": "rewriter.loops._repeat",
    "ITERATION0_KEY": "rewriter.loops._roll",
    "UNSTACK_KEY": "rewriter.loops._roll",
    "roll_chain": "rewriter.loops._roll",
    "roll_loops": "rewriter.loops._roll",
    "plan_unroll": "rewriter.loops._unroll",
    "unroll_loops": "rewriter.loops._unroll",
}


_NAMES = LazyNames(__name__, _LAZY, globals())


def __getattr__(name: str) -> object:
    return _NAMES.get(name)


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
    "repeat_rule_applier",
    "roll_chain",
    "roll_loops",
    "unroll_loops",
]
