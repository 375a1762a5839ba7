"""Every example of DSL.md parses to the AST it means (golden dumps and constructed ASTs)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from rewriter.api import check_files
from rewriter.dsl import (
    AliasStmt,
    AttrCopy,
    AttrEntry,
    Binary,
    Call,
    Coalesce,
    Compare,
    Const,
    File,
    InputLiteral,
    InputVar,
    LetStmt,
    MatchBlock,
    Name,
    NodePattern,
    NodeStmt,
    OpPattern,
    OpRef,
    OutputVar,
    PassDecl,
    RepeatPattern,
    Requirement,
    RewriteBlock,
    RewriteLoop,
    Rule,
    dump,
    parse,
)

EXAMPLES = Path(__file__).parent / "examples"
# The repository's own contract; its "Examples from the founding contract" section holds the
# founding contract's examples, so nothing outside the repository is needed.
LANGUAGE_MD = Path(__file__).resolve().parents[3] / "rewriter" / "dsl" / "LANGUAGE.md"


def _example(name: str) -> File:
    path = EXAMPLES / f"{name}.rw"
    return parse(path.read_text(encoding="utf-8"), path.name)


@pytest.mark.parametrize("name", sorted(p.stem for p in EXAMPLES.glob("*.rw")))
def test_example_parses_to_its_golden_dump(name: str) -> None:
    golden = (EXAMPLES / f"{name}.dump").read_text(encoding="utf-8")
    assert dump(_example(name)) + "\n" == golden


def _rw_blocks() -> list[str]:
    return re.findall(r"```rw\n(.*?)```", LANGUAGE_MD.read_text(encoding="utf-8"), re.S)


def test_fixtures_are_the_founding_examples_in_language_md() -> None:
    section = LANGUAGE_MD.read_text(encoding="utf-8").split("## Examples from the founding")[1]
    blocks = re.findall(r"```rw\n(.*?)```", section, re.S)
    fixtures = [
        (EXAMPLES / n).read_text(encoding="utf-8")
        for n in ("conv_batchnorm.rw", "mul_by_one.rw", "passes.rw", "roll_loops.rw")
    ]
    assert blocks == fixtures


@pytest.mark.parametrize("index", range(len(_rw_blocks())))
def test_every_rw_block_of_language_md_parses_and_checks(index: int) -> None:
    text = _rw_blocks()[index]
    diagnostics = check_files([parse(text, f"LANGUAGE.md block {index}")])
    assert [d.render() for d in diagnostics if d.severity == "error"] == []


def test_one_line_rule_means_match_rewrite_where() -> None:
    rule = _example("mul_by_one").items[0]
    expected = Rule(
        name="mul_by_one",
        match=MatchBlock(
            (
                NodePattern(
                    (OutputVar("y"),),
                    OpPattern((OpRef("", "Mul"),)),
                    (),
                    (InputVar("x"), InputLiteral(Const(1.0))),
                ),
            )
        ),
        where=(Compare("==", Call("shape", (Name("y"),)), Call("shape", (Name("x"),))),),
        rewrite=RewriteBlock((AliasStmt("y", Name("x")),)),
        one_line=True,
    )
    assert rule == expected


def test_conv_batchnorm_rule_means_what_it_says() -> None:
    rule = _example("conv_batchnorm").items[0]
    assert isinstance(rule, Rule)
    assert (rule.name, rule.priority, rule.one_line) == ("fold_batchnorm_into_conv", 10, False)
    conv, batchnorm = rule.match.patterns
    assert conv.attrs == (AttrCopy(None),)
    assert conv.inputs == (InputVar("x"), InputVar("w"), InputVar("b", optional=True))
    assert conv.as_name == "conv"
    assert batchnorm.attrs == (AttrEntry("epsilon", Name("eps")),)
    assert isinstance(rule.rewrite, RewriteBlock)
    let_b2 = rule.rewrite.stmts[2]
    # (b ?? zeros_like(shift)) * k + shift - mean * k
    scaled = Binary("*", Coalesce(Name("b"), Call("zeros_like", (Name("shift"),))), Name("k"))
    minus = Binary("-", Binary("+", scaled, Name("shift")), Binary("*", Name("mean"), Name("k")))
    assert let_b2 == LetStmt("b2", minus)
    assert rule.rewrite.stmts[3] == NodeStmt(
        (OutputVar("z"),),
        OpRef("", "Conv"),
        (AttrCopy("conv"),),
        (Name("x"), Name("w2"), Name("b2")),
    )


def test_passes_carry_their_options() -> None:
    passes = _example("passes").items
    assert passes[0] == PassDecl("fold_constants", (("max_output_bytes", Const(1048576)),))
    assert passes[1] == PassDecl("eliminate_dead_code")
    assert passes[3] == PassDecl(
        "roll_loops", (("min_repeats", Const(3)), ("min_block_nodes", Const(2)))
    )


def test_repeat_block_and_rewrite_loop() -> None:
    rule = _example("roll_loops").items[0]
    assert isinstance(rule, Rule)
    repeat = rule.match.repeat
    assert isinstance(repeat, RepeatPattern)
    assert (repeat.count_var, repeat.count_op, repeat.count) == ("n", ">=", 3)
    assert (repeat.from_var, repeat.to_var) == ("h", "out")
    assert [p.op.alternatives[0].op_type for p in repeat.body] == [
        "Conv",
        "LayerNormalization",
        "Gelu",
    ]
    assert rule.match.patterns == ()
    assert isinstance(rule.rewrite, RewriteLoop)


def test_requires_with_and_without_domain() -> None:
    rules = {r.name: r for r in _example("snippets").items if isinstance(r, Rule)}
    assert rules["fuse_layer_norm"].requires == (Requirement("", ">=", 17),)
    assert rules["fuse_gelu_ms"].requires == (Requirement("com.microsoft", ">=", 1),)


def test_last_dot_splits_domain_and_op() -> None:
    rules = {r.name: r for r in _example("snippets").items if isinstance(r, Rule)}
    pattern = rules["domain_qualified"].match.patterns[0]
    assert pattern.op.alternatives == (OpRef("com.microsoft", "Gelu"),)


def test_every_example_has_a_golden() -> None:
    for source in EXAMPLES.glob("*.rw"):
        assert source.with_suffix(".dump").exists(), source
