"""`--json -` means standard output for every command: the JSON alone on stdout, people's text
on stderr, and no file named `-`."""

from __future__ import annotations

import json
import os
from pathlib import Path

import onnx
import onnx.parser
import pytest

from rewriter.cli import main

MODEL = """\
<ir_version: 8, opset_import: ["" : 17]>
g (float[2, 3] x) => (float[2, 3] y) {
  one = Constant <value = float {1.0}> ()
  t = Mul (x, one)
  y = Relu (t)
}
"""


@pytest.fixture
def model(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "m.onnx"
    onnx.save(onnx.parser.parse_model(MODEL), path)
    return path


def _no_dash_file(folder: Path) -> None:
    assert not (folder / "-").exists()


def test_the_main_command_writes_its_json_to_stdout(model, tmp_path, capsys):
    out = tmp_path / "out.onnx"
    assert main([str(model), "-o", str(out), "--json", "-", "--explain", "--no-progress"]) == 0
    captured = capsys.readouterr()
    payload = json.loads(captured.out)
    assert payload["nodes_before"] == 3
    assert payload["nodes_after"] == 1
    assert "3 -> 1 nodes" in captured.err  # the summary line, for people
    assert out.exists()
    _no_dash_file(tmp_path)


def test_stats_writes_its_json_to_stdout(model, tmp_path, capsys):
    assert main(["stats", str(model), "--json", "-"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["ops"] == {"Constant": 1, "Mul": 1, "Relu": 1}
    assert "nodes by op type" in captured.err
    _no_dash_file(tmp_path)


def test_check_rules_writes_its_json_to_stdout(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    rules = tmp_path / "r.rw"
    rules.write_text(
        "# relu(relu(x)) -> relu(x)\n"
        "rule twice {\n  match {\n    r = Relu (x)\n    y = Relu (r)\n  }\n"
        "  rewrite {\n    y = r\n  }\n}\n"
    )
    code = main(
        [
            "check-rules",
            str(rules),
            "--json",
            "-",
            "--jobs",
            "1",
            "--instances",
            "1",
            "--examples",
            "2",
            "--passes",
            "none",
        ]
    )
    captured = capsys.readouterr()
    assert code == 0, captured.err
    payload = json.loads(captured.out)
    assert [(r["name"], r["status"]) for r in payload["rules"]] == [("twice", "verified")]
    assert "verified" in captured.err
    _no_dash_file(tmp_path)
    assert os.listdir(tmp_path) == ["r.rw"]
