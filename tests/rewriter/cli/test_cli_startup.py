"""Start-up: `--help`, `--version` and usage errors answer without loading onnx, numpy or ORT.

Each case runs `python -X importtime -m rewriter ...` in a fresh interpreter and reads the
modules it imported from the import-time log (the log names every module imported, by its
full dotted name).
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from rewriter.cli._main import SUBCOMMANDS

HEAVY = ("onnx", "numpy", "onnxruntime", "ml_dtypes")


def _imported(args: list[str]) -> tuple[set[str], subprocess.CompletedProcess[str]]:
    completed = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "rewriter", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    modules = set()
    for line in completed.stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            modules.add(line.rsplit("|", 1)[1].strip())
    return modules, completed


def _heavy(modules: set[str]) -> list[str]:
    return sorted(m for m in modules if m.split(".")[0] in HEAVY)


@pytest.mark.parametrize(
    "args",
    [
        ["--help"],
        ["--version"],
        *([name, "--help"] for name in SUBCOMMANDS),
        [],  # the model is missing: a usage error
        ["model.onnx", "--max-rewrites", "many"],
        ["verify", "a.onnx"],
        ["graft", "a.onnx", "b.onnx"],
        ["check-rules", "--no-such-option", "x.rw"],
    ],
    ids=lambda args: " ".join(args) or "no arguments",
)
def test_help_version_and_usage_errors_import_no_onnx_numpy_or_onnxruntime(args):
    modules, completed = _imported(args)
    assert completed.returncode in (0, 2), completed.stderr[-2000:]
    assert "rewriter.cli._main" in modules  # the log was read
    assert _heavy(modules) == []


def test_the_version_names_the_package_and_its_runtimes():
    _, completed = _imported(["--version"])
    assert completed.returncode == 0
    assert completed.stdout.startswith("rewrite 0.")
    assert "(onnx " in completed.stdout
    assert "onnxruntime " in completed.stdout


def test_a_usage_error_is_one_line_naming_the_missing_argument():
    _, completed = _imported(["split", "m.onnx"])
    assert completed.returncode == 2
    last = completed.stderr.strip().splitlines()[-1]
    assert (
        last == "rewrite split: error: the following arguments are required: --stages, -o/--output"
    )


def test_a_command_that_runs_loads_onnx_so_the_log_would_show_it(tmp_path):
    rules = tmp_path / "r.rw"
    rules.write_text("rule r: y = Relu (x) => y = x\n")
    modules, completed = _imported(["lint", str(rules)])
    assert completed.returncode == 0, completed.stderr[-2000:]
    assert "onnx" in _heavy(modules)
