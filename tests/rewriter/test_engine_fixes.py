"""Regression tests for engine fixes found while writing the rule library."""

from __future__ import annotations

import onnx

import ir
from tests.rewriter.engine_helpers import assert_same_outputs, model_from_text, op_types, run_rules


def test_list_literal_for_an_index_input_stays_int64_next_to_a_float_input(tmp_path):
    # Slice's starts/ends/axes/steps share the type variable `Tind` with no other input. The
    # literals used to copy the dtype of the float data input, so onnx's inference rejected
    # the new node and the rewrite was rolled back.
    model = model_from_text(
        """<ir_version: 8, opset_import: ["" : 15]>
        g (float[N, 6, 6] x) => (float[N, 6, 6] y) {
            y = Identity (x)
        }"""
    )
    rules = """
    # Identity(x) -> x[:, 0:] (a Slice that keeps everything; exercises literal index inputs)
    rule identity_as_slice: y = Identity (x) => y = Slice (x, [0], [9223372036854775807], [1], [1])
    """
    result = run_rules(model, rules, tmp_path)
    assert result.trace.skips == ()
    assert op_types(result.proto) == ["Slice"]
    ir.verify(result.model)
    assert {t.data_type for t in result.proto.graph.initializer} == {onnx.TensorProto.INT64}
    assert_same_outputs(model, result.proto)


def test_identity_from_graph_input_to_graph_output_is_not_rewritten_forever(tmp_path):
    # `y = x` on an output that must stay a node output put back the same Identity, and the
    # rule matched it again until the rewrite budget ran out.
    model = model_from_text(
        """<ir_version: 8, opset_import: ["" : 15]>
        g (float[N, 4] x) => (float[N, 4] y) {
            y = Identity (x)
        }"""
    )
    rules = """
    # Identity(x) -> x
    rule eliminate_identity: y = Identity (x) => y = x
    """
    result = run_rules(model, rules, tmp_path)
    assert [e.rule for e in result.trace.entries] == []
    assert [s.rule for s in result.trace.skips] == ["eliminate_identity"]
    assert "nothing to do" in result.trace.skips[0].reason
    assert op_types(result.proto) == ["Identity"]
    assert result.proto.graph.output[0].name == "y"
    assert_same_outputs(model, result.proto)


def test_identity_between_a_node_and_a_graph_output_is_still_removed(tmp_path):
    model = model_from_text(
        """<ir_version: 8, opset_import: ["" : 15]>
        g (float[N, 4] x) => (float[N, 4] y) {
            t = Relu (x)
            y = Identity (t)
        }"""
    )
    rules = "rule eliminate_identity: y = Identity (x) => y = x  # Identity(x) -> x\n"
    result = run_rules(model, rules, tmp_path)
    assert [e.rule for e in result.trace.entries] == ["eliminate_identity"]
    assert op_types(result.proto) == ["Relu"]
    assert result.proto.graph.output[0].name == "y"
    assert_same_outputs(model, result.proto)


def test_value_made_by_a_custom_op_keeps_the_facts_of_the_value_it_replaces(tmp_path):
    # onnx's inference cannot type a custom-domain node (com.microsoft.* fusions), so its
    # output had no rank or shape and every rule downstream that asks for them stopped firing
    # (SkipLayerNormalization chains in BERT fused only every other layer).
    model = onnx.parser.parse_model(
        """<ir_version: 8, opset_import: ["" : 17, "custom" : 1]>
        g (float[N, 4] x) => (float[N, 4] y) {
            t = Relu (x)
            y = Neg (t)
        }"""
    )
    rules = """
    # Relu(x) -> custom.MyRelu(x)
    rule to_custom: t = Relu (x) => t = custom.MyRelu (x)
    # Neg(t) -> custom.MyNeg(t) for a 2-D t (needs the rank of the custom op's output)
    rule neg_2d: y = Neg (t) => y = custom.MyNeg (t) where rank(t) == 2 and shape(t)[0] == "N"
    """
    result = run_rules(model, rules, tmp_path)
    assert [e.rule for e in result.trace.entries] == ["to_custom", "neg_2d"]
    assert op_types(result.proto) == ["MyRelu", "MyNeg"]
    ir.verify(result.model)
