"""patterns/quantize: each rule set on small built models, judged against onnxruntime.

The rewritten model's outputs are compared with the original's (onnxruntime, same inputs) by
`measure` against the bound each rule declares; the rewritten model holds the ops the rule set
writes, in the default domain only, and onnxruntime's optimized model holds the fused kernels
the layout is meant for.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import helper, numpy_helper

import ir
import rewriter
from rewriter.api import RewriteOptions, load_rules, rewrite
from rewriter.engine import int8_sums_saturate
from rewriter.quantize import collect_calibration
from rewriter.verification import measure

QUANTIZE = rewriter.library_path() / "quantize"


def mlp(
    *, gemm: bool = False, hidden: int = 64, inner: int = 128, outliers: int = 2
) -> onnx.ModelProto:
    """Two linear layers with a Relu between; a few output channels of each weight are large."""
    rng = np.random.default_rng(0)
    nodes, inits, current = [], [], "x"
    for index, (k, n) in enumerate([(hidden, inner), (inner, hidden)]):
        w = (rng.standard_normal((k, n)) / np.sqrt(k)).astype(np.float32)
        w[:, rng.choice(n, outliers, replace=False)] *= 20
        b = (0.1 * rng.standard_normal(n)).astype(np.float32)
        inits += [numpy_helper.from_array(b, f"b{index}")]
        if gemm:  # Gemm stores W as [N, K] with transB = 1, as torch exports Linear
            inits.append(numpy_helper.from_array(np.ascontiguousarray(w.T), f"w{index}"))
            nodes.append(
                helper.make_node(
                    "Gemm", [current, f"w{index}", f"b{index}"], [f"g{index}"], transB=1
                )
            )
            current = f"g{index}"
        else:
            inits.append(numpy_helper.from_array(w, f"w{index}"))
            nodes.append(helper.make_node("MatMul", [current, f"w{index}"], [f"m{index}"]))
            nodes.append(helper.make_node("Add", [f"m{index}", f"b{index}"], [f"a{index}"]))
            current = f"a{index}"
        if index == 0:
            nodes.append(helper.make_node("Relu", [current], ["h"]))
            current = "h"
    nodes.append(helper.make_node("Identity", [current], ["y"]))
    shape = ["batch", hidden] if gemm else ["batch", "seq", hidden]
    graph = helper.make_graph(
        nodes,
        "mlp",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, shape)],
        inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])


def cnn() -> onnx.ModelProto:
    rng = np.random.default_rng(1)
    w1 = (0.3 * rng.standard_normal((8, 3, 3, 3))).astype(np.float32)
    b1 = (0.1 * rng.standard_normal(8)).astype(np.float32)
    w2 = (0.2 * rng.standard_normal((4, 8, 3, 3))).astype(np.float32)
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("Conv", ["r1", "w2"], ["y"], pads=[1, 1, 1, 1]),
    ]
    graph = helper.make_graph(
        nodes,
        "cnn",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["batch", 3, 8, 8])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, ["batch", 4, 8, 8])],
        [numpy_helper.from_array(a, n) for a, n in ((w1, "w1"), (b1, "b1"), (w2, "w2"))],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])


def inputs(model: onnx.ModelProto, seed: int, batch: int = 4) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    feeds = {}
    for value in model.graph.input:
        dims = [
            d.dim_value or (batch if i == 0 else 8)
            for i, d in enumerate(value.type.tensor_type.shape.dim)
        ]
        feeds[value.name] = rng.standard_normal(dims).astype(np.float32)
    return feeds


def session(model: onnx.ModelProto, level: ort.GraphOptimizationLevel, path: Path | None = None):
    options = ort.SessionOptions()
    options.graph_optimization_level = level
    options.log_severity_level = 3
    if path is not None:
        options.optimized_model_filepath = str(path)
    return ort.InferenceSession(
        model.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )


def outputs(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    return session(model, ort.GraphOptimizationLevel.ORT_DISABLE_ALL).run(None, feeds)


def optimized_ops(model: onnx.ModelProto, tmp_path: Path) -> list[str]:
    """The op types of onnxruntime's ORT_ENABLE_ALL optimization of `model`."""
    target = tmp_path / "optimized.onnx"
    session(model, ort.GraphOptimizationLevel.ORT_ENABLE_ALL, target)
    return [node.op_type for node in onnx.load(str(target)).graph.node]


