"""The dim algebra: canonical forms, equality, floor division, minimum, printing."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ir._symbolic_dims import (
    DimExpr,
    assume_at_most,
    const,
    exact_quotient,
    from_dim,
    is_at_least,
    minimum,
    product,
    symbol,
    to_dim,
)

batch = symbol("batch")
seq = symbol("seq")


def test_sums_and_products_are_canonical_whatever_the_order() -> None:
    assert batch * seq == seq * batch
    assert str(batch * seq) == str(seq * batch) == "batch*seq"
    assert (batch + seq) * 2 == 2 * seq + batch * 2
    assert str((batch + 1) * (seq - 1)) == "batch*seq - batch + seq - 1"


def test_terms_cancel_to_a_constant() -> None:
    assert batch - batch == const(0)
    assert (batch + 3 - batch).as_int() == 3
    assert str(seq * seq - seq * seq + 2) == "2"


def test_distinct_symbols_are_never_equal() -> None:
    assert batch != seq
    assert str(batch) != str(seq)
    assert (batch - seq).as_int() is None


def test_exact_floor_division_divides_the_coefficients() -> None:
    assert (4 * batch + 8) // 4 == batch + 2
    assert str((6 * batch * seq) // 3) == "2*batch*seq"


def test_inexact_floor_division_keeps_a_canonical_floor_atom() -> None:
    # Conv(k=3, stride 2, pads 1): floor((L + 2 - 3) / 2) + 1 = floor((L + 1) / 2).
    conv = (seq + 2 - 3) // 2 + 1
    assert str(conv) == "floor((seq + 1)/2)"
    # Whole multiples move out of the floor; the constant left inside is in [0, d).
    assert (2 * seq + 7) // 2 == seq + 3
    assert str((3 * seq + 7) // 2) == "seq + floor((seq + 1)/2) + 3"
    # A common factor with the divisor is cancelled: floor(2x/4) = floor(x/2).
    assert (2 * seq) // 4 == seq // 2


def test_modulo_is_expressed_with_floor_division() -> None:
    assert (2 * seq + 5) % 2 == const(1)
    assert str(seq % 4) == "seq - 4*floor(seq/4)"


def test_ceildiv() -> None:
    assert str(seq.ceildiv(2)) == "floor((seq + 1)/2)"
    assert (4 * seq).ceildiv(4) == seq


def test_nonnegative_is_proved_from_coefficients() -> None:
    assert (batch * seq + 2 * seq).is_nonnegative()
    assert ((seq - 1) // 2).is_nonnegative() is False  # floor((seq + 1)/2) - 1
    assert not (seq - 1).is_nonnegative()


def test_minimum_keeps_the_provably_smaller_and_an_atom_otherwise() -> None:
    assert minimum(seq, seq + 1) == seq
    assert minimum(const(3), const(5)) == const(3)
    shorter = minimum(seq, const(128))
    assert shorter is not None
    assert str(shorter) == "min(seq, 128)"
    assert minimum(const(128), seq) == shorter
    assert minimum(seq - 1, const(4)) is None  # seq - 1 may be negative


def test_at_least_compares_minimums_argument_by_argument() -> None:
    past = symbol("past")
    end, start = minimum(past + seq, const(32)), minimum(past, const(32))
    assert end is not None
    assert start is not None
    assert is_at_least(end, start)
    assert not is_at_least(start, end)
    assert is_at_least(seq + 1, seq)
    assert not is_at_least(seq, batch)


def test_assuming_a_bound_drops_the_constants_it_reaches() -> None:
    past = symbol("past")
    end, start = minimum(past + seq, const(32)), minimum(past, const(32))
    assert end is not None
    assert start is not None
    assert assume_at_most(end - start, past + seq, 32) == seq
    assert assume_at_most(end - start, past + seq, 64) == end - start  # 64 does not reach 32
    assert assume_at_most(end - start, batch, 32) == end - start  # past is not below batch


def test_exact_quotient() -> None:
    assert exact_quotient(6 * batch * seq, 2 * seq) == 3 * batch
    assert exact_quotient(batch * seq * 64, const(64)) == batch * seq
    assert exact_quotient(batch + seq, batch + seq) == const(1)
    assert exact_quotient(batch * seq, 4 * seq) is None
    assert exact_quotient(batch + 1, batch) is None


def test_substitute_re_canonicalizes() -> None:
    expr = (symbol("unk__3") + 1) // 2
    assert expr.substitute({"unk__3": 2 * seq + 1}) == seq + 1
    assert product([batch, seq]).substitute({"seq": const(4)}) == 4 * batch


def test_dims_as_facts_carry() -> None:
    assert to_dim(const(4)) == 4
    assert to_dim(const(-1)) is None
    assert to_dim(batch) == "batch"
    assert to_dim(batch * seq) == "batch*seq"
    assert to_dim(None) is None
    assert from_dim("batch") == batch
    assert from_dim(-1) is None
    assert from_dim("") is None
    # A declared dim spelled like an expression stays one symbol.
    assert from_dim("a*b") == symbol("a*b")


def test_operators_refuse_other_types() -> None:
    with pytest.raises(TypeError):
        _ = batch + 1.5  # type: ignore[operator]
    with pytest.raises(ZeroDivisionError):
        _ = batch // 0


# properties: the algebra agrees with integer arithmetic ------------------------------------

NAMES = ("a", "b", "c")


@st.composite
def expressions(draw: st.DrawFn, depth: int = 3) -> DimExpr:
    """Random expressions over three symbols (floor division by small positive ints)."""
    if depth == 0 or draw(st.booleans()):
        if draw(st.booleans()):
            return const(draw(st.integers(-5, 5)))
        return symbol(draw(st.sampled_from(NAMES)))
    left = draw(expressions(depth - 1))
    op = draw(st.sampled_from(["+", "-", "*", "//", "%", "min"]))
    if op in ("//", "%"):
        divisor = draw(st.sampled_from([1, 2, 3, 4, -2]))
        return left // divisor if op == "//" else left % divisor
    right = draw(expressions(depth - 1))
    if op == "min":
        found = minimum(left, right)
        return found if found is not None else left
    return {"+": left + right, "-": left - right, "*": left * right}[op]


values = st.fixed_dictionaries({name: st.integers(0, 40) for name in NAMES})


def evaluate_text(text: str, env: dict[str, int]) -> int:
    """Evaluate printed text as Python (floor by `math.floor` of exact small quotients)."""
    result = eval(text, {"floor": math.floor, "min": min}, dict(env))
    return int(result)


@given(expressions(), values)
def test_printed_text_evaluates_like_the_expression(expr: DimExpr, env: dict[str, int]) -> None:
    assert evaluate_text(str(expr), env) == expr.evaluate(env)


@given(expressions(), expressions(), values)
def test_arithmetic_agrees_with_integers(a: DimExpr, b: DimExpr, env: dict[str, int]) -> None:
    x, y = a.evaluate(env), b.evaluate(env)
    assert (a + b).evaluate(env) == x + y
    assert (a - b).evaluate(env) == x - y
    assert (a * b).evaluate(env) == x * y
    assert (a // 3).evaluate(env) == x // 3
    assert (a % 3).evaluate(env) == x % 3
    assert (a // -2).evaluate(env) == x // -2


@given(expressions(), expressions(), values)
def test_equal_text_means_equal_values(a: DimExpr, b: DimExpr, env: dict[str, int]) -> None:
    if str(a) == str(b):
        assert a == b
        assert a.evaluate(env) == b.evaluate(env)


@given(expressions(), values)
def test_nonnegative_expressions_are_never_negative(expr: DimExpr, env: dict[str, int]) -> None:
    if expr.is_nonnegative():
        assert expr.evaluate(env) >= 0


@given(expressions(), expressions(), values)
def test_at_least_holds_for_every_value(a: DimExpr, b: DimExpr, env: dict[str, int]) -> None:
    if is_at_least(a, b):
        assert a.evaluate(env) >= b.evaluate(env)


@given(expressions(), expressions(), st.integers(0, 40), values)
def test_assuming_a_bound_keeps_the_value_where_it_holds(
    expr: DimExpr, bound: DimExpr, limit: int, env: dict[str, int]
) -> None:
    if bound.evaluate(env) <= limit:
        assert assume_at_most(expr, bound, limit).evaluate(env) == expr.evaluate(env)
