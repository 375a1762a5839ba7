"""Loop rolling, function outlining and loop unrolling (built-in passes).

`roll_loops` finds chains of blocks that are the same up to their weights and replaces each
chain by one ONNX `Loop`; `outline_functions` turns the same chains into calls of one local
function; `unroll_loops` replicates the body of small constant-trip-count Loops (the inverse
of rolling). `apply_repeat_rules` applies `.rw` rules of the form
`match repeat (n >= K) from h to out { ... } rewrite loop`.
"""

from __future__ import annotations

from rewriter.loops._chain import ChainPlan, Refusal, analyze_chain
from rewriter.loops._detect import Detection, DetectOptions, detect_chain
from rewriter.loops._roll import roll_chain, roll_loops

__all__ = [
    "ChainPlan",
    "DetectOptions",
    "Detection",
    "Refusal",
    "analyze_chain",
    "detect_chain",
    "roll_chain",
    "roll_loops",
]
