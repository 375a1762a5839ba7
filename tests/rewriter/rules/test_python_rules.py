"""Rules built in Python from the rule IR: rewriting a shipped model, `--why-not`, checks."""

from __future__ import annotations

from pathlib import Path

import onnx
import pytest

import ir
import rewriter
from rewriter import rules
from rewriter.api import load_rules, pass_manager
from tests.helpers import assert_same_outputs, op_types

MODELS = Path(__file__).resolve().parents[2] / "models"

# x ** 2 -> x * x (onnxruntime computes Pow by 2 as one multiplication: exact)
SQUARE = rules.rule(
    "pow_two_to_mul",
    match=[rules.node("Pow", "x", 2.0, out="y")],
    where=[rules.is_in(rules.call("dtype", "x"), rules.lit(["float", "double", "float16"]))],
    rewrite=[rules.new_node("Mul", "x", "x", out="y")],
)
SQUARE_LINE = 19  # where `rules.rule(` is called above

SQUARE_TEXT = """
# x ** 2 -> x * x
rule pow_two_to_mul {
  match {
    y = Pow (x, 2.0)
  }
  where {
    dtype(x) in ["float", "double", "float16"]
  }
  rewrite {
    y = Mul (x, x)
  }
}
"""


def test_a_python_rule_rewrites_the_shipped_bert() -> None:
    original = onnx.load(MODELS / "bert_ts14.onnx")
    alone = rewriter.RewriteOptions(passes=())
    result = rewriter.rewrite(original, rules.RuleSet((SQUARE,)), alone)
    before, after = op_types(original), op_types(result.proto)
    assert before.count("Pow") == 13
    assert after.count("Pow") == 0
    assert after.count("Mul") == before.count("Mul") + 13
    assert [e.rule for e in result.trace.entries] == ["pow_two_to_mul"] * 13
    this_file = Path(__file__).resolve()
    assert {e.location for e in result.trace.entries} == {f"{this_file}:{SQUARE_LINE}"}
    assert_same_outputs(original, result.proto, rtol=0, atol=0)


def test_the_same_rule_from_a_rule_file_lowers_to_the_same_ir(tmp_path: Path) -> None:
    path = tmp_path / "square.rw"
    path.write_text(SQUARE_TEXT, encoding="utf-8")
    (from_file,) = load_rules(path).rules
    assert from_file == SQUARE  # spans (where each was written) are not compared
    assert from_file.location == f"{path}:3"


def test_why_not_explains_a_python_rule_and_a_file_rule_alike(tmp_path: Path) -> None:
    doubles_only = rules.rule(
        "pow_two_to_mul_double",
        match=[rules.node("Pow", "x", 2.0, out="y")],
        where=[rules.eq(rules.call("dtype", "x"), rules.lit("double"))],
        rewrite=[rules.new_node("Mul", "x", "x", out="y")],
    )
    path = tmp_path / "double.rw"
    path.write_text(
        'rule pow_two_to_mul_file: y = Pow (x, 2.0) => y = Mul (x, x) where dtype(x) == "double"\n',
        encoding="utf-8",
    )
    model = ir.load(MODELS / "bert_ts14.onnx")
    python_side = pass_manager(rules.RuleSet((doubles_only,))).why_not(model, doubles_only.name)
    file_side = pass_manager(load_rules(path)).why_not(model, "pow_two_to_mul_file")
    assert len(python_side.outcomes) == len(file_side.outcomes) == 13
    python_reason = python_side.outcomes[0][1]
    file_reason = file_side.outcomes[0][1]
    assert python_reason.startswith('condition 1: `dtype(x) == "double"` is false')
    assert file_reason.startswith('where line 1: `dtype(x) == "double"` is false')
    assert python_reason.split(": ", 1)[1] == file_reason.split(": ", 1)[1]
    assert str(Path(__file__).resolve()) in python_side.render()


def test_a_rule_reading_an_unbound_variable_is_refused_where_it_is_built() -> None:
    with pytest.raises(ValueError, match=r"rule `broken` \(.*test_python_rules.py:\d+\): .*`z`"):
        rules.rule(
            "broken",
            match=[rules.node("Relu", "x", out="y")],
            rewrite=[rules.new_node("Relu", "z", out="y")],
        )


def test_a_rule_built_from_the_ir_classes_directly_applies_too() -> None:
    # Neg(Neg(x)) -> x, written with the dataclasses instead of the builders.
    double_negation = rules.Rule(
        name="neg_neg",
        pattern=rules.Pattern(
            (
                rules.NodePattern(
                    (rules.OutputVar("t"),), (rules.OpId("", "Neg"),), inputs=(rules.InputVar("x"),)
                ),
                rules.NodePattern(
                    (rules.OutputVar("y"),), (rules.OpId("", "Neg"),), inputs=(rules.InputVar("t"),)
                ),
            )
        ),
        rewrite=rules.Rewrite((rules.Alias("y", rules.Name("x")),)),
    )
    model = onnx.parser.parse_model(
        '<ir_version: 8, opset_import: ["" : 17]>\n'
        "g (float[2] x) => (float[2] z) {\n  t = Neg (x)\n  y = Neg (t)\n  z = Relu (y)\n}"
    )
    result = rewriter.rewrite(model, rules.RuleSet((double_negation,)))
    assert op_types(result.proto) == ["Relu"]
    assert_same_outputs(model, result.proto, rtol=0, atol=0)
