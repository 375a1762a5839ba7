"""The formatter: canonical layout, comments kept, idempotent, never changes the AST."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from rw_text_strategies import rule_files

from rewriter.dsl import format_file, parse

EXAMPLES = Path(__file__).parent / "examples"
ROOT = Path(__file__).resolve().parents[3]
PROPERTY = settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))


def comment_anchors(text: str) -> Counter[tuple[str, str]]:
    """Each comment with the code it follows on its line ("" when it is alone on its line).

    The code is the last word or symbol before the comment, ignoring other comments,
    separators and closing parentheses, which the formatter may add, drop or move to a line
    of their own (`a; b  # c`, `(a)  # c`, `a,  # c`, `f(a,\\n b)  # c`).
    """
    lines = text.split("\n")
    comments = parse(text).comments
    for comment in comments:  # blank the comments out, keeping every column
        row = lines[comment.span.line - 1]
        start = comment.span.col - 1
        lines[comment.span.line - 1] = row[:start] + " " * (len(row) - start)
    anchors: Counter[tuple[str, str]] = Counter()
    for comment in comments:
        line = comment.span.line
        code = ""
        if lines[line - 1][: comment.span.col - 1].strip():
            before = "\n".join([*lines[: line - 1], lines[line - 1][: comment.span.col - 1]])
            found = re.search(r"[A-Za-z0-9_.]+$|\S$", before.rstrip(" \t\n;,)"))
            assert found is not None, "code comes before the comment"
            code = found.group()
        anchors[comment.text, code] += 1
    return anchors


@PROPERTY
@given(rule_files())
def test_formatting_keeps_the_ast_and_every_comment(text: str) -> None:
    before = parse(text)
    after = parse(format_file(text))
    assert after.items == before.items
    # As a multiset: sections move to canonical order with their comments.
    assert Counter(c.text for c in after.comments) == Counter(c.text for c in before.comments)


@PROPERTY
@given(rule_files())
def test_formatting_keeps_each_comment_after_the_code_it_followed(text: str) -> None:
    assert comment_anchors(format_file(text)) == comment_anchors(text)


@PROPERTY
@given(rule_files())
def test_formatting_twice_changes_nothing(text: str) -> None:
    once = format_file(text)
    assert format_file(once) == once


@pytest.mark.parametrize(
    "path",
    sorted([*EXAMPLES.glob("*.rw"), *ROOT.glob("patterns/**/*.rw")]),
    ids=lambda p: p.name,
)
def test_real_files_format_stably(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    once = format_file(text, path.name)
    assert parse(once, path.name) == parse(text, path.name)
    assert format_file(once, path.name) == once


def test_assumes_finite_prints_after_requires() -> None:
    text = "rule r assumes finite requires opset>=17 priority 2: y = Relu (x) => y = x\n"
    assert format_file(text) == (
        "rule r priority 2 requires opset >= 17 assumes finite: y = Relu (x) => y = x\n"
    )


def test_assumptions_print_as_one_list() -> None:
    text = "rule r assumes nonempty assumes finite: y = Relu (x) => y = x\n"
    assert format_file(text) == "rule r assumes finite, nonempty: y = Relu (x) => y = x\n"


def test_approximate_prints_last_with_its_digits() -> None:
    text = "rule r approximate  max_rel<=2e-2 assumes finite: y = Relu (x) => y = x\n"
    assert format_file(text) == (
        "rule r assumes finite approximate max_rel <= 2e-2: y = Relu (x) => y = x\n"
    )


def test_canonical_layout() -> None:
    messy = (
        "rule  fold  requires opset>=17 priority 2{match{y=Conv<...>(x,w,b?)as conv\n"
        "z = BatchNormalization <epsilon=eps> (y,s,t,m,v)}\n"
        "where{is_const(w)  ;b==none or(is_const(b))}\n"
        "rewrite{let k=s/sqrt(v+eps);z=Conv<...conv>(x,w*k,b)}}\n"
    )
    assert format_file(messy) == (
        "rule fold priority 2 requires opset >= 17 {\n"
        "  match {\n"
        "    y = Conv <...> (x, w, b?) as conv\n"
        "    z = BatchNormalization <epsilon = eps> (y, s, t, m, v)\n"
        "  }\n"
        "  where {\n"
        "    is_const(w)\n"
        "    b == none or is_const(b)\n"
        "  }\n"
        "  rewrite {\n"
        "    let k = s / sqrt(v + eps)\n"
        "    z = Conv <...conv> (x, w * k, b)\n"
        "  }\n"
        "}\n"
    )


def test_one_line_rules_stay_one_line_and_keep_trailing_comments() -> None:
    text = "rule mul_by_one:y=Mul(x,1.0)=>y=x where shape(y)==shape(x)   # x*1 -> x\n"
    assert format_file(text) == (
        "rule mul_by_one: y = Mul (x, 1.0) => y = x where shape(y) == shape(x)  # x*1 -> x\n"
    )


def test_comments_stay_where_they_were() -> None:
    text = (
        "# file header\n"
        "\n"
        "# about the rule\n"
        "rule r {  # on the header\n"
        "  match {\n"
        "    # before the line\n"
        "    y = Relu (x)  # after the line\n"
        "    # at the end of the block\n"
        "  }\n"
        "  rewrite {\n"
        "    y = x\n"
        "  }  # after the block\n"
        "}\n"
        "# at the end of the file\n"
    )
    assert format_file(text) == text


def test_lists_written_over_several_lines_stay_exploded() -> None:
    text = (
        "rule r {\n"
        "  match {\n"
        "    y = Concat <axis = 0> (\n"
        "      a,  # the first\n"
        "      b,\n"
        "    )\n"
        "  }\n"
        "  rewrite {\n"
        "    let order = [\n"
        "      0,\n"
        "      2,  # channels last\n"
        "      1,\n"
        "    ]\n"
        "    y = Transpose <perm = order> (a)\n"
        "  }\n"
        "}\n"
    )
    assert format_file(text) == text


def test_minimal_but_readable_parentheses() -> None:
    head = "rule r: y = Relu (x) => y = x where "
    text = head + "((a or (b and c))) and not (x in [1]) and (a ?? b) == (c)\n"
    assert format_file(text) == head + "(a or (b and c)) and not (x in [1]) and (a ?? b) == c\n"


def test_node_lines_keep_their_meaning() -> None:
    # A capitalized call is a node line, parenthesized or not.
    assert format_file("rule r: y = Relu (x) => y = (Foo(x))\n") == (
        "rule r: y = Relu (x) => y = Foo (x)\n"
    )
    # A node of a lower-case op keeps `<>`, without which it would be a function call.
    node = "rule r: y = Relu (x) => y = myop <> (x)\n"
    assert format_file(node) == node
    alias = 'rule r: y = Relu (x) => y = const(shape(x), "int64")\n'
    assert format_file(alias) == alias


def test_blank_lines_collapse_to_one() -> None:
    text = "rule a: y = Relu (x) => y = x\n\n\n\nrule b: y = Relu (x) => y = x\n"
    assert format_file(text) == "rule a: y = Relu (x) => y = x\n\nrule b: y = Relu (x) => y = x\n"


def test_empty_file_and_comment_only_file() -> None:
    assert format_file("") == ""
    assert format_file("\n\n") == ""
    assert format_file("# only\n") == "# only\n"


def test_numbers_keep_their_spelling() -> None:
    text = (
        "rule r: y = Mul (x, 1e10) => y = Mul (x, 1e-5)"
        " where a == [1e20, -2.5E+3, .5, 3., 007, - 1.50, -0.0]\n"
    )
    assert format_file(text) == (
        "rule r: y = Mul (x, 1e10) => y = Mul (x, 1e-5)"
        " where a == [1e20, -2.5E+3, .5, 3., 007, -1.50, -0.0]\n"
    )


def test_a_trailing_comment_stays_on_the_last_statement_of_its_line() -> None:
    text = "rule r: y = Relu (x) => y = x; rule s: y = Relu (x) => y = x  # two\n"
    assert format_file(text) == (
        "rule r: y = Relu (x) => y = x\nrule s: y = Relu (x) => y = x  # two\n"
    )
    block = "rule r {\n  match { y = Relu (x) }\n  rewrite { a = x; y = a  # on y\n  }\n}\n"
    assert format_file(block) == (
        "rule r {\n"
        "  match {\n"
        "    y = Relu (x)\n"
        "  }\n"
        "  rewrite {\n"
        "    a = x\n"
        "    y = a  # on y\n"
        "  }\n"
        "}\n"
    )


def test_a_comment_after_a_one_line_block_stays_after_its_brace() -> None:
    text = "rule r {\n  match { y = Relu (x) }  # inline\n  rewrite {\n    y = x\n  }\n}\n"
    assert format_file(text) == (
        "rule r {\n  match {\n    y = Relu (x)\n  }  # inline\n  rewrite {\n    y = x\n  }\n}\n"
    )


def test_a_comment_after_a_list_stays_after_its_closer() -> None:
    text = "rule r: y = Relu (x) => y = x where [x,\n  y] == z  # after\n"
    assert format_file(text) == (
        "rule r: y = Relu (x) => y = x where [\n  x,\n  y,\n] == z  # after\n"
    )


def test_a_comment_inside_a_multi_line_expression_keeps_its_line() -> None:
    text = (
        "rule r {\n"
        "  match {\n"
        "    y = Relu (x)\n"
        "  }\n"
        "  where {\n"
        "    rank(x) == 3 and  # three dims\n"
        '        dtype(x) == "float" or\n'
        "        # or any rank\n"
        "        (a  # a alone\n"
        "        + b) > 1\n"
        "  }\n"
        "  rewrite {\n"
        "    y = x\n"
        "  }\n"
        "}\n"
    )
    assert format_file(text) == (
        "rule r {\n"
        "  match {\n"
        "    y = Relu (x)\n"
        "  }\n"
        "  where {\n"
        "    (rank(x) == 3 and  # three dims\n"
        '      dtype(x) == "float") or\n'
        "      # or any rank\n"
        "      a +  # a alone\n"
        "        b > 1\n"
        "  }\n"
        "  rewrite {\n"
        "    y = x\n"
        "  }\n"
        "}\n"
    )


def test_sections_move_with_their_comments() -> None:
    text = (
        "rule r {\n"
        "  # the rewrite\n"
        "  rewrite {\n"
        "    y = x  # identity\n"
        "  }  # end of rewrite\n"
        "  match {\n"
        "    y = Relu (x)  # relu\n"
        "  }\n"
        "}\n"
    )
    assert format_file(text) == (
        "rule r {\n"
        "  match {\n"
        "    y = Relu (x)  # relu\n"
        "  }\n"
        "  # the rewrite\n"
        "  rewrite {\n"
        "    y = x  # identity\n"
        "  }  # end of rewrite\n"
        "}\n"
    )
