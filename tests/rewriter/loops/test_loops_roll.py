"""`roll_loops` on small models: what rolls, what must not, and what the Loop looks like."""

from __future__ import annotations

import json

import numpy as np
import onnx
import onnx.helper as oh
import onnx.numpy_helper as onh
import pytest

import ir
from rewriter.loops import (
    UNSTACK_KEY,
    DetectOptions,
    Refusal,
    RollLoopsOptions,
    analyze_chain,
    detect_chain,
    roll_loops,
)
from rewriter.loops._definitions import ROLL_LOOPS
from tests.rewriter.loops.loop_models import (
    assert_same_on,
    dense_chain,
    lift,
    ops,
    pair_chain,
    random_feeds,
    session,
    strided_conv_chain,
)


def _loop(model: ir.Model) -> ir.Node:
    loops = [n for n in model.graph if n.op_type == "Loop"]
    assert len(loops) == 1
    return loops[0]


def _body(loop: ir.Node) -> ir.Graph:
    body = loop.attributes["body"].value
    assert isinstance(body, ir.Graph)
    return body


def test_four_dense_blocks_roll_into_one_loop():
    proto = dense_chain(4)
    model = lift(proto)
    result = roll_loops(model)
    ir.verify(model)
    assert result.changed
    assert result.count == 1
    assert ops(model.graph) == {"Loop": 1}
    loop = _loop(model)
    body = _body(loop)
    assert ops(body) == {"MatMul": 1, "Add": 1, "Relu": 1, "Gather": 2, "Identity": 1}
    trip_count = loop.inputs[0]
    assert trip_count is not None
    assert trip_count.const_value is not None
    assert int(trip_count.const_value.numpy()) == 4
    # The per-block weights are stacked along a new leading axis; the originals are gone.
    stacked = sorted(
        (name, v.const_value.shape)
        for name, v in model.graph.initializers.items()
        if v.const_value is not None and v.const_value.shape and v.const_value.shape[0] == 4
    )
    assert stacked == [("b0_stacked", (4, 8)), ("w0_stacked", (4, 8, 8))]
    assert not any(name in model.graph.initializers for name in ("w1", "b3"))
    # Body: inputs (iter_num, cond_in, carried), outputs (cond_out, carried).
    assert [str(v.type) for v in body.inputs] == ["int64[]", "bool[]", "float[?,?]"]
    assert len(body.outputs) == 2
    assert [v.name for v in model.graph.outputs] == ["y"]
    assert_same_on(proto, model, random_feeds(proto))


def test_gather_records_the_stacked_constants_names():
    model = lift(dense_chain(4))
    roll_loops(model)
    gathers = [n for n in _body(_loop(model)) if n.op_type == "Gather"]
    notes = sorted(json.loads(n.metadata_props[UNSTACK_KEY])["names"][0] for n in gathers)
    assert notes == ["b0", "w0"]


def test_a_side_input_read_by_every_block_is_an_outer_scope_reference():
    proto = dense_chain(4, side_input=True)
    model = lift(proto)
    roll_loops(model)
    ir.verify(model)
    body = _body(_loop(model))
    side_users = [n for n in body if any(v is not None and v.name == "s" for v in n.inputs)]
    assert len(side_users) == 1
    assert all(v.name != "s" for v in _loop(model).inputs if v is not None)
    assert_same_on(proto, model, random_feeds(proto))


def test_identical_constant_nodes_stay_single_in_the_body():
    proto = dense_chain(4, scale_constants=[0.5] * 4)
    model = lift(proto)
    roll_loops(model)
    ir.verify(model)
    body = _body(_loop(model))
    assert ops(body)["Constant"] == 1
    assert ops(body)["Gather"] == 2
    assert ops(model.graph) == {"Loop": 1}
    assert_same_on(proto, model, random_feeds(proto))


def test_differing_constant_nodes_are_stacked():
    proto = dense_chain(4, scale_constants=[0.5, 1.5, 2.0, -1.0])
    model = lift(proto)
    roll_loops(model)
    body = _body(_loop(model))
    assert "Constant" not in ops(body)
    assert ops(body)["Gather"] == 3
    gathers = [n for n in body if n.op_type == "Gather" and "c0" in n.metadata_props[UNSTACK_KEY]]
    assert json.loads(gathers[0].metadata_props[UNSTACK_KEY])["constant_nodes"] is True
    assert_same_on(proto, model, random_feeds(proto))


def test_two_carried_values_roll():
    proto = pair_chain(4)
    model = lift(proto)
    roll_loops(model)
    ir.verify(model)
    loop = _loop(model)
    assert len(loop.inputs) == 4  # M, cond and two carried values
    assert len(loop.outputs) == 2
    assert_same_on(proto, model, random_feeds(proto))


def test_a_carried_value_whose_shape_changes_per_iteration():
    proto = strided_conv_chain(3)
    model = lift(proto)
    roll_loops(model)
    ir.verify(model)
    body = _body(_loop(model))
    carried = body.inputs[2].type
    assert isinstance(carried, ir.TensorType)
    assert carried.shape == (None, None, None)
    assert_same_on(proto, model, random_feeds(proto, time=37))


def test_graph_output_names_are_kept():
    model = lift(dense_chain(4))
    roll_loops(model)
    assert [v.name for v in model.graph.outputs] == ["y"]
    assert model.graph.outputs[0].producer() is _loop(model)


