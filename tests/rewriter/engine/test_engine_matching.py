"""Every matching feature of the engine, each with a model where it must fire and one where not."""

from __future__ import annotations

import numpy as np
import onnx
import pytest

import ir
import rewriter
from rewriter.api import _rewrite as rewriter_api
from rewriter.engine import _builder as builder_module
from tests.helpers import assert_same_outputs, model_from_text, op_types, run_rules

ADD_ZERO = """
# x + 0 -> x
rule add_zero: y = Add (x, 0.0) => y = x where shape(y) == shape(x)
"""


def _check(original: onnx.ModelProto, result, expected_ops: list[str], fired: int) -> None:
    assert sum(1 for e in result.trace.entries if e.kind == "rule") == fired
    ir.verify(result.model)
    assert op_types(result.proto) == expected_ops
    assert_same_outputs(original, result.proto)


def test_commutative_operands_match_in_either_order(tmp_path):
    model = model_from_text(
        """<ir_version: 8, opset_import: ["" : 17]>
        g (float[N, 4] x) => (float[N, 4] y) {
            zero = Constant <value = float {0.0}> ()
            t = Add (zero, x)
            y = Relu (t)
        }"""
    )
    result = run_rules(model, ADD_ZERO, tmp_path)
    _check(model, result, ["Relu"], 1)


def test_non_commutative_op_does_not_swap_operands(tmp_path):
    rules = "rule sub_zero: y = Sub (x, 0.0) => y = x where shape(y) == shape(x)\n"
    model = model_from_text(
        """<ir_version: 8, opset_import: ["" : 17]>
        g (float[N, 4] x) => (float[N, 4] y) {
            zero = Constant <value = float {0.0}> ()
            t = Sub (zero, x)
            y = Relu (t)
        }"""
    )
    result = run_rules(model, rules, tmp_path)
    _check(model, result, ["Constant", "Sub", "Relu"], 0)


def test_broadcasting_add_zero_is_not_removed(tmp_path):
    model = model_from_text(
        """<ir_version: 8, opset_import: ["" : 17]>
        g (float[4] x) => (float[2, 4] y) {
            zero = Constant <value = float[2, 4] {0,0,0,0,0,0,0,0}> ()
            y = Add (x, zero)
        }"""
    )
    result = run_rules(model, ADD_ZERO, tmp_path)
    _check(model, result, ["Constant", "Add"], 0)


def test_unknown_shape_fact_never_fires(tmp_path):
    proto_model = onnx.parser.parse_model(
        """<ir_version: 8, opset_import: ["" : 17, "custom" : 1]>
        g (float[N, 4] x) => (float[N, 4] y) {
            u = custom.Opaque (x)
            zero = Constant <value = float {0.0}> ()
            t = Add (u, zero)
            y = Identity (t)
        }"""
    )
    result = run_rules(proto_model, ADD_ZERO, tmp_path)
    assert not result.trace.entries  # shape(u) is unknown: the rule must not guess


def test_optional_input_matches_present_and_absent(tmp_path):
    rules = """
rule drop_relu_after_conv {
  match {
    c = Conv (x, w, b?)
    y = Relu (c)
  }
  where {
    b == none or is_const(b)
  }
  rewrite {
    c2 = Conv (x, w, b)
    y = Relu (c2)
  }
}
"""
    with_bias = model_from_text(
        """<ir_version: 8, opset_import: ["" : 17]>
        g (float[1, 2, 5, 5] x) => (float[1, 3, 5, 5] y) {
            w = Constant <value = float[3, 2, 1, 1] {1,2,3,4,5,6}> ()
            b = Constant <value = float[3] {0.5, -1, 2}> ()
            c = Conv (x, w, b)
            y = Relu (c)
        }"""
    )
    without_bias = model_from_text(
        """<ir_version: 8, opset_import: ["" : 17]>
        g (float[1, 2, 5, 5] x) => (float[1, 3, 5, 5] y) {
            w = Constant <value = float[3, 2, 1, 1] {1,2,3,4,5,6}> ()
            c = Conv (x, w)
            y = Relu (c)
        }"""
    )
    for model in (with_bias, without_bias):
        result = run_rules(model, rules, tmp_path, rewriter.RewriteOptions(max_rewrites=1))
        assert len(result.trace.entries) == 1
        ir.verify(result.model)
        assert_same_outputs(model, result.proto)


