"""Rewrites inside local function bodies, which hold no initializers, only Constant nodes;
the same for models of IR version 3, where every initializer must also be a graph input.

Also the final-check fallback: a rewrite after which onnx's checker fails is left out at that
one place, not everywhere, and reported with the graph and the checker's whole message.
"""

from __future__ import annotations

import collections
from pathlib import Path

import numpy as np
import onnx
import onnx.helper
import pytest

import ir
from rewriter.api import _rewrite as rewriter_api
from rewriter.cli import main
from rewriter.engine import _builder as builder_module
from tests.helpers import assert_same_outputs, model_from_text, run_rules

CONSTANT_RULE = """
# y = Constant <value = v> () -> initializer v
rule constant_to_initializer: y = Constant () => y = value(y) where is_const(y) and dtype(y) != "string"
"""

RELU_RULE = """
# Relu(x) -> Max(x, 0)
rule relu_to_max: y = Relu (x) => y = Max (x, 0.0)
"""

# A Constant in the main graph and one in the body of the local function `MyFun`.
CONSTANTS_MODEL = """<ir_version: 8, opset_import: ["" : 17, "local" : 1]>
main_graph (float[2] x) => (float[2] y) {
    c = Constant <value = float[2] {1.0, 2.0}> ()
    t = Mul (x, c)
    y = local.MyFun (t)
}
<domain: "local", opset_import: ["" : 17]>
MyFun (a) => (b) {
    k = Constant <value = float[2] {3.0, 4.0}> ()
    b = Add (a, k)
}"""


def _relu_model() -> onnx.ModelProto:
    """A Relu in the main graph and one in `MyFun`, whose values are typed (value_info)."""
    model = onnx.parser.parse_model(
        """<ir_version: 10, opset_import: ["" : 17, "local" : 1]>
        main_graph (float[2] x) => (float[2] y) {
            r0 = Relu (x)
            y = local.MyFun (r0)
        }
        <domain: "local", opset_import: ["" : 17]>
        MyFun (a) => (b) {
            r = Relu (a)
            b = Neg (r)
        }"""
    )
    body = model.functions[0]
    for name in ("a", "r", "b"):
        body.value_info.append(
            onnx.helper.make_tensor_value_info(name, onnx.TensorProto.FLOAT, [2])
        )
    onnx.checker.check_model(model, full_check=True)
    return model


def _function_ops(proto: onnx.ModelProto) -> list[str]:
    return [n.op_type for n in proto.functions[0].node]


def test_constant_to_initializer_converts_the_main_graph_and_keeps_the_function_constant(
    tmp_path: Path,
) -> None:
    model = model_from_text(CONSTANTS_MODEL)
    result = run_rules(model, CONSTANT_RULE, tmp_path)
    entries = [(e.rule, e.graph) for e in result.trace.entries]
    assert entries == [("constant_to_initializer", "main_graph")]
    # Declined in the function (it would put back the same Constant), not rolled back.
    skips = [s.reason for s in result.trace.skips]
    assert skips
    assert all(reason.endswith("nothing to do") for reason in skips)
    assert not any(reason.startswith("rolled back") for reason in skips)
    proto = result.proto
    assert [n.op_type for n in proto.graph.node] == ["Mul", "MyFun"]
    assert [t.name for t in proto.graph.initializer] == ["c/constant_to_initializer/y"]
    assert _function_ops(proto) == ["Constant", "Add"]
    ir.verify(result.model)
    assert_same_outputs(model, proto)


