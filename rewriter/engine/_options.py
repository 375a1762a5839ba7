"""`RunOptions`: how the engine runs a rule set, in one frozen value.

The API's `RewriteOptions` extends it with what happens around a run (loading the rules,
preparing the model, the accuracy budget) and is handed to the engine as it is: a field the
engine reads is declared once, here.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping

from rewriter import rules
from rewriter.engine._calibration import Calibration
from rewriter.engine._pipeline import DEFAULT_PIPELINE

ProgressCallback = Callable[[int, int], None]


@dataclasses.dataclass(frozen=True, slots=True)
class RunOptions:
    """How the pass manager runs (every field has a default).

    Attributes:
        max_rewrites: the rewrite budget (default proportional to the graph size).
        max_iterations: rounds of rules and passes at most.
        infer_shapes: infer shapes and types before the first round (the facts rules read).
        replay_limit: stop after this many rewrites (to replay a prefix of a run).
        replay_steps: stop after this many steps, counting rule rewrites and the runs of
            built-in passes that changed the model alike (`TraceEntry.step`): a prefix of a
            run that can end after a pass's change, as bisection needs to blame a pass.
        exclude_rules: names of rules not to apply.
        progress: called as `progress(applied, pending)` during long runs.
        target_opset: the default-domain opset the run heads for; rules read it through
            `target_opset()` (the API converts the model to it around the run).
        record_subgraphs: keep each rewrite's matched subgraph and replacement (with their
            neighbours) in the trace, for reports.
        keep_runnable: decline a rewrite (or a pass's change) whose new nodes onnxruntime has
            no kernel for where it has one for the nodes they replace: the result stays
            runnable where the input was.
        excluded_sites: rule applications not to make, `{(rule name, anchor): reason}` (the
            anchor as trace entries name it, `TraceEntry.site`); the reason is recorded as a
            skip. The accuracy budget keeps layers in float this way.
        calibration: what the input model's values held on calibration samples, by value
            name; the quantization rules that need activation ranges (`calibrated_range`,
            `awq_scale`) fire only with it.
        exact: apply no rule beyond what is exact on every input the model accepts: a rule
            that `assumes finite` inputs never applies, one that `assumes nonempty` tensors
            only where every tensor it reads has a known shape without a zero dim. By
            default such rules apply (a fused Attention is onnxruntime's kernel, which
            rejects an empty batch or sequence where the unfused ops return an empty
            result); the trace counts the rewrites that assumed something.
        passes: the built-in passes to run between rounds of rules, in order
            (`DEFAULT_PIPELINE` by default; `()` for none); the passes rule files declare
            (`pass NAME`) run too, after them (see `pipeline`).
        match_newer_opset: also match, once, the rules the model's opset rules out, on the
            model before any rewrite (its facts inferred for the run), and record the
            matches in `Trace.newer_opset_matches`: what a newer opset would add, found
            without inferring the input's facts a second time.
    """

    max_rewrites: int | None = None
    max_iterations: int = 8
    infer_shapes: bool = True
    replay_limit: int | None = None
    replay_steps: int | None = None
    exclude_rules: frozenset[str] = frozenset()
    progress: ProgressCallback | None = None
    target_opset: int | None = None
    record_subgraphs: bool = False
    keep_runnable: bool = True
    excluded_sites: Mapping[tuple[str, str], str] = dataclasses.field(default_factory=dict)
    calibration: Calibration | None = None
    exact: bool = False
    passes: tuple[rules.PassUse, ...] = DEFAULT_PIPELINE
    match_newer_opset: bool = False
