"""`rewrite find` (matches listed, nothing rewritten) and `rewrite -e RULE` (inline rules)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import onnx
import pytest

from rewriter.cli import main
from rewriter.surgery import find
from tests.helpers import assert_same_outputs, model_from_text

MODELS = Path(__file__).parents[2] / "models"

# Two Convs with different pads (one without bias), each followed by a Relu, and a Softmax.
CONVS = """<ir_version: 8, opset_import: ["" : 17]>
g (float[N, 3, 8, 8] x, float[4, 3, 3, 3] w1, float[4, 3, 3, 3] w2, float[4] b)
  => (float[N, 4, 8, 8] y, float[N, 4, 6, 6] z)
{
    a = Conv <pads = [1, 1, 1, 1]> (x, w1, b)
    y = Relu (a)
    c = Conv <pads = [0, 0, 0, 0]> (x, w2)
    r = Relu (c)
    z = Softmax <axis = 1> (r)
}"""


def _write(tmp_path: Path, text: str, name: str = "m.onnx") -> Path:
    path = tmp_path / name
    onnx.save(model_from_text(text), path)
    return path


def test_find_lists_every_match_with_bindings_and_types(tmp_path, capsys):
    path = _write(tmp_path, CONVS)
    assert main(["find", str(path), "-e", "y = Relu (x)"]) == 0
    out = capsys.readouterr().out
    assert out.count("e1 (-e#1:1):") == 2
    assert "x = %a: float[N,4,8,8]" in out
    assert "x = %c: float[N,4,6,6]" in out
    assert out.rstrip().endswith("2 matches")
    before = path.read_bytes()
    assert main(["find", str(path), "-e", "y = Softmax (x)", "--count"]) == 0
    assert capsys.readouterr().out == "1\n"
    assert path.read_bytes() == before  # the model is never changed


def test_find_attribute_literals_where_and_several_lines(tmp_path, capsys):
    path = _write(tmp_path, CONVS)
    padded = "y = Conv <pads = [1, 1, 1, 1]> (x, w, b?)"
    assert main(["find", str(path), "-e", padded, "--count"]) == 0
    assert capsys.readouterr().out == "1\n"
    # Two lines and a where clause: a Conv without bias whose output feeds a Relu.
    query = "c = Conv (x, w, b?)\nr = Relu (c)\nwhere b == none"
    assert main(["find", str(path), "-e", query, "--json", "-"]) == 0
    (match,) = json.loads(capsys.readouterr().out)
    assert match["nodes"][-1].startswith("<Relu>(r)")
    bound = {b["name"]: b for b in match["bindings"]}
    assert bound["b"]["kind"] == "absent"
    assert bound["w"]["type"] == "float[4,3,3,3]"


def test_find_reaches_into_subgraphs():
    loop_body = onnx.helper.make_graph(
        [
            onnx.helper.make_node("Identity", ["cond"], ["cond_out"]),
            onnx.helper.make_node("Relu", ["v"], ["v_out"]),
        ],
        "body",
        [
            onnx.helper.make_tensor_value_info("i", onnx.TensorProto.INT64, []),
            onnx.helper.make_tensor_value_info("cond", onnx.TensorProto.BOOL, []),
            onnx.helper.make_tensor_value_info("v", onnx.TensorProto.FLOAT, [2]),
        ],
        [
            onnx.helper.make_tensor_value_info("cond_out", onnx.TensorProto.BOOL, []),
            onnx.helper.make_tensor_value_info("v_out", onnx.TensorProto.FLOAT, [2]),
        ],
    )
    graph = onnx.helper.make_graph(
        [
            onnx.helper.make_node("Loop", ["trips", "", "x"], ["y"], body=loop_body),
        ],
        "g",
        [
            onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2]),
            onnx.helper.make_tensor_value_info("trips", onnx.TensorProto.INT64, []),
        ],
        [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [2])],
    )
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 17)])
    (found,) = find(model, queries=["y = Relu (x)"])
    assert found.graph == "body"


def test_find_with_rule_files_lists_where_the_rules_would_apply(tmp_path):
    rules = tmp_path / "r.rw"
    rules.write_text(
        "rule relu_softmax {\n"
        "  match {\n    r = Relu (x)\n    s = Softmax (r)\n  }\n"
        "  rewrite {\n    s = Softmax (x)\n  }\n"
        "}\n"
    )
    path = _write(tmp_path, CONVS)
    found = find(path, [rules])
    assert [f.rule for f in found] == ["relu_softmax"]
    assert found[0].location == f"{rules}:1"


def test_find_counts_attention_layers_of_a_bert_export(capsys):
    model = onnx.load(MODELS / "bert_ts14.onnx")
    softmaxes = sum(n.op_type == "Softmax" for n in model.graph.node)
    assert main(["find", str(MODELS / "bert_ts14.onnx"), "-e", "y = Softmax (x)", "--count"]) == 0
    assert capsys.readouterr().out == f"{softmaxes}\n"
    assert softmaxes > 1


def test_find_errors_are_located_in_the_expression(tmp_path, capsys):
    path = _write(tmp_path, CONVS)
    assert main(["find", str(path), "-e", "y = Relu (x"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("-e#1:1:12: error:")
    assert "y = Relu (x\n           ^" in err
    assert main(["find", str(path), "-e", "y = Reluu (x)"]) == 2
    assert "-e#1:1:5: error: unknown op `Reluu`" in capsys.readouterr().err
    assert main(["find", str(path)]) == 2
    assert "-e TEXT or --rules PATH" in capsys.readouterr().err


def test_inline_rule_replaces_every_relu_and_nothing_else(tmp_path):
    path = _write(tmp_path, CONVS)
    out = tmp_path / "leaky.onnx"
    rule = "rule leaky: y = Relu (x) => y = LeakyRelu <alpha = 0.0> (x)"
    assert main([str(path), "-e", rule, "-o", str(out), "--no-progress"]) == 0
    before = onnx.load(path)
    after = onnx.load(out)
    changed = Counter(n.op_type for n in before.graph.node) - Counter(
        n.op_type for n in after.graph.node
    )
    added = Counter(n.op_type for n in after.graph.node) - Counter(
        n.op_type for n in before.graph.node
    )
    assert changed == {"Relu": 2}
    assert added == {"LeakyRelu": 2}
    assert_same_outputs(before, after)


def test_inline_rules_are_the_only_rules_unless_rules_names_the_library(tmp_path, capsys):
    # `Identity` is removed by the shipped library; with only an inline rule it stays.
    text = """<ir_version: 8, opset_import: ["" : 17]>
