"""`rules.rule_text`: a rule of the IR printed in the rule language parses back to it."""

from __future__ import annotations

from pathlib import Path

import pytest

import rewriter
from rewriter import rules
from rewriter.api import load_rules

LIBRARY = rewriter.library_path()
SETS = {
    "library": [LIBRARY],
    "ort": [LIBRARY / "ort"],
    "quantize": [LIBRARY / "quantize"],
    "loops": [LIBRARY / "loops"],
    "relaxed": [LIBRARY / "relaxed"],
}


@pytest.mark.parametrize("name", sorted(SETS))
def test_every_shipped_rule_prints_as_text_that_lowers_to_it(name: str, tmp_path: Path) -> None:
    loaded = load_rules(*SETS[name])
    parts = [rules.constraint_text(c) for c in loaded.constraints.values()]
    parts.extend(rules.rule_text(rule) for rule in loaded.rules)
    text = "\n\n".join(parts) + "\n"
    path = tmp_path / "printed.rw"
    path.write_text(text, encoding="utf-8")
    again = load_rules(path, use_cache=False)
    assert [r.name for r in again.rules] == [r.name for r in loaded.rules]
    for before, after in zip(loaded.rules, again.rules, strict=True):
        assert after == before, rules.rule_text(before)


def test_a_python_rule_prints_readably() -> None:
    rule = rules.rule(
        "square",
        match=[rules.node("Pow", "x", 2.0, out="y")],
        where=[rules.eq(rules.call("dtype", "x"), rules.lit("float"))],
        rewrite=[rules.new_node("Mul", "x", "x", out="y")],
    )
    assert rules.rule_text(rule) == (
        "rule square {\n"
        "  match {\n"
        "    y = Pow <...> (x, 2.0)\n"
        "  }\n"
        "  where {\n"
        '    dtype(x) == "float"\n'
        "  }\n"
        "  rewrite {\n"
        "    y = Mul (x, x)\n"
        "  }\n"
        "}"
    )
