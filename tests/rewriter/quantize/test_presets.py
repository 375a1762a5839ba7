"""`rewrite(..., RewriteOptions(quantize=...))`: the presets' forms, on small built models."""

from __future__ import annotations

import collections
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest

import ir
import rewriter
from rewriter.api import CalibrationSamples, RewriteOptions, SpeedCheck, library_path, rewrite
from tests.quantize_models import (
    cnn_bn,
    conv_hardswish,
    hardswish_cnn,
    masked_attention,
    shared_weight_mlp,
    two_convs,
    two_input_cnn,
)

OFF = SpeedCheck(enabled=False)


def _optimized_ops(model: ir.Model, tmp_path: Path) -> collections.Counter[str]:
    """The ops of onnxruntime's ORT_ENABLE_ALL model (fused kernels by name)."""
    options = ort.SessionOptions()
    options.log_severity_level = 3
    options.optimized_model_filepath = str(tmp_path / "optimized.onnx")
    ort.InferenceSession(
        ir.to_onnx(model).SerializeToString(), options, providers=["CPUExecutionProvider"]
    )
    optimized = onnx.load(tmp_path / "optimized.onnx")
    return collections.Counter(node.op_type for node in optimized.graph.node)


def _int8_all_layers(
    samples: tuple[dict[str, np.ndarray], ...], *, bias_correction: bool = True
) -> RewriteOptions:
    """The int8 preset without its speed check, its first layers quantized too."""
    calibration = CalibrationSamples(
        samples, bias_correction=bias_correction, first_layers_float=False
    )
    return RewriteOptions(quantize="int8", calibration_samples=calibration, speed_check=OFF)


def _samples(count: int, shape: tuple[int, ...], seed: int) -> tuple[dict[str, np.ndarray], ...]:
    rng = np.random.default_rng(seed)
    return tuple({"x": rng.standard_normal(shape).astype(np.float32)} for _ in range(count))


def _snr(reference: np.ndarray, actual: np.ndarray) -> float:
    return float(10 * np.log10(np.sum(reference**2) / np.sum((reference - actual) ** 2)))


def test_int8_folds_batchnorm_then_writes_qdq_convs_that_onnxruntime_fuses(tmp_path):
    options = _int8_all_layers(_samples(4, (2, 3, 16, 16), 1))
    result = rewrite(cnn_bn(), options=options)
    ops = collections.Counter(node.op_type for node in result.model.graph)
    assert ops["BatchNormalization"] == 0
    assert ops["Conv"] == 2
    assert ops["QuantizeLinear"] >= 2
    assert result.model.opset_imports[""] == 14
    optimized = _optimized_ops(result.model, tmp_path)
    assert optimized["QLinearConv"] == 2
    assert optimized["Conv"] == 0
    x = _samples(1, (2, 3, 16, 16), 2)[0]["x"]
    float_out = ort.InferenceSession(cnn_bn().SerializeToString()).run(None, {"x": x})[0]
    int8_out = ort.InferenceSession(result.proto.SerializeToString()).run(None, {"x": x})[0]
    assert _snr(float_out, int8_out) > 25