g (float[3] x) => (float[3] y) {
    t = Identity (x)
    y = Relu (t)
}"""
    path = _write(tmp_path, text)
    out = tmp_path / "o.onnx"
    rule = "rule neg: y = Relu (x) => y = LeakyRelu <alpha = 0.0> (x)"
    assert main([str(path), "-e", rule, "-o", str(out), "--no-progress"]) == 0
    assert [n.op_type for n in onnx.load(out).graph.node] == ["Identity", "LeakyRelu"]
    assert main([str(path), "-e", rule, "--rules", "patterns/", "-o", str(out), "--force"]) == 0
    assert [n.op_type for n in onnx.load(out).graph.node] == ["LeakyRelu"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("y = Relu (x)", "-e#1: expected a rule"),
        ("rule a: y = Relu (x) => y = Reluu (x)", "-e#1:1:29: error: unknown op `Reluu`"),
        ("rule a: y = Relu (x) =>", "-e#1:1:24: error:"),
    ],
)
def test_inline_rule_errors_name_the_expression(tmp_path, capsys, text, expected):
    path = _write(tmp_path, CONVS)
    assert main([str(path), "-e", text, "-o", str(tmp_path / "o.onnx")]) == 2
    assert expected in capsys.readouterr().err
    assert not (tmp_path / "o.onnx").exists()
