"""`unroll_loops`: the inverse of rolling, and hand-written Loops."""

from __future__ import annotations

import onnx
import onnx.parser
import pytest

import ir
from rewriter.loops import UnrollLoopsOptions, plan_unroll, roll_loops, unroll_loops
from tests.rewriter.loops.loop_models import (
    assert_same_on,
    dense_chain,
    lift,
    ops,
    pair_chain,
    random_feeds,
    strided_conv_chain,
)

_SCAN_LOOP = """
<ir_version: 8, opset_import: ["" : {opset}]>
g (float[2] x) => (float[2] y, float[3,2] ys) {{
  trip = Constant <value = int64 {{{trip}}}> ()
  cond = Constant <value = bool {{1}}> ()
  y, ys = Loop (trip, cond, x) <body = body (int64 i, bool c, float[2] h)
      => (bool c_out, float[2] h_out, float[2] scan) {{
    c_out = {cond_out}
    fi = Cast <to = 1> (i)
    h_out = Add (h, fi)
    scan = Identity (h_out)
  }}>
}}
"""


def _scan_loop(trip: int = 3, opset: int = 17, cond_out: str = "Identity (c)") -> onnx.ModelProto:
    text = _SCAN_LOOP.format(trip=trip, opset=opset, cond_out=cond_out)
    model = onnx.parser.parse_model(text)
    onnx.checker.check_model(model, full_check=True)
    return model


@pytest.mark.parametrize(
    "make",
    [
        lambda: dense_chain(4),
        lambda: dense_chain(4, side_input=True),
        lambda: dense_chain(4, scale_constants=[0.5] * 4),
        lambda: dense_chain(4, scale_constants=[0.5, 1.5, 2.0, -1.0]),
        lambda: pair_chain(4),
        lambda: strided_conv_chain(3),
    ],
)
def test_unroll_of_roll_restores_the_node_count_and_outputs(make):
    proto = make()
    model = lift(proto)
    before = ops(model.graph)
    assert roll_loops(model).changed
    result = unroll_loops(model)
    ir.verify(model)
    assert result.count == 1
    assert ops(model.graph) == before
    assert_same_on(proto, model, random_feeds(proto))


def test_unrolled_slices_take_back_the_original_names():
    model = lift(dense_chain(4))
    roll_loops(model)
    unroll_loops(model)
    assert sorted(model.graph.initializers) == sorted(
        [f"w{k}" for k in range(4)] + [f"b{k}" for k in range(4)]
    )


@pytest.mark.parametrize("opset", [11, 17])
def test_scan_outputs_are_stacked(opset):
    proto = _scan_loop(opset=opset)
    model = lift(proto)
    result = unroll_loops(model)
    ir.verify(model)
    assert result.changed
    assert "Loop" not in ops(model.graph)
    assert ops(model.graph)["Concat"] == 1
    assert ops(model.graph)["Unsqueeze"] == 3
    assert_same_on(proto, model, random_feeds(proto))


def test_a_constant_true_cond_out_is_accepted():
    proto = _scan_loop(cond_out="Constant <value = bool {1}> ()")
    model = lift(proto)
    assert unroll_loops(model).changed
    assert_same_on(proto, model, random_feeds(proto))


@pytest.mark.parametrize(
    ("proto", "options", "reason"),
    [
        (_scan_loop(trip=5), {"max_trip_count": 4}, "outside 1..4"),
        (_scan_loop(cond_out="Not (c)"), {}, "early exit"),
        (_scan_loop(trip=0), {}, "outside 1..64"),
    ],
)
def test_loops_that_are_not_unrolled(proto, options, reason):
    model = lift(proto)
    loop = next(n for n in model.graph if n.op_type == "Loop")
    found = plan_unroll(loop, options.get("max_trip_count", 64), 17)
    assert isinstance(found, str)
    assert reason in found
    assert not unroll_loops(model, UnrollLoopsOptions(**options)).changed
    assert "Loop" in ops(model.graph)


def test_a_non_constant_trip_count_is_not_unrolled():
    text = """
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[2] x, int64 n) => (float[2] y) {
      cond = Constant <value = bool {1}> ()
      y = Loop (n, cond, x) <body = body (int64 i, bool c, float[2] h)
          => (bool c_out, float[2] h_out) {
        c_out = Identity (c)
        h_out = Relu (h)
      }>
    }
    """
    model = lift(onnx.parser.parse_model(text))
    loop = next(n for n in model.graph if n.op_type == "Loop")
    assert plan_unroll(loop, 64, 17) == "the trip count is not a constant"
    assert not unroll_loops(model).changed
