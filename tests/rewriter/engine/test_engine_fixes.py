"""Regression tests for engine fixes found while writing the rule library."""

from __future__ import annotations

import onnx

import ir
from tests.helpers import assert_same_outputs, model_from_text, op_types, run_rules


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


def test_a_fold_that_overflows_the_dtype_is_declined_not_applied(tmp_path):
    # float16 weights scaled by 1 / sqrt(var + eps) with var = 0 and a large scale exceed
    # float16's range (inf - inf = NaN in the folded bias); the original stays as it is.
    import numpy as np

    from rewriter.verification import run_model

    weights = np.full((3, 2), 2.0, np.float16)
    stats = {
        "scale": np.array([60.0, 1.0], np.float16),
        "shift": np.zeros(2, np.float16),
        "mean": np.array([70.0, 0.0], np.float16),
        "var": np.zeros(2, np.float16),
    }
    inits = [onnx.numpy_helper.from_array(weights, "w")]
    inits += [onnx.numpy_helper.from_array(v, k) for k, v in stats.items()]
    nodes = [
        onnx.helper.make_node("MatMul", ["x", "w"], ["y"]),
        onnx.helper.make_node("BatchNormalization", ["y", "scale", "shift", "mean", "var"], ["z"]),
    ]
    graph = onnx.helper.make_graph(
        nodes,
        "g",
        [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT16, [1, 3])],
        [onnx.helper.make_tensor_value_info("z", onnx.TensorProto.FLOAT16, [1, 2])],
        inits,
    )
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 15)])
    rules = """
    # BN(x @ w) -> (x @ (w * k)) + (shift - mean * k), folded in the weights' dtype
    rule fold {
      match {
        y = MatMul (x, w)
        z = BatchNormalization <epsilon = eps> (y, scale, shift, mean, var)
      }
      rewrite {
        let k = scale / sqrt(var + eps)
        t = MatMul (x, w * reshape(k, [1, -1]))
        z = Add (t, shift - mean * k)
      }
    }
    """
    result = run_rules(model, rules, tmp_path)
    assert op_types(result.proto) == ["MatMul", "BatchNormalization"]
    reasons = [s.reason for s in result.trace.skips if s.rule == "fold"]
    assert reasons
    assert "overflow" in reasons[0]
    assert not reasons[0].startswith("rolled back")
    x = np.array([[35.0, 0.0, 0.0]], np.float16)
    assert np.isfinite(run_model(result.proto, {"x": x})["z"]).all()
