"""Grammar decisions: newlines, `;`, keywords as names, literals, precedence, spans."""

from __future__ import annotations

import pytest

from rewriter._errors import Span
from rewriter.dsl import (
    AliasStmt,
    AttrEntry,
    Attribute,
    Binary,
    BoolOp,
    Call,
    Coalesce,
    Compare,
    Conditional,
    Const,
    Index,
    LetStmt,
    ListExpr,
    Name,
    NodeStmt,
    OpRef,
    OutputVar,
    PassDecl,
    RewriteBlock,
    Rule,
    Slice,
    Unary,
    dump,
    parse,
)


def _rule(text: str) -> Rule:
    items = parse(text).items
    assert len(items) == 1
    rule = items[0]
    assert isinstance(rule, Rule)
    return rule


def _where(expression: str) -> object:
    return _rule(f"rule r: y = Relu (x) => y = x where {expression}").where[0]


def _let(expression: str) -> object:
    body = f"match {{\n  y = Relu (x)\n }}\n rewrite {{\n  let v = {expression}\n  y = v\n }}"
    rule = _rule(f"rule r {{\n {body}\n}}")
    assert isinstance(rule.rewrite, RewriteBlock)
    stmt = rule.rewrite.stmts[0]
    assert isinstance(stmt, LetStmt)
    return stmt.expr


# -- newlines and separators -------------------------------------------------------------------


def test_lists_attributes_and_arguments_may_span_lines() -> None:
    text = """rule r {
  match {
    y = Transpose <
      perm = p,  # the permutation
    > (
      x,
    )
  }
  rewrite {
    let v = concat([
      1,
      2,
    ], axis = 0)
    y = Transpose <perm = [
      0, 1,
    ]> (x)
  }
}"""
    one_line = (
        "rule r { match { y = Transpose <perm = p> (x) }; rewrite { "
        "let v = concat([1, 2], axis = 0); y = Transpose <perm = [0, 1]> (x) } }"
    )
    assert parse(text).items == parse(one_line).items


def test_an_expression_continues_after_a_binary_operator() -> None:
    assert _where('rank(x) == 3 and\n  dtype(x) == "float"') == _where(
        'rank(x) == 3 and dtype(x) == "float"'
    )


def test_semicolons_separate_statements_like_newlines() -> None:
    a = parse("rule a: y = Relu (x) => y = x; rule b: y = Relu (x) => y = x")
    b = parse("rule a: y = Relu (x) => y = x\nrule b: y = Relu (x) => y = x")
    assert a == b


def test_blank_lines_comments_and_leading_newlines_are_ignored() -> None:
    text = "\n\n# a comment\n\n  rule a: y = Relu (x) => y = x  # trailing\n\n\n"
    file = parse(text)
    assert len(file.items) == 1
    assert [c.text for c in file.comments] == ["# a comment", "# trailing"]
    assert file.comments[1].span == Span("<string>", 5, 34, 5, 44)


def test_empty_file_parses() -> None:
    assert parse("").items == ()
    assert parse("# only a comment").items == ()


def test_sections_may_come_in_any_order() -> None:
    ordered = "rule r {\n match { y = Relu (x) }\n where { rank(x) == 1 }\n rewrite { y = x }\n}"
    shuffled = "rule r {\n rewrite { y = x }\n where { rank(x) == 1 }\n match { y = Relu (x) }\n}"
    assert parse(ordered) == parse(shuffled)


@pytest.mark.parametrize(
    "header",
    ["priority 5 requires opset >= 17", "requires opset >= 17 priority 5"],
)
def test_priority_and_requires_in_either_order(header: str) -> None:
    block = _rule(f"rule r {header} {{ match {{ y = Relu (x) }} rewrite {{ y = x }} }}")
    line = _rule(f"rule r {header}: y = Relu (x) => y = x")
    for rule in (block, line):
        assert rule.priority == 5
        assert [(r.domain, r.op, r.version) for r in rule.requires] == [("", ">=", 17)]


@pytest.mark.parametrize(
    "header", ["assumes finite priority 5", "priority 5 assumes finite", "assumes finite"]
)
def test_assumes_finite_is_read_in_any_position(header: str) -> None:
    block = _rule(f"rule r {header} {{ match {{ y = Relu (x) }} rewrite {{ y = x }} }}")
    line = _rule(f"rule r {header}: y = Relu (x) => y = x")
    assert block.assumes_finite
    assert line.assumes_finite
    assert not _rule("rule r: y = Relu (x) => y = x").assumes_finite


