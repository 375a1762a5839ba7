"""int8 weights in 7 bits where onnxruntime's uint8 x int8 kernels saturate 8-bit ones."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

from rewriter.api import CalibrationSamples, RewriteOptions, SpeedCheck, library_path, rewrite
from rewriter.cli import main
from rewriter.quantize import integer_kernels_saturate
from tests.quantize_models import cnn_bn

OFF = SpeedCheck(enabled=False)


def _samples(count: int, shape: tuple[int, ...], seed: int) -> tuple[dict[str, np.ndarray], ...]:
    rng = np.random.default_rng(seed)
    return tuple({"x": rng.standard_normal(shape).astype(np.float32)} for _ in range(count))


def _options(**params: bool) -> RewriteOptions:
    calibration = CalibrationSamples(_samples(4, (2, 3, 16, 16), 1), first_layers_float=False)
    return RewriteOptions(
        quantize="int8", calibration_samples=calibration, speed_check=OFF, params=params
    )


def _weights(model: onnx.ModelProto) -> list[np.ndarray]:
    """The int8 initializers (the quantized Convs' and Gemm's weights)."""
    return [
        numpy_helper.to_array(t) for t in model.graph.initializer if t.data_type == TensorProto.INT8
    ]


def _run(model: onnx.ModelProto, x: np.ndarray, optimized: bool = True) -> np.ndarray:
    options = ort.SessionOptions()
    if not optimized:
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(model.SerializeToString(), options).run(None, {"x": x})[0]


def _snr(reference: np.ndarray, actual: np.ndarray) -> float:
    return float(10 * np.log10(np.sum(reference**2) / np.sum((reference - actual) ** 2)))


def test_the_probe_agrees_with_exact_sums_of_a_saturating_product():
    # Large activations by large weights, as the probe has, but random: a kernel that adds
    # two products in 16 bits loses some of these sums, an exact one none.
    rng = np.random.default_rng(0)
    a = rng.integers(200, 256, size=(8, 48), dtype=np.uint8)
    b = rng.integers(100, 128, size=(48, 12), dtype=np.int8)
    graph = helper.make_graph(
        [helper.make_node("MatMulInteger", ["a", "b"], ["y"])],
        "product",
        [helper.make_tensor_value_info("a", TensorProto.UINT8, [8, 48])],
        [helper.make_tensor_value_info("y", TensorProto.INT32, [8, 12])],
        [numpy_helper.from_array(b, "b")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    sums = ort.InferenceSession(model.SerializeToString()).run(None, {"a": a})[0]
    exact = a.astype(np.int64) @ b.astype(np.int64)
    assert integer_kernels_saturate() == bool(np.any(sums != exact))


def test_reduce_range_stores_7_bit_weights_that_onnxruntime_computes_as_written():
    result = rewrite(cnn_bn(), options=_options(reduce_range=True))
    weights = _weights(result.proto)
    assert len(weights) == 3  # two Convs (static), the Gemm head (dynamic)
    assert all(np.abs(w).max() == 64 for w in weights)
    # On every CPU, with or without VNNI, the fused kernels give the written arithmetic.
    x = _samples(1, (2, 3, 16, 16), 2)[0]["x"]
    fused, written = _run(result.proto, x), _run(result.proto, x, optimized=False)
    assert _snr(written, fused) > 40
    assert _snr(_run(cnn_bn(), x), fused) > 25
    assert not any("reduce_range" in note for note in result.notes)


def test_reduce_range_false_keeps_8_bit_weights_without_a_check():
    result = rewrite(cnn_bn(), options=_options(reduce_range=False))
    assert all(np.abs(w).max() == 127 for w in _weights(result.proto))
    assert not any("bits" in note for note in result.notes)


def test_the_preset_takes_the_weights_that_run_closer_to_float_on_this_machine():
    result = rewrite(cnn_bn(), options=_options())
    x = _samples(1, (2, 3, 16, 16), 2)[0]["x"]
    assert _snr(_run(cnn_bn(), x), _run(result.proto, x)) > 25
    notes = [note for note in result.notes if "bits" in note]
    if not integer_kernels_saturate():
        assert notes == []  # nothing saturates: 8-bit weights, no second build
        assert all(np.abs(w).max() == 127 for w in _weights(result.proto))
        return
    (note,) = notes
    assert "saturate on this machine" in note
    assert "dB against float with 8-bit weights" in note
    widths = {int(np.abs(w).max()) for w in _weights(result.proto)}
    if note.startswith("weights in 7 bits"):
        assert widths == {64}
    else:
        assert note.startswith("weights kept in 8 bits")
        assert widths == {127}
    # Whichever it kept runs at least as close to float as the other on the samples.
    other = rewrite(
        cnn_bn(), options=_options(reduce_range=note.startswith("weights kept in 8 bits"))
    )
    samples = _options().calibration_samples
    assert samples is not None
    inputs = np.concatenate([sample["x"] for sample in samples.samples])
    reference = _run(cnn_bn(), inputs)
    assert _snr(reference, _run(result.proto, inputs)) >= _snr(reference, _run(other.proto, inputs))


def test_the_rules_route_takes_reduce_range_from_the_command_line(tmp_path):
    model = tmp_path / "cnn.onnx"
    onnx.save(cnn_bn(), model)
    out = tmp_path / "out.onnx"
    rules = library_path() / "quantize" / "int8_dynamic.rw"
    code = main(
        [
            "--rules",
            str(library_path()),
            "--rules",
            str(rules),
            "--param",
            "reduce_range=true",
            str(model),
            "-o",
            str(out),
        ]
    )
    assert code == 0
    weights = _weights(onnx.load(out))
    assert weights
    assert all(np.abs(w).max() == 64 for w in weights)
