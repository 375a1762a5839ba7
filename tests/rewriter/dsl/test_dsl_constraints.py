"""Named constraints and `include`: loading, visibility across files, checks, inlining, layout.

The golden first-error lines of bad constraints are in test_dsl_errors.py; these tests cover
what needs several files or more than the first diagnostic.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from rewriter._errors import RuleCheckError, RuleSyntaxError
from rewriter.api import check_files as check
from rewriter.api import load_rules
from rewriter.dsl import (
    BoolOp,
    Constraint,
    IncludeDecl,
    Lowering,
    Rule,
    dump,
    format_file,
    parse,
)
from rewriter.rules import expression_text, inline_constraints

IS_FLOAT = 'constraint is_float(x) {\n  dtype(x) in ["float", "float16", "bfloat16", "double"]\n}\n'
FLOAT_RELU = (
    "# relu(x) -> relu(x)\nrule float_relu: y = Relu (x) => y = Relu (x) where is_float(x)\n"
)


def _write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def _diagnostics(text: str) -> list[tuple[int, int, str, str]]:
    return [(d.span.line, d.span.col, d.severity, d.message) for d in check([parse(text)])]


# -- parsing -----------------------------------------------------------------------------------


def test_a_constraint_parses_to_its_name_parameters_and_conditions() -> None:
    (item,) = parse("constraint f(a, b,) {\n  rank(a) == 1; b\n}\n").items
    assert isinstance(item, Constraint)
    assert item.name == "f"
    assert item.param_names == ("a", "b")
    assert [expression_text(c) for c in item.conditions] == ["rank(a) == 1", "b"]
    assert (item.name_span.line, item.name_span.col) == (1, 12)


def test_include_parses_to_its_path() -> None:
    (item,) = parse('include "../shared.rw"\n').items
    assert item == IncludeDecl("../shared.rw")
    assert (item.path_span.col, item.path_span.end_col) == (9, 23)


def test_constraint_and_include_are_names_elsewhere() -> None:
    text = "rule constraint: y = Cast <to = 1> (include) => y = include where constraint(1)"
    file = parse(text)
    assert file.items[0].name == "constraint"  # type: ignore[union-attr]


# -- loading and visibility --------------------------------------------------------------------


def test_constraints_are_visible_to_every_file_whatever_the_order(tmp_path: Path) -> None:
    # the rule's file sorts before the constraint's: visibility does not depend on load order
    _write(tmp_path, "a_rules.rw", FLOAT_RELU)
    _write(tmp_path, "z_constraints.rw", IS_FLOAT)
    rules = load_rules(tmp_path)
    assert [r.name for r in rules.rules] == ["float_relu"]
    assert list(rules.constraints) == ["is_float"]


def test_a_rule_file_alone_does_not_see_constraints_it_does_not_include(tmp_path: Path) -> None:
    path = _write(tmp_path, "rules.rw", FLOAT_RELU)
    with pytest.raises(RuleCheckError) as caught:
        load_rules(path)
    assert caught.value.diagnostics[0].message.startswith("unknown function `is_float`")


def test_include_loads_the_file_after_the_named_ones(tmp_path: Path) -> None:
    _write(tmp_path, "shared/constraints.rw", IS_FLOAT)
    rules_file = _write(
        tmp_path, "opt_in/rules.rw", 'include "../shared/constraints.rw"\n' + FLOAT_RELU
    )
    other = _write(tmp_path, "other.rw", "rule id: y = Identity (x) => y = x\n")
    rules = load_rules(rules_file, other)
    assert list(rules.paths) == [
        str(rules_file),
        str(other),
        str(tmp_path / "shared" / "constraints.rw"),
    ]
    assert list(rules.constraints) == ["is_float"]


def test_a_file_named_and_included_is_loaded_once(tmp_path: Path) -> None:
    shared = _write(tmp_path, "constraints.rw", IS_FLOAT)
    _write(tmp_path, "opt_in/a.rw", 'include "../constraints.rw"\n' + FLOAT_RELU)
    _write(tmp_path, "opt_in/b.rw", 'include "../constraints.rw"\n')
    rules = load_rules(shared, tmp_path / "opt_in")
    assert [Path(p).name for p in rules.paths] == ["constraints.rw", "a.rw", "b.rw"]


def test_an_include_of_a_missing_file_is_a_located_error(tmp_path: Path) -> None:
    path = _write(tmp_path, "rules.rw", '# shared\ninclude "nowhere.rw"\n' + FLOAT_RELU)
    with pytest.raises(RuleSyntaxError) as caught:
        load_rules(path)
    first = caught.value.diagnostics[0]
    missing = (tmp_path / "nowhere.rw").as_posix()
    assert first.render().split("\n")[0] == (
        f'{path}:2:9: error: cannot include "nowhere.rw": there is no file "{missing}"'
    )
    # the rest of the file is still checked: the unknown function is reported too
    assert any("unknown function `is_float`" in d.message for d in caught.value.diagnostics)


@pytest.mark.parametrize(
    ("target", "reason"),
    [
        ("x" * 300 + ".rw", "File name too long"),
        ("a\\0b.rw", "there is no file"),
        (".", "is a folder"),
    ],
)
def test_an_include_that_cannot_be_read_is_a_located_error(
    tmp_path: Path, target: str, reason: str
) -> None:
    path = _write(tmp_path, "rules.rw", f'include "{target}"\n')
    with pytest.raises(RuleSyntaxError) as caught:
        load_rules(path)
    (error,) = caught.value.diagnostics
    assert (error.span.line, error.span.col) == (1, 9)
    assert error.message.startswith("cannot include ")
    assert reason in error.message
    assert "\n" not in error.message


def test_an_included_file_that_cannot_be_read_is_reported_at_the_include(tmp_path: Path) -> None:
    unreadable = _write(tmp_path, "shared.rw", IS_FLOAT)
    unreadable.chmod(0)
    path = _write(tmp_path, "rules.rw", 'include "shared.rw"\n')
    try:
        if os.access(unreadable, os.R_OK):
            pytest.skip("this user reads files whatever their permissions (root)")
        with pytest.raises(RuleSyntaxError) as caught:
            load_rules(path)
    finally:
        unreadable.chmod(0o644)
    (error,) = caught.value.diagnostics
    assert error.message == 'cannot include "shared.rw": Permission denied'


def test_a_duplicate_across_files_points_at_the_first_definition(tmp_path: Path) -> None:
    _write(tmp_path, "a.rw", IS_FLOAT)
    _write(tmp_path, "b.rw", "\n" + IS_FLOAT)
    with pytest.raises(RuleCheckError) as caught:
        load_rules(tmp_path)
    (error,) = caught.value.diagnostics
    assert (Path(error.span.path).name, error.span.line, error.message) == (
        "b.rw",
        2,
        "duplicate constraint name `is_float`",
    )
    (note,) = error.notes
    assert (Path(note.span.path).name, note.span.line, note.span.col) == ("a.rw", 1, 12)


PLUGIN = "RW_FUNCTIONS = {'is_float': lambda x: True}\n"


def test_a_constraint_may_not_take_a_helper_functions_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _write(tmp_path, "rw_test_constraint_clash.py", PLUGIN)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "rw_test_constraint_clash", raising=False)
    path = _write(tmp_path, "rules.rw", 'use "rw_test_constraint_clash"\n' + IS_FLOAT)
    with pytest.raises(RuleCheckError) as caught:
        load_rules(path, allow_python=True)
    (error,) = caught.value.diagnostics
    assert error.message == (
        "constraint `is_float` has the name of a helper function; choose another name"
    )
    assert (error.span.line, error.notes[0].span.line) == (2, 1)


# -- checks ------------------------------------------------------------------------------------


def test_unused_parameters_warn_unless_marked() -> None:
    text = "constraint f(x, y, _z) {\n  rank(x) == 1\n}\n"
    assert _diagnostics(text) == [
        (
            1,
            17,
            "warning",
            "parameter `y` of constraint `f` is never used; write `_y` if that is intended",
        )
    ]


def test_every_error_of_every_constraint_is_reported() -> None:
    text = (
        "constraint f(x) {\n  rank(y) == 1\n}\n"
        "constraint g(x) {\n  f(x, x)\n}\n"
        "constraint g(x) {\n  x\n}\n"
    )
    errors = [d for d in _diagnostics(text) if d[2] == "error"]
    assert [(line, col) for line, col, _, _ in errors] == [(2, 8), (5, 3), (7, 12)]


def test_node_parameters_take_node_names() -> None:
    text = (
        "constraint is_inference(bn) {\n  (bn.training_mode ?? 0) == 0\n}\n"
        "constraint folds(bn, w) {\n  is_inference(bn)\n  is_const(w)\n}\n"
        "rule r {\n  match {\n    y = Conv (x, w) as conv\n"
        "    z = BatchNormalization (y, s, b, m, v) as bn\n  }\n"
        "  where {\n    folds(bn, w)\n    is_const(s, b, m, v)\n    conv.group == 1\n  }\n"
        "  rewrite {\n    z = Conv (x, w)\n  }\n}\n"
    )
    assert _diagnostics(text) == []


def test_a_node_passed_to_a_value_parameter_is_an_error() -> None:
    text = (
        IS_FLOAT + "rule r {\n  match {\n    y = Relu (x) as n\n  }\n"
        "  where {\n    is_float(n)\n  }\n  rewrite {\n    y = x\n  }\n}\n"
    )
    (error,) = _diagnostics(text)
    assert error[:2] == (9, 14)
    assert error[3].startswith("`n` names a node, not a value")


def test_a_constraint_call_counts_as_a_use_of_its_arguments() -> None:
    text = IS_FLOAT + "# relu\nrule r: y = Relu (x) => y = Relu (x) where is_float(y)\n"
    assert _diagnostics(text) == []


# -- inlining ----------------------------------------------------------------------------------


def test_inlining_spells_out_calls_with_the_arguments_in_place() -> None:
    text = (
        "constraint small(v, n) {\n  rank(v) <= n\n  rank(v) >= 1\n}\n"
        "constraint both(a, b) {\n  small(a, 4)\n  small(b, 2) or is_const(b)\n}\n"
        "rule r {\n  match {\n    y = Add (p, q)\n  }\n"
        "  where {\n    both(p, q)\n    not small(q, 1)\n  }\n  rewrite {\n    y = p\n  }\n}\n"
    )
    file = parse(text)
    constraints = {c.name: c for c in file.items if isinstance(c, Constraint)}
    rule = file.items[-1]
    assert isinstance(rule, Rule)
    lines = inline_constraints(Lowering(constraints).rule(rule).conditions)
    assert [expression_text(line) for line in lines] == [
        "rank(p) <= 4",
        "rank(p) >= 1",
        "(rank(q) <= 2 and rank(q) >= 1) or is_const(q)",
        "not (rank(q) <= 1 and rank(q) >= 1)",
    ]
    assert isinstance(lines[2], BoolOp)
    # the spelled-out conditions point into the constraint, the arguments into the rule
    assert (lines[0].span.line, lines[0].left.args[0].span.line) == (2, 14)  # type: ignore[attr-defined]


def test_without_constraint_calls_inlining_changes_nothing() -> None:
    rule = parse(FLOAT_RELU.replace("is_float(x)", 'dtype(x) == "float"')).items[0]
    assert isinstance(rule, Rule)
    conditions = Lowering({}).rule(rule).conditions
    assert inline_constraints(conditions) == conditions == rule.where


# -- formatting and dump -----------------------------------------------------------------------

MESSY = """include   "shared.rw"  # the dtypes
# Conv weights.
constraint  is_weight( w ,k ) {   # header
  is_const(w) ;rank(w)==k  # two

  has_static_shape( w )
}
constraint f(
  a,  # first
  b
) { a and  # why
  b }
"""

CANONICAL = """include "shared.rw"  # the dtypes
# Conv weights.
constraint is_weight(w, k) {  # header
  is_const(w)
  rank(w) == k  # two

  has_static_shape(w)
}
constraint f(
  a,  # first
  b,
) {
  a and  # why
    b
}
"""


def test_fmt_prints_constraints_canonically_and_keeps_comments() -> None:
    assert format_file(MESSY) == CANONICAL
    assert format_file(CANONICAL) == CANONICAL
    assert parse(CANONICAL) == parse(MESSY)


def test_dump_prints_constraints_and_includes() -> None:
    assert dump(parse('include "a.rw"\nconstraint f(x) {\n  rank(x) == 1\n}\n')) == (
        'file <string>\n  include "a.rw"\n  constraint f (x)\n    (== (call rank x) 1)'
    )