def test_variadic_inputs_bind_the_rest(tmp_path):
    rules = """
# Concat of a single input is that input.
rule concat_single: y = Concat (x, rest...) => y = x where len(rest) == 0 and shape(y) == shape(x)
"""
    single = model_from_text(
        """<ir_version: 8, opset_import: ["" : 17]>
        g (float[N, 4] x) => (float[N, 4] y) {
            t = Concat <axis = 1> (x)
            y = Relu (t)
        }"""
    )
    double = model_from_text(
        """<ir_version: 8, opset_import: ["" : 17]>
        g (float[N, 4] x) => (float[N, 8] y) {
            t = Concat <axis = 1> (x, x)
            y = Relu (t)
        }"""
    )
    _check(single, run_rules(single, rules, tmp_path), ["Relu"], 1)
    _check(double, run_rules(double, rules, tmp_path), ["Concat", "Relu"], 0)


def test_non_linear_pattern_requires_the_same_value(tmp_path):
    rules = """
# x - mean(x) over the last axis, written with a shared x: mark it as a centred value.
rule centre {
  match {
    mu = ReduceMean <axes = [-1]> (x)
    d = Sub (x, mu)
  }
  rewrite {
    mu2 = ReduceMean <axes = [-1], keepdims = 1> (x)
    d = Sub (x, mu2)
  }
}
"""
    shared = model_from_text(
        """<ir_version: 8, opset_import: ["" : 17]>
        g (float[N, 4] x) => (float[N, 4] d) {
            mu = ReduceMean <axes = [-1]> (x)
            d = Sub (x, mu)
        }"""
    )
    different = model_from_text(
        """<ir_version: 8, opset_import: ["" : 17]>
        g (float[N, 4] x, float[N, 4] z) => (float[N, 4] d) {
            mu = ReduceMean <axes = [-1]> (x)
            d = Sub (z, mu)
        }"""
    )
    result = run_rules(shared, rules, tmp_path, rewriter.RewriteOptions(max_rewrites=1))
    assert len(result.trace.entries) == 1
    assert_same_outputs(shared, result.proto)
    assert not run_rules(different, rules, tmp_path).trace.entries


def test_literal_list_matches_initializer_and_constant(tmp_path):
    rules = """
# Unsqueeze at [-1] then Squeeze at [-1] is a no-op.
rule unsqueeze_squeeze {
  match {
    t = Unsqueeze (x, [-1])
    y = Squeeze (t, [-1])
  }
  rewrite {
    y = x
  }
}
"""
    as_constant = model_from_text(
        """<ir_version: 8, opset_import: ["" : 17]>
        g (float[N, 4] x) => (float[N, 4] r) {
            a = Constant <value = int64[1] {-1}> ()
            t = Unsqueeze (x, a)
            y = Squeeze (t, a)
            r = Relu (y)
        }"""
    )
    as_initializer = model_from_text(
        """<ir_version: 8, opset_import: ["" : 17]>
        g (float[N, 4] x) => (float[N, 4] r)
        <int64[1] a = {-1}>
        {
            t = Unsqueeze (x, a)
            y = Squeeze (t, a)
            r = Relu (y)
        }"""
    )
    near_miss = model_from_text(
        """<ir_version: 8, opset_import: ["" : 17]>
        g (float[N, 4] x) => (float[N, 4] r) {
            a = Constant <value = int64[1] {-1}> ()
            b = Constant <value = int64[1] {2}> ()
            t = Unsqueeze (x, a)
            y = Squeeze (t, b)
            r = Relu (y)
        }"""
    )
    _check(as_constant, run_rules(as_constant, rules, tmp_path), ["Relu"], 1)
    _check(as_initializer, run_rules(as_initializer, rules, tmp_path), ["Relu"], 1)
    assert not run_rules(near_miss, rules, tmp_path).trace.entries


