"""Replaying a prefix of a run by steps: a rule's rewrite and a pass's change count alike.

Bisection (`rewrite --verify`) replays prefixes of a run to find the step that broke it; when
a built-in pass made the difference, a prefix must be able to end right after the pass's
change (and before it), or the rule rewrite before it is blamed.
"""

from __future__ import annotations

import rewriter
from rewriter import engine, rules
from tests.helpers import model_from_text, op_types, run_rules

MODEL = """<ir_version: 8, opset_import: ["" : 17]>
g (float[2, 3] x) => (float[2, 3] y) {
    four = Constant <value = float {4.0}> ()
    two = Sqrt (four)
    a = Relu (x)
    b = Relu (a)
    y = Add (b, two)
}"""

RULES = """
rule double_relu {
  match {
    t = Relu(x)
    y = Relu(t)
  }
  rewrite {
    y = Relu(x)
  }
}
"""


def _run(tmp_path, replay_steps: int | None = None) -> rewriter.RewriteResult:
    options = rewriter.RewriteOptions(
        passes=(rules.PassUse("fold_constants"), rules.PassUse("eliminate_dead_code")),
        replay_steps=replay_steps,
    )
    return run_rules(model_from_text(MODEL), RULES, tmp_path, options)


def test_each_rule_rewrite_and_each_changing_pass_run_is_one_step(tmp_path):
    trace = _run(tmp_path).trace
    steps = [(e.step, e.kind, e.rule) for e in trace.entries]
    assert steps == [
        (1, "rule", "double_relu"),
        (2, "pass", "fold_constants"),
        (3, "pass", "eliminate_dead_code"),
    ]
    assert trace.steps == 3
    assert [e.rule for e in trace.step_entries(2)] == ["fold_constants"]


def test_a_prefix_ends_before_or_after_a_pass_change(tmp_path):
    untouched = _run(tmp_path, 0)
    assert op_types(untouched.model) == ["Constant", "Sqrt", "Relu", "Relu", "Add"]
    assert untouched.trace.stop_reason is engine.StopReason.REPLAY_LIMIT
    assert untouched.trace.entries == ()
    rule_only = _run(tmp_path, 1)
    assert op_types(rule_only.model) == ["Constant", "Sqrt", "Relu", "Add"]
    assert rule_only.trace.stop_reason is engine.StopReason.REPLAY_LIMIT
    folded = _run(tmp_path, 2)
    assert "Sqrt" not in op_types(folded.model)
    assert [e.rule for e in folded.trace.entries] == ["double_relu", "fold_constants"]
    every = _run(tmp_path, 3)
    assert op_types(every.model) == op_types(_run(tmp_path).model) == ["Relu", "Add"]