def test_int8_quantizes_convs_of_a_hardswish_block_and_leaves_the_elementwise_steps_float(
    tmp_path,
):
    # HardSwish written out in an opset-13 export is fused first (the preset converts to 14),
    # and the Add / Mul between Convs are not re-quantized: every Conv still runs as
    # QLinearConv, and the result is closer to float than the rules route that quantizes the
    # elementwise steps too (the same calibration samples).
    model = hardswish_cnn(seed=1)
    options = _int8_all_layers(_samples(4, (4, 3, 16, 16), 1))
    result = rewrite(model, options=options)
    ops = collections.Counter(node.op_type for node in result.model.graph)
    assert result.model.opset_imports[""] == 14
    assert ops["HardSwish"] == 2
    assert ops["Clip"] == ops["Div"] == 0
    optimized = _optimized_ops(result.model, tmp_path)
    assert optimized["QLinearConv"] == 3
    assert optimized["Conv"] == 0
    assert optimized["QLinearAdd"] == optimized["QLinearMul"] == 0
    every_step = rewrite(
        model,
        [library_path(), library_path() / "quantize" / "int8_static.rw"],
        options=RewriteOptions(calibration_samples=options.calibration_samples),
    )
    assert collections.Counter(node.op_type for node in every_step.model.graph)["Clip"] == 2
    x = np.concatenate([sample["x"] for sample in _samples(8, (4, 3, 16, 16), 99)])
    float_out = ort.InferenceSession(model.SerializeToString()).run(None, {"x": x})[0]
    preset_out = ort.InferenceSession(result.proto.SerializeToString()).run(None, {"x": x})[0]
    every_out = ort.InferenceSession(every_step.proto.SerializeToString()).run(None, {"x": x})[0]
    assert _snr(float_out, preset_out) > _snr(float_out, every_out) + 1.0
    assert _snr(float_out, preset_out) > 30


def _output_range_before(model: onnx.ModelProto, reader: str) -> tuple[float, float, float]:
    """(lowest level, highest level, step) of the QuantizeLinear whose DequantizeLinear `reader` reads."""
    initializers = {i.name: onnx.numpy_helper.to_array(i) for i in model.graph.initializer}
    producers = {out: node for node in model.graph.node for out in node.output}
    found = []
    for node in model.graph.node:
        if node.op_type != reader:
            continue
        dequantize = producers[node.input[0]]
        assert dequantize.op_type == "DequantizeLinear"
        scale = float(initializers[dequantize.input[1]])
        zero_point = int(initializers[dequantize.input[2]])
        found.append((-zero_point * scale, (255 - zero_point) * scale, scale))
    assert len(found) == 1
    return found[0]


def _with_output_range(
    model: onnx.ModelProto, reader: str, low: float, high: float
) -> onnx.ModelProto:
    """`model` with the Q/DQ pair before `reader` quantizing [low, high] instead."""
    changed = onnx.ModelProto()
    changed.CopyFrom(model)
    producers = {out: node for node in changed.graph.node for out in node.output}
    reader_node = next(node for node in changed.graph.node if node.op_type == reader)
    dequantize = producers[reader_node.input[0]]
    quantize = producers[dequantize.input[0]]
    scale = (high - low) / 255
    zero_point = int(np.clip(np.round(-low / scale), 0, 255))
    changed.graph.initializer.extend(
        [
            onnx.numpy_helper.from_array(np.array(scale, np.float32), "test_scale"),
            onnx.numpy_helper.from_array(np.array(zero_point, np.uint8), "test_zero_point"),
        ]
    )
    for node in (quantize, dequantize):
        node.input[1], node.input[2] = "test_scale", "test_zero_point"
    return changed


def test_int8_starts_a_conv_output_range_that_only_hardswish_reads_just_below_minus_three(
    tmp_path,
):
    # HardSwish is 0 at and below -3: the Conv output's levels need not reach the -20 and
    # lower its biases give, and the lowest level stays at or below -3 (a level just above
    # would turn every clipped value into a small negative instead of 0).
    model = conv_hardswish(seed=3)
    samples = _samples(4, (2, 4, 8, 8), 1)
    options = _int8_all_layers(samples)
    result = rewrite(model, options=options)
    lowest, highest, step = _output_range_before(result.proto, "HardSwish")
    # The Conv output's smallest calibrated value, read through a model that exposes it.
    exposing = conv_hardswish(seed=3, expose_conv=True)
    session = ort.InferenceSession(exposing.SerializeToString(), providers=["CPUExecutionProvider"])
    conv_low = min(float(np.min(session.run(["c0"], sample)[0])) for sample in samples)
    assert conv_low < -15.0
    assert -3.0 - 2 * step <= lowest <= -3.0
    assert _optimized_ops(result.model, tmp_path)["QLinearConv"] == 2
    full_range = _with_output_range(result.proto, "HardSwish", conv_low, highest)
    x = np.concatenate([sample["x"] for sample in _samples(8, (2, 4, 8, 8), 99)])
    float_out = ort.InferenceSession(model.SerializeToString()).run(None, {"x": x})[0]
    floored_out = ort.InferenceSession(result.proto.SerializeToString()).run(None, {"x": x})[0]
    full_out = ort.InferenceSession(full_range.SerializeToString()).run(None, {"x": x})[0]
    assert _snr(float_out, floored_out) > _snr(float_out, full_out) + 1.0


