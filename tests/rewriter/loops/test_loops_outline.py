"""`outline_functions`: one local function per repeated block, one call per block."""

from __future__ import annotations

import onnx

import ir
from rewriter.loops import OUTLINE_DOMAIN, outline_functions
from tests.rewriter.loops.loop_models import (
    assert_same_on,
    dense_chain,
    lift,
    ops,
    random_feeds,
    session,
    strided_conv_chain,
)


def _function(model: ir.Model) -> ir.Function:
    functions = list(model.functions.values())
    assert len(functions) == 1
    return functions[0]


def test_dense_blocks_become_calls_of_one_function():
    proto = dense_chain(4, side_input=True, scale_constants=[0.5] * 4)
    model = lift(proto)
    result = outline_functions(model)
    ir.verify(model)
    assert result.count == 1
    function = _function(model)
    assert function.domain == OUTLINE_DOMAIN
    assert model.opset_imports[OUTLINE_DOMAIN] == 1
    assert function.opset_imports == {"": 17}
    assert ops(model.graph) == {function.name: 4}
    # The equal scale constants live in the body; weights are passed in; `s` too.
    assert ops(function.graph) == {"MatMul": 1, "Add": 2, "Mul": 1, "Relu": 1, "Constant": 1}
    assert len(function.graph.inputs) == 4  # carried h, then w_k, b_k, s by first use
    calls = [n for n in model.graph if n.domain == OUTLINE_DOMAIN]
    assert [v.name for v in calls[0].inputs] == ["x", "w0", "b0", "s"]
    assert [v.name for v in calls[-1].outputs] == ["y"]
    proto_out = ir.to_onnx(model)
    onnx.checker.check_model(proto_out, full_check=True)
    assert_same_on(proto, model, random_feeds(proto))


def test_outlined_model_runs_with_optimizations():
    proto = strided_conv_chain(4)
    model = lift(proto)
    assert outline_functions(model).changed
    feeds = random_feeds(proto, time=40)
    expected = session(proto).run(None, feeds[0])
    actual = session(model, optimized=True).run(None, feeds[0])
    assert expected[0].shape == actual[0].shape
    assert abs(expected[0] - actual[0]).max() < 1e-5


def test_outlining_does_not_outline_its_own_calls():
    model = lift(dense_chain(9))
    assert outline_functions(model).count == 1
    assert not outline_functions(model).changed
    assert len(model.functions) == 1


def test_near_miss_is_not_outlined():
    model = lift(dense_chain(4, alphas=[0.1, 0.1, 0.2, 0.1]))
    assert not outline_functions(model).changed
    assert not model.functions
