"""`eliminate_common_subexpressions`: equal initializers merged, then equal nodes."""

from __future__ import annotations

import numpy as np
import onnx
import onnx.helper
import onnx.numpy_helper
import onnx.parser

import ir
from rewriter.engine._passes import NoOptions, eliminate_common_subexpressions
from tests.helpers import random_feeds, session


def _two_adds(first: np.ndarray, second: np.ndarray) -> onnx.ModelProto:
    """y1 = x + a, y2 = x + b, y = y1 * y2."""
    graph = onnx.helper.make_graph(
        [
            onnx.helper.make_node("Add", ["x", "a"], ["y1"], name="add_a"),
            onnx.helper.make_node("Add", ["x", "b"], ["y2"], name="add_b"),
            onnx.helper.make_node("Mul", ["y1", "y2"], ["y"], name="mul"),
        ],
        "g",
        [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2, first.size])],
        [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [2, first.size])],
        [onnx.numpy_helper.from_array(first, "a"), onnx.numpy_helper.from_array(second, "b")],
    )
    return onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 17)])


def _run_pass(proto: onnx.ModelProto) -> tuple[ir.Model, int]:
    model = ir.from_onnx(proto)
    result = eliminate_common_subexpressions(model, NoOptions())
    ir.verify(model)
    return model, result.count


def test_equal_initializers_merge_and_then_the_adds_reading_them():
    weights = np.linspace(-1, 1, 100, dtype=np.float32)
    proto = _two_adds(weights, weights.copy())
    model, merged = _run_pass(proto)
    assert merged == 2  # the initializer, then the duplicate Add
    assert list(model.graph.initializers) == ["a"]
    assert [n.op_type for n in model.graph] == ["Add", "Mul"]
    feeds = random_feeds(proto)
    expected = session(proto).run(None, feeds)
    actual = session(ir.to_onnx(model)).run(None, feeds)
    np.testing.assert_array_equal(expected[0], actual[0])


def test_initializers_equal_only_at_their_ends_stay_apart():
    # The same dtype, shape and first and last elements: told apart by their full contents.
    first = np.linspace(-1, 1, 100, dtype=np.float32)
    second = first.copy()
    second[50] += 1.0
    model, merged = _run_pass(_two_adds(first, second))
    assert merged == 0
    assert list(model.graph.initializers) == ["a", "b"]
    assert [n.op_type for n in model.graph] == ["Add", "Add", "Mul"]


def test_three_equal_initializers_merge_into_the_first():
    weights = np.arange(40, dtype=np.float32)
    proto = _two_adds(weights, weights.copy())
    third = onnx.numpy_helper.from_array(weights.copy(), "c")
    proto.graph.initializer.append(third)
    proto.graph.node.insert(2, onnx.helper.make_node("Add", ["x", "c"], ["y3"], name="add_c"))
    proto.graph.node[-1].input[1] = "y3"
    model, _ = _run_pass(proto)
    assert list(model.graph.initializers) == ["a"]


def _dims_model(second_batch: str) -> onnx.ModelProto:
    """Shape(a)[0] and Shape(b)[0] as the first dim of two Reshape shapes."""
    return onnx.parser.parse_model(
        f"""<ir_version: 8, opset_import: ["" : 17]>
        g (float[batch, 4] a, float[{second_batch}, 4] b) => (float[batch, 2, 2] y, float[{second_batch}, 2, 2] z)
          <int64[2] tail = {{2, 2}}, int64 zero = {{0}}, int64[1] axes = {{0}}> {{
            sa = Shape (a)
            da = Gather <axis = 0> (sa, zero)
            ua = Unsqueeze (da, axes)
            ca = Concat <axis = 0> (ua, tail)
            y = Reshape (a, ca)
            sb = Shape (b)
            db = Gather <axis = 0> (sb, zero)
            ub = Unsqueeze (db, axes)
            cb = Concat <axis = 0> (ub, tail)
            z = Reshape (b, cb)
        }}"""
    )


def test_gathers_of_the_same_symbolic_dim_merge_and_their_shape_chains_follow():
    proto = _dims_model("batch")
    model = ir.from_onnx(proto)
    ir.infer_types(model)
    result = eliminate_common_subexpressions(model, NoOptions())
    ir.verify(model)
    ops = [n.op_type for n in model.graph]
    assert ops.count("Shape") == 1
    assert ops.count("Gather") == 1
    assert ops.count("Concat") == 1  # Unsqueeze and Concat of the same value merged after
    assert result.count >= 3
    feeds = random_feeds(proto)
    expected = session(proto).run(None, feeds)
    actual = session(ir.to_onnx(model)).run(None, feeds)
    for want, got in zip(expected, actual, strict=True):
        np.testing.assert_array_equal(want, got)


def test_gathers_of_different_symbols_stay_apart():
    model = ir.from_onnx(_dims_model("other"))
    ir.infer_types(model)
    result = eliminate_common_subexpressions(model, NoOptions())
    assert result.count == 0
    assert [n.op_type for n in model.graph].count("Shape") == 2
