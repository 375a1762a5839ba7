"""Loaded rule sets kept in the cache: the same files load from one entry, anything else parses.

A second load of the same files (paths, texts, included files), parameters and vocabulary
reads the rule set the first one stored, equal to a fresh load, without importing the parser,
the checker or the lowering; an edited file, another parameter value or a damaged entry loads
the files again, and warnings are reported by every load.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from rewriter import dsl
from rewriter._cache import CacheFolder
from rewriter._errors import RuleSyntaxError
from rewriter.api import library_path
from rewriter.api._vocabulary import VOCABULARY
from rewriter.rules import LiteralValue, RuleSet

ROOT = Path(__file__).resolve().parents[3]


def _load(
    path: Path, cache: CacheFolder | None, params: dict[str, LiteralValue] | None = None
) -> RuleSet:
    return dsl.load_files(path, vocabulary=VOCABULARY, cache=cache, params=params)


def _entries(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.glob("ruleset-*.json"))


def test_the_library_loads_from_its_entry_equal_to_a_fresh_load(tmp_path: Path) -> None:
    cache = CacheFolder(tmp_path)
    first = _load(library_path(), cache=cache)
    assert len(_entries(tmp_path)) == 1
    second = _load(library_path(), cache=cache)
    assert second == first == _load(library_path(), cache=None)
    assert len(_entries(tmp_path)) == 1


def test_a_named_constraint_stays_one_object_shared_by_the_rules_that_call_it(
    tmp_path: Path,
) -> None:
    (tmp_path / "r.rw").write_text(
        "constraint small(v) { rank(v) == 1 }\n"
        "rule a: y = Relu (x) => y = x where small(x)\n"
        "rule b: y = Neg (x) => y = x where small(x)\n"
    )
    cache = CacheFolder(tmp_path / "cache")
    _load(tmp_path / "r.rw", cache=cache)
    stored = _load(tmp_path / "r.rw", cache=cache)
    assert stored == _load(tmp_path / "r.rw", cache=None)
    calls = [rule.conditions[0] for rule in stored.rules]
    assert calls[0].constraint is calls[1].constraint is stored.constraints["small"]


def test_an_edited_included_file_is_loaded_again(tmp_path: Path) -> None:
    (tmp_path / "main.rw").write_text(
        'include "more/extra.rw"\nrule a: y = Relu (x) => y = x where rank(x) == 0\n'
    )
    (tmp_path / "more").mkdir()
    extra = tmp_path / "more" / "extra.rw"
    extra.write_text("rule b: y = Neg (x) => y = x where rank(x) == 0\n")
    cache = CacheFolder(tmp_path / "cache")
    assert [r.name for r in _load(tmp_path / "main.rw", cache=cache).rules] == ["a", "b"]
    extra.write_text("rule c: y = Neg (x) => y = x where rank(x) == 0\n")
    assert [r.name for r in _load(tmp_path / "main.rw", cache=cache).rules] == ["a", "c"]
    extra.unlink()
    with pytest.raises(RuleSyntaxError, match="cannot include"):
        _load(tmp_path / "main.rw", cache=cache)


def test_parameter_values_are_part_of_the_entry(tmp_path: Path) -> None:
    (tmp_path / "p.rw").write_text(
        "param limit = 4\nrule r: y = Relu (x) => y = x where rank(x) <= limit\n"
    )
    cache = CacheFolder(tmp_path / "cache")
    for params, expected in (({}, 4), ({"limit": 2}, 2), ({}, 4), ({"limit": 2}, 2)):
        loaded = _load(tmp_path / "p.rw", cache=cache, params=params)
        assert loaded.params == {"limit": expected}
        assert loaded == _load(tmp_path / "p.rw", cache=None, params=params)
    assert len(_entries(tmp_path / "cache")) == 2


def test_a_damaged_entry_is_loaded_again_from_the_files(tmp_path: Path) -> None:
    (tmp_path / "r.rw").write_text("rule r: y = Relu (x) => y = x where rank(x) == 0\n")
    cache = CacheFolder(tmp_path / "cache")
    fresh = _load(tmp_path / "r.rw", cache=cache)
    (entry,) = _entries(tmp_path / "cache")
    for damage in (b"", b"{}", b'{"files": [], "ir": {"paths": [], "spans": [], "tokens": [99]}}'):
        (tmp_path / "cache" / entry).write_bytes(damage)
        assert _load(tmp_path / "r.rw", cache=cache) == fresh


def test_warnings_are_reported_by_every_load(tmp_path: Path) -> None:
    (tmp_path / "w.rw").write_text("rule w: y = Add (x, z) => y = x\n")
    cache = CacheFolder(tmp_path / "cache")
    for _ in range(2):
        loaded = _load(tmp_path / "w.rw", cache=cache)
        assert [w.message for w in loaded.warnings] == [
            "`z` is bound but never used; write `_` (or `_z`) instead"
        ]
    assert _entries(tmp_path / "cache") == []


_SCRIPT = """
import sys
from rewriter.api import load_rules

rules = load_rules(None)
syntax = ("rewriter.dsl._ast", "rewriter.dsl._parser", "rewriter.dsl._check", "rewriter.dsl._lower")
print(len(rules.rules), sorted(m for m in syntax if m in sys.modules))
"""


def test_a_load_from_the_entry_imports_no_parser_checker_or_lowering(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "XDG_CACHE_HOME": str(tmp_path)}
    runs = [
        subprocess.run(
            [sys.executable, "-c", _SCRIPT], capture_output=True, text=True, env=env, check=True
        ).stdout.split(" ", 1)
        for _ in range(2)
    ]
    assert runs[0][0] == runs[1][0]
    assert runs[0][1].strip() != "[]"  # the first load parsed, checked and lowered
    assert runs[1][1].strip() == "[]"
