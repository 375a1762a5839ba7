"""The one registry of built-ins: signatures from the code, documented in LANGUAGE.md."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from rewriter.api import PASSES, VOCABULARY
from rewriter.dsl._keywords import KEYWORDS
from rewriter.dsl._parser import lark_parser
from rewriter.engine import BUILTINS

LANGUAGE_MD = (Path(__file__).resolve().parents[3] / "rewriter" / "dsl" / "LANGUAGE.md").read_text(
    encoding="utf-8"
)


def test_the_checker_knows_exactly_the_registered_functions_and_passes() -> None:
    assert set(VOCABULARY.functions) == set(BUILTINS)
    assert set(VOCABULARY.passes) == set(PASSES)


def test_only_const_is_rewrite_only() -> None:
    let_only = {name for name, entry in BUILTINS.items() if entry.signature.let_only}
    assert let_only == {"const"}
    assert {"is_const", "value", "shape", "dtype", "opset", "all_close"} <= set(BUILTINS)


@pytest.mark.parametrize(
    ("name", "params", "required", "variadic", "keywords"),
    [
        ("is_const", ("v",), 1, True, ()),
        ("all_close", ("a", "b", "rtol", "atol"), 2, False, ("rtol", "atol")),
        ("opset", ("domain",), 0, False, ("domain",)),
        ("range", ("start", "stop", "step"), 1, False, ()),
        ("arange", ("start", "stop", "step"), 1, False, ("dtype",)),
        ("min", ("x",), 1, True, ()),
        ("zeros", ("shape", "dtype"), 1, False, ("dtype",)),
    ],
)
def test_signatures_are_read_from_the_implementation(
    name: str, params: tuple[str, ...], required: int, variadic: bool, keywords: tuple[str, ...]
) -> None:
    signature = BUILTINS[name].signature
    assert (signature.params, signature.required, signature.variadic, signature.keywords) == (
        params,
        required,
        variadic,
        keywords,
    )


@pytest.mark.parametrize("name", sorted(BUILTINS))
def test_every_builtin_is_documented(name: str) -> None:
    assert re.search(rf"`{name}\(", LANGUAGE_MD), name


@pytest.mark.parametrize("name", sorted(PASSES))
def test_every_pass_and_option_is_documented(name: str) -> None:
    assert f"`{name}`" in LANGUAGE_MD
    for option in PASSES[name].signature.options:
        assert f"`{option.name}`" in LANGUAGE_MD


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
