"""The parsed shipped library (`library_cache.json`) is current, used, and only for its texts."""

from __future__ import annotations

import dataclasses
import importlib.resources
import json
import shutil
from pathlib import Path

import pytest

from rewriter._api import default_library_files, library_path
from rewriter._errors import Span
from rewriter.dsl import _library_cache
from rewriter.dsl._loader import find_rule_files, load_rules, parse_files


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


def test_the_shipped_cache_is_current():
    stored = json.loads(
        importlib.resources.files("rewriter.dsl").joinpath("library_cache.json").read_text()
    )
    texts = [path.read_text() for path in default_library_files()]
    assert stored["key"] == _library_cache.cache_key(texts), (
        "rewriter/dsl/library_cache.json is stale: run "
        'python -c "from rewriter.dsl._library_cache import write_library_cache; '
        'write_library_cache()"'
    )


def test_the_library_loads_from_the_cache_exactly_as_parsed(monkeypatch):
    files = default_library_files()
    cached = load_rules(*files)
    parsed, errors = parse_files(find_rule_files(files))
    assert not errors
    assert cached.files == tuple(parsed)  # spans are not compared by ==: compare them apart
    assert _spans(cached.files, []) == _spans(tuple(parsed), [])
    assert [f.source for f in cached.files] == [f.source for f in parsed]
    # It did come from the cache: with parsing made impossible it still loads.
    monkeypatch.setattr("rewriter.dsl._loader.parse_files", None)
    assert load_rules(*files).rules == cached.rules


def test_a_copy_under_other_paths_gets_those_paths_in_its_spans(tmp_path):
    copy = tmp_path / "lib"
    shutil.copytree(library_path(), copy, ignore=shutil.ignore_patterns("loops", "ort", "*.py"))
    files = sorted(copy.rglob("*.rw"), key=lambda p: p.as_posix())
    ruleset = load_rules(*files)
    paths = {str(f) for f in files}
    assert {span.path for span in _spans(ruleset.files, [])} <= paths | {"<none>"}
    first = ruleset.rules[0]
    assert first.span.path in paths


def test_an_edited_copy_is_parsed_not_taken_from_the_cache(tmp_path, monkeypatch):
    copy = tmp_path / "lib"
    shutil.copytree(library_path(), copy, ignore=shutil.ignore_patterns("loops", "ort", "*.py"))
    algebra = copy / "folding" / "algebra.rw"
    algebra.write_text(
        algebra.read_text() + "\n# x * 1 (again)\nrule mul_one_again: y = Mul (x, 1.0) => y = x\n"
    )
    files = sorted(copy.rglob("*.rw"), key=lambda p: p.as_posix())
    calls = []
    original = parse_files

    def counting(paths):
        calls.append(paths)
        return original(paths)

    monkeypatch.setattr("rewriter.dsl._loader.parse_files", counting)
    ruleset = load_rules(*files)
    assert calls
    assert ruleset.rule("mul_one_again") is not None


@pytest.mark.parametrize("content", ["{not json", '{"key": 3}', "", '{"key": null, "files": 1}'])
def test_a_broken_or_missing_cache_falls_back_to_parsing(monkeypatch, content):
    monkeypatch.setattr(_library_cache, "_read_cache", lambda: content or None)
    files = default_library_files()
    assert _library_cache.cached_files([str(f) for f in files], ["x"] * len(files)) is None
    assert load_rules(*files).rule("mul_one") is not None


@pytest.mark.parametrize("name", ["algebra.rw"])
def test_no_cache_for_a_single_library_file(name):
    # One file alone has another key: it is parsed (and still loads).
    path: Path = library_path() / "folding" / name
    assert load_rules(path).rule("mul_one") is not None
