"""The parser's tables and parsed files are cached in the user's cache folder, never trusted stale."""

from __future__ import annotations

import dataclasses
import os
import subprocess
from pathlib import Path

import pytest

from rewriter._errors import RuleCheckError, RuleSyntaxError, Span
from rewriter.api import default_library_files
from rewriter.dsl import CacheFolder, parse
from rewriter.dsl import _lark as lark_module
from rewriter.dsl._ast_cache import parse_cached

ROOT = Path(__file__).resolve().parents[3]
TEXT = "# x * 1 -> x\nrule r: y = Mul (x, 1.0) => y = x where shape(y) == shape(x)\n"


def _spans(value: object, found: list[Span]) -> list[Span]:
    if isinstance(value, Span):
        found.append(value)
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        for field in dataclasses.fields(value):
            _spans(getattr(value, field.name), found)
    elif isinstance(value, tuple):
        for item in value:
            _spans(item, found)
    return found


def test_the_parser_is_built_once_then_read_from_the_cache(tmp_path, monkeypatch):
    cache = CacheFolder(tmp_path)
    built = lark_module.load_or_build_parser(cache)
    (entry,) = tmp_path.glob("parser-*.lark")

    def refuse(grammar: str) -> None:
        raise AssertionError("the cached parser should have been used")

    monkeypatch.setattr(lark_module, "build_parser", refuse)
    loaded = lark_module.load_or_build_parser(cache)
    assert loaded.parse(TEXT, start="start") == built.parse(TEXT, start="start")
    assert entry.exists()


def test_a_damaged_parser_entry_is_rebuilt(tmp_path):
    cache = CacheFolder(tmp_path)
    lark_module.load_or_build_parser(cache)
    (entry,) = tmp_path.glob("parser-*.lark")
    entry.write_bytes(b"not a parser")
    parser = lark_module.load_or_build_parser(cache)
    assert parser.parse(TEXT, start="start") is not None
    assert entry.read_bytes() != b"not a parser"


def test_the_entry_name_changes_with_the_grammar(monkeypatch):
    name = lark_module._table_name(lark_module.grammar_text())
    assert name != lark_module._table_name(lark_module.grammar_text() + "\n// changed\n")


def test_a_cache_that_cannot_be_written_only_costs_time(tmp_path):
    blocked = tmp_path / "file"
    blocked.write_text("a file where the cache folder should be")
    parser = lark_module.load_or_build_parser(CacheFolder(blocked / "cache"))
    assert parser.parse(TEXT, start="start") is not None
    assert CacheFolder(None).read("anything") is None


def test_a_parsed_file_is_read_back_equal_with_the_path_it_is_given(tmp_path):
    cache = CacheFolder(tmp_path)
    first = parse_cached(TEXT, "a.rw", cache)
    assert len(list(tmp_path.glob("ast-*.json"))) == 1
    again = parse_cached(TEXT, "b/c.rw", cache)
    fresh = parse(TEXT, "b/c.rw")
    assert again == fresh
    assert _spans(again, []) == _spans(fresh, [])
    assert {s.path for s in _spans(again, [])} == {"b/c.rw"}
    assert first.items == again.items


def test_the_shipped_library_reads_back_exactly_as_parsed(tmp_path):
    cache = CacheFolder(tmp_path)
    for path in default_library_files():
        text = path.read_text()
        parse_cached(text, str(path), cache)
        cached = parse_cached(text, str(path), cache)
        fresh = parse(text, str(path))
        assert cached == fresh
        assert _spans(cached, []) == _spans(fresh, [])
        assert cached.source == text


def test_text_that_does_not_parse_is_not_cached(tmp_path):
    cache = CacheFolder(tmp_path)
    with pytest.raises(RuleSyntaxError):
        parse_cached("rule r: y = Relu (x) =>\n", "bad.rw", cache)
    assert list(tmp_path.glob("ast-*.json")) == []


def test_the_oldest_entries_go_when_the_folder_is_full(tmp_path):
    cache = CacheFolder(tmp_path, max_entries=3)
    for i in range(5):
        cache.write(f"entry-{i}", b"x")
        os.utime(tmp_path / f"entry-{i}", (i, i))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["entry-2", "entry-3", "entry-4"]


def test_an_entry_read_recently_stays_when_older_ones_go(tmp_path):
    cache = CacheFolder(tmp_path, max_entries=3)
    for i in range(3):
        cache.write(f"entry-{i}", f"{i}".encode())
        os.utime(tmp_path / f"entry-{i}", (i, i))
    assert cache.read("entry-0") == b"0"  # the oldest write, used again
    cache.write("entry-3", b"3")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["entry-0", "entry-2", "entry-3"]


def test_no_generated_or_machine_specific_file_is_tracked():
    tracked = subprocess.run(
        ["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=False
    )
    if tracked.returncode != 0:
        pytest.skip("not a git checkout")
    names = tracked.stdout.split()
    assert [n for n in names if n.endswith((".lalr", ".pkl", ".pickle", ".lark.cache"))] == []
    here = str(ROOT).encode()
    holding = [n for n in names if here in (ROOT / n).read_bytes()]
    assert holding == []


def test_files_checked_clean_are_not_checked_again_until_they_change(tmp_path, monkeypatch):
    from rewriter.api import VOCABULARY
    from rewriter.dsl import _check, load_files

    rules_file = tmp_path / "r.rw"
    rules_file.write_text(TEXT)
    cache = CacheFolder(tmp_path / "cache")
    first = load_files(rules_file, vocabulary=VOCABULARY, cache=cache)
    (marker,) = (tmp_path / "cache").glob("checked-*")

    def refuse(*args, **kwargs):
        raise AssertionError("files checked clean should not be checked again")

    monkeypatch.setattr(_check, "check_rule", refuse)
    again = load_files(rules_file, vocabulary=VOCABULARY, cache=cache)
    assert again.rules == first.rules
    monkeypatch.undo()
    # Changed text is checked: its error is reported at its place, and nothing is marked.
    rules_file.write_text(TEXT.replace("Mul (x, 1.0)", "Mull (x, 1.0)"))
    with pytest.raises(RuleCheckError) as raised:
        load_files(rules_file, vocabulary=VOCABULARY, cache=cache)
    assert f"{rules_file}:2:" in str(raised.value)
    assert list((tmp_path / "cache").glob("checked-*")) == [marker]
