"""Quantization: calibration, presets, accuracy budgets and speed checks (clients of the engine).

The rules that quantize are `.rw` files (`patterns/quantize/`) and built-ins of the engine
(`symmetric_scale`, `quantize`, `calibrated_range`, ...); this package decides where and
whether they apply, by running models:

* `collect_calibration` (`_calibration`): what a model's values hold on samples, the
  statistics `calibrated_range` and `awq_scale` read; `calibration_method`: how ranges come
  from them when the caller names no method (the int8 preset: the 99.99th percentile);
  `instance_calibration` (`_instance_calibration`) calibrates check-rules' instances of rules
  that read them.
* `preset` (`_presets`): the rule files and rules of `--quantize int8|int4|float16`.
* `find_layers`, `materialize` (`_sites`): the approximate rewrites of a staged run grouped
  into layers, and models that compute each layer float, approximate or switchably.
* `tune`, `finish` (`_budget`, measuring with `_sensitivity`): the accuracy budget
  (`AccuracyBudget`, `--accept snr>=35`) on one switchable model.
* `check_speed` (`_speed`): layers whose approximate form runs slower go back to float.
* `fusion_misses` (`_fusion`): layers onnxruntime did not fuse into its integer kernels;
  `computes_in_float_until_fused`: whether the budget must measure with its fusions.
* `first_layers` (`_boundary`): the layers that compute first on the model's inputs, which
  the int8 preset keeps float.
* `correct_biases` (`_bias_correction`): each quantized Conv's bias corrected, layer by layer,
  so that its mean output per channel on the calibration samples is the float model's.

The orchestration (which stage runs when) is `rewriter.api`'s; this package never rewrites.
"""

from __future__ import annotations

from rewriter.quantize._bias_correction import BiasCorrection, correct_biases
from rewriter.quantize._boundary import first_layers
from rewriter.quantize._budget import (
    Decision,
    budget_inputs,
    choice_without,
    finish,
    kept_float_reason,
    tune,
)
from rewriter.quantize._budget_types import AccuracyBudget, BudgetResult, BudgetStep, SiteResult
from rewriter.quantize._calibration import (
    CalibrationSamples,
    calibration_method,
    collect_calibration,
)
from rewriter.quantize._fusion import computes_in_float_until_fused, fusion_misses
from rewriter.quantize._instance_calibration import (
    CALIBRATION_BUILTINS,
    instance_calibration,
    reads_calibration,
)
from rewriter.quantize._presets import PRESETS, SATURATION_NOTE, Preset, preset
from rewriter.quantize._sensitivity import Evaluation, default_jobs, nan_where_finite
from rewriter.quantize._sites import (
    Layer,
    Layers,
    Option,
    find_layers,
    materialize,
    name_every_node,
    switch_name,
)
from rewriter.quantize._speed import GroupTiming, SpeedCheck, SpeedResult, check_speed

__all__ = [
    "CALIBRATION_BUILTINS",
    "PRESETS",
    "SATURATION_NOTE",
    "AccuracyBudget",
    "BiasCorrection",
    "BudgetResult",
    "BudgetStep",
    "CalibrationSamples",
    "Decision",
    "Evaluation",
    "GroupTiming",
    "Layer",
    "Layers",
    "Option",
    "Preset",
    "SiteResult",
    "SpeedCheck",
    "SpeedResult",
    "budget_inputs",
    "calibration_method",
    "check_speed",
    "choice_without",
    "collect_calibration",
    "computes_in_float_until_fused",
    "correct_biases",
    "default_jobs",
    "find_layers",
    "finish",
    "first_layers",
    "fusion_misses",
    "instance_calibration",
    "kept_float_reason",
    "materialize",
    "name_every_node",
    "nan_where_finite",
    "preset",
    "reads_calibration",
    "switch_name",
    "tune",
]