def test_int8_keeps_the_whole_range_of_a_conv_output_that_more_than_hardswish_reads():
    # The Conv output is a graph output too: its values below -3 are the model's own.
    model = conv_hardswish(seed=3, expose_conv=True)
    samples = _samples(4, (2, 4, 8, 8), 1)
    options = _int8_all_layers(samples)
    result = rewrite(model, options=options)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    conv_low = min(float(np.min(session.run(["c0"], sample)[0])) for sample in samples)
    lowest, _, step = _output_range_before(result.proto, "HardSwish")
    assert abs(lowest - conv_low) <= step


def _largest_channel_mean_error(
    model: onnx.ModelProto, quantized: onnx.ModelProto, samples: tuple[dict[str, np.ndarray], ...]
) -> float:
    reference = ort.InferenceSession(model.SerializeToString())
    approximate = ort.InferenceSession(quantized.SerializeToString())
    errors = np.concatenate(
        [approximate.run(None, s)[0] - reference.run(None, s)[0] for s in samples]
    )
    return float(np.abs(errors.mean(axis=(0, 2, 3))).max())


def test_int8_corrects_conv_biases_so_channel_means_match_float_on_the_samples():
    # Empirical bias correction: each quantized Conv's mean output per channel on the
    # calibration samples is made the float model's, layer by layer; off, the rounding of the
    # weights and of the values below HardSwish's -3 leaves a shift per channel.
    model = conv_hardswish(seed=3)
    samples = _samples(4, (2, 4, 8, 8), 1)
    corrected = rewrite(
        model,
        options=_int8_all_layers(samples),
    )
    plain = rewrite(
        model,
        options=_int8_all_layers(samples, bias_correction=False),
    )
    assert any(note.startswith("bias correction: 2 quantized Convs") for note in corrected.notes)
    assert not any(note.startswith("bias correction") for note in plain.notes)
    shift = _largest_channel_mean_error(model, plain.proto, samples)
    assert shift > 0.005
    assert _largest_channel_mean_error(model, corrected.proto, samples) < shift / 3
    assert collections.Counter(n.op_type for n in corrected.model.graph)["Conv"] == 2


def test_int8_bias_correction_takes_samples_stacked_along_a_new_first_axis():
    # One mapping holding 4 samples stacked counts as 4 samples, as for the calibration.
    model = conv_hardswish(seed=3)
    samples = _samples(4, (2, 4, 8, 8), 1)
    stacked = ({"x": np.stack([sample["x"] for sample in samples])},)
    results = [
        rewrite(
            model,
            options=_int8_all_layers(given),
        )
        for given in (samples, stacked)
    ]
    assert any(note.startswith("bias correction: 2 quantized Convs") for note in results[1].notes)
    x = _samples(1, (2, 4, 8, 8), 5)[0]
    outputs = [ort.InferenceSession(r.proto.SerializeToString()).run(None, x)[0] for r in results]
    np.testing.assert_array_equal(outputs[0], outputs[1])


