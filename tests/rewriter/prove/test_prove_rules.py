"""`rewrite prove` on whole rules: planted bugs refuted, their correct versions proved.

The planted rules (rules/planted.rw) carry bugs of the kinds check-rules catches: swapped Sub
operands, an attribute left to its default, constants added instead of multiplied. Each is
refuted with a counterexample onnxruntime confirmed, and the counterexample is checked here
again against numpy's arithmetic. Their correct versions (rules/correct.rw) are proved, as is a
rule that only moves an op outside the prover's fragment; rules/unsupported.rw gets reasons.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from rewriter.api import load_rules
from rewriter.cli import main
from rewriter.prove import ProofStatus, ProveOptions, RuleProof, prove_rules

RULES = Path(__file__).parent / "rules"
OPTIONS = ProveOptions(timeout=30.0)


def _prove(file: str) -> dict[str, RuleProof]:
    return {proof.name: proof for proof in prove_rules(load_rules(RULES / file), OPTIONS)}


@pytest.fixture(scope="module")
def planted() -> dict[str, RuleProof]:
    return _prove("planted.rw")


def test_every_planted_bug_is_refuted_with_a_replayed_counterexample(planted) -> None:
    assert {name: proof.status for name, proof in planted.items()} == {
        "swapped_sub": ProofStatus.REFUTED,
        "transpose_default_perm": ProofStatus.REFUTED,
        "constants_added": ProofStatus.REFUTED,
        "squeeze_all_after_unsqueeze": ProofStatus.REFUTED,
    }
    for proof in planted.values():
        found = proof.counterexample
        assert found is not None
        assert "onnxruntime" in found.detail  # the replay's own account of both runs
        assert found.original != found.rewritten
        assert proof.file.endswith("planted.rw")
        assert proof.line > 1


def test_swapped_sub_counterexample_differs_in_ieee_arithmetic(planted) -> None:
    found = planted["swapped_sub"].counterexample
    assert found is not None
    dtype = {"float": np.float32, "float16": np.float16, "double": np.float64}[found.dtypes["a"]]
    a = np.asarray(found.inputs["a"], dtype=dtype)
    b = np.asarray(found.inputs["b"], dtype=dtype)
    original, rewritten = a + (-b), b - a
    assert not np.array_equal(original, rewritten, equal_nan=True)
    assert original[found.index] == pytest.approx(found.original, nan_ok=True)


def test_constants_added_counterexample_differs_in_int32_arithmetic(planted) -> None:
    found = planted["constants_added"].counterexample
    assert found is not None
    x = np.asarray(found.inputs["x"], np.int32)
    a = np.asarray(found.constants["a"], np.int32)
    b = np.asarray(found.constants["b"], np.int32)
    with np.errstate(over="ignore"):
        original, rewritten = x * a * b, x * (a + b)
    assert original[found.index] == found.original
    assert rewritten[found.index] == found.rewritten
    assert found.original != found.rewritten


def test_an_attribute_left_to_its_default_changes_the_shape(planted) -> None:
    found = planted["transpose_default_perm"].counterexample
    assert found is not None
    x_shape = found.shapes["x"]
    assert len(x_shape) == 3
    permuted = [x_shape[0], x_shape[2], x_shape[1]]
    reversed_ = list(reversed(x_shape))
    assert permuted != reversed_
    assert "shape" in found.detail


def test_a_squeeze_without_axes_is_refuted_where_a_dim_of_x_is_1(planted) -> None:
    found = planted["squeeze_all_after_unsqueeze"].counterexample
    assert found is not None
    assert 1 in found.shapes["x"]
    assert "is 1 = yes" in found.instance


def test_the_correct_versions_and_a_rule_that_only_moves_exp_are_proved() -> None:
    proofs = _prove("correct.rw")
    assert {name: proof.status for name, proof in proofs.items()} == {
        "add_neg_to_sub": ProofStatus.PROVED,
        "neg_before_transpose": ProofStatus.PROVED,
        "compose_constant_scales": ProofStatus.PROVED,
        "exp_before_transpose": ProofStatus.PROVED,
    }
    assert "dtypes int32" in proofs["compose_constant_scales"].coverage
    assert all(proof.counterexample is None and proof.instances > 0 for proof in proofs.values())
    assert all(proof.complete and proof.exact for proof in proofs.values())


def test_gemm_is_proved_as_the_matmul_it_composes_plus_its_bias() -> None:
    # Gemm = alpha * MatMul(A', B') + beta * C with the product uninterpreted: moving the
    # product or a transpose is proved; doubling it is never proved
    proofs = _prove("gemm.rw")
    assert proofs["matmul_add_to_gemm"].status is ProofStatus.PROVED
    assert proofs["transpose_into_gemm"].status is ProofStatus.PROVED
    assert proofs["gemm_with_alpha_two"].status is not ProofStatus.PROVED


def test_unsupported_rules_say_why() -> None:
    proofs = _prove("unsupported.rw")
    assert {name: (p.status, p.reason) for name, p in proofs.items()} == {
        "narrow_to_float16": (ProofStatus.UNSUPPORTED, "approximate rule"),
        "conv_without_bias": (ProofStatus.UNSUPPORTED, "op `Conv` has no semantics here"),
    }


def test_cli_writes_json_and_exits_1_on_a_refuted_rule(tmp_path, capsys) -> None:
    out = tmp_path / "proofs.json"
    code = main(["prove", str(RULES / "planted.rw"), "--rule", "swapped_sub", "--json", str(out)])
    assert code == 1
    (entry,) = json.loads(out.read_text())["rules"]
    assert {key: entry[key] for key in ("name", "line", "status")} == {
        "name": "swapped_sub",
        "line": 5,
        "status": "refuted",
    }
    assert entry["file"].endswith("planted.rw")
    assert set(entry["counterexample"]["inputs"]) == {"a", "b"}
    printed = capsys.readouterr().out
    assert "rule `swapped_sub` is refuted" in printed
    assert "input a (float" in printed


def test_cli_json_on_stdout_and_exit_0_without_refutations(capsys) -> None:
    # in two processes: the results come back in the rules' order
    code = main(["prove", str(RULES / "unsupported.rw"), "--json", "-", "--jobs", "2"])
    assert code == 0
    captured = capsys.readouterr()
    rules = json.loads(captured.out)["rules"]
    assert [(r["name"], r["status"], r["counterexample"]) for r in rules] == [
        ("narrow_to_float16", "unsupported", None),
        ("conv_without_bias", "unsupported", None),
    ]
    assert "2 unsupported" in captured.err  # the table goes to stderr when stdout is JSON


def test_cli_names_an_unknown_rule(capsys) -> None:
    assert main(["prove", str(RULES / "correct.rw"), "--rule", "nope"]) == 2
    assert capsys.readouterr().err == "rewrite prove: error: no rule named nope\n"


@pytest.mark.parametrize(
    ("argument", "message"),
    [
        (["--timeout", "0"], "expected a positive number of seconds, got '0'"),
        (["--max-rank", "7"], "expected a rank from 0 to 6, got '7'"),
    ],
)
def test_cli_refuses_bad_values(argument, message, capsys) -> None:
    assert main(["prove", str(RULES / "correct.rw"), *argument]) == 2
    assert message in capsys.readouterr().err


def test_check_rules_shows_the_proof_status_beside_its_own(tmp_path, capsys) -> None:
    out = tmp_path / "checked.json"
    arguments = ["check-rules", str(RULES / "planted.rw"), "--rule", "swapped_sub", "--jobs", "1"]
    options = ["--instances", "1", "--examples", "4", "--passes", "none", "--prove"]
    assert main([*arguments, *options, "--json", str(out)]) == 1
    (entry,) = json.loads(out.read_text())["rules"]
    assert entry["status"] == "failed"
    assert entry["proof"] == "refuted"
    header = next(line for line in capsys.readouterr().out.splitlines() if "location" in line)
    assert header.split()[:4] == ["rule", "location", "status", "proof"]


def test_assumes_finite_is_honoured() -> None:
    proofs = _prove("finite.rw")
    wrong_at_nan = proofs["keep_non_nan_without_assumption"]
    assert wrong_at_nan.status is ProofStatus.REFUTED
    assert wrong_at_nan.counterexample is not None
    assert np.isnan(wrong_at_nan.counterexample.inputs["x"])
    assert proofs["keep_non_nan"].status is ProofStatus.PROVED


def test_a_variadic_binding_is_typed_as_one_class_and_never_crashes_the_run() -> None:
    from rewriter.api import library_path

    ruleset = load_rules(library_path() / "folding" / "clip.rw")
    (proof,) = prove_rules(ruleset, OPTIONS, names=["fuse_successive_min"])
    assert proof.status in (ProofStatus.PROVED, ProofStatus.UNSUPPORTED)
    assert "prover error" not in (proof.reason or "")