def test_attribute_literal_is_default_aware(tmp_path):
    rules = """
# Softmax over the last axis, spelled explicitly or by default.
rule softmax_last: y = Softmax <axis = -1> (x) => y = Softmax <axis = -1> (x) where uses(y) == 99
rule softmax_last_mark: y = Softmax <axis = -1> (x) => y = LogSoftmax <axis = -1> (x)
"""
    # At opset 13 Softmax's default axis is -1; at opset 11 it is 1.
    default_13 = model_from_text(
        """<ir_version: 8, opset_import: ["" : 13]>
        g (float[2, 3, 4] x) => (float[2, 3, 4] y) { y = Softmax (x) }"""
    )
    default_11 = model_from_text(
        """<ir_version: 7, opset_import: ["" : 11]>
        g (float[2, 3, 4] x) => (float[2, 3, 4] y) { y = Softmax (x) }"""
    )
    result = run_rules(default_13, rules, tmp_path)
    assert [e.rule for e in result.trace.entries] == ["softmax_last_mark"]
    assert op_types(result.proto) == ["LogSoftmax"]
    assert not run_rules(default_11, rules, tmp_path).trace.entries


def test_attribute_binding_uses_schema_default(tmp_path):
    rules = """
rule bn_eps {
  match {
    y = BatchNormalization <epsilon = eps> (x, s, b, m, v)
  }
  where {
    all_close(eps, 1e-5)
  }
  rewrite {
    y = BatchNormalization <epsilon = eps * 1.0> (x, s, b, m, v)
  }
}
"""
    model = model_from_text(
        """<ir_version: 8, opset_import: ["" : 15]>
        g (float[1, 2, 3] x) => (float[1, 2, 3] y)
        <float[2] s = {1, 2}, float[2] b = {0, 1}, float[2] m = {0.5, 0}, float[2] v = {1, 3}>
        { y = BatchNormalization (x, s, b, m, v) }"""
    )
    result = run_rules(model, rules, tmp_path, rewriter.RewriteOptions(max_rewrites=1))
    assert len(result.trace.entries) == 1
    node = result.model.graph.nodes[0]
    assert node.attribute("epsilon") == pytest.approx(1e-5)
    assert_same_outputs(model, result.proto)


def test_output_arity_excludes_training_batchnorm(tmp_path):
    rules = "rule bn1: y = BatchNormalization (x, s, b, m, v) => y = Identity (x)\n"
    model = model_from_text(
        """<ir_version: 8, opset_import: ["" : 15]>
        g (float[1, 2, 3] x) => (float[1, 2, 3] y, float[2] rm, float[2] rv)
        <float[2] s = {1, 2}, float[2] b = {0, 1}, float[2] m = {0.5, 0}, float[2] v = {1, 3}>
        { y, rm, rv = BatchNormalization <training_mode = 1> (x, s, b, m, v) }"""
    )
    assert not run_rules(model, rules, tmp_path).trace.entries


def test_op_alternatives_and_wildcard(tmp_path):
    rules = """
rule double_activation {
  match {
    t = Relu | Sigmoid (x)
    y = Relu (t)
  }
  rewrite {
    y = t
  }
}
rule any_then_identity {
  match {
    t = _ (x)
    y = Identity (t)
  }
  rewrite {
    y = t
  }
}
"""
    model = model_from_text(
        """<ir_version: 8, opset_import: ["" : 17]>
        g (float[N, 4] x) => (float[N, 4] y, float[N, 4] z) {
            a = Sigmoid (x)
            y = Relu (a)
            b = Tanh (x)
            z = Identity (b)
        }"""
    )
    result = run_rules(model, rules, tmp_path)
    assert sorted(e.rule for e in result.trace.entries) == [
        "any_then_identity",
        "double_activation",
    ]
    assert op_types(result.proto) == ["Sigmoid", "Tanh"]
    assert_same_outputs(model, result.proto)
    near_miss = model_from_text(
        """<ir_version: 8, opset_import: ["" : 17]>
        g (float[N, 4] x) => (float[N, 4] y) {
            a = Tanh (x)
            y = Relu (a)
        }"""
    )
    assert not run_rules(near_miss, rules, tmp_path).trace.entries


def test_as_binding_reads_attributes(tmp_path):
    rules = """
rule grouped_conv_only {
  match {
    y = Conv (x, w) as conv
  }
  where {
    conv.group == 2
  }
  rewrite {
    y = Conv <...conv> (x, w)
  }
}
"""
    grouped = model_from_text(
        """<ir_version: 8, opset_import: ["" : 17]>
        g (float[1, 4, 5, 5] x) => (float[1, 4, 5, 5] y)
        <float[4, 2, 1, 1] w = {1, 2, 3, 4, 5, 6, 7, 8}>
        { y = Conv <group = 2> (x, w) }"""
    )
    plain = model_from_text(
        """<ir_version: 8, opset_import: ["" : 17]>
        g (float[1, 4, 5, 5] x) => (float[1, 2, 5, 5] y)
        <float[2, 4, 1, 1] w = {1, 2, 3, 4, 5, 6, 7, 8}>
        { y = Conv (x, w) }"""
    )
    result = run_rules(grouped, rules, tmp_path, rewriter.RewriteOptions(max_rewrites=1))
    assert len(result.trace.entries) == 1
    assert result.model.graph.nodes[0].attribute("group") == 2
    assert_same_outputs(grouped, result.proto)
    assert not run_rules(plain, rules, tmp_path).trace.entries