def test_explain_of_the_shipped_library_reports_no_rollback_for_a_function_constant(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "model.onnx"
    onnx.save(model_from_text(CONSTANTS_MODEL), source)
    out = tmp_path / "out.onnx"
    assert main([str(source), "-o", str(out), "--explain", "--no-progress"]) == 0
    captured = capsys.readouterr()
    assert "rolled back" not in captured.err
    assert "rolled back" not in captured.out
    assert "no rule fired" not in captured.out
    assert "constant_to_initializer" in captured.out.split("skipped:")[0]
    rewritten = onnx.load(out)
    assert _function_ops(rewritten) == ["Constant", "Add"]
    assert_same_outputs(onnx.load(source), rewritten)


def test_literal_of_a_rewrite_in_a_function_body_becomes_a_constant_node(tmp_path: Path) -> None:
    model = _relu_model()
    result = run_rules(model, RELU_RULE, tmp_path)
    assert [(e.rule, e.graph) for e in result.trace.entries] == [
        ("relu_to_max", "main_graph"),
        ("relu_to_max", "MyFun"),
    ]
    proto = result.proto
    assert len(proto.graph.initializer) == 1  # the main graph's 0.0
    assert _function_ops(proto) == ["Constant", "Max", "Neg"]
    constant = proto.functions[0].node[0]
    meta = {p.key: p.value for p in constant.metadata_props}
    assert meta["rewriter.rule"] == "relu_to_max"
    # The trace names the new Constant among the created nodes.
    assert constant.name in result.trace.entries[1].created
    ir.verify(result.model)
    assert_same_outputs(model, proto)


FOLDING = "pass fold_constants\npass eliminate_dead_code\n"
# kk = [4, 5], computed from two Constant nodes: what fold_constants folds.
SUM_OF_CONSTANTS = """k = Constant <value = float[2] {3.0, 4.0}> ()
            k2 = Constant <value = float[2] {1.0, 1.0}> ()
            kk = Add (k, k2)"""


def test_fold_constants_in_a_function_body_makes_a_constant_node(tmp_path: Path) -> None:
    model = model_from_text(
        """<ir_version: 8, opset_import: ["" : 17, "local" : 1]>
        main_graph (float[2] x) => (float[2] y) {
            y = local.MyFun (x)
        }
        <domain: "local", opset_import: ["" : 17]>
        MyFun (a) => (b) {
            SUM_OF_CONSTANTS
            b = Mul (a, kk)
        }""".replace("SUM_OF_CONSTANTS", SUM_OF_CONSTANTS)
    )
    result = run_rules(model, FOLDING, tmp_path)
    proto = result.proto
    assert _function_ops(proto) == ["Constant", "Mul"]
    folded = onnx.numpy_helper.to_array(proto.functions[0].node[0].attribute[0].t)
    np.testing.assert_array_equal(folded, np.array([4.0, 5.0], dtype=np.float32))
    fold = [e for e in result.trace.entries if e.rule == "fold_constants"]
    assert [(e.graph, e.matched) for e in fold] == [("MyFun", ("<Add>(kk)",))]
    ir.verify(result.model)
    assert_same_outputs(model, proto)


# IR 3: an initializer must be a graph input too (onnx's checker refuses it otherwise), so a
# new constant would add an input; it becomes a Constant node instead.
IR3_MODEL = """<ir_version: 3, opset_import: ["" : 8]>
main_graph (float[2] x) => (float[2] y) {
    r = Relu (x)
    y = Add (r, r)
}"""


def test_literal_of_a_rewrite_in_an_ir3_model_becomes_a_constant_node(tmp_path: Path) -> None:
    model = model_from_text(IR3_MODEL)
    result = run_rules(model, RELU_RULE, tmp_path)
    assert dict(collections.Counter(e.rule for e in result.trace.entries)) == {"relu_to_max": 1}
    proto = result.proto
    assert [n.op_type for n in proto.graph.node] == ["Constant", "Max", "Add"]
    assert not proto.graph.initializer
    assert [i.name for i in proto.graph.input] == ["x"]
    assert_same_outputs(model, proto)


def test_fold_constants_in_an_ir3_model_makes_a_constant_node(tmp_path: Path) -> None:
    model = model_from_text(
        """<ir_version: 3, opset_import: ["" : 8]>
        main_graph (float[2] x) => (float[2] y) {
            SUM_OF_CONSTANTS
            y = Mul (x, kk)
        }""".replace("SUM_OF_CONSTANTS", SUM_OF_CONSTANTS)
    )
    result = run_rules(model, FOLDING, tmp_path)
    proto = result.proto
    assert [n.op_type for n in proto.graph.node] == ["Constant", "Mul"]
    assert not proto.graph.initializer
    assert_same_outputs(model, proto)


def test_a_function_body_rewrite_that_fails_validation_is_undone_there_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Simulate a problem only a function's committed rewrite shows.
    real_find = builder_module.find_problem

    def find_max_in_functions(graph: ir.Graph, created, redirected) -> str | None:
        if isinstance(graph.owner, ir.Function):
            return "Max is not allowed in a function (simulated)"
        return real_find(graph, created, redirected)

    monkeypatch.setattr(builder_module, "find_problem", find_max_in_functions)
    model = _relu_model()
    result = run_rules(model, RELU_RULE, tmp_path)
    # Still applied in the main graph; left out in MyFun only.
    assert [(e.rule, e.graph) for e in result.trace.entries] == [("relu_to_max", "main_graph")]
    rolled = [s for s in result.trace.skips if s.reason.startswith("rolled back")]
    assert len(rolled) == 1
    assert rolled[0].node == "<Relu> in MyFun"
    assert rolled[0].reason == "rolled back: Max is not allowed in a function (simulated)"
    proto = result.proto
    assert [n.op_type for n in proto.graph.node] == ["Max", "MyFun"]
    assert _function_ops(proto) == ["Relu", "Neg"]
    assert_same_outputs(model, proto)


def test_checker_message_is_whole_and_on_one_line() -> None:
    # A function body given an initializer by hand: lowering cannot keep it, so onnx's
    # checker fails, naming the node on the lines after its first one.
    model = ir.from_onnx(model_from_text(CONSTANTS_MODEL))
    body = next(iter(model.functions.values())).graph
    weight = ir.Value("w", const_value=ir.NumpyTensor(np.ones(2, np.float32), "w"))
    body.add_initializer(weight)
    body.append(ir.Node("Add", [body.outputs[0], weight], outputs=[ir.Value("b2")], name="late"))
    problem = rewriter_api._checker_problem(model)
    assert problem is not None
    assert "\n" not in problem
    assert "input 'w' of node: Name: late OpType: Add is neither output" in problem