@pytest.mark.parametrize(
    ("why", "proto"),
    [
        ("an attribute differs", dense_chain(4, alphas=[0.1, 0.1, 0.2, 0.1])),
        ("a weight shape differs", dense_chain(4, odd_bias_block=2)),
        ("an intermediate is read outside", dense_chain(4, leak_block=1)),
        ("too few blocks", dense_chain(2)),
    ],
)
def test_near_misses_do_not_roll(why, proto):
    model = lift(proto)
    before = ops(model.graph)
    result = roll_loops(model)
    ir.verify(model)
    assert not result.changed, why
    assert ops(model.graph) == before


def test_a_leaking_block_stays_outside_the_loop():
    proto = dense_chain(6, leak_block=2)
    model = lift(proto)
    roll_loops(model)
    ir.verify(model)
    loop = _loop(model)
    trip_count = loop.inputs[0]
    assert trip_count is not None
    assert int(trip_count.const_value.numpy()) >= 3
    leaked = model.graph.outputs[1]
    assert leaked.name == "mm2"
    producer = leaked.producer()
    assert producer is not None
    assert producer.op_type == "MatMul"
    assert producer.graph is model.graph
    assert_same_on(proto, model, random_feeds(proto))


def test_min_repeats_and_min_block_nodes_options():
    model = lift(dense_chain(4))
    assert not roll_loops(model, RollLoopsOptions(min_repeats=5)).changed
    assert not roll_loops(model, RollLoopsOptions(min_block_nodes=4)).changed
    assert roll_loops(model, RollLoopsOptions(min_repeats=4, min_block_nodes=3)).changed


@pytest.mark.parametrize(
    "bad", [{"min_repeats": 1}, {"min_block_nodes": "3"}, {"min_repeats": True}]
)
def test_bad_options_are_refused(bad):
    with pytest.raises(ValueError, match="option"):
        RollLoopsOptions(**bad)
    with pytest.raises(ValueError, match="option"):
        ROLL_LOOPS.make_options(bad)


def test_rolling_is_deterministic():
    first, second = lift(dense_chain(5, side_input=True)), lift(dense_chain(5, side_input=True))
    roll_loops(first)
    roll_loops(second)
    assert ir.to_onnx(first).SerializeToString() == ir.to_onnx(second).SerializeToString()


def test_analysis_says_which_block_differs():
    model = lift(dense_chain(4, alphas=[0.1, 0.1, 0.2, 0.1]))
    assert detect_chain(model.graph, DetectOptions()).plan is None
    blocks = [tuple(n for n in model.graph if n.name.startswith(f"block{k}/")) for k in range(4)]
    refusal = analyze_chain(model.graph, blocks)
    assert isinstance(refusal, Refusal)
    assert "differs" in refusal.reason
    assert refusal.block == 2


def test_analysis_refuses_blocks_that_do_not_chain():
    model = lift(dense_chain(4))
    matmuls = [(n,) for n in model.graph if n.op_type == "MatMul"]
    refusal = analyze_chain(model.graph, [matmuls[0], matmuls[2]])
    assert isinstance(refusal, Refusal)
    assert "wired differently" in refusal.reason


def test_parallel_repeats_are_not_a_chain():
    rng = np.random.default_rng(0)
    nodes, inits = [], []
    for k in range(4):
        inits.append(onh.from_array(rng.standard_normal((4, 4)).astype(np.float32), f"w{k}"))
        nodes.append(oh.make_node("MatMul", ["x", f"w{k}"], [f"m{k}"]))
        nodes.append(oh.make_node("Relu", [f"m{k}"], [f"r{k}"]))
    nodes.append(oh.make_node("Sum", [f"r{k}" for k in range(4)], ["y"]))
    float_t = onnx.TensorProto.FLOAT
    graph = oh.make_graph(
        nodes,
        "parallel",
        [oh.make_tensor_value_info("x", float_t, [2, 4])],
        [oh.make_tensor_value_info("y", float_t, [2, 4])],
        inits,
    )
    model = lift(oh.make_model(graph, opset_imports=[oh.make_opsetid("", 17)]))
    pairs = [tuple(model.graph.nodes[2 * k : 2 * k + 2]) for k in range(4)]
    refusal = analyze_chain(model.graph, pairs)
    assert isinstance(refusal, Refusal)
    assert "parallel" in refusal.reason
    assert not roll_loops(model).changed


def test_loop_outputs_match_unrolled_weights_numerically():
    proto = dense_chain(3, width=4, seed=7)
    model = lift(proto)
    roll_loops(model)
    x = np.arange(8, dtype=np.float32).reshape(2, 4) / 8
    expected = x
    weights = {t.name: t for t in proto.graph.initializer}
    for k in range(3):
        expected = np.maximum(
            expected @ onh.to_array(weights[f"w{k}"]) + onh.to_array(weights[f"b{k}"]), 0
        )
    (actual,) = session(model).run(None, {"x": x})
    np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-6)


def test_rolling_a_rolled_model_changes_nothing():
    model = lift(dense_chain(5, side_input=True))
    assert roll_loops(model).changed
    before = ir.to_onnx(model).SerializeToString()
    assert not roll_loops(model).changed
    assert ir.to_onnx(model).SerializeToString() == before