def test_outside_use_blocks_the_match(tmp_path):
    rules = """
# Transpose(Transpose(x, p1), p2) -> Transpose(x, take(p1, p2))
rule transpose_transpose {
  match {
    t = Transpose <perm = p1> (x)
    y = Transpose <perm = p2> (t)
  }
  rewrite {
    y = Transpose <perm = take(p1, p2)> (x)
  }
}
"""
    private = model_from_text(
        """<ir_version: 8, opset_import: ["" : 17]>
        g (float[2, 3, 4] x) => (float[3, 4, 2] y) {
            t = Transpose <perm = [1, 0, 2]> (x)
            y = Transpose <perm = [0, 2, 1]> (t)
        }"""
    )
    shared = model_from_text(
        """<ir_version: 8, opset_import: ["" : 17]>
        g (float[2, 3, 4] x) => (float[3, 4, 2] y, float[3, 2, 4] t) {
            t = Transpose <perm = [1, 0, 2]> (x)
            y = Transpose <perm = [0, 2, 1]> (t)
        }"""
    )
    _check(private, run_rules(private, rules, tmp_path), ["Transpose"], 1)
    assert not run_rules(shared, rules, tmp_path).trace.entries


def test_alias_keeps_graph_output_names(tmp_path):
    rules = "rule identity: y = Identity (x) => y = x\n"
    # y is a graph output fed by an Identity of an intermediate value: that value takes the name.
    model = model_from_text(
        """<ir_version: 8, opset_import: ["" : 17]>
        g (float[N, 4] x) => (float[N, 4] y) {
            t = Relu (x)
            y = Identity (t)
        }"""
    )
    result = run_rules(model, rules, tmp_path)
    _check(model, result, ["Relu"], 1)
    assert result.proto.graph.output[0].name == "y"
    # An Identity of a graph input must stay (the output keeps its own name).
    passthrough = model_from_text(
        """<ir_version: 8, opset_import: ["" : 17]>
        g (float[N, 4] x) => (float[N, 4] y) { y = Identity (x) }"""
    )
    result = run_rules(passthrough, rules, tmp_path)
    assert result.proto.graph.output[0].name == "y"
    assert_same_outputs(passthrough, result.proto)


def test_let_initializers_are_deduplicated_and_literal_dtypes_follow_schema(tmp_path):
    rules = """
# x * 2 -> x + x, written with a literal and a let value of the same content.
rule double {
  match {
    y = Mul (x, 2.0)
  }
  rewrite {
    let two = 2.0
    a = Mul (x, 2.0)
    y = Mul (a, 1.0)
  }
}
"""
    two = onnx.numpy_helper.from_array(np.array(2.0, dtype=np.float16), "two")
    graph = onnx.helper.make_graph(
        [onnx.helper.make_node("Mul", ["x", "two"], ["y"])],
        "g",
        [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT16, ["N", 4])],
        [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT16, ["N", 4])],
        [two],
    )
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 17)])
    result = run_rules(model, rules, tmp_path, rewriter.RewriteOptions(max_rewrites=1))
    assert len(result.trace.entries) == 1
    inits = result.proto.graph.initializer
    assert {onnx.helper.tensor_dtype_to_np_dtype(t.data_type) for t in inits} == {
        np.dtype("float16")
    }
    assert_same_outputs(model, result.proto, rtol=1e-3, atol=1e-3)


def test_rule_emitting_op_missing_at_model_opset_is_skipped(tmp_path):
    rules = """
rule to_gelu: y = Erf (x) => y = Gelu (x)
"""
    model = model_from_text(
        """<ir_version: 8, opset_import: ["" : 17]>
        g (float[N, 4] x) => (float[N, 4] y) { y = Erf (x) }"""
    )
    result = run_rules(model, rules, tmp_path)
    assert not result.trace.entries
    assert any("Gelu" in s.reason and "20" in s.reason for s in result.trace.skips)