def _float_layers(model: onnx.ModelProto) -> list[tuple[str, str]]:
    """(op, the value it reads) of each Conv and MatMul that computes in float: its data
    input is not a DequantizeLinear's output (the quantized MatMul is a MatMulInteger)."""
    producers = {out: node.op_type for node in model.graph.node for out in node.output}
    return sorted(
        (node.op_type, node.input[0])
        for node in model.graph.node
        if node.op_type in ("Conv", "MatMul") and producers.get(node.input[0]) != "DequantizeLinear"
    )


def test_int8_with_samples_keeps_the_first_image_conv_float_and_says_why(tmp_path):
    # The first Conv (reached from x through a weightless Mul, 3 channels) stays float; the
    # MatMul first on s is no image convolution and is quantized, as are the second Conv and
    # the head MatMul.
    model = two_input_cnn(seed=2)
    rng = np.random.default_rng(4)
    samples = tuple(
        {
            "x": rng.standard_normal((2, 3, 8, 8)).astype(np.float32),
            "s": rng.standard_normal((2, 4)).astype(np.float32),
        }
        for _ in range(4)
    )
    result = rewrite(
        model,
        options=RewriteOptions(
            quantize="int8", calibration_samples=CalibrationSamples(samples), speed_check=OFF
        ),
    )
    # (The default library folds the Mul into the first Conv's weights first.)
    assert _float_layers(result.proto) == [("Conv", "x")]
    ops = collections.Counter(node.op_type for node in result.proto.graph.node)
    assert ops["MatMulInteger"] == 2
    assert _optimized_ops(result.model, tmp_path)["QLinearConv"] == 1
    reasons = [skip.reason for skip in result.trace.skips if "first layer" in skip.reason]
    assert reasons == ["kept float: the first layer on the model's inputs (int8 preset)"]
    assert any(
        note.startswith("1 first layer (on the model's inputs) kept float") for note in result.notes
    )
    float_out = ort.InferenceSession(model.SerializeToString()).run(None, samples[0])[0]
    int8_out = ort.InferenceSession(result.proto.SerializeToString()).run(None, samples[0])[0]
    assert _snr(float_out, int8_out) > 25
    every = rewrite(
        model,
        options=_int8_all_layers(samples),
    )
    assert _float_layers(every.proto) == []
    assert not any("first layer" in note for note in every.notes)


def test_int8_without_samples_and_speed_check_leaves_conv_float_and_says_why():
    result = rewrite(cnn_bn(), options=RewriteOptions(quantize="int8", speed_check=OFF))
    ops = collections.Counter(node.op_type for node in result.model.graph)
    assert ops["ConvInteger"] == 0
    assert ops["Conv"] == 2
    assert ops["MatMulInteger"] == 1  # the Gemm head: dynamic int8
    assert any(note.startswith("Conv left float: no calibration samples") for note in result.notes)


def test_the_rules_route_folds_batchnorm_before_the_approximate_rules_run():
    rules = [str(library_path()), str(library_path() / "quantize" / "int8_dynamic.rw")]
    result = rewrite(cnn_bn(), rules)
    ops = collections.Counter(node.op_type for node in result.model.graph)
    assert ops["BatchNormalization"] == 0
    assert ops["ConvInteger"] == 2


