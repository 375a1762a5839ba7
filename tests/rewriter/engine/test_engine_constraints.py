"""Named constraints at match time: three-valued evaluation, firing, and `--why-not` reasons."""

from __future__ import annotations

import onnx
import pytest

from rewriter.cli import main
from rewriter.dsl import Constraint, Lowering, Rule, parse
from rewriter.engine import UNKNOWN, EvalContext, evaluate
from tests.helpers import model_from_text, op_types, run_rules

CONSTRAINTS = """
constraint both(a, b) {
  a
  b
}
constraint either(a, b) {
  a or b
}
constraint outer(a, b) {
  both(a, b)
}
"""


def _evaluate(text: str, **bindings: object) -> object:
    constraints = {c.name: c for c in parse(CONSTRAINTS).items if isinstance(c, Constraint)}
    rule = parse(f"rule r: y = Relu (x) => y = x where {text}").items[0]
    assert isinstance(rule, Rule)
    lowered = Lowering(constraints).rule(rule)
    return evaluate(lowered.conditions[0], EvalContext(dict(bindings), {"": 17}))


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        (True, True, True),
        (True, False, False),
        (False, UNKNOWN, False),  # false wins over unknown, as with `and`
        (UNKNOWN, False, False),  # a later false line still decides
        (UNKNOWN, True, UNKNOWN),
    ],
)
def test_a_call_is_the_three_valued_and_of_its_conditions(a, b, expected) -> None:
    assert _evaluate("both(a, b)", a=a, b=b) is expected
    assert _evaluate("outer(a, b)", a=a, b=b) is expected
    negated = UNKNOWN if expected is UNKNOWN else not expected
    assert _evaluate("not both(a, b)", a=a, b=b) is negated


def test_conditions_see_only_the_arguments() -> None:
    # the caller's `b` is not the constraint's `b`
    assert _evaluate("either(b, false)", a=True, b=False) is False


MODEL = """<ir_version: 8, opset_import: ["" : 17]>
g ({dtype}[2, 3] x) => ({dtype}[2, 3] y) {{
    a = Relu (x)
    y = Relu (a)
}}"""

RULES = """
constraint is_float(x) {
  rank(x) >= 1
  dtype(x) in ["float", "float16", "bfloat16", "double"]
}

constraint same_float_shape(y, x) {
  shape(y) == shape(x)
  is_float(x)
}

# relu(relu(x)) -> relu(x)
rule relu_relu {
  match {
    a = Relu (x)
    y = Relu (a)
  }
  where {
    rank(x) == 2
    same_float_shape(y, x)
  }
  rewrite {
    y = a
  }
}
"""


def test_a_rule_calling_a_constraint_fires_only_where_it_holds(tmp_path) -> None:
    fired = run_rules(model_from_text(MODEL.format(dtype="float")), RULES, tmp_path)
    assert op_types(fired.proto) == ["Relu"]
    kept = run_rules(model_from_text(MODEL.format(dtype="int64")), RULES, tmp_path)
    assert op_types(kept.proto) == ["Relu", "Relu"]


def test_why_not_names_the_constraint_and_its_failing_line(tmp_path, capsys) -> None:
    rules = tmp_path / "rules.rw"
    rules.write_text(RULES)
    model = tmp_path / "m.onnx"
    onnx.save(model_from_text(MODEL.format(dtype="int64")), model)
    assert main([str(model), "--rules", str(rules), "--why-not", "relu_relu"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[-1] == (
        f"  <Relu>(y): where line 20: `same_float_shape(y, x)` is false: {rules}:9: "
        f"`is_float(x)`; `is_float(x)` is false: {rules}:4: `dtype(x) in [...]` "
        '(dtype(x) is "int64") (matched 3 line(s) first)'
    )


def test_why_not_explains_unknown_facts_with_the_values_seen(tmp_path, capsys) -> None:
    rules = tmp_path / "rules.rw"
    rules.write_text(
        "constraint same_rows(a, b) {\n  shape(a)[0] == shape(b)[0]\n}\n"
        "# a - b -> a\nrule r {\n  match {\n    y = Sub (a, b)\n  }\n"
        "  where {\n    rank(a) == 2 and same_rows(a, b)\n  }\n  rewrite {\n    y = a\n  }\n}\n"
    )
    model = tmp_path / "m.onnx"
    onnx.save(
        model_from_text(
            """<ir_version: 8, opset_import: ["" : 17]>
            g (float[N, 3] a, float[M, 3] b) => (float[?, 3] y) {
                y = Sub (a, b)
            }"""
        ),
        model,
    )
    assert main([str(model), "--rules", str(rules), "--why-not", "r"]) == 0
    last = capsys.readouterr().out.splitlines()[-1]
    # Two dims named differently may still be equal at run time: unknown, not false.
    assert last == (
        f"  <Sub>(y): where line 10: `same_rows(a, b)` is unknown (a fact is not known): "
        f'{rules}:2: `shape(a)[0] == shape(b)[0]` (shape(a)[0] is "N", shape(b)[0] is "M") '
        "(matched 2 line(s) first)"
    )


def test_why_not_reports_the_operand_order_the_rule_writes(tmp_path, capsys) -> None:
    # Mul is commutative: both operand orders fail on the same where line; the report is the
    # one for the order written (x = a), not the order tried last (x = b).
    rules = tmp_path / "rules.rw"
    rules.write_text(
        "# x * c -> x\nrule r {\n  match {\n    y = Mul (x, c)\n  }\n"
        "  where {\n    rank(x) == 3\n  }\n  rewrite {\n    y = x\n  }\n}\n"
    )
    model = tmp_path / "m.onnx"
    onnx.save(
        model_from_text(
            """<ir_version: 8, opset_import: ["" : 17]>
            g (float[2, 3] a, float[3] b) => (float[2, 3] y) {
                y = Mul (a, b)
            }"""
        ),
        model,
    )
    assert main([str(model), "--rules", str(rules), "--why-not", "r"]) == 0
    last = capsys.readouterr().out.splitlines()[-1]
    assert last == (
        "  <Mul>(y): where line 7: `rank(x) == 3` is false (rank(x) is 2) (matched 2 line(s) first)"
    )
