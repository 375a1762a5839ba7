"""Errors below the command line speak the API's language; the command line adds its flags.

A library caller never typed `--input-shape`: an error raised under `rewriter/` (outside
`rewriter/cli`) or `ir/` names options as the API does (`OptionError`: `input_shapes['x']`),
and the command line reports the same error with its flag (`--input-shape x`).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import onnx
import pytest

import rewriter
from rewriter._errors import AdvisedError, OptionError, describe_error
from rewriter.cli import main
from rewriter.cli._flags import FLAGS

ROOT = Path(__file__).resolve().parents[1]
MODEL = ROOT / "tests" / "models" / "bert_ts14.onnx"
# A command-line flag inside a message: `--dim`, `--input-shape` (not `a--b`, not CSS `--x:`).
FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")


def _callee(node: ast.Call) -> str:
    func = node.func
    if isinstance(func, ast.Name):
        return func.id
    return func.attr if isinstance(func, ast.Attribute) else ""


def _is_error(node: ast.AST) -> bool:
    """A raise, or the making of an error or a diagnostic (raised later)."""
    if isinstance(node, ast.Raise):
        return node.exc is not None
    if isinstance(node, ast.Call):
        name = _callee(node)
        return name.endswith(("Error", "Exception")) or name in ("Diagnostic", "error")
    return False


def flags_in_errors(path: Path) -> list[str]:
    """`file:line: --flag` for every flag an error made in `path` names."""
    shown = path.relative_to(ROOT) if ROOT in path.parents else path.name
    found: dict[str, None] = {}  # a raise of a made error is one finding, not two
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not _is_error(node):
            continue
        for part in ast.walk(node):
            if isinstance(part, ast.Constant) and isinstance(part.value, str):
                for flag in FLAG.findall(part.value):
                    found[f"{shown}:{part.lineno}: {flag}"] = None
    return list(found)


def _library_modules() -> list[Path]:
    cli = ROOT / "rewriter" / "cli"
    paths = [*(ROOT / "rewriter").rglob("*.py"), *(ROOT / "ir").rglob("*.py")]
    return sorted(p for p in paths if cli not in p.parents)


def test_no_error_below_the_command_line_names_a_flag() -> None:
    found = [problem for path in _library_modules() for problem in flags_in_errors(path)]
    assert found == []


def test_the_check_finds_a_flag_in_a_raise_and_in_an_error_made_for_later(tmp_path: Path) -> None:
    planted = tmp_path / "planted.py"
    planted.write_text(
        "def f(x):\n"
        "    if x:\n"
        "        raise ValueError(f'--dim {x}: bad')\n"
        "    usage = OptionError('dims', 'see --input-shape')\n"
        "    raise usage\n",
        encoding="utf-8",
    )
    assert flags_in_errors(planted) == ["planted.py:3: --dim", "planted.py:4: --input-shape"]


def test_an_option_error_reads_in_api_terms_and_in_the_command_lines() -> None:
    error = OptionError("dims", "a size is at least 1", key="batch", value="0")
    assert str(error) == "dims['batch']=0: a size is at least 1"
    assert describe_error(error, FLAGS) == ("--dim batch=0: a size is at least 1", 2)
    bare = OptionError("stages", "the model has 3 nodes", value="5")
    assert str(bare) == "stages=5: the model has 3 nodes"
    assert describe_error(bare, FLAGS)[0] == "--stages 5: the model has 3 nodes"


def test_advice_names_the_flags_on_the_command_line_only() -> None:
    error = AdvisedError("give real samples", ("samples", "shapes"))
    assert str(error) == "give real samples"
    assert describe_error(error, FLAGS)[0] == "give real samples (--inputs, --input-shape)"


def test_a_bad_input_shape_from_the_api_and_from_the_command_line(tmp_path, capsys) -> None:
    options = rewriter.RewriteOptions(input_shapes={"nosuch": (1, 2)})
    with pytest.raises(OptionError) as raised:
        rewriter.rewrite(onnx.load(str(MODEL)), None, options)
    assert str(raised.value).startswith("input_shapes['nosuch']: no graph input of that name")
    code = main([str(MODEL), "-o", str(tmp_path / "out.onnx"), "--input-shape", "nosuch=1x2"])
    assert code == 2
    err = capsys.readouterr().err
    assert err.startswith("rewrite: error: --input-shape nosuch: no graph input of that name")
    assert not (tmp_path / "out.onnx").exists()