def quantized(
    model: onnx.ModelProto,
    *files: str,
    calibration: object = None,
    params: dict[str, object] | None = None,
) -> tuple[onnx.ModelProto, rewriter.api.RewriteResult]:
    ruleset = load_rules(*(QUANTIZE / name for name in files), params=params)  # type: ignore[arg-type]
    result = rewrite(model, ruleset, RewriteOptions(calibration=calibration))  # type: ignore[arg-type]
    return result.proto, result


def bound_of(files: tuple[str, ...], rule: str) -> float:
    approximation = load_rules(*(QUANTIZE / name for name in files)).rule(rule).approximate
    assert approximation is not None
    assert approximation.metric == "snr"
    return approximation.bound


def domains(model: onnx.ModelProto) -> set[str]:
    return {node.domain for node in model.graph.node}


def ops(model: onnx.ModelProto) -> list[str]:
    return [node.op_type for node in model.graph.node]


# -- int8 dynamic -----------------------------------------------------------------------------


@pytest.mark.parametrize("gemm", [False, True], ids=["matmul", "gemm"])
def test_int8_dynamic_meets_its_bound_and_fuses_in_onnxruntime(gemm: bool, tmp_path: Path) -> None:
    original = mlp(gemm=gemm)
    rewritten, result = quantized(original, "int8_dynamic.rw")
    rule = "quantize_gemm_bias_int8_dynamic" if gemm else "quantize_matmul_int8_dynamic"
    assert [e.rule for e in result.trace.entries if e.kind == "rule"].count(rule) == 2
    assert ops(rewritten).count("DynamicQuantizeLinear") == 2
    assert ops(rewritten).count("MatMulInteger") == 2
    assert domains(rewritten) == {""}
    feeds = inputs(original, seed=3)
    snr = measure("snr", outputs(original, feeds), outputs(rewritten, feeds))
    # Two quantized layers, each held to the rule's bound: their errors add, and two noises
    # of the bound's power are 3 dB below it (with 7-bit weights, where onnxruntime's sums
    # saturate, the MLP measured 28.7 dB against a bound of 30).
    assert snr >= bound_of(("int8_dynamic.rw",), rule) - 3.0
    fused = optimized_ops(rewritten, tmp_path)
    assert "MatMulInteger" not in fused
    assert fused.count("DynamicQuantizeMatMul") + fused.count("MatMulIntegerToFloat") == 2


def test_int8_dynamic_weights_are_int8_per_output_channel() -> None:
    original = mlp()
    rewritten, _ = quantized(original, "int8_dynamic.rw")
    initializers = {i.name: numpy_helper.to_array(i) for i in rewritten.graph.initializer}
    weights = {
        i.name: numpy_helper.to_array(i) for i in original.graph.initializer if i.name[0] == "w"
    }
    scale_of = {}  # DynamicQuantizeLinear's x_scale -> the weight scales it is multiplied by
    for node in rewritten.graph.node:
        if node.op_type == "Mul" and node.input[1] in initializers:
            scale_of[node.input[0]] = initializers[node.input[1]]
    products = [n for n in rewritten.graph.node if n.op_type == "MatMulInteger"]
    assert len(products) == 2
    for node, weight in zip(products, weights.values(), strict=True):
        levels = initializers[node.input[1]]
        assert levels.dtype == np.int8
        assert levels.shape == weight.shape
        quantize = next(n for n in rewritten.graph.node if n.output[0] == node.input[0])
        scales = scale_of[quantize.output[1]]
        assert scales.shape == (weight.shape[1],)
        # 7 bits where onnxruntime's uint8 x int8 sums saturate (patterns/quantize/int8_weights.rw).
        largest = 64 if int8_sums_saturate() else 127
        np.testing.assert_allclose(scales, np.abs(weight).max(axis=0) / largest, rtol=1e-6)
        # Each weight is its level times its column's scale, to half a step.
        assert np.all(np.abs(levels * scales - weight) <= scales / 2 * (1 + 1e-5))


def test_per_channel_scales_beat_per_tensor_scales_on_outlier_channels() -> None:
    original = mlp(outliers=3)
    feeds = inputs(original, seed=5)
    reference = outputs(original, feeds)
    per_channel, _ = quantized(original, "int8_dynamic.rw")
    per_tensor, _ = quantized(original, "int8_dynamic.rw", params={"per_channel": False})
    channel_snr = measure("snr", reference, outputs(per_channel, feeds))
    tensor_snr = measure("snr", reference, outputs(per_tensor, feeds))
    assert channel_snr >= tensor_snr + 3.0