def test_int4_writes_matmulnbits_where_onnxruntime_does_not_fuse_the_standard_form(tmp_path):
    plain = rewrite(shared_weight_mlp(), options=RewriteOptions(quantize="int4", speed_check=OFF))
    assert [node.op_type for node in plain.model.graph] == ["DequantizeLinear", "MatMul", "MatMul"]
    assert "does not fuse into its quantized kernels" in plain.notes[0]
    assert "--add-opset com.microsoft=1" in plain.notes[0]
    options = RewriteOptions(quantize="int4", speed_check=OFF, add_opsets={"com.microsoft": 1})
    runtime = rewrite(shared_weight_mlp(), options=options)
    assert [(n.domain, n.op_type) for n in runtime.model.graph] == [
        ("com.microsoft", "MatMulNBits")
    ] * 2
    assert "written as onnxruntime's own ops" in runtime.notes[0]
    rng = np.random.default_rng(0)
    feeds = {name: rng.standard_normal((3, 64)).astype(np.float32) for name in ("a", "b")}
    original = ort.InferenceSession(shared_weight_mlp().SerializeToString()).run(None, feeds)
    standard = ort.InferenceSession(plain.proto.SerializeToString()).run(None, feeds)
    nbits = ort.InferenceSession(runtime.proto.SerializeToString()).run(None, feeds)
    # The same 4-bit weights; MatMulNBits also rounds the activations to int8 (accuracy 4).
    for reference, first, second in zip(original, standard, nbits, strict=True):
        assert abs(_snr(reference, first) - _snr(reference, second)) < 3
        assert _snr(reference, second) > 15


def test_matmulnbits_accuracy_level_is_a_parameter_of_the_rules():
    # 0 keeps float activations: the numbers onnxruntime computes for the standard form when
    # its session option asks for accuracy level 0 instead of its default 4.
    options = RewriteOptions(
        quantize="int4",
        speed_check=OFF,
        add_opsets={"com.microsoft": 1},
        params={"accuracy_level": 0},
    )
    runtime = rewrite(shared_weight_mlp(), options=options)
    levels = [
        onnx.helper.get_attribute_value(a)
        for node in runtime.proto.graph.node
        for a in node.attribute
        if a.name == "accuracy_level"
    ]
    assert levels == [0, 0]
    plain = rewrite(shared_weight_mlp(), options=RewriteOptions(quantize="int4", speed_check=OFF))
    session_options = ort.SessionOptions()
    session_options.add_session_config_entry("session.qdq_matmulnbits_accuracy_level", "0")
    rng = np.random.default_rng(1)
    feeds = {name: rng.standard_normal((3, 64)).astype(np.float32) for name in ("a", "b")}
    standard = ort.InferenceSession(plain.proto.SerializeToString(), session_options)
    nbits = ort.InferenceSession(runtime.proto.SerializeToString())
    for first, second in zip(standard.run(None, feeds), nbits.run(None, feeds), strict=True):
        assert _snr(first, second) > 60


def test_int4_standard_form_is_fused_into_matmulnbits(tmp_path):
    model = shared_weight_mlp()
    del model.graph.node[1]
    del model.graph.output[1]
    del model.graph.input[1]
    result = rewrite(model, options=RewriteOptions(quantize="int4", speed_check=OFF))
    assert result.notes == ()
    assert _optimized_ops(result.model, tmp_path)["MatMulNBits"] == 1


@pytest.mark.parametrize("padded_rows", [(0,), (0, 1)])
def test_float16_keeps_a_finfo_min_mask_and_fully_masked_rows_finite(padded_rows):
    result = rewrite(
        masked_attention(), options=RewriteOptions(quantize="float16", speed_check=OFF)
    )
    ops = collections.Counter(node.op_type for node in result.model.graph)
    assert ops["Cast"] >= 2
    assert ops["MatMul"] == 3  # the MatMuls run in float16
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 5, 8)).astype(np.float32)
    mask = np.ones((2, 5), np.float32)
    mask[:, 3:] = 0
    for row in padded_rows:
        mask[row] = 0  # a fully padded sequence: every key of every query masked
    feeds = {"x": x, "mask": mask}
    expected = ort.InferenceSession(masked_attention().SerializeToString()).run(None, feeds)[0]
    actual = ort.InferenceSession(result.proto.SerializeToString()).run(None, feeds)[0]
    assert np.isfinite(expected).all()
    assert np.isfinite(actual).all()
    assert _snr(expected, actual) > 40


