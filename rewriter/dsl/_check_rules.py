"""Checks of one rule: structure, node lines against schemas, names, `requires`."""

from __future__ import annotations

import ir
from rewriter.dsl import _ast as ast
from rewriter.dsl._check_approximate import check_approximate
from rewriter.dsl._check_calls import KnownFunctions
from rewriter.dsl._check_schema import (
    Count,
    check_arity,
    check_attributes,
    check_op_exists,
    pattern_inputs,
    pattern_outputs,
    rewrite_inputs,
)
from rewriter.dsl._check_scope import ScopeChecker
from rewriter.dsl._opsets import OpsetRange, opset_range
from rewriter.dsl._reporter import Reporter, head


def check_rule(rule: ast.Rule, known: KnownFunctions, report: Reporter) -> None:
    """Report every problem of one rule."""
    _check_structure(rule, report)
    for pattern in _match_patterns(rule.match):
        _check_pattern(pattern, rule, report)
    if isinstance(rule.rewrite, ast.RewriteBlock):
        for stmt in rule.rewrite.stmts:
            if isinstance(stmt, ast.NodeStmt):
                _check_node_stmt(stmt, rule, report)
    ScopeChecker(rule, known, report).run()
    _check_requires(rule, report)
    check_approximate(rule, report)


def _match_patterns(match: ast.MatchBlock) -> tuple[ast.NodePattern, ...]:
    return match.repeat.body if match.repeat is not None else match.patterns


# -- structure --------------------------------------------------------------------------------


def _check_structure(rule: ast.Rule, report: Reporter) -> None:
    match, rewrite = rule.match, rule.rewrite
    if not _match_patterns(match):
        report.error(head(match.span, len("match")), "match block is empty")
    if isinstance(rewrite, ast.RewriteBlock) and not rewrite.stmts and not rule.query:
        report.error(head(rewrite.span, len("rewrite")), "rewrite block is empty")
    if isinstance(rewrite, ast.RewriteLoop) and match.repeat is None:
        report.error(rewrite.span, "`rewrite loop` needs a `match repeat (...)` block")
    if match.repeat is not None:
        _check_repeat(match.repeat, rewrite, report)


def _check_repeat(
    repeat: ast.RepeatPattern, rewrite: ast.RewriteBlock | ast.RewriteLoop, report: Reporter
) -> None:
    if not isinstance(rewrite, ast.RewriteLoop):
        span = report.locate(repeat.span, "repeat")
        report.error(span, "a `match repeat` block is rewritten with `rewrite loop`")
    if repeat.count < 1:
        report.error(repeat.span, f"`repeat` needs a positive count, not {repeat.count}")
    inputs = {i.name for p in repeat.body for i in p.inputs if isinstance(i, ast.InputVar)}
    outputs = {o.name for p in repeat.body for o in p.outputs if isinstance(o, ast.OutputVar)}
    if repeat.body and repeat.from_var not in inputs:
        span = report.locate(repeat.span, repeat.from_var, skip=len("match repeat"))
        report.error(span, f"`from {repeat.from_var}`: the block has no input `{repeat.from_var}`")
    if repeat.body and repeat.to_var not in outputs:
        span = report.locate(repeat.span, repeat.to_var, skip=len("match repeat"))
        report.error(span, f"`to {repeat.to_var}`: the block defines no `{repeat.to_var}`")


# -- node lines -------------------------------------------------------------------------------


def _check_pattern(pattern: ast.NodePattern, rule: ast.Rule, report: Reporter) -> None:
    _check_variadic_last(pattern.inputs, report)
    refs = pattern.op.alternatives
    seen: dict[tuple[str, str], None] = {}
    known: list[ast.OpRef] = []
    for ref in refs:
        key = (ir.schemas.normalize_domain(ref.domain), ref.op_type)
        if key in seen:
            report.warning(ref.span, f"`{ref.op_type}` is listed twice in this op alternative")
            continue
        seen[key] = None
        if check_op_exists(ref, report):
            known.append(ref)
    for ref in known:
        check_arity(ref, pattern_inputs(pattern.inputs), pattern_outputs(pattern), report)
    if len(known) == len(refs):
        check_attributes(refs, pattern.attrs, report, _ranges(rule, refs), matched=True)


def _check_variadic_last(inputs: tuple[ast.InputPattern, ...], report: Reporter) -> None:
    for position, item in enumerate(inputs):
        if isinstance(item, ast.InputVar) and item.variadic and position != len(inputs) - 1:
            report.error(
                item.span, f"`{item.name}...` takes the rest of the inputs, so it comes last"
            )


def _check_node_stmt(stmt: ast.NodeStmt, rule: ast.Rule, report: Reporter) -> None:
    if isinstance(stmt.op, ast.NodeCopy):
        return  # the op is whichever the named match line matched (the scope check names it)
    if not check_op_exists(stmt.op, report):
        return
    outputs = Count(len(stmt.outputs), len(stmt.outputs))
    check_arity(stmt.op, rewrite_inputs(stmt.inputs), outputs, report)
    check_attributes((stmt.op,), stmt.attrs, report, _ranges(rule, (stmt.op,)))


def _ranges(rule: ast.Rule, refs: tuple[ast.OpRef, ...]) -> tuple[OpsetRange, ...]:
    """The opsets of each op's domain at which the rule can apply."""
    return tuple(opset_range(rule, ref.domain) for ref in refs)


# -- requires ---------------------------------------------------------------------------------


def _check_requires(rule: ast.Rule, report: Reporter) -> None:
    """Warn when a rule's `requires` admits no opset version of some domain."""
    bounds: dict[str, OpsetRange] = {}
    for requirement in rule.requires:
        domain = ir.schemas.normalize_domain(requirement.domain)
        before = bounds.get(domain, OpsetRange())
        after = before.narrow(requirement.op, requirement.version)
        if after.empty and not before.empty:
            shown = f"opset {requirement.domain} " if requirement.domain else "opset "
            clause = f"`{shown}{requirement.op} {requirement.version}`"
            why = (
                "contradicts the earlier requirements" if domain in bounds else "admits no version"
            )
            report.warning(
                requirement.span,
                f"{clause} {why}: no opset version satisfies this rule's `requires`, so the "
                "rule never applies",
            )
        bounds[domain] = after