def test_int8_dynamic_conv_meets_its_bound() -> None:
    original = cnn()
    rewritten, _ = quantized(original, "int8_dynamic.rw")
    assert ops(rewritten).count("ConvInteger") == 2
    assert domains(rewritten) == {""}
    feeds = inputs(original, seed=2)
    snr = measure("snr", outputs(original, feeds), outputs(rewritten, feeds))
    assert snr >= bound_of(("int8_dynamic.rw",), "quantize_conv_int8_dynamic")


# -- float16 ----------------------------------------------------------------------------------


def test_float16_halves_the_weights_and_keeps_float32_inputs_and_outputs() -> None:
    original = mlp()
    rewritten, _ = quantized(original, "float16.rw")
    io_types = [
        v.type.tensor_type.elem_type for v in (*rewritten.graph.input, *rewritten.graph.output)
    ]
    assert io_types == [onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT]
    big = [i for i in rewritten.graph.initializer if np.prod(i.dims) >= 64 * 64]
    assert big
    assert all(i.data_type == onnx.TensorProto.FLOAT16 for i in big)
    # Casts only at the boundary: the layers between them run in float16.
    assert ops(rewritten).count("Cast") == 2
    # The weights take half the bytes (the file also holds the saturating Clips' nodes).
    weights = sum(i.ByteSize() for i in rewritten.graph.initializer)
    assert weights <= 0.51 * sum(i.ByteSize() for i in original.graph.initializer)
    feeds = inputs(original, seed=4)
    snr = measure("snr", outputs(original, feeds), outputs(rewritten, feeds))
    assert snr >= bound_of(("float16.rw",), "float16_binary")


