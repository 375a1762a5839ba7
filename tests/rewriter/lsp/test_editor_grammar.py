"""The TextMate grammar for `.rw` files and the VS Code extension manifest beside it.

The grammar is checked structurally (valid JSON, every rule compiles, scope names end in
`.rw`), then run on shipped rule files by a small TextMate matcher (each line scanned for the
leftmost match among the top-level rules, in order): the parser's own syntax tree says where
the ops, rule names and comments are, and each must carry the grammar's scope for it.
"""

from __future__ import annotations

import importlib.resources
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from rewriter import dsl

ROOT = Path(__file__).resolve().parents[3]
EDITORS = ROOT / "rewriter" / "lsp" / "editors"
GRAMMAR = EDITORS / "vscode" / "syntaxes" / "rw.tmLanguage.json"
MANIFEST = EDITORS / "vscode" / "package.json"
SHIPPED = [p for p in sorted((ROOT / "patterns").rglob("*.rw")) if "\nrule " in p.read_text()]


def _rules(grammar: dict, node: dict) -> list[dict]:
    """The match rules of a pattern list, includes resolved, in order."""
    found = []
    for pattern in node["patterns"]:
        if "include" in pattern:
            found += _rules(grammar, {"patterns": [grammar["repository"][pattern["include"][1:]]]})
        elif "patterns" in pattern:
            found += _rules(grammar, pattern)
        else:
            found.append(pattern)
    return found


def _scopes(grammar: dict, text: str) -> dict[tuple[int, int], str]:
    """The scope of each character, by (1-based line, 1-based column)."""
    rules = [(re.compile(rule["match"]), rule) for rule in _rules(grammar, grammar)]
    scopes: dict[tuple[int, int], str] = {}
    for number, line in enumerate(text.split("\n"), start=1):
        position = 0
        while position < len(line):
            best = None
            for pattern, rule in rules:
                match = pattern.search(line, position)
                found = match is not None and match.end() > match.start()
                if found and (best is None or match.start() < best[0].start()):
                    best = (match, rule)
            if best is None:
                break
            match, rule = best
            groups = [(0, rule["name"])] if "name" in rule else []
            groups += [(int(k), v["name"]) for k, v in rule.get("captures", {}).items()]
            for group, name in groups:
                for column in range(match.start(group), match.end(group)):
                    scopes[(number, column + 1)] = name
            position = match.end()
    return scopes


@pytest.fixture(scope="module")
def grammar() -> dict:
    return json.loads(GRAMMAR.read_text(encoding="utf-8"))


def test_the_grammar_is_valid_json_with_compiling_rules(grammar):
    assert grammar["scopeName"] == "source.rw"
    assert grammar["fileTypes"] == ["rw"]
    rules = _rules(grammar, grammar)
    assert len(rules) >= 10
    for rule in rules:
        re.compile(rule["match"])
        names = [rule.get("name")] + [c["name"] for c in rule.get("captures", {}).values()]
        assert all(name.endswith(".rw") for name in names if name), rule


@pytest.mark.parametrize("path", SHIPPED[:: max(1, len(SHIPPED) // 8)], ids=lambda p: p.name)
def test_ops_rule_names_keywords_and_comments_get_their_scopes(grammar, path):
    text = path.read_text(encoding="utf-8")
    file = dsl.parse(text, str(path))
    scopes = _scopes(grammar, text)
    ops = [ref for item in file.items if isinstance(item, dsl.Rule) for ref in _op_refs(item)]
    assert ops
    for ref in ops:
        op_column = ref.span.col + (len(ref.domain) + 1 if ref.domain else 0)
        assert scopes.get((ref.span.line, op_column)) == "entity.name.type.op.rw", (ref, path)
    for item in file.items:
        if isinstance(item, dsl.Rule | dsl.Constraint):
            span = item.name_span
            assert scopes.get((span.line, span.col)) == "entity.name.function.rw"
            assert scopes.get((item.span.line, item.span.col)) == "keyword.other.declaration.rw"
    for comment in file.comments:
        assert scopes.get((comment.span.line, comment.span.col)) == "comment.line.number-sign.rw"
    lines = text.split("\n")
    for number, line in enumerate(lines, start=1):
        for keyword in re.finditer(r"^\s*(match|where|rewrite|let)\b", line):
            if scopes.get((number, keyword.start(1) + 1), "").startswith("comment"):
                continue
            assert scopes.get((number, keyword.start(1) + 1)) == "keyword.control.section.rw"


def _op_refs(rule: dsl.Rule):
    patterns = rule.match.repeat.body if rule.match.repeat else rule.match.patterns
    for pattern in patterns:
        yield from pattern.op.alternatives
    if isinstance(rule.rewrite, dsl.RewriteBlock):
        for stmt in rule.rewrite.stmts:
            if isinstance(stmt, dsl.NodeStmt) and not isinstance(stmt.op, dsl.NodeCopy):
                yield stmt.op


def test_strings_and_numbers_are_not_taken_for_ops(grammar):
    text = (
        'rule r: y = Cast <to = "float16"> (x) => y = Mul (x, 1.5e-3) where dtype(x) == "Relu ("\n'
    )
    scopes = _scopes(grammar, text)
    start = text.index('"Relu (')
    assert {scopes[(1, c + 1)] for c in range(start, start + 7)} == {"string.quoted.double.rw"}
    number = text.index("1.5e-3")
    assert scopes[(1, number + 1)] == "constant.numeric.rw"
    assert scopes[(1, text.index("Cast") + 1)] == "entity.name.type.op.rw"
    assert scopes[(1, text.index("dtype") + 1)] == "support.function.rw"
    assert scopes[(1, text.index("to =") + 1)] == "variable.parameter.rw"


def test_the_vscode_manifest_starts_rewrite_lsp_for_rw_files():
    manifest = json.loads(MANIFEST.read_text(encoding="utf-8"))
    (language,) = manifest["contributes"]["languages"]
    assert language["extensions"] == [".rw"]
    (grammar,) = manifest["contributes"]["grammars"]
    assert (MANIFEST.parent / grammar["path"]).resolve() == GRAMMAR.resolve()
    assert (MANIFEST.parent / language["configuration"]).is_file()
    assert (MANIFEST.parent / manifest["main"]).is_file()
    default = manifest["contributes"]["configuration"]["properties"]["onnxRewrite.command"]
    assert default["default"] == ["rewrite", "lsp"]
    assert "vscode-languageclient" in manifest["dependencies"]


def test_the_extension_script_is_valid_javascript():
    if shutil.which("node") is None:
        pytest.skip("node is not installed")
    completed = subprocess.run(
        ["node", "--check", str(MANIFEST.parent / "extension.js")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr


def test_the_editor_files_ship_with_the_package():
    files = importlib.resources.files("rewriter") / "lsp" / "editors" / "vscode"
    assert (files / "package.json").is_file()
    assert (files / "syntaxes" / "rw.tmLanguage.json").is_file()
    assert (importlib.resources.files("rewriter") / "py.typed").is_file()
    assert (importlib.resources.files("ir") / "py.typed").is_file()
