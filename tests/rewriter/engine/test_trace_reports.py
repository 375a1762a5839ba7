"""What the trace says: declined rewrites are not rollbacks; passes name what they changed."""

from __future__ import annotations

import json
from pathlib import Path

import onnx
import pytest

import ir
import rewriter
from rewriter.cli import main
from rewriter.engine._trace import Trace
from tests.helpers import assert_same_outputs, model_from_text, run_rules

IDENTITY_RULE = """
# Identity(x) -> x
rule eliminate_identity: y = Identity (x) => y = x
"""

# The Loop body passes its condition through: `cond_out = Identity (cond_in)` must stay.
LOOP_MODEL = """<ir_version: 8, opset_import: ["" : 17]>
main_graph (float[2] x) => (float[2] y) {
    n = Constant <value = int64 {3}> ()
    c = Constant <value = bool {1}> ()
    y = Loop (n, c, x) <body = body (int64 i, bool cond_in, float[2] acc) => (bool cond_out, float[2] acc_out) {
        cond_out = Identity (cond_in)
        t = Identity (acc)
        acc_out = Relu (t)
    }>
}"""

PASSES = """
pass fold_constants
pass eliminate_dead_code
pass eliminate_common_subexpressions
"""

# Foldable `cd`, dead `dead`, and `t2` computing the same as `t`.
PASSES_MODEL = """<ir_version: 8, opset_import: ["" : 17]>
main_graph (float[2] x) => (float[2] y) {
    c = Constant <value = float[2] {1.0, 2.0}> ()
    d = Constant <value = float[2] {1.0, 2.0}> ()
    cd = Add (c, d)
    t = Mul (x, cd)
    t2 = Mul (x, cd)
    dead = Neg (x)
    y = Add (t, t2)
}"""


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_passed_through_loop_condition_is_declined_not_rolled_back(tmp_path: Path) -> None:
    model = model_from_text(LOOP_MODEL)
    result = run_rules(model, IDENTITY_RULE, tmp_path)
    assert [(e.rule, e.graph) for e in result.trace.entries] == [("eliminate_identity", "body")]
    assert [s.reason for s in result.trace.skips] == [
        "graph output `cond_out` must stay an Identity of `cond_in`: nothing to do"
    ]
    loop = next(n for n in result.proto.graph.node if n.op_type == "Loop")
    body = loop.attribute[0].g
    assert [n.op_type for n in body.node] == ["Identity", "Relu"]
    ir.verify(result.model)
    assert_same_outputs(model, result.proto)