def test_requires_clause_is_honoured_and_recorded(tmp_path):
    rules = """
rule needs_18 requires opset >= 18: y = Identity (x) => y = x
"""
    model = model_from_text(
        """<ir_version: 8, opset_import: ["" : 17]>
        g (float[N, 4] x) => (float[N, 4] y) { t = Identity (x) \n y = Relu (t) }"""
    )
    result = run_rules(model, rules, tmp_path)
    assert not result.trace.entries
    assert [s.rule for s in result.trace.skips] == ["needs_18"]
    assert "requires opset" in result.trace.skips[0].reason


def test_ill_typed_rewrite_is_rolled_back_and_reported(tmp_path):
    rules = """
# Wrong on purpose: replaces a float value by an int64 one.
rule bad_cast: y = Relu (x) => y = Cast <to = 7> (x)
"""
    model = model_from_text(
        """<ir_version: 8, opset_import: ["" : 17]>
        g (float[N, 4] x) => (float[N, 4] y) { y = Relu (x) }"""
    )
    result = run_rules(model, rules, tmp_path)
    assert not result.trace.entries
    assert any(s.reason.startswith("rolled back") for s in result.trace.skips)
    assert op_types(result.proto) == ["Relu"]
    ir.verify(result.model)


def test_budget_stops_a_rule_pair_that_loops(tmp_path):
    rules = """
rule relu_to_leaky: y = Relu (x) => y = LeakyRelu <alpha = 0.0> (x)
rule leaky_to_relu: y = LeakyRelu <alpha = 0.0> (x) => y = Relu (x)
"""
    model = model_from_text(
        """<ir_version: 8, opset_import: ["" : 17]>
        g (float[N, 4] x) => (float[N, 4] y) { y = Relu (x) }"""
    )
    result = run_rules(model, rules, tmp_path, rewriter.RewriteOptions(max_rewrites=50))
    assert result.trace.stop_reason.value == "rewrite budget"
    assert any("relu_to_leaky" in w and "leaky_to_relu" in w for w in result.trace.warnings)
    ir.verify(result.model)
    assert_same_outputs(model, result.proto)


def test_rules_apply_inside_nested_graphs(tmp_path):
    rules = "rule identity: y = Identity (x) => y = x\n"
    model = model_from_text(
        """<ir_version: 8, opset_import: ["" : 17]>
        g (bool c, float[4] x) => (float[4] y) {
            y = If (c) <
                then_branch = t () => (float[4] a) { r = Relu (x) \n a = Identity (r) },
                else_branch = e () => (float[4] b) { s = Neg (x) \n b = Identity (s) }
            >
        }"""
    )
    result = run_rules(model, rules, tmp_path)
    assert len(result.trace.entries) == 2
    ir.verify(result.model)
    proto = result.proto
    branches = [a.g for a in proto.graph.node[0].attribute]
    assert [[n.op_type for n in b.node] for b in branches] == [["Relu"], ["Neg"]]
    assert_same_outputs(model, proto)


def test_two_runs_are_byte_identical(tmp_path):
    rules = ADD_ZERO + "rule identity: y = Identity (x) => y = x\n"
    model = model_from_text(
        """<ir_version: 8, opset_import: ["" : 17]>
        g (float[N, 4] x) => (float[N, 4] y) {
            zero = Constant <value = float {0.0}> ()
            t = Add (zero, x)
            u = Identity (t)
            y = Relu (u)
        }"""
    )
    first = run_rules(model, rules, tmp_path).proto.SerializeToString()
    second = run_rules(model, rules, tmp_path).proto.SerializeToString()
    assert first == second


def test_new_nodes_carry_rule_metadata(tmp_path):
    rules = "rule relu_to_max: y = Relu (x) => y = Max (x, 0.0)\n"
    model = model_from_text(
        """<ir_version: 8, opset_import: ["" : 17]>
        g (float[N, 4] x) => (float[N, 4] y) { y = Relu (x) }"""
    )
    result = run_rules(model, rules, tmp_path)
    node = result.proto.graph.node[0]
    meta = {p.key: p.value for p in node.metadata_props}
    assert meta["rewriter.rule"] == "relu_to_max"
    assert meta["rewriter.source"].endswith("rules.rw:1")
    assert_same_outputs(model, result.proto)


