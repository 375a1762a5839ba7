"""The parser tables shipped beside the grammar (`grammar.lalr`) are current and used."""

from __future__ import annotations

import importlib.resources
import io

from lark import Lark

from rewriter.dsl import _parser


def _shipped() -> bytes:
    return importlib.resources.files("rewriter.dsl").joinpath("grammar.lalr").read_bytes()


def test_shipped_tables_were_built_from_this_grammar() -> None:
    digest = _shipped().split(b" ", 1)[0].decode()
    assert digest == _parser.grammar_digest(_parser.grammar_text()), (
        "rewriter/dsl/grammar.lalr is stale: run "
        '`python -c "from rewriter.dsl._parser import write_tables; write_tables()"`'
    )


def test_loaded_tables_parse_like_a_freshly_built_parser() -> None:
    data = _shipped()
    loaded = Lark.load(io.BytesIO(data[data.index(b"\n") + 1 :]))
    built = _parser._build(_parser.grammar_text())
    text = "rule r: y = Mul (x, 1.0) => y = x where shape(y) == shape(x)  # x*1 -> x\n"
    assert loaded.parse(text) == built.parse(text)


def test_stale_tables_fall_back_to_building(tmp_path, monkeypatch) -> None:
    # A table file for another grammar is ignored, never trusted.
    stale = tmp_path / "grammar.lalr"
    stale.write_bytes(b"0" * 64 + b" lark 0\n" + b"garbage")
    monkeypatch.setattr(_parser, "_TABLES", str(stale))
    _parser.lark_parser.cache_clear()
    try:
        parser = _parser.lark_parser()
        assert parser.parse("rule r: y = Relu (x) => y = x\n") is not None
    finally:
        _parser.lark_parser.cache_clear()
