"""A negative declared dim (exporters write -1 for "unknown") is never taken for a size."""

from __future__ import annotations

import numpy as np
import onnx
import onnx.helper as oh

import ir
import rewriter
from rewriter.engine import shape_of
from rewriter.verification import InputOptions, VerifyOptions
from tests.helpers import session


def _model() -> onnx.ModelProto:
    # float[3, -1] X, as onnxoptimizer's own tests write it; Shape/Size of Relu(X).
    x = oh.make_tensor_value_info("X", onnx.TensorProto.FLOAT, [3, -1])
    nodes = [
        oh.make_node("Relu", ["X"], ["r"]),
        oh.make_node("Shape", ["r"], ["s"]),
        oh.make_node("Size", ["X"], ["n"]),
        oh.make_node("Shape", ["X"], ["tail"], start=1),
    ]
    outputs = [
        oh.make_tensor_value_info("s", onnx.TensorProto.INT64, [2]),
        oh.make_tensor_value_info("n", onnx.TensorProto.INT64, []),
        oh.make_tensor_value_info("tail", onnx.TensorProto.INT64, [1]),
    ]
    graph = oh.make_graph(nodes, "g", [x], outputs)
    return oh.make_model(graph, opset_imports=[oh.make_opsetid("", 17)])


def test_a_negative_declared_dim_is_unknown_to_the_facts():
    model = ir.from_onnx(_model())
    assert shape_of(model.graph.inputs[0]) == (3, None)


def test_shape_and_size_of_a_negative_dim_are_not_folded():
    original = _model()
    result = rewriter.rewrite(original)
    x = np.ones((3, 3), np.float32)
    expected = session(original).run(None, {"X": x})
    got = session(result.proto).run(None, {"X": x})
    for want, have in zip(expected, got, strict=True):
        np.testing.assert_array_equal(have, want)


def test_verification_draws_sizes_for_a_negative_dim():
    original = _model()
    check = rewriter.verify(
        original,
        rewriter.rewrite(original).model,
        VerifyOptions(inputs=InputOptions(examples=3, seed=0)),
    )
    assert check.ok, check.render_table()