@pytest.mark.parametrize(
    ("clause", "metric", "comparison", "bound"),
    [
        ("approximate snr >= 30", "snr", ">=", 30.0),
        ("approximate cosine >= 0.999", "cosine", ">=", 0.999),
        ("approximate max_rel <= 2e-2", "max_rel", "<=", 0.02),
    ],
)
def test_approximate_declares_a_bound(
    clause: str, metric: str, comparison: str, bound: float
) -> None:
    block = _rule(f"rule r priority 1 {clause} {{ match {{ y = Relu (x) }} rewrite {{ y = x }} }}")
    line = _rule(f"rule r {clause} assumes finite: y = Relu (x) => y = x")
    for rule in (block, line):
        assert rule.approximate is not None
        assert (rule.approximate.metric, rule.approximate.comparison) == (metric, comparison)
        assert rule.approximate.bound == bound
    assert line.assumes_finite
    assert _rule("rule r: y = Relu (x) => y = x").approximate is None


@pytest.mark.parametrize(
    ("header", "finite", "nonempty"),
    [
        ("assumes nonempty", False, True),
        ("assumes finite, nonempty", True, True),
        ("assumes nonempty priority 2 assumes finite", True, True),
    ],
)
def test_assumptions_are_listed_or_repeated(header: str, finite: bool, nonempty: bool) -> None:
    block = _rule(f"rule r {header} {{ match {{ y = Relu (x) }} rewrite {{ y = x }} }}")
    line = _rule(f"rule r {header}: y = Relu (x) => y = x")
    for rule in (block, line):
        assert (rule.assumes_finite, rule.assumes_nonempty) == (finite, nonempty)


def test_negative_priority() -> None:
    assert _rule("rule r priority -3: y = Relu (x) => y = x").priority == -3


# -- keywords ----------------------------------------------------------------------------------


def test_keywords_work_as_attribute_names() -> None:
    rule = _rule("rule r: y = Cast <to = t> (x) => y = Cast <to = 1, from = 2> (x) where n.to == 1")
    assert rule.match.patterns[0].attrs == (AttrEntry("to", Name("t")),)
    assert isinstance(rule.rewrite, RewriteBlock)
    stmt = rule.rewrite.stmts[0]
    assert isinstance(stmt, NodeStmt)
    assert stmt.attrs == (AttrEntry("to", Const(1)), AttrEntry("from", Const(2)))
    assert rule.where[0] == Compare("==", Attribute(Name("n"), "to"), Const(1))


def test_keywords_work_as_keyword_arguments_and_pass_options() -> None:
    assert _where("f(in = 1)") == Call("f", (), (("in", Const(1)),))
    decl = parse("pass p { to = 1 }").items[0]
    assert decl == PassDecl("p", (("to", Const(1)),))


# -- literals and expressions ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("1", 1),
        ("-1", -1),
        ("+2", 2),
        ("1.5", 1.5),
        ("1e-5", 1e-5),
        ("-2.5E+3", -2500.0),
        (".5", 0.5),
        ("3.", 3.0),
        ("9223372036854775807", 2**63 - 1),
        ("-9223372036854775808", -(2**63)),
        ("-(9223372036854775808)", -(2**63)),
        ('"a\\"b\\\\c\\n"', 'a"b\\c\n'),
        ("true", True),
        ("false", False),
        ("none", None),
    ],
)
def test_literals(text: str, value: object) -> None:
    assert _where(text) == Const(value)  # type: ignore[arg-type]


def test_int64_bounds_are_accepted_in_match_literals_and_headers() -> None:
    rule = _rule(
        "rule r priority -9223372036854775808: "
        "y = Mul (x, -9223372036854775808) => y = x where 9223372036854775807 > 0"
    )
    assert rule.priority == -(2**63)
    assert dump(rule.match).count("-9223372036854775808") == 1


def test_lists_nest_and_allow_a_trailing_comma() -> None:
    assert _where("[[1, -2], [], 3,]") == ListExpr(
        (ListExpr((Const(1), Const(-2))), ListExpr(()), Const(3))
    )


