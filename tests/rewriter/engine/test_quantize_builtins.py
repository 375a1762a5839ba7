"""The quantization built-ins compute what onnxruntime's QuantizeLinear computes."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import helper, numpy_helper

from rewriter.engine import BUILTINS, Calibration, EvalContext, ValueStatistics
from rewriter.engine._calibration import HISTOGRAM_BINS

CTX = EvalContext({}, {})


def call(name: str, *args: object, **kwargs: object) -> object:
    return BUILTINS[name].implementation(CTX, *args, **kwargs)


def ort_quantize(
    w: np.ndarray, scale: np.ndarray, dtype: int, axis: int | None, block: int
) -> np.ndarray:
    attributes = {} if axis is None else {"axis": axis}
    if block:
        attributes["block_size"] = block
    zero = helper.make_tensor("z", dtype, list(scale.shape), [0] * scale.size)
    nodes = [helper.make_node("QuantizeLinear", ["w", "s", "z"], ["q"], **attributes)]
    if dtype == onnx.TensorProto.INT4:  # numpy has no int4: read it back as int8
        nodes.append(helper.make_node("Cast", ["q"], ["wide"], to=onnx.TensorProto.INT8))
    out, out_type = ("wide", onnx.TensorProto.INT8) if len(nodes) == 2 else ("q", dtype)
    graph = helper.make_graph(
        nodes,
        "g",
        [],
        [helper.make_tensor_value_info(out, out_type, list(w.shape))],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(scale, "s"), zero],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, {})[0]


@pytest.mark.parametrize(
    ("dtype", "onnx_type", "axis", "block"),
    [
        ("int8", onnx.TensorProto.INT8, None, 0),
        ("int8", onnx.TensorProto.INT8, 1, 0),
        ("int8", onnx.TensorProto.INT8, 0, 0),
        ("int4", onnx.TensorProto.INT4, 0, 16),
        ("uint8", onnx.TensorProto.UINT8, 1, 0),
    ],
)
def test_quantize_matches_onnxruntime(
    dtype: str, onnx_type: int, axis: int | None, block: int
) -> None:
    w = np.random.default_rng(0).standard_normal((40, 24)).astype(np.float32)
    if dtype == "uint8":
        w = np.abs(w)
    scale = call("symmetric_scale", w, dtype, axis, block)
    ours = call("quantize", w, scale, dtype, None, axis, block)
    theirs = ort_quantize(w, scale, onnx_type, axis, block)
    assert ours.dtype.name == dtype
    np.testing.assert_array_equal(ours.astype(np.int64), theirs.astype(np.int64))


def test_symmetric_scale_shapes_and_full_range() -> None:
    w = np.arange(-32, 32, dtype=np.float32).reshape(64, 1) * np.ones((1, 3), np.float32)
    assert call("symmetric_scale", w, "int8").shape == ()
    assert call("symmetric_scale", w, "int8", 1).shape == (3,)
    blocked = call("symmetric_scale", w, "int4", 0, 32)
    assert blocked.shape == (2, 3)
    np.testing.assert_allclose(blocked[:, 0], [32 / 7, 31 / 7])
    full = call("symmetric_scale", w, "int4", 0, 32, True)
    np.testing.assert_allclose(full[:, 0], [-32 / -8, 31 / -8])
    levels = call("quantize", w, full, "int4", None, 0, 32).astype(np.int64)
    assert levels.min() == -8
    assert levels[0, 0] == -8
    assert levels[-1, 0] == -8


def test_range_scale_and_zero_point_cover_the_range_and_zero() -> None:
    scale = float(call("range_scale", [-1.0, 3.0], "uint8"))
    zero = call("range_zero_point", [-1.0, 3.0], "uint8")
    assert scale == pytest.approx(4.0 / 255)
    assert zero.dtype == np.uint8
    assert int(zero) == 64
    # A range of positives only is widened to hold 0 (zero point 0).
    assert int(call("range_zero_point", [2.0, 5.0], "uint8")) == 0


def _statistics(values: np.ndarray) -> ValueStatistics:
    bound = float(np.abs(values).max())
    counts, _ = np.histogram(values, bins=HISTOGRAM_BINS, range=(-bound, bound))
    return ValueStatistics(float(values.min()), float(values.max()), counts, bound)


def test_calibration_methods_clip_the_tails() -> None:
    values = np.random.default_rng(1).standard_normal(200_000)
    values[:3] = [40.0, -35.0, 38.0]  # outliers
    statistics = _statistics(values)
    assert statistics.range("minmax") == (-35.0, 40.0)
    low, high = statistics.range("percentile", 99.9)
    assert -4.0 < low < -2.5
    assert 2.5 < high < 4.0
    low, high = statistics.range("entropy")
    assert -40.0 < low < -2.0
    assert 2.0 < high < 40.0


def test_calibrated_range_reads_the_statistics_of_renamed_values() -> None:
    import ir

    statistics = _statistics(np.linspace(-2.0, 3.0, 1001))
    calibration = Calibration({"h": statistics}, 1, renamed_by=frozenset({"fuse_gelu"}))
    ctx = EvalContext({}, {}, calibration=calibration)
    renamed = ir.Value(name="h/fuse_gelu_2")
    created = ir.Value(name="h/fuse_gelu/inner")
    assert BUILTINS["calibrated_range"].implementation(ctx, renamed) == [-2.0, 3.0]
    assert BUILTINS["is_calibrated"].implementation(ctx, renamed) is True
    assert BUILTINS["is_calibrated"].implementation(ctx, created) is False
    assert BUILTINS["is_calibrated"].implementation(CTX, renamed) is False
