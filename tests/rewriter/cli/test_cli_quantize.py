"""`rewrite --calibration`: samples reach the quantization rules; bad samples are clear errors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import helper, numpy_helper

import rewriter
from rewriter.cli import main
from rewriter.verification import measure

STATIC = str(rewriter.library_path() / "quantize" / "int8_static.rw")
DYNAMIC = str(rewriter.library_path() / "quantize" / "int8_dynamic.rw")


@pytest.fixture
def model_path(tmp_path: Path) -> Path:
    rng = np.random.default_rng(0)
    w = (rng.standard_normal((32, 16)) / 6).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["batch", 32])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, ["batch", 16])],
        [numpy_helper.from_array(w, "w")],
    )
    path = tmp_path / "model.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)]), path)
    return path


def _run(path: Path, x: np.ndarray) -> list[np.ndarray]:
    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"x": x})


def test_static_rules_fire_with_calibration_and_meet_their_bound(
    model_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    samples = tmp_path / "samples"
    samples.mkdir()
    for index in range(2):  # a folder of .npz files, each with 4 stacked samples
        x = np.random.default_rng(index).standard_normal((4, 8, 32)).astype(np.float32)
        np.savez(samples / f"part{index}.npz", x=x)
    out = tmp_path / "out.onnx"
    code = main(
        [
            str(model_path),
            "--rules",
            STATIC,
            "--calibration",
            str(samples),
            "-o",
            str(out),
            "--calibration-method",
            "percentile",
            "--no-progress",
        ]
    )
    assert code == 0
    assert "quantized 1 MatMul" in capsys.readouterr().out
    ops = [n.op_type for n in onnx.load(out).graph.node]
    assert ops == ["QuantizeLinear", "DequantizeLinear", "DequantizeLinear", "MatMul"]
    x = np.random.default_rng(5).standard_normal((8, 32)).astype(np.float32)
    assert measure("snr", _run(model_path, x), _run(out, x)) >= 15


def test_without_calibration_the_static_rules_do_not_fire(
    model_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out.onnx"
    assert main([str(model_path), "--rules", STATIC, "-o", str(out), "--no-progress"]) == 0
    assert [n.op_type for n in onnx.load(out).graph.node] == ["MatMul"]


def test_dynamic_rules_need_no_calibration(
    model_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out.onnx"
    assert main([str(model_path), "--rules", DYNAMIC, "-o", str(out), "--no-progress"]) == 0
    assert "MatMulInteger" in [n.op_type for n in onnx.load(out).graph.node]


@pytest.mark.parametrize(
    ("arrays", "message"),
    [
        ({"z": np.zeros((2, 32), np.float32)}, "no array for input(s) 'x'"),
        ({"x": np.zeros((2, 3, 4, 32), np.float32)}, "input `x` has rank 2, the array has 4 dims"),
    ],
)
def test_samples_that_do_not_fit_are_clear_errors(
    model_path: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    arrays: dict[str, np.ndarray],
    message: str,
) -> None:
    samples = tmp_path / "bad.npz"
    np.savez(samples, **arrays)
    out = tmp_path / "out.onnx"
    code = main([str(model_path), "--rules", STATIC, "--calibration", str(samples), "-o", str(out)])
    assert code == 2
    error = capsys.readouterr().err
    assert f"--calibration {samples}: " in error
    assert message in error
    assert "Traceback" not in error
    assert not out.exists()


def test_missing_calibration_file_and_empty_folder(
    model_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = str(tmp_path / "out.onnx")
    missing = tmp_path / "missing.npz"
    assert main([str(model_path), "--rules", STATIC, "--calibration", str(missing), "-o", out]) == 2
    assert f"--calibration {missing}: no such file" in capsys.readouterr().err
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main([str(model_path), "--rules", STATIC, "--calibration", str(empty), "-o", out]) == 2
    assert "the folder holds no .npz file" in capsys.readouterr().err
