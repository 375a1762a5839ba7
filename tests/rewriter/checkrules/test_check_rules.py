"""check-rules: planted wrong rules are caught and located; correct rules always verify."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from rewriter.api import load_rules
from rewriter.checkrules import CheckOptions, RuleReport, Status, check_rules
from rewriter.cli import main
from rewriter.engine import DEFAULT_PIPELINE

RULES = Path(__file__).parent / "rules"
WRONG = RULES / "wrong.rw"
CORRECT = RULES / "correct.rw"
NEVER = RULES / "never.rw"
UNSOUND = RULES / "unsound.rw"
FOLDING = Path(__file__).resolve().parents[3] / "patterns" / "folding"
# The folding files holding the rules this suite vouches for.
SHIPPED_FOLDING = tuple(
    FOLDING / name for name in ("algebra.rw", "compose.rw", "identity.rw", "noop.rw", "shapes.rw")
)

PLANTED = (
    "wrong_batchnorm_epsilon",
    "wrong_batchnorm_dropped_bias",
    "wrong_transpose_composition",
    "wrong_softmax_axis",
    "wrong_relu_to_abs",
    "wrong_mul_two",
)


def line_of(path: Path, rule: str) -> int:
    """The 1-based line where `rule NAME` is declared."""
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if re.match(rf"rule {rule}\b", line):
            return number
    raise AssertionError(f"rule {rule} not in {path}")


def by_name(reports: list[RuleReport]) -> dict[str, RuleReport]:
    return {r.name: r for r in reports if r.kind == "rule"}


@pytest.fixture(scope="module")
def wrong_reports() -> dict[str, RuleReport]:
    return by_name(check_rules(load_rules(WRONG), CheckOptions(seed=0)))


@pytest.mark.parametrize("rule", PLANTED)
def test_planted_wrong_rule_is_reported_failed_at_its_line(
    wrong_reports: dict[str, RuleReport], rule: str
) -> None:
    report = wrong_reports[rule]
    assert report.status is Status.FAILED, report.detail
    assert report.location == f"{WRONG}:{line_of(WRONG, rule)}"
    assert report.counterexample is not None
    assert "instance" in report.counterexample.model_text
    assert report.counterexample.message


@pytest.mark.parametrize("seed", [1, 2])
def test_planted_wrong_rules_are_caught_with_other_seeds(seed: int) -> None:
    reports = by_name(check_rules(load_rules(WRONG), CheckOptions(seed=seed)))
    failed = {name for name, r in reports.items() if r.status is Status.FAILED}
    assert failed == set(PLANTED)


def test_numeric_counterexample_has_inputs_and_error(wrong_reports: dict[str, RuleReport]) -> None:
    example = wrong_reports["wrong_relu_to_abs"].counterexample
    assert example is not None
    assert example.inputs
    assert example.max_abs_err is not None
    assert example.max_abs_err > 0
    assert "Relu" in example.model_text
    assert "Abs" in example.rewritten_text


# The folding rules this suite vouches for (rules added to these files later are checked by
# `rewrite check-rules`, not pinned here).
VOUCHED = (
    "add_zero",
    "sub_zero",
    "mul_one",
    "div_one",
    "pow_one",
    "compose_transposes",
    "compose_reshapes",
    "compose_lossless_casts",
    "eliminate_identity",
    "eliminate_dropout",
    "eliminate_dropout_with_mask",
    "eliminate_noop_cast",
    "eliminate_noop_transpose",
    "eliminate_noop_reshape",
    "eliminate_noop_expand",
    "eliminate_noop_slice",
    "eliminate_noop_pad",
    "eliminate_noop_pad_attribute",
    "unsqueeze_then_squeeze",
    "unsqueeze_then_squeeze_attribute",
    "fold_static_shape",
    "fold_static_size",
    "softmax_positive_axis",
    "relu_to_max",
    "mul_two_to_add",
    "batchnorm_with_bias",
)


@pytest.mark.parametrize("seed", [0, 1])
def test_rules_wrong_only_for_nan_or_integers_fail_at_default_settings(seed: int) -> None:
    reports = by_name(check_rules(load_rules(UNSOUND), CheckOptions(seed=seed)))
    zero = reports["wrong_mul_zero"]
    halve = reports["wrong_halve_double"]
    assert zero.status is Status.FAILED, zero.detail
    assert halve.status is Status.FAILED, halve.detail
    assert halve.counterexample is not None
    assert "int" in halve.counterexample.model_text


SIZE_DEPENDENT = RULES / "size_dependent.rw"


@pytest.mark.parametrize("seed", [0, 1])
def test_rules_right_only_up_to_a_size_they_mention_fail_at_default_settings(seed: int) -> None:
    # `Slice(x, 0, 8) -> x` is exact on every dim up to 8: instances drawn at the sizes the
    # rule mentions (twice 8 first) show it keeps 16 rows where the original keeps 8
    reports = by_name(check_rules(load_rules(SIZE_DEPENDENT), CheckOptions(seed=seed)))
    for name in ("wrong_slice_prefix", "wrong_slice_prefix_checked"):
        report = reports[name]
        assert report.status is Status.FAILED, report.detail
        assert report.counterexample is not None
        assert "16" in report.counterexample.model_text


def test_a_rule_writing_an_op_without_a_kernel_is_reported_not_verified(capsys) -> None:
    # a float64 1x1 Conv where onnxruntime ran a MatMul: declined on every instance, and said
    reports = by_name(check_rules(load_rules(RULES / "kernels.rw"), CheckOptions(seed=0)))
    report = reports["dense_to_conv_double"]
    assert report.status is Status.NOT_INSTANTIABLE
    assert "onnxruntime has no kernel for Conv(double, double)" in report.detail
    assert main(["check-rules", str(RULES / "kernels.rw"), "--strict"]) == 1


# Seed 0 in the default run; the other seeds (a minute each) in the slow slice.
@pytest.mark.parametrize(
    "seed", [0, *(pytest.param(seed, marks=pytest.mark.slow) for seed in range(1, 4))]
)
def test_correct_rules_always_verify(seed: int) -> None:
    ruleset = load_rules(CORRECT, *SHIPPED_FOLDING)
    options = CheckOptions(seed=seed, instances=2, examples=4)
    reports = check_rules(ruleset, options, names=VOUCHED)
    bad = [(r.name, r.detail) for r in reports if r.status is Status.FAILED]
    assert not bad
    verified = {r.name for r in reports if r.status is Status.VERIFIED}
    assert {"softmax_positive_axis", "relu_to_max", "mul_two_to_add"} <= verified
    assert {"eliminate_noop_reshape", "compose_transposes", "unsqueeze_then_squeeze"} <= verified


def test_rule_that_cannot_match_is_not_instantiable_with_a_reason() -> None:
    (report,) = check_rules(load_rules(NEVER), CheckOptions(attempts=20))
    assert report.status is Status.NOT_INSTANTIABLE
    assert "where line 2 does not hold" in report.detail
    assert report.location == f"{NEVER}:2"


def test_selected_rules_only() -> None:
    reports = check_rules(load_rules(WRONG), CheckOptions(), names=["wrong_mul_two"])
    assert [r.name for r in reports] == ["wrong_mul_two"]


def test_unknown_rule_name_is_refused() -> None:
    with pytest.raises(ValueError, match="no rule named `nope`"):
        check_rules(load_rules(WRONG), CheckOptions(), names=["nope"])


def test_same_seed_gives_same_results() -> None:
    ruleset = load_rules(WRONG, CORRECT)
    options = CheckOptions(seed=3, instances=2, examples=4)
    # Failing and verified rules, counterexamples included (every rule: the slow slice's job).
    names = ["wrong_relu_to_abs", "wrong_softmax_axis", "relu_to_max", "softmax_positive_axis"]
    first = [r.to_json() for r in check_rules(ruleset, options, names=names)]
    second = [r.to_json() for r in check_rules(ruleset, options, names=names)]
    assert {r["status"] for r in first} == {"failed", "verified"}
    for entry in first + second:
        entry.pop("seconds")
    assert first == second


# ---------------------------------------------------------------------------------------------
# The command line


def test_cli_exit_1_and_table_name_the_failed_rule(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["check-rules", str(WRONG), "--rule", "wrong_relu_to_abs", "--examples", "5"])
    out = capsys.readouterr().out
    assert code == 1
    assert "wrong_relu_to_abs" in out
    assert f"wrong.rw:{line_of(WRONG, 'wrong_relu_to_abs')}" in out
    assert "failed" in out
    assert "FAILED wrong_relu_to_abs" in out  # the counterexample block


def test_cli_exit_0_when_nothing_fails(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["check-rules", str(CORRECT), "--instances", "1", "--examples", "3"])
    out = capsys.readouterr().out
    assert code == 0
    assert "verified" in out
    assert "4 rules: 4 verified, 0 failed, 0 not instantiable" in out


def test_the_default_pipeline_runs_on_rule_instances() -> None:
    # One library file's instances are enough for the passes to run on.
    ruleset = load_rules(FOLDING / "noop.rw")
    options = CheckOptions(instances=1, examples=3, pipeline=DEFAULT_PIPELINE)
    names = {r.name: r for r in check_rules(ruleset, options)}
    cse = names["eliminate_common_subexpressions"]
    assert cse.kind == "pass"
    assert cse.location == "default pipeline"
    assert cse.status is not Status.FAILED


def test_cli_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "results.json"
    code = main(
        ["check-rules", str(NEVER), str(CORRECT), "--instances", "1", "--json", str(target)]
    )
    capsys.readouterr()
    assert code == 0
    data = json.loads(target.read_text())
    statuses = {r["name"]: r["status"] for r in data["rules"]}
    assert statuses["never_matches"] == "not instantiable"
    assert statuses["relu_to_max"] == "verified"
    assert data["seed"] == 0


def test_cli_json_never_overwrites_a_rules_file_or_an_existing_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rules = tmp_path / "mine.rw"
    rules.write_text(CORRECT.read_text())
    assert main(["check-rules", str(rules), "--json", str(rules)]) == 2
    assert "would overwrite a rules path" in capsys.readouterr().err
    assert rules.read_text() == CORRECT.read_text()
    existing = tmp_path / "results.json"
    existing.write_text("keep")
    assert main(["check-rules", str(rules), "--json", str(existing)]) == 2
    assert "pass --force" in capsys.readouterr().err
    assert existing.read_text() == "keep"
    args = ["check-rules", str(rules), "--instances", "1", "--examples", "2"]
    assert main([*args, "--json", str(existing), "--force"]) == 0
    capsys.readouterr()
    assert json.loads(existing.read_text())["seed"] == 0


def test_cli_jobs_do_not_change_the_results(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    results = []
    for jobs in ("1", "2"):
        target = tmp_path / f"jobs{jobs}.json"
        args = ["check-rules", str(WRONG), str(CORRECT), "--instances", "2", "--examples", "3"]
        assert main([*args, "--jobs", jobs, "--json", str(target)]) == 1
        rules = json.loads(target.read_text())["rules"]
        for rule in rules:
            rule.pop("seconds")
        results.append(rules)
    capsys.readouterr()
    assert results[0] == results[1]


def test_cli_bad_rules_file_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.rw"
    bad.write_text("rule broken: y = Relu (x) -> y = x\n")
    code = main(["check-rules", str(bad)])
    assert code == 2
    assert "bad.rw:1" in capsys.readouterr().err


def test_cli_unknown_rule_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["check-rules", str(CORRECT), "--rule", "nope"])
    assert code == 2
    assert "no rule named nope" in capsys.readouterr().err


def test_cli_bad_usage_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check-rules", str(CORRECT), "--examples", "0"]) == 2
    capsys.readouterr()


def test_cli_sample_checks_a_subset(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["check-rules", str(WRONG), "--sample", "2", "--seed", "1", "--examples", "3"])
    out = capsys.readouterr().out
    assert code == 1
    assert "2 rules:" in out


def test_strict_fails_a_rule_that_could_not_be_instantiated(tmp_path, capsys):
    rules = tmp_path / "never.rw"
    rules.write_text(
        '# relu of a string is never built\nrule never: y = Relu (x) => y = x where dtype(x) == "string"\n'
    )
    assert main(["check-rules", str(rules), "--attempts", "5", "--jobs", "1"]) == 0
    assert main(["check-rules", str(rules), "--attempts", "5", "--jobs", "1", "--strict"]) == 1
    assert "--strict: not instantiated: never" in capsys.readouterr().err


def test_rules_over_sequence_values_are_left_to_their_tests_and_pass_strict(capsys):
    library = Path(__file__).parents[3] / "patterns" / "folding" / "compose.rw"
    args = ["check-rules", str(library), "--rule", "split_to_sequence_three", "--jobs", "1"]
    assert main([*args, "--strict"]) == 0
    out = capsys.readouterr().out
    assert "not instantiable" in out
    assert "sequence values" in out


@pytest.mark.parametrize("seed", [7, 11])
def test_a_rank_0_instance_with_an_empty_perm_does_not_crash_the_generator(seed: int) -> None:
    # These seeds draw a rank-0 value for reshape_constant_of_shape: `perm = []` has no
    # element to tell its attribute kind by; the schema tells it.
    ruleset = load_rules(*SHIPPED_FOLDING)
    (report,) = check_rules(ruleset, CheckOptions(seed=seed), names=["reshape_constant_of_shape"])
    assert report.status is Status.VERIFIED, report


@pytest.mark.slow
def test_passes_run_on_the_instances_of_every_vouched_file() -> None:
    ruleset = load_rules(*SHIPPED_FOLDING)
    options = CheckOptions(instances=1, examples=3, pipeline=DEFAULT_PIPELINE)
    names = {r.name: r for r in check_rules(ruleset, options)}
    assert names["eliminate_common_subexpressions"].status is not Status.FAILED


@pytest.mark.slow
def test_same_seed_gives_same_results_for_every_rule() -> None:
    ruleset = load_rules(WRONG, CORRECT)
    options = CheckOptions(seed=3, instances=2, examples=4)
    first = [r.to_json() for r in check_rules(ruleset, options)]
    second = [r.to_json() for r in check_rules(ruleset, options)]
    for entry in first + second:
        entry.pop("seconds")
    assert first == second


SWITCHED = """param keep_negatives = true

