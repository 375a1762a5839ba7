"""`RewriteOptions`: everything `rewrite` can be told, in one frozen value."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import TYPE_CHECKING

from rewriter.engine import RunOptions
from rewriter.rules import LiteralValue

if TYPE_CHECKING:
    from rewriter.quantize import AccuracyBudget, CalibrationSamples, SpeedCheck


@dataclasses.dataclass(frozen=True, slots=True)
class RewriteOptions(RunOptions):
    """How `rewrite` runs (every field has a default).

    The engine's options (`rewriter.engine.RunOptions`: `max_rewrites`, `max_iterations`,
    `exclude_rules`, `target_opset`, `keep_runnable`, `exact`, `passes`, ...) and what
    happens around the engine's run; `rewrite` hands the value to the engine as it is.

    Attributes:
        allow_python: permit `use` declarations in rule files (opt-in Python helpers).
        params: values of rule parameters the rule files declare (`param NAME = literal`),
            e.g. `{"per_channel": False}`; used when `rewrite` loads the rules.
        add_opsets: opset imports to add before rewriting (`{"com.microsoft": 1}` so the
            opt-in onnxruntime fusions can apply); an added import nothing uses is dropped.
        freeze_initializer_inputs: main-graph inputs that an initializer also defines stop
            being inputs, so rules may treat them as constants; always done for models
            before IR version 4 (which list every initializer as an input; such a model
            becomes IR 4).
        input_shapes: fix graph inputs' shapes before rewriting (`{"x": (1, 128, 768)}`), as
            onnxsim's `--overwrite-input-shape`: a symbol such an input names takes its size
            everywhere, static shapes can unlock folding, and the result keeps the shapes.
        copy: when the model is an `ir.Model`, work on a copy (the default) or in place.
        budget: measure the approximate rewrites against an accuracy budget and keep the
            most sensitive sites as they were until the model meets it (see
            `rewriter.api.AccuracyBudget`); None: no measuring.
        calibration_samples: samples to gather the calibration statistics from
            (`rewriter.quantize.CalibrationSamples`, `--calibration`): a run with
            approximate rules runs them on the float model those rules see (after the exact
            rules' fixed point), and the statistics take the place of `calibration` (the
            statistics given as they are). The quantization rules that need activation
            ranges (`calibrated_range`, `awq_scale`) fire only with one of the two.
        quantize: a preset, "int8", "int4" or "float16" (`rewrite MODEL --quantize int8`):
            the rules (default: the shipped library) run to their fixed point, then the
            preset's precision rules, each layer in the form onnxruntime runs fastest
            (`rewriter.quantize.preset`); with the speed check, layers that would run slower
            than float stay float. None: only the given rules.
        speed_check: how the speed check times models (`rewriter.quantize.SpeedCheck`); it
            runs under a preset unless `SpeedCheck(enabled=False)`, and for other runs with
            approximate rules when given.

    `target_opset` also converts the model: with onnx's version converter, up first (so
    fusions into newer ops can fire), or down after rules that decompose ops the target
    lacks (`where target_opset() < N`).
    """

    allow_python: bool = False
    params: Mapping[str, LiteralValue] = dataclasses.field(default_factory=dict)
    add_opsets: Mapping[str, int] = dataclasses.field(default_factory=dict)
    freeze_initializer_inputs: bool = False
    input_shapes: Mapping[str, tuple[int, ...]] = dataclasses.field(default_factory=dict)
    copy: bool = True
    budget: AccuracyBudget | None = None
    calibration_samples: CalibrationSamples | None = None
    quantize: str | None = None
    speed_check: SpeedCheck | None = None

    def __post_init__(self) -> None:
        from rewriter.quantize import PRESETS

        if self.quantize is not None and self.quantize not in PRESETS:
            known = ", ".join(PRESETS)
            raise ValueError(f"unknown quantization preset {self.quantize!r} (known: {known})")