RELU_AFTER_IDENTITY = """<ir_version: 8, opset_import: ["" : 17]>
        g (float[N, 4] x) => (float[N, 4] y) {
            t = Identity (x)
            y = Relu (t)
        }"""
IDENTITY_AND_RELU_RULES = """
rule identity: y = Identity (x) => y = x
rule relu_to_max: y = Relu (x) => y = Max (x, 0.0)
"""


def test_a_rewrite_that_fails_validation_is_undone_exactly(tmp_path, monkeypatch):
    # Simulate a problem only the committed graph shows: any region holding a Max.
    real_find = builder_module.find_problem

    def find_max(graph, created, redirected):
        if any(n.op_type == "Max" for n in created):
            return "Max is not allowed here (simulated)"
        return real_find(graph, created, redirected)

    monkeypatch.setattr(builder_module, "find_problem", find_max)
    model = model_from_text(RELU_AFTER_IDENTITY)
    result = run_rules(model, IDENTITY_AND_RELU_RULES, tmp_path)
    assert [e.rule for e in result.trace.entries] == ["identity"]
    (skipped,) = [s for s in result.trace.skips if s.rule == "relu_to_max"]
    assert skipped.reason == "rolled back: Max is not allowed here (simulated)"
    # The undo leaves exactly the model the identity rule alone makes.
    alone = run_rules(
        model,
        IDENTITY_AND_RELU_RULES,
        tmp_path,
        rewriter.RewriteOptions(exclude_rules=frozenset({"relu_to_max"})),
    )
    assert result.proto.SerializeToString() == alone.proto.SerializeToString()
    assert_same_outputs(model, result.proto)


def test_a_result_the_checker_refuses_is_a_loud_internal_error(tmp_path, monkeypatch):
    real_check = rewriter_api._checker_problem

    def strict_check(model: ir.Model) -> str | None:
        if any(n.op_type == "Max" for n in model.graph):
            return "Max is not allowed here (simulated checker failure)"
        return real_check(model)

    monkeypatch.setattr(rewriter_api, "_checker_problem", strict_check)
    model = model_from_text(RELU_AFTER_IDENTITY)
    with pytest.raises(rewriter.RewriteError) as raised:
        run_rules(model, IDENTITY_AND_RELU_RULES, tmp_path)
    message = str(raised.value)
    assert message.startswith("internal error: the rewritten model fails onnx's checker")
    assert "relu_to_max (" in message
    assert "Please report" in message


@pytest.mark.parametrize(
    ("model_text", "rule_text"),
    [
        (RELU_AFTER_IDENTITY, "rule relu_to_max: y = Relu (x) => y = Max (x, 0.0)\n"),
        # The replaced value is a graph output and its replacement a graph input: an
        # Identity is added to keep the output's name.
        (
            """<ir_version: 8, opset_import: ["" : 17]>
            g (float[N, 4] x) => (float[N, 4] y) {
                one = Constant <value = float {1.0}> ()
                y = Mul (x, one)
            }""",
            "rule mul_one: y = Mul (x, 1.0) => y = x\n",
        ),
        # A new initializer, a new node and uses moved away from a matched node.
        (
            """<ir_version: 8, opset_import: ["" : 17]>
            g (float[N, 4] x) => (float[N, 4] y, float[N, 4] z) {
                t = Relu (x)
                y = Neg (t)
                z = Abs (t)
            }""",
            "rule relu_to_max: y = Relu (x) => y = Max (x, 0.5)\n",
        ),
    ],
)
def test_an_undone_rewrite_leaves_the_model_byte_for_byte_as_it_was(
    model_text, rule_text, tmp_path
):
    path = tmp_path / "rules.rw"
    path.write_text(rule_text)
    ruleset = rewriter.load_rules(path)
    model = ir.from_onnx(model_from_text(model_text))
    before = ir.to_onnx(model).SerializeToString()
    manager = rewriter.api.pass_manager(ruleset)
    rule = ruleset.rules[0].name
    # why-not builds every match, commits it through the undo log, validates it and undoes it.
    report = manager.why_not(model, rule)
    assert any(outcome == "matches" for _, outcome in report.outcomes), report.render()
    assert ir.to_onnx(model).SerializeToString() == before
    ir.verify(model)
