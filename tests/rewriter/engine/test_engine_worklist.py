"""The worklist revisits what a rewrite can enable, and loaded rule sets are reused."""

from __future__ import annotations

import os

import numpy as np
import onnx.parser

import ir
import rewriter
from rewriter.api import load_rules
from tests.helpers import random_feeds, run_rules, session


def _op_types(proto: onnx.ModelProto) -> list[str]:
    return [n.op_type for n in proto.graph.node]


def test_a_rewrite_that_drops_a_use_revisits_rules_downstream_of_that_value(tmp_path):
    # `t` has two users, so `abs_neg` (uses(t) == 1) cannot fire at first. Rewriting the Mul
    # by zero away leaves `t` one use; the Abs downstream of its producer must be tried again
    # although the rewrite created nothing and touched no node next to the Abs.
    model = onnx.parser.parse_model(
        """<ir_version: 8, opset_import: ["" : 17]>
        g (float[2, 3] a) => (float[2, 3] y, float[2, 3] m) <float[2, 3] zeros = {0,0,0,0,0,0}> {
            t = Neg (a)
            y = Abs (t)
            m = Mul (t, zeros)
        }"""
    )
    rules = """
    # x * 0 -> 0 (the zeros already have the result's shape)
    rule mul_zero: y = Mul (x, z) => y = z where is_const(z) and all(value(z) == 0) and shape(y) == shape(z)
    # abs(-a) -> abs(a), when nothing else reads -a
    rule abs_neg {
      match {
        t = Neg (a)
        y = Abs (t)
      }
      where {
        uses(t) == 1
      }
      rewrite {
        y = Abs (a)
      }
    }
    """
    result = run_rules(model, rules, tmp_path)
    assert [e.rule for e in result.trace.entries] == ["mul_zero", "abs_neg"]
    # m = zeros: the initializer takes the output's name (no Identity); y = Abs(a)
    assert _op_types(result.proto) == ["Abs"]
    ir.verify(result.model)
    feeds = random_feeds(model)
    expected = session(model).run(None, feeds)
    actual = session(result.proto).run(None, feeds)
    for want, got in zip(expected, actual, strict=True):
        np.testing.assert_array_equal(want, got)


def test_a_match_three_lines_up_is_found_after_a_rewrite_at_its_top(tmp_path):
    # The anchor (Sigmoid) is three uses below the node the first rewrite replaces; the
    # three-line rule only matches once `Identity` is gone, so the walk must reach that far.
    model = onnx.parser.parse_model(
        """<ir_version: 8, opset_import: ["" : 17]>
        g (float[4] x) => (float[4] y) {
            i = Identity (x)
            a = Neg (i)
            b = Neg (a)
            y = Sigmoid (b)
        }"""
    )
    rules = """
    # Identity(x) -> x
    rule drop_identity: y = Identity (x) => y = x
    # sigmoid(-(-x)) -> sigmoid(x), only straight from a graph input
    rule sigmoid_double_neg {
      match {
        a = Neg (x)
        b = Neg (a)
        y = Sigmoid (b)
      }
      where {
        uses(a) == 1 and uses(b) == 1
      }
      rewrite {
        y = Sigmoid (x)
      }
    }
    """
    result = run_rules(model, rules, tmp_path)
    assert [e.rule for e in result.trace.entries] == ["drop_identity", "sigmoid_double_neg"]
    assert _op_types(result.proto) == ["Sigmoid"]


def test_loading_the_same_unchanged_files_returns_the_same_rule_set(tmp_path):
    path = tmp_path / "rules.rw"
    path.write_text("# x*1 -> x\nrule mul_one: y = Mul (x, 1.0) => y = x\n")
    first = load_rules([path])
    assert load_rules([path]) is first
    assert load_rules(None) is load_rules(None)


def test_an_edited_rule_file_is_loaded_again(tmp_path):
    path = tmp_path / "rules.rw"
    path.write_text("# x*1 -> x\nrule mul_one: y = Mul (x, 1.0) => y = x\n")
    first = load_rules([path])
    path.write_text(
        "# x*1 -> x\nrule mul_one: y = Mul (x, 1.0) => y = x\n"
        "# x+0 -> x\nrule add_zero: y = Add (x, 0.0) => y = x\n"
    )
    stat = path.stat()
    # Same size class of edit within one mtime tick must still be seen: bump the mtime.
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    second = load_rules([path])
    assert [r.name for r in first.rules] == ["mul_one"]
    assert [r.name for r in second.rules] == ["mul_one", "add_zero"]


def test_rewriting_twice_with_the_library_gives_identical_models():
    model = onnx.parser.parse_model(
        """<ir_version: 8, opset_import: ["" : 17]>
        g (float[2, 3] x) => (float[2, 3] y) <float one = {1.0}> {
            t = Identity (x)
            y = Mul (t, one)
        }"""
    )
    first = rewriter.rewrite(model)
    second = rewriter.rewrite(model)
    assert first.proto.SerializeToString() == second.proto.SerializeToString()
    assert _op_types(first.proto) == ["Identity"]
