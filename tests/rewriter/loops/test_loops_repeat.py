"""Explicit `match repeat (...) from h to out { ... } rewrite loop` rules."""

from __future__ import annotations

import pytest

import ir
from rewriter import rules
from rewriter.dsl import Lowering, Rule, parse
from rewriter.engine import Matcher
from rewriter.loops import apply_repeat_rules
from tests.rewriter.loops.loop_models import (
    assert_same_on,
    dense_chain,
    lift,
    ops,
    random_feeds,
)

_DENSE = """
# Roll MatMul -> Add -> Relu blocks: y_k = relu(y_{k-1} @ W_k + b_k).
rule roll_dense priority 0 {
  match repeat (n >= COUNT) from h to out {
    m = MatMul (h, w)
    a = Add (m, b)
    out = Relu (a)
  }
  rewrite loop
}
"""


def _rule(text: str = _DENSE, count: int = 3) -> rules.Rule:
    parsed = parse(text.replace("COUNT", str(count)), "dense.rw")
    rule = parsed.items[0]
    assert isinstance(rule, Rule)
    return Lowering({}).rule(rule)


def _apply(model: ir.Model, rule: rules.Rule):
    return apply_repeat_rules(model, [rule], Matcher(model.opset_imports))


def test_a_repeat_rule_rolls_the_chain_it_names():
    proto = dense_chain(4)
    model = lift(proto)
    result = _apply(model, _rule())
    ir.verify(model)
    assert len(result.entries) == 1
    entry = result.entries[0]
    assert entry.rule == "roll_dense"
    assert entry.location == "dense.rw:3"
    assert len(entry.matched) == 12
    assert ops(model.graph) == {"Loop": 1}
    loop = next(iter(model.graph))
    assert loop.metadata_props["rewriter.rule"] == "roll_dense"
    assert_same_on(proto, model, random_feeds(proto))


def test_a_side_input_must_be_one_value():
    proto = dense_chain(4, side_input=True)
    text = _DENSE.replace("a = Add (m, b)", "a0 = Add (m, b)\n    a = Add (a0, s)")
    model = lift(proto)
    result = _apply(model, _rule(text))
    assert len(result.entries) == 1
    assert_same_on(proto, model, random_feeds(proto))


def test_a_chain_shorter_than_the_count_is_left_alone():
    model = lift(dense_chain(4))
    result = _apply(model, _rule(count=5))
    assert not result.entries
    assert "Loop" not in ops(model.graph)


def test_blocks_that_differ_are_skipped_with_a_reason():
    text = _DENSE.replace("out = Relu (a)", "out = LeakyRelu (a)")
    model = lift(dense_chain(4, alphas=[0.1, 0.1, 0.2, 0.1]))
    result = _apply(model, _rule(text))
    assert not result.entries
    assert len(result.skips) == 1
    assert "differs" in result.skips[0].reason
    assert result.skips[0].location == "dense.rw:3"


@pytest.mark.parametrize("odd", [0, 4])
def test_the_longest_run_of_equal_blocks_rolls_when_one_block_differs(odd):
    # A strided first (or last) block in a stack: the four equal blocks still make a Loop.
    text = _DENSE.replace("out = Relu (a)", "out = LeakyRelu (a)")
    alphas = [0.2 if k == odd else 0.1 for k in range(5)]
    proto = dense_chain(5, alphas=alphas)
    model = lift(proto)
    result = _apply(model, _rule(text))
    ir.verify(model)
    assert len(result.entries) == 1
    assert len(result.entries[0].matched) == 12  # four blocks of three nodes
    assert ops(model.graph) == {"Loop": 1, "MatMul": 1, "Add": 1, "LeakyRelu": 1}
    (skip,) = result.skips
    assert skip.reason.startswith("rolled 4 of 5 blocks; 1 left out: ")
    assert "differs" in skip.reason
    assert_same_on(proto, model, random_feeds(proto))


def test_a_block_leaking_an_intermediate_does_not_match():
    model = lift(dense_chain(4, leak_block=1))
    result = _apply(model, _rule())
    assert not result.entries
    assert "Loop" not in ops(model.graph)


def test_unknown_requirements_skip_the_rule():
    model = lift(dense_chain(4))
    result = apply_repeat_rules(
        model,
        [_rule()],
        Matcher(model.opset_imports),
        applicability=lambda compiled: f"cannot apply {compiled.name}",
    )
    assert not result.entries
    assert result.skips[0].reason == "cannot apply roll_dense"
