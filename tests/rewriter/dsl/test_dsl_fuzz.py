"""Fuzzing: no input makes the front end raise anything but a located RuleError.

Edits of valid files (character and token deletions, insertions, swaps) and random text go
through parse, check, dump and format. A failure is a RuleError whose every diagnostic has
`file:line:col` and a caret line; a file that still parses formats to the same AST, with
the same comments.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rw_text_strategies import edited, rule_files

from rewriter._errors import Diagnostic, RuleError
from rewriter.api import check_files as check
from rewriter.dsl import File, _parser, dump, format_file, parse
from tests.rewriter.dsl.test_dsl_caches import _spans

ROOT = Path(__file__).resolve().parents[3]
CORPUS = sorted(
    p.read_text(encoding="utf-8")
    for p in [*(Path(__file__).parent / "examples").glob("*.rw"), *ROOT.glob("patterns/**/*.rw")]
)
FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))


def _assert_located(diagnostic: Diagnostic) -> None:
    lines = diagnostic.render().split("\n")
    assert lines[0].startswith(
        f"{diagnostic.span.path}:{diagnostic.span.line}:{diagnostic.span.col}: "
    )
    assert len(lines) >= 3, diagnostic.render()
    assert lines[2].strip().startswith("^"), diagnostic.render()


def _parse_or_none(text: str) -> File | None:
    """The file's AST, or None after checking that every syntax diagnostic is located."""
    try:
        return parse(text, "fuzz.rw")
    except RuleError as exc:
        diagnostics = exc.diagnostics
    assert diagnostics
    for diagnostic in diagnostics:
        _assert_located(diagnostic)
    return None


def exercise(text: str) -> None:
    """Everything a user can do with a file either works or reports located errors."""
    file = _parse_or_none(text)
    if file is None:
        return
    for diagnostic in check([file]):
        _assert_located(diagnostic)
    dump(file)
    formatted = format_file(text, "fuzz.rw")
    reparsed = parse(formatted, "fuzz.rw")
    assert reparsed.items == file.items
    # A multiset: sections move to canonical order with their comments.
    assert Counter(reparsed.comments) == Counter(file.comments)
    assert format_file(formatted, "fuzz.rw") == formatted


@FUZZ
@given(st.sampled_from(CORPUS).flatmap(edited))
def test_edits_of_real_files_never_escape(text: str) -> None:
    exercise(text)


@FUZZ
@given(rule_files().flatmap(edited))
def test_edits_of_generated_files_never_escape(text: str) -> None:
    exercise(text)


@FUZZ
@given(st.text(max_size=300))
def test_random_text_never_escapes(text: str) -> None:
    exercise(text)


@FUZZ
@given(st.text(alphabet='rule match where rewrite {}()<>[]=,;.?|#"\\\n -+*:_xy01', max_size=120))
def test_random_rule_shaped_text_never_escapes(text: str) -> None:
    exercise(text)


def test_deep_nesting_is_reported_not_crashed() -> None:
    for text in (
        "rule r: y = Relu (x) => y = x where " + "(" * 500 + "x" + ")" * 500,
        "rule r: y = Relu (x) => y = x where " + "not " * 3000 + "x",
        "rule r: y = Relu (x) => y = x where " + " + ".join(["x"] * 3000),
        "rule r: y = Relu (x) => y = x where " + " ** ".join(["x"] * 3000),
        "rule r: y = Relu (x) => y = x where x" + "[0]" * 3000,
    ):
        exercise(text)


def test_binary_and_odd_characters_are_reported() -> None:
    for text in (
        "\x00",
        "rule \x1b: y",
        "é",
        "rule r: y = Relu (x) => y = x\x0c\x0b",
        "\ufeffrule",
    ):
        exercise(text)


def _whole_file_parse(text: str) -> tuple[object, ...]:
    """What a parse of the whole text at once gives: items, spans, comments, or the error."""
    try:
        items, comments = _parser._parse_whole(text, "fuzz.rw")
    except RuleError as exc:
        return ("error", str(exc))
    spans = _spans(items, [])
    return ("ok", items, spans, [_parser._comment_span("fuzz.rw", c) for c in comments])


def _item_by_item_parse(text: str) -> tuple[object, ...]:
    try:
        file = parse(text, "fuzz.rw")
    except RuleError as exc:
        return ("error", str(exc))
    return ("ok", file.items, _spans(file.items, []), [c.span for c in file.comments])


@FUZZ
@given(
    st.one_of(rule_files(), rule_files().flatmap(edited), st.sampled_from(CORPUS).flatmap(edited))
)
def test_parsing_item_by_item_is_parsing_the_whole_file(text: str) -> None:
    # One item per parse (no grouping), so every split point is exercised.
    original = _parser._CHUNK_BYTES
    _parser._CHUNK_BYTES = 0
    try:
        assert _item_by_item_parse(text) == _whole_file_parse(text)
    finally:
        _parser._CHUNK_BYTES = original
