"""Regression tests for what the command-line fuzzer found (see fuzz.py).

Findings of the loader fuzzer are broken models and live in `bad_models.CATALOGUE`.
"""

from __future__ import annotations

import json
from pathlib import Path

import onnx
import pytest

from rewriter.cli import main
from tests.rewriter.engine_helpers import model_from_text

MODEL = """<ir_version: 8, opset_import: ["" : 17]>
g (float[N, 4] x) => (float[N, 4] y) {
    t = Identity (x)
    y = Relu (t)
}"""


def test_verify_with_json_writes_the_verdict(tmp_path: Path) -> None:
    # `rewrite --verify --json FILE` called a VerifyResult.to_json that did not exist.
    source = tmp_path / "m.onnx"
    onnx.save(model_from_text(MODEL), source)
    report = tmp_path / "run.json"
    args = [str(source), "-o", str(tmp_path / "o.onnx"), "--verify", "--examples", "2"]
    assert main([*args, "--json", str(report), "--no-progress"]) == 0
    verification = json.loads(report.read_text())["verification"]
    assert verification["ok"] is True
    assert [o["name"] for o in verification["outputs"]] == ["y"]


@pytest.mark.parametrize("flag", ["-vv", "-v"])
def test_verbose_runs_of_bad_input_still_exit_2(
    tmp_path: Path, flag: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # With -vv the command line re-raises after printing, for debugging; main() itself
    # still reports one line first.
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"\x08\x07garbage")
    if flag == "-vv":
        with pytest.raises(Exception, match="not an ONNX model"):
            main([flag, str(bad)])
    else:
        assert main([flag, str(bad)]) == 2
    assert "rewrite: error: " in capsys.readouterr().err
