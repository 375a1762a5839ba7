"""Runs that measure their approximate rewrites: presets, accuracy budgets, speed checks.

`rewrite(model, rules, RewriteOptions(quantize="int8"))` (or with a `budget`, or a
`speed_check`) is a staged run (`_stages`) whose approximate stage is measured before it is
kept:

1. the exact rules (default: the shipped library) run to their fixed point: the float model
   F, its nodes given unique names (`rewriter.quantize.name_every_node`); calibration samples
   are run on F;
2. the approximate rules run on a copy of F (variant 0); with a budget (or a preset that
   offers another form) again with those sites left out, so milder rules show where they
   would take their place (variant 1, ...); the rewrites are grouped into layers
   (`rewriter.quantize.find_layers`);
3. onnxruntime's optimized model tells which layers it fused into its kernels; a layer that
   it did not fuse takes its runtime-op option when there is one (int4: MatMulNBits);
4. the accuracy budget chooses each layer's option on one switchable model
   (`rewriter.quantize.tune`), then the speed check puts back in float the groups of layers
   that run slower than float (`rewriter.quantize.check_speed`);
5. the chosen model is built from F (`rewriter.quantize.materialize`), the exact rules run on
   it once more, and the budget's independent check judges it.

Nothing here measures or decides by itself: `rewriter.quantize` does; this module sequences
the stages, which need the pass manager of this layer.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import ir
from rewriter._errors import OptionError, RewriteError
from rewriter.api._conversion import convert_keeping_runnable
from rewriter.api._library import RulesLike, default_library_files, library_path, load_rules
from rewriter.api._options import RewriteOptions
from rewriter.api._rewrite import PhaseClock, RewriteResult, finish, prepare
from rewriter.api._stages import SplitRules, renamed_by_every_rule, split_rules, statistics_on
from rewriter.api._vocabulary import pass_manager
from rewriter.engine import (
    KernelAvailability,
    RunOptions,
    SkipEntry,
    Trace,
    TraceEntry,
    int8_sums_saturate,
)
from rewriter.quantize import (
    SATURATION_NOTE,
    AccuracyBudget,
    Decision,
    Layers,
    Preset,
    SpeedCheck,
    SpeedResult,
    budget_inputs,
    check_speed,
    computes_in_float_until_fused,
    correct_biases,
    find_layers,
    first_layers,
    fusion_misses,
    kept_float_reason,
    materialize,
    name_every_node,
    preset,
    tune,
)
from rewriter.quantize import finish as finish_budget
from rewriter.rules import RuleSet
from rewriter.verification import VerifyError, analyze_inputs, plain_samples, split_samples

if TYPE_CHECKING:
    import onnx

    from rewriter.quantize import CalibrationSamples

# Rounds of "leave out every approximate site found so far; do other rules take the nodes?"
_DISCOVERY_ROUNDS = 4
# The ops of onnxruntime's own domain that a preset may write when the model imports it.
_RUNTIME_DOMAIN = "com.microsoft"


@dataclasses.dataclass
class _Run:
    """What the stages share: the rules, the options as they apply, the clock."""

    ruleset: RuleSet
    split: SplitRules
    options: RewriteOptions
    run: RunOptions
    clock: PhaseClock
    notes: list[str]

    def exact(self, model: ir.Model) -> Trace:
        return pass_manager(self.split.exact, dataclasses.replace(self.run, calibration=None)).run(
            model
        )

    def approximate(
        self,
        model: ir.Model,
        statistics: Any,
        excluded: Mapping[tuple[str, str], str],
        rules: RuleSet | None = None,
    ) -> Trace:
        # The approximate rules alone (`rules`: others than the run's own, loaded with other
        # parameters): the passes run in the exact stages around them.
        run = dataclasses.replace(
            self.run,
            calibration=statistics,
            excluded_sites={**self.run.excluded_sites, **excluded},
            passes=(),
        )
        return pass_manager(rules or self.split.approximate, run).run(model)


def _preset_rules(
    rules: RulesLike, options: RewriteOptions, clock: PhaseClock
) -> tuple[RuleSet, RewriteOptions, list[str], Preset | None]:
    """The rule set, options, notes and preset of a run: a preset adds its files."""
    if options.quantize is None:
        if isinstance(rules, RuleSet):
            return rules, options, [], None
        with clock.phase("load_rules"):
            ruleset = load_rules(rules, allow_python=options.allow_python, params=options.params)
        return ruleset, options, [], None
    speed = options.speed_check is None or options.speed_check.enabled
    chosen = preset(
        options.quantize,
        calibrated=options.calibration is not None or options.calibration_samples is not None,
        speed_check=speed,
        runtime_ops=_RUNTIME_DOMAIN in options.add_opsets,
    )
    if isinstance(rules, RuleSet):
        ruleset = rules  # loaded by the caller from `preset_rule_paths`
    else:
        paths = _with_preset_files(rules, chosen.files)
        with clock.phase("load_rules"):
            ruleset = load_rules(paths, allow_python=options.allow_python, params=options.params)
    adjusted = dataclasses.replace(
        options, exclude_rules=frozenset(options.exclude_rules) | chosen.excluded_rules
    )
    notes = list(chosen.notes)
    if chosen.name == "int8" and "weight_bits" not in options.params and int8_sums_saturate():
        notes.append(SATURATION_NOTE)
    return ruleset, adjusted, notes, chosen


def _with_preset_files(rules: RulesLike, files: Sequence[str]) -> list[str | os.PathLike[str]]:
    base: list[str | os.PathLike[str]]
    if rules is None:
        base = [*default_library_files()]
    elif isinstance(rules, str | os.PathLike):
        base = [rules]
    elif isinstance(rules, RuleSet):
        raise TypeError("a loaded RuleSet cannot be extended with a preset's files")
    else:
        base = list(rules)
    return [*base, *(library_path() / "quantize" / name for name in files)]


def preset_rule_paths(
    rules: RulesLike,
    quantize: str,
    *,
    calibrated: bool,
    speed_check: bool = True,
    runtime_ops: bool = False,
) -> list[str | os.PathLike[str]]:
    """The rule files a preset run loads: `rules` (None: the shipped library), then its own.

    For callers that load the rules themselves and pass the RuleSet.
    """
    chosen = preset(
        quantize, calibrated=calibrated, speed_check=speed_check, runtime_ops=runtime_ops
    )
    return _with_preset_files(rules, chosen.files)


def rewrite_measured(
    model: str | os.PathLike[str] | ir.Model | onnx.ModelProto,
    rules: RulesLike,
    options: RewriteOptions,
) -> RewriteResult:
    """A preset, an accuracy budget or a speed check: see the module docstring.

    Raises:
        RewriteError: bad rules or model; calibration samples or budget inputs the model
            cannot run; models that cannot be measured.
    """
    clock = PhaseClock()
    ruleset, options, notes, chosen = _preset_rules(rules, options, clock)
    split = split_rules(ruleset)
    prepared = prepare(model, options, clock)
    source = _source_snapshot(prepared.model, model, options.budget)
    check = _speed_check(options)
    # The float original as given, the speed check's yardstick (stage 1 changes the model).
    original = bytes(ir.to_onnx(prepared.model).SerializeToString()) if check else b""
    float_model, before = _float_model(prepared.model, ruleset, split, options, chosen, clock)
    if options.replay_steps is not None:
        # A replay (the bisection of `--verify`) counts the steps of stage 1 one by one; the
        # later stages build the model from measured layers, so they come whole, as one step.
        if before.steps >= options.replay_steps:
            return finish(prepared, float_model, before, ruleset, options, clock)
        options = dataclasses.replace(options, replay_steps=None)
    if split is None:
        result = finish(prepared, float_model, before, ruleset, options, clock)
        return _without_approximate(result, source, options, notes)
    run = _Run(ruleset, split, options, options, clock, notes)
    name_every_node(float_model)
    with clock.phase("calibrate"):
        statistics = _statistics(float_model, options, ruleset)
    widths = _weight_widths(ruleset, options, clock)
    with clock.phase("rewrite"):
        variants, forms = _variants(run, float_model, statistics, widths)
        layers = find_layers(float_model, [(m, t) for m, t in variants], forms)
    notes.extend(layers.notes)
    choice: dict[int, int | None] = {layer.index: 0 for layer in layers}
    first = first_layers(float_model, layers) if _keeps_first_layers(options) else ()
    choice.update(dict.fromkeys(first, None))
    models = [m for m, _ in variants]
    with clock.phase("fusion"):
        layers, fusion_notes = _prefer_fused(run, float_model, models, layers, choice)
    notes.extend(fusion_notes)
    decision: Decision | None = None
    final_data = None
    budget_notes: list[str] = []
    if options.budget is not None and len(layers):
        with clock.phase("budget"):
            decision, final_data, budget_notes = _tune(float_model, models, layers, source, options)
        choice = decision.choice
    speed: SpeedResult | None = None
    if check is not None and any(option is not None for option in choice.values()):
        with clock.phase("speed"):
            choice, speed = _check_speed(run, original, float_model, models, layers, choice, check)
    if widths is not None:
        _say_widths(notes, layers, choice)
    built = materialize(float_model, models, layers, choice)
    with clock.phase("rewrite"):
        cleanup = run.exact(built.model)
    if _corrects_biases(options):
        assert options.calibration_samples is not None
        with clock.phase("calibrate"):
            try:
                correction = correct_biases(
                    built.model,
                    float_model,
                    options.calibration_samples.samples,
                    built.node_layers,
                    layers,
                )
            except VerifyError as exc:
                raise RewriteError(f"calibration: {exc}") from exc
        if correction.corrected:
            notes.append(correction.summary())
    if first:
        notes.append(
            f"{len(first)} first layer{'s' * (len(first) != 1)} (on the model's inputs) kept "
            "float: the int8 preset keeps them float with calibration samples"
        )
    trace = _trace(before, variants[0][1], layers, choice, decision, speed, options, cleanup, first)
    result = finish(prepared, built.model, trace, ruleset, options, clock)
    budget_result = None
    if options.budget is not None:
        if final_data is None:
            final_data = _budget_data(source, options)[1]
        with clock.phase("budget"):
            budget_result = finish_budget(
                decision,
                final_data,
                budget_notes,
                result.model,
                choice,
                options.budget,
                speed.slower if speed is not None else None,
            )
    timings = {
        **result.timings,
        **{k: v for k, v in clock.seconds.items() if k not in result.timings},
    }
    return dataclasses.replace(
        result, budget=budget_result, speed=speed, notes=tuple(notes), timings=timings
    )


def _corrects_biases(options: RewriteOptions) -> bool:
    """An int8 preset run with calibration samples corrects its quantized Convs' biases.

    Not under an accuracy budget: the budget chose the layers by measuring them uncorrected,
    and a correction made afterwards would change what it measured (on Silero VAD it moved a
    speech segment's end by one chunk where the chosen, uncorrected model keeps them all).
    """
    samples = _unbudgeted_int8_samples(options)
    return samples is not None and samples.bias_correction


def _keeps_first_layers(options: RewriteOptions) -> bool:
    """An int8 preset run with calibration samples keeps its first layers float.

    (`rewriter.quantize.first_layers`; off with `CalibrationSamples.first_layers_float`.)
    Not under an accuracy budget: the budget measures every layer and chooses itself.
    """
    samples = _unbudgeted_int8_samples(options)
    return samples is not None and samples.first_layers_float


def _unbudgeted_int8_samples(options: RewriteOptions) -> CalibrationSamples | None:
    """The calibration samples of an int8 preset run without an accuracy budget, else None."""
    if options.quantize != "int8" or options.budget is not None:
        return None
    return options.calibration_samples


def _without_approximate(
    result: RewriteResult, source: Any, options: RewriteOptions, notes: list[str]
) -> RewriteResult:
    """A measured run whose rules approximate nothing: the budget still checks the result."""
    budget = None
    if options.budget is not None:
        final_data = _budget_data(source, options)[1]
        budget = finish_budget(None, final_data, [], result.model, {}, options.budget)
    return dataclasses.replace(result, budget=budget, notes=tuple(notes))


def _source_snapshot(prepared: ir.Model, given: Any, budget: AccuracyBudget | None) -> Any:
    """The original as the budget's reference runs it (a path, or a copy taken now)."""
    if budget is None:
        return None
    if isinstance(given, str | os.PathLike) and budget.ray_address is None:
        return os.fspath(given)
    return ir.to_onnx(prepared)


def _float_model(
    model: ir.Model,
    ruleset: RuleSet,
    split: SplitRules | None,
    options: RewriteOptions,
    chosen: Preset | None,
    clock: PhaseClock,
) -> tuple[ir.Model, Trace]:
    """Stage 1: the model converted up to the target opset, the exact rules to their fixed point.

    Without a target, a preset's least opset is the target when the model's is older.
    """
    exact = split.exact if split is not None else ruleset
    run = dataclasses.replace(options, calibration=None)
    target = options.target_opset
    current = model.opset_imports.get("", model.opset_imports.get("ai.onnx"))
    least_opset = chosen.min_opset if chosen is not None else None
    if target is None and least_opset is not None and current is not None and current < least_opset:
        target = least_opset
    required = least_opset if chosen is not None and chosen.opset_required else None
    if target is not None and required is not None and target < required:
        # Its rules would never fire: the model would come back unquantized, at exit 0.
        raise OptionError(
            "target_opset",
            f"lower than opset {required}, which the {options.quantize} preset writes "
            f"(leave it unset, or give {required} or newer)",
            value=str(target),
        )
    trace = Trace((), (), _saturated())
    if target is not None and current is not None and target != current:
        if target < current:
            raise OptionError(
                "target_opset",
                "lower than the model's opset, which a quantization preset, an accuracy "
                "budget or a speed check cannot be combined with (convert the model down first)",
                value=str(target),
            )
        kernels = KernelAvailability() if options.keep_runnable else None
        with clock.phase("convert"):
            model = convert_keeping_runnable(model, target, kernels)
        trace = Trace.conversion(current, target)
    with clock.phase("rewrite"):
        trace = trace.followed_by(pass_manager(exact, run).run(model))
    return model, trace


def _saturated() -> Any:
    from rewriter.engine import StopReason

    return StopReason.SATURATED


def _statistics(model: ir.Model, options: RewriteOptions, ruleset: RuleSet) -> Any:
    try:
        found = statistics_on(
            model, options.calibration, options.calibration_samples, options.quantize
        )
    except VerifyError as exc:
        raise RewriteError(f"calibration: {exc}") from exc
    return renamed_by_every_rule(found, ruleset)


def _copy(model: ir.Model) -> ir.Model:
    return ir.from_onnx(ir.to_onnx(model), base_dir=model.base_dir)


def _variants(
    run: _Run, float_model: ir.Model, statistics: Any, widths: _WeightWidths | None
) -> tuple[list[tuple[ir.Model, Trace]], list[dict[str, str]]]:
    """Variant 0 (every approximate site), and the sites that take left-out ones' places.

    With `widths`, variant 0 has 8-bit int8 weights and variant 1 the 7-bit form of the rules
    whose weights depend on the width, so that each such layer has both options. Also the
    forms of each variant's options, by rule (`find_layers`).
    """
    first = _copy(float_model)
    if widths is None:
        variants = [(first, run.approximate(first, statistics, {}))]
        forms: list[dict[str, str]] = []
    else:
        narrow = _copy(float_model)
        variants = [
            (first, run.approximate(first, statistics, {}, widths.wide)),
            (narrow, run.approximate(narrow, statistics, {}, widths.narrow)),
        ]
        dependent = [rule.name for rule in widths.narrow.rules]
        forms = [dict.fromkeys(dependent, form) for form in _WIDTH_FORMS]
    if not _wants_alternatives(run.options):
        return variants, forms
    excluded: dict[tuple[str, str], str] = {}
    reason = "left out to find what takes its place"
    for _model, trace in variants:
        excluded.update(dict.fromkeys(trace.approximate_sites(), reason))
    for _ in range(_DISCOVERY_ROUNDS):
        model = _copy(float_model)
        trace = run.approximate(model, statistics, excluded)
        if not trace.approximate_sites():
            break
        variants.append((model, trace))
        excluded.update(dict.fromkeys(trace.approximate_sites(), reason))
    return variants, forms


# The forms of the two widths' options, in variant order (`_variants`).
_WIDTH_FORMS = ("8-bit weights", "7-bit weights")
# The rule parameter of `patterns/quantize/int8_weights.rw`: 0 leaves the width to the rules.
_WIDTH_PARAM = "weight_bits"


@dataclasses.dataclass(frozen=True)
class _WeightWidths:
    """Both weight widths of the rules whose int8 weights depend on `weight_bits`.

    `wide`: every approximate rule, those in 8 bits; `narrow`: those alone, in 7 bits.
    """

    wide: RuleSet
    narrow: RuleSet


def _weight_widths(
    ruleset: RuleSet, options: RewriteOptions, clock: PhaseClock
) -> _WeightWidths | None:
    """Both int8 weight widths as options of each layer, where the accuracy budget decides.

    Where onnxruntime's uint8 x int8 sums saturate, the rules narrow int8 weights to 7 bits
    (`patterns/quantize/int8_weights.rw`): a saturated sum is far worse than a lost bit, but
    only on layers whose values reach it. A budget measures each layer as onnxruntime runs
    it, saturation included: dynamic int8 (MatMulInteger) computes in integers as written,
    and static QDQ int8 (DequantizeLinear -> Conv -> QuantizeLinear) once onnxruntime fuses it
    into QLinearConv, so the budget then measures with its graph optimizations
    (`computes_in_float_until_fused`), as sessions run by default. Each such layer gets both
    forms: the 8-bit one first (a bit more precise where nothing saturates), the 7-bit one
    where that is left out. Not when the caller set the width (`weight_bits`), the rules do
    not declare it, or they were not loaded from files.
    """
    if options.budget is None or _WIDTH_PARAM in options.params:
        return None
    if _WIDTH_PARAM not in ruleset.params or not ruleset.sources or not int8_sums_saturate():
        return None
    with clock.phase("load_rules"):
        wide = load_rules(
            list(ruleset.paths),
            allow_python=options.allow_python,
            params={**options.params, _WIDTH_PARAM: 8},
        )
    given = {rule.name: rule for rule in ruleset.rules if rule.approximate is not None}
    eight_bit = {rule.name: rule for rule in wide.rules if rule.name in given}
    depends = {name for name, rule in eight_bit.items() if given[name] != rule}
    if not depends:
        return None
    return _WeightWidths(
        dataclasses.replace(
            ruleset,
            rules=tuple(eight_bit[n] if n in depends else r for n, r in given.items()),
            passes=(),
        ),
        dataclasses.replace(
            ruleset, rules=tuple(r for n, r in given.items() if n in depends), passes=()
        ),
    )


def _say_widths(
    notes: list[str],
    layers: Layers,
    choice: Mapping[int, int | None],
) -> None:
    """Notes on the int8 weights' widths once the budget has chosen (`_weight_widths`).

    How many layers it gave 8 and 7 bits, in place of the rules' own 7-bit note.
    """
    counts = dict.fromkeys(_WIDTH_FORMS, 0)
    for layer in layers:
        picked = choice.get(layer.index)
        if picked is not None and layer.options[picked].form in counts:
            counts[layer.options[picked].form] += 1
    wide, narrow = (counts[form] for form in _WIDTH_FORMS)
    if not wide and not narrow:
        return
    if SATURATION_NOTE in notes:
        notes.remove(SATURATION_NOTE)
    notes.append(
        f"int8 weights as the accuracy budget chose them: 8 bits on {wide} "
        f"layer{'s' * (wide != 1)}, 7 bits (-64..64) on {narrow}; it measured both, as "
        "onnxruntime's uint8 x int8 kernels saturate on this machine (x86 without VNNI adds two "
        "products in 16 bits)"
    )


def _wants_alternatives(options: RewriteOptions) -> bool:
    """Whether other rules' rewrites in place of left-out ones are wanted.

    They are when the budget may leave layers out, or a runtime form may replace an unfused one.
    """
    runtime = options.quantize is not None and _RUNTIME_DOMAIN in options.add_opsets
    return options.budget is not None or runtime


def _prefer_fused(
    run: _Run,
    float_model: ir.Model,
    models: Sequence[ir.Model],
    layers: Layers,
    choice: Mapping[int, int | None],
) -> tuple[Layers, list[str]]:
    """Layers onnxruntime does not fuse take their runtime-op option first; notes say which.

    Judged on the model as it would be written (after the exact rules' clean-up: merging two
    identical DequantizeLinear nodes, say, can keep onnxruntime from fusing either).
    """
    options = run.options
    if options.quantize is None or not len(layers):
        return layers, []
    built = materialize(float_model, models, layers, choice)
    run.exact(built.model)
    misses = fusion_misses(built.model, built.node_layers)
    if not misses:
        return layers, []
    notes = []
    reordered = []
    moved = 0
    for layer in layers:
        if layer.index not in misses:
            reordered.append(layer)
            continue
        runtime = [
            i
            for i, option in enumerate(layer.options)
            if _writes_runtime_ops(models[option.variant], option.nodes)
        ]
        if runtime:
            first = runtime[0]
            options_first = (
                layer.options[first],
                *(o for i, o in enumerate(layer.options) if i != first),
            )
            reordered.append(dataclasses.replace(layer, options=options_first))
            moved += 1
        else:
            reordered.append(layer)
    unfused = len(misses) - moved
    if moved:
        notes.append(
            f"{moved} layer{'s' * (moved != 1)} written as onnxruntime's own ops "
            f"({_RUNTIME_DOMAIN}): onnxruntime does not fuse the standard form there"
        )
    if unfused:
        ops = ", ".join(sorted(set(misses.values())))
        notes.append(
            f"{unfused} layer{'s' * (unfused != 1)} written in standard ONNX that onnxruntime "
            f"does not fuse into its quantized kernels (unfused {ops})"
            + (
                f"; import {_RUNTIME_DOMAIN} (--add-opset {_RUNTIME_DOMAIN}=1) to write its own "
                "op instead"
                if options.quantize == "int4" and _RUNTIME_DOMAIN not in options.add_opsets
                else ""
            )
        )
    return Layers(tuple(reordered), layers.unplaced, layers.notes), notes


def _writes_runtime_ops(model: ir.Model, names: Sequence[str]) -> bool:
    wanted = set(names)
    return any(
        node.name in wanted and node.domain == _RUNTIME_DOMAIN
        for graph in model.graphs()
        for node in graph
    )


def _budget_data(source: Any, options: RewriteOptions) -> Any:
    budget = options.budget
    assert budget is not None
    try:
        return budget_inputs(source, budget, options.input_shapes)
    except VerifyError as exc:
        raise RewriteError(f"accuracy budget: {exc}") from exc


def _tune(
    float_model: ir.Model,
    models: Sequence[ir.Model],
    layers: Layers,
    source: Any,
    options: RewriteOptions,
) -> tuple[Decision, Any, list[str]]:
    budget = options.budget
    assert budget is not None
    tuning, final_data, notes = _budget_data(source, options)
    switchable = materialize(float_model, models, layers, switchable=True)
    # Fused where a layer's integer kernel exists only once onnxruntime fuses it: a session's
    # default, whether or not the final check runs ORT_ENABLE_ALL (its 8-bit static form
    # measured unfused would look better than it runs).
    as_deployed = computes_in_float_until_fused(switchable.model, switchable.node_layers)
    decision = tune(
        ir.to_onnx(switchable.model).SerializeToString(),
        layers,
        tuning,
        budget,
        as_deployed=as_deployed,
    )
    return decision, final_data, notes


def _speed_check(options: RewriteOptions) -> SpeedCheck | None:
    check = options.speed_check
    if check is None:
        return SpeedCheck() if options.quantize is not None else None
    return check if check.enabled else None


def _speed_feeds(model: ir.Model, options: RewriteOptions, check: SpeedCheck) -> dict[str, Any]:
    """The inputs to time on: the check's, the calibration's, the budget's, or plain ones.

    The first sample of the first of those given; a mapping may stack several samples along
    a new first axis (`--inputs` files do), so it is split as the verifier splits it.

    Raises:
        RewriteError: the given samples do not fit the model's inputs.
    """
    import numpy as np

    samples: Sequence[Mapping[str, Any]] = check.samples
    if not samples and options.calibration_samples is not None:
        samples = options.calibration_samples.samples
    if not samples and options.budget is not None:
        samples = options.budget.samples
    if not samples:
        samples = plain_samples(model, 1)
    try:
        first = split_samples(samples[:1], analyze_inputs(model, model))[0]
    except VerifyError as exc:
        raise RewriteError(f"speed check: {exc}") from None
    return {name: np.asarray(value) for name, value in first.items()}


def _check_speed(
    run: _Run,
    original: bytes,
    float_model: ir.Model,
    models: Sequence[ir.Model],
    layers: Layers,
    choice: Mapping[int, int | None],
    check: SpeedCheck,
) -> tuple[dict[int, int | None], SpeedResult]:
    feeds = _speed_feeds(float_model, run.options, check)
    inputs = {value.name for value in float_model.graph.inputs}
    feeds = {name: value for name, value in feeds.items() if name in inputs}

    def build(chosen: Mapping[int, int | None]) -> bytes:
        built = materialize(float_model, models, layers, chosen).model
        run.exact(built)
        return bytes(ir.to_onnx(built).SerializeToString())

    return check_speed(layers, choice, build, feeds, check, original)


def _trace(
    before: Trace,
    approximate: Trace,
    layers: Layers,
    choice: Mapping[int, int | None],
    decision: Decision | None,
    speed: SpeedResult | None,
    options: RewriteOptions,
    cleanup: Trace,
    first_float: Sequence[int] = (),
) -> Trace:
    """Stage 1, the chosen layers' rewrites, a skip per layer kept float, the clean-up."""
    entries: list[TraceEntry] = []
    skips: list[SkipEntry] = list(approximate.skips)
    slower = speed.slower if speed is not None else {}
    left_out = set(decision.ranked[: decision.kept]) if decision is not None else set()
    count = len(decision.ranked) if decision is not None else 0
    for layer in layers:
        picked = choice.get(layer.index)
        if picked is not None:
            entries.extend(layer.options[picked].entries)
            continue
        primary = layer.options[0]
        first = primary.entries[0]
        if layer.index in first_float:
            reason = "kept float: the first layer on the model's inputs (int8 preset)"
        elif layer.index in slower:
            reason = kept_float_reason(primary.rule, slower[layer.index])
        elif (layer.index, 0) in left_out and decision is not None:
            rank = decision.ranked.index((layer.index, 0)) + 1
            budget = options.budget
            assert budget is not None
            reason = (
                f"left out by the accuracy budget (sensitive site {rank} of {count}): "
                f"{decision.reason((layer.index, 0), budget.accept)}"
            )
        else:
            reason = "kept float"
        skips.append(SkipEntry(first.rule, first.location, reason, first.anchor))
    middle = Trace(tuple(entries), tuple(skips), approximate.stop_reason, approximate.warnings)
    return before.followed_by(middle).followed_by(cleanup)