def test_cli_warns_of_no_rollback_for_a_declined_rewrite_and_why_not_says_declined(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "loop.onnx"
    onnx.save(model_from_text(LOOP_MODEL), source)
    rules = _write(tmp_path, "rules.rw", IDENTITY_RULE)
    out = tmp_path / "out.onnx"
    args = [str(source), "--rules", str(rules), "-o", str(out), "--explain", "--no-progress"]
    assert main(args) == 0
    captured = capsys.readouterr()
    assert "rolled back" not in captured.err
    assert "warning" not in captured.err
    assert "cond_out` must stay an Identity of `cond_in`: nothing to do" in captured.out
    assert main([str(source), "--rules", str(rules), "--why-not", "eliminate_identity"]) == 0
    why = capsys.readouterr().out
    assert "<Identity>(cond_out): matches, but the rewrite is declined: graph output" in why
    assert "<Identity>(t): matches\n" in why + "\n"


def test_pass_entries_name_the_graph_and_what_was_removed_and_added(tmp_path: Path) -> None:
    model = model_from_text(PASSES_MODEL)
    result = run_rules(model, PASSES, tmp_path)
    passes = [(e.rule, e.graph, e.matched, e.created) for e in result.trace.entries]
    assert passes == [
        ("fold_constants", "main_graph", ("<Add>(cd)",), ("%cd",)),
        (
            "eliminate_dead_code",
            "main_graph",
            ("<Neg>(dead)", "<Constant>(d)", "<Constant>(c)"),
            (),
        ),
        ("eliminate_common_subexpressions", "main_graph", ("<Mul>(t2)",), ("<Mul>(t)",)),
    ]
    assert all(e.kind == "pass" for e in result.trace.entries)
    assert [n.op_type for n in result.proto.graph.node] == ["Mul", "Add"]
    assert_same_outputs(model, result.proto)


def test_explain_and_json_say_what_a_pass_did_and_where(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "model.onnx"
    onnx.save(model_from_text(PASSES_MODEL), source)
    rules = _write(tmp_path, "rules.rw", PASSES)
    report = tmp_path / "report.json"
    out = tmp_path / "out.onnx"
    args = [str(source), "--rules", str(rules), "-o", str(out), "--explain", "--json", str(report)]
    assert main([*args, "--no-progress"]) == 0
    text = capsys.readouterr().out
    assert "fold_constants (built-in pass) in main_graph: <Add>(cd) -> %cd" in text
    assert (
        "eliminate_dead_code (built-in pass) in main_graph: "
        "<Neg>(dead), <Constant>(d), <Constant>(c) -> (removed)"
    ) in text
    assert "in main:" not in text
    assert "change(s)" not in text
    applied = json.loads(report.read_text())["trace"]["applied"]
    merge = next(e for e in applied if e["rule"] == "eliminate_common_subexpressions")
    assert merge["graph"] == "main_graph"
    assert merge["matched"] == ["<Mul>(t2)"]
    assert merge["created"] == ["<Mul>(t)"]
    assert_same_outputs(onnx.load(source), onnx.load(out))


def test_long_pass_listings_are_shortened_in_explain_only(tmp_path: Path) -> None:
    lines = [f"    d{i} = Neg (x)" for i in range(12)]
    model = model_from_text(
        '<ir_version: 8, opset_import: ["" : 17]>\n'
        "main_graph (float[2] x) => (float[2] y) {\n" + "\n".join(lines) + "\n    y = Relu (x)\n}"
    )
    result = run_rules(model, "pass eliminate_dead_code\n", tmp_path)
    (entry,) = result.trace.entries
    assert len(entry.matched) == 12
    assert entry.describe().endswith(", +4 more -> (removed)")


def test_whole_model_entries_name_no_graph() -> None:
    (entry,) = Trace.conversion(17, 18).entries
    assert entry.describe() == "convert_version (onnx version converter): opset 17 -> opset 18"


OPSET_RULES = """
# Relu(x) -> LeakyRelu(x, 0) (tests the summary of skips)
rule newer_a requires opset >= 23: y = Relu (x) => y = LeakyRelu <alpha = 0.0> (x)
# the same
rule newer_b requires opset >= 23: y = Relu (x) => y = LeakyRelu <alpha = 0.0> (x)
# the same
rule older requires opset < 13: y = Relu (x) => y = LeakyRelu <alpha = 0.0> (x)
# Relu(x) -> Gelu(x) is wrong; it is skipped before matching, as Gelu needs opset 20
rule emits_newer: y = Relu (x) => y = Gelu (x)
"""

RELU_MODEL = """<ir_version: 8, opset_import: ["" : 17]>
main_graph (float[2] x) => (float[2] y) {
    y = Relu (x)
}"""


def test_rules_skipped_for_the_opset_are_one_line_of_explain(tmp_path: Path, capsys) -> None:
    rules = _write(tmp_path, "r.rw", OPSET_RULES)
    source = tmp_path / "m.onnx"
    onnx.save(model_from_text(RELU_MODEL), source)
    out = tmp_path / "out.onnx"
    json_path = tmp_path / "trace.json"
    args = [str(source), "--rules", str(rules), "-o", str(out), "--explain", "--no-progress"]
    assert main([*args, "--json", str(json_path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "no rule fired"
    assert lines[1] == (
        "skipped for the model's opset: 4 rules (2 need opset >= 23, 1 needs opset < 13, "
        "1 needs opset >= 20); --json lists each"
    )
    assert "skipped:" not in lines
    skipped = json.loads(json_path.read_text())["trace"]["skipped"]
    assert sorted(s["rule"] for s in skipped) == ["emits_newer", "newer_a", "newer_b", "older"]


# Relu then Neg: `relu_neg` (opset 18) is ruled out at opset 14, `relu_abs` applies and takes
# the Relu, so only a match on the model before any rewrite finds `relu_neg`.
NEWER_OPSET_RULES = """
rule relu_abs: y = Relu (x) => y = Abs (x)
rule relu_neg requires opset >= 18 {
  match {
    r = Relu (x)
    y = Neg (r)
  }
  rewrite {
    y = Neg (x)
  }
}
"""
NEWER_OPSET_MODEL = """<ir_version: 8, opset_import: ["" : 14]>
g (float[2] x) => (float[2] y) {
    r = Relu (x)
    y = Neg (r)
}"""


def test_rules_a_newer_opset_allows_are_matched_once_before_any_rewrite(tmp_path):
    model = model_from_text(NEWER_OPSET_MODEL)
    options = rewriter.RewriteOptions(passes=(), match_newer_opset=True)
    result = run_rules(model, NEWER_OPSET_RULES, tmp_path, options)
    assert [e.rule for e in result.trace.entries] == ["relu_abs"]
    (found,) = result.trace.newer_opset_matches
    assert (found.rule, found.graph, len(found.nodes)) == ("relu_neg", "", 2)
    assert result.trace.newer_opset_rules() == {"relu_neg": 18}
    # Not asked: nothing matched beyond the run's own rules.
    plain = run_rules(model, NEWER_OPSET_RULES, tmp_path)
    assert plain.trace.newer_opset_matches == ()
