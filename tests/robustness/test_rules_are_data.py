"""Rule files are data: loading them imports and runs no Python unless `--allow-python`.

A `use "module"` line is refused without the flag (exit 2, `file:line:col` at `use`), and the
module is then not imported; with the flag the module is imported and its helpers are called.
The helper module is written to a temporary folder on `sys.path` and records its own import.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import onnx
import pytest

import rewriter
from rewriter.cli import main
from tests.helpers import model_from_text

MODULE = "rw_robustness_probe"
HELPER = '''
"""Records its own import (a marker file) and every call of its helper."""
import pathlib

MARKER = pathlib.Path(__file__).with_suffix(".imported")
MARKER.write_text("imported\\n")
CALLS = []


def probe_ok(rank):
    CALLS.append(rank)
    return True


RW_FUNCTIONS = {"probe_ok": probe_ok}
'''
RULES = f"""\
# Identity(x) -> x, on the say-so of a Python helper.
  use "{MODULE}"
rule drop_identity: y = Identity (x) => y = x where probe_ok(rank(x))
"""
MODEL = """<ir_version: 8, opset_import: ["" : 17]>
g (float[N, 4] x) => (float[N, 4] y) {
    t = Identity (x)
    y = Relu (t)
}"""


@pytest.fixture
def helper_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    folder = tmp_path / "helpers"
    folder.mkdir()
    (folder / f"{MODULE}.py").write_text(HELPER)
    monkeypatch.syspath_prepend(str(folder))
    sys.modules.pop(MODULE, None)
    yield folder
    sys.modules.pop(MODULE, None)


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path]:
    rules = tmp_path / "probe.rw"
    rules.write_text(RULES)
    model = tmp_path / "model.onnx"
    onnx.save(model_from_text(MODEL), model)
    return rules, model


def _imported(helper_dir: Path) -> bool:
    return MODULE in sys.modules or (helper_dir / f"{MODULE}.imported").exists()


def test_use_without_allow_python_is_refused_at_the_use_keyword(
    helper_dir: Path, files: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rules, model = files
    out = tmp_path / "out.onnx"
    assert main([str(model), "--rules", str(rules), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    first = err.splitlines()[0]
    assert f'{rules}:2:3: error: `use "{MODULE}"` runs Python code' in first
    assert "(the allow-python option)" in first
    assert err.splitlines()[1] == f'  use "{MODULE}"'
    assert err.splitlines()[2] == "  ^~~"
    assert not out.exists()
    assert not _imported(helper_dir)


@pytest.mark.parametrize("command", ["lint", "check-rules"])
def test_other_commands_refuse_use_too(
    helper_dir: Path,
    files: tuple[Path, Path],
    command: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    rules, _ = files
    assert main([command, str(rules)]) == 2
    captured = capsys.readouterr()
    assert f"{rules}:2:3: error: `use" in captured.out + captured.err
    assert not _imported(helper_dir)


def test_api_refuses_use_and_imports_nothing(helper_dir: Path, files: tuple[Path, Path]) -> None:
    rules, model = files
    with pytest.raises(rewriter.RuleError) as info:
        rewriter.load_rules(rules)
    assert info.value.first_line.startswith(f"{rules}:2:3: error: `use")
    with pytest.raises(rewriter.RuleError):
        rewriter.rewrite(model, [rules])
    assert not _imported(helper_dir)


def test_allow_python_imports_the_module_and_calls_its_helper(
    helper_dir: Path, files: tuple[Path, Path], tmp_path: Path
) -> None:
    rules, model = files
    out = tmp_path / "out.onnx"
    assert not _imported(helper_dir)
    assert main([str(model), "--rules", str(rules), "-o", str(out), "--allow-python"]) == 0
    assert _imported(helper_dir)
    assert (helper_dir / f"{MODULE}.imported").read_text() == "imported\n"
    assert sys.modules[MODULE].CALLS == [2]
    assert [n.op_type for n in onnx.load(out).graph.node] == ["Relu"]
