"""`rewrite lint`, `rewrite fmt` and `rewrite extract-rule` through the CLI entry point."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from rewriter.api import check_files as check
from rewriter.cli import main
from rewriter.dsl import parse

CLEAN = "# x*1 -> x\nrule mul_one: y = Mul (x, 1) => y = x where shape(y) == shape(x)\n"
WARNS = "rule unused_input: y = Add (x, z) => y = x\n"
BROKEN = "rule r {\n  match {\n    y = Relu (x)\n  }\n  rewrite {\n    y = Add (x, q)\n  }\n}\n"


def _write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


# -- lint --------------------------------------------------------------------------------------


def test_lint_clean_file_exits_0(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(tmp_path, "clean.rw", CLEAN)
    assert main(["lint", str(path)]) == 0
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "1 file checked: no problems" in captured.err


def test_lint_reports_errors_with_location_and_caret(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _write(tmp_path, "broken.rw", BROKEN)
    assert main(["lint", str(path)]) == 2
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == (
        f"{path}:6:17: error: unbound variable `q`: neither the match nor an earlier `let` or "
        "rewrite line defines it"
    )
    assert lines[1] == "    y = Add (x, q)"
    assert lines[2] == "                ^"


def test_lint_warnings_pass_unless_werror(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _write(tmp_path, "warns.rw", WARNS)
    assert main(["lint", str(path)]) == 0
    out = capsys.readouterr().out
    assert f"{path}:1:32: warning: `z` is bound but never used" in out
    assert main(["lint", "--werror", str(path)]) == 2


def test_lint_reads_folders_recursively_in_sorted_order(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _write(tmp_path, "b.rw", BROKEN)
    _write(tmp_path, "a/inner.rw", BROKEN.replace("rule r", "rule s"))
    _write(tmp_path, "notes.txt", "not a rule file")
    assert main(["lint", str(tmp_path)]) == 2
    headers = [line for line in capsys.readouterr().out.splitlines() if ": error: " in line]
    assert [h.split(":")[0] for h in headers] == [
        str(tmp_path / "a" / "inner.rw"),
        str(tmp_path / "b.rw"),
    ]


def test_lint_reports_a_syntax_error_in_one_file_and_checks_the_others(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _write(tmp_path, "a.rw", "rule r: y = Mul (x, 1.0) -> y = x\n")
    _write(tmp_path, "b.rw", BROKEN)
    assert main(["lint", str(tmp_path)]) == 2
    out = capsys.readouterr().out
    assert "a.rw:1:26: error: expected `=>` after pattern, found `->`" in out
    assert "b.rw:6:17: error: unbound variable `q`" in out


def test_lint_finds_duplicates_across_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _write(tmp_path, "a.rw", CLEAN)
    second = _write(tmp_path, "b.rw", "\n" + CLEAN)
    assert main(["lint", str(tmp_path)]) == 2
    out = capsys.readouterr().out
    assert f"{second}:3:6: error: duplicate rule name `mul_one`" in out
    assert f"{tmp_path / 'a.rw'}:2:6: note: `mul_one` is first defined here" in out


def test_lint_refuses_use_without_permission(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _write(tmp_path, "use.rw", 'use "helpers_mod"\n' + CLEAN)
    assert main(["lint", str(path)]) == 2
    assert "(the allow-python option)" in capsys.readouterr().out


def test_lint_missing_path_is_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["lint", str(tmp_path / "missing.rw")]) == 2
    assert "no such file" in capsys.readouterr().err


def test_lint_empty_folder_is_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["lint", str(tmp_path)]) == 2
    assert "no .rw files" in capsys.readouterr().err


def test_lint_never_prints_a_traceback(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "binary.rw"
    path.write_bytes(b"rule r: \xff\xfe y")
    assert main(["lint", str(path)]) == 2
    captured = capsys.readouterr()
    assert "Traceback" not in captured.out + captured.err
    assert f"{path}:1:9: error: this file is not UTF-8 text (byte 0xff)" in captured.out


# -- fmt ---------------------------------------------------------------------------------------


def test_fmt_check_lists_files_that_would_change(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    messy = _write(tmp_path, "messy.rw", "rule mul_one:y=Mul(x,1)=>y=x\n")
    tidy = _write(tmp_path, "tidy.rw", "rule add_zero: y = Add (x, 0) => y = x\n")
    assert main(["fmt", "--check", str(tmp_path)]) == 1
    assert capsys.readouterr().out == f"would reformat {messy}\n"
    assert messy.read_text() == "rule mul_one:y=Mul(x,1)=>y=x\n"
    assert main(["fmt", "--check", str(tidy)]) == 0


def test_fmt_rewrites_in_place_and_is_then_clean(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _write(tmp_path, "messy.rw", "# keep me\nrule mul_one:y=Mul(x,1)=>y=x   # x*1 -> x\n")
    assert main(["fmt", str(path)]) == 0
    assert capsys.readouterr().out == f"reformatted {path}\n"
    assert path.read_text() == "# keep me\nrule mul_one: y = Mul (x, 1) => y = x  # x*1 -> x\n"
    assert main(["fmt", "--check", str(path)]) == 0
    assert not [p for p in tmp_path.iterdir() if p.name != "messy.rw"], "no temporary files left"


def test_fmt_leaves_unparsable_files_alone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _write(tmp_path, "bad.rw", "rule r: y = Mul (x, 1.0) -> y = x\n")
    assert main(["fmt", str(path)]) == 2
    assert "expected `=>` after pattern" in capsys.readouterr().err
    assert path.read_text() == "rule r: y = Mul (x, 1.0) -> y = x\n"


# -- extract-rule ------------------------------------------------------------------------------


@pytest.fixture
def small_model(tmp_path: Path) -> Path:
    """input.1 -> MatMul(W) -> Add(b) -> LeakyRelu -> Transpose -> Transpose -> out."""
    x = helper.make_tensor_value_info("input.1", TensorProto.FLOAT, [1, 4])
    y = helper.make_tensor_value_info("out", TensorProto.FLOAT, [1, 3])
    weight = numpy_helper.from_array(np.ones((4, 3), np.float32), "encoder.layer0.weight")
    bias = numpy_helper.from_array(np.zeros((3,), np.float32), "b")
    nodes = [
        helper.make_node("MatMul", ["input.1", "encoder.layer0.weight"], ["mm_out"]),
        helper.make_node("Add", ["mm_out", "b"], ["add_out"]),
        helper.make_node("LeakyRelu", ["add_out"], ["lr"], alpha=0.1),
        helper.make_node("Transpose", ["lr"], ["t"], perm=[1, 0]),
        helper.make_node("Transpose", ["t"], ["out"], perm=[1, 0]),
    ]
    graph = helper.make_graph(nodes, "g", [x], [y], [weight, bias])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    path = tmp_path / "model.onnx"
    onnx.save(model, path)
    return path


def test_extract_rule_prints_a_skeleton_that_lints_with_only_the_empty_rewrite(
    small_model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert (
        main(
            [
                "extract-rule",
                str(small_model),
                "--inputs",
                "input.1",
                "--outputs",
                "out",
                "--name",
                "dense",
            ]
        )
        == 0
    )
    text = capsys.readouterr().out
    assert "rule dense {" in text
    assert "    mm_out = MatMul (input_1, w)\n" in text
    assert "    lr = LeakyRelu <alpha = 0.1> (add_out)\n" in text
    assert "    is_const(w, b)\n" in text
    diagnostics = check([parse(text, "skeleton.rw")])
    assert [(d.severity, d.message) for d in diagnostics] == [("error", "rewrite block is empty")]
    path = _write(tmp_path, "skeleton.rw", text)
    assert main(["lint", str(path)]) == 2
    out = capsys.readouterr().out
    assert out.count(": error: ") == 1
    assert ": error: rewrite block is empty" in out


def test_extract_rule_of_an_inner_subgraph(
    small_model: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["extract-rule", str(small_model), "--inputs", "lr", "--outputs", "out"]) == 0
    text = capsys.readouterr().out
    match = text[text.index("match {") : text.index("}")]
    assert match.splitlines()[1:-1] == [
        "    t = Transpose <perm = [1, 0]> (lr)",
        "    out = Transpose <perm = [1, 0]> (t)",
    ]
    assert "where" not in text


@pytest.mark.parametrize(
    ("inputs", "outputs", "message"),
    [
        ("input.1", "nope", "output `nope` is not a value of the model's main graph"),
        ("nope", "out", "input `nope` is not a value of the model's main graph"),
        (
            "add_out",
            "mm_out,out",
            "the outputs depend on `input.1`, which is neither one of the given inputs nor a constant (--inputs)",
        ),
        ("input.1,lr", "out", "input `input.1` does not feed the outputs"),
        ("lr", "lr", "no node lies between the inputs and the outputs"),
    ],
)
def test_extract_rule_errors_name_the_value(
    small_model: Path, capsys: pytest.CaptureFixture[str], inputs: str, outputs: str, message: str
) -> None:
    assert main(["extract-rule", str(small_model), "--inputs", inputs, "--outputs", outputs]) == 2
    err = capsys.readouterr().err
    assert message in err
    assert "Traceback" not in err


def test_a_file_starting_with_a_byte_order_mark_lints_clean(tmp_path, capsys):
    path = tmp_path / "bom.rw"
    path.write_bytes("\ufeff# x*1 -> x\nrule mul_one: y = Mul (x, 1.0) => y = x\n".encode())
    assert main(["lint", str(path)]) == 0
    assert "no problems" in capsys.readouterr().err


def test_extract_rule_refuses_a_subgraph_whose_inner_value_is_read_outside(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # LayerNorm's centered value (Sub) feeds both the variance (inside) and the Div (outside):
    # a rule matching up to the Sqrt would never fire.
    model = Path(__file__).parents[2] / "models" / "bert_ts14.onnx"
    args = ["--inputs", "/model/embeddings/Add_1_output_0"]
    args += ["--outputs", "/model/embeddings/LayerNorm/Sqrt_output_0"]
    assert main(["extract-rule", str(model), *args]) == 2
    err = capsys.readouterr().err
    assert "`/model/embeddings/LayerNorm/Sub_output_0`, computed inside the subgraph" in err
    assert "make it one of the outputs (--outputs)" in err
