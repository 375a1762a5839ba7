"""How activation ranges come from calibration samples: the int8 preset's percentile default."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from rewriter.api import CalibrationSamples, RewriteOptions, SpeedCheck, library_path, rewrite
from rewriter.cli import main
from rewriter.quantize import calibration_method, collect_calibration
from tests.quantize_models import two_convs

OFF = SpeedCheck(enabled=False)
SHAPE = (2, 16, 8, 8)
OUTLIER = 40.0


def _conv_relu_conv() -> onnx.ModelProto:
    """x [2, 16, 8, 8] -> 1x1 Conv -> Relu -> 1x1 Conv (16 input channels: no image Conv)."""
    return two_convs((16, 16, 1, 1), 1, SHAPE, divisor=4.0)


def _samples_with_one_outlier() -> tuple[dict[str, np.ndarray], ...]:
    """8 samples of unit normals (16,384 elements), one element OUTLIER: a tail of 1 in 10^4."""
    rng = np.random.default_rng(1)
    samples = [rng.standard_normal(SHAPE).astype(np.float32) for _ in range(8)]
    samples[3][1, 5, 2, 7] = OUTLIER
    return tuple({"x": sample} for sample in samples)


def _input_range(model: onnx.ModelProto) -> tuple[float, float]:
    """(lowest, highest) level of the QuantizeLinear that reads the graph input x."""
    initializers = {i.name: onnx.numpy_helper.to_array(i) for i in model.graph.initializer}
    found = [
        node
        for node in model.graph.node
        if node.op_type == "QuantizeLinear" and node.input[0] == "x"
    ]
    assert len(found) == 1
    scale = float(initializers[found[0].input[1]])
    zero_point = int(initializers[found[0].input[2]])
    return -zero_point * scale, (255 - zero_point) * scale


def _preset(samples: CalibrationSamples) -> onnx.ModelProto:
    return rewrite(
        _conv_relu_conv(),
        options=RewriteOptions(quantize="int8", calibration_samples=samples, speed_check=OFF),
    ).proto


def _snr_on_fresh_inputs(model: onnx.ModelProto) -> float:
    """SNR of the written model's own arithmetic (its Q/DQ pairs unfused) against float.

    Unfused, so that what is compared is the ranges, not the CPU: onnxruntime's fused u8s8
    QLinearConv on an x86 CPU without VNNI sums pairs of products in 16 bits, which saturate
    on this model's random weights (22.2 dB fused against 28.8 dB unfused with 8-bit weights
    on an AMD EPYC with AVX2 only), and the rules then take 7-bit weights there
    (`patterns/quantize/int8_weights.rw`), not on a CPU with VNNI.
    """
    x = np.random.default_rng(2).standard_normal(SHAPE).astype(np.float32)
    reference = ort.InferenceSession(_conv_relu_conv().SerializeToString()).run(None, {"x": x})[0]
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    actual = ort.InferenceSession(model.SerializeToString(), options).run(None, {"x": x})[0]
    return float(10 * np.log10(np.sum(reference**2) / np.sum((reference - actual) ** 2)))


def test_the_int8_preset_ranges_activations_at_the_9999th_percentile_by_default():
    samples = _samples_with_one_outlier()
    low, high = _input_range(_preset(CalibrationSamples(samples)))
    statistics = collect_calibration(_conv_relu_conv(), samples).values["x"]
    expected_low, expected_high = statistics.range("percentile", 99.99)
    step = (high - low) / 255
    assert expected_high < 6.0  # the outlier is outside the percentile's range
    assert abs(high - expected_high) <= step
    assert abs(low - expected_low) <= step
    minmax = _preset(CalibrationSamples(samples, method="minmax"))
    assert _input_range(minmax)[1] >= OUTLIER - step
    # The finer steps pay on inputs without the outlier (onnxruntime runs both): 28.8 dB
    # against 23.8 dB.
    assert _snr_on_fresh_inputs(_preset(CalibrationSamples(samples))) > (
        _snr_on_fresh_inputs(minmax) + 4.0
    )


def test_a_named_method_or_percentile_overrides_the_preset_default():
    samples = _samples_with_one_outlier()
    statistics = collect_calibration(_conv_relu_conv(), samples).values["x"]
    low, high = _input_range(_preset(CalibrationSamples(samples, percentile=99.0)))
    expected_low, expected_high = statistics.range("percentile", 99.0)
    step = (high - low) / 255
    assert abs(high - expected_high) <= step
    assert abs(low - expected_low) <= step


def test_the_rules_route_keeps_minmax_ranges_by_default():
    samples = _samples_with_one_outlier()
    result = rewrite(
        _conv_relu_conv(),
        [library_path(), library_path() / "quantize" / "int8_static.rw"],
        options=RewriteOptions(calibration_samples=CalibrationSamples(samples)),
    )
    low, high = _input_range(result.proto)
    assert high >= OUTLIER - (high - low) / 255


@pytest.mark.parametrize(
    ("method", "percentile", "quantize", "expected"),
    [
        (None, None, "int8", ("percentile", 99.99)),
        (None, 99.9, "int8", ("percentile", 99.9)),
        ("minmax", None, "int8", ("minmax", 99.999)),
        ("percentile", None, "int8", ("percentile", 99.999)),
        (None, None, None, ("minmax", 99.999)),
        (None, None, "int4", ("minmax", 99.999)),
        ("entropy", None, None, ("entropy", 99.999)),
    ],
)
def test_calibration_method_resolves_the_callers_choice_then_the_presets(
    method, percentile, quantize, expected
):
    assert calibration_method(method, percentile, quantize) == expected
    samples = CalibrationSamples(({"x": np.zeros(SHAPE, np.float32)},), method, percentile)
    assert samples.resolved(quantize) == expected


@pytest.mark.parametrize(
    ("extra", "percentile_range"), [((), True), (("--calibration-method", "minmax"), False)]
)
def test_the_command_line_takes_the_presets_default_unless_a_method_is_named(
    tmp_path, extra, percentile_range
):
    model = tmp_path / "model.onnx"
    onnx.save(_conv_relu_conv(), model)
    samples = _samples_with_one_outlier()
    np.savez(tmp_path / "samples.npz", x=np.stack([sample["x"] for sample in samples]))
    out = tmp_path / "out.onnx"
    calibration = str(tmp_path / "samples.npz")
    arguments = [str(model), "--quantize", "int8", "--calibration", calibration, *extra]
    code = main([*arguments, "--no-speed-check", "-o", str(out)])
    assert code == 0
    low, high = _input_range(onnx.load(out))
    if percentile_range:
        expected = collect_calibration(_conv_relu_conv(), samples).values["x"]
        assert abs(high - expected.range("percentile", 99.99)[1]) <= (high - low) / 255
    else:
        assert high >= OUTLIER - (high - low) / 255
