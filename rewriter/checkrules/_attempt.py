"""One attempt at an instance: build, check the `where` lines, repair, match at the anchor.

An attempt is accepted only when the rule's own matcher matches at the anchor node of the
built model (so the instance is one the engine would rewrite). A rejected attempt says why,
and how far it got (`stage`): the reason of the furthest stage over all attempts is what
"not instantiable" reports.

A line that cannot be built often fails because of what the lines before it drew (a Squeeze
of axis 0 after a Slice that cut another axis): the `where` parts that read only the values
those lines bound, and the `v == none` of optional inputs, are repaired on the partial
instance too, so the next round builds the failed line from what the rule asks.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import ir
from rewriter import rules
from rewriter.checkrules._analysis import RulePlan, names_in
from rewriter.checkrules._choices import Choices
from rewriter.checkrules._instance import Instance, RejectedError, bindings, build_instance
from rewriter.checkrules._repair import Repairer, absent_input
from rewriter.engine import Calibration, EvalContext, Match, Matcher
from rewriter.quantize import instance_calibration

MAX_REPAIRS = 4

# How far a rejected attempt got (higher is further).
STAGE_BUILD = 1
STAGE_WHERE = 2
STAGE_MATCH = 3


@dataclasses.dataclass(frozen=True, slots=True)
class Rejection:
    """Why an attempt produced no instance, and how far it got."""

    stage: int
    reason: str


@dataclasses.dataclass(frozen=True, slots=True)
class Accepted:
    """An instance the rule matches at its anchor with every `where` line true."""

    instance: Instance


def _source_line(sources: Mapping[str, str], condition: rules.Expr) -> str:
    """The source line of a condition (a rule's, or a constraint's it calls)."""
    text = sources.get(condition.span.path, "")
    line = condition.span.line
    lines = text.splitlines()
    if 0 < line <= len(lines):
        return lines[line - 1].strip()
    return ""


def attempt(plan: RulePlan, choices: Choices, ruleset: rules.RuleSet) -> Accepted | Rejection:
    """Build an instance from `choices`, repairing false `where` lines a few times.

    `ruleset` holds the rule's helper functions, named constraints and source texts.
    """
    functions = ruleset.functions
    rejection = Rejection(STAGE_BUILD, "no attempt")
    for round_index in range(MAX_REPAIRS + 1):
        try:
            instance = build_instance(plan, choices)
        except RejectedError as exc:
            rejection = Rejection(STAGE_BUILD, str(exc))
            if exc.partial is None or not _repair_before(plan, choices, ruleset, exc.partial):
                return rejection
            continue
        model = ir.from_onnx(instance.proto)
        ir.infer_types(model)
        targets = {"": instance.target} if instance.target is not None else {}
        calibration = instance_calibration(plan.compiled.rule, instance.proto)
        ctx = EvalContext(
            bindings(instance, model),
            model.opset_imports,
            functions,
            targets,
            calibration=calibration,
        )
        repairer = Repairer(plan, choices, ctx, instance.const_vars)
        failing = [c for c in plan.conditions if not repairer.holds(c)]
        if not failing:
            return _match(plan, instance, model, ruleset, calibration)
        condition = failing[0]
        text = _source_line(ruleset.sources, condition) or "a where line"
        rejection = Rejection(
            STAGE_WHERE, f"where line {condition.span.line} does not hold: `{text}`"
        )
        for index, cond in enumerate(failing):
            repairer.repair(cond, ("where", index, round_index))
        if not repairer.changed:
            return rejection
    return rejection


def _repair_before(
    plan: RulePlan, choices: Choices, ruleset: rules.RuleSet, partial: Instance
) -> bool:
    """Repair the `where` parts the lines built before a failed line decide; True if any changed.

    A part decides when every variable it reads is bound (the optional inputs a part asks to
    be absent may be unbound: they belong to the failed line).
    """
    try:
        model = ir.from_onnx(partial.proto)
        ir.infer_types(model)
    except Exception:  # a partial model that does not lift gives no hints
        return False
    targets = {"": partial.target} if partial.target is not None else {}
    known = bindings(partial, model)
    ctx = EvalContext(known, model.opset_imports, ruleset.functions, targets)
    repairer = Repairer(plan, choices, ctx, partial.const_vars)
    for index, condition in enumerate(plan.conditions):
        for part_index, part in enumerate(_decided_parts(condition, known, repairer.optional)):
            repairer.repair(part, ("before", index, part_index))
    return repairer.changed


def _decided_parts(
    condition: rules.Expr, known: Mapping[str, object], optional: frozenset[str]
) -> list[rules.Expr]:
    """The conjuncts of `condition` that read only bound variables, or ask `v == none`."""
    if isinstance(condition, rules.BoolOp) and condition.op == "and":
        return [
            *_decided_parts(condition.left, known, optional),
            *_decided_parts(condition.right, known, optional),
        ]
    if absent_input(condition, optional) is not None:
        return [condition]
    return [condition] if all(name in known for name in names_in(condition)) else []


def _match(
    plan: RulePlan,
    instance: Instance,
    model: ir.Model,
    ruleset: rules.RuleSet,
    calibration: Calibration | None,
) -> Accepted | Rejection:
    anchor = next((n for n in model.graph if n.name == instance.anchor_name), None)
    if anchor is None:
        return Rejection(STAGE_MATCH, "the anchor node is missing from the built model")
    targets = {"": instance.target} if instance.target is not None else {}
    matcher = Matcher(model.opset_imports, ruleset.functions, targets, calibration)
    result = matcher.match(plan.compiled, anchor)
    if isinstance(result, Match):
        return Accepted(instance)
    return Rejection(STAGE_MATCH, f"the matcher refuses the instance: {result.reason}")
