"""Regression tests for what the soundness fuzzer found (`fuzz.py rewrite`, issue 16).

Each test builds the small model the fuzzer reduced a finding to (and variations of it), rewrites
it with the default library and compares the result with the original under onnxruntime, graph
optimizations off.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnx.helper as oh
import onnx.numpy_helper
import pytest

import rewriter
from tests.helpers import assert_same_outputs

DOUBLE = onnx.TensorProto.DOUBLE


def _function_model(opset: int, function_opset: int) -> onnx.ModelProto:
    """`y = local.scaled(x)`, a local function whose body reads its input's shape."""
    body = [
        oh.make_node("Add", ["a", "z"], ["t"]),
        oh.make_node("Shape", ["t"], ["s"]),
        oh.make_node("Cast", ["s"], ["sf"], to=DOUBLE),
        oh.make_node("ReduceSum", ["sf"], ["n"], keepdims=0),
        oh.make_node("Mul", ["t", "n"], ["b"]),
    ]
    zero = oh.make_node(
        "Constant", [], ["z"], value=onnx.numpy_helper.from_array(np.array([-0.0, -0.0, -0.0]))
    )
    function = oh.make_function(
        "local", "scaled", ["a"], ["b"], [zero, *body], [oh.make_opsetid("", function_opset)]
    )
    graph = oh.make_graph(
        [oh.make_node("scaled", ["x"], ["y"], domain="local")],
        "g",
        [oh.make_tensor_value_info("x", DOUBLE, [3])],
        [oh.make_tensor_value_info("y", DOUBLE, [3])],
    )
    imports = [oh.make_opsetid("", opset), oh.make_opsetid("local", 1)]
    model = oh.make_model(graph, opset_imports=imports, functions=[function])
    model.ir_version = 10
    return model


@pytest.mark.parametrize(("opset", "target"), [(17, 23), (17, 20), (18, 17), (15, 21)])
def test_opset_conversion_keeps_local_functions(opset: int, target: int) -> None:
    # `--target-opset` went through onnx's version converter, which returns the model without
    # its local functions: the call named no function and onnxruntime refused the model.
    model = _function_model(opset, opset)
    options = rewriter.RewriteOptions(target_opset=target)
    result = rewriter.rewrite(model, None, options)
    assert [f.name for f in result.proto.functions] == ["scaled"]
    versions = {o.domain: o.version for o in result.proto.functions[0].opset_import}
    assert versions[""] == target
    assert_same_outputs(model, result.proto)
