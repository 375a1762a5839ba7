"""`ir.NodeTypeInference`: onnx's per-node inference, asked once per kind of node."""

from __future__ import annotations

import numpy as np
import onnx.shape_inference
import pytest

import ir

OPSETS = {"": 18}


def _typed(name: str, dtype: ir.DataType, shape: tuple[int | str, ...]) -> ir.Value:
    return ir.Value(name, type=ir.TensorType(dtype, shape))


def _constant(name: str, array: np.ndarray) -> ir.Value:
    return ir.Value(name, const_value=ir.NumpyTensor(array, name))


def _gemm(index: int, bias: np.ndarray) -> ir.Node:
    a = _typed(f"a{index}", ir.DataType.FLOAT, (4, 8))
    b = _constant(f"b{index}", np.ones((8, 3), np.float32))
    c = _constant(f"c{index}", bias)
    return ir.Node("Gemm", [a, b, c], outputs=[ir.Value(f"y{index}")])


def _reshape(index: int, shape: list[int]) -> ir.Node:
    data = _typed(f"x{index}", ir.DataType.FLOAT, (2, 6))
    target = _constant(f"s{index}", np.array(shape, np.int64))
    return ir.Node("Reshape", [data, target], outputs=[ir.Value(f"r{index}")])


@pytest.fixture
def onnx_calls(monkeypatch):
    """How many times onnx's per-node inference is called."""
    calls = []
    infer = onnx.shape_inference.infer_node_outputs

    def counting(*args, **kwargs):
        calls.append(args[1].op_type)
        return infer(*args, **kwargs)

    monkeypatch.setattr(onnx.shape_inference, "infer_node_outputs", counting)
    return calls


def test_answers_are_those_of_infer_node_types():
    inference = ir.NodeTypeInference()
    nodes = [_gemm(0, np.zeros(3, np.float32)), _reshape(0, [3, 4]), _reshape(1, [4, -1])]
    for node in nodes:
        assert inference(node, OPSETS) == ir.infer_node_types(node, OPSETS)
    assert inference(nodes[1], OPSETS) == [ir.TensorType(ir.DataType.FLOAT, (3, 4))]
    assert inference(nodes[2], OPSETS) == [ir.TensorType(ir.DataType.FLOAT, (4, 3))]


def test_an_op_only_onnxruntime_defines_is_typed_from_its_table():
    # LayerNormalization before opset 17: onnxruntime's own op in the default domain, no
    # onnx schema; the remembering inference answers as the one-off one does.
    x = _typed("x", ir.DataType.FLOAT, ("N", 4, 8))
    scale = _constant("s", np.ones(8, np.float32))
    outputs = [ir.Value(name) for name in ("y", "m", "v")]
    node = ir.Node("LayerNormalization", [x, scale], outputs=outputs)
    expected = ir.infer_node_types(node, {"": 16})
    assert expected is not None
    assert expected[0] == ir.TensorType(ir.DataType.FLOAT, ("N", 4, 8))
    assert ir.NodeTypeInference()(node, {"": 16}) == expected


def test_nodes_differing_in_a_bias_value_are_inferred_once(onnx_calls):
    inference = ir.NodeTypeInference()
    first = inference(_gemm(0, np.zeros(3, np.float32)), OPSETS)
    second = inference(_gemm(1, np.arange(3, dtype=np.float32)), OPSETS)
    assert first == second == [ir.TensorType(ir.DataType.FLOAT, (4, 3))]
    assert onnx_calls == ["Gemm"]


def test_a_shape_input_with_other_values_is_inferred_again(onnx_calls):
    inference = ir.NodeTypeInference()
    assert inference(_reshape(0, [3, 4]), OPSETS) == [ir.TensorType(ir.DataType.FLOAT, (3, 4))]
    assert inference(_reshape(1, [3, 4]), OPSETS) == [ir.TensorType(ir.DataType.FLOAT, (3, 4))]
    assert inference(_reshape(2, [12]), OPSETS) == [ir.TensorType(ir.DataType.FLOAT, (12,))]
    assert onnx_calls == ["Reshape", "Reshape"]


def test_other_attributes_are_inferred_again(onnx_calls):
    inference = ir.NodeTypeInference()
    node = _gemm(0, np.zeros(3, np.float32))
    assert inference(node, OPSETS) == [ir.TensorType(ir.DataType.FLOAT, (4, 3))]
    scaled = _gemm(1, np.zeros(3, np.float32))
    scaled.set_attribute(ir.attr_float("alpha", 2.0))
    assert inference(scaled, OPSETS) == [ir.TensorType(ir.DataType.FLOAT, (4, 3))]
    assert onnx_calls == ["Gemm", "Gemm"]


def test_a_rejection_is_raised_every_time():
    inference = ir.NodeTypeInference()
    bad = ir.Node(
        "Add",
        [_typed("p", ir.DataType.FLOAT, (2,)), _typed("q", ir.DataType.INT64, (2,))],
        outputs=[ir.Value("z")],
    )
    for _ in range(2):
        with pytest.raises(ir.NodeInferenceError):
            inference(bad, OPSETS)
