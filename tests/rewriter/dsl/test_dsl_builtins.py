"""The one list of built-ins: in step with the evaluator, the grammar and LANGUAGE.md."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest

from rewriter._builtins import BUILTINS
from rewriter.dsl._keywords import KEYWORDS
from rewriter.dsl._parser import lark_parser
from rewriter.dsl.builtins import LET_BUILTINS, PASS_OPTIONS, SIGNATURES, WHERE_BUILTINS

LANGUAGE_MD = (Path(__file__).resolve().parents[3] / "rewriter" / "dsl" / "LANGUAGE.md").read_text(
    encoding="utf-8"
)


def test_the_evaluator_implements_exactly_the_listed_functions() -> None:
    assert set(BUILTINS) == set(SIGNATURES)


def test_where_and_let_sets() -> None:
    assert WHERE_BUILTINS < LET_BUILTINS
    assert {"const"} == LET_BUILTINS - WHERE_BUILTINS
    assert {
        "is_const",
        "value",
        "shape",
        "dtype",
        "opset",
        "all_close",
        "normalize_axis",
    } <= WHERE_BUILTINS


@pytest.mark.parametrize("name", sorted(SIGNATURES))
def test_signature_accepts_what_the_implementation_accepts(name: str) -> None:
    signature = SIGNATURES[name]
    implementation = inspect.signature(BUILTINS[name])
    params = list(implementation.parameters.values())[1:]  # the evaluation context comes first
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        return  # an adapter forwarding keywords: its target is checked through the call below
    variadic = any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in params)
    positional = [p for p in params if p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD]
    required = [p for p in positional if p.default is inspect.Parameter.empty]
    if not variadic:
        assert len(positional) == len(signature.params), name
        assert len(required) == signature.required, name
    for keyword in signature.keywords:
        if keyword in signature.params:
            assert keyword in [p.name for p in params] or keyword == "dtype", (name, keyword)


@pytest.mark.parametrize("name", sorted(SIGNATURES))
def test_every_builtin_is_documented(name: str) -> None:
    assert re.search(rf"`{name}\(", LANGUAGE_MD), name


@pytest.mark.parametrize("name", sorted(PASS_OPTIONS))
def test_every_pass_and_option_is_documented(name: str) -> None:
    assert f"`{name}`" in LANGUAGE_MD
    for option in PASS_OPTIONS[name]:
        assert f"`{option}`" in LANGUAGE_MD


def test_keywords_are_the_grammars_word_tokens() -> None:
    words = {
        t.pattern.value
        for t in lark_parser().terminals
        if t.pattern.type == "str" and t.pattern.value.isidentifier() and t.pattern.value != "_"
    }
    assert words == set(KEYWORDS)


def test_language_doc_starts_with_a_rationale() -> None:
    headings = [line for line in LANGUAGE_MD.splitlines() if line.startswith("## ")]
    assert headings[0] == "## Rationale"
