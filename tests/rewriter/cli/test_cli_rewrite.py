"""The `rewrite` command: outputs, safety of files, reports, exit codes, verification."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import onnx
import onnx.parser
import pytest

import rewriter
from rewriter.cli import main
from tests.helpers import assert_same_outputs, model_from_text

MODEL_TEXT = """<ir_version: 8, opset_import: ["" : 17]>
g (float[N, 4] x) => (float[N, 4] y) {
    one = Constant <value = float {1.0}> ()
    t = Mul (x, one)
    u = Identity (t)
    y = Relu (u)
}"""


@pytest.fixture
def model_path(tmp_path: Path) -> Path:
    path = tmp_path / "model.onnx"
    onnx.save(model_from_text(MODEL_TEXT), path)
    return path


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_rewrite_writes_the_output_and_keeps_the_input(model_path, tmp_path, capsys):
    before = _digest(model_path)
    out = tmp_path / "out.onnx"
    assert main([str(model_path), "-o", str(out)]) == 0
    assert _digest(model_path) == before
    result = onnx.load(out)
    assert [n.op_type for n in result.graph.node] == ["Relu"]
    assert_same_outputs(onnx.load(model_path), result)
    assert "4 -> 1 nodes" in capsys.readouterr().out


def test_default_output_name_is_beside_the_input(model_path):
    assert main([str(model_path)]) == 0
    assert (model_path.parent / "model.rewritten.onnx").is_file()


def test_existing_output_needs_force(model_path, tmp_path, capsys):
    out = tmp_path / "out.onnx"
    out.write_bytes(b"keep me")
    assert main([str(model_path), "-o", str(out)]) == 2
    assert "exists; pass --force" in capsys.readouterr().err
    assert out.read_bytes() == b"keep me"
    assert main([str(model_path), "-o", str(out), "--force"]) == 0
    assert onnx.load(out).graph.node


def test_in_place_rewrites_the_input(model_path):
    assert main([str(model_path), "--in-place"]) == 0
    assert [n.op_type for n in onnx.load(model_path).graph.node] == ["Relu"]


def test_explain_and_json_report(model_path, tmp_path, capsys):
    report = tmp_path / "report.json"
    out = tmp_path / "out.onnx"
    assert main([str(model_path), "-o", str(out), "--explain", "--json", str(report)]) == 0
    text = capsys.readouterr().out
    assert "rules applied:" in text
    assert "mul_one" in text
    assert "eliminate_identity" in text
    data = json.loads(report.read_text())
    assert data["ops_before"] == {"Constant": 1, "Identity": 1, "Mul": 1, "Relu": 1}
    assert data["ops_after"] == {"Relu": 1}
    rules = [e["rule"] for e in data["trace"]["applied"]]
    assert "mul_one" in rules
    assert all(":" in e["location"] for e in data["trace"]["applied"] if e["kind"] == "rule")
    assert "rewrite" in data["timings_seconds"]


def test_why_not_names_the_failing_condition(tmp_path, capsys):
    model = model_from_text(
        """<ir_version: 8, opset_import: ["" : 17]>
        g (float[4] x) => (float[2, 4] y) {
            one = Constant <value = float[2, 4] {1,1,1,1,1,1,1,1}> ()
            y = Mul (x, one)
        }"""
    )
    path = tmp_path / "b.onnx"
    onnx.save(model, path)
    assert main([str(path), "--why-not", "mul_one"]) == 0
    text = capsys.readouterr().out
    assert "why not `mul_one`" in text
    assert "where line" in text
    assert "false" in text
    assert main([str(path), "--why-not", "no_such_rule"]) == 2
    assert "no rule named `no_such_rule`" in capsys.readouterr().err


def test_why_not_quotes_a_plain_where_line_with_its_values(tmp_path, capsys):
    rules = tmp_path / "r.rw"
    rules.write_text(
        "# x - b -> x\nrule r {\n  match {\n    y = Sub (x, b)\n  }\n"
        "  where {\n    rank(x) == 2 and shape(x)[1] == 3\n  }\n  rewrite {\n    y = x\n  }\n}\n"
    )
    model = model_from_text(
        """<ir_version: 8, opset_import: ["" : 17]>
        g (float[N, 4] x, float[N, 4] b) => (float[N, 4] y) {
            y = Sub (x, b)
        }"""
    )
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    assert main([str(path), "--rules", str(rules), "--why-not", "r"]) == 0
    last = capsys.readouterr().out.splitlines()[-1]
    assert "where line 7: `shape(x)[1] == 3` is false (shape(x)[1] is 4)" in last


def test_why_not_judges_the_model_as_converted_up_to_the_target_opset(tmp_path, capsys):
    model = model_from_text(
        """<ir_version: 8, opset_import: ["" : 14]>
        g (float[2, 4] x) => (float[2, 4] y) {
            c = Constant <value = float {1.4142135}> ()
            one = Constant <value = float {1.0}> ()
            half = Constant <value = float {0.5}> ()
            u = Div (x, c)
            e = Erf (u)
            h = Add (e, one)
            t = Mul (x, h)
            y = Mul (t, half)
        }"""
    )
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    assert main([str(path), "--why-not", "fuse_gelu_erf_mul_last"]) == 0
    assert "the model has 14" in capsys.readouterr().out
    assert main([str(path), "--why-not", "fuse_gelu_erf_mul_last", "--target-opset", "20"]) == 0
    text = capsys.readouterr().out
    assert "the model has 14" not in text
    assert ": matches" in text


def test_bad_model_is_one_line_exit_2_and_no_output(tmp_path, capsys):
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"\x00\x01garbage\xff" * 10)
    out = tmp_path / "out.onnx"
    assert main([str(bad), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("rewrite: error: ")
    assert "Traceback" not in err
    assert len(err.strip().splitlines()) == 1
    assert not out.exists()


def test_bad_rules_report_file_line_col(model_path, tmp_path, capsys):
    rules = tmp_path / "bad.rw"
    rules.write_text("rule r: y = Relu (x) -> y = x\n")
    assert main([str(model_path), "--rules", str(rules), "-o", str(tmp_path / "o.onnx")]) == 2
    err = capsys.readouterr().err
    assert f"{rules}:1:" in err
    assert "^" in err
    assert "Traceback" not in err


def test_verify_passes_for_a_correct_library(model_path, tmp_path, capsys):
    out = tmp_path / "out.onnx"
    assert main([str(model_path), "-o", str(out), "--verify", "--examples", "5"]) == 0
    assert "equivalent" in capsys.readouterr().out
    assert out.is_file()


def test_verify_catches_and_bisects_a_wrong_rule(model_path, tmp_path, capsys):
    rules = tmp_path / "wrong.rw"
    rules.write_text(
        "rule identity: y = Identity (x) => y = x\n"
        "# Wrong on purpose: Relu is not Abs.\n"
        "rule relu_is_abs: y = Relu (x) => y = Abs (x)\n"
    )
    out = tmp_path / "out.onnx"
    code = main(
        [str(model_path), "--rules", str(rules), "-o", str(out), "--verify", "--examples", "10"]
    )
    captured = capsys.readouterr()
    assert code == 1
    assert "relu_is_abs" in captured.err
    assert f"{rules}:3" in captured.err
    assert not out.exists()


def test_two_runs_give_byte_identical_files(tmp_path):
    source = Path(__file__).resolve().parents[2] / "models" / "bert_ts14.onnx"
    first = tmp_path / "a.onnx"
    second = tmp_path / "b.onnx"
    assert main([str(source), "-o", str(first)]) == 0
    assert main([str(source), "-o", str(second)]) == 0
    assert first.read_bytes() == second.read_bytes()


def test_stats_reports_ops_and_parameters(tmp_path, capsys):
    source = Path(__file__).resolve().parents[2] / "models" / "cnn_bn_ts14.onnx"
    report = tmp_path / "stats.json"
    assert main(["stats", str(source), "--json", str(report)]) == 0
    text = capsys.readouterr().out
    assert "BatchNormalization" in text
    data = json.loads(report.read_text())
    assert data["ops"]["BatchNormalization"] == 15
    assert data["parameters"] > 0
    assert data["largest_tensors"][0]["bytes"] >= data["largest_tensors"][-1]["bytes"]


def test_add_opset_enables_contrib_fusions_and_is_dropped_when_unused(tmp_path, capsys):
    fusable = tmp_path / "skip_ln.onnx"
    onnx.save(
        model_from_text(
            """<ir_version: 8, opset_import: ["" : 17]>
            g (float[N, 3, 4] x, float[N, 3, 4] s) => (float[N, 3, 4] y)
            <float[4] gamma = {1, 2, 3, 4}, float[4] beta = {0, 1, 0, 1}>
            {
                t = Add (x, s)
                y = LayerNormalization <axis = -1, epsilon = 1e-5> (t, gamma, beta)
            }"""
        ),
        fusable,
    )
    ort_rules = str(rewriter.library_path() / "ort")
    out = tmp_path / "o.onnx"
    assert main([str(fusable), "--rules", ort_rules, "-o", str(out)]) == 0
    assert [n.op_type for n in onnx.load(out).graph.node] == ["Add", "LayerNormalization"]
    assert (
        main(
            [
                str(fusable),
                "--rules",
                ort_rules,
                "-o",
                str(out),
                "--force",
                "--add-opset",
                "com.microsoft=1",
            ]
        )
        == 0
    )
    fused = onnx.load(out)
    assert [n.op_type for n in fused.graph.node] == ["SkipLayerNormalization"]
    assert "com.microsoft" in {o.domain for o in fused.opset_import}
    assert_same_outputs(onnx.load(fusable), fused)
    # Nothing to fuse: the added import is not left behind.
    plain = tmp_path / "plain.onnx"
    onnx.save(model_from_text(MODEL_TEXT), plain)
    assert (
        main(
            [
                str(plain),
                "--rules",
                ort_rules,
                "-o",
                str(out),
                "--force",
                "--add-opset",
                "com.microsoft=1",
            ]
        )
        == 0
    )
    assert "com.microsoft" not in {o.domain for o in onnx.load(out).opset_import}
    assert main([str(plain), "-o", str(out), "--force", "--add-opset", "com.microsoft"]) == 2
    assert "DOMAIN=VERSION" in capsys.readouterr().err


def test_excluding_a_rule_that_is_not_loaded_is_an_error(model_path, tmp_path, capsys):
    out = tmp_path / "out.onnx"
    assert main([str(model_path), "-o", str(out), "--exclude-rule", "no_such_rule"]) == 2
    assert "--exclude-rule: no rule named `no_such_rule` is loaded" in capsys.readouterr().err
    assert not out.exists()


ATTENTION_TEXT = """<ir_version: 10, opset_import: ["" : 23]>
g (float[B, 2, S, 4] q, float[B, 2, 4, T] kt, float[B, 2, T, 4] v) => (float[B, 2, S, 4] y) {
    c = Constant <value = float {0.5}> ()
    s = MatMul (q, kt)
    t = Mul (s, c)
    p = Softmax <axis = -1> (t)
    y = MatMul (p, v)
}"""


def test_summary_counts_rewrites_that_assume_nonempty_and_exact_refuses_them(tmp_path, capsys):
    path = tmp_path / "attention.onnx"
    onnx.save(model_from_text(ATTENTION_TEXT), path)
    out = tmp_path / "out.onnx"
    assert main([str(path), "-o", str(out)]) == 0
    assert "1 rewrite assumes non-empty tensors (--exact refuses them)" in capsys.readouterr().out
    assert "Attention" in [n.op_type for n in onnx.load(out).graph.node]
    assert main([str(path), "-o", str(out), "--force", "--exact"]) == 0
    assert "assume" not in capsys.readouterr().out
    assert "Attention" not in [n.op_type for n in onnx.load(out).graph.node]
    # Known positive sizes prove the assumption: the exact run fuses.
    shapes = ["--input-shape", "q=1x2x3x4", "--input-shape", "kt=1x2x4x5"]
    shapes += ["--input-shape", "v=1x2x5x4"]
    assert main([str(path), "-o", str(out), "--force", "--exact", *shapes]) == 0
    assert "Attention" in [n.op_type for n in onnx.load(out).graph.node]


# LayerNormalization written out, as the TorchScript exporter writes it at opset 14.
LAYER_NORM_14 = """<ir_version: 8, opset_import: ["" : 14]>
g (float[2, 8] x) => (float[2, 8] n) {
  mu = ReduceMean <axes = [-1], keepdims = 1> (x)
  d = Sub (x, mu)
  two = Constant <value = float {2.0}> ()
  sq = Pow (d, two)
  var = ReduceMean <axes = [-1], keepdims = 1> (sq)
  eps = Constant <value = float {1e-5}> ()
  ve = Add (var, eps)
  sd = Sqrt (ve)
  n = Div (d, sd)
}"""


def test_the_summary_says_which_fusions_a_newer_opset_would_add(tmp_path, capsys):
    source = tmp_path / "ln14.onnx"
    onnx.save(onnx.parser.parse_model(LAYER_NORM_14), source)
    assert main([str(source), "-o", str(tmp_path / "out.onnx"), "--no-progress"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[-1] == "with --target-opset 17, rules would also fuse 1 LayerNormalization"
    # The claim holds: at that opset the fusion happens.
    out17 = tmp_path / "out17.onnx"
    assert main([str(source), "-o", str(out17), "--target-opset", "17", "--no-progress"]) == 0
    summary = capsys.readouterr().out.splitlines()
    assert [n.op_type for n in onnx.load(out17).graph.node] == ["LayerNormalization"]
    assert len(summary) == 1  # no hint once the opset is the user's choice


def test_a_report_without_graphviz_says_so_on_the_command_line(tmp_path, capsys, monkeypatch):
    import rewriter.report._dot as dot

    source = tmp_path / "ln14.onnx"
    onnx.save(onnx.parser.parse_model(LAYER_NORM_14), source)
    args = [str(source), "-o", str(tmp_path / "o.onnx"), "--target-opset", "17", "--no-progress"]
    monkeypatch.setattr(dot.shutil, "which", lambda name: None)
    assert main([*args, "--report", str(tmp_path / "r.html")]) == 0
    err = capsys.readouterr().err
    assert err.startswith(
        "rewrite: note: the report lists each rewrite's subgraphs as text, without pictures: "
        "the Graphviz program `dot` was not found on PATH; for pictures, `apt-get install graphviz`"
    )
    monkeypatch.setattr("rewriter.report.graphviz_missing", lambda: None)
    assert main([*args, "--report", str(tmp_path / "r2.html"), "--force"]) == 0
    assert "without pictures" not in capsys.readouterr().err


def test_verify_bisects_to_the_pass_whose_change_makes_the_difference(tmp_path, capsys):
    # Step 1 is a harmless rule rewrite; step 2 `fold_constants` folds the attention scale
    # (told to: by default it leaves it), which lets onnxruntime's ORT_ENABLE_ALL fuse it into
    # a FusedMatMul that rounds differently: judged bit for bit, the pass is to blame, not
    # the rule before it.
    from tests.rewriter.verification import _models

    source = tmp_path / "attention.onnx"
    onnx.save(_models.attention_scale(relu_pair=True), source)
    rules = tmp_path / "relu.rw"
    rules.write_text(
        "pass fold_constants { keep_matmul_scales = 0 }\n"
        "rule double_relu {\n  match {\n    t = Relu(x)\n    y = Relu(t)\n  }\n"
        "  rewrite {\n    y = Relu(x)\n  }\n}\n"
    )
    out = tmp_path / "out.onnx"
    args = [str(source), "--rules", str(rules), "--passes", "fold_constants", "-o", str(out)]
    exact = ["--compare", "direct", "--rtol", "0", "--atol", "0", "--no-progress"]
    code = main([*args, "--verify", *exact])
    captured = capsys.readouterr()
    assert code == 1
    blame = [line for line in captured.err.splitlines() if line.startswith("first step")]
    assert blame == [
        "first step after which onnxruntime's ORT_ENABLE_ALL disagrees: #2 pass fold_constants "
        "(built-in pass) in g: <Slice>(depth), <Cast>(depth_f), <Sqrt>(root), "
        "<Div>(scale), <Sqrt>(half) -> %depth, %depth_f, %root, %scale, %half"
    ]
    assert "the difference appears only under onnxruntime's graph optimizations" in captured.out
    assert "1 more com.microsoft.FusedMatMul, 1 fewer MatMul, 2 fewer Mul" in captured.out
    assert not out.exists()
