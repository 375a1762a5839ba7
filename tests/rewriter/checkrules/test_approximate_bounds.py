"""check-rules holds an approximate rule to its declared bound, not to equivalence."""

from __future__ import annotations

from pathlib import Path

import pytest

from rewriter.api import load_rules
from rewriter.checkrules import CheckOptions, Status, check_rules
from rewriter.cli import main

RULE = """\
rule int8_matmul approximate snr >= {bound} {{
  match {{
    y = MatMul (x, w)
  }}
  where {{
    is_const(w)
    rank(w) == 2
    rank(x) >= 2
    dtype(x) == "float"
    opset() >= 11
  }}
  rewrite {{
    # 7-bit weights where onnxruntime's uint8 x int8 sums saturate (x86 without VNNI).
    let narrow = 127.0 / 64.0 if int8_sums_saturate() else 1.0
    let scale = cast(symmetric_scale(w, "int8", axis = 1) * narrow, "float")
    xq, xs, xz = DynamicQuantizeLinear (x)
    acc = MatMulInteger (xq, quantize(w, scale, "int8", axis = 1), xz)
    wide = Cast <to = "float"> (acc)
    rescale = Mul (xs, scale)
    y = Mul (wide, rescale)
  }}
}}
"""


def _report(tmp_path: Path, bound: int):
    path = tmp_path / "rule.rw"
    path.write_text(RULE.format(bound=bound))
    (report,) = check_rules(load_rules(path), CheckOptions(seed=0, instances=2))
    return report


def test_a_bound_the_rule_meets_verifies_and_says_so(tmp_path: Path) -> None:
    report = _report(tmp_path, 25)
    assert report.status is Status.VERIFIED
    assert "approximate: held to snr >= 25 on plain inputs, not to equivalence" in report.detail


def test_a_bound_too_tight_fails_with_the_measured_value(tmp_path: Path) -> None:
    report = _report(tmp_path, 90)
    assert report.status is Status.FAILED
    assert report.detail.startswith(
        "the declared bound `approximate snr >= 90` does not hold: snr is "
    )
    measured = float(report.detail.split("snr is ")[1].split(" ")[0])
    assert 25 < measured < 90
    assert report.counterexample is not None
    assert report.counterexample.inputs


def test_command_exit_code_follows_the_bound(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "rule.rw"
    path.write_text(RULE.format(bound=90))
    assert main(["check-rules", str(path), "--jobs", "1"]) == 1
    assert "the declared bound `approximate snr >= 90` does not hold" in capsys.readouterr().out


def _unsaturated(op: str, second: str = "") -> str:
    """A float16 rule without saturation, as float16.rw was: `op` between two Casts."""
    extra = f", {second}" if second else ""
    return f"""\
rule float16_{op.lower()}_unsaturated approximate snr >= 45 {{{{
  match {{{{
    y = {op} <...> (x{extra}) as n
  }}}}
  where {{{{
    dtype(x) == "float"
  }}}}
  rewrite {{{{
    x16 = Cast <to = "float16"> (x)
    y16 = {op} <...n> (x16{extra})
    y = Cast <to = "float"> (y16)
  }}}}
}}}}
"""


@pytest.mark.parametrize(
    ("rule", "case"),
    [
        (_unsaturated("Transpose"), "a fully masked row"),
        (_unsaturated("Reshape", "shape"), "a mask of 0 and the lowest value"),
    ],
)
def test_a_narrowing_that_turns_masks_into_infinities_fails(
    tmp_path: Path, rule: str, case: str
) -> None:
    # Plain inputs meet the bound; float32's lowest value (a mask) casts to float16's -inf, a
    # value the original never has (and 0 * -inf or a row of -inf gives NaN downstream).
    path = tmp_path / "rule.rw"
    path.write_text(rule.format())
    (report,) = check_rules(load_rules(path), CheckOptions(seed=0, instances=2))
    assert report.status is Status.FAILED
    assert report.detail.startswith(f"NaN or infinity where the original is finite, on {case}: ")
    assert report.counterexample is not None
    assert report.counterexample.inputs


def test_the_shipped_float16_rules_keep_masks_finite() -> None:
    import dataclasses

    from rewriter.api import library_path

    ruleset = load_rules(library_path() / "quantize" / "float16_sensitive.rw")
    wanted = {"float16_sensitive_bounded", "float16_binary", "float16_unary", "float16_layout"}
    chosen = tuple(rule for rule in ruleset.rules if rule.name in wanted)
    reports = check_rules(
        dataclasses.replace(ruleset, rules=chosen), CheckOptions(seed=0, instances=2)
    )
    assert {r.name for r in reports} == wanted
    assert all(r.status is Status.VERIFIED for r in reports), [r.detail for r in reports]
