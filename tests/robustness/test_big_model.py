"""A model with more than 2 GB of weights in external data, rewritten end to end (slow).

The shipped library fuses the four big MatMul + Add layers into Gemm from shapes alone and
folds the BatchNormalization into the Conv, reading only the small tensors it needs. Saved
beside the original, the output keeps its references to `weights.bin`; saved elsewhere, the
weights are streamed into `out.onnx.data`. Both outputs verify against the original with
onnxruntime, which loads the >2 GB models from their paths. Peak memory is measured by
`benchmarks/big_model.py` in a fresh process.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import onnx
import pytest

import ir
from rewriter.cli import main
from tests.robustness.big_model import BigModel, build_big_model

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def big(tmp_path_factory: pytest.TempPathFactory) -> BigModel:
    model = build_big_model(tmp_path_factory.mktemp("big") / "model")
    assert model.weight_bytes > 2**31
    return model


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Names of the external tensors whose bytes the IR maps or decodes."""
    seen: list[str] = []

    def recording(method: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(self: ir.ExternalTensor) -> Any:
            seen.append(self.name)
            return method(self)

        return wrapper

    monkeypatch.setattr(ir.ExternalTensor, "numpy", recording(ir.ExternalTensor.numpy))
    monkeypatch.setattr(ir.ExternalTensor, "raw_view", recording(ir.ExternalTensor.raw_view))
    return seen


def _locations(path: Path) -> dict[str, str]:
    model = onnx.load(path, load_external_data=False)
    return {
        t.name: {e.key: e.value for e in t.external_data}.get("location", "(embedded)")
        for t in model.graph.initializer
    }


def test_rewrite_beside_the_original_keeps_references_and_verifies(
    big: BigModel, reads: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    out = big.path.parent / "out.onnx"
    args = [str(big.path), "-o", str(out), "--no-progress", "--verify", "--examples", "3"]
    assert main(args) == 0, capsys.readouterr().err
    text = capsys.readouterr().out
    assert "equivalent" in text
    assert "14 -> 9 nodes: fused 4 Gemm; folded 1 BatchNormalization;" in text
    # Only the small tensors the BatchNormalization fold needs were read.
    assert not set(reads) & set(big.big), reads
    assert {"conv_w", "bn_scale", "bn_var"} <= set(reads)
    saved = onnx.load(out, load_external_data=False)
    ops = [n.op_type for n in saved.graph.node]
    assert ops.count("Gemm") == 4
    assert "BatchNormalization" not in ops
    locations = _locations(out)
    assert {locations[name] for name in big.big} == {"weights.bin"}
    assert sorted(p.name for p in big.path.parent.iterdir()) == [
        "model.onnx",
        "out.onnx",
        "out.onnx.data",  # the folded Conv weight and bias (new tensors)
        "weights.bin",
    ]
    assert (big.path.parent / "out.onnx.data").stat().st_size < 1 << 20
    assert main(["verify", str(big.path), str(out), "--examples", "3"]) == 0


def test_rewrite_into_another_folder_streams_the_weights(
    big: BigModel, tmp_path: Path, reads: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "elsewhere" / "out.onnx"
    out.parent.mkdir()
    assert main([str(big.path), "-o", str(out), "--no-progress"]) == 0, capsys.readouterr().err
    assert not set(reads) & set(big.big), reads
    assert sorted(p.name for p in out.parent.iterdir()) == ["out.onnx", "out.onnx.data"]
    assert (out.parent / "out.onnx.data").stat().st_size >= big.weight_bytes
    locations = _locations(out)
    kept = [*big.big, "b0", "b1", "b2", "b3"]  # external before and still in the model
    assert {locations[name] for name in kept} == {"out.onnx.data"}
    assert main(["verify", str(big.path), str(out), "--examples", "3"]) == 0
    assert "equivalent" in capsys.readouterr().out
