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
from typing import TYPE_CHECKING

import ir
from rewriter.api._vocabulary import pass_manager
from rewriter.engine import Calibration, RunOptions, Trace
from rewriter.rules import RuleSet

if TYPE_CHECKING:
    from rewriter.quantize import CalibrationSamples


@dataclasses.dataclass(frozen=True, slots=True)
class SplitRules:
    """A rule set split into its exact part (rules and passes) and its approximate rules."""

    exact: RuleSet
    approximate: RuleSet


def split_rules(ruleset: RuleSet) -> SplitRules | None:
    """The exact and approximate parts, or None when no rule is approximate."""
    approximate = tuple(rule for rule in ruleset.rules if rule.approximate is not None)
    if not approximate:
        return None
    exact = tuple(rule for rule in ruleset.rules if rule.approximate is None)
    return SplitRules(
        dataclasses.replace(ruleset, rules=exact),
        dataclasses.replace(ruleset, rules=approximate, passes=()),
    )


def renamed_by_every_rule(calibration: Calibration | None, ruleset: RuleSet) -> Calibration | None:
    """The statistics, told that any rule of the whole set may have renamed a value.

    (Each stage's pass manager adds only its own rules' names.)
    """
    if calibration is None:
        return None
    names = frozenset(rule.name for rule in ruleset.rules)
    return dataclasses.replace(calibration, renamed_by=calibration.renamed_by | names)


def statistics_on(
    model: ir.Model,
    calibration: Calibration | None,
    samples: CalibrationSamples | None,
    quantize: str | None = None,
) -> Calibration | None:
    """The statistics the approximate rules read: from `samples` run on `model`, or given.

    `quantize`: the run's preset, whose default calibration method applies when the samples
    name none (`CalibrationSamples.resolved`).
    """
    if samples is not None:
        # The quantization package (and verification's sessions) load only for samples.
        from rewriter.quantize import collect_calibration

        method, percentile = samples.resolved(quantize)
        return collect_calibration(model, samples.samples, method=method, percentile=percentile)
    return calibration


def run_fixed_point(
    model: ir.Model,
    ruleset: RuleSet,
    options: RunOptions,
    samples: CalibrationSamples | None = None,
) -> Trace:
    """Rewrite `model` in place: one fixed point, or the three stages when rules approximate.

    `samples` (calibration samples) are run on the float model the first stage makes; its
    statistics replace `options.calibration` for the approximate rules.

    Raises:
        VerifyError: calibration samples the float model cannot be run on.
    """
    split = split_rules(ruleset)
    if split is None:
        return pass_manager(ruleset, options).run(model)
    exact = dataclasses.replace(options, calibration=None)
    trace = pass_manager(split.exact, exact).run(model)
    statistics = renamed_by_every_rule(statistics_on(model, options.calibration, samples), ruleset)
    # The later stages go on from the facts the first kept up to date, as a run's later rounds
    # do (inferred again, they would lose what only the rewrites knew: the shapes of contrib
    # ops onnx cannot infer), and match nothing for the hint of a newer opset.
    later = dataclasses.replace(exact, infer_shapes=False, match_newer_opset=False)
    # The approximate rules alone: the passes ran in the first stage and run in the last.
    approximate = dataclasses.replace(later, calibration=statistics, passes=())
    approximate = steps_left(approximate, trace)
    trace = trace.followed_by(pass_manager(split.approximate, approximate).run(model))
    return trace.followed_by(pass_manager(split.exact, steps_left(later, trace)).run(model))


def steps_left(options: RunOptions, done: Trace) -> RunOptions:
    """`options` for a later stage of a replay: the steps of `replay_steps` left after `done`."""
    if options.replay_steps is None:
        return options
    return dataclasses.replace(options, replay_steps=max(0, options.replay_steps - done.steps))