def test_negative_literal_binds_tighter_than_power_only_when_written_so() -> None:
    assert _where("-2 ** 2") == Unary("-", Binary("**", Const(2), Const(2)))
    assert _where("(-2) ** 2") == Binary("**", Const(-2), Const(2))
    assert _where("2 ** -1") == Binary("**", Const(2), Const(-1))
    assert _where("- -x") == Unary("-", Unary("-", Name("x")))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("a + b * c", "(+ a (* b c))"),
        ("a - b - c", "(- (- a b) c)"),
        ("a ** b ** c", "(** a (** b c))"),
        ("a // b % c", "(% (// a b) c)"),
        ("a ?? b ?? c", "(?? a (?? b c))"),
        ("a ?? b + c == d", "(== (?? a (+ b c)) d)"),
        ("not a == b", "(not (== a b))"),
        ("a or b and c", "(or a (and b c))"),
        ("not a and b", "(and (not a) b)"),
        ("a in b", "(in a b)"),
        ("a not in b", "(not in a b)"),
        ("a < b <= c", "(<= (< a b) c)"),
        ("a if c else b if d else e", "(if c a (if d b e))"),
        ("x[1][2:]", "([] ([] x 1) (: 2 () ()))"),
        ("x[::2]", "([] x (: () () 2))"),
        ("x[:-1]", "([] x (: () -1 ()))"),
        ("conv.group * 2", "(* (. conv group) 2)"),
        ("f(a, b = 2)", "(call f a b=2)"),
        ("shape(x)[0]", "([] (call shape x) 0)"),
    ],
)
def test_precedence_is_pythons(text: str, expected: str) -> None:
    assert dump(_let(text)) == expected  # type: ignore[arg-type]


def test_conditional_and_coalesce_nodes() -> None:
    assert _where("a if c else b") == Conditional(Name("c"), Name("a"), Name("b"))
    assert _where("a ?? b") == Coalesce(Name("a"), Name("b"))
    assert _where("a and b or c") == BoolOp("or", BoolOp("and", Name("a"), Name("b")), Name("c"))


def test_index_with_slice() -> None:
    assert _where("x[1:2:3]") == Index(Name("x"), Slice(Const(1), Const(2), Const(3)))


# -- rewrite lines -----------------------------------------------------------------------------


def _stmt(text: str) -> object:
    rule = _rule(f"rule r: y = Relu (x) => {text}")
    assert isinstance(rule.rewrite, RewriteBlock)
    return rule.rewrite.stmts[0]


def test_capitalized_or_qualified_calls_are_nodes() -> None:
    assert _stmt("y = Relu (x)") == NodeStmt((OutputVar("y"),), OpRef("", "Relu"), (), (Name("x"),))
    stmt = _stmt("y = com.microsoft.Gelu(x) as g")
    assert isinstance(stmt, NodeStmt)
    assert stmt.op == OpRef("com.microsoft", "Gelu")
    assert stmt.as_name == "g"


def test_lower_case_calls_are_aliases_of_computed_values() -> None:
    assert _stmt('y = const(shape(x), "int64")') == AliasStmt(
        "y", Call("const", (Call("shape", (Name("x"),)), Const("int64")))
    )


def test_empty_attribute_list_makes_a_node_of_any_name() -> None:
    stmt = _stmt("y = myop <> (x)")
    assert isinstance(stmt, NodeStmt)
    assert stmt.op == OpRef("", "myop")


def test_alias_of_an_expression() -> None:
    assert _stmt("y = a < b") == AliasStmt("y", Compare("<", Name("a"), Name("b")))


# -- spans -------------------------------------------------------------------------------------


def test_spans_point_at_the_source() -> None:
    text = "rule fold: y = Mul (x, 1.0) => y = x\n"
    rule = _rule(text)
    assert rule.name_span == Span("<string>", 1, 6, 1, 10)
    pattern = rule.match.patterns[0]
    assert pattern.span == Span("<string>", 1, 12, 1, 28)
    assert pattern.op.alternatives[0].span == Span("<string>", 1, 16, 1, 19)
    assert pattern.inputs[1].span == Span("<string>", 1, 24, 1, 27)


def test_every_node_has_a_span_in_the_file() -> None:
    text = (
        "rule r priority 2 requires opset >= 1 {\n"
        "  match {\n    y = Conv <...> (x, w, b?) as c\n  }\n"
        "  where {\n    c.group == 1 and -rank(x)[0:2] != none ?? 1\n  }\n"
        "  rewrite {\n    let k = f(x, a = [1, 2]) if true else 2\n"
        "    y = Conv <...c, group = 1> (x, w, k)\n  }\n}\n"
    )
    file = parse(text, "f.rw")
    missing = [type(n).__name__ for n in _walk(file) if _span_of(n).line == 0]
    assert missing == []


def _span_of(node: object) -> Span:
    span = getattr(node, "span", None)
    return span if isinstance(span, Span) else Span("", 1, 1, 1, 1)


def _walk(node: object) -> list[object]:
    import dataclasses

    found = [node]
    if dataclasses.is_dataclass(node):
        for field in dataclasses.fields(node):
            value = getattr(node, field.name)
            for item in value if isinstance(value, tuple) else (value,):
                if isinstance(item, tuple):
                    for sub in item:
                        found.extend(_walk(sub))
                elif dataclasses.is_dataclass(item) and not isinstance(item, Span):
                    found.extend(_walk(item))
    return found
