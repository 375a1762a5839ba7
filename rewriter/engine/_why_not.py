"""`--why-not RULE`: at every node with the rule's anchor op, how far the match got and why.

A match that fails says at which line and why (`MatchFailure`); a match that succeeds is
built, committed and undone, to say whether the rewrite would be declined or rolled back.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import ir
from rewriter import rules
from rewriter._errors import RewriteError
from rewriter.engine import _trace
from rewriter.engine._applicability import applicability
from rewriter.engine._builder import Builder
from rewriter.engine._calibration import Calibration
from rewriter.engine._compile import CompiledRule
from rewriter.engine._matcher import Match, Matcher, MatchFailure
from rewriter.engine._pending import RewriteDeclinedError, RewriteRejectedError
from rewriter.engine._shape_facts import infer_facts


@dataclasses.dataclass(frozen=True, slots=True)
class WhyNot:
    """For `--why-not RULE`: the outcome at every node where the rule's anchor op occurs."""

    rule: str
    location: str
    outcomes: tuple[tuple[str, str], ...]  # (node label, "matched" or the failure reason)
    skipped: str = ""

    def render(self) -> str:
        """A readable report."""
        lines = [f"why not `{self.rule}` ({self.location}):"]
        if self.skipped:
            lines.append(f"  skipped for this model: {self.skipped}")
        if not self.outcomes:
            lines.append("  the model has no node with the rule's anchor op")
        for label, outcome in self.outcomes:
            lines.append(f"  {label}: {outcome}")
        return "\n".join(lines)


def why_not(
    ruleset: rules.RuleSet,
    rules: Sequence[CompiledRule],
    model: ir.Model,
    rule_name: str,
    *,
    infer_shapes: bool = True,
    target_opset: int | None = None,
    calibration: Calibration | None = None,
) -> WhyNot:
    """Where the rule's anchor op occurs, how far the match got and why it failed.

    With a `target_opset` (the run converts the model to it first), `requires` is judged at
    that opset, as the run judges it; `calibration` is what the calibration built-ins read.
    """
    rule = next((r for r in rules if r.name == rule_name), None)
    if rule is None:
        names = ", ".join(sorted(r.name for r in rules)[:20])
        raise RewriteError(f"no rule named `{rule_name}` is loaded (loaded: {names})")
    if infer_shapes:
        infer_facts(model)
    skipped = applicability(rule, model.opset_imports, target_opset) or ""
    targets = {"": target_opset} if target_opset else {}
    matcher = Matcher(model.opset_imports, ruleset.functions, targets, calibration)
    builder = Builder(model, matcher, ir.NameAllocator(model))
    outcomes = []
    anchors = {(op.domain, op.op_type) for op in rule.anchor_ops}
    for graph in model.graphs():
        for node in graph:
            key = (ir.schemas.normalize_domain(node.domain), node.op_type)
            if anchors and key not in anchors:
                continue
            result = matcher.match(rule, node)
            if isinstance(result, Match):
                outcome = _describe_match(builder.try_rewrite(result))
            else:
                outcome = _describe_failure(result)
            outcomes.append((_trace.distinct_label(node), outcome))
    return WhyNot(rule.name, rule.location, tuple(outcomes), skipped)


def _describe_failure(failure: MatchFailure) -> str:
    return f"{failure.reason} (matched {max(failure.depth, 0)} line(s) first)"


def _describe_match(problem: RewriteRejectedError | None) -> str:
    """A match, and whether its rewrite would be declined or rolled back."""
    if problem is None:
        return "matches"
    if isinstance(problem, RewriteDeclinedError):
        return f"matches, but the rewrite is declined: {_trace.one_line(str(problem))}"
    return f"matches, but the rewrite would be rolled back: {_trace.one_line(str(problem))}"
