"""`RewriteOptions`: everything `rewrite` can be told, in one frozen value."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import TYPE_CHECKING

from rewriter.engine import Calibration, KernelAvailability, ProgressCallback, RunOptions

if TYPE_CHECKING:
    from rewriter.quantize import AccuracyBudget, CalibrationSamples, SpeedCheck


@dataclasses.dataclass(frozen=True, slots=True)
class RewriteOptions:
    """How `rewrite` runs (every field has a default).

    Attributes:
        allow_python: permit `use` declarations in rule files (opt-in Python helpers).
        target_opset: convert the default-domain opset to this version with onnx's version
            converter: up first (so fusions into newer ops can fire), or down after rules that
            decompose ops the target lacks (`where target_opset() < N`).
        add_opsets: opset imports to add before rewriting (`{"com.microsoft": 1}` so the
            opt-in onnxruntime fusions can apply); an added import nothing uses is dropped.
        freeze_initializer_inputs: main-graph inputs that an initializer also defines stop
            being inputs, so rules may treat them as constants; always done for models
            before IR version 4 (which list every initializer as an input; such a model
            becomes IR 4).
        exclude_rules: names of rules not to apply.
        input_shapes: fix graph inputs' shapes before rewriting (`{"x": (1, 128, 768)}`), as
            onnxsim's `--overwrite-input-shape`: a symbol such an input names takes its size
            everywhere, static shapes can unlock folding, and the result keeps the shapes.
        max_rewrites: the rewrite budget (default proportional to the graph size).
        max_iterations: rounds of rules and passes at most.
        replay_limit: stop after this many rewrites (to replay a prefix of a run).
        record_subgraphs: keep each rewrite's matched subgraph and replacement (with their
            neighbours) in the trace, for reports.
        progress: called as `progress(applied, pending)` during long runs.
        copy: when the model is an `ir.Model`, work on a copy (the default) or in place.
        keep_runnable: decline a rewrite whose new nodes onnxruntime has no kernel for where
            it has one for the nodes they replace (the result stays runnable where the input
            was).
        excluded_sites: rule applications not to make, `{(rule name, anchor): reason}`
            (the anchor as trace entries name it, `TraceEntry.site`); the reason is recorded
            as a skip. The accuracy budget keeps layers in float this way.
        budget: measure the approximate rewrites against an accuracy budget and keep the
            most sensitive sites as they were until the model meets it (see
            `rewriter.api.AccuracyBudget`); None: no measuring.
        calibration: what the input model's values held on calibration samples
            (`rewriter.quantize.collect_calibration`), by value name, or the samples
            themselves (`rewriter.quantize.CalibrationSamples`, `--calibration`): a run with
            approximate rules then gathers the statistics on the float model the approximate
            rules see (after the exact rules' fixed point). The quantization rules that need
            activation ranges (`calibrated_range`, `awq_scale`) fire only with it.
        quantize: a preset, "int8", "int4" or "float16" (`rewrite MODEL --quantize int8`):
            the rules (default: the shipped library) run to their fixed point, then the
            preset's precision rules, each layer in the form onnxruntime runs fastest
            (`rewriter.quantize.preset`); with the speed check, layers that would run slower
            than float stay float. None: only the given rules.
        speed_check: how the speed check times models (`rewriter.quantize.SpeedCheck`); it
            runs under a preset unless `SpeedCheck(enabled=False)`, and for other runs with
            approximate rules when given.
        exact: apply no rule beyond what is exact on every input the model accepts: a rule
            that `assumes finite` inputs never applies, one that `assumes nonempty` tensors
            only where every tensor it reads has a known shape without a zero dim. By
            default such rules apply (a fused Attention is onnxruntime's kernel, which
            rejects an empty batch or sequence where the unfused ops return an empty
            result); the trace counts the rewrites that assumed something.
    """

    allow_python: bool = False
    target_opset: int | None = None
    add_opsets: Mapping[str, int] = dataclasses.field(default_factory=dict)
    freeze_initializer_inputs: bool = False
    exclude_rules: frozenset[str] = frozenset()
    input_shapes: Mapping[str, tuple[int, ...]] = dataclasses.field(default_factory=dict)
    max_rewrites: int | None = None
    max_iterations: int = 8
    replay_limit: int | None = None
    record_subgraphs: bool = False
    progress: ProgressCallback | None = None
    copy: bool = True
    keep_runnable: bool = True
    excluded_sites: Mapping[tuple[str, str], str] = dataclasses.field(default_factory=dict)
    budget: AccuracyBudget | None = None
    calibration: Calibration | CalibrationSamples | None = None
    exact: bool = False
    quantize: str | None = None
    speed_check: SpeedCheck | None = None

    def __post_init__(self) -> None:
        from rewriter.quantize import PRESETS

        if self.quantize is not None and self.quantize not in PRESETS:
            known = ", ".join(PRESETS)
            raise ValueError(f"unknown quantization preset {self.quantize!r} (known: {known})")

    def run_options(self) -> RunOptions:
        """The pass manager's share of these options."""
        return RunOptions(
            max_rewrites=self.max_rewrites,
            max_iterations=self.max_iterations,
            replay_limit=self.replay_limit,
            exclude_rules=frozenset(self.exclude_rules),
            progress=self.progress,
            target_opset=self.target_opset,
            record_subgraphs=self.record_subgraphs,
            runnable=KernelAvailability() if self.keep_runnable else None,
            excluded_sites=dict(self.excluded_sites),
            calibration=self.calibration if isinstance(self.calibration, Calibration) else None,
            exact=self.exact,
        )