SLOW_RULE = """\
# A stand-in for a quantized form slower than float: the same Relu on a tiled copy.
rule relu_int8_slow approximate snr >= 30 {
  match {
    y = Relu (x)
  }
  where {
    rank(x) == 2
    shape(x)[1] == 32
    opset() >= 13
  }
  rewrite {
    tiled = Tile (x, cast([1, 4000], "int64"))
    rectified = Relu (tiled)
    y = Slice (rectified, cast([0], "int64"), cast([shape(x)[1]], "int64"), cast([1], "int64"))
  }
}
"""


SAME_COST_RULE = """\
# A stand-in for an approximate form exactly as fast as float: an Identity onnxruntime removes.
rule relu_behind_identity_int8 approximate snr >= 30 {
  match {
    x = Add (a, b)
    y = Relu (x)
  }
  where {
    rank(x) == 2
    opset() >= 13
  }
  rewrite {
    x = Add (a, b)
    same = Identity (x)
    y = Relu (same)
  }
}
"""


def _speed_checked(tmp_path: Path, rules_text: str, rounds: int) -> rewriter.api.RewriteResult:
    """The MLP of tests.budget_models rewritten by `rules_text` under a speed check."""
    from tests.budget_models import outlier_mlp

    rules = tmp_path / "rules.rw"
    rules.write_text(rules_text)
    model = tmp_path / "mlp.onnx"
    onnx.save(outlier_mlp(), model)
    check = SpeedCheck(rounds=rounds, samples=({"x": np.ones((4, 16), np.float32)},))
    return rewrite(model, [str(rules)], RewriteOptions(speed_check=check))


def test_a_group_as_fast_as_float_keeps_its_approximate_form(tmp_path):
    result = _speed_checked(tmp_path, SAME_COST_RULE, 7)
    assert result.speed is not None
    (group,) = result.speed.groups
    assert group.rule == "relu_behind_identity_int8"
    assert not group.kept_float, result.speed.summary()
    assert group.pairs >= 7
    assert group.bounds[0] <= 1 + result.speed.check.margin  # not shown slower
    assert [node.op_type for node in result.model.graph].count("Identity") == 3


def test_the_speed_check_puts_a_slower_layer_back_in_float(tmp_path):
    result = _speed_checked(tmp_path, SLOW_RULE, 3)
    assert [node.op_type for node in result.model.graph].count("Tile") == 0
    assert result.speed is not None
    (group,) = result.speed.groups
    assert group.kept_float
    assert group.rule == "relu_int8_slow"
    assert len(group.layers) == 3
    assert group.slower_by > 1.0
    assert "kept float: int8 slower by" in result.speed.summary()
    skips = [s for s in result.trace.skips if s.rule == "relu_int8_slow"]
    assert len(skips) == 3
    assert all(s.reason.startswith("kept float: int8 slower by") for s in skips)


def test_an_unknown_preset_is_a_value_error():
    with pytest.raises(ValueError, match="unknown quantization preset 'int3'"):
        RewriteOptions(quantize="int3")
    assert rewriter.RewriteOptions(quantize="int8").quantize == "int8"


@pytest.mark.parametrize(
    ("first_weight", "group", "x_shape"),
    [
        ((8, 1, 3), 1, (2, 1, 32)),  # a 1-D Conv over a signal (Silero VAD's STFT is one)
        ((8, 1, 3, 3), 8, (2, 8, 8, 8)),  # depthwise over 8 feature channels, not an image
    ],
)
def test_int8_quantizes_a_first_conv_that_is_no_image_convolution(first_weight, group, x_shape):
    model = two_convs(first_weight, group, x_shape)
    rng = np.random.default_rng(1)
    samples = tuple({"x": rng.standard_normal(x_shape).astype(np.float32)} for _ in range(3))
    result = rewrite(
        model,
        options=RewriteOptions(
            quantize="int8", calibration_samples=CalibrationSamples(samples), speed_check=OFF
        ),
    )
    assert _float_layers(result.proto) == []
    assert not any("first layer" in note for note in result.notes)
