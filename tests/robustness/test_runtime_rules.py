"""Bad rules at run time, through the command line: a rewrite that would break the model is
rolled back and reported while the other rules still apply; rules that undo each other
forever are stopped by the budget with a warning naming them, and a valid model is written."""

from __future__ import annotations

from pathlib import Path

import onnx
import onnx.checker
import pytest

from rewriter.cli import main
from tests.helpers import assert_same_outputs, model_from_text, op_types

MODEL = """<ir_version: 8, opset_import: ["" : 17]>
g (float[N, 4] x) => (float[N, 4] y) {
    a = Relu (x)
    b = Identity (a)
    y = Neg (b)
}"""
GOOD_RULE = """
# Identity(x) -> x
rule drop_identity: y = Identity (x) => y = x
"""
BAD_RULES = {
    # The type of `a` would change from float to int64.
    "ill_typed": "rule bad: y = Relu (x) => y = Cast <to = 7> (x)",
    # onnx's inference rejects the new node: a permutation for a rank-5 input.
    "invalid_node": "rule bad: y = Relu (x) => y = Transpose <perm = [4, 3, 2, 1, 0]> (x)",
    # onnx's inference rejects the new node: an axis out of range.
    "axis_out_of_range": "rule bad: y = Relu (x) => y = Concat <axis = 5> (x, x)",
    # The shape of `a` would change.
    "wrong_shape": "rule bad: y = Relu (x) => y = Reshape (x, [3, 5])",
}
EXPECTED_REASON = {
    "ill_typed": "at <Relu>: the rewrite would change `a` from float to int64",
    "invalid_node": "at <Relu>: Transpose: [TypeInferenceError] Invalid attribute perm",
    "axis_out_of_range": "at <Relu>: Concat: [ShapeInferenceError] axis must be in",
    "wrong_shape": "the rewrite would change the shape of `a`: float[N,4] -> float[3,5]",
}


@pytest.fixture
def model_path(tmp_path: Path) -> Path:
    path = tmp_path / "model.onnx"
    onnx.save(model_from_text(MODEL), path)
    return path


@pytest.mark.parametrize("kind", list(BAD_RULES))
def test_a_rewrite_that_would_break_the_model_is_rolled_back_and_reported(
    kind: str, model_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rules = tmp_path / "rules.rw"
    rules.write_text(f"# Wrong on purpose.\n{BAD_RULES[kind]}\n{GOOD_RULE}")
    out = tmp_path / "out.onnx"
    code = main([str(model_path), "--rules", str(rules), "-o", str(out), "--no-progress"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    # The bad rule is named with its location, once, on one line.
    lines = [line for line in captured.err.splitlines() if "`bad`" in line]
    assert len(lines) == 1, captured.err
    assert lines[0].startswith(f"rewrite: warning: rule `bad` ({rules}:2)"), lines[0]
    assert "rolled back" in lines[0]
    assert EXPECTED_REASON[kind] in lines[0]
    # The other rule still applied, and the written model is valid and equivalent.
    assert "3 -> 2 nodes: 1 cleanup;" in captured.out
    result = onnx.load(out)
    onnx.checker.check_model(result, full_check=True)
    assert op_types(result) == ["Relu", "Neg"]
    assert_same_outputs(onnx.load(model_path), result)


def test_rules_that_undo_each_other_stop_at_the_budget_with_a_valid_model(
    model_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rules = tmp_path / "loop.rw"
    rules.write_text(
        "# Relu(x) -> Max(x, 0) and back: each rule undoes the other.\n"
        "rule relu_to_max: y = Relu (x) => y = Max (x, 0.0)\n"
        "rule max_to_relu: y = Max (x, 0.0) => y = Relu (x)\n"
        f"{GOOD_RULE}"
    )
    out = tmp_path / "out.onnx"
    args = [str(model_path), "--rules", str(rules), "-o", str(out), "--no-progress"]
    code = main([*args, "--max-rewrites", "50"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    warnings = [line for line in captured.err.splitlines() if "budget" in line]
    assert len(warnings) == 1, captured.err
    assert warnings[0].startswith("rewrite: warning: stopped after 50 rewrites (the budget)")
    assert "`relu_to_max`" in warnings[0]
    assert "`max_to_relu`" in warnings[0]
    assert "stopped early: the rewrite budget was spent" in captured.out
    result = onnx.load(out)
    onnx.checker.check_model(result, full_check=True)
    assert op_types(result)[-1] == "Neg"
    assert "Identity" not in op_types(result)
    assert_same_outputs(onnx.load(model_path), result)


def test_the_default_budget_also_stops_a_loop(
    model_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rules = tmp_path / "loop.rw"
    rules.write_text(
        "# Neg(x) -> Neg(x) rebuilt: a rule that always matches its own output.\n"
        "rule renew: y = Neg (x) => y = Neg (x)\n"
    )
    out = tmp_path / "out.onnx"
    assert main([str(model_path), "--rules", str(rules), "-o", str(out), "--no-progress"]) == 0
    err = capsys.readouterr().err
    assert "the rules that kept firing: `renew`" in err
    assert_same_outputs(onnx.load(model_path), onnx.load(out))
