"""One rule for a group of ops (`y = ...n (x)` keeps the matched op), and rule parameters."""

from __future__ import annotations

from pathlib import Path

import onnx
import pytest

import rewriter
from rewriter import rules
from rewriter._errors import RewriteError, RuleCheckError, RuleSyntaxError
from rewriter.api import check_files, load_rules
from rewriter.cli import main
from rewriter.dsl import dump, format_file, parse, parse_param_value
from tests.helpers import assert_same_outputs, model_from_text, op_types

GROUP = """# y = op(x) -> y = op(Neg(Neg(x))) for a group of ops, keeping each op's attributes
rule wrap_in_negations {
  match {
    y = Relu | LeakyRelu | Elu <...> (x) as n
  }
  where {
    dtype(x) == "float"
  }
  rewrite {
    a = Neg (x)
    b = Neg (a)
    y = ...n (b)
  }
}
"""

MODEL = """<ir_version: 8, opset_import: ["" : 17]>
g (float[2, 3] x) => (float[2, 3] z) {
    a = Relu (x)
    b = LeakyRelu <alpha = 0.25> (a)
    z = Elu <alpha = 0.5> (b)
}"""


def _write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


def test_a_rewrite_keeps_the_op_and_attributes_the_node_matched(tmp_path: Path) -> None:
    proto = model_from_text(MODEL)
    ruleset = load_rules(_write(tmp_path, "group.rw", GROUP))
    (rule,) = ruleset.rules
    new_node = rule.rewrite.stmts[2]  # type: ignore[union-attr]
    assert new_node.op == rules.MatchedOp("n")
    assert new_node.attrs == (rules.CopyAttrs("n"),)
    result = rewriter.rewrite(proto, ruleset, rewriter.RewriteOptions(passes=(), max_rewrites=3))
    ops = op_types(result.proto)
    assert [op for op in ops if op != "Neg"] == ["Relu", "LeakyRelu", "Elu"]
    alphas = [a.f for n in result.proto.graph.node for a in n.attribute if a.name == "alpha"]
    assert alphas == [0.25, 0.5]
    assert_same_outputs(proto, result.proto, rtol=0, atol=0)


def test_attributes_given_after_the_copy_override_the_matched_ones(tmp_path: Path) -> None:
    text = "rule halve_alpha: y = LeakyRelu (x) as n => y = ...n <alpha = 0.125> (x)\n"
    proto = model_from_text(MODEL)
    result = rewriter.rewrite(
        proto, load_rules(_write(tmp_path, "r.rw", text)), rewriter.RewriteOptions(passes=())
    )
    leaky = next(n for n in result.proto.graph.node if n.op_type == "LeakyRelu")
    assert [a.f for a in leaky.attribute] == [0.125]


def test_the_node_copy_formats_and_dumps_as_written() -> None:
    assert format_file(GROUP, "g.rw") == GROUP
    assert "node (y) = ...n (b)" in dump(parse(GROUP))


def test_a_node_copy_of_an_unnamed_node_is_an_error() -> None:
    text = GROUP.replace("y = ...n (b)", "y = ...m (b)")
    (error,) = [d for d in check_files([parse(text, "g.rw")]) if d.severity == "error"]
    assert error.message == "`...m`: `m` is not bound; name a node with `as`"
    assert (error.span.line, error.span.col) == (12, 9)


PARAM = """# One scale per channel, or one for all.
param per_channel = true

# x * 1 -> x, when switched on
rule mul_one_switch: y = Mul (x, 1.0) => y = x where per_channel and dtype(y) == dtype(x)
"""


def test_a_parameter_is_its_default_unless_the_run_sets_it(tmp_path: Path) -> None:
    path = _write(tmp_path, "p.rw", PARAM)
    (default,) = load_rules(path).rules
    assert default.conditions[0].left == rules.Const(True)  # type: ignore[union-attr]
    (off,) = load_rules(path, params={"per_channel": False}).rules
    assert off.conditions[0].left == rules.Const(False)  # type: ignore[union-attr]
    proto = model_from_text(
        """<ir_version: 8, opset_import: ["" : 17]>
        g (float[2] x) => (float[2] y) <float one = {1.0}> { y = Mul (x, one) }"""
    )
    on = rewriter.rewrite(proto, [path])
    assert op_types(on.proto) == ["Identity"]  # a graph input cannot take the output's name
    kept = rewriter.rewrite(proto, [path], rewriter.RewriteOptions(params={"per_channel": False}))
    assert op_types(kept.proto) == ["Mul"]


def test_parameter_errors_say_what_is_wrong(tmp_path: Path) -> None:
    path = _write(tmp_path, "p.rw", PARAM)
    with pytest.raises(RewriteError, match=r"no loaded rule file declares the parameter `x`"):
        load_rules(path, params={"x": 1})
    with pytest.raises(RewriteError, match=r"parameter `per_channel` takes a bool"):
        load_rules(path, params={"per_channel": "yes"})
    twice = _write(tmp_path, "twice.rw", "param per_channel = false\n")
    with pytest.raises(RuleCheckError) as caught:
        load_rules(path, twice)
    assert caught.value.first_line.endswith("error: parameter `per_channel` is declared twice")
    bound = _write(
        tmp_path,
        "bound.rw",
        "param per_channel = true\nrule r: y = Relu (per_channel) => y = Abs (per_channel)\n",
    )
    with pytest.raises(RuleCheckError, match="`per_channel` is a rule parameter"):
        load_rules(bound)


def test_parameter_values_are_literals_of_the_language() -> None:
    assert parse_param_value("false") is False
    assert parse_param_value("[0, -1]") == [0, -1]
    assert parse_param_value('"SAME"') == "SAME"
    with pytest.raises(RuleSyntaxError):
        parse_param_value("per channel")


def test_the_command_line_sets_a_parameter(tmp_path: Path) -> None:
    rules_path = _write(tmp_path, "p.rw", PARAM)
    source = tmp_path / "m.onnx"
    onnx.save(
        model_from_text(
            """<ir_version: 8, opset_import: ["" : 17]>
            g (float[2] x) => (float[2] y) <float one = {1.0}> { y = Mul (x, one) }"""
        ),
        source,
    )
    out = tmp_path / "out.onnx"
    args = [str(source), "--rules", str(rules_path), "-o", str(out), "--force"]
    assert main([*args, "--param", "per_channel=false"]) == 0
    assert op_types(onnx.load(out)) == ["Mul"]
    assert main([*args, "--param", "per_channel=true"]) == 0
    assert "Mul" not in op_types(onnx.load(out))
    assert main([*args, "--param", "nope=1"]) == 2
