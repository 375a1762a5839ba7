"""`rewrite --quantize`: sample files and options that cannot work get one clear line, exit 2."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from rewriter.cli import main
from tests.quantize_models import cnn_bn


@pytest.fixture
def model(tmp_path: Path) -> Path:
    path = tmp_path / "cnn.onnx"
    onnx.save(cnn_bn(), path)
    return path


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    code = main([*args, "--no-speed-check", "--no-progress"])
    error = capsys.readouterr().err
    assert "Traceback" not in error, error
    assert "internal error" not in error, error
    return code, error


def test_a_npy_file_is_named_as_not_an_npz(model, tmp_path, capsys):
    array = tmp_path / "x.npy"
    np.save(array, np.zeros((2, 3, 16, 16), dtype=np.float32))
    out = tmp_path / "out.onnx"
    args = [str(model), "--quantize", "int8", "--calibration", str(array), "-o", str(out)]
    code, error = _run(capsys, *args)
    assert code == 2
    assert f"--calibration {array}: not an .npz file" in error
    assert not out.exists()


@pytest.mark.parametrize(
    ("values", "message"),
    [
        (np.zeros((0, 2, 3, 16, 16), dtype=np.float32), "the arrays stack no sample"),
        (np.full((2, 3, 16, 16), np.nan, dtype=np.float32), "holds NaN or infinite values"),
    ],
)
def test_calibration_samples_that_calibrate_nothing_are_refused(
    model, tmp_path, capsys, values, message
):
    samples = tmp_path / "s.npz"
    np.savez(samples, x=values)
    out = tmp_path / "out.onnx"
    args = [str(model), "--quantize", "int8", "--calibration", str(samples), "-o", str(out)]
    code, error = _run(capsys, *args)
    assert code == 2
    assert f"--calibration {samples}: " in error
    assert message in error
    assert not out.exists()


def test_calibration_values_near_float32s_largest_do_not_break_the_statistics(
    model, tmp_path, capsys
):
    samples = tmp_path / "s.npz"
    np.savez(samples, x=np.full((2, 3, 16, 16), 3e38, dtype=np.float32))
    out = tmp_path / "out.onnx"
    args = [str(model), "--quantize", "int8", "--calibration", str(samples), "-o", str(out)]
    code, _ = _run(capsys, *args)
    assert code == 0
    assert out.exists()


@pytest.mark.parametrize("value", ["150", "0", "nan"])
def test_a_percentile_out_of_range_is_an_option_error(model, tmp_path, capsys, value):
    samples = tmp_path / "s.npz"
    np.savez(samples, x=np.zeros((2, 3, 16, 16), dtype=np.float32))
    args = [str(model), "--quantize", "int8", "--calibration", str(samples)]
    out = str(tmp_path / "out.onnx")
    assert main([*args, "--calibration-percentile", value, "-o", out]) == 2
    error = capsys.readouterr().err
    assert (
        f"argument --calibration-percentile: expected a percentile in (0, 100], got '{value}'"
        in error
    )


def test_int4_refuses_a_target_opset_its_types_do_not_exist_at(tmp_path, capsys):
    weight = numpy_helper.from_array(np.ones((64, 32), dtype=np.float32), "w")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"])],
        "mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 32])],
        [weight],
    )
    path = tmp_path / "mlp13.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)
    out = tmp_path / "out.onnx"
    code, error = _run(
        capsys, str(path), "--quantize", "int4", "--target-opset", "17", "-o", str(out)
    )
    assert code == 2
    assert "--target-opset 17: lower than opset 21, which the int4 preset writes" in error
    assert not out.exists()
    # int8's least opset (14, for fused HardSwish) is no requirement: opset 13 quantizes.
    code, _ = _run(capsys, str(path), "--quantize", "int8", "--target-opset", "13", "-o", str(out))
    assert code == 0


def test_side_files_and_the_output_never_replace_the_samples_read(model, tmp_path, capsys):
    samples = tmp_path / "s.npz"
    np.savez(samples, x=np.random.default_rng(0).standard_normal((2, 3, 16, 16)).astype("f"))
    before = samples.read_bytes()
    out = tmp_path / "out.onnx"
    base = [str(model), "--quantize", "int8", "--calibration", str(samples), "--force"]
    code, error = _run(capsys, *base, "-o", str(out), "--json", str(samples))
    assert code == 2
    assert f"--json {samples} would overwrite the --calibration file {samples}" in error
    code, error = _run(capsys, *base, "-o", str(samples))
    assert code == 2
    assert f"would overwrite the --calibration file {samples}" in error
    accept = [str(model), "--quantize", "int8", "--accept", "snr>=10", "--inputs", str(samples)]
    code, error = _run(capsys, *accept, "-o", str(out), "--report", str(samples), "--force")
    assert code == 2
    assert f"--report {samples} would overwrite the --inputs file {samples}" in error
    assert samples.read_bytes() == before


def test_calibration_samples_of_the_wrong_size_say_which_dims(model, tmp_path, capsys):
    samples = tmp_path / "s.npz"
    np.savez(samples, x=np.zeros((2, 3, 8, 16), dtype=np.float32))
    out = tmp_path / "out.onnx"
    args = [str(model), "--quantize", "int8", "--calibration", str(samples), "-o", str(out)]
    code, error = _run(capsys, *args)
    assert code == 2
    # onnxruntime's detail, which it writes on a line of its own.
    assert "index: 2 Got: 8 Expected: 16" in error
