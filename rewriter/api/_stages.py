"""Staged runs: exact rules to their fixed point, then the approximate rules, then exact again.

A rule set that holds `approximate` rules (quantization, lower precision) is not run as one
fixed point: an approximate rule that fires first would take nodes that an exact rule
(a BatchNorm fold, a fusion) would have simplified, and quantize the unsimplified graph. So:

1. the exact rules and passes run to their fixed point (the float model: BatchNorm folded,
   fusions done);
2. the approximate rules run alone on it (with calibration statistics gathered on the float
   model itself when the caller gave samples, `CalibrationSamples`);
3. the exact rules run again (what the approximate rewrites leave for them: the Casts that
   float16 layers leave between neighbours cancel).

Rule sets without approximate rules run as one fixed point, as before.
"""

from __future__ import annotations

import dataclasses

import ir
from rewriter.api._vocabulary import pass_manager
from rewriter.dsl import _ast as ast
from rewriter.engine import Calibration, RunOptions, Trace
from rewriter.quantize import CalibrationSamples, collect_calibration


@dataclasses.dataclass(frozen=True, slots=True)
class SplitRules:
    """A rule set split into its exact part (rules and passes) and its approximate rules."""

    exact: ast.RuleSet
    approximate: ast.RuleSet


def split_rules(ruleset: ast.RuleSet) -> SplitRules | None:
    """The exact and approximate parts, or None when no rule is approximate."""
    approximate = tuple(rule for rule in ruleset.rules if rule.approximate is not None)
    if not approximate:
        return None
    exact = tuple(rule for rule in ruleset.rules if rule.approximate is None)
    return SplitRules(
        dataclasses.replace(ruleset, rules=exact),
        dataclasses.replace(ruleset, rules=approximate, passes=()),
    )


def renamed_by_every_rule(
    calibration: Calibration | None, ruleset: ast.RuleSet
) -> Calibration | None:
    """The statistics, told that any rule of the whole set may have renamed a value.

    (Each stage's pass manager adds only its own rules' names.)
    """
    if calibration is None:
        return None
    names = frozenset(rule.name for rule in ruleset.rules)
    return dataclasses.replace(calibration, renamed_by=calibration.renamed_by | names)


def statistics_on(
    model: ir.Model, calibration: Calibration | CalibrationSamples | None
) -> Calibration | None:
    """The statistics the approximate rules read: given, or gathered on `model` itself."""
    if isinstance(calibration, CalibrationSamples):
        return collect_calibration(
            model,
            calibration.samples,
            method=calibration.method,
            percentile=calibration.percentile,
        )
    return calibration


def run_fixed_point(
    model: ir.Model,
    ruleset: ast.RuleSet,
    options: RunOptions,
    calibration: Calibration | CalibrationSamples | None = None,
) -> Trace:
    """Rewrite `model` in place: one fixed point, or the three stages when rules approximate.

    Raises:
        VerifyError: calibration samples the float model cannot be run on.
    """
    split = split_rules(ruleset)
    if split is None:
        given = calibration if isinstance(calibration, Calibration) else None
        run = dataclasses.replace(options, calibration=given)
        return pass_manager(ruleset, run).run(model)
    trace = pass_manager(split.exact, dataclasses.replace(options, calibration=None)).run(model)
    statistics = renamed_by_every_rule(statistics_on(model, calibration), ruleset)
    approximate = dataclasses.replace(options, calibration=statistics)
    trace = trace.followed_by(pass_manager(split.approximate, approximate).run(model))
    cleanup = dataclasses.replace(options, calibration=None)
    return trace.followed_by(pass_manager(split.exact, cleanup).run(model))
