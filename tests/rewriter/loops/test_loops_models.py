"""Loop passes on real exported models (tests/models), checked with onnxruntime.

Acceptance: rolling leaves at most a quarter of the main graph's nodes (plus the Loop), the
outputs equal the original's on the stored samples (graph optimizations disabled), unrolling
the rolled model gives back the original node count, and the outlined model runs and agrees.
"""

from __future__ import annotations

import collections

import onnx
import pytest

import ir
from rewriter.loops import outline_functions, roll_loops, unroll_loops
from tests.rewriter.loops.loop_models import MODELS, assert_same_on, ops, sample_feeds

CORPUS = [
    ("bert_ts14", 6),
    ("bert_dynamo18", 6),
    ("conv1d_ln_gelu_x6_ts17", 3),
    ("conv1d_ln_gelu_x6_ts14", 3),
]


def _load(name: str) -> ir.Model:
    model = ir.load(MODELS / f"{name}.onnx")
    ir.infer_types(model)
    return model


def _feeds(name: str, model: onnx.ModelProto):
    return sample_feeds(name, [vi.name for vi in model.graph.input])


@pytest.fixture(scope="module")
def originals() -> dict[str, onnx.ModelProto]:
    return {name: onnx.load(MODELS / f"{name}.onnx") for name, _ in CORPUS}


@pytest.mark.parametrize(("name", "blocks"), CORPUS)
def test_roll_shrinks_the_main_graph_and_keeps_the_outputs(name, blocks, originals):
    model = _load(name)
    before = len(model.graph)
    result = roll_loops(model)
    ir.verify(model)
    assert result.count == 1
    loops = [n for n in model.graph if n.op_type == "Loop"]
    assert len(loops) == 1
    trip_count = loops[0].inputs[0]
    assert trip_count is not None
    assert int(trip_count.const_value.numpy()) == blocks
    assert len(model.graph) <= before / 4 + 1
    proto = ir.to_onnx(model)
    onnx.checker.check_model(proto, full_check=True)
    assert_same_on(originals[name], proto, _feeds(name, originals[name]))


@pytest.mark.parametrize(("name", "blocks"), CORPUS)
def test_unroll_of_roll_gives_back_the_original_nodes(name, blocks, originals):
    model = _load(name)
    before = collections.Counter(n.op_type for n in model.graph)
    roll_loops(model)
    result = unroll_loops(model)
    ir.verify(model)
    assert result.count == 1
    assert collections.Counter(n.op_type for n in model.graph) == before
    assert_same_on(originals[name], model, _feeds(name, originals[name]))


@pytest.mark.parametrize(("name", "blocks"), CORPUS)
def test_outlined_model_runs_and_agrees(name, blocks, originals):
    model = _load(name)
    result = outline_functions(model)
    ir.verify(model)
    assert result.count == 1
    (function,) = model.functions.values()
    assert ops(model.graph)[function.name] == blocks
    proto = ir.to_onnx(model)
    onnx.checker.check_model(proto, full_check=True)
    assert_same_on(originals[name], proto, _feeds(name, originals[name]))


def test_rolling_a_real_model_is_deterministic():
    first, second = _load("bert_ts14"), _load("bert_ts14")
    roll_loops(first)
    roll_loops(second)
    assert ir.to_onnx(first).SerializeToString() == ir.to_onnx(second).SerializeToString()


def test_the_shipped_conv_stack_repeat_rule_rolls_the_real_export():
    # The explicit form on what PyTorch writes: Conv -> Transpose -> LayerNormalization ->
    # Transpose -> Gelu, two layers a block (strides 1, 2 alternate). Gelu exists from opset
    # 20, so the library fuses it first; the repeat rule runs after the local rules.
    import rewriter

    name = "conv1d_ln_gelu_x6_ts17"
    original = onnx.load(MODELS / f"{name}.onnx")
    rules = [MODELS.parents[1] / "patterns", MODELS.parents[1] / "patterns/loops/conv_stack.rw"]
    result = rewriter.rewrite(original, rules, rewriter.RewriteOptions(target_opset=20))
    ir.verify(result.model)
    assert ops(result.model.graph) == {"Loop": 1}
    assert result.trace.counts()["roll_conv1d_layer_norm_gelu_pairs"] == 1
    (loop,) = result.model.graph
    (body,) = loop.subgraphs()
    body_ops = collections.Counter(n.op_type for n in body)
    assert body_ops["Conv"] == 2
    assert body_ops["Gelu"] == 2
    assert_same_on(original, result.proto, _feeds(name, original))


def test_roll_and_unroll_together_stop_as_oscillation_naming_both_passes(tmp_path):
    # Each round rolls the layers and unrolls them again under fresh value names: the
    # fingerprint identifies values by position, not name, so the second round is seen to
    # bring back the state of the first.
    import rewriter

    rules = tmp_path / "both.rw"
    rules.write_text("pass roll_loops\npass unroll_loops\n")
    alone = rewriter.RewriteOptions(passes=())  # only the two declared passes
    result = rewriter.rewrite(MODELS / "conv1d_ln_gelu_x6_ts17.onnx", rules=[rules], options=alone)
    assert result.trace.stop_reason.name == "OSCILLATION"
    (warning,) = result.trace.warnings
    assert "pass `roll_loops`" in warning
    assert "pass `unroll_loops`" in warning
    assert result.nodes_after == result.nodes_before  # the unrolled model is what is kept
