"""`rewrite lint`: a rule that narrows numerics must declare an `approximate` bound."""

from __future__ import annotations

from pathlib import Path

import pytest

from rewriter._errors import RuleCheckError
from rewriter.api import load_rules
from rewriter.cli import main

QUANTIZING = """\
rule q {
  match {
    y = MatMul (x, w)
  }
  where {
    is_const(w)
  }
  rewrite {
    let s = symmetric_scale(w, "int8", axis = 1)
    xq, xs, xz = DynamicQuantizeLinear (x)
    acc = MatMulInteger (xq, quantize(w, s, "int8", axis = 1), xz)
    wide = Cast <to = "float"> (acc)
    y = Mul (wide, Mul (xs, s))
  }
}
"""


def _errors(tmp_path: Path, text: str) -> list[str]:
    path = tmp_path / "rules.rw"
    path.write_text(text)
    with pytest.raises(RuleCheckError) as caught:
        load_rules(path)
    return [f"{d.span.line}:{d.span.col}: {d.message}" for d in caught.value.diagnostics]


def test_quantization_op_without_approximate_is_an_error_at_the_op(tmp_path: Path) -> None:
    assert _errors(
        tmp_path, QUANTIZING.replace("y = Mul (wide, Mul (xs, s))", "y = Mul (wide, s)")
    ) == [
        "10:18: rule `q` introduces the quantization op `DynamicQuantizeLinear` but declares no "
        "accuracy bound; add `approximate METRIC CMP BOUND` to its header (e.g. `approximate "
        "snr >= 30`)"
    ]


def test_the_same_rule_with_approximate_loads(tmp_path: Path) -> None:
    path = tmp_path / "rules.rw"
    path.write_text(
        QUANTIZING.replace("rule q {", "rule q approximate snr >= 30 {").replace(
            "y = Mul (wide, Mul (xs, s))", "y = Mul (wide, s)"
        )
    )
    assert load_rules(path).rule("q").approximate is not None


@pytest.mark.parametrize(
    ("rule", "where", "what"),
    [
        ('rule h: y = Relu (x) => y = Cast <to = "float16"> (x)', "1:29", "casts to float16"),
        ("rule h: y = Relu (x) => y = Cast <to = 16> (x)", "1:29", "casts to bfloat16"),
        ('rule h: y = Relu (x) => y = Relu (cast(x, "float16"))', "1:35", "casts to float16"),
        (
            'rule h: y = Relu (x) => y = DequantizeLinear (quantize(x, 0.1, "int8"), 0.1)',
            "1:29",
            "introduces the quantization op `DequantizeLinear`",
        ),
        (
            "rule h: y = MatMul (x, w) => y = com.microsoft.MatMulNBits (x, w)",
            "1:34",
            "MatMulNBits",
        ),
    ],
)
def test_narrowing_rewrites_need_the_header(
    tmp_path: Path, rule: str, where: str, what: str
) -> None:
    (error,) = _errors(tmp_path, rule + "\n")
    assert error.startswith(f"{where}: rule `h` ")
    assert what in error


def test_keeping_a_matched_quantized_op_or_casting_back_needs_no_header(tmp_path: Path) -> None:
    path = tmp_path / "rules.rw"
    path.write_text(
        "rule keep: y = QLinearMatMul (a, b, c, d, e, f, g, h) => y = QLinearMatMul (a, b, c, d, e, f, g, h)\n"
        "rule back: y = Relu (x) => y = Cast <to = dtype(x)> (x)\n"
    )
    assert len(load_rules(path).rules) == 2


def test_lint_command_reports_file_line_col_and_fails(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "rules.rw"
    path.write_text('rule h: y = Relu (x) => y = Cast <to = "float16"> (x)\n')
    assert main(["lint", str(path)]) == 2
    out = capsys.readouterr().out
    assert f"{path}:1:29: error: rule `h` casts to float16 (lowers float precision)" in out
    assert "^~~~" in out
