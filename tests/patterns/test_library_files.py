"""The shipped library loads the ways the README uses it: whole, by opt-in folder, file by file.

Rule files call the named constraints of patterns/constraints.rw and patterns/onnxruntime.rw,
and reach them with `include`, so every folder and every file loads on its own.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import rewriter
from rewriter.api import load_rules

LIBRARY = rewriter.library_path()
FILES = sorted(LIBRARY.rglob("*.rw"))


@pytest.mark.parametrize("path", FILES, ids=[p.relative_to(LIBRARY).as_posix() for p in FILES])
def test_every_library_file_loads_on_its_own(path: Path) -> None:
    ruleset = load_rules(path)
    assert ruleset.paths[0] == str(path)


@pytest.mark.parametrize(
    "rules",
    [
        [LIBRARY],
        [LIBRARY / "ort"],
        [LIBRARY / "loops"],
        [LIBRARY, LIBRARY / "ort"],
        [LIBRARY, LIBRARY / "loops" / "roll.rw"],
        [LIBRARY / "folding", LIBRARY / "fusion", LIBRARY / "ort"],
        [LIBRARY, LIBRARY / "quantize" / "int8_dynamic.rw"],
        [
            LIBRARY,
            LIBRARY / "quantize" / "float16.rw",
            LIBRARY / "quantize" / "float16_sensitive.rw",
        ],
    ],
    ids=[
        "default",
        "ort",
        "loops",
        "default+ort",
        "default+roll",
        "folders+ort",
        "default+int8",
        "default+float16+sensitive",
    ],
)
def test_the_documented_rule_selections_load_each_file_once(rules: list[Path]) -> None:
    ruleset = load_rules(rules)
    loaded = [Path(p).resolve() for p in ruleset.paths]
    assert len(loaded) == len(set(loaded))
    names = [r.name for r in ruleset.rules]
    assert len(names) == len(set(names))


def test_the_default_library_never_quantizes() -> None:
    ruleset = load_rules([LIBRARY])
    assert not any("/quantize/" in p for p in ruleset.paths)
    assert not any(rule.approximate for rule in ruleset.rules)


def test_the_shared_files_hold_only_constraints() -> None:
    for name in ("constraints.rw", "onnxruntime.rw"):
        ruleset = load_rules(LIBRARY / name)
        assert ruleset.rules == ()
        assert ruleset.passes == ()
        assert ruleset.constraints


def test_the_library_loads_without_warnings() -> None:
    assert load_rules(*FILES).warnings == ()
