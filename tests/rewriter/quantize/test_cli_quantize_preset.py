"""`rewrite MODEL --quantize ...`: the preset on the command line, its options and its output."""

from __future__ import annotations

import numpy as np
import onnx
import pytest

from rewriter.cli import main
from tests.quantize_models import cnn_bn


@pytest.fixture
def model(tmp_path):
    path = tmp_path / "cnn.onnx"
    onnx.save(cnn_bn(), path)
    return path


def test_quantize_int8_with_calibration_writes_the_model_and_says_how_fast(model, tmp_path, capsys):
    samples = tmp_path / "calibration.npz"
    rng = np.random.default_rng(0)
    np.savez(samples, x=rng.standard_normal((3, 2, 3, 16, 16)).astype(np.float32))
    out = tmp_path / "cnn.int8.onnx"
    code = main([str(model), "--quantize", "int8", "--calibration", str(samples), "-o", str(out)])
    assert code == 0
    printed = capsys.readouterr().out
    assert out.exists()
    speed = next(line for line in printed.splitlines() if line.startswith("speed: "))
    assert "the float model's latency" in speed
    assert "onnxruntime CPU, ORT_ENABLE_ALL, all threads" in speed
    # Not a terminal: the speed check's progress comes as lines.
    assert "rewrite: speed check: group 1/" in printed


def test_the_speed_check_times_one_of_stacked_budget_inputs(model, tmp_path, capsys):
    # --inputs files may stack several samples along a new first axis: the speed check
    # (without calibration samples it times the budget's) takes one of them, not the stack.
    samples = tmp_path / "inputs.npz"
    rng = np.random.default_rng(1)
    np.savez(samples, x=rng.standard_normal((4, 2, 3, 16, 16)).astype(np.float32))
    out = tmp_path / "cnn.int8.onnx"
    args = [str(model), "--quantize", "int8", "--accept", "snr>=10", "--inputs", str(samples)]
    code = main([*args, "--examples", "2", "--jobs", "1", "-o", str(out)])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "Invalid rank" not in captured.err
    assert any(line.startswith("speed: ") for line in captured.out.splitlines())


def test_budget_progress_lines_when_stdout_is_not_a_terminal(model, tmp_path, capsys):
    out = tmp_path / "cnn.int8.onnx"
    args = [str(model), "--quantize", "int8", "--no-speed-check", "--accept", "snr>=10"]
    code = main([*args, "--examples", "4", "--jobs", "1", "-o", str(out)])
    assert code == 0
    printed = capsys.readouterr().out
    line = next(line for line in printed.splitlines() if "measured" in line)
    assert line.startswith("rewrite: sensitivity of ")
    assert " s" in line


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--no-speed-check"], "--no-speed-check applies to --quantize"),
        (["--speed-threads", "1"], "--speed-threads applies to --quantize (the speed check)"),
        (
            ["--quantize", "int8", "--no-speed-check", "--speed-level", "basic"],
            "--speed-level and --no-speed-check contradict each other",
        ),
    ],
)
def test_speed_options_that_cannot_apply_are_errors(model, tmp_path, capsys, extra, message):
    code = main([str(model), "-o", str(tmp_path / "out.onnx"), *extra])
    assert code == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "out.onnx").exists()
