"""The rule IR's flat encoding reads back equal values, shares what was shared, refuses others."""

from __future__ import annotations

import json
import math

import pytest

from rewriter import rules
from rewriter.api import load_rules


def _round_trip(value: object) -> object:
    return rules.decode_ir(json.loads(json.dumps(rules.encode_ir(value))))


def test_the_shipped_library_reads_back_equal() -> None:
    library = load_rules(None)
    value = (library.rules, library.passes, tuple(library.constraints.items()))
    assert _round_trip(value) == value


def test_a_rule_built_in_python_reads_back_equal_with_its_spans() -> None:
    built = rules.rule(
        "pow_two_to_mul",
        match=[rules.node("Pow", "x", 2.0, out="y")],
        where=[rules.is_in(rules.call("dtype", "x"), rules.lit(["float", "double"]))],
        rewrite=[rules.new_node("Mul", "x", "x", out="y")],
    )
    back = _round_trip(built)
    assert back == built
    assert isinstance(back, rules.Rule)
    assert back.span == built.span


def test_lists_tuples_and_literals_keep_their_kind() -> None:
    value = ([1, 2], (1, 2), True, 1, 1.5, None, "s", -7, [])
    back = _round_trip(value)
    assert back == value
    assert [type(item) for item in back] == [type(item) for item in value]  # type: ignore[attr-defined]
    nan = _round_trip((math.inf, -math.inf, math.nan))
    assert nan[:2] == (math.inf, -math.inf)
    assert math.isnan(nan[2])


def test_an_object_reached_twice_is_one_object_again() -> None:
    name = rules.Name("x")
    back = _round_trip((name, (name, rules.Name("x"))))
    assert back[0] is back[1][0]  # type: ignore[index]
    assert back[1][1] == name
    assert back[1][1] is not back[0]


@pytest.mark.parametrize("value", [{"a": 1}, print, b"bytes", object()])
def test_what_is_no_rule_ir_value_is_refused(value: object) -> None:
    with pytest.raises(TypeError, match="is not a rule IR value"):
        rules.encode_ir((rules.Name("x"), value))


def test_tokens_that_are_no_encoding_raise() -> None:
    with pytest.raises(ValueError, match="unknown marker"):
        rules.decode_ir({"paths": [], "spans": [], "tokens": [-9]})
    with pytest.raises(IndexError):
        rules.decode_ir({"paths": [], "spans": [], "tokens": [10_000]})
