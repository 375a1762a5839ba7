"""load_rules and the semantic checks: RuleSet contents, all errors at once, warnings, `use`."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from rewriter._errors import RuleCheckError, RuleSyntaxError
from rewriter.api import check_files as check
from rewriter.api import load_rules
from rewriter.dsl import parse
from rewriter.rules import PassUse, Rule

RULE_A = "# x*1 -> x\nrule a: y = Mul (x, 1) => y = x\n"
RULE_B = "# x+0 -> x\nrule b: y = Add (x, 0) => y = x\n"


def _write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def _messages(text: str, *, allow_python: bool = False) -> list[str]:
    return [f"{d.severity}: {d.message}" for d in check([parse(text)], allow_python=allow_python)]


# -- loading -----------------------------------------------------------------------------------


def test_load_rules_reads_folders_recursively_in_sorted_path_order(tmp_path: Path) -> None:
    _write(tmp_path, "z.rw", RULE_A)
    _write(tmp_path, "m/b.rw", RULE_B + "pass fold_constants { max_output_bytes = 10 }\n")
    _write(tmp_path, "m/ignored.txt", "rule nope")
    rules = load_rules(tmp_path)
    assert [r.name for r in rules.rules] == ["b", "a"]
    assert list(rules.paths) == [str(tmp_path / "m" / "b.rw"), str(tmp_path / "z.rw")]
    assert rules.passes == (PassUse("fold_constants", (("max_output_bytes", 10),)),)
    assert rules.sources[str(tmp_path / "z.rw")] == RULE_A
    assert rules.warnings == ()
    assert isinstance(rules.rule("a"), Rule)


def test_load_rules_accepts_files_and_reads_each_once(tmp_path: Path) -> None:
    a = _write(tmp_path, "a.rw", RULE_A)
    rules = load_rules(a, tmp_path, str(a))
    assert [r.name for r in rules.rules] == ["a"]


def test_missing_path_raises_file_not_found(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        load_rules(tmp_path / "missing.rw")


def test_every_error_of_every_file_is_reported_at_once(tmp_path: Path) -> None:
    _write(tmp_path, "a.rw", "rule a: y = Rleu (x) => y = q\n")
    _write(tmp_path, "b.rw", "rule b: y = Relu (x, z) => y = x where foo(x)\n")
    with pytest.raises(RuleCheckError) as caught:
        load_rules(tmp_path)
    lines = [
        f"{d.span.path.rsplit('/', 1)[1]}:{d.span.line}:{d.span.col}: {d.message}"
        for d in caught.value.diagnostics
    ]
    assert lines == [
        "a.rw:1:13: unknown op `Rleu`; did you mean `Relu`?",
        "a.rw:1:29: unbound variable `q`: neither the match nor an earlier `let` or rewrite line defines it",
        "b.rw:1:13: `Relu` takes 1 input, but this line gives 2 inputs",
        "b.rw:1:40: unknown function `foo`",
    ]


def test_syntax_errors_of_all_files_come_together(tmp_path: Path) -> None:
    _write(tmp_path, "a.rw", "rule a: y = Mul (x, 1) -> y = x\n")
    _write(tmp_path, "b.rw", "rule b {\n")
    _write(tmp_path, "c.rw", "rule c: y = Relu (x) => y = q\n")
    with pytest.raises(RuleSyntaxError) as caught:
        load_rules(tmp_path)
    first_lines = [d.render().splitlines()[0].rsplit("/", 1)[1] for d in caught.value.diagnostics]
    assert first_lines == [
        "a.rw:1:24: error: expected `=>` after pattern, found `->`",
        "b.rw:1:9: error: expected `}`, `match`, `rewrite` or `where`, found the end of the file",
        "c.rw:1:29: error: unbound variable `q`: neither the match nor an earlier `let` or rewrite line defines it",
    ]


def test_warnings_are_collected_in_the_rule_set(tmp_path: Path) -> None:
    _write(tmp_path, "w.rw", "rule w: y = Add (x, z) => y = x\n")
    rules = load_rules(tmp_path)
    assert [w.message for w in rules.warnings] == [
        "`z` is bound but never used; write `_` (or `_z`) instead"
    ]
    assert rules.warnings[0].severity == "warning"


# -- use ---------------------------------------------------------------------------------------


PLUGIN = """
CALLS = []
CALLS.append("imported")


def double(x):
    return 2 * x