# Exact (Abs of a Relu is the Relu), but switched off unless `keep_negatives` is false.
rule relu_of_abs_when_negatives_go {
  match {
    r = Relu (x)
    y = Abs (r)
  }
  where {
    not keep_negatives
  }
  rewrite {
    y = Relu (x)
  }
}

# Wrong, and switched off by default the same way: check-rules must still catch it.
rule abs_for_relu_when_negatives_go {
  match {
    y = Relu (x)
  }
  where {
    not keep_negatives
  }
  rewrite {
    y = Abs (x)
  }
}
"""


def test_rules_a_boolean_param_switches_off_are_checked_with_it_switched(tmp_path, capsys):
    path = tmp_path / "switched.rw"
    path.write_text(SWITCHED)
    reports = {r.name: r for r in check_rules(load_rules(path), CheckOptions(seed=0))}
    right = reports["relu_of_abs_when_negatives_go"]
    assert right.status is Status.VERIFIED
    assert right.detail.startswith("with param keep_negatives = false")
    wrong = reports["abs_for_relu_when_negatives_go"]
    assert wrong.status is Status.FAILED
    assert wrong.detail.startswith("with param keep_negatives = false")
    assert main(["check-rules", str(path), "--jobs", "2", "--strict"]) == 1
    assert "abs_for_relu_when_negatives_go" in capsys.readouterr().out


def test_where_hints_reach_the_lines_built_before_a_failed_line() -> None:
    # onnxruntime's packed cache: a Squeeze of axis 0 fails after Slices that cut another axis
    # of a rank-4 cache, and MultiHeadAttention refuses the masks the rule asks absent
    # (`kpm == none`); hinting the Slices from the `where` lines about them, the cache from
    # its rank-5 template and the absent masks builds instances the rule matches
    library = Path(__file__).resolve().parents[3] / "patterns" / "ort" / "attention.rw"
    names = [
        "ort_attention_from_packed_projection_with_past",
        "ort_attention_from_packed_projection_with_split_past",
    ]
    reports = check_rules(load_rules(library), CheckOptions(seed=0), names=names)
    assert {r.name: r.status for r in reports} == dict.fromkeys(names, Status.VERIFIED), reports
