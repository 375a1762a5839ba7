"""The default pipeline: the built-in passes a standard run applies, in this order.

Rules run to a fixed point on the worklist; whenever it is empty these passes run, and the
rules run again on what they changed, until nothing changes. Each pass is validated like a
rule's rewrite and undone when it would break the model (`rewriter.engine.run_checked`).
Rule files may add passes (`pass roll_loops { ... }`) or re-declare one of these with other
options; `RewriteOptions(passes=...)` / `rewrite --passes` replace the pipeline.
"""

from __future__ import annotations

from rewriter.rules import PassUse

DEFAULT_PIPELINE: tuple[PassUse, ...] = (
    # Fold what is computed from constants only; a folded tensor of more than 1 MiB stays
    # computed, so weights are never duplicated by folding.
    PassUse("fold_constants", (("max_output_bytes", 1 << 20),)),
    # Remove nodes and initializers that nothing reads.
    PassUse("eliminate_dead_code"),
    # Merge equal nodes and equal initializers.
    PassUse("eliminate_common_subexpressions"),
    # Sink Transposes through layout-agnostic ops until they cancel (never more Transposes).
    PassUse("optimize_transposes"),
    # Replace an If whose condition is a constant by the branch it takes.
    PassUse("inline_constant_ifs"),
    # Splice a Concat read only by a Concat on the same axis into it.
    PassUse("flatten_concats"),
)
"""The passes every standard run applies (`rewrite`, `RewriteOptions()`), in order."""