def test_float16_keeps_softmax_in_float32_unless_the_sensitive_set_is_named() -> None:
    graph = helper.make_graph(
        [
            helper.make_node("MatMul", ["x", "w"], ["m"]),
            helper.make_node("Softmax", ["m"], ["y"], axis=-1),
        ],
        "g",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2, 16])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [2, 16])],
        [numpy_helper.from_array(np.eye(16, dtype=np.float32), "w")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    rewritten, result = quantized(model, "float16.rw")
    assert "float16_sensitive_bounded" not in {e.rule for e in result.trace.entries}
    softmax = next(n for n in rewritten.graph.node if n.op_type == "Softmax")
    typed = ir.from_onnx(rewritten)
    ir.infer_types(typed)
    assert (
        rewriter.engine.dtype_of(next(n for n in typed.graph if n.op_type == "Softmax").inputs[0])
        == ir.DataType.FLOAT
    )
    assert softmax is not None
    _, both = quantized(model, "float16.rw", "float16_sensitive.rw")
    assert "float16_sensitive_bounded" in {e.rule for e in both.trace.entries}


# -- int4 weight-only -------------------------------------------------------------------------


def test_int4_blockwise_weights_fuse_into_matmul_nbits(tmp_path: Path) -> None:
    original = mlp()
    rewritten, _ = quantized(original, "int4_weight_only.rw")
    dequantize = [n for n in rewritten.graph.node if n.op_type == "DequantizeLinear"]
    assert len(dequantize) == 2
    for node in dequantize:
        attributes = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        assert attributes == {"axis": 0, "block_size": 32}
    levels = {i.name: i for i in rewritten.graph.initializer}
    assert all(levels[n.input[0]].data_type == onnx.TensorProto.INT4 for n in dequantize)
    assert domains(rewritten) == {""}
    assert len(rewritten.SerializeToString()) <= 0.3 * len(original.SerializeToString())
    feeds = inputs(original, seed=6)
    snr = measure("snr", outputs(original, feeds), outputs(rewritten, feeds))
    assert snr >= bound_of(("int4_weight_only.rw",), "quantize_matmul_int4_weight_only")
    assert optimized_ops(rewritten, tmp_path).count("MatMulNBits") == 2


def test_awq_fires_with_calibration_and_does_better_than_round_to_nearest() -> None:
    original = mlp()
    # Activations with a few large input channels, as trained models have.
    rng = np.random.default_rng(9)
    scale = np.ones(64, dtype=np.float32)
    scale[:4] = 30.0
    calibration_x = (rng.standard_normal((16, 8, 64)) * scale).astype(np.float32)
    test_x = (rng.standard_normal((4, 8, 64)) * scale).astype(np.float32)
    calibration = collect_calibration(original, [{"x": calibration_x}])
    awq, result = quantized(original, "int4_weight_only.rw", calibration=calibration)
    assert {e.rule for e in result.trace.entries if e.kind == "rule"} == {
        "quantize_matmul_int4_awq"
    }
    rtn, _ = quantized(original, "int4_weight_only.rw")
    reference = outputs(original, {"x": test_x})
    awq_snr = measure("snr", reference, outputs(awq, {"x": test_x}))
    rtn_snr = measure("snr", reference, outputs(rtn, {"x": test_x}))
    assert awq_snr > rtn_snr
    assert awq_snr >= bound_of(("int4_weight_only.rw",), "quantize_matmul_int4_awq")


# -- int8 static ------------------------------------------------------------------------------


def test_int8_static_needs_calibration() -> None:
    _, result = quantized(mlp(), "int8_static.rw")
    assert not [e for e in result.trace.entries if e.kind == "rule"]


@pytest.mark.parametrize("method", ["minmax", "percentile", "entropy"])
def test_int8_static_qdq_from_calibration_meets_its_bound(method: str, tmp_path: Path) -> None:
    original = mlp(outliers=0)
    samples = [{"x": np.random.default_rng(11).standard_normal((16, 8, 64)).astype(np.float32)}]
    calibration = collect_calibration(original, samples, method=method)
    rewritten, _ = quantized(original, "int8_static.rw", calibration=calibration)
    assert ops(rewritten).count("QuantizeLinear") == 2
    assert ops(rewritten).count("DequantizeLinear") == 4
    assert domains(rewritten) == {""}
    feeds = inputs(original, seed=12)
    snr = measure("snr", outputs(original, feeds), outputs(rewritten, feeds))
    assert snr >= bound_of(("int8_static.rw",), "quantize_matmul_int8_static")
    assert optimized_ops(rewritten, tmp_path).count("MatMulIntegerToFloat") == 2


def test_int8_static_conv_fuses_into_qlinear_conv(tmp_path: Path) -> None:
    original = cnn()
    samples = [{"x": np.random.default_rng(13).standard_normal((16, 3, 8, 8)).astype(np.float32)}]
    rewritten, _ = quantized(
        original, "int8_static.rw", calibration=collect_calibration(original, samples)
    )
    feeds = inputs(original, seed=14)
    snr = measure("snr", outputs(original, feeds), outputs(rewritten, feeds))
    assert snr >= bound_of(("int8_static.rw",), "quantize_conv_int8_static")
    assert optimized_ops(rewritten, tmp_path).count("QLinearConv") == 2


def test_int8_dynamic_stores_an_embedding_table_in_int8_per_row() -> None:
    rng = np.random.default_rng(3)
    table = (0.05 * rng.standard_normal((1000, 64))).astype(np.float32)
    table[7] *= 30  # one outlier row keeps its own scale
    graph = helper.make_graph(
        [helper.make_node("Gather", ["table", "ids"], ["y"], axis=0)],
        "embedding",
        [helper.make_tensor_value_info("ids", onnx.TensorProto.INT64, ["batch", "seq"])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, ["batch", "seq", 64])],
        [numpy_helper.from_array(table, "table")],
    )
    original = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    rewritten, _ = quantized(original, "int8_dynamic.rw")
    stored = {i.data_type for i in rewritten.graph.initializer if tuple(i.dims) == (1000, 64)}
    assert stored == {onnx.TensorProto.INT8}
    assert len(rewritten.SerializeToString()) <= 0.3 * len(original.SerializeToString())
    feeds = {"ids": rng.integers(0, 1000, (4, 16)).astype(np.int64)}
    feeds["ids"][0, 0] = 7
    snr = measure("snr", outputs(original, feeds), outputs(rewritten, feeds))
    assert snr >= bound_of(("int8_dynamic.rw",), "quantize_gather_int8_dynamic")


def test_int8_static_conv_relu_chains_fuse_without_requantizing(tmp_path: Path) -> None:
    original = cnn()
    samples = [{"x": np.random.default_rng(15).standard_normal((16, 3, 8, 8)).astype(np.float32)}]
    calibration = collect_calibration(original, samples)
    rewritten, result = quantized(original, "int8_static.rw", calibration=calibration)
    rules = [e.rule for e in result.trace.entries if e.kind == "rule"]
    assert rules == ["quantize_conv_relu_int8_static", "quantize_conv_int8_static"]
    # The Relu's output is requantized with its own range by the next Conv: the pair cancels.
    fused = optimized_ops(rewritten, tmp_path)
    assert fused.count("QLinearConv") == 2
    assert "Relu" not in fused
