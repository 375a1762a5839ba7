"""Rule-by-rule verification: `rewrite check-rules PATH...`.

For every rule, small models that the rule's `match` and `where` accept are generated
(hypothesis draws shapes, dtypes, attributes and constants; recipes per op keep them
type-correct; where-hints repair conditions that do not hold), each is rewritten by the
rule alone and compared with the original on generated inputs. A rule is *verified*,
*failed* (with a counterexample: the instance model, the inputs, the error) or *not
instantiable* (with the reason). See `_check` for the verdicts and `_instance` for how
instances are built.

onnx, onnxruntime and hypothesis are imported only when a check runs.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterable, Sequence

from rewriter import rules
from rewriter.checkrules._check import (
    CheckOptions,
    check_rule,
    find_instances,
)
from rewriter.checkrules._instance import Instance
from rewriter.checkrules._parallel import check_rules_in_processes
from rewriter.checkrules._result import Counterexample, RuleReport, Status
from rewriter.engine import pipeline

__all__ = [
    "CheckOptions",
    "Counterexample",
    "RuleReport",
    "Status",
    "check_passes",
    "check_rules",
    "check_rules_in_processes",
    "find_instances",
    "library_instances",
]

Progress = Callable[[RuleReport], None]


_LOOP_PASSES = frozenset({"roll_loops", "unroll_loops", "outline_functions"})


def check_passes(
    ruleset: rules.RuleSet, rule_reports: Sequence[RuleReport], options: CheckOptions
) -> list[RuleReport]:
    """Each pass of a run with these rules on the rules' instances.

    That is the options' pipeline and the passes the rule files declare (loop passes are
    verified by their own tests).
    """
    from rewriter.checkrules._passes import check_pass, pass_location

    models = [r.sample for r in rule_reports if r.sample is not None]
    reports = []
    for decl in pipeline(options.pipeline, ruleset.passes):
        location = pass_location(decl)
        if decl.name in _LOOP_PASSES or not models:
            reason = "a loop pass" if decl.name in _LOOP_PASSES else "no rule instance to run on"
            reports.append(
                RuleReport(
                    decl.name,
                    location,
                    Status.NOT_INSTANTIABLE,
                    detail=f"{reason} (verified by its own tests)",
                    by_tests=True,
                    kind="pass",
                )
            )
            continue
        reports.append(check_pass(decl, ruleset, models, options.examples, options.seed))
    return reports


def check_rules(
    ruleset: rules.RuleSet,
    options: CheckOptions | None = None,
    *,
    names: Sequence[str] = (),
    include_passes: bool = True,
    progress: Progress | None = None,
) -> list[RuleReport]:
    """Check the rules of `ruleset` (those in `names` when given), in load order.

    Raises:
        ValueError: a name in `names` is not a rule of the set.
    """
    from rewriter.engine import compile_rule

    options = options or CheckOptions()
    wanted = set(names)
    unknown = sorted(wanted - {rule.name for rule in ruleset.rules})
    if unknown:
        raise ValueError(f"no rule named {', '.join(f'`{n}`' for n in unknown)}")
    reports: list[RuleReport] = []
    for order, rule in enumerate(_selected(ruleset.rules, wanted)):
        start = time.perf_counter()
        if rule.pattern.repeat is not None:
            report = RuleReport(
                rule.name,
                f"{rule.span.path}:{rule.span.line}",
                Status.NOT_INSTANTIABLE,
                detail="a loop (repeat) rule (verified by its own tests)",
                by_tests=True,
                seconds=time.perf_counter() - start,
            )
        else:
            report = check_rule(compile_rule(rule, order, ruleset.functions), ruleset, options)
            if report.status is Status.NOT_INSTANTIABLE:
                report = _with_switched_param(rule, order, ruleset, options, report)
        reports.append(report)
        if progress is not None:
            progress(report)
    if include_passes and not wanted:
        reports.extend(check_passes(ruleset, reports, options))
    return reports


def _with_switched_param(
    rule: rules.Rule,
    order: int,
    ruleset: rules.RuleSet,
    options: CheckOptions,
    report: RuleReport,
) -> RuleReport:
    """A rule that a boolean parameter switches off, checked with that parameter switched.

    `param per_channel = true` with a rule for `not per_channel` (the per-tensor variant):
    under the declared values the rule never applies, so its instances are found with the
    files loaded again, one boolean parameter flipped at a time. The report says which.
    """
    from rewriter.api import load_rules
    from rewriter.engine import compile_rule

    switches = [(name, value) for name, value in ruleset.params.items() if isinstance(value, bool)]
    if not switches or not ruleset.paths:
        return report
    for name, value in switches:
        variant = load_rules(
            *ruleset.paths,
            allow_python=bool(ruleset.functions),
            params={**ruleset.params, name: not value},
        )
        other = variant.rule(rule.name)
        if other is None:
            continue
        checked = check_rule(compile_rule(other, order, variant.functions), variant, options)
        if checked.status is not Status.NOT_INSTANTIABLE:
            flipped = "true" if not value else "false"
            return dataclasses.replace(
                checked,
                detail=f"with param {name} = {flipped}: {checked.detail}".rstrip(": "),
                seconds=report.seconds + checked.seconds,
            )
    return report


def library_instances(
    ruleset: rules.RuleSet, options: CheckOptions | None = None
) -> list[tuple[str, Instance]]:
    """(rule name, instance) for every rule of `ruleset` that can be instantiated."""
    from rewriter.engine import compile_rule

    options = options or CheckOptions()
    found: list[tuple[str, Instance]] = []
    for order, rule in enumerate(ruleset.rules):
        if rule.pattern.repeat is not None:
            continue
        compiled = compile_rule(rule, order, ruleset.functions)
        found.extend((rule.name, i) for i in find_instances(compiled, ruleset, options))
    return found


def _selected(candidates: Iterable[rules.Rule], wanted: set[str]) -> list[rules.Rule]:
    return [rule for rule in candidates if not wanted or rule.name in wanted]
