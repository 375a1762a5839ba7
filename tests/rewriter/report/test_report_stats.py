"""The statistics report (`rewrite stats MODEL --report FILE`)."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

import ir
from rewriter import cli
from rewriter.report import render_stats_report
from tests.rewriter.report import _models as models


def test_stats_report_sections(tmp_path):
    source = models.save_chain(tmp_path, layers=3)
    html = render_stats_report(ir.load(source), name="chain.onnx", top=4)
    for section_id in ("overview", "opsets", "ops", "dtypes", "initializers", "largest"):
        assert f'<section id="{section_id}">' in html
    assert "Model statistics: chain.onnx" in html
    assert html.count('<svg class="chart"') == 2
    # Parameters by initializer: the top 4 of 7, with shares that add up.
    initializers = html[html.index('<section id="initializers">') :]
    initializers = initializers[: initializers.index("</section>")]
    assert initializers.count("<tr>") == 1 + 4
    assert "<td>w0</td><td>float</td><td>4x4</td>" in initializers


def test_stats_report_lists_constant_node_tensors(tmp_path):
    big = numpy_helper.from_array(np.zeros((64, 64), dtype=np.float32), "k")
    graph = helper.make_graph(
        [
            helper.make_node("Constant", [], ["k<&>"], value=big, name="const"),
            helper.make_node("Add", ["x", "k<&>"], ["y"]),
        ],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [64, 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [64, 64])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    path = tmp_path / "const.onnx"
    onnx.save(model, path)
    html = render_stats_report(ir.load(path))
    largest = html[html.index('<section id="largest">') :]
    assert "k&lt;&amp;&gt; (Constant)" in largest
    assert "16.0 KiB" in largest
    assert "k<&>" not in html


def test_stats_command_writes_report(tmp_path, capsys):
    source = models.save_chain(tmp_path, layers=2)
    report = tmp_path / "stats.html"
    assert cli.main(["stats", str(source), "--report", str(report)]) == 0
    html = report.read_text(encoding="utf-8")
    assert html.startswith("<!DOCTYPE html>")
    assert "Model statistics: chain.onnx" in html
    assert "nodes by op type" in capsys.readouterr().out


def test_rewrite_command_writes_report(tmp_path, capsys):
    source = models.save_chain(tmp_path, layers=4)
    rules = models.write_rules(tmp_path)
    report = tmp_path / "report.html"
    argv = [str(source), "--rules", str(rules), "--no-progress", "--report", str(report)]
    assert cli.main(argv) == 0
    assert f"wrote report {report}" in capsys.readouterr().out
    html = report.read_text(encoding="utf-8")
    assert 'id="rule-fuse_linear"' in html
    assert html.count('<details class="app"') == 5


def test_report_is_written_when_verification_fails(tmp_path):
    source = models.save_chain(tmp_path, layers=1)
    wrong = tmp_path / "wrong.rw"
    wrong.write_text(
        "# x * 1 -> -x (wrong on purpose)\nrule negate: y = Mul (x, 1) => y = Neg (x)\n"
    )
    report = tmp_path / "report.html"
    argv = [str(source), "--rules", str(wrong), "--verify", "--examples", "5", "--no-progress"]
    assert cli.main([*argv, "--report", str(report)]) == 1
    html = report.read_text(encoding="utf-8")
    verification = html[html.index('<section id="verification">') :]
    assert '<span class="bad">MISMATCH</span>' in verification
    assert 'id="rule-negate"' in html