RW_FUNCTIONS = {"double": double}
"""


@pytest.fixture
def plugin_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "plugins"
    _write(folder, "rw_test_plugin.py", PLUGIN)
    _write(folder, "rw_test_no_table.py", "X = 1\n")
    _write(folder, "rw_test_shadow.py", "RW_FUNCTIONS = {'sqrt': abs}\n")
    monkeypatch.syspath_prepend(str(folder))
    for name in ("rw_test_plugin", "rw_test_no_table", "rw_test_shadow"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    return folder


USES_PLUGIN = 'use "rw_test_plugin"\nrule p: y = Mul (x, 2) => y = x where double(1) == 2\n'


def test_use_is_refused_without_permission_and_never_imports(
    tmp_path: Path, plugin_dir: Path
) -> None:
    path = _write(tmp_path, "rules/p.rw", USES_PLUGIN)
    with pytest.raises(RuleCheckError) as caught:
        load_rules(path)
    first = caught.value.diagnostics[0]
    assert (first.span.line, first.span.col, first.span.end_col) == (1, 1, 4)
    assert "loads only when Python helpers are allowed (the allow-python option)" in first.message
    assert "rw_test_plugin" not in sys.modules


def test_use_with_permission_registers_the_functions(tmp_path: Path, plugin_dir: Path) -> None:
    path = _write(tmp_path, "rules/p.rw", USES_PLUGIN)
    rules = load_rules(path, allow_python=True)
    assert set(rules.functions) == {"double"}
    assert rules.functions["double"](3) == 6


@pytest.mark.parametrize(
    ("module", "message"),
    [
        ("rw_test_missing", "cannot import `rw_test_missing`: ModuleNotFoundError"),
        ("rw_test_no_table", "`rw_test_no_table` has no `RW_FUNCTIONS` dict"),
        ("rw_test_shadow", "`rw_test_shadow` registers `sqrt`, which is a built-in function"),
    ],
)
def test_bad_helper_modules_are_located_errors(
    tmp_path: Path, plugin_dir: Path, module: str, message: str
) -> None:
    path = _write(tmp_path, "rules/p.rw", f'use "{module}"\n')
    with pytest.raises(RuleCheckError) as caught:
        load_rules(path, allow_python=True)
    diagnostic = caught.value.diagnostics[0]
    assert message in diagnostic.message
    assert (diagnostic.span.line, diagnostic.span.col) == (1, 5)


# -- warnings ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "rule r: y = Add (x, _unused) => y = x",  # `_name` documents without a warning
        "rule r: y = Conv (x, w, b?) => y = Conv (x, w)",  # optional slots may go unused
        "rule r: y = Concat (x, rest...) => y = x",  # so may the variadic rest
        "rule r {\n match {\n  t = Relu (x)\n  y = Neg (t)\n }\n rewrite {\n  y = x\n }\n}",
        "rule r {\n match {\n  y = Sub (x, m)\n  m = ReduceMean (x)\n }\n rewrite {\n  y = x\n }\n}",
    ],
)
def test_structural_and_documenting_bindings_do_not_warn(text: str) -> None:
    assert _messages(text) == []


def test_unused_bindings_warn_at_the_binding() -> None:
    text = "rule r {\n match {\n  y = LeakyRelu <alpha = a> (x, z) as n\n }\n rewrite {\n  let k = 1\n  y = x\n }\n}"
    diagnostics = check([parse(text)])
    assert [(d.span.line, d.span.col, d.message) for d in diagnostics] == [
        (3, 7, "`LeakyRelu` takes 1 input, but this line gives 2 inputs"),
        (
            3,
            26,
            "attribute variable `a` is never used; attributes that are not named are unconstrained",
        ),
        (3, 33, "`z` is bound but never used; write `_` (or `_z`) instead"),
        (3, 39, "node name `n` is never used"),
        (6, 7, "`let k` is never used"),
    ]


@pytest.mark.parametrize(
    ("requires", "warns"),
    [
        ("opset >= 18, opset < 17", True),
        ("opset > 17, opset <= 17", True),
        ("opset == 13, opset == 14", True),
        ("opset >= 13, opset < 14", False),
        ("opset >= 18, opset com.microsoft < 17", False),
        ("opset ai.onnx >= 18, opset < 18", True),
    ],
)
def test_contradictory_requires_warn(requires: str, warns: bool) -> None:
    messages = _messages(f"rule r requires {requires}: y = Relu (x) => y = x")
    assert any("no opset version satisfies" in m for m in messages) == warns


def test_op_listed_twice_warns() -> None:
    assert _messages("rule r: y = Relu | ai.onnx.Relu (x) => y = x") == [
        "warning: `Relu` is listed twice in this op alternative"
    ]


def test_rewrite_that_replaces_nothing_warns() -> None:
    assert _messages("rule r: y = Relu (x) => z = Neg (x)") == [
        "warning: `y` is bound but never used; write `_` (or `_y`) instead",
        "warning: the rewrite redefines none of the values the match defines (`y`), so the rule "
        "can only apply where they are unused",
    ]


# -- errors worth a closer look ----------------------------------------------------------------


def test_variable_used_before_its_rewrite_definition_is_unbound() -> None:
    text = "rule r {\n match {\n  y = Relu (x)\n }\n rewrite {\n  y = Neg (t)\n  t = Abs (x)\n }\n}"
    assert _messages(text) == [
        "error: unbound variable `t`: neither the match nor an earlier `let` or rewrite line defines it"
    ]


def test_rewrite_outputs_and_lets_are_visible_later() -> None:
    text = (
        "rule r {\n match {\n  y = Relu (x)\n }\n rewrite {\n  let c = 1.0\n"
        "  t = Abs (x) as abs_node\n  y = Add (t, c)\n }\n}"
    )
    assert _messages(text) == []


def test_keyword_attribute_names_are_checked_like_any_other() -> None:
    assert _messages("rule r: y = Cast <to = t> (x) => y = Cast <to = t> (x)") == []
    assert _messages("rule r: y = Cast <from = t> (x) => y = x") == [
        "error: `Cast` has no attribute `from`",
        "warning: attribute variable `t` is never used; attributes that are not named are unconstrained",
    ]


def test_custom_domains_are_not_checked() -> None:
    assert (
        _messages("rule r: y = my.domain.Anything <a = 1> (x, x, x) => y = my.domain.Other (x)")
        == []
    )


def test_arity_accepts_what_some_version_accepts() -> None:
    # Clip took min/max as attributes before opset 11 and as optional inputs since.
    assert _messages("rule r: y = Clip (x, lo?, hi?) => y = x") == []
    assert _messages("rule r: y = Clip <min = a> (x) => y = x where a == 0") == []
    assert _messages("rule r: y = Concat (a, _, _, _, _) => y = a") == []
    assert _messages("rule r: q, _, ... = Split (x) => q = x") == []


def test_passes_are_checked() -> None:
    assert _messages("pass fold_constants\npass fold_constants") == [
        "error: pass `fold_constants` is declared twice"
    ]
    assert _messages("pass roll_loops { min_repeats = 3, min_repeats = 4 }") == [
        "error: option `min_repeats` is given twice"
    ]
    assert _messages('pass roll_loops { min_repeats = "3" }') == [
        "error: option `min_repeats` takes a non-negative integer"
    ]


def test_repeat_block_checks() -> None:
    text = "rule r {\n match repeat (n >= 0) from h to out {\n  c = Relu (x)\n }\n rewrite loop\n}"
    assert _messages(text) == [
        "error: `repeat` needs a positive count, not 0",
        "error: `from h`: the block has no input `h`",
        "error: `to out`: the block defines no `out`",
    ]


# -- attributes at the opsets a rule applies at ---------------------------------------------------


def test_a_literal_attribute_the_op_lost_warns_in_a_rule_for_every_opset() -> None:
    assert _messages("rule r: y = Mul <axis = 1> (x, 1) => y = x") == [
        "warning: `Mul` declares `axis` only before opset 7: this line matches no newer model "
        "(say `requires opset < 7` if that is meant)"
    ]


def test_a_literal_attribute_is_fine_in_a_rule_for_the_opsets_that_declare_it() -> None:
    assert _messages("rule r requires opset < 7: y = Mul <axis = 1> (x, 1) => y = x") == []


def test_an_attribute_bound_to_a_name_may_belong_to_an_older_version() -> None:
    # At opset 18 ReduceMean's axes are an input: `a` binds none there, `i` the input.
    text = (
        "rule r requires opset >= 18: y = ReduceMean <axes = a> (x, i?) => y = x "
        "where a == none or i == none"
    )
    assert _messages(text) == []


def test_a_decomposition_rule_matches_ops_newer_than_its_requires() -> None:
    # `requires` is judged at the --target-opset of a down-conversion: the model is newer.
    text = 'rule r requires opset < 20: y = Gelu <approximate = "none"> (x) => y = Mul (x, x)'
    assert [m for m in _messages(text) if m.startswith("error")] == []


def test_a_rewrite_may_not_write_an_attribute_the_target_opsets_lack() -> None:
    text = "rule r requires opset >= 7: y = Relu (x) => y = Dropout <is_test = 1> (x)"
    assert [m for m in _messages(text) if m.startswith("error")] == [
        "error: `Dropout` has no attribute `is_test` at opset >= 7 (this rule's `requires`); "
        "only Dropout-1, Dropout-6 declared it"
    ]
