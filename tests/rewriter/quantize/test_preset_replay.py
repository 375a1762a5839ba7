"""Replaying a prefix of a preset's run (the bisection of `rewrite --quantize ... --verify`).

The float stage's steps replay one by one; the stages after it build the model from measured
layers, so a prefix that reaches past the float stage is the whole run.
"""

from __future__ import annotations

import dataclasses

from rewriter.api import RewriteOptions, SpeedCheck, rewrite
from tests.helpers import op_types
from tests.quantize_models import cnn_bn

QUANTIZED = {"DynamicQuantizeLinear", "MatMulInteger", "ConvInteger", "QuantizeLinear"}


def _run(replay_steps: int | None):
    options = RewriteOptions(quantize="int8", speed_check=SpeedCheck(enabled=False))
    return rewrite(cnn_bn(), options=dataclasses.replace(options, replay_steps=replay_steps))


def test_a_prefix_ends_inside_the_float_stage_or_takes_the_whole_run():
    full = _run(None)
    first_approximate = min(e.step for e in full.trace.entries if e.approximate)
    assert first_approximate > 1, "the float stage folds the BatchNormalizations first"

    untouched = _run(0)
    assert "BatchNormalization" in op_types(untouched.model)
    assert not QUANTIZED & set(op_types(untouched.model))

    float_stage = _run(first_approximate - 1)
    assert "BatchNormalization" not in op_types(float_stage.model)
    assert not QUANTIZED & set(op_types(float_stage.model))
    assert float_stage.trace.steps == first_approximate - 1

    whole = _run(first_approximate)
    assert QUANTIZED & set(op_types(whole.model))
    assert op_types(whole.model) == op_types(full.model)
